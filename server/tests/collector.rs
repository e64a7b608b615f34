//! The collector end to end: a real `geopriv-serve` process on a real
//! SQLite file (helpers in tests/common).

mod common;
use common::*;
use std::collections::HashSet;

fn published_line(server: &Server) -> (u64, Option<String>) {
    let (s, body) = server.get("/v1/tasks/income/estimate");
    assert_eq!(s, 200, "{body}");
    let v = json(&body);
    let p = &v["periods"][0];
    (
        p["n"].as_u64().unwrap_or(0),
        p["estimate_line"].as_str().map(str::to_string),
    )
}

#[test]
fn uploads_count_once_keep_good_records_and_match_the_cli() {
    let dir = workdir("basic");
    let server = Server::start(&dir).unwrap();
    let rs = reports(120);
    // A mixed batch: good reports, garbage, a report of another ε, one
    // without an id, and a repeat of the first report.
    let mut body = ndjson(&rs[..40]);
    body.extend_from_slice(b"\xff\xfe not utf8\n{\"version\":2}\n");
    let mut other = rs[40].clone();
    other.epsilon = 0.5;
    let mut no_id = rs[41].clone();
    no_id.report_id = None;
    body.extend_from_slice(&ndjson(&[other, no_id, rs[0].clone()]));
    let (s, answer) = server
        .request(
            "POST",
            "/v1/tasks/income/reports",
            "application/x-ndjson",
            &body,
        )
        .unwrap();
    assert_eq!(s, 200, "{answer}");
    let a = json(&answer);
    assert_eq!(a["accepted"], 40, "{answer}");
    assert_eq!(a["duplicates"], serde_json::json!([45]), "{answer}");
    let codes: Vec<(u64, String)> = a["rejected"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["index"].as_u64().unwrap(),
                r["code"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        codes,
        [
            (41, "not-utf8".to_string()),
            (42, "malformed".into()),
            (43, "task-mismatch".into()),
            (44, "missing-report-id".into())
        ]
    );
    // Not enough reports yet (minimum batch 50).
    let (n, line) = published_line(&server);
    assert_eq!((n, line), (40, None));
    let (_, est) = server.get("/v1/tasks/income/estimate");
    assert!(est.contains("not enough reports"), "{est}");
    // The rest in binary frames, then everything again: all duplicates.
    let mut frames = Vec::new();
    for r in &rs[40..] {
        frames.extend_from_slice(&r.to_frame());
    }
    let (s, answer) = server
        .request(
            "POST",
            "/v1/tasks/income/reports",
            "application/octet-stream",
            &frames,
        )
        .unwrap();
    assert_eq!(s, 200, "{answer}");
    assert_eq!(json(&answer)["accepted"], 80);
    let (s, answer) = server
        .request(
            "POST",
            "/v1/tasks/income/reports",
            "application/x-ndjson",
            &ndjson(&rs),
        )
        .unwrap();
    assert_eq!(s, 200);
    assert_eq!(json(&answer)["duplicates"].as_array().unwrap().len(), 120);
    // Published, and bit for bit the CLI's estimate on the export.
    let (n, line) = published_line(&server);
    assert_eq!(n, 120);
    let (s, export) = server.get("/v1/tasks/income/export");
    assert_eq!(s, 200);
    assert_eq!(export.lines().count(), 120);
    assert_eq!(line.unwrap(), cli_estimate(&export));
    // Analyst routes need the token; metrics count per reason.
    let (s, _) = request(&server.addr, "GET", "/v1/tasks", "", b"").unwrap();
    assert_eq!(s, 200);
    let (s, m) = server.get("/metrics");
    assert_eq!(s, 200);
    assert!(m.contains("outcome=\"missing-report-id\"} 1"), "{m}");
    assert!(m.contains("outcome=\"duplicate\"} 121"), "{m}");
    let mut raw = std::net::TcpStream::connect(&server.addr).unwrap();
    use std::io::{Read, Write};
    raw.write_all(b"GET /v1/tasks HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    raw.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("HTTP/1.1 401"), "{out}");
    let (s, page) = server.get("/");
    assert_eq!(s, 200);
    assert!(
        page.contains("<canvas") || page.contains("canvas"),
        "the page draws maps"
    );
    assert!(!page.contains("src=\"http"), "no external assets");
}

#[test]
fn kill_9_under_load_loses_no_acknowledged_report_and_counts_none_twice() {
    let dir = workdir("kill");
    let mut server = Server::start(&dir).unwrap();
    let mut acked: HashSet<String> = HashSet::new();
    let mut sent_after_ack = 0;
    for cycle in 0..3 {
        // A client thread uploads batches; the server dies under it.
        let addr = server.addr.clone();
        let client = std::thread::spawn(move || {
            let mut acked = Vec::new();
            let mut pending = None;
            // At most 300 batches a cycle: the three cycles stay under one
            // export page (100,000 reports), which this test reads whole (on
            // an idle machine 400 a cycle overflowed it and the reports past
            // the page looked lost).
            for _ in 0..300 {
                let batch = reports(100);
                match request(
                    &addr,
                    "POST",
                    "/v1/tasks/income/reports",
                    "application/x-ndjson",
                    &ndjson(&batch),
                ) {
                    Ok((200, _)) => {
                        acked.extend(batch.iter().map(|r| r.report_id.unwrap().to_string()))
                    }
                    _ => {
                        pending = Some(batch);
                        break;
                    }
                }
            }
            (acked, pending)
        });
        std::thread::sleep(std::time::Duration::from_millis(300 + 200 * cycle));
        server.kill9();
        let (got, pending) = client.join().unwrap();
        acked.extend(got);
        server = Server::start(&dir).unwrap();
        // The client retries the batch it had no answer for: stored
        // before the kill (duplicates) or not (accepted), never twice.
        if let Some(batch) = pending {
            let (s, a) = server
                .request(
                    "POST",
                    "/v1/tasks/income/reports",
                    "application/x-ndjson",
                    &ndjson(&batch),
                )
                .unwrap();
            assert_eq!(s, 200, "{a}");
            let a = json(&a);
            let dup = a["duplicates"].as_array().unwrap().len() as u64;
            assert_eq!(a["accepted"].as_u64().unwrap() + dup, 100);
            sent_after_ack += dup;
            acked.extend(batch.iter().map(|r| r.report_id.unwrap().to_string()));
        }
    }
    let (_, export) = server.get("/v1/tasks/income/export");
    let ids: Vec<String> = export
        .lines()
        .map(|l| json(l)["report_id"].as_str().unwrap().to_string())
        .collect();
    let unique: HashSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "a report stored twice");
    for id in &acked {
        assert!(unique.contains(id), "acknowledged report {id} lost");
    }
    assert_eq!(
        ids.len(),
        acked.len(),
        "every stored report was acknowledged by the end"
    );
    let (n, line) = published_line(&server);
    assert_eq!(n as usize, acked.len());
    assert_eq!(line.unwrap(), cli_estimate(&export));
    eprintln!("{} reports acknowledged over 3 kills; {sent_after_ack} retried reports were already stored", acked.len());
}

#[test]
fn a_changed_task_definition_is_refused_on_restart() {
    let dir = workdir("changed");
    let server = Server::start(&dir).unwrap();
    server.kill9();
    let changed = TASKS.replace("\"min_batch\":50", "\"min_batch\":60");
    std::fs::write(dir.join("tasks.json"), changed).unwrap();
    let err = Server::start(&dir).err().expect("refused");
    assert!(err.contains("task income changed"), "{err}");
    std::fs::write(dir.join("tasks.json"), TASKS).unwrap();
    Server::start(&dir).unwrap();
}

#[test]
fn partial_states_of_two_collectors_merge_bit_for_bit() {
    let (d1, d2) = (workdir("merge1"), workdir("merge2"));
    let (s1, s2) = (Server::start(&d1).unwrap(), Server::start(&d2).unwrap());
    let rs = reports(300);
    for (i, chunk) in rs.chunks(50).enumerate() {
        let s = if i % 2 == 0 { &s1 } else { &s2 };
        let (st, _) = s
            .request(
                "POST",
                "/v1/tasks/income/reports",
                "application/x-ndjson",
                &ndjson(chunk),
            )
            .unwrap();
        assert_eq!(st, 200);
    }
    let mut files = Vec::new();
    for (s, d) in [(&s1, &d1), (&s2, &d2)] {
        let (st, state) = s.get("/v1/tasks/income/state");
        assert_eq!(st, 200, "{state}");
        let f = d.join("state.json");
        std::fs::write(&f, state).unwrap();
        files.push(f);
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_geopriv-serve"))
        .arg("merge")
        .arg("--tasks")
        .arg(d1.join("tasks.json"))
        .args(["--task", "income"])
        .args(&files)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let merged = json(String::from_utf8_lossy(&out.stdout).trim());
    assert_eq!(merged["n"], 300);
    let all = String::from_utf8(ndjson(&rs)).unwrap();
    assert_eq!(
        merged["estimate_line"].as_str().unwrap(),
        cli_estimate(&all)
    );
}

/// Attack (slowloris, found by the attack-server round, NOT fixed): a
/// connection that sends no bytes, or its request headers one line a
/// second, is held open for ever (measured: still open after 65 s; only a
/// request whose headers are complete meets the 10 s upload timeout). One
/// client can so hold up to the process's open-file limit of connections
/// and lock devices out. The fix is a header read timeout, which
/// `axum::serve` does not expose: an accept loop on hyper-util's
/// `conn::auto::Builder` with `http1().timer(TokioTimer).header_read_timeout(..)`,
/// plus a cap on connections per address. Run with `--ignored` (15 s).
#[test]
#[ignore = "known open: no header read timeout (slowloris)"]
fn a_connection_that_never_finishes_its_headers_is_closed() {
    use std::io::{Read, Write};
    let dir = workdir("slowloris");
    let server = Server::start(&dir).unwrap();
    let mut s = std::net::TcpStream::connect(&server.addr).unwrap();
    s.write_all(b"POST /v1/tasks/income/reports HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(15)))
        .unwrap();
    let mut buf = [0u8; 256];
    // Closed (0 bytes or an error answer) within 15 s, not a read timeout.
    match s.read(&mut buf) {
        Ok(_) => {}
        Err(e) => panic!("connection still open after 15 s: {e}"),
    }
}
