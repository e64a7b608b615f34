//! Issue 19 item 12: the memory of a group is bounded and the documented
//! figure holds. Measured as the growth of the process's resident set
//! (Linux, /proc/self/status) while 100,000 groups open, each from a report
//! of its own query; alone in its file so no other test shares the process.

use geopriv::server::ingest::{
    AggregationConfig, ReportAggregator, GROUP_BYTES_BOUND, MAX_GROUPS_LIMIT,
};
use geopriv::server::MAX_KDE_DIMENSION;
use geopriv::{MechanismName, QueryDescriptor, Report, ValidationPolicy};

fn rss_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[test]
fn memory_per_group_is_bounded_and_documented() {
    const GROUPS: usize = 100_000;
    let config = AggregationConfig {
        max_groups: MAX_GROUPS_LIMIT,
        ..AggregationConfig::default()
    };
    let policy = ValidationPolicy::new(1.0, 0.0).unwrap();
    // KDE centres of the largest dimension accepted: the worst case.
    let report = |i: usize| {
        let mut center = vec![0.0; MAX_KDE_DIMENSION];
        center[0] = i as f64;
        let q = QueryDescriptor::Kde {
            center,
            bandwidth: 100.0,
        };
        Report::new(q, MechanismName::Polyplace, 0.01, 0.0, 0.5)
    };
    let mut agg = ReportAggregator::new(policy, config);
    agg.offer(report(0)).unwrap();
    let before = rss_bytes();
    for i in 1..=GROUPS {
        agg.offer(report(i)).unwrap();
    }
    let after = rss_bytes();
    assert_eq!(agg.groups(), GROUPS + 1);
    // A centre longer than the bound is refused before it opens a group.
    let mut long = report(0);
    long.query = QueryDescriptor::Kde {
        center: vec![0.0; 32_001],
        bandwidth: 100.0,
    };
    assert_eq!(agg.offer(long).unwrap_err().code(), "invalid-query");
    if let (Some(b), Some(a)) = (before, after) {
        let per_group = a.saturating_sub(b) as f64 / GROUPS as f64;
        eprintln!("resident bytes per group: {per_group:.0} (bound {GROUP_BYTES_BOUND})");
        assert!(
            per_group <= GROUP_BYTES_BOUND as f64,
            "{per_group} bytes per group"
        );
    }
}
