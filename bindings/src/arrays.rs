//! Arrays across the boundary: many inputs, releases or reports in **one
//! call**, as packed little-endian buffers (numpy's `<f8`, `tobytes()`),
//! never one call per element (issue 23 item 2; bindings/README.md,
//! "Arrays").
//!
//! * [`GeoMechanism::privatize_packed_unmetered`]: n simulated devices,
//!   one release each (no ledger: simulations only, like
//!   `privatize_unmetered`).
//! * [`GeoMechanism::privatize_packed`]: n releases **of one device**,
//!   charged to its ledger n times (one charge per release, sequential
//!   composition), all or nothing: if the ledger cannot afford all n,
//!   nothing is released or charged (`BudgetExceeded`).
//! * [`ReleaseArray`]: the n releases (shared query, mechanism, ε, δ; one
//!   value each), kept on the Rust side; `values_packed()` hands the values
//!   over as one buffer, `to_json_lines()` encodes the n reports.
//! * [`ReportServer::add_release_array`], [`ReportServer::add_json_packed`],
//!   [`ReportServer::add_bytes_packed`]: server-side ingestion of a release
//!   array or of a column of uploaded reports (a pandas/Polars column of
//!   JSON strings or of binary reports, packed with their lengths), each
//!   record validated, clipped and aggregated exactly as `add_json_batch`
//!   does it.

use std::sync::Arc;

use geopriv::device::budget::Ledger;
use geopriv::server::ingest::Decoded;

use crate::server::{BatchResult, ReportServer};
use crate::{guard, GeoMechanism, GeoQuery, GeoprivError, MechanismName, PrivacyLedger};

/// The most elements one packed call takes (2^28: 2 GiB of doubles), so a
/// hostile length cannot make us reserve unbounded memory.
pub const MAX_PACKED_ELEMENTS: u64 = 1 << 28;

/// `bytes` as 8-byte little-endian words (`InvalidInput` unless its length
/// is a whole number of words, at most [`MAX_PACKED_ELEMENTS`]).
fn words<'a>(
    bytes: &'a [u8],
    what: &str,
) -> Result<impl Iterator<Item = [u8; 8]> + 'a, GeoprivError> {
    if bytes.len() % 8 != 0 {
        return Err(GeoprivError::InvalidInput(format!(
            "{what}: {} bytes is not a whole number of 8-byte little-endian values",
            bytes.len()
        )));
    }
    if (bytes.len() / 8) as u64 > MAX_PACKED_ELEMENTS {
        return Err(GeoprivError::InvalidInput(format!(
            "{what}: more than {MAX_PACKED_ELEMENTS} values in one call; split the array"
        )));
    }
    Ok(bytes.chunks_exact(8).map(|c| {
        let mut b = [0u8; 8];
        b.copy_from_slice(c);
        b
    }))
}

/// Packed little-endian f64s to a vector.
pub(crate) fn unpack_f64(bytes: &[u8], what: &str) -> Result<Vec<f64>, GeoprivError> {
    Ok(words(bytes, what)?.map(f64::from_le_bytes).collect())
}

/// A vector of f64 as packed little-endian bytes.
pub(crate) fn pack_f64(values: &[f64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() * 8);
    for v in values {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

/// Split `data` into records by `lengths` (packed little-endian i64, one
/// per record; -1 is a missing record, `None`). `InvalidInput` if the
/// lengths do not add up to `data`'s length exactly.
fn split_records<'a>(
    data: &'a [u8],
    lengths: &[u8],
) -> Result<Vec<Option<&'a [u8]>>, GeoprivError> {
    let lengths = words(lengths, "lengths")?;
    let mut out = Vec::with_capacity(lengths.size_hint().0);
    let mut at = 0usize;
    for (i, b) in lengths.enumerate() {
        let n = i64::from_le_bytes(b);
        if n == -1 {
            out.push(None);
            continue;
        }
        let end = usize::try_from(n)
            .ok()
            .and_then(|n| at.checked_add(n))
            .filter(|&end| end <= data.len())
            .ok_or_else(|| {
                GeoprivError::InvalidInput(format!(
                    "lengths: record {} has length {n}, beyond the {} bytes of data (or negative other than -1 for a missing record)",
                    i + 1,
                    data.len()
                ))
            })?;
        out.push(Some(&data[at..end]));
        at = end;
    }
    if at != data.len() {
        return Err(GeoprivError::InvalidInput(format!(
            "lengths add up to {at} bytes but the data has {}",
            data.len()
        )));
    }
    Ok(out)
}

/// n releases of one query with one mechanism (same ε, δ): the result of
/// an array privatize. The values stay on the Rust side until asked for;
/// a server ingests the whole array in one call
/// (`ReportServer.add_release_array`), each release checked and clipped as
/// one uploaded report.
#[derive(Debug, uniffi::Object)]
pub struct ReleaseArray {
    /// The report every release shares, with value 0 and no id.
    template: geopriv::Report,
    values: Vec<f64>,
    /// Each release's own `report_id` (a server counts an id once: one
    /// id shared by the whole array would count only its first report).
    ids: Vec<Option<geopriv::ReportId>>,
}

impl ReleaseArray {
    /// Release `i`: its value and its own report id.
    fn report(&self, i: usize) -> geopriv::Report {
        let mut r = self.template.clone();
        r.value = self.values.get(i).copied().unwrap_or(0.0);
        r.report_id = self.ids.get(i).copied().flatten();
        r
    }
}

#[uniffi::export]
impl ReleaseArray {
    /// Number of releases.
    pub fn len(&self) -> u64 {
        self.values.len() as u64
    }

    /// Whether there are no releases.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The released values f(x_i) + noise, packed little-endian f64 (Python:
    /// `ReleaseArray.values`, a numpy array). Unbiased as released: do not
    /// clamp or round them.
    pub fn values_packed(&self) -> Vec<u8> {
        pack_f64(&self.values)
    }

    /// The canonical id of the query answered.
    pub fn query_id(&self) -> String {
        self.template.query.canonical_id()
    }

    /// The mechanism.
    pub fn mechanism(&self) -> MechanismName {
        self.template.mechanism
    }

    /// ε of every release.
    pub fn epsilon(&self) -> f64 {
        self.template.epsilon
    }

    /// δ of every release.
    pub fn delta(&self) -> f64 {
        self.template.delta
    }

    /// Whether the noise came from a seeded (NOT secure) generator.
    pub fn seeded(&self) -> bool {
        self.template.seeded
    }

    /// The i-th release as one JSON report line (no newline);
    /// `InvalidParameter` if `index` >= `len()`.
    pub fn report_json(&self, index: u64) -> Result<String, GeoprivError> {
        guard(|| {
            let i = usize::try_from(index)
                .ok()
                .filter(|&i| i < self.values.len())
                .ok_or_else(|| {
                    GeoprivError::InvalidParameter(format!(
                        "index {index} is beyond the {} releases",
                        self.values.len()
                    ))
                })?;
            Ok(self.report(i).to_json_line())
        })
    }

    /// Every release as a JSON report line, each ending with a newline:
    /// what n devices would upload (`ReportServer.ingest` reads it).
    pub fn to_json_lines(&self) -> String {
        let mut out = String::new();
        for i in 0..self.values.len() {
            out.push_str(&self.report(i).to_json_line());
            out.push('\n');
        }
        out
    }
}

impl GeoMechanism {
    fn packed_points(query: &GeoQuery, xs: &[u8]) -> Result<Vec<f64>, GeoprivError> {
        let flat = unpack_f64(xs, "points")?;
        let d = query.dimension() as usize;
        if d == 0 || flat.len() % d != 0 {
            return Err(GeoprivError::InvalidInput(format!(
                "points: {} values is not a whole number of {d}-coordinate points for {query}",
                flat.len()
            )));
        }
        Ok(flat)
    }

    fn release_packed(
        &self,
        query: &GeoQuery,
        xs: &[u8],
        ledger: Option<&PrivacyLedger>,
    ) -> Result<Arc<ReleaseArray>, GeoprivError> {
        let flat = Self::packed_points(query, xs)?;
        let d = query.dimension() as usize;
        // Every point is checked before any noise is drawn or anything
        // charged, so a bad row refuses the whole array.
        for (i, x) in flat.chunks_exact(d).enumerate() {
            query
                .check_point(x)
                .map_err(|e| GeoprivError::InvalidInput(format!("point {}: {e}", i + 1)))?;
        }
        let n = flat.len() / d;
        let mech = self.core();
        // The n values (the same draws, in the same order, as n metered
        // releases: a charge draws nothing).
        let run = || -> Result<Vec<geopriv::Report>, GeoprivError> {
            self.with_rng(|rng| {
                let mut out = Vec::with_capacity(n);
                for x in flat.chunks_exact(d) {
                    out.push(query.release(mech, x, rng, None)?);
                }
                Ok(out)
            })
        };
        let reports = match ledger {
            None => run()?,
            Some(l) => l.with_ledger(|ledger| {
                // All or nothing: the n charges must fit (checked on a copy
                // of the state before any noise is drawn), the n values are
                // computed (they stay here), then the n charges are made in
                // one write under the file's lock, and only then returned.
                // Charged one by one, a charge by another process in
                // between left some charged and the call refused (attack10,
                // docs/ATTACK-10.md).
                let charge = mech.charge_in(ledger.state().unit())?;
                let mut dry = ledger.state().clone();
                for _ in 0..n {
                    dry.commit(&charge)?;
                }
                let reports = run()?;
                ledger.commit_n(&charge, n as u64)?;
                Ok(reports)
            })?,
        };
        let template = match reports.first() {
            Some(r) => {
                let mut t = r.clone();
                t.value = 0.0;
                t.report_id = None;
                t
            }
            None => {
                let mut t = geopriv::Report::new(
                    query.descriptor(),
                    mech.name(),
                    mech.epsilon(),
                    mech.delta(),
                    0.0,
                );
                t.seeded = self.is_seeded();
                t
            }
        };
        Ok(Arc::new(ReleaseArray {
            template,
            values: reports.iter().map(|r| r.value).collect(),
            ids: reports.iter().map(|r| r.report_id).collect(),
        }))
    }
}

#[uniffi::export]
impl GeoMechanism {
    /// Privatize f at n points in one call, one simulated device each,
    /// **without any ledger** (simulations only, like
    /// `privatize_unmetered`). `xs`: n × `query.dimension()` coordinates,
    /// row-major, packed little-endian f64 (numpy: `xs.astype('<f8').tobytes()`;
    /// Python's `privatize_unmetered(query, ndarray)` does it). One fresh
    /// OS-keyed generator for the whole array (or the seeded one). Any bad
    /// point refuses the whole array (`InvalidInput`, naming the point).
    pub fn privatize_packed_unmetered(
        &self,
        query: Arc<GeoQuery>,
        xs: Vec<u8>,
    ) -> Result<Arc<ReleaseArray>, GeoprivError> {
        guard(|| self.release_packed(&query, &xs, None))
    }

    /// n releases **by one device** (its ledger), each charged: the ledger
    /// pays n × (ε, δ) by sequential composition. All or nothing: refused
    /// with nothing released or charged (`BudgetExceeded`, `UnitMismatch`,
    /// `InvalidInput`) unless all n fit, also when another process charges
    /// the same file meanwhile. A file-backed ledger writes the n charges
    /// in one write before any value is returned. Points as in
    /// `privatize_packed_unmetered`.
    pub fn privatize_packed(
        &self,
        ledger: Arc<PrivacyLedger>,
        query: Arc<GeoQuery>,
        xs: Vec<u8>,
    ) -> Result<Arc<ReleaseArray>, GeoprivError> {
        guard(|| self.release_packed(&query, &xs, Some(&ledger)))
    }
}

#[uniffi::export]
impl ReportServer {
    /// Ingest a whole release array: each release is offered as one report
    /// (validated by the policy, grouped, clipped, aggregated), exactly as
    /// `add_json_batch` would treat its JSON lines; one call.
    pub fn add_release_array(
        &self,
        releases: Arc<ReleaseArray>,
    ) -> Result<BatchResult, GeoprivError> {
        guard(|| {
            self.add_decoded_batch((0..releases.values.len()).collect(), |i| {
                Decoded::Report(releases.report(i))
            })
        })
    }

    /// A column of JSON reports in one call: `data` is the records' UTF-8
    /// bytes back to back, `lengths` one packed little-endian i64 per
    /// record (its byte length; -1 for a missing record, rejected as
    /// `[empty]`). The same outcome as `add_json_batch` on the records
    /// (Python: `add_reports(column)` packs a pandas/Polars column).
    pub fn add_json_packed(
        &self,
        data: Vec<u8>,
        lengths: Vec<u8>,
    ) -> Result<BatchResult, GeoprivError> {
        guard(|| {
            let records = split_records(&data, &lengths)?;
            let mut decoder = geopriv::server::ingest::JsonColumnDecoder::default();
            self.add_decoded_batch(records, |r| self.decode_json_in_column(r, &mut decoder))
        })
    }

    /// A column of JSON reports in one call, the records given as one
    /// string (back to back, UTF-8) and `lengths` as in `add_json_packed`
    /// (byte lengths). The same outcome as `add_json_packed`; faster across
    /// the FFI: a string crosses as one copy, while a byte sequence is read
    /// back byte by byte by the generated code (about 1 ns a byte, 0.2 µs
    /// for a 200-byte report; BENCHMARKS.md). Python's `add_reports`
    /// uses it for str columns.
    pub fn add_json_column(
        &self,
        data: String,
        lengths: Vec<u8>,
    ) -> Result<BatchResult, GeoprivError> {
        guard(|| {
            let records = split_records(data.as_bytes(), &lengths)?;
            let mut decoder = geopriv::server::ingest::JsonColumnDecoder::default();
            self.add_decoded_batch(records, |r| self.decode_json_in_column(r, &mut decoder))
        })
    }

    /// A column of binary reports (`PrivateReport.bytes` each) in one call,
    /// packed as in `add_json_packed`; the outcome of `add_bytes_batch`.
    pub fn add_bytes_packed(
        &self,
        data: Vec<u8>,
        lengths: Vec<u8>,
    ) -> Result<BatchResult, GeoprivError> {
        guard(|| {
            let records = split_records(&data, &lengths)?;
            self.add_decoded_batch(records, |r| self.decode_bytes(r))
        })
    }
}

/// Project n locations (packed little-endian f64 pairs lat, lon, WGS84
/// degrees) to n `[x east, y north]` metre pairs, packed the same way, in
/// one call; any bad location refuses the whole array (`InvalidInput`,
/// naming it).
#[uniffi::export]
pub fn project_packed(
    latlon: Vec<u8>,
    projection: crate::Projection,
) -> Result<Vec<u8>, GeoprivError> {
    guard(|| {
        let flat = unpack_f64(&latlon, "locations")?;
        if flat.len() % 2 != 0 {
            return Err(GeoprivError::InvalidInput(format!(
                "locations: {} values is not a whole number of (lat, lon) pairs",
                flat.len()
            )));
        }
        let mut out = Vec::with_capacity(flat.len());
        for (i, p) in flat.chunks_exact(2).enumerate() {
            let xy = projection
                .forward(p[0], p[1], crate::geo::PointRole::Input)
                .map_err(|e| GeoprivError::InvalidInput(format!("location {}: {e}", i + 1)))?;
            out.extend_from_slice(&xy);
        }
        Ok(pack_f64(&out))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BudgetPolicy, BudgetUnit, ReportPolicy, ServerConfig};

    #[test]
    fn an_array_release_equals_the_releases_one_by_one() {
        let q = GeoQuery::threshold(100.0, 10.0).unwrap();
        let m = GeoMechanism::polyplace(0.05).unwrap();
        let xs: Vec<f64> = (0..50).map(|i| 80.0 + i as f64).collect();
        let arr = m
            .seeded(3)
            .privatize_packed_unmetered(q.clone(), pack_f64(&xs))
            .unwrap();
        let one = m.seeded(3);
        let singles: Vec<f64> = xs
            .iter()
            .map(|&x| one.privatize_unmetered(q.clone(), vec![x]).unwrap().value)
            .collect();
        assert_eq!(unpack_f64(&arr.values_packed(), "v").unwrap(), singles);
        assert_eq!(arr.len(), 50);
        assert!(arr.seeded());
        let line = arr.report_json(7).unwrap();
        let back = geopriv::Report::from_json(&line).unwrap();
        assert_eq!(back.value, singles[7]);
        assert_eq!(arr.to_json_lines().lines().count(), 50);
        assert!(arr.report_json(50).is_err());
    }

    #[test]
    fn bad_buffers_and_points_refuse_the_whole_array() {
        let q = GeoQuery::two_way(0.0, 0.0, 1.0).unwrap();
        let m = GeoMechanism::cauchy(0.1).unwrap();
        for bad in [
            vec![0u8; 7],
            pack_f64(&[1.0, 2.0, 3.0]),
            pack_f64(&[1.0, 2.0, f64::NAN, 0.0]),
        ] {
            let e = m.privatize_packed_unmetered(q.clone(), bad).unwrap_err();
            assert!(matches!(e, GeoprivError::InvalidInput(_)), "{e:?}");
        }
        let empty = m.privatize_packed_unmetered(q, vec![]).unwrap();
        assert!(empty.is_empty());
        assert_eq!(empty.query_id(), "two-way:T1=0;T2=0;w=1");
    }

    #[test]
    fn a_device_array_is_charged_per_release_all_or_nothing() {
        let policy = BudgetPolicy {
            unit: BudgetUnit::PerMetre,
            total_epsilon: 0.35,
            total_delta: 0.0,
            period: None,
        };
        let ledger = PrivacyLedger::in_memory(policy).unwrap();
        let m = GeoMechanism::polyplace(0.1)
            .unwrap()
            .with_unit(BudgetUnit::PerMetre)
            .unwrap();
        let q = GeoQuery::threshold(0.0, 1.0).unwrap();
        let arr = m
            .privatize_packed(ledger.clone(), q.clone(), pack_f64(&[0.1, 0.2, 0.3]))
            .unwrap();
        assert_eq!(arr.len(), 3);
        assert_eq!(ledger.status().unwrap().releases, 3);
        let before = ledger.status().unwrap();
        let e = m
            .privatize_packed(ledger.clone(), q.clone(), pack_f64(&[0.1, 0.2]))
            .unwrap_err();
        assert!(matches!(e, GeoprivError::BudgetExceeded(_)), "{e:?}");
        assert_eq!(ledger.status().unwrap(), before);
        let unstated = GeoMechanism::polyplace(0.01).unwrap();
        let e = unstated
            .privatize_packed(ledger.clone(), q, pack_f64(&[0.1]))
            .unwrap_err();
        assert!(matches!(e, GeoprivError::UnitMismatch(_)), "{e:?}");
        assert_eq!(ledger.status().unwrap(), before);
    }

    /// attack10 (docs/ATTACK-10.md, finding 2): with a file ledger, the
    /// "all or nothing" check ran on this handle's view of the file, then
    /// each release charged the file on its own. Another handle (another
    /// process) that charged in between made the call fail part-way:
    /// refused, nothing returned, but 5 of 10 charges recorded. Now the n
    /// charges are one write under the file's lock.
    #[test]
    fn a_device_array_on_a_shared_file_ledger_is_all_or_nothing() {
        let dir = std::env::temp_dir().join(format!("geopriv-attack10-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ledger.json").to_string_lossy().into_owned();
        let policy = BudgetPolicy {
            unit: BudgetUnit::PerMetre,
            total_epsilon: 1.5,
            total_delta: 0.0,
            period: None,
        };
        let this = PrivacyLedger::open_or_create(path.clone(), policy.clone()).unwrap();
        let other = PrivacyLedger::open(path, policy).unwrap();
        let m = GeoMechanism::polyplace(0.1)
            .unwrap()
            .with_unit(BudgetUnit::PerMetre)
            .unwrap();
        let q = GeoQuery::threshold(0.0, 1.0).unwrap();
        let ten = pack_f64(&[0.5; 10]);
        assert_eq!(
            m.privatize_packed(other.clone(), q.clone(), ten.clone())
                .unwrap()
                .len(),
            10
        );
        // `this` still sees an empty ledger: 10 fit in its view, 5 on disk.
        let e = m.privatize_packed(this.clone(), q, ten).unwrap_err();
        assert!(matches!(e, GeoprivError::BudgetExceeded(_)), "{e:?}");
        other.refresh().unwrap();
        assert_eq!(
            other.status().unwrap().releases,
            10,
            "a refused array left charges"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn packed_columns_ingest_like_batches() {
        let q = GeoQuery::threshold(100.0, 10.0).unwrap();
        let m = GeoMechanism::laplace(0.05, 1e-6).unwrap().seeded(9);
        let arr = m
            .privatize_packed_unmetered(q, pack_f64(&[90.0, 95.0, 100.0, 120.0]))
            .unwrap();
        let lines: Vec<String> = arr.to_json_lines().lines().map(String::from).collect();
        let policy = ReportPolicy::new(1.0, 1e-4).unwrap().accept_seeded();
        let by_array = ReportServer::new(policy.clone(), ServerConfig::new());
        let r = by_array.add_release_array(arr).unwrap();
        assert_eq!((r.records, r.accepted, r.rejected), (4, 4, 0));
        let by_batch = ReportServer::new(policy.clone(), ServerConfig::new());
        let mut records: Vec<Option<String>> = lines.iter().cloned().map(Some).collect();
        records.push(None);
        records.push(Some("{garbage".into()));
        let b = by_batch.add_json_batch(records.clone()).unwrap();
        let by_packed = ReportServer::new(policy, ServerConfig::new());
        let mut data = Vec::new();
        let mut lengths = Vec::new();
        for r in &records {
            match r {
                Some(s) => {
                    data.extend_from_slice(s.as_bytes());
                    lengths.extend_from_slice(&(s.len() as i64).to_le_bytes());
                }
                None => lengths.extend_from_slice(&(-1i64).to_le_bytes()),
            }
        }
        let p = by_packed
            .add_json_packed(data.clone(), lengths.clone())
            .unwrap();
        assert_eq!(p, b);
        assert_eq!(by_packed.to_json().unwrap(), by_batch.to_json().unwrap());
        assert_eq!(by_array.to_json().unwrap(), {
            let s = ReportServer::new(
                ReportPolicy::new(1.0, 1e-4).unwrap().accept_seeded(),
                ServerConfig::new(),
            );
            s.add_json_batch(lines.into_iter().map(Some).collect())
                .unwrap();
            s.to_json().unwrap()
        });
        // Lengths that do not add up, or point outside the data: refused whole.
        for bad in [
            (data.clone(), lengths[..8].to_vec()),
            (data.clone(), vec![1, 2, 3]),
            (data.clone(), (-2i64).to_le_bytes().to_vec()),
            (vec![], (5i64).to_le_bytes().to_vec()),
        ] {
            let e = by_packed.add_json_packed(bad.0, bad.1).unwrap_err();
            assert!(matches!(e, GeoprivError::InvalidInput(_)), "{e:?}");
        }
    }

    #[test]
    fn packed_projection_matches_one_by_one() {
        let p = crate::Projection::LocalEquirectangular {
            ref_lat: 48.85,
            ref_lon: 2.35,
        };
        let out = project_packed(pack_f64(&[48.86, 2.34, 48.85, 2.35]), p).unwrap();
        let xy = unpack_f64(&out, "xy").unwrap();
        assert_eq!(xy[..2], crate::project(48.86, 2.34, p).unwrap()[..]);
        assert_eq!(xy[2..], [0.0, 0.0]);
        let e = project_packed(pack_f64(&[48.86, 2.34, 95.0, 0.0]), p).unwrap_err();
        assert!(e.to_string().contains("location 2"), "{e}");
    }
}
