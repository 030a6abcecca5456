//! Which call sites memAllocSiteTable serves, under which stable index, and since when.
//!
//! A kernel has thousands of allocation call sites, most holding a few KiB, and a poller
//! wants the few that say where memory goes, as rows that do not come and go at every poll.
//! So a site is served while it holds at least `allocinfo-min-bytes`, and stays served until
//! it has stayed under that for `allocinfo-hold` (on the monotonic clock). A reload that
//! changes the threshold judges every site again at the next layout. Only
//! served sites get a stable memAllocSiteIndex (the index state is bounded: see
//! `index.rs`).
//!
//! What is remembered of a site lasts only while the kernel lists it: a site missing from a
//! read is forgotten here (its index is kept in the index state), so this memory is bounded
//! by the sites of one read. A site that comes back, as a reloaded module's do, starts over:
//! its discontinuity time is the master's sysUpTime then (0 for the sites of the first
//! snapshot, as SNMPv2-TC's TimeStamp says for what was there at start-up).

use crate::index::{IndexError, SiteIndexes};
use crate::memstat::allocinfo::SiteKey;
use crate::memstat::Snapshot;
use crate::mib::SiteRow;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The settings that choose the served sites (`allocinfo-min-bytes`, `allocinfo-hold`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SiteSettings {
    /// Bytes a site must hold to be served; 0 serves every site.
    pub min_bytes: u64,
    /// How long a served site stays served under `min_bytes`.
    pub hold: Duration,
}

impl Default for SiteSettings {
    fn default() -> SiteSettings {
        SiteSettings {
            min_bytes: 1 << 20,
            hold: Duration::from_secs(3600),
        }
    }
}

/// What is remembered of a site the last layout listed.
#[derive(Clone, Copy, Debug)]
struct Seen {
    /// The generation of the last snapshot laid out that listed it.
    generation: u64,
    discontinuity: u32,
    /// When it last held at least the threshold (the layout's time).
    over: Option<Instant>,
    served: bool,
}

/// The served sites' choice, stable indexes and discontinuity times.
pub(crate) struct SiteIdentity {
    indexes: SiteIndexes,
    seen: HashMap<SiteKey, Seen>,
    /// The generation of the last snapshot laid out: a site it did not list appeared since
    /// (a snapshot dropped unlaid, which numbers are skipped for, changes nothing).
    last_generation: Option<u64>,
    /// The threshold of the last layout: a reload that changes it starts the choice over.
    last_min_bytes: Option<u64>,
    /// A full index state is reported once, not at every refresh.
    full_reported: bool,
}

impl SiteIdentity {
    pub(crate) fn new(indexes: SiteIndexes) -> SiteIdentity {
        SiteIdentity {
            indexes,
            seen: HashMap::new(),
            last_generation: None,
            last_min_bytes: None,
            full_reported: false,
        }
    }

    /// The master restarted: every discontinuity so far predates its sysUpTime.
    pub(crate) fn master_restarted(&mut self) {
        for s in self.seen.values_mut() {
            s.discontinuity = 0;
        }
    }

    /// The sites of `snap` that its view serves, with their indexes and discontinuity times
    /// (`master_now`, the master's sysUpTime, for a site that appeared), laid out at `now`;
    /// the problems of the index state, for the caller to log.
    ///
    /// The hold is measured on `now`, the monotonic clock, so that a step of the wall clock
    /// neither keeps sites for hours nor drops them all.
    pub(crate) fn choose(
        &mut self,
        snap: &Snapshot,
        settings: SiteSettings,
        master_now: u32,
        now: Instant,
    ) -> (Vec<SiteRow>, Vec<IndexError>) {
        // The first snapshot's sites were there at start-up; a source that reads sites only
        // later (it failed at first) lists sites that appeared since.
        let last = self.last_generation.replace(snap.generation);
        let first = last.is_none();
        if self.last_min_bytes.replace(settings.min_bytes) != Some(settings.min_bytes) {
            // A new threshold applies from this layout: what was served, or held, under the
            // old one is judged again (a raised threshold would otherwise keep every site
            // it drops for the whole hold).
            for s in self.seen.values_mut() {
                s.served = false;
                s.over = None;
            }
        }
        let Some(profiling) = &snap.profiling else {
            self.seen.clear();
            return (Vec::new(), Vec::new());
        };
        let gen = snap.generation;
        let mut chosen: Vec<(SiteKey, u32, u32)> = Vec::new();
        for (position, site) in profiling.sites.iter().enumerate() {
            let key = site.key();
            let over = site.bytes >= settings.min_bytes;
            let before = self.seen.get(&key).copied();
            let appeared = match before {
                None => true,
                Some(s) => Some(s.generation) != last,
            };
            let over_at = if over {
                Some(now)
            } else {
                before.and_then(|s| s.over)
            };
            let held = before.is_some_and(|s| s.served)
                && !appeared
                && over_at.is_some_and(|t| now.saturating_duration_since(t) < settings.hold);
            let served = over || held;
            let discontinuity = match before {
                _ if first => 0,
                Some(s) if !appeared => s.discontinuity,
                _ => master_now,
            };
            let seen = Seen {
                generation: gen,
                discontinuity,
                over: over_at,
                served,
            };
            // Most sites are not served: only a served one's key is copied, for its index.
            if served {
                self.seen.insert(key.clone(), seen);
                chosen.push((key, position as u32, discontinuity));
            } else {
                self.seen.insert(key, seen);
            }
        }
        // Forget what the kernel no longer lists: this memory is one read's.
        self.seen.retain(|_, s| s.generation == gen);
        let assigned = self
            .indexes
            .assign_keys(chosen.iter().map(|c| &c.0), snap.taken_at_ms / 1000);
        let rows = chosen
            .iter()
            .zip(&assigned.indexes)
            .filter_map(|((_, position, discontinuity), index)| {
                Some(SiteRow {
                    index: (*index)?,
                    position: *position,
                    discontinuity: *discontinuity,
                })
            })
            .collect();
        let mut problems = assigned.problems;
        let is_full = |p: &IndexError| {
            matches!(
                p,
                IndexError::Full { .. } | IndexError::TooManyServed { .. }
            )
        };
        let full = problems.iter().any(is_full);
        if full && self.full_reported {
            problems.retain(|p| !is_full(p));
        }
        self.full_reported = full;
        (rows, problems)
    }
}

#[cfg(test)]
#[path = "sites_tests.rs"]
mod tests;
