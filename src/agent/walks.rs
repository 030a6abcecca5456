//! Walk tracking: which snapshot a request that continues a walk belongs to.
//!
//! The master tells us nothing about walks. A manager continues a walk by asking for the
//! successor of the last OID it was given, so the only trace of a walk is where it parked:
//! the instance we returned last. Every live view keeps a small slot for each of its own
//! instances where a walk parked: when that instance was last returned, and how many walks returned there have not
//! come back yet. A GetNext or GetBulk that starts at a parked instance continues on the
//! view that parked it; anything else is a new walk.
//!
//! Memory is bounded by design: at most [`MAX_LIVE_VIEWS`] views are alive, and a view
//! keeps at most one slot per instance of its own, whatever the request rate; in practice
//! only the walks waiting and the stops of the last few seconds. A view that is
//! no longer current lives only while a walk parked on it may still come back: at most
//! `walk_window` after it stopped being current, and no longer than `walk_window` after its
//! last park.

use crate::mib::MibView;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// At most this many views are alive at once: the current one and two that walks started
/// before the last two refreshes may still be using. A refresh that would need a fourth
/// waits until the oldest is free, which bounds how stale a new walk can be while others
/// walk (see ARCHITECTURE.md).
pub const MAX_LIVE_VIEWS: usize = 3;

/// Park times are kept in ticks of 100 µs from a per-view epoch, in 32 bits (fine enough to
/// order two managers that park within the same millisecond); the epoch moves before they
/// could overflow (after 5 days), and the parks move with it.
const TICK_NS: u128 = 100_000;
const EPOCH_SPAN: Duration = Duration::from_secs(4 * 86_400);
/// How long a walk may go quiet and still keep its snapshot when all [`MAX_LIVE_VIEWS`] are
/// in use and a refresh is due: longer than a manager's own retry of a lost request (1 s
/// for net-snmp's tools). The last request of a finished walk parks like any other, and
/// nothing tells a finished walk from a paused one; without this, walks that follow one
/// another would each hold a view for a whole walk-window and keep new walks off fresh
/// figures.
pub const PAUSE_GRACE: Duration = Duration::from_secs(2);
/// A walk that is moving asks again within this long of parking (see `pick_waiting`).
pub const TURNAROUND: Duration = Duration::from_secs(1);
/// Walks are remembered for a day at most, whatever the configuration says, so that the
/// epoch can always move past them.
const MAX_WINDOW: Duration = Duration::from_secs(86_400);

/// One instance's walk state.
#[derive(Clone, Copy, Default)]
struct Park {
    /// Ticks from the epoch, plus one, of the last time a walk parked here; 0: never.
    at: u32,
    /// Walks that parked here and have not continued yet.
    waiting: u16,
    /// The transactionID of the request that parked here last. Only a tie-breaker: a
    /// master that splits one SNMP request into several AgentX requests (net-snmp: one
    /// GetNext per repetition of a GetBulk) sends them all with one transactionID, so a
    /// continuation with the same one is that walk for certain.
    by: u32,
}

/// Instance numbers are small integers of our own numbering; a multiply-shift hash spreads
/// them at a fraction of SipHash's cost, on the path of every request.
#[derive(Default)]
struct InstanceHasher(u64);

impl Hasher for InstanceHasher {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u32(&mut self, i: u32) {
        self.0 = (u64::from(i) ^ self.0).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn finish(&self) -> u64 {
        // hashbrown takes the bucket from the low bits and a tag from the top seven.
        self.0 ^ (self.0 >> 29)
    }
}

type ParkMap = HashMap<u32, Park, BuildHasherDefault<InstanceHasher>>;

/// A re-sent request comes within the manager's retry budget (net-snmp's tools: 1 s × 5
/// retries); a park that was continued from is remembered this long for it.
const RESEND_WINDOW: Duration = Duration::from_secs(6);
/// Parks are pruned of what can no longer matter every this many parks.
const PRUNE_EVERY: u32 = 4096;

struct Tracked {
    view: Arc<MibView>,
    /// When this view became current.
    created: Instant,
    /// When this view stopped being current.
    retired: Option<Instant>,
    epoch: Instant,
    /// Per instance of `view` where a walk parked: at most one entry per instance, and in
    /// practice only the walks waiting and those that went on within [`RESEND_WINDOW`].
    parks: ParkMap,
    newest_park: Option<Instant>,
    /// The last mark a request that is no walk left (see [`WalkTracker::mark_lone`]).
    newest_mark: Option<Instant>,
    parks_since_prune: u32,
}

impl Tracked {
    fn new(view: Arc<MibView>, now: Instant) -> Tracked {
        Tracked {
            view,
            created: now,
            retired: None,
            epoch: now,
            parks: ParkMap::default(),
            newest_park: None,
            newest_mark: None,
            parks_since_prune: 0,
        }
    }

    /// True when no walk and no request can come back to this view: no park within
    /// `window`, no mark within [`RESEND_WINDOW`].
    fn unused(&self, now: Instant, window: Duration) -> bool {
        let older =
            |t: Option<Instant>, d: Duration| t.map_or(true, |t| now.duration_since(t) >= d);
        older(self.newest_park, window) && older(self.newest_mark, RESEND_WINDOW.min(window))
    }

    /// Drops the parks that can no longer matter: waiting ones older than `window`, and
    /// continued ones older than [`RESEND_WINDOW`].
    fn prune(&mut self, now: Instant, window: Duration) {
        let stamp = self.stamp(now);
        let ticks = |d: Duration| u32::try_from(d.as_nanos() / TICK_NS).unwrap_or(u32::MAX);
        let (keep_waiting, keep_done) = (ticks(window), ticks(RESEND_WINDOW.min(window)));
        self.parks.retain(|_, p| {
            let age = stamp.saturating_sub(p.at);
            age < if p.waiting > 0 {
                keep_waiting
            } else {
                keep_done
            }
        });
        self.parks_since_prune = 0;
    }

    fn stamp(&self, now: Instant) -> u32 {
        let ticks = now.saturating_duration_since(self.epoch).as_nanos() / TICK_NS;
        u32::try_from(ticks)
            .unwrap_or(u32::MAX - 1)
            .min(u32::MAX - 1)
            + 1
    }

    /// Moves the epoch up to `window` before `now`, keeping the times of the parks that
    /// are still live (the others are forgotten).
    fn rebase(&mut self, now: Instant, window: Duration) {
        let epoch = now.checked_sub(window).unwrap_or(now).max(self.epoch);
        let shift = self.stamp(epoch) - 1;
        for p in self.parks.values_mut() {
            p.at = p.at.saturating_sub(shift);
        }
        self.parks.retain(|_, p| p.at > 0);
        self.epoch = epoch;
    }

    /// The park at `oid`'s instance, when a walk parked there within `window`.
    fn live_park(&self, oid: &[u32], now: Instant, window: Duration) -> Option<(u32, Park)> {
        if self.parks.is_empty() {
            return None;
        }
        let instance = self.view.instance_of(oid)?;
        let park = *self.parks.get(&instance)?;
        if park.at == 0 {
            return None;
        }
        let age = self.stamp(now).saturating_sub(park.at);
        (u128::from(age) * TICK_NS < window.as_nanos()).then_some((instance, park))
    }

    fn forget_parks(&mut self) {
        self.parks = ParkMap::default();
        self.newest_park = None;
        self.newest_mark = None;
    }
}

/// How a continuation was decided, for the caller's statistics and logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Continuation {
    /// No view has a walk parked at any of the starts: a new walk.
    None,
    /// Exactly one view has a walk waiting there.
    Parked,
    /// Walks on more than one view wait at the same OID (the residual case): see
    /// `pick_waiting` for which is taken to be the one asking.
    Ambiguous,
    /// A walk parked there but already continued: a re-sent request, or a second manager
    /// that stops at the very same OIDs on the same view.
    Repeated,
}

/// The live views and the walks parked on them.
pub struct WalkTracker {
    window: Duration,
    /// Oldest first; the last one is the current view.
    views: Vec<Tracked>,
}

impl WalkTracker {
    pub fn new(window: Duration) -> WalkTracker {
        WalkTracker {
            window: window.min(MAX_WINDOW),
            views: Vec::with_capacity(MAX_LIVE_VIEWS),
        }
    }

    pub fn set_window(&mut self, window: Duration) {
        self.window = window.min(MAX_WINDOW);
    }

    /// Views alive now, the current one included.
    pub fn live_views(&self) -> usize {
        self.views.len()
    }

    /// Makes `view` the current one. The previous current view stays for the walks parked
    /// on it. Callers check [`make_room`](Self::make_room) first; should they not, the oldest
    /// view is dropped so that the bound holds whatever happens.
    pub fn adopt(&mut self, view: Arc<MibView>, now: Instant) {
        self.expire(now);
        if let Some(cur) = self.views.last_mut() {
            cur.retired = Some(now);
        }
        if self.views.len() >= MAX_LIVE_VIEWS {
            self.views.remove(0);
        }
        self.views.push(Tracked::new(view, now));
        // The view just retired goes at once when no walk is parked on it.
        self.expire(now);
    }

    /// True when a new view may be adopted. When all views are in use, the oldest retired
    /// one is let go if no walk on it has asked anything for [`PAUSE_GRACE`].
    pub fn make_room(&mut self, now: Instant) -> bool {
        self.expire(now);
        if self.views.len() >= MAX_LIVE_VIEWS {
            let quiet = self.views[0]
                .newest_park
                .map_or(true, |p| now.duration_since(p) >= PAUSE_GRACE);
            if quiet {
                self.views.remove(0);
            }
        }
        self.views.len() < MAX_LIVE_VIEWS
    }

    /// Drops the views no walk can come back to, and forgets the current view's parks once
    /// they are all older than the window.
    pub fn expire(&mut self, now: Instant) {
        let window = self.window;
        let dead = |t: &Tracked| t.unused(now, window);
        let last = self.views.len().saturating_sub(1);
        let mut i = 0;
        self.views.retain(|t| {
            let keep = i == last
                || !(dead(t) || t.retired.is_some_and(|r| now.duration_since(r) >= window));
            i += 1;
            keep
        });
        if let Some(cur) = self.views.last_mut() {
            if (cur.newest_park.is_some() || cur.newest_mark.is_some()) && dead(cur) {
                cur.forget_parks();
            }
            if now.saturating_duration_since(cur.epoch) >= EPOCH_SPAN {
                cur.rebase(now, window);
            }
        }
    }

    /// When [`expire`](Self::expire) next has something to do, if ever.
    pub fn next_expiry(&self) -> Option<Instant> {
        self.views
            .iter()
            .filter_map(|t| {
                let by_mark = t.newest_mark.map(|m| m + RESEND_WINDOW.min(self.window));
                let by_park = t.newest_park.map(|p| p + self.window).max(by_mark);
                let by_retire = t.retired.map(|r| r + self.window);
                match (by_park, by_retire) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                }
            })
            .min()
    }

    /// Forgets every walk (a new master session: no request of the old one comes back).
    pub fn reset(&mut self) {
        let cur = self.views.pop();
        self.views.clear();
        if let Some(mut c) = cur {
            c.retired = None;
            c.forget_parks();
            self.views.push(c);
        }
    }

    /// Records that a walk parked at `instance` of `view` (we returned it as the last OID of
    /// a range of request `transaction`). A view that is no longer live is ignored.
    pub fn park(&mut self, view: &Arc<MibView>, instance: u32, transaction: u32, now: Instant) {
        self.mark(view, instance, transaction, now, true);
    }

    /// Records where a request that is no walk (a lone GetNext, a re-sent request) stopped:
    /// nobody waits there, but the rest of the same request (net-snmp sends a GetBulk's
    /// repetitions as GetNexts with one transactionID) continues on the same view.
    pub fn mark_lone(
        &mut self,
        view: &Arc<MibView>,
        instance: u32,
        transaction: u32,
        now: Instant,
    ) {
        self.mark(view, instance, transaction, now, false);
    }

    fn mark(
        &mut self,
        view: &Arc<MibView>,
        instance: u32,
        transaction: u32,
        now: Instant,
        waits: bool,
    ) {
        let Some(t) = self
            .views
            .iter_mut()
            .rev()
            .find(|t| Arc::ptr_eq(&t.view, view))
        else {
            return;
        };
        if instance >= t.view.instance_count() {
            return;
        }
        let at = t.stamp(now);
        let p = t.parks.entry(instance).or_default();
        p.at = at;
        p.by = transaction;
        if waits {
            p.waiting = p.waiting.saturating_add(1);
            t.newest_park = Some(now);
        } else {
            t.newest_mark = Some(now);
        }
        t.parks_since_prune += 1;
        if t.parks_since_prune >= PRUNE_EVERY {
            t.prune(now, self.window);
        }
    }

    /// True when a walk parked on any live view within `recent`: walks are in progress.
    pub fn busy(&self, now: Instant, recent: Duration) -> bool {
        self.views
            .iter()
            .filter_map(|t| t.newest_park)
            .any(|p| now.saturating_duration_since(p) < recent)
    }

    /// The view, no older than `max_age`, on which a walk waits at `oid`, the most recently
    /// parked if several. A new walk whose first answer is that OID joins it, so that a
    /// lone GetNext cannot split a parked walk from its snapshot, and a walk that starts
    /// where another stopped shares its snapshot.
    pub fn waiting_at(&self, oid: &[u32], now: Instant, max_age: Duration) -> Option<Arc<MibView>> {
        self.views
            .iter()
            .filter(|t| now.saturating_duration_since(t.created) <= max_age)
            .filter_map(|t| {
                let (_, park) = t.live_park(oid, now, self.window)?;
                (park.waiting > 0).then(|| (t.stamp(now).saturating_sub(park.at), t))
            })
            .min_by_key(|(age, _)| *age)
            .map(|(_, t)| t.view.clone())
    }

    /// The view a GetNext or GetBulk of request `transaction` starting at `starts`
    /// continues on, if any walk parked at one of them. The walk that waited there is taken
    /// off.
    pub fn continuation<'s, S>(
        &mut self,
        starts: S,
        transaction: u32,
        now: Instant,
    ) -> (Option<Arc<MibView>>, Continuation)
    where
        S: IntoIterator<Item = &'s [u32]> + Clone,
    {
        if self.views.iter().all(|t| t.parks.is_empty()) {
            return (None, Continuation::None);
        }
        let window = self.window;
        // Per view: its waiting park among the starts, and its most recent park of any
        // kind. Ages compare across views on one clock. The waiting parks found are kept
        // (without allocating, for the usual few) to be taken off the chosen view after.
        const KEPT: usize = 8;
        let mut found = [(0usize, 0u32); KEPT];
        let mut n_found = 0usize;
        let mut overflow = false;
        let mut candidates = [(0usize, 0u32); MAX_LIVE_VIEWS];
        let mut n_candidates = 0usize;
        let mut repeated: Option<(usize, u32)> = None;
        let mut same_request = None;
        for (v, t) in self.views.iter().enumerate() {
            if t.parks.is_empty() {
                continue;
            }
            let stamp = t.stamp(now);
            let mut this_waiting: Option<u32> = None;
            for s in starts.clone() {
                let Some((instance, park)) = t.live_park(s, now, window) else {
                    continue;
                };
                let age = stamp.saturating_sub(park.at);
                if park.by == transaction {
                    same_request = Some((v, park.waiting > 0));
                }
                if park.waiting > 0 {
                    this_waiting = Some(this_waiting.map_or(age, |a: u32| a.min(age)));
                    if n_found < KEPT {
                        found[n_found] = (v, instance);
                        n_found += 1;
                    } else {
                        overflow = true;
                    }
                } else if repeated.map_or(true, |(_, a)| age < a) {
                    repeated = Some((v, age));
                }
            }
            if let Some(age) = this_waiting {
                candidates[n_candidates] = (v, age);
                n_candidates += 1;
            }
        }
        let views_waiting = n_candidates;
        let waiting = pick_waiting(&candidates[..n_candidates]);
        let (chosen, how) = match (same_request, waiting, repeated) {
            (Some((v, true)), ..) => (v, Continuation::Parked),
            (Some((v, false)), ..) => (v, Continuation::Repeated),
            (None, Some((v, _)), _) if views_waiting > 1 => (v, Continuation::Ambiguous),
            (None, Some((v, _)), _) => (v, Continuation::Parked),
            (None, None, Some((v, _))) => (v, Continuation::Repeated),
            (None, None, None) => return (None, Continuation::None),
        };
        let t = &mut self.views[chosen];
        let taken: Vec<u32> = if overflow {
            starts
                .into_iter()
                .filter_map(|s| t.live_park(s, now, window))
                .filter(|(_, park)| park.waiting > 0)
                .map(|(instance, _)| instance)
                .collect()
        } else {
            Vec::new()
        };
        // With more hits than kept, `taken` has them all.
        let kept = found[..if overflow { 0 } else { n_found }]
            .iter()
            .filter(|(v, _)| *v == chosen)
            .map(|&(_, instance)| instance);
        for instance in kept.chain(taken) {
            if let Some(p) = t.parks.get_mut(&instance) {
                p.waiting = p.waiting.saturating_sub(1);
            }
        }
        (Some(t.view.clone()), how)
    }
}

/// Of the views with a walk waiting at the same OID, the one whose walk is asking now.
/// Walks that are moving come back within one round trip of parking, in about the order
/// they parked: the master queues every manager's requests alike. So among parks younger
/// than [`TURNAROUND`], the oldest. A park older than that is a walk that paused, or the last
/// of one that ended; when only such parks are left, the most recent. Two moving walks that
/// come back out of order are the residual case of ARCHITECTURE.md.
fn pick_waiting(candidates: &[(usize, u32)]) -> Option<(usize, u32)> {
    let turnaround = (TURNAROUND.as_nanos() / TICK_NS) as u32;
    candidates
        .iter()
        .filter(|(_, age)| *age < turnaround)
        .max_by_key(|(_, age)| *age)
        .or_else(|| candidates.iter().min_by_key(|(_, age)| *age))
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memstat::{Allocator, MemoryType, Snapshot};
    use crate::mib::MEMSTAT_MIB_ROOT;

    fn view(gen: u64) -> Arc<MibView> {
        let types = (0..5)
            .map(|i| {
                let mut t = MemoryType::new(Allocator::Uma, format!("z{i}"));
                t.allocs = Some(gen);
                t
            })
            .collect();
        let snap = Arc::new(Snapshot::new(gen, std::time::UNIX_EPOCH, "t".into(), types));
        Arc::new(MibView::new(snap, &[1, 2, 3, 4, 5], &[0; 5]))
    }

    /// memTypeAllocs.<row>.
    fn allocs(row: u32) -> Vec<u32> {
        let mut v = MEMSTAT_MIB_ROOT.to_vec();
        v.extend_from_slice(&[1, 2, 1, 13, row]);
        v
    }

    fn park_at(w: &mut WalkTracker, v: &Arc<MibView>, row: u32, now: Instant) {
        let i = v.instance_of(&allocs(row)).unwrap();
        w.park(v, i, 0, now);
    }

    const W: Duration = Duration::from_secs(5);

    /// A tracker with view `a` current since `t0`, and `b` ready to adopt.
    fn two_views() -> (WalkTracker, Arc<MibView>, Arc<MibView>, Instant) {
        let t0 = Instant::now();
        let mut w = WalkTracker::new(W);
        let (a, b) = (view(1), view(2));
        w.adopt(a.clone(), t0);
        (w, a, b, t0)
    }

    impl WalkTracker {
        /// A continuation by a request other than any that parked.
        fn continuation_any(
            &mut self,
            starts: &[&[u32]],
            now: Instant,
        ) -> (Option<Arc<MibView>>, Continuation) {
            self.continuation(starts.iter().copied(), u32::MAX, now)
        }
    }

    #[test]
    fn a_walk_continues_on_the_view_it_parked_on_after_a_refresh() {
        let t0 = Instant::now();
        let mut w = WalkTracker::new(W);
        let (a, b) = (view(1), view(2));
        w.adopt(a.clone(), t0);
        park_at(&mut w, &a, 2, t0);
        w.adopt(b.clone(), t0 + Duration::from_millis(10));
        let (v, how) = w.continuation_any(&[&allocs(2)], t0 + Duration::from_millis(20));
        assert!(Arc::ptr_eq(&v.unwrap(), &a));
        assert_eq!(how, Continuation::Parked);
        // A start nobody parked at is a new walk.
        let (v, how) = w.continuation_any(&[&allocs(3)], t0 + Duration::from_millis(20));
        assert!(v.is_none());
        assert_eq!(how, Continuation::None);
    }

    #[test]
    fn moving_walks_parked_at_the_same_oid_on_two_views_come_back_in_order() {
        let (mut w, a, b, t0) = two_views();
        let ms = |n| t0 + Duration::from_millis(n);
        park_at(&mut w, &a, 2, ms(1));
        w.adopt(b.clone(), ms(2));
        park_at(&mut w, &b, 1, ms(3));
        // Both move on to row 3, A first.
        assert!(Arc::ptr_eq(
            &w.continuation_any(&[&allocs(2)], ms(4)).0.unwrap(),
            &a
        ));
        park_at(&mut w, &a, 3, ms(5));
        assert!(Arc::ptr_eq(
            &w.continuation_any(&[&allocs(1)], ms(5)).0.unwrap(),
            &b
        ));
        park_at(&mut w, &b, 3, ms(6));
        // Both are moving: the one that parked first is taken to come back first.
        let (first, how) = w.continuation_any(&[&allocs(3)], ms(7));
        assert_eq!(how, Continuation::Ambiguous);
        assert!(Arc::ptr_eq(&first.unwrap(), &a), "the first to park");
        let (second, how) = w.continuation_any(&[&allocs(3)], ms(8));
        assert_eq!(how, Continuation::Parked);
        assert!(Arc::ptr_eq(&second.unwrap(), &b));
    }

    #[test]
    fn a_lingering_park_on_another_view_does_not_capture_a_walk() {
        let (mut w, a, b, t0) = two_views();
        let ms = |n| t0 + Duration::from_millis(n);
        // A walk on `a` ended at row 3 (or a lone GetNext returned row 3): nobody comes back.
        park_at(&mut w, &a, 3, ms(1));
        w.adopt(b.clone(), ms(2));
        // A walk on `b` parks at row 3 and continues one round trip later.
        park_at(&mut w, &b, 3, ms(1_500));
        let (v, how) = w.continuation_any(&[&allocs(3)], ms(1_501));
        assert_eq!(how, Continuation::Ambiguous);
        assert!(Arc::ptr_eq(&v.unwrap(), &b), "the walk that parked last");
        // The lingering park is still there for a walk of `a` that paused.
        let (v, how) = w.continuation_any(&[&allocs(3)], ms(1_900));
        assert_eq!(how, Continuation::Parked);
        assert!(Arc::ptr_eq(&v.unwrap(), &a));
    }

    #[test]
    fn a_new_walk_finds_the_view_a_walk_waits_on() {
        let (mut w, a, b, t0) = two_views();
        let ms = |n| t0 + Duration::from_millis(n);
        park_at(&mut w, &a, 3, ms(1));
        w.adopt(b.clone(), ms(600));
        let found = w.waiting_at(&allocs(3), ms(700), Duration::from_secs(1));
        assert!(Arc::ptr_eq(&found.unwrap(), &a));
        assert!(w
            .waiting_at(&allocs(4), ms(700), Duration::from_secs(1))
            .is_none());
        // Too old to join.
        assert!(w
            .waiting_at(&allocs(3), ms(700), Duration::from_millis(500))
            .is_none());
        // Once the walk went on, nobody waits there.
        w.continuation_any(&[&allocs(3)], ms(800));
        assert!(w
            .waiting_at(&allocs(3), ms(900), Duration::from_secs(1))
            .is_none());
    }

    #[test]
    fn a_continuation_of_the_same_request_is_never_ambiguous() {
        let (mut w, a, b, t0) = two_views();
        let ms = |n| t0 + Duration::from_millis(n);
        park_at(&mut w, &a, 2, ms(1));
        w.adopt(b.clone(), ms(2));
        // An old walk waits at row 3 on `a`; a request (transaction 7) of a new walk on
        // `b` stops there in the middle of its repetitions and goes on at once.
        assert!(w.continuation_any(&[&allocs(2)], ms(3)).0.is_some());
        park_at(&mut w, &a, 3, ms(3));
        let i = b.instance_of(&allocs(3)).unwrap();
        w.park(&b, i, 7, ms(4));
        let (v, how) = w.continuation([allocs(3).as_slice()], 7, ms(4));
        assert_eq!(how, Continuation::Parked);
        assert!(Arc::ptr_eq(&v.unwrap(), &b));
        let (v, _) = w.continuation_any(&[&allocs(3)], ms(5));
        assert!(Arc::ptr_eq(&v.unwrap(), &a));
    }

    #[test]
    fn two_walks_on_one_view_at_the_same_oid_both_continue_there() {
        let (mut w, a, b, t0) = two_views();
        let ms = |n| t0 + Duration::from_millis(n);
        park_at(&mut w, &a, 4, ms(1));
        park_at(&mut w, &a, 4, ms(2));
        w.adopt(b.clone(), ms(3));
        for _ in 0..2 {
            let (v, how) = w.continuation_any(&[&allocs(4)], ms(4));
            assert_eq!(how, Continuation::Parked);
            assert!(Arc::ptr_eq(&v.unwrap(), &a));
        }
        // A re-sent request (the answer was lost) still finds the walk's view.
        let (v, how) = w.continuation_any(&[&allocs(4)], ms(5));
        assert_eq!(how, Continuation::Repeated);
        assert!(Arc::ptr_eq(&v.unwrap(), &a));
    }

    #[test]
    fn parks_expire_after_the_window_and_retired_views_go() {
        let t0 = Instant::now();
        let mut w = WalkTracker::new(W);
        let (a, b) = (view(1), view(2));
        w.adopt(a.clone(), t0);
        park_at(&mut w, &a, 1, t0);
        w.adopt(b.clone(), t0 + Duration::from_secs(1));
        assert_eq!(w.live_views(), 2);
        assert_eq!(w.next_expiry(), Some(t0 + W));
        let late = t0 + W;
        let (v, _) = w.continuation_any(&[&allocs(1)], late);
        assert!(v.is_none(), "a park older than the window is forgotten");
        w.expire(late);
        assert_eq!(w.live_views(), 1, "nobody can come back to the old view");
        assert!(Arc::ptr_eq(&w.views[0].view, &b));
    }

    #[test]
    fn a_retired_view_lives_at_most_a_window_after_it_stopped_being_current() {
        let t0 = Instant::now();
        let s = |n| t0 + Duration::from_secs(n);
        let mut w = WalkTracker::new(W);
        let (a, b) = (view(1), view(2));
        w.adopt(a.clone(), t0);
        park_at(&mut w, &a, 1, s(0));
        w.adopt(b, s(1));
        // A walk keeps going on the old view...
        for k in 1..5 {
            let (v, _) = w.continuation_any(&[&allocs(k)], s(k as u64));
            assert!(Arc::ptr_eq(&v.unwrap(), &a), "step {k}");
            park_at(&mut w, &a, k + 1, s(k as u64));
        }
        w.expire(s(5));
        assert_eq!(w.live_views(), 2);
        // ...but 5 s after the refresh it has run longer than the window: the view goes,
        // though its last park is only 2 s old.
        w.expire(s(6));
        assert_eq!(w.live_views(), 1);
    }

    #[test]
    fn a_full_set_lets_go_of_the_oldest_view_only_when_its_walks_went_quiet() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut w = WalkTracker::new(W);
        let (a, b, c) = (view(1), view(2), view(3));
        for (row, v, at) in [(1, &a, 0), (2, &b, 10), (3, &c, 20)] {
            assert!(w.make_room(ms(at)));
            w.adopt(v.clone(), ms(at));
            park_at(&mut w, v, row, ms(at + 1));
        }
        // a, b and c each hold a parked walk; a's went quiet 1 ms ago.
        assert!(!w.make_room(ms(500)), "a walk on `a` may still come back");
        assert_eq!(w.live_views(), 3);
        // It keeps asking: still no room.
        let (v, _) = w.continuation_any(&[&allocs(1)], ms(1_000));
        assert!(Arc::ptr_eq(&v.unwrap(), &a));
        park_at(&mut w, &a, 4, ms(1_000));
        assert!(!w.make_room(ms(2_500)));
        // Quiet for the grace: `a` goes, the others stay.
        assert!(w.make_room(ms(1_000) + PAUSE_GRACE));
        assert_eq!(w.live_views(), 2);
        assert!(!w.views.iter().any(|t| Arc::ptr_eq(&t.view, &a)));
    }

    #[test]
    fn parks_that_can_no_longer_matter_are_pruned() {
        let t0 = Instant::now();
        let mut w = WalkTracker::new(W);
        let a = view(1);
        w.adopt(a.clone(), t0);
        // A long walk, one park per step, each continued at once, one every millisecond.
        let n = a.instance_count();
        for step in 0..100_000u64 {
            let now = t0 + Duration::from_millis(step);
            let i = (step % u64::from(n)) as u32;
            w.park(&a, i, 0, now);
            let (_, how) = w.continuation_any(&[&allocs(i % 5 + 1)], now);
            assert_ne!(how, Continuation::Ambiguous);
        }
        assert!(w.views[0].parks.len() <= n as usize);
        // Nothing older than the resend window survives a prune.
        let late = t0 + Duration::from_secs(200);
        w.views[0].prune(late, W);
        assert!(w.views[0].parks.is_empty());
    }

    #[test]
    fn parks_survive_a_move_of_the_epoch() {
        let t0 = Instant::now();
        let mut w = WalkTracker::new(W);
        let a = view(1);
        w.adopt(a.clone(), t0);
        let late = t0 + EPOCH_SPAN + Duration::from_secs(1);
        park_at(&mut w, &a, 2, late);
        w.expire(late + Duration::from_secs(1));
        assert!(w.views[0].epoch > t0, "the epoch moved");
        let (v, how) = w.continuation_any(&[&allocs(2)], late + Duration::from_secs(2));
        assert_eq!(how, Continuation::Parked);
        assert!(v.is_some());
    }

    #[test]
    fn never_more_than_the_bound_whatever_the_requests() {
        let t0 = Instant::now();
        let mut w = WalkTracker::new(W);
        let mut state = 12345u64;
        let mut views = Vec::new();
        for step in 0..20_000u64 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let now = t0 + Duration::from_millis(step);
            if state % 7 == 0 && w.make_room(now) {
                let v = view(step);
                views.push(v.clone());
                w.adopt(v, now);
            }
            let row = (state >> 8) as u32 % 6 + 1;
            let (v, _) = w.continuation_any(&[&allocs(row)], now);
            let v = v.or_else(|| w.views.last().map(|t| t.view.clone()));
            if let Some(v) = v {
                if let Some(i) = v.instance_of(&allocs(row % 5 + 1)) {
                    w.park(&v, i, step as u32, now);
                }
            }
            assert!(w.live_views() <= MAX_LIVE_VIEWS);
        }
        // Views that are no longer tracked are no longer referenced by the tracker.
        let alive = views.iter().filter(|v| Arc::strong_count(v) > 1).count();
        assert!(alive <= MAX_LIVE_VIEWS, "{alive}");
    }
}
