//! Bracketed root finding. Every solver here starts from a bracket [lo, hi]
//! on which f changes sign, keeps a sign-changing bracket at every step and
//! stops only when the bracket (or the last Newton step) is at the level of
//! floating-point resolution. If the caller's bracket does not change sign
//! the solver returns an error instead of a number: there is no fallback
//! that could return a wrong root.

use crate::error::{Error, Result};

/// Relative resolution we converge to: a few ulps of the root.
const REL_TOL: f64 = 4.0 * f64::EPSILON;
/// Absolute floor so roots at 0 terminate.
const ABS_TOL: f64 = 1e-300;
/// Bisection alone halves the bracket each step; 2,200 halvings cover the
/// whole f64 range, so this limit is never the reason a solve stops.
const MAX_ITER: usize = 2_200;

#[inline]
fn tolerance(x: f64) -> f64 {
    REL_TOL * x.abs() + ABS_TOL
}

/// Safeguarded Newton iteration ("rtsafe"): Newton steps from `x0` while
/// they stay inside the bracket and shrink fast enough, bisection
/// otherwise. `fdf(x)` returns (f(x), f'(x)); `f(lo)` and `f(hi)` must have
/// opposite signs (or one of them be zero).
pub(crate) fn newton_bracketed<F>(
    routine: &'static str,
    mut fdf: F,
    lo: f64,
    hi: f64,
    x0: f64,
) -> Result<f64>
where
    F: FnMut(f64) -> (f64, f64),
{
    let (f_lo, _) = fdf(lo);
    let (f_hi, _) = fdf(hi);
    if f_lo == 0.0 {
        return Ok(lo);
    }
    if f_hi == 0.0 {
        return Ok(hi);
    }
    if f_lo.is_nan() || f_hi.is_nan() || (f_lo > 0.0) == (f_hi > 0.0) {
        return Err(Error::Numerical { routine });
    }
    // Orient the bracket so that f(neg) < 0 < f(pos).
    let (mut neg, mut pos) = if f_lo < 0.0 { (lo, hi) } else { (hi, lo) };
    let mut x = if x0 > lo.min(hi) && x0 < lo.max(hi) {
        x0
    } else {
        0.5 * (lo + hi)
    };
    let mut step_before_last = (hi - lo).abs();
    let mut last_step = step_before_last;
    let (mut f, mut df) = fdf(x);
    for _ in 0..MAX_ITER {
        if f == 0.0 {
            return Ok(x);
        }
        if f.is_nan() {
            return Err(Error::Numerical { routine });
        }
        if f < 0.0 {
            neg = x;
        } else {
            pos = x;
        }
        let newton = x - f / df;
        let (a, b) = if neg < pos { (neg, pos) } else { (pos, neg) };
        let newton_ok = newton.is_finite()
            && newton > a
            && newton < b
            && (2.0 * f).abs() <= (step_before_last * df).abs();
        step_before_last = last_step;
        let next = if newton_ok { newton } else { 0.5 * (neg + pos) };
        last_step = (next - x).abs();
        if last_step <= tolerance(next) || (b - a) <= tolerance(b.abs().max(a.abs())) {
            return Ok(next);
        }
        x = next;
        let r = fdf(x);
        f = r.0;
        df = r.1;
    }
    Err(Error::Numerical { routine })
}

/// Brent's method (Brent 1973, as in Numerical Recipes' `zbrent`): inverse
/// quadratic interpolation and secant steps, falling back to bisection, on a
/// bracket that always changes sign. `f(a)` and `f(b)` must have opposite
/// signs (or one be zero). Tolerates discontinuities of f (it then bisects).
pub(crate) fn brent<F>(routine: &'static str, mut f: F, a: f64, b: f64) -> Result<f64>
where
    F: FnMut(f64) -> f64,
{
    let (mut a, mut b) = (a, b);
    let (mut fa, mut fb) = (f(a), f(b));
    if fa == 0.0 {
        return Ok(a);
    }
    if fb == 0.0 {
        return Ok(b);
    }
    if fa.is_nan() || fb.is_nan() || (fa > 0.0) == (fb > 0.0) {
        return Err(Error::Numerical { routine });
    }
    let (mut c, mut fc) = (b, fb);
    let (mut d, mut e) = (b - a, b - a);
    for _ in 0..MAX_ITER {
        if (fb > 0.0) == (fc > 0.0) {
            c = a;
            fc = fa;
            d = b - a;
            e = d;
        }
        if fc.abs() < fb.abs() {
            a = b;
            b = c;
            c = a;
            fa = fb;
            fb = fc;
            fc = fa;
        }
        let tol1 = 0.5 * tolerance(b);
        let xm = 0.5 * (c - b);
        if xm.abs() <= tol1 || fb == 0.0 {
            return Ok(b);
        }
        if e.abs() >= tol1 && fa.abs() > fb.abs() && fa.is_finite() && fb.is_finite() {
            let s = fb / fa;
            let (mut p, mut q);
            if a == c {
                p = 2.0 * xm * s;
                q = 1.0 - s;
            } else {
                let qq = fa / fc;
                let r = fb / fc;
                p = s * (2.0 * xm * qq * (qq - r) - (b - a) * (r - 1.0));
                q = (qq - 1.0) * (r - 1.0) * (s - 1.0);
            }
            if p > 0.0 {
                q = -q;
            }
            p = p.abs();
            let min1 = 3.0 * xm * q - (tol1 * q).abs();
            let min2 = (e * q).abs();
            if 2.0 * p < min1.min(min2) && p.is_finite() && q.is_finite() && q != 0.0 {
                e = d;
                d = p / q;
            } else {
                d = xm;
                e = d;
            }
        } else {
            d = xm;
            e = d;
        }
        a = b;
        fa = fb;
        b += if d.abs() > tol1 {
            d
        } else if xm > 0.0 {
            tol1
        } else {
            -tol1
        };
        fb = f(b);
        if fb.is_nan() {
            return Err(Error::Numerical { routine });
        }
    }
    Err(Error::Numerical { routine })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newton_finds_sqrt2_to_full_precision() {
        let r = newton_bracketed("t", |x| (x * x - 2.0, 2.0 * x), 0.0, 2.0, 1.0).unwrap();
        assert!((r - core::f64::consts::SQRT_2).abs() <= 2.0 * f64::EPSILON);
        // Bracket given in reverse orientation.
        let r = newton_bracketed("t", |x| (2.0 - x * x, -2.0 * x), 2.0, 0.0, 5.0).unwrap();
        assert!((r - core::f64::consts::SQRT_2).abs() <= 2.0 * f64::EPSILON);
    }

    #[test]
    fn brent_finds_roots_and_survives_discontinuities() {
        let r = brent("t", |x| libm::cos(x) - x, 0.0, 1.0).unwrap();
        assert!((libm::cos(r) - r).abs() < 1e-15);
        let r = brent("t", |x| if x < 0.3 { 1.0 } else { -1.0 }, 0.0, 1.0).unwrap();
        assert!((r - 0.3).abs() < 1e-15);
    }

    #[test]
    fn no_sign_change_is_an_error() {
        assert!(brent("t", |x| x * x + 1.0, -1.0, 1.0).is_err());
        assert!(newton_bracketed("t", |x| (x * x + 1.0, 2.0 * x), -1.0, 1.0, 0.0).is_err());
        assert!(brent("t", |_| f64::NAN, -1.0, 1.0).is_err());
    }
}
