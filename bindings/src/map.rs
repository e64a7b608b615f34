//! Density maps under one per-device budget (core: `geopriv::map`,
//! docs/MATH.md §9): the device releases its location for a whole map at
//! a per-device total ε, charged once to its [`PrivacyLedger`]
//! ([`MapRelease`]); the server turns the reports into a map with
//! per-cell standard errors ([`MapServer`]); [`plan_map`] says which
//! mechanism to use at a given ε and n, in one line.
//!
//! Device, three lines (Kotlin; Swift and Python alike):
//!
//! ```kotlin
//! val map = MapRelease(MapGrid(0.0, 20_000.0, 0.0, 20_000.0, 61u, 61u, null), MapMechanism.APriori, 1e-3)
//! val report = map.release(ledger, listOf(5_000.0, 7_500.0))   // charges 1e-3 per metre, once
//! upload(report.json)                                           // or report.bytes
//! ```
//!
//! Server: `MapServer(grid, mechanism, ε)`, `addAllJson(lines)` (bad
//! records counted with their reason, never an exception that loses the
//! batch), `estimate(null)`. Partial states (`toJson`/`fromJson`/`merge`)
//! hold exact integer counts, so any sharding gives the same map, bit for
//! bit; the map equals `geopriv map aggregate`'s on the same reports.
//!
//! Report ids: a `MapServer` counts each `report_id` once, with the rule
//! and the code of `geopriv map aggregate` (core `Dedup`, docs/MATH.md
//! §10.11): in the order it receives them, a decoded report whose id a
//! report *accepted* before carried is dropped as a duplicate
//! (`status().duplicates`, `MapBatch.duplicates`; neither accepted nor
//! rejected), an id is remembered only once its report is accepted (a
//! refused record never censors a later valid one), at most
//! `max_report_ids` of them (2^20 by default, `--max-report-ids`; past
//! that new ids are accepted unremembered and counted in
//! `status().unchecked`, as the CLI does). A partial state (`to_json`)
//! carries no ids: `merge` and `from_json` start from none, so merging two
//! servers' states counts an id both accepted twice.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use geopriv::device::budget::BudgetUnit as CoreUnit;
use geopriv::map::{
    plan, KdeGrid, MapAggregator, MapClip, MapMechanism as CoreMechanism,
    MapRelease as CoreRelease, MapReport, QuerySet, DEFAULT_MAX_BINS,
};
use geopriv::server::clip::ClipLevel;
use geopriv::server::ingest::Dedup;
use serde::{Deserialize, Serialize};

use crate::{guard, lock, GeoprivError, PrivacyLedger, Projection};

/// Largest number of cells of a map grid (the limit of
/// `GridAggregator`: 2^18, a 512 × 512 map); larger grids are refused
/// (`InvalidParameter`) before anything is allocated.
pub const MAX_MAP_CELLS: u64 = geopriv::server::aggregate::MAX_GRID_CELLS as u64;
/// Largest `max_bins` a server accepts (bins per axis of its fine grid:
/// 4096² exact counts are 128 MB, before the FFT buffers).
const MAX_BINS_LIMIT: u32 = 4096;
/// Version tag of the partial-state JSON.
const STATE_FORMAT: &str = "geopriv-map-state/1";

/// The map: `points_x × points_y` kernel-density cells spanning the box
/// `[x_min, x_max] × [y_min, y_max]` (metres, ends included) with Gaussian
/// bandwidth h, cell (i, k) at
/// (x_min + i·(x_max−x_min)/(points_x−1), y_min + k·(y_max−y_min)/(points_y−1))
/// estimating the mean over devices of f_ik(x) = exp(−|x − t_ik|²/(2h²)).
/// The box is also the public domain: a device outside it is refused.
///
/// `bandwidth` `null` means one cell diagonal (the CLI's default). At
/// least 2 points per axis, at most [`MAX_MAP_CELLS`] cells.
/// Kotlin: `MapGrid(0.0, 20_000.0, 0.0, 20_000.0, 61u, 61u, null)`.
#[derive(Debug, Clone, Copy, PartialEq, uniffi::Record)]
pub struct MapGrid {
    /// West edge (metres).
    pub x_min: f64,
    /// East edge.
    pub x_max: f64,
    /// South edge.
    pub y_min: f64,
    /// North edge.
    pub y_max: f64,
    /// Cells along x (>= 2).
    pub points_x: u32,
    /// Cells along y (>= 2).
    pub points_y: u32,
    /// Bandwidth h in metres; `null`: one cell diagonal.
    pub bandwidth: Option<f64>,
}

impl MapGrid {
    /// The core query set, sizes checked before anything is allocated.
    fn set(&self) -> Result<QuerySet, GeoprivError> {
        let (px, py) = (self.points_x as u64, self.points_y as u64);
        if px < 2 || py < 2 {
            return Err(GeoprivError::InvalidParameter(format!(
                "a map needs at least 2 points per axis, got {px} x {py}"
            )));
        }
        if px * py > MAX_MAP_CELLS {
            return Err(GeoprivError::InvalidParameter(format!(
                "a {px} x {py} map has {} cells, above the limit of {MAX_MAP_CELLS}",
                px * py
            )));
        }
        let bbox = [self.x_min, self.x_max, self.y_min, self.y_max];
        let h = match self.bandwidth {
            Some(h) => h,
            None => {
                ((bbox[1] - bbox[0]) / (px - 1) as f64).hypot((bbox[3] - bbox[2]) / (py - 1) as f64)
            }
        };
        let grid = KdeGrid::new_2d(bbox, [px as usize, py as usize], h)?;
        Ok(QuerySet::Kde(grid))
    }

    /// The cell centres along x and along y.
    fn axes(&self, set: &QuerySet) -> (Vec<f64>, Vec<f64>) {
        match set {
            QuerySet::Kde(g) => {
                let (o, s, p) = (g.origin(), g.step(), g.points());
                let axis = |a: usize| (0..p[a]).map(|i| o[a] + i as f64 * s[a]).collect();
                (axis(0), axis(1))
            }
            QuerySet::Ramps(_) | QuerySet::Districts(_) => (Vec::new(), Vec::new()),
        }
    }
}

/// How a device spends its per-device ε on the whole map (core
/// `MapMechanism`, docs/MATH.md §9.2). Kotlin `MapMechanism.APriori`,
/// `MapMechanism.Sampled(4u)`; Swift `.aPriori`; Python
/// `MapMechanism.A_PRIORI()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum MapMechanism {
    /// One noisy location x̃ = x + N, density ∝ exp(−ε|z|) (planar
    /// Laplace); the map is post-processing (the server debiases by FFT).
    /// The best map at every (ε, n) measured (the planner's usual pick).
    APriori,
    /// Every cell f_j(x) + Laplace(L1/ε), L1 the certified ℓ1 Lipschitz
    /// constant of the whole map.
    VectorLaplace,
    /// Every cell by PolyPlace at ε/m (sequential composition over m cells).
    Composition,
    /// k cells chosen independently of x, each by PolyPlace at ε/k.
    Sampled {
        /// Cells answered per device (1..=m).
        k: u32,
    },
}

impl From<MapMechanism> for CoreMechanism {
    fn from(m: MapMechanism) -> Self {
        match m {
            MapMechanism::APriori => CoreMechanism::APriori,
            MapMechanism::VectorLaplace => CoreMechanism::VectorLaplace,
            MapMechanism::Composition => CoreMechanism::Composition,
            MapMechanism::Sampled { k } => CoreMechanism::Sampled { k: k as usize },
        }
    }
}

impl From<CoreMechanism> for MapMechanism {
    fn from(m: CoreMechanism) -> Self {
        match m {
            CoreMechanism::APriori => MapMechanism::APriori,
            CoreMechanism::VectorLaplace => MapMechanism::VectorLaplace,
            CoreMechanism::Composition => MapMechanism::Composition,
            CoreMechanism::Sampled { k } => MapMechanism::Sampled {
                k: u32::try_from(k).unwrap_or(u32::MAX),
            },
        }
    }
}

/// What a device uploads for the map: one report, in two encodings.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct MapUpload {
    /// One JSON line (no newline), the format `geopriv map release`
    /// writes and `geopriv map aggregate` reads.
    pub json: String,
    /// The same report as bytes (the UTF-8 of `json`), for binary columns.
    pub bytes: Vec<u8>,
    /// The per-device total ε charged (per metre).
    pub epsilon: f64,
    /// The mechanism's name (`a-priori`, `vector-laplace`, `composition`,
    /// `sampled-k`).
    pub mechanism: String,
}

impl MapUpload {
    fn from_core(r: &MapReport) -> Result<Self, GeoprivError> {
        let json = serde_json::to_string(r)
            .map_err(|e| GeoprivError::Internal(format!("map report: {e}")))?;
        Ok(MapUpload {
            bytes: json.clone().into_bytes(),
            json,
            epsilon: r.epsilon,
            mechanism: r.mechanism.name(),
        })
    }
}

/// A device's release of its location for a whole map at a per-device
/// total ε (per metre), metered by its ledger. Immutable, thread-safe.
///
/// `release(ledger, [x, y])` checks the location (finite, inside the
/// map's box), charges the ledger ε once (unit: per metre) and returns the
/// report; a refused release (`BudgetExceeded`, `UnitMismatch`,
/// `InvalidInput`) charges nothing. Noise from the OS's secure generator.
///
/// ```python
/// release = geopriv.MapRelease(grid, geopriv.MapMechanism.A_PRIORI(), 1e-3)
/// upload = release.release(ledger, [5_000.0, 7_500.0])   # ledger charged 1e-3
/// send(upload.json)
/// ```
#[derive(Debug, uniffi::Object)]
pub struct MapRelease {
    inner: CoreRelease,
}

impl MapRelease {
    fn location(&self, x: &[f64]) -> Result<(), GeoprivError> {
        self.inner
            .set()
            .check_location(x)
            .map_err(|e| GeoprivError::InvalidInput(format!("location: {e}")))
    }
}

#[uniffi::export]
impl MapRelease {
    /// A release of `grid` with `mechanism` at per-device total `epsilon`
    /// per metre (finite, > 0). Vector Laplace certifies its L1 here
    /// (milliseconds to a second); the others are instant.
    #[uniffi::constructor]
    pub fn new(
        grid: MapGrid,
        mechanism: MapMechanism,
        epsilon: f64,
    ) -> Result<Arc<Self>, GeoprivError> {
        guard(|| {
            let inner = CoreRelease::new(grid.set()?, mechanism.into(), epsilon)?
                .with_unit(CoreUnit::PerMetre);
            Ok(Arc::new(Self { inner }))
        })
    }

    /// Release the location `[x, y]` (metres, the grid's coordinates) and
    /// charge `ledger` the per-device ε once, before returning.
    pub fn release(
        &self,
        ledger: Arc<PrivacyLedger>,
        location: Vec<f64>,
    ) -> Result<MapUpload, GeoprivError> {
        guard(|| {
            self.location(&location)?;
            let r = ledger.with_ledger(|l| {
                Ok(self
                    .inner
                    .release(l, &location, &mut geopriv::SecureRng::new())?)
            })?;
            MapUpload::from_core(&r)
        })
    }

    /// `release` for a GPS fix: latitude/longitude (WGS84 degrees)
    /// projected with `projection`; the grid must be in that projection's
    /// metres (e.g. `project` its corners with the same projection). The
    /// charge is per Web Mercator metre (`PER_MERCATOR_METRE`) under
    /// `WebMercator` and per ground metre (`PER_METRE`) under
    /// `LocalEquirectangular`: the ledger must be in that unit.
    pub fn release_latlon(
        &self,
        ledger: Arc<PrivacyLedger>,
        lat: f64,
        lon: f64,
        projection: Projection,
    ) -> Result<MapUpload, GeoprivError> {
        guard(|| {
            let xy = projection.forward(lat, lon, crate::geo::PointRole::Input)?;
            let location = xy.to_vec();
            self.location(&location)?;
            // Web Mercator metres are not ground metres (docs/MATH.md §8.3).
            let unit = match projection {
                crate::Projection::WebMercator => CoreUnit::PerMercatorMetre,
                crate::Projection::LocalEquirectangular { .. } => CoreUnit::PerMetre,
            };
            let inner = self.inner.clone().with_unit(unit);
            let r = ledger.with_ledger(|l| {
                Ok(inner.release(l, &location, &mut geopriv::SecureRng::new())?)
            })?;
            MapUpload::from_core(&r)
        })
    }

    /// The report without charging any ledger: for simulations and tests
    /// only (the name says it is unmetered).
    pub fn release_unmetered(&self, location: Vec<f64>) -> Result<MapUpload, GeoprivError> {
        guard(|| {
            self.location(&location)?;
            let r = self
                .inner
                .release_unmetered(&location, &mut geopriv::SecureRng::new())?
                .with_random_id(&mut geopriv::SecureRng::new());
            MapUpload::from_core(&r)
        })
    }

    /// The per-device total ε (per metre) each release charges.
    pub fn per_device_epsilon(&self) -> f64 {
        self.inner.epsilon()
    }

    /// Why that is the device's whole loss, in one line (e.g. "one noisy
    /// location; every map of it is post-processing").
    pub fn accounting(&self) -> String {
        self.inner.per_device_total().accounting
    }
}

/// How a [`MapServer`] clips the values of the reports it accepts, as
/// `geopriv map aggregate` does (issue 19 item 10): each value of cell j
/// is clipped to the public bounds B_j = [f_min − zσ_max, f_max + zσ_max]
/// of that cell, so one report moves a cell's mean by at most width(B_j)/n
/// whatever it holds (`MapClipInfo.influence_bound`). Noise a priori
/// releases a location, not values: nothing to clip. Kotlin
/// `MapClipping.Default`, Python `MapClipping.DEFAULT`.
#[derive(Debug, Clone, Copy, PartialEq, uniffi::Enum)]
pub enum MapClipping {
    /// The CLI's default level: z from the noise shape for 10^6 devices
    /// and an honest bias at most 0.1 standard error (`ClipLevel::default`).
    Default,
    /// A fixed z in units of σ_max, 0 to 10^6 (`--clip-z`).
    Z {
        /// The level.
        z: f64,
    },
    /// No clipping (`--no-clip`): one report can move a cell arbitrarily.
    Off,
}

/// Largest z a map server takes (`geopriv map aggregate --clip-z`'s limit:
/// beyond it the bounds bound nothing).
pub(crate) const MAX_CLIP_Z: f64 = 1e6;

/// What a clipping map server states, as the `clip` object of `geopriv map
/// aggregate`'s output (same fields, same numbers).
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct MapClipInfo {
    /// z, in units of σ_max.
    pub z: f64,
    /// σ_max of a value.
    pub sigma_max: f64,
    /// The smallest lower bound of a cell.
    pub lower: f64,
    /// The largest upper bound of a cell.
    pub upper: f64,
    /// The largest honest bias bound of a cell, σ_max E[(|Z| − z)+].
    pub bias_bound: f64,
    /// The largest width(B_j).
    pub max_width: f64,
    /// max_width / n: how far one report can move a cell's mean.
    pub influence_bound: f64,
    /// Values clipped over all accepted reports (merged shards included).
    pub clipped: u64,
}

/// One rejected record of a batch: its position, a stable code and the
/// reason. Codes: `empty`, `too-large`, `malformed` (not a map report),
/// `other-map`, `other-mechanism`, `other-epsilon`, `invalid-report`
/// (wrong shape or non-finite numbers), `overflow`.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct MapRejection {
    /// Index of the record in the batch.
    pub index: u64,
    /// The stable code.
    pub code: String,
    /// The reason, ending with the code in brackets.
    pub reason: String,
}

/// The outcome of a batch: how many records were accepted, and every
/// rejected one with its reason. A batch never raises for bad records.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct MapBatch {
    /// Records added to the map.
    pub accepted: u64,
    /// Records refused (each listed in `rejections`).
    pub rejected: u64,
    /// Reports dropped because a report with their `report_id` was
    /// accepted before (module docs).
    pub duplicates: u64,
    /// The refused records, in batch order.
    pub rejections: Vec<MapRejection>,
}

/// What a server has seen: reports accepted and rejections by code
/// (over its whole life, merged partial states included).
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct MapServerStatus {
    /// Reports in the map.
    pub accepted: u64,
    /// Reports refused.
    pub rejected: u64,
    /// Refusals per code (see `MapRejection`).
    pub rejections: HashMap<String, u64>,
    /// Reports dropped as duplicates of an accepted `report_id`, by this
    /// server (not carried by `to_json`, module docs).
    pub duplicates: u64,
    /// Reports with an id accepted after `max_report_ids` ids were
    /// remembered (a later repeat of one of them counts again).
    pub unchecked: u64,
}

/// A map estimate with its per-cell standard errors.
///
/// Cell j = i·ys.len() + k is at (xs[i], ys[k]) (x index major, as
/// `geopriv map aggregate` prints). For noise a priori the value is
/// (1/n) Σ_r K_λ(t_j − x̃_r), K_1 = K̃ the deconvolution kernel (unbiased
/// for the devices' mean of f_j), K_0 the plain kernel; the standard error
/// is √(sample variance of the per-device terms / n). For the other
/// mechanisms it is the mean of the cell's released values and its
/// standard error (NaN value, infinite error for a cell nobody answered).
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct MapEstimate {
    /// Estimated mean of f_j over the devices, per cell.
    pub values: Vec<f64>,
    /// Standard error per cell: the 95% interval for the true map is
    /// centre ± 1.96·SE, the centre the value or, where given,
    /// `interval_centres`.
    pub standard_errors: Vec<f64>,
    /// The centres of the 95% intervals where they are not the values:
    /// for the EM map (`kernel_lambda` NaN) and for a λ < 1 map the planner
    /// picked, the λ = 1 map's values, with its standard errors in
    /// `standard_errors` (docs/MATH.md §9.7); `null` for a kernel map asked
    /// for by its λ and the other mechanisms.
    pub interval_centres: Option<Vec<f64>>,
    /// Cell centres along x (metres).
    pub xs: Vec<f64>,
    /// Cell centres along y.
    pub ys: Vec<f64>,
    /// Reports used.
    pub n: u64,
    /// λ of the kernel K_λ (noise a priori; 0 otherwise).
    pub kernel_lambda: f64,
    /// The mechanism's name.
    pub mechanism: String,
    /// The per-device total ε of every report (per metre).
    pub per_device_epsilon: f64,
    /// How that total is accounted, in words.
    pub accounting: String,
    /// Bound on |value − exact estimator| from binning and the FFT.
    pub discretisation_bound: f64,
    /// The planner's line when it chose λ (`estimate(null)`), else `null`.
    pub planner: Option<String>,
    /// The clipping stated (as `geopriv map aggregate`'s `clip`); `null`
    /// for noise a priori and `MapClipping.Off`.
    pub clip: Option<MapClipInfo>,
}

/// One mechanism's predicted map error (ASE: mean over cells of the
/// expected squared error against the devices' own map).
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct MapPrediction {
    /// Name (`a-priori λ=0.6`, `vector-laplace`, `sampled-4`, ...).
    pub name: String,
    /// The mechanism to construct for it.
    pub mechanism: MapMechanism,
    /// λ of the server's kernel (noise a priori).
    pub kernel_lambda: Option<f64>,
    /// Predicted ASE = variance + bias². NaN when nothing predicts it: no
    /// report lies inside the map's bins (every kernel map is 0; the plan's
    /// `line` says so).
    pub ase: f64,
    /// Its variance part (NaN with `ase`).
    pub variance: f64,
    /// Its squared-bias part (NaN with `ase`).
    pub bias2: f64,
    /// `ase` is an upper bound rather than an estimate.
    pub upper_bound: bool,
    /// The number `predictions` is sorted by: `ase`, except EM where its
    /// ASE interval is formed (at every εh since branch small19), whose point estimate within the
    /// interval orders it while `ase` is that point clamped further (ranked)
    /// or the interval's top (`upper_bound`, not ranked); a ranked EM
    /// whose interval's log-centre √(lo·hi) is not below λ = 1's
    /// prediction is keyed at that prediction and goes after λ = 1
    /// (branch plan20); docs/MATH.md §9.4. NaN with a NaN `ase`.
    pub order_key: f64,
}

/// The planner's pick and every prediction, best first.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct MapPlan {
    /// The pick (the first prediction).
    pub pick: MapPrediction,
    /// The explanation, one line.
    pub line: String,
    /// Every prediction, best first: in the order of their `order_key`,
    /// except where reports were given and none lies inside the map's
    /// bins: then the first is noise a priori at λ = 0 with NaN numbers
    /// (`order_key` NaN; the pick, "no prediction"), the rest in order
    /// (docs/ATTACK-14.md O1).
    pub predictions: Vec<MapPrediction>,
}

fn plan_record(p: geopriv::map::Plan) -> MapPlan {
    let predictions: Vec<MapPrediction> = p
        .predictions
        .iter()
        .map(|q| MapPrediction {
            name: q.name.clone(),
            mechanism: match (q.lambda, q.k) {
                (Some(_), _) => MapMechanism::APriori,
                (None, Some(k)) => MapMechanism::Sampled {
                    k: u32::try_from(k).unwrap_or(u32::MAX),
                },
                (None, None) if q.name == "composition" => MapMechanism::Composition,
                (None, None) => MapMechanism::VectorLaplace,
            },
            kernel_lambda: q.lambda,
            ase: q.ase,
            variance: q.variance,
            bias2: q.bias2,
            upper_bound: q.upper_bound,
            order_key: q.order_key,
        })
        .collect();
    MapPlan {
        pick: predictions[0].clone(),
        line: p.line,
        predictions,
    }
}

/// The planner (docs/MATH.md §9.3): given the per-device ε (per metre),
/// the grid and the expected number of devices n, predict each
/// mechanism's map error and pick one, explained in one line. Without
/// reports the a-priori bias is not estimated (λ = 1 assumed); a
/// `MapServer`'s `plan` uses its reports for that.
///
/// ```kotlin
/// println(planMap(grid, 1e-3, 100_000uL).line)  // "pick a-priori λ=1.0: predicted ASE ..."
/// ```
#[uniffi::export]
pub fn plan_map(grid: MapGrid, epsilon: f64, n: u64) -> Result<MapPlan, GeoprivError> {
    guard(|| Ok(plan_record(plan(&grid.set()?, epsilon, n, None)?)))
}

/// The server's public parameters (every shard derives the same binning
/// from them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    bbox: [f64; 4],
    points: [u32; 2],
    bandwidth: Option<f64>,
    mechanism: CoreMechanism,
    epsilon: f64,
    max_bins: u32,
    /// The resolved clipping level z (`None`: no clipping, or noise a
    /// priori). Absent in states of servers before clipping (unclipped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    clip_z: Option<f64>,
}

impl Params {
    fn grid(&self) -> MapGrid {
        MapGrid {
            x_min: self.bbox[0],
            x_max: self.bbox[1],
            y_min: self.bbox[2],
            y_max: self.bbox[3],
            points_x: self.points[0],
            points_y: self.points[1],
            bandwidth: self.bandwidth,
        }
    }
}

/// The partial state on the wire: parameters, sparse exact bin counts
/// (index, count) in increasing index or exact per-cell aggregates, and
/// the counts of reports accepted and refused.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct State {
    format: String,
    params: Params,
    accepted: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    bins: Option<Vec<(u64, u64)>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    outside: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cells: Option<Vec<geopriv::Aggregator>>,
    rejections: BTreeMap<String, u64>,
    /// The offsets' moments of the bins where the planner reads them
    /// ([index, "Σq0", "Σq1", "Σq0²", "Σq1²", "Σq0q1"], i128 as decimal
    /// strings); absent in older states (branch state25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    moments: Option<Vec<geopriv::map::MomentRow>>,
    /// Values clipped (clipping servers only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    clipped: Option<u64>,
}

#[derive(Debug)]
struct Inner {
    map: MapAggregator,
    rejections: BTreeMap<String, u64>,
    clipped: u64,
    /// The ids of the accepted reports of this server only (module docs).
    dedup: Dedup,
}

/// A decoded record that was not refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Added {
    Accepted,
    Duplicate,
}

/// The server of one map (grid, mechanism, per-device ε): reports in, a
/// map with per-cell standard errors out. Thread-safe (a `Mutex` inside).
///
/// Noise-a-priori reports are binned into exact integer counts on a fine
/// grid (bins of at most h/8, at most `max_bins` per axis; 1024 by default,
/// as `geopriv map aggregate`) and the map is the counts convolved with the
/// kernel K_λ by FFT; other mechanisms keep exact per-cell sums. Either
/// way the state is exact: `to_json` of a shard, `from_json` and `merge`
/// give bit for bit the map of one server that saw every report.
///
/// A report for another grid, mechanism or ε, malformed, or with
/// non-finite numbers is refused with a reason and counted (`status`);
/// `add_all_json`/`add_all_bytes` never raise for bad records.
///
/// ```python
/// server = geopriv.MapServer(grid, geopriv.MapMechanism.A_PRIORI(), 1e-3)
/// batch = server.add_all_json(lines)          # batch.rejections: index, code, reason
/// m = server.estimate(None)                   # the planner picks λ, as the CLI does
/// print(m.values[0], m.standard_errors[0], m.per_device_epsilon)
/// ```
#[derive(Debug, uniffi::Object)]
pub struct MapServer {
    params: Params,
    /// Largest record accepted, in bytes (a report with m values needs
    /// about 25 bytes a value).
    max_record: usize,
    release: CoreRelease,
    /// The clipping bounds (`params.clip_z`), `None` when not clipping.
    clip: Option<MapClip>,
    /// At most this many report ids remembered.
    max_report_ids: usize,
    state: Mutex<Inner>,
}

/// Declares [`MapCode`] and its table [`MapCode::ALL`] from one list, so
/// the codes a map server writes and the codes `from_json` accepts in a
/// state's rejection table cannot drift apart.
macro_rules! map_codes {
    ($($(#[$doc:meta])* $variant:ident => $code:literal,)*) => {
        /// A rejection code a map server writes (`status().rejections`,
        /// `MapRejection.code`). Writers take this type, never a string.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        enum MapCode {
            $($(#[$doc])* $variant,)*
        }

        impl MapCode {
            /// Every code, in declaration order.
            const ALL: &'static [MapCode] = &[$(MapCode::$variant,)*];

            /// The code as written in rejection tables.
            fn as_str(self) -> &'static str {
                match self {
                    $(MapCode::$variant => $code,)*
                }
            }
        }
    };
}

map_codes! {
    /// Above the server's record size limit.
    TooLarge => "too-large",
    /// Not UTF-8, or not a map report.
    Malformed => "malformed",
    /// Blank record.
    Empty => "empty",
    /// A report for another grid.
    OtherMap => "other-map",
    /// A report for another mechanism.
    OtherMechanism => "other-mechanism",
    /// A report for another per-device ε.
    OtherEpsilon => "other-epsilon",
    /// A count would overflow.
    Overflow => "overflow",
    /// Any other refusal of the core map aggregator.
    InvalidReport => "invalid-report",
}

/// Whether `code` is one a map server writes (`from_json` accepts only
/// those in a state's rejection table).
fn is_map_rejection_code(code: &str) -> bool {
    MapCode::ALL.iter().any(|c| c.as_str() == code)
}

/// Map a refusal to (code, message "reason [code]").
fn rejection(code: MapCode, reason: impl std::fmt::Display) -> MapRejection {
    let code = code.as_str();
    MapRejection {
        index: 0,
        code: code.to_string(),
        reason: format!("{reason} [{code}]"),
    }
}

fn core_rejection(e: &geopriv::Error) -> MapRejection {
    use geopriv::Error as E;
    let code = match e {
        E::InvalidReport { reason } if reason.contains("another query set") => MapCode::OtherMap,
        E::InvalidReport { reason } if reason.contains("another mechanism") => {
            MapCode::OtherMechanism
        }
        E::InvalidReport { reason } if reason.contains("another per-device epsilon") => {
            MapCode::OtherEpsilon
        }
        E::Overflow { .. } => MapCode::Overflow,
        _ => MapCode::InvalidReport,
    };
    rejection(code, e)
}

impl MapServer {
    fn build(
        params: Params,
        max_report_ids: usize,
        inner: Option<Inner>,
    ) -> Result<Arc<Self>, GeoprivError> {
        if params.max_bins == 0 || params.max_bins > MAX_BINS_LIMIT {
            return Err(GeoprivError::InvalidParameter(format!(
                "max_bins = {} must be between 1 and {MAX_BINS_LIMIT}",
                params.max_bins
            )));
        }
        let grid = params.grid();
        let set = grid.set()?;
        let release = CoreRelease::new(set.clone(), params.mechanism, params.epsilon)?;
        let clip = match params.clip_z {
            Some(z) if z.is_finite() && (0.0..=MAX_CLIP_Z).contains(&z) => {
                MapClip::new(&set, params.mechanism, params.epsilon, ClipLevel::Fixed(z))?
            }
            Some(z) => {
                return Err(GeoprivError::InvalidParameter(format!(
                    "the clipping level z = {z} must be finite and in [0, {MAX_CLIP_Z}]"
                )))
            }
            None => None,
        };
        if clip.is_none() && params.clip_z.is_some() {
            return Err(GeoprivError::InvalidParameter(
                "noise a priori has no values to clip".into(),
            ));
        }
        let inner = match inner {
            Some(i) => i,
            None => Inner {
                map: MapAggregator::with_max_bins(
                    set.clone(),
                    params.mechanism,
                    params.epsilon,
                    params.max_bins as usize,
                )?,
                rejections: BTreeMap::new(),
                clipped: 0,
                dedup: Dedup::new(max_report_ids),
            },
        };
        Ok(Arc::new(Self {
            max_record: 4096 + 32 * set.len(),
            params,
            release,
            clip,
            max_report_ids,
            state: Mutex::new(inner),
        }))
    }

    /// The z a server clips at: the CLI's resolution of `clipping` for
    /// this map (`None` for noise a priori and `Off`).
    fn resolve_clip(
        grid: &MapGrid,
        mechanism: CoreMechanism,
        epsilon: f64,
        clipping: MapClipping,
    ) -> Result<Option<f64>, GeoprivError> {
        let level = match clipping {
            MapClipping::Off => return Ok(None),
            MapClipping::Default => ClipLevel::default(),
            MapClipping::Z { z } if z.is_finite() && (0.0..=MAX_CLIP_Z).contains(&z) => {
                ClipLevel::Fixed(z)
            }
            MapClipping::Z { z } => {
                return Err(GeoprivError::InvalidParameter(format!(
                    "the clipping level z = {z} must be finite and in [0, {MAX_CLIP_Z}]"
                )))
            }
        };
        Ok(MapClip::new(&grid.set()?, mechanism, epsilon, level)?.map(|c| c.summary().z))
    }

    /// A clipping server's stated bounds, as the CLI prints them.
    fn clip_info(&self, n: u64, clipped: u64) -> Option<MapClipInfo> {
        self.clip.as_ref().map(|c| {
            let s = c.summary();
            MapClipInfo {
                z: s.z,
                sigma_max: s.sigma_max,
                lower: s.lower,
                upper: s.upper,
                bias_bound: s.bias_bound,
                max_width: s.max_width,
                influence_bound: if n > 0 {
                    s.max_width / n as f64
                } else {
                    f64::INFINITY
                },
                clipped,
            }
        })
    }

    fn with_state<T>(
        &self,
        f: impl FnOnce(&mut Inner) -> Result<T, GeoprivError>,
    ) -> Result<T, GeoprivError> {
        f(&mut *lock(&self.state, "map server")?)
    }

    /// Decode and add one record, counting each `report_id` once (module
    /// docs); a refusal is counted and returned.
    fn add_one(
        inner: &mut Inner,
        clip: Option<&MapClip>,
        max: usize,
        record: &[u8],
    ) -> Result<Added, MapRejection> {
        let outcome = (|| {
            if record.len() > max {
                return Err(rejection(
                    MapCode::TooLarge,
                    format!("report of {} bytes, above {max}", record.len()),
                ));
            }
            let text = std::str::from_utf8(record)
                .map_err(|e| rejection(MapCode::Malformed, format!("not UTF-8: {e}")))?;
            let text = text.trim_start_matches('\u{feff}').trim();
            if text.is_empty() {
                return Err(rejection(MapCode::Empty, "empty report"));
            }
            let mut report: MapReport = serde_json::from_str(text)
                .map_err(|e| rejection(MapCode::Malformed, format!("not a map report: {e}")))?;
            // Clipped first, as `geopriv map aggregate` does; counted once
            // the report is accepted.
            let clipped = clip.map_or(0, |c| c.clip(&mut report));
            // The CLI's `decide_once`: a duplicate if its id was accepted
            // before; the id remembered once the report is accepted.
            let map = &mut inner.map;
            match inner.dedup.offer(report.report_id.as_ref(), || {
                map.add(&report).map_err(|e| core_rejection(&e))
            }) {
                None => return Ok(Added::Duplicate),
                Some(added) => added?,
            }
            inner.clipped = inner.clipped.saturating_add(clipped);
            Ok(Added::Accepted)
        })();
        if let Err(r) = &outcome {
            let n = inner.rejections.entry(r.code.clone()).or_insert(0);
            *n = n.saturating_add(1);
        }
        outcome
    }

    fn add_raising(&self, record: &[u8]) -> Result<(), GeoprivError> {
        let max = self.max_record;
        self.with_state(
            |s| match Self::add_one(s, self.clip.as_ref(), max, record) {
                Ok(Added::Accepted) => Ok(()),
                Ok(Added::Duplicate) => Err(GeoprivError::InvalidReport(
                    crate::server::DUPLICATE_MESSAGE.into(),
                )),
                Err(r) => Err(GeoprivError::InvalidReport(r.reason)),
            },
        )
    }

    fn add_batch<'a>(
        &self,
        records: impl Iterator<Item = &'a [u8]>,
    ) -> Result<MapBatch, GeoprivError> {
        let max = self.max_record;
        self.with_state(|s| {
            let mut batch = MapBatch {
                accepted: 0,
                rejected: 0,
                duplicates: 0,
                rejections: Vec::new(),
            };
            for (i, r) in records.enumerate() {
                match Self::add_one(s, self.clip.as_ref(), max, r) {
                    Ok(Added::Accepted) => batch.accepted += 1,
                    Ok(Added::Duplicate) => batch.duplicates += 1,
                    Err(mut rej) => {
                        rej.index = i as u64;
                        batch.rejected += 1;
                        batch.rejections.push(rej);
                    }
                }
            }
            Ok(batch)
        })
    }
}

#[uniffi::export]
impl MapServer {
    /// A server for reports of `grid` made with `mechanism` at per-device
    /// ε (per metre), with the default binning (that of `geopriv map
    /// aggregate`).
    #[uniffi::constructor]
    pub fn new(
        grid: MapGrid,
        mechanism: MapMechanism,
        epsilon: f64,
    ) -> Result<Arc<Self>, GeoprivError> {
        Self::with_max_bins(grid, mechanism, epsilon, DEFAULT_MAX_BINS as u32)
    }

    /// As `new` with at most `max_bins` bins per axis (1 to 4096; fewer
    /// bins: less memory and a faster FFT, a larger discretisation bound).
    #[uniffi::constructor]
    pub fn with_max_bins(
        grid: MapGrid,
        mechanism: MapMechanism,
        epsilon: f64,
        max_bins: u32,
    ) -> Result<Arc<Self>, GeoprivError> {
        Self::with_clipping(grid, mechanism, epsilon, max_bins, MapClipping::Default)
    }

    /// As `with_max_bins` with the clipping chosen: `MapClipping.Default`
    /// (what `new` does, and `geopriv map aggregate` without flags),
    /// `Z(z)` (`--clip-z z`) or `Off` (`--no-clip`). The stated bound is in
    /// `estimate(...).clip`. `InvalidParameter` for z outside [0, 10^6].
    #[uniffi::constructor]
    pub fn with_clipping(
        grid: MapGrid,
        mechanism: MapMechanism,
        epsilon: f64,
        max_bins: u32,
        clipping: MapClipping,
    ) -> Result<Arc<Self>, GeoprivError> {
        Self::with_options(
            grid,
            mechanism,
            epsilon,
            max_bins,
            clipping,
            crate::server::DEFAULT_MAX_REPORT_IDS,
        )
    }

    /// As `with_clipping`, remembering at most `max_report_ids` report ids
    /// (0..=2^26; the others use 2^20, `--max-report-ids`; module docs).
    #[uniffi::constructor]
    pub fn with_options(
        grid: MapGrid,
        mechanism: MapMechanism,
        epsilon: f64,
        max_bins: u32,
        clipping: MapClipping,
        max_report_ids: u64,
    ) -> Result<Arc<Self>, GeoprivError> {
        guard(|| {
            let max_report_ids = crate::server::report_ids_cap(max_report_ids)?;
            let clip_z = Self::resolve_clip(&grid, mechanism.into(), epsilon, clipping)?;
            Self::build(
                Params {
                    bbox: [grid.x_min, grid.x_max, grid.y_min, grid.y_max],
                    points: [grid.points_x, grid.points_y],
                    bandwidth: grid.bandwidth,
                    mechanism: mechanism.into(),
                    epsilon,
                    max_bins,
                    clip_z,
                },
                max_report_ids,
                None,
            )
        })
    }

    /// A server restored from `to_json` (a shard's partial state).
    /// `InvalidReport` if the state is malformed or inconsistent;
    /// `InvalidParameter` if its grid is out of limits. The state carries
    /// no report ids (module docs): the restored server remembers none,
    /// and at most the default 2^20 from then on (`from_json_with_max_report_ids`).
    #[uniffi::constructor]
    pub fn from_json(state: String) -> Result<Arc<Self>, GeoprivError> {
        Self::from_json_with_max_report_ids(state, crate::server::DEFAULT_MAX_REPORT_IDS)
    }

    /// As `from_json`, remembering at most `max_report_ids` report ids
    /// from now on (0..=2^26).
    #[uniffi::constructor]
    pub fn from_json_with_max_report_ids(
        state: String,
        max_report_ids: u64,
    ) -> Result<Arc<Self>, GeoprivError> {
        guard(|| {
            let max_report_ids = crate::server::report_ids_cap(max_report_ids)?;
            let bad = |m: String| GeoprivError::InvalidReport(format!("invalid map state: {m}"));
            let st: State = serde_json::from_str(state.trim()).map_err(|e| bad(e.to_string()))?;
            if st.format != STATE_FORMAT {
                return Err(bad(format!("format {:?} is not {STATE_FORMAT}", st.format)));
            }
            // Only the codes a server writes, each with a count: a forged
            // state must not carry terminal escapes or bidi controls into
            // the caller's rejection table, nor 10^5 codes (attack7).
            if let Some((code, _)) = st
                .rejections
                .iter()
                .find(|(c, n)| **n == 0 || !is_map_rejection_code(c))
            {
                return Err(bad(format!(
                    "rejection code {} with its count is not one a map server writes",
                    geopriv::server::escape::Untrusted(code)
                )));
            }
            let fresh = Self::build(st.params.clone(), max_report_ids, None)?;
            let empty = fresh.with_state(|s| Ok(s.map.clone()))?;
            let counts = match (st.bins, empty.counts()) {
                (Some(sparse), Some(c)) => Some(
                    geopriv::map::BinnedCounts::from_sparse(
                        c.spec().clone(),
                        &sparse,
                        st.outside.unwrap_or(0),
                        st.moments.as_deref(),
                    )
                    .map_err(|e| bad(e.to_string()))?,
                ),
                (None, None) if st.moments.is_none() => None,
                (None, None) => return Err(bad("moments without bins".into())),
                _ => return Err(bad("bins for another mechanism".into())),
            };
            let map = MapAggregator::restore_binned(
                fresh.release.set().clone(),
                st.params.mechanism,
                st.params.epsilon,
                st.params.max_bins as usize,
                counts,
                st.cells.unwrap_or_default(),
                st.accepted,
            )?;
            // A clipping server's cells hold only values inside their
            // bounds: a forged state must not bypass clipping (issue 19
            // item 11, as `merge_state` for reports).
            let clipped = st.clipped.unwrap_or(0);
            if let Some(clip) = &fresh.clip {
                for (j, cell) in map.cells().iter().enumerate() {
                    let inside = clip
                        .cell_bounds(j)
                        .is_some_and(|[lo, hi]| cell.within(lo, hi));
                    if !inside {
                        return Err(bad(format!(
                            "cell {j} holds sums beyond what values inside its clipping bounds make"
                        )));
                    }
                }
                let values = map.cells().iter().map(|c| c.n()).sum::<u64>();
                if clipped > values {
                    return Err(bad("more clipped values than values".into()));
                }
            } else if st.clipped.is_some() {
                return Err(bad(
                    "a clipped count in the state of a server that does not clip".into(),
                ));
            }
            *lock(&fresh.state, "map server")? = Inner {
                map,
                rejections: st.rejections,
                clipped,
                dedup: Dedup::new(max_report_ids),
            };
            Ok(fresh)
        })
    }

    /// The exact partial state as compact canonical JSON (equal states
    /// give equal strings): ship it to a reducer (`from_json`, `merge`).
    /// It carries no report ids and no duplicate counts (module docs).
    pub fn to_json(&self) -> Result<String, GeoprivError> {
        guard(|| {
            self.with_state(|s| {
                let (bins, outside, moments) = match s.map.counts() {
                    Some(c) => (
                        Some(c.sparse_counts()),
                        Some(c.outside()),
                        c.sparse_moments(),
                    ),
                    None => (None, None, None),
                };
                let cells = s.map.counts().is_none().then(|| s.map.cells().to_vec());
                let st = State {
                    format: STATE_FORMAT.into(),
                    params: self.params.clone(),
                    accepted: s.map.accepted(),
                    bins,
                    outside,
                    cells,
                    rejections: s.rejections.clone(),
                    moments,
                    clipped: self.clip.as_ref().map(|_| s.clipped),
                };
                serde_json::to_string(&st)
                    .map_err(|e| GeoprivError::Internal(format!("map state: {e}")))
            })
        })
    }

    /// Add one JSON report line (whitespace and a BOM around it ignored).
    /// A bad report raises `InvalidReport` ("reason [code]"), is counted,
    /// and changes nothing else.
    pub fn add_json(&self, line: String) -> Result<(), GeoprivError> {
        guard(|| self.add_raising(line.as_bytes()))
    }

    /// Add one report given as bytes (`MapUpload.bytes`).
    pub fn add_bytes(&self, bytes: Vec<u8>) -> Result<(), GeoprivError> {
        guard(|| self.add_raising(&bytes))
    }

    /// Add a batch of JSON lines: each bad record is refused with its
    /// reason and counted; the others are added. Never raises for bad
    /// records (one call across the boundary for the whole batch).
    pub fn add_all_json(&self, lines: Vec<String>) -> Result<MapBatch, GeoprivError> {
        guard(|| self.add_batch(lines.iter().map(|l| l.as_bytes())))
    }

    /// Add a batch of byte reports, like `add_all_json`.
    pub fn add_all_bytes(&self, records: Vec<Vec<u8>>) -> Result<MapBatch, GeoprivError> {
        guard(|| self.add_batch(records.iter().map(|r| r.as_slice())))
    }

    /// Fold another shard's server (same grid, mechanism, ε and
    /// binning) into this one: counts add exactly, so any sharding and
    /// merge order give the same state. `InvalidParameter` for another
    /// map; an overflow is refused and leaves the state unchanged. Report
    /// ids are not merged (module docs): an id both accepted counts twice.
    pub fn merge(&self, other: Arc<MapServer>) -> Result<(), GeoprivError> {
        guard(|| {
            if other.params != self.params {
                return Err(GeoprivError::InvalidParameter(
                    "cannot merge servers of another grid, mechanism, epsilon or binning".into(),
                ));
            }
            // Copy first: no two locks held, self-merge allowed.
            let theirs =
                other.with_state(|o| Ok((o.map.clone(), o.rejections.clone(), o.clipped)))?;
            self.with_state(|s| {
                let mut map = s.map.clone();
                map.merge(&theirs.0)?;
                let mut rejections = s.rejections.clone();
                for (code, n) in theirs.1 {
                    let c = rejections.entry(code).or_insert(0);
                    *c = c.saturating_add(n);
                }
                s.clipped = s.clipped.saturating_add(theirs.2);
                s.map = map;
                s.rejections = rejections;
                Ok(())
            })
        })
    }

    /// The largest number of report ids this server remembers.
    pub fn max_report_ids(&self) -> u64 {
        self.max_report_ids as u64
    }

    /// Reports accepted and refusals by code.
    pub fn status(&self) -> Result<MapServerStatus, GeoprivError> {
        guard(|| {
            self.with_state(|s| {
                Ok(MapServerStatus {
                    accepted: s.map.accepted(),
                    rejected: s
                        .rejections
                        .values()
                        .fold(0u64, |a, &b| a.saturating_add(b)),
                    rejections: s.rejections.clone().into_iter().collect(),
                    duplicates: s.dedup.duplicates,
                    unchecked: s.dedup.unchecked,
                })
            })
        })
    }

    /// The map. For noise a priori, `kernel_lambda` picks the kernel K_λ (0
    /// plain, 1 fully debiased, in between partially); `null` lets the
    /// planner pick from the reports, as `geopriv map aggregate` does
    /// without `--lambda` (same numbers, bit for bit). Ignored by the
    /// other mechanisms. `InvalidInput` before the first report.
    pub fn estimate(&self, kernel_lambda: Option<f64>) -> Result<MapEstimate, GeoprivError> {
        guard(|| {
            let (map, clipped) = self.with_state(|s| Ok((s.map.clone(), s.clipped)))?;
            if map.accepted() == 0 {
                return Err(GeoprivError::InvalidInput(
                    "no reports in the map yet".into(),
                ));
            }
            let set = self.release.set();
            let (est, line) = match (map.mapper()?, kernel_lambda) {
                (Some(mapper), Some(l)) => (mapper.estimate(&map.kernel(l)?)?, None),
                (Some(_), None) => {
                    let (est, p) = map.planned_estimate()?;
                    (est, p.map(|p| p.line))
                }
                (None, _) => (map.estimate(None)?, None),
            };
            let (xs, ys) = self.params.grid().axes(set);
            let total = self.release.per_device_total();
            Ok(MapEstimate {
                values: est.values,
                standard_errors: est.standard_errors,
                interval_centres: est.interval_centres,
                xs,
                ys,
                n: est.n,
                kernel_lambda: est.lambda,
                mechanism: self.params.mechanism.name(),
                per_device_epsilon: total.epsilon,
                accounting: total.accounting,
                discretisation_bound: est.discretisation_bound,
                planner: line,
                clip: self.clip_info(est.n, clipped),
            })
        })
    }

    /// The planner with this server's reports (noise a priori: they give
    /// the bias of plain and partial debiasing) for `n` devices (`null`:
    /// the reports received so far).
    pub fn plan(&self, n: Option<u64>) -> Result<MapPlan, GeoprivError> {
        guard(|| {
            let map = self.with_state(|s| Ok(s.map.clone()))?;
            let mapper = map.mapper()?;
            let n = n.unwrap_or(map.accepted());
            Ok(plan_record(plan(
                self.release.set(),
                self.params.epsilon,
                n,
                mapper.as_ref(),
            )?))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BudgetPolicy, BudgetUnit};

    /// attack7: a forged state's rejection table carried any code (ESC
    /// and bidi controls, 10^5 distinct codes) into `status().rejections`.
    #[test]
    fn a_state_with_codes_no_server_writes_is_refused() {
        let one = MapServer::new(grid(11), MapMechanism::APriori, 2e-3).unwrap();
        one.add_all_json(vec!["garbage".into(), String::new()])
            .unwrap();
        let honest = one.to_json().unwrap();
        assert!(
            honest.contains(r#""rejections":{"empty":1,"malformed":1}"#),
            "{honest}"
        );
        // Its own state and every code a server writes restore.
        MapServer::from_json(honest.clone()).unwrap();
        assert_eq!(MapCode::ALL.len(), 8);
        for code in MapCode::ALL.iter().map(|c| c.as_str()) {
            let st = honest.replace(r#""empty":1,"malformed":1"#, &format!(r#""{code}":3"#));
            MapServer::from_json(st).unwrap();
        }
        let many: Vec<String> = (0..100_000).map(|i| format!(r#""c{i}":1"#)).collect();
        for forged in [
            r#""\u001b]0;pwn\u0007\u202e":5"#.to_string(),
            r#""Malformed":1"#.to_string(),
            r#""malformed":0"#.to_string(),
            many.join(","),
        ] {
            let st = honest.replace(r#""empty":1,"malformed":1"#, &forged);
            match MapServer::from_json(st) {
                Err(GeoprivError::InvalidReport(m)) => {
                    assert!(!m.contains('\u{1b}') && !m.contains('\u{202e}'), "{m}")
                }
                other => panic!(
                    "accepted: {:?}",
                    other.map(|s| s.status().unwrap().rejected)
                ),
            }
        }
    }

    fn grid(points: u32) -> MapGrid {
        MapGrid {
            x_min: 0.0,
            x_max: 10_000.0,
            y_min: 0.0,
            y_max: 10_000.0,
            points_x: points,
            points_y: points,
            bandwidth: None,
        }
    }

    /// `line` with `report_id` set to the 32 hex digits of `k`.
    fn with_id(line: &str, k: u64) -> String {
        let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
        v["report_id"] = format!("{k:032x}").into();
        v.to_string()
    }

    /// attack7 O1: replays count once (the CLI's rule), a refused record
    /// never censors a later valid one with its id, the memory is bounded
    /// as `--max-report-ids` bounds it, and states carry no ids.
    #[test]
    fn a_replayed_report_id_counts_once() {
        let g = grid(9);
        let r = MapRelease::new(g, MapMechanism::APriori, 2e-3).unwrap();
        let distinct: Vec<String> = (0..200)
            .map(|i| {
                let x = 1_000.0 + 40.0 * i as f64;
                with_id(
                    &r.release_unmetered(vec![x, 10_000.0 - x]).unwrap().json,
                    i + 1,
                )
            })
            .collect();
        let reference = MapServer::new(g, MapMechanism::APriori, 2e-3).unwrap();
        reference.add_all_json(distinct.clone()).unwrap();
        let mut all = distinct.clone();
        all.extend(distinct[..50].iter().cloned());
        // Another ε with an id seen later: refused, does not censor it.
        let other = MapRelease::new(g, MapMechanism::APriori, 1e-3)
            .unwrap()
            .release_unmetered(vec![5.0, 5.0])
            .unwrap()
            .json;
        all.insert(0, with_id(&other, 150));
        let s = MapServer::new(g, MapMechanism::APriori, 2e-3).unwrap();
        let b = s.add_all_json(all).unwrap();
        assert_eq!((b.accepted, b.rejected, b.duplicates), (200, 1, 50));
        assert_eq!(b.rejections[0].code, "other-epsilon");
        let e = s.add_json(distinct[3].clone()).unwrap_err();
        assert!(e.to_string().ends_with("[duplicate]"), "{e}");
        let st = s.status().unwrap();
        assert_eq!(
            (st.accepted, st.rejected, st.duplicates, st.unchecked),
            (200, 1, 51, 0)
        );
        let (m, want) = (
            s.estimate(Some(1.0)).unwrap(),
            reference.estimate(Some(1.0)).unwrap(),
        );
        assert_eq!(
            (m.values, m.standard_errors, m.n),
            (want.values, want.standard_errors, 200)
        );
        // The bound: 10 ids remembered, the rest accepted unchecked.
        let small = MapServer::with_options(
            g,
            MapMechanism::APriori,
            2e-3,
            DEFAULT_MAX_BINS as u32,
            MapClipping::Default,
            10,
        )
        .unwrap();
        assert_eq!(small.max_report_ids(), 10);
        let mut twice = distinct[..20].to_vec();
        twice.extend(distinct[..20].iter().cloned());
        let b = small.add_all_json(twice).unwrap();
        assert_eq!((b.accepted, b.duplicates), (30, 10));
        assert_eq!(small.status().unwrap().unchecked, 20);
        assert!(matches!(
            MapServer::with_options(
                g,
                MapMechanism::APriori,
                2e-3,
                64,
                MapClipping::Default,
                (1 << 26) + 1
            ),
            Err(GeoprivError::InvalidParameter(_))
        ));
        // No ids in a state: a restored server counts a replay again.
        let restored = MapServer::from_json(s.to_json().unwrap()).unwrap();
        restored.add_json(distinct[0].clone()).unwrap();
        assert_eq!(restored.status().unwrap().accepted, 201);
        assert!(!s.to_json().unwrap().contains(&format!("{:032x}", 1)));
    }

    fn ledger(total: f64) -> Arc<PrivacyLedger> {
        PrivacyLedger::in_memory(BudgetPolicy {
            unit: BudgetUnit::PerMetre,
            total_epsilon: total,
            total_delta: 0.0,
            period: None,
        })
        .unwrap()
    }

    #[test]
    fn release_charges_once_and_refusals_charge_nothing() {
        let r = MapRelease::new(grid(11), MapMechanism::APriori, 1e-3).unwrap();
        let l = ledger(1.5e-3);
        let up = r.release(l.clone(), vec![2_000.0, 3_000.0]).unwrap();
        assert_eq!(l.status().unwrap().releases, 1);
        assert_eq!(up.epsilon, 1e-3);
        assert_eq!(up.bytes, up.json.as_bytes());
        let e = r.release(l.clone(), vec![2_000.0, 3_000.0]).unwrap_err();
        assert!(matches!(e, GeoprivError::BudgetExceeded(_)), "{e:?}");
        for bad in [vec![-1.0, 5.0], vec![f64::NAN, 1.0], vec![1.0]] {
            let e = r.release(ledger(1.0), bad).unwrap_err();
            assert!(matches!(e, GeoprivError::InvalidInput(_)), "{e:?}");
        }
        let dollars = PrivacyLedger::in_memory(BudgetPolicy {
            unit: BudgetUnit::PerDollar,
            total_epsilon: 1.0,
            total_delta: 0.0,
            period: None,
        })
        .unwrap();
        let e = r.release(dollars.clone(), vec![1.0, 1.0]).unwrap_err();
        assert!(matches!(e, GeoprivError::UnitMismatch(_)), "{e:?}");
        assert_eq!(dollars.status().unwrap().releases, 0);
        assert_eq!(l.status().unwrap().releases, 1);
        // lat/lon: the reference point is (0, 0) of a local projection.
        let p = Projection::LocalEquirectangular {
            ref_lat: 48.85,
            ref_lon: 2.35,
        };
        let g = MapGrid {
            x_min: -5_000.0,
            x_max: 5_000.0,
            y_min: -5_000.0,
            y_max: 5_000.0,
            ..grid(11)
        };
        let r = MapRelease::new(g, MapMechanism::APriori, 1e-3).unwrap();
        r.release_latlon(ledger(1.0), 48.86, 2.34, p).unwrap();
        let e = r.release_latlon(ledger(1.0), 49.5, 2.34, p).unwrap_err();
        assert!(matches!(e, GeoprivError::InvalidInput(_)), "{e:?}");
    }

    #[test]
    fn absurd_grids_are_refused_before_allocating() {
        for (px, py) in [(200_000, 200_000), (1, 5), (u32::MAX, u32::MAX), (513, 512)] {
            let g = MapGrid {
                points_x: px,
                points_y: py,
                ..grid(2)
            };
            let e = MapServer::new(g, MapMechanism::APriori, 1e-3).unwrap_err();
            assert!(matches!(e, GeoprivError::InvalidParameter(_)), "{e:?}");
            assert!(MapRelease::new(g, MapMechanism::Composition, 1e-3).is_err());
        }
        for eps in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(MapServer::new(grid(5), MapMechanism::APriori, eps).is_err());
        }
        assert!(MapServer::with_max_bins(grid(5), MapMechanism::APriori, 1e-3, 0).is_err());
        assert!(MapServer::with_max_bins(grid(5), MapMechanism::APriori, 1e-3, 100_000).is_err());
        let e = MapRelease::new(grid(5), MapMechanism::Sampled { k: 26 }, 1.0).unwrap_err();
        assert!(matches!(e, GeoprivError::InvalidParameter(_)), "{e:?}");
        // Extreme ε for the binning: a typed error or a bounded map, never a panic.
        for eps in [1e-300, 1e-12, 1e12, 1e300] {
            match MapServer::new(grid(5), MapMechanism::APriori, eps) {
                Ok(_) | Err(GeoprivError::InvalidParameter(_)) => {}
                Err(e) => panic!("{eps}: {e:?}"),
            }
        }
    }

    /// Branch state25: above the planner's moment gate (εh ≈ 1000) the
    /// state carries the offsets' moments; three shards merged through
    /// JSON give the single server's state string (moments included) and
    /// plan; forged moments are refused; an older state (no `moments`)
    /// still restores, and merged in, drops them all.
    #[test]
    fn states_carry_the_moments_above_the_gate() {
        let g = grid(11);
        let eps = 1.0;
        let r = MapRelease::new(g, MapMechanism::APriori, eps).unwrap();
        let lines: Vec<String> = (0..900)
            .map(|i| {
                let x = [
                    2000.0 + 1500.0 * (i % 4) as f64,
                    3000.0 + 2000.0 * (i % 3) as f64,
                ];
                r.release_unmetered(x.to_vec()).unwrap().json
            })
            .collect();
        let one = MapServer::new(g, MapMechanism::APriori, eps).unwrap();
        one.add_all_json(lines.clone()).unwrap();
        let whole = one.to_json().unwrap();
        assert!(whole.contains("\"moments\":[["), "moments in the state");
        let shards: Vec<Arc<MapServer>> = (0..3)
            .map(|_| MapServer::new(g, MapMechanism::APriori, eps).unwrap())
            .collect();
        for (i, line) in lines.iter().enumerate() {
            shards[(i * 7) % 3].add_json(line.clone()).unwrap();
        }
        let reducer = MapServer::from_json(shards[1].to_json().unwrap()).unwrap();
        for k in [2, 0] {
            reducer
                .merge(MapServer::from_json(shards[k].to_json().unwrap()).unwrap())
                .unwrap();
        }
        assert_eq!(reducer.to_json().unwrap(), whole);
        assert_eq!(reducer.plan(None).unwrap(), one.plan(None).unwrap());
        let bits = |m: MapEstimate| m.values.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(reducer.estimate(None).unwrap()),
            bits(one.estimate(None).unwrap())
        );
        // An older state: no moments; it restores, and a merge with it
        // drops every moment (a partial sum would be wrong).
        let mut v: serde_json::Value = serde_json::from_str(&shards[0].to_json().unwrap()).unwrap();
        v.as_object_mut().unwrap().remove("moments");
        let old = MapServer::from_json(v.to_string()).unwrap();
        let mixed = MapServer::from_json(shards[1].to_json().unwrap()).unwrap();
        mixed.merge(old).unwrap();
        assert!(!mixed.to_json().unwrap().contains("moments"));
        // Forged moments: typed errors, no panic.
        let honest: serde_json::Value = serde_json::from_str(&whole).unwrap();
        for (k, forged) in [
            (3, serde_json::json!("-1")),
            (1, serde_json::json!("1e3")),
            (0, serde_json::json!(u64::MAX)),
            (2, serde_json::json!(12)),
        ] {
            let mut v = honest.clone();
            v["moments"][0][k] = forged;
            match MapServer::from_json(v.to_string()) {
                Err(GeoprivError::InvalidReport(_)) => {}
                other => panic!("accepted {k}: {:?}", other.map(|_| ())),
            }
        }
    }

    #[test]
    fn bad_records_are_counted_and_shards_merge_bit_identically() {
        let g = grid(9);
        let r = MapRelease::new(g, MapMechanism::APriori, 2e-3).unwrap();
        let lines: Vec<String> = (0..400)
            .map(|i| {
                let x = 1_000.0 + 20.0 * i as f64;
                r.release_unmetered(vec![x, 10_000.0 - x]).unwrap().json
            })
            .collect();
        let other = MapRelease::new(g, MapMechanism::APriori, 1e-3)
            .unwrap()
            .release_unmetered(vec![5.0, 5.0])
            .unwrap()
            .json;
        let mut all = lines.clone();
        all.insert(7, "garbage".into());
        all.insert(100, String::new());
        all.insert(200, other);
        // Without lines[0]'s report_id: with it, this record would be a
        // duplicate of lines[0] (the CLI's rule), not a refusal.
        let mut forged: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
        forged.as_object_mut().unwrap().remove("report_id");
        all.insert(
            300,
            forged.to_string().replace("\"location\"", "\"values\""),
        );
        let one = MapServer::new(g, MapMechanism::APriori, 2e-3).unwrap();
        let batch = one.add_all_json(all.clone()).unwrap();
        assert_eq!((batch.accepted, batch.rejected), (400, 4));
        let codes: Vec<&str> = batch.rejections.iter().map(|r| r.code.as_str()).collect();
        assert_eq!(
            codes,
            ["malformed", "empty", "other-epsilon", "invalid-report"]
        );
        assert_eq!(batch.rejections[2].index, 200);
        let e = one.add_json("{}".into()).unwrap_err();
        assert!(e.to_string().ends_with("[malformed]"), "{e}");
        assert_eq!(one.status().unwrap().rejected, 5);
        one.add_json("{}".into()).unwrap_err();

        // Three shards, merged through JSON in another order.
        let shards: Vec<Arc<MapServer>> = (0..3)
            .map(|_| MapServer::new(g, MapMechanism::APriori, 2e-3).unwrap())
            .collect();
        for (i, line) in all.iter().enumerate() {
            let _ = shards[i % 3].add_bytes(line.clone().into_bytes());
        }
        shards[1].add_json("{}".into()).unwrap_err();
        shards[2].add_json("{}".into()).unwrap_err();
        let reducer = MapServer::from_json(shards[2].to_json().unwrap()).unwrap();
        for s in [&shards[0], &shards[1]] {
            reducer
                .merge(MapServer::from_json(s.to_json().unwrap()).unwrap())
                .unwrap();
        }
        assert_eq!(reducer.to_json().unwrap(), one.to_json().unwrap());
        // Debug strings: the unstated discretisation bound is NaN, which
        // PartialEq never equates.
        assert_eq!(
            format!("{:?}", reducer.estimate(None).unwrap()),
            format!("{:?}", one.estimate(None).unwrap())
        );
        let m = one.estimate(Some(1.0)).unwrap();
        assert_eq!((m.xs.len(), m.ys.len(), m.values.len()), (9, 9, 81));
        assert_eq!(m.per_device_epsilon, 2e-3);
        assert!(m.standard_errors.iter().all(|s| s.is_finite() && *s > 0.0));
        let other = MapServer::new(grid(5), MapMechanism::APriori, 2e-3).unwrap();
        assert!(matches!(
            reducer.merge(other),
            Err(GeoprivError::InvalidParameter(_))
        ));
        for bad in ["", "{", "{\"format\":\"x\"}"] {
            assert!(matches!(
                MapServer::from_json(bad.into()),
                Err(GeoprivError::InvalidReport(_))
            ));
        }
        // A state whose counts disagree with its report count is refused.
        let tampered = one
            .to_json()
            .unwrap()
            .replace("\"accepted\":400", "\"accepted\":401");
        assert!(MapServer::from_json(tampered).is_err());
    }

    #[test]
    fn every_mechanism_round_trips_and_the_planner_names_one() {
        let g = grid(5);
        for mech in [
            MapMechanism::VectorLaplace,
            MapMechanism::Composition,
            MapMechanism::Sampled { k: 3 },
        ] {
            let r = MapRelease::new(g, mech, 1e-2).unwrap();
            let s = MapServer::new(g, mech, 1e-2).unwrap();
            for i in 0..50 {
                s.add_json(
                    r.release_unmetered(vec![100.0 * i as f64, 5_000.0])
                        .unwrap()
                        .json,
                )
                .unwrap();
            }
            let back = MapServer::from_json(s.to_json().unwrap()).unwrap();
            assert_eq!(back.to_json().unwrap(), s.to_json().unwrap());
            let m = back.estimate(None).unwrap();
            assert_eq!(m.values.len(), 25);
            assert_eq!(m.mechanism, CoreMechanism::from(mech).name());
        }
        let p = plan_map(grid(31), 1e-3, 1_000_000).unwrap();
        assert_eq!(p.pick.mechanism, MapMechanism::APriori);
        assert!(p.line.starts_with("pick a-priori"), "{}", p.line);
    }
}
