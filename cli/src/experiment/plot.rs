//! PNG plots with plotters: error against n and against ε per mechanism
//! (log-log), and heat maps of the KDE.
//!
//! Text is drawn with ab_glyph from DejaVu Sans, embedded in the binary
//! (cli/assets, Bitstream Vera licence), so no system font library is needed.

use super::error::{ExperimentError, Result};
use super::grid::Grid;
use super::mechanisms::Contender;
use super::{fmt_count, fmt_eps, Outcome};
use plotters::prelude::*;
use plotters::style::colors::colormaps::ViridisRGB;
use std::path::{Path, PathBuf};
use std::sync::Once;

const FONT: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");
const SANS: &str = "sans-serif";

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        plotters::style::register_font(SANS, FontStyle::Normal, FONT)
            .unwrap_or_else(|_| panic!("embedded DejaVuSans.ttf is not a valid font"));
    });
}

fn err<E: std::fmt::Display>(e: E) -> ExperimentError {
    ExperimentError::Plot(e.to_string())
}

/// Line colours, indexed by [`Contender::tag`] (table order).
const PALETTE: [(u8, u8, u8); 8] = [
    (214, 39, 40),
    (31, 119, 180),
    (44, 160, 44),
    (148, 103, 189),
    (140, 86, 75),
    (255, 127, 14),
    (127, 127, 127),
    (0, 0, 0),
];

fn rgb(m: Contender) -> RGBColor {
    let (r, g, b) = PALETTE[m.tag() as usize % PALETTE.len()];
    RGBColor(r, g, b)
}

/// Which sweep a line plot shows.
#[derive(Clone, Copy)]
enum Axis {
    N,
    Epsilon,
}

/// error_vs_n.png and error_vs_epsilon.png (each when its sweep has at
/// least two points): one panel per group, one line per mechanism.
pub fn error_plots(o: &Outcome, dir: &Path) -> Result<Vec<PathBuf>> {
    register_font();
    let mut paths = Vec::new();
    if o.sweep.ns.len() > 1 {
        let p = dir.join("error_vs_n.png");
        line_figure(o, &p, Axis::N)?;
        paths.push(p);
    }
    if o.sweep.epsilons.len() > 1 {
        let p = dir.join("error_vs_epsilon.png");
        line_figure(o, &p, Axis::Epsilon)?;
        paths.push(p);
    }
    Ok(paths)
}

fn log_range(vals: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in vals.filter(|v| *v > 0.0 && v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if lo.is_finite() {
        if hi <= lo {
            hi = lo * 10.0;
        }
        Some((lo / 1.6, hi * 1.6))
    } else {
        None
    }
}

fn line_figure(o: &Outcome, path: &Path, axis: Axis) -> Result<()> {
    let groups = &o.groups;
    let cols = groups.len().clamp(1, 2);
    let rows = groups.len().div_ceil(cols).max(1);
    let (pw, ph) = (if cols == 1 { 900u32 } else { 620u32 }, 430u32);
    let w = pw * cols as u32;
    let legend_rows = o.mechs.len().div_ceil(legend_per_row(w)) as u32;
    let h = ph * rows as u32 + 60 + 20 + 26 * legend_rows;
    let root = BitMapBackend::new(path, (w, h)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let (title, rest) = root.split_vertically(60);
    let (body, legend) = rest.split_vertically(ph * rows as u32);
    let (what, fixed) = match axis {
        Axis::N => (
            "n",
            format!("ε = {} {}", fmt_eps(o.sweep.ref_eps), o.eps_unit),
        ),
        Axis::Epsilon => ("ε", format!("n = {}", fmt_count(o.sweep.ref_n as f64))),
    };
    title
        .titled(
            &format!("{}: {} against {what} ({fixed})", o.name, o.metric),
            (SANS, 20),
        )
        .map_err(err)?;
    let panels = body.split_evenly((rows, cols));
    for (area, g) in panels.iter().zip(groups) {
        // (x, y) points per mechanism.
        let series: Vec<(Contender, Vec<(f64, f64)>)> = o
            .mechs
            .iter()
            .map(|&m| {
                let pts = match axis {
                    Axis::N => o
                        .sweep
                        .ns
                        .iter()
                        .filter_map(|&n| o.get(g, n, o.sweep.ref_eps, m))
                        .map(|r| (r.n as f64, r.error))
                        .collect::<Vec<_>>(),
                    Axis::Epsilon => o
                        .sweep
                        .epsilons
                        .iter()
                        .filter_map(|&e| o.get(g, o.sweep.ref_n, e, m))
                        .map(|r| (r.epsilon, r.error))
                        .collect(),
                };
                (
                    m,
                    pts.into_iter()
                        .filter(|p| p.1 > 0.0 && p.1.is_finite())
                        .collect(),
                )
            })
            .collect();
        let Some((x0, x1)) = log_range(series.iter().flat_map(|s| s.1.iter().map(|p| p.0))) else {
            continue;
        };
        let Some((y0, y1)) = log_range(series.iter().flat_map(|s| s.1.iter().map(|p| p.1))) else {
            continue;
        };
        let (x0, x1) = (x0 * 1.4, x1 / 1.4);
        // Label the x axis at the measured points.
        let mut ticks: Vec<f64> = series
            .iter()
            .flat_map(|s| s.1.iter().map(|p| p.0))
            .collect();
        ticks.sort_by(f64::total_cmp);
        ticks.dedup();
        let mut chart = ChartBuilder::on(area)
            .caption(if g.is_empty() { o.metric } else { g.as_str() }, (SANS, 18))
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(80)
            .build_cartesian_2d(
                (x0..x1).log_scale().with_key_points(ticks),
                (y0..y1).log_scale(),
            )
            .map_err(err)?;
        let xfmt = |v: &f64| match axis {
            Axis::N => fmt_count(v.round()),
            Axis::Epsilon => fmt_eps(*v),
        };
        chart
            .configure_mesh()
            .x_desc(match axis {
                Axis::N => "n (users)".to_string(),
                Axis::Epsilon => format!("ε ({})", o.eps_unit),
            })
            .y_desc(o.metric)
            .x_label_formatter(&xfmt)
            .y_label_formatter(&|v| format!("{v:.0e}"))
            .label_style((SANS, 13))
            .axis_desc_style((SANS, 15))
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(err)?;
        for (m, pts) in &series {
            let c = rgb(*m);
            let style = if *m == Contender::POLYPLACE {
                c.stroke_width(3)
            } else {
                c.stroke_width(2)
            };
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), style))
                .map_err(err)?;
            chart
                .draw_series(
                    pts.iter()
                        .map(|&p| Circle::new(p, 4, ShapeStyle::from(&c).filled())),
                )
                .map_err(err)?;
        }
    }
    draw_legend(&legend, &o.mechs)?;
    root.present().map_err(err)?;
    Ok(())
}

fn legend_per_row(width: u32) -> usize {
    ((width as usize - 20) / 210).max(1)
}

/// A one- or two-row legend: colour swatch and label per mechanism.
fn draw_legend(
    area: &DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>,
    mechs: &[Contender],
) -> Result<()> {
    let (w, _) = area.dim_in_pixel();
    let per_row = legend_per_row(w);
    for (i, &m) in mechs.iter().enumerate() {
        let (row, col) = (i / per_row, i % per_row);
        let x = 20 + col as i32 * 210;
        let y = 15 + row as i32 * 26;
        let c = rgb(m);
        area.draw(&PathElement::new(
            vec![(x, y + 8), (x + 28, y + 8)],
            c.stroke_width(3),
        ))
        .map_err(err)?;
        area.draw(&Circle::new((x + 14, y + 8), 4, c.filled()))
            .map_err(err)?;
        area.draw(&Text::new(m.label(), (x + 36, y), (SANS, 15)))
            .map_err(err)?;
    }
    Ok(())
}

/// One panel of a heat-map figure.
pub struct HeatPanel {
    /// Panel title.
    pub title: String,
    /// Values at the grid points, in the grid's (the core's) cell order.
    pub values: Vec<f64>,
}

/// Heat maps side by side on a common colour scale [0, vmax] (values
/// outside are clamped), with a colour bar.
pub fn heatmaps(
    path: &Path,
    title: &str,
    grid: &Grid,
    panels: &[HeatPanel],
    vmax: f64,
) -> Result<()> {
    register_font();
    let [x0, x1, y0, y1] = grid.bbox;
    let [dx, dy] = grid.cell;
    let (x0, x1, y0, y1) = (
        (x0 - dx / 2.0) / 1000.0,
        (x1 + dx / 2.0) / 1000.0,
        (y0 - dy / 2.0) / 1000.0,
        (y1 + dy / 2.0) / 1000.0,
    );
    let aspect = (x1 - x0) / (y1 - y0);
    let cols = panels.len().clamp(1, 4);
    let rows = panels.len().div_ceil(cols);
    let plot_w = 380.0;
    let plot_h = (plot_w / aspect).clamp(150.0, 420.0);
    let (pw, ph) = (plot_w as u32 + 80, plot_h as u32 + 80);
    let (w, h) = (pw * cols as u32, ph * rows as u32 + 60 + 70);
    let root = BitMapBackend::new(path, (w, h)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let (top, rest) = root.split_vertically(60);
    let (body, bar) = rest.split_vertically(ph * rows as u32);
    top.titled(title, (SANS, 22)).map_err(err)?;
    let vmax = if vmax > 0.0 { vmax } else { 1.0 };
    for (area, p) in body.split_evenly((rows, cols)).iter().zip(panels) {
        let mut chart = ChartBuilder::on(area)
            .caption(&p.title, (SANS, 15))
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(50)
            .build_cartesian_2d(x0..x1, y0..y1)
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_labels(4)
            .y_labels(4)
            .x_label_formatter(&|v| format!("{v:.0}"))
            .y_label_formatter(&|v| format!("{v:.0}"))
            .label_style((SANS, 11))
            .draw()
            .map_err(err)?;
        chart
            .draw_series(grid.centers.iter().enumerate().map(|(idx, c)| {
                let v = p.values.get(idx).copied().unwrap_or(0.0);
                let col =
                    ViridisRGB.get_color_normalized(v.clamp(0.0, vmax) as f32, 0.0, vmax as f32);
                let (cx, cy) = (c[0] / 1000.0, c[1] / 1000.0);
                let (hx, hy) = (dx / 2000.0, dy / 2000.0);
                Rectangle::new([(cx - hx, cy - hy), (cx + hx, cy + hy)], col.filled())
            }))
            .map_err(err)?;
    }
    // Colour bar.
    let (bw, _) = bar.dim_in_pixel();
    let (bx0, bx1) = (60i32, (bw as i32 - 60).min(700));
    let steps = 200;
    for s in 0..steps {
        let f = s as f64 / steps as f64;
        let xa = bx0 + ((bx1 - bx0) as f64 * f) as i32;
        let xb = bx0 + ((bx1 - bx0) as f64 * (f + 1.0 / steps as f64)).ceil() as i32;
        let col = ViridisRGB.get_color(f as f32);
        bar.draw(&Rectangle::new([(xa, 12), (xb, 32)], col.filled()))
            .map_err(err)?;
    }
    bar.draw(&Text::new("0", (bx0 - 4, 38), (SANS, 13)))
        .map_err(err)?;
    bar.draw(&Text::new(format!("{vmax:.3}"), (bx1 - 20, 38), (SANS, 13)))
        .map_err(err)?;
    bar.draw(&Text::new(
        "mean kernel value (1/n) Σ exp(-||x - t||² / 2h²); axes in km; values outside the bar are clamped",
        (bx0, 52),
        (SANS, 13),
    ))
    .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

/// A plain line chart (linear axes): one line per named series, in the
/// palette's order, with a legend. Used by the longitudinal experiment
/// (burn charts, daily estimate against the truth).
pub fn line_chart(
    path: &Path,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[(String, Vec<(f64, f64)>)],
) -> Result<()> {
    register_font();
    let pts = || series.iter().flat_map(|s| s.1.iter().copied());
    let (mut x0, mut x1, mut y0, mut y1) = (
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::INFINITY,
        f64::NEG_INFINITY,
    );
    for (x, y) in pts().filter(|p| p.0.is_finite() && p.1.is_finite()) {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if !x0.is_finite() {
        return Ok(());
    }
    let pad = ((y1 - y0) * 0.05).max(1e-12);
    let root = BitMapBackend::new(path, (900, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, (SANS, 18))
        .margin(14)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(x0..x1.max(x0 + 1.0), (y0 - pad)..(y1 + pad))
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .label_style((SANS, 13))
        .axis_desc_style((SANS, 15))
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(err)?;
    for (i, (name, line)) in series.iter().enumerate() {
        let (r, g, b) = PALETTE[i % PALETTE.len()];
        let c = RGBColor(r, g, b);
        chart
            .draw_series(LineSeries::new(line.iter().copied(), c.stroke_width(2)))
            .map_err(err)?
            .label(name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(3)));
    }
    chart
        .configure_series_labels()
        .label_font((SANS, 14))
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}
