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
    let locations: String = (0..n)
        .map(|i| format!("{},{}\n", (i * 37) % 20_000, (i * 91) % 20_000))
        .collect();
    let out = geopriv(
        &[
            "map",
            "release",
            "--grid",
            "11",
            "--epsilon",
            "0.001",
            "--seed",
            "3",
        ],
        locations.as_bytes(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reports: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        // Without the release's own random id.
        .map(|l| match l.find(",\"report_id\":") {
            Some(i) => format!("{}}}", &l[..i]),
            None => l.to_string(),
        })
        .collect();
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
