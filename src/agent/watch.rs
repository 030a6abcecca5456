//! Sampling for notifications: each sample compares every row with the previous sample and
//! says which notifications are due. No I/O, no clock of its own: the session reads the
//! source (through the snapshot store, under the view bound and the walk contract) and hands
//! the newest view to [`Watcher::sample`].
//!
//! - **Baselines send nothing.** The first sample after start or after a reconnection to the
//!   master, a row that was not in the previous sample, and a row whose discontinuity time
//!   changed only set the figures later samples are compared with. Otherwise every restart
//!   of a host whose FAIL column is non-zero would notify for every row.
//! - **memTypeAllocFailure** when memTypeFailures rose since the last one for the row (or its
//!   baseline); the increase is counted from there, so a rise held off is added to the next.
//! - **memTypeLimitNearing** when the items counted against a type's limit reach the share of
//!   it; **memTypeLimitCleared** when they fall below the share minus the hysteresis. What
//!   counts against a UMA zone's limit is what the kernel's `uz_items` counts: the items in
//!   use plus the free items cached in the per-CPU caches and in the zone's bucket cache,
//!   since `zone_alloc_bucket()` charges whole buckets and only a return to the keg gives
//!   them back (FreeBSD sys/vm/uma_core.c; see memNotifyLimitUsage in the MIB).
//! - **Holdoff.** One memTypeAllocFailure and one memTypeLimitNearing per row per holdoff; a
//!   clear is never held back, so a manager never keeps an alarm that is over.
//! - **Cap.** A sample sends at most `cap` notifications, in row order; past it, one
//!   memNotificationsSuppressed carries the number left out. A suppressed notification counts
//!   as sent for the holdoff and the limit state of its row.

use crate::memstat::MemoryType;
use crate::mib::{MibView, Notification, NotifiedRow};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The notification settings (`watch-interval`, `notify-*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WatchSettings {
    /// Between samples; zero turns sampling off.
    pub interval: Duration,
    pub holdoff: Duration,
    /// memTypeLimitNearing at this share of the limit, in percent (1-100).
    pub limit_percent: u32,
    /// memTypeLimitCleared below `limit_percent - hysteresis` percent.
    pub hysteresis: u32,
    /// Most notifications per sample (at least 1).
    pub cap: u32,
    pub alloc_failure: bool,
    pub limit: bool,
    pub source: bool,
}

impl Default for WatchSettings {
    /// The defaults of the settings table (sampling off).
    fn default() -> Self {
        WatchSettings {
            interval: Duration::ZERO,
            holdoff: Duration::from_secs(300),
            limit_percent: 90,
            hysteresis: 5,
            cap: 20,
            alloc_failure: true,
            limit: true,
            source: true,
        }
    }
}

/// What one row looked like at the last sample, and what was said about it.
#[derive(Clone, Debug)]
struct RowState {
    /// The sample that saw the row last.
    seen: u64,
    discontinuity: u32,
    /// memTypeFailures at the last memTypeAllocFailure (or the baseline).
    reported_failures: Option<u64>,
    last_failure_sent: Option<Instant>,
    /// memTypeLimitNearing was sent and no clear since.
    nearing: bool,
    last_nearing_sent: Option<Instant>,
}

/// The comparison of samples (see the module documentation).
#[derive(Default)]
pub(crate) struct Watcher {
    rows: HashMap<u32, RowState>,
    /// The number of the last sample.
    samples: u64,
    /// The next sample is a baseline for every row.
    rebaseline: bool,
}

/// The items of `t` that count against its count limit, with the limit; `None` when the
/// type has no limit (absent or 0) or its in-use count is unknown.
pub(crate) fn limit_usage(t: &MemoryType) -> Option<(u64, u64)> {
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
        let held = |last: Option<Instant>| {
            last.is_some_and(|t| now.saturating_duration_since(t) < s.holdoff)
        };
        let mut due = Vec::new();
        for (row, t) in view.rows() {
            let usage = limit_usage(t);
            let known = self.rows.get(&row.index).filter(|st| {
                !baseline && st.seen == previous && st.discontinuity == row.discontinuity
            });
            if known.is_none() {
                // A baseline: the figures later samples compare with, nothing sent. The
                // limit state is kept across a reconnection (the manager heard it).
                let nearing =
                    self.rows.get(&row.index).is_some_and(|st| st.nearing) && usage.is_some();
                let st = RowState {
                    seen: this,
                    discontinuity: row.discontinuity,
                    reported_failures: t.failures,
                    last_failure_sent: None,
                    nearing,
                    last_nearing_sent: self
                        .rows
                        .get(&row.index)
                        .and_then(|st| st.last_nearing_sent),
                };
                self.rows.insert(row.index, st);
                continue;
            }
            let st = self.rows.get_mut(&row.index).expect("known above");
            st.seen = this;
            let who = || NotifiedRow {
                index: row.index,
                name: t.name.clone(),
                allocator: t.allocator,
            };
            match (t.failures, st.reported_failures) {
                (Some(f), Some(base)) if f > base => {
                    if s.alloc_failure && !held(st.last_failure_sent) {
                        due.push(Notification::AllocFailure {
                            row: who(),
                            failures: f,
                            increase: f - base,
                        });
                        st.reported_failures = Some(f);
                        st.last_failure_sent = Some(now);
                    } else if !s.alloc_failure {
                        // Switched off: nothing to add up for a later one.
                        st.reported_failures = Some(f);
                    }
                }
                // Unchanged; backwards without a discontinuity, or newly provided or gone:
                // compare with this from now on.
                (f, _) => st.reported_failures = f,
            }
            if !s.limit {
                continue;
            }
            match usage {
                Some((used, limit)) => {
                    let share = u128::from(used) * 100;
                    let at = u128::from(s.limit_percent) * u128::from(limit);
                    let below = u128::from(s.limit_percent.saturating_sub(s.hysteresis))
                        * u128::from(limit);
                    if !st.nearing && share >= at && !held(st.last_nearing_sent) {
                        st.nearing = true;
                        st.last_nearing_sent = Some(now);
                        due.push(Notification::LimitNearing {
                            row: who(),
                            usage: used,
                            limit,
                        });
                    } else if st.nearing && share < below {
                        st.nearing = false;
                        due.push(Notification::LimitCleared {
                            row: who(),
                            usage: used,
                            limit,
                        });
                    }
                }
                None if st.nearing => {
                    // The limit was removed: nothing is near it any more.
                    st.nearing = false;
                    due.push(Notification::LimitCleared {
                        row: who(),
                        usage: t.in_use_count.unwrap_or(0),
                        limit: t.count_limit.unwrap_or(0),
                    });
                }
                None => {}
            }
        }
        // Rows gone from the view are forgotten: if they return, they are new.
        self.rows.retain(|_, st| st.seen == this);
        let cap = s.cap.max(1) as usize;
        if due.len() > cap {
            let count = u32::try_from(due.len() - cap).unwrap_or(u32::MAX);
            due.truncate(cap);
            due.push(Notification::Suppressed { count });
        }
        due
    }

    /// Rows remembered (for tests: bounded by the view).
    #[cfg(test)]
    pub(crate) fn rows_known(&self) -> usize {
        self.rows.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memstat::{Allocator, PerCpu, Snapshot};
    use crate::mib::NotificationType;
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

    fn settings() -> WatchSettings {
        WatchSettings {
            interval: Duration::from_secs(1),
            ..WatchSettings::default()
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
        assert_eq!(
            n,
            [Notification::AllocFailure {
                row: NotifiedRow {
                    index: 1,
                    name: "mbuf".into(),
                    allocator: Allocator::Uma
                },
                failures: 10,
                increase: 3
            }]
        );
        // A second rise within the holdoff: none; after it, one with both rises added up.
        let t1 = t0 + Duration::from_secs(10);
        assert!(w
            .sample(&view(vec![zone("mbuf", 12, 0, 0)], &[]), t1, &s)
            .is_empty());
        let t2 = t0 + s.holdoff;
        let n = w.sample(&view(vec![zone("mbuf", 15, 0, 0)], &[]), t2, &s);
        assert!(
            matches!(
                n[..],
                [Notification::AllocFailure {
                    increase: 5,
                    failures: 15,
                    ..
                }]
            ),
            "{n:?}"
        );
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
        assert_eq!(kinds(&n), [NotificationType::AllocFailure]);
        // A reconnection: the next sample is a baseline for every row.
        w.rebaseline();
        let n = w.sample(
            &view(vec![zone("a", 9, 0, 0), zone("b", 20, 0, 0)], &[77]),
            t,
            &s,
        );
        assert!(n.is_empty(), "{n:?}");
        // A row missing from one sample is new when it returns.
        w.sample(&view(vec![zone("a", 9, 0, 0)], &[77]), t, &s);
        assert_eq!(w.rows_known(), 1);
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
        assert!(
            matches!(n[..], [Notification::AllocFailure { increase: 1, .. }]),
            "{n:?}"
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
        assert!(
            matches!(
                n[..],
                [Notification::LimitNearing {
                    usage: 900,
                    limit: 1000,
                    ..
                }]
            ),
            "{n:?}"
        );
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
        assert!(
            matches!(n[..], [Notification::LimitCleared { usage: 849, .. }]),
            "{n:?}"
        );
        // Nearing again within the holdoff waits for it; the clear never waits.
        assert!(w
            .sample(&at(950), t + Duration::from_secs(1), &s)
            .is_empty());
        let n = w.sample(&at(950), t + s.holdoff, &s);
        assert_eq!(kinds(&n), [NotificationType::LimitNearing]);
        // A removed limit clears.
        let n = w.sample(&view(vec![zone("mbuf_cluster", 0, 950, 0)], &[]), t, &s);
        assert_eq!(kinds(&n), [NotificationType::LimitCleared]);
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
        assert!(n[..20]
            .iter()
            .all(|x| x.kind() == NotificationType::AllocFailure));
        assert_eq!(n[20], Notification::Suppressed { count: 980 });
        if let Notification::AllocFailure { row, .. } = &n[0] {
            assert_eq!(row.index, 1, "row order");
        }
        // Suppressed ones count as sent for the holdoff.
        assert!(w.sample(&view(rows(2), &[]), t, &s).is_empty());
    }

    #[test]
    fn switches_turn_kinds_off() {
        let s = WatchSettings {
            alloc_failure: false,
            limit: false,
            ..settings()
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
        assert_eq!(kinds(&n), [NotificationType::LimitNearing]);
    }
}
