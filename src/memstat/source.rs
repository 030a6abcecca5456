//! Choosing and reading a statistics source, and the errors a source can report.
//!
//! A source is opened once (on Linux that is where the root-only /proc/slabinfo is opened,
//! before privileges are dropped) and then read at every refresh.

use super::{assign_ordinals, fixture, linux, sysctl, MemoryType};
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

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

/// Which source to read, as given by `--source`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SourceKind {
    /// The running kernel's own source: FreeBSD sysctls on FreeBSD, /proc/slabinfo on Linux.
    Auto,
    /// /proc/slabinfo, or another file in the same format.
    Linux(PathBuf),
    /// `vm.zone_stats` and `kern.malloc_stats`.
    FreeBsd,
    /// A JSON file as printed by `dump --format json`, re-read at every refresh.
    Fixture(PathBuf),
}

impl FromStr for SourceKind {
    type Err = SourceError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(SourceKind::Auto),
            "linux" => Ok(SourceKind::Linux(PathBuf::from(linux::SLABINFO))),
            "freebsd" => Ok(SourceKind::FreeBsd),
            _ => {
                if let Some(p) = s.strip_prefix("fixture:").filter(|p| !p.is_empty()) {
                    Ok(SourceKind::Fixture(PathBuf::from(p)))
                } else if let Some(p) = s.strip_prefix("linux:").filter(|p| !p.is_empty()) {
                    Ok(SourceKind::Linux(PathBuf::from(p)))
                } else {
                    Err(SourceError::Unavailable {
                        message: format!(
                            "unknown source {s:?}: use auto, linux, linux:PATH, freebsd or fixture:PATH"
                        ),
                    })
                }
            }
        }
    }
}

impl fmt::Display for SourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceKind::Auto => f.write_str("auto"),
            SourceKind::Linux(p) => write!(f, "linux:{}", p.display()),
            SourceKind::FreeBsd => f.write_str("freebsd"),
            SourceKind::Fixture(p) => write!(f, "fixture:{}", p.display()),
        }
    }
}

enum Reader {
    Linux(linux::SlabinfoReader),
    FreeBsd(sysctl::KernelStreams),
    Fixture(PathBuf),
}

/// An opened source.
pub struct Source {
    kind: SourceKind,
    reader: Reader,
}

impl Source {
    /// Opens the source. For `auto` this picks the platform's kernel source.
    pub fn open(kind: &SourceKind) -> Result<Source, SourceError> {
        let kind = match kind {
            SourceKind::Auto if cfg!(target_os = "freebsd") => SourceKind::FreeBsd,
            SourceKind::Auto if cfg!(target_os = "linux") => {
                SourceKind::Linux(PathBuf::from(linux::SLABINFO))
            }
            SourceKind::Auto => {
                return Err(SourceError::Unavailable {
                    message: "no kernel source on this platform: use --source fixture:PATH".into(),
                })
            }
            k => k.clone(),
        };
        let reader = match &kind {
            SourceKind::Linux(p) => Reader::Linux(linux::SlabinfoReader::open(p)?),
            SourceKind::FreeBsd => Reader::FreeBsd(sysctl::KernelStreams::open()?),
            SourceKind::Fixture(p) => Reader::Fixture(p.clone()),
            SourceKind::Auto => unreachable!("resolved above"),
        };
        Ok(Source { kind, reader })
    }

    /// The resolved kind (never `Auto`).
    pub fn kind(&self) -> &SourceKind {
        &self.kind
    }

    /// A short name for logs and the MIB's source-name scalar.
    pub fn name(&self) -> String {
        self.kind.to_string()
    }

    /// Reads the current figures, in kernel order, with ordinals assigned.
    pub fn read(&mut self) -> Result<Vec<MemoryType>, SourceError> {
        let mut types = match &mut self.reader {
            Reader::Linux(r) => r.read()?,
            Reader::FreeBsd(r) => r.read()?,
            Reader::Fixture(p) => fixture::read(p)?.types,
        };
        assign_ordinals(&mut types);
        Ok(types)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_source_names() {
        assert_eq!("auto".parse::<SourceKind>().unwrap(), SourceKind::Auto);
        assert_eq!(
            "fixture:/x.json".parse::<SourceKind>().unwrap(),
            SourceKind::Fixture("/x.json".into())
        );
        assert_eq!(
            "linux".parse::<SourceKind>().unwrap(),
            SourceKind::Linux("/proc/slabinfo".into())
        );
        let e = "bogus".parse::<SourceKind>().unwrap_err().to_string();
        assert!(e.contains("bogus") && e.contains("fixture:PATH"), "{e}");
        assert!("fixture:".parse::<SourceKind>().is_err());
    }
}
