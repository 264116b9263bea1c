//! `--web-config FILE`: the web configuration file of the Prometheus exporter toolkit (what
//! node_exporter reads with `--web.config.file`), so the file a fleet already has works
//! unchanged: `tls_server_config` (certificate and key as files or inline PEM, client
//! certificates against a CA, TLS versions, cipher suites, curves), `http_server_config`
//! (response headers), `basic_auth_users` (bcrypt hashes) and `rate_limit`.
//!
//! TLS is rustls on ring. What rustls cannot do the way Go does (TLS 1.0/1.1, CBC suites, P-521,
//! client certificates accepted without verification, `client_allowed_sans`) is refused with one
//! line naming what is accepted, never silently weakened. latlab serves HTTP/1.1 only, so
//! `http2` is read and has no effect. Relative file names are relative to the configuration
//! file, as the toolkit reads them. The files are read again when they change (a certificate
//! renewed in place is served from the next connection); a change that does not load is said
//! once and the configuration before it stays.

use base64::Engine;
use serde::Deserialize;
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tokio_rustls::rustls;

#[derive(Deserialize, Default)]
#[serde(
    deny_unknown_fields,
    expecting = "a mapping of tls_server_config, http_server_config, basic_auth_users and rate_limit"
)]
struct RawConfig {
    tls_server_config: Option<RawTls>,
    http_server_config: Option<RawHttp>,
    basic_auth_users: Option<BTreeMap<String, String>>,
    rate_limit: Option<RawRate>,
}

#[derive(Deserialize, Default)]
#[serde(
    deny_unknown_fields,
    expecting = "a mapping of cert_file, key_file, client_ca_file, client_auth_type, min_version and the like"
)]
struct RawTls {
    cert: Option<String>,
    key: Option<String>,
    client_ca: Option<String>,
    cert_file: Option<String>,
    key_file: Option<String>,
    client_auth_type: Option<String>,
    client_ca_file: Option<String>,
    client_allowed_sans: Option<Vec<String>>,
    min_version: Option<String>,
    max_version: Option<String>,
    cipher_suites: Option<Vec<String>>,
    prefer_server_cipher_suites: Option<bool>,
    curve_preferences: Option<Vec<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, expecting = "a mapping of http2 and headers")]
struct RawHttp {
    /// Read so that a file which sets it loads; latlab serves HTTP/1.1 only.
    #[allow(dead_code)]
    http2: Option<bool>,
    headers: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, expecting = "a mapping of interval and burst")]
struct RawRate {
    interval: Option<String>,
    burst: Option<u32>,
}

/// How clients must show a certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    None,
    /// Verified against the client CA when one is sent.
    VerifyIfGiven,
    Required,
}

/// A loaded web configuration.
pub struct WebSecurity {
    /// TLS, where the file configures it.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    pub client_auth: ClientAuth,
    /// TLS versions offered, e.g. `TLS 1.2–1.3`.
    pub versions: String,
    /// The served certificate's validity (unix seconds from, to), where it could be read.
    validity: Option<(i64, i64)>,
    /// User → bcrypt hash; empty: no authentication.
    users: BTreeMap<String, String>,
    /// Headers set on every answer (over latlab's own).
    pub headers: Vec<(axum::http::HeaderName, axum::http::HeaderValue)>,
    /// Requests per interval, and the burst: a token bucket.
    pub rate: Option<(Duration, u32)>,
    /// The files this configuration was read from, with what they were (to see a change).
    stamps: Vec<(PathBuf, Option<(SystemTime, u64)>)>,
    /// Credentials that verified (SHA-256 of user, password and hash), so bcrypt's cost is paid
    /// once per credential, as the toolkit caches it.
    verified: Mutex<HashSet<[u8; 32]>>,
}

/// Accepted `client_auth_type` values.
const CLIENT_AUTH_FORM: &str =
    "NoClientCert, VerifyClientCertIfGiven or RequireAndVerifyClientCert";
/// Headers the toolkit lets a file set.
const HEADERS: [&str; 5] = [
    "Content-Security-Policy",
    "X-Frame-Options",
    "X-Content-Type-Options",
    "X-XSS-Protection",
    "Strict-Transport-Security",
];
/// Credentials remembered as verified, at most.
const VERIFIED_MAX: usize = 1024;
/// A bcrypt hash of nothing anyone knows (made once, at the toolkit's usual cost), verified
/// against for unknown users so that an unknown name costs as long as a wrong password.
static DUMMY_HASH: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let secret = format!("{:?}{}", Instant::now(), std::process::id());
    bcrypt::hash(secret, 10).unwrap_or_default()
});

fn stamp(path: &Path) -> Option<(SystemTime, u64)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

impl WebSecurity {
    /// Read and check the file at `path`: every problem is one line naming the field and what
    /// is accepted.
    pub fn load(path: &Path) -> Result<WebSecurity, String> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            format!(
                "{}: {e} (accepted: a readable file in the exporter toolkit's web configuration \
                 format)",
                path.display()
            )
        })?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut stamps = vec![(path.to_path_buf(), stamp(path))];
        let raw: RawConfig = if text.trim().is_empty() {
            RawConfig::default()
        } else {
            serde_norway::from_str(&text).map_err(|e| {
                format!(
                    "{}: {} (accepted: the exporter toolkit's web configuration: \
                     tls_server_config, http_server_config, basic_auth_users, rate_limit)",
                    path.display(),
                    e.to_string().lines().next().unwrap_or("not YAML")
                )
            })?
        };
        let at = |field: &str, problem: String| format!("{}: {field}: {problem}", path.display());
        let mut files = |name: &str, field: &str| -> Result<Vec<u8>, String> {
            let p = dir.join(name);
            let bytes = std::fs::read(&p).map_err(|e| {
                at(
                    field,
                    format!(
                        "{}: {e} (accepted: a readable file, named relative to the web \
                             configuration's directory)",
                        p.display()
                    ),
                )
            })?;
            stamps.push((p.clone(), stamp(&p)));
            Ok(bytes)
        };
        let (tls, client_auth, versions, validity) = match raw.tls_server_config {
            Some(t) if tls_configured(&t) => {
                // A file that cannot be read is said in full already (empty field).
                let (cfg, auth, versions, validity) = tls_config(t, &mut files)
                    .map_err(|(f, p)| if f.is_empty() { p } else { at(&f, p) })?;
                (Some(Arc::new(cfg)), auth, versions, validity)
            }
            _ => (None, ClientAuth::None, String::new(), None),
        };
        let users = raw.basic_auth_users.unwrap_or_default();
        for (user, hash) in &users {
            if user.contains(':') {
                return Err(at(
                    "basic_auth_users",
                    format!("{user:?}: a user name cannot hold ':' (accepted: name: bcrypt hash)"),
                ));
            }
            bcrypt_parts(hash).map_err(|p| at("basic_auth_users", format!("{user}: {p}")))?;
        }
        let mut headers = Vec::new();
        if let Some(h) = raw
            .http_server_config
            .as_ref()
            .and_then(|h| h.headers.as_ref())
        {
            for (name, value) in h {
                let Some(known) = HEADERS.iter().find(|k| k.eq_ignore_ascii_case(name)) else {
                    return Err(at(
                        "http_server_config.headers",
                        format!(
                            "{name}: not a header this file may set (accepted: {})",
                            HEADERS.join(", ")
                        ),
                    ));
                };
                if value.is_empty() {
                    continue;
                }
                let bad = match *known {
                    "X-Frame-Options" => {
                        !["deny", "sameorigin"].contains(&value.to_ascii_lowercase().as_str())
                    }
                    "X-Content-Type-Options" => !value.eq_ignore_ascii_case("nosniff"),
                    _ => false,
                };
                let v = axum::http::HeaderValue::from_str(value).ok().filter(|_| !bad).ok_or_else(|| {
                    at("http_server_config.headers", format!("{known}: {value:?} is not accepted (accepted: X-Frame-Options deny or sameorigin, X-Content-Type-Options nosniff, others a header value)"))
                })?;
                headers.push((axum::http::HeaderName::from_static(lower(known)), v));
            }
        }
        let rate = match raw.rate_limit {
            None => None,
            Some(r) => {
                let interval = match r.interval.as_deref() {
                    None => 0,
                    Some(i) => latlab_model::units::parse_duration(i, None)
                        .map_err(|e| at("rate_limit.interval", e.to_string()))?,
                };
                let burst = r.burst.unwrap_or(0);
                if interval > 0 && burst == 0 {
                    return Err(at(
                        "rate_limit.burst",
                        "0 lets no request through (accepted: 1 or more)".into(),
                    ));
                }
                (interval > 0).then_some((Duration::from_nanos(interval), burst))
            }
        };
        Ok(WebSecurity {
            tls,
            client_auth,
            versions,
            validity,
            users,
            headers,
            rate,
            stamps,
            verified: Mutex::new(HashSet::new()),
        })
    }

    /// Whether the files it was read from changed since.
    fn changed(&self) -> bool {
        self.stamps.iter().any(|(p, s)| stamp(p) != *s)
    }

    pub fn requires_auth(&self) -> bool {
        !self.users.is_empty()
    }

    /// What this configuration lacks to serve an address other machines reach (TLS, and
    /// users or verified client certificates), `None` when it lacks nothing.
    pub fn exposure_gap(&self) -> Option<&'static str> {
        if self.tls.is_none() {
            Some("has no tls_server_config (plain HTTP)")
        } else if self.users.is_empty() && self.client_auth != ClientAuth::Required {
            Some(
                "has neither basic_auth_users nor client_auth_type RequireAndVerifyClientCert \
                 (no authentication)",
            )
        } else {
            None
        }
    }

    /// What clients will make of the served certificate at `now` (unix seconds), where they
    /// refuse it: expired, or not valid yet.
    fn validity_note(&self, now: u64) -> Option<String> {
        let (from, to) = self.validity?;
        let day =
            |t: i64| latlab_model::rfc3339_utc(t.max(0) as u64 * 1_000_000_000)[..10].to_string();
        let now = now as i64;
        if now > to {
            Some(format!(
                "WARNING: the certificate expired on {}: clients refuse it",
                day(to)
            ))
        } else if now < from {
            Some(format!(
                "WARNING: the certificate is not valid before {}: clients refuse it",
                day(from)
            ))
        } else {
            None
        }
    }

    /// `TLS 1.2–1.3, client certificates required; basic auth (2 users)`, or `plain HTTP`.
    pub fn describe(&self) -> String {
        let mut parts = vec![match (&self.tls, self.client_auth) {
            (None, _) => "plain HTTP".to_string(),
            (Some(_), ClientAuth::None) => self.versions.clone(),
            (Some(_), ClientAuth::VerifyIfGiven) => {
                format!("{}, client certificates verified when sent", self.versions)
            }
            (Some(_), ClientAuth::Required) => {
                format!("{}, client certificates required", self.versions)
            }
        }];
        if !self.users.is_empty() {
            parts.push(format!(
                "basic auth ({} user{})",
                self.users.len(),
                if self.users.len() == 1 { "" } else { "s" }
            ));
        }
        if let Some((i, b)) = self.rate {
            parts.push(format!(
                "at most {b} requests at once, then one per {}",
                latlab_model::units::format_duration(i.as_nanos() as u64)
            ));
        }
        if let Some(note) = self.validity_note(latlab_sys::unix_now_ns() / 1_000_000_000) {
            parts.push(note);
        }
        parts.join("; ")
    }

    /// Whether an `Authorization` header's value lets the request in (always, without users).
    /// bcrypt is slow by design: call it off the async threads.
    pub fn authorized(&self, authorization: Option<&[u8]>) -> bool {
        if self.users.is_empty() {
            return true;
        }
        let Some((user, password)) = authorization.and_then(basic_credentials) else {
            return false;
        };
        let hash = self.users.get(&user);
        let key = {
            let mut c = ring::digest::Context::new(&ring::digest::SHA256);
            for part in [
                user.as_bytes(),
                password.as_bytes(),
                hash.map_or(&b""[..], |h| h.as_bytes()),
            ] {
                c.update(&(part.len() as u64).to_le_bytes());
                c.update(part);
            }
            let mut k = [0u8; 32];
            k.copy_from_slice(c.finish().as_ref());
            k
        };
        if hash.is_some() && self.verified.lock().is_ok_and(|v| v.contains(&key)) {
            return true;
        }
        let ok = bcrypt::verify(&password, hash.map_or(DUMMY_HASH.as_str(), |h| h.as_str()))
            .unwrap_or(false)
            && hash.is_some();
        if ok && let Ok(mut v) = self.verified.lock() {
            if v.len() >= VERIFIED_MAX {
                v.clear();
            }
            v.insert(key);
        }
        ok
    }
}

fn lower(name: &str) -> &'static str {
    match name {
        "Content-Security-Policy" => "content-security-policy",
        "X-Frame-Options" => "x-frame-options",
        "X-Content-Type-Options" => "x-content-type-options",
        "X-XSS-Protection" => "x-xss-protection",
        _ => "strict-transport-security",
    }
}

/// `user` and `password` of a `Basic` authorization.
fn basic_credentials(value: &[u8]) -> Option<(String, String)> {
    let text = std::str::from_utf8(value).ok()?.trim();
    let (scheme, encoded) = text.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

/// A bcrypt hash's shape (`$2a$`, `$2b$`, `$2x$` or `$2y$`, a cost of 4..=31, 53 characters).
fn bcrypt_parts(hash: &str) -> Result<(), String> {
    let parts: Vec<&str> = hash.split('$').collect();
    let ok = parts.len() == 4
        && parts[0].is_empty()
        && ["2a", "2b", "2x", "2y"].contains(&parts[1])
        && parts[2].parse::<u32>().is_ok_and(|c| (4..=31).contains(&c))
        && parts[3].len() == 53;
    if ok {
        Ok(())
    } else {
        Err(
            "not a bcrypt hash (accepted: $2a$, $2b$, $2x$ or $2y$, a cost from 04 to 31, $, \
             then 53 characters, e.g. from `htpasswd -nBC 10 \"\" | tr -d ':\\n'`)"
                .into(),
        )
    }
}

/// Whether a `tls_server_config` asks for TLS at all (the toolkit serves plain HTTP for an
/// empty one).
fn tls_configured(t: &RawTls) -> bool {
    [
        &t.cert,
        &t.key,
        &t.cert_file,
        &t.key_file,
        &t.client_ca,
        &t.client_ca_file,
        &t.client_auth_type,
    ]
    .iter()
    .any(|v| v.as_deref().is_some_and(|s| !s.is_empty()))
}

type FieldError = (String, String);

/// Reads a file named in the configuration (name, field) and remembers it to see a change.
type ReadFile<'a> = dyn FnMut(&str, &str) -> Result<Vec<u8>, String> + 'a;

/// PEM from inline text or a file, never both.
fn pem(
    inline: Option<String>,
    file: Option<String>,
    names: (&str, &str),
    files: &mut ReadFile<'_>,
) -> Result<Option<Vec<u8>>, FieldError> {
    let inline = inline.filter(|s| !s.is_empty());
    let file = file.filter(|s| !s.is_empty());
    match (inline, file) {
        (Some(_), Some(_)) => Err((
            names.0.into(),
            format!("given inline and as {} (accepted: one of them)", names.1),
        )),
        (Some(text), None) => Ok(Some(text.into_bytes())),
        (None, Some(f)) => files(&f, names.1).map(Some).map_err(|e| (String::new(), e)),
        (None, None) => Ok(None),
    }
}

fn version(text: &str, field: &str) -> Result<u8, FieldError> {
    match text {
        "TLS13" => Ok(13),
        "TLS12" => Ok(12),
        "TLS10" | "TLS11" => Err((
            field.into(),
            format!("{text}: rustls offers only TLS 1.2 and 1.3 (accepted: TLS12, TLS13)"),
        )),
        _ => Err((field.into(), format!("{text:?} (accepted: TLS12, TLS13)"))),
    }
}

/// ring's cipher suites and key exchange groups, narrowed to the web config's lists (by Go's
/// names); TLS 1.3's suites are always offered, as in Go.
fn crypto_provider(
    cipher_suites: Option<Vec<String>>,
    curve_preferences: Option<Vec<String>>,
) -> Result<rustls::crypto::CryptoProvider, FieldError> {
    let field = |f: &str| f.to_string();
    let mut provider = rustls::crypto::ring::default_provider();
    if let Some(names) = cipher_suites.filter(|c| !c.is_empty()) {
        let mut chosen = Vec::new();
        for name in &names {
            let go = name.trim_end_matches("_SHA256");
            let found = provider.cipher_suites.iter().find(|s| {
                s.tls13().is_none() && format!("{:?}", s.suite()).trim_end_matches("_SHA256") == go
            });
            match found {
                Some(s) => chosen.push(*s),
                None => {
                    let accepted: Vec<String> = provider
                        .cipher_suites
                        .iter()
                        .filter(|s| s.tls13().is_none())
                        .map(|s| format!("{:?}", s.suite()))
                        .collect();
                    return Err((
                        field("cipher_suites"),
                        format!(
                            "{name}: not offered by rustls (accepted: {})",
                            accepted.join(", ")
                        ),
                    ));
                }
            }
        }
        // TLS 1.3's suites are not chosen by the list, as in Go.
        let tls13: Vec<_> = provider
            .cipher_suites
            .iter()
            .filter(|s| s.tls13().is_some())
            .copied()
            .collect();
        provider.cipher_suites = tls13.into_iter().chain(chosen).collect();
    }
    if let Some(curves) = curve_preferences.filter(|c| !c.is_empty()) {
        let mut chosen = Vec::new();
        for c in &curves {
            let group = match c.as_str() {
                "X25519" => rustls::NamedGroup::X25519,
                "CurveP256" => rustls::NamedGroup::secp256r1,
                "CurveP384" => rustls::NamedGroup::secp384r1,
                _ => {
                    return Err((
                        field("curve_preferences"),
                        format!(
                            "{c}: not offered by rustls on ring (accepted: X25519, CurveP256, CurveP384)"
                        ),
                    ));
                }
            };
            if let Some(g) = provider.kx_groups.iter().find(|g| g.name() == group) {
                chosen.push(*g);
            }
        }
        provider.kx_groups = chosen;
    }
    Ok(provider)
}

/// The validity of an X.509 certificate (unix seconds: not before, not after), read from its
/// DER: `Certificate ::= SEQUENCE { tbsCertificate SEQUENCE { [0] version OPTIONAL, serial,
/// signature, issuer, validity SEQUENCE { notBefore, notAfter } … } … }` (RFC 5280 §4.1).
fn validity_of(cert: &[u8]) -> Option<(i64, i64)> {
    /// One DER element: (tag, content, what follows it).
    fn element(b: &[u8]) -> Option<(u8, &[u8], &[u8])> {
        let (&tag, rest) = b.split_first()?;
        let (&first, rest) = rest.split_first()?;
        let (len, rest) = if first < 0x80 {
            (usize::from(first), rest)
        } else {
            let n = usize::from(first & 0x7f);
            if n == 0 || n > 4 || rest.len() < n {
                return None;
            }
            let len = rest[..n]
                .iter()
                .fold(0usize, |l, &b| (l << 8) | usize::from(b));
            (len, &rest[n..])
        };
        (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
    }
    /// UTCTime (`YYMMDDHHMMSSZ`, 1950–2049) or GeneralizedTime (`YYYYMMDDHHMMSSZ`).
    fn time((tag, text): (u8, &[u8])) -> Option<i64> {
        let text = std::str::from_utf8(text).ok()?.strip_suffix('Z')?;
        let (year, rest) = match tag {
            0x17 => {
                let yy: i64 = text.get(..2)?.parse().ok()?;
                (if yy < 50 { 2000 + yy } else { 1900 + yy }, &text[2..])
            }
            0x18 => (text.get(..4)?.parse().ok()?, &text[4..]),
            _ => return None,
        };
        let n = |r: std::ops::Range<usize>| rest.get(r)?.parse::<u32>().ok();
        let days = latlab_model::days_from_civil(year, n(0..2)?, n(2..4)?);
        Some(days * 86_400 + i64::from(n(4..6)? * 3600 + n(6..8)? * 60 + n(8..10)?))
    }
    let (_, cert, _) = element(cert)?;
    let (_, tbs, _) = element(cert)?;
    let (tag, _, mut rest) = element(tbs)?;
    if tag != 0xa0 {
        // No explicit version (v1): the first element was the serial number.
        rest = element(tbs)?.2;
    } else {
        rest = element(rest)?.2; // the serial number
    }
    let rest = element(rest)?.2; // the signature algorithm
    let rest = element(rest)?.2; // the issuer
    let (_, validity, _) = element(rest)?;
    let (t0, v0, after) = element(validity)?;
    let (t1, v1, _) = element(after)?;
    Some((time((t0, v0))?, time((t1, v1))?))
}

/// The client CA certificates of `client_ca_file` / `client_ca`.
fn client_roots(ca: &[u8]) -> Result<rustls::RootCertStore, FieldError> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    let field = |f: &str| f.to_string();
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca) {
        let c = c.map_err(|e| {
            (
                field("client_ca_file"),
                format!("not PEM certificates: {e}"),
            )
        })?;
        roots.add(c).map_err(|e| {
            (
                field("client_ca_file"),
                format!("not a CA certificate: {e}"),
            )
        })?;
    }
    if roots.is_empty() {
        return Err((
            field("client_ca_file"),
            "holds no certificate (accepted: PEM)".into(),
        ));
    }
    Ok(roots)
}

/// A `tls_server_config` read: the rustls configuration, the client authentication, the TLS
/// versions offered and the served certificate's validity (unix seconds).
type Tls = (rustls::ServerConfig, ClientAuth, String, Option<(i64, i64)>);

fn tls_config(t: RawTls, files: &mut ReadFile<'_>) -> Result<Tls, FieldError> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let field = |f: &str| f.to_string();
    let cert = pem(t.cert, t.cert_file, ("cert", "cert_file"), files)?.ok_or_else(|| {
        (
            field("tls_server_config"),
            "missing cert_file or cert (accepted: cert_file: PATH, or cert: PEM text)".into(),
        )
    })?;
    let key = pem(t.key, t.key_file, ("key", "key_file"), files)?.ok_or_else(|| {
        (
            field("tls_server_config"),
            "missing key_file or key (accepted: key_file: PATH, or key: PEM text)".into(),
        )
    })?;
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert)
        .collect::<Result<_, _>>()
        .map_err(|e| (field("cert_file"), format!("not PEM certificates: {e}")))?;
    if chain.is_empty() {
        return Err((
            field("cert_file"),
            "holds no certificate (accepted: PEM)".into(),
        ));
    }
    let validity = validity_of(&chain[0]);
    let key = PrivateKeyDer::from_pem_slice(&key).map_err(|e| {
        (
            field("key_file"),
            format!("no private key: {e} (accepted: PEM, PKCS#8, PKCS#1 or SEC1)"),
        )
    })?;
    let min = version(t.min_version.as_deref().unwrap_or("TLS12"), "min_version")?;
    let max = version(t.max_version.as_deref().unwrap_or("TLS13"), "max_version")?;
    if min > max {
        return Err((
            field("min_version"),
            "above max_version (accepted: TLS12 ≤ TLS13)".into(),
        ));
    }
    let provider = Arc::new(crypto_provider(t.cipher_suites, t.curve_preferences)?);
    let versions: Vec<&'static rustls::SupportedProtocolVersion> =
        [(12, &rustls::version::TLS12), (13, &rustls::version::TLS13)]
            .into_iter()
            .filter(|(v, _)| (min..=max).contains(v))
            .map(|(_, v)| v)
            .collect();
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| (field("tls_server_config"), e.to_string()))?;
    if t.client_allowed_sans.is_some_and(|s| !s.is_empty()) {
        return Err((
            field("client_allowed_sans"),
            "not supported by latlab (accepted: leave it out; verify clients with client_ca_file \
             and RequireAndVerifyClientCert)"
                .into(),
        ));
    }
    let auth = match t.client_auth_type.as_deref().unwrap_or("") {
        "" | "NoClientCert" => ClientAuth::None,
        "VerifyClientCertIfGiven" => ClientAuth::VerifyIfGiven,
        "RequireAndVerifyClientCert" => ClientAuth::Required,
        other @ ("RequestClientCert" | "RequireAnyClientCert") => {
            return Err((
                field("client_auth_type"),
                format!(
                    "{other} accepts certificates nobody verified (accepted: {CLIENT_AUTH_FORM})"
                ),
            ));
        }
        other => {
            return Err((
                field("client_auth_type"),
                format!("{other:?} (accepted: {CLIENT_AUTH_FORM})"),
            ));
        }
    };
    let ca = pem(
        t.client_ca,
        t.client_ca_file,
        ("client_ca", "client_ca_file"),
        files,
    )?;
    let builder = match (auth, ca) {
        (ClientAuth::None, None) => builder.with_no_client_auth(),
        (ClientAuth::None, Some(_)) => {
            return Err((
                field("client_ca_file"),
                format!(
                    "a client CA without a client_auth_type that verifies (accepted: {CLIENT_AUTH_FORM})"
                ),
            ));
        }
        (_, None) => {
            return Err((
                field("client_auth_type"),
                "verifying client certificates needs client_ca_file or client_ca (accepted: \
                 client_ca_file: PATH of the CA's PEM certificates)"
                    .into(),
            ));
        }
        (auth, Some(ca)) => {
            let roots = client_roots(&ca)?;
            let mut v = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            );
            if auth == ClientAuth::VerifyIfGiven {
                v = v.allow_unauthenticated();
            }
            let verifier = v
                .build()
                .map_err(|e| (field("client_ca_file"), e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut cfg = builder.with_single_cert(chain, key).map_err(|e| {
        let text = e.to_string();
        if text.contains("UnsupportedCertVersion") {
            // rustls takes X.509 v3 only; `openssl x509 -req` without extensions makes v1.
            (
                field("cert_file"),
                "an X.509 v1 certificate, which rustls does not take (accepted: an X.509 v3 \
                 certificate, e.g. openssl x509 -req with -extfile naming its extensions)"
                    .to_string(),
            )
        } else {
            (
                field("key_file"),
                format!(
                    "does not fit the certificate ({text}) (accepted: the private key of \
                     cert_file's first certificate, PEM)"
                ),
            )
        }
    })?;
    cfg.ignore_client_order = t.prefer_server_cipher_suites.unwrap_or(true);
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    let versions = if min == max {
        format!("TLS 1.{}", min - 10)
    } else {
        format!("TLS 1.{}–1.{}", min - 10, max - 10)
    };
    Ok((cfg, auth, versions, validity))
}

/// A web configuration read again when its files change: the server asks for the current one
/// at every connection and request.
pub struct WebConfigWatch {
    path: PathBuf,
    state: Mutex<(Arc<WebSecurity>, Instant, Option<String>)>,
    /// Served on an address other machines reach: a change that drops TLS or authentication
    /// is refused as a file that does not load is.
    exposed: std::sync::atomic::AtomicBool,
}

/// How often the files are looked at for a change, at most.
const RECHECK: Duration = Duration::from_secs(1);

impl WebConfigWatch {
    /// Read the file at `path` and watch it.
    pub fn load(path: &Path) -> Result<WebConfigWatch, String> {
        WebSecurity::load(path).map(|first| WebConfigWatch::new(path, first))
    }

    /// `https` or `http`, as the configuration in force serves.
    pub fn scheme(&self) -> &'static str {
        if self.current().tls.is_some() {
            "https"
        } else {
            "http"
        }
    }

    pub fn new(path: &Path, first: WebSecurity) -> WebConfigWatch {
        WebConfigWatch {
            path: path.to_path_buf(),
            state: Mutex::new((Arc::new(first), Instant::now(), None)),
            exposed: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// From now on, keep TLS and authentication: a change that drops either is refused (the
    /// configuration before stays). For an address other machines reach.
    pub fn keep_protected(&self) {
        self.exposed
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// The configuration in force, read again if a file changed since (a new one that does not
    /// load is said once; the one before stays).
    pub fn current(&self) -> Arc<WebSecurity> {
        let Ok(mut s) = self.state.lock() else {
            // A panic while holding the lock cannot happen above; fail closed anyway.
            return Arc::new(WebSecurity::deny_all());
        };
        if s.1.elapsed() >= RECHECK {
            s.1 = Instant::now();
            if s.0.changed() {
                let exposed = self.exposed.load(std::sync::atomic::Ordering::Relaxed);
                let loaded = WebSecurity::load(&self.path).and_then(|new| {
                    match new.exposure_gap().filter(|_| exposed) {
                        Some(gap) => Err(format!(
                            "{} {gap}: refused on an address other machines reach",
                            self.path.display()
                        )),
                        None => Ok(new),
                    }
                });
                match loaded {
                    Ok(new) => {
                        eprintln!(
                            "latlab: web config {} read again: {}",
                            self.path.display(),
                            new.describe()
                        );
                        s.0 = Arc::new(new);
                        s.2 = None;
                    }
                    Err(e) if s.2.as_deref() != Some(e.as_str()) => {
                        eprintln!(
                            "latlab: web config changed but does not load, the one before stays: {e}"
                        );
                        s.2 = Some(e);
                    }
                    Err(_) => {}
                }
            }
        }
        s.0.clone()
    }
}

impl WebSecurity {
    /// A configuration that lets nobody in (what a broken lock falls back to).
    fn deny_all() -> WebSecurity {
        WebSecurity {
            tls: None,
            client_auth: ClientAuth::None,
            versions: String::new(),
            validity: None,
            users: BTreeMap::from([(String::new(), DUMMY_HASH.clone())]),
            headers: Vec::new(),
            rate: None,
            stamps: Vec::new(),
            verified: Mutex::new(HashSet::new()),
        }
    }
}

/// A token bucket: `burst` requests at once, refilled one per `interval`.
pub struct RateLimiter {
    state: Mutex<(f64, Instant)>,
}

impl Default for RateLimiter {
    fn default() -> Self {
        RateLimiter {
            state: Mutex::new((f64::MAX, Instant::now())),
        }
    }
}

impl RateLimiter {
    /// Whether one more request may pass under `(interval, burst)`.
    pub fn allow(&self, (interval, burst): (Duration, u32)) -> bool {
        let Ok(mut s) = self.state.lock() else {
            return true;
        };
        let now = Instant::now();
        let refill = now.duration_since(s.1).as_secs_f64() / interval.as_secs_f64();
        s.0 = (s.0.min(f64::from(burst)) + refill).min(f64::from(burst));
        s.1 = now;
        if s.0 >= 1.0 {
            s.0 -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    /// A self-signed server certificate and its key, as PEM.
    fn cert() -> (String, String) {
        let c = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        (c.cert.pem(), c.signing_key.serialize_pem())
    }

    /// A served certificate clients refuse for its dates is said where the configuration is
    /// described (at start, on a reload, by --check-config); node_exporter says nothing.
    #[test]
    fn an_expired_certificate_is_said() {
        let dir = tempfile::tempdir().unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        params.not_before = rcgen::date_time_ymd(2019, 1, 1);
        params.not_after = rcgen::date_time_ymd(2020, 2, 1);
        let key = rcgen::KeyPair::generate().unwrap();
        let old = params.self_signed(&key).unwrap();
        let day = |y, m, d| latlab_model::days_from_civil(y, m, d) * 86_400;
        assert_eq!(
            validity_of(old.der()),
            Some((day(2019, 1, 1), day(2020, 2, 1)))
        );
        // rcgen's default dates: UTCTime from 1975, GeneralizedTime to 4096.
        let (c, k) = cert();
        let der = rustls_pki_types::pem::PemObject::from_pem_slice(c.as_bytes())
            .map(|d: rustls_pki_types::CertificateDer<'static>| d.to_vec())
            .unwrap();
        assert_eq!(validity_of(&der), Some((day(1975, 1, 1), day(4096, 1, 1))));
        write(dir.path(), "k.pem", &k);
        write(dir.path(), "c.pem", &c);
        let tls = "tls_server_config:\n  cert_file: c.pem\n  key_file: k.pem\n";
        let fine = WebSecurity::load(&write(dir.path(), "web.yml", tls)).unwrap();
        assert!(!fine.describe().contains("WARNING"), "{}", fine.describe());
        write(dir.path(), "c.pem", &old.pem());
        write(dir.path(), "k.pem", &key.serialize_pem());
        let expired = WebSecurity::load(&write(dir.path(), "web.yml", tls)).unwrap();
        assert!(
            expired
                .describe()
                .ends_with("WARNING: the certificate expired on 2020-02-01: clients refuse it"),
            "{}",
            expired.describe()
        );
        assert_eq!(
            expired.validity_note(day(2018, 6, 1) as u64).as_deref(),
            Some("WARNING: the certificate is not valid before 2019-01-01: clients refuse it")
        );
    }

    fn err(dir: &Path, yaml: &str) -> String {
        let p = write(dir, "web.yml", yaml);
        match WebSecurity::load(&p) {
            Ok(_) => panic!("{yaml} loaded"),
            Err(e) => e,
        }
    }

    #[test]
    fn a_node_exporter_file_loads_with_files_relative_to_it() {
        let dir = tempfile::tempdir().unwrap();
        let (c, k) = cert();
        std::fs::create_dir(dir.path().join("tls")).unwrap();
        write(dir.path(), "tls/server.crt", &c);
        write(dir.path(), "tls/server.key", &k);
        let hash = bcrypt::hash("s3cret", 4).unwrap();
        let p = write(
            dir.path(),
            "web.yml",
            &format!(
                "tls_server_config:\n  cert_file: tls/server.crt\n  key_file: tls/server.key\n  \
                 min_version: TLS12\n  cipher_suites:\n    - TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256\n    \
                 - TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305\n  curve_preferences: [X25519, CurveP256]\n\
                 http_server_config:\n  http2: true\n  headers:\n    X-Frame-Options: deny\n\
                 basic_auth_users:\n  prometheus: {hash}\n"
            ),
        );
        let w = WebSecurity::load(&p).unwrap();
        assert!(w.tls.is_some());
        assert_eq!(w.client_auth, ClientAuth::None);
        assert_eq!(w.describe(), "TLS 1.2–1.3; basic auth (1 user)");
        assert_eq!(w.headers.len(), 1);
        let basic = |u: &str, p: &str| {
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"))
            )
        };
        assert!(w.authorized(Some(basic("prometheus", "s3cret").as_bytes())));
        // Again, from the cache of verified credentials.
        assert!(w.authorized(Some(basic("prometheus", "s3cret").as_bytes())));
        assert!(!w.authorized(Some(basic("prometheus", "wrong").as_bytes())));
        assert!(!w.authorized(Some(basic("nobody", "s3cret").as_bytes())));
        assert!(!w.authorized(Some(b"Bearer abc")));
        assert!(!w.authorized(None));
    }

    #[test]
    fn an_empty_tls_section_is_plain_http_as_in_the_toolkit() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "web.yml", "tls_server_config: {}\n");
        let w = WebSecurity::load(&p).unwrap();
        assert!(w.tls.is_none() && !w.requires_auth());
        assert_eq!(w.describe(), "plain HTTP");
        assert!(w.authorized(None));
    }

    /// A section of the wrong shape names the shape it takes, not a type of latlab's code.
    #[test]
    fn a_section_of_the_wrong_shape_names_what_it_takes() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "web.yml",
            "tls_server_config: [a]
",
        );
        let e = WebSecurity::load(&p).err().unwrap();
        assert!(
            e.contains("expected a mapping of cert_file, key_file"),
            "{e}"
        );
        assert!(!e.contains("Raw"), "{e}");
    }

    #[test]
    fn what_cannot_be_honoured_is_refused_naming_the_field_and_the_accepted_form() {
        let dir = tempfile::tempdir().unwrap();
        let (c, k) = cert();
        write(dir.path(), "c.pem", &c);
        write(dir.path(), "k.pem", &k);
        let tls = "tls_server_config:\n  cert_file: c.pem\n  key_file: k.pem\n";
        // Another certificate's key.
        write(dir.path(), "other.pem", &cert().1);
        let mut unnamed = Vec::new();
        for (yaml, needle) in [
            (
                "tls_server_config:\n  cert_file: c.pem\n  key_file: other.pem\n",
                "key_file: does not fit the certificate",
            ),
            (
                "tls_server_config:\n  cert_file: c.pem\n",
                "missing key_file or key",
            ),
            (
                &format!("{tls}  min_version: TLS10\n"),
                "min_version: TLS10: rustls offers only TLS 1.2 and 1.3",
            ),
            (
                &format!("{tls}  client_auth_type: RequireAnyClientCert\n"),
                "accepts certificates nobody verified",
            ),
            (
                &format!("{tls}  client_auth_type: RequireAndVerifyClientCert\n"),
                "needs client_ca_file",
            ),
            (
                &format!("{tls}  client_ca_file: c.pem\n"),
                "without a client_auth_type that verifies",
            ),
            (
                &format!("{tls}  cipher_suites: [TLS_RSA_WITH_AES_128_CBC_SHA]\n"),
                "not offered by rustls (accepted: TLS_ECDHE",
            ),
            (
                &format!("{tls}  curve_preferences: [CurveP521]\n"),
                "CurveP521: not offered",
            ),
            (
                &format!("{tls}  client_allowed_sans: [a]\n"),
                "client_allowed_sans: not supported",
            ),
            (
                "basic_auth_users:\n  a: plain\n",
                "basic_auth_users: a: not a bcrypt hash",
            ),
            (
                "http_server_config:\n  headers:\n    Server: x\n",
                "Server: not a header this file may set",
            ),
            (
                "rate_limit:\n  interval: 1s\n",
                "rate_limit.burst: 0 lets no request through",
            ),
            ("tls_config: {}\n", "unknown field `tls_config`"),
            (
                "tls_server_config:\n  cert_file: missing.pem\n  key_file: k.pem\n",
                "missing.pem: No such file",
            ),
        ] {
            let e = err(dir.path(), yaml);
            assert!(e.contains(needle), "{yaml}: {e}");
            assert!(!e.contains('\n'), "one line: {e}");
            if !e.contains("(accepted: ") {
                unnamed.push(e);
            }
        }
        assert!(unnamed.is_empty(), "no accepted form named: {unnamed:#?}");
    }

    #[test]
    fn a_changed_file_is_read_again_and_a_broken_one_keeps_the_one_before() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "web.yml", "");
        let watch = WebConfigWatch::new(&p, WebSecurity::load(&p).unwrap());
        assert!(!watch.current().requires_auth());
        let hash = bcrypt::hash("x", 4).unwrap();
        write(
            dir.path(),
            "web.yml",
            &format!("basic_auth_users:\n  u: {hash}\n"),
        );
        if let Ok(mut s) = watch.state.lock() {
            s.1 -= RECHECK;
        }
        assert!(watch.current().requires_auth(), "read again");
        write(dir.path(), "web.yml", "basic_auth_users: [\n");
        if let Ok(mut s) = watch.state.lock() {
            s.1 -= RECHECK;
        }
        assert!(watch.current().requires_auth(), "the one before stays");
    }

    #[test]
    fn the_rate_limit_lets_a_burst_through_then_one_per_interval() {
        let r = RateLimiter::default();
        let rate = (Duration::from_secs(3600), 3);
        assert_eq!((0..5).filter(|_| r.allow(rate)).count(), 3);
    }
}
