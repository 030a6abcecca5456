//! The daemon's scalars (memstatDaemon): what the daemon says about itself and its source.
//!
//! They describe the newest snapshot, not the one a walk is pinned to, and reading them
//! never triggers a refresh: a manager polling memSourceStatus must not cost a kernel read.

use super::store::SnapshotStore;
use crate::index::IndexError;
use crate::mib::DaemonStatus;
use crate::statedir::StateDirProblem;
use std::time::Instant;

/// Whether the index state is saved, and if not, why: shown in memSourceLastError while
/// the sources have no error of their own (the MIB has no other place a manager would look).
#[derive(Debug)]
pub(crate) enum Persistence {
    Saved,
    /// Not persisted at all, from start-up: the state directory is not used.
    Off(StateDirProblem),
    /// The last save failed; it is retried at every refresh.
    Failing(IndexError),
}

pub(crate) struct DaemonScalars {
    started: Instant,
    persistence: Persistence,
    notifications_sent: u64,
    notifications_dropped: u64,
}

impl DaemonScalars {
    pub(crate) fn new(started: Instant) -> DaemonScalars {
        DaemonScalars {
            started,
            persistence: Persistence::Saved,
            notifications_sent: 0,
            notifications_dropped: 0,
        }
    }

    pub(crate) fn count_sent(&mut self, n: u64) {
        self.notifications_sent = self.notifications_sent.saturating_add(n);
    }

    pub(crate) fn count_dropped(&mut self, n: u64) {
        self.notifications_dropped = self.notifications_dropped.saturating_add(n);
    }

    /// From start-up: the state directory is not used, and why (`None`: it is).
    pub(crate) fn set_persistence_off(&mut self, problem: Option<StateDirProblem>) {
        self.persistence = problem.map_or(Persistence::Saved, Persistence::Off);
    }

    /// A save failed (with the state directory in use).
    pub(crate) fn save_failed(&mut self, e: IndexError) {
        if !matches!(self.persistence, Persistence::Off(_)) {
            self.persistence = Persistence::Failing(e);
        }
    }

    /// A refresh saved (or had nothing to save) after saves had failed: true if they had.
    pub(crate) fn save_recovered(&mut self) -> bool {
        let was = matches!(self.persistence, Persistence::Failing(_));
        if was {
            self.persistence = Persistence::Saved;
        }
        was
    }

    fn persistence_problem(&self) -> Option<String> {
        match &self.persistence {
            Persistence::Saved => None,
            Persistence::Off(p) => Some(p.to_string()),
            Persistence::Failing(e) => Some(e.to_string()),
        }
    }

    /// Hundredths of a second since the daemon started, wrapping like TimeTicks.
    pub(crate) fn uptime_ticks(&self, now: Instant) -> u32 {
        (now.saturating_duration_since(self.started).as_millis() / 10) as u32
    }

    /// The values of every scalar at `now`.
    pub(crate) fn status(&self, store: &SnapshotStore, now: Instant) -> DaemonStatus {
        let snap = store.current().map(|v| v.snapshot());
        DaemonStatus {
            uptime_ticks: self.uptime_ticks(now),
            snapshot_time_ms: snap.map(|s| s.taken_at_ms),
            snapshot_generation: snap.map(|s| s.generation),
            snapshot_age_ms: store.age(now).map(|a| a.as_millis() as u64),
            refreshes: store.refreshes(),
            refresh_failures: store.failures(),
            source_name: store.source_name().to_string(),
            status: store.status(),
            last_error: store
                .last_error()
                .map(|e| e.to_string())
                .or_else(|| self.persistence_problem())
                .unwrap_or_default(),
            notifications_sent: self.notifications_sent,
            notifications_dropped: self.notifications_dropped,
            sources: store.source_lines(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memstat::SourceError;
    use crate::mib::SourceStatus;
    use std::time::Duration;

    #[test]
    fn uptime_counts_hundredths_and_wraps() {
        let t0 = Instant::now();
        let s = DaemonScalars::new(t0);
        assert_eq!(s.uptime_ticks(t0 + Duration::from_millis(1234)), 123);
        let wrap = Duration::from_millis(10 * (u64::from(u32::MAX) + 1) + 50);
        assert_eq!(s.uptime_ticks(t0 + wrap), 5);
    }

    #[test]
    fn status_follows_the_store() {
        let t0 = Instant::now();
        let scalars = DaemonScalars::new(t0);
        let mut store = SnapshotStore::new(&["fixture:/x".into()], Duration::from_secs(5));
        let st = scalars.status(&store, t0);
        assert_eq!(st.status, SourceStatus::Error);
        assert_eq!((st.snapshot_generation, st.snapshot_age_ms), (None, None));
        store.read_started(t0);
        let err = SourceError::Unavailable {
            message: "no such file".into(),
        };
        let _ = store.read_finished(Err(err).into());
        let st = scalars.status(&store, t0);
        assert_eq!((st.refreshes, st.refresh_failures), (1, 1));
        assert_eq!(st.last_error, "no such file");
        assert_eq!(st.source_name, "fixture:/x");
    }
}
