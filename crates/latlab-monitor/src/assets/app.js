// latlab monitor dashboard: plain JavaScript, SVG drawn here, data from /api/*.
'use strict';

const SVG = 'http://www.w3.org/2000/svg';
const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2',
  '#17becf', '#7f7f7f', '#bcbd22'];
const STATE_COLORS = ['#c6dbef', '#9ecae1', '#6baed6', '#4292c6', '#2171b5', '#08519c',
  '#08306b', '#3f007d'];
// Charts are drawn at the width they are shown at, so text keeps its size on a phone.
function widthOf(c) { return Math.max(320, Math.round(c.clientWidth || 1000)); }
const PAD = { l: 56, r: 10, t: 8, b: 22 };

const st = {
  series: null,
  seriesList: [],
  span: 21600000,
  custom: null,
  data: null,
  status: null,
  timer: null,
  range: null,
};

function $(id) { return document.getElementById(id); }

function recordError(msg) {
  const prev = document.body.dataset.errors || '';
  document.body.dataset.errors = prev + msg + '\n';
  const e = $('errors');
  e.hidden = false;
  e.textContent = document.body.dataset.errors;
}
window.addEventListener('error', (e) => recordError('error: ' + e.message));
window.addEventListener('unhandledrejection', (e) => recordError('error: ' + String(e.reason)));

async function getJSON(url) {
  const r = await fetch(url, { cache: 'no-store' });
  if (!r.ok) {
    let detail = '';
    try { detail = (await r.json()).error || ''; } catch (_) { detail = ''; }
    throw new Error(url + ': HTTP ' + r.status + (detail ? ' ' + detail : ''));
  }
  return r.json();
}

function el(tag, attrs, text) {
  const e = document.createElement(tag);
  if (attrs) for (const k of Object.keys(attrs)) e.setAttribute(k, attrs[k]);
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}

function svgEl(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  if (attrs) for (const k of Object.keys(attrs)) e.setAttribute(k, String(attrs[k]));
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}

// A note across an empty chart, centred on (cx, cy) and broken into lines that fit `width`
// (its 13 px font is about 7 px a character): on a phone a long one ran past both edges.
function emptyNote(svg, cx, cy, width, text) {
  const per = Math.max(12, Math.floor(width / 7));
  const lines = [];
  for (const word of text.split(' ')) {
    const n = lines.length - 1;
    if (n >= 0 && (lines[n] + ' ' + word).length <= per) lines[n] += ' ' + word;
    else lines.push(word);
  }
  const t = svgEl('text', { class: 'empty', x: cx, y: cy - (lines.length - 1) * 8, 'text-anchor': 'middle' });
  lines.forEach((l, i) => t.appendChild(svgEl('tspan', { x: cx, dy: i ? 16 : 0 }, l)));
  svg.appendChild(t);
}

function us(ns) {
  if (ns === null || ns === undefined) return '–';
  const v = ns / 1000;
  return v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2);
}

function pad2(n) { return String(n).padStart(2, '0'); }

function fmtTime(ms, withDate) {
  const d = new Date(ms);
  const t = pad2(d.getHours()) + ':' + pad2(d.getMinutes());
  if (!withDate) return t;
  return d.getFullYear() + '-' + pad2(d.getMonth() + 1) + '-' + pad2(d.getDate()) + ' ' + t;
}

function fmtFull(ms) {
  const d = new Date(ms);
  return fmtTime(ms, true) + ':' + pad2(d.getSeconds());
}

// The browser's time zone, which every time on the page is in: `UTC+01:00`.
function zoneName() {
  const off = -new Date().getTimezoneOffset();
  const a = Math.abs(off);
  return 'UTC' + (off < 0 ? '-' : '+') + pad2(Math.floor(a / 60)) + ':' + pad2(a % 60);
}

function toLocalInput(ms) {
  const d = new Date(ms);
  return d.getFullYear() + '-' + pad2(d.getMonth() + 1) + '-' + pad2(d.getDate()) + 'T' +
    pad2(d.getHours()) + ':' + pad2(d.getMinutes()) + ':' + pad2(d.getSeconds());
}

function cpuColor(i) { return COLORS[i % COLORS.length]; }

// ---- charts ----

// Time-axis ticks for [from, to] on `width` pixels, at most about one per 110 px: round
// seconds to weeks, then calendar months (1, 2, 3, 6 or 12 at a time) past that. Each tick
// comes with its label.
function timeTicks(from, to, width) {
  const span = to - from;
  const most = Math.max(3, Math.min(8, Math.floor(width / 110)));
  const steps = [1e3, 5e3, 15e3, 6e4, 3e5, 9e5, 36e5, 108e5, 216e5, 864e5, 6048e5];
  const step = steps.find((s) => span / s <= most);
  if (step === undefined) {
    const months = span / (30.44 * 864e5);
    const k = [1, 2, 3, 6, 12].find((m) => months / m <= most) || Math.ceil(months / most / 12) * 12;
    const d = new Date(from);
    let y = d.getFullYear(), m = d.getMonth() + 1;
    while (m % k) m++;
    const ticks = [];
    for (let t = new Date(y, m, 1); t.getTime() <= to; t = new Date(t.getFullYear(), t.getMonth() + k, 1)) ticks.push(t.getTime());
    return { ticks: ticks, label: (t) => fmtTime(t, true).slice(0, k >= 12 ? 4 : 7) };
  }
  const tz = new Date(from).getTimezoneOffset() * 60000;
  const first = Math.ceil((from - tz) / step) * step + tz;
  const ticks = [];
  for (let t = first; t <= to; t += step) ticks.push(t);
  const withDate = span > 864e5 * 1.5;
  return { ticks: ticks, label: (t) => step < 6e4 ? fmtFull(t).slice(11) : fmtTime(t, withDate) };
}

// Where a time label at `x` hangs: inside the plot at its edges, so the picture does not cut it.
function tickAnchor(x, x0, x1) { return x > x1 - 30 ? 'end' : x < x0 + 30 ? 'start' : 'middle'; }

// A round step (1, 2 or 5 × 10^k) that cuts 0..max into at most n intervals.
function niceStep(max, n) {
  const raw = (max > 0 ? max : 1) / n;
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 5]) { if (m * p >= raw * 0.9999) return m * p; }
  return 10 * p;
}

// A tick's label: as many decimals as its step has, never more.
function tickLabel(v, step) {
  const digits = step >= 1 ? 0 : Math.min(6, Math.ceil(-Math.log10(step) - 1e-9));
  return v.toFixed(digits);
}

// A time chart: lines (with gaps), optional log y, annotations, click handler.
function timeChart(container, opt) {
  container.textContent = '';
  const W = widthOf(container);
  const H = opt.height || 220;
  const svg = svgEl('svg', { viewBox: '0 0 ' + W + ' ' + H, role: 'img', 'aria-label': opt.label || 'chart' });
  const x0 = PAD.l, x1 = W - PAD.r, y0 = PAD.t, y1 = H - PAD.b;
  const from = opt.from, to = opt.to;
  const xs = (t) => x0 + (t - from) / Math.max(1, to - from) * (x1 - x0);
  let vals = [];
  for (const s of opt.lines) for (const p of s.points) if (p && p[1] !== null && isFinite(p[1])) vals.push(p[1]);
  let lo, hi, ys;
  let step = 0;
  if (opt.log) {
    const pos = vals.filter((v) => v > 0);
    lo = pos.length ? Math.pow(10, Math.floor(Math.log10(Math.min(...pos)))) : 1;
    hi = pos.length ? Math.pow(10, Math.ceil(Math.log10(Math.max(...pos)))) : 10;
    if (hi <= lo) hi = lo * 10;
    ys = (v) => y1 - (Math.log10(Math.max(v, lo)) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo)) * (y1 - y0);
  } else {
    // Round ticks: 0, 500, 1000 … rather than quarters of the largest value.
    const top = opt.yMax || (vals.length ? Math.max(...vals) : 1);
    lo = 0;
    step = niceStep(top, 5);
    hi = opt.yMax || step * Math.max(1, Math.ceil(top / step - 1e-9));
    ys = (v) => y1 - (v - lo) / (hi - lo) * (y1 - y0);
  }
  // Shaded behind everything: the spans nothing was measured in.
  for (const [a, b] of opt.gaps || []) {
    if (b <= from || a >= to) continue;
    const xa = xs(Math.max(a, from)), xb = xs(Math.min(b, to));
    const gap = svgEl('rect', { class: 'gap', x: xa.toFixed(1), y: y0, width: Math.max(1, xb - xa).toFixed(1), height: y1 - y0, fill: GAP_FILL });
    gap.appendChild(svgEl('title', null, 'not measured: ' + fmtFull(a) + ' to ' + fmtFull(b)));
    svg.appendChild(gap);
  }
  // grid and y labels
  const yt = [];
  if (opt.log) { for (let v = lo; v <= hi * 1.0001; v *= 10) yt.push(v); } else { for (let i = 0; lo + step * i <= hi * 1.0001; i++) yt.push(lo + step * i); }
  // Nothing to plot: no scale either (a 0 to 1 axis would read as values).
  for (const v of vals.length ? yt : []) {
    const y = ys(v);
    svg.appendChild(svgEl('line', { class: 'grid', x1: x0, x2: x1, y1: y, y2: y }));
    // A log axis holds latencies in µs: its decades read as µs, ms and s.
    const label = opt.log ? (v >= 1e6 ? (v / 1e6) + ' s' : v >= 1000 ? (v / 1000) + ' ms' : v + ' µs') : tickLabel(v, step);
    svg.appendChild(svgEl('text', { class: 'ytick', x: x0 - 4, y: y + 4, 'text-anchor': 'end' }, label));
  }
  const tt = timeTicks(from, to, W);
  for (const t of tt.ticks) {
    const x = xs(t);
    svg.appendChild(svgEl('line', { class: 'grid', x1: x, x2: x, y1: y0, y2: y1 }));
    svg.appendChild(svgEl('text', { class: 'xtick', x: x, y: H - 6, 'text-anchor': tickAnchor(x, x0, x1) }, tt.label(t)));
  }
  svg.appendChild(svgEl('line', { class: 'axis', x1: x0, x2: x1, y1: y1, y2: y1 }));
  svg.appendChild(svgEl('line', { class: 'axis', x1: x0, x2: x0, y1: y0, y2: y1 }));
  drawAnnotations(svg, opt.annotations || [], xs, y0, y1, from, to);
  let drawn = 0;
  for (const s of opt.lines) {
    let d = '';
    let prev = null;
    // The points of the piece being drawn: a piece of one point (a window between two gaps)
    // has no line to show it, so it gets a dot.
    let piece = [];
    const dots = [];
    const endPiece = () => { if (piece.length === 1) dots.push(piece[0]); piece = []; };
    s.points.forEach((p, i) => {
      if (!p || p[1] === null || !isFinite(p[1]) || (opt.log && p[1] <= 0)) { prev = null; endPiece(); return; }
      const x = xs(p[0]).toFixed(1), y = ys(p[1]).toFixed(1);
      // A point whose row does not follow the one before (the daemon was not running) starts anew.
      const gap = prev !== null && opt.breaks && opt.breaks.has(i);
      if (prev === null || gap) endPiece();
      d += (prev === null || gap ? 'M' : 'L') + x + ' ' + y + ' ';
      piece.push([x, y]);
      prev = p[0];
    });
    endPiece();
    if (!d) continue;
    drawn++;
    const attrs = { class: 'series' + (s.dashed ? ' dashed' : ''), d: d.trim(), stroke: s.color };
    if (s.cpu !== undefined) attrs['data-cpu'] = s.cpu;
    if (s.kind) attrs['data-kind'] = s.kind;
    svg.appendChild(svgEl('path', attrs));
    for (const [x, y] of dots) {
      const dot = { class: 'series-dot', cx: x, cy: y, r: s.dashed ? 1.8 : 2.5, fill: s.color };
      if (s.cpu !== undefined) dot['data-cpu'] = s.cpu;
      if (s.kind) dot['data-kind'] = s.kind;
      svg.appendChild(svgEl('circle', dot));
    }
  }
  if (!drawn) emptyNote(svg, (x0 + x1) / 2, (y0 + y1) / 2, x1 - x0, opt.empty || 'no data in this range');
  if (opt.onClick) {
    const hit = svgEl('rect', { class: 'hit', x: x0, y: y0, width: x1 - x0, height: y1 - y0 });
    hit.addEventListener('click', (ev) => {
      const r = svg.getBoundingClientRect();
      const sx = (ev.clientX - r.left) / r.width * W;
      const sy = (ev.clientY - r.top) / r.height * H;
      const t = from + (sx - x0) / (x1 - x0) * (to - from);
      opt.onClick(t, sy, ys);
    });
    svg.appendChild(hit);
  }
  container.appendChild(svg);
  return svg;
}

function drawAnnotations(svg, anns, xs, y0, y1, from, to) {
  for (const a of anns) {
    if (a.t < from || a.t > to) continue;
    const x = xs(a.t);
    const line = svgEl('line', { class: 'ann ann-' + a.kind, x1: x, x2: x, y1: y0, y2: y1 });
    line.appendChild(svgEl('title', null, fmtFull(a.t) + ' ' + a.text));
    svg.appendChild(line);
  }
}

function legend(container, items) {
  container.textContent = '';
  for (const it of items) {
    const span = el('span', { class: 'legend-item' });
    if (!it.color && !it.fill) { span.classList.add('note'); span.textContent = it.label; container.appendChild(span); continue; }
    if (it.cpu !== undefined) span.setAttribute('data-cpu', it.cpu);
    const sw = svgEl('svg', { viewBox: '0 0 18 10' });
    if (it.fill) sw.appendChild(svgEl('rect', { x: 0.5, y: 0.5, width: 17, height: 9, fill: it.fill, stroke: '#bbbbbb' }));
    else sw.appendChild(svgEl('line', { x1: 0, x2: 18, y1: 5, y2: 5, stroke: it.color, 'stroke-width': 2, 'stroke-dasharray': it.dashed ? '4 3' : '' }));
    span.appendChild(sw);
    span.appendChild(document.createTextNode(it.label));
    container.appendChild(span);
  }
}

// ---- panels ----

function rowsOf(data) { return data ? data.rows : []; }

// The indexes of the rows that do not start where the row before ended: lines break there.
function breaksOf(data) {
  const out = new Set();
  const rows = rowsOf(data);
  for (let i = 1; i < rows.length; i++) {
    const prev = rows[i - 1];
    if (rows[i].t0 - prev.t1 > Math.max(1, (prev.t1 - prev.t0) / 100)) out.add(i);
  }
  return out;
}

const GAP_FILL = '#ebebe3';

// The spans between rows that do not follow one another: nothing was measured there (the
// daemon was not running, or a CPU was away on all of them).
function gapsOf(data) {
  const rows = rowsOf(data);
  return [...breaksOf(data)].map((i) => [rows[i - 1].t1, rows[i].t0]);
}

// Past this many CPUs the line charts draw only the worst ones; the heat map shows them all.
const LINE_CPUS = 8;

// Every CPU with its highest maximum in the range and the window holding it, worst first.
function worstCpus(data) {
  const out = data.cpus.map((cpu) => {
    let max = -1, start = null;
    for (const r of data.rows) {
      const c = r.cpu[cpu];
      if (c && c.max > max) { max = c.max; start = c.start; }
    }
    return { cpu: cpu, max: max, start: start };
  });
  return out.sort((a, b) => b.max - a.max || a.cpu - b.cpu);
}

// The CPUs the line charts draw: all of them when few, else the LINE_CPUS worst, in CPU order.
function lineCpus(data) {
  if (data.cpus.length <= LINE_CPUS) return data.cpus;
  return worstCpus(data).slice(0, LINE_CPUS).map((w) => w.cpu).sort((a, b) => a - b);
}

function subsetNote(data) {
  const n = lineCpus(data).length;
  return n < data.cpus.length ? { label: 'the ' + n + ' worst of ' + data.cpus.length + ' CPUs (all in the heat map)' } : null;
}

function drawLatency(data, from, to) {
  const lines = [];
  const items = [];
  lineCpus(data).forEach((cpu, i) => {
    const color = cpuColor(i);
    const mid = (r) => (r.t0 + r.t1) / 2;
    lines.push({ cpu: cpu, kind: 'max', color: color, points: rowsOf(data).map((r) => r.cpu[cpu] ? [mid(r), r.cpu[cpu].max / 1000] : null) });
    lines.push({ cpu: cpu, kind: 'p999', color: color, dashed: true, points: rowsOf(data).map((r) => r.cpu[cpu] ? [mid(r), r.cpu[cpu].p999 / 1000] : null) });
    items.push({ cpu: cpu, color: color, label: 'cpu' + cpu });
  });
  if (gapsOf(data).some(([a, b]) => b > from && a < to)) items.push({ fill: GAP_FILL, label: 'not measured' });
  const note = subsetNote(data);
  if (note) items.push(note);
  legend($('legend-latency'), items);
  timeChart($('chart-latency'), {
    from: from, to: to, log: true, height: 260, lines: lines, breaks: breaksOf(data), gaps: gapsOf(data), label: 'latency per window',
    annotations: data.annotations,
    onClick: (t, sy, ys) => {
      let best = null;
      for (const r of data.rows) {
        const d = t < r.t0 ? r.t0 - t : t > r.t1 ? t - r.t1 : 0;
        if (best === null || d < best.d) best = { d: d, r: r };
      }
      if (!best) return;
      let pick = null;
      for (const cpu of lineCpus(data)) {
        const c = best.r.cpu[cpu];
        if (!c) continue;
        const dy = Math.abs(ys(Math.max(c.max / 1000, 1e-3)) - sy);
        if (pick === null || dy < pick.dy) pick = { dy: dy, cpu: cpu, start: c.start };
      }
      if (pick) showWindow(pick.start, pick.cpu);
    },
  });
}

// Colour of a worst case on the heat map's log scale: pale yellow (lo) through orange and red to
// near black (hi).
const HEAT = [[255, 255, 204], [254, 217, 118], [253, 141, 60], [227, 26, 28], [128, 0, 38], [40, 0, 10]];
function heatColor(f) {
  const x = Math.min(1, Math.max(0, f)) * (HEAT.length - 1);
  const i = Math.min(HEAT.length - 2, Math.floor(x)), u = x - i;
  const c = HEAT[i].map((a, k) => Math.round(a + (HEAT[i + 1][k] - a) * u));
  return 'rgb(' + c.join(',') + ')';
}

function drawHeat(data, from, to) {
  const c = $('chart-heat');
  c.textContent = '';
  const W = widthOf(c);
  const n = data.cpus.length;
  const rowH = n <= 16 ? 14 : n <= 64 ? 7 : 3;
  const x0 = PAD.l, x1 = W - PAD.r, y0 = PAD.t;
  const H = y0 + Math.max(1, n) * rowH + PAD.b;
  const xs = (t) => x0 + (t - from) / Math.max(1, to - from) * (x1 - x0);
  const vals = [];
  for (const r of data.rows) for (const cpu of data.cpus) { const p = r.cpu[cpu]; if (p && p.max > 0) vals.push(p.max); }
  const lo = vals.length ? Math.min(...vals) : 1000, hi = vals.length ? Math.max(...vals) : 10000;
  const llo = Math.log10(lo), span = Math.max(1e-9, Math.log10(hi) - llo);
  const canvas = el('canvas', { role: 'img', 'aria-label': 'worst case per CPU and window' });
  const dpr = window.devicePixelRatio || 1;
  canvas.width = Math.round(W * dpr);
  canvas.height = Math.round(H * dpr);
  canvas.style.aspectRatio = W + ' / ' + H;
  const g = canvas.getContext('2d');
  g.scale(dpr, dpr);
  g.fillStyle = '#f4f4f0';
  g.fillRect(x0, y0, x1 - x0, n * rowH);
  let cells = 0;
  for (const r of data.rows) {
    const xa = xs(Math.max(r.t0, from)), xb = xs(Math.min(r.t1, to));
    const w = Math.max(1, xb - xa);
    data.cpus.forEach((cpu, ci) => {
      const p = r.cpu[cpu];
      if (!p) return;
      g.fillStyle = p.max > 0 ? heatColor((Math.log10(p.max) - llo) / span) : '#ffffff';
      g.fillRect(xa, y0 + ci * rowH, w, rowH);
      cells++;
    });
  }
  g.font = '11px system-ui, sans-serif';
  g.fillStyle = '#666b70';
  g.textAlign = 'right';
  const every = Math.max(1, Math.ceil(13 / rowH));
  data.cpus.forEach((cpu, ci) => {
    if (ci % every === 0) g.fillText('cpu' + cpu, x0 - 4, y0 + ci * rowH + Math.min(rowH, 12) - 1);
  });
  const tt = timeTicks(from, to, W);
  for (const t of tt.ticks) {
    g.textAlign = { start: 'left', end: 'right', middle: 'center' }[tickAnchor(xs(t), x0, x1)];
    g.fillText(tt.label(t), xs(t), H - 6);
  }
  canvas.addEventListener('click', (ev) => {
    const b = canvas.getBoundingClientRect();
    const sx = (ev.clientX - b.left) / b.width * W, sy = (ev.clientY - b.top) / b.height * H;
    const ci = Math.floor((sy - y0) / rowH);
    if (ci < 0 || ci >= n) return;
    const t = from + (sx - x0) / (x1 - x0) * (to - from);
    const row = data.rows.find((r) => r.t0 <= t && t <= r.t1);
    const p = row && row.cpu[data.cpus[ci]];
    if (p) showWindow(p.start, data.cpus[ci]);
  });
  c.appendChild(canvas);
  c.dataset.cells = String(cells);
  // The scale and the worst CPUs, named, each a link to its worst window.
  const leg = $('legend-heat');
  leg.textContent = '';
  const scale = el('span', { class: 'legend-item heat-scale' });
  scale.appendChild(el('span', null, vals.length ? us(lo) + ' µs' : ''));
  const bar = el('span', { class: 'heat-bar' });
  bar.style.background = 'linear-gradient(to right,' + [0, 0.2, 0.4, 0.6, 0.8, 1].map(heatColor).join(',') + ')';
  scale.appendChild(bar);
  scale.appendChild(el('span', null, vals.length ? us(hi) + ' µs (log scale)' : 'no windows in this range'));
  leg.appendChild(scale);
  const worst = worstCpus(data).filter((w) => w.max >= 0).slice(0, 5);
  if (worst.length) {
    const names = el('span', { class: 'legend-item worst-cpus' }, 'worst: ');
    worst.forEach((w, i) => {
      const a = el('button', { type: 'button', class: 'linkish', 'data-cpu': w.cpu }, 'cpu' + w.cpu + ' ' + us(w.max) + ' µs');
      a.addEventListener('click', () => showWindow(w.start, w.cpu));
      if (i) names.appendChild(document.createTextNode(' · '));
      names.appendChild(a);
    });
    leg.appendChild(names);
    c.dataset.worst = worst.map((w) => w.cpu).join(',');
  }
}

function drawCstates(data, from, to) {
  const c = $('chart-cstates');
  c.textContent = '';
  const W = widthOf(c);
  const names = {};
  for (const s of data.idle_states || []) names[s.cpu] = s.states;
  const maxStates = Math.max(0, ...Object.values(names).map((n) => n.length));
  const items = [];
  const anyNames = Object.values(names)[0] || [];
  for (let i = 0; i < maxStates; i++) items.push({ fill: STATE_COLORS[i % STATE_COLORS.length], label: anyNames[i] || ('state' + i) });
  items.push({ fill: '#ffffff', label: 'busy (not idle)' });
  const note = subsetNote(data);
  if (note) items.push(note);
  legend($('legend-cstates'), items);
  const cpus = lineCpus(data);
  const rowH = 46, gap = 8;
  const H = PAD.t + cpus.length * (rowH + gap) + PAD.b;
  const svg = svgEl('svg', { viewBox: '0 0 ' + W + ' ' + Math.max(H, 60), role: 'img', 'aria-label': 'idle-state residency' });
  const x0 = PAD.l, x1 = W - PAD.r;
  const xs = (t) => x0 + (t - from) / Math.max(1, to - from) * (x1 - x0);
  let any = false;
  cpus.forEach((cpu, ci) => {
    const top = PAD.t + ci * (rowH + gap);
    const g = svgEl('g', { class: 'cpu-row', 'data-cpu': cpu });
    g.appendChild(svgEl('rect', { x: x0, y: top, width: x1 - x0, height: rowH, fill: '#ffffff', stroke: '#e4e4dc' }));
    for (const r of data.rows) {
      const p = r.cpu[cpu];
      if (!p || !p.res || !p.res.length) continue;
      const xa = xs(Math.max(r.t0, from)), xb = xs(Math.min(r.t1, to));
      const w = Math.max(0.6, xb - xa);
      let y = top + rowH;
      p.res.forEach((pct, si) => {
        if (!(pct > 0)) return;
        const h = Math.min(100, pct) / 100 * rowH;
        y -= h;
        g.appendChild(svgEl('rect', { x: xa.toFixed(1), y: y.toFixed(1), width: w.toFixed(1), height: h.toFixed(1), fill: STATE_COLORS[si % STATE_COLORS.length] }));
        any = true;
      });
    }
    g.appendChild(svgEl('text', { class: 'cpu-label', x: x0 - 6, y: top + rowH / 2 + 4, 'text-anchor': 'end' }, 'cpu' + cpu));
    svg.appendChild(g);
  });
  const tt = timeTicks(from, to, W);
  const yb = H - 6;
  for (const t of tt.ticks) svg.appendChild(svgEl('text', { class: 'xtick', x: xs(t), y: yb, 'text-anchor': tickAnchor(xs(t), x0, x1) }, tt.label(t)));
  drawAnnotations(svg, data.annotations, xs, PAD.t, H - PAD.b, from, to);
  if (!any) emptyNote(svg, (x0 + x1) / 2, H / 2, x1 - x0, 'no idle-state data (no cpuidle driver, or no windows in this range)');
  c.appendChild(svg);
}

function drawFreq(data, from, to) {
  // CPUs whose readings are alike throughout (a virtual machine's nominal clock, the CPUs of one
  // policy) are one line, named once for them all: drawn apart, the last hid the others.
  const groups = [];
  lineCpus(data).forEach((cpu, i) => {
    const points = data.rows.map((r) => r.cpu[cpu] && r.cpu[cpu].mhz !== null ? [(r.t0 + r.t1) / 2, r.cpu[cpu].mhz] : null);
    const key = JSON.stringify(points.map((p) => p && p[1]));
    const alike = groups.find((g) => g.key === key);
    if (alike) alike.cpus.push(cpu);
    else groups.push({ key: key, cpus: [cpu], color: cpuColor(i), points: points });
  });
  const lines = groups.map((g) => ({ cpu: g.cpus[0], color: g.color, points: g.points }));
  const items = groups.map((g) => ({
    cpu: g.cpus[0], color: g.color,
    label: g.cpus.length === 1 ? 'cpu' + g.cpus[0] : 'cpu' + g.cpus.join(', cpu') + ' (alike)',
  }));
  const note = subsetNote(data);
  if (note) items.push(note);
  legend($('legend-freq'), items);
  timeChart($('chart-freq'), { from: from, to: to, lines: lines, height: 180, breaks: breaksOf(data), gaps: gapsOf(data), label: 'frequency', annotations: data.annotations, empty: 'no frequency reading in this range' });
}

function drawPower(data, from, to) {
  const lines = data.power_sources.map((name, i) => ({
    color: COLORS[(i + 3) % COLORS.length],
    points: data.rows.map((r) => r.power[i] !== null && r.power[i] !== undefined ? [(r.t0 + r.t1) / 2, r.power[i]] : null),
  }));
  legend($('legend-power'), data.power_sources.map((n, i) => ({ color: COLORS[(i + 3) % COLORS.length], label: n })));
  // A source with no reading (a meter whose counter stood still, as a virtual machine's) is
  // named, not said absent.
  const empty = data.power_sources.length === 0
    ? 'no power source on this machine (RAPL, hwmon or battery)'
    : 'no reading from ' + data.power_sources.join(', ') + ' in this range (a meter whose counter stood still, as in a virtual machine, gives none)';
  timeChart($('chart-power'), { from: from, to: to, lines: lines, height: 160, breaks: breaksOf(data), gaps: gapsOf(data), label: 'power', annotations: data.annotations, empty: empty });
  const cost = [{ color: '#555555', points: data.rows.map((r) => r.cost_pct !== null ? [(r.t0 + r.t1) / 2, r.cost_pct] : null) }];
  timeChart($('chart-cost'), { from: from, to: to, lines: cost, height: 120, breaks: breaksOf(data), gaps: gapsOf(data), label: 'latlab cpu use', annotations: [] });
}

function drawAnnotationList(data) {
  const ul = $('annotations');
  ul.textContent = '';
  if (!data.annotations.length) { ul.appendChild(el('li', null, 'none in this range')); return; }
  for (const a of data.annotations.slice().reverse()) {
    const li = el('li', { 'data-kind': a.kind });
    li.appendChild(el('span', { class: 'kind' }, a.kind));
    li.appendChild(document.createTextNode(fmtFull(a.t) + (a.cpu !== null ? ' cpu' + a.cpu : '') + ' — ' + a.text));
    ul.appendChild(li);
  }
}

function table(t, head, rows, onClick) {
  t.textContent = '';
  const thead = el('thead');
  const tr = el('tr');
  for (const h of head) tr.appendChild(el('th', null, h));
  thead.appendChild(tr);
  t.appendChild(thead);
  const tb = el('tbody');
  for (const r of rows) {
    const row = el('tr', onClick ? { class: 'clickable' } : null);
    for (const c of r.cells) row.appendChild(el('td', null, c));
    if (onClick) row.addEventListener('click', () => onClick(r));
    tb.appendChild(row);
  }
  if (!rows.length) {
    const row = el('tr');
    const td = el('td', { colspan: head.length }, 'none');
    row.appendChild(td);
    tb.appendChild(row);
  }
  t.appendChild(tb);
}

function drawWorst(rows) {
  table($('worst'), ['window', 'CPU', 'max µs', 'p99.9 µs', 'p99 µs', 'samples', 'missed', 'MHz'],
    rows.map((w) => ({
      start: w.start, cpu: w.cpu,
      cells: [fmtFull(w.t0) + (w.windows > 1 ? ' (' + w.windows + ' merged)' : ''), 'cpu' + w.cpu, us(w.max), us(w.p999), us(w.p99), w.count, w.missed, w.mhz === null ? '–' : Math.round(w.mhz)],
    })), (r) => showWindow(r.start, r.cpu));
}

function histChart(container, buckets) {
  container.textContent = '';
  const W = widthOf(container);
  const H = 200;
  const svg = svgEl('svg', { viewBox: '0 0 ' + W + ' ' + H, role: 'img', 'aria-label': 'histogram' });
  if (!buckets.length) {
    emptyNote(svg, W / 2, H / 2, W, 'no samples in this window');
    container.appendChild(svg);
    return;
  }
  const x0 = PAD.l, x1 = W - PAD.r, y0 = PAD.t, y1 = H - PAD.b;
  const lo = Math.max(1, buckets[0][0]);
  const hi = Math.max(lo * 2, buckets[buckets.length - 1][1] + 1);
  const llo = Math.log10(lo), lhi = Math.log10(hi);
  const nbins = 120;
  const bins = new Array(nbins).fill(0);
  for (const b of buckets) {
    const v = Math.max(lo, (b[0] + b[1]) / 2);
    const i = Math.min(nbins - 1, Math.floor((Math.log10(v) - llo) / (lhi - llo) * nbins));
    bins[i] += b[2];
  }
  const maxC = Math.max(...bins);
  const ly = (c) => c > 0 ? Math.log10(c + 1) / Math.log10(maxC + 1) : 0;
  const bw = (x1 - x0) / nbins;
  bins.forEach((c, i) => {
    if (!c) return;
    const h = ly(c) * (y1 - y0);
    const r = svgEl('rect', { class: 'bar', x: (x0 + i * bw).toFixed(1), y: (y1 - h).toFixed(1), width: Math.max(1, bw - 0.5).toFixed(1), height: h.toFixed(1) });
    const a = Math.pow(10, llo + (lhi - llo) * i / nbins), b = Math.pow(10, llo + (lhi - llo) * (i + 1) / nbins);
    r.appendChild(svgEl('title', null, us(a) + '–' + us(b) + ' µs: ' + c));
    svg.appendChild(r);
  });
  for (let e = Math.ceil(llo); e <= Math.floor(lhi); e++) {
    const x = x0 + (e - llo) / (lhi - llo) * (x1 - x0);
    svg.appendChild(svgEl('line', { class: 'grid', x1: x, x2: x, y1: y0, y2: y1 }));
    svg.appendChild(svgEl('text', { x: x, y: H - 6, 'text-anchor': 'middle' }, us(Math.pow(10, e)) + ' µs'));
  }
  svg.appendChild(svgEl('line', { class: 'axis', x1: x0, x2: x1, y1: y1, y2: y1 }));
  svg.appendChild(svgEl('text', { x: x0 - 4, y: y0 + 10, 'text-anchor': 'end' }, maxC));
  svg.appendChild(svgEl('text', { x: x0 - 4, y: y1, 'text-anchor': 'end' }, '1'));
  container.appendChild(svg);
}

async function showWindow(start, cpu, noScroll) {
  const w = await getJSON('api/window?series=' + st.series + '&start=' + encodeURIComponent(start) + '&cpu=' + cpu);
  const p = $('panel-window');
  p.hidden = false;
  $('window-title').textContent = 'cpu' + w.cpu + ', ' + fmtFull(w.t0) + ' – ' + fmtFull(w.t1).slice(11) + (w.windows > 1 ? ' (' + w.windows + ' windows merged)' : '');
  const stats = $('window-stats');
  stats.textContent = '';
  const s = [['samples', w.count], ['missed', w.missed], ['min', us(w.min) + ' µs'], ['p50', us(w.p50) + ' µs'], ['p99', us(w.p99) + ' µs'],
    ['p99.9', us(w.p999) + ' µs'], ['p99.99', us(w.p99_99) + ' µs'], ['max', us(w.max) + ' µs']];
  if (w.mhz) s.push(['MHz', Math.round(w.mhz)]);
  for (const [k, v] of s) {
    const span = el('span');
    span.appendChild(el('b', null, k + ' '));
    span.appendChild(document.createTextNode(String(v)));
    stats.appendChild(span);
  }
  histChart($('chart-hist'), w.buckets);
  const spikes = w.spikes.slice(0, 500);
  $('spike-note').textContent = w.spikes.length ? (w.spikes.length > 500 ? 'first 500 of ' + w.spikes.length : w.spikes.length + ' above the threshold') : 'none kept (set --spike to keep them)';
  table($('spikes'), ['time', 'latency µs'], spikes.map((x) => ({ cells: [fmtFull(x.t) + '.' + String(Math.floor(x.t % 1000)).padStart(3, '0'), us(x.value)] })));
  p.dataset.start = String(start);
  if (!noScroll) p.scrollIntoView({ behavior: 'smooth', block: 'nearest' });
}

function drawExperiments(x) {
  const c = $('experiments');
  c.textContent = '';
  if (!x.experiments.length && !x.runs.length) { c.appendChild(el('p', null, 'No experiments or runs stored (latlab run, latlab measure --db).')); return; }
  if (x.experiments.length) {
    const t = el('table', { id: 'experiment-table' });
    table(t, ['experiment', 'status', 'started', 'ended'], x.experiments.map((e) => ({ cells: [e.id + ' ' + e.name, e.status, e.started_at, e.ended_at || '–'] })));
    c.appendChild(el('div', { class: 'table-wrap' })).appendChild(t);
  }
  if (x.runs.length) {
    const t = el('table', { id: 'run-table' });
    table(t, ['run', 'started', 'host', 'method', 'samples', 'missed', 'p99.9 µs', 'max µs', 'experiment'],
      x.runs.map((r) => ({ cells: [r.id, r.started_at || '–', r.hostname, r.method + ' ' + us(r.interval_ns) + ' µs', r.count, r.missed, us(r.p99_9_ns), us(r.max_ns), r.experiment || '–'] })));
    c.appendChild(el('h3', null, 'Latest runs'));
    c.appendChild(el('div', { class: 'table-wrap' })).appendChild(t);
  }
}

function drawStatus() {
  const s = st.status;
  const series = st.seriesList.find((x) => x.id === st.series);
  const parts = [];
  if (s && s.live) {
    parts.push('monitoring: ' + s.live.describe);
    parts.push(s.live.windows_written + ' windows stored since start' + (s.live.windows_lost ? ', ' + s.live.windows_lost + ' not stored' : '') + (s.live.windows_kept ? ', ' + s.live.windows_kept + ' waiting in files for the store' : '') + (s.live.windows_queued ? ', ' + s.live.windows_queued + ' waiting in memory for the store' : ''));
    parts.push('web server CPU ' + Number(s.live.web_cpu_s || 0).toFixed(1) + ' s');
    if (s.live.last_error) parts.push('last error: ' + s.live.last_error);
  } else if (s) {
    parts.push('serving a store (latlab ' + s.version + ')');
  }
  if (series) parts.push('series ' + series.name + ': ' + (series.windows || 0) + ' windows' + (series.last_ms ? ', last ended ' + fmtFull(series.last_ms) : ''));
  parts.push('times in ' + zoneName());
  $('status').textContent = parts.join(' · ');
  drawStale(s, series);
}

// A series whose last window is three windows old (a minute at least) is not being kept: said
// above the charts, which end where it stopped, with why when the store knows (a recorded stop).
function drawStale(s, series) {
  const p = $('stale');
  p.dataset.checked = '1';
  // On the server's clock: a browser's may be off.
  const now = s && s.now_ms ? s.now_ms : Date.now();
  const late = series && series.last_ms ? now - series.last_ms : 0;
  const windowMs = series ? (series.window_ns || 0) / 1e6 : 0;
  if (!series || !series.last_ms || late < Math.max(60000, 3 * windowMs)) { p.hidden = true; p.textContent = ''; return; }
  const ago = spanText(late);
  const live = s && s.live && s.live.series === series.name ? s.live : null;
  const why = live && live.windows_queued
    ? (live.last_error || 'the store cannot be written') + ': ' + live.windows_queued + ' windows wait in memory'
    : live ? 'the daemon runs but has stored nothing since'
      : series.stopped ? 'its daemon was stopped at ' + fmtFull(series.stopped.at_ms) + ' (' + series.stopped.text + ')'
        : 'no daemon is keeping this series, and none recorded a stop (it may have been killed or the machine gone down)';
  p.textContent = 'no window stored since ' + fmtFull(series.last_ms) + ' (' + ago + ' ago): ' + why;
  p.hidden = false;
}

/** A length of time as minutes, hours or days (`45 min`, `6 h`, `3 days`). */
function spanText(ms) {
  const mins = Math.round(ms / 60000);
  if (mins < 120) return mins + ' min';
  const hours = Math.round(mins / 60);
  return hours < 48 ? hours + ' h' : Math.round(hours / 24) + ' days';
}

// A range longer than the series holds shows all of it: said beside the buttons, whose lit one
// would otherwise read as that much data.
function noteRange() {
  const series = st.seriesList.find((x) => x.id === st.series);
  let text = '';
  if (!st.custom && st.span !== 'all' && series && series.first_ms && series.last_ms) {
    const held = series.last_ms - series.first_ms;
    if (held < st.span) text = 'the series holds ' + spanText(held) + ': all of it is shown';
  }
  $('range-note').textContent = text;
}

function rangeNow() {
  if (st.custom) return st.custom;
  const series = st.seriesList.find((x) => x.id === st.series);
  const now = Date.now();
  // The series' last moment: its last window's end, or its recorded stop just after it (so
  // the stop's annotation is in the range).
  const last = series && series.last_ms
    ? Math.max(series.last_ms, series.stopped ? series.stopped.at_ms + 1 : 0) : 0;
  const end = last ? Math.min(now, Math.max(last, now - 60000)) : now;
  const anchor = last && last < now - 600000 ? last : end;
  const first = series && series.first_ms ? series.first_ms : anchor - 21600000;
  if (st.span === 'all') return [first, Math.max(anchor, first + 1000)];
  // A range reaching back before the series began starts where it began.
  const from = Math.max(anchor - st.span, first - Math.min(60000, (anchor - first) * 0.02));
  return [from, Math.max(anchor, from + 1000)];
}

async function load() {
  if (st.series === null) { $('status').textContent = 'no monitoring series in this store yet'; document.body.dataset.ready = '1'; return; }
  const [from, to] = rangeNow();
  noteRange();
  $('from').value = toLocalInput(from);
  $('to').value = toLocalInput(to);
  const q = 'series=' + st.series + '&from=' + Math.floor(from) + '&to=' + Math.ceil(to);
  const [data, worst] = await Promise.all([
    getJSON('api/timeline?' + q + '&points=' + Math.min(1500, Math.max(200, Math.round(window.innerWidth * 1.5)))),
    getJSON('api/worst?' + q + '&limit=20'),
  ]);
  st.data = data;
  st.range = [from, to];
  const drawn = performance.now();
  render();
  drawWorst(worst);
  document.body.dataset.renderMs = String(Math.round(performance.now() - drawn));
  drawStatus();
  document.body.dataset.ready = '1';
  document.body.dataset.cpus = data.cpus.join(',');
  document.body.dataset.rows = String(data.rows.length);
}

function render() {
  if (!st.data) return;
  const [from, to] = st.range;
  drawLatency(st.data, from, to);
  drawHeat(st.data, from, to);
  drawCstates(st.data, from, to);
  drawFreq(st.data, from, to);
  drawPower(st.data, from, to);
  drawAnnotationList(st.data);
}

let resizeTimer = null;
window.addEventListener('resize', () => {
  clearTimeout(resizeTimer);
  resizeTimer = setTimeout(render, 200);
});

function markRange() {
  for (const b of document.querySelectorAll('#ranges button')) {
    const v = b.dataset.range === 'all' ? 'all' : Number(b.dataset.range);
    b.classList.toggle('active', !st.custom && v === st.span);
  }
}

async function refreshMeta() {
  const [status, list] = await Promise.all([getJSON('api/status'), getJSON('api/series')]);
  st.status = status;
  st.seriesList = list;
}

async function init() {
  await refreshMeta();
  const sel = $('series');
  for (const s of st.seriesList) sel.appendChild(el('option', { value: s.id }, s.name));
  const liveId = st.status.live ? st.status.live.series_id : null;
  st.series = liveId !== null && st.seriesList.some((s) => s.id === liveId) ? liveId : (st.seriesList.length ? st.seriesList[st.seriesList.length - 1].id : null);
  if (st.series !== null) sel.value = String(st.series);
  sel.addEventListener('change', () => { st.series = Number(sel.value); st.custom = null; load().catch((e) => recordError(String(e))); });
  for (const b of document.querySelectorAll('#ranges button')) {
    b.addEventListener('click', () => {
      st.span = b.dataset.range === 'all' ? 'all' : Number(b.dataset.range);
      st.custom = null;
      markRange();
      load().catch((e) => recordError(String(e)));
    });
  }
  $('custom').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const f = new Date($('from').value).getTime(), t = new Date($('to').value).getTime();
    if (!(f < t)) { recordError('custom range: "from" must be before "to"'); return; }
    st.custom = [f, t];
    markRange();
    load().catch((e) => recordError(String(e)));
  });
  $('window-close').addEventListener('click', () => { $('panel-window').hidden = true; });
  // A link to a range: #range=<ms> or #range=all (the buttons' values).
  const r = /^#range=(all|\d+)$/.exec(location.hash);
  if (r) st.span = r[1] === 'all' ? 'all' : Number(r[1]);
  markRange();
  drawStatus();
  await load();
  // A link to one window: #window=<start ns>:<cpu>
  const m = /^#window=(\d+):(\d+)$/.exec(location.hash);
  if (m) await showWindow(m[1], Number(m[2]), true);
  try { drawExperiments(await getJSON('api/experiments')); } catch (e) { recordError(String(e)); }
  document.body.dataset.done = '1';
  if (st.status.live) {
    st.timer = setInterval(() => {
      if (st.custom || document.hidden) return;
      refreshMeta().then(load).catch((e) => recordError(String(e)));
    }, 30000);
  }
}

init().catch((e) => { recordError(String(e)); document.body.dataset.ready = '1'; document.body.dataset.done = '1'; });
