//! Choosing and reading a statistics source, and the errors a source can report.
//!
//! A source is opened once (on Linux that is where the root-only /proc/slabinfo is opened,
//! before privileges are dropped) and then read at every refresh.

use super::{assign_ordinals, fixture, linux, sysctl, MemoryType, MAX_CPU_INDEX};
use crate::boundedfile::{self, FileError};
use std::fmt;
use std::fs::{File, Metadata};
use std::path::{Path, PathBuf};
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

use crate::boundedfile::not_regular;

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

/// Refuses `path` when it exists and is not a regular file, without opening it (a `stat`
/// never blocks, an `open` of a FIFO does). A missing file is not refused here: a fixture may
/// appear later, and the read will say it is missing.
fn refuse_if_not_regular(path: &Path) -> Result<(), SourceError> {
    let meta = std::fs::metadata(path).ok();
    match meta.as_ref().and_then(not_regular) {
        Some(kind) => {
            let what = path.display().to_string();
            Err(file_error(&what, "", FileError::NotRegular(kind)))
        }
        None => Ok(()),
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
            SourceKind::Fixture(p) => {
                // Refused now rather than at the first refresh: a FIFO or device named by
                // mistake is a configuration error the operator should see at start-up.
                refuse_if_not_regular(p)?;
                Reader::Fixture(p.clone())
            }
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
        check_cpu_indexes(&types, &self.name())?;
        assign_ordinals(&mut types);
        Ok(types)
    }
}

/// Refuses per-CPU rows whose CPU number the MIB cannot carry (memCpuIndex is
/// `Unsigned32 (0..65535)`). Fixtures name the line themselves when parsed; this is the
/// last guard for every source, so that no such index reaches the wire.
fn check_cpu_indexes(types: &[MemoryType], source: &str) -> Result<(), SourceError> {
    for t in types {
        if let Some(pc) = t.per_cpu.iter().find(|pc| pc.cpu > MAX_CPU_INDEX) {
            return Err(SourceError::Malformed {
                what: source.to_string(),
                location: format!("type {} {:?}", t.allocator, t.name),
                field: "cpu".into(),
                message: format!(
                    "CPU {} is out of memCpuIndex's range 0..{MAX_CPU_INDEX}",
                    pc.cpu
                ),
            });
        }
    }
    Ok(())
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

    fn mkfifo(p: &Path) {
        let st = std::process::Command::new("mkfifo")
            .arg(p)
            .status()
            .unwrap();
        assert!(st.success(), "mkfifo {}", p.display());
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("fifo");
        mkfifo(&p);
        // No writer ever opens it: a blocking open would hang this test.
        let e = open_regular(&p, "x").unwrap_err().to_string();
        assert!(
            e.contains(&p.display().to_string()) && e.contains("FIFO"),
            "{e}"
        );
        let e = refuse_if_not_regular(&p).unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");
        for kind in [SourceKind::Fixture(p.clone()), SourceKind::Linux(p.clone())] {
            let e = Source::open(&kind).err().unwrap().to_string();
            assert!(e.contains("FIFO"), "{kind}: {e}");
        }
        let e = open_regular(Path::new("/dev/zero"), "x")
            .unwrap_err()
            .to_string();
        assert!(e.contains("character device"), "{e}");
        // A missing fixture is not refused at open: it may appear later.
        assert!(Source::open(&SourceKind::Fixture(dir.path().join("later.json"))).is_ok());
    }

    #[test]
    fn refusals_keep_the_source_wording() {
        let e = file_error("f", "x", FileError::TooLarge { cap: 64 << 20 }).to_string();
        assert_eq!(
            e,
            "f: larger than 64 MiB (67108864 bytes), the most this source reads; refused"
        );
        let e = file_error("f", "x", FileError::NotRegular("a socket")).to_string();
        assert_eq!(
            e,
            "f: is a socket, not a regular file; a file source must be a regular file"
        );
        let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        assert_eq!(
            file_error("f", "run as root", FileError::Io(denied)),
            SourceError::PermissionDenied {
                what: "f".into(),
                hint: "run as root".into()
            }
        );
    }

    #[test]
    fn no_source_emits_a_cpu_beyond_the_mib_range() {
        let mut t = MemoryType::new(super::super::Allocator::Uma, "z");
        t.per_cpu = vec![super::super::PerCpu {
            cpu: 70_000,
            ..Default::default()
        }];
        let e = check_cpu_indexes(&[t.clone()], "freebsd")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("freebsd") && e.contains("cpu") && e.contains("70000"),
            "{e}"
        );
        t.per_cpu[0].cpu = MAX_CPU_INDEX;
        assert!(check_cpu_indexes(&[t], "freebsd").is_ok());
    }
}
