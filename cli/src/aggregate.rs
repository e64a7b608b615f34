//! `geopriv aggregate`: validate reports from stdin and print one estimate
//! per (query, mechanism, ε, δ) group. Records are read as bytes
//! (`geopriv::server::ingest`): each bad record is rejected by itself with its
//! number; memory is bounded by `--max-record-bytes` and `--max-queries`.

use clap::{Args, ValueEnum};
use geopriv::server::clip::{ClipLevel, DEFAULT_BIAS_TO_SE, DEFAULT_DEPLOYMENT_N};
use geopriv::server::escape::UntrustedPath;
use geopriv::server::ingest::{
    read_query_file, AggregationConfig, Checked, Counts, Estimator, Format, FormatChoice,
    FullIdSet, IdShards, IngestError, RecordReader, ReportAggregator, DEFAULT_MAX_GROUPS,
    DEFAULT_MAX_GROUPS_PER_QUERY, DEFAULT_MAX_RECORD_BYTES, MAX_GROUPS_LIMIT,
};
use geopriv::ValidationPolicy;
use std::io::{Read, Write};

/// Input encodings.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputFormat {
    /// Decided per record: a record ends at the first newline or 0x00 and
    /// is a JSON line if it decodes as one, else a binary frame if the
    /// bytes up to the next 0x00 decode as a report, else rejected by
    /// itself (a stray frame or garbage line costs only itself).
    Auto,
    /// One JSON object per line.
    Json,
    /// COBS-framed postcard reports, each followed by 0x00.
    Binary,
}

/// Estimators.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum EstimatorArg {
    /// The (clipped) mean only.
    Mean,
    /// Also the median of means over --buckets buckets.
    MedianOfMeans,
}

/// Flags of `aggregate`: the server's validation policy and limits.
#[derive(Args, Debug, Clone)]
pub struct AggregateArgs {
    /// Input encoding.
    #[arg(long, value_enum, default_value = "auto")]
    pub format: InputFormat,
    /// Largest geo-privacy ε per unit distance the server accepts.
    #[arg(long, value_name = "E", default_value = "1", value_parser = crate::query_args::positive)]
    pub max_epsilon: f64,
    /// Largest δ the server accepts (approximate-GP reports).
    #[arg(long, value_name = "D", default_value = "1e-4")]
    pub max_delta: f64,
    /// Also accept local-DP reports with LDP ε up to this value.
    #[arg(long, value_name = "E", value_parser = crate::query_args::positive)]
    pub allow_ldp: Option<f64>,
    /// Also accept reports marked `seeded` (made with a reproducible, NOT
    /// secure generator, e.g. `privatize --seed`). For tests only.
    #[arg(long)]
    pub accept_seeded: bool,
    /// Largest record in bytes; longer records are skipped unread and
    /// rejected (at most 67108864).
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_RECORD_BYTES)]
    pub max_record_bytes: usize,
    /// Largest number of (query, mechanism, ε, δ) groups; reports that
    /// would open more are rejected (at most 1048576).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_GROUPS)]
    pub max_queries: usize,
    /// Accept only the queries listed in this file: per line a canonical
    /// id (e.g. `threshold:T=100000;w=20000`: any mechanism and budget the
    /// policy accepts, at most --max-groups-per-query groups) or a task
    /// `<id> <mechanism> <epsilon> <delta> [<clip z>]` (only these groups
    /// for that query, always admitted); `#` comments allowed.
    #[arg(long, value_name = "FILE")]
    pub queries: Option<std::path::PathBuf>,
    /// Largest number of (mechanism, ε, δ) groups of one query without
    /// tasks; reports that would open more are rejected.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_GROUPS_PER_QUERY)]
    pub max_groups_per_query: usize,
    /// Clip each report to B = [f_min − zσ_max, f_max + zσ_max] with this
    /// z instead of the default (the smallest z whose honest bias is below
    /// --clip-bias-se standard errors at --clip-n reports).
    #[arg(long, value_name = "Z")]
    pub clip_z: Option<f64>,
    /// Deployment size the default clipping level is tuned for.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_DEPLOYMENT_N)]
    pub clip_n: u64,
    /// Largest honest bias, in standard errors at --clip-n reports.
    #[arg(long, value_name = "R", default_value_t = DEFAULT_BIAS_TO_SE, value_parser = crate::query_args::positive)]
    pub clip_bias_se: f64,
    /// Do not clip (one report can then move the mean arbitrarily).
    #[arg(long)]
    pub no_clip: bool,
    /// Estimator.
    #[arg(long, value_enum, default_value = "mean")]
    pub estimator: EstimatorArg,
    /// Buckets of the median of means (2..=1024).
    #[arg(long, value_name = "K", default_value_t = geopriv::server::robust::DEFAULT_BUCKETS)]
    pub buckets: u32,
    /// Report ids remembered to count a repeated report once (as the
    /// collector does): a report whose `report_id` was accepted before is
    /// dropped as a duplicate. Memory: a hash set of 16-byte ids, about
    /// 34 bytes per id once full but up to about 58 while it doubles (its
    /// old and new tables at once): at most about 54 MB at the default
    /// 2^20.
    /// Past this many ids, repeats of the remembered ones are still
    /// dropped, but new ids are counted without being remembered (a later
    /// repeat of one of them is counted again); the summary says how many.
    /// With more than one thread the ids of records 1..=N are first kept
    /// in shards on the workers (about as much memory; at most twice as
    /// much until record N + 1 when reports arrive in groups the workers
    /// do not know yet) and then moved into the one set.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_REPORT_IDS, value_parser = clap::value_parser!(usize))]
    pub max_report_ids: usize,
    /// Threads that decode and validate the records (at most 256 are
    /// started) [default: every
    /// core]; admissions, duplicates and sums are applied in record order,
    /// so the output is byte-identical for any count.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(usize))]
    pub threads: Option<usize>,
}

/// Default of `--max-report-ids`: 2^20 ids (about 36 MB once full, at
/// most about 54 MB while the set doubles; docs/ATTACK-8.md).
pub const DEFAULT_MAX_REPORT_IDS: usize = 1 << 20;

/// Largest `--max-report-ids` (2^26 ids: about 2.3 GB once full, at most
/// about 3.4 GB while the set doubles).
pub const MAX_REPORT_IDS_LIMIT: usize = 1 << 26;

/// Counting each `report_id` once (moved to the core: `map aggregate`
/// shares it).
pub use geopriv::server::ingest::Dedup;

impl AggregateArgs {
    /// The policy described by the flags (reads the allow-list file).
    pub fn policy(&self) -> Result<ValidationPolicy, String> {
        let mut p =
            ValidationPolicy::new(self.max_epsilon, self.max_delta).map_err(|e| e.to_string())?;
        if self.accept_seeded {
            p = p.accept_seeded();
        }
        let p = match self.allow_ldp {
            Some(e) => p.allow_ldp(e).map_err(|e| e.to_string())?,
            None => p,
        };
        match &self.queries {
            None => Ok(p),
            Some(path) => {
                let file = std::fs::File::open(path)
                    .map_err(|e| format!("--queries {}: {e}", UntrustedPath(path)))?;
                let list = read_query_file(file, MAX_GROUPS_LIMIT)
                    .map_err(|e| format!("--queries {}: {e}", UntrustedPath(path)))?;
                list.apply(p)
                    .map_err(|e| format!("--queries {}: {e}", UntrustedPath(path)))
            }
        }
    }

    /// Clipping, estimator and limits described by the flags.
    pub fn config(&self) -> Result<AggregationConfig, String> {
        if self.max_queries == 0 || self.max_queries > MAX_GROUPS_LIMIT {
            return Err(format!(
                "--max-queries must be between 1 and {MAX_GROUPS_LIMIT}"
            ));
        }
        if self.max_groups_per_query == 0 {
            return Err("--max-groups-per-query must be at least 1".into());
        }
        if self.clip_n == 0 {
            return Err("--clip-n must be at least 1".into());
        }
        let clip = match (self.no_clip, self.clip_z) {
            (true, Some(_)) => return Err("--no-clip and --clip-z contradict".into()),
            (true, None) => None,
            (false, Some(z)) if z.is_finite() && (0.0..=MAX_CLIP_Z).contains(&z) => {
                Some(ClipLevel::Fixed(z))
            }
            (false, Some(_)) => {
                return Err(format!(
                    "--clip-z must be finite and in [0, {MAX_CLIP_Z:e}] (beyond it the bound z·σ_max overflows or bounds nothing, and every report of a group would be refused)"
                ))
            }
            (false, None) => {
                // Refuse up front a target no z reaches for a mechanism's
                // noise, which would refuse every report of its groups
                // (issue 19 item 14). Noise of infinite variance (Cauchy)
                // needs --clip-z anyway.
                if let Some((name, e)) =
                    geopriv::server::clip::unreachable_clip_target(self.clip_n, self.clip_bias_se)
                {
                    return Err(format!(
                        "--clip-bias-se {:e} at --clip-n {}: no clipping level reaches it for {name} reports ({e}); every report would be refused",
                        self.clip_bias_se, self.clip_n
                    ));
                }
                Some(ClipLevel::Auto {
                    deployment_n: self.clip_n,
                    bias_to_se: self.clip_bias_se,
                })
            }
        };
        let estimator = match self.estimator {
            EstimatorArg::Mean => Estimator::Mean,
            EstimatorArg::MedianOfMeans => {
                geopriv::server::robust::MedianOfMeans::new(self.buckets)
                    .map_err(|e| e.to_string())?;
                Estimator::MedianOfMeans {
                    buckets: self.buckets,
                }
            }
        };
        Ok(AggregationConfig {
            clip,
            estimator,
            max_groups: self.max_queries,
            max_groups_per_query: self.max_groups_per_query,
        })
    }

    /// `--threads`, or the number of cores.
    pub fn threads(&self) -> usize {
        self.threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    }

    /// The reader's format choice.
    pub fn format_choice(&self) -> FormatChoice {
        match self.format {
            InputFormat::Auto => FormatChoice::Auto,
            InputFormat::Json => FormatChoice::Json,
            InputFormat::Binary => FormatChoice::Binary,
        }
    }
}

/// Largest --clip-z (the default level is below 20).
pub const MAX_CLIP_Z: f64 = 1e6;

/// What a run saw.
pub type Summary = Counts;

/// Aggregates the records on `input` and writes one JSON estimate per
/// group (sorted by query id, mechanism, ε, δ) to `out`, counting a
/// repeated `report_id` once ([`Dedup`]). Each rejected
/// record gets `line N: <reason>` (JSON) or `record N: <reason>` (binary)
/// on `err`, its text escaped and cut. Fails before reading any record
/// only on an I/O error or a configuration error. Records are decoded and
/// validated on `threads` threads and applied in record order
/// ([`ReportAggregator::ingest_ordered_absorbing`]): the output is byte-identical
/// for any `threads`.
#[allow(clippy::too_many_arguments)] // the flags of one command, each used once
pub fn run<R: Read, W: Write, E: Write>(
    policy: &ValidationPolicy,
    config: AggregationConfig,
    format: FormatChoice,
    max_record_bytes: usize,
    max_report_ids: usize,
    threads: usize,
    input: R,
    mut out: W,
    mut err: E,
) -> Result<Summary, IngestError> {
    let mut reader = RecordReader::new(input, format, max_record_bytes)?;
    let word = match reader.format() {
        Format::Json => "line",
        Format::Binary => "record",
    };
    let mut agg = ReportAggregator::new(policy.clone(), config);
    let mut dedup = Dedup::new(max_report_ids);
    let full = FullIdSet::default();
    if let Some(set) = dedup.full() {
        full.publish(set);
    }
    // Records 1..=cap surely find room in the set (it holds at most one id
    // per record before): their ids are deduplicated on the workers, in
    // shards (docs/MATH.md §10.11 step 6), and moved here after them.
    let shards = IdShards::new((max_report_ids as u64).saturating_add(1), threads);
    let mut sharded = true;
    let mut counts = Counts::default();
    // The core's `ingest` loop, with the collector's once-per-report-id
    // rule: an id is remembered when its report is accepted. Everything
    // here runs in record order on this thread.
    // Once the id set is full it only answers look-ups, and the workers
    // decide the reports whose fate it alone settles (docs/MATH.md §10.11).
    agg.ingest_ordered_sharded_ids(&mut reader, threads, &full, &shards, |agg, n, checked| {
        if sharded && n >= shards.room() {
            sharded = false;
            dedup.remember(shards.take_accepted());
            if let Some(set) = dedup.full() {
                full.publish(set);
            }
        }
        counts.records += 1;
        let outcome = match checked {
            Checked::Skipped => {
                counts.skipped += 1;
                return Ok(());
            }
            // Reports without an id, valid, in an open group: aggregated
            // on a worker (no id to deduplicate).
            Checked::Absorbed(k) => {
                counts.records += k - 1;
                counts.accepted += k;
                return Ok(());
            }
            // Ids not in the full set: accepted, not remembered.
            Checked::AbsorbedWithIds(k) => {
                counts.records += k - 1;
                counts.accepted += k;
                dedup.unchecked += k;
                return Ok(());
            }
            // Ids seen first here: accepted, remembered in the shards.
            Checked::AcceptedIdsRemembered(k) => {
                counts.records += k - 1;
                counts.accepted += k;
                return Ok(());
            }
            Checked::Duplicate => {
                dedup.duplicates += 1;
                return Ok(());
            }
            Checked::Rejected(why) => Err(why),
            Checked::Report(r) => {
                let id = r.report().report_id;
                let Some(outcome) = dedup.offer(id.as_ref(), || agg.offer_checked(r)) else {
                    return Ok(());
                };
                if id.is_some() && full.get().is_none() {
                    if let Some(set) = dedup.full() {
                        full.publish(set);
                    }
                }
                outcome
            }
        };
        match outcome {
            Ok(()) => counts.accepted += 1,
            Err(why) => {
                counts.rejected += 1;
                writeln!(err, "{word} {n}: {why} [{}]", why.code())?;
            }
        }
        Ok::<(), std::io::Error>(())
    })?;
    for g in agg.estimates() {
        out.write_all(g.to_json_line().as_bytes())?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    writeln!(
        err,
        "{} records: {} accepted, {} rejected, {} skipped (blank, comment or empty)",
        counts.records, counts.accepted, counts.rejected, counts.skipped
    )?;
    // Only when there were any: the seeded pipelines of
    // scripts/check-digests.sh have none and keep their stderr.
    if dedup.duplicates > 0 {
        writeln!(
            err,
            "{} duplicate reports dropped (a report_id accepted before counts once)",
            dedup.duplicates
        )?;
    }
    if dedup.unchecked > 0 {
        writeln!(
            err,
            "warning: {} reports accepted after --max-report-ids ids were remembered: their repeats, if any, were counted again",
            dedup.unchecked
        )?;
    }
    err.flush()?;
    Ok(counts)
}
