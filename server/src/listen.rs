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
//!   byte is read; the others of that address are unaffected;
//! * **write stall timeout** (the header timeout again): a write to the
//!   client that makes no progress for that long closes the connection.
//!   Before, a client that pipelined requests and never read the answers
//!   held its connections (and its per-client places) for ever once the
//!   socket buffers were full: hyper has no write timeout.

use axum::extract::ConnectInfo;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
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
                .serve_connection(TokioIo::new(StallTimeout::new(stream, header_timeout)), svc)
                .await;
        });
    }
}

/// A stream whose writes (and flushes) fail with `TimedOut` when they make
/// no progress for `limit`: the client stopped reading.
struct StallTimeout<S> {
    inner: S,
    limit: Duration,
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S> StallTimeout<S> {
    fn new(inner: S, limit: Duration) -> Self {
        StallTimeout {
            inner,
            limit,
            stalled: None,
        }
    }

    /// After the inner write returned `poll`: arm the timer on `Pending`,
    /// disarm it on progress, fail once it fired.
    fn check<T>(
        &mut self,
        cx: &mut Context<'_>,
        poll: Poll<std::io::Result<T>>,
    ) -> Poll<std::io::Result<T>> {
        if poll.is_ready() {
            self.stalled = None;
            return poll;
        }
        let limit = self.limit;
        let timer = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the client stopped reading its answers",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for StallTimeout<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for StallTimeout<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.check(cx, poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.check(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_flush(cx);
        self.check(cx, poll)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.check(cx, poll)
    }
}
