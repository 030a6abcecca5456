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
pub(crate) const MAX_LIVE_VIEWS: usize = 3;

/// Park times are kept in ticks of 100 µs from a per-view epoch, in 32 bits (fine enough to
/// order two managers that park within the same millisecond); the epoch moves before they
/// could overflow (after 5 days), and the parks move with it.
const TICK_NS: u32 = 100_000;
const TICKS_PER_SEC: u64 = 10_000;
const EPOCH_SPAN: Duration = Duration::from_secs(4 * 86_400);

/// The timing heuristics that tell walks apart, in one place. The master gives no walk
/// identity, so these are guesses about how managers behave, tuned to net-snmp's tools and
/// masters; they are not operator settings (ARCHITECTURE.md states the contract they keep).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WalkPolicy {
    /// A walk that parked within its *in-progress window* is moving: it asks again within
    /// about a round trip. The window is max-age, but at least `in_progress_min` (a manager
    /// under load, or a master serving many, takes that long between two requests) and at
    /// most `in_progress_max`. It is at once the quiet window of the freshness clause (no
    /// walk parked within it: nothing walks), the age up to which a park may be joined by a
    /// new walk, the age below which a walk waiting at an OID is taken to be moving when
    /// walks of several views wait there, and the longest time within which a request that
    /// starts where a walk went on may be taken to be that walk (see `repeat_turnarounds`).
    pub(crate) in_progress_min: Duration,
    pub(crate) in_progress_max: Duration,
    /// How long a walk may go quiet and still keep its snapshot when all [`MAX_LIVE_VIEWS`]
    /// are in use and a refresh is due: longer than a manager's own retry of a lost request
    /// (1 s for net-snmp's tools). The last request of a finished walk parks like any
    /// other, and nothing tells a finished walk from a paused one; without this, walks that
    /// follow one another would each hold a view for a whole walk-window and keep new walks
    /// off fresh figures.
    pub(crate) pause_grace: Duration,
    /// A re-sent request comes within the manager's retry budget (net-snmp's tools: 1 s × 5
    /// retries); a park that was continued from is remembered this long for it.
    pub(crate) resend_window: Duration,
    /// A request that starts where a walk went on is that walk, whose park a lone GetNext
    /// took just before it came back, only when it comes within this many of the walk's
    /// turnarounds of the taking (the average turnaround of walks, for a park with none of
    /// its own), plus `repeat_slack` (scheduling jitter): the walk asks within one
    /// turnaround of parking, so later than that it has gone on already, and the request
    /// is a lone GetNext that must not park (see [`choose`]).
    pub(crate) repeat_turnarounds: u32,
    pub(crate) repeat_slack: Duration,
}

impl WalkPolicy {
    pub(crate) const DEFAULT: WalkPolicy = WalkPolicy {
        in_progress_min: Duration::from_millis(100),
        in_progress_max: Duration::from_secs(1),
        pause_grace: Duration::from_secs(2),
        resend_window: Duration::from_secs(6),
        repeat_turnarounds: 4,
        repeat_slack: Duration::from_millis(5),
    };

    /// The in-progress window for `max_age`.
    pub(crate) fn in_progress(&self, max_age: Duration) -> Duration {
        max_age.clamp(self.in_progress_min, self.in_progress_max)
    }
}
/// Walks are remembered for a day at most, whatever the configuration says, so that the
/// epoch can always move past them.
const MAX_WINDOW: Duration = Duration::from_secs(86_400);

/// One instance's walk state.
#[derive(Clone, Copy, Default)]
struct Park {
    /// Ticks from the epoch, plus one, of the last time a walk parked here, or, once all
    /// went on, of the last time one went on; 0: never.
    at: u32,
    /// Walks that parked here and have not continued yet (saturating: 255 is plenty).
    waiting: u8,
    /// [`WALKED`] and [`CONTESTED`].
    flags: u8,
    /// How long the walk that parked here takes to come back, in ticks: a moving average
    /// over its returns while it was moving (0: not known, a new walk). Two walks waiting at one OID on two views come back in the
    /// order their turnarounds say (see [`choose`]).
    turnaround: u16,
    /// The transactionID of the request that parked here last. Only a tie-breaker: a
    /// master that splits one SNMP request into several AgentX requests (net-snmp: one
    /// GetNext per repetition of a GetBulk) sends them all with one transactionID, so a
    /// continuation with the same one is that walk for certain.
    by: u32,
}

/// A walk parked here (else only requests that are no walk stopped here: a mark, which
/// only the rest of its own request follows).
const WALKED: u8 = 1;
/// Moving walks of two views waited here and one of them was taken to be asking (an
/// ambiguous continuation): the park taken off keeps the time its walk parked, and the
/// others are passed over (see [`WalkTracker::pass_over`]). The next request from here
/// with one start settles which walk asked first (see [`second_look`]) and clears the mark;
/// a passed-over park whose walk never asks again keeps it until a walk parks there anew or
/// it expires, and a taken park's mark means nothing once it is older than the in-progress
/// window.
const CONTESTED: u8 = 2;

impl Park {
    fn walked(&self) -> bool {
        self.flags & WALKED != 0
    }

    fn contested(&self) -> bool {
        self.flags & CONTESTED != 0
    }
}

// Twelve bytes a slot, as ARCHITECTURE.md says.
const _: () = assert!(std::mem::size_of::<Park>() == 12);

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

/// Parks are pruned of what can no longer matter every this many parks: often enough that
/// a long walk's continued parks do not pile up between two prunes, rarely enough that the
/// pass over the map costs nothing per request.
const PRUNE_EVERY: u32 = 4096;

struct Tracked {
    view: Arc<MibView>,
    /// When this view became current.
    created: Instant,
    /// When this view stopped being current.
    retired: Option<Instant>,
    epoch: Instant,
    /// Per instance of `view` where a walk parked: at most one entry per instance, and in
    /// practice only the walks waiting and those that went on within the resend window.
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
    /// `window`, no mark within `resend` (the resend window, at most `window`).
    fn unused(&self, now: Instant, window: Duration, resend: Duration) -> bool {
        let older = |t: Option<Instant>, d: Duration| t.is_none_or(|t| now.duration_since(t) >= d);
        older(self.newest_park, window) && older(self.newest_mark, resend)
    }

    /// Drops the parks that can no longer matter: waiting ones older than `window`, and
    /// continued ones older than `resend`.
    fn prune(&mut self, now: Instant, window: Duration, resend: Duration) {
        let stamp = self.stamp(now);
        let (keep_waiting, keep_done) = (ticks(window), ticks(resend));
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
        ticks(now.saturating_duration_since(self.epoch)).min(u32::MAX - 1) + 1
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

    /// The park at `oid`'s instance, when a walk parked there within `window` ticks of
    /// `stamp` (now, as [`stamp`](Self::stamp) gives it: the caller reads it once for all
    /// its starts).
    fn live_park(&self, oid: &[u32], stamp: u32, window: u32) -> Option<(u32, Park)> {
        if self.parks.is_empty() {
            return None;
        }
        let instance = self.view.instance_of(oid)?;
        let park = *self.parks.get(&instance)?;
        if park.at == 0 {
            return None;
        }
        let age = stamp.saturating_sub(park.at);
        (age < window).then_some((instance, park))
    }

    fn forget_parks(&mut self) {
        self.parks = ParkMap::default();
        self.newest_park = None;
        self.newest_mark = None;
    }
}

/// A duration in park ticks.
fn ticks(d: Duration) -> u32 {
    // Whole seconds and the rest apart: no 128-bit division on the path of every request.
    let t = d
        .as_secs()
        .saturating_mul(TICKS_PER_SEC)
        .saturating_add(u64::from(d.subsec_nanos() / TICK_NS));
    u32::try_from(t).unwrap_or(u32::MAX)
}

/// How a continuation was decided, for the caller's statistics and logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Continuation {
    /// No view has a walk parked at any of the starts: a new walk.
    None,
    /// Exactly one view has a walk waiting there.
    Parked,
    /// Walks on more than one view wait at the same OID (the residual case): see
    /// [`choose`] for which is taken to be the one asking.
    Ambiguous,
    /// The second request from where an ambiguous continuation took a walk off, taken to
    /// be that walk (see [`second_look`]): the guess was wrong, and the walk passed over
    /// then is the one that asked, so it is taken off.
    Retaken,
    /// A walk went on from there within the in-progress window, and within a few of its own
    /// turnarounds: most likely the walk whose park a lone GetNext took just before it came
    /// back. It continues on that view and parks, with that walk's turnaround.
    Repeated,
    /// A walk went on from there earlier in the resend window, or later than a few of its
    /// turnarounds: a re-sent request, a walk whose park a lone GetNext took and that
    /// paused, or a lone GetNext that starts where a walk went by. Answered from that
    /// view, it leaves only [`Leave::WentBy`]: were every such request to park, random
    /// GetNexts beside walkers would leave stand-ins everywhere for walks of other
    /// snapshots to be taken for.
    WentBy,
    /// The rest of a request that is no walk (net-snmp sends a GetBulk's repetitions as
    /// GetNexts with one transactionID): its view, and no park.
    Lone,
}

/// The live views and the walks parked on them.
pub(crate) struct WalkTracker {
    window: Duration,
    policy: WalkPolicy,
    /// `policy.in_progress(max_age)`.
    in_progress: Duration,
    /// The resend window, never longer than the walk-window.
    resend: Duration,
    /// The three in park ticks, worked out once.
    window_ticks: u32,
    in_progress_ticks: u32,
    resend_ticks: u32,
    grace_ticks: u32,
    repeat_slack_ticks: u32,
    /// Oldest first; the last one is the current view.
    views: Vec<Tracked>,
    /// How long walks take to come back, in park ticks, as a moving average over every
    /// walk's return (0: none seen yet): what a new walk, whose own turnaround is not
    /// known, is expected to take.
    typical: u32,
}

impl WalkTracker {
    pub(crate) fn new(window: Duration, max_age: Duration, policy: WalkPolicy) -> WalkTracker {
        let mut w = WalkTracker {
            window: Duration::ZERO,
            policy,
            in_progress: Duration::ZERO,
            resend: Duration::ZERO,
            window_ticks: 0,
            in_progress_ticks: 0,
            resend_ticks: 0,
            grace_ticks: ticks(policy.pause_grace),
            repeat_slack_ticks: ticks(policy.repeat_slack),
            views: Vec::with_capacity(MAX_LIVE_VIEWS),
            typical: 0,
        };
        w.set_timing(window, max_age);
        w
    }

    pub(crate) fn set_timing(&mut self, window: Duration, max_age: Duration) {
        self.window = window.min(MAX_WINDOW);
        self.in_progress = self.policy.in_progress(max_age);
        self.resend = self.policy.resend_window.min(self.window);
        self.window_ticks = ticks(self.window);
        self.in_progress_ticks = ticks(self.in_progress);
        self.resend_ticks = ticks(self.resend);
    }

    /// Views alive now, the current one included.
    pub(crate) fn live_views(&self) -> usize {
        self.views.len()
    }

    /// Makes `view` the current one. The previous current view stays for the walks parked
    /// on it. Callers check [`make_room`](Self::make_room) first; should they not, the oldest
    /// view is dropped so that the bound holds whatever happens.
    pub(crate) fn adopt(&mut self, view: Arc<MibView>, now: Instant) {
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
    /// one is let go if no walk on it has asked anything for the pause grace.
    pub(crate) fn make_room(&mut self, now: Instant) -> bool {
        self.expire(now);
        if self.views.len() >= MAX_LIVE_VIEWS {
            let grace = self.policy.pause_grace;
            let quiet = self.views[0]
                .newest_park
                .is_none_or(|p| now.duration_since(p) >= grace);
            if quiet {
                self.views.remove(0);
            }
        }
        self.views.len() < MAX_LIVE_VIEWS
    }

    /// Drops the views no walk can come back to, and forgets the current view's parks once
    /// they are all older than the window.
    pub(crate) fn expire(&mut self, now: Instant) {
        let (window, resend) = (self.window, self.resend);
        let dead = |t: &Tracked| t.unused(now, window, resend);
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
    pub(crate) fn next_expiry(&self) -> Option<Instant> {
        self.views
            .iter()
            .filter_map(|t| {
                let by_mark = t.newest_mark.map(|m| m + self.resend);
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
    pub(crate) fn reset(&mut self) {
        self.typical = 0;
        let cur = self.views.pop();
        self.views.clear();
        if let Some(mut c) = cur {
            c.retired = None;
            c.forget_parks();
            self.views.push(c);
        }
    }

    /// Records what request `transaction` left at `instance` of `view` (the last OID it
    /// returned for a range). A view that is no longer live is ignored.
    pub(crate) fn leave(
        &mut self,
        view: &Arc<MibView>,
        instance: u32,
        transaction: u32,
        what: Leave,
        now: Instant,
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
        let window = self.window_ticks;
        let p = t.parks.entry(instance).or_default();
        if p.at == 0 || at.saturating_sub(p.at) >= window {
            // What was here has expired: nothing of it counts any more.
            *p = Park::default();
        }
        p.by = transaction;
        match what {
            Leave::Park(Turnaround(turnaround)) => {
                p.at = at;
                p.waiting = p.waiting.saturating_add(1);
                p.flags = WALKED;
                p.turnaround = turnaround;
                t.newest_park = Some(now);
            }
            Leave::WentBy => {
                // It does not touch the time of walks waiting here: it must not keep them
                // alive past the walk-window.
                if p.waiting == 0 {
                    p.at = at;
                    p.flags = WALKED;
                }
                t.newest_mark = Some(now);
            }
            Leave::Mark => {
                // Nor does a mark, and it leaves a place a walk went by as it is: a walk
                // whose park a lone GetNext took may be coming on from here.
                if p.waiting == 0 && !p.walked() {
                    p.at = at;
                }
                t.newest_mark = Some(now);
            }
        }
        t.parks_since_prune += 1;
        if t.parks_since_prune >= PRUNE_EVERY {
            t.prune(now, self.window, self.resend);
        }
    }

    /// True when a walk parked on any live view within the in-progress window: walks are
    /// in progress.
    pub(crate) fn busy(&self, now: Instant) -> bool {
        self.views
            .iter()
            .filter_map(|t| t.newest_park)
            .any(|p| now.saturating_duration_since(p) < self.in_progress)
    }

    /// The view, no older than `max_age`, on which a walk in progress waits at `oid`: one
    /// that parked there within the in-progress window, the most recent if several. A new
    /// walk whose first answer is that OID joins it, so that a walk that starts where
    /// another just stopped shares its snapshot and cannot be told from it later. A park
    /// older than that is a walk that paused or ended (a probe ends at once); joining it
    /// would serve a new walk old figures while nothing walks, so it is left alone.
    pub(crate) fn joinable(
        &self,
        oid: &[u32],
        now: Instant,
        max_age: Duration,
    ) -> Option<Arc<MibView>> {
        let in_progress = self.in_progress_ticks;
        self.views
            .iter()
            .filter(|t| now.saturating_duration_since(t.created) <= max_age)
            .filter_map(|t| {
                let (_, park) = t.live_park(oid, t.stamp(now), in_progress)?;
                // A park passed over is no walk in progress to join (see `pass_over`).
                (park.waiting > 0 && !park.contested())
                    .then(|| (t.stamp(now).saturating_sub(park.at), t))
            })
            .min_by_key(|(age, _)| *age)
            .map(|(_, t)| t.view.clone())
    }

    /// The view a GetNext or GetBulk of request `transaction` starting at `starts`
    /// continues on, if any walk parked at one of them. The walk that waited there is taken
    /// off.
    pub(crate) fn continuation<'s, S>(
        &mut self,
        starts: S,
        transaction: u32,
        now: Instant,
    ) -> Continued
    where
        S: IntoIterator<Item = &'s [u32]> + Clone,
    {
        let none = Continued {
            view: None,
            how: Continuation::None,
            turnaround: Turnaround::UNKNOWN,
            first_start: None,
            contest: false,
        };
        if self.views.iter().all(|t| t.parks.is_empty()) {
            return none;
        }
        let mut found = Found::default();
        let at = self.collect(starts.clone(), transaction, now, &mut found);
        let n = self.views.len();
        let timing = Timing {
            in_progress: self.in_progress_ticks,
            grace: self.grace_ticks,
            typical: self.typical,
            repeat_turnarounds: self.policy.repeat_turnarounds,
            repeat_slack: self.repeat_slack_ticks,
        };
        // A second request from a contested park, with one start (a walk's) and not the rest
        // of a request that parked there: it settles the contest.
        let contested = {
            let mut s = starts.clone().into_iter();
            s.next().is_some()
                && s.next().is_none()
                && at[..n].iter().any(|a| a.taken.is_some())
                && at[..n].iter().all(|a| a.same_request.is_none())
        };
        if contested {
            if let Some((taken, loser)) = second_look(&at[..n], timing) {
                let t = at[taken].taken.expect("second_look picks a taken walk");
                let turnaround = self.came_back(t.age, t.turnaround);
                self.retake(taken, loser, &at, &found);
                return Continued {
                    view: Some(self.views[taken].view.clone()),
                    how: Continuation::Retaken,
                    turnaround,
                    first_start: at[taken].first_start,
                    contest: true,
                };
            }
        }
        let Some((chosen, how)) = choose(&at[..n], timing) else {
            return none;
        };
        let a = at[chosen];
        // The walk's turnaround: how long it took to come back. The rest of one request
        // (net-snmp's GetNexts of one GetBulk) keeps the request's, and a walk whose park a
        // lone GetNext took keeps the one it had there (a park of another walk at another
        // start of the request says nothing of it).
        let turnaround = match a.passed_over.or(a.waiting) {
            _ if a.same_request.is_some() => Turnaround(a.turnaround),
            _ if how == Continuation::Repeated => Turnaround(a.went_on_turnaround),
            Some(age) => self.came_back(age, a.turnaround),
            None => Turnaround(a.turnaround),
        };
        // Only walks that are both moving contest a park: a walk that paused there keeps
        // its park as it is, and still finds it when it comes back.
        let moving = at[..n]
            .iter()
            .filter(|a| a.waiting.is_some_and(|age| age < self.in_progress_ticks))
            .count();
        let contest = how == Continuation::Ambiguous && !contested && moving > 1;
        self.take_off(chosen, starts, &found, a.stamp, contest);
        if contest {
            self.pass_over(chosen, &found);
        } else if contested {
            self.settle(&at);
        }
        Continued {
            view: Some(self.views[chosen].view.clone()),
            how,
            turnaround,
            first_start: a.first_start,
            contest: contest || contested,
        }
    }

    /// A walk came back `age` ticks after it parked, having taken `before` on average: its
    /// new turnaround, and the average over every walk. Only a walk that was moving teaches
    /// either: a pause, a re-sent request or a lone GetNext that took a park says nothing
    /// of how fast walks come back.
    fn came_back(&mut self, age: u32, before: u16) -> Turnaround {
        if age >= self.in_progress_ticks {
            return if before == 0 {
                Turnaround::of(age)
            } else {
                Turnaround(before)
            };
        }
        let age = age.min(u32::from(u16::MAX));
        self.typical = if self.typical == 0 {
            age.max(1)
        } else {
            // Rounded to the nearest tick, so that the average can reach small turnarounds.
            (7 * self.typical + age + 4) / 8
        };
        Turnaround::blend(before, age)
    }

    /// Step one: what each view has at the starts.
    fn collect<'s, S>(
        &self,
        starts: S,
        transaction: u32,
        now: Instant,
        found: &mut Found,
    ) -> [AtStarts; MAX_LIVE_VIEWS]
    where
        S: IntoIterator<Item = &'s [u32]> + Clone,
    {
        let mut at = [AtStarts::default(); MAX_LIVE_VIEWS];
        let resend = self.resend_ticks;
        for (v, t) in self.views.iter().enumerate() {
            if t.parks.is_empty() {
                continue;
            }
            let stamp = t.stamp(now);
            let here = &mut at[v];
            here.stamp = stamp;
            for (i, s) in starts.clone().into_iter().enumerate() {
                let Some((instance, park)) = t.live_park(s, stamp, self.window_ticks) else {
                    continue;
                };
                if i == 0 {
                    here.first_start = Some(instance);
                }
                let real_age = stamp.saturating_sub(park.at);
                // A park passed over looks paused: older by the in-progress window.
                let passed_over = park.waiting > 0 && park.contested();
                let age = if passed_over {
                    real_age.saturating_add(self.in_progress_ticks)
                } else {
                    real_age
                };
                if park.by == transaction {
                    here.turnaround = park.turnaround;
                    here.same_request = Some(if park.waiting > 0 {
                        Continuation::Parked
                    } else if park.walked() {
                        Continuation::Repeated
                    } else {
                        Continuation::Lone
                    });
                }
                let youngest = |a: Option<u32>| Some(a.map_or(age, |a| a.min(age)));
                if park.waiting > 0 {
                    if here.same_request.is_none() && here.waiting.is_none_or(|a| age < a) {
                        here.turnaround = park.turnaround;
                        here.passed_over = passed_over.then_some(real_age);
                    }
                    here.waiting = youngest(here.waiting);
                    found.keep(v, instance);
                } else if park.walked() && age < resend {
                    // Only within the resend window: that is all a re-sent request needs,
                    // and what the prune keeps.
                    if here.went_on.is_none_or(|a| age < a) {
                        here.went_on_turnaround = park.turnaround;
                    }
                    here.went_on = youngest(here.went_on);
                    if park.contested() && age < self.in_progress_ticks {
                        here.taken = Some(Taken {
                            age,
                            turnaround: park.turnaround,
                            instance,
                        });
                    }
                }
            }
        }
        at
    }

    /// After an ambiguous continuation, the parks not chosen are made to look paused (older
    /// by the in-progress window, see `collect`). If the guess was wrong, one of them is the
    /// asking walk's own, and nobody comes back to it: left young, it would capture the next
    /// walk of a third snapshot that stops there while it is. A walk that really waits there
    /// still finds it; it only no longer beats a walk that is moving.
    ///
    /// They are marked contested, as the park taken off is: the next request from there
    /// settles which walk asked first (see [`choose`]).
    fn pass_over(&mut self, chosen: usize, found: &Found) {
        for &(v, instance) in &found.kept[..found.n] {
            if v == chosen {
                continue;
            }
            if let Some(p) = self.views[v].parks.get_mut(&instance) {
                p.flags |= CONTESTED;
            }
        }
    }

    /// The walk taken off a contested park (on view `taken`) asks now: the walk passed
    /// over then (on view `loser`) was the one that asked, and nobody comes back to its
    /// park. That walk is taken off, and the contest is over.
    fn retake(
        &mut self,
        taken: usize,
        loser: usize,
        at: &[AtStarts; MAX_LIVE_VIEWS],
        found: &Found,
    ) {
        if let Some(t) = at[taken].taken {
            if let Some(p) = self.views[taken].parks.get_mut(&t.instance) {
                p.flags &= !CONTESTED;
                p.at = at[taken].stamp;
            }
        }
        for &(v, instance) in found.kept[..found.n].iter().filter(|(v, _)| *v == loser) {
            if let Some(p) = self.views[v].parks.get_mut(&instance) {
                p.flags &= !CONTESTED;
                p.waiting = p.waiting.saturating_sub(1);
                if p.waiting == 0 {
                    p.at = at[v].stamp;
                }
            }
        }
    }

    /// The walk passed over asks now: the guess was right, and the walk taken off is no
    /// longer contested.
    fn settle(&mut self, at: &[AtStarts; MAX_LIVE_VIEWS]) {
        for (t, a) in self.views.iter_mut().zip(at) {
            if let Some(taken) = a.taken {
                if let Some(p) = t.parks.get_mut(&taken.instance) {
                    p.flags &= !CONTESTED;
                }
            }
        }
    }

    /// Takes the walk that continues off the view it waited on: one waiting walk at each of
    /// the starts where one waits.
    ///
    /// With `contest`, a park left empty keeps the time its walk parked and is marked
    /// contested: the walk taken off may not be the one that asked.
    fn take_off<'s, S>(
        &mut self,
        chosen: usize,
        starts: S,
        found: &Found,
        stamp: u32,
        contest: bool,
    ) where
        S: IntoIterator<Item = &'s [u32]>,
    {
        let window = self.window_ticks;
        let t = &mut self.views[chosen];
        // With more hits than kept, the starts are looked up again.
        let again: Vec<u32> = if found.overflow {
            starts
                .into_iter()
                .filter_map(|s| t.live_park(s, stamp, window))
                .filter(|(_, park)| park.waiting > 0)
                .map(|(instance, _)| instance)
                .collect()
        } else {
            Vec::new()
        };
        let kept = found.kept[..if found.overflow { 0 } else { found.n }]
            .iter()
            .filter(|(v, _)| *v == chosen)
            .map(|&(_, instance)| instance);
        for instance in kept.chain(again) {
            if let Some(p) = t.parks.get_mut(&instance) {
                p.waiting = p.waiting.saturating_sub(1);
                p.flags &= !CONTESTED;
                if p.waiting == 0 {
                    if contest {
                        p.flags |= CONTESTED;
                    } else {
                        p.at = stamp;
                    }
                }
            }
        }
    }
}

/// What a request leaves where it stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Leave {
    /// A walk waits here: a request that continues it finds this view.
    Park(Turnaround),
    /// A request that went on from where a walk went by earlier (a re-sent request, a walk
    /// whose park a lone GetNext took, or a lone GetNext): no walk waits here, but one went
    /// by, so a walk that comes on from here stays on this view, as long as no walk of
    /// another view waits here.
    WentBy,
    /// A request that is no walk: only the rest of that request follows it.
    Mark,
}

/// What [`WalkTracker::continuation`] found.
pub(crate) struct Continued {
    /// The view the request continues on; `None`: a new walk or a lone request.
    pub view: Option<Arc<MibView>>,
    pub how: Continuation,
    /// The walk's turnaround, for the parks the request leaves.
    pub turnaround: Turnaround,
    /// The instance of the request's first start in `view`, when a park is live there (the
    /// tracker found it looking for the park): the caller answers from there without
    /// searching the view again ([`MibView::next_after`]).
    pub first_start: Option<u32>,
    /// Walks of two views, both moving (parked within the in-progress window, and not
    /// passed over by an earlier contest), waited here (or one of them is settled now): the
    /// residual case, which timing alone decides. An ambiguous continuation without it had
    /// walks of at most one view moving there.
    pub contest: bool,
}

/// How long a walk took to come back to where it parked, in park ticks, saturating; 0: not
/// known (a new walk).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Turnaround(u16);

impl Turnaround {
    pub(crate) const UNKNOWN: Turnaround = Turnaround(0);

    fn of(age: u32) -> Turnaround {
        Turnaround(u16::try_from(age).unwrap_or(u16::MAX).max(1))
    }

    /// The walk's turnaround after it came back in `age` ticks (while moving), having taken
    /// `before` on average (0: not known): a moving average, so that one slow or quick turn
    /// does not make it look like another walk.
    fn blend(before: u16, age: u32) -> Turnaround {
        if before == 0 {
            return Turnaround::of(age);
        }
        let age = age.min(u32::from(u16::MAX));
        Turnaround::of((3 * u32::from(before) + age + 2) / 4)
    }
}

/// What one view has at a request's starts, for [`choose`]. Ages are in park ticks, on one
/// clock for every view.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct AtStarts {
    /// The youngest park there with a walk waiting.
    waiting: Option<u32>,
    /// The turnaround of the walk that made that park, or of the park this very request
    /// left (0: not known).
    turnaround: u16,
    /// The youngest park there whose walks all went on.
    went_on: Option<u32>,
    /// The turnaround of the walk that went on from there (0: not known).
    went_on_turnaround: u16,
    /// A park there was left by this very request (its transactionID): how it continues.
    same_request: Option<Continuation>,
    /// The real age of the waiting park, when it was passed over (see
    /// [`WalkTracker::pass_over`]).
    passed_over: Option<u32>,
    /// The walk taken off there by an ambiguous continuation within the in-progress
    /// window: it may not have been the one asking, and be asking now.
    taken: Option<Taken>,
    /// Now, in this view's ticks (so that taking a walk off reads no clock again).
    stamp: u32,
    /// The instance of the request's first start in this view, when a park is live there.
    first_start: Option<u32>,
}

/// A walk taken off a contested park: how long ago it parked, its turnaround, and where.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Taken {
    age: u32,
    turnaround: u16,
    instance: u32,
}

/// The waiting parks found while collecting, to take off the chosen view after; kept
/// without allocating for the usual few.
#[derive(Default)]
struct Found {
    kept: [(usize, u32); Found::KEPT],
    n: usize,
    overflow: bool,
}

impl Found {
    /// How many waiting parks are kept without allocating: a request has one start per
    /// range, and managers send a handful of ranges; a request with more looks its starts
    /// up again after choosing (see `take_off`).
    const KEPT: usize = 8;

    fn keep(&mut self, view: usize, instance: u32) {
        if self.n < Found::KEPT {
            self.kept[self.n] = (view, instance);
            self.n += 1;
        } else {
            self.overflow = true;
        }
    }
}

/// What [`choose`] weighs ages against, in park ticks.
#[derive(Clone, Copy, Debug)]
struct Timing {
    /// The in-progress window: a walk that parked within it is moving.
    in_progress: u32,
    /// The pause grace: a walk that paused longer may lose its snapshot.
    grace: u32,
    /// How long walks take to come back, on average over every walk (0: not known yet).
    typical: u32,
    /// [`WalkPolicy::repeat_turnarounds`], and its slack in ticks.
    repeat_turnarounds: u32,
    repeat_slack: u32,
}

/// What a walk whose turnaround is `t` (0: not known) is expected to take: its own
/// turnaround, else `typical`.
fn expect(t: u16, typical: u32) -> u32 {
    if t > 0 {
        u32::from(t)
    } else {
        typical
    }
}

/// A second request from where an ambiguous continuation took one of two moving walks off
/// and passed the other over: this one is the other walk. Which is it? If the timing of the
/// walk taken off fits four times better than that of the walk passed over, the guess was
/// wrong: the views of the walk taken off (which asks now) and of the one passed over
/// (which asked then). Otherwise `None`: the guess stands. The margin keeps a guess that
/// was most likely right (the first choice weighed the same timings) from being undone by
/// noise; a wrong guess undone costs one walk its snapshot, not two.
fn second_look(at: &[AtStarts], timing: Timing) -> Option<(usize, usize)> {
    let typical = timing.typical.max(1);
    let score = |age: u32, t: u16| age.abs_diff(expect(t, typical));
    let taken = at
        .iter()
        .enumerate()
        .filter_map(|(v, a)| Some((v, a.taken?)))
        .filter(|(_, t)| t.age < timing.in_progress)
        .map(|(v, t)| (v, score(t.age, t.turnaround)))
        .min_by_key(|(_, s)| *s)?;
    let passed_over = at
        .iter()
        .enumerate()
        .filter_map(|(v, a)| Some((v, a.passed_over?, a.turnaround)))
        .filter(|(_, age, _)| *age < timing.in_progress)
        .map(|(v, age, t)| (v, score(age, t)))
        .min_by_key(|(_, s)| *s)?;
    (taken.1 * 4 < passed_over.1).then_some((taken.0, passed_over.0))
}

/// Step two: which view the request continues on, and how that was decided.
/// - A park left by this very request is that request's own: its view, whatever else waits.
/// - Else a view with a walk waiting at a start; of several (the residual case), the one
///   whose walk is asking now. Walks that are moving come back within one round trip of
///   parking, so among parks younger than the in-progress window: the one whose age is
///   closest to its walk's turnaround (a faster walk that caught up with a slower one asks
///   first). A new walk, whose own turnaround is not known, is expected to take as long as
///   walks take on average; when no turnaround is known at all, the oldest park (walks in
///   step come back in the order they parked, the master queuing every manager's requests
///   alike). A park older than that is a walk that paused, or the last of one that ended:
///   when only such parks are left, the most recent, as long as it is younger than the
///   pause grace.
/// - Else a view where a walk went on from a start within the in-progress window. Within a
///   few of that walk's turnarounds (of the average, for a park with none of its own) it
///   is most likely the walk itself, whose park a lone GetNext took
///   ([`Continuation::Repeated`]). Later than that the walk has asked already (the walk is
///   what went on), and the request is answered as [`Continuation::WentBy`]: parking it
///   would leave a stand-in nobody comes back to, which captures, for the rest of the
///   walk-window, walks of other snapshots that stop there (random GetNexts beside walkers
///   left hundreds a minute).
///   Either beats a park older than the pause grace: a walk that paused that long may lose
///   its snapshot anyway, and such a park is most often a stand-in, which nobody comes back
///   to and which would capture, for the rest of the walk-window, every walk of another
///   snapshot whose park is taken there.
/// - Else the most recent park, however old; else a view where a walk went on from a start
///   earlier in the resend window ([`Continuation::WentBy`]: a re-sent request or a lone
///   GetNext). Where only a request that is no walk stopped (a mark), nothing continues but
///   that request itself.
fn choose(at: &[AtStarts], timing: Timing) -> Option<(usize, Continuation)> {
    if let Some(found) = at
        .iter()
        .enumerate()
        .filter_map(|(v, a)| Some((v, a.same_request?)))
        .next_back()
    {
        return Some(found);
    }
    let waiting = || {
        at.iter()
            .enumerate()
            .filter_map(|(v, a)| Some((v, a.waiting?, a.turnaround)))
    };
    let parked = |v: usize| {
        let how = if waiting().count() > 1 {
            Continuation::Ambiguous
        } else {
            Continuation::Parked
        };
        Some((v, how))
    };
    let moving = || waiting().filter(|(_, age, _)| *age < timing.in_progress);
    let (sum, known) = moving()
        .filter(|(_, _, t)| *t > 0)
        .fold((0u32, 0u32), |(s, n), (_, _, t)| (s + u32::from(t), n + 1));
    let typical = match timing.typical {
        0 => sum.checked_div(known),
        t => Some(t),
    };
    let timed = match typical {
        Some(typical) => moving().min_by_key(|&(_, age, t)| age.abs_diff(expect(t, typical))),
        None => moving().max_by_key(|(_, age, _)| *age),
    };
    let recent = waiting().min_by_key(|(_, age, _)| *age);
    // A park passed over looks paused, but counts its real age against the pause grace.
    let real_age = |v: usize, age: u32| at[v].passed_over.unwrap_or(age);
    let within_grace = recent.filter(|&(v, age, _)| real_age(v, age) < timing.grace);
    if let Some((v, ..)) = timed.or(within_grace) {
        return parked(v);
    }
    let went_on = at
        .iter()
        .enumerate()
        .filter_map(|(v, a)| Some((v, a.went_on?, a.went_on_turnaround)))
        .min_by_key(|(_, age, _)| *age);
    // The walk whose park was taken comes back within about its turnaround of the taking.
    // Later, it asked already (it was the request that went on): this one is no walk. A
    // park with no turnaround of its own (the first stop of a walk, or of the first
    // GetBulk split into GetNexts) goes by the average; before any walk came back, the
    // in-progress window is the only limit.
    let in_time = |age: u32, t: u16| {
        let expected = expect(t, timing.typical);
        expected == 0
            || age
                <= expected
                    .saturating_mul(timing.repeat_turnarounds)
                    .saturating_add(timing.repeat_slack)
    };
    match (went_on, recent) {
        (Some((v, age, t)), _) if age < timing.in_progress => {
            let how = if in_time(age, t) {
                Continuation::Repeated
            } else {
                Continuation::WentBy
            };
            Some((v, how))
        }
        (_, Some((v, ..))) => parked(v),
        (Some((v, ..)), None) => Some((v, Continuation::WentBy)),
        (None, None) => None,
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
        w.leave(v, i, 0, Leave::Park(Turnaround::UNKNOWN), now);
    }

    const W: Duration = Duration::from_secs(5);

    /// A tracker with view `a` current since `t0`, and `b` ready to adopt.
    fn two_views() -> (WalkTracker, Arc<MibView>, Arc<MibView>, Instant) {
        let t0 = Instant::now();
        let mut w = WalkTracker::new(W, Duration::from_secs(1), WalkPolicy::DEFAULT);
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
            let c = self.continuation(starts.iter().copied(), u32::MAX, now);
            (c.view, c.how)
        }
    }

    #[test]
    fn a_walk_continues_on_the_view_it_parked_on_after_a_refresh() {
        let t0 = Instant::now();
        let mut w = WalkTracker::new(W, Duration::from_secs(1), WalkPolicy::DEFAULT);
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
        let found = w.joinable(&allocs(3), ms(700), Duration::from_secs(1));
        assert!(Arc::ptr_eq(&found.unwrap(), &a));
        assert!(w
            .joinable(&allocs(4), ms(700), Duration::from_secs(1))
            .is_none());
        // Too old to join.
        assert!(w
            .joinable(&allocs(3), ms(700), Duration::from_millis(500))
            .is_none());
        // Once the walk went on, nobody waits there.
        w.continuation_any(&[&allocs(3)], ms(800));
        assert!(w
            .joinable(&allocs(3), ms(900), Duration::from_secs(1))
            .is_none());
    }

    /// `choose`, case by case: what each view has at the starts, the in-progress window
    /// (in ticks), and the view and kind expected.
    #[test]
    fn choose_picks_the_view_each_rule_names() {
        use Continuation::*;
        let waits = |age: u32, turnaround: u16| AtStarts {
            waiting: Some(age),
            turnaround,
            ..AtStarts::default()
        };
        let went_on = |age: u32| AtStarts {
            went_on: Some(age),
            ..AtStarts::default()
        };
        let went_on_after = |age: u32, turnaround: u16| AtStarts {
            went_on: Some(age),
            went_on_turnaround: turnaround,
            ..AtStarts::default()
        };
        let mine = |how: Continuation| AtStarts {
            same_request: Some(how),
            ..AtStarts::default()
        };
        let none = AtStarts::default();
        // In-progress window: 10 ticks.
        type Case<'a> = (&'a str, &'a [AtStarts], Option<(usize, Continuation)>);
        let cases: &[Case] = &[
            ("nothing anywhere: a new walk", &[none, none], Option::None),
            ("one view waits", &[none, waits(3, 0)], Some((1, Parked))),
            (
                "this very request's park wins over any other",
                &[waits(3, 3), mine(Parked)],
                Some((1, Parked)),
            ),
            (
                "the rest of a lone request stays lone",
                &[waits(3, 3), mine(Lone)],
                Some((1, Lone)),
            ),
            (
                "walks in step, turnarounds unknown: the one that parked first",
                &[waits(4, 0), waits(2, 0)],
                Some((0, Ambiguous)),
            ),
            (
                "turnarounds known: the park as old as its walk's turnaround",
                &[waits(6, 8), waits(2, 2)],
                Some((1, Ambiguous)),
            ),
            (
                "a new walk is taken to be as fast as the others",
                &[waits(6, 6), waits(2, 0)],
                Some((0, Ambiguous)),
            ),
            (
                "a paused park loses to a moving one",
                &[waits(50, 2), waits(2, 2)],
                Some((1, Ambiguous)),
            ),
            (
                "only paused parks: the most recent",
                &[waits(50, 2), waits(20, 2)],
                Some((1, Ambiguous)),
            ),
            (
                "a waiting walk wins over one that went on",
                &[went_on(1), waits(30, 2)],
                Some((1, Parked)),
            ),
            (
                "but not when it waited longer than the pause grace: a stand-in",
                &[went_on(1), waits(50, 2)],
                Some((0, Repeated)),
            ),
            (
                "nor when the walk that went on asked already: a lone GetNext, and no park",
                &[went_on_after(9, 2), waits(50, 2)],
                Some((0, WentBy)),
            ),
            (
                "before any walk came back, a park with no turnaround has the whole window",
                &[none, went_on_after(9, 0)],
                Some((1, Repeated)),
            ),
            (
                "with nothing that went on just now, the park however old",
                &[went_on(20), waits(50, 2)],
                Some((1, Parked)),
            ),
            (
                "went on just now: the walk whose park was taken",
                &[none, went_on(3)],
                Some((1, Repeated)),
            ),
            (
                "went on within the in-progress window but long after its walk's turnaround: \
                 the walk asked already, this is a lone GetNext",
                &[none, went_on_after(9, 2)],
                Some((1, WentBy)),
            ),
            (
                "went on within four of its walk's turnarounds: the walk",
                &[none, went_on_after(8, 2)],
                Some((1, Repeated)),
            ),
            (
                "went on earlier: a re-sent request or a lone GetNext",
                &[went_on(40), went_on(20)],
                Some((1, WentBy)),
            ),
        ];
        let timing = Timing {
            in_progress: 10,
            grace: 40,
            typical: 0,
            repeat_turnarounds: 4,
            repeat_slack: 0,
        };
        for (what, at, expected) in cases {
            assert_eq!(choose(at, timing), *expected, "{what}");
        }
        // Once walks were seen coming back, a new walk is expected to take as long as they
        // take on average, whatever the turnarounds of the others waiting there.
        let seen = Timing {
            typical: 2,
            ..timing
        };
        let at = [waits(6, 9), waits(2, 0)];
        assert_eq!(choose(&at, timing), Some((0, Ambiguous)));
        assert_eq!(choose(&at, seen), Some((1, Ambiguous)));
        let at = [waits(8, 0), waits(2, 0)];
        assert_eq!(
            choose(&at, timing),
            Some((0, Ambiguous)),
            "the first to park"
        );
        // A park with no turnaround of its own goes by the average once there is one.
        let late = [none, went_on_after(9, 0)];
        assert_eq!(
            choose(&late, seen),
            Some((1, WentBy)),
            "late for the average"
        );
        let timely = [none, went_on_after(8, 0)];
        assert_eq!(
            choose(&timely, seen),
            Some((1, Repeated)),
            "within four of it"
        );
        assert_eq!(choose(&at, seen), Some((1, Ambiguous)), "the one due now");
    }

    /// Walk A (view `a`, back every 10 ms) and walk B (view `b`, every 3 ms) wait at row 3;
    /// a request at 10 ms is taken to be A's. Returns the tracker at that point.
    fn contested() -> (WalkTracker, Arc<MibView>, Arc<MibView>, Instant) {
        let (mut w, a, b, t0) = two_views();
        let at = |us: u64| t0 + Duration::from_micros(us);
        let row3 = a.instance_of(&allocs(3)).unwrap();
        w.leave(&a, row3, 1, Leave::Park(Turnaround(100)), at(0));
        w.adopt(b.clone(), at(1_000));
        w.leave(&b, row3, 2, Leave::Park(Turnaround(30)), at(9_000));
        let (v, how) = w.continuation_any(&[&allocs(3)], at(10_000));
        assert_eq!(how, Continuation::Ambiguous);
        assert!(
            Arc::ptr_eq(&v.unwrap(), &a),
            "A's park is as old as A's turnaround"
        );
        (w, a, b, t0)
    }

    #[test]
    fn only_moving_walks_of_two_views_make_a_contest() {
        // Two moving walks: a contest, and so is the request that settles it.
        let (mut w, a, b, t0) = two_views();
        let at = |us: u64| t0 + Duration::from_micros(us);
        let row3 = a.instance_of(&allocs(3)).unwrap();
        w.leave(&a, row3, 1, Leave::Park(Turnaround(100)), at(0));
        w.adopt(b.clone(), at(1_000));
        w.leave(&b, row3, 2, Leave::Park(Turnaround(30)), at(9_000));
        let c = w.continuation([allocs(3).as_slice()], 7, at(10_000));
        assert_eq!((c.how, c.contest), (Continuation::Ambiguous, true));
        let c = w.continuation([allocs(3).as_slice()], 8, at(10_200));
        assert_eq!((c.how, c.contest), (Continuation::Retaken, true));
        // A park 3 s old on the old view beside a moving walk on the new one: ambiguous,
        // but no contest (the moving walk is taken, whatever the old park is).
        let (mut w, a, b, t0) = two_views();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        w.leave(&a, row3, 1, Leave::Park(Turnaround(100)), at(0));
        w.adopt(b.clone(), at(1_000));
        w.leave(&b, row3, 2, Leave::Park(Turnaround(30)), at(2_999));
        let c = w.continuation([allocs(3).as_slice()], 9, at(3_000));
        assert_eq!((c.how, c.contest), (Continuation::Ambiguous, false));
        assert!(Arc::ptr_eq(&c.view.unwrap(), &b));
    }

    #[test]
    fn a_getnext_long_after_a_walk_went_on_is_no_walk() {
        // A walk back every 2 ms parks at row 2 and goes on from it. A GetNext from row 2
        // 50 ms later, well within the in-progress window (1 s) but long after four of the
        // walk's turnarounds, is no walk: it is answered from the walk's view as `WentBy`,
        // which the agent leaves as no park (no stand-in at row 3 for a walk of another
        // snapshot to be taken for). One 3 ms after the walk went on is the walk itself (a
        // lone GetNext took its park): it is `Repeated`, and keeps the walk's turnaround
        // for the park it leaves.
        for (after_ms, parks) in [(50, false), (3, true)] {
            let (mut w, a, b, t0) = two_views();
            let at = |ms: u64| t0 + Duration::from_millis(ms);
            let row2 = a.instance_of(&allocs(2)).unwrap();
            w.leave(&a, row2, 1, Leave::Park(Turnaround(20)), at(0));
            let c = w.continuation([allocs(2).as_slice()], 2, at(2));
            assert_eq!(c.how, Continuation::Parked);
            w.adopt(b.clone(), at(3));
            let c = w.continuation([allocs(2).as_slice()], 3, at(2 + after_ms));
            assert!(Arc::ptr_eq(&c.view.clone().unwrap(), &a), "{after_ms} ms");
            let want = if parks {
                Continuation::Repeated
            } else {
                Continuation::WentBy
            };
            assert_eq!(c.how, want, "{after_ms} ms");
            if parks {
                assert_eq!(c.turnaround, Turnaround(20), "the walk's own turnaround");
            }
        }
    }

    #[test]
    fn the_next_request_from_a_contested_park_can_undo_a_wrong_guess() {
        let (mut w, a, _b, t0) = contested();
        // 0.2 ms later: A's turnaround fits, B's (1.2 ms against 3 ms) does not. The guess
        // was wrong: B asked first, and this is A.
        let (v, how) = w.continuation_any(&[&allocs(3)], t0 + Duration::from_micros(10_200));
        assert_eq!(how, Continuation::Retaken);
        assert!(Arc::ptr_eq(&v.unwrap(), &a));
        // B already went on: nobody waits at row 3 any more, on either view.
        let (_, how) = w.continuation_any(&[&allocs(3)], t0 + Duration::from_micros(10_300));
        assert!(
            matches!(how, Continuation::Repeated | Continuation::WentBy),
            "{how:?}"
        );
    }

    #[test]
    fn a_passed_over_park_is_no_walk_in_progress_to_join() {
        let (w, _a, _b, t0) = contested();
        // B's park looks paused: a new walk whose first answer is row 3 does not join it
        // (after a wrong guess it is a dead park on an old snapshot).
        let joined = w.joinable(
            &allocs(3),
            t0 + Duration::from_micros(10_100),
            Duration::from_secs(10),
        );
        assert!(joined.is_none());
    }

    #[test]
    fn a_pause_teaches_no_turnaround() {
        let (mut w, a, _b, t0) = two_views();
        let row2 = a.instance_of(&allocs(2)).unwrap();
        w.leave(&a, row2, 1, Leave::Park(Turnaround(100)), t0);
        // Back after 3 s, past the in-progress window (1 s here): a pause.
        let c = w.continuation([allocs(2).as_slice()], 2, t0 + Duration::from_secs(3));
        assert_eq!(c.how, Continuation::Parked);
        assert_eq!(c.turnaround, Turnaround(100));
        assert_eq!(w.typical, 0);
        // Back within it: both averages learn.
        let row3 = a.instance_of(&allocs(3)).unwrap();
        w.leave(
            &a,
            row3,
            2,
            Leave::Park(c.turnaround),
            t0 + Duration::from_secs(3),
        );
        let c = w.continuation(
            [allocs(3).as_slice()],
            3,
            t0 + Duration::from_secs(3) + Duration::from_millis(14),
        );
        assert_eq!(c.turnaround, Turnaround((3 * 100 + 140 + 2) / 4));
        assert_eq!(w.typical, 140);
    }

    #[test]
    fn the_next_request_from_a_contested_park_settles_a_right_guess() {
        let (mut w, _a, b, t0) = contested();
        // 3 ms after B parked: B is due, and A took its turn already.
        let (v, how) = w.continuation_any(&[&allocs(3)], t0 + Duration::from_micros(12_000));
        assert_eq!(how, Continuation::Parked);
        assert!(Arc::ptr_eq(&v.unwrap(), &b));
        // The contest is over: the park A was taken off is no longer contested.
        let row3 = w.views[0].view.instance_of(&allocs(3)).unwrap();
        assert!(!w.views[0].parks[&row3].contested());
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
        w.leave(&b, i, 7, Leave::Park(Turnaround::UNKNOWN), ms(4));
        let c = w.continuation([allocs(3).as_slice()], 7, ms(4));
        let (v, how) = (c.view, c.how);
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
        let mut w = WalkTracker::new(W, Duration::from_secs(1), WalkPolicy::DEFAULT);
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
        let mut w = WalkTracker::new(W, Duration::from_secs(1), WalkPolicy::DEFAULT);
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
        let mut w = WalkTracker::new(W, Duration::from_secs(1), WalkPolicy::DEFAULT);
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
        assert!(w.make_room(ms(1_000) + WalkPolicy::DEFAULT.pause_grace));
        assert_eq!(w.live_views(), 2);
        assert!(!w.views.iter().any(|t| Arc::ptr_eq(&t.view, &a)));
    }

    #[test]
    fn parks_that_can_no_longer_matter_are_pruned() {
        let t0 = Instant::now();
        let mut w = WalkTracker::new(W, Duration::from_secs(1), WalkPolicy::DEFAULT);
        let a = view(1);
        w.adopt(a.clone(), t0);
        // A long walk, one park per step, each continued at once, one every millisecond.
        let n = a.instance_count();
        for step in 0..100_000u64 {
            let now = t0 + Duration::from_millis(step);
            let i = (step % u64::from(n)) as u32;
            w.leave(&a, i, 0, Leave::Park(Turnaround::UNKNOWN), now);
            let (_, how) = w.continuation_any(&[&allocs(i % 5 + 1)], now);
            assert_ne!(how, Continuation::Ambiguous);
        }
        assert!(w.views[0].parks.len() <= n as usize);
        // Nothing older than the resend window survives a prune.
        let late = t0 + Duration::from_secs(200);
        w.views[0].prune(late, W, WalkPolicy::DEFAULT.resend_window);
        assert!(w.views[0].parks.is_empty());
    }

    #[test]
    fn parks_survive_a_move_of_the_epoch() {
        let t0 = Instant::now();
        let mut w = WalkTracker::new(W, Duration::from_secs(1), WalkPolicy::DEFAULT);
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
        let mut w = WalkTracker::new(W, Duration::from_secs(1), WalkPolicy::DEFAULT);
        let mut state = 12345u64;
        let mut views = Vec::new();
        for step in 0..20_000u64 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let now = t0 + Duration::from_millis(step);
            if state.is_multiple_of(7) && w.make_room(now) {
                let v = view(step);
                views.push(v.clone());
                w.adopt(v, now);
            }
            let row = (state >> 8) as u32 % 6 + 1;
            let (v, _) = w.continuation_any(&[&allocs(row)], now);
            let v = v.or_else(|| w.views.last().map(|t| t.view.clone()));
            if let Some(v) = v {
                if let Some(i) = v.instance_of(&allocs(row % 5 + 1)) {
                    w.leave(&v, i, step as u32, Leave::Park(Turnaround::UNKNOWN), now);
                }
            }
            assert!(w.live_views() <= MAX_LIVE_VIEWS);
        }
        // Views that are no longer tracked are no longer referenced by the tracker.
        let alive = views.iter().filter(|v| Arc::strong_count(v) > 1).count();
        assert!(alive <= MAX_LIVE_VIEWS, "{alive}");
    }
}
