//! Scratch experiment of branch moment23 (BENCHMARKS.md "Branch
//! moment23", issue 19 item 15, attack16 F3): how well the per-bin
//! moments of the reports' within-bin offsets predict the kernel map's
//! rounding error.
//!
//! `cargo run --release --example moment_rounding -- <ε per metre> <λ>
//! <out prefix> < reports.jsonl` on the 61 x 61 grid of the synthetic city.
//! Prints one JSON line: the measured mean over map points of R(p)², R the
//! FFT map (binned reports) minus the same kernel map of the exact report
//! locations (a direct sum of kernels), the moment estimates (first order
//! R₁ = (1/n)Σ_b M_b·∇K(p − c_b), first plus second order R₁₂ with the
//! second moments and the nearest-bin sinc correction:
//! R₁₂ = R₁ − (1/n)Σ_b [½Σ_a (S_ab + n_bΔ_a²/12) ∂²_aK + S_b,01 ∂_0∂_1K]), the de-noised
//! plug-in mean R₁² − (1/n²)Σ_b n_b σ²|∇K|² (σ² = min(3/ε², Δ²/12)), and
//! round16's rounding share of the SE (the variance field with the atoms'
//! and lines' rounding minus the plain one, over n). Writes the FFT map
//! and R₁₂ per map point as raw little-endian f64 to `<prefix>.map` and
//! `<prefix>.r12` (for scoring against the true map).
use geopriv::map::{BinSpec, BinnedCounts, DebiasKernel, FftMapper, KdeGrid, DEFAULT_MAX_BINS};
use std::io::{BufRead, Write};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let eps: f64 = args[1].parse().unwrap();
    let lambda: f64 = args[2].parse().unwrap();
    let prefix = &args[3];
    let grid = KdeGrid::with_cell_diagonal([0.0, 20_000.0, 0.0, 20_000.0], [61, 61]).unwrap();
    let h = grid.bandwidth();
    let spec = BinSpec::for_estimation(&grid, eps, DEFAULT_MAX_BINS).unwrap();
    let delta = spec.delta();
    let mut counts = BinnedCounts::new(spec.clone());
    // Per bin: n_b, M_b (2), S_b (uu, vv, uv).
    let mut mom = vec![[0.0f64; 6]; spec.len()];
    let mut reports: Vec<[f64; 2]> = Vec::new();
    for line in std::io::stdin().lock().lines() {
        let line = line.unwrap();
        let i = line.find("\"location\":[").unwrap() + 12;
        let j = i + line[i..].find(']').unwrap();
        let mut it = line[i..j]
            .split(',')
            .map(|s| s.trim().parse::<f64>().unwrap());
        let y = [it.next().unwrap(), it.next().unwrap()];
        counts.add(&y).unwrap();
        if let Some(b) = spec.bin_of(&y) {
            let c = spec.bin_centre(b);
            let u = [y[0] - c[0], y[1] - c[1]];
            let m = &mut mom[b];
            m[0] += 1.0;
            m[1] += u[0];
            m[2] += u[1];
            m[3] += u[0] * u[0];
            m[4] += u[1] * u[1];
            m[5] += u[0] * u[1];
        }
        reports.push(y);
    }
    let n = reports.len() as f64;
    let kernel = DebiasKernel::new(2, h, eps, lambda).unwrap();
    // Radial table of K up to 8h (step h/1000; K', K'' by differences).
    let rmax = 8.0 * h;
    let rmax2 = rmax * rmax;
    let steps = 8_000usize;
    let dr = rmax / steps as f64;
    let tab: Vec<f64> = (0..=steps + 2)
        .map(|i| kernel.value(i as f64 * dr).unwrap())
        .collect();
    let k_at = |r: f64| -> f64 {
        if r >= rmax {
            return 0.0;
        }
        let x = r / dr;
        let i = x as usize;
        let f = x - i as f64;
        tab[i] * (1.0 - f) + tab[i + 1] * f
    };
    // Derivatives by central differences on the table's step.
    let d1 = |r: f64| (k_at(r + dr) - k_at((r - dr).abs())) / (2.0 * dr);
    let d2 = |r: f64| (k_at(r + dr) - 2.0 * k_at(r) + k_at((r - dr).abs())) / (dr * dr);
    let mapper = FftMapper::with_wrap_guard(counts, h, eps).unwrap();
    let s = mapper.spatial_kernel(&kernel);
    let fft_map = mapper.apply_spatial(&s);
    let nonempty: Vec<(usize, [f64; 6])> = mom
        .iter()
        .enumerate()
        .filter(|(_, m)| m[0] > 0.0)
        .map(|(b, m)| (b, *m))
        .collect();
    let centres: Vec<[f64; 2]> = nonempty.iter().map(|(b, _)| spec.bin_centre(*b)).collect();
    let sig2 = (3.0 / (eps * eps)).min(delta[0] * delta[0] / 12.0);
    let w = [delta[0] * delta[0] / 12.0, delta[1] * delta[1] / 12.0];
    let m = grid.len();
    let (mut meas, mut r1s, mut r12s, mut den, mut noise) = (0.0, 0.0, 0.0, 0.0, 0.0);
    let mut r12v = Vec::with_capacity(m);
    for (j, &fj) in fft_map.iter().enumerate().take(m) {
        let p = grid.center(j);
        let mut exact = 0.0;
        for y in &reports {
            let r2 = (p[0] - y[0]) * (p[0] - y[0]) + (p[1] - y[1]) * (p[1] - y[1]);
            if r2 < rmax2 {
                exact += k_at(r2.sqrt());
            }
        }
        exact /= n;
        let (mut r1, mut sec, mut nz) = (0.0, 0.0, 0.0);
        for ((_, mb), c) in nonempty.iter().zip(&centres) {
            let z = [p[0] - c[0], p[1] - c[1]];
            let r2 = z[0] * z[0] + z[1] * z[1];
            if r2 >= rmax2 {
                continue;
            }
            let r = r2.sqrt();
            let (k1, k2) = (d1(r), d2(r));
            let (g, h00, h11, h01) = if r < 1e-9 {
                ([0.0, 0.0], k2, k2, 0.0)
            } else {
                let e = [z[0] / r, z[1] / r];
                (
                    [k1 * e[0], k1 * e[1]],
                    k2 * e[0] * e[0] + k1 * (1.0 - e[0] * e[0]) / r,
                    k2 * e[1] * e[1] + k1 * (1.0 - e[1] * e[1]) / r,
                    (k2 - k1 / r) * e[0] * e[1],
                )
            };
            r1 += mb[1] * g[0] + mb[2] * g[1];
            // binned − exact = M·∇K − ½ Σ_a (S_a + n_b Δ_a²/12) ∂²_a K − S_01 ∂_0∂_1 K
            // (the exact term's Taylor series to second order, the binned
            // term's spatial kernel K − Σ_a (Δ_a²/24) ∂²_a K).
            sec -= 0.5
                * ((mb[3] + mb[0] * w[0]) * h00 + (mb[4] + mb[0] * w[1]) * h11 + 2.0 * mb[5] * h01);
            nz += mb[0] * (g[0] * g[0] + g[1] * g[1]);
        }
        let (r1, r12) = (r1 / n, (r1 + sec) / n);
        let rm = fj - exact;
        meas += rm * rm;
        r1s += r1 * r1;
        r12s += r12 * r12;
        noise += sig2 * nz / (n * n);
        den += r1 * r1 - sig2 * nz / (n * n);
        r12v.push(r12);
    }
    let mf = m as f64;
    let (v_with, _) = mapper.variances_with_plug_in(&kernel, &s).unwrap();
    let v_plain = mapper.conditional_variances(&kernel, &s, &fft_map).unwrap();
    let r16 = v_with
        .iter()
        .zip(&v_plain)
        .map(|(a, b)| (a - b) / n)
        .sum::<f64>()
        / mf;
    println!(
        "{{\"eps\":{eps},\"lambda\":{lambda},\"n\":{n},\"delta\":{},\"measured\":{:.4e},\"r1\":{:.4e},\"r12\":{:.4e},\"r1_denoised\":{:.4e},\"noise_term\":{:.4e},\"round16\":{:.4e}}}",
        delta[0],
        meas / mf,
        r1s / mf,
        r12s / mf,
        den / mf,
        noise / mf,
        r16
    );
    let dump = |path: String, v: &[f64]| {
        let mut f = std::fs::File::create(path).unwrap();
        for x in v {
            f.write_all(&x.to_le_bytes()).unwrap();
        }
    };
    dump(format!("{prefix}.map"), &fft_map);
    dump(format!("{prefix}.r12"), &r12v);
}
