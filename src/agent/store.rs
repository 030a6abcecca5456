//! The snapshot store: the refresh policy, the refresh statistics and the current view.
//!
//! The store never reads the source itself. It says when a read is due; the caller runs
//! the read where it cannot block anything (see `reader.rs`) and hands the result back.
//! That keeps this part synchronous, free of I/O, and testable with a clock of the test's
//! choosing.

use crate::memstat::{assign_ordinals, Figures, Part, Snapshot, SourceError, SourceRead};
use crate::mib::{MibView, SourceLine, SourceStatus};
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// Why the newest snapshot is not as fresh as it should be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum RefreshError {
    /// The source could not be read or parsed.
    Source(SourceError),
    /// The read did not finish in the time a request may wait for it; it goes on, and its
    /// result is used when it arrives.
    Overdue { source: String, waited: Duration },
}

impl fmt::Display for RefreshError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RefreshError::Source(e) => e.fmt(f),
            RefreshError::Overdue { source, waited } => write!(
                f,
                "{source}: no answer after {:.1} s; the read goes on in the background",
                waited.as_secs_f64()
            ),
        }
    }
}

impl std::error::Error for RefreshError {}

/// One source's state: what memSourceTable says of it.
#[derive(Clone, Debug)]
struct SourceState {
    name: String,
    /// Its last read failed with this.
    error: Option<SourceError>,
    /// When it was last read successfully, in milliseconds since the Unix epoch.
    last_good_ms: Option<u64>,
}

/// The snapshot store.
pub(crate) struct SnapshotStore {
    /// Every source's name, as memSourceName shows them.
    source_name: String,
    sources: Vec<SourceState>,
    max_age: Duration,
    current: Option<(Arc<MibView>, Instant)>,
    generation: u64,
    refreshes: u64,
    failures: u64,
    last_attempt: Option<Instant>,
    last_error: Option<RefreshError>,
    /// When the read in flight started.
    reading_since: Option<Instant>,
    /// The current view must be laid out again (see [`invalidate`](Self::invalidate)).
    outdated: bool,
}

impl SnapshotStore {
    /// A store of the snapshots of `sources` (their names, in the order of the setting,
    /// which is the order of the parts of every [`SourceRead`]).
    pub(crate) fn new(sources: &[String], max_age: Duration) -> SnapshotStore {
        SnapshotStore {
            source_name: sources.join(","),
            sources: sources
                .iter()
                .map(|name| SourceState {
                    name: name.clone(),
                    error: None,
                    last_good_ms: None,
                })
                .collect(),
            max_age,
            current: None,
            generation: 0,
            refreshes: 0,
            failures: 0,
            last_attempt: None,
            last_error: None,
            reading_since: None,
            outdated: false,
        }
    }

    pub(crate) fn set_max_age(&mut self, max_age: Duration) {
        self.max_age = max_age;
    }

    pub(crate) fn source_name(&self) -> &str {
        &self.source_name
    }

    /// True when a request that wants the newest figures should have the source read
    /// first: the current view is at least `max_age` old, no read is in flight, and the
    /// last attempt did not fail within `max_age` (a broken source costs one read per
    /// `max_age`, not one per request).
    pub(crate) fn refresh_due(&self, now: Instant) -> bool {
        let young = |t: Instant| now.saturating_duration_since(t) < self.max_age;
        let fresh = !self.outdated && self.current.as_ref().is_some_and(|(_, at)| young(*at));
        let failed_recently = self.last_error.is_some() && self.last_attempt.is_some_and(young);
        !fresh && !failed_recently && self.reading_since.is_none()
    }

    /// A read starts now.
    pub(crate) fn read_started(&mut self, now: Instant) {
        self.reading_since = Some(now);
        self.last_attempt = Some(now);
        self.refreshes += 1;
    }

    /// The request that waited for the read in flight gave up waiting: it is served from
    /// the last good snapshot, which is now stale.
    pub(crate) fn read_overdue(&mut self, now: Instant) {
        if let Some(since) = self.reading_since {
            self.fail(RefreshError::Overdue {
                source: self.source_name.clone(),
                waited: now.saturating_duration_since(since),
            });
        }
    }

    /// The read in flight finished. A read in which some source succeeded becomes the next
    /// snapshot, numbered and timed, for the caller to lay out and
    /// [`install`](Self::install): the union of every source's rows, where a source that
    /// failed gives the rows it gave the current snapshot (its last good data), and the
    /// snapshot is stale until every source reads again. A read in which every source failed
    /// keeps the current snapshot, stale.
    pub(crate) fn read_finished(&mut self, read: SourceRead) -> Result<Snapshot, RefreshError> {
        self.reading_since = None;
        let now = SystemTime::now();
        let now_ms = Snapshot::epoch_ms(now);
        let mut parts = read.parts.into_iter();
        let mut first_error = None;
        let mut types = Vec::new();
        let mut figures = Figures::new();
        let mut profiling = None;
        let mut extents = Vec::with_capacity(self.sources.len());
        let mut any_good = false;
        let current = self.current.as_ref().map(|(v, _)| v.snapshot().clone());
        for (i, src) in self.sources.iter_mut().enumerate() {
            let result = parts.next().unwrap_or_else(|| {
                Err(SourceError::Unavailable {
                    message: format!("{}: not read", src.name),
                })
            });
            let before = types.len();
            let mut part = Part::default();
            // The first source to give a figure wins.
            let mut add_figure = |name: &String, value: u64| {
                if !figures.contains_key(name) {
                    figures.insert(name.clone(), value);
                    part.figures.push(name.clone());
                }
            };
            match result {
                Ok(data) => {
                    any_good = true;
                    src.error = None;
                    src.last_good_ms = Some(now_ms);
                    types.extend(data.types);
                    for (name, value) in &data.figures {
                        add_figure(name, *value);
                    }
                    // The first source to read allocation profiling gives it, as figures.
                    if profiling.is_none() && data.profiling.is_some() {
                        profiling = data.profiling;
                        part.profiling = true;
                    }
                }
                Err(e) => {
                    if let Some(old) = &current {
                        types.extend_from_slice(old.part(i).unwrap_or_default());
                        for (name, value) in old.part_figures(i) {
                            add_figure(name, *value);
                        }
                        let gave = old.parts.get(i).is_some_and(|p| p.profiling);
                        if gave && profiling.is_none() {
                            profiling.clone_from(&old.profiling);
                            part.profiling = true;
                        }
                    }
                    first_error.get_or_insert_with(|| e.clone());
                    src.error = Some(e);
                }
            }
            part.types = u32::try_from(types.len() - before).unwrap_or(u32::MAX);
            extents.push(part);
        }
        if let Some(e) = first_error {
            let e = RefreshError::Source(e);
            self.fail(e.clone());
            if !any_good {
                return Err(e);
            }
        }
        assign_ordinals(&mut types);
        self.generation += 1;
        let mut snap = Snapshot::new(self.generation, now, self.source_name.clone(), types);
        snap.figures = figures;
        snap.profiling = profiling;
        snap.parts = extents;
        Ok(snap)
    }

    /// What memSourceTable says of each source: the newest snapshot's rows of it, and its
    /// last read.
    pub(crate) fn source_lines(&self) -> Vec<SourceLine> {
        let snap = self.current.as_ref().map(|(v, _)| v.snapshot());
        self.sources
            .iter()
            .enumerate()
            .map(|(i, s)| SourceLine {
                name: s.name.clone(),
                status: match (&s.error, s.last_good_ms) {
                    (_, None) => SourceStatus::Error,
                    (Some(_), Some(_)) => SourceStatus::Stale,
                    (None, Some(_)) => SourceStatus::Ok,
                },
                last_error: s
                    .error
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_default(),
                last_good_ms: s.last_good_ms,
                types: snap.and_then(|s| s.part(i)).map(|p| p.len() as u64),
            })
            .collect()
    }

    fn fail(&mut self, e: RefreshError) {
        self.failures += 1;
        if self.last_error.as_ref() != Some(&e) {
            // Until a read has succeeded there is nothing to fall back on: say so, rather
            // than promise a snapshot that does not exist.
            if self.current.is_some() {
                tracing::warn!("refresh failed, serving the last good snapshot: {e}");
            } else {
                tracing::warn!("refresh failed, and there is no snapshot yet to serve: {e}");
            }
        }
        self.last_error = Some(e);
    }

    /// Makes `view` the newest snapshot, taken at `at`.
    pub(crate) fn install(&mut self, view: Arc<MibView>, at: Instant) {
        self.current = Some((view, at));
        self.outdated = false;
        // A snapshot in which a source gave its last good rows is stale until it reads again.
        let all_read = self.sources.iter().all(|s| s.error.is_none());
        if all_read && self.last_error.take().is_some() {
            tracing::info!("source {} readable again", self.source_name);
        }
    }

    /// Makes the next request that wants the newest figures read the source again, whatever
    /// the age: the current view's layout is out of date. It is served until then.
    pub(crate) fn invalidate(&mut self) {
        self.outdated = true;
    }

    pub(crate) fn current(&self) -> Option<&Arc<MibView>> {
        self.current.as_ref().map(|(v, _)| v)
    }

    /// How old the newest snapshot is.
    pub(crate) fn age(&self, now: Instant) -> Option<Duration> {
        self.current
            .as_ref()
            .map(|(_, at)| now.saturating_duration_since(*at))
    }

    pub(crate) fn refreshes(&self) -> u64 {
        self.refreshes
    }

    pub(crate) fn failures(&self) -> u64 {
        self.failures
    }

    pub(crate) fn last_error(&self) -> Option<&RefreshError> {
        self.last_error.as_ref()
    }

    /// memSourceStatus.
    pub(crate) fn status(&self) -> SourceStatus {
        match (&self.current, &self.last_error) {
            (None, _) => SourceStatus::Error,
            (Some(_), Some(_)) => SourceStatus::Stale,
            (Some(_), None) => SourceStatus::Ok,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memstat::{Allocator, MemoryType};

    fn types() -> Vec<MemoryType> {
        vec![MemoryType::new(Allocator::Slab, "kmalloc-64")]
    }

    fn install(s: &mut SnapshotStore, snap: Snapshot, at: Instant) {
        let n = snap.types.len();
        let idx: Vec<u32> = (1..=n as u32).collect();
        s.install(
            Arc::new(MibView::new(Arc::new(snap), &idx, &vec![0; n])),
            at,
        );
    }

    #[test]
    fn a_read_is_due_only_when_the_view_is_older_than_max_age() {
        let t0 = Instant::now();
        let mut s = SnapshotStore::new(&["fixture:x".into()], Duration::from_secs(5));
        assert!(s.refresh_due(t0), "nothing read yet");
        assert_eq!(s.status(), SourceStatus::Error);
        s.read_started(t0);
        assert!(!s.refresh_due(t0), "one read at a time");
        let snap = s.read_finished(Ok(types()).into()).unwrap();
        assert_eq!(snap.generation, 1);
        install(&mut s, snap, t0);
        assert_eq!(s.status(), SourceStatus::Ok);
        assert!(!s.refresh_due(t0 + Duration::from_millis(4999)));
        assert!(s.refresh_due(t0 + Duration::from_secs(5)));
        assert_eq!(s.refreshes(), 1);
    }

    #[test]
    fn a_failed_read_keeps_the_last_view_marks_it_stale_and_waits_max_age() {
        let t0 = Instant::now();
        let mut s = SnapshotStore::new(&["fixture:x".into()], Duration::from_secs(1));
        s.read_started(t0);
        let snap = s.read_finished(Ok(types()).into()).unwrap();
        install(&mut s, snap, t0);
        let t1 = t0 + Duration::from_secs(2);
        s.read_started(t1);
        let err = SourceError::Unavailable {
            message: "gone".into(),
        };
        assert_eq!(
            s.read_finished(Err(err.clone()).into()),
            Err(RefreshError::Source(err))
        );
        assert_eq!(s.status(), SourceStatus::Stale);
        assert_eq!(s.current().unwrap().snapshot().generation, 1);
        assert!(
            !s.refresh_due(t1 + Duration::from_millis(500)),
            "retried once per max-age"
        );
        assert!(s.refresh_due(t1 + Duration::from_secs(1)));
        assert_eq!((s.refreshes(), s.failures()), (2, 1));
        s.read_started(t1 + Duration::from_secs(1));
        let snap = s.read_finished(Ok(types()).into()).unwrap();
        assert_eq!(snap.generation, 2);
        install(&mut s, snap, t1 + Duration::from_secs(1));
        assert_eq!(s.status(), SourceStatus::Ok);
        assert!(s.last_error().is_none());
    }

    /// Two sources: one failing keeps its last good rows and figures in the next snapshot,
    /// which is stale and names it, while the other's are fresh.
    #[test]
    fn a_failing_source_keeps_its_last_good_data_and_the_others_stay_fresh() {
        use crate::memstat::SourceData;
        let t0 = Instant::now();
        let names = ["fixture:a".to_string(), "fixture:b".to_string()];
        let mut s = SnapshotStore::new(&names, Duration::from_secs(1));
        let data = |name: &str, allocs: u64, figure: u64| {
            let mut t = MemoryType::new(Allocator::Uma, name);
            t.allocs = Some(allocs);
            let mut d = SourceData::from(vec![t]);
            d.figures.insert(format!("{name}.figure"), figure);
            d
        };
        s.read_started(t0);
        let read = SourceRead {
            parts: vec![Ok(data("a", 1, 10)), Ok(data("b", 2, 20))],
        };
        let snap = s.read_finished(read).unwrap();
        install(&mut s, snap, t0);
        assert_eq!(s.status(), SourceStatus::Ok);
        let gone = SourceError::Unavailable {
            message: "b: gone".into(),
        };
        let t1 = t0 + Duration::from_secs(2);
        s.read_started(t1);
        let read = SourceRead {
            parts: vec![Ok(data("a", 3, 30)), Err(gone.clone())],
        };
        let snap = s.read_finished(read).unwrap();
        assert_eq!(snap.generation, 2);
        let allocs: Vec<Option<u64>> = snap.types.iter().map(|t| t.allocs).collect();
        assert_eq!(allocs, [Some(3), Some(2)], "a fresh, b as last read");
        assert_eq!(snap.figures.get("a.figure"), Some(&30));
        assert_eq!(snap.figures.get("b.figure"), Some(&20));
        install(&mut s, snap, t1);
        assert_eq!(s.status(), SourceStatus::Stale);
        assert_eq!(s.last_error(), Some(&RefreshError::Source(gone)));
        let lines = s.source_lines();
        assert_eq!(lines[0].status, SourceStatus::Ok);
        assert_eq!(
            (lines[1].status, lines[1].types),
            (SourceStatus::Stale, Some(1))
        );
        assert_eq!(lines[1].last_error, "b: gone");
        // Both fail: the snapshot stays; both read again: fresh and ok.
        let t2 = t1 + Duration::from_secs(2);
        s.read_started(t2);
        let e = SourceError::Unavailable {
            message: "down".into(),
        };
        let read = SourceRead {
            parts: vec![Err(e.clone()), Err(e)],
        };
        assert!(s.read_finished(read).is_err());
        assert_eq!(s.current().unwrap().snapshot().generation, 2);
        let t3 = t2 + Duration::from_secs(2);
        s.read_started(t3);
        let read = SourceRead {
            parts: vec![Ok(data("a", 4, 40)), Ok(data("b", 5, 50))],
        };
        let snap = s.read_finished(read).unwrap();
        install(&mut s, snap, t3);
        assert_eq!(s.status(), SourceStatus::Ok);
        assert!(s
            .source_lines()
            .iter()
            .all(|l| l.status == SourceStatus::Ok));
    }

    #[test]
    fn an_overdue_read_is_reported_and_its_late_result_still_counts() {
        let t0 = Instant::now();
        let mut s = SnapshotStore::new(&["linux:/tmp/fifo".into()], Duration::from_secs(1));
        s.read_started(t0);
        s.read_overdue(t0 + Duration::from_millis(800));
        let e = s.last_error().unwrap().to_string();
        assert!(e.contains("linux:/tmp/fifo") && e.contains("0.8 s"), "{e}");
        assert!(
            !s.refresh_due(t0 + Duration::from_secs(10)),
            "still reading"
        );
        let snap = s.read_finished(Ok(types()).into()).unwrap();
        install(&mut s, snap, t0 + Duration::from_secs(10));
        assert_eq!(s.status(), SourceStatus::Ok);
    }
}
