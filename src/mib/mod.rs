//! The MEMSTAT-MIB layout: from a snapshot to ordered SNMP objects.
//!
//! mibs/MEMSTAT-MIB.txt and this module describe the same objects; `tests/mib_validation.rs`
//! compares them (OID, base type, access) so that neither can drift.
//!
//! A [`MibView`] is built once per snapshot, off the request path. It sorts the rows by
//! memTypeIndex and, per column, lists the rows whose cell is present, so that GetNext is a
//! binary search whatever the table size and absent cells are skipped without scanning.
//!
//! The daemon's scalars (memstatDaemon) are not part of a snapshot: [`scalar_get`] and
//! [`scalar_next`] answer them from a [`DaemonStatus`], and a [`MibView`] answers the tables.
//! Every scalar sorts before every table cell, so a GetNext tries the scalars first.

mod notify;

use notify::NOTIFY_OBJECT_DEFS;
pub use notify::{
    notification_varbinds, Notification, NotificationType, NotifiedRow, SNMP_TRAP_OID_0,
};

use crate::memstat::{Allocator, MemoryType, PerCpu, Snapshot};
use crate::oid::Oid;
use crate::value::Value;
use std::cmp::Ordering;
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

/// memSourceStatus.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceStatus {
    /// The last refresh succeeded.
    Ok = 1,
    /// The last refresh failed; the last good snapshot is still served.
    Stale = 2,
    /// No snapshot could be read yet.
    Error = 3,
}

/// What the scalars report that is not part of a snapshot.
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

// Arcs below the root.
const NOTIFICATIONS: u32 = 0;
const OBJECTS: u32 = 1;
const DAEMON: u32 = 1;
const TYPE_TABLE: u32 = 2;
const CPU_TABLE: u32 = 3;
const ALLOC_TABLE: u32 = 4;
const NOTIFY_OBJECTS: u32 = 5;

type ScalarFn = fn(&DaemonStatus) -> Option<Value>;
type TypeFn = fn(&MemoryType, &Row) -> Option<Value>;
type CpuFn = fn(&PerCpu) -> Option<Value>;
type AllocFn = fn(&AllocSummary) -> Option<Value>;

fn g64(v: Option<u64>) -> Option<Value> {
    v.map(Value::Counter64)
}

/// An SnmpAdminString: UTF-8 of at most 255 octets, cut on a character boundary.
fn text(s: &str) -> Value {
    let mut end = s.len().min(255);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    Value::OctetString(s.as_bytes()[..end].to_vec())
}

const SCALARS: &[(u32, &str, Syntax, ScalarFn)] = &[
    (1, "memDaemonUptime", Syntax::TimeTicks, |d| {
        Some(Value::TimeTicks(d.uptime_ticks))
    }),
    (2, "memSnapshotTime", Syntax::OctetString, |d| {
        d.snapshot_time_ms
            .map(|ms| Value::OctetString(date_and_time(ms).to_vec()))
    }),
    (3, "memSnapshotAge", Syntax::Unsigned32, |d| {
        d.snapshot_age_ms
            .map(|a| Value::Gauge32(a.min(u32::MAX as u64) as u32))
    }),
    (4, "memSnapshotGeneration", Syntax::Counter64, |d| {
        g64(d.snapshot_generation)
    }),
    (5, "memRefreshCount", Syntax::Counter64, |d| {
        Some(Value::Counter64(d.refreshes))
    }),
    (6, "memRefreshFailures", Syntax::Counter64, |d| {
        Some(Value::Counter64(d.refresh_failures))
    }),
    (7, "memSourceName", Syntax::OctetString, |d| {
        Some(text(&d.source_name))
    }),
    (8, "memSourceStatus", Syntax::Integer, |d| {
        Some(Value::Integer(d.status as i32))
    }),
    (9, "memSourceLastError", Syntax::OctetString, |d| {
        Some(text(&d.last_error))
    }),
    (10, "memNotificationsSent", Syntax::Counter64, |d| {
        Some(Value::Counter64(d.notifications_sent))
    }),
    (11, "memNotificationsDropped", Syntax::Counter64, |d| {
        Some(Value::Counter64(d.notifications_dropped))
    }),
];

/// memTypeTable columns (memTypeIndex, column 1, is not-accessible and has no cells).
const TYPE_COLUMNS: &[(u32, &str, Syntax, TypeFn)] = &[
    (2, "memTypeName", Syntax::OctetString, |t, _| {
        Some(text(&t.name))
    }),
    (3, "memTypeAllocator", Syntax::Integer, |t, _| {
        Some(Value::Integer(t.allocator.number() as i32))
    }),
    (4, "memTypeOrdinal", Syntax::Unsigned32, |t, _| {
        Some(Value::Gauge32(t.ordinal))
    }),
    (5, "memTypeSize", Syntax::Counter64, |t, _| g64(t.size)),
    (6, "memTypeRealSize", Syntax::Counter64, |t, _| {
        g64(t.real_size)
    }),
    (7, "memTypeCountLimit", Syntax::Counter64, |t, _| {
        g64(t.count_limit)
    }),
    (8, "memTypeBytesLimit", Syntax::Counter64, |t, _| {
        g64(t.bytes_limit)
    }),
    (9, "memTypeInUseCount", Syntax::Counter64, |t, _| {
        g64(t.in_use_count)
    }),
    (10, "memTypeInUseBytes", Syntax::Counter64, |t, _| {
        g64(t.in_use_bytes)
    }),
    (11, "memTypeFreeCount", Syntax::Counter64, |t, _| {
        g64(t.free_count)
    }),
    (12, "memTypeTotalCount", Syntax::Counter64, |t, _| {
        g64(t.total_count)
    }),
    (13, "memTypeAllocs", Syntax::Counter64, |t, _| g64(t.allocs)),
    (14, "memTypeFrees", Syntax::Counter64, |t, _| g64(t.frees)),
    (15, "memTypeBytesAllocated", Syntax::Counter64, |t, _| {
        g64(t.bytes_allocated)
    }),
    (16, "memTypeBytesFreed", Syntax::Counter64, |t, _| {
        g64(t.bytes_freed)
    }),
    (17, "memTypeFailures", Syntax::Counter64, |t, _| {
        g64(t.failures)
    }),
    (18, "memTypeSleeps", Syntax::Counter64, |t, _| g64(t.sleeps)),
    (19, "memTypeCrossDomainFrees", Syntax::Counter64, |t, _| {
        g64(t.xdomain)
    }),
    (20, "memTypeZoneFree", Syntax::Counter64, |t, _| {
        g64(t.zone_free)
    }),
    (21, "memTypeKegFree", Syntax::Counter64, |t, _| {
        g64(t.keg_free)
    }),
    (22, "memTypeSizeMask", Syntax::OctetString, |t, _| {
        t.size_mask
            .map(|m| Value::OctetString(m.to_be_bytes().to_vec()))
    }),
    (23, "memTypeSlabBytes", Syntax::Counter64, |t, _| {
        g64(t.slab_bytes)
    }),
    (24, "memTypeDiscontinuityTime", Syntax::TimeTicks, |_, r| {
        Some(Value::TimeTicks(r.discontinuity))
    }),
];

/// memCpuTable columns (memCpuIndex, column 1, is not-accessible).
const CPU_COLUMNS: &[(u32, &str, Syntax, CpuFn)] = &[
    (2, "memCpuAllocs", Syntax::Counter64, |c| g64(c.allocs)),
    (3, "memCpuFrees", Syntax::Counter64, |c| g64(c.frees)),
    (4, "memCpuCacheFree", Syntax::Counter64, |c| {
        g64(c.cache_free)
    }),
    (5, "memCpuBytesAllocated", Syntax::Counter64, |c| {
        g64(c.bytes_allocated)
    }),
    (6, "memCpuBytesFreed", Syntax::Counter64, |c| {
        g64(c.bytes_freed)
    }),
    (7, "memCpuSizeMask", Syntax::OctetString, |c| {
        c.size_mask
            .map(|m| Value::OctetString(m.to_be_bytes().to_vec()))
    }),
];

/// memAllocatorTable columns (memAllocatorType, column 1, is not-accessible).
const ALLOC_COLUMNS: &[(u32, &str, Syntax, AllocFn)] = &[
    (2, "memAllocatorTypeCount", Syntax::Gauge32, |a| {
        Some(Value::Gauge32(a.types.min(u32::MAX as u64) as u32))
    }),
    (3, "memAllocatorInUseBytes", Syntax::Counter64, |a| {
        g64(a.in_use_bytes)
    }),
    (4, "memAllocatorFreeBytes", Syntax::Counter64, |a| {
        g64(a.free_bytes)
    }),
    (5, "memAllocatorFailures", Syntax::Counter64, |a| {
        g64(a.failures)
    }),
];

fn root(tail: &[u32]) -> Vec<u32> {
    let mut v = MEMSTAT_MIB_ROOT.to_vec();
    v.extend_from_slice(tail);
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

/// Every OBJECT-TYPE of the MIB, in OID order.
pub fn object_defs() -> Vec<ObjectDef> {
    use Access::*;
    let mut v = Vec::new();
    let def = |name, tail: &[u32], syntax, access| ObjectDef {
        name,
        oid: root(tail),
        syntax,
        access,
    };
    for &(sub, name, syntax, _) in SCALARS {
        v.push(def(name, &[OBJECTS, DAEMON, sub], syntax, ReadOnly));
    }
    let t = [OBJECTS, TYPE_TABLE];
    v.push(def("memTypeTable", &t, Syntax::Table, NotAccessible));
    v.push(def(
        "memTypeEntry",
        &[OBJECTS, TYPE_TABLE, 1],
        Syntax::Entry,
        NotAccessible,
    ));
    v.push(def(
        "memTypeIndex",
        &[OBJECTS, TYPE_TABLE, 1, 1],
        Syntax::Unsigned32,
        NotAccessible,
    ));
    for &(sub, name, syntax, _) in TYPE_COLUMNS {
        v.push(def(name, &[OBJECTS, TYPE_TABLE, 1, sub], syntax, ReadOnly));
    }
    v.push(def(
        "memCpuTable",
        &[OBJECTS, CPU_TABLE],
        Syntax::Table,
        NotAccessible,
    ));
    v.push(def(
        "memCpuEntry",
        &[OBJECTS, CPU_TABLE, 1],
        Syntax::Entry,
        NotAccessible,
    ));
    v.push(def(
        "memCpuIndex",
        &[OBJECTS, CPU_TABLE, 1, 1],
        Syntax::Unsigned32,
        NotAccessible,
    ));
    for &(sub, name, syntax, _) in CPU_COLUMNS {
        v.push(def(name, &[OBJECTS, CPU_TABLE, 1, sub], syntax, ReadOnly));
    }
    v.push(def(
        "memAllocatorTable",
        &[OBJECTS, ALLOC_TABLE],
        Syntax::Table,
        NotAccessible,
    ));
    v.push(def(
        "memAllocatorEntry",
        &[OBJECTS, ALLOC_TABLE, 1],
        Syntax::Entry,
        NotAccessible,
    ));
    v.push(def(
        "memAllocatorType",
        &[OBJECTS, ALLOC_TABLE, 1, 1],
        Syntax::Integer,
        NotAccessible,
    ));
    for &(sub, name, syntax, _) in ALLOC_COLUMNS {
        v.push(def(name, &[OBJECTS, ALLOC_TABLE, 1, sub], syntax, ReadOnly));
    }
    for &(sub, name, syntax) in NOTIFY_OBJECT_DEFS {
        let tail = [OBJECTS, NOTIFY_OBJECTS, sub];
        v.push(def(name, &tail, syntax, AccessibleForNotify));
    }
    v
}

/// True for OIDs under memstatDaemon, the scalars, whose values do not come from a
/// snapshot.
pub fn is_scalar(oid: &[u32]) -> bool {
    oid.len() > MEMSTAT_MIB_ROOT.len() + 1
        && oid.starts_with(MEMSTAT_MIB_ROOT)
        && oid[MEMSTAT_MIB_ROOT.len()..MEMSTAT_MIB_ROOT.len() + 2] == [OBJECTS, DAEMON]
}

/// True when a GetNext from `start` may find a scalar: `start` sorts before the end of
/// memstatDaemon. Cheap, so that the daemon's status is worked out only when it can matter.
pub fn scalars_may_follow(start: &[u32]) -> bool {
    static END: OnceLock<Vec<u32>> = OnceLock::new();
    let end = END.get_or_init(|| root(&[OBJECTS, DAEMON + 1]));
    start < end.as_slice()
}

/// Answers a Get of a scalar OID (one for which [`is_scalar`] holds).
pub fn scalar_get(oid: &[u32], status: &DaemonStatus) -> Value {
    let base = MEMSTAT_MIB_ROOT.len() + 2;
    let Some(&sub) = oid.get(base) else {
        return Value::NoSuchObject;
    };
    let Some(&(_, _, _, f)) = SCALARS.iter().find(|s| s.0 == sub) else {
        return Value::NoSuchObject;
    };
    if oid.len() == base + 2 && oid[base + 1] == 0 {
        f(status).unwrap_or(Value::NoSuchInstance)
    } else {
        Value::NoSuchInstance
    }
}

/// The first scalar instance after `start` (or at it, with `include`) and before `end`
/// (exclusive; null is unbounded), or `None` when no scalar is left in that range.
pub fn scalar_next(
    start: &[u32],
    include: bool,
    end: &[u32],
    status: &DaemonStatus,
) -> Option<(Oid, Value)> {
    for &(sub, _, _, f) in SCALARS {
        let oid = root(&[OBJECTS, DAEMON, sub, 0]);
        let after = match oid.as_slice().cmp(start) {
            Ordering::Greater => true,
            Ordering::Equal => include,
            Ordering::Less => false,
        };
        if !after {
            continue;
        }
        if !end.is_empty() && oid.as_slice() >= end {
            return None;
        }
        if let Some(v) = f(status) {
            return Some((Oid(oid), v));
        }
    }
    None
}

/// Where a served row stands: its stable index and its discontinuity time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    pub index: u32,
    /// Position in `Snapshot::types`.
    pub position: u32,
    /// memTypeDiscontinuityTime, in the master's sysUpTime ticks.
    pub discontinuity: u32,
}

/// The per-allocator summary row.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllocSummary {
    pub allocator: u32,
    pub types: u64,
    pub in_use_bytes: Option<u64>,
    pub free_bytes: Option<u64>,
    pub failures: Option<u64>,
}

fn add(acc: &mut Option<u64>, v: Option<u64>) {
    if let Some(v) = v {
        *acc = Some(acc.unwrap_or(0).saturating_add(v));
    }
}

/// Which table column an accessible object is, and where its values come from.
#[derive(Clone, Copy)]
enum Kind {
    Type(usize),
    Cpu(usize),
    Alloc(usize),
}

struct Object {
    prefix: Vec<u32>,
    kind: Kind,
}

/// The table columns in OID order (instances follow each prefix).
fn objects() -> &'static [Object] {
    static OBJECTS_CELL: OnceLock<Vec<Object>> = OnceLock::new();
    OBJECTS_CELL.get_or_init(|| {
        let mut v = Vec::new();
        for (i, &(sub, ..)) in TYPE_COLUMNS.iter().enumerate() {
            v.push(Object {
                prefix: root(&[OBJECTS, TYPE_TABLE, 1, sub]),
                kind: Kind::Type(i),
            });
        }
        for (i, &(sub, ..)) in CPU_COLUMNS.iter().enumerate() {
            v.push(Object {
                prefix: root(&[OBJECTS, CPU_TABLE, 1, sub]),
                kind: Kind::Cpu(i),
            });
        }
        for (i, &(sub, ..)) in ALLOC_COLUMNS.iter().enumerate() {
            v.push(Object {
                prefix: root(&[OBJECTS, ALLOC_TABLE, 1, sub]),
                kind: Kind::Alloc(i),
            });
        }
        v
    })
}

/// A snapshot laid out as MEMSTAT-MIB, ready to answer Get and GetNext.
pub struct MibView {
    snapshot: Arc<Snapshot>,
    /// Rows sorted by memTypeIndex.
    rows: Vec<Row>,
    /// Per type column: positions in `rows` whose cell is present.
    type_present: Vec<Vec<u32>>,
    /// Per CPU column: (position in `rows`, position in that type's `per_cpu`), sorted by
    /// (memTypeIndex, cpu).
    cpu_present: Vec<Vec<(u32, u32)>>,
    allocs: Vec<AllocSummary>,
    alloc_present: Vec<Vec<u32>>,
    /// Per object of [`objects`]: the instance number of its first present cell. Instances
    /// are numbered 0.. in OID order, so that walk tracking can keep one small slot per
    /// instance instead of OIDs.
    first_instance: Vec<u32>,
    instances: u32,
}

impl MibView {
    /// Lays out `snapshot`. `indexes[i]` and `discontinuity[i]` belong to `snapshot.types[i]`;
    /// indexes must be unique.
    pub fn new(snapshot: Arc<Snapshot>, indexes: &[u32], discontinuity: &[u32]) -> MibView {
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

        let type_present = TYPE_COLUMNS
            .iter()
            .map(|&(_, _, _, f)| {
                (0..rows.len() as u32)
                    .filter(|&p| {
                        let r = &rows[p as usize];
                        f(&snapshot.types[r.position as usize], r).is_some()
                    })
                    .collect()
            })
            .collect();

        // Per-CPU cells, ordered by (index, cpu): rows are by index already; sort each type's
        // CPUs in case a source lists them out of order.
        let mut cpu_order: Vec<(u32, u32, u32)> = Vec::new(); // (row pos, cpu, slot)
        for (p, r) in rows.iter().enumerate() {
            let t = &snapshot.types[r.position as usize];
            let start = cpu_order.len();
            for (slot, c) in t.per_cpu.iter().enumerate() {
                cpu_order.push((p as u32, c.cpu, slot as u32));
            }
            // A stable sort: with a CPU listed twice, the first listed wins, as in `get`.
            cpu_order[start..].sort_by_key(|e| e.1);
        }
        // Sorted by (row, cpu) now, so one pass drops a CPU listed twice for the same type.
        cpu_order.dedup_by_key(|e| (e.0, e.1));
        let cpu_present = CPU_COLUMNS
            .iter()
            .map(|&(_, _, _, f)| {
                cpu_order
                    .iter()
                    .filter(|&&(p, _, slot)| {
                        let t = &snapshot.types[rows[p as usize].position as usize];
                        f(&t.per_cpu[slot as usize]).is_some()
                    })
                    .map(|&(p, _, slot)| (p, slot))
                    .collect()
            })
            .collect();

        let mut allocs: Vec<AllocSummary> = Vec::new();
        for a in Allocator::ALL {
            let mut s = AllocSummary {
                allocator: a.number(),
                ..Default::default()
            };
            for t in snapshot.types.iter().filter(|t| t.allocator == a) {
                s.types += 1;
                add(&mut s.in_use_bytes, t.in_use_bytes);
                add(&mut s.free_bytes, t.free_bytes());
                add(&mut s.failures, t.failures);
            }
            if s.types > 0 {
                allocs.push(s);
            }
        }
        let alloc_present = ALLOC_COLUMNS
            .iter()
            .map(|&(_, _, _, f)| {
                (0..allocs.len() as u32)
                    .filter(|&i| f(&allocs[i as usize]).is_some())
                    .collect()
            })
            .collect();

        let mut view = MibView {
            snapshot,
            rows,
            type_present,
            cpu_present,
            allocs,
            alloc_present,
            first_instance: Vec::new(),
            instances: 0,
        };
        let mut next = 0u32;
        for obj in objects() {
            view.first_instance.push(next);
            next = next.saturating_add(view.present_len(obj.kind) as u32);
        }
        view.instances = next;
        view
    }

    fn present_len(&self, kind: Kind) -> usize {
        match kind {
            Kind::Type(c) => self.type_present[c].len(),
            Kind::Cpu(c) => self.cpu_present[c].len(),
            Kind::Alloc(c) => self.alloc_present[c].len(),
        }
    }

    /// A view with no rows, served before the first successful read.
    pub fn empty() -> MibView {
        MibView::new(
            Arc::new(Snapshot::new(
                0,
                std::time::UNIX_EPOCH,
                String::new(),
                Vec::new(),
            )),
            &[],
            &[],
        )
    }

    pub fn snapshot(&self) -> &Arc<Snapshot> {
        &self.snapshot
    }

    /// The number of table instances (present cells) in the view.
    pub fn instance_count(&self) -> u32 {
        self.instances
    }

    /// The row with this memTypeIndex.
    pub fn row(&self, index: u32) -> Option<&Row> {
        self.rows
            .binary_search_by_key(&index, |r| r.index)
            .ok()
            .map(|p| &self.rows[p])
    }

    /// Rows in index order, with their memory type.
    pub fn rows(&self) -> impl Iterator<Item = (&Row, &MemoryType)> {
        self.rows
            .iter()
            .map(|r| (r, &self.snapshot.types[r.position as usize]))
    }

    fn ty(&self, row_pos: u32) -> (&Row, &MemoryType) {
        let r = &self.rows[row_pos as usize];
        (r, &self.snapshot.types[r.position as usize])
    }

    /// The table object whose subtree holds `oid`, with its position in [`objects`].
    fn object_of(oid: &[u32]) -> Option<(usize, &'static Object)> {
        let objs = objects();
        let i = objs.partition_point(|o| o.prefix.as_slice() < oid);
        // The object holding `oid` is the last one whose prefix sorts at or before it.
        [i, i.wrapping_sub(1)]
            .into_iter()
            .filter_map(|j| objs.get(j).map(|o| (j, o)))
            .find(|(_, o)| oid.starts_with(&o.prefix))
    }

    /// Answers a Get of one table OID: the value, noSuchObject (no such object in the
    /// tables) or noSuchInstance (the object exists but not this instance, or its cell is
    /// absent). Scalars are answered by [`scalar_get`].
    pub fn get(&self, oid: &[u32]) -> Value {
        let Some((_, obj)) = Self::object_of(oid) else {
            return Value::NoSuchObject;
        };
        let suffix = &oid[obj.prefix.len()..];
        let v = match obj.kind {
            Kind::Type(c) => match suffix {
                [idx] => self
                    .rows
                    .binary_search_by_key(idx, |r| r.index)
                    .ok()
                    .and_then(|p| {
                        let (r, t) = self.ty(p as u32);
                        (TYPE_COLUMNS[c].3)(t, r)
                    }),
                _ => None,
            },
            Kind::Cpu(c) => match suffix {
                [idx, cpu] => self
                    .rows
                    .binary_search_by_key(idx, |r| r.index)
                    .ok()
                    .and_then(|p| {
                        let (_, t) = self.ty(p as u32);
                        let pc = t.per_cpu.iter().find(|pc| pc.cpu == *cpu)?;
                        (CPU_COLUMNS[c].3)(pc)
                    }),
                _ => None,
            },
            Kind::Alloc(c) => match suffix {
                [a] => self
                    .allocs
                    .iter()
                    .find(|s| s.allocator == *a)
                    .and_then(|s| (ALLOC_COLUMNS[c].3)(s)),
                _ => None,
            },
        };
        v.unwrap_or(Value::NoSuchInstance)
    }

    /// Answers a GetNext over the tables: the first present instance after `start` (or at
    /// it, with `include`) and before `end` (exclusive; a null `end` is unbounded), or
    /// `None` for endOfMibView. Scalars are answered by [`scalar_next`].
    pub fn get_next(&self, start: &[u32], include: bool, end: &[u32]) -> Option<Found> {
        let objs = objects();
        // Objects whose whole subtree lies before `start` are skipped by binary search.
        let first =
            objs.partition_point(|o| o.prefix.as_slice() < start && !start.starts_with(&o.prefix));
        for (k, obj) in objs.iter().enumerate().skip(first) {
            // The instance suffix to search after; None means "from the first instance".
            let after: Option<&[u32]> = if start.starts_with(&obj.prefix) {
                Some(&start[obj.prefix.len()..])
            } else {
                None
            };
            if let Some((at, suffix, value)) = self.next_in(obj, after, include) {
                let mut oid = Vec::with_capacity(obj.prefix.len() + suffix.as_slice().len());
                oid.extend_from_slice(&obj.prefix);
                oid.extend_from_slice(suffix.as_slice());
                if !end.is_empty() && oid.as_slice() >= end {
                    return None;
                }
                return Some(Found {
                    oid: Oid(oid),
                    value,
                    instance: self.first_instance[k] + at,
                });
            }
            // Every later object's prefix is past `end` once this one's is.
            if !end.is_empty() && obj.prefix.as_slice() >= end {
                return None;
            }
        }
        None
    }

    /// The instance number of `oid` when it names a present cell of this view.
    pub fn instance_of(&self, oid: &[u32]) -> Option<u32> {
        let (k, obj) = Self::object_of(oid)?;
        let suffix = &oid[obj.prefix.len()..];
        // Exact searches, with no value built: this runs for every continuation.
        let at = match (obj.kind, suffix) {
            (Kind::Type(c), &[idx]) => {
                let present = &self.type_present[c];
                let i = present.partition_point(|&p| self.rows[p as usize].index < idx);
                let &p = present.get(i)?;
                (self.rows[p as usize].index == idx).then_some(i)?
            }
            (Kind::Cpu(c), &[idx, cpu]) => {
                let present = &self.cpu_present[c];
                let key = |&(p, slot): &(u32, u32)| {
                    let (r, t) = self.ty(p);
                    (r.index, t.per_cpu[slot as usize].cpu)
                };
                let i = present.partition_point(|e| key(e) < (idx, cpu));
                let e = present.get(i)?;
                (key(e) == (idx, cpu)).then_some(i)?
            }
            (Kind::Alloc(c), &[a]) => {
                let present = &self.alloc_present[c];
                let i = present.partition_point(|&x| self.allocs[x as usize].allocator < a);
                let &x = present.get(i)?;
                (self.allocs[x as usize].allocator == a).then_some(i)?
            }
            _ => return None,
        };
        Some(self.first_instance[k] + at as u32)
    }

    /// The first present instance of `obj` whose suffix is after `after` (or equal, with
    /// `include`); every instance when `after` is `None`. Returns its position among the
    /// object's present cells, its suffix and its value.
    fn next_in(
        &self,
        obj: &Object,
        after: Option<&[u32]>,
        include: bool,
    ) -> Option<(u32, Suffix, Value)> {
        // True when an instance with this suffix comes before the search point.
        let before = |inst: &[u32]| match after {
            None => false,
            Some(s) => match inst.cmp(s) {
                Ordering::Less => true,
                Ordering::Equal => !include,
                Ordering::Greater => false,
            },
        };
        match obj.kind {
            Kind::Type(c) => {
                let present = &self.type_present[c];
                let i = present.partition_point(|&p| before(&[self.rows[p as usize].index]));
                let &p = present.get(i)?;
                let (r, t) = self.ty(p);
                let v = (TYPE_COLUMNS[c].3)(t, r)?;
                Some((i as u32, Suffix::one(r.index), v))
            }
            Kind::Cpu(c) => {
                let present = &self.cpu_present[c];
                let i = present.partition_point(|&(p, slot)| {
                    let (r, t) = self.ty(p);
                    before(&[r.index, t.per_cpu[slot as usize].cpu])
                });
                let &(p, slot) = present.get(i)?;
                let (r, t) = self.ty(p);
                let pc = &t.per_cpu[slot as usize];
                let v = (CPU_COLUMNS[c].3)(pc)?;
                Some((i as u32, Suffix([r.index, pc.cpu], 2), v))
            }
            Kind::Alloc(c) => {
                let present = &self.alloc_present[c];
                let i = present.partition_point(|&a| before(&[self.allocs[a as usize].allocator]));
                let &a = present.get(i)?;
                let s = &self.allocs[a as usize];
                let v = (ALLOC_COLUMNS[c].3)(s)?;
                Some((i as u32, Suffix::one(s.allocator), v))
            }
        }
    }
}

/// An instance suffix (one index, or index and CPU), built without allocating: GetNext
/// builds one for every varbind.
#[derive(Clone, Copy)]
struct Suffix([u32; 2], usize);

impl Suffix {
    fn one(a: u32) -> Suffix {
        Suffix([a, 0], 1)
    }

    fn as_slice(&self) -> &[u32] {
        &self.0[..self.1]
    }
}

/// The whole MEMSTAT-MIB at one moment: the daemon's scalars from `status` and the tables
/// from `view`. The agent answers the same way, but works the status out only when a
/// request reaches a scalar; this is the plain form, for tests and benchmarks.
pub struct Mib<'a> {
    pub view: &'a MibView,
    pub status: &'a DaemonStatus,
}

impl<'a> Mib<'a> {
    pub fn new(view: &'a MibView, status: &'a DaemonStatus) -> Mib<'a> {
        Mib { view, status }
    }

    /// Answers a Get of any OID.
    pub fn get(&self, oid: &[u32]) -> Value {
        if is_scalar(oid) {
            scalar_get(oid, self.status)
        } else {
            self.view.get(oid)
        }
    }

    /// Answers a GetNext: scalars first, then the tables.
    pub fn get_next(&self, start: &[u32], include: bool, end: &[u32]) -> Option<(Oid, Value)> {
        if scalars_may_follow(start) {
            if let Some(found) = scalar_next(start, include, end, self.status) {
                return Some(found);
            }
        }
        self.view
            .get_next(start, include, end)
            .map(|f| (f.oid, f.value))
    }
}

/// A GetNext answer from a [`MibView`]: the instance's OID and value, and its instance
/// number in that view (see [`MibView::instance_of`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    pub oid: Oid,
    pub value: Value,
    pub instance: u32,
}

/// SNMPv2-TC DateAndTime in UTC (11 octets, direction '+', offset 0).
pub fn date_and_time(ms: u64) -> [u8; 11] {
    let secs = ms / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (proleptic Gregorian), per the well-known
    // era-based algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u8;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
    let year = (yoe + era * 400 + i64::from(month <= 2)) as u16;
    let y = year.to_be_bytes();
    [
        y[0],
        y[1],
        month,
        day,
        (rem / 3600) as u8,
        ((rem % 3600) / 60) as u8,
        (rem % 60) as u8,
        ((ms % 1000) / 100) as u8,
        b'+',
        0,
        0,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memstat::PerCpu;
    use std::time::UNIX_EPOCH;

    fn status() -> DaemonStatus {
        DaemonStatus {
            uptime_ticks: 42,
            snapshot_time_ms: Some(0),
            snapshot_generation: Some(3),
            snapshot_age_ms: Some(10),
            refreshes: 3,
            refresh_failures: 0,
            source_name: "test".into(),
            status: SourceStatus::Ok,
            last_error: String::new(),
            notifications_sent: 0,
            notifications_dropped: 0,
            sources: Vec::new(),
        }
    }

    fn view() -> MibView {
        let mut a = MemoryType::new(Allocator::Uma, "a");
        a.size = Some(1 << 40);
        a.allocs = Some(5);
        a.per_cpu = vec![
            PerCpu {
                cpu: 1,
                allocs: Some(2),
                frees: Some(1),
                cache_free: None,
                ..PerCpu::default()
            },
            PerCpu {
                cpu: 0,
                allocs: Some(3),
                frees: Some(0),
                cache_free: Some(7),
                ..PerCpu::default()
            },
        ];
        let mut b = MemoryType::new(Allocator::Slab, "b");
        b.size = Some(64);
        let s = Arc::new(Snapshot::new(1, UNIX_EPOCH, "t".into(), vec![a, b]));
        // b gets the lower index, so it comes first in the table.
        MibView::new(s, &[7, 3], &[0, 0])
    }

    fn col(sub: u32, idx: &[u32]) -> Vec<u32> {
        let mut v = root(&[1, 2, 1, sub]);
        v.extend_from_slice(idx);
        v
    }

    #[test]
    fn get_distinguishes_object_and_instance() {
        let v = view();
        assert_eq!(v.get(&col(5, &[7])), Value::Counter64(1 << 40));
        assert_eq!(v.get(&col(13, &[3])), Value::NoSuchInstance, "absent cell");
        assert_eq!(v.get(&col(5, &[99])), Value::NoSuchInstance);
        assert_eq!(v.get(&col(1, &[7])), Value::NoSuchObject, "index column");
        assert_eq!(v.get(&root(&[9])), Value::NoSuchObject);
        let st = status();
        assert_eq!(scalar_get(&root(&[1, 1, 1, 0]), &st), Value::TimeTicks(42));
        assert_eq!(scalar_get(&root(&[1, 1, 1, 1]), &st), Value::NoSuchInstance);
        assert_eq!(scalar_get(&root(&[1, 1, 99, 0]), &st), Value::NoSuchObject);
    }

    #[test]
    fn get_next_walks_in_order_and_skips_absent_cells() {
        let v = view();
        // From memTypeSize: b (index 3) then a (index 7).
        let f = v.get_next(&col(5, &[]), false, &[]).unwrap();
        assert_eq!((f.oid.0, f.value), (col(5, &[3]), Value::Counter64(64)));
        let f = v.get_next(&col(5, &[3]), false, &[]).unwrap();
        assert_eq!(f.oid.0, col(5, &[7]));
        // include=1 returns the start itself when it exists.
        let f = v.get_next(&col(5, &[7]), true, &[]).unwrap();
        assert_eq!(f.oid.0, col(5, &[7]));
        // memTypeAllocs is absent for b: the walk goes straight to a.
        let f = v.get_next(&col(12, &[99]), false, &[]).unwrap();
        assert_eq!(f.oid.0, col(13, &[7]));
        // The end bound is exclusive.
        assert!(v.get_next(&col(5, &[3]), false, &col(5, &[7])).is_none());
        // Per-CPU rows come out sorted by CPU.
        let f = v.get_next(&root(&[1, 3]), false, &[]).unwrap();
        assert_eq!(f.oid.0, root(&[1, 3, 1, 2, 7, 0]));
        // Past the last object: endOfMibView.
        assert!(v.get_next(&root(&[2]), false, &[]).is_none());
        // From before the tables, the tables start with the first cell.
        let f = v.get_next(MEMSTAT_MIB_ROOT, false, &[]).unwrap();
        assert_eq!(f.oid.0, col(2, &[3]));
    }

    #[test]
    fn full_walk_is_strictly_increasing() {
        let v = view();
        let st = status();
        let mut cur = MEMSTAT_MIB_ROOT.to_vec();
        let mut n = 0;
        while let Some((o, _)) = scalar_next(&cur, false, &[], &st) {
            assert!(o.0 > cur);
            cur = o.0;
            n += 1;
        }
        assert_eq!(n, 11, "every scalar");
        let mut instances = Vec::new();
        while let Some(f) = v.get_next(&cur, false, &[]) {
            assert!(f.oid.0 > cur);
            assert_eq!(v.instance_of(&f.oid.0), Some(f.instance));
            instances.push(f.instance);
            cur = f.oid.0;
            n += 1;
        }
        // Instance numbers run 0.. in OID order.
        assert_eq!(instances, (0..v.instance_count()).collect::<Vec<_>>());
        assert_eq!(v.instance_of(&col(13, &[3])), None, "absent cell");
        assert_eq!(v.instance_of(&col(5, &[3, 1])), None, "no such instance");
        // 11 scalars, 2 rows with 20 + 20 present type cells... count exactly:
        // a: name, alloc, ordinal, size, allocs, disc = 6; b: name, alloc, ordinal, size, disc = 5
        // cpu: allocs 2, frees 2, cache 1; alloc table: 2 allocators × typecount + uma none...
        assert_eq!(n, 11 + 6 + 5 + 5 + 2);
    }

    #[test]
    fn admin_strings_are_cut_at_255_octets_on_a_character_boundary() {
        let long = "é".repeat(200); // 400 octets
        match text(&long) {
            Value::OctetString(b) => {
                assert_eq!(b.len(), 254);
                assert!(std::str::from_utf8(&b).is_ok());
            }
            v => panic!("{v:?}"),
        }
    }

    #[test]
    fn date_and_time_is_utc() {
        // 2026-11-30 11:41:34.5 UTC
        let d = date_and_time(1_796_038_894_500);
        assert_eq!(&d[..8], &[0x07, 0xEA, 11, 30, 11, 41, 34, 5]);
    }
}
