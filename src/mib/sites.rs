//! memstatAllocinfo: the kernel's allocation call sites (Linux allocation profiling, from the
//! `allocinfo` source), as three scalars and memAllocSiteTable. Which sites the table serves,
//! and their stable indexes, are the agent's choice (`agent::sites`); the view is given them
//! as [`SiteRow`]s.

use super::group::{Cell, Column, GroupDef, Shape, Suffix};
use super::types::SnapshotRows;
use super::{g64, truth, Syntax};
use crate::memstat::allocinfo::Site;

/// A served call site: its stable memAllocSiteIndex, where it is in the snapshot's sites, and
/// its discontinuity time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SiteRow {
    pub index: u32,
    /// Position in the snapshot's `profiling.sites`.
    pub position: u32,
    /// memAllocSiteDiscontinuityTime, in the master's sysUpTime ticks.
    pub discontinuity: u32,
}

/// The node of memstatAllocinfo, below memstatObjects.
const NODE: u32 = 8;

/// The served site at position `p` of the view's site rows (in index order).
fn site(s: &SnapshotRows, p: u64) -> (&SiteRow, &Site) {
    let row = &s.sites[p as usize];
    let sites = s.snapshot.profiling.as_ref().map(|pr| &pr.sites[..]);
    (row, &sites.unwrap_or_default()[row.position as usize])
}

type SiteColumn = Column<SnapshotRows>;

/// The scalars: absent while no source reads allocation profiling.
pub(crate) static SCALARS: GroupDef<SnapshotRows> = GroupDef {
    name: "memstatAllocinfo",
    node: &[NODE],
    shape: Shape::Scalars,
    columns: &[
        SiteColumn {
            sub: 1,
            name: "memAllocinfoState",
            syntax: Syntax::Integer,
            value: |s, _| {
                let p = s.snapshot.profiling.as_ref()?;
                Some(Cell::Integer(p.state.number()))
            },
        },
        SiteColumn {
            sub: 2,
            name: "memAllocSitesRead",
            syntax: Syntax::Gauge32,
            value: |s, _| {
                let p = s.snapshot.profiling.as_ref()?;
                Some(Cell::Gauge32(
                    u32::try_from(p.sites.len()).unwrap_or(u32::MAX),
                ))
            },
        },
        SiteColumn {
            sub: 3,
            name: "memAllocSitesServed",
            syntax: Syntax::Gauge32,
            value: |s, _| {
                s.snapshot.profiling.as_ref()?;
                Some(Cell::Gauge32(
                    u32::try_from(s.sites.len()).unwrap_or(u32::MAX),
                ))
            },
        },
    ],
    rows: |s| match s.snapshot.profiling {
        Some(_) => vec![(Suffix::one(0), 0)],
        None => Vec::new(),
    },
};

/// memAllocSiteTable (memAllocSiteIndex, column 1, is not-accessible). A row's handle is its
/// position in the view's site rows.
pub(crate) static SITE_TABLE: GroupDef<SnapshotRows> = GroupDef {
    name: "memAllocSiteTable",
    node: &[NODE, 4],
    shape: Shape::Table {
        entry: "memAllocSiteEntry",
        index: &[(1, "memAllocSiteIndex", Syntax::Unsigned32)],
    },
    columns: &[
        SiteColumn {
            sub: 2,
            name: "memAllocSiteFile",
            syntax: Syntax::OctetString,
            value: |s, p| Some(Cell::Text(&site(s, p).1.file)),
        },
        SiteColumn {
            sub: 3,
            name: "memAllocSiteLine",
            syntax: Syntax::Unsigned32,
            value: |s, p| Some(Cell::Gauge32(site(s, p).1.line)),
        },
        SiteColumn {
            sub: 4,
            name: "memAllocSiteFunction",
            syntax: Syntax::OctetString,
            value: |s, p| Some(Cell::Text(&site(s, p).1.function)),
        },
        SiteColumn {
            sub: 5,
            name: "memAllocSiteModule",
            syntax: Syntax::OctetString,
            value: |s, p| Some(Cell::Text(&site(s, p).1.module)),
        },
        SiteColumn {
            sub: 6,
            name: "memAllocSiteBytes",
            syntax: Syntax::Counter64,
            value: |s, p| g64(Some(site(s, p).1.bytes)),
        },
        SiteColumn {
            sub: 7,
            name: "memAllocSiteCalls",
            syntax: Syntax::Counter64,
            value: |s, p| g64(Some(site(s, p).1.calls)),
        },
        SiteColumn {
            sub: 8,
            name: "memAllocSiteAccurate",
            syntax: Syntax::Integer,
            value: |s, p| Some(truth(site(s, p).1.accurate)),
        },
        SiteColumn {
            sub: 9,
            name: "memAllocSiteDiscontinuityTime",
            syntax: Syntax::TimeTicks,
            value: |s, p| Some(Cell::TimeTicks(site(s, p).0.discontinuity)),
        },
    ],
    rows: |s| {
        s.sites
            .iter()
            .enumerate()
            .map(|(p, r)| (Suffix::one(r.index), p as u64))
            .collect()
    },
};
