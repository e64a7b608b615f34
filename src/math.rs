//! Thin wrappers over `libm`, so the crate computes the same numbers with
//! and without `std` (and on every platform).

#[inline]
pub(crate) fn exp(x: f64) -> f64 {
    libm::exp(x)
}

#[inline]
pub(crate) fn ln(x: f64) -> f64 {
    libm::log(x)
}

#[inline]
pub(crate) fn sqrt(x: f64) -> f64 {
    libm::sqrt(x)
}

#[inline]
pub(crate) fn hypot(x: f64, y: f64) -> f64 {
    libm::hypot(x, y)
}

#[inline]
pub(crate) fn pow(x: f64, y: f64) -> f64 {
    libm::pow(x, y)
}

/// ln(1 + x), accurate for small |x|.
#[inline]
pub(crate) fn log1p(x: f64) -> f64 {
    libm::log1p(x)
}

/// e^x - 1, accurate for small |x|.
#[inline]
pub(crate) fn expm1(x: f64) -> f64 {
    libm::expm1(x)
}

#[inline]
pub(crate) fn cbrt(x: f64) -> f64 {
    libm::cbrt(x)
}

#[inline]
pub(crate) fn cos(x: f64) -> f64 {
    libm::cos(x)
}

#[inline]
pub(crate) fn sin(x: f64) -> f64 {
    libm::sin(x)
}

/// (sin x, cos x) in one call.
#[inline]
pub(crate) fn sin_cos(x: f64) -> (f64, f64) {
    libm::sincos(x)
}

/// ln Γ(x) for x > 0.
#[inline]
pub(crate) fn ln_gamma(x: f64) -> f64 {
    libm::lgamma(x)
}
