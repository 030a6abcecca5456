//! Snapshots, on-demand refresh and walk pinning.
//!
//! The daemon reads the kernel only when somebody asks and the newest snapshot is older than
//! `max_age`; while nobody polls, nothing is read. Each snapshot is laid out once as a
//! [`MibView`] and shared as an `Arc`, so a view lives exactly as long as some walk can still
//! use it.
//!
//! Consistency has two layers:
//! - **Per SNMP request.** The master gives every AgentX PDU caused by one SNMP request the
//!   same transactionID (net-snmp turns a GetBulk into one GetNext per repetition), so the
//!   first PDU of a transaction pins a view and the rest reuse it.
//! - **Per walk.** A walk continues each SNMP request from the last OID the previous one
//!   returned. For every recent transaction we remember the last OID returned per
//!   SearchRange, and a GetNext/GetBulk starting exactly there continues on the same view,
//!   even past `max_age`. Entries expire after `walk_window`.
//!
//! Two walkers that ask for the very same continuation OID cannot be told apart. The newest
//! transaction to have returned that OID wins, so the later walker stays consistent and the
//! earlier one may switch to the newer snapshot at that point; with kernel tables of hundreds
//! of rows and walkers that start at different times this is rare.

use crate::index::StableIndexes;
use crate::memstat::{Snapshot, Source, TypeKey};
use crate::mib::{DaemonStatus, MibView, SourceStatus};
use crate::oid::Oid;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// How long a transaction's own pin lives. All AgentX PDUs of one SNMP request arrive
/// within the master's retry budget (net-snmp: 1 s × 6), so a pin is not needed for longer;
/// a walk's next request is matched through the continuation OIDs, which live for the
/// whole walk window.
const TRANSACTION_LIFETIME: Duration = Duration::from_secs(10);

/// At most this many transactions are remembered for pinning, whatever the window.
const MAX_PINNED_TRANSACTIONS: usize = 4096;
/// At most about this many continuation OIDs are kept (each is one walk that may still
/// continue), whatever the window.
const MAX_CONTINUATIONS: usize = 4096;

/// The per-request maps are touched on every PDU of a walk. Their keys come from the local
/// master (transaction IDs, OIDs we returned ourselves), so a multiply-rotate hash is safe
/// and several times cheaper than the default SipHash.
type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<WordHasher>>;

#[derive(Default)]
struct WordHasher(u64);

impl WordHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl Hasher for WordHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(w));
        }
    }

    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// Tunables of the cache.
#[derive(Clone, Copy, Debug)]
pub struct CacheConfig {
    /// A new walk or a Get gets data no older than this.
    pub max_age: Duration,
    /// How long a transaction's view and its continuation OIDs stay pinned.
    pub walk_window: Duration,
}

/// What a request pins: its view, and the last OID returned per SearchRange.
struct Pin {
    view: Arc<MibView>,
    last: Vec<Oid>,
    at: Instant,
    /// The continuation OID this transaction started from, and the transaction that had
    /// returned it, if it continued a walk.
    came_from: Option<(Oid, u32)>,
}

/// Tracks memTypeDiscontinuityTime per row key.
#[derive(Default)]
struct Discontinuity {
    /// Per key: allocation counter at the previous snapshot, discontinuity time, and the
    /// generation the key was last seen in.
    seen: HashMap<TypeKey, (Option<u64>, u32, u64)>,
}

impl Discontinuity {
    /// Discontinuity times for `snap`'s rows. Rows of the first snapshot get 0 (SNMPv2-TC:
    /// no discontinuity since the daemon started); a row that appears later, returns after
    /// vanishing, or whose allocation counter went backwards gets `now`.
    fn update(&mut self, snap: &Snapshot, first: bool, now: u32) -> Vec<u32> {
        let gen = snap.generation;
        snap.types
            .iter()
            .map(|t| {
                let key = t.key();
                let entry = self.seen.get(&key).copied();
                let disc = match entry {
                    _ if first => 0,
                    None => now,
                    Some((_, _, last_gen)) if last_gen + 1 != gen => now,
                    Some((Some(prev), _, _)) if t.allocs.is_some_and(|a| a < prev) => now,
                    Some((_, d, _)) => d,
                };
                self.seen.insert(key, (t.allocs, disc, gen));
                disc
            })
            .collect()
    }
}

/// The snapshot cache. Owned by the session task: one request at a time, no locks.
pub struct Cache {
    source: Source,
    source_name: String,
    indexes: StableIndexes,
    discontinuity: Discontinuity,
    cfg: CacheConfig,
    started: Instant,
    current: Option<Arc<MibView>>,
    current_at: Option<Instant>,
    generation: u64,
    last_attempt: Option<Instant>,
    refreshes: u64,
    failures: u64,
    last_error: Option<String>,
    master_uptime: Option<(u32, Instant)>,
    pins: FastMap<u32, Pin>,
    pin_order: VecDeque<(u32, Instant)>,
    /// Last OID returned → (its view, when, the transaction that returned it).
    continuations: FastMap<Oid, (Arc<MibView>, Instant, u32)>,
    empty: Arc<MibView>,
}

impl Cache {
    pub fn new(source: Source, indexes: StableIndexes, cfg: CacheConfig) -> Cache {
        let source_name = source.name();
        Cache {
            source,
            source_name,
            indexes,
            discontinuity: Discontinuity::default(),
            cfg,
            started: Instant::now(),
            current: None,
            current_at: None,
            generation: 0,
            last_attempt: None,
            refreshes: 0,
            failures: 0,
            last_error: None,
            master_uptime: None,
            pins: FastMap::default(),
            pin_order: VecDeque::new(),
            continuations: FastMap::default(),
            empty: Arc::new(MibView::empty()),
        }
    }

    pub fn set_config(&mut self, cfg: CacheConfig) {
        self.cfg = cfg;
    }

    /// Records the master's sysUpTime from an administrative Response.
    pub fn note_master_uptime(&mut self, ticks: u32) {
        self.master_uptime = Some((ticks, Instant::now()));
    }

    /// True once an administrative Response has told us the master's sysUpTime.
    pub fn master_uptime_known(&self) -> bool {
        self.master_uptime.is_some()
    }

    /// Starts over for a new AgentX session. The master numbers transactions afresh after a
    /// restart, so no old pin may serve the new session. When the master's sysUpTime went
    /// backwards (it restarted), every recorded discontinuity predates its
    /// re-initialization and reads 0 (SNMPv2-TC TimeStamp); the next request lays the view
    /// out again with those times.
    pub fn new_session(&mut self, master_restarted: bool) {
        self.pins.clear();
        self.pin_order.clear();
        self.continuations.clear();
        if master_restarted {
            for e in self.discontinuity.seen.values_mut() {
                e.1 = 0;
            }
            self.current_at = None;
        }
    }

    /// The master's sysUpTime now, as far as we know it (0 before the first Response).
    pub fn master_uptime_now(&self) -> u32 {
        match self.master_uptime {
            None => 0,
            Some((t, at)) => t.wrapping_add((at.elapsed().as_millis() / 10) as u32),
        }
    }

    /// Refreshes now, whatever the age. Returns the error text on failure.
    pub fn refresh(&mut self) -> Result<(), String> {
        let now = Instant::now();
        self.last_attempt = Some(now);
        self.refreshes += 1;
        match self.source.read() {
            Ok(mut types) => {
                self.generation += 1;
                let assigned = self.indexes.assign(&types);
                for problem in &assigned.problems {
                    tracing::warn!("{problem}");
                }
                // A type without an index (the index space is full) has no row to serve.
                let mut idx = Vec::with_capacity(types.len());
                let mut indexes = assigned.indexes.into_iter();
                types.retain(|_| match indexes.next().flatten() {
                    Some(i) => {
                        idx.push(i);
                        true
                    }
                    None => false,
                });
                let snap = Arc::new(Snapshot::new(
                    self.generation,
                    SystemTime::now(),
                    self.source_name.clone(),
                    types,
                ));
                let first = self.current.is_none() && self.generation == 1;
                let master_now = self.master_uptime_now();
                let disc = self.discontinuity.update(&snap, first, master_now);
                self.current = Some(Arc::new(MibView::new(snap, &idx, &disc)));
                self.current_at = Some(now);
                if self.last_error.take().is_some() {
                    tracing::info!("source {} readable again", self.source_name);
                }
                Ok(())
            }
            Err(e) => {
                self.failures += 1;
                let msg = e.to_string();
                if self.last_error.as_deref() != Some(msg.as_str()) {
                    tracing::warn!("refresh failed, serving the last good snapshot: {msg}");
                }
                self.last_error = Some(msg.clone());
                Err(msg)
            }
        }
    }

    /// The newest view, refreshed first when it is older than `max_age`. A failed source is
    /// retried at most once per `max_age`, so a broken source costs one read per window.
    fn fresh(&mut self, now: Instant) -> Arc<MibView> {
        let young =
            |t: Option<Instant>| t.is_some_and(|t| now.duration_since(t) < self.cfg.max_age);
        let fresh_enough = young(self.current_at);
        let failed_recently = self.last_error.is_some() && young(self.last_attempt);
        if !fresh_enough && !failed_recently {
            let _ = self.refresh();
        }
        self.current.clone().unwrap_or_else(|| self.empty.clone())
    }

    /// The view a request of this transaction would see without refreshing: its pinned view,
    /// else the newest one. For answers that do not depend on the snapshot (the scalars).
    pub fn peek(&self, transaction_id: u32) -> Arc<MibView> {
        self.pins
            .get(&transaction_id)
            .map(|p| p.view.clone())
            .or_else(|| self.current.clone())
            .unwrap_or_else(|| self.empty.clone())
    }

    /// The view that serves a request with this transactionID and these SearchRange starts.
    /// `continues` is true for GetNext/GetBulk, whose starts may continue an earlier walk.
    pub fn view_for(
        &mut self,
        transaction_id: u32,
        starts: &[&Oid],
        continues: bool,
    ) -> Arc<MibView> {
        let now = Instant::now();
        self.expire(now);
        if let Some(p) = self.pins.get(&transaction_id) {
            return p.view.clone();
        }
        // A request that starts where an earlier transaction stopped continues that walk.
        // The earlier transaction is then complete (the manager only sends the next request
        // after the whole answer), so its pin goes: pins follow the walks in progress, not
        // the request rate. Its continuation OIDs stay for their window, so that a manager
        // that re-sends the same request (a UDP retry is a new transaction) still continues
        // on the same snapshot.
        let mut continued = None;
        if continues {
            for s in starts {
                if let Some((v, _, txn)) = self.continuations.get(*s) {
                    continued = Some((v.clone(), *txn, (*s).clone()));
                    break;
                }
            }
        }
        let mut came_from = None;
        if let Some((_, earlier, from)) = &continued {
            if *earlier != transaction_id {
                self.unpin(*earlier, true);
            }
            came_from = Some((from.clone(), *earlier));
        }
        let continued = continued.map(|(v, ..)| v);
        let view = continued.unwrap_or_else(|| self.fresh(now));
        if self.pins.len() >= MAX_PINNED_TRANSACTIONS {
            if let Some((old, _)) = self.pin_order.pop_front() {
                self.unpin(old, true);
            }
        }
        self.pins.insert(
            transaction_id,
            Pin {
                view: view.clone(),
                last: Vec::new(),
                at: now,
                came_from,
            },
        );
        self.pin_order.push_back((transaction_id, now));
        view
    }

    /// Records the OID returned for SearchRange `range` of a transaction, so that the next
    /// request of the same walk, which starts there, continues on the same view.
    pub fn note_returned(&mut self, transaction_id: u32, range: usize, oid: Oid) {
        let Some(pin) = self.pins.get_mut(&transaction_id) else {
            return;
        };
        if pin.last.len() <= range {
            pin.last.resize(range + 1, Oid::null());
        }
        let old = std::mem::replace(&mut pin.last[range], oid.clone());
        if !old.is_null()
            && self
                .continuations
                .get(&old)
                .is_some_and(|c| c.2 == transaction_id)
        {
            self.continuations.remove(&old);
        }
        self.continuations
            .insert(oid, (pin.view.clone(), Instant::now(), transaction_id));
    }

    /// Drops a transaction's pin. Its continuation OIDs go too, unless `keep_continuations`
    /// (the walk moved on, or the pin was evicted by the count cap while its walk may still
    /// be running: they stay for their own window).
    fn unpin(&mut self, transaction_id: u32, keep_continuations: bool) {
        let Some(p) = self.pins.remove(&transaction_id) else {
            return;
        };
        if keep_continuations {
            // Its own continuations stay, but the point it started from is now two steps
            // behind the walk: no retry can ask for it any more.
            // (Only if that entry is still the one this walk came through: another walker
            // may have stopped at the same OID since, and the entry is now its.)
            if let Some((from, owner)) = p.came_from {
                if self.continuations.get(&from).is_some_and(|c| c.2 == owner) {
                    self.continuations.remove(&from);
                }
            }
            return;
        }
        for o in p.last {
            if self
                .continuations
                .get(&o)
                .is_some_and(|c| c.2 == transaction_id)
            {
                self.continuations.remove(&o);
            }
        }
    }

    fn expire(&mut self, now: Instant) {
        let window = self.cfg.walk_window;
        let pin_life = window.min(TRANSACTION_LIFETIME);
        while let Some(&(txn, at)) = self.pin_order.front() {
            if now.duration_since(at) < pin_life {
                break;
            }
            self.pin_order.pop_front();
            // The same ID may have been pinned again later; only drop the old pin.
            if self.pins.get(&txn).is_some_and(|p| p.at == at) {
                self.unpin(txn, false);
            }
        }
        // Pins that ended early leave stale entries behind in `pin_order`; compact it so
        // that its length, too, follows the walks in progress.
        if self.pin_order.len() > 2 * self.pins.len() + 64 {
            let pins = &self.pins;
            self.pin_order
                .retain(|(txn, at)| pins.get(txn).is_some_and(|p| p.at == *at));
            self.pin_order.shrink_to(4 * self.pins.len() + 64);
        }
        // Continuations expire with their window; past the cap, the oldest go first.
        let mut keep = window;
        while self.continuations.len() > MAX_CONTINUATIONS && !keep.is_zero() {
            self.continuations
                .retain(|_, (_, at, _)| now.duration_since(*at) < keep);
            keep /= 2;
        }
    }

    /// The scalars' values. Never refreshes.
    pub fn status(&self) -> DaemonStatus {
        let snap = self.current.as_ref().map(|v| v.snapshot());
        DaemonStatus {
            uptime_ticks: (self.started.elapsed().as_millis() / 10) as u32,
            snapshot_time_ms: snap.map(|s| s.taken_at_ms),
            snapshot_generation: snap.map(|s| s.generation),
            snapshot_age_ms: self.current_at.map(|t| t.elapsed().as_millis() as u64),
            refreshes: self.refreshes,
            refresh_failures: self.failures,
            source_name: self.source_name.clone(),
            status: match (&self.current, &self.last_error) {
                (None, _) => SourceStatus::Error,
                (Some(_), Some(_)) => SourceStatus::Stale,
                (Some(_), None) => SourceStatus::Ok,
            },
            last_error: self.last_error.clone().unwrap_or_default(),
        }
    }

    /// Number of views still referenced by pins (for tests and diagnostics).
    pub fn pinned(&self) -> usize {
        self.pins.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memstat::{Allocator, MemoryType, SourceKind};

    fn write_fixture(path: &std::path::Path, gen: u64) {
        let mut t = MemoryType::new(Allocator::Uma, "z");
        t.allocs = Some(gen * 10);
        let s = Snapshot::new(0, SystemTime::now(), String::new(), vec![t]);
        std::fs::write(path, crate::memstat::fixture::to_json(&s)).unwrap();
    }

    fn cache(dir: &std::path::Path, max_age: Duration) -> (Cache, std::path::PathBuf) {
        let p = dir.join("f.json");
        write_fixture(&p, 1);
        let src = Source::open(&SourceKind::Fixture(p.clone())).unwrap();
        let c = Cache::new(
            src,
            StableIndexes::in_memory(),
            CacheConfig {
                max_age,
                walk_window: Duration::from_secs(30),
            },
        );
        (c, p)
    }

    #[test]
    fn no_refresh_without_requests_and_pins_per_transaction_and_walk() {
        let dir = tempfile::tempdir().unwrap();
        let (mut c, p) = cache(dir.path(), Duration::ZERO);
        assert_eq!(c.status().refreshes, 0);
        assert_eq!(c.status().status, SourceStatus::Error);
        let start = Oid::from_slice(&[1, 3]);
        let v1 = c.view_for(1, &[&start], true);
        assert_eq!(v1.snapshot().generation, 1);
        write_fixture(&p, 2);
        // Same transaction: same view, even with max_age 0.
        assert!(Arc::ptr_eq(&v1, &c.view_for(1, &[&start], true)));
        let returned = Oid::from_slice(&[1, 3, 6]);
        c.note_returned(1, 0, returned.clone());
        // A new transaction continuing from the returned OID stays on generation 1.
        let v2 = c.view_for(2, &[&returned], true);
        assert!(Arc::ptr_eq(&v1, &v2));
        // A new walk (or a Get) refreshes.
        let v3 = c.view_for(3, &[&start], true);
        assert_eq!(v3.snapshot().generation, 2);
        let v4 = c.view_for(4, &[&returned], false);
        assert_eq!(v4.snapshot().generation, 3);
        assert_eq!(c.status().refreshes, 3);
    }

    #[test]
    fn pins_follow_walks_in_progress_and_a_retried_request_still_continues() {
        let dir = tempfile::tempdir().unwrap();
        let (mut c, p) = cache(dir.path(), Duration::ZERO);
        let first = c.view_for(1, &[&Oid::from_slice(&[1, 3])], true);
        let mut last = Oid::from_slice(&[1, 3, 0]);
        c.note_returned(1, 0, last.clone());
        write_fixture(&p, 2);
        // A long walk: each transaction continues from the one before.
        for txn in 2..10_000u32 {
            let v = c.view_for(txn, &[&last], true);
            assert!(Arc::ptr_eq(&v, &first));
            last = Oid::from_slice(&[1, 3, txn]);
            c.note_returned(txn, 0, last.clone());
        }
        assert!(c.pinned() <= 2, "{} pins for one walk", c.pinned());
        assert!(
            c.continuations.len() <= 3,
            "{} continuations",
            c.continuations.len()
        );
        // The manager re-sends its last request (a new transaction, same start) and then
        // continues: both stay on the walk's snapshot.
        let before = Oid::from_slice(&[1, 3, 9_998]);
        assert!(Arc::ptr_eq(&c.view_for(20_000, &[&before], true), &first));
        assert!(Arc::ptr_eq(&c.view_for(20_001, &[&before], true), &first));
    }

    #[test]
    fn a_walk_moving_on_leaves_another_walkers_continuation_alone() {
        let dir = tempfile::tempdir().unwrap();
        let (mut c, p) = cache(dir.path(), Duration::ZERO);
        let x = Oid::from_slice(&[1, 3, 1]);
        let y = Oid::from_slice(&[1, 3, 2]);
        // Walker A: transaction 1 stops at x, transaction 2 continues from x and stops at y.
        let a = c.view_for(1, &[&Oid::from_slice(&[1, 3])], true);
        c.note_returned(1, 0, x.clone());
        c.view_for(2, &[&x], true);
        c.note_returned(2, 0, y.clone());
        // Walker B, on a newer snapshot, stops at x too (transaction 10).
        write_fixture(&p, 2);
        let b = c.view_for(10, &[&Oid::from_slice(&[1, 2])], true);
        assert!(!Arc::ptr_eq(&a, &b));
        c.note_returned(10, 0, x.clone());
        // A moves on from y; B's continuation at x must survive it.
        assert!(Arc::ptr_eq(&c.view_for(3, &[&y], true), &a));
        assert!(Arc::ptr_eq(&c.view_for(11, &[&x], true), &b));
    }

    #[test]
    fn failed_refresh_serves_stale_data_and_recovers() {
        let dir = tempfile::tempdir().unwrap();
        let (mut c, p) = cache(dir.path(), Duration::ZERO);
        c.view_for(1, &[], false);
        std::fs::write(&p, "garbage").unwrap();
        let v = c.view_for(2, &[], false);
        assert_eq!(v.snapshot().generation, 1);
        let st = c.status();
        assert_eq!(st.status, SourceStatus::Stale);
        assert!(
            st.last_error.contains("f.json") && st.last_error.contains("line 1"),
            "{}",
            st.last_error
        );
        assert_eq!(st.refresh_failures, 1);
        write_fixture(&p, 3);
        let v = c.view_for(3, &[], false);
        assert_eq!(v.snapshot().generation, 2);
        assert_eq!(c.status().status, SourceStatus::Ok);
    }

    #[test]
    fn discontinuity_marks_new_and_reset_rows() {
        let mk = |gen, allocs: &[(&str, u64)]| {
            let types = allocs
                .iter()
                .map(|(n, a)| {
                    let mut t = MemoryType::new(Allocator::Uma, *n);
                    t.allocs = Some(*a);
                    t
                })
                .collect();
            Snapshot::new(gen, SystemTime::now(), String::new(), types)
        };
        let mut d = Discontinuity::default();
        assert_eq!(
            d.update(&mk(1, &[("a", 5), ("b", 5)]), true, 100),
            vec![0, 0]
        );
        assert_eq!(
            d.update(&mk(2, &[("a", 6), ("b", 1), ("c", 1)]), false, 200),
            vec![0, 200, 200]
        );
        assert_eq!(
            d.update(&mk(3, &[("a", 7), ("b", 2)]), false, 300),
            vec![0, 200]
        );
        // c vanished in generation 3 and returns in 4: its counters may have restarted.
        assert_eq!(
            d.update(&mk(4, &[("a", 8), ("c", 9)]), false, 400),
            vec![0, 400]
        );
    }
}
