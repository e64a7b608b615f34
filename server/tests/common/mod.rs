//! Shared helpers of the collector's integration tests: a real
//! `geopriv-serve` process on a real SQLite file, and a tiny HTTP client.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub const TOKEN: &str = "test-token-0123456789";

pub const TASKS: &str = r#"{"tasks":[
 {"id":"income","query":{"threshold":{"threshold":100000.0,"width":20000.0}},
  "mechanism":"polyplace","epsilon":0.0001,"delta":0.0,"min_batch":50,"period":86400}
]}"#;

/// A fresh directory with the tasks and token files, removed when the
/// test ends (declare it before the `Server`, so the server stops first).
pub fn workdir(name: &str) -> WorkDir {
    let d = std::env::temp_dir().join(format!("geopriv-serve-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("tasks.json"), TASKS).unwrap();
    std::fs::write(d.join("token"), TOKEN).unwrap();
    WorkDir(d)
}

/// A test's directory under the system temp dir; deleted on drop, so test
/// runs do not leave databases behind.
pub struct WorkDir(PathBuf);

impl std::ops::Deref for WorkDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for WorkDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running server.
pub struct Server {
    pub child: Child,
    pub addr: String,
}

impl Server {
    /// Start on `dir/db` with `dir/tasks.json`; Err(stderr) if it exits.
    pub fn start(dir: &Path) -> Result<Server, String> {
        Server::start_with(dir, &[])
    }

    /// [`Server::start`] with more flags.
    pub fn start_with(dir: &Path, flags: &[&str]) -> Result<Server, String> {
        let mut child = Command::new(env!("CARGO_BIN_EXE_geopriv-serve"))
            .arg("--db")
            .arg(dir.join("db"))
            .args(["--listen", "127.0.0.1:0", "--tasks"])
            .arg(dir.join("tasks.json"))
            .arg("--token-file")
            .arg(dir.join("token"))
            .args(flags)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        match line.strip_prefix("listening on ") {
            Some(a) => Ok(Server {
                child,
                addr: a.trim().to_string(),
            }),
            None => {
                let _ = child.wait();
                let mut err = String::new();
                child
                    .stderr
                    .take()
                    .unwrap()
                    .read_to_string(&mut err)
                    .unwrap();
                Err(err)
            }
        }
    }

    /// kill -9.
    pub fn kill9(mut self) {
        self.child.kill().unwrap(); // SIGKILL on Unix
        self.child.wait().unwrap();
    }

    /// One request; (status, body).
    pub fn request(
        &self,
        method: &str,
        path: &str,
        ctype: &str,
        body: &[u8],
    ) -> std::io::Result<(u16, String)> {
        request(&self.addr, method, path, ctype, body)
    }

    pub fn get(&self, path: &str) -> (u16, String) {
        self.request("GET", path, "", b"").unwrap()
    }

    /// A POST of `body` to the income task's upload URL over a raw socket,
    /// with `headers` (each `Name: value`) as the only header fields besides
    /// Host, Content-Length and Connection, for what an HTTP client will
    /// not send (repeated fields, a body announced and never sent: then the
    /// answer must come from the headers alone, within 5 s). The whole
    /// answer (status line, headers, body) as text.
    pub fn raw_upload(&self, headers: &[&str], body: &[u8], send_body: bool) -> String {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(&self.addr).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        let mut head = "POST /v1/tasks/income/reports HTTP/1.1\r\nHost: x\r\n".to_string();
        for h in headers {
            head.push_str(&format!("{h}\r\n"));
        }
        head.push_str(&format!(
            "Content-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        ));
        s.write_all(head.as_bytes()).unwrap();
        if send_body {
            s.write_all(body).unwrap();
        }
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn request(
    addr: &str,
    method: &str,
    path: &str,
    ctype: &str,
    body: &[u8],
) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes())?;
    s.write_all(body)?;
    let mut out = Vec::new();
    s.read_to_end(&mut out)?;
    let text = String::from_utf8_lossy(&out).to_string();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no status in {text:?}")))?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|x| x.1.to_string())
        .unwrap_or_default();
    Ok((status, body))
}

/// `n` honest reports of the test task with fresh ids, as JSON lines.
pub fn reports(n: usize) -> Vec<geopriv::Report> {
    use geopriv::{MechanismName, QueryDescriptor, Report};
    use rand::Rng;
    let mut rng = geopriv::SecureRng::new();
    (0..n)
        .map(|_| {
            Report::new(
                QueryDescriptor::Threshold {
                    threshold: 100_000.0,
                    width: 20_000.0,
                },
                MechanismName::Polyplace,
                0.0001,
                0.0,
                rng.random::<f64>() * 3.0 - 1.0,
            )
            .with_random_id(&mut rng)
        })
        .collect()
}

pub fn ndjson(rs: &[geopriv::Report]) -> Vec<u8> {
    let mut b = Vec::new();
    for r in rs {
        b.extend_from_slice(r.to_json_line().as_bytes());
        b.push(b'\n');
    }
    b
}

/// What `geopriv aggregate` (default flags) prints for these JSON lines:
/// the same core code path (`ReportAggregator` with the CLI's default
/// policy and clipping), so a collector's estimate must equal it.
pub fn cli_estimate(lines: &str) -> String {
    use geopriv::server::ingest::{
        AggregationConfig, FormatChoice, RecordReader, ReportAggregator,
    };
    let policy = geopriv::ValidationPolicy::new(1.0, 1e-4).unwrap();
    let mut agg = ReportAggregator::new(policy, AggregationConfig::default());
    let mut reader = RecordReader::new(lines.as_bytes(), FormatChoice::Json, 64 << 10).unwrap();
    let c = agg
        .ingest(&mut reader, |n, why| panic!("record {n}: {why}"))
        .unwrap();
    assert_eq!(c.rejected, 0);
    agg.estimates()[0].to_json_line()
}

pub fn json(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("{e}: {s}"))
}
