//! The ZFS ARC on Linux, from OpenZFS's kstat file /proc/spl/kstat/zfs/arcstats: its size
//! as a row of memKernelTable, and every statistic as a figure (`arcstats.` and its name),
//! for the ARC's own group to serve by name.
//!
//! The file is kstat text (OpenZFS module/os/linux/spl/spl-kstat.c): a header line of the
//! kstat's own numbers, a `name type data` line, then one `name type value` line per
//! statistic. Type 4 is KSTAT_DATA_UINT64, the type of every ARC statistic; a row of another
//! type is not a figure and is passed over, and so is a name this reader has not met:
//! statistics come and go between OpenZFS releases (`p` became `pd` and `pm` in 2.2.0), and an
//! absent one is an absent figure, never 0.
//!
//! Without OpenZFS loaded the file does not exist: the default path then gives no figures
//! and no error (a host without ZFS has no ARC to report), while a path named with
//! `arcstats:PATH` must exist. The file is readable by everyone and appears when the module
//! is loaded, so it is opened again at every refresh.

use super::error::{file_error, open_regular, refuse_if_not_regular};
use super::source_def::{Fills, KernelKind, Opening, Os, PathRule, Reading, SourceDef};
use super::{Figures, SourceData, SourceError};
use std::path::{Path, PathBuf};

pub const ARCSTATS: &str = "/proc/spl/kstat/zfs/arcstats";

/// The figure of the ARC's size in bytes.
pub const SIZE: &str = "arcstats.size";

/// The `arcstats` source: the ZFS ARC's statistics, from OpenZFS's kstat file or another
/// file in its format.
pub const SOURCE: SourceDef = SourceDef {
    module: module_path!(),
    name: "arcstats",
    summary: "the ZFS ARC on Linux (/proc/spl/kstat/zfs/arcstats when OpenZFS is loaded, or PATH in its format)",
    path: PathRule::Default(ARCSTATS),
    auto_on: Some(Os::Linux),
    opening: Opening::Reopened,
    fills: Fills::Allocators(&[]),
    groups: &[],
    kinds: &[KernelKind {
        index: 13,
        name: "zfsArc",
        figure: SIZE,
        from: "size",
        parent: 0,
        reclaimable: true,
        // Its buffers are pages and SPL caches, some of them in slab and vmalloc.
        stackable: false,
    }],
    open: open_source,
};

/// The most a read takes in. The file is some 150 lines of under 60 bytes; past 1 MiB it is
/// not arcstats.
pub const MAX_ARCSTATS_BYTES: u64 = 1024 * 1024;

/// kstat's KSTAT_DATA_UINT64.
const KSTAT_DATA_UINT64: &[u8] = b"4";

fn open_source(path: Option<&Path>) -> Result<Box<dyn Reading>, SourceError> {
    let (path, named) = match path {
        Some(p) => (p, true),
        None => (Path::new(ARCSTATS), false),
    };
    // A FIFO or device named by mistake is refused at start-up; a missing file is left to
    // the read.
    refuse_if_not_regular(path)?;
    Ok(Box::new(ArcstatsFile {
        path: path.to_path_buf(),
        named,
        buf: Vec::with_capacity(8 * 1024),
    }))
}

/// An arcstats source: its path, opened again at every read, whether the path was named
/// (then it must exist), and a buffer reused across reads.
struct ArcstatsFile {
    path: PathBuf,
    named: bool,
    buf: Vec<u8>,
}

impl Reading for ArcstatsFile {
    fn read(&mut self) -> Result<SourceData, SourceError> {
        if !self.named && !self.path.exists() {
            // OpenZFS is not loaded: no ARC.
            return Ok(SourceData::default());
        }
        let what = self.path.display().to_string();
        let (file, _) = open_regular(&self.path, "")?;
        crate::boundedfile::read_capped(file, MAX_ARCSTATS_BYTES, &mut self.buf)
            .map_err(|e| file_error(&what, "", e))?;
        Ok(SourceData {
            types: Vec::new(),
            figures: parse(&self.buf, &what)?,
        })
    }
}

/// Parses kstat text into figures: every `name 4 value` row as `arcstats.name`. The header
/// and the column line are checked, so that a file that is not kstat text is an error
/// rather than no figures; `what` names the file in errors, which give the line and field.
pub fn parse(text: &[u8], what: &str) -> Result<Figures, SourceError> {
    let bad = |line: usize, field: &str, message: String| SourceError::Malformed {
        what: what.into(),
        location: format!("line {line}"),
        field: field.into(),
        message,
    };
    let mut lines = text.split(|&b| b == b'\n').enumerate();
    let split = |l: &[u8]| -> Vec<Vec<u8>> {
        l.split(u8::is_ascii_whitespace)
            .filter(|w| !w.is_empty())
            .map(<[u8]>::to_vec)
            .collect()
    };
    // The kstat's own numbers: its id, type, flags (in hex), count, size and times.
    let number = |w: &Vec<u8>| match w.strip_prefix(b"0x") {
        Some(hex) => !hex.is_empty() && hex.iter().all(u8::is_ascii_hexdigit),
        None => w.iter().all(u8::is_ascii_digit),
    };
    match lines.next().map(|(_, l)| split(l)) {
        Some(h) if !h.is_empty() && h.iter().all(number) => {}
        _ => {
            return Err(bad(
                1,
                "header",
                "not a kstat header (its own numbers)".into(),
            ))
        }
    }
    match lines.next().map(|(_, l)| split(l)) {
        Some(c) if c == [b"name".to_vec(), b"type".to_vec(), b"data".to_vec()] => {}
        _ => return Err(bad(2, "header", "expected `name type data`".into())),
    }
    let mut figures = Figures::new();
    for (i, line) in lines {
        let w = split(line);
        if w.is_empty() {
            continue;
        }
        let name = String::from_utf8_lossy(&w[0]).into_owned();
        let [_, ty, value] = w.as_slice() else {
            return Err(bad(i + 1, &name, "expected `name type value`".into()));
        };
        if ty.as_slice() != KSTAT_DATA_UINT64 {
            continue;
        }
        let v: u64 = std::str::from_utf8(value)
            .ok()
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| {
                let shown = String::from_utf8_lossy(value);
                bad(i + 1, &name, format!("not a number: {shown:?}"))
            })?;
        if figures.insert(format!("arcstats.{name}"), v).is_some() {
            return Err(bad(i + 1, &name, "listed twice".into()));
        }
    }
    Ok(figures)
}

#[cfg(test)]
#[path = "arcstats_tests.rs"]
mod tests;
