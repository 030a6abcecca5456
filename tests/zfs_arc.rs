//! memstatArc through the real snmpd, from arcstats files in OpenZFS's kstat text format
//! (module/os/linux/spl/spl-kstat.c, read at openzfs/zfs be7657e3: a header of the kstat's
//! numbers, `name type data`, then `name type value` rows, type 4 for uint64): a release
//! with `p`, one with `pd`/`pm`, fields missing, a truncated file, a huge one, and ZFS loaded
//! and unloaded while the daemon runs.

mod common;

use common::*;
use std::time::{Duration, Instant};

const ARC: &str = ".1.3.6.1.4.1.32473.1.1.7";

fn kstat(rows: &[(&str, u64)]) -> String {
    let mut t = format!(
        "13 1 0x01 {} {} 5404391811 1099539417562993\nname                            type data\n",
        rows.len(),
        rows.len() * 40
    );
    for (name, v) in rows {
        t.push_str(&format!("{name:<32}4    {v}\n"));
    }
    t
}

/// memstatArc's objects by arc.
fn arc_objects(port: u16) -> std::collections::BTreeMap<u32, u64> {
    bulkwalk(port, ARC, &["-On"])
        .into_iter()
        .filter_map(|l| {
            let rest = l.oid.strip_prefix(ARC)?.trim_start_matches('.');
            let arc: u32 = rest.strip_suffix(".0")?.parse().ok()?;
            Some((arc, l.value.parse().ok()?))
        })
        .collect()
}

/// Walks until `check` holds on memstatArc (a refresh follows max-age), for at most 60 s.
fn until(port: u16, what: &str, check: impl Fn(&std::collections::BTreeMap<u32, u64>) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let objs = arc_objects(port);
        if check(&objs) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not within 60 s: {objs:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn the_arc_is_served_from_its_kstat_file_and_follows_zfs_loading() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("arcstats");
    // OpenZFS before 2.2: `p` in bytes.
    let old = [
        ("hits", 1000),
        ("misses", 10),
        ("c", 4 << 30),
        ("c_min", 1 << 30),
        ("c_max", 8 << 30),
        ("p", 2 << 30),
        ("size", 3 << 30),
        ("memory_throttle_count", 0),
    ];
    std::fs::write(&file, kstat(&old)).unwrap();
    let snmpd = Snmpd::start(dir.path(), Transport::Unix);
    let state = dir.path().join("state").display().to_string();
    let src = format!("arcstats:{}", file.display());
    let _d = Daemon::start(
        &snmpd,
        // A short walk-window: the checks walk back to back, and walks in progress keep
        // their snapshot up to max-age plus the window.
        &[
            "--source",
            &src,
            "--state-dir",
            &state,
            "--max-age",
            "0.2",
            "--walk-window",
            "0.3",
        ],
    );
    let objs = arc_objects(snmpd.port);
    assert_eq!(objs[&1], 8, "memArcStatistics");
    assert_eq!(objs[&2], 3 << 30, "memArcSize");
    assert_eq!(objs[&4], 1 << 30, "memArcMin");
    assert_eq!(objs[&6], 2 << 30, "memArcShrinkable: size − c_min");
    assert_eq!(objs[&7], 2 << 30, "memArcMruTarget (p)");
    assert_eq!(objs[&20], 1000, "memArcHits");
    assert_eq!(objs[&30], 0, "memArcMemoryThrottles: present at 0");
    assert!(
        !objs.contains_key(&8),
        "mru_size is not in this file: absent, not 0"
    );

    // OpenZFS 2.2 and later: `pd`/`pm` instead of `p` (not served), c_min above size.
    let new = [("size", 1 << 30), ("c_min", 2 << 30), ("pd", 5), ("pm", 7)];
    std::fs::write(&file, kstat(&new)).unwrap();
    until(snmpd.port, "the new release's file", |o| {
        o.get(&1) == Some(&4)
    });
    let objs = arc_objects(snmpd.port);
    assert!(!objs.contains_key(&7), "no p: memArcMruTarget is absent");
    assert_eq!(objs[&6], 0, "shrinkable is floored at 0");

    // Unloaded: no statistics, and memArcStatistics says 0; loaded again: back.
    std::fs::remove_file(&file).unwrap();
    until(snmpd.port, "ZFS unloaded", |o| {
        o.get(&1) == Some(&0) && o.len() == 1
    });
    std::fs::write(&file, kstat(&old)).unwrap();
    until(snmpd.port, "ZFS loaded again", |o| {
        o.get(&2) == Some(&(3 << 30))
    });

    // A truncated file (a row cut in the middle) and one over the cap keep the last good
    // figures, stale, with the error named in memSourceLastError.
    let mut cut = kstat(&old);
    cut.truncate(cut.len() - 3);
    cut.push_str("\nsize 4\n");
    std::fs::write(&file, &cut).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let _ = arc_objects(snmpd.port);
        let (status, error) = source_status(snmpd.port);
        if status.contains('2') {
            assert!(
                error.contains("arcstats") && error.contains("line"),
                "{error}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "never stale: {status} {error}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(arc_objects(snmpd.port)[&2], 3 << 30, "the last good size");
    std::fs::write(&file, vec![b'x'; 2 << 20]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let _ = arc_objects(snmpd.port);
        let (_, error) = source_status(snmpd.port);
        if error.contains("MiB") || error.contains("cap") || error.contains("larger") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the huge file is not refused: {error}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        arc_objects(snmpd.port)[&2],
        3 << 30,
        "still the last good size"
    );
}
