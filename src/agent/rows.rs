//! Row identity: which memTypeIndex a memory type has, and since when its counters run.
//!
//! memTypeIndex comes from [`TypeIndexes`] (kept across restarts), and
//! memTypeDiscontinuityTime from the history of each row key. Discontinuity times are
//! TimeStamps, values of the master's sysUpTime, so the master's clock lives here too: it is
//! learnt from the sysUpTime of the master's Responses.

use crate::index::{IndexError, TypeIndexes};
use crate::memstat::{Snapshot, TypeKey};
use crate::mib::{MibView, SiteRow};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// The master's sysUpTime, as last heard, and when.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct MasterClock {
    heard: Option<(u32, Instant)>,
}

impl MasterClock {
    pub(crate) fn heard(&mut self, ticks: u32, at: Instant) {
        self.heard = Some((ticks, at));
    }

    /// The master's sysUpTime at `now`, in hundredths of a second (wrapping like TimeTicks);
    /// `None` before the first Response.
    pub(crate) fn now(&self, now: Instant) -> Option<u32> {
        self.heard.map(|(t, at)| {
            let ms = now.saturating_duration_since(at).as_millis();
            t.wrapping_add((ms / 10) as u32)
        })
    }
}

/// Per row key: allocation counter at the previous snapshot, discontinuity time, and the
/// generation the key was last seen in.
#[derive(Default)]
struct Discontinuity {
    seen: HashMap<TypeKey, (Option<u64>, u32, u64)>,
    /// The generation of the last snapshot laid out. A row it did not list appeared since;
    /// a snapshot read but dropped before its layout (a late read) skips a number without
    /// making every row new.
    last_generation: Option<u64>,
}

impl Discontinuity {
    /// Discontinuity times for `snap`'s rows. Rows of the first snapshot get 0 (SNMPv2-TC:
    /// no discontinuity since the daemon started); a row that appears later, returns after
    /// vanishing, or whose allocation counter went backwards gets `now`.
    fn update(&mut self, snap: &Snapshot, first: bool, now: u32) -> Vec<u32> {
        let gen = snap.generation;
        let last = self.last_generation.replace(gen);
        snap.types
            .iter()
            .map(|t| {
                let key = t.key();
                let entry = self.seen.get(&key).copied();
                let disc = match entry {
                    _ if first => 0,
                    None => now,
                    Some((_, _, seen_in)) if Some(seen_in) != last => now,
                    Some((Some(prev), _, _)) if t.allocs.is_some_and(|a| a < prev) => now,
                    Some((_, d, _)) => d,
                };
                self.seen.insert(key, (t.allocs, disc, gen));
                disc
            })
            .collect()
    }
}

/// Stable indexes, discontinuity times, and the master's clock.
pub(crate) struct RowIdentity {
    indexes: TypeIndexes,
    discontinuity: Discontinuity,
    clock: MasterClock,
    /// Whether a snapshot was laid out before: the first one's rows were present at
    /// start-up.
    laid_out: bool,
    /// A full index space is reported once, not at every refresh.
    full_reported: bool,
}

impl RowIdentity {
    pub(crate) fn new(indexes: TypeIndexes) -> RowIdentity {
        RowIdentity {
            indexes,
            discontinuity: Discontinuity::default(),
            clock: MasterClock::default(),
            laid_out: false,
            full_reported: false,
        }
    }

    pub(crate) fn clock(&self) -> &MasterClock {
        &self.clock
    }

    pub(crate) fn master_uptime(&mut self, ticks: u32, at: Instant) {
        self.clock.heard(ticks, at);
    }

    /// The master restarted: its sysUpTime began again, so every discontinuity recorded so
    /// far predates its re-initialisation and reads 0 (SNMPv2-TC TimeStamp).
    pub(crate) fn master_restarted(&mut self) {
        for e in self.discontinuity.seen.values_mut() {
            e.1 = 0;
        }
    }

    /// Lays `snap` out as MEMSTAT-MIB with its rows' indexes and discontinuity times. A type
    /// that gets no index (the index space is full) is left out of the view; the problems
    /// are returned for the caller to log.
    /// `sites` are the call sites the view serves (see `agent::sites`).
    pub(crate) fn lay_out(
        &mut self,
        snap: Snapshot,
        sites: Vec<SiteRow>,
        now: Instant,
    ) -> (MibView, Vec<IndexError>) {
        let first = !std::mem::replace(&mut self.laid_out, true);
        let assigned = self.indexes.assign(&snap.types);
        let master_now = self.clock.now(now).unwrap_or(0);
        let disc = self.discontinuity.update(&snap, first, master_now);
        let view = if assigned.indexes.iter().all(Option::is_some) {
            let idx: Vec<u32> = assigned.indexes.iter().flatten().copied().collect();
            MibView::with_sites(Arc::new(snap), &idx, &disc, sites)
        } else {
            // Rare: only a full index space gets here. Serve the rows that have an index.
            let (generation, taken_at) = (snap.generation, snap.taken_at());
            // Which part each row belongs to, so that the kept rows' parts can be counted.
            let part_of: Vec<usize> = snap
                .parts
                .iter()
                .enumerate()
                .flat_map(|(p, part)| std::iter::repeat_n(p, part.types as usize))
                .collect();
            let mut parts = snap.parts.clone();
            for p in &mut parts {
                p.types = 0;
            }
            let mut types = Vec::new();
            let mut idx = Vec::new();
            let mut d = Vec::new();
            let rows = snap.types.into_iter().zip(&assigned.indexes).zip(disc);
            for (row, ((t, i), di)) in rows.enumerate() {
                if let Some(i) = i {
                    types.push(t);
                    idx.push(*i);
                    d.push(di);
                    if let Some(&p) = part_of.get(row) {
                        parts[p].types += 1;
                    }
                }
            }
            let mut kept = Snapshot::new(generation, taken_at, snap.source, types);
            kept.figures = snap.figures;
            kept.profiling = snap.profiling;
            kept.parts = parts;
            MibView::with_sites(Arc::new(kept), &idx, &d, sites)
        };
        let mut problems = assigned.problems;
        let full = problems
            .iter()
            .any(|p| matches!(p, IndexError::Full { .. }));
        if full && self.full_reported {
            problems.retain(|p| !matches!(p, IndexError::Full { .. }));
        }
        self.full_reported = full;
        (view, problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memstat::{Allocator, MemoryType};
    use std::time::{Duration, SystemTime};

    fn snap(gen: u64, allocs: &[(&str, u64)]) -> Snapshot {
        let types = allocs
            .iter()
            .map(|(n, a)| {
                let mut t = MemoryType::new(Allocator::Uma, *n);
                t.allocs = Some(*a);
                t
            })
            .collect();
        Snapshot::new(gen, SystemTime::now(), String::new(), types)
    }

    #[test]
    fn discontinuity_marks_new_and_reset_rows() {
        let mut d = Discontinuity::default();
        assert_eq!(d.update(&snap(1, &[("a", 5), ("b", 5)]), true, 100), [0, 0]);
        assert_eq!(
            d.update(&snap(2, &[("a", 6), ("b", 1), ("c", 1)]), false, 200),
            [0, 200, 200]
        );
        assert_eq!(
            d.update(&snap(3, &[("a", 7), ("b", 2)]), false, 300),
            [0, 200]
        );
        // c vanished in generation 3 and returns in 4: its counters may have restarted.
        assert_eq!(
            d.update(&snap(4, &[("a", 8), ("c", 9)]), false, 400),
            [0, 400]
        );
        // Generation 5 was read but dropped before its layout: 6 follows 4, and its rows
        // are the same rows.
        assert_eq!(
            d.update(&snap(6, &[("a", 9), ("c", 10)]), false, 600),
            [0, 400]
        );
    }

    #[test]
    fn the_master_clock_runs_on_from_the_last_response_and_wraps() {
        let t0 = Instant::now();
        let mut c = MasterClock::default();
        assert_eq!(c.now(t0), None);
        c.heard(u32::MAX - 5, t0);
        assert_eq!(c.now(t0 + Duration::from_millis(100)), Some(4));
    }

    #[test]
    fn rows_keep_their_index_and_late_rows_get_the_master_time() {
        let t0 = Instant::now();
        let mut r = RowIdentity::new(TypeIndexes::in_memory());
        r.master_uptime(1000, t0);
        let (v1, p) = r.lay_out(snap(1, &[("a", 1), ("b", 1)]), Vec::new(), t0);
        assert!(p.is_empty());
        let later = t0 + Duration::from_secs(1);
        let (v2, _) = r.lay_out(snap(2, &[("c", 1), ("a", 2), ("b", 2)]), Vec::new(), later);
        let rows = |v: &MibView| {
            v.rows()
                .map(|(row, t)| (t.name.clone(), row.index, row.discontinuity))
                .collect::<Vec<_>>()
        };
        assert_eq!(rows(&v1), [("a".into(), 1, 0), ("b".into(), 2, 0)]);
        assert_eq!(
            rows(&v2),
            [
                ("a".to_string(), 1, 0),
                ("b".into(), 2, 0),
                ("c".into(), 3, 1100)
            ]
        );
        r.master_restarted();
        let (v3, _) = r.lay_out(snap(3, &[("c", 2), ("a", 3), ("b", 3)]), Vec::new(), later);
        assert!(v3.rows().all(|(row, _)| row.discontinuity == 0));
    }
}
