//! Output paths are never overwritten without `--force` (issue 19 item 14):
//! `central ... --out FILE`, `map sweep --dump n:eps_h:FILE`, the
//! experiments' and the demo's output directories. Refusals name the path
//! (escaped: it is chosen by whoever runs the tool) and say `--force`; the
//! command exits with status 2 (a usage error) before computing anything.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use geopriv::server::escape::UntrustedPath;

/// An output path that already exists, refused without `--force`.
#[derive(Debug)]
pub struct OutputExists {
    /// The path as given.
    pub path: PathBuf,
    /// Whether it is a directory (with something in it).
    pub directory: bool,
}

impl std::fmt::Display for OutputExists {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.directory {
            write!(
                f,
                "output directory {} already exists and is not empty: refusing to overwrite it (pass --force to write into it)",
                UntrustedPath(&self.path)
            )
        } else {
            write!(
                f,
                "output file {} already exists: refusing to overwrite it (pass --force to replace it)",
                UntrustedPath(&self.path)
            )
        }
    }
}

impl std::error::Error for OutputExists {}

/// Whether `e` (or one of its sources) is an [`OutputExists`]: the
/// commands then exit with status 2.
pub fn is_output_exists(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if err.is::<OutputExists>() {
            return true;
        }
        cur = err.source();
    }
    false
}

/// Refused (without `force`) if `path` exists: checked before a long run
/// so that nothing is computed for an output that cannot be written.
pub fn check_file(path: &Path, force: bool) -> Result<(), OutputExists> {
    if !force && path.symlink_metadata().is_ok() {
        return Err(OutputExists {
            path: path.to_path_buf(),
            directory: path.is_dir(),
        });
    }
    Ok(())
}

/// Create the output file `path`: a new file (created exclusively, so a
/// file that appears meanwhile is not overwritten either), or with `force`
/// an existing one truncated.
pub fn create_file(path: &Path, force: bool) -> Result<File, BoxError> {
    let file = if force {
        File::create(path)
    } else {
        OpenOptions::new().write(true).create_new(true).open(path)
    };
    file.map_err(|e| -> BoxError {
        if e.kind() == io::ErrorKind::AlreadyExists {
            Box::new(OutputExists {
                path: path.to_path_buf(),
                directory: path.is_dir(),
            })
        } else {
            format!("cannot create {}: {e}", UntrustedPath(path)).into()
        }
    })
}

/// The commands' boxed error.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Refused (without `force`) if the directory `dir` exists and holds
/// anything (a missing or empty directory is fine: nothing is lost), or
/// if `dir` is a file.
pub fn check_dir(dir: &Path, force: bool) -> Result<(), OutputExists> {
    if force {
        return Ok(());
    }
    let Ok(meta) = dir.symlink_metadata() else {
        return Ok(());
    };
    let empty_dir = meta.is_dir()
        && std::fs::read_dir(dir)
            .map(|mut d| d.next().is_none())
            .unwrap_or(false);
    if empty_dir {
        Ok(())
    } else {
        Err(OutputExists {
            path: dir.to_path_buf(),
            directory: meta.is_dir(),
        })
    }
}
