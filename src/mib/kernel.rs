//! memKernelTable: where the kernel's memory goes, a row per kind of kernel memory. The kinds
//! are the sources' (each source's definition lists the kinds its figures fill, see
//! `memstat::source_def::KernelKind`); this table serves every kind whose figure the snapshot
//! holds, whichever source gave it (a fixture may replay another host's).

use super::group::{Cell, Column, GroupDef, Shape, Suffix};
use super::types::SnapshotRows;
use super::{truth, Syntax};
use crate::memstat::source::{KernelKind, SOURCES};
use std::sync::OnceLock;

/// Every source's kinds, in the order of the registry: a row's handle is its position here.
fn kinds() -> &'static [&'static KernelKind] {
    static CELL: OnceLock<Vec<&'static KernelKind>> = OnceLock::new();
    CELL.get_or_init(|| SOURCES.iter().flat_map(|d| d.kinds.iter()).collect())
}

fn kind(h: u64) -> &'static KernelKind {
    kinds()[h as usize]
}

type KernelColumn = Column<SnapshotRows>;

/// memKernelTable (memKernelIndex, column 1, is not-accessible), indexed by MemKernelKind.
pub(crate) static KERNEL_TABLE: GroupDef<SnapshotRows> = GroupDef {
    name: "memKernelTable",
    node: &[6],
    shape: Shape::Table {
        entry: "memKernelEntry",
        index: &[(1, "memKernelIndex", Syntax::Integer)],
    },
    columns: &[
        KernelColumn {
            sub: 2,
            name: "memKernelName",
            syntax: Syntax::OctetString,
            value: |_, h| Some(Cell::Text(kind(h).name)),
        },
        KernelColumn {
            sub: 3,
            name: "memKernelBytes",
            syntax: Syntax::Counter64,
            value: |s, h| {
                s.snapshot
                    .figures
                    .get(kind(h).figure)
                    .copied()
                    .map(Cell::Counter64)
            },
        },
        KernelColumn {
            sub: 4,
            name: "memKernelParent",
            syntax: Syntax::Unsigned32,
            value: |_, h| Some(Cell::Gauge32(kind(h).parent)),
        },
        KernelColumn {
            sub: 5,
            name: "memKernelReclaimable",
            syntax: Syntax::Integer,
            value: |_, h| Some(truth(kind(h).reclaimable)),
        },
        KernelColumn {
            sub: 6,
            name: "memKernelStackable",
            syntax: Syntax::Integer,
            value: |_, h| Some(truth(kind(h).stackable)),
        },
    ],
    rows: |s| {
        kinds()
            .iter()
            .enumerate()
            .filter(|(_, k)| s.snapshot.figures.contains_key(k.figure))
            .map(|(h, k)| (Suffix::one(k.index), h as u64))
            .collect()
    },
};
