//! attack11 (docs/ATTACK-11.md): the outbox uploader's parking rule
//! (attack9: a report refused alone as a whole is parked only once some
//! batch of the run was answered per record) attacked by a tester who did
//! not write it.

use geopriv::device::outbox::{upload, HttpAnswer, OutboxStore, Transport, UploadConfig};
use rand::SeedableRng;
use std::collections::BTreeSet;

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
