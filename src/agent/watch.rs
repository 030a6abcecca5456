//! Notifications: each one defined once, in [`DEFINITIONS`], and the sampling that runs their
//! rules. No I/O, no clock of its own: the session reads the source (through the snapshot
//! store, under the view bound and the walk contract) and hands the newest view to
//! `Watcher::sample`; the agent hands each change of memSourceStatus to `source_changed`.
//!
//! A [`Definition`] holds everything one notification is: its NOTIFICATION-TYPE (name, arc
//! under memstatNotifications, OBJECTS), the `notify-*` switch that turns it on, the other
//! settings its rule reads, and its rule:
//! - a **row rule** compares a row of memTypeTable with what the rule remembered of that row
//!   at the previous sample (one small `RuleState` per row rule per row) and says what is
//!   due; memTypeLimitNearing and memTypeLimitCleared are one rule, which keeps the
//!   hysteresis state both need;
//! - a **source rule** compares memSourceStatus before and after a refresh;
//! - the **summary**, memNotificationsSuppressed, is what the cap sends for what it cut.
//!
//! Each rule is documented at its definition. What holds for all of them:
//! - **Baselines send nothing.** The first sample after start or after a reconnection to the
//!   master, a row that was not in the previous sample, and a row whose discontinuity time
//!   changed only set the figures later samples are compared with. Otherwise every restart
//!   of a host whose FAIL column is non-zero would notify for every row. A rule may keep
//!   what the manager already heard across a baseline: the limit state is kept across a
//!   reconnection.
//! - **Holdoff.** One memTypeAllocFailure and one memTypeLimitNearing per row per holdoff; a
//!   clear is never held back, so a manager never keeps an alarm that is over.
//! - **Cap.** A sample sends at most `cap` notifications, in row order (within a row, in the
//!   order of [`DEFINITIONS`]); past it, one memNotificationsSuppressed carries the number
//!   left out. A suppressed notification counts as sent for the holdoff and the limit state
//!   of its row.
//! - **Switches.** A kind switched off sends nothing, and switching it on again does not
//!   report what happened while it was off.
//! - Rows gone from the view are forgotten, so the watcher's memory is bounded by the view.

use super::store::RefreshError;
use crate::config::Config;
use crate::memstat::MemoryType;
use crate::mib::{MibView, Notification, NotificationType, NotifiedRow, SourceStatus};
use agentx_proto::value::Value;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// One notification of MEMSTAT-MIB, defined once: what it is on the wire, when it is sent,
/// and the settings that govern it.
#[derive(Debug)]
pub struct Definition {
    /// Its NOTIFICATION-TYPE; the varbinds follow its OBJECTS.
    pub kind: NotificationType,
    /// The `notify-*` setting that turns it on; `None`: always on.
    pub switch: Option<Switch>,
    /// The other settings its rule reads, by key.
    pub reads: &'static [&'static str],
    pub(crate) rule: Rule,
}

/// A `notify-*` switch: its key in the settings table, and its field of [`Config`].
#[derive(Debug)]
pub struct Switch {
    pub key: &'static str,
    pub(crate) on: fn(&Config) -> bool,
}

/// When a notification is sent.
#[derive(Debug)]
pub(crate) enum Rule {
    /// Over one row of memTypeTable, at each sample.
    Row(RowRule),
    /// By another definition's row rule, which keeps the state both need, and with its
    /// switch (memTypeLimitCleared, by memTypeLimitNearing's).
    Shared,
    /// When a refresh changed memSourceStatus.
    Source(fn(&SourceChange) -> Option<Notification>),
    /// For the number of notifications the cap left out of a sample.
    Summary(fn(u32) -> Notification),
}

/// A rule over one row in two samples.
#[derive(Debug)]
pub(crate) struct RowRule {
    /// Sets the figures the next sample compares with, and sends nothing. The state is what
    /// the rule remembered of the row (the default for a row it never saw).
    baseline: fn(&mut RuleState, &MemoryType),
    /// Compares the row with the state, brings the state up to date, and says what is due.
    compare: fn(&mut RuleState, &RowSample) -> Option<Notification>,
}

/// What a row rule remembers of one row between samples.
#[derive(Clone, Copy, Debug, Default)]
struct RuleState {
    /// The figure the next sample is compared with.
    figure: Option<u64>,
    /// An alarm was sent and no clear since.
    raised: bool,
    /// When the rule last sent what the holdoff holds back.
    last_sent: Option<Instant>,
}

/// A row at a sample, as a row rule sees it.
struct RowSample<'a> {
    index: u32,
    t: &'a MemoryType,
    now: Instant,
    settings: &'a WatchSettings,
    /// The rule's switch is on.
    on: bool,
}

impl RowSample<'_> {
    /// A notification sent at `last` holds back another until the holdoff has passed.
    fn held(&self, last: Option<Instant>) -> bool {
        last.is_some_and(|t| self.now.saturating_duration_since(t) < self.settings.holdoff)
    }

    /// A notification of `kind` about this row, with what every row notification carries:
    /// the row's name and allocator.
    fn notification(&self, kind: NotificationType) -> Notification {
        Notification::new(kind, Some(NotifiedRow { index: self.index }))
            .with_text("memTypeName", &self.t.name)
            .with(
                "memTypeAllocator",
                Value::Integer(self.t.allocator.number() as i32),
            )
    }
}

/// A change of a source's status by a refresh, as a source rule sees it: one source's row
/// of memSourceTable, or (`row: None`) memSourceStatus alone, when no source's own status
/// changed (a read that did not finish in time, and its late result).
pub(crate) struct SourceChange<'a> {
    /// memSourceName: every source.
    pub source: &'a str,
    /// memSourceStatus before and after: all sources taken together.
    pub before: SourceStatus,
    pub after: SourceStatus,
    /// Why the last refresh failed, if it did.
    pub error: Option<&'a RefreshError>,
    pub row: Option<SourceRowChange<'a>>,
}

/// One source's row of memSourceTable, before and after a refresh.
pub(crate) struct SourceRowChange<'a> {
    /// memSrcIndex.
    pub index: u32,
    pub name: &'a str,
    pub before: SourceStatus,
    pub after: SourceStatus,
}

impl SourceChange<'_> {
    /// The status change the rules look at: the source's own, else memSourceStatus's.
    fn statuses(&self) -> (SourceStatus, SourceStatus) {
        match &self.row {
            Some(r) => (r.before, r.after),
            None => (self.before, self.after),
        }
    }

    /// `n` followed by the source's memSrcName and memSrcStatus, beyond the OBJECTS clause
    /// (RFC 3416 §4.2.6 lets an agent add varbinds): the index tells which source it is.
    fn naming_the_source(&self, n: Notification) -> Notification {
        match &self.row {
            Some(r) => n
                .also("memSrcName", r.index, crate::mib::admin_string(r.name))
                .also("memSrcStatus", r.index, Value::Integer(r.after as i32)),
            None => n,
        }
    }
}

/// Every notification of MEMSTAT-MIB, in the order of their arcs. Within a row, what the
/// row rules send comes in this order.
pub const DEFINITIONS: &[Definition] = &[
    ALLOC_FAILURE,
    LIMIT_NEARING,
    LIMIT_CLEARED,
    SOURCE_STALE,
    SOURCE_RECOVERED,
    SUPPRESSED,
];

/// memTypeAllocFailure when memTypeFailures rose since the last one for the row (or its
/// baseline). The increase is counted from there, so a rise held off is added to the next.
pub(crate) const ALLOC_FAILURE: Definition = Definition {
    kind: NotificationType::new(
        "memTypeAllocFailure",
        1,
        &[
            "memTypeName",
            "memTypeAllocator",
            "memTypeFailures",
            "memNotifyFailureIncrease",
        ],
    ),
    switch: Some(Switch {
        key: "notify-alloc-failure",
        on: |c| c.notify_alloc_failure,
    }),
    reads: &["notify-holdoff"],
    rule: Rule::Row(RowRule {
        baseline: |st, t| {
            *st = RuleState {
                figure: t.failures,
                ..RuleState::default()
            }
        },
        compare: failures_rose,
    }),
};

fn failures_rose(st: &mut RuleState, row: &RowSample) -> Option<Notification> {
    let rise = match (row.t.failures, st.figure) {
        (Some(now), Some(before)) if now > before => Some((now, now - before)),
        _ => None,
    };
    match rise {
        // Held off: the next one counts this rise too.
        Some(_) if row.on && row.held(st.last_sent) => None,
        Some((failures, increase)) if row.on => {
            st.figure = Some(failures);
            st.last_sent = Some(row.now);
            let n = row
                .notification(ALLOC_FAILURE.kind)
                .with("memTypeFailures", Value::Counter64(failures))
                .with("memNotifyFailureIncrease", Value::Counter64(increase));
            Some(n)
        }
        // Unchanged; backwards without a discontinuity, or newly provided or gone; or
        // switched off, with nothing to add up for a later one: compare with this from now
        // on.
        _ => {
            st.figure = row.t.failures;
            None
        }
    }
}

/// memTypeLimitNearing when the items counted against a type's limit reach the share of it
/// ([`limit_usage`]); memTypeLimitCleared (sent by the same rule) when they fall below the
/// share minus the hysteresis, or when the limit is removed. The state is kept across a
/// baseline, since the manager heard it; one whose limit went meanwhile is dropped.
/// Switched off, the state stays as it was.
pub(crate) const LIMIT_NEARING: Definition = Definition {
    kind: NotificationType::new(
        "memTypeLimitNearing",
        2,
        &[
            "memTypeName",
            "memTypeAllocator",
            "memNotifyLimitUsage",
            "memTypeCountLimit",
        ],
    ),
    switch: Some(Switch {
        key: "notify-limit",
        on: |c| c.notify_limit,
    }),
    reads: &[
        "notify-holdoff",
        "notify-limit-percent",
        "notify-limit-hysteresis",
    ],
    rule: Rule::Row(RowRule {
        baseline: |st, t| st.raised &= limit_usage(t).is_some(),
        compare: limit_share,
    }),
};

/// memTypeLimitCleared: see [`LIMIT_NEARING`], whose rule sends it.
pub(crate) const LIMIT_CLEARED: Definition = Definition {
    kind: NotificationType::new(
        "memTypeLimitCleared",
        3,
        &[
            "memTypeName",
            "memTypeAllocator",
            "memNotifyLimitUsage",
            "memTypeCountLimit",
        ],
    ),
    switch: Some(Switch {
        key: "notify-limit",
        on: |c| c.notify_limit,
    }),
    reads: &["notify-limit-percent", "notify-limit-hysteresis"],
    rule: Rule::Shared,
};

fn limit_share(st: &mut RuleState, row: &RowSample) -> Option<Notification> {
    if !row.on {
        return None;
    }
    let s = row.settings;
    let (kind, usage, limit) = match limit_usage(row.t) {
        Some((usage, limit)) => {
            let share = u128::from(usage) * 100;
            let at = u128::from(s.limit_percent) * u128::from(limit);
            let below =
                u128::from(s.limit_percent.saturating_sub(s.hysteresis)) * u128::from(limit);
            if !st.raised && share >= at && !row.held(st.last_sent) {
                st.raised = true;
                st.last_sent = Some(row.now);
                (LIMIT_NEARING.kind, usage, limit)
            } else if st.raised && share < below {
                st.raised = false;
                (LIMIT_CLEARED.kind, usage, limit)
            } else {
                return None;
            }
        }
        // The limit was removed: nothing is near it any more.
        None if st.raised => {
            st.raised = false;
            let t = row.t;
            let (usage, limit) = (t.in_use_count.unwrap_or(0), t.count_limit.unwrap_or(0));
            (LIMIT_CLEARED.kind, usage, limit)
        }
        None => return None,
    };
    let n = row
        .notification(kind)
        .with("memNotifyLimitUsage", Value::Counter64(usage))
        .with("memTypeCountLimit", Value::Counter64(limit));
    Some(n)
}

/// memSourceStale when a refresh fails after a good one, with the error.
pub(crate) const SOURCE_STALE: Definition = Definition {
    kind: NotificationType::new(
        "memSourceStale",
        4,
        &["memSourceName", "memSourceStatus", "memSourceLastError"],
    ),
    switch: Some(Switch {
        key: "notify-source",
        on: |c| c.notify_source,
    }),
    reads: &[],
    rule: Rule::Source(|c| {
        let stale = c.statuses() == (SourceStatus::Ok, SourceStatus::Stale);
        stale.then(|| {
            let error = c.error.map(ToString::to_string).unwrap_or_default();
            c.naming_the_source(
                Notification::new(SOURCE_STALE.kind, None)
                    .with_text("memSourceName", c.source)
                    .with("memSourceStatus", Value::Integer(c.after as i32))
                    .with_text("memSourceLastError", &error),
            )
        })
    }),
};

/// memSourceRecovered when a refresh succeeds after a failed one.
pub(crate) const SOURCE_RECOVERED: Definition = Definition {
    kind: NotificationType::new(
        "memSourceRecovered",
        5,
        &["memSourceName", "memSourceStatus"],
    ),
    switch: Some(Switch {
        key: "notify-source",
        on: |c| c.notify_source,
    }),
    reads: &[],
    rule: Rule::Source(|c| {
        let recovered = c.statuses() == (SourceStatus::Stale, SourceStatus::Ok);
        recovered.then(|| {
            c.naming_the_source(
                Notification::new(SOURCE_RECOVERED.kind, None)
                    .with_text("memSourceName", c.source)
                    .with("memSourceStatus", Value::Integer(c.after as i32)),
            )
        })
    }),
};

/// memNotificationsSuppressed: the cap's summary, last in a sample that had more than
/// `notify-max-per-sample` due, with the number left out.
pub(crate) const SUPPRESSED: Definition = Definition {
    kind: NotificationType::new("memNotificationsSuppressed", 6, &["memNotifySuppressed"]),
    switch: None,
    reads: &["notify-max-per-sample"],
    rule: Rule::Summary(|count| {
        Notification::new(SUPPRESSED.kind, None).with("memNotifySuppressed", Value::Gauge32(count))
    }),
};

/// The row rules, in the order of [`DEFINITIONS`], each with its definition's position there.
fn row_rules() -> impl Iterator<Item = (usize, &'static RowRule)> {
    DEFINITIONS
        .iter()
        .enumerate()
        .filter_map(|(i, d)| match &d.rule {
            Rule::Row(rule) => Some((i, rule)),
            _ => None,
        })
}

/// How many row rules there are: the size of the watcher's memory of a row.
const ROW_RULES: usize = {
    let mut n = 0;
    let mut i = 0;
    while i < DEFINITIONS.len() {
        if matches!(DEFINITIONS[i].rule, Rule::Row(_)) {
            n += 1;
        }
        i += 1;
    }
    n
};

/// The notification settings (`watch-interval`, `notify-*`), taken from the settings table:
/// there are no defaults here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WatchSettings {
    /// Between samples; zero turns sampling off.
    pub(crate) interval: Duration,
    pub(crate) holdoff: Duration,
    /// memTypeLimitNearing at this share of the limit, in percent (1-100).
    pub(crate) limit_percent: u32,
    /// memTypeLimitCleared below `limit_percent - hysteresis` percent.
    pub(crate) hysteresis: u32,
    /// Most notifications per sample (at least 1).
    pub(crate) cap: u32,
    /// Per definition, in the order of [`DEFINITIONS`]: its switch is on.
    switched_on: [bool; DEFINITIONS.len()],
}

impl From<&Config> for WatchSettings {
    fn from(c: &Config) -> WatchSettings {
        WatchSettings {
            interval: c.watch_interval,
            holdoff: c.notify_holdoff,
            limit_percent: c.notify_limit_percent,
            hysteresis: c.notify_limit_hysteresis,
            cap: c.notify_max_per_sample,
            switched_on: std::array::from_fn(|i| match &DEFINITIONS[i].switch {
                Some(switch) => (switch.on)(c),
                None => true,
            }),
        }
    }
}

#[cfg(test)]
impl WatchSettings {
    /// The settings table's defaults.
    pub(crate) fn defaults() -> WatchSettings {
        let c = crate::config::RawSettings::default().convert();
        WatchSettings::from(&c.expect("the defaults convert"))
    }
}

/// What the watcher remembers of one row.
#[derive(Debug, Default)]
struct RowMemory {
    /// The sample that saw the row last.
    seen: u64,
    discontinuity: u32,
    /// One per row rule, in the order of [`row_rules`].
    rules: [RuleState; ROW_RULES],
}

/// The comparison of samples (see the module documentation).
#[derive(Default)]
pub(crate) struct Watcher {
    rows: HashMap<u32, RowMemory>,
    /// The number of the last sample.
    samples: u64,
    /// The next sample is a baseline for every row.
    rebaseline: bool,
}

/// The items of `t` that count against its count limit, with the limit; `None` when the
/// type has no limit (absent or 0) or its in-use count is unknown. What counts against a UMA
/// zone's limit is what the kernel's `uz_items` counts: the items in use plus the free items
/// cached in the per-CPU caches and in the zone's bucket cache, since `zone_alloc_bucket()`
/// charges whole buckets and only a return to the keg gives them back (FreeBSD
/// sys/vm/uma_core.c; see memNotifyLimitUsage in the MIB).
fn limit_usage(t: &MemoryType) -> Option<(u64, u64)> {
    let limit = t.count_limit.filter(|&l| l > 0)?;
    let cached: u64 = t
        .per_cpu
        .iter()
        .filter_map(|c| c.cache_free)
        .fold(0u64, u64::saturating_add);
    let usage = t
        .in_use_count?
        .saturating_add(t.zone_free.unwrap_or(0))
        .saturating_add(cached);
    Some((usage, limit))
}

impl Watcher {
    pub(crate) fn new() -> Watcher {
        Watcher {
            rebaseline: true,
            ..Watcher::default()
        }
    }

    /// The next sample is a baseline (a new session with the master).
    pub(crate) fn rebaseline(&mut self) {
        self.rebaseline = true;
    }

    /// Compares `view` with the previous sample and returns the notifications due, capped
    /// (with the summary last when the cap cut some).
    pub(crate) fn sample(
        &mut self,
        view: &MibView,
        now: Instant,
        s: &WatchSettings,
    ) -> Vec<Notification> {
        let baseline = std::mem::replace(&mut self.rebaseline, false);
        let previous = self.samples;
        self.samples += 1;
        let this = self.samples;
        let mut due = Vec::new();
        for (row, t) in view.rows() {
            let known = !baseline
                && self
                    .rows
                    .get(&row.index)
                    .is_some_and(|m| m.seen == previous && m.discontinuity == row.discontinuity);
            let memory = self.rows.entry(row.index).or_default();
            memory.seen = this;
            if !known {
                memory.discontinuity = row.discontinuity;
                for ((_, rule), st) in row_rules().zip(&mut memory.rules) {
                    (rule.baseline)(st, t);
                }
                continue;
            }
            for ((i, rule), st) in row_rules().zip(&mut memory.rules) {
                let sample = RowSample {
                    index: row.index,
                    t,
                    now,
                    settings: s,
                    on: s.switched_on[i],
                };
                due.extend((rule.compare)(st, &sample));
            }
        }
        // Rows gone from the view are forgotten: if they return, they are new.
        self.rows.retain(|_, m| m.seen == this);
        let cap = s.cap.max(1) as usize;
        if due.len() > cap {
            let count = u32::try_from(due.len() - cap).unwrap_or(u32::MAX);
            due.truncate(cap);
            due.extend(DEFINITIONS.iter().find_map(|d| match d.rule {
                Rule::Summary(summary) => Some(summary(count)),
                _ => None,
            }));
        }
        due
    }
}

/// The notifications due for a change of memSourceStatus by a refresh.
pub(crate) fn source_changed(change: &SourceChange, s: &WatchSettings) -> Vec<Notification> {
    DEFINITIONS
        .iter()
        .zip(s.switched_on)
        .filter_map(|(d, on)| match d.rule {
            Rule::Source(rule) if on => rule(change),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{RawSettings, Rule as SettingRule, SETTINGS};
    use crate::memstat::{Allocator, PerCpu, Snapshot, SourceError};
    use crate::mib::{notification_varbinds, object_defs, object_oid, Syntax};
    use std::sync::Arc;
    use std::time::SystemTime;

    fn zone(name: &str, failures: u64, in_use: u64, limit: u64) -> MemoryType {
        let mut t = MemoryType::new(Allocator::Uma, name);
        t.failures = Some(failures);
        t.in_use_count = Some(in_use);
        t.count_limit = Some(limit);
        t
    }

    /// A view of `types` with indexes 1.. and the given discontinuity times.
    fn view(types: Vec<MemoryType>, disc: &[u32]) -> MibView {
        let n = types.len();
        let idx: Vec<u32> = (1..=n as u32).collect();
        let mut d = disc.to_vec();
        d.resize(n, 0);
        MibView::new(
            Arc::new(Snapshot::new(1, SystemTime::now(), String::new(), types)),
            &idx,
            &d,
        )
    }

    fn kinds(n: &[Notification]) -> Vec<NotificationType> {
        n.iter().map(Notification::kind).collect()
    }

    /// The one notification in `n`, which is of `kind`.
    fn only(n: &[Notification], kind: NotificationType) -> &Notification {
        assert_eq!(kinds(n), [kind], "{n:?}");
        &n[0]
    }

    /// The Counter64 value `n` carries for `object`.
    fn counter(n: &Notification, object: &str) -> u64 {
        match n.value(object) {
            Some(Value::Counter64(v)) => *v,
            other => panic!("{object}: {other:?} in {n:?}"),
        }
    }

    /// The settings table's defaults, with `(key, value)` given as options.
    fn config(options: &[(&str, &str)]) -> Config {
        let mut raw = RawSettings::default();
        for (key, value) in options {
            raw.set_arg(key, value.to_string());
        }
        raw.convert().unwrap()
    }

    /// The defaults, sampling every second.
    fn settings() -> WatchSettings {
        WatchSettings {
            interval: Duration::from_secs(1),
            ..WatchSettings::defaults()
        }
    }

    #[test]
    fn a_baseline_sends_nothing_and_a_rise_sends_one_with_its_increase() {
        let s = settings();
        let t0 = Instant::now();
        let mut w = Watcher::new();
        // Non-zero failures at start: nothing.
        assert!(w
            .sample(&view(vec![zone("mbuf", 7, 0, 0)], &[]), t0, &s)
            .is_empty());
        assert!(w
            .sample(&view(vec![zone("mbuf", 7, 0, 0)], &[]), t0, &s)
            .is_empty());
        let n = w.sample(&view(vec![zone("mbuf", 10, 0, 0)], &[]), t0, &s);
        let expected = Notification::new(ALLOC_FAILURE.kind, Some(NotifiedRow { index: 1 }))
            .with_text("memTypeName", "mbuf")
            .with("memTypeAllocator", Value::Integer(2))
            .with("memTypeFailures", Value::Counter64(10))
            .with("memNotifyFailureIncrease", Value::Counter64(3));
        assert_eq!(n, [expected]);
        // A second rise within the holdoff: none; after it, one with both rises added up.
        let t1 = t0 + Duration::from_secs(10);
        assert!(w
            .sample(&view(vec![zone("mbuf", 12, 0, 0)], &[]), t1, &s)
            .is_empty());
        let t2 = t0 + s.holdoff;
        let n = w.sample(&view(vec![zone("mbuf", 15, 0, 0)], &[]), t2, &s);
        let n = only(&n, ALLOC_FAILURE.kind);
        assert_eq!(counter(n, "memNotifyFailureIncrease"), 5);
        assert_eq!(counter(n, "memTypeFailures"), 15);
    }

    #[test]
    fn new_rows_discontinuities_and_reconnections_are_baselines() {
        let s = WatchSettings {
            holdoff: Duration::ZERO,
            ..settings()
        };
        let t = Instant::now();
        let mut w = Watcher::new();
        w.sample(&view(vec![zone("a", 1, 0, 0)], &[]), t, &s);
        // b is new: a baseline, even with failures.
        let n = w.sample(
            &view(vec![zone("a", 1, 0, 0), zone("b", 9, 0, 0)], &[]),
            t,
            &s,
        );
        assert!(n.is_empty(), "{n:?}");
        // a's discontinuity time changed (destroyed and created again): a baseline.
        let n = w.sample(
            &view(vec![zone("a", 5, 0, 0), zone("b", 9, 0, 0)], &[77]),
            t,
            &s,
        );
        assert!(n.is_empty(), "{n:?}");
        let n = w.sample(
            &view(vec![zone("a", 6, 0, 0), zone("b", 9, 0, 0)], &[77]),
            t,
            &s,
        );
        assert_eq!(kinds(&n), [ALLOC_FAILURE.kind]);
        // A reconnection: the next sample is a baseline for every row.
        w.rebaseline();
        let n = w.sample(
            &view(vec![zone("a", 9, 0, 0), zone("b", 20, 0, 0)], &[77]),
            t,
            &s,
        );
        assert!(n.is_empty(), "{n:?}");
        // A row missing from one sample is forgotten, and new when it returns.
        w.sample(&view(vec![zone("a", 9, 0, 0)], &[77]), t, &s);
        assert_eq!(w.rows.len(), 1);
        let n = w.sample(
            &view(vec![zone("a", 9, 0, 0), zone("b", 30, 0, 0)], &[77]),
            t,
            &s,
        );
        assert!(n.is_empty(), "{n:?}");
        // A counter that goes back without a discontinuity starts again from there.
        w.sample(
            &view(vec![zone("a", 2, 0, 0), zone("b", 30, 0, 0)], &[77]),
            t,
            &s,
        );
        let n = w.sample(
            &view(vec![zone("a", 3, 0, 0), zone("b", 30, 0, 0)], &[77]),
            t,
            &s,
        );
        assert_eq!(
            counter(only(&n, ALLOC_FAILURE.kind), "memNotifyFailureIncrease"),
            1
        );
    }

    #[test]
    fn the_limit_nears_and_clears_with_hysteresis() {
        let s = settings(); // 90 %, 5 points
        let t = Instant::now();
        let mut w = Watcher::new();
        let at = |used| view(vec![zone("mbuf_cluster", 0, used, 1000)], &[]);
        assert!(w.sample(&at(100), t, &s).is_empty());
        assert!(w.sample(&at(899), t, &s).is_empty());
        let n = w.sample(&at(900), t, &s);
        let n = only(&n, LIMIT_NEARING.kind);
        assert_eq!(counter(n, "memNotifyLimitUsage"), 900);
        assert_eq!(counter(n, "memTypeCountLimit"), 1000);
        assert!(w.sample(&at(990), t, &s).is_empty(), "once until cleared");
        assert!(
            w.sample(&at(851), t, &s).is_empty(),
            "inside the hysteresis"
        );
        assert!(
            w.sample(&at(850), t, &s).is_empty(),
            "85 % is not below 85 %"
        );
        let n = w.sample(&at(849), t, &s);
        assert_eq!(
            counter(only(&n, LIMIT_CLEARED.kind), "memNotifyLimitUsage"),
            849
        );
        // Nearing again within the holdoff waits for it; the clear never waits.
        assert!(w
            .sample(&at(950), t + Duration::from_secs(1), &s)
            .is_empty());
        let n = w.sample(&at(950), t + s.holdoff, &s);
        assert_eq!(kinds(&n), [LIMIT_NEARING.kind]);
        // A removed limit clears.
        let n = w.sample(&view(vec![zone("mbuf_cluster", 0, 950, 0)], &[]), t, &s);
        let n = only(&n, LIMIT_CLEARED.kind);
        assert_eq!(counter(n, "memNotifyLimitUsage"), 950);
        assert_eq!(counter(n, "memTypeCountLimit"), 0);
    }

    /// The manager heard memTypeLimitNearing before a reconnection: the baseline after it
    /// keeps the alarm (and its holdoff), so the clear still comes and no second nearing.
    #[test]
    fn the_limit_state_is_kept_across_a_reconnection() {
        let s = settings();
        let t = Instant::now();
        let mut w = Watcher::new();
        let at = |used| view(vec![zone("z", 0, used, 1000)], &[]);
        w.sample(&at(100), t, &s);
        assert_eq!(kinds(&w.sample(&at(950), t, &s)), [LIMIT_NEARING.kind]);
        w.rebaseline();
        assert!(w.sample(&at(950), t, &s).is_empty(), "a baseline");
        assert!(w.sample(&at(960), t, &s).is_empty(), "still nearing");
        assert_eq!(kinds(&w.sample(&at(100), t, &s)), [LIMIT_CLEARED.kind]);
        // Within the holdoff of the nearing before the reconnection: held.
        assert!(w
            .sample(&at(950), t + Duration::from_secs(1), &s)
            .is_empty());
        // A limit gone during a baseline drops the alarm without a clear.
        assert_eq!(
            kinds(&w.sample(&at(950), t + s.holdoff, &s)),
            [LIMIT_NEARING.kind]
        );
        w.rebaseline();
        assert!(w.sample(&at_limit(0), t, &s).is_empty());
        assert!(w.sample(&at_limit(1000), t, &s).is_empty());
        fn at_limit(limit: u64) -> MibView {
            view(vec![zone("z", 0, 100, limit)], &[])
        }
    }

    #[test]
    fn cached_free_items_count_against_the_limit_and_keg_free_does_not() {
        let mut t = zone("z", 0, 800, 1000);
        t.zone_free = Some(50);
        t.keg_free = Some(500);
        t.free_count = Some(600);
        t.per_cpu = vec![
            PerCpu {
                cpu: 0,
                cache_free: Some(30),
                ..PerCpu::default()
            },
            PerCpu {
                cpu: 1,
                cache_free: Some(20),
                ..PerCpu::default()
            },
        ];
        assert_eq!(limit_usage(&t), Some((900, 1000)));
        let mut unlimited = t.clone();
        unlimited.count_limit = Some(0);
        assert_eq!(limit_usage(&unlimited), None);
        let mut slab = MemoryType::new(Allocator::Slab, "dentry");
        slab.in_use_count = Some(5);
        assert_eq!(limit_usage(&slab), None);
    }

    #[test]
    fn the_cap_keeps_the_first_rows_and_a_summary_counts_the_rest() {
        let s = settings(); // cap 20
        let t = Instant::now();
        let mut w = Watcher::new();
        let rows = |f| (0..1000).map(|i| zone(&format!("z{i}"), f, 0, 0)).collect();
        assert!(w.sample(&view(rows(0), &[]), t, &s).is_empty());
        let n = w.sample(&view(rows(1), &[]), t, &s);
        assert_eq!(n.len(), 21);
        assert!(n[..20].iter().all(|x| x.kind() == ALLOC_FAILURE.kind));
        let summary = Notification::new(SUPPRESSED.kind, None)
            .with("memNotifySuppressed", Value::Gauge32(980));
        assert_eq!(n[20], summary);
        let first = notification_varbinds(&n[0]);
        assert_eq!(first[1].name.0.last(), Some(&1), "row order");
        // Suppressed ones count as sent for the holdoff.
        assert!(w.sample(&view(rows(2), &[]), t, &s).is_empty());
    }

    #[test]
    fn switches_turn_kinds_off() {
        let off = config(&[("notify-alloc-failure", "false"), ("notify-limit", "false")]);
        let s = WatchSettings {
            interval: Duration::from_secs(1),
            ..WatchSettings::from(&off)
        };
        let t = Instant::now();
        let mut w = Watcher::new();
        w.sample(&view(vec![zone("a", 0, 0, 10)], &[]), t, &s);
        assert!(w
            .sample(&view(vec![zone("a", 5, 10, 10)], &[]), t, &s)
            .is_empty());
        // Switched back on: the failures while off are not reported later.
        let on = settings();
        let n = w.sample(&view(vec![zone("a", 5, 10, 10)], &[]), t, &on);
        assert_eq!(kinds(&n), [LIMIT_NEARING.kind]);
    }

    /// Each switch is the setting its key names: turning that setting off turns off the
    /// definitions with that switch, and only those.
    #[test]
    fn each_switch_reads_the_setting_of_its_key() {
        let on = WatchSettings::defaults();
        assert!(
            on.switched_on.iter().all(|&b| b),
            "every kind on by default"
        );
        for d in DEFINITIONS {
            let Some(switch) = &d.switch else { continue };
            let off = WatchSettings::from(&config(&[(switch.key, "false")]));
            for (other, on) in DEFINITIONS.iter().zip(off.switched_on) {
                let same = other.switch.as_ref().is_some_and(|s| s.key == switch.key);
                assert_eq!(on, !same, "{} off: {:?}", switch.key, other.kind);
            }
        }
    }

    /// The source rules: stale after a good read, recovered after a stale one, nothing for
    /// any other change; the switch turns both off.
    #[test]
    fn source_changes() {
        let error = RefreshError::Overdue {
            source: "fixture:/x".into(),
            waited: Duration::from_millis(1500),
        };
        let change = |before, after| SourceChange {
            source: "fixture:/x",
            before,
            after,
            error: Some(&error),
            row: None,
        };
        let s = WatchSettings::defaults();
        use SourceStatus::{Error, Ok, Stale};
        let n = source_changed(&change(Ok, Stale), &s);
        let stale = Notification::new(SOURCE_STALE.kind, None)
            .with_text("memSourceName", "fixture:/x")
            .with("memSourceStatus", Value::Integer(2))
            .with_text("memSourceLastError", &error.to_string());
        assert_eq!(n, [stale]);
        let n = source_changed(&change(Stale, Ok), &s);
        assert_eq!(kinds(&n), [SOURCE_RECOVERED.kind]);
        for (before, after) in [(Error, Ok), (Ok, Error), (Stale, Error), (Ok, Ok)] {
            assert!(source_changed(&change(before, after), &s).is_empty());
        }
        let off = WatchSettings::from(&config(&[("notify-source", "false")]));
        assert!(source_changed(&change(Ok, Stale), &off).is_empty());
        assert!(source_changed(&change(Stale, Ok), &off).is_empty());
    }

    /// One notification of every kind, sent by its own rule.
    fn one_of_each() -> Vec<Notification> {
        let s = WatchSettings {
            holdoff: Duration::ZERO,
            cap: 3,
            ..settings()
        };
        let t = Instant::now();
        let mut w = Watcher::new();
        let mut sent = Vec::new();
        let limited = |used, limit| zone("mbuf_cluster", 0, used, limit);
        w.sample(
            &view(vec![zone("mbuf", 7, 0, 0), limited(10, 100)], &[]),
            t,
            &s,
        );
        sent.extend(w.sample(
            &view(vec![zone("mbuf", 9, 0, 0), limited(95, 100)], &[]),
            t,
            &s,
        ));
        sent.extend(w.sample(
            &view(vec![zone("mbuf", 9, 0, 0), limited(80, 100)], &[]),
            t,
            &s,
        ));
        let many: Vec<_> = (0..5).map(|i| zone(&format!("z{i}"), 0, 0, 0)).collect();
        w.sample(&view(many.clone(), &[]), t, &s);
        let more = many.into_iter().map(|mut z| {
            z.failures = Some(1);
            z
        });
        sent.extend(w.sample(&view(more.collect(), &[]), t, &s).pop());
        let error = RefreshError::Source(SourceError::Unavailable {
            message: "gone".into(),
        });
        for (before, after) in [
            (SourceStatus::Ok, SourceStatus::Stale),
            (SourceStatus::Stale, SourceStatus::Ok),
        ] {
            let change = SourceChange {
                source: "fixture:/x",
                before,
                after,
                error: Some(&error),
                row: None,
            };
            sent.extend(source_changed(&change, &s));
        }
        sent
    }

    /// The varbinds as they go on the wire: snmpTrapOID.0, then each object of the OBJECTS
    /// clause, the row's columns as its instances and every other object as `.0`.
    #[test]
    fn the_varbinds_of_every_kind() {
        let wire = |n: &Notification| -> Vec<(String, Value)> {
            notification_varbinds(n)
                .into_iter()
                .map(|v| (v.name.to_string(), v.value))
                .collect()
        };
        let root = "1.3.6.1.4.1.32473.1";
        let trap = |arc: u32| {
            let oid = format!("{root}.0.{arc}").parse().unwrap();
            (
                "1.3.6.1.6.3.1.1.4.1.0".to_string(),
                Value::ObjectIdentifier(oid),
            )
        };
        let oid = |tail: &str| format!("{root}.{tail}");
        let s = |v: &str| Value::OctetString(v.as_bytes().to_vec());
        let sent = one_of_each();
        let mut got: Vec<Vec<(String, Value)>> = sent.iter().map(wire).collect();
        let expected = vec![
            vec![
                trap(1),
                (oid("1.2.1.2.1"), s("mbuf")),
                (oid("1.2.1.3.1"), Value::Integer(2)),
                (oid("1.2.1.17.1"), Value::Counter64(9)),
                (oid("1.5.1.0"), Value::Counter64(2)),
            ],
            vec![
                trap(2),
                (oid("1.2.1.2.2"), s("mbuf_cluster")),
                (oid("1.2.1.3.2"), Value::Integer(2)),
                (oid("1.5.2.0"), Value::Counter64(95)),
                (oid("1.2.1.7.2"), Value::Counter64(100)),
            ],
            vec![
                trap(3),
                (oid("1.2.1.2.2"), s("mbuf_cluster")),
                (oid("1.2.1.3.2"), Value::Integer(2)),
                (oid("1.5.2.0"), Value::Counter64(80)),
                (oid("1.2.1.7.2"), Value::Counter64(100)),
            ],
            vec![trap(6), (oid("1.5.3.0"), Value::Gauge32(2))],
            vec![
                trap(4),
                (oid("1.1.7.0"), s("fixture:/x")),
                (oid("1.1.8.0"), Value::Integer(2)),
                (oid("1.1.9.0"), s("gone")),
            ],
            vec![
                trap(5),
                (oid("1.1.7.0"), s("fixture:/x")),
                (oid("1.1.8.0"), Value::Integer(1)),
            ],
        ];
        got.iter_mut().for_each(|v| {
            v.iter_mut()
                .for_each(|(o, _)| *o = o.trim_start_matches('.').to_string())
        });
        assert_eq!(got, expected);
    }

    /// Each definition's objects are objects of the registry, and what its rule sends has
    /// their syntax; names and arcs are distinct; every kind is sent by some rule.
    #[test]
    fn definitions_name_objects_of_the_registry() {
        let registry = object_defs();
        let syntax = |name: &str| registry.iter().find(|d| d.name == name).map(|d| d.syntax);
        let sent = one_of_each();
        for d in DEFINITIONS {
            let t = d.kind;
            for object in t.objects() {
                assert!(object_oid(object).is_some(), "{t:?}: {object} is no object");
            }
            let n = sent.iter().find(|n| n.kind() == t);
            let n = n.unwrap_or_else(|| panic!("no rule sent {t:?}"));
            for object in t.objects() {
                let value = n
                    .value(object)
                    .unwrap_or_else(|| panic!("{t:?}: no {object}"));
                let fits = matches!(
                    (syntax(object).unwrap(), value),
                    (Syntax::Integer, Value::Integer(_))
                        | (Syntax::OctetString, Value::OctetString(_))
                        | (Syntax::Unsigned32 | Syntax::Gauge32, Value::Gauge32(_))
                        | (Syntax::Counter64, Value::Counter64(_))
                        | (Syntax::TimeTicks, Value::TimeTicks(_))
                );
                assert!(fits, "{t:?}: {object} = {value:?}");
            }
        }
        let mut names: Vec<_> = DEFINITIONS.iter().map(|d| d.kind.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), DEFINITIONS.len(), "a name defined twice");
        let oids: Vec<_> = DEFINITIONS.iter().map(|d| d.kind.oid()).collect();
        assert!(oids.windows(2).all(|w| w[0] < w[1]), "in the order of arcs");
        let summaries = DEFINITIONS
            .iter()
            .filter(|d| matches!(d.rule, Rule::Summary(_)));
        assert_eq!(summaries.count(), 1, "the cap has one summary");
    }

    /// Every key a definition names is a setting (a switch a `Switch`), every `notify-*`
    /// setting is some definition's, and a kind sent by another's rule has its switch.
    #[test]
    fn definitions_name_the_settings_they_read() {
        let setting = |key: &str| SETTINGS.iter().find(|s| s.key == key);
        let mut named = Vec::new();
        for d in DEFINITIONS {
            if let Some(switch) = &d.switch {
                let s = setting(switch.key);
                assert!(
                    s.is_some_and(|s| matches!(s.rule, SettingRule::Switch)),
                    "{:?}: {} is no switch",
                    d.kind,
                    switch.key
                );
                named.push(switch.key);
            }
            for key in d.reads {
                assert!(setting(key).is_some(), "{:?}: {key} is no setting", d.kind);
                named.push(key);
            }
            if matches!(d.rule, Rule::Shared) {
                let key = d.switch.as_ref().map(|s| s.key);
                let by = DEFINITIONS
                    .iter()
                    .filter(|o| matches!(o.rule, Rule::Row(_)));
                assert!(
                    by.into_iter()
                        .any(|o| o.switch.as_ref().map(|s| s.key) == key),
                    "{:?} shares no row rule's switch",
                    d.kind
                );
            }
        }
        for s in SETTINGS.iter().filter(|s| s.key.starts_with("notify-")) {
            assert!(named.contains(&s.key), "no definition reads {}", s.key);
        }
    }
}
