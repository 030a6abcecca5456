//! The Linux kernel's own memory, from /proc/meminfo: slab, kernel stacks, page tables,
//! vmalloc, per-CPU memory and the rest that the allocator tables do not show, served as rows
//! of memKernelTable.
//!
//! A /proc/meminfo line reads `Name: value kB` (fs/proc/meminfo.c, `show_val_kb`). Fields come
//! and go between kernels and configurations, so only the lines of [`KINDS`] are read, by
//! name: a field the kernel does not print is an absent row, never 0, and a line this source
//! does not know is not looked at. One release printed a tab after a colon, so a line is split
//! on its colon and then on any whitespace, never at a fixed column.
//!
//! The file is readable by everyone: it is opened again at every refresh, with the daemon's
//! final rights, and the privilege drop takes nothing from it.

use super::error::{refuse_if_not_regular, reread_capped};
use super::source_def::{Fills, KernelKind, Opening, Os, PathRule, Reading, SourceDef};
use super::{Figures, SourceData, SourceError};
use std::path::{Path, PathBuf};

pub const MEMINFO: &str = "/proc/meminfo";

/// The `meminfo` source: the kernel memory of /proc/meminfo, or of another file in its
/// format.
pub const SOURCE: SourceDef = SourceDef {
    module: module_path!(),
    name: "meminfo",
    summary: "the Linux kernel's own memory: slab, stacks, page tables, vmalloc, per-CPU (/proc/meminfo, or PATH in its format)",
    path: PathRule::Default(MEMINFO),
    auto_on: Some(Os::Linux),
    opening: Opening::Reopened,
    fills: Fills::Allocators(&[]),
    saved_copy: false,
    groups: &[],
    kinds: KINDS,
    open: open_source,
};

/// A row of memKernelTable from one /proc/meminfo field.
const fn field(
    index: u32,
    name: &'static str,
    (figure, line): (&'static str, &'static str),
    parent: u32,
    reclaimable: bool,
    stackable: bool,
) -> KernelKind {
    KernelKind {
        index,
        name,
        figure,
        from: line,
        parent,
        reclaimable,
        stackable,
    }
}

/// The rows this source fills, each from the /proc/meminfo line it names (its figure is
/// `meminfo.` and the line's name). MEMSTAT-MIB's MemKernelKind says, for each,
/// the field it comes from and what it overlaps; tests/mib_validation.rs holds the two
/// together.
pub const KINDS: &[KernelKind] = &[
    field(1, "slab", ("meminfo.Slab", "Slab"), 0, false, true),
    field(
        2,
        "slabReclaimable",
        ("meminfo.SReclaimable", "SReclaimable"),
        1,
        true,
        true,
    ),
    field(
        3,
        "slabUnreclaimable",
        ("meminfo.SUnreclaim", "SUnreclaim"),
        1,
        false,
        true,
    ),
    // SReclaimable plus the kernel's other reclaimable memory: it overlaps slab.
    field(
        4,
        "kernelReclaimable",
        ("meminfo.KReclaimable", "KReclaimable"),
        0,
        true,
        false,
    ),
    field(
        5,
        "kernelStack",
        ("meminfo.KernelStack", "KernelStack"),
        0,
        false,
        true,
    ),
    field(
        6,
        "shadowCallStack",
        ("meminfo.ShadowCallStack", "ShadowCallStack"),
        0,
        false,
        true,
    ),
    field(
        7,
        "pageTables",
        ("meminfo.PageTables", "PageTables"),
        0,
        false,
        true,
    ),
    field(
        8,
        "secPageTables",
        ("meminfo.SecPageTables", "SecPageTables"),
        0,
        false,
        true,
    ),
    // Every page of a vmalloc area: with CONFIG_VMAP_STACK the kernel stacks too.
    field(
        9,
        "vmalloc",
        ("meminfo.VmallocUsed", "VmallocUsed"),
        0,
        false,
        false,
    ),
    field(10, "percpu", ("meminfo.Percpu", "Percpu"), 0, false, true),
    field(11, "zswap", ("meminfo.Zswap", "Zswap"), 0, false, true),
    field(
        12,
        "hardwareCorrupted",
        ("meminfo.HardwareCorrupted", "HardwareCorrupted"),
        0,
        false,
        true,
    ),
];

/// The most a read takes in. /proc/meminfo is under 2 KiB (some 60 lines of under 30
/// bytes); past 1 MiB the file is not meminfo.
pub const MAX_MEMINFO_BYTES: u64 = 1024 * 1024;

fn open_source(path: Option<&Path>) -> Result<Box<dyn Reading>, SourceError> {
    let path = path.unwrap_or(Path::new(MEMINFO));
    // A FIFO or device named by mistake is refused at start-up; a missing file is left to
    // the read, which says it is missing.
    refuse_if_not_regular(path)?;
    Ok(Box::new(MeminfoFile {
        path: path.to_path_buf(),
        buf: Vec::with_capacity(4 * 1024),
    }))
}

/// A meminfo source: its path, opened again at every read, and a buffer reused across reads.
struct MeminfoFile {
    path: PathBuf,
    buf: Vec<u8>,
}

impl Reading for MeminfoFile {
    fn read(&mut self) -> Result<SourceData, SourceError> {
        let what = reread_capped(&self.path, MAX_MEMINFO_BYTES, &mut self.buf)?;
        Ok(SourceData {
            figures: parse(&self.buf, &what)?,
            ..SourceData::default()
        })
    }
}

/// The figure a /proc/meminfo line's name fills, if it is one of [`KINDS`]'.
fn figure_of(name: &[u8]) -> Option<&'static str> {
    KINDS
        .iter()
        .find(|k| k.from.as_bytes() == name)
        .map(|k| k.figure)
}

/// Parses meminfo text into the figures of [`KINDS`], in bytes (kB times 1024, saturating: a
/// MemGauge64 never wraps). `what` names the file in errors, which give the line and field.
pub fn parse(text: &[u8], what: &str) -> Result<Figures, SourceError> {
    let mut figures = Figures::new();
    for (i, line) in text.split(|&b| b == b'\n').enumerate() {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let name = &line[..colon];
        let Some(figure) = figure_of(name) else {
            continue;
        };
        let field = String::from_utf8_lossy(name);
        let bad = |message: String| SourceError::Malformed {
            what: what.into(),
            location: format!("line {}", i + 1),
            field: field.to_string(),
            message,
        };
        let mut words = line[colon + 1..]
            .split(u8::is_ascii_whitespace)
            .filter(|w| !w.is_empty());
        let value = words.next().ok_or_else(|| bad("missing value".into()))?;
        let kib: u64 = std::str::from_utf8(value)
            .ok()
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| {
                let shown = String::from_utf8_lossy(value);
                bad(format!("not a number: {shown:?}"))
            })?;
        match (words.next(), words.next()) {
            (Some(b"kB"), None) => {}
            (unit, extra) => {
                let shown = String::from_utf8_lossy(extra.or(unit).unwrap_or(b""));
                return Err(bad(format!(
                    "expected `kB` after the value, found {shown:?}"
                )));
            }
        }
        if figures
            .insert(figure.to_string(), kib.saturating_mul(1024))
            .is_some()
        {
            return Err(bad("listed twice".into()));
        }
    }
    Ok(figures)
}

#[cfg(test)]
#[path = "meminfo_tests.rs"]
mod tests;
