//! Constructed populations nobody tuned the maps for (issue 22 item 3):
//! several structures in one generator, beside the bundled airports and
//! the synthetic city.
//!
//! A [`Structured`] population lives in a square of side [`Structured::SIDE`]
//! (30 km) and mixes, with public weights:
//! * clusters of different sizes and shapes: anisotropic Gaussians with
//!   their own spreads (150 m .. 2.5 km on the long axis, aspect up to 6)
//!   and orientations;
//! * corridors: line segments with a Gaussian cross-section (a road, a
//!   river bank);
//! * a uniform background over the land;
//! * optionally a coastline: everything beyond a wavy line is empty sea
//!   (about half the square), so the density drops to 0 along a curve.
//!
//! Three presets ([`Preset`]): `neighbourhoods` (20 anisotropic clusters,
//! one corridor, 25% background: the population of issue 22), `coast`
//! (clusters and two corridors on the land half of a coastline, 10%
//! background) and `sprawl` (many small clusters, three corridors, 40%
//! background). Every draw is clamped to the square and never falls in
//! the sea.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, StandardNormal};

/// The presets of [`Structured`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Preset {
    /// 20 anisotropic clusters, a corridor, 25% uniform background.
    Neighbourhoods,
    /// Clusters and two corridors on land, the other half sea, 10% background.
    Coast,
    /// 60 small clusters, three corridors, 40% background.
    Sprawl,
}

/// One structure of a population.
#[derive(Clone, Debug)]
enum Part {
    /// Centre, spreads (long, short) in metres, angle, weight.
    Cluster([f64; 2], [f64; 2], f64, f64),
    /// From, to, cross-section spread, weight.
    Corridor([f64; 2], [f64; 2], f64, f64),
}

/// A constructed population (see the module docs).
#[derive(Clone, Debug)]
pub struct Structured {
    parts: Vec<Part>,
    background: f64,
    /// Coastline: land where y < c0 + c1 sin(2π x / SIDE · c2).
    coast: Option<[f64; 3]>,
}

impl Structured {
    /// Side of the square, metres.
    pub const SIDE: f64 = 30_000.0;

    /// A preset (its structure drawn from a fixed public seed).
    pub fn preset(p: Preset) -> Self {
        let s = Self::SIDE;
        let (seed, clusters, corridors, background, coast) = match p {
            Preset::Neighbourhoods => (0x4e31, 20, 1, 0.25, None),
            Preset::Coast => (0xc0a5, 12, 2, 0.10, Some([0.5 * s, 0.08 * s, 2.5])),
            Preset::Sprawl => (0x5b71, 60, 3, 0.40, None),
        };
        let mut rng = StdRng::seed_from_u64(seed);
        let mut me = Self {
            parts: Vec::new(),
            background,
            coast,
        };
        let small = p == Preset::Sprawl;
        while me.parts.len() < clusters {
            let c = [
                rng.random_range(0.1..0.9) * s,
                rng.random_range(0.1..0.9) * s,
            ];
            if !me.land(c) {
                continue;
            }
            let long = if small {
                rng.random_range(150.0..700.0)
            } else {
                rng.random_range(300.0..2500.0)
            };
            let aspect = rng.random_range(1.0..6.0);
            let angle = rng.random_range(0.0..std::f64::consts::PI);
            let weight = rng.random_range(0.3..2.0);
            me.parts
                .push(Part::Cluster(c, [long, long / aspect], angle, weight));
        }
        let mut made = 0;
        while made < corridors {
            let a = [
                rng.random_range(0.05..0.95) * s,
                rng.random_range(0.05..0.95) * s,
            ];
            let b = [
                rng.random_range(0.05..0.95) * s,
                rng.random_range(0.05..0.95) * s,
            ];
            if !me.land(a) || !me.land(b) || (a[0] - b[0]).hypot(a[1] - b[1]) < 0.4 * s {
                continue;
            }
            let spread = rng.random_range(100.0..400.0);
            me.parts.push(Part::Corridor(a, b, spread, 3.0));
            made += 1;
        }
        me
    }

    /// Whether x is on land (always without a coastline).
    pub fn land(&self, x: [f64; 2]) -> bool {
        match self.coast {
            None => true,
            Some([c0, c1, c2]) => {
                x[1] < c0 + c1 * (2.0 * std::f64::consts::PI * x[0] / Self::SIDE * c2).sin()
            }
        }
    }

    fn draw<R: Rng + ?Sized>(&self, rng: &mut R) -> [f64; 2] {
        let s = Self::SIDE;
        if rng.random::<f64>() < self.background {
            return [rng.random::<f64>() * s, rng.random::<f64>() * s];
        }
        let total: f64 = self
            .parts
            .iter()
            .map(|p| match p {
                Part::Cluster(.., w) | Part::Corridor(.., w) => *w,
            })
            .sum();
        let mut u = rng.random::<f64>() * total;
        let mut pick = &self.parts[self.parts.len() - 1];
        for p in &self.parts {
            let w = match p {
                Part::Cluster(.., w) | Part::Corridor(.., w) => *w,
            };
            if u < w {
                pick = p;
                break;
            }
            u -= w;
        }
        let z0: f64 = StandardNormal.sample(rng);
        let z1: f64 = StandardNormal.sample(rng);
        match *pick {
            Part::Cluster(c, [a, b], t, _) => {
                let (u, v) = (a * z0, b * z1);
                [
                    c[0] + u * t.cos() - v * t.sin(),
                    c[1] + u * t.sin() + v * t.cos(),
                ]
            }
            Part::Corridor(a, b, sp, _) => {
                let f: f64 = rng.random();
                let (dx, dy) = (b[0] - a[0], b[1] - a[1]);
                let len = dx.hypot(dy);
                [
                    a[0] + f * dx - sp * z0 * dy / len,
                    a[1] + f * dy + sp * z0 * dx / len,
                ]
            }
        }
    }

    /// One resident's location in metres, inside [0, SIDE]², on land
    /// (rejection: draws in the sea or outside the square are redrawn).
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> [f64; 2] {
        loop {
            let x = self.draw(rng);
            if (0.0..=Self::SIDE).contains(&x[0])
                && (0.0..=Self::SIDE).contains(&x[1])
                && self.land(x)
            {
                return x;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_seeded_inside_and_on_land() {
        for p in [Preset::Neighbourhoods, Preset::Coast, Preset::Sprawl] {
            let pop = Structured::preset(p);
            let draw = |seed| {
                let mut rng = StdRng::seed_from_u64(seed);
                (0..3000).map(|_| pop.sample(&mut rng)).collect::<Vec<_>>()
            };
            let a = draw(1);
            assert_eq!(a, draw(1));
            assert!(a
                .iter()
                .all(|x| pop.land(*x) && x.iter().all(|c| (0.0..=Structured::SIDE).contains(c))));
        }
        // The coast: nobody in the upper part of the square.
        let pop = Structured::preset(Preset::Coast);
        let mut rng = StdRng::seed_from_u64(3);
        let high = (0..3000)
            .map(|_| pop.sample(&mut rng))
            .filter(|x| x[1] > 0.6 * Structured::SIDE)
            .count();
        assert_eq!(high, 0);
    }
}
