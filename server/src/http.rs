//! The HTTP API (docs/openapi.yaml): uploads from devices, the analyst
//! API behind a bearer token, `/metrics`, `/healthz` and the web page.

use crate::store::{Decoded, Item, Outcome, Store};
use crate::task::{Kind, MapDef, PeriodAgg, Task};
use axum::body::Bytes;
use axum::extract::{ConnectInfo, DefaultBodyLimit, FromRequest, Path, Query, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use geopriv::map::{MapAggregator, MapRelease, MapReport};
use geopriv::server::escape::Untrusted;
use geopriv::server::ingest::{Decoded as Record, FormatChoice, RecordReader};
use geopriv::{Report, ShortNumber};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Limits of the HTTP layer.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Largest request body in bytes (413 above).
    pub max_body_bytes: usize,
    /// Most records in one upload (413 above, nothing stored).
    pub max_batch: usize,
    /// Largest record in bytes (that record rejected, `too-long`).
    pub max_record_bytes: usize,
    /// Requests per second per client address (token bucket; 429 above).
    pub rate_per_client: f64,
    /// Burst of the bucket.
    pub burst: f64,
    /// Time to receive and answer a request (408 above).
    pub timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 4 << 20,
            max_batch: 1000,
            max_record_bytes: 64 << 10,
            rate_per_client: 2000.0,
            burst: 4000.0,
            timeout: Duration::from_secs(10),
        }
    }
}

/// Computed maps by (task index, period start): the n they were computed
/// from and the map.
type MapCache = HashMap<(usize, i64), (u64, Arc<serde_json::Value>)>;

/// Shared state of the handlers.
#[derive(Clone)]
pub struct App {
    /// The store.
    pub store: Store,
    /// The analysts' bearer token.
    pub token: Arc<String>,
    /// Limits.
    pub limits: Limits,
    buckets: Arc<Mutex<HashMap<IpAddr, (f64, Instant)>>>,
    /// Computed maps by (task, period): (n they were computed from, map).
    maps: Arc<Mutex<MapCache>>,
}

impl App {
    /// Handlers' state.
    pub fn new(store: Store, token: String, limits: Limits) -> App {
        App {
            store,
            token: Arc::new(token),
            limits,
            buckets: Arc::new(Mutex::new(HashMap::new())),
            maps: Arc::new(Mutex::new(HashMap::new())),
        }
    }
}

/// The router.
pub fn router(app: App) -> Router {
    let limits = app.limits.clone();
    // Uploads get the short timeout; analyst reads (a large map's FFT,
    // a big export) a longer one.
    let uploads = Router::new()
        .route("/v1/tasks/{task}/reports", post(upload))
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            limits.timeout,
        ));
    Router::new()
        .merge(uploads)
        .route("/", get(page))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route("/v1/tasks", get(list_tasks))
        .route("/v1/tasks/{task}/estimate", get(estimate))
        .route("/v1/tasks/{task}/map", get(map))
        .route("/v1/tasks/{task}/export", get(export))
        .route("/v1/tasks/{task}/state", get(state))
        .fallback(|| async { error(StatusCode::NOT_FOUND, "no such route") })
        .layer(middleware::from_fn_with_state(app.clone(), rate_limit))
        .layer(DefaultBodyLimit::max(limits.max_body_bytes))
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            Duration::from_secs(300),
        ))
        .layer(middleware::map_response(json_errors))
        .with_state(app)
}

/// The stable code of an error status (the `code` of every 4xx/5xx body).
///
/// | status | code |
/// |---|---|
/// | 400 | `bad-request` |
/// | 401 | `unauthorized` |
/// | 404 | `not-found` |
/// | 405 | `method-not-allowed` |
/// | 408 | `timeout` |
/// | 413 | `too-large` |
/// | 415 | `unsupported-media-type` |
/// | 422 | `unprocessable` |
/// | 429 | `rate-limited` |
/// | 503 | `unavailable` |
/// | other 4xx / 5xx | `client-error` / `server-error` |
///
/// ```
/// use axum::http::StatusCode;
/// assert_eq!(geopriv_server::http::error_code(StatusCode::PAYLOAD_TOO_LARGE), "too-large");
/// ```
pub fn error_code(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 => "bad-request",
        401 => "unauthorized",
        404 => "not-found",
        405 => "method-not-allowed",
        408 => "timeout",
        413 => "too-large",
        415 => "unsupported-media-type",
        422 => "unprocessable",
        429 => "rate-limited",
        503 => "unavailable",
        s if s < 500 => "client-error",
        _ => "server-error",
    }
}

/// An error answer: `{"code": error_code(status), "reason": escaped msg}`.
fn error(status: StatusCode, msg: &str) -> Response {
    let body = json!({ "code": error_code(status), "reason": Untrusted(msg).to_string() });
    (status, axum::Json(body)).into_response()
}

/// Largest error body of another layer read to become a `reason`.
const MAX_FOREIGN_ERROR: usize = 4096;

/// Every 4xx/5xx answer as JSON: an error answered by another layer than
/// our handlers (axum's rejections of a bad path, content type, body
/// limit or JSON, the timeout layers' empty 408, the 405 of a known path)
/// keeps its status and headers and gets the body
/// `{"code": error_code(status), "reason": its text, escaped}`.
async fn json_errors(resp: Response) -> Response {
    let status = resp.status();
    let is_json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let text = match axum::body::to_bytes(body, MAX_FOREIGN_ERROR).await {
        Ok(b) if !b.is_empty() => String::from_utf8_lossy(&b).into_owned(),
        Ok(_) => status.canonical_reason().unwrap_or("error").to_string(),
        Err(_) => "error text too long".to_string(),
    };
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    let body = json!({ "code": error_code(status), "reason": Untrusted(text.trim()).to_string() });
    Response::from_parts(parts, axum::body::Body::from(body.to_string()))
}

fn json_text(status: StatusCode, body: String) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

async fn rate_limit(
    State(app): State<App>,
    ConnectInfo(addr): ConnectInfo<SocketAddr>,
    req: Request,
    next: Next,
) -> Response {
    let allowed = {
        let mut b = match app.buckets.lock() {
            Ok(b) => b,
            Err(p) => p.into_inner(),
        };
        let now = Instant::now();
        if b.len() > 100_000 {
            // Bounded memory: forget idle clients.
            b.retain(|_, (_, t)| now.duration_since(*t) < Duration::from_secs(10));
        }
        let (tokens, last) = b.entry(addr.ip()).or_insert((app.limits.burst, now));
        *tokens = (*tokens + now.duration_since(*last).as_secs_f64() * app.limits.rate_per_client)
            .min(app.limits.burst);
        *last = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    };
    let resp = if allowed {
        next.run(req).await
    } else {
        let mut r = error(
            StatusCode::TOO_MANY_REQUESTS,
            "rate limit: slow down and retry",
        );
        r.headers_mut()
            .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
        r
    };
    if let Ok(mut m) = app.store.metrics.responses.lock() {
        *m.entry(resp.status().as_u16()).or_default() += 1;
    }
    resp
}

fn authorized(app: &App, headers: &HeaderMap) -> Result<(), Response> {
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    let want = app.token.as_bytes();
    // Compare in time independent of where they differ.
    let same = given.len() == want.len()
        && given
            .bytes()
            .zip(want.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0;
    if same {
        Ok(())
    } else {
        let mut r = error(StatusCode::UNAUTHORIZED, "a valid bearer token is required");
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer"),
        );
        Err(r)
    }
}

fn find_task(app: &App, id: &str) -> Result<(usize, Task), Response> {
    app.store
        .tasks
        .iter()
        .position(|t| t.def.id == id)
        .map(|i| (i, app.store.tasks[i].clone()))
        .ok_or_else(|| error(StatusCode::NOT_FOUND, "no such task"))
}

/// The task of an analyst request, after checking the token.
fn analyst_task(app: &App, headers: &HeaderMap, id: &str) -> Result<(usize, Task), Response> {
    authorized(app, headers)?;
    find_task(app, id)
}

/// Before an analyst read of the live aggregates: take in what another
/// collector on the same database committed ([`crate::store::Store::sync`]),
/// so a read after its acknowledged write counts it (attack9 O1: reads
/// showed what this collector saw at its own last write). 503 if the
/// writer cannot tell (the reason escaped by [`error`]).
async fn sync_live(app: &App) -> Result<(), Response> {
    app.store.sync().await.map_err(|e| {
        let mut r = error(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!(
                "the aggregates could not be brought up to date with the database ({e}); retry later"
            ),
        );
        r.headers_mut()
            .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
        r
    })
}

/// The live aggregates (a poisoned lock still holds consistent data: the
/// writer replaces it whole on failure).
fn read_live(app: &App) -> std::sync::RwLockReadGuard<'_, crate::store::Live> {
    match app.store.live.read() {
        Ok(l) => l,
        Err(p) => p.into_inner(),
    }
}

async fn page() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'",
            ),
        ],
        include_str!("page.html"),
    )
        .into_response()
}

async fn healthz() -> Response {
    axum::Json(json!({"status": "ok"})).into_response()
}

async fn metrics(State(app): State<App>, headers: HeaderMap) -> Response {
    if let Err(r) = authorized(&app, &headers) {
        return r;
    }
    let m = &app.store.metrics;
    let mut out = String::new();
    let _ = writeln!(out, "# HELP geopriv_reports_total Upload records by task and outcome (accepted, duplicate, or the rejection code).");
    let _ = writeln!(out, "# TYPE geopriv_reports_total counter");
    if let Ok(r) = m.reports.lock() {
        for ((task, what), n) in r.iter() {
            let _ = writeln!(
                out,
                "geopriv_reports_total{{task=\"{task}\",outcome=\"{what}\"}} {n}"
            );
        }
    }
    let _ = writeln!(out, "# TYPE geopriv_commits_total counter");
    let _ = writeln!(
        out,
        "geopriv_commits_total {}",
        m.commits.load(Ordering::Relaxed)
    );
    let _ = writeln!(out, "# TYPE geopriv_commit_failures_total counter");
    let _ = writeln!(
        out,
        "geopriv_commit_failures_total {}",
        m.commit_failures.load(Ordering::Relaxed)
    );
    let _ = writeln!(out, "# HELP geopriv_store_reloads_total Rebuilds of the report ids and aggregates because another connection wrote to the database (0 with one collector per database).");
    let _ = writeln!(out, "# TYPE geopriv_store_reloads_total counter");
    let _ = writeln!(
        out,
        "geopriv_store_reloads_total {}",
        m.reloads.load(Ordering::Relaxed)
    );
    let _ = writeln!(out, "# TYPE geopriv_http_responses_total counter");
    if let Ok(r) = m.responses.lock() {
        for (status, n) in r.iter() {
            let _ = writeln!(
                out,
                "geopriv_http_responses_total{{status=\"{status}\"}} {n}"
            );
        }
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], out).into_response()
}

async fn list_tasks(State(app): State<App>, headers: HeaderMap) -> Response {
    if let Err(r) = authorized(&app, &headers) {
        return r;
    }
    if let Err(r) = sync_live(&app).await {
        return r;
    }
    let live = read_live(&app);
    let tasks: Vec<_> = app
        .store
        .tasks
        .iter()
        .zip(&live.tasks)
        .map(|(t, l)| {
            json!({
                "id": t.def.id,
                "kind": match t.kind { Kind::Value { .. } => "value", Kind::Map { .. } => "map" },
                "definition": t.def,
                "reports": l.periods.values().map(|p| p.n).sum::<u64>(),
                "periods": l.periods.len(),
            })
        })
        .collect();
    axum::Json(json!({ "tasks": tasks })).into_response()
}

/// Upload response.
#[derive(Serialize, Deserialize, Debug, Default)]
pub struct UploadAnswer {
    /// Reports stored now.
    pub accepted: u64,
    /// Record numbers whose report id was stored before (counted once).
    pub duplicates: Vec<u64>,
    /// Refused records.
    pub rejected: Vec<Rejected>,
    /// The period the accepted reports count in.
    pub period: i64,
}

/// One refused record.
#[derive(Serialize, Deserialize, Debug)]
pub struct Rejected {
    /// Record number in the request (1-based; blank lines count).
    pub index: u64,
    /// Stable code (as in `/metrics`).
    pub code: String,
    /// Why, escaped.
    pub reason: String,
}

fn reject(index: u64, code: &str, reason: &str) -> Rejected {
    Rejected {
        index,
        code: code.to_string(),
        reason: Untrusted(reason).to_string(),
    }
}

/// Decode a value task's upload: the reports to store and the refusals.
fn decode_values(
    task: &Task,
    body: &[u8],
    binary: bool,
    limits: &Limits,
) -> Result<(Vec<Item>, Vec<Rejected>), Response> {
    let Kind::Value {
        query_id,
        mechanism,
        policy,
        ..
    } = &task.kind
    else {
        return Err(error(StatusCode::INTERNAL_SERVER_ERROR, "not a value task"));
    };
    let format = if binary {
        FormatChoice::Binary
    } else {
        FormatChoice::Json
    };
    let mut reader = RecordReader::new(body, format, limits.max_record_bytes)
        .map_err(|e| error(StatusCode::BAD_REQUEST, &e.to_string()))?;
    let (mut items, mut rejected) = (Vec::new(), Vec::new());
    let mut records = 0usize;
    while let Some((index, rec)) = reader
        .next_record()
        .map_err(|e| error(StatusCode::BAD_REQUEST, &e.to_string()))?
    {
        let r: Report = match rec {
            Record::Skipped => continue,
            Record::Rejected(why) => {
                rejected.push(reject(index, why.code(), &why.to_string()));
                records += 1;
                continue;
            }
            Record::Report(r) => r,
        };
        records += 1;
        if records > limits.max_batch {
            return Err(error(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!(
                    "more than {} records in one request: nothing stored, split the batch",
                    limits.max_batch
                ),
            ));
        }
        if r.query.canonical_id() != *query_id
            || r.mechanism != *mechanism
            || r.epsilon.to_bits() != task.def.epsilon.to_bits()
            || r.delta.to_bits() != task.def.delta.to_bits()
        {
            rejected.push(reject(
                index,
                "task-mismatch",
                &format!(
                    "report of ({}, {}, ε {}, δ {}), the task collects ({}, {}, ε {}, δ {})",
                    r.query.canonical_id(),
                    r.mechanism.as_str(),
                    ShortNumber(r.epsilon),
                    ShortNumber(r.delta),
                    query_id,
                    mechanism.as_str(),
                    ShortNumber(task.def.epsilon),
                    ShortNumber(task.def.delta)
                ),
            ));
            continue;
        }
        if let Err(why) = policy.validate(&r) {
            rejected.push(reject(index, why.code(), &why.to_string()));
            continue;
        }
        let Some(id) = r.report_id else {
            rejected.push(reject(
                index,
                "missing-report-id",
                "report without a report_id (format version 1): a collector cannot count it exactly once",
            ));
            continue;
        };
        items.push(Item {
            index,
            id,
            body: r.to_json_line(),
            report: Decoded::Value(r),
        });
    }
    Ok((items, rejected))
}

/// Decode a map task's upload (JSON lines of map reports).
fn decode_maps(
    task: &Task,
    body: &[u8],
    limits: &Limits,
) -> Result<(Vec<Item>, Vec<Rejected>), Response> {
    let Kind::Map { tag, mechanism, .. } = &task.kind else {
        return Err(error(StatusCode::INTERNAL_SERVER_ERROR, "not a map task"));
    };
    let (mut items, mut rejected) = (Vec::new(), Vec::new());
    let mut records = 0usize;
    for (i, line) in body.split(|&b| b == b'\n').enumerate() {
        let index = i as u64 + 1;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(|b| b.is_ascii_whitespace()) {
            continue;
        }
        records += 1;
        if records > limits.max_batch {
            return Err(error(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!(
                    "more than {} records in one request: nothing stored, split the batch",
                    limits.max_batch
                ),
            ));
        }
        if line.len() > limits.max_record_bytes {
            rejected.push(reject(
                index,
                "too-long",
                &format!(
                    "record of {} bytes, the limit is {}",
                    line.len(),
                    limits.max_record_bytes
                ),
            ));
            continue;
        }
        let Ok(text) = std::str::from_utf8(line) else {
            rejected.push(reject(index, "not-utf8", "record is not UTF-8"));
            continue;
        };
        let r: MapReport = match serde_json::from_str(text) {
            Ok(r) => r,
            Err(e) => {
                rejected.push(reject(index, "malformed", &e.to_string()));
                continue;
            }
        };
        if r.set != *tag
            || r.mechanism != *mechanism
            || r.epsilon.to_bits() != task.def.epsilon.to_bits()
        {
            rejected.push(reject(
                index,
                "task-mismatch",
                "map report of another grid, mechanism or per-device ε than the task's",
            ));
            continue;
        }
        let Some(id) = r.report_id else {
            rejected.push(reject(
                index,
                "missing-report-id",
                "map report without a report_id: a collector cannot count it exactly once",
            ));
            continue;
        };
        let body = serde_json::to_string(&r).unwrap_or_default();
        items.push(Item {
            index,
            id,
            body,
            report: Decoded::Map(r),
        });
    }
    Ok((items, rejected))
}

/// How an upload's body is read, from its headers alone (so a refusal
/// comes before the body is read): `Ok(true)` binary frames, `Ok(false)`
/// JSON lines, `Err(why)` for 415.
///
/// - `Content-Encoding` other than `identity`: refused (no request
///   decompression; a compressed body was read as plain bytes and every
///   record rejected one by one with a 200, attack9 4; RFC 9110 §8.4).
/// - `Content-Type` given more than once: refused (the first one used to
///   win, so `octet-stream` then `x-ndjson` was read as binary; attack9
///   O2). The media type is case-insensitive.
/// - JSON (`application/x-ndjson`, `application/jsonl`,
///   `application/json`) with a `charset` parameter other than `utf-8`
///   (case-insensitive, quoted or not): refused (a UTF-16 body was read as
///   UTF-8 and rejected record by record; attack9 O2). Other parameters
///   are ignored, as are parameters of `application/octet-stream`.
///
/// ```text
/// application/x-ndjson; charset="UTF-8"   -> Ok(false)
/// application/x-ndjson; charset=utf-16    -> Err(415)
/// application/octet-stream                -> Ok(true)
/// ```
fn upload_format(headers: &HeaderMap) -> Result<bool, &'static str> {
    // Every Content-Encoding field, not only the first: two fields
    // `identity` and `gzip` are the list "identity, gzip" (RFC 9110 §5.3),
    // a gzip body (attack11: the first field alone let it through).
    if headers.get_all(header::CONTENT_ENCODING).iter().any(|enc| {
        !enc.to_str()
            .is_ok_and(|e| e.trim().eq_ignore_ascii_case("identity"))
    }) {
        return Err("Content-Encoding is not supported: send the body uncompressed");
    }
    const WHICH: &str =
        "send application/x-ndjson (JSON lines) or application/octet-stream (binary frames)";
    let mut ctypes = headers.get_all(header::CONTENT_TYPE).iter();
    let ctype = ctypes.next();
    if ctypes.next().is_some() {
        return Err("Content-Type was given more than once: send it once");
    }
    let ctype = ctype.and_then(|v| v.to_str().ok()).unwrap_or("");
    let mut parts = ctype.split(';');
    let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
    let binary = match media.as_str() {
        "application/x-ndjson" | "application/jsonl" | "application/json" => false,
        "application/octet-stream" => true,
        _ => return Err(WHICH),
    };
    if !binary {
        for p in parts {
            let (name, value) = p.split_once('=').unwrap_or((p, ""));
            if name.trim().eq_ignore_ascii_case("charset") {
                let v = value.trim();
                let v = v
                    .strip_prefix('"')
                    .and_then(|v| v.strip_suffix('"'))
                    .unwrap_or(v);
                if !v.eq_ignore_ascii_case("utf-8") {
                    return Err("JSON lines are read as UTF-8: send charset=utf-8 or no charset");
                }
            }
        }
    }
    Ok(binary)
}

async fn upload(State(app): State<App>, Path(task_id): Path<String>, request: Request) -> Response {
    let (ti, task) = match find_task(&app, &task_id) {
        Ok(t) => t,
        Err(r) => return r,
    };
    // The headers decide first: a refused upload is answered before its
    // body is read (or waited for).
    let binary = match upload_format(request.headers()) {
        Ok(b) => b,
        Err(why) => return error(StatusCode::UNSUPPORTED_MEDIA_TYPE, why),
    };
    // Bytes honours DefaultBodyLimit (413) as the extractor did.
    let body = match Bytes::from_request(request, &()).await {
        Ok(b) => b,
        Err(rejection) => return rejection.into_response(),
    };
    let limits = app.limits.clone();
    let decoded = match task.kind {
        Kind::Value { .. } => decode_values(&task, &body, binary, &limits),
        Kind::Map { .. } if binary => Err(error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "map reports are JSON lines (application/x-ndjson)",
        )),
        Kind::Map { .. } => decode_maps(&task, &body, &limits),
    };
    let (items, mut rejected) = match decoded {
        Ok(x) => x,
        Err(r) => return r,
    };
    for r in &rejected {
        app.store.metrics.count(&task.def.id, &r.code, 1);
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let period = task.period_of(now);
    let outcomes = match app.store.submit(ti, period, items).await {
        Ok(o) => o,
        Err(e) => {
            let mut r = error(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!(
                    "nothing of this request was stored ({}); retry later with the same report ids",
                    Untrusted(&e)
                ),
            );
            r.headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
            return r;
        }
    };
    let mut answer = UploadAnswer {
        period,
        ..Default::default()
    };
    for (index, o) in outcomes {
        match o {
            Outcome::Accepted => answer.accepted += 1,
            Outcome::Duplicate => answer.duplicates.push(index),
            Outcome::Rejected { code, reason } => rejected.push(reject(index, code, &reason)),
        }
    }
    rejected.sort_by_key(|r| r.index);
    answer.rejected = rejected;
    axum::Json(answer).into_response()
}

/// The end of the period starting at `start` (unix seconds): `start +
/// period`, saturated at `i64::MAX`. A task's period is at most `i64::MAX`
/// (`Task::new`), but a start read back from the database is whatever the
/// file holds (a hand-edited row near `i64::MAX` made this sum overflow).
///
/// ```text
/// period_end(86_400, task with period 86_400) == 172_800
/// period_end(i64::MAX - 10, task with period 86_400) == i64::MAX
/// ```
fn period_end(start: i64, task: &Task) -> i64 {
    start.saturating_add(i64::try_from(task.def.period).unwrap_or(i64::MAX))
}

/// `?period=` (unix seconds of a period's start).
#[derive(Deserialize, Debug, Default)]
pub struct PeriodQuery {
    /// The period.
    pub period: Option<i64>,
    /// Export: rows after this sequence number.
    pub after: Option<i64>,
    /// Export: at most this many rows (default and maximum 100000).
    pub limit: Option<i64>,
}

/// The JSON estimate lines of one period of a value task (exactly
/// `geopriv aggregate`'s output lines on the period's accepted reports).
pub fn value_lines(agg: &geopriv::server::ingest::ReportAggregator) -> Vec<String> {
    agg.estimates().iter().map(|g| g.to_json_line()).collect()
}

async fn estimate(
    State(app): State<App>,
    Path(task_id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let (ti, task) = match analyst_task(&app, &headers, &task_id) {
        Ok(t) => t,
        Err(r) => return r,
    };
    if let Err(r) = sync_live(&app).await {
        return r;
    }
    let live = read_live(&app);
    let mut periods = Vec::new();
    for (&start, p) in &live.tasks[ti].periods {
        let mut entry = json!({
            "start": start,
            "end": period_end(start, &task),
            "n": p.n,
            "per_device_epsilon": task.def.epsilon,
            "per_device_delta": task.def.delta,
        });
        if p.n < task.def.min_batch {
            entry["status"] = json!("not enough reports");
            entry["needed"] = json!(task.def.min_batch);
        } else {
            entry["status"] = json!("published");
            match &p.agg {
                PeriodAgg::Value(a) => {
                    let lines = value_lines(a);
                    let line = lines.into_iter().next().unwrap_or_default();
                    entry["estimate_line"] = json!(line);
                    entry["estimate"] =
                        serde_json::from_str(&line).unwrap_or(serde_json::Value::Null);
                }
                PeriodAgg::Map(_) => {
                    entry["map"] = json!(format!("/v1/tasks/{}/map?period={start}", task.def.id));
                }
            }
        }
        periods.push(entry);
    }
    axum::Json(json!({
        "task": task.def.id,
        "min_batch": task.def.min_batch,
        "period_seconds": task.def.period,
        "standard_errors": "each period's from its own reports; periods are independent only if devices report once per period",
        "periods": periods,
    }))
    .into_response()
}

/// The map JSON of `geopriv map aggregate` for these reports (the same
/// fields, computed the same way).
pub fn map_json(
    task: &Task,
    def: &MapDef,
    agg: &MapAggregator,
) -> Result<serde_json::Value, String> {
    let set = def.set()?;
    let mech = def.mechanism()?;
    let eps = task.def.epsilon;
    let total = MapRelease::new(set.clone(), mech, eps)
        .map_err(|e| e.to_string())?
        .per_device_total();
    let mut parts = None;
    let mut line = None;
    let est = match agg.mapper().map_err(|e| e.to_string())? {
        Some(m) => {
            parts = Some(json!({
                "fft": m.fft_len(), "bins": m.counts().spec().bins(),
                "outside": m.counts().outside(),
            }));
            match def.lambda {
                Some(l) => {
                    let k = agg.kernel(l).map_err(|e| e.to_string())?;
                    m.estimate(&k).map_err(|e| e.to_string())?
                }
                None => {
                    // The planner's pick, EM included, as `geopriv map
                    // aggregate` makes it (the plan has already run EM).
                    // Before, a pick of EM served the λ = 1 map (attack13
                    // F2, docs/ATTACK-13.md): the noisiest kernel map.
                    let (est, p) = agg.planned_estimate_with(&m).map_err(|e| e.to_string())?;
                    line = p.map(|p| p.line);
                    est
                }
            }
        }
        None => agg.estimate(None).map_err(|e| e.to_string())?,
    };
    let out = json!({
        "per_device_epsilon": eps,
        "accounting": total.accounting,
        "mechanism": mech.name(),
        "n": est.n,
        "lambda": est.lambda,
        "estimator": if est.em_iterations.is_some() { "em" } else { "kernel" },
        "em_iterations": est.em_iterations,
        "grid": def.grid,
        // null: no discretisation bound is stated (docs/MATH.md §9.3).
        "discretisation_bound": est.discretisation_bound,
        "binning": parts,
        "values": est.values,
        "standard_errors": est.standard_errors,
    });
    // EM's intervals are the λ = 1 map's, centred here (docs/MATH.md
    // §9.7, branch emk1); absent for the kernel maps.
    let mut out = out;
    if let Some(c) = &est.interval_centres {
        out["interval_centres"] = json!(c);
    }
    // The effective reports per cell read from the reports, and the cells
    // below m* = ln 20, whose standard errors are widened (docs/MATH.md
    // §9.7 "sparse24"; as `geopriv map aggregate`); absent without bins.
    if let (Some(m), Some(thin)) = (&est.effective_reports, est.thin_cells()) {
        out["effective_reports"] = json!(m);
        out["effective_reports_threshold"] = json!(geopriv::map::EFFECTIVE_REPORTS_THRESHOLD);
        out["thin_cells"] = json!(thin);
    }
    let _ = line;
    Ok(out)
}

async fn map(
    State(app): State<App>,
    Path(task_id): Path<String>,
    Query(q): Query<PeriodQuery>,
    headers: HeaderMap,
) -> Response {
    let (ti, task) = match analyst_task(&app, &headers, &task_id) {
        Ok(t) => t,
        Err(r) => return r,
    };
    let Some(def) = task.def.map.clone() else {
        return error(StatusCode::NOT_FOUND, "not a map task");
    };
    if let Err(r) = sync_live(&app).await {
        return r;
    }
    let agg = {
        let live = read_live(&app);
        let periods = &live.tasks[ti].periods;
        let chosen = match q.period {
            Some(p) => periods.get_key_value(&p),
            None => periods
                .iter()
                .rev()
                .find(|(_, p)| p.n >= task.def.min_batch),
        };
        match chosen {
            None => None,
            Some((&start, p)) if p.n >= task.def.min_batch => match &p.agg {
                PeriodAgg::Map(m) => Some(Ok((start, m.clone()))),
                PeriodAgg::Value(_) => None,
            },
            Some((&start, p)) => Some(Err((start, p.n))),
        }
    };
    let (start, agg) = match agg {
        None => {
            return axum::Json(json!({"status": "not enough reports", "needed": task.def.min_batch, "n": 0}))
                .into_response()
        }
        Some(Err((start, n))) => {
            return axum::Json(json!({"status": "not enough reports", "start": start, "needed": task.def.min_batch, "n": n}))
                .into_response()
        }
        Some(Ok(x)) => x,
    };
    let n = agg.accepted();
    let cached = app.maps.lock().ok().and_then(|c| {
        c.get(&(ti, start))
            .filter(|(cn, _)| *cn == n)
            .map(|(_, m)| m.clone())
    });
    let res = match cached {
        Some(m) => Ok(Ok((m, def))),
        None => {
            // The FFT map takes a while on large grids: off the async threads.
            let t2 = task.clone();
            tokio::task::spawn_blocking(move || {
                map_json(&t2, &def, &agg).map(|m| (Arc::new(m), def))
            })
            .await
        }
    };
    if let (Ok(Ok((m, _))), Ok(mut c)) = (&res, app.maps.lock()) {
        c.insert((ti, start), (n, m.clone()));
    }
    match res {
        Ok(Ok((m, def))) => {
            let body = json!({
                "status": "published",
                "task": task.def.id,
                "start": start,
                "end": period_end(start, &task),
                "bbox": def.bbox,
                "grid_points": def.grid.max(2),
                "map": *m,
            });
            axum::Json(body).into_response()
        }
        Ok(Err(e)) => error(StatusCode::INTERNAL_SERVER_ERROR, &e),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}

async fn export(
    State(app): State<App>,
    Path(task_id): Path<String>,
    Query(q): Query<PeriodQuery>,
    headers: HeaderMap,
) -> Response {
    let (_, task) = match analyst_task(&app, &headers, &task_id) {
        Ok(t) => t,
        Err(r) => return r,
    };
    let path = app.store.path().to_path_buf();
    let limit = q.limit.unwrap_or(100_000).clamp(1, 100_000);
    let after = q.after.unwrap_or(0);
    let res = tokio::task::spawn_blocking(move || -> rusqlite::Result<(String, Option<i64>)> {
        let conn = crate::store::reader(&path)?;
        let mut stmt = conn.prepare(
            "SELECT seq, body FROM reports WHERE task = ?1 AND seq > ?2 AND (?3 IS NULL OR period = ?3) ORDER BY seq LIMIT ?4",
        )?;
        let mut rows = stmt.query(rusqlite::params![task.def.id, after, q.period, limit])?;
        let (mut out, mut last, mut count) = (String::new(), None, 0);
        while let Some(row) = rows.next()? {
            let seq: i64 = row.get(0)?;
            let body: String = row.get(1)?;
            out.push_str(&body);
            out.push('\n');
            last = Some(seq);
            count += 1;
        }
        Ok((out, if count == limit { last } else { None }))
    })
    .await;
    match res {
        Ok(Ok((body, next))) => {
            let mut r = ([(header::CONTENT_TYPE, "application/x-ndjson")], body).into_response();
            if let Some(n) = next {
                if let Ok(v) = header::HeaderValue::from_str(&n.to_string()) {
                    r.headers_mut().insert("x-next-after", v);
                }
            }
            r
        }
        Ok(Err(e)) => error(StatusCode::SERVICE_UNAVAILABLE, &e.to_string()),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}

/// A collector's partial state of one task (`GET .../state`), merged
/// exactly by `geopriv-serve merge`.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct TaskState {
    /// The task's canonical definition (a merge refuses different ones).
    pub definition: String,
    /// Per period.
    pub periods: Vec<PeriodPart>,
}

/// One period of a [`TaskState`]: `state` for a value task, `map` for a
/// map task.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct PeriodPart {
    /// Period start.
    pub start: i64,
    /// Reports in it.
    pub n: u64,
    /// The exact aggregate state (value tasks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<geopriv::server::ingest::AggregatorState>,
    /// The exact map state (map tasks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub map: Option<MapPart>,
}

/// The exact partial state of a map task's period: the binned integer
/// counts (noise a priori on a kernel grid, sparse) or the per-cell exact
/// sums (the other mechanisms), and the report count. Merging adds the
/// integers and the exact sums, so the merged map is bit for bit the map
/// of one collector that received every report.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MapPart {
    /// Reports in it.
    pub accepted: u64,
    /// (bin index, count > 0), increasing index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bins: Option<Vec<(u64, u64)>>,
    /// Reports binned outside the grid's bins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outside: Option<u64>,
    /// Per-cell exact sums.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cells: Option<Vec<geopriv::Aggregator>>,
    /// The offsets' moments of the bins (noise a priori on a kernel grid,
    /// where the planner reads them): [index, "Σq0", "Σq1", "Σq0²",
    /// "Σq1²", "Σq0q1"] per bin with moments, increasing index, i128 as
    /// decimal strings; absent in older states and below the planner's
    /// gate (branch state25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moments: Option<Vec<geopriv::map::MomentRow>>,
}

impl MapPart {
    /// The part of `agg`.
    pub fn of(agg: &MapAggregator) -> MapPart {
        match agg.counts() {
            Some(c) => MapPart {
                accepted: agg.accepted(),
                bins: Some(c.sparse_counts()),
                outside: Some(c.outside()),
                cells: None,
                moments: c.sparse_moments(),
            },
            None => MapPart {
                accepted: agg.accepted(),
                bins: None,
                outside: None,
                cells: Some(agg.cells().to_vec()),
                moments: None,
            },
        }
    }

    /// The aggregator of `task` (a map task) holding this part; refused:
    /// bins out of the grid, out of order or empty, counts or cells that
    /// disagree with `accepted`, the other kind of state.
    pub fn restore(&self, task: &Task) -> Result<MapAggregator, String> {
        let Kind::Map { set, mechanism, .. } = &task.kind else {
            return Err("a map state for a value task".into());
        };
        let empty = MapAggregator::new(set.clone(), *mechanism, task.def.epsilon)
            .map_err(|e| e.to_string())?;
        let counts = match (&self.bins, empty.counts()) {
            (Some(sparse), Some(c)) => Some(
                geopriv::map::BinnedCounts::from_sparse(
                    c.spec().clone(),
                    sparse,
                    self.outside.unwrap_or(0),
                    self.moments.as_deref(),
                )
                .map_err(|e| format!("map state refused: {e}"))?,
            ),
            (None, None) if self.moments.is_none() => None,
            (None, None) => return Err("map state refused: moments without bins".into()),
            _ => return Err("map state refused: bins for another mechanism".into()),
        };
        MapAggregator::restore_binned(
            set.clone(),
            *mechanism,
            task.def.epsilon,
            geopriv::map::DEFAULT_MAX_BINS,
            counts,
            self.cells.clone().unwrap_or_default(),
            self.accepted,
        )
        .map_err(|e| format!("map state refused: {e}"))
    }
}

async fn state(
    State(app): State<App>,
    Path(task_id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let (ti, task) = match analyst_task(&app, &headers, &task_id) {
        Ok(t) => t,
        Err(r) => return r,
    };
    if let Err(r) = sync_live(&app).await {
        return r;
    }
    let live = read_live(&app);
    let mut periods = Vec::new();
    for (&start, p) in &live.tasks[ti].periods {
        let (state, map) = match &p.agg {
            PeriodAgg::Value(a) => (Some(a.state()), None),
            PeriodAgg::Map(m) => (None, Some(MapPart::of(m))),
        };
        periods.push(PeriodPart {
            start,
            n: p.n,
            state,
            map,
        });
    }
    let s = TaskState {
        definition: task.canonical.clone(),
        periods,
    };
    json_text(
        StatusCode::OK,
        serde_json::to_string(&s).unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                header::HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    /// attack9 O2: a JSON upload's charset must be utf-8 (any case,
    /// quoted or not); a repeated Content-Type is refused; other
    /// parameters and octet-stream's parameters are ignored.
    #[test]
    fn an_upload_is_read_only_as_its_headers_allow() {
        let ct = |v: &str| upload_format(&headers(&[("content-type", v)]));
        for ok in [
            "application/x-ndjson",
            "Application/X-NDJSON",
            "application/x-ndjson; charset=utf-8",
            "application/x-ndjson;charset=UTF-8",
            "application/jsonl; Charset=\"Utf-8\"",
            "application/json; profile=x; charset = utf-8 ",
        ] {
            assert_eq!(ct(ok), Ok(false), "{ok}");
        }
        assert_eq!(ct("application/octet-stream"), Ok(true));
        assert_eq!(ct("application/octet-stream; charset=utf-16"), Ok(true));
        for bad in [
            "application/x-ndjson; charset=utf-16",
            "application/x-ndjson; charset=UTF-16LE",
            "application/x-ndjson; charset=iso-8859-1",
            "application/x-ndjson; charset=utf8",
            "application/x-ndjson; charset=",
            "application/x-ndjson; charset",
            "application/json; charset=utf-8; charset=utf-16",
            "text/plain",
            "",
        ] {
            assert!(ct(bad).is_err(), "{bad}");
        }
        assert!(upload_format(&HeaderMap::new()).is_err());
        for twice in [
            ["application/octet-stream", "application/x-ndjson"],
            ["application/x-ndjson", "application/x-ndjson"],
        ] {
            let h = headers(&[("content-type", twice[0]), ("content-type", twice[1])]);
            assert!(
                upload_format(&h).unwrap_err().contains("more than once"),
                "{twice:?}"
            );
        }
        let h = headers(&[
            ("content-type", "application/x-ndjson"),
            ("content-encoding", "gzip"),
        ]);
        assert!(upload_format(&h).unwrap_err().contains("Content-Encoding"));
    }

    /// attack13 F2 (docs/ATTACK-13.md): a map task without a fixed λ
    /// serves the planner's pick as `geopriv map aggregate` does. When the
    /// planner picked EM the collector served the λ = 1 kernel map (the
    /// pick's λ is None for EM, read as 1.0): 20 devices at εh ≈ 0.94,
    /// EM picked at a predicted 7.3e-5 against the plain map's 1.2e-4, the
    /// unbiased map's noise served instead.
    #[test]
    fn a_map_task_serves_the_planners_pick_em_included() {
        const N_DEV: u64 = 20;
        use rand::SeedableRng;
        let def: crate::task::TaskDef = serde_json::from_value(json!({
            "id": "m", "epsilon": 0.002, "min_batch": 1, "period": 86400,
            "map": {"bbox": [0.0, 20000.0, 0.0, 20000.0], "grid": 61, "mechanism": "a-priori"}
        }))
        .unwrap();
        let task = Task::new(def).unwrap();
        let map = task.def.map.clone().unwrap();
        let crate::task::PeriodAgg::Map(mut agg) = task.new_agg() else {
            panic!("a map task")
        };
        let dev = MapRelease::new(map.set().unwrap(), map.mechanism().unwrap(), 0.002).unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(13);
        for i in 0..N_DEV {
            let x = [(i * 7919 % 20_000) as f64, (i * 104_729 % 20_000) as f64];
            let r = dev.release_unmetered(&x, &mut rng).unwrap();
            agg.add(&r).unwrap();
        }
        let (want, p) = agg.planned_estimate().unwrap();
        assert!(
            p.unwrap().pick().em_iterations.is_some(),
            "the planner no longer picks EM here: the test needs another case"
        );
        let got = map_json(&task, &map, &agg).unwrap();
        let values: Vec<f64> = serde_json::from_value(got["values"].clone()).unwrap();
        assert!(
            values == want.values,
            "served λ = {} instead of the pick (EM)",
            got["lambda"]
        );
        assert_eq!(got["estimator"], "em");
    }
}
