//! Fresh-eyes attack on the collector's accept loop (src/listen.rs) and
//! its JSON error bodies, against a real `geopriv-serve` process.

mod common;

use common::{workdir, Server};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Raw bytes in, every byte out until the server closes (or 5 s).
fn raw(addr: &str, bytes: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = s.write_all(bytes);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out
}

/// Answers hyper gives before the router (a request line or headers it
/// cannot parse, headers too large): status and body, printed for the
/// report; any body must be JSON.
///
/// Open (attack3): hyper answers these itself, before the router and its
/// `json_errors` layer, with an EMPTY body (no content type): 400 for a
/// garbage request line, an unknown HTTP version, a NUL in the path, a
/// negative or doubled Content-Length; 431 for a 1 MiB header or 200
/// headers. Nothing unescaped leaks (the body is empty) and the server
/// survives, but the "every 4xx/5xx is JSON" contract does not hold
/// there; hyper 1 offers no hook for these answers (a fix would parse the
/// head ourselves or document the exception in docs/openapi.yaml). A
/// chunked-body error does get JSON.
#[test]
#[ignore = "open: hyper's own 400/431 answers have empty bodies (see the comment)"]
fn answers_below_the_router() {
    let dir = workdir("attack3-below");
    let server = Server::start(&dir).unwrap();
    let huge_header = format!(
        "GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: {}\r\n\r\n",
        "a".repeat(1 << 20)
    );
    let many_headers = format!(
        "GET /healthz HTTP/1.1\r\nHost: x\r\n{}\r\n",
        (0..200)
            .map(|i| format!("X-{i}: y\r\n"))
            .collect::<String>()
    );
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("garbage", b"GARBAGE\r\n\r\n".to_vec()),
        ("bad version", b"GET / HTTP/9.9\r\nHost: x\r\n\r\n".to_vec()),
        ("nul in path", b"GET /\x00 HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("huge header", huge_header.into_bytes()),
        ("many headers", many_headers.into_bytes()),
        (
            "bad content-length",
            b"POST /v1/tasks/income/reports HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n"
                .to_vec(),
        ),
        (
            "two content-lengths",
            b"POST /v1/tasks/income/reports HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab"
                .to_vec(),
        ),
        (
            "bad chunk",
            b"POST /v1/tasks/income/reports HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"
                .to_vec(),
        ),
    ];
    let mut non_json = Vec::new();
    for (name, bytes) in cases {
        let out = raw(&server.addr, &bytes);
        let text = String::from_utf8_lossy(&out);
        let status = text.split_whitespace().nth(1).unwrap_or("-").to_string();
        let body = text.split_once("\r\n\r\n").map(|x| x.1).unwrap_or("");
        eprintln!("{name}: status {status}, body {body:?}");
        if (status.starts_with('4') || status.starts_with('5'))
            && serde_json::from_str::<serde_json::Value>(body).is_err()
        {
            non_json.push(format!("{name}: {status} {body:?}"));
        }
    }
    // The server survived all of it.
    assert_eq!(server.get("/healthz").0, 200);
    assert!(non_json.is_empty(), "non-JSON error answers: {non_json:?}");
}

/// A client that sends pipelined requests and never reads the answers:
/// once the socket buffers are full the server blocks writing. Does it
/// keep those connections (and their per-client places) past the header
/// and request timeouts?
///
/// Found by attack3: before the write stall timeout of src/listen.rs the
/// two connections still held the client's places 9 s later (the third
/// connection was closed unanswered).
#[test]
fn a_client_that_never_reads_does_not_keep_its_places() {
    let dir = workdir("attack3-noread");
    let server = Server::start_with(
        &dir,
        &[
            "--header-timeout",
            "1",
            "--timeout",
            "1",
            "--max-connections-per-client",
            "2",
            "--rate-limit",
            "1000000",
        ],
    )
    .unwrap();
    let req = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".repeat(2000);
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut s = TcpStream::connect(&server.addr).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(3))).unwrap();
        // Write until the server stops reading (its answers fill the
        // buffers) or the write times out.
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(4) {
            if s.write_all(&req).is_err() {
                break;
            }
        }
        held.push(s);
    }
    // Well past both timeouts.
    std::thread::sleep(Duration::from_secs(5));
    let answered = common::request(&server.addr, "GET", "/healthz", "", b"")
        .map(|(s, _)| s)
        .unwrap_or(0);
    drop(held);
    assert_eq!(
        answered, 200,
        "two never-reading connections still hold the client's places 9 s later"
    );
}
