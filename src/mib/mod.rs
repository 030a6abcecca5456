//! MEMSTAT-MIB: its objects, each group of them one definition, and the views that answer
//! them.
//!
//! mibs/MEMSTAT-MIB.txt and this module describe the same objects; `tests/mib_validation.rs`
//! compares them (OID, base type, access) so that neither can drift. The object registry
//! ([`object_defs`]) is built from the group definitions, so a new group is in it, and in the
//! drift test, by being listed here.
//!
//! - [`group`]: what a group is (a table or a group of scalars) and the view that answers a
//!   list of them, knowing nothing of what they are about;
//! - [`types`]: the tables a snapshot fills, answered by a [`MibView`] built once per
//!   snapshot, off the request path;
//! - [`sites`]: memstatAllocinfo, the kernel's allocation call sites, over the same view;
//! - [`daemon`]: memstatDaemon, the daemon's scalars and its sources' table, answered by a
//!   [`StatusView`] from a [`DaemonStatus`];
//! - [`notify`]: the notifications and the objects only they carry;
//! - [`date_and_time`]: SNMPv2-TC DateAndTime.
//!
//! Every object of memstatDaemon sorts before every snapshot table cell, so a GetNext tries
//! the daemon's objects first (see [`status_may_follow`]).

mod daemon;
mod date_and_time;
mod figures;
mod group;
mod kernel;
mod notify;
mod sites;
mod types;

pub use daemon::{DaemonStatus, SourceLine, SourceStatus};
pub use date_and_time::date_and_time;
pub use group::Found;
use group::{served_columns, Group, ServedColumns, View};
use notify::NOTIFY_OBJECT_DEFS;
pub use notify::{notification_varbinds, Notification, NotificationType, NotifiedRow};
pub use sites::SiteRow;
pub use types::Row;
use types::SnapshotRows;

use crate::memstat::source::SOURCES;
use crate::memstat::{MemoryType, Snapshot};
use agentx_proto::oid::Oid;
use agentx_proto::value::Value;
use std::sync::{Arc, OnceLock};

/// The MIB's root, `memstatMIB`. A placeholder under enterprise 32473, which RFC 5612 reserves
/// for documentation; a packager with a real enterprise number changes this line and the
/// `memstatDocEnterprise` line of mibs/MEMSTAT-MIB.txt (see ARCHITECTURE.md).
pub const MEMSTAT_MIB_ROOT: &[u32] = &[1, 3, 6, 1, 4, 1, 32473, 1];

/// The base SMI type of an object, after resolving textual conventions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Syntax {
    Integer,
    OctetString,
    Unsigned32,
    Gauge32,
    Counter64,
    TimeTicks,
    Table,
    Entry,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    NotAccessible,
    /// Carried in notifications only: never served to a Get or GetNext.
    AccessibleForNotify,
    ReadOnly,
}

/// One OBJECT-TYPE of the MIB, as the drift test compares it with the MIB file.
#[derive(Clone, Debug)]
pub struct ObjectDef {
    pub name: &'static str,
    pub oid: Vec<u32>,
    pub syntax: Syntax,
    pub access: Access,
}

// Arcs below the root, and below memstatObjects.
const NOTIFICATIONS: u32 = 0;
const OBJECTS: u32 = 1;
const DAEMON: u32 = 1;
const NOTIFY_OBJECTS: u32 = 5;

/// The tables a snapshot's memory types fill, answered by a [`MibView`]. A new one is one
/// line here; a new group of a source's figures is in its source's definition instead.
static TYPE_GROUPS: &[&dyn Group<SnapshotRows>] = &[
    &types::TYPE_TABLE,
    &types::CPU_TABLE,
    &types::ALLOCATOR_TABLE,
    &kernel::KERNEL_TABLE,
    &sites::SCALARS,
    &sites::SITE_TABLE,
];

/// Every group a snapshot fills: the type tables, then every source's figure groups.
fn snapshot_groups() -> &'static [&'static dyn Group<SnapshotRows>] {
    static CELL: OnceLock<Vec<&'static dyn Group<SnapshotRows>>> = OnceLock::new();
    CELL.get_or_init(|| {
        let mut v = TYPE_GROUPS.to_vec();
        for def in SOURCES {
            for g in def.groups {
                v.push(&*Box::leak(Box::new(figures::FigureScalars(g))));
            }
        }
        v
    })
}

/// The groups of memstatDaemon, answered by a [`StatusView`].
static STATUS_GROUPS: &[&dyn Group<DaemonStatus>] = &[&daemon::SCALARS, &daemon::SOURCE_TABLE];

fn snapshot_columns() -> &'static ServedColumns {
    static CELL: OnceLock<ServedColumns> = OnceLock::new();
    CELL.get_or_init(|| served_columns(snapshot_groups()))
}

fn status_columns() -> &'static ServedColumns {
    static CELL: OnceLock<ServedColumns> = OnceLock::new();
    CELL.get_or_init(|| served_columns(STATUS_GROUPS))
}

fn g64(v: Option<u64>) -> Option<group::Cell<'static>> {
    v.map(group::Cell::Counter64)
}

/// TruthValue (SNMPv2-TC): true(1), false(2).
fn truth(b: bool) -> group::Cell<'static> {
    group::Cell::Integer(if b { 1 } else { 2 })
}

/// The SnmpAdminString value of `s`, for the rest of the crate.
pub(crate) use self::text as admin_string;

/// An SnmpAdminString: UTF-8 of at most 255 octets, cut on a character boundary.
pub(crate) fn text(s: &str) -> Value {
    let mut end = s.len().min(255);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    Value::OctetString(s.as_bytes()[..end].to_vec())
}

fn root(tail: &[u32]) -> Vec<u32> {
    let mut v = MEMSTAT_MIB_ROOT.to_vec();
    v.extend_from_slice(tail);
    v
}

/// Every OBJECT-TYPE of the MIB, in OID order: every group's, then the objects only
/// notifications carry.
pub fn object_defs() -> Vec<ObjectDef> {
    let mut v = Vec::new();
    for g in STATUS_GROUPS {
        g.objects(&mut v);
    }
    for g in snapshot_groups() {
        g.objects(&mut v);
    }
    for &(sub, name, syntax) in NOTIFY_OBJECT_DEFS {
        v.push(ObjectDef {
            name,
            oid: root(&[OBJECTS, NOTIFY_OBJECTS, sub]),
            syntax,
            access: Access::AccessibleForNotify,
        });
    }
    v.sort_by(|a, b| a.oid.cmp(&b.oid));
    v
}

/// The OID of the object `name` (no instance suffix), from the object registry.
pub(crate) fn object_oid(name: &str) -> Option<&'static [u32]> {
    static DEFS: OnceLock<Vec<ObjectDef>> = OnceLock::new();
    let defs = DEFS.get_or_init(object_defs);
    defs.iter()
        .find(|d| d.name == name)
        .map(|d| d.oid.as_slice())
}

/// True for OIDs under memstatDaemon, whose values come from the daemon's status rather than
/// from a snapshot.
pub fn is_status(oid: &[u32]) -> bool {
    oid.len() > MEMSTAT_MIB_ROOT.len() + 1
        && oid.starts_with(MEMSTAT_MIB_ROOT)
        && oid[MEMSTAT_MIB_ROOT.len()..MEMSTAT_MIB_ROOT.len() + 2] == [OBJECTS, DAEMON]
}

/// True when a GetNext from `start` may find an object of memstatDaemon: `start` sorts before
/// its end. Cheap, so that the daemon's status is worked out only when it can matter.
pub fn status_may_follow(start: &[u32]) -> bool {
    static END: OnceLock<Vec<u32>> = OnceLock::new();
    let end = END.get_or_init(|| root(&[OBJECTS, DAEMON + 1]));
    start < end.as_slice()
}

/// The daemon's objects at one moment, ready to answer Get and GetNext.
pub struct StatusView(View<DaemonStatus>);

impl StatusView {
    pub fn new(status: DaemonStatus) -> StatusView {
        StatusView(View::new(status, STATUS_GROUPS, status_columns()))
    }

    /// Answers a Get of an OID for which [`is_status`] holds.
    pub fn get(&self, oid: &[u32]) -> Value {
        self.0.get(oid)
    }

    /// The first instance of memstatDaemon after `start` (or at it, with `include`) and
    /// before `end` (exclusive; null is unbounded), or `None` when none is left there.
    pub fn get_next(&self, start: &[u32], include: bool, end: &[u32]) -> Option<(Oid, Value)> {
        self.0
            .get_next(start, include, end)
            .map(|f| (f.oid, f.value))
    }
}

/// A snapshot laid out as MEMSTAT-MIB's snapshot tables, ready to answer Get and GetNext.
pub struct MibView(View<SnapshotRows>);

impl MibView {
    /// Lays out `snapshot`. `indexes[i]` and `discontinuity[i]` belong to `snapshot.types[i]`;
    /// indexes must be unique.
    pub fn new(snapshot: Arc<Snapshot>, indexes: &[u32], discontinuity: &[u32]) -> MibView {
        MibView::with_sites(snapshot, indexes, discontinuity, Vec::new())
    }

    /// [`MibView::new`], with the call sites memAllocSiteTable serves (in any order; their
    /// positions are in `snapshot.profiling`'s sites, their indexes unique).
    pub fn with_sites(
        snapshot: Arc<Snapshot>,
        indexes: &[u32],
        discontinuity: &[u32],
        mut sites: Vec<SiteRow>,
    ) -> MibView {
        let n = snapshot.types.len();
        assert_eq!(indexes.len(), n, "one index per type");
        let mut rows: Vec<Row> = (0..n)
            .map(|i| Row {
                index: indexes[i],
                position: i as u32,
                discontinuity: discontinuity.get(i).copied().unwrap_or(0),
            })
            .collect();
        rows.sort_unstable_by_key(|r| r.index);
        let read = snapshot.profiling.as_ref().map_or(0, |p| p.sites.len());
        assert!(
            sites.iter().all(|s| (s.position as usize) < read),
            "a served site is one read"
        );
        sites.sort_unstable_by_key(|s| s.index);
        let ctx = SnapshotRows {
            snapshot,
            rows,
            sites,
            allocators: OnceLock::new(),
        };
        MibView(View::new(ctx, snapshot_groups(), snapshot_columns()))
    }

    /// A view with no rows, served before the first successful read.
    pub fn empty() -> MibView {
        let none = Snapshot::new(0, std::time::UNIX_EPOCH, String::new(), Vec::new());
        MibView::new(Arc::new(none), &[], &[])
    }

    pub fn snapshot(&self) -> &Arc<Snapshot> {
        &self.0.context().snapshot
    }

    /// The number of table instances (present cells) in the view.
    pub fn instance_count(&self) -> u32 {
        self.0.instance_count()
    }

    /// The row with this memTypeIndex.
    pub fn row(&self, index: u32) -> Option<&Row> {
        let rows = &self.0.context().rows;
        rows.binary_search_by_key(&index, |r| r.index)
            .ok()
            .map(|p| &rows[p])
    }

    /// The served call sites in index order, with their figures.
    pub fn sites(&self) -> impl Iterator<Item = (&SiteRow, &crate::memstat::allocinfo::Site)> {
        let ctx = self.0.context();
        let read = ctx.snapshot.profiling.as_ref().map(|p| &p.sites[..]);
        let read = read.unwrap_or_default();
        ctx.sites
            .iter()
            .map(move |r| (r, &read[r.position as usize]))
    }

    /// Rows in index order, with their memory type.
    pub fn rows(&self) -> impl Iterator<Item = (&Row, &MemoryType)> {
        let ctx = self.0.context();
        (0..ctx.rows.len() as u32).map(move |p| ctx.ty(p))
    }

    /// Answers a Get of one table OID: the value, noSuchObject (no such object in the
    /// tables) or noSuchInstance (the object exists but not this instance, or its cell is
    /// absent). The daemon's objects are answered by a [`StatusView`].
    pub fn get(&self, oid: &[u32]) -> Value {
        self.0.get(oid)
    }

    /// Answers a GetNext over the tables: the first present instance after `start` (or at
    /// it, with `include`) and before `end` (exclusive; a null `end` is unbounded), or
    /// `None` for endOfMibView.
    pub fn get_next(&self, start: &[u32], include: bool, end: &[u32]) -> Option<Found> {
        self.0.get_next(start, include, end)
    }

    /// [`get_next`](Self::get_next) from the OID of `instance`, a present cell of this
    /// view (as [`instance_of`](Self::instance_of) or a [`Found`] gave it), without include:
    /// the same answer, found without a search.
    pub fn next_after(&self, instance: u32, end: &[u32]) -> Option<Found> {
        self.0.next_after(instance, end)
    }

    /// The instance number of `oid` when it names a present cell of this view.
    pub fn instance_of(&self, oid: &[u32]) -> Option<u32> {
        self.0.instance_of(oid)
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
