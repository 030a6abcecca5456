//! Walk tracking: which snapshot a request that continues a walk belongs to.
//!
//! The master tells us nothing about walks. A manager continues a walk by asking for the
//! successor of the last OID it was given, so the only trace of a walk is where it parked:
//! the instance we returned last. Every live view keeps one small slot per instance of its
//! own: when that instance was last returned, and how many walks returned there have not
//! come back yet. A GetNext or GetBulk that starts at a parked instance continues on the
//! view that parked it; anything else is a new walk.
//!
//! Memory is bounded by design: at most [`MAX_LIVE_VIEWS`] views are alive, and the slots
//! of a view are one array the size of that view, whatever the request rate. A view that is
//! no longer current lives only while a walk parked on it may still come back: at most
//! `walk_window` after it stopped being current, and no longer than `walk_window` after its
//! last park.

use crate::mib::MibView;
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

struct Tracked {
    view: Arc<MibView>,
    /// When this view stopped being current.
    retired: Option<Instant>,
    epoch: Instant,
    /// One slot per instance of `view`, allocated at the first park.
    parks: Vec<Park>,
    newest_park: Option<Instant>,
}

impl Tracked {
    fn new(view: Arc<MibView>, now: Instant) -> Tracked {
        Tracked {
            view,
            retired: None,
            epoch: now,
            parks: Vec::new(),
            newest_park: None,
        }
    }

    fn stamp(&self, now: Instant) -> u32 {
        let ticks = now.saturating_duration_since(self.epoch).as_nanos() / TICK_NS;
        u32::try_from(ticks).unwrap_or(u32::MAX - 1).min(u32::MAX - 1) + 1
    }

    /// Moves the epoch up to `window` before `now`, keeping the times of the parks that
    /// are still live (the others are forgotten).
    fn rebase(&mut self, now: Instant, window: Duration) {
        let epoch = now.checked_sub(window).unwrap_or(now).max(self.epoch);
        let shift = self.stamp(epoch) - 1;
        for p in &mut self.parks {
            p.at = if p.at > shift { p.at - shift } else { 0 };
        }
        self.epoch = epoch;
    }

    /// The park at `oid`'s instance, when a walk parked there within `window`.
    fn live_park(&self, oid: &[u32], now: Instant, window: Duration) -> Option<(u32, Park)> {
        if self.parks.is_empty() {
            return None;
        }
        let instance = self.view.instance_of(oid)?;
        let park = *self.parks.get(instance as usize)?;
        if park.at == 0 {
            return None;
        }
        let age = self.stamp(now).saturating_sub(park.at);
        (u128::from(age) * TICK_NS < window.as_nanos()).then_some((instance, park))
    }

    fn forget_parks(&mut self) {
        self.parks = Vec::new();
        self.newest_park = None;
    }
}

/// How a continuation was decided, for the caller's statistics and logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Continuation {
    /// No view has a walk parked at any of the starts: a new walk.
    None,
    /// Exactly one view has a walk waiting there.
    Parked,
    /// Walks on more than one view wait at the same OID (the residual case): the one that
    /// parked first is taken to come back first.
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
    /// on it. Callers check [`has_room`](Self::has_room) first; should they not, the oldest
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

    /// True when a new view may be adopted without dropping one that a walk may still need.
    pub fn has_room(&mut self, now: Instant) -> bool {
        self.expire(now);
        self.views.len() < MAX_LIVE_VIEWS
    }

    /// Drops the views no walk can come back to, and forgets the current view's parks once
    /// they are all older than the window.
    pub fn expire(&mut self, now: Instant) {
        let window = self.window;
        let dead = |t: &Tracked| t.newest_park.map_or(true, |p| now.duration_since(p) >= window);
        let last = self.views.len().saturating_sub(1);
        let mut i = 0;
        self.views.retain(|t| {
            let keep = i == last
                || !(dead(t) || t.retired.is_some_and(|r| now.duration_since(r) >= window));
            i += 1;
            keep
        });
        if let Some(cur) = self.views.last_mut() {
            if cur.newest_park.is_some() && dead(cur) {
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
                let by_park = t.newest_park.map(|p| p + self.window);
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
        let Some(t) = self
            .views
            .iter_mut()
            .rev()
            .find(|t| Arc::ptr_eq(&t.view, view))
        else {
            return;
        };
        let n = t.view.instance_count() as usize;
        if t.parks.is_empty() {
            t.parks = vec![Park::default(); n];
        }
        let at = t.stamp(now);
        if let Some(p) = t.parks.get_mut(instance as usize) {
            p.at = at;
            p.by = transaction;
            p.waiting = p.waiting.saturating_add(1);
            t.newest_park = Some(now);
        }
    }

    /// The view a GetNext or GetBulk of request `transaction` starting at `starts`
    /// continues on, if any walk parked at one of them. The walk that waited there is taken
    /// off.
    pub fn continuation(
        &mut self,
        starts: &[&[u32]],
        transaction: u32,
        now: Instant,
    ) -> (Option<Arc<MibView>>, Continuation) {
        if self.views.iter().all(|t| t.newest_park.is_none()) {
            return (None, Continuation::None);
        }
        let window = self.window;
        // Per view: its earliest waiting park among the starts, and its latest park at all.
        let mut waiting: Option<(usize, u32)> = None;
        let mut views_waiting = 0;
        let mut repeated: Option<(usize, u32)> = None;
        let mut same_request = None;
        for (v, t) in self.views.iter().enumerate() {
            let mut this_waiting: Option<u32> = None;
            for s in starts {
                let Some((_, park)) = t.live_park(s, now, window) else {
                    continue;
                };
                // Compare park times across views on one clock: the age of the park.
                let age = t.stamp(now).saturating_sub(park.at);
                if park.waiting > 0 && park.by == transaction {
                    same_request = Some(v);
                }
                if park.waiting > 0 {
                    this_waiting = Some(this_waiting.map_or(age, |a: u32| a.max(age)));
                } else if repeated.map_or(true, |(_, a)| age < a) {
                    repeated = Some((v, age));
                }
            }
            if let Some(age) = this_waiting {
                views_waiting += 1;
                // The oldest park first: the walk that stopped first is the one that comes
                // back first, since every manager takes about the same time to turn round.
                if waiting.map_or(true, |(_, a)| age > a) {
                    waiting = Some((v, age));
                }
            }
        }
        let (chosen, how) = match (same_request, waiting, repeated) {
            (Some(v), ..) => (v, Continuation::Parked),
            (None, Some((v, _)), _) if views_waiting > 1 => (v, Continuation::Ambiguous),
            (None, Some((v, _)), _) => (v, Continuation::Parked),
            (None, None, Some((v, _))) => (v, Continuation::Repeated),
            (None, None, None) => return (None, Continuation::None),
        };
        let t = &mut self.views[chosen];
        for s in starts {
            if let Some((instance, park)) = t.live_park(s, now, window) {
                if park.waiting > 0 {
                    t.parks[instance as usize].waiting -= 1;
                }
            }
        }
        (Some(t.view.clone()), how)
    }
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

    impl WalkTracker {
        /// A continuation by a request other than any that parked.
        fn continuation_any(
            &mut self,
            starts: &[&[u32]],
            now: Instant,
        ) -> (Option<Arc<MibView>>, Continuation) {
            self.continuation(starts, u32::MAX, now)
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
    fn walks_parked_at_the_same_oid_on_two_views_come_back_in_order() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut w = WalkTracker::new(W);
        let (a, b) = (view(1), view(2));
        w.adopt(a.clone(), t0);
        // Walk A parks at row 2 on the old view; walk B, on the new one, at row 1.
        park_at(&mut w, &a, 2, ms(1));
        w.adopt(b.clone(), ms(2));
        park_at(&mut w, &b, 1, ms(3));
        // A moves on to row 3 first, B just after.
        assert!(Arc::ptr_eq(&w.continuation_any(&[&allocs(2)], ms(4)).0.unwrap(), &a));
        park_at(&mut w, &a, 3, ms(5));
        assert!(Arc::ptr_eq(&w.continuation_any(&[&allocs(1)], ms(5)).0.unwrap(), &b));
        park_at(&mut w, &b, 3, ms(6));
        let (first, how) = w.continuation_any(&[&allocs(3)], ms(7));
        assert_eq!(how, Continuation::Ambiguous);
        assert!(Arc::ptr_eq(&first.unwrap(), &a), "the first to park");
        let (second, how) = w.continuation_any(&[&allocs(3)], ms(8));
        assert_eq!(how, Continuation::Parked);
        assert!(Arc::ptr_eq(&second.unwrap(), &b));
    }

    #[test]
    fn a_continuation_of_the_same_request_is_never_ambiguous() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut w = WalkTracker::new(W);
        let (a, b) = (view(1), view(2));
        w.adopt(a.clone(), t0);
        park_at(&mut w, &a, 2, ms(1));
        w.adopt(b.clone(), ms(2));
        // An old walk waits at row 3 on `a`; a request (transaction 7) of a new walk on
        // `b` stops there in the middle of its repetitions and goes on at once.
        assert!(w.continuation_any(&[&allocs(2)], ms(3)).0.is_some());
        park_at(&mut w, &a, 3, ms(3));
        let i = b.instance_of(&allocs(3)).unwrap();
        w.park(&b, i, 7, ms(4));
        let (v, how) = w.continuation(&[&allocs(3)], 7, ms(4));
        assert_eq!(how, Continuation::Parked);
        assert!(Arc::ptr_eq(&v.unwrap(), &b));
        let (v, _) = w.continuation_any(&[&allocs(3)], ms(5));
        assert!(Arc::ptr_eq(&v.unwrap(), &a));
    }

    #[test]
    fn two_walks_on_one_view_at_the_same_oid_both_continue_there() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut w = WalkTracker::new(W);
        let (a, b) = (view(1), view(2));
        w.adopt(a.clone(), t0);
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
            if state % 7 == 0 && w.has_room(now) {
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
