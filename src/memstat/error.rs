//! What can go wrong reading a source, and opening files others control.
//!
//! Every source reports a [`SourceError`]; the file sources open through [`open_regular`].

use crate::boundedfile::{self, not_regular, FileError};
use std::fmt;
use std::fs::{File, Metadata};
use std::path::Path;

/// What went wrong reading a source, and where.
///
/// Every variant names the file or sysctl it is about; parse errors also name the line or
/// byte offset and the field, so an operator can find the bad spot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SourceError {
    /// The file or sysctl exists but we may not read it.
    PermissionDenied { what: String, hint: String },
    /// Any other I/O or system call failure.
    Io { what: String, message: String },
    /// A version we do not understand.
    UnsupportedVersion { what: String, found: String },
    /// The data does not follow its format.
    Malformed {
        what: String,
        /// "line 7", "byte 104", ...
        location: String,
        field: String,
        message: String,
    },
    /// The source cannot exist on this platform or was named wrongly.
    Unavailable { message: String },
}

impl fmt::Display for SourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceError::PermissionDenied { what, hint } => {
                write!(f, "{what}: permission denied ({hint})")
            }
            SourceError::Io { what, message } => write!(f, "{what}: {message}"),
            SourceError::UnsupportedVersion { what, found } => {
                write!(f, "{what}: unsupported version {found}")
            }
            SourceError::Malformed {
                what,
                location,
                field,
                message,
            } => {
                if field.is_empty() {
                    write!(f, "{what}: {location}: {message}")
                } else {
                    write!(f, "{what}: {location}: field {field}: {message}")
                }
            }
            SourceError::Unavailable { message } => f.write_str(message),
        }
    }
}

impl std::error::Error for SourceError {}

impl SourceError {
    /// Maps an I/O error on `what`, turning EACCES/EPERM into [`SourceError::PermissionDenied`].
    pub fn from_io(what: &str, e: &std::io::Error, hint: &str) -> Self {
        if e.kind() == std::io::ErrorKind::PermissionDenied {
            SourceError::PermissionDenied {
                what: what.to_string(),
                hint: hint.to_string(),
            }
        } else {
            SourceError::Io {
                what: what.to_string(),
                message: e.to_string(),
            }
        }
    }
}

/// A [`FileError`] about the file source `what`: I/O failures through
/// [`SourceError::from_io`] with `hint`, refusals in the words memSourceLastError and the
/// start-up errors have always used.
pub(crate) fn file_error(what: &str, hint: &str, e: FileError) -> SourceError {
    let message = match e {
        FileError::Io(e) => return SourceError::from_io(what, &e, hint),
        FileError::NotRegular(kind) => {
            format!("is {kind}, not a regular file; a file source must be a regular file")
        }
        FileError::TooLarge { cap } => format!(
            "larger than {} ({cap} bytes), the most this source reads; refused",
            boundedfile::mib(cap)
        ),
    };
    SourceError::Io {
        what: what.to_string(),
        message,
    }
}

/// Opens a file source for reading with [`boundedfile::open`]: without blocking, and only a
/// regular file.
pub(crate) fn open_regular(path: &Path, hint: &str) -> Result<(File, Metadata), SourceError> {
    boundedfile::open(path, 0).map_err(|e| file_error(&path.display().to_string(), hint, e))
}

/// Opens the file source at `path` again and reads it whole into `buf`, at most `cap` bytes:
/// what a re-opened source does at every refresh. Returns the file's name for the parser's
/// errors.
pub(crate) fn reread_capped(
    path: &Path,
    cap: u64,
    buf: &mut Vec<u8>,
) -> Result<String, SourceError> {
    let what = path.display().to_string();
    let (file, _) = open_regular(path, "")?;
    boundedfile::read_capped(file, cap, buf).map_err(|e| file_error(&what, "", e))?;
    Ok(what)
}

/// Refuses `path` when it exists and is not a regular file, without opening it (a `stat`
/// never blocks, an `open` of a FIFO does). A missing file is not refused here: a fixture may
/// appear later, and the read will say it is missing.
pub(crate) fn refuse_if_not_regular(path: &Path) -> Result<(), SourceError> {
    let meta = std::fs::metadata(path).ok();
    match meta.as_ref().and_then(not_regular) {
        Some(kind) => {
            let what = path.display().to_string();
            Err(file_error(&what, "", FileError::NotRegular(kind)))
        }
        None => Ok(()),
    }
}
