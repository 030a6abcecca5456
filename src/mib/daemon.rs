//! memstatDaemon: what the daemon says about itself and its sources, answered from a
//! [`DaemonStatus`] rather than from a snapshot (it describes the newest state, not the
//! snapshot a walk is pinned to, and reading it never reads a source).

use super::group::{Cell, Column, GroupDef, Shape, Suffix};
use super::{g64, Syntax, DAEMON};

/// memSourceStatus, and a source's memSrcStatus.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceStatus {
    /// The last refresh succeeded.
    Ok = 1,
    /// The last refresh failed; the last good snapshot is still served.
    Stale = 2,
    /// No snapshot could be read yet.
    Error = 3,
}

/// What the daemon's objects report: none of it is part of a snapshot.
#[derive(Clone, Debug)]
pub struct DaemonStatus {
    /// Hundredths of a second since the daemon started (wraps like TimeTicks).
    pub uptime_ticks: u32,
    /// The newest snapshot's time, generation and age; `None` before the first good read.
    pub snapshot_time_ms: Option<u64>,
    pub snapshot_generation: Option<u64>,
    pub snapshot_age_ms: Option<u64>,
    pub refreshes: u64,
    pub refresh_failures: u64,
    pub source_name: String,
    pub status: SourceStatus,
    pub last_error: String,
    /// memNotificationsSent and memNotificationsDropped.
    pub notifications_sent: u64,
    pub notifications_dropped: u64,
    /// memSourceTable: one line per source, in the order of the `source` setting.
    pub sources: Vec<SourceLine>,
}

/// One source's row of memSourceTable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceLine {
    pub name: String,
    /// ok: its last read succeeded; stale: it failed, and its last good rows are served;
    /// error: it has never been read.
    pub status: SourceStatus,
    /// Its last read's error; empty when that read succeeded.
    pub last_error: String,
    /// When it was last read successfully, in milliseconds since the Unix epoch.
    pub last_good_ms: Option<u64>,
    /// Its rows in the newest snapshot.
    pub types: Option<u64>,
}

type Scalar = Column<DaemonStatus>;

/// The scalars of memstatDaemon.
pub(crate) static SCALARS: GroupDef<DaemonStatus> = GroupDef {
    name: "memstatDaemon",
    node: &[DAEMON],
    shape: Shape::Scalars,
    columns: &[
        Scalar {
            sub: 1,
            name: "memDaemonUptime",
            syntax: Syntax::TimeTicks,
            value: |d, _| Some(Cell::TimeTicks(d.uptime_ticks)),
        },
        Scalar {
            sub: 2,
            name: "memSnapshotTime",
            syntax: Syntax::OctetString,
            value: |d, _| d.snapshot_time_ms.map(Cell::DateAndTime),
        },
        Scalar {
            sub: 3,
            name: "memSnapshotAge",
            syntax: Syntax::Unsigned32,
            value: |d, _| {
                d.snapshot_age_ms
                    .map(|a| Cell::Gauge32(a.min(u64::from(u32::MAX)) as u32))
            },
        },
        Scalar {
            sub: 4,
            name: "memSnapshotGeneration",
            syntax: Syntax::Counter64,
            value: |d, _| g64(d.snapshot_generation),
        },
        Scalar {
            sub: 5,
            name: "memRefreshCount",
            syntax: Syntax::Counter64,
            value: |d, _| Some(Cell::Counter64(d.refreshes)),
        },
        Scalar {
            sub: 6,
            name: "memRefreshFailures",
            syntax: Syntax::Counter64,
            value: |d, _| Some(Cell::Counter64(d.refresh_failures)),
        },
        Scalar {
            sub: 7,
            name: "memSourceName",
            syntax: Syntax::OctetString,
            value: |d, _| Some(Cell::Text(&d.source_name)),
        },
        Scalar {
            sub: 8,
            name: "memSourceStatus",
            syntax: Syntax::Integer,
            value: |d, _| Some(Cell::Integer(d.status as i32)),
        },
        Scalar {
            sub: 9,
            name: "memSourceLastError",
            syntax: Syntax::OctetString,
            value: |d, _| Some(Cell::Text(&d.last_error)),
        },
        Scalar {
            sub: 10,
            name: "memNotificationsSent",
            syntax: Syntax::Counter64,
            value: |d, _| Some(Cell::Counter64(d.notifications_sent)),
        },
        Scalar {
            sub: 11,
            name: "memNotificationsDropped",
            syntax: Syntax::Counter64,
            value: |d, _| Some(Cell::Counter64(d.notifications_dropped)),
        },
    ],
    rows: |_| vec![(Suffix::one(0), 0)],
};

type SourceColumn = Column<DaemonStatus>;

/// The source whose row has handle `i` (its position in `sources`).
fn line(d: &DaemonStatus, i: u64) -> &SourceLine {
    &d.sources[i as usize]
}

/// memSourceTable: a row per source, memSrcIndex 1.. in the order of the `source` setting.
pub(crate) static SOURCE_TABLE: GroupDef<DaemonStatus> = GroupDef {
    name: "memSourceTable",
    node: &[DAEMON, 12],
    shape: Shape::Table {
        entry: "memSourceEntry",
        index: &[(1, "memSrcIndex", Syntax::Unsigned32)],
    },
    columns: &[
        SourceColumn {
            sub: 2,
            name: "memSrcName",
            syntax: Syntax::OctetString,
            value: |d, i| Some(Cell::Text(&line(d, i).name)),
        },
        SourceColumn {
            sub: 3,
            name: "memSrcStatus",
            syntax: Syntax::Integer,
            value: |d, i| Some(Cell::Integer(line(d, i).status as i32)),
        },
        SourceColumn {
            sub: 4,
            name: "memSrcLastError",
            syntax: Syntax::OctetString,
            value: |d, i| Some(Cell::Text(&line(d, i).last_error)),
        },
        SourceColumn {
            sub: 5,
            name: "memSrcLastGoodRead",
            syntax: Syntax::OctetString,
            value: |d, i| line(d, i).last_good_ms.map(Cell::DateAndTime),
        },
        SourceColumn {
            sub: 6,
            name: "memSrcTypes",
            syntax: Syntax::Gauge32,
            value: |d, i| {
                line(d, i)
                    .types
                    .map(|n| Cell::Gauge32(n.min(u64::from(u32::MAX)) as u32))
            },
        },
    ],
    rows: |d| {
        (0..d.sources.len())
            .map(|i| (Suffix::one(i as u32 + 1), i as u64))
            .collect()
    },
};
