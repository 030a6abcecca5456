//! The agent: answers one decoded request PDU from the snapshot store, with no I/O.
//!
//! The AgentX session (`agentx::session`) owns the connection and hands every request PDU
//! to [`Agent::handle`], which writes the Response into a buffer. The parts the agent is
//! made of each have one job and their own tests:
//! - [`store`]: the refresh policy, the refresh statistics and the current view;
//! - [`rows`]: stable row indexes, discontinuity times and the master's clock;
//! - [`sites`]: which allocation call sites are served, their indexes and discontinuities;
//! - [`walks`]: the live views and the walks parked on them;
//! - [`scalars`]: the daemon's own scalars;
//! - [`watch`]: the samples for notifications, and what each one sends.
//!
//! Reading the source is the one step that may block. The agent never does it: when a
//! request needs a fresh snapshot, [`Agent::handle`] answers [`Handled::NeedsRead`] and
//! writes nothing. The caller reads the source off the runtime thread, hands the result to
//! [`Agent::read_finished`] (or gives up waiting with [`Agent::read_overdue`]) and calls
//! `handle` again with `may_read = false`. [`Agent::answer_blocking`] does all of this
//! inline, for tests and benchmarks.

pub(crate) mod rows;
pub(crate) mod scalars;
pub(crate) mod sites;
pub(crate) mod store;
pub(crate) mod walks;
pub mod watch;

use crate::index::{IndexError, SiteIndexes, TypeIndexes};
use crate::logging::RateLimited;
use crate::memstat::{MemoryType, SourceError, SourceRead};
use crate::mib::{self, DaemonStatus, MibView, Notification, SourceStatus, StatusView};
use crate::statedir::StateDirProblem;
use agentx_proto::oid::Oid;
use agentx_proto::pdu::{
    Header, HeaderIds, Payload, Pdu, ResError, ResponseWriter, SearchRange, HEADER_LEN, MAX_PAYLOAD,
};
use agentx_proto::value::Value;
use rows::RowIdentity;
use scalars::DaemonScalars;
use sites::SiteIdentity;
pub use sites::SiteSettings;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};
use store::SnapshotStore;
use walks::{Continuation, Leave, WalkPolicy, WalkTracker};
pub use watch::WatchSettings;
use watch::{SourceChange, SourceRowChange, Watcher};

/// The most notifications waiting for the session: a sample's cap and its summary, plus the
/// source's own. The session takes them after every event, so this bound only keeps memory
/// bounded if it did not.
const MAX_PENDING: usize = 10_000 + 64;

/// The largest Response payload we send: net-snmp refuses PDUs over 64 KiB. A GetBulk stops
/// at the last whole repetition that fits; a Get or GetNext that cannot fit answers tooBig.
const RESPONSE_BUDGET: usize = MAX_PAYLOAD;

/// The agent's tunables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AgentSettings {
    /// A new walk or a Get gets figures no older than this while nothing else walks.
    pub max_age: Duration,
    /// A walk stays on its snapshot for this long, and a parked walk is remembered for
    /// this long after its last request.
    pub walk_window: Duration,
    /// Sampling and notifications.
    pub notify: WatchSettings,
    /// Which allocation call sites are served.
    pub sites: SiteSettings,
}

/// What [`Agent::handle`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handled {
    /// A Response is in the buffer.
    Reply,
    /// The PDU gets no Response (CleanupSet).
    NoReply,
    /// The request needs a fresh snapshot first; nothing was written.
    NeedsRead,
}

/// Counters of how continuations were decided, for tests and diagnostics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WalkStats {
    pub continued: u64,
    /// New walks that started where another walk waits, and joined its snapshot.
    pub joined: u64,
    pub ambiguous: u64,
    pub repeated: u64,
}

/// The agent: the snapshot store, row identity, walk tracking and the daemon's scalars.
pub struct Agent {
    store: SnapshotStore,
    rows: RowIdentity,
    sites: SiteIdentity,
    walks: WalkTracker,
    scalars: DaemonScalars,
    settings: AgentSettings,
    empty: Arc<MibView>,
    stats: WalkStats,
    /// Reused for every GetNext and GetBulk: where each range stopped.
    parked_scratch: Vec<Option<u32>>,
    /// A failed save is retried at every refresh; on a full filesystem that would be a
    /// warning per refresh.
    save_warnings: RateLimited,
    watcher: Watcher,
    /// When the last sample was taken (or the agent started).
    last_sample: Instant,
    /// Samples taken since the start, for the debug line each one logs.
    samples: u64,
    /// Notifications due, for the session to send or drop.
    pending: VecDeque<Notification>,
    /// The generation of the snapshot that answered the last request's table cells, for
    /// the contract's model check: names and allocators carry no figure that could say.
    #[cfg(test)]
    answered_from: Option<u64>,
}

impl Agent {
    /// An agent serving the snapshots of `sources` (their names, in the order of the
    /// `source` setting and of every read's parts).
    pub fn new(
        sources: &[String],
        indexes: TypeIndexes,
        settings: AgentSettings,
        now: Instant,
    ) -> Agent {
        Agent {
            store: SnapshotStore::new(sources, settings.max_age),
            rows: RowIdentity::new(indexes),
            sites: SiteIdentity::new(SiteIndexes::in_memory()),
            walks: WalkTracker::new(settings.walk_window, settings.max_age, WalkPolicy::DEFAULT),
            scalars: DaemonScalars::new(now),
            settings,
            empty: Arc::new(MibView::empty()),
            stats: WalkStats::default(),
            parked_scratch: Vec::new(),
            save_warnings: RateLimited::new(Duration::from_secs(10)),
            watcher: Watcher::new(),
            last_sample: now,
            samples: 0,
            pending: VecDeque::new(),
            #[cfg(test)]
            answered_from: None,
        }
    }

    /// The index state is not persisted, and why (the state directory cannot be created,
    /// is not safe, or cannot be locked); `None`: it is. Shown in memSourceLastError while
    /// the sources have no error of their own; memSourceStatus stays the sources'.
    pub fn set_persistence_off(&mut self, problem: Option<StateDirProblem>) {
        self.scalars.set_persistence_off(problem);
    }

    /// Logs the index problems of one refresh; failed saves are rate-limited.
    fn index_problems(&mut self, problems: Vec<IndexError>, now: Instant) {
        let mut save_failed = false;
        for p in problems {
            if !matches!(p, IndexError::Save { .. }) {
                tracing::warn!("{p}");
                continue;
            }
            save_failed = true;
            match self.save_warnings.should_log(now) {
                Some(0) => tracing::warn!("{p}"),
                Some(n) => tracing::warn!("{p} ({n} more failed saves not logged)"),
                None => {}
            }
            self.scalars.save_failed(p);
        }
        // A failed save is retried at every refresh: none failing now means it worked.
        if !save_failed && self.scalars.save_recovered() {
            let n = self.save_warnings.suppressed();
            tracing::info!("index state saved again ({n} failed saves not logged)");
            self.save_warnings.reset();
        }
    }

    /// Keeps the call sites' indexes in `indexes` (a state file's) instead of memory alone.
    pub fn with_site_indexes(mut self, indexes: SiteIndexes) -> Agent {
        self.sites = SiteIdentity::new(indexes);
        self
    }

    pub fn settings(&self) -> AgentSettings {
        self.settings
    }

    pub fn set_settings(&mut self, settings: AgentSettings) {
        if settings.sites != self.settings.sites {
            // The served sites are chosen when a snapshot is laid out: the next one applies
            // the new choice.
            self.store.invalidate();
        }
        self.settings = settings;
        self.store.set_max_age(settings.max_age);
        self.walks
            .set_timing(settings.walk_window, settings.max_age);
    }

    // --- the source ---------------------------------------------------------------------

    /// True when the next request that wants figures would need a read (also used for the
    /// one read at start-up).
    pub fn read_due(&mut self, now: Instant) -> bool {
        if !self.store.refresh_due(now) {
            return false;
        }
        // While walks are in progress, the current view keeps serving new walks and Gets up
        // to the freshness bound: walks that overlap in time share one snapshot, which
        // keeps them apart where they park at the same OIDs.
        let busy = self.walks.busy(now);
        if busy
            && self
                .store
                .age(now)
                .is_some_and(|a| a < self.freshness_bound())
        {
            return false;
        }
        self.walks.make_room(now)
    }

    /// The caller starts reading the source now.
    pub fn read_started(&mut self, now: Instant) {
        self.store.read_started(now);
    }

    /// The request waiting for the read gives up: it is answered from the last good
    /// snapshot, marked stale, while the read goes on.
    pub fn read_overdue(&mut self, now: Instant) {
        let (before, lines) = self.source_statuses();
        self.store.read_overdue(now);
        self.source_changed(before, &lines);
    }

    /// The notifications due when a refresh changed memSourceStatus.
    /// memSourceStale or memSourceRecovered for each source whose status a refresh changed;
    /// for memSourceStatus alone when none did (a read overdue, or its late result).
    fn source_changed(&mut self, before: SourceStatus, lines_before: &[SourceStatus]) {
        let after = self.store.status();
        let lines = self.store.source_lines();
        let change = |row| SourceChange {
            source: self.store.source_name(),
            before,
            after,
            error: self.store.last_error(),
            row,
        };
        let mut due = Vec::new();
        for (i, (line, was)) in lines.iter().zip(lines_before).enumerate() {
            if line.status != *was {
                let row = SourceRowChange {
                    index: i as u32 + 1,
                    name: &line.name,
                    before: *was,
                    after: line.status,
                };
                due.extend(watch::source_changed(
                    &change(Some(row)),
                    &self.settings.notify,
                ));
            }
        }
        if due.is_empty() && before != after {
            due = watch::source_changed(&change(None), &self.settings.notify);
        }
        for n in due {
            self.push_notification(n);
        }
    }

    /// memSourceStatus and each source's, to compare with after a refresh.
    fn source_statuses(&self) -> (SourceStatus, Vec<SourceStatus>) {
        let lines = self.store.source_lines();
        (
            self.store.status(),
            lines.iter().map(|l| l.status).collect(),
        )
    }

    fn push_notification(&mut self, n: Notification) {
        if self.pending.len() >= MAX_PENDING {
            self.scalars.count_dropped(1);
            return;
        }
        self.pending.push_back(n);
    }

    /// The read finished: a good one becomes the current view.
    pub fn read_finished(&mut self, read: impl Into<SourceRead>, now: Instant) {
        let (before, lines) = self.source_statuses();
        self.install_read(read.into(), now);
        self.source_changed(before, &lines);
    }

    fn install_read(&mut self, read: SourceRead, now: Instant) {
        let Ok(snap) = self.store.read_finished(read) else {
            return;
        };
        if !self.walks.make_room(now) {
            // Only a read that finished after its request gave up can get here: the views
            // filled up meanwhile. The bound on live views wins; the next request reads
            // again.
            tracing::debug!(
                "dropping a late snapshot: {} views alive",
                self.live_views()
            );
            self.store.invalidate();
            return;
        }
        let master_now = self.rows.clock().now(now).unwrap_or(0);
        let (sites, mut problems) = self
            .sites
            .choose(&snap, self.settings.sites, master_now, now);
        let (view, type_problems) = self.rows.lay_out(snap, sites, now);
        problems.extend(type_problems);
        self.index_problems(problems, now);
        let view = Arc::new(view);
        self.walks.adopt(view.clone(), now);
        self.store.install(view, now);
    }

    // --- the master ---------------------------------------------------------------------

    /// The master's sysUpTime, from one of its Responses.
    pub fn master_uptime(&mut self, ticks: u32, now: Instant) {
        self.rows.master_uptime(ticks, now);
    }

    /// The master's sysUpTime now, as far as we know it.
    pub fn master_uptime_now(&self, now: Instant) -> Option<u32> {
        self.rows.clock().now(now)
    }

    /// A new session with the master began. No request of an earlier session comes back,
    /// so every walk is forgotten. When the master restarted (its sysUpTime went back), the
    /// discontinuity times start over, and the next request lays the view out again.
    pub fn new_master_session(&mut self, master_restarted: bool) {
        self.walks.reset();
        // What changed while no master listened was dropped; the first sample of the new
        // session is a baseline.
        self.watcher.rebaseline();
        if master_restarted {
            self.rows.master_restarted();
            self.sites.master_restarted();
            self.store.invalidate();
        }
    }

    // --- periodic work ------------------------------------------------------------------

    /// Drops walk state and views that no walk can come back to.
    pub fn tick(&mut self, now: Instant) {
        self.walks.expire(now);
    }

    /// When [`tick`](Self::tick) next has work, if ever.
    pub fn next_tick(&self) -> Option<Instant> {
        self.walks.next_expiry()
    }

    /// When the next sample for notifications is due; `None` while sampling is off.
    pub fn next_sample(&self) -> Option<Instant> {
        let every = self.settings.notify.interval;
        (!every.is_zero()).then(|| self.last_sample + every)
    }

    pub fn sample_due(&self, now: Instant) -> bool {
        self.next_sample().is_some_and(|t| now >= t)
    }

    /// Takes a sample: compares the newest view with the previous sample. The caller has
    /// refreshed the view first if [`read_due`](Self::read_due) said so, which keeps samples
    /// within the view bound and the walk contract.
    pub fn sample(&mut self, now: Instant) {
        self.last_sample = now;
        self.samples += 1;
        // The one mark of a sample outside the notifications it may cause: a test that
        // checks that nothing was sent waits for samples to be taken first (man page,
        // NOTIFICATIONS).
        tracing::debug!("sample {} taken", self.samples);
        let Some(view) = self.store.current().cloned() else {
            return;
        };
        let due = self.watcher.sample(&view, now, &self.settings.notify);
        for n in due {
            self.push_notification(n);
        }
    }

    /// The notifications due, oldest first.
    pub fn take_notifications(&mut self) -> VecDeque<Notification> {
        std::mem::take(&mut self.pending)
    }

    pub fn has_notifications(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Notifications handed to the master (memNotificationsSent).
    pub fn notifications_sent(&mut self, n: u64) {
        self.scalars.count_sent(n);
    }

    /// Notifications dropped with no master connected (memNotificationsDropped).
    pub fn notifications_dropped(&mut self, n: u64) {
        self.scalars.count_dropped(n);
    }

    // --- introspection ------------------------------------------------------------------

    /// The daemon's scalars now.
    pub fn status(&self, now: Instant) -> DaemonStatus {
        self.scalars.status(&self.store, now)
    }

    /// Views alive now (the current one and those walks may still come back to).
    pub fn live_views(&self) -> usize {
        self.walks.live_views()
    }

    pub fn walk_stats(&self) -> WalkStats {
        self.stats
    }

    // --- requests -----------------------------------------------------------------------

    /// Answers one request PDU into `out` (which is cleared first). With `may_read`, a
    /// request that needs a fresh snapshot returns [`Handled::NeedsRead`] instead.
    pub fn handle(
        &mut self,
        pdu: &Pdu,
        now: Instant,
        may_read: bool,
        out: &mut Vec<u8>,
    ) -> Handled {
        out.clear();
        #[cfg(test)]
        {
            self.answered_from = None;
        }
        let ids = pdu.ids;
        let handled = match &pdu.payload {
            Payload::Get { ranges } => self.get(ids, ranges, now, may_read, out),
            Payload::GetNext { ranges } => {
                self.get_bulk(ids, ranges.len(), 0, ranges, now, may_read, out)
            }
            Payload::GetBulk {
                non_repeaters,
                max_repetitions,
                ranges,
            } => self.get_bulk(
                ids,
                usize::from(*non_repeaters).min(ranges.len()),
                *max_repetitions,
                ranges,
                now,
                may_read,
                out,
            ),
            Payload::TestSet { .. } => {
                // Read-only: every Set fails at its first varbind.
                ResponseWriter::begin(out, ids, 0, ResError::NOT_WRITABLE, 1).finish();
                Handled::Reply
            }
            Payload::CommitSet | Payload::UndoSet => {
                ResponseWriter::begin(out, ids, 0, ResError::NO_ERROR, 0).finish();
                Handled::Reply
            }
            // RFC 2741 §7.2.4.3: CleanupSet gets no Response.
            Payload::CleanupSet => Handled::NoReply,
            // PDUs a master never sends to a subagent.
            _ => {
                ResponseWriter::begin(out, ids, 0, ResError::PARSE_ERROR, 0).finish();
                Handled::Reply
            }
        };
        if handled == Handled::Reply && out.len() > HEADER_LEN + RESPONSE_BUDGET {
            // Only a request with thousands of ranges gets here; the master could not take
            // the answer, so say so instead.
            out.clear();
            ResponseWriter::begin(out, ids, 0, ResError::TOO_BIG, 0).finish();
        }
        handled
    }

    /// Answers a PDU whose header was sound but whose payload was not: parseError.
    pub fn handle_undecodable(&mut self, header: &Header, out: &mut Vec<u8>) {
        out.clear();
        ResponseWriter::begin(out, header.ids, 0, ResError::PARSE_ERROR, 0).finish();
    }

    /// [`handle`](Self::handle) with the read done inline by `read`: the same answer path,
    /// for tests and benchmarks. Returns whether there is a Response in `out`.
    pub fn answer_blocking(
        &mut self,
        pdu: &Pdu,
        now: Instant,
        out: &mut Vec<u8>,
        read: &mut dyn FnMut() -> Result<Vec<MemoryType>, SourceError>,
    ) -> bool {
        match self.handle(pdu, now, true, out) {
            Handled::Reply => true,
            Handled::NoReply => false,
            Handled::NeedsRead => {
                self.read_started(now);
                let result = read();
                self.read_finished(result, now);
                self.handle(pdu, now, false, out) == Handled::Reply
            }
        }
    }

    /// The snapshot a new walk joins, if its first answer is an OID where a walk in
    /// progress (one that parked there within the in-progress window) waits on a snapshot
    /// no older than the freshness bound. A walk that starts where another just stopped
    /// (pollers walking column after column) so shares its snapshot, and the two cannot be
    /// told apart later. Only a walk in progress: while nothing walks, a new walk gets
    /// figures no older than max-age, however recently a probe or a paused walk stopped
    /// where it starts.
    fn join(&self, ranges: &[SearchRange], now: Instant) -> Option<Arc<MibView>> {
        let current = self.store.current()?;
        let bound = self.freshness_bound();
        ranges.iter().find_map(|r| {
            let first = current.get_next(r.start.as_slice(), r.include, r.end.as_slice())?;
            self.walks.joinable(first.oid.as_slice(), now, bound)
        })
    }

    /// The oldest figures a new walk may see while other walks are in progress:
    /// max(max-age, walk-window − max-age) (see ARCHITECTURE.md).
    pub fn freshness_bound(&self) -> Duration {
        let AgentSettings {
            max_age,
            walk_window,
            ..
        } = self.settings;
        max_age.max(walk_window.saturating_sub(max_age))
    }

    /// The view for a request that does not continue a walk: the newest, unless a read is
    /// due first (`Err`).
    fn newest(&mut self, now: Instant, may_read: bool) -> Result<Arc<MibView>, Handled> {
        if may_read && self.read_due(now) {
            return Err(Handled::NeedsRead);
        }
        Ok(self.store.current().unwrap_or(&self.empty).clone())
    }

    fn get(
        &mut self,
        ids: HeaderIds,
        ranges: &[SearchRange],
        now: Instant,
        may_read: bool,
        out: &mut Vec<u8>,
    ) -> Handled {
        // Reading the daemon's scalars never triggers a refresh.
        let view = if ranges.iter().all(|r| mib::is_status(r.start.as_slice())) {
            None
        } else {
            match self.newest(now, may_read) {
                Ok(v) => Some(v),
                Err(h) => return h,
            }
        };
        let mut status: Option<StatusView> = None;
        let mut w = ResponseWriter::begin(out, ids, 0, ResError::NO_ERROR, 0);
        for r in ranges {
            let oid = r.start.as_slice();
            let value = match &view {
                Some(v) if !mib::is_status(oid) => {
                    #[cfg(test)]
                    {
                        self.answered_from = Some(v.snapshot().generation);
                    }
                    v.get(oid)
                }
                _ => status
                    .get_or_insert_with(|| StatusView::new(self.scalars.status(&self.store, now)))
                    .get(oid),
            };
            w.push(&r.start, &value);
        }
        w.finish();
        Handled::Reply
    }

    /// GetNext (every range a non-repeater) and GetBulk, RFC 2741 §7.2.3.2 and §7.2.3.3.
    #[allow(clippy::too_many_arguments)]
    fn get_bulk(
        &mut self,
        ids: HeaderIds,
        non_repeaters: usize,
        max_repetitions: u16,
        ranges: &[SearchRange],
        now: Instant,
        may_read: bool,
        out: &mut Vec<u8>,
    ) -> Handled {
        let mut status: Option<StatusView> = None;
        // Which snapshot: the one a walk parked at one of the starts is on, else the
        // newest. A request answered from the scalars alone needs no snapshot at all.
        let starts = ranges.iter().map(|r| r.start.as_slice());
        let walks::Continued {
            view: continued,
            how,
            turnaround,
            first_start,
            contest,
        } = self.walks.continuation(starts, ids.transaction_id, now);
        match how {
            Continuation::None | Continuation::Lone => {}
            Continuation::Parked => self.stats.continued += 1,
            Continuation::Repeated | Continuation::WentBy => self.stats.repeated += 1,
            Continuation::Ambiguous | Continuation::Retaken => {
                self.stats.ambiguous += 1;
                // The test of the residual case tells the two apart by these words.
                let which = match contest {
                    true => "moving walks on two snapshots parked there (contest)",
                    false => "walks of at most one snapshot moving there",
                };
                tracing::debug!("ambiguous continuation at {}: {which}", ranges[0].start);
            }
        }
        let view = match continued {
            Some(v) => v,
            None => {
                let scalars_only = ranges.iter().all(|r| {
                    mib::status_may_follow(r.start.as_slice())
                        && status
                            .get_or_insert_with(|| {
                                StatusView::new(self.scalars.status(&self.store, now))
                            })
                            .get_next(r.start.as_slice(), r.include, r.end.as_slice())
                            .is_some()
                }) && (max_repetitions == 0 || non_repeaters == ranges.len());
                if scalars_only {
                    self.empty.clone()
                } else if let Some(joined) = self.join(ranges, now) {
                    self.stats.joined += 1;
                    joined
                } else {
                    match self.newest(now, may_read) {
                        Ok(v) => v,
                        Err(h) => return h,
                    }
                }
            }
        };

        // Only walks park, so that nothing else is ever taken for a walk waiting at the
        // same OID. A request that continues no walk and starts at instances is a lone
        // GetNext (or a walk resumed after its window): it leaves a mark that only the rest
        // of its own request follows. One that starts where a walk went on just now is that
        // walk, whose park a lone GetNext took: it parks. One that starts where a walk went
        // by earlier is a re-sent request, such a walk after a pause, or a lone GetNext: it
        // leaves a place a walk went by, so that the walk, if it is one, stays on this view
        // (where no walk of another view waits), and it is no walk for anyone to be taken
        // for.
        let leave = match how {
            Continuation::Lone => Leave::Mark,
            Continuation::WentBy => Leave::WentBy,
            Continuation::None
                if ranges
                    .iter()
                    .all(|r| view.instance_of(r.start.as_slice()).is_some()) =>
            {
                Leave::Mark
            }
            Continuation::None
            | Continuation::Parked
            | Continuation::Ambiguous
            | Continuation::Retaken
            | Continuation::Repeated => Leave::Park(turnaround),
        };
        // `known`: the instance `from` names in `view`, when known (a walk's start, as the
        // walk tracker found it, or the last answer): the next one is then taken without a
        // search.
        let mut step = |from: &[u32], known: Option<u32>, include: bool, end: &[u32]| {
            if mib::status_may_follow(from) {
                let st = status
                    .get_or_insert_with(|| StatusView::new(self.scalars.status(&self.store, now)));
                if let Some((oid, value)) = st.get_next(from, include, end) {
                    return Some(Step {
                        oid,
                        value,
                        instance: None,
                    });
                }
            }
            let found = match known {
                Some(instance) if !include => view.next_after(instance, end),
                _ => view.get_next(from, include, end),
            };
            found.map(|f| Step {
                oid: f.oid,
                value: f.value,
                instance: Some(f.instance),
            })
        };
        // The tracker's instance is of the first range's start, on the view it chose.
        let start_instance = |i: usize| first_start.filter(|_| i == 0);

        // Where each range stands after this request: its last answer, if it had one.
        let mut parked = std::mem::take(&mut self.parked_scratch);
        parked.clear();
        parked.resize(ranges.len(), None);
        let mut w = ResponseWriter::begin(out, ids, 0, ResError::NO_ERROR, 0);
        for (i, r) in ranges[..non_repeaters].iter().enumerate() {
            match step(
                r.start.as_slice(),
                start_instance(i),
                r.include,
                r.end.as_slice(),
            ) {
                Some(s) => {
                    w.push(&s.oid, &s.value);
                    parked[i] = s.instance;
                }
                None => w.push(&r.start, &Value::EndOfMibView),
            }
        }
        let repeaters = &ranges[non_repeaters..];
        // Per repeater: the name it returned last (None: nothing yet) and whether it is
        // exhausted. §7.2.3.3: each repetition searches from the previous one's name, so
        // once exhausted its endOfMibView carries that name (the range's start only when it
        // returned nothing at all).
        let mut last: Vec<(Option<Step>, bool)> = repeaters.iter().map(|_| (None, false)).collect();
        for _ in 0..max_repetitions {
            if repeaters.is_empty() || last.iter().all(|l| l.1) {
                break;
            }
            // Only whole repetitions go out: one that would make the Response too big for
            // the master is taken back, and the answer stops before it.
            let checkpoint = w.checkpoint();
            let saved = last.clone();
            for (j, r) in repeaters.iter().enumerate() {
                let (prev, done) = &last[j];
                let name = prev.as_ref().map_or(&r.start, |s| &s.oid);
                if *done {
                    w.push(name, &Value::EndOfMibView);
                    continue;
                }
                let (from, known, include) = match prev {
                    Some(s) => (s.oid.as_slice(), s.instance, false),
                    None => (
                        r.start.as_slice(),
                        start_instance(non_repeaters + j),
                        r.include,
                    ),
                };
                match step(from, known, include, r.end.as_slice()) {
                    Some(s) => {
                        w.push(&s.oid, &s.value);
                        last[j].0 = Some(s);
                    }
                    None => {
                        w.push(name, &Value::EndOfMibView);
                        last[j].1 = true;
                    }
                }
            }
            if w.payload_len() > RESPONSE_BUDGET {
                w.rollback(checkpoint);
                last = saved;
                break;
            }
        }
        w.finish();
        for (j, (s, _)) in last.into_iter().enumerate() {
            parked[non_repeaters + j] = s.and_then(|s| s.instance);
        }
        #[cfg(test)]
        if parked.iter().any(Option::is_some) {
            self.answered_from = Some(view.snapshot().generation);
        }
        for instance in parked.iter().flatten() {
            self.walks
                .leave(&view, *instance, ids.transaction_id, leave, now);
        }
        self.parked_scratch = parked;
        Handled::Reply
    }
}

/// One GetNext step's answer; `instance` is set when it came from the view (not a scalar).
#[derive(Clone)]
struct Step {
    oid: Oid,
    value: Value,
    instance: Option<u32>,
}

#[cfg(test)]
mod contract_tests;
#[cfg(test)]
mod rig;
#[cfg(test)]
mod tests;
