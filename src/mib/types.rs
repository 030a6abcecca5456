//! The tables a snapshot fills: memTypeTable, memCpuTable and memAllocatorTable, over a
//! snapshot laid out with its rows' stable indexes ([`SnapshotRows`]).

use super::group::{Cell, Column, GroupDef, Shape, Suffix};
use super::{g64, Syntax};
use crate::memstat::{Allocator, MemoryType, PerCpu, Snapshot};
use std::sync::{Arc, OnceLock};

/// Where a served row stands: its stable index and its discontinuity time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    pub index: u32,
    /// Position in `Snapshot::types`.
    pub position: u32,
    /// memTypeDiscontinuityTime, in the master's sysUpTime ticks.
    pub discontinuity: u32,
}

/// A snapshot with its rows, sorted by memTypeIndex: what the snapshot's tables are filled
/// from.
pub(crate) struct SnapshotRows {
    pub(crate) snapshot: Arc<Snapshot>,
    pub(crate) rows: Vec<Row>,
    /// memAllocSiteTable's rows, sorted by memAllocSiteIndex.
    pub(crate) sites: Vec<super::SiteRow>,
    /// memAllocatorTable's rows, one per allocator of `Allocator::ALL`: worked out once,
    /// when the view is laid out, and read by the table's handles.
    pub(crate) allocators: OnceLock<Vec<AllocSummary>>,
}

impl SnapshotRows {
    /// The row at `p` (in index order) and its memory type.
    pub(crate) fn ty(&self, p: u32) -> (&Row, &MemoryType) {
        let r = &self.rows[p as usize];
        (r, &self.snapshot.types[r.position as usize])
    }
}

/// memTypeTable's columns. A row's handle is its position in [`SnapshotRows::rows`].
type TypeColumn = Column<SnapshotRows>;

fn t(s: &SnapshotRows, p: u64) -> &MemoryType {
    s.ty(p as u32).1
}

fn mask(m: Option<u64>) -> Option<Cell<'static>> {
    m.map(Cell::Octets64)
}

/// memTypeTable (memTypeIndex, column 1, is not-accessible and has no cells).
pub(crate) static TYPE_TABLE: GroupDef<SnapshotRows> = GroupDef {
    name: "memTypeTable",
    node: &[2],
    shape: Shape::Table {
        entry: "memTypeEntry",
        index: &[(1, "memTypeIndex", Syntax::Unsigned32)],
    },
    columns: &[
        TypeColumn {
            sub: 2,
            name: "memTypeName",
            syntax: Syntax::OctetString,
            value: |s, p| Some(Cell::Text(&t(s, p).name)),
        },
        TypeColumn {
            sub: 3,
            name: "memTypeAllocator",
            syntax: Syntax::Integer,
            value: |s, p| Some(Cell::Integer(t(s, p).allocator.number() as i32)),
        },
        TypeColumn {
            sub: 4,
            name: "memTypeOrdinal",
            syntax: Syntax::Unsigned32,
            value: |s, p| Some(Cell::Gauge32(t(s, p).ordinal)),
        },
        TypeColumn {
            sub: 5,
            name: "memTypeSize",
            syntax: Syntax::Counter64,
            value: |s, p| g64(t(s, p).size),
        },
        TypeColumn {
            sub: 6,
            name: "memTypeRealSize",
            syntax: Syntax::Counter64,
            value: |s, p| g64(t(s, p).real_size),
        },
        TypeColumn {
            sub: 7,
            name: "memTypeCountLimit",
            syntax: Syntax::Counter64,
            value: |s, p| g64(t(s, p).count_limit),
        },
        TypeColumn {
            sub: 8,
            name: "memTypeBytesLimit",
            syntax: Syntax::Counter64,
            value: |s, p| g64(t(s, p).bytes_limit),
        },
        TypeColumn {
            sub: 9,
            name: "memTypeInUseCount",
            syntax: Syntax::Counter64,
            value: |s, p| g64(t(s, p).in_use_count),
        },
        TypeColumn {
            sub: 10,
            name: "memTypeInUseBytes",
            syntax: Syntax::Counter64,
            value: |s, p| g64(t(s, p).in_use_bytes),
        },
        TypeColumn {
            sub: 11,
            name: "memTypeFreeCount",
            syntax: Syntax::Counter64,
            value: |s, p| g64(t(s, p).free_count),
        },
        TypeColumn {
            sub: 12,
            name: "memTypeTotalCount",
            syntax: Syntax::Counter64,
            value: |s, p| g64(t(s, p).total_count),
        },
        TypeColumn {
            sub: 13,
            name: "memTypeAllocs",
            syntax: Syntax::Counter64,
            value: |s, p| g64(t(s, p).allocs),
        },
        TypeColumn {
            sub: 14,
            name: "memTypeFrees",
            syntax: Syntax::Counter64,
            value: |s, p| g64(t(s, p).frees),
        },
        TypeColumn {
            sub: 15,
            name: "memTypeBytesAllocated",
            syntax: Syntax::Counter64,
            value: |s, p| g64(t(s, p).bytes_allocated),
        },
        TypeColumn {
            sub: 16,
            name: "memTypeBytesFreed",
            syntax: Syntax::Counter64,
            value: |s, p| g64(t(s, p).bytes_freed),
        },
        TypeColumn {
            sub: 17,
            name: "memTypeFailures",
            syntax: Syntax::Counter64,
            value: |s, p| g64(t(s, p).failures),
        },
        TypeColumn {
            sub: 18,
            name: "memTypeSleeps",
            syntax: Syntax::Counter64,
            value: |s, p| g64(t(s, p).sleeps),
        },
        TypeColumn {
            sub: 19,
            name: "memTypeCrossDomainFrees",
            syntax: Syntax::Counter64,
            value: |s, p| g64(t(s, p).xdomain),
        },
        TypeColumn {
            sub: 20,
            name: "memTypeZoneFree",
            syntax: Syntax::Counter64,
            value: |s, p| g64(t(s, p).zone_free),
        },
        TypeColumn {
            sub: 21,
            name: "memTypeKegFree",
            syntax: Syntax::Counter64,
            value: |s, p| g64(t(s, p).keg_free),
        },
        TypeColumn {
            sub: 22,
            name: "memTypeSizeMask",
            syntax: Syntax::OctetString,
            value: |s, p| mask(t(s, p).size_mask),
        },
        TypeColumn {
            sub: 23,
            name: "memTypeSlabBytes",
            syntax: Syntax::Counter64,
            value: |s, p| g64(t(s, p).slab_bytes),
        },
        TypeColumn {
            sub: 24,
            name: "memTypeDiscontinuityTime",
            syntax: Syntax::TimeTicks,
            value: |s, p| Some(Cell::TimeTicks(s.ty(p as u32).0.discontinuity)),
        },
    ],
    rows: |s| {
        (0..s.rows.len() as u32)
            .map(|p| (Suffix::one(s.rows[p as usize].index), u64::from(p)))
            .collect()
    },
};

/// memCpuTable's columns. A row's handle is the type's position in [`SnapshotRows::rows`]
/// (high half) and the CPU's in its `per_cpu` (low half).
type CpuColumn = Column<SnapshotRows>;

fn c(s: &SnapshotRows, h: u64) -> &PerCpu {
    &s.ty((h >> 32) as u32).1.per_cpu[h as u32 as usize]
}

/// memCpuTable (memCpuIndex, column 1, is not-accessible), indexed by memTypeIndex and CPU.
pub(crate) static CPU_TABLE: GroupDef<SnapshotRows> = GroupDef {
    name: "memCpuTable",
    node: &[3],
    shape: Shape::Table {
        entry: "memCpuEntry",
        index: &[(1, "memCpuIndex", Syntax::Unsigned32)],
    },
    columns: &[
        CpuColumn {
            sub: 2,
            name: "memCpuAllocs",
            syntax: Syntax::Counter64,
            value: |s, r| g64(c(s, r).allocs),
        },
        CpuColumn {
            sub: 3,
            name: "memCpuFrees",
            syntax: Syntax::Counter64,
            value: |s, r| g64(c(s, r).frees),
        },
        CpuColumn {
            sub: 4,
            name: "memCpuCacheFree",
            syntax: Syntax::Counter64,
            value: |s, r| g64(c(s, r).cache_free),
        },
        CpuColumn {
            sub: 5,
            name: "memCpuBytesAllocated",
            syntax: Syntax::Counter64,
            value: |s, r| g64(c(s, r).bytes_allocated),
        },
        CpuColumn {
            sub: 6,
            name: "memCpuBytesFreed",
            syntax: Syntax::Counter64,
            value: |s, r| g64(c(s, r).bytes_freed),
        },
        CpuColumn {
            sub: 7,
            name: "memCpuSizeMask",
            syntax: Syntax::OctetString,
            value: |s, r| mask(c(s, r).size_mask),
        },
    ],
    rows: |s| {
        let mut v = Vec::new();
        for (p, r) in s.rows.iter().enumerate() {
            let t = &s.snapshot.types[r.position as usize];
            for (slot, pc) in t.per_cpu.iter().enumerate() {
                v.push((Suffix::two(r.index, pc.cpu), (p as u64) << 32 | slot as u64));
            }
        }
        v
    },
};

/// A row of memAllocatorTable: one allocator's totals.
pub(crate) type AllocSummary = crate::memstat::AllocatorTotals;

/// memAllocatorTable's columns. A row's handle is its allocator's position in
/// `Allocator::ALL` and in [`SnapshotRows::allocators`].
type AllocColumn = Column<SnapshotRows>;

fn a(s: &SnapshotRows, h: u64) -> Option<&AllocSummary> {
    s.allocators.get()?.get(h as usize)
}

/// memAllocatorTable (memAllocatorType, column 1, is not-accessible): a row per allocator
/// that has types.
pub(crate) static ALLOCATOR_TABLE: GroupDef<SnapshotRows> = GroupDef {
    name: "memAllocatorTable",
    node: &[4],
    shape: Shape::Table {
        entry: "memAllocatorEntry",
        index: &[(1, "memAllocatorType", Syntax::Integer)],
    },
    columns: &[
        AllocColumn {
            sub: 2,
            name: "memAllocatorTypeCount",
            syntax: Syntax::Gauge32,
            value: |s, h| Some(Cell::Gauge32(a(s, h)?.types.min(u64::from(u32::MAX)) as u32)),
        },
        AllocColumn {
            sub: 3,
            name: "memAllocatorInUseBytes",
            syntax: Syntax::Counter64,
            value: |s, h| g64(a(s, h)?.in_use_bytes),
        },
        AllocColumn {
            sub: 4,
            name: "memAllocatorFreeBytes",
            syntax: Syntax::Counter64,
            value: |s, h| g64(a(s, h)?.free_bytes),
        },
        AllocColumn {
            sub: 5,
            name: "memAllocatorFailures",
            syntax: Syntax::Counter64,
            value: |s, h| g64(a(s, h)?.failures),
        },
    ],
    rows: |s| {
        let sums = s.allocators.get_or_init(|| s.snapshot.allocator_totals());
        // A row per allocator that has types.
        Allocator::ALL
            .into_iter()
            .zip(sums)
            .enumerate()
            .filter(|(_, (_, sum))| sum.types > 0)
            .map(|(h, (a, _))| (Suffix::one(a.number()), h as u64))
            .collect()
    },
};
