//! The daemon's scalars (memstatDaemon): what the daemon says about itself and its source.
//!
//! They describe the newest snapshot, not the one a walk is pinned to, and reading them
//! never triggers a refresh: a manager polling memSourceStatus must not cost a kernel read.

use super::store::SnapshotStore;
use crate::mib::DaemonStatus;
use std::time::Instant;

pub(crate) struct DaemonScalars {
    started: Instant,
    /// Why the index state is not being saved, shown in memSourceLastError while the
    /// source itself has no error (the MIB has no other place a manager would look).
    persistence_problem: Option<String>,
    notifications_sent: u64,
    notifications_dropped: u64,
}

impl DaemonScalars {
    pub(crate) fn new(started: Instant) -> DaemonScalars {
        DaemonScalars {
            started,
            persistence_problem: None,
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

    pub(crate) fn set_persistence_problem(&mut self, problem: Option<String>) {
        self.persistence_problem = problem;
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
                .or_else(|| self.persistence_problem.clone())
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
