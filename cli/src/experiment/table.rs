//! The markdown report of a run.

use super::mechanisms::Contender;
use super::{fmt_count, fmt_eps, Outcome};
use std::fmt::Write;

fn sci(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else {
        format!("{v:.3e}")
    }
}

/// results.md: settings, then per panel one table of the error against the
/// truth and one of the privacy-only error, with the PolyPlace / Student's t
/// ratio when both ran.
pub fn markdown(o: &Outcome) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# {}\n", o.name);
    for line in &o.settings {
        let _ = writeln!(s, "- {line}");
    }
    let _ = writeln!(s, "- computed in {:.1} s\n", o.seconds);
    let ratio = o.mechs.contains(&Contender::POLYPLACE) && o.mechs.contains(&Contender::STUDENT_T);
    type Pick = fn(&super::Record) -> Option<f64>;
    let mut sections: Vec<(String, Pick)> = vec![
        (format!("{} against the true answer", o.metric), |r| {
            Some(r.error)
        }),
        (
            format!(
                "{} against the non-private soft query (privacy noise only)",
                o.metric
            ),
            |r| Some(r.noise_error),
        ),
    ];
    if o.records.iter().any(|r| r.expected_noise.is_some()) {
        sections.push((
            format!(
                "Expected privacy-noise {} (closed form): (1/n²) Σ Var(report_i) over the first repetition's population; no sampling noise, '–' where no closed form exists",
                o.metric
            ),
            |r| r.expected_noise,
        ));
    }
    for (title, pick) in sections {
        let _ = writeln!(s, "## {title}\n");
        for g in &o.groups {
            if o.groups.len() > 1 || !g.is_empty() {
                let _ = writeln!(s, "### {g}\n");
            }
            let _ = write!(s, "| n | ε ({}) |", o.eps_unit);
            if let Some(pd) = &o.per_device {
                let _ = write!(s, " {} |", pd.heading);
            }
            for m in &o.mechs {
                let _ = write!(s, " {} |", m.label());
            }
            if ratio {
                let _ = write!(s, " PolyPlace / t |");
            }
            let _ = writeln!(s);
            let _ = write!(s, "|---:|---:|");
            if o.per_device.is_some() {
                let _ = write!(s, "---:|");
            }
            for _ in &o.mechs {
                let _ = write!(s, "---:|");
            }
            if ratio {
                let _ = write!(s, "---:|");
            }
            let _ = writeln!(s);
            for (n, eps) in o.sweep.cells() {
                let _ = write!(s, "| {} | {} |", fmt_count(n as f64), fmt_eps(eps));
                if let Some(pd) = &o.per_device {
                    let _ = write!(s, " {}ε = {:.3e} |", pd.queries, pd.queries as f64 * eps);
                }
                for &m in &o.mechs {
                    let v = o.get(g, n, eps, m).and_then(pick);
                    let _ = write!(s, " {} |", v.map(sci).unwrap_or_else(|| "–".into()));
                }
                if ratio {
                    let p = o.get(g, n, eps, Contender::POLYPLACE).and_then(pick);
                    let t = o.get(g, n, eps, Contender::STUDENT_T).and_then(pick);
                    let r = match (p, t) {
                        (Some(p), Some(t)) if t > 0.0 => format!("{:.3}", p / t),
                        _ => "–".into(),
                    };
                    let _ = write!(s, " {r} |");
                }
                let _ = writeln!(s);
            }
            let _ = writeln!(s);
        }
    }
    s
}
