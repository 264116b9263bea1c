//! The web server of `latlab monitor` and `latlab serve`: the dashboard, its JSON API and
//! `/metrics`. Read-only (GET and HEAD only), loopback by default, with limits: at most
//! [`MAX_CONNECTIONS`] connections ([`MAX_PER_CLIENT`] of one address), request headers within
//! [`HEADER_TIMEOUT`] and
//! [`MAX_HEADER_BYTES`], no request bodies, every answer within [`REQUEST_TIMEOUT`].
//!
//! It runs on its own small tokio runtime whose threads stay off the measured CPUs when other
//! CPUs exist; store queries run on blocking threads with a small pool of read connections.

use super::web_config::{RateLimiter, WebConfigWatch};
use super::{api, metrics};
use axum::Router;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, RawQuery, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use latlab_store::{FileFate, SeriesId, Store, StoreError};
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const MAX_CONNECTIONS: usize = 256;
/// Connections one client address may hold at once: one that opens many and never finishes
/// its requests cannot take every slot (the others' scrapes wait out its header timeout).
pub const MAX_PER_CLIENT: usize = 64;
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);
pub const MAX_HEADER_BYTES: usize = 16 * 1024;
/// Read connections kept open for queries.
const POOL: usize = 8;
/// `/metrics` reads the store at most this often; scrapes in between get the same text.
const METRICS_REFRESH: Duration = Duration::from_millis(250);

const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const STYLE_CSS: &str = include_str!("assets/style.css");

/// What the running daemon adds to what the store holds.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct LiveStatus {
    pub series: String,
    pub series_id: i64,
    pub pid: u32,
    pub started_ms: f64,
    pub describe: String,
    pub profile: Option<String>,
    pub schedule: Option<String>,
    pub windows_written: u64,
    pub windows_lost: u64,
    /// Window sets the store could not take, waiting in files (stored from them, and the files
    /// removed, when it can take them).
    pub windows_kept: u64,
    /// Window sets measured and waiting in memory for the store to be writable, and their size.
    pub windows_queued: u64,
    pub queued_bytes: u64,
    pub last_window_end_ms: Option<f64>,
    /// The newest window measured, stored or not (for `/metrics` while the store is behind).
    #[serde(skip)]
    pub measured: Option<crate::metrics::Measured>,
    pub last_error: Option<String>,
    pub retention: String,
    /// CPU time the web server has used (not part of the monitoring cost), seconds.
    pub web_cpu_s: f64,
}

/// Read connections to the store.
struct Pool {
    path: PathBuf,
    free: Mutex<Vec<Store>>,
}

impl Pool {
    /// Run `f` on a connection to the file now at the path: when the file a pooled connection
    /// reads was deleted or replaced (the daemon goes on in a new one), every pooled connection
    /// is let go, so none serves the old file or keeps its space from the file system.
    fn with<T>(&self, f: impl FnOnce(&Store) -> Result<T, Fail>) -> Result<T, Fail> {
        let taken = self.free.lock().ok().and_then(|mut v| v.pop());
        let fate = taken.as_ref().map(Store::file_fate);
        let store = match (taken, fate) {
            (Some(s), Some(FileFate::InPlace)) => s,
            (Some(s), _) => {
                let mut old = self
                    .free
                    .lock()
                    .map(|mut v| std::mem::take(&mut *v))
                    .unwrap_or_default();
                old.push(s);
                // Closing would copy the journal into a file something else wrote over.
                if fate == Some(FileFate::WrittenOver) {
                    old.into_iter().for_each(Store::abandon);
                }
                Store::open_to_read(&self.path)?
            }
            (None, _) => Store::open_to_read(&self.path)?,
        };
        let out = f(&store);
        if let Ok(mut v) = self.free.lock()
            && v.len() < POOL
        {
            v.push(store);
        }
        out
    }
}

struct MetricsCache {
    metrics: metrics::Metrics,
    /// The store file the metrics were read from: another file starts them again.
    file: Option<(u64, u64)>,
    text: Arc<String>,
    refreshed: Option<Instant>,
}

pub struct AppState {
    pool: Pool,
    cache: Mutex<MetricsCache>,
    live: Option<Arc<Mutex<LiveStatus>>>,
}

impl AppState {
    pub fn new(db: PathBuf, first: Store, live: Option<Arc<Mutex<LiveStatus>>>) -> AppState {
        AppState {
            pool: Pool {
                path: db,
                free: Mutex::new(vec![first]),
            },
            cache: Mutex::new(MetricsCache {
                metrics: metrics::Metrics::new(),
                file: None,
                text: Arc::new(String::new()),
                refreshed: None,
            }),
            live,
        }
    }

    /// Bring the metrics up to date (at most every [`METRICS_REFRESH`]) and return the text.
    fn metrics_text(&self) -> Result<Arc<String>, Fail> {
        let mut cache = self
            .cache
            .lock()
            .map_err(|_| Fail::Server("metrics lock poisoned".into()))?;
        let fresh = cache
            .refreshed
            .is_some_and(|t| t.elapsed() < METRICS_REFRESH);
        if !fresh {
            let live = self
                .live
                .as_ref()
                .and_then(|l| l.lock().ok().map(|l| l.clone()));
            let c = &mut *cache;
            let read = self.pool.with(|s| {
                let other_file = s.file_id() != c.file;
                if other_file {
                    c.metrics = metrics::Metrics::new();
                    c.file = s.file_id();
                }
                let only = live.as_ref().map(|l| l.series.as_str());
                Ok(c.metrics.refresh(s, only)? || other_file)
            });
            // A store that cannot be read (replaced by a foreign file, unreadable): the running
            // daemon still says what waits in memory, beside the last figures read, whose last
            // window's end dates them.
            let changed = match read {
                Ok(changed) => changed,
                Err(_) if live.is_some() => false,
                Err(e) => return Err(e),
            };
            if changed || c.refreshed.is_none() || live.is_some() {
                let live = live.map(|l| metrics::Live {
                    series: l.series.clone(),
                    profile: l.profile.clone().unwrap_or_else(|| "none".into()),
                    windows_queued: l.windows_queued,
                    windows_lost: l.windows_lost,
                    windows_kept: l.windows_kept,
                    measured: l.measured.clone(),
                });
                c.text = Arc::new(c.metrics.render(live.as_ref()));
            }
            c.refreshed = Some(Instant::now());
        }
        Ok(cache.text.clone())
    }

    /// How far each series reaches, from its window sets (not from the metrics, whose first
    /// reading of a large store takes long).
    fn spans(&self) -> Vec<latlab_store::SeriesExtent> {
        self.pool
            .with(|s| Ok(s.series_extents()?))
            .unwrap_or_default()
    }
}

type Shared = Arc<AppState>;

/// CPU time of web threads that have ended, ns.
static WEB_ENDED_NS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
/// Thread ids of the web threads running.
static WEB_TIDS: Mutex<Vec<i32>> = Mutex::new(Vec::new());

fn web_thread_started() {
    if let Ok(mut t) = WEB_TIDS.lock() {
        t.push(latlab_sys::thread::gettid());
    }
}

fn web_thread_stopped() {
    let tid = latlab_sys::thread::gettid();
    if let Ok(mut t) = WEB_TIDS.lock() {
        t.retain(|x| *x != tid);
    }
    let ns = latlab_sys::thread::cpu_time_ns();
    WEB_ENDED_NS.fetch_add(ns, std::sync::atomic::Ordering::Relaxed);
}

/// CPU time every web thread has used so far (answering HTTP is not part of the monitor's
/// measuring cost), ns: ended threads, plus running ones from their `schedstat`.
pub fn web_cpu_time_ns() -> u64 {
    let tids = WEB_TIDS.lock().map(|t| t.clone()).unwrap_or_default();
    // The real /proc (not a test's system tree): these are this process's own threads.
    let (sys, pid) = (latlab_sys::Sys::default(), std::process::id() as i32);
    let running: u64 = tids
        .iter()
        .filter_map(|tid| sys.thread_cpu_time_ns(pid, *tid).ok())
        .sum();
    WEB_ENDED_NS.load(std::sync::atomic::Ordering::Relaxed) + running
}

/// Why a query gave no answer: what the client named does not exist (404), or the server
/// failed (500).
enum Fail {
    NotFound(String),
    /// The store cannot be read now (a foreign file at its path): 503, the detail logged.
    Unavailable(String),
    Server(String),
}

impl From<latlab_store::StoreError> for Fail {
    fn from(e: latlab_store::StoreError) -> Fail {
        match e {
            latlab_store::StoreError::UnknownSeries(s) => Fail::NotFound(format!(
                "no monitor series {s} in this store (the series are listed at /api/series)"
            )),
            e @ latlab_store::StoreError::NotAStore { .. } => Fail::Unavailable(e.to_string()),
            e => Fail::Server(e.to_string()),
        }
    }
}

/// A query string that does not parse: 400 with one line naming the accepted form.
fn bad_query(e: &QueryRejection, accepted: &str) -> String {
    let why = e.body_text();
    let why = why
        .strip_prefix("Failed to deserialize query string: ")
        .unwrap_or(&why);
    // The deserializer's words, said as the API's: a field missing, a number past any range.
    let why = if let Some(field) = why
        .strip_prefix("missing field `")
        .and_then(|r| r.strip_suffix('`'))
    {
        format!("{field} is missing")
    } else if let Some((_, rest)) = why.split_once("unknown field `")
        && let Some((field, _)) = rest.split_once('`')
    {
        format!("{field}: no such parameter")
    } else if let Some((_, rest)) = why.split_once("duplicate field `")
        && let Some((field, _)) = rest.split_once('`')
    {
        format!("{field}: given twice")
    } else if let Some((field, problem)) = why.split_once(": ") {
        // The number parsers' words ("invalid digit found in string", "invalid float literal",
        // "cannot parse integer from empty string", "number too large to fit in target type").
        let range = match field {
            "limit" => Some(format!("limit from 1 to {MOST_WORST}")),
            "points" => Some(format!(
                "points from {} to {} per CPU",
                api::FEWEST_POINTS,
                api::MAX_POINTS
            )),
            _ => None,
        };
        match (problem, range) {
            (p, Some(range)) if p.contains("too large") => {
                return format!("{field}: out of range (accepted: {range})");
            }
            (p, _) if p.contains("empty") => format!("{field}: empty"),
            (p, _) if p.contains("float") => format!("{field}: not a number"),
            (p, _) if p.contains("invalid digit") => format!("{field}: not a whole number"),
            _ => why.to_string(),
        }
    } else {
        why.to_string()
    };
    format!("bad query: {why} (accepted: {accepted})")
}

const RANGE_FORM: &str = "series=ID or NAME with optional from=MS, to=MS (unix milliseconds), and points=N \
     (/api/timeline) or limit=N (/api/worst)";
const WINDOW_FORM: &str =
    "series=ID or NAME, start=NS (the window's start in unix nanoseconds), cpu=N";

fn json_response<T: serde::Serialize>(v: T) -> Response {
    (
        [(header::CACHE_CONTROL, HeaderValue::from_static("no-store"))],
        axum::Json(v),
    )
        .into_response()
}

/// A 500 that tells the client nothing of the server (store errors name files): the detail
/// goes to the server's log.
fn server_error(detail: &str) -> Response {
    eprintln!("latlab: web: {detail}");
    error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal error (the server's log has the detail)",
    )
}

fn error(status: StatusCode, msg: impl Into<String>) -> Response {
    (status, axum::Json(serde_json::json!({"error": msg.into()}))).into_response()
}

/// Run a store query on a blocking thread.
async fn query<T: Send + 'static>(
    state: &Shared,
    f: impl FnOnce(&AppState) -> Result<T, Fail> + Send + 'static,
) -> Result<T, Response> {
    let s = state.clone();
    match tokio::task::spawn_blocking(move || f(&s)).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(Fail::NotFound(e))) => Err(error(StatusCode::NOT_FOUND, e)),
        Ok(Err(Fail::Server(e))) => Err(server_error(&e)),
        Ok(Err(Fail::Unavailable(e))) => {
            eprintln!("latlab: web: {e}");
            Err(error(
                StatusCode::SERVICE_UNAVAILABLE,
                "the store cannot be read now (the server's log has the detail)",
            ))
        }
        Err(e) => Err(server_error(&e.to_string())),
    }
}

/// A read of the store (from the pool) on a blocking thread.
async fn read<T: Send + 'static>(
    state: &Shared,
    f: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
) -> Result<T, Response> {
    query(state, move |s| s.pool.with(|st| f(st).map_err(Fail::from))).await
}

/// A read of the store answered as JSON, or with the status of its failure.
async fn read_json<T: serde::Serialize + Send + 'static>(
    state: &Shared,
    f: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
) -> Response {
    read(state, f).await.map_or_else(|e| e, json_response)
}

/// A read over a range query's series and bounds, answered as JSON; a bad query is a 400, the
/// other endpoint's parameter included (`stray`: its name and value, `limit` given to the
/// timeline, `points` to the list), which this one would pass over.
async fn range_json<T: serde::Serialize + Send + 'static>(
    state: &Shared,
    q: Result<Query<RangeQ>, QueryRejection>,
    stray: (&'static str, fn(&RangeQ) -> Option<i64>),
    f: impl FnOnce(&Store, &RangeQ, SeriesId, u64, u64) -> Result<T, StoreError> + Send + 'static,
) -> Response {
    let (q, from, to) = match range(q) {
        Ok(r) => r,
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    let (stray, given) = stray;
    if given(&q).is_some() {
        return error(
            StatusCode::BAD_REQUEST,
            format!(
                "bad query: {stray}: not a parameter of this endpoint (accepted: {RANGE_FORM})"
            ),
        );
    }
    read_json(state, move |st| {
        let id = series_id(st, &q.series)?;
        f(st, &q, id, from, to)
    })
    .await
}

/// A series named in a query, by its id or its name.
fn series_id(st: &Store, named: &str) -> Result<SeriesId, StoreError> {
    if let Ok(id) = named.parse::<i64>() {
        return Ok(SeriesId(id));
    }
    st.list_series()?
        .into_iter()
        .find(|(_, name, _)| name == named)
        .map(|(id, _, _)| id)
        .ok_or_else(|| StoreError::UnknownSeries(format!("{named:?}")))
}

fn static_file(body: &'static str, kind: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(kind)),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        body,
    )
        .into_response()
}

async fn index() -> Response {
    static_file(INDEX_HTML, "text/html; charset=utf-8")
}
async fn app_js() -> Response {
    static_file(APP_JS, "text/javascript; charset=utf-8")
}
async fn style_css() -> Response {
    static_file(STYLE_CSS, "text/css; charset=utf-8")
}

async fn metrics_handler(State(state): State<Shared>) -> Response {
    match query(&state, |s| s.metrics_text()).await {
        Ok(text) => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static(metrics::CONTENT_TYPE),
            )],
            text.as_str().to_owned(),
        )
            .into_response(),
        Err(r) => r,
    }
}

/// A query given to an endpoint that takes none: refused as a misspelt parameter is.
fn no_query(q: &RawQuery) -> Option<Response> {
    q.0.as_deref().filter(|q| !q.is_empty()).map(|q| {
        error(
            StatusCode::BAD_REQUEST,
            format!("bad query: {q}: this endpoint takes no parameters (accepted: no query)"),
        )
    })
}

async fn status(State(state): State<Shared>, q: RawQuery) -> Response {
    if let Some(refused) = no_query(&q) {
        return refused;
    }
    let live = state.live.as_ref().and_then(|l| {
        l.lock().ok().map(|l| {
            let mut l = l.clone();
            l.web_cpu_s = web_cpu_time_ns() as f64 / 1e9;
            l
        })
    });
    let r = query(&state, move |s| {
        let spans = s.spans();
        Ok(serde_json::json!({
            "version": env!("CARGO_PKG_VERSION"),
            "mode": if live.is_some() { "monitor" } else { "serve" },
            "now_ms": crate::api::ms(super::unix_now_ns()),
            "live": live,
            "series": spans,
        }))
    })
    .await;
    r.map_or_else(|e| e, json_response)
}

async fn series(State(state): State<Shared>, q: RawQuery) -> Response {
    if let Some(refused) = no_query(&q) {
        return refused;
    }
    query(&state, |s| {
        let spans = s.spans();
        s.pool
            .with(|st| api::series(st, &spans).map_err(Fail::from))
    })
    .await
    .map_or_else(|e| e, json_response)
}

/// The query of `/api/timeline` and `/api/worst`; a parameter it does not know (a misspelt
/// `limt=5`) is refused, not passed over.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RangeQ {
    /// The series' id, or its name (as `/metrics` labels it).
    series: String,
    /// Unix milliseconds.
    from: Option<f64>,
    to: Option<f64>,
    /// Signed, so that a negative value is said out of range as any other.
    points: Option<i64>,
    limit: Option<i64>,
}

/// Most windows `/api/worst` lists.
const MOST_WORST: i64 = 10_000;

/// The query a handler takes, or the one line (for a 400) naming the accepted form.
fn parsed<T>(q: Result<Query<T>, QueryRejection>, accepted: &str) -> Result<T, String> {
    q.map(|Query(q)| q).map_err(|e| bad_query(&e, accepted))
}

/// A range query with its bounds in unix nanoseconds, or the one line (for a 400) naming the
/// problem.
fn range(q: Result<Query<RangeQ>, QueryRejection>) -> Result<(RangeQ, u64, u64), String> {
    let q = parsed(q, RANGE_FORM)?;
    // `nan` and `inf` parse as numbers: they name no time.
    if [q.from, q.to]
        .into_iter()
        .flatten()
        .any(|ms| !ms.is_finite())
    {
        return Err(format!(
            "from and to must be finite numbers (accepted: {RANGE_FORM})"
        ));
    }
    if let Some(l) = q.limit.filter(|l| !(1..=MOST_WORST).contains(l)) {
        return Err(format!(
            "limit={l}: out of range (accepted: limit from 1 to {MOST_WORST})"
        ));
    }
    let (fewest, most) = (api::FEWEST_POINTS as i64, api::MAX_POINTS as i64);
    if let Some(p) = q.points.filter(|p| !(fewest..=most).contains(p)) {
        return Err(format!(
            "points={p}: out of range (accepted: points from {fewest} to {most} per CPU)"
        ));
    }
    let to = q.to.map_or(metrics::END_OF_TIME, crate::api::ns_of_ms);
    let from = q.from.map_or(0, crate::api::ns_of_ms);
    if from >= to {
        return Err("from must be before to (unix milliseconds)".into());
    }
    Ok((q, from, to.min(metrics::END_OF_TIME)))
}

async fn timeline(
    State(state): State<Shared>,
    q: Result<Query<RangeQ>, QueryRejection>,
) -> Response {
    range_json(&state, q, ("limit", |q| q.limit), |st, q, id, from, to| {
        api::timeline(st, id, from, to, q.points.map_or(800, |p| p as usize))
    })
    .await
}

async fn worst(State(state): State<Shared>, q: Result<Query<RangeQ>, QueryRejection>) -> Response {
    range_json(
        &state,
        q,
        ("points", |q| q.points),
        |st, q, id, from, to| api::worst(st, id, from, to, q.limit.map_or(20, |l| l as u32)),
    )
    .await
}

/// A parameter it does not know (a misspelt `limt=5`) is refused, not passed over.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WindowQ {
    series: String,
    start: String,
    cpu: u32,
}

async fn window(
    State(state): State<Shared>,
    q: Result<Query<WindowQ>, QueryRejection>,
) -> Response {
    let q = match parsed(q, WINDOW_FORM) {
        Ok(q) => q,
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    let Ok(start) = q.start.parse::<u64>() else {
        return error(
            StatusCode::BAD_REQUEST,
            "start must be the window's start in unix nanoseconds",
        );
    };
    let cpu = q.cpu;
    match read(&state, move |st| {
        api::window(st, series_id(st, &q.series)?, start, cpu)
    })
    .await
    {
        Ok(Some(v)) => json_response(v),
        Ok(None) => error(StatusCode::NOT_FOUND, "no such window"),
        Err(e) => e,
    }
}

async fn experiments(State(state): State<Shared>, q: RawQuery) -> Response {
    if let Some(refused) = no_query(&q) {
        return refused;
    }
    read_json(&state, api::experiments).await
}

async fn not_found() -> Response {
    error(StatusCode::NOT_FOUND, "not found")
}

/// What `--web-config` asks of every request, before anything else: within the rate limit
/// (else 429), with credentials that verify where users are configured (else 401 asking for
/// them); and the file's headers on every answer, refusals included.
async fn guard(
    State(watch): State<Arc<WebConfigWatch>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let sec = watch.current();
    let mut resp = admitted(&sec, req, next).await;
    for (name, value) in &sec.headers {
        resp.headers_mut().insert(name.clone(), value.clone());
    }
    resp
}

/// The answer to a request under `sec`: a refusal (429, 401) or what the routes answer.
async fn admitted(
    sec: &Arc<crate::web_config::WebSecurity>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if let Some(rate) = sec.rate
        && !RATE.allow(rate)
    {
        return (StatusCode::TOO_MANY_REQUESTS, "too many requests\n").into_response();
    }
    if sec.requires_auth() {
        let given = req
            .headers()
            .get(header::AUTHORIZATION)
            .map(|v| v.as_bytes().to_vec());
        let s = sec.clone();
        let ok = tokio::task::spawn_blocking(move || s.authorized(given.as_deref()))
            .await
            .unwrap_or(false);
        if !ok {
            return (
                StatusCode::UNAUTHORIZED,
                [(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Basic realm=\"latlab\""),
                )],
                "Unauthorized\n",
            )
                .into_response();
        }
    }
    next.run(req).await
}

/// The rate limit of `--web-config` (one server per process).
static RATE: std::sync::LazyLock<RateLimiter> = std::sync::LazyLock::new(RateLimiter::default);

/// Only GET and HEAD, and no request bodies.
async fn read_only(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return (
            StatusCode::METHOD_NOT_ALLOWED,
            [(header::ALLOW, HeaderValue::from_static("GET, HEAD"))],
            "read-only: GET and HEAD only\n",
        )
            .into_response();
    }
    let has_body = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .is_some_and(|v| v.as_bytes() != b"0")
        || req.headers().contains_key(header::TRANSFER_ENCODING);
    if has_body {
        return (StatusCode::PAYLOAD_TOO_LARGE, "no request bodies\n").into_response();
    }
    next.run(req).await
}

/// No sniffing and only the page's own scripts and styles, on every answer (refusals and
/// timeouts included), where `--web-config` did not set them: the outermost layer.
async fn standard_headers(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let mut resp = next.run(req).await;
    let h = resp.headers_mut();
    h.entry(header::X_CONTENT_TYPE_OPTIONS)
        .or_insert(HeaderValue::from_static("nosniff"));
    h.entry(header::CONTENT_SECURITY_POLICY)
        .or_insert(HeaderValue::from_static(CSP));
    resp
}

/// The content security policy of every answer: only the page's own scripts and styles.
const CSP: &str = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'";

pub fn router(state: Shared, security: Option<Arc<WebConfigWatch>>) -> Router {
    let app = Router::new()
        .route("/", get(index))
        .route("/app.js", get(app_js))
        .route("/style.css", get(style_css))
        .route("/metrics", get(metrics_handler))
        .route("/api/status", get(status))
        .route("/api/series", get(series))
        .route("/api/timeline", get(timeline))
        .route("/api/worst", get(worst))
        .route("/api/window", get(window))
        .route("/api/experiments", get(experiments))
        .fallback(not_found)
        .layer(axum::middleware::from_fn(read_only))
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            REQUEST_TIMEOUT,
        ));
    let app = match security {
        Some(watch) => app.layer(axum::middleware::from_fn_with_state(watch, guard)),
        None => app,
    };
    app.layer(axum::middleware::from_fn(standard_headers))
        .with_state(state)
}

/// A server running on its own threads.
pub struct Server {
    pub addr: SocketAddr,
    shutdown: tokio::sync::watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    /// Bind `addr`: a taken port fails here, so a daemon can refuse before it touches anything.
    pub fn bind(addr: SocketAddr) -> anyhow::Result<std::net::TcpListener> {
        listen(addr).map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))
    }

    /// Bind `addr` and serve on it: see [`Server::serve`].
    pub fn start(
        addr: SocketAddr,
        state: AppState,
        cpus: Vec<u32>,
        security: Option<Arc<WebConfigWatch>>,
    ) -> anyhow::Result<Server> {
        Server::serve(Server::bind(addr)?, state, cpus, security)
    }

    /// Serve on `std_listener` on a runtime whose threads run on `cpus` (empty: anywhere), with
    /// TLS, authentication and the rest of `security` where given.
    pub fn serve(
        std_listener: std::net::TcpListener,
        state: AppState,
        cpus: Vec<u32>,
        security: Option<Arc<WebConfigWatch>>,
    ) -> anyhow::Result<Server> {
        std_listener.set_nonblocking(true)?;
        let addr = std_listener.local_addr()?;
        let cpus2 = cpus.clone();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .max_blocking_threads(8)
            .thread_name("latlab-web")
            .on_thread_start(move || {
                latlab_sys::thread::keep_on(&cpus2);
                web_thread_started();
            })
            .on_thread_stop(web_thread_stopped)
            .enable_io()
            .enable_time()
            .build()?;
        let (tx, rx) = tokio::sync::watch::channel(false);
        let app = router(Arc::new(state), security.clone());
        let thread = std::thread::Builder::new()
            .name("latlab-web".into())
            .spawn(move || {
                latlab_sys::thread::keep_on(&cpus);
                web_thread_started();
                rt.block_on(async move {
                    match tokio::net::TcpListener::from_std(std_listener) {
                        Ok(l) => accept_loop(l, app, rx, security).await,
                        Err(e) => eprintln!("latlab: web server: {e}"),
                    }
                });
                drop(rt);
                web_thread_stopped();
            })?;
        Ok(Server {
            addr,
            shutdown: tx,
            thread: Some(thread),
        })
    }

    /// Stop accepting, let requests in flight finish (briefly), and join.
    pub fn stop(mut self) {
        let _ = self.shutdown.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// HTTP/1.1 on one connection (plain or TLS) until it closes or the server stops.
async fn serve_connection<IO>(
    io: IO,
    service: hyper_util::service::TowerToHyperService<Router>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    use hyper_util::rt::{TokioIo, TokioTimer};
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .max_buf_size(MAX_HEADER_BYTES.max(8192))
        .keep_alive(true);
    let conn = builder.serve_connection(TokioIo::new(io), service);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        _ = stop.changed() => {
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(Duration::from_secs(2), conn).await;
        }
    }
}

/// The answer to a plain HTTP request on a TLS port: a 400 saying so, and the connection
/// closed (a bare TLS alert reads as garbage to the client that sent it).
async fn plain_http_to_tls(mut stream: tokio::net::TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // The request read first: a socket closed with unread bytes resets, losing the answer.
    let mut request = [0u8; 4096];
    let _ = tokio::time::timeout(HEADER_TIMEOUT, stream.read(&mut request)).await;
    const BODY: &str = "Client sent an HTTP request to an HTTPS server.\n";
    let answer = format!(
        "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n\
         X-Content-Type-Options: nosniff\r\nContent-Security-Policy: {CSP}\r\n\
         Connection: close\r\nContent-Length: {}\r\n\r\n{BODY}",
        BODY.len()
    );
    let _ = tokio::time::timeout(HEADER_TIMEOUT, stream.write_all(answer.as_bytes())).await;
    let _ = stream.shutdown().await;
}

/// TLS handshakes that failed, said in the log at most once a minute with how many were not
/// said: a client refused (an expired or X.509 v1 certificate, an unknown CA) is seen by the
/// operator, and a scanner cannot fill the log.
#[derive(Default)]
struct HandshakeFailures {
    /// When one was last said, and how many failed since.
    said: std::sync::Mutex<(Option<std::time::Instant>, u64)>,
}

impl HandshakeFailures {
    fn failed(&self, peer: std::net::SocketAddr, e: &std::io::Error) {
        let Ok(mut said) = self.said.lock() else {
            return;
        };
        let (last, quiet) = &mut *said;
        if last.is_some_and(|t| t.elapsed() < Duration::from_secs(60)) {
            *quiet += 1;
            return;
        }
        let more = match *quiet {
            0 => String::new(),
            n => format!(" ({n} more since the last one said)"),
        };
        eprintln!(
            "latlab: web: TLS handshake with {peer} failed: {e}{}{more}",
            handshake_hint(&e.to_string())
        );
        *said = (Some(std::time::Instant::now()), 0);
    }
}

/// What a handshake error means to an operator, where rustls's name for it does not say: an
/// incompatible peer is a client of an older TLS (1.0 and 1.1 offer no signature algorithms
/// extension) or one with no suite in common.
fn handshake_hint(error: &str) -> &'static str {
    if error.contains("peer is incompatible") {
        " (the client offers nothing this server accepts: TLS older than 1.2, or no cipher suite \
         or signature scheme in common)"
    } else {
        ""
    }
}

async fn accept_loop(
    listener: tokio::net::TcpListener,
    app: Router,
    mut stop: tokio::sync::watch::Receiver<bool>,
    security: Option<Arc<WebConfigWatch>>,
) {
    let limit = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let clients = Arc::new(Mutex::new(std::collections::HashMap::new()));
    let failures = Arc::new(HandshakeFailures::default());
    let mut conns = tokio::task::JoinSet::new();
    loop {
        let permit = tokio::select! {
            p = limit.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => break },
            _ = stop.changed() => break,
        };
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(s) => s,
                Err(_) => { tokio::time::sleep(Duration::from_millis(50)).await; continue }
            },
            _ = stop.changed() => break,
        };
        // Past its share, a client's connection is closed at once (its permit given back).
        let Some(held) = ClientSlot::take(&clients, peer.ip()) else {
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let stop_conn = stop.clone();
        let tls = security.as_ref().and_then(|w| w.current().tls.clone());
        let failures = failures.clone();
        conns.spawn(async move {
            let (_permit, _held) = (permit, held);
            match tls {
                None => serve_connection(stream, service, stop_conn).await,
                Some(cfg) => {
                    // The handshake within the time a request's headers get. A client that
                    // speaks plain HTTP to this port is told so, as Go's exporters tell it.
                    // One deadline for the first byte and the handshake together.
                    let deadline = tokio::time::Instant::now() + HEADER_TIMEOUT;
                    let mut first = [0u8; 1];
                    match tokio::time::timeout_at(deadline, stream.peek(&mut first)).await {
                        Ok(Ok(1)) if first[0].is_ascii_uppercase() => {
                            plain_http_to_tls(stream).await;
                            return;
                        }
                        Ok(Ok(1)) => {}
                        // Closed without a byte (a TCP probe), or silent: nothing to say.
                        _ => return,
                    }
                    let acceptor = tokio_rustls::TlsAcceptor::from(cfg);
                    match tokio::time::timeout_at(deadline, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => serve_connection(tls, service, stop_conn).await,
                        Ok(Err(e)) => failures.failed(peer, &e),
                        Err(_) => {}
                    }
                }
            }
        });
        while conns.try_join_next().is_some() {}
    }
    let _ = tokio::time::timeout(Duration::from_secs(3), async {
        while conns.join_next().await.is_some() {}
    })
    .await;
}

/// One connection of a client address, counted while it lives.
struct ClientSlot {
    clients: Arc<Mutex<std::collections::HashMap<std::net::IpAddr, usize>>>,
    ip: std::net::IpAddr,
}

impl ClientSlot {
    /// A slot for `ip`, or `None` when it holds [`MAX_PER_CLIENT`] connections already.
    fn take(
        clients: &Arc<Mutex<std::collections::HashMap<std::net::IpAddr, usize>>>,
        ip: std::net::IpAddr,
    ) -> Option<ClientSlot> {
        let mut map = clients.lock().ok()?;
        let n = map.entry(ip).or_insert(0);
        if *n >= MAX_PER_CLIENT {
            return None;
        }
        *n += 1;
        Some(ClientSlot {
            clients: clients.clone(),
            ip,
        })
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        if let Ok(mut map) = self.clients.lock()
            && let Some(n) = map.get_mut(&self.ip)
        {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.ip);
            }
        }
    }
}

/// Bind `addr`. Every IPv6 address (`[::]`, what `:PORT` reads as) takes IPv4 too, as Go's
/// exporters do; on a host without IPv6 it is every IPv4 address.
pub fn listen(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    match std::net::TcpListener::bind(addr) {
        Err(e)
            if addr.ip() == std::net::IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED)
                && e.raw_os_error() == Some(libc::EAFNOSUPPORT) =>
        {
            std::net::TcpListener::bind((std::net::Ipv4Addr::UNSPECIFIED, addr.port()))
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A store at `path` with one series, `name`, and no windows.
    fn store_with_series(path: &std::path::Path, name: &str) {
        let mut s = Store::open(path).unwrap();
        s.open_series(&latlab_store::SeriesSpec {
            name: name.into(),
            window_ns: 1_000_000_000,
            config: latlab_store::SeriesConfig::new(&Default::default(), Default::default()),
            system: None,
            idle_states: Vec::new(),
        })
        .unwrap();
    }

    /// The daemon makes a new store where one was deleted: the server reads the new file, and
    /// its metrics start again from it (no series of the old file stays).
    #[test]
    fn the_server_follows_a_store_file_deleted_and_made_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.db");
        store_with_series(&path, "old");
        let state = AppState::new(path.clone(), Store::open_existing(&path).unwrap(), None);
        let text = state.metrics_text().ok().unwrap();
        assert!(text.contains("series=\"old\""), "{text}");
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
        store_with_series(&path, "new");
        std::thread::sleep(METRICS_REFRESH);
        let text = state.metrics_text().ok().unwrap();
        assert!(
            text.contains("series=\"new\"") && !text.contains("series=\"old\""),
            "{text}"
        );
    }

    /// A web thread's CPU time counts while it runs (from its schedstat) and after it ends.
    #[test]
    fn web_cpu_time_counts_running_and_ended_threads() {
        const SPUN_NS: u64 = 30_000_000;
        let before = web_cpu_time_ns();
        let (spun, spun_rx) = std::sync::mpsc::channel();
        let (end, end_rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            web_thread_started();
            while latlab_sys::thread::cpu_time_ns() < SPUN_NS {
                std::hint::black_box(0u64);
            }
            spun.send(()).unwrap();
            end_rx.recv().unwrap();
            web_thread_stopped();
        });
        spun_rx.recv().unwrap();
        // Blocked now, so its schedstat holds what it ran (less what ran before it counted).
        let running = web_cpu_time_ns();
        assert!(running >= before + SPUN_NS * 2 / 3, "{before} -> {running}");
        end.send(()).unwrap();
        thread.join().unwrap();
        assert!(web_cpu_time_ns() >= before + SPUN_NS);
    }
}
