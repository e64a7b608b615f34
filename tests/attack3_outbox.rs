//! Fresh-eyes attack on the device outbox uploader: hostile and broken
//! collector answers, and outbox reports the collector skips without an
//! answer.

use geopriv::device::outbox::{upload, HttpAnswer, OutboxStore, Transport, UploadConfig};
use geopriv::server::ingest::{decode_json_record, Decoded};
use geopriv::{MechanismName, QueryDescriptor, Report, ReportId};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeSet, HashSet};

struct MemStore(Vec<(u64, String)>);

impl OutboxStore for MemStore {
    fn pending(&mut self) -> geopriv::Result<Vec<(u64, String)>> {
        Ok(self.0.clone())
    }
    fn acknowledge(&mut self, ids: &[u64]) -> geopriv::Result<()> {
        self.0.retain(|(id, _)| !ids.contains(id));
        Ok(())
    }
}

/// The collector's record rule (`geopriv-serve`'s upload handler): lines
/// numbered from 1, blank and `#` lines skipped *without* an entry in the
/// answer, every other line accepted, a duplicate or rejected.
struct LikeTheCollector {
    stored: HashSet<String>,
}

impl Transport for LikeTheCollector {
    fn post(&mut self, body: &[u8]) -> Result<HttpAnswer, String> {
        let (mut acc, mut dups, mut rej) = (0, vec![], vec![]);
        for (i, line) in body.split(|&b| b == b'\n').enumerate() {
            if i + 1 == body.split(|&b| b == b'\n').count() && line.is_empty() {
                break; // after the last newline
            }
            match decode_json_record(line) {
                Decoded::Skipped => {}
                Decoded::Rejected(_) => rej.push(format!(
                    "{{\"index\":{},\"code\":\"malformed\",\"reason\":\"no\"}}",
                    i + 1
                )),
                Decoded::Report(r) => {
                    if self.stored.insert(r.to_json_line()) {
                        acc += 1;
                    } else {
                        dups.push(i + 1);
                    }
                }
            }
        }
        Ok(HttpAnswer {
            status: 200,
            body: format!(
                "{{\"accepted\":{acc},\"duplicates\":{dups:?},\"rejected\":[{}],\"period\":0}}",
                rej.join(",")
            )
            .into_bytes(),
            retry_after: None,
        })
    }
}

fn report(i: u8) -> String {
    Report::new(
        QueryDescriptor::Threshold {
            threshold: 1.0,
            width: 1.0,
        },
        MechanismName::Polyplace,
        1.0,
        0.0,
        f64::from(i),
    )
    .with_report_id(ReportId([i; 16]))
    .to_json_line()
}

/// A report the collector skips (a BOM-only line, a `#` line) used to make
/// every answer's counts disagree with its batch: the batch was retried
/// until the run gave up, on every run, so the reports queued behind it
/// were never uploaded. It is now parked locally, and the rest goes.
#[test]
fn a_report_the_collector_skips_does_not_block_the_outbox() {
    for odd in [
        "\u{feff}",
        "\u{feff} \t",
        "# a comment",
        "\u{feff}  #{}",
        " #",
    ] {
        let mut store = MemStore(vec![(1, report(1)), (2, odd.to_string()), (3, report(3))]);
        let mut collector = LikeTheCollector {
            stored: HashSet::new(),
        };
        let mut parked = BTreeSet::new();
        let s = upload(
            &mut store,
            &mut collector,
            &UploadConfig::default(),
            &mut parked,
            &mut |_| {},
            &mut StdRng::seed_from_u64(1),
        )
        .unwrap();
        assert_eq!(s.stopped, None, "{odd:?}: {s:?}");
        assert_eq!(s.accepted, 2, "{odd:?}: {s:?}");
        assert_eq!(store.0.len(), 1, "{odd:?}");
        assert_eq!(parked.into_iter().collect::<Vec<_>>(), [2], "{odd:?}");
    }
}

/// A collector answering at random: garbage, huge or lying counts,
/// out-of-range or repeated indices, odd statuses and Retry-After values.
struct Hostile {
    rng: StdRng,
    requests: u64,
}

impl Transport for Hostile {
    fn post(&mut self, body: &[u8]) -> Result<HttpAnswer, String> {
        self.requests += 1;
        let n = body.iter().filter(|&&b| b == b'\n').count() as u64;
        let r = &mut self.rng;
        let i = r.random_range(1..=n.max(1));
        let status = *[
            200u16, 200, 200, 400, 401, 404, 408, 413, 429, 500, 503, 299, 0,
        ]
        .get(r.random_range(0..13))
        .unwrap();
        let body = match r.random_range(0..12) {
            0 => String::from("not json"),
            1 => format!("{{\"accepted\":{},\"duplicates\":[],\"rejected\":[]}}", u64::MAX),
            2 => format!("{{\"accepted\":{n},\"duplicates\":[{i}],\"rejected\":[]}}"),
            3 => format!(
                "{{\"accepted\":{},\"duplicates\":[{i},{i}],\"rejected\":[]}}",
                n.saturating_sub(2)
            ),
            4 => format!(
                "{{\"accepted\":{},\"duplicates\":[],\"rejected\":[{{\"index\":{},\"code\":\"x\",\"reason\":\"y\"}}]}}",
                n - 1,
                n + 1
            ),
            5 => format!(
                "{{\"accepted\":{},\"duplicates\":[0],\"rejected\":[]}}",
                n - 1
            ),
            6 => format!(
                "{{\"accepted\":{},\"duplicates\":[],\"rejected\":[{{\"index\":{i},\"code\":\"\\u001b[31m\",\"reason\":\"{}\"}}]}}",
                n - 1,
                "\\u0007".repeat(1000)
            ),
            7 => format!("{{\"accepted\":{n},\"duplicates\":[],\"rejected\":[],\"accepted\":0}}"),
            8 => format!("{{\"accepted\":{n},\"duplicates\":[],\"rejected\":[]}}"),
            9 => String::new(),
            10 => "[".repeat(100_000),
            _ => format!(
                "{{\"accepted\":{},\"duplicates\":[{i}],\"rejected\":[]}}",
                n - 1
            ),
        };
        let retry_after = match r.random_range(0..6) {
            0 => None,
            1 => Some("-5".into()),
            2 => Some("18446744073709551615".into()),
            3 => Some("99999999999999999999999".into()),
            4 => Some("Wed, 21 Oct 2015 07:28:00 GMT".into()),
            _ => Some(" 3 ".into()),
        };
        if r.random_range(0..10) == 0 {
            return Err("connection reset".into());
        }
        Ok(HttpAnswer {
            status,
            body: body.into_bytes(),
            retry_after,
        })
    }
}

#[test]
fn hostile_answers_terminate_bounded_and_only_acknowledge_answered_ids() {
    for seed in 0..300 {
        let all: Vec<(u64, String)> = (1..=40u8).map(|i| (u64::from(i), report(i))).collect();
        let mut store = MemStore(all.clone());
        let mut t = Hostile {
            rng: StdRng::seed_from_u64(seed),
            requests: 0,
        };
        let mut parked = BTreeSet::new();
        let mut slept = 0u64;
        let config = UploadConfig {
            max_reports: 7,
            ..UploadConfig::default()
        };
        let s = upload(
            &mut store,
            &mut t,
            &config,
            &mut parked,
            &mut |ms| slept += ms,
            &mut StdRng::seed_from_u64(seed),
        )
        .unwrap();
        // Bounded: every request either settles reports or counts toward
        // one batch's attempts, and halvings are few.
        assert!(t.requests <= 40 * 2 + 6 * 40, "seed {seed}: {}", t.requests);
        assert!(slept <= u64::from(config.max_attempts) * config.backoff.cap_ms * 41);
        // Nothing vanished: what left the outbox was acknowledged by a 200.
        let left: BTreeSet<u64> = store.0.iter().map(|(id, _)| *id).collect();
        assert_eq!(
            40 - left.len() as u64,
            s.accepted + s.duplicates,
            "seed {seed}: {s:?}"
        );
        assert!(parked.iter().all(|id| left.contains(id)), "seed {seed}");
        for r in &s.rejected {
            assert!(r.reason.len() <= 16 << 20);
        }
    }
}

// attack11 (docs/ATTACK-11.md): the uploader's parking rule (a report
// refused alone as a whole is parked only once a later request of the run
// is answered per record) attacked by a tester who did not write it.

fn pending(n: u64) -> Vec<(u64, String)> {
    (1..=n).map(|i| (i, format!("{{\"r\":{i}}}"))).collect()
}

/// Answers the first `good` requests per record (all accepted), then
/// refuses every request as a whole with `status` (a proxy or load
/// balancer that starts refusing mid-run, a collector restarted behind a
/// misconfigured route).
struct GoodThenRefuse {
    good: u32,
    status: u16,
    requests: u32,
}

impl Transport for GoodThenRefuse {
    fn post(&mut self, body: &[u8]) -> Result<HttpAnswer, String> {
        self.requests += 1;
        if self.requests <= self.good {
            let n = body
                .split(|&b| b == b'\n')
                .filter(|l| !l.is_empty())
                .count();
            return Ok(HttpAnswer {
                status: 200,
                body: format!(
                    "{{\"accepted\":{n},\"duplicates\":[],\"rejected\":[],\"period\":0}}"
                )
                .into_bytes(),
                retry_after: None,
            });
        }
        Ok(HttpAnswer {
            status: self.status,
            body: b"{\"code\":\"bad-request\",\"reason\":\"proxy says no\"}".to_vec(),
            retry_after: None,
        })
    }
}

fn run(good: u32, status: u16) -> (BTreeSet<u64>, usize, Option<String>) {
    let mut store = MemStore(pending(100));
    let mut parked = BTreeSet::new();
    let mut t = GoodThenRefuse {
        good,
        status,
        requests: 0,
    };
    let cfg = UploadConfig {
        max_reports: 10,
        ..UploadConfig::default()
    };
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(11);
    let s = upload(&mut store, &mut t, &cfg, &mut parked, &mut |_| {}, &mut rng).unwrap();
    (parked, store.0.len(), s.stopped)
}

/// What held: an endpoint that refuses everything from the start parks
/// nothing (attack9's rule), and nothing is lost or counted twice.
#[test]
fn refusing_from_the_start_parks_nothing() {
    for status in [400, 413] {
        let (parked, left, stopped) = run(0, status);
        assert!(parked.is_empty(), "{status}");
        assert_eq!(left, 100);
        assert!(stopped.unwrap().contains("are not parked"));
    }
}

/// attack11 O1 (docs/ATTACK-11.md): one per-record answer early in the
/// run, then the endpoint refuses every request as a whole. The 90 honest
/// reports behind it were parked for good (never sent again), one request
/// each, because the rule asked only whether *some* batch of the run was
/// answered. A refusal is now confirmed only by a later per-record answer
/// (or stands alone at the end of the outbox).
#[test]
fn an_endpoint_that_turns_to_refusing_mid_run_parks_nothing_after_it() {
    for status in [400, 413] {
        let (parked, left, stopped) = run(1, status);
        assert_eq!(left, 90, "{status}");
        assert!(
            parked.is_empty(),
            "{status}: {} honest reports parked for good after the endpoint turned",
            parked.len()
        );
        assert!(stopped.unwrap().contains("are not parked"));
    }
}
