#!/usr/bin/env python3
"""What TLS and basic authentication cost on `/metrics`, beside plain HTTP.

It writes a synthetic series (`latlab fill-monitor`, default 64 CPUs over 2 hours), makes a CA
and a server certificate with the openssl command, and serves the store twice with `latlab
serve`: once on plain loopback HTTP, once with a `--web-config` holding TLS and one bcrypt user.
Then it asks `/metrics` N times (default 200) in each of four ways, the ways taking turns in
rounds of 10 so that the machine's drift spreads over all of them:
  plain-keepalive   HTTP/1.1, one connection
  tls-keepalive     TLS + basic auth, one connection (the handshake paid once; Prometheus's way)
  plain-new         a new connection per request
  tls-new           a new TLS connection per request (full handshake every time)
It records p50, p95 and max per way, and the ratio of the medians to plain HTTP, as JSON.

Standard library only (Python 3.11), the openssl command and htpasswd (apache2-utils) for the
bcrypt hash:
    cargo build --release && python3 bench/web_tls.py
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import shutil
import ssl
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from benchlib import REPO, die, free_port, results_path, run

PASSWORD = "bench password"
WAYS = ("plain-keepalive", "tls-keepalive", "plain-new", "tls-new")


def sh(cmd: list[str], cwd: Path) -> None:
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def certificates(d: Path) -> None:
    """ca.pem, server.pem and server.key (for 127.0.0.1 and localhost) in `d`."""
    sh(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
        "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=bench CA"], d)
    sh(["openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost"], d)
    (d / "ext.cnf").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    sh(["openssl", "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "ext.cnf"], d)


def bcrypt_hash(password: str) -> str:
    """A bcrypt hash at cost 10, from htpasswd (apache2-utils)."""
    if not shutil.which("htpasswd"):
        die("htpasswd not found (apt-get install apache2-utils): it makes the bcrypt hash")
    out = subprocess.run(["htpasswd", "-nbBC", "10", "", password], check=True,
                         capture_output=True, text=True).stdout
    return out.strip().lstrip(":")


def serve(latlab: str, db: Path, port: int, extra: list[str], log: Path) -> subprocess.Popen:
    p = subprocess.Popen([latlab, "serve", "--db", str(db), "--listen", f"127.0.0.1:{port}", *extra],
                         stdout=log.open("w"), stderr=subprocess.STDOUT)
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            c.connect()
            c.close()
            return p
        except OSError:
            time.sleep(0.1)
    p.kill()
    die(f"latlab serve did not start: {log.read_text()}")
    raise AssertionError


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--latlab", default=str(REPO / "target/release/latlab"))
    ap.add_argument("--cpus", type=int, default=64)
    ap.add_argument("--span", default="2h")
    ap.add_argument("-n", type=int, default=200, help="requests per way")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    if not Path(a.latlab).is_file():
        die(f"{a.latlab} not found (cargo build --release)")
    if not shutil.which("openssl"):
        die("openssl not found (apt-get install openssl): it makes the certificates")
    stamp, out = results_path("web_tls", a.out)
    with tempfile.TemporaryDirectory(prefix="latlab-tls-") as tmp:
        d = Path(tmp)
        certificates(d)
        (d / "web.yml").write_text(
            "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n"
            f"basic_auth_users:\n  bench: '{bcrypt_hash(PASSWORD)}'\n")
        db = d / "m.db"
        subprocess.run([a.latlab, "fill-monitor", "--db", str(db), "--cpus", str(a.cpus),
                        "--span", a.span, "--name", "bench"], check=True, stderr=subprocess.DEVNULL)
        pport, tport = free_port(), free_port()
        plain = serve(a.latlab, db, pport, [], d / "plain.log")
        tls = serve(a.latlab, db, tport, ["--web-config", str(d / "web.yml")], d / "tls.log")
        ctx = ssl.create_default_context(cafile=str(d / "ca.pem"))
        auth = {"Authorization": "Basic " + base64.b64encode(f"bench:{PASSWORD}".encode()).decode()}
        conns: dict[str, http.client.HTTPConnection | None] = {w: None for w in WAYS}

        def connection(way: str) -> http.client.HTTPConnection:
            if way.endswith("new") or conns[way] is None:
                c = (http.client.HTTPSConnection("localhost", tport, context=ctx, timeout=30)
                     if way.startswith("tls") else
                     http.client.HTTPConnection("127.0.0.1", pport, timeout=30))
                conns[way] = c
            return conns[way]  # type: ignore[return-value]

        def once(way: str) -> tuple[float, int]:
            t = time.perf_counter()
            c = connection(way)
            c.request("GET", "/metrics", headers=auth if way.startswith("tls") else {})
            r = c.getresponse()
            body = r.read()
            if r.status != 200:
                die(f"{way}: HTTP {r.status}")
            if way.endswith("new"):
                c.close()
            return time.perf_counter() - t, len(body)

        try:
            for w in WAYS:  # warm: the metrics cache, the bcrypt cache, the page cache
                once(w)
            times: dict[str, list[float]] = {w: [] for w in WAYS}
            size = 0
            rounds = (a.n + 9) // 10
            for r in range(rounds):
                order = WAYS if r % 2 == 0 else tuple(reversed(WAYS))
                for w in order:
                    for _ in range(10):
                        s, size = once(w)
                        times[w].append(s)
        finally:
            plain.terminate()
            tls.terminate()
            plain.wait(10)
            tls.wait(10)

    def q(v: list[float], p: float) -> float:
        v = sorted(v)
        return v[min(len(v) - 1, int(round(p * (len(v) - 1))))]

    base = statistics.median(times["plain-keepalive"])
    base_new = statistics.median(times["plain-new"])
    result = {
        "benchmark": "web_tls", "stamp": stamp, "cpus": a.cpus, "span": a.span,
        "requests_per_way": len(times[WAYS[0]]), "metrics_bytes": size,
        "ways": {w: {"p50_ms": statistics.median(v) * 1e3, "p95_ms": q(v, 0.95) * 1e3,
                     "max_ms": max(v) * 1e3} for w, v in times.items()},
        "ratio_tls_keepalive": statistics.median(times["tls-keepalive"]) / base,
        "ratio_tls_new": statistics.median(times["tls-new"]) / base_new,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"/metrics of {a.cpus} CPUs ({size} bytes), {result['requests_per_way']} requests per way:")
    for w, r in result["ways"].items():
        print(f"  {w:<16} p50 {r['p50_ms']:7.2f} ms  p95 {r['p95_ms']:7.2f} ms  max {r['max_ms']:7.2f} ms")
    print(f"  TLS + basic auth / plain: {result['ratio_tls_keepalive']:.2f}× on one connection, "
          f"{result['ratio_tls_new']:.2f}× with a new connection each")
    print(f"result: {out}")


if __name__ == "__main__":
    run(main)
