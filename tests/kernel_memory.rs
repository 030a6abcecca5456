//! memKernelTable through the real snmpd: the live /proc/meminfo against the served rows
//! (read over and over from before the walk to after it, every served row lies within what
//! the file held meanwhile), the fields this kernel lacks absent, and the tree's parent sums.

mod common;

use common::*;
use memstat_agentx::memstat::meminfo;
use memstat_agentx::memstat::source::SOURCES;
use std::collections::BTreeMap;

const KERNEL_ENTRY: &str = ".1.3.6.1.4.1.32473.1.1.6.1";

/// The served table: per row index, its columns by number.
fn walk_kernel_table(port: u16) -> BTreeMap<u32, BTreeMap<u32, String>> {
    let mut rows: BTreeMap<u32, BTreeMap<u32, String>> = BTreeMap::new();
    for l in bulkwalk(port, KERNEL_ENTRY, &["-On"]) {
        let rest = l.oid.strip_prefix(KERNEL_ENTRY).expect("under the entry");
        let mut arcs = rest.trim_start_matches('.').split('.');
        let column: u32 = arcs.next().unwrap().parse().unwrap();
        let index: u32 = arcs.next().unwrap().parse().unwrap();
        assert!(arcs.next().is_none(), "{}", l.oid);
        rows.entry(index).or_default().insert(column, l.value);
    }
    rows
}

fn live_meminfo() -> BTreeMap<String, u64> {
    let text = std::fs::read(meminfo::MEMINFO).expect("/proc/meminfo");
    meminfo::parse(&text, meminfo::MEMINFO).expect("the live file parses")
}

/// Per field, the least and the most /proc/meminfo held while it was watched.
type Ranges = BTreeMap<String, (u64, u64)>;

/// Reads /proc/meminfo over and over on a thread until the watch is stopped. Reading it only
/// before and after a walk is not enough: the walk's own client (snmpbulkwalk) is a process,
/// whose kernel stack (VmallocUsed and KernelStack) and page tables exist only while it runs,
/// and the daemon reads the file during the walk. So do other tests' processes, coming and
/// going. The served value must be one the file held meanwhile.
struct MeminfoWatch {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<Ranges>,
}

impl MeminfoWatch {
    fn start() -> MeminfoWatch {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut ranges = Ranges::new();
            loop {
                // Checked before the read, so that the last read comes after the stop.
                let last = stopped.load(std::sync::atomic::Ordering::Acquire);
                for (k, v) in live_meminfo() {
                    let r = ranges.entry(k).or_insert((v, v));
                    r.0 = r.0.min(v);
                    r.1 = r.1.max(v);
                }
                if last {
                    return ranges;
                }
                std::thread::sleep(std::time::Duration::from_micros(100));
            }
        });
        MeminfoWatch { stop, thread }
    }

    fn stop(self) -> Ranges {
        self.stop.store(true, std::sync::atomic::Ordering::Release);
        self.thread.join().expect("the watch ran")
    }
}

#[test]
#[cfg_attr(not(target_os = "linux"), ignore = "needs Linux's /proc/meminfo")]
fn the_served_rows_are_the_live_meminfo_and_add_up() {
    let dir = tempfile::tempdir().unwrap();
    let snmpd = Snmpd::start(dir.path(), Transport::Unix);
    let state = dir.path().join("state").display().to_string();
    // The live file alone, at max-age 0.5 s: the walk's rows come from one read between the
    // two readings here.
    let daemon = Daemon::start(
        &snmpd,
        &[
            "--source",
            "meminfo",
            "--state-dir",
            &state,
            "--max-age",
            "0.5",
        ],
    );
    let watch = MeminfoWatch::start();
    // Until a refresh is due (memSnapshotAge past max-age and the in-progress window): then
    // the walk's first request reads the file again, while it is watched, and the walk is
    // answered from that one read.
    wait_refresh_due(snmpd.port, std::time::Duration::from_millis(500), &daemon);
    let rows = walk_kernel_table(snmpd.port);
    let held = watch.stop();
    let kinds: Vec<_> = SOURCES.iter().flat_map(|d| d.kinds.iter()).collect();
    for k in &kinds {
        let range = held.get(k.figure);
        let Some(row) = rows.get(&k.index) else {
            assert!(
                range.is_none(),
                "{} ({}) is in the file but not served",
                k.name,
                k.figure
            );
            continue;
        };
        let (lo, hi) = *range.expect("served, so in the file");
        let bytes: u64 = row[&3].parse().unwrap();
        assert!(
            (lo..=hi).contains(&bytes),
            "{}: served {bytes}, the file held {lo} to {hi} meanwhile",
            k.name
        );
        assert_eq!(row[&2], k.name, "memKernelName");
        assert_eq!(
            row[&4],
            k.parent.to_string(),
            "memKernelParent of {}",
            k.name
        );
        let truth = |b: bool| if b { "1" } else { "2" };
        assert_eq!(
            row[&5],
            truth(k.reclaimable),
            "memKernelReclaimable of {}",
            k.name
        );
        assert_eq!(
            row[&6],
            truth(k.stackable),
            "memKernelStackable of {}",
            k.name
        );
    }
    // What this kernel lacks (the development machine has no ShadowCallStack or
    // HardwareCorrupted) is absent, not 0: every served row is in the file.
    for index in rows.keys() {
        let k = kinds
            .iter()
            .find(|k| k.index == *index)
            .expect("a known kind");
        assert!(
            held.contains_key(k.figure),
            "{} served, not in the file",
            k.name
        );
    }
    assert!(rows.contains_key(&1), "slab is served");
    // The children of one parent, stackable ones, never exceed it (one read fills them all).
    for (index, row) in &rows {
        let bytes: u64 = row[&3].parse().unwrap();
        let children: u64 = rows
            .values()
            .filter(|r| r[&4] == index.to_string() && r[&6] == "1")
            .map(|r| r[&3].parse::<u64>().unwrap())
            .sum();
        assert!(
            children <= bytes,
            "row {index}: children {children} > {bytes}"
        );
    }
    drop(daemon);
}

/// The ARC's row from a file in OpenZFS's kstat format, beside the live meminfo.
#[test]
#[cfg_attr(not(target_os = "linux"), ignore = "needs Linux's /proc/meminfo")]
fn the_arc_is_a_row_from_a_kstat_file() {
    let dir = tempfile::tempdir().unwrap();
    let arc = dir.path().join("arcstats");
    std::fs::write(
        &arc,
        "13 1 0x01 3 240 5404391811 1099539417562993\n\
         name                            type data\n\
         hits                            4    1234567\n\
         size                            4    2147483648\n\
         c_min                           4    1073741824\n",
    )
    .unwrap();
    let snmpd = Snmpd::start(dir.path(), Transport::Unix);
    let state = dir.path().join("state").display().to_string();
    let src = format!("meminfo,arcstats:{}", arc.display());
    let _daemon = Daemon::start(&snmpd, &["--source", &src, "--state-dir", &state]);
    let rows = walk_kernel_table(snmpd.port);
    let zfs = &rows[&13];
    assert_eq!(zfs[&2], "zfsArc");
    assert_eq!(zfs[&3], "2147483648");
    assert_eq!(
        (zfs[&4].as_str(), zfs[&5].as_str(), zfs[&6].as_str()),
        ("0", "1", "2")
    );
    assert!(rows.contains_key(&1), "meminfo's rows beside it");
}

/// A FreeBSD host's overview replayed from a fixture on Linux: the figures a FreeBSD
/// host's `dump --format json` carries, from sysctl values as the kernel gives them
/// (v_wire_count pages, hw.pagesize, vm.uma_kmem_total and vfs.bufspace in bytes, the malloc
/// types' memory in use), served as the wired tree.
#[test]
fn a_freebsd_hosts_overview_replays_from_a_fixture() {
    use memstat_agentx::memstat::{fixture, Snapshot};
    let dir = tempfile::tempdir().unwrap();
    let (page, wire_count, user_wired, uma, bufspace, malloc) = (
        4096u64,
        500_000u64,
        1_000u64,
        900_000_000u64,
        300_000_000u64,
        120_000_000u64,
    );
    let mut snap = Snapshot::new(1, std::time::UNIX_EPOCH, "freebsd".into(), Vec::new());
    for (k, v) in [
        ("freebsd.wired", wire_count * page),
        ("freebsd.wired_user", user_wired * page),
        ("freebsd.uma", uma),
        ("freebsd.malloc", malloc),
        ("freebsd.bufspace", bufspace),
        ("freebsd.wired_other", wire_count * page - uma - bufspace),
    ] {
        snap.figures.insert(k.into(), v);
    }
    let fix = dir.path().join("freebsd.json");
    std::fs::write(&fix, fixture::to_json(&snap)).unwrap();
    let snmpd = Snmpd::start(dir.path(), Transport::Unix);
    let state = dir.path().join("state").display().to_string();
    let src = format!("fixture:{}", fix.display());
    let _daemon = Daemon::start(&snmpd, &["--source", &src, "--state-dir", &state]);
    let rows = walk_kernel_table(snmpd.port);
    let bytes = |i: u32| rows[&i][&3].parse::<u64>().unwrap();
    let names: Vec<(u32, &str)> = rows.iter().map(|(i, r)| (*i, r[&2].as_str())).collect();
    assert_eq!(
        names,
        [
            (32, "wired"),
            (33, "wiredUser"),
            (34, "uma"),
            (35, "malloc"),
            (37, "bufferCache"),
            (38, "wiredOther")
        ],
        "no ZFS, no zfsArcWired row; no Linux rows"
    );
    assert_eq!(bytes(32), wire_count * page);
    // The stackable children of wired add up to it; wiredUser overlaps and is marked so.
    let stackable_children: u64 = rows
        .iter()
        .filter(|(_, r)| r[&4] == "32" && r[&6] == "1")
        .map(|(i, _)| bytes(*i))
        .sum();
    assert_eq!(stackable_children, bytes(32));
    assert_eq!(rows[&33][&6], "2", "wiredUser is not stackable");
    assert_eq!(
        (rows[&35][&4].as_str(), rows[&35][&6].as_str()),
        ("34", "2"),
        "malloc under uma, not stackable"
    );
}
