//! A load generator of the project's own (`geopriv-serve bench`): valid
//! reports of a value task with fresh random ids, in batches over
//! keep-alive HTTP/1.1 connections, paced to a target rate or as fast as
//! the server answers, with per-request latency measured from the
//! *scheduled* send time (no coordinated omission). With `retry`, a batch
//! that fails (connection refused or reset, 5xx, 429) is sent again with
//! the same report ids until acknowledged, and acknowledged ids are
//! appended to a log: the crash test checks that every one is counted
//! exactly once.

use geopriv::{MechanismName, QueryDescriptor, Report};
use rand::Rng;
use std::io::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// What to send.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    /// host:port.
    pub addr: String,
    /// Task id.
    pub task: String,
    /// Query, mechanism, ε, δ of the task.
    pub query: QueryDescriptor,
    /// Mechanism.
    pub mechanism: MechanismName,
    /// ε.
    pub epsilon: f64,
    /// δ.
    pub delta: f64,
    /// Reports per request.
    pub batch: usize,
    /// Concurrent connections.
    pub connections: usize,
    /// Target reports per second in total (0: as fast as possible).
    pub rate: f64,
    /// How long to send.
    pub duration: Duration,
    /// Retry failed batches with the same ids until acknowledged.
    pub retry: bool,
    /// Append acknowledged ids (hex, one per line) here.
    pub ack_log: Option<std::path::PathBuf>,
    /// Binary frames instead of JSON lines.
    pub binary: bool,
}

/// What happened.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct BenchResult {
    /// Requests acknowledged (200).
    pub requests: u64,
    /// Reports in them acknowledged as accepted.
    pub accepted: u64,
    /// ... as duplicates (retries of batches stored before).
    pub duplicates: u64,
    /// ... rejected (should be 0).
    pub rejected: u64,
    /// Failed attempts (retried when `retry`).
    pub failures: u64,
    /// Wall time in seconds.
    pub seconds: f64,
    /// Acknowledged reports per second.
    pub reports_per_second: f64,
    /// Latency percentiles in milliseconds (50, 90, 99, 99.9, max).
    pub latency_ms: [f64; 5],
}

async fn post(
    conn: &mut Option<BufReader<TcpStream>>,
    addr: &str,
    path: &str,
    ctype: &str,
    body: &[u8],
) -> std::io::Result<(u16, Vec<u8>)> {
    if conn.is_none() {
        let s = TcpStream::connect(addr).await?;
        s.set_nodelay(true)?;
        *conn = Some(BufReader::new(s));
    }
    let Some(c) = conn.as_mut() else {
        return Err(std::io::Error::other("no connection"));
    };
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let mut msg = head.into_bytes();
    msg.extend_from_slice(body);
    c.get_mut().write_all(&msg).await?;
    let mut line = String::new();
    if c.read_line(&mut line).await? == 0 {
        return Err(std::io::Error::other("connection closed"));
    }
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("bad status line {line:?}")))?;
    let mut len = 0usize;
    let mut close = false;
    loop {
        line.clear();
        if c.read_line(&mut line).await? == 0 {
            return Err(std::io::Error::other("connection closed in headers"));
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let lower = l.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            len = v.trim().parse().unwrap_or(0);
        }
        if lower.starts_with("connection:") && lower.contains("close") {
            close = true;
        }
    }
    let mut buf = vec![0; len];
    c.read_exact(&mut buf).await?;
    if close {
        *conn = None;
    }
    Ok((status, buf))
}

/// Run the load; returns the summary.
pub async fn run(cfg: BenchConfig) -> BenchResult {
    let start = Instant::now();
    let result = Arc::new(Mutex::new(BenchResult::default()));
    let latencies = Arc::new(Mutex::new(Vec::<f64>::new()));
    let log = cfg.ack_log.as_ref().map(|p| {
        Arc::new(Mutex::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .expect("ack log opens"),
        ))
    });
    let mut handles = Vec::new();
    for c in 0..cfg.connections {
        let cfg = cfg.clone();
        let (result, latencies, log) = (result.clone(), latencies.clone(), log.clone());
        handles.push(tokio::spawn(async move {
            let mut rng = geopriv::SecureRng::new();
            let path = format!("/v1/tasks/{}/reports", cfg.task);
            let ctype = if cfg.binary {
                "application/octet-stream"
            } else {
                "application/x-ndjson"
            };
            let interval = if cfg.rate > 0.0 {
                Some(Duration::from_secs_f64(
                    cfg.batch as f64 * cfg.connections as f64 / cfg.rate,
                ))
            } else {
                None
            };
            // Spread the connections' schedules over one interval.
            let mut next = Instant::now()
                + interval.map_or(Duration::ZERO, |i| {
                    i.mul_f64(c as f64 / cfg.connections as f64)
                });
            let mut conn = None;
            while start.elapsed() < cfg.duration {
                if interval.is_some() {
                    tokio::time::sleep_until(next.into()).await;
                } else {
                    next = Instant::now();
                }
                let reports: Vec<Report> = (0..cfg.batch)
                    .map(|_| {
                        Report::new(
                            cfg.query.clone(),
                            cfg.mechanism,
                            cfg.epsilon,
                            cfg.delta,
                            rng.random::<f64>(),
                        )
                        .with_random_id(&mut rng)
                    })
                    .collect();
                let mut body = Vec::with_capacity(cfg.batch * 200);
                for r in &reports {
                    if cfg.binary {
                        body.extend_from_slice(&r.to_frame());
                    } else {
                        body.extend_from_slice(r.to_json_line().as_bytes());
                        body.push(b'\n');
                    }
                }
                let sent = next;
                loop {
                    match post(&mut conn, &cfg.addr, &path, ctype, &body).await {
                        Ok((200, answer)) => {
                            let a: crate::http::UploadAnswer =
                                serde_json::from_slice(&answer).unwrap_or_default();
                            let ms = sent.elapsed().as_secs_f64() * 1e3;
                            if let Ok(mut l) = latencies.lock() {
                                l.push(ms);
                            }
                            if let Ok(mut r) = result.lock() {
                                r.requests += 1;
                                r.accepted += a.accepted;
                                r.duplicates += a.duplicates.len() as u64;
                                r.rejected += a.rejected.len() as u64;
                            }
                            if let Some(log) = &log {
                                let mut text = String::with_capacity(reports.len() * 33);
                                for r in &reports {
                                    if let Some(id) = r.report_id {
                                        text.push_str(&id.to_string());
                                        text.push('\n');
                                    }
                                }
                                if let Ok(mut f) = log.lock() {
                                    let _ = f.write_all(text.as_bytes());
                                }
                            }
                            break;
                        }
                        other => {
                            if let Ok(mut r) = result.lock() {
                                r.failures += 1;
                            }
                            conn = None;
                            if !cfg.retry {
                                if let Err(e) = other {
                                    eprintln!("bench: {e}");
                                }
                                break;
                            }
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                    }
                }
                if let Some(i) = interval {
                    next += i;
                }
            }
        }));
    }
    for h in handles {
        let _ = h.await;
    }
    let mut r = result.lock().map(|r| r.clone()).unwrap_or_default();
    r.seconds = start.elapsed().as_secs_f64();
    r.reports_per_second = (r.accepted + r.duplicates) as f64 / r.seconds;
    let mut l = latencies.lock().map(|l| l.clone()).unwrap_or_default();
    l.sort_by(f64::total_cmp);
    let q = |p: f64| {
        if l.is_empty() {
            0.0
        } else {
            l[((l.len() as f64 - 1.0) * p).round() as usize]
        }
    };
    r.latency_ms = [q(0.5), q(0.9), q(0.99), q(0.999), q(1.0)];
    r
}
