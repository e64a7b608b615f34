//! attack6 O2: `geopriv map aggregate` counted a replayed `report_id` again
//! (500 pristine reports and the same one replayed 500 times gave "1000
//! accepted"). It now counts each id once with `aggregate`'s ordered rule
//! (docs/MATH.md §10.11), the same for any `--threads`.

mod common;
use common::geopriv;

fn id_hex(k: u64) -> String {
    format!("{:016x}{:016x}", k.wrapping_mul(0x9e37_79b9_7f4a_7c15), k)
}

#[test]
fn map_aggregate_counts_each_report_id_once_for_any_threads() {
    let n = 600u64;
    // Without the release's own random id.
    let reports = released(n, "3");
    assert_eq!(reports.len() as u64, n);
    let with_id = |r: &str, k: u64| {
        format!(
            "{},\"report_id\":\"{}\"}}\n",
            r.strip_suffix('}').unwrap(),
            id_hex(k)
        )
    };
    let mut input = String::new();
    let mut valid = Vec::new();
    for (k, r) in reports.iter().enumerate() {
        let k = k as u64;
        // A refused record (another set) carrying the next valid one's id:
        // it must not censor it.
        if k % 7 == 0 {
            input += &with_id(
                "{\"set\":\"0\",\"mechanism\":\"a_priori\",\"epsilon\":0.001,\"location\":[0,0]}",
                k,
            );
        }
        // Every fifth report without an id: all of them count.
        let line = if k % 5 == 0 {
            format!("{r}\n")
        } else {
            with_id(r, k)
        };
        input += &line;
        valid.push(line);
    }
    // Replays of every report (spread over the workers' batches).
    for line in valid.iter().rev() {
        input += line;
    }
    let refused = (0..n).filter(|k| k % 7 == 0).count() as u64;
    let no_id = (0..n).filter(|k| k % 5 == 0).count() as u64;
    let mut first: Option<Vec<u8>> = None;
    for threads in ["1", "2", "3"] {
        let out = geopriv(
            &[
                "map",
                "aggregate",
                "--grid",
                "11",
                "--epsilon",
                "0.001",
                "--threads",
                threads,
            ],
            input.as_bytes(),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        let records = n + refused + n;
        assert!(
            stderr.contains(&format!(
                "{records} records: {} accepted, {refused} rejected",
                n + no_id
            )),
            "--threads {threads}: {stderr}"
        );
        assert!(
            stderr.contains(&format!(
                "{} duplicate reports dropped (a report_id accepted before counts once)",
                n - no_id
            )),
            "--threads {threads}: {stderr}"
        );
        match &first {
            None => first = Some(out.stdout),
            Some(f) => assert!(f == &out.stdout, "--threads {threads}: another map"),
        }
    }
}

#[test]
fn map_aggregate_max_report_ids_is_bounded() {
    let out = geopriv(
        &[
            "map",
            "aggregate",
            "--grid",
            "11",
            "--epsilon",
            "0.001",
            "--max-report-ids",
            "67108865",
        ],
        b"",
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--max-report-ids at most 67108864"));
}

/// `map release` reports of `n` devices on the 11 × 11 grid at ε 0.001,
/// without their own random ids.
fn released(n: u64, seed: &str) -> Vec<String> {
    let locations: String = (0..n)
        .map(|i| format!("{},{}\n", (i * 37) % 20_000, (i * 91 + i / 7) % 20_000))
        .collect();
    let stdout = common::map_release_11(&locations, "0.001", seed);
    String::from_utf8(stdout)
        .unwrap()
        .lines()
        .map(|l| match l.find(",\"report_id\":") {
            Some(i) => format!("{}}}", &l[..i]),
            None => l.to_string(),
        })
        .collect()
}

/// A stream of many replays: `records` lines, ids drawn from a pool of
/// `pool` (each replayed at other locations), one line in 7 refused
/// (another set) but carrying a pool id, one in 13 without an id. Returns
/// the stream and, per line, (id, valid, the line without its id).
fn replays(
    reports: &[String],
    records: u64,
    pool: u64,
) -> (String, Vec<(Option<u64>, bool, String)>) {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let (mut input, mut lines) = (String::new(), Vec::new());
    for j in 0..records {
        let (a, b) = (next(), next());
        let k = a % pool;
        let (valid, bare) = if j % 7 == 3 {
            (
                false,
                format!(
                    "{{\"set\":\"0\",\"mechanism\":\"a_priori\",\"epsilon\":0.001,\"location\":[{},0]}}",
                    b % 20_000
                ),
            )
        } else {
            (true, reports[(b % reports.len() as u64) as usize].clone())
        };
        let id = (j % 13 != 5).then_some(k);
        let line = match id {
            Some(k) => format!(
                "{},\"report_id\":\"{}\"}}",
                bare.strip_suffix('}').unwrap(),
                id_hex(k)
            ),
            None => bare.clone(),
        };
        input += &line;
        input += "\n";
        lines.push((id, valid, bare));
    }
    (input, lines)
}

/// The rule by a tiny reference: in record order, a line whose id is in
/// the set is a duplicate; else a valid line is accepted (its id
/// remembered while the set holds fewer than `cap`), a refused one
/// rejected. Returns the accepted lines (without ids), the duplicates, the
/// rejected line numbers and the accepted-but-not-remembered count.
fn reference(lines: &[(Option<u64>, bool, String)], cap: usize) -> (String, u64, Vec<u64>, u64) {
    let mut seen = std::collections::HashSet::new();
    let (mut accepted, mut dups, mut rejected, mut unchecked) = (String::new(), 0, Vec::new(), 0);
    for (i, (id, valid, bare)) in lines.iter().enumerate() {
        if id.is_some_and(|k| seen.contains(&k)) {
            dups += 1;
        } else if *valid {
            accepted += bare;
            accepted += "\n";
            if let Some(k) = id {
                if seen.len() < cap {
                    seen.insert(*k);
                } else {
                    unchecked += 1;
                }
            }
        } else {
            rejected.push(i as u64 + 1);
        }
    }
    (accepted, dups, rejected, unchecked)
}

/// issue 22 item 4: the ids are decided on the workers by id shard. 40,000
/// records (about 5 batches of the reader) with ids from a pool of 3,000
/// replayed at other locations, refused records carrying pool ids before
/// and after valid ones: `--threads 1/2/3` give the same stdout, which is
/// that of the reference's accepted reports (so the report counted for an
/// id is its first accepted one), the reference's counts and its rejected
/// line numbers — with the default set and with `--max-report-ids 500`
/// (the workers' part handed over at record 501, then a full set).
#[test]
fn many_replays_over_shards_and_batches_follow_the_reference_rule() {
    let reports = released(2_000, "5");
    let (input, lines) = replays(&reports, 40_000, 3_000);
    // λ = 1: the kernel map of the counts, without the planner's cost.
    let base = [
        "map",
        "aggregate",
        "--grid",
        "11",
        "--epsilon",
        "0.001",
        "--lambda",
        "1",
    ];
    for cap in [None, Some("500")] {
        let (accepted, dups, rejected, unchecked) =
            reference(&lines, cap.map_or(1 << 20, |c| c.parse().unwrap()));
        assert!(dups > if cap.is_none() { 20_000 } else { 3_000 }, "{dups}");
        let want = geopriv(
            &[&base[..], &["--threads", "1"]].concat(),
            accepted.as_bytes(),
        );
        assert!(want.status.success());
        for threads in ["1", "2", "3"] {
            let mut args = [&base[..], &["--threads", threads]].concat();
            if let Some(c) = cap {
                args.extend(["--max-report-ids", c]);
            }
            let out = geopriv(&args, input.as_bytes());
            let stderr = String::from_utf8_lossy(&out.stderr);
            let what = format!("--threads {threads}, cap {cap:?}");
            assert!(out.stdout == want.stdout, "{what}: another map");
            assert!(
                stderr.contains(&format!(
                    "40000 records: {} accepted, {} rejected",
                    accepted.lines().count(),
                    rejected.len()
                )),
                "{what}: {stderr}"
            );
            assert!(
                stderr.contains(&format!("{dups} duplicate reports dropped")),
                "{what}: {stderr}"
            );
            assert_eq!(
                stderr.contains(&format!("warning: {unchecked} reports accepted after")),
                unchecked > 0,
                "{what}: {stderr}"
            );
            let numbers: Vec<u64> = stderr
                .lines()
                .filter(|l| l.ends_with("[refused]"))
                .map(|l| l["line ".len()..l.find(':').unwrap()].parse().unwrap())
                .collect();
            assert_eq!(numbers, rejected, "{what}");
        }
    }
}

/// `map plan --reports` counts each report_id once by the same rule (it
/// counted replays again): the plan from a file of replays is the plan
/// from the reference's accepted reports, and not the one that counts
/// every replay.
#[test]
fn map_plan_reports_counts_each_report_id_once() {
    let reports = released(1_500, "8");
    let (input, lines) = replays(&reports, 6_000, 400);
    let (accepted, dups, _, _) = reference(&lines, 1 << 20);
    let dir = std::env::temp_dir().join(format!("geopriv-plan-ids-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let plan = |text: &str, name: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        geopriv(
            &[
                "map",
                "plan",
                "--grid",
                "11",
                "--epsilon",
                "0.001",
                "--n",
                "100000",
                "--verbose",
                "--reports",
                p.to_str().unwrap(),
            ],
            b"",
        )
    };
    let got = plan(&input, "replays.jsonl");
    let want = plan(&accepted, "reference.jsonl");
    // Every valid line counted, as before.
    let all: String = lines
        .iter()
        .filter(|l| l.1)
        .map(|l| format!("{}\n", l.2))
        .collect();
    let counted_again = plan(&all, "all.jsonl");
    let _ = std::fs::remove_dir_all(&dir);
    let stderr = String::from_utf8_lossy(&got.stderr);
    assert!(got.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("{dups} duplicate reports dropped")),
        "{stderr}"
    );
    assert!(got.stdout == want.stdout, "another plan");
    assert!(
        got.stdout != counted_again.stdout,
        "the replays change nothing"
    );
}
