//! The typed error of the experiment commands and the demo.
//!
//! Every failure of an experiment is one of these variants; the core's
//! [`geopriv::Error`] is kept as the source (with the mechanism or the
//! step it came from) instead of being flattened into a string, so callers
//! and tests can match on the kind.

use std::fmt;
use std::path::PathBuf;

/// Errors of `geopriv experiment ...` and `geopriv demo`.
#[derive(Debug)]
pub enum ExperimentError {
    /// A core error while building a query, a mechanism or a map.
    Core(geopriv::Error),
    /// A core error raised by one mechanism (named as on the command line).
    Mechanism {
        /// The mechanism's command-line name.
        mechanism: &'static str,
        /// What the core said.
        source: geopriv::Error,
    },
    /// A command-line value that does not parse or is out of range.
    Parse {
        /// The text as given.
        input: String,
        /// Why it was refused.
        reason: String,
    },
    /// Input data (the airports table or a user CSV) that cannot be used.
    Data(String),
    /// A query grid that cannot be built (too small, too large, or a
    /// degenerate bounding box).
    Grid(String),
    /// Reading or writing a file.
    Io {
        /// The file, when known.
        path: Option<PathBuf>,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// Drawing a PNG plot.
    Plot(String),
    /// The output directory exists and is not empty (no `--force`).
    OutputExists(crate::output::OutputExists),
}

impl ExperimentError {
    /// A parse error of `input`.
    pub fn parse(input: &str, reason: impl fmt::Display) -> Self {
        Self::Parse {
            input: input.to_string(),
            reason: reason.to_string(),
        }
    }

    /// Attach the mechanism's name to a core error.
    pub fn mechanism(mechanism: &'static str) -> impl Fn(geopriv::Error) -> Self {
        move |source| Self::Mechanism { mechanism, source }
    }

    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| Self::Io {
            path: Some(path),
            source,
        }
    }
}

impl fmt::Display for ExperimentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Core(e) => write!(f, "{e}"),
            Self::Mechanism { mechanism, source } => write!(f, "{mechanism}: {source}"),
            Self::Parse { input, reason } => {
                write!(f, "{}: {reason}", geopriv::server::escape::Untrusted(input))
            }
            Self::Data(m) | Self::Grid(m) => write!(f, "{m}"),
            Self::Io {
                path: Some(p),
                source,
            } => write!(f, "{}: {source}", geopriv::server::escape::UntrustedPath(p)),
            Self::Io { path: None, source } => write!(f, "{source}"),
            Self::Plot(m) => write!(f, "plot: {m}"),
            Self::OutputExists(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ExperimentError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Core(e) | Self::Mechanism { source: e, .. } => Some(e),
            Self::Io { source, .. } => Some(source),
            Self::OutputExists(e) => Some(e),
            _ => None,
        }
    }
}

impl From<geopriv::Error> for ExperimentError {
    fn from(e: geopriv::Error) -> Self {
        Self::Core(e)
    }
}

impl From<crate::output::OutputExists> for ExperimentError {
    fn from(e: crate::output::OutputExists) -> Self {
        Self::OutputExists(e)
    }
}

impl From<std::io::Error> for ExperimentError {
    fn from(source: std::io::Error) -> Self {
        Self::Io { path: None, source }
    }
}

/// Shorthand for the experiments' results.
pub type Result<T, E = ExperimentError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_the_source() {
        let e = ExperimentError::mechanism("polyplace")(geopriv::Error::InvalidParameter {
            name: "epsilon",
            value: -1.0,
            requirement: "positive",
        });
        assert!(e.to_string().starts_with("polyplace: "));
        assert!(std::error::Error::source(&e).is_some());
        assert_eq!(
            ExperimentError::parse("1/0", "ε must be positive and finite").to_string(),
            "1/0: ε must be positive and finite"
        );
    }
}
