//! attack7 (issue 19, fresh-eyes attack): arbitrary and mutated bytes into
//! the server-side entry points that `examples/fuzz.rs` (run by
//! `tests/fuzz_smoke.rs`) does not reach: the server's exact partial state
//! (`AggregatorState`) restored and merged with
//! `ReportAggregator::merge_state` (what `geopriv-serve merge`, the
//! bindings' `ReportServer.merge_json` and Spark's driver call), the query
//! file (`read_query_file`, `--queries`) and the escaping of untrusted text
//! (`escape::needs_escape`). Nothing may panic; a refused merge leaves the
//! aggregator unchanged; an accepted one keeps every group inside its
//! clipping bound (|Σ| <= B·n), so its estimates are finite.

use geopriv::server::escape::Untrusted;
use geopriv::server::ingest::{
    read_query_file, AggregationConfig, AggregatorState, ReportAggregator,
};
use geopriv::server::ValidationPolicy;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// A real state: 1,000 clipped polyplace reports in one group (from
/// `ReportServer.to_json()` of the bindings, which serialises this type).
const STATE: &str = r#"{"clip":{"auto":{"deployment_n":1000000,"bias_to_se":0.1}},"groups":[{"query":{"threshold":{"threshold":100000.0,"width":20000.0}},"mechanism":"polyplace","epsilon":0.0005,"delta":0.0,"aggregate":{"n":1000,"sum":{"offset":33,"limbs":[69017792]},"sum_sq":{"offset":66,"limbs":[-1117005312,3824]}},"clipped":0},{"query":{"kde":{"center":[1200.0,-300.0],"bandwidth":150.0}},"mechanism":"laplace","epsilon":0.001,"delta":1e-7,"aggregate":{"n":3,"sum":{"offset":31,"limbs":[1744830464,1717986918,157286]},"sum_sq":{"offset":63,"limbs":[1547698176,687194767,171798364,1030792151,2]}},"clipped":1}]}"#;

const QUERIES: &str = "# tasks\n{\"query\":\"threshold:T=100000;w=20000\",\"mechanism\":\"polyplace\",\"epsilon\":0.0005,\"delta\":0,\"clip_z\":4}\nthreshold:T=1;w=2\n{\"query\":\"kde:c=1200,-300;h=150\",\"mechanism\":\"laplace\",\"epsilon\":0.001,\"delta\":1e-7}\n";

/// Tokens a hostile writer would splice in.
const TOKENS: &[&str] = &[
    "1e308",
    "-1e308",
    "1e-320",
    "-0.0",
    "NaN",
    "Infinity",
    "18446744073709551615",
    "18446744073709551616",
    "-1",
    "0",
    "null",
    "[]",
    "{}",
    "\"\"",
    "\"\\u0000\"",
    "\"\\ud800\"",
    "9999999999999999999999999",
    "[-2147483648]",
    "[2147483647,2147483647]",
    "\"fixed\"",
    "{\"fixed\":1e300}",
    "\"a-priori\"",
    "\"ldp\"",
    ",",
    ":",
    "\"",
];

fn mutate(rng: &mut SmallRng, bytes: &mut Vec<u8>) {
    for _ in 0..rng.random_range(1..4) {
        if bytes.is_empty() {
            bytes.push(b'{');
        }
        let at = rng.random_range(0..bytes.len());
        match rng.random_range(0..6) {
            0 => bytes[at] ^= 1 << rng.random_range(0..8),
            1 => bytes[at] = b"0123456789-+eE.,:{}[]\"x "[rng.random_range(0..24)],
            2 => bytes.truncate(at),
            3 => {
                let t = TOKENS[rng.random_range(0..TOKENS.len())].as_bytes();
                bytes.splice(at..at, t.iter().copied());
            }
            4 => {
                // Replace the number (or word) at `at` by a token.
                let end = (at..bytes.len())
                    .find(|&i| matches!(bytes[i], b',' | b'}' | b']'))
                    .unwrap_or(bytes.len());
                let t = TOKENS[rng.random_range(0..TOKENS.len())].as_bytes();
                bytes.splice(at..end, t.iter().copied());
            }
            _ => {
                let end = (at + rng.random_range(0..16)).min(bytes.len());
                let piece = bytes[at..end].to_vec();
                bytes.splice(at..at, piece);
            }
        }
    }
}

/// Cases per test: 20,000 (CI), or `ATTACK7_CASES` for a longer run.
fn cases() -> usize {
    std::env::var("ATTACK7_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000)
}

fn server() -> ReportAggregator {
    ReportAggregator::new(
        ValidationPolicy::new(1.0, 1e-4).expect("policy"),
        AggregationConfig::default(),
    )
}

/// Restores and merges one input; checks the invariants. Returns whether
/// the state was accepted.
fn merge_one(bytes: &[u8]) -> bool {
    let Ok(state) = serde_json::from_slice::<AggregatorState>(bytes) else {
        return false;
    };
    let mut agg = server();
    let honest: AggregatorState = serde_json::from_str(STATE).expect("the real state parses");
    agg.merge_state(&honest).expect("the real state merges");
    let before = serde_json::to_string(&agg.state()).expect("serialisable");
    match agg.merge_state(&state) {
        Err(_) => {
            let after = serde_json::to_string(&agg.state()).expect("serialisable");
            assert_eq!(before, after, "a refused merge changed the aggregator");
            false
        }
        Ok(()) => {
            for e in agg.estimates() {
                let _ = e.to_json_line();
            }
            // What was accepted once restores and merges again.
            let round = agg.state();
            let text = serde_json::to_string(&round).expect("serialisable");
            let again: AggregatorState = serde_json::from_str(&text).expect("its own state parses");
            let mut other = server();
            other.merge_state(&again).expect("its own state merges");
            true
        }
    }
}

#[test]
fn forged_server_states_never_panic_and_refusals_change_nothing() {
    let mut rng = SmallRng::seed_from_u64(720_261_127);
    let mut accepted = 0;
    let cases = cases();
    for _ in 0..cases {
        let mut b = STATE.as_bytes().to_vec();
        mutate(&mut rng, &mut b);
        accepted += usize::from(merge_one(&b));
    }
    for _ in 0..2_000 {
        let len = rng.random_range(0..96);
        let b: Vec<u8> = (0..len).map(|_| rng.random()).collect();
        merge_one(&b);
    }
    // Some mutations stay valid (a digit of a limb inside the bounds): the
    // accepted path is exercised too.
    eprintln!("{accepted} of {cases} mutated states accepted");
    assert!(
        accepted > 0 && accepted < cases,
        "accepted {accepted} of {cases}"
    );
}

#[test]
fn mutated_query_files_never_panic() {
    let mut rng = SmallRng::seed_from_u64(27);
    let mut parsed = 0;
    let cases = cases();
    for _ in 0..cases {
        let mut b = QUERIES.as_bytes().to_vec();
        mutate(&mut rng, &mut b);
        if let Ok(file) = read_query_file(&b[..], 1000) {
            parsed += 1;
            // Applying it to a policy must not panic either.
            let _ = file.apply(ValidationPolicy::new(1.0, 1e-4).expect("policy"));
        }
    }
    eprintln!("{parsed} of {cases} mutated query files parsed");
    assert!(parsed > 0);
}

#[test]
fn escaping_decides_on_every_scalar_value() {
    // Every char: no panic, and the C0/C1 controls and the bidi and format
    // characters of issue 19 item 13 are escaped.
    let mut escaped = 0;
    for c in (0..=0x10FFFFu32).filter_map(char::from_u32) {
        escaped += usize::from(geopriv::server::escape::needs_escape(c));
    }
    for c in [
        '\u{1b}',
        '\u{7f}',
        '\u{85}',
        '\u{202e}',
        '\u{2066}',
        '\u{061c}',
        '\u{2062}',
        '\u{00ad}',
        '\u{180e}',
        '\u{fff9}',
        '\u{e0041}',
        '\u{feff}',
    ] {
        assert!(
            geopriv::server::escape::needs_escape(c),
            "{:?} not escaped",
            c
        );
    }
    assert!(escaped > 0);
    // A backslash and a newline in untrusted text cannot fake a second line.
    let shown = format!("{}", Untrusted("x\\nline 2: accepted\n\u{1b}]0;t\u{7}"));
    assert!(
        !shown.contains('\n') && !shown.contains('\u{1b}'),
        "{shown}"
    );
    assert_ne!(shown, "x\\nline 2: accepted", "{shown}");
}
