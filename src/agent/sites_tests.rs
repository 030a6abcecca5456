use super::*;
use crate::memstat::allocinfo::{Profiling, ProfilingState, Site};
use std::sync::OnceLock;
use std::time::{Duration, UNIX_EPOCH};

/// The monotonic time of a snapshot taken `ms` after the epoch: the tests' clocks agree.
fn at(ms: u64) -> Instant {
    static T0: OnceLock<Instant> = OnceLock::new();
    *T0.get_or_init(Instant::now) + Duration::from_millis(ms)
}

fn site(function: &str, bytes: u64) -> Site {
    Site {
        file: format!("mm/{function}.c"),
        line: 7,
        module: String::new(),
        function: function.into(),
        bytes,
        calls: 1,
        accurate: true,
        rows: 1,
    }
}

/// Snapshot `generation`, taken `secs` seconds after the epoch, listing `sites`.
fn snap(generation: u64, secs: u64, sites: &[(&str, u64)]) -> Snapshot {
    let mut s = Snapshot::new(
        generation,
        UNIX_EPOCH + Duration::from_secs(secs),
        "allocinfo".into(),
        Vec::new(),
    );
    s.profiling = Some(Profiling {
        state: ProfilingState::On,
        rows: sites.len() as u64,
        sites: sites.iter().map(|(f, b)| site(f, *b)).collect(),
    });
    s
}

const MIB: u64 = 1 << 20;

fn settings(min_bytes: u64, hold_secs: u64) -> SiteSettings {
    SiteSettings {
        min_bytes,
        hold: Duration::from_secs(hold_secs),
    }
}

/// The served sites of `s` as (function, index, discontinuity), by index.
fn served(
    ids: &mut SiteIdentity,
    s: &Snapshot,
    set: SiteSettings,
    now: u32,
) -> Vec<(String, u32, u32)> {
    let (rows, problems) = ids.choose(s, set, now, at(s.taken_at_ms));
    assert!(problems.is_empty(), "{problems:?}");
    let sites = &s.profiling.as_ref().unwrap().sites;
    let mut v: Vec<(String, u32, u32)> = rows
        .iter()
        .map(|r| {
            (
                sites[r.position as usize].function.clone(),
                r.index,
                r.discontinuity,
            )
        })
        .collect();
    v.sort_by_key(|x| x.1);
    v
}

fn names(v: &[(String, u32, u32)]) -> Vec<&str> {
    v.iter().map(|x| x.0.as_str()).collect()
}

#[test]
fn only_sites_at_the_threshold_are_served_and_keep_their_indexes() {
    let mut ids = SiteIdentity::new(SiteIndexes::in_memory());
    let set = settings(MIB, 3600);
    let a = served(
        &mut ids,
        &snap(1, 100, &[("a", MIB), ("b", MIB - 1), ("c", 5 * MIB)]),
        set,
        0,
    );
    assert_eq!(names(&a), ["a", "c"]);
    let b = served(
        &mut ids,
        &snap(2, 101, &[("c", 6 * MIB), ("a", 2 * MIB)]),
        set,
        0,
    );
    let index = |v: &[(String, u32, u32)], f: &str| v.iter().find(|x| x.0 == f).map(|x| x.1);
    assert_eq!(index(&b, "a"), index(&a, "a"));
    assert_eq!(index(&b, "c"), index(&a, "c"));
}

#[test]
fn a_served_site_stays_for_the_hold_under_the_threshold_then_goes_and_comes_back_with_its_index() {
    let mut ids = SiteIdentity::new(SiteIndexes::in_memory());
    let set = settings(MIB, 60);
    let first = served(&mut ids, &snap(1, 1000, &[("a", 2 * MIB)]), set, 0);
    let a_index = first[0].1;
    // Under the threshold from t=1010: still served up to 59 s after it was last over.
    assert_eq!(
        names(&served(&mut ids, &snap(2, 1010, &[("a", 10)]), set, 0)),
        ["a"]
    );
    assert_eq!(
        names(&served(&mut ids, &snap(3, 1059, &[("a", 10)]), set, 0)),
        ["a"]
    );
    assert!(served(&mut ids, &snap(4, 1060, &[("a", 10)]), set, 0).is_empty());
    // Once dropped, it needs the threshold again: even a longer hold does not bring it back.
    let longer = settings(MIB, 3600);
    assert!(served(&mut ids, &snap(5, 1061, &[("a", 10)]), longer, 0).is_empty());
    let back = served(&mut ids, &snap(6, 1062, &[("a", MIB)]), set, 0);
    assert_eq!(back[0].1, a_index);
}

#[test]
fn a_site_never_over_the_threshold_is_not_held() {
    let mut ids = SiteIdentity::new(SiteIndexes::in_memory());
    let set = settings(MIB, 3600);
    assert!(served(&mut ids, &snap(1, 1, &[("a", 1)]), set, 0).is_empty());
    assert!(served(&mut ids, &snap(2, 2, &[("a", 2)]), set, 0).is_empty());
}

#[test]
fn a_zero_threshold_serves_every_site_and_a_zero_hold_drops_at_once() {
    let mut ids = SiteIdentity::new(SiteIndexes::in_memory());
    let all = served(
        &mut ids,
        &snap(1, 1, &[("a", 0), ("b", 1)]),
        settings(0, 0),
        0,
    );
    assert_eq!(names(&all), ["a", "b"]);
    let set = settings(MIB, 0);
    assert_eq!(
        names(&served(
            &mut ids,
            &snap(2, 2, &[("a", MIB), ("b", 1)]),
            set,
            0
        )),
        ["a"]
    );
    assert!(served(&mut ids, &snap(3, 3, &[("a", 1)]), set, 0).is_empty());
}

#[test]
fn discontinuity_is_0_at_start_then_the_masters_time_of_a_new_or_returning_site() {
    let mut ids = SiteIdentity::new(SiteIndexes::in_memory());
    let set = settings(0, 0);
    let disc = |v: &[(String, u32, u32)], f: &str| v.iter().find(|x| x.0 == f).unwrap().2;
    let s1 = served(&mut ids, &snap(1, 1, &[("a", 1)]), set, 500);
    assert_eq!(disc(&s1, "a"), 0);
    let s2 = served(&mut ids, &snap(2, 2, &[("a", 1), ("m", 1)]), set, 600);
    assert_eq!((disc(&s2, "a"), disc(&s2, "m")), (0, 600));
    // m's module is unloaded, then loaded again: its site starts over.
    served(&mut ids, &snap(3, 3, &[("a", 1)]), set, 700);
    let s4 = served(&mut ids, &snap(4, 4, &[("a", 1), ("m", 1)]), set, 800);
    assert_eq!((disc(&s4, "a"), disc(&s4, "m")), (0, 800));
    ids.master_restarted();
    let s5 = served(&mut ids, &snap(5, 5, &[("a", 1), ("m", 1)]), set, 900);
    assert_eq!((disc(&s5, "a"), disc(&s5, "m")), (0, 0));
}

#[test]
fn what_is_remembered_is_the_last_reads_sites_only() {
    let mut ids = SiteIdentity::new(SiteIndexes::in_memory());
    let set = settings(MIB, 3600);
    let many: Vec<(String, u64)> = (0..1000).map(|i| (format!("f{i}"), 1)).collect();
    let many: Vec<(&str, u64)> = many.iter().map(|(f, b)| (f.as_str(), *b)).collect();
    served(&mut ids, &snap(1, 1, &many), set, 0);
    assert_eq!(ids.seen.len(), 1000);
    served(&mut ids, &snap(2, 2, &[("a", 1)]), set, 0);
    assert_eq!(ids.seen.len(), 1);
    // No profiling at all: nothing served, nothing remembered.
    let none = Snapshot::new(3, UNIX_EPOCH, String::new(), Vec::new());
    let (rows, _) = ids.choose(&none, set, 0, at(0));
    assert!(rows.is_empty());
    assert!(ids.seen.is_empty());
}

#[test]
fn a_reload_that_raises_the_threshold_drops_the_sites_under_it_at_once() {
    let mut ids = SiteIdentity::new(SiteIndexes::in_memory());
    let low = settings(MIB, 3600);
    let s1 = served(
        &mut ids,
        &snap(1, 1, &[("a", 5 * MIB), ("b", 200 * MIB)]),
        low,
        0,
    );
    assert_eq!(names(&s1), ["a", "b"]);
    let high = settings(100 * MIB, 3600);
    let s2 = served(
        &mut ids,
        &snap(2, 2, &[("a", 5 * MIB), ("b", 200 * MIB)]),
        high,
        0,
    );
    assert_eq!(
        names(&s2),
        ["b"],
        "a is under the new threshold: not held for an hour"
    );
    // And back down: a is over it again.
    let s3 = served(
        &mut ids,
        &snap(3, 3, &[("a", 5 * MIB), ("b", 200 * MIB)]),
        low,
        0,
    );
    assert_eq!(names(&s3), ["a", "b"]);
}

#[test]
fn a_snapshot_dropped_unlaid_does_not_make_every_site_new() {
    // Generation 2 was read but never laid out (a late read, dropped): the sites of 3 are
    // the sites of 1, still held, with their discontinuity.
    let mut ids = SiteIdentity::new(SiteIndexes::in_memory());
    let set = settings(MIB, 3600);
    served(&mut ids, &snap(1, 1, &[("a", 2 * MIB)]), set, 100);
    let s3 = served(&mut ids, &snap(3, 3, &[("a", 1), ("b", 2 * MIB)]), set, 300);
    let disc = |f: &str| s3.iter().find(|x| x.0 == f).map(|x| x.2);
    assert_eq!(disc("a"), Some(0), "a is held, and did not appear");
    assert_eq!(disc("b"), Some(300), "b did");
}

#[test]
fn the_hold_is_measured_on_the_monotonic_clock_not_the_snapshots_wall_time() {
    let mut ids = SiteIdentity::new(SiteIndexes::in_memory());
    let set = settings(MIB, 60);
    // The wall clock steps back ten hours between the two reads; the layouts are 30 s apart.
    let first = snap(1, 40_000, &[("a", 2 * MIB)]);
    let (rows, _) = ids.choose(&first, set, 0, at(0));
    assert_eq!(rows.len(), 1);
    let stepped_back = snap(2, 4_000, &[("a", 1)]);
    let (rows, _) = ids.choose(&stepped_back, set, 0, at(30_000));
    assert_eq!(rows.len(), 1, "held: 30 s of the 60 s hold");
    let (rows, _) = ids.choose(&snap(3, 4_031, &[("a", 1)]), set, 0, at(61_000));
    assert!(
        rows.is_empty(),
        "61 s after it was last over, whatever the wall clock says"
    );
}
