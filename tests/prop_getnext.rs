//! Property: GetNext over any snapshot returns exactly the sorted successor, or endOfMibView,
//! on the path production takes: request PDUs encoded and decoded with the AgentX codec and
//! answered by `Agent::handle`, whose Response is decoded in turn.
//!
//! A random snapshot (allocators, names, some repeated, with their kernel-order ordinals,
//! absent and present figures, per-CPU rows) is handed to an agent as the result of its
//! read, under random distinct memTypeIndex values that the agent's `StableIndexes` loads
//! from a state file written here (the index contract: a key keeps the index its state file
//! gives it). Optionally an earlier snapshot shows some of the rows first, so that the others
//! (and rows whose allocation counter went backwards) get a discontinuity time; optionally a
//! later read fails, or no read ever succeeds. The test enumerates every (OID, value) the MIB
//! should serve *independently* of src/, from MEMSTAT-MIB's documented layout:
//!
//! - scalars `R.1.1.N.0`, from the agent's `status(now)` at the one `now` every request is
//!   answered at (so uptime and age do not move), itself checked against the scenario;
//! - memTypeTable `R.1.2.1.col.index`, for the cells that are present;
//! - memCpuTable `R.1.3.1.col.index.cpu`;
//! - memAllocatorTable `R.1.4.1.col.allocator`, one row per allocator that has types;
//!
//! sorts it, and checks GetNext (`start`, `include`, `end`) against a linear scan for random
//! starts (instance OIDs with include 0/1, OIDs near and inside the tables, OIDs outside the
//! MIB) and random end bounds, one range per PDU and all of them in one PDU. Get of every
//! expected instance must return its value, Get of anything else noSuchObject or
//! noSuchInstance, and a walk from the null OID must visit exactly the expected objects.
//!
//! The agent tracks walks, so the requests change its state; none may change the answers,
//! which all come from the one snapshot (max-age is far longer than any age here, and every
//! request may read: a read it asked for would fail the test).

#[path = "support/columns.rs"]
mod columns;
#[path = "support/full_type.rs"]
mod full_type;

use agentx_proto::oid::Oid;
use agentx_proto::pdu::{Payload, Pdu, ResError, SearchRange, Value};
use memstat_agentx::agent::{Agent, AgentSettings, Handled, SiteSettings, WatchSettings};
use memstat_agentx::index::{SiteIndexes, StableIndexes};
use memstat_agentx::memstat::allocinfo::{Profiling, ProfilingState, Site};
use memstat_agentx::memstat::source::SOURCES;
use memstat_agentx::memstat::{Allocator, MemoryType, PerCpu, SourceData, SourceError, SourceRead};
use memstat_agentx::mib::{object_defs, Access, DaemonStatus, SourceStatus};
use memstat_agentx::statedir::StateDirProblem;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::time::{Duration, Instant};

const R: [u32; 8] = [1, 3, 6, 1, 4, 1, 32473, 1];

fn r(tail: &[u32]) -> Vec<u32> {
    let mut v = R.to_vec();
    v.extend_from_slice(tail);
    v
}

// ---------------------------------------------------------------------------------------------
// The expected objects, written from the MIB file rather than from src/
// ---------------------------------------------------------------------------------------------

/// SnmpAdminString (SIZE (0..255)): the UTF-8 bytes, cut to 255 on a character boundary.
fn admin_string(s: &str) -> Value {
    let mut out = Vec::new();
    for c in s.chars() {
        let mut b = [0u8; 4];
        let e = c.encode_utf8(&mut b).as_bytes();
        if out.len() + e.len() > 255 {
            break;
        }
        out.extend_from_slice(e);
    }
    Value::OctetString(out)
}

/// DateAndTime (SNMPv2-TC) in UTC, computed by counting days year by year.
fn date_and_time(ms: u64) -> Vec<u8> {
    let leap = |y: u64| (y.is_multiple_of(4) && !y.is_multiple_of(100)) || y.is_multiple_of(400);
    let secs = ms / 1000;
    let mut days = secs / 86_400;
    let mut year = 1970u64;
    loop {
        let n = if leap(year) { 366 } else { 365 };
        if days < n {
            break;
        }
        days -= n;
        year += 1;
    }
    let lengths = [
        31,
        if leap(year) { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    let mut month = 0;
    while days >= lengths[month] {
        days -= lengths[month];
        month += 1;
    }
    let sod = secs % 86_400;
    let mut v = (year as u16).to_be_bytes().to_vec();
    v.extend_from_slice(&[
        month as u8 + 1,
        days as u8 + 1,
        (sod / 3600) as u8,
        (sod / 60 % 60) as u8,
        (sod % 60) as u8,
        (ms % 1000 / 100) as u8,
        b'+',
        0,
        0,
    ]);
    v
}

fn c64(v: Option<u64>) -> Option<Value> {
    v.map(Value::Counter64)
}

/// memAllocatorType / memTypeAllocator: malloc(1), uma(2), slab(3).
fn allocator_number(a: Allocator) -> u32 {
    match a {
        Allocator::Malloc => 1,
        Allocator::Uma => 2,
        Allocator::Slab => 3,
    }
}

/// The default allocinfo-min-bytes: a site is a row of memAllocSiteTable from 1 MiB.
const SITE_MIN_BYTES: u64 = 1 << 20;

fn expected(
    types: &[MemoryType],
    indexes: &[u32],
    discontinuity: &[u32],
    st: &DaemonStatus,
    figures: &BTreeMap<String, u64>,
    sites: Option<&SitesRead>,
) -> Vec<(Vec<u32>, Value)> {
    let mut out: Vec<(Vec<u32>, Value)> = Vec::new();
    let mut put = |oid: Vec<u32>, v: Option<Value>| {
        if let Some(v) = v {
            out.push((oid, v));
        }
    };

    // memDaemonObjects: R.1.1.N.0
    let scalars: [(u32, Option<Value>); 11] = [
        (1, Some(Value::TimeTicks(st.uptime_ticks))),
        (
            2,
            st.snapshot_time_ms
                .map(|ms| Value::OctetString(date_and_time(ms))),
        ),
        (
            3,
            st.snapshot_age_ms
                .map(|a| Value::Gauge32(u32::try_from(a).unwrap_or(u32::MAX))),
        ),
        (4, c64(st.snapshot_generation)),
        (5, Some(Value::Counter64(st.refreshes))),
        (6, Some(Value::Counter64(st.refresh_failures))),
        (7, Some(admin_string(&st.source_name))),
        (
            8,
            Some(Value::Integer(match st.status {
                SourceStatus::Ok => 1,
                SourceStatus::Stale => 2,
                SourceStatus::Error => 3,
            })),
        ),
        (9, Some(admin_string(&st.last_error))),
        (10, Some(Value::Counter64(st.notifications_sent))),
        (11, Some(Value::Counter64(st.notifications_dropped))),
    ];
    for (n, v) in scalars {
        put(r(&[1, 1, n, 0]), v);
    }

    // memSourceTable: R.1.1.12.1.col.memSrcIndex, a row per source from 1, column by column.
    let status_number = |s: SourceStatus| match s {
        SourceStatus::Ok => 1,
        SourceStatus::Stale => 2,
        SourceStatus::Error => 3,
    };
    for col in 2..=6u32 {
        for (i, line) in st.sources.iter().enumerate() {
            let v = match col {
                2 => Some(admin_string(&line.name)),
                3 => Some(Value::Integer(status_number(line.status))),
                4 => Some(admin_string(&line.last_error)),
                5 => line
                    .last_good_ms
                    .map(|ms| Value::OctetString(date_and_time(ms))),
                _ => line
                    .types
                    .map(|n| Value::Gauge32(u32::try_from(n).unwrap_or(u32::MAX))),
            };
            put(r(&[1, 1, 12, 1, col, i as u32 + 1]), v);
        }
    }

    // memTypeTable: R.1.2.1.col.index
    for (i, t) in types.iter().enumerate() {
        let idx = indexes[i];
        let cols: [(u32, Option<Value>); 23] = [
            (2, Some(admin_string(&t.name))),
            (
                3,
                Some(Value::Integer(allocator_number(t.allocator) as i32)),
            ),
            (4, Some(Value::Gauge32(t.ordinal))),
            (5, c64(t.size)),
            (6, c64(t.real_size)),
            (7, c64(t.count_limit)),
            (8, c64(t.bytes_limit)),
            (9, c64(t.in_use_count)),
            (10, c64(t.in_use_bytes)),
            (11, c64(t.free_count)),
            (12, c64(t.total_count)),
            (13, c64(t.allocs)),
            (14, c64(t.frees)),
            (15, c64(t.bytes_allocated)),
            (16, c64(t.bytes_freed)),
            (17, c64(t.failures)),
            (18, c64(t.sleeps)),
            (19, c64(t.xdomain)),
            (20, c64(t.zone_free)),
            (21, c64(t.keg_free)),
            (
                22,
                t.size_mask
                    .map(|m| Value::OctetString(m.to_be_bytes().to_vec())),
            ),
            (23, c64(t.slab_bytes)),
            (24, Some(Value::TimeTicks(discontinuity[i]))),
        ];
        for (col, v) in cols {
            put(r(&[1, 2, 1, col, idx]), v);
        }
        // memCpuTable: R.1.3.1.col.index.cpu
        for c in &t.per_cpu {
            put(r(&[1, 3, 1, 2, idx, c.cpu]), c64(c.allocs));
            put(r(&[1, 3, 1, 3, idx, c.cpu]), c64(c.frees));
            put(r(&[1, 3, 1, 4, idx, c.cpu]), c64(c.cache_free));
            put(r(&[1, 3, 1, 5, idx, c.cpu]), c64(c.bytes_allocated));
            put(r(&[1, 3, 1, 6, idx, c.cpu]), c64(c.bytes_freed));
            put(
                r(&[1, 3, 1, 7, idx, c.cpu]),
                c.size_mask
                    .map(|m| Value::OctetString(m.to_be_bytes().to_vec())),
            );
        }
    }

    // memAllocatorTable: R.1.4.1.col.allocator, for allocators with at least one type. A sum
    // is present when at least one type has the figure; free bytes = free count × size.
    for a in [Allocator::Malloc, Allocator::Uma, Allocator::Slab] {
        let of: Vec<&MemoryType> = types.iter().filter(|t| t.allocator == a).collect();
        if of.is_empty() {
            continue;
        }
        let sum = |f: &dyn Fn(&MemoryType) -> Option<u64>| {
            of.iter()
                .filter_map(|t| f(t))
                .fold(None, |acc: Option<u64>, v| {
                    Some(acc.unwrap_or(0).saturating_add(v))
                })
        };
        let n = allocator_number(a);
        put(r(&[1, 4, 1, 2, n]), Some(Value::Gauge32(of.len() as u32)));
        put(r(&[1, 4, 1, 3, n]), c64(sum(&|t| t.in_use_bytes)));
        put(
            r(&[1, 4, 1, 4, n]),
            c64(sum(&|t| Some(t.free_count?.saturating_mul(t.size?)))),
        );
        put(r(&[1, 4, 1, 5, n]), c64(sum(&|t| t.failures)));
    }

    // memKernelTable: R.1.6.1.col.kind, a row per kind of kernel memory whose figure the
    // snapshot holds, by its MemKernelKind (the sources' definitions give each kind's value,
    // label, figure, parent and flags; tests/mib_validation.rs holds them to the MIB text).
    let truth = |b: bool| Value::Integer(if b { 1 } else { 2 });
    for k in SOURCES.iter().flat_map(|d| d.kinds.iter()) {
        let Some(&bytes) = figures.get(k.figure) else {
            continue;
        };
        put(r(&[1, 6, 1, 2, k.index]), Some(admin_string(k.name)));
        put(r(&[1, 6, 1, 3, k.index]), Some(Value::Counter64(bytes)));
        put(r(&[1, 6, 1, 4, k.index]), Some(Value::Gauge32(k.parent)));
        put(r(&[1, 6, 1, 5, k.index]), Some(truth(k.reclaimable)));
        put(r(&[1, 6, 1, 6, k.index]), Some(truth(k.stackable)));
    }

    // Every source's groups of figures (memstatArc): R.1.node.sub.0, a Counter64 for each
    // object whose figure the snapshot holds.
    for g in SOURCES.iter().flat_map(|d| d.groups.iter()) {
        for o in g.objects {
            let mut oid = vec![1];
            oid.extend_from_slice(g.node);
            oid.extend_from_slice(&[o.sub, 0]);
            put(r(&oid), figures.get(o.figure).map(|&v| Value::Counter64(v)));
        }
    }

    // memstatAllocinfo: R.1.8.N.0 while a source reads profiling; memAllocSiteTable
    // R.1.8.4.1.col.index for the sites holding at least allocinfo-min-bytes (no earlier
    // snapshot had sites, so none is held under it). A site appears with the snapshot
    // served: 0 when that is the first snapshot, else the master's sysUpTime then.
    if let Some(read) = sites {
        let served: Vec<&(Site, u32)> = read
            .sites
            .iter()
            .filter(|(s, _)| s.bytes >= SITE_MIN_BYTES)
            .collect();
        put(r(&[1, 8, 1, 0]), Some(Value::Integer(read.state as i32)));
        put(
            r(&[1, 8, 2, 0]),
            Some(Value::Gauge32(read.sites.len() as u32)),
        );
        put(r(&[1, 8, 3, 0]), Some(Value::Gauge32(served.len() as u32)));
        for (site, idx) in served {
            let cols: [(u32, Value); 8] = [
                (2, admin_string(&site.file)),
                (3, Value::Gauge32(site.line)),
                (4, admin_string(&site.function)),
                (5, admin_string(&site.module)),
                (6, Value::Counter64(site.bytes)),
                (7, Value::Counter64(site.calls)),
                (8, truth(site.accurate)),
                (9, Value::TimeTicks(read.discontinuity)),
            ];
            for (col, v) in cols {
                put(r(&[1, 8, 4, 1, col, *idx]), Some(v));
            }
        }
    }

    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// What the good read gave of allocation profiling, each site with the index its state file
/// gives it, and the discontinuity time the sites of the served snapshot have.
#[derive(Clone, Debug)]
struct SitesRead {
    state: ProfilingState,
    sites: Vec<(Site, u32)>,
    discontinuity: u32,
}

/// The successor by linear scan: the first object after `start` (or at it, with `include`)
/// and before `end` (exclusive; empty means unbounded).
fn successor<'a>(
    all: &'a [(Vec<u32>, Value)],
    start: &[u32],
    include: bool,
    end: &[u32],
) -> Option<&'a (Vec<u32>, Value)> {
    all.iter()
        .find(|(oid, _)| {
            if include {
                oid.as_slice() >= start
            } else {
                oid.as_slice() > start
            }
        })
        .filter(|(oid, _)| end.is_empty() || oid.as_slice() < end)
}

// ---------------------------------------------------------------------------------------------
// The agent, asked through the codec
// ---------------------------------------------------------------------------------------------

/// Far longer than any age or uptime here: no request may find the snapshot too old.
const MAX_AGE: Duration = Duration::from_secs(1000 * 86_400);

fn settings() -> AgentSettings {
    AgentSettings {
        notify: WatchSettings::from(
            &memstat_agentx::config::RawSettings::default()
                .convert()
                .unwrap(),
        ),
        max_age: MAX_AGE,
        walk_window: Duration::from_secs(30),
        sites: SiteSettings::default(),
    }
}

/// An agent answering every request at one fixed `now`.
struct Served {
    agent: Agent,
    now: Instant,
    txn: u32,
    out: Vec<u8>,
}

impl Served {
    fn new(agent: Agent, now: Instant) -> Served {
        Served {
            agent,
            now,
            txn: 0,
            out: Vec::new(),
        }
    }

    /// One request, as the session hands it over: encoded, decoded, then `Agent::handle`
    /// (which may ask for a read; none is due, so that is a failure). The Response's
    /// varbinds, one per range.
    fn ask(&mut self, payload: Payload) -> Vec<(Vec<u32>, Value)> {
        let ranges = match &payload {
            Payload::Get { ranges } | Payload::GetNext { ranges } => ranges.len(),
            p => panic!("not a Get or GetNext: {p:?}"),
        };
        self.txn += 1;
        let mut frame = Vec::new();
        Pdu::new(1, self.txn, self.txn, payload).encode(&mut frame);
        let pdu = Pdu::decode(&frame).expect("the request decodes");
        let handled = self.agent.handle(&pdu, self.now, true, &mut self.out);
        assert_eq!(handled, Handled::Reply, "{pdu:?}");
        let answer = Pdu::decode(&self.out).expect("the Response decodes");
        assert_eq!(answer.ids.transaction_id, self.txn);
        match answer.payload {
            Payload::Response {
                error,
                index,
                varbinds,
                ..
            } => {
                assert_eq!((error, index), (ResError::NO_ERROR, 0), "{pdu:?}");
                assert_eq!(varbinds.len(), ranges, "one varbind per range");
                varbinds
                    .into_iter()
                    .map(|vb| (vb.name.0, vb.value))
                    .collect()
            }
            p => panic!("not a Response: {p:?}"),
        }
    }

    fn get_next_all(&mut self, queries: &[(Vec<u32>, bool, Vec<u32>)]) -> Vec<(Vec<u32>, Value)> {
        let ranges = queries
            .iter()
            .map(|(start, include, end)| SearchRange {
                start: Oid(start.clone()),
                include: *include,
                end: Oid(end.clone()),
            })
            .collect();
        self.ask(Payload::GetNext { ranges })
    }

    fn get_next(&mut self, start: &[u32], include: bool, end: &[u32]) -> (Vec<u32>, Value) {
        self.get_next_all(&[(start.to_vec(), include, end.to_vec())])
            .remove(0)
    }

    fn get_all(&mut self, oids: &[Vec<u32>]) -> Vec<Value> {
        let ranges = oids
            .iter()
            .map(|o| SearchRange {
                start: Oid(o.clone()),
                include: false,
                end: Oid::null(),
            })
            .collect();
        let got = self.ask(Payload::Get { ranges });
        for ((name, _), oid) in got.iter().zip(oids) {
            assert_eq!(name, oid, "a Get answers with the name asked for");
        }
        got.into_iter().map(|(_, v)| v).collect()
    }

    fn get(&mut self, oid: &[u32]) -> Value {
        self.get_all(&[oid.to_vec()]).remove(0)
    }

    /// Every object from `start` up to `end` (exclusive; empty is unbounded), by GetNext.
    fn walk(&mut self, start: &[u32], end: &[u32]) -> Vec<(Vec<u32>, Value)> {
        let mut walked: Vec<(Vec<u32>, Value)> = Vec::new();
        let mut at = start.to_vec();
        loop {
            let (o, v) = self.get_next(&at, false, end);
            if v == Value::EndOfMibView {
                assert_eq!(o, at, "endOfMibView names the start");
                return walked;
            }
            assert!(o > at, "the walk went backwards at {o:?}, from {at:?}");
            assert!(walked.len() < 100_000, "the walk does not end");
            at = o.clone();
            walked.push((o, v));
        }
    }
}

/// The index state file (`indexes.json` in the state directory) giving each key its index.
fn state_dir(types: &[MemoryType], indexes: &[u32]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let entries: Vec<serde_json::Value> = types
        .iter()
        .zip(indexes)
        .map(|(t, i)| {
            serde_json::json!({
                "allocator": t.allocator,
                "name": t.name,
                "ordinal": t.ordinal,
                "index": i,
            })
        })
        .collect();
    let body = serde_json::json!({ "version": 1, "entries": entries });
    std::fs::write(dir.path().join("indexes.json"), body.to_string()).unwrap();
    dir
}

/// sites.json with the scenario's sites at their indexes (never served: last_served 0).
fn write_sites_state(dir: &std::path::Path, sc: &Scenario) {
    let Some((_, sites)) = &sc.profiling else {
        return;
    };
    let entries: Vec<serde_json::Value> = sites
        .iter()
        .map(|(s, i)| {
            serde_json::json!({
                "file": s.file, "line": s.line, "module": s.module, "function": s.function,
                "index": i, "last_served": 0,
            })
        })
        .collect();
    let body = serde_json::json!({ "version": 1, "entries": entries });
    std::fs::write(dir.join("sites.json"), body.to_string()).unwrap();
}

/// Whether a type was in the earlier snapshot, and how.
#[derive(Clone, Copy, Debug)]
enum Before {
    /// Not there: the row appears at the snapshot served.
    New,
    /// There with the same figures.
    Seen,
    /// There with a higher allocation counter (none when the type has none, or u64::MAX).
    Reset,
}

/// What the agent went through before the requests.
#[derive(Clone, Debug)]
enum Reads {
    /// The one good read (after the earlier one, if any).
    Good,
    /// The good read, then a failed one: the snapshot is stale.
    GoodThenFailed(String),
    /// A failed read and no good one: no snapshot at all.
    Failed(String),
}

#[derive(Clone, Debug)]
struct Scenario {
    source: String,
    /// From the agent's start to its (last good, or failed) read.
    read_after_ms: u64,
    /// From that read to the requests.
    age_ms: u64,
    reads: Reads,
    /// An earlier snapshot: the master's sysUpTime at the served one, and per type whether
    /// the earlier one had it.
    before: Option<(u32, Vec<Before>)>,
    /// Why the index state would not be saved (memSourceLastError while the source is fine).
    persistence: Option<String>,
    sent: u64,
    dropped: u64,
    /// The kernel-wide figures of the good read: some of the kinds' figures, and one no
    /// kind serves.
    figures: BTreeMap<String, u64>,
    /// The good read's allocation profiling, each site with its index in the state file.
    profiling: Option<(ProfilingState, Vec<(Site, u32)>)>,
}

/// An agent that went through `sc` with the snapshot `types`, keys given `indexes`; and the
/// discontinuity time the MIB's description of memTypeDiscontinuityTime gives each row: the
/// master's sysUpTime at the snapshot for a row (key) the earlier snapshot did not have or
/// whose allocation counter went backwards since, else 0.
fn serve(types: &[MemoryType], indexes: &[u32], sc: &Scenario) -> (Served, Vec<u32>) {
    let dir = state_dir(types, indexes);
    let (loaded, problems) = StableIndexes::load(dir.path());
    assert!(problems.is_empty(), "{problems:?}");
    write_sites_state(dir.path(), sc);
    let (sites, problems) = SiteIndexes::load(dir.path());
    assert!(problems.is_empty(), "{problems:?}");
    let t0 = Instant::now();
    let mut agent = Agent::new(std::slice::from_ref(&sc.source), loaded, settings(), t0)
        .with_site_indexes(sites);
    agent.set_persistence_off(sc.persistence.clone().map(StateDirProblem::Unsafe));
    agent.notifications_sent(sc.sent);
    agent.notifications_dropped(sc.dropped);
    let at = t0 + Duration::from_millis(sc.read_after_ms);
    let now = at + Duration::from_millis(sc.age_ms);
    let failed = |message: &String| {
        Err(SourceError::Unavailable {
            message: message.clone(),
        })
    };
    let mut disc = vec![0; types.len()];
    if let Reads::Failed(e) = &sc.reads {
        agent.read_started(at);
        agent.read_finished(failed(e), at);
        return (Served::new(agent, now), disc);
    }
    if let Some((master_now, before)) = &sc.before {
        let mut earlier = Vec::new();
        for (t, b) in types.iter().zip(before) {
            let mut e = t.clone();
            match b {
                Before::New => continue,
                Before::Seen => {}
                Before::Reset => e.allocs = t.allocs.filter(|&a| a < u64::MAX).map(|a| a + 1),
            }
            earlier.push(e);
        }
        // Rows are told apart by key: the earlier snapshot's ordinals are its own.
        let earlier = kernel_ordinals(earlier);
        for (t, d) in types.iter().zip(&mut disc) {
            let seen = earlier
                .iter()
                .find(|e| (e.allocator, &e.name, e.ordinal) == (t.allocator, &t.name, t.ordinal));
            let went_back =
                |e: &MemoryType| matches!((t.allocs, e.allocs), (Some(a), Some(p)) if a < p);
            if seen.is_none_or(went_back) {
                *d = *master_now;
            }
        }
        agent.read_started(at);
        agent.read_finished(Ok(earlier), at);
        agent.master_uptime(*master_now, at);
    }
    agent.read_started(at);
    let good = SourceRead {
        parts: vec![Ok(SourceData {
            types: types.to_vec(),
            figures: sc.figures.clone(),
            profiling: sc.profiling.as_ref().map(|(state, sites)| Profiling {
                state: *state,
                rows: sites.len() as u64,
                sites: sites.iter().map(|(s, _)| s.clone()).collect(),
            }),
        })],
    };
    agent.read_finished(good, at);
    if let Reads::GoodThenFailed(e) = &sc.reads {
        let later = at + Duration::from_millis(sc.age_ms / 2);
        agent.read_started(later);
        agent.read_finished(failed(e), later);
    }
    (Served::new(agent, now), disc)
}

/// The agent's scalars at the requests' `now`, checked against what it went through.
fn status_of(s: &Served, sc: &Scenario) -> DaemonStatus {
    let st = s.agent.status(s.now);
    let uptime_ms = sc.read_after_ms + sc.age_ms;
    assert_eq!(st.uptime_ticks, (uptime_ms / 10) as u32, "memDaemonUptime");
    assert_eq!(st.source_name, sc.source);
    assert_eq!(
        (st.notifications_sent, st.notifications_dropped),
        (sc.sent, sc.dropped)
    );
    let good = match sc.reads {
        Reads::Failed(_) => 0,
        _ => 1 + u64::from(sc.before.is_some()),
    };
    let (status, failures, error) = match &sc.reads {
        Reads::Good => (
            SourceStatus::Ok,
            0,
            sc.persistence.clone().unwrap_or_default(),
        ),
        Reads::GoodThenFailed(e) => (SourceStatus::Stale, 1, e.clone()),
        Reads::Failed(e) => (SourceStatus::Error, 1, e.clone()),
    };
    let generation = (good > 0).then_some(good);
    assert_eq!(st.status, status, "memSourceStatus");
    assert_eq!(
        (st.refreshes, st.refresh_failures),
        (good + failures, failures)
    );
    assert_eq!(st.snapshot_generation, generation, "memSnapshotGeneration");
    assert_eq!(st.last_error, error, "memSourceLastError");
    let age = generation.map(|_| sc.age_ms);
    assert_eq!(st.snapshot_age_ms, age, "memSnapshotAge");
    assert_eq!(st.snapshot_time_ms.is_some(), generation.is_some());
    // One source: its row says what the scalars say, but only its own error.
    assert_eq!(st.sources.len(), 1, "memSourceTable");
    let line = &st.sources[0];
    assert_eq!(line.name, sc.source);
    assert_eq!(line.status, status, "memSrcStatus");
    let own_error = match &sc.reads {
        Reads::Good => String::new(),
        Reads::GoodThenFailed(e) | Reads::Failed(e) => e.clone(),
    };
    assert_eq!(line.last_error, own_error, "memSrcLastError");
    assert_eq!(line.last_good_ms.is_some(), generation.is_some());
    assert_eq!(line.types.is_some(), generation.is_some(), "memSrcTypes");
    st
}

// ---------------------------------------------------------------------------------------------
// Strategies
// ---------------------------------------------------------------------------------------------

fn arb_allocator() -> impl Strategy<Value = Allocator> {
    prop_oneof![
        Just(Allocator::Malloc),
        Just(Allocator::Uma),
        Just(Allocator::Slab)
    ]
}

fn arb_name() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => "[a-z][a-z0-9_ -]{0,12}",
        1 => "[é€a]{80,140}", // more than 255 bytes: cut on a character boundary
        1 => Just(String::new()),
    ]
}

fn fig() -> impl Strategy<Value = Option<u64>> {
    prop_oneof![
        2 => Just(None),
        2 => (0u64..1000).prop_map(Some),
        1 => any::<u64>().prop_map(Some),
    ]
}

fn arb_per_cpu() -> impl Strategy<Value = Vec<PerCpu>> {
    // Distinct CPU numbers, in any order (a source may list them unsorted).
    let cpus: Vec<u32> = (0u32..6).chain([63, 1023]).collect();
    (
        proptest::sample::subsequence(cpus, 0..5),
        proptest::collection::vec((fig(), fig(), fig(), fig(), fig(), fig()), 8),
    )
        .prop_map(|(cpus, figs)| {
            cpus.into_iter()
                .zip(figs)
                .map(
                    |(
                        cpu,
                        (allocs, frees, cache_free, bytes_allocated, bytes_freed, size_mask),
                    )| {
                        PerCpu {
                            cpu,
                            allocs,
                            frees,
                            cache_free,
                            bytes_allocated,
                            bytes_freed,
                            size_mask,
                        }
                    },
                )
                .collect::<Vec<_>>()
        })
        .prop_shuffle()
}

prop_compose! {
    fn arb_type()(
        allocator in arb_allocator(),
        // Names that repeat too: FreeBSD has several zones or malloc types of one name.
        name in prop_oneof![arb_name(), prop_oneof![Just("mbuf"), Just("dup")].prop_map(String::from)],
        a in proptest::collection::vec(fig(), 19),
        size_mask in fig(),
        per_cpu in arb_per_cpu(),
    ) -> MemoryType {
        let mut t = MemoryType::new(allocator, name);
        t.size = a[0];
        t.real_size = a[1];
        t.count_limit = a[2];
        t.bytes_limit = a[3];
        t.in_use_count = a[4];
        t.in_use_bytes = a[5];
        t.free_count = a[6];
        t.total_count = a[7];
        t.allocs = a[8];
        t.frees = a[9];
        t.bytes_allocated = a[10];
        t.bytes_freed = a[11];
        t.failures = a[12];
        t.sleeps = a[13];
        t.xdomain = a[14];
        t.zone_free = a[15];
        t.keg_free = a[16];
        t.slab_bytes = a[17];
        t.size_mask = size_mask;
        t.per_cpu = per_cpu;
        t
    }
}

/// memTypeOrdinal as the MIB describes it: the ordinal among the types of the same allocator
/// and name, in the kernel's order (0 for the first). Keys (allocator, name, ordinal) are so
/// distinct, as a source's are.
fn kernel_ordinals(mut types: Vec<MemoryType>) -> Vec<MemoryType> {
    for i in 0..types.len() {
        let earlier = types[..i]
            .iter()
            .filter(|e| e.allocator == types[i].allocator && e.name == types[i].name)
            .count();
        types[i].ordinal = earlier as u32;
    }
    types
}

fn arb_reads() -> impl Strategy<Value = Reads> {
    prop_oneof![
        6 => Just(Reads::Good),
        2 => arb_name().prop_map(Reads::GoodThenFailed),
        1 => arb_name().prop_map(Reads::Failed),
    ]
}

/// Every figure something of the MIB serves: the kinds' (memKernelTable) and the figure
/// groups' (memstatArc), once each.
fn served_figures() -> Vec<&'static str> {
    let kinds = SOURCES
        .iter()
        .flat_map(|d| d.kinds.iter())
        .map(|k| k.figure);
    let groups = SOURCES
        .iter()
        .flat_map(|d| d.groups.iter())
        .flat_map(|g| g.objects.iter())
        .map(|o| o.figure);
    let mut v: Vec<&'static str> = kinds.chain(groups).collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// Kernel-wide figures: any of the kinds' and the figure groups' figures, and sometimes one
/// that nothing serves.
fn arb_figures() -> impl Strategy<Value = BTreeMap<String, u64>> {
    let mut keys: Vec<String> = served_figures().into_iter().map(String::from).collect();
    keys.push("test.served_by_no_kind".into());
    let n = keys.len();
    proptest::sample::subsequence(keys, 0..=n).prop_flat_map(|keys| {
        let n = keys.len();
        proptest::collection::vec(prop_oneof![Just(0u64), any::<u64>()], n)
            .prop_map(move |values| keys.iter().cloned().zip(values).collect())
    })
}

fn arb_scenario(types: usize) -> impl Strategy<Value = Scenario> {
    let before = prop_oneof![Just(Before::New), Just(Before::Seen), Just(Before::Reset)];
    (
        arb_name(),
        // Up to about 700 days: memDaemonUptime wraps after 497.
        prop_oneof![0u64..100_000, 0u64..60_000_000_000],
        // Up to about 115 days: memSnapshotAge (Gauge32, ms) sticks at 2^32 - 1 after 49.
        prop_oneof![0u64..100_000, 0u64..10_000_000_000],
        arb_reads(),
        proptest::option::of((any::<u32>(), proptest::collection::vec(before, types))),
        proptest::option::of(arb_name()),
        (
            prop_oneof![Just(0u64), any::<u64>()],
            prop_oneof![Just(0u64), any::<u64>()],
        ),
        arb_figures(),
        proptest::option::of(arb_profiling()),
    )
        .prop_map(
            |(
                source,
                read_after_ms,
                age_ms,
                reads,
                before,
                persistence,
                (sent, dropped),
                figures,
                profiling,
            )| {
                Scenario {
                    source,
                    read_after_ms,
                    age_ms,
                    reads,
                    before,
                    persistence,
                    sent,
                    dropped,
                    figures,
                    profiling,
                }
            },
        )
}

fn arb_profiling_state() -> impl Strategy<Value = ProfilingState> {
    prop_oneof![
        Just(ProfilingState::NotCompiled),
        Just(ProfilingState::Unavailable),
        Just(ProfilingState::Off),
        Just(ProfilingState::On),
    ]
}

/// Up to six sites of distinct keys (the function tells them apart), with bytes about the
/// default threshold, each with a distinct index.
fn arb_profiling() -> impl Strategy<Value = (ProfilingState, Vec<(Site, u32)>)> {
    let site = (
        arb_name(),
        any::<u32>(),
        prop_oneof![Just(String::new()), Just("xfs".to_string())],
        prop_oneof![
            Just(0u64),
            Just(SITE_MIN_BYTES - 1),
            Just(SITE_MIN_BYTES),
            any::<u64>()
        ],
        any::<u64>(),
        any::<bool>(),
    );
    (arb_profiling_state(), proptest::collection::vec(site, 0..6))
        .prop_flat_map(|(state, sites)| {
            let n = sites.len();
            let pool: Vec<u32> = (1u32..=12).chain([500, u32::MAX]).collect();
            (
                Just(state),
                Just(sites),
                proptest::sample::subsequence(pool, n).prop_shuffle(),
            )
        })
        .prop_map(|(state, sites, indexes)| {
            let sites = sites
                .into_iter()
                .enumerate()
                .zip(indexes)
                .map(
                    |((i, (file, line, module, bytes, calls, accurate)), index)| {
                        let site = Site {
                            file,
                            line,
                            module,
                            function: format!("f{i}"),
                            bytes,
                            calls,
                            accurate,
                            rows: 1,
                        };
                        (site, index)
                    },
                )
                .collect();
            (state, sites)
        })
}

/// A snapshot with one distinct memTypeIndex per type, and what the agent went through.
fn arb_served() -> impl Strategy<Value = (Vec<MemoryType>, Vec<u32>, Scenario)> {
    proptest::collection::vec(arb_type(), 0..10)
        .prop_map(kernel_ordinals)
        .prop_flat_map(|types| {
            let n = types.len();
            let pool: Vec<u32> = (1u32..=24).chain([1000, u32::MAX - 1, u32::MAX]).collect();
            (
                Just(types),
                proptest::sample::subsequence(pool, n).prop_shuffle(),
                arb_scenario(n),
            )
        })
}

/// How a query's start (or end) OID is chosen; resolved against the expected set.
#[derive(Clone, Debug)]
enum Pick {
    /// An existing instance.
    Instance(usize),
    /// An existing instance, changed: 0 = truncated by one, 1 = last sub-id + 1, 2 = last
    /// sub-id - 1, 3 = extended by a sub-id.
    Near(usize, u8, u32),
    /// The root followed by a few small arcs: tables, columns, rows that may not exist.
    Inside(Vec<u32>),
    /// An arbitrary OID, mostly outside the MIB.
    Anywhere(Vec<u32>),
    /// The null OID.
    Null,
}

fn arb_pick() -> impl Strategy<Value = Pick> {
    prop_oneof![
        4 => any::<usize>().prop_map(Pick::Instance),
        3 => (any::<usize>(), 0u8..4, 0u32..3).prop_map(|(i, k, x)| Pick::Near(i, k, x)),
        4 => proptest::collection::vec(prop_oneof![0u32..6, 0u32..26, Just(u32::MAX)], 0..7)
            .prop_map(Pick::Inside),
        1 => proptest::collection::vec(prop_oneof![0u32..8, Just(32473), any::<u32>()], 0..10)
            .prop_map(Pick::Anywhere),
        1 => Just(Pick::Null),
    ]
}

fn resolve(p: &Pick, all: &[(Vec<u32>, Value)]) -> Vec<u32> {
    match p {
        Pick::Instance(i) if !all.is_empty() => all[i % all.len()].0.clone(),
        Pick::Near(i, k, x) if !all.is_empty() => {
            let mut o = all[i % all.len()].0.clone();
            let last = o.len() - 1;
            match k {
                0 => {
                    o.pop();
                }
                1 => o[last] = o[last].saturating_add(1),
                2 => o[last] = o[last].saturating_sub(1),
                _ => o.push(*x),
            }
            o
        }
        Pick::Instance(_) | Pick::Near(..) | Pick::Null => Vec::new(),
        Pick::Inside(tail) => r(tail),
        Pick::Anywhere(o) => o.clone(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn getnext_is_the_sorted_successor(
        (types, indexes, sc) in arb_served(),
        queries in proptest::collection::vec((arb_pick(), any::<bool>(), arb_pick(), any::<bool>()), 1..40),
    ) {
        let (mut s, disc) = serve(&types, &indexes, &sc);
        let st = status_of(&s, &sc);
        let (served, figures): (&[MemoryType], BTreeMap<String, u64>) = match sc.reads {
            Reads::Failed(_) => (&[], BTreeMap::new()),
            _ => (&types, sc.figures.clone()),
        };
        let sites = match (&sc.reads, &sc.profiling) {
            (Reads::Failed(_), _) | (_, None) => None,
            (_, Some((state, sites))) => Some(SitesRead {
                state: *state,
                sites: sites.clone(),
                discontinuity: sc.before.as_ref().map_or(0, |(master_now, _)| *master_now),
            }),
        };
        let all = expected(served, &indexes, &disc, &st, &figures, sites.as_ref());
        let instances: HashSet<&[u32]> = all.iter().map(|(o, _)| o.as_slice()).collect();

        for chunk in all.chunks(8) {
            let oids: Vec<Vec<u32>> = chunk.iter().map(|(o, _)| o.clone()).collect();
            for ((oid, want), got) in chunk.iter().zip(s.get_all(&oids)) {
                prop_assert_eq!(&got, want, "get {:?}", oid);
            }
        }
        let queries: Vec<(Vec<u32>, bool, Vec<u32>)> = queries
            .iter()
            .map(|(start, include, end, bounded)| {
                let end = if *bounded { resolve(end, &all) } else { Vec::new() };
                (resolve(start, &all), *include, end)
            })
            .collect();
        let wants: Vec<(Vec<u32>, Value)> = queries
            .iter()
            .map(|(start, include, end)| match successor(&all, start, *include, end) {
                Some((o, v)) => (o.clone(), v.clone()),
                None => (start.clone(), Value::EndOfMibView),
            })
            .collect();
        for ((start, include, end), want) in queries.iter().zip(&wants) {
            let got = s.get_next(start, *include, end);
            prop_assert_eq!(
                &got, want,
                "getnext(start {:?}, include {}, end {:?})", start, include, end
            );
            if !instances.contains(start.as_slice()) {
                let v = s.get(start);
                prop_assert!(
                    matches!(v, Value::NoSuchObject | Value::NoSuchInstance),
                    "get {:?}, no instance, answered {:?}", start, v
                );
            }
        }
        // Every range in one GetNext.
        let together = s.get_next_all(&queries);
        for (i, (got, want)) in together.iter().zip(&wants).enumerate() {
            prop_assert_eq!(got, want, "range {} of {}: {:?}", i, queries.len(), queries[i]);
        }
        // A full walk visits exactly the expected objects, in order.
        let walked = s.walk(&[], &[]);
        let first_difference = walked.iter().zip(&all).position(|(w, a)| w != a);
        if let Some(i) = first_difference.or((walked.len() != all.len()).then(|| walked.len().min(all.len()))) {
            prop_assert!(
                false,
                "the walk ({} objects) and the expected objects ({}) part at {}: walked {:?}, expected {:?}",
                walked.len(), all.len(), i, walked.get(i), all.get(i)
            );
        }
    }
}

/// An agent that has read `types` (the first snapshot: every discontinuity time 0), with
/// indexes from 1 in the order given (no state file).
fn serve_first(types: Vec<MemoryType>) -> Served {
    let t0 = Instant::now();
    let mut agent = Agent::new(&["prop".into()], StableIndexes::in_memory(), settings(), t0);
    agent.read_started(t0);
    agent.read_finished(Ok(types), t0);
    Served::new(agent, t0)
}

/// Per-CPU rows with repeated CPU numbers (a hand-edited fixture can have them), many of
/// them, in any order.
fn arb_dup_per_cpu() -> impl Strategy<Value = Vec<PerCpu>> {
    proptest::collection::vec((0u32..12, 0u64..1000), 0..60).prop_map(|v| {
        v.into_iter()
            .map(|(cpu, x)| PerCpu {
                cpu,
                allocs: Some(x),
                frees: Some(x + 1),
                cache_free: None,
                ..PerCpu::default()
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, failure_persistence: None, ..ProptestConfig::default() })]

    /// Whatever the per-CPU rows, a walk answers each instance with the value a Get of that
    /// instance returns, and every instance once.
    #[test]
    fn walk_agrees_with_get_even_with_repeated_cpus(
        rows in proptest::collection::vec(arb_dup_per_cpu(), 1..4),
    ) {
        // Two columns (allocs and frees) per distinct CPU of each type.
        let instances: usize = rows
            .iter()
            .map(|r| 2 * r.iter().map(|c| c.cpu).collect::<BTreeSet<_>>().len())
            .sum();
        let types: Vec<MemoryType> = rows
            .into_iter()
            .enumerate()
            .map(|(i, per_cpu)| {
                let mut t = MemoryType::new(Allocator::Uma, format!("z{i}"));
                t.per_cpu = per_cpu;
                t
            })
            .collect();
        let mut s = serve_first(types);
        let walked = s.walk(&r(&[1, 3]), &r(&[1, 4]));
        for (o, v) in &walked {
            prop_assert_eq!(&s.get(o), v, "instance {:?}", o);
        }
        prop_assert_eq!(walked.len(), instances);
    }
}

/// Regression (found by the property above): with repeated CPU numbers in a row of more than
/// ~20 per-CPU entries, the walk (GetNext) served a different entry than Get for the same
/// memCpuTable instance, because `MibView::new` ordered the CPUs with an unstable sort
/// before de-duplicating them, while `get` takes the first listed entry.
#[test]
fn repeated_cpu_numbers_get_and_getnext_agree() {
    let mut t = MemoryType::new(Allocator::Uma, "dup");
    t.per_cpu = (0..40u64)
        .map(|k| PerCpu {
            cpu: (k * 7 % 5) as u32,
            allocs: Some(k),
            frees: None,
            cache_free: None,
            ..PerCpu::default()
        })
        .collect();
    let mut s = serve_first(vec![t]);
    let mut seen = Vec::new();
    for (o, v) in s.walk(&r(&[1, 3, 1, 2]), &r(&[1, 3, 1, 3])) {
        let cpu = *o.last().unwrap();
        // The first entry listed for a CPU is the one Get serves.
        assert_eq!(s.get(&o), v, "cpu {cpu}");
        assert_eq!(v, Value::Counter64(u64::from(cpu * 3 % 5)), "cpu {cpu}");
        seen.push(cpu);
    }
    assert_eq!(seen, [0, 1, 2, 3, 4]);
}

/// The expected model above covers every accessible object the MIB's definitions have, and
/// only those: an object added to the MIB fails here until `expected` serves it.
#[test]
fn the_model_has_every_object_the_mib_defines() {
    let t = full_type::full_type(Allocator::Uma, "full", 1);
    let st = DaemonStatus {
        uptime_ticks: 1,
        snapshot_time_ms: Some(1),
        snapshot_age_ms: Some(1),
        snapshot_generation: Some(1),
        refreshes: 1,
        refresh_failures: 0,
        source_name: "s".into(),
        status: SourceStatus::Ok,
        last_error: String::new(),
        notifications_sent: 0,
        notifications_dropped: 0,
        sources: vec![memstat_agentx::mib::SourceLine {
            name: "s".into(),
            status: SourceStatus::Ok,
            last_error: String::new(),
            last_good_ms: Some(1),
            types: Some(1),
        }],
    };
    let figures = served_figures()
        .into_iter()
        .map(|f| (f.to_string(), 1))
        .collect();
    let site = Site {
        file: "mm/a.c".into(),
        line: 1,
        module: String::new(),
        function: "f".into(),
        bytes: SITE_MIN_BYTES,
        calls: 1,
        accurate: true,
        rows: 1,
    };
    let sites = SitesRead {
        state: ProfilingState::On,
        sites: vec![(site, 1)],
        discontinuity: 0,
    };
    let all = expected(&[t], &[1], &[0], &st, &figures, Some(&sites));
    let accessible: Vec<(&str, Vec<u32>)> = object_defs()
        .into_iter()
        .filter(|d| d.access == Access::ReadOnly)
        .map(|d| (d.name, d.oid))
        .collect();
    let instance_of = |o: &[u32], object: &[u32]| o.len() > object.len() && o.starts_with(object);
    let unmodelled: Vec<&str> = accessible
        .iter()
        .filter(|(_, oid)| !all.iter().any(|(o, _)| instance_of(o, oid)))
        .map(|(name, _)| *name)
        .collect();
    assert!(
        unmodelled.is_empty(),
        "the MIB's definitions have accessible objects this test's model serves no instance \
         of: {unmodelled:?}. An object added to the MIB needs its value in `expected` (and a \
         new memTypeEntry column its figure in tests/support/full_type.rs)"
    );
    for (o, _) in &all {
        assert!(
            accessible.iter().any(|(_, oid)| instance_of(o, oid)),
            "the model serves {o:?}, an instance of no accessible object of the MIB"
        );
    }
    // The counting helpers agree with the model.
    let entry = columns::object_oid("memTypeEntry");
    let type_cells = all.iter().filter(|(o, _)| o.starts_with(&entry)).count();
    assert_eq!(type_cells, columns::type_columns());
}

/// tests/support/full_type.rs fills every memTypeTable column the definitions have, as the
/// agent serves it (the benchmarks and tests that count its cells rely on that).
#[test]
fn full_type_fills_every_type_column() {
    let types = vec![
        full_type::full_type(Allocator::Uma, "a", 1),
        full_type::full_type(Allocator::Slab, "b", 2),
        full_type::full_type(Allocator::Malloc, "c", 3),
    ];
    let mut s = serve_first(types);
    let table = columns::object_oid("memTypeTable");
    let mut end = table.clone();
    *end.last_mut().unwrap() += 1;
    let walked = s.walk(&table, &end);
    columns::assert_full_rows(walked.iter().map(|(o, _)| o.as_slice()), 3);
}
