//! The ZFS ARC on Linux, from OpenZFS's kstat file /proc/spl/kstat/zfs/arcstats: its size
//! as a row of memKernelTable, and every statistic as a figure (`arcstats.` and its name),
//! which the ARC's own group (memstatArc, [`ARC_GROUP`]) serves by name.
//!
//! The file is kstat text (OpenZFS module/os/linux/spl/spl-kstat.c): a header line of the
//! kstat's own numbers, a `name type data` line, then one `name type value` line per
//! statistic. Type 4 is KSTAT_DATA_UINT64, the type of every ARC statistic; a row of another
//! type is not a figure and is passed over, and so is a name this reader has not met:
//! statistics come and go between OpenZFS releases (`p` became `pd` and `pm` in 2.2.0), and an
//! absent one is an absent figure, never 0.
//!
//! Without OpenZFS loaded the file does not exist: the source then gives no statistics and no
//! error (a host without ZFS has no ARC to report), and memArcStatistics reads 0; a file
//! named with `arcstats:PATH` is read the same way, so that a test or a replay can load and
//! unload ZFS by creating and removing it. The file is readable by everyone and appears when
//! the module is loaded, so it is opened again at every refresh.

use super::error::{refuse_if_not_regular, reread_capped};
use super::source_def::{
    FigureGroup, FigureObject, Fills, KernelKind, Opening, Os, PathRule, Reading, Role, SourceDef,
};
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
    saved_copy: false,
    groups: &[ARC_GROUP],
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

/// memstatArc: the ARC's own statistics, on Linux from this source and on FreeBSD from the
/// `freebsd` source's kstat.zfs.misc.arcstats sysctls, under the same figures.
///
/// The roles say how `dump` and the pollers' graphs show them. The parts ([`Role::Part`])
/// are the kinds of memory OpenZFS's `arc_space_consume()` (module/zfs/arc.c) adds to
/// `size`: data, metadata, headers, L2ARC headers, dbufs, dnodes and bonus buffers, which do
/// not overlap and add up to `size` but for `abd_chunk_waste_size` (not served). Anon, MRU
/// and MFU are the data and metadata buffers again, split by the list they are on: another
/// split ([`Role::OtherSplit`]), never stacked with the parts.
pub const ARC_GROUP: FigureGroup = FigureGroup {
    name: "memstatArc",
    title: "ZFS ARC",
    node: &[7],
    objects: &[
        FigureObject {
            sub: 1,
            name: "memArcStatistics",
            figure: "arcstats.statistics",
            role: Role::Count,
        },
        FigureObject {
            sub: 2,
            name: "memArcSize",
            figure: "arcstats.size",
            role: Role::Total,
        },
        FigureObject {
            sub: 3,
            name: "memArcTarget",
            figure: "arcstats.c",
            role: Role::Limit,
        },
        FigureObject {
            sub: 4,
            name: "memArcMin",
            figure: "arcstats.c_min",
            role: Role::Limit,
        },
        FigureObject {
            sub: 5,
            name: "memArcMax",
            figure: "arcstats.c_max",
            role: Role::Limit,
        },
        FigureObject {
            sub: 6,
            name: "memArcShrinkable",
            figure: "arcstats.shrinkable",
            role: Role::Level,
        },
        FigureObject {
            sub: 7,
            name: "memArcMruTarget",
            figure: "arcstats.p",
            role: Role::Level,
        },
        FigureObject {
            sub: 8,
            name: "memArcMruSize",
            figure: "arcstats.mru_size",
            role: Role::OtherSplit,
        },
        FigureObject {
            sub: 9,
            name: "memArcMfuSize",
            figure: "arcstats.mfu_size",
            role: Role::OtherSplit,
        },
        FigureObject {
            sub: 10,
            name: "memArcAnonSize",
            figure: "arcstats.anon_size",
            role: Role::OtherSplit,
        },
        FigureObject {
            sub: 11,
            name: "memArcDataSize",
            figure: "arcstats.data_size",
            role: Role::Part,
        },
        FigureObject {
            sub: 12,
            name: "memArcMetadataSize",
            figure: "arcstats.metadata_size",
            role: Role::Part,
        },
        FigureObject {
            sub: 13,
            name: "memArcHeaderSize",
            figure: "arcstats.hdr_size",
            role: Role::Part,
        },
        FigureObject {
            sub: 14,
            name: "memArcDbufSize",
            figure: "arcstats.dbuf_size",
            role: Role::Part,
        },
        FigureObject {
            sub: 15,
            name: "memArcDnodeSize",
            figure: "arcstats.dnode_size",
            role: Role::Part,
        },
        FigureObject {
            sub: 16,
            name: "memArcBonusSize",
            figure: "arcstats.bonus_size",
            role: Role::Part,
        },
        FigureObject {
            sub: 17,
            name: "memArcL2HeaderSize",
            figure: "arcstats.l2_hdr_size",
            role: Role::Part,
        },
        FigureObject {
            sub: 18,
            name: "memArcCompressedSize",
            figure: "arcstats.compressed_size",
            role: Role::Level,
        },
        FigureObject {
            sub: 19,
            name: "memArcUncompressedSize",
            figure: "arcstats.uncompressed_size",
            role: Role::Level,
        },
        FigureObject {
            sub: 20,
            name: "memArcHits",
            figure: "arcstats.hits",
            role: Role::Hits,
        },
        FigureObject {
            sub: 21,
            name: "memArcMisses",
            figure: "arcstats.misses",
            role: Role::Misses,
        },
        FigureObject {
            sub: 22,
            name: "memArcDemandDataHits",
            figure: "arcstats.demand_data_hits",
            role: Role::Counter,
        },
        FigureObject {
            sub: 23,
            name: "memArcDemandDataMisses",
            figure: "arcstats.demand_data_misses",
            role: Role::Counter,
        },
        FigureObject {
            sub: 24,
            name: "memArcDemandMetadataHits",
            figure: "arcstats.demand_metadata_hits",
            role: Role::Counter,
        },
        FigureObject {
            sub: 25,
            name: "memArcDemandMetadataMisses",
            figure: "arcstats.demand_metadata_misses",
            role: Role::Counter,
        },
        FigureObject {
            sub: 26,
            name: "memArcPrefetchDataHits",
            figure: "arcstats.prefetch_data_hits",
            role: Role::Counter,
        },
        FigureObject {
            sub: 27,
            name: "memArcPrefetchDataMisses",
            figure: "arcstats.prefetch_data_misses",
            role: Role::Counter,
        },
        FigureObject {
            sub: 28,
            name: "memArcPrefetchMetadataHits",
            figure: "arcstats.prefetch_metadata_hits",
            role: Role::Counter,
        },
        FigureObject {
            sub: 29,
            name: "memArcPrefetchMetadataMisses",
            figure: "arcstats.prefetch_metadata_misses",
            role: Role::Counter,
        },
        FigureObject {
            sub: 30,
            name: "memArcMemoryThrottles",
            figure: "arcstats.memory_throttle_count",
            role: Role::Counter,
        },
    ],
};

/// The figure of how many statistics the kernel reported: 0 without ZFS.
pub const STATISTICS: &str = "arcstats.statistics";
/// The figure of the part the kernel can take back: size − c_min, floored at 0.
pub const SHRINKABLE: &str = "arcstats.shrinkable";

/// The statistics the group serves, by their OpenZFS names (what FreeBSD's
/// `kstat.zfs.misc.arcstats.` sysctls are named after).
pub(crate) fn served_statistics() -> impl Iterator<Item = &'static str> {
    ARC_GROUP
        .objects
        .iter()
        .filter(|o| o.figure != STATISTICS && o.figure != SHRINKABLE)
        .filter_map(|o| o.figure.strip_prefix("arcstats."))
}

/// Adds the derived figures to `figures`, which hold the `arcstats.` statistics read (none
/// without ZFS): how many there are, and the shrinkable part.
pub(crate) fn derive(figures: &mut Figures) {
    let n = figures
        .keys()
        .filter(|k| k.starts_with("arcstats."))
        .count();
    let shrinkable = match (figures.get(SIZE), figures.get("arcstats.c_min")) {
        (Some(size), Some(min)) => Some(size.saturating_sub(*min)),
        _ => None,
    };
    figures.insert(STATISTICS.to_string(), n as u64);
    if let Some(v) = shrinkable {
        figures.insert(SHRINKABLE.to_string(), v);
    }
}

/// The most a read takes in. The file is some 150 lines of under 60 bytes; past 1 MiB it is
/// not arcstats.
pub const MAX_ARCSTATS_BYTES: u64 = 1024 * 1024;

/// kstat's KSTAT_DATA_UINT64.
const KSTAT_DATA_UINT64: &[u8] = b"4";

fn open_source(path: Option<&Path>) -> Result<Box<dyn Reading>, SourceError> {
    let path = path.unwrap_or(Path::new(ARCSTATS));
    // A FIFO or device named by mistake is refused at start-up; a missing file is left to
    // the read.
    refuse_if_not_regular(path)?;
    Ok(Box::new(ArcstatsFile {
        path: path.to_path_buf(),
        buf: Vec::with_capacity(8 * 1024),
    }))
}

/// An arcstats source: its path, opened again at every read, and a buffer reused across
/// reads.
struct ArcstatsFile {
    path: PathBuf,
    buf: Vec<u8>,
}

impl Reading for ArcstatsFile {
    fn read(&mut self) -> Result<SourceData, SourceError> {
        if !self.path.exists() {
            // OpenZFS is not loaded: no ARC, and memArcStatistics says so.
            let mut figures = Figures::new();
            derive(&mut figures);
            return Ok(SourceData {
                figures,
                ..SourceData::default()
            });
        }
        let what = reread_capped(&self.path, MAX_ARCSTATS_BYTES, &mut self.buf)?;
        Ok(SourceData {
            figures: parse(&self.buf, &what)?,
            ..SourceData::default()
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
    // Derived last: they win over a statistic of the same name, which OpenZFS has not.
    derive(&mut figures);
    Ok(figures)
}

#[cfg(test)]
#[path = "arcstats_tests.rs"]
mod tests;
