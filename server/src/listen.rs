//! The accept loop: hyper's HTTP/1 connection driver with a header read
//! timeout and a cap on open connections per client address.
//!
//! `axum::serve` exposes neither: a connection whose request headers never
//! finish (slowloris: no bytes at all, or one header line a second) was
//! held open for ever, and one client could hold the process's open-file
//! limit of such connections and lock devices out. Here:
//!
//! * **header read timeout** ([`ConnLimits::header_timeout`], default 10 s):
//!   the whole request head (request line and headers) must arrive within
//!   it, counted from the moment the connection starts waiting for a
//!   request, so an idle keep-alive connection is closed after it too; the
//!   connection is closed without an answer;
//! * **request timeout** (the router's, [`crate::http::Limits::timeout`]):
//!   an upload's body must arrive and be answered within it (408);
//! * **connections per client address** ([`ConnLimits::per_client`],
//!   default 256): a connection past the cap is closed at once, before any
//!   byte is read; the others of that address are unaffected.

use axum::extract::ConnectInfo;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tower::ServiceExt as _;

/// Connection limits of the accept loop.
#[derive(Clone, Debug)]
pub struct ConnLimits {
    /// Time for a request's head (request line and headers) to arrive,
    /// from the moment the connection waits for it (also between requests
    /// of a keep-alive connection).
    pub header_timeout: Duration,
    /// Most connections open at once from one client address.
    pub per_client: usize,
}

impl Default for ConnLimits {
    fn default() -> Self {
        ConnLimits {
            header_timeout: Duration::from_secs(10),
            per_client: 256,
        }
    }
}

/// Open connections per address; a [`Slot`] gives its place back on drop.
#[derive(Clone, Default)]
struct Counts(Arc<Mutex<HashMap<IpAddr, usize>>>);

struct Slot {
    counts: Counts,
    ip: IpAddr,
}

impl Counts {
    fn take(&self, ip: IpAddr, cap: usize) -> Option<Slot> {
        let mut m = match self.0.lock() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        };
        let n = m.entry(ip).or_insert(0);
        if *n >= cap {
            return None;
        }
        *n += 1;
        Some(Slot {
            counts: self.clone(),
            ip,
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut m = match self.counts.0.lock() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        };
        if let Some(n) = m.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.ip);
            }
        }
    }
}

/// Serve `router` on `listener` until `shutdown` completes. Handlers see
/// the client's address as `ConnectInfo<SocketAddr>`.
///
/// ```no_run
/// # async fn f(app: axum::Router) -> std::io::Result<()> {
/// let l = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// geopriv_server::listen::serve(l, app, Default::default(), std::future::pending()).await
/// # }
/// ```
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    limits: ConnLimits,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let counts = Counts::default();
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            _ = &mut shutdown => return Ok(()),
            r = listener.accept() => match r {
                Ok(x) => x,
                // Out of file descriptors and the like: wait, don't spin.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Some(slot) = counts.take(peer.ip(), limits.per_client.max(1)) else {
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let router = router.clone();
        let header_timeout = limits.header_timeout;
        tokio::spawn(async move {
            let _slot = slot;
            let svc = hyper::service::service_fn(
                move |mut req: hyper::Request<hyper::body::Incoming>| {
                    req.extensions_mut().insert(ConnectInfo::<SocketAddr>(peer));
                    router.clone().oneshot(req)
                },
            );
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout)
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}
