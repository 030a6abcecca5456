//! End-to-end: the daemon behind a real net-snmp snmpd, queried with the real clients.

mod common;

use common::*;
use memstat_agentx::memstat::{Allocator, MemoryType, PerCpu};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// What snmpbulkwalk should print for one cell: (type, value).
fn expect(ty: &str, v: impl ToString) -> Option<(String, String)> {
    Some((ty.to_string(), v.to_string()))
}

fn c64(v: Option<u64>) -> Option<(String, String)> {
    v.and_then(|v| expect("Counter64", v))
}

fn hex(v: u64) -> String {
    v.to_be_bytes()
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The expected memTypeTable cells of one row, written from the MIB's column list.
fn expected_cells(t: &MemoryType) -> Vec<(u32, Option<(String, String)>)> {
    vec![
        (2, expect("STRING", &t.name)),
        (3, expect("INTEGER", t.allocator as u32)),
        (4, expect("Gauge32", t.ordinal)),
        (5, c64(t.size)),
        (6, c64(t.real_size)),
        (7, c64(t.count_limit)),
        (8, c64(t.bytes_limit)),
        (9, c64(t.in_use_count)),
        (10, c64(t.in_use_bytes)),
        (11, c64(t.free_count)),
        (12, c64(t.total_count)),
        (13, c64(t.allocs)),
        (14, c64(t.frees)),
        (15, c64(t.bytes_allocated)),
        (16, c64(t.bytes_freed)),
        (17, c64(t.failures)),
        (18, c64(t.sleeps)),
        (19, c64(t.xdomain)),
        (20, c64(t.zone_free)),
        (21, c64(t.keg_free)),
        (22, t.size_mask.and_then(|m| expect("Hex-STRING", hex(m)))),
        (23, c64(t.slab_bytes)),
        // Rows present at start-up have no discontinuity.
        (24, expect("Timeticks", "(0) 0:00:00.00")),
    ]
}

fn expected_table(types: &[MemoryType]) -> BTreeMap<String, (String, String)> {
    let mut m = BTreeMap::new();
    for (i, t) in types.iter().enumerate() {
        let index = i + 1; // a fresh state dir assigns indexes in kernel order
        for (col, cell) in expected_cells(t) {
            if let Some(c) = cell {
                m.insert(format!("{TYPE_ENTRY}.{col}.{index}"), c);
            }
        }
    }
    m
}

fn as_map(lines: &[Line]) -> BTreeMap<String, (String, String)> {
    lines
        .iter()
        .map(|l| (l.oid.clone(), (l.ty.clone(), l.value.trim().to_string())))
        .collect()
}

#[test]
fn bulkwalk_snmptable_and_get_return_exactly_the_fixture() {
    let types = sample_types();
    let (_dir, snmpd, _daemon) = start_with_fixture(Transport::Unix, types.clone(), &[]);

    let walked = as_map(&bulkwalk(snmpd.port, TYPE_ENTRY, &[]));
    let expected = expected_table(&types);
    assert_eq!(walked, expected, "memTypeTable differs from the fixture");

    // Per-CPU table: every present per-CPU figure, indexed by (memTypeIndex, cpu).
    let mut cpu_expected = BTreeMap::new();
    for (i, t) in types.iter().enumerate() {
        for c in &t.per_cpu {
            for (col, cell) in [
                (2, c64(c.allocs)),
                (3, c64(c.frees)),
                (4, c64(c.cache_free)),
                (5, c64(c.bytes_allocated)),
                (6, c64(c.bytes_freed)),
                (7, c.size_mask.and_then(|m| expect("Hex-STRING", hex(m)))),
            ] {
                if let Some(cell) = cell {
                    cpu_expected.insert(format!("{ROOT}.1.3.1.{col}.{}.{}", i + 1, c.cpu), cell);
                }
            }
        }
    }
    assert_eq!(
        as_map(&bulkwalk(snmpd.port, &format!("{ROOT}.1.3"), &[])),
        cpu_expected
    );

    // Allocator summary: type counts per allocator.
    let alloc = as_map(&bulkwalk(snmpd.port, &format!("{ROOT}.1.4"), &[]));
    for (a, n) in [
        (Allocator::Malloc, 1),
        (Allocator::Uma, 3),
        (Allocator::Slab, 1),
    ] {
        assert_eq!(
            alloc.get(&format!("{ROOT}.1.4.1.2.{}", a as u32)),
            Some(&("Gauge32".to_string(), n.to_string()))
        );
    }
    let uma_in_use: u64 = types
        .iter()
        .filter(|t| t.allocator == Allocator::Uma)
        .map(|t| t.in_use_bytes.unwrap())
        .sum();
    assert_eq!(
        alloc.get(&format!("{ROOT}.1.4.1.3.2")).map(|c| c.1.clone()),
        Some(uma_in_use.to_string())
    );

    // snmpget of single cells agrees with the walk, and absent cells are noSuchInstance.
    let oids: Vec<String> = ["5.2", "13.3", "9.5", "22.1"]
        .iter()
        .map(|s| format!("{TYPE_ENTRY}.{s}"))
        .collect();
    let refs: Vec<&str> = oids.iter().map(String::as_str).collect();
    for l in get(snmpd.port, &refs) {
        assert_eq!(
            Some(&(l.ty.clone(), l.value.trim().to_string())),
            expected.get(&l.oid),
            "{l:?}"
        );
    }
    let absent = get(
        snmpd.port,
        &[&format!("{TYPE_ENTRY}.13.5"), &format!("{TYPE_ENTRY}.5.99")],
    );
    assert!(
        absent.iter().all(|l| l.ty.contains("No Such Instance")),
        "{absent:?}"
    );

    // snmptable with the MIB loaded: names and a 64-bit counter per row, `?` for absent cells.
    let out = std::process::Command::new("snmptable")
        .args([
            "-v2c",
            "-c",
            "public",
            "-M",
            &mib_dirs(),
            "-m",
            "MEMSTAT-MIB",
            "-OU",
            "-Cf",
            "|",
            "-Ci",
        ])
        .arg(format!("127.0.0.1:{}", snmpd.port))
        .arg("MEMSTAT-MIB::memTypeTable")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "snmptable: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut lines = text.lines().filter(|l| l.contains('|'));
    let header: Vec<&str> = lines.next().unwrap().split('|').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("{name} in {header:?}"))
    };
    let (name_c, allocs_c, idx_c) = (col("memTypeName"), col("memTypeAllocs"), col("index"));
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split('|').collect()).collect();
    assert_eq!(rows.len(), types.len(), "{text}");
    for row in rows {
        let i: usize = row[idx_c].parse().unwrap();
        let t = &types[i - 1];
        assert_eq!(row[name_c], t.name);
        assert_eq!(
            row[allocs_c],
            t.allocs.map_or("?".to_string(), |v| v.to_string()),
            "{text}"
        );
    }
}

#[test]
fn serves_over_tcp_agentx_too() {
    let types = sample_types();
    let (_dir, snmpd, _daemon) = start_with_fixture(Transport::Tcp, types.clone(), &[]);
    assert!(snmpd.agentx.starts_with("tcp:"));
    assert_eq!(
        as_map(&bulkwalk(snmpd.port, TYPE_ENTRY, &[])),
        expected_table(&types)
    );
}

/// Rows whose every figure encodes the generation of the fixture they came from.
fn generation_types(gen: u64, rows: usize) -> Vec<MemoryType> {
    (0..rows)
        .map(|r| {
            let v = gen * 1_000_000 + r as u64;
            let mut t = MemoryType::new(Allocator::Uma, format!("zone{r}"));
            t.size = Some(v);
            t.in_use_count = Some(v);
            t.in_use_bytes = Some(v);
            t.free_count = Some(v);
            t.allocs = Some(v);
            t.frees = Some(v);
            t.failures = Some(v);
            t.per_cpu = vec![PerCpu {
                cpu: 0,
                allocs: Some(v),
                frees: Some(v),
                cache_free: Some(v),
                ..PerCpu::default()
            }];
            t
        })
        .collect()
}

fn generations(lines: &[Line]) -> std::collections::BTreeSet<u64> {
    lines
        .iter()
        .filter(|l| l.ty == "Counter64")
        .map(|l| l.value.trim().parse::<u64>().unwrap() / 1_000_000)
        .collect()
}

#[test]
fn every_walk_is_served_from_one_snapshot() {
    let rows = 100;
    let (dir, snmpd, _daemon) = start_with_fixture(
        Transport::Unix,
        generation_types(1, rows),
        &["--max-age", "0.01", "--walk-window", "30"],
    );
    let fix = dir.path().join("fixture.json");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        let fix = fix.clone();
        std::thread::spawn(move || {
            let mut gen = 2;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                write_fixture(&fix, generation_types(gen, rows));
                gen += 1;
                std::thread::sleep(Duration::from_millis(5));
            }
            gen
        })
    };
    // One walker alone, slow enough (-Cr1: one row per request) to outlive max-age (10 ms)
    // at least five times over.
    let t0 = Instant::now();
    let walk = bulkwalk(snmpd.port, &format!("{ROOT}.1.2"), &["-Cr1"]);
    let took = t0.elapsed();
    assert!(
        took > Duration::from_millis(50),
        "walk too short to test anything: {took:?}"
    );
    assert_eq!(walk.len(), rows * 11, "every cell of every row");
    let g = generations(&walk);
    assert_eq!(g.len(), 1, "one walk saw generations {g:?}");

    // Two interleaved walkers, each consistent. The second one starts later and is slower,
    // so it never overtakes the first: two walkers that stop at the very same OID at the
    // same moment cannot be told apart (ARCHITECTURE.md), and the test avoids that case.
    // B starts once A has printed its first line (stdbuf: a line at a time into the pipe),
    // so B is behind A, and A is seen still walking when B starts.
    let port = snmpd.port;
    let mut a = std::process::Command::new("stdbuf")
        .args([
            "-oL",
            "snmpbulkwalk",
            "-v2c",
            "-c",
            "public",
            "-On",
            "-Oe",
            "-m",
            "",
        ])
        .args(["-t", "3", "-r", "1", "-Cr3"])
        .arg(format!("127.0.0.1:{port}"))
        .arg(format!("{ROOT}.1.2"))
        .env("MIBS", "")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("stdbuf snmpbulkwalk");
    let mut a_out = std::io::BufReader::new(a.stdout.take().unwrap());
    let mut a_text = String::new();
    std::io::BufRead::read_line(&mut a_out, &mut a_text).unwrap();
    assert!(a_text.contains(" = "), "walker A's first line: {a_text:?}");
    let b = std::thread::spawn(move || bulkwalk(port, &format!("{ROOT}.1.2"), &["-Cr1"]));
    assert!(
        a.try_wait().unwrap().is_none(),
        "walker A ended before B started: the walks did not interleave"
    );
    std::io::Read::read_to_string(&mut a_out, &mut a_text).unwrap();
    assert!(a.wait().unwrap().success(), "walker A failed");
    let (wa, wb) = (parse_lines(&a_text), b.join().unwrap());
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let last_gen = writer.join().unwrap();
    let (ga, gb) = (generations(&wa), generations(&wb));
    assert_eq!(ga.len(), 1, "walker A saw {ga:?}");
    assert_eq!(gb.len(), 1, "walker B saw {gb:?}");
    assert_eq!(wa.len(), rows * 11);
    assert_eq!(wb.len(), rows * 11);
    // The data really changed under the walks: the fixture went through many generations.
    assert!(
        last_gen > g.iter().next().unwrap() + 5,
        "fixture only reached {last_gen}"
    );
}

#[test]
fn snmpset_is_refused_with_not_writable_and_the_session_stays() {
    let (_dir, snmpd, daemon) = start_with_fixture(Transport::Unix, sample_types(), &[]);
    let out = snmp_cmd(
        "snmpset",
        snmpd.port,
        &["-t", "3", "-r", "0"],
        &[&format!("{TYPE_ENTRY}.2.1"), "s", "renamed"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("notWritable"), "snmpset said: {err}");
    // Still connected on the same session: a Get works and there was no reconnect.
    let l = get(snmpd.port, &[&format!("{TYPE_ENTRY}.2.1")]);
    assert_eq!(l[0].value, "temp");
    assert_eq!(
        daemon
            .log_text()
            .matches("connected to the AgentX master")
            .count(),
        1,
        "{}",
        daemon.log_text()
    );
}

/// (name#ordinal) → memTypeIndex, from a walk of the name and ordinal columns.
fn name_indexes(port: u16) -> BTreeMap<String, String> {
    let index_of = |l: &Line| l.oid.rsplit('.').next().unwrap().to_string();
    let ordinals: BTreeMap<String, String> = bulkwalk(port, &format!("{TYPE_ENTRY}.4"), &[])
        .iter()
        .map(|l| (index_of(l), l.value.trim().to_string()))
        .collect();
    bulkwalk(port, &format!("{TYPE_ENTRY}.2"), &[])
        .iter()
        .map(|l| {
            (
                format!("{}#{}", l.value, ordinals[&index_of(l)]),
                index_of(l),
            )
        })
        .collect()
}

#[test]
#[ignore = "deadline: scripts/test runs it alone, after the others"]
fn deadline_survives_master_restart_and_keeps_indexes_across_daemon_restart() {
    let (dir, mut snmpd, mut daemon) = start_with_fixture(Transport::Unix, sample_types(), &[]);
    let before = name_indexes(snmpd.port);
    assert_eq!(before.len(), 5, "{before:?}");
    assert!(before.contains_key("mbuf#1"), "{before:?}");

    // Master restart: walks work again within 3 s of the master being back. The daemon is
    // seen to notice the loss and fail to reconnect; the master then stays away 1.5 s in
    // all (the fault, not a wait for the daemon), long enough for the backoff to grow.
    snmpd.stop();
    let down = Instant::now();
    daemon.wait_log("lost the AgentX master", 1);
    daemon.wait_log("cannot reach the AgentX master", 1);
    std::thread::sleep(Duration::from_millis(1500).saturating_sub(down.elapsed()));
    snmpd.restart();
    wait_until_served(snmpd.port, Duration::from_secs(3), &daemon);
    assert!(daemon.is_running());
    assert_eq!(name_indexes(snmpd.port), before);

    // Daemon restart with the kernel order shuffled and a new type: old keys keep their
    // index, the new one gets a fresh index.
    let mut types = sample_types();
    types.reverse();
    types.push(full_type(Allocator::Uma, "newzone", 5));
    write_fixture(&dir.path().join("fixture.json"), types);
    daemon.restart(snmpd.port);
    let after = name_indexes(snmpd.port);
    for (name, idx) in &before {
        assert_eq!(after.get(name), Some(idx), "{name} moved: {after:?}");
    }
    assert_eq!(after.get("newzone#0").map(String::as_str), Some("6"));
}

#[test]
#[ignore = "needs root: reads /proc/slabinfo (scripts/test runs it as root)"]
fn needs_root_live_linux_source_keeps_indexes_across_restart() {
    assert!(
        std::path::Path::new("/proc/slabinfo").exists(),
        "no /proc/slabinfo on this host"
    );
    let dir = tempfile::tempdir().unwrap();
    let snmpd = Snmpd::start(dir.path(), Transport::Unix);
    let state = dir.path().join("state").display().to_string();
    let mut daemon = Daemon::start(&snmpd, &["--source", "linux", "--state-dir", &state]);
    let before = name_indexes(snmpd.port);
    let caches = std::fs::read_to_string("/proc/slabinfo")
        .unwrap()
        .lines()
        .count()
        - 2;
    assert!(
        before.len() + 5 >= caches && before.len() <= caches + 5,
        "{} rows for {caches} caches",
        before.len()
    );
    daemon.restart(snmpd.port);
    let after = name_indexes(snmpd.port);
    let same = before
        .iter()
        .filter(|(n, i)| after.get(*n) == Some(i))
        .count();
    assert_eq!(
        same,
        before.len().min(after.len()),
        "indexes moved across a restart"
    );
}

/// The failures to reach the master are logged once per 10 s at most: the second line, the
/// first let through after the first, counts those left out (`N similar failures not
/// logged`), which shows that the daemon went on retrying, and no line came between.
#[test]
#[ignore = "deadline: scripts/test runs it alone, after the others"]
fn deadline_a_master_absent_at_start_up_is_waited_for() {
    let dir = tempfile::tempdir().unwrap();
    let fix = dir.path().join("fixture.json");
    write_fixture(&fix, sample_types());
    let mut snmpd = Snmpd::start(dir.path(), Transport::Unix);
    snmpd.stop();
    let src = format!("fixture:{}", fix.display());
    let state = dir.path().join("state").display().to_string();
    let mut daemon = Daemon::spawn(&snmpd, &["--source", &src, "--state-dir", &state]);
    daemon.wait_log("similar failures not logged", 1);
    assert!(daemon.is_running(), "{}", daemon.log_text());
    let log = daemon.log_text();
    let complaints: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("cannot reach the AgentX master"))
        .collect();
    assert_eq!(complaints.len(), 2, "{log}");
    assert!(!complaints[0].contains("not logged"), "{log}");
    let left_out: u64 = complaints[1]
        .rsplit_once(" (")
        .and_then(|(_, r)| r.split_once(' '))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {:?}", complaints[1]));
    assert!(left_out >= 2, "{log}");
    snmpd.restart();
    wait_until_served(snmpd.port, Duration::from_secs(3), &daemon);
}

#[test]
fn reading_the_scalars_never_refreshes_and_nothing_refreshes_while_idle() {
    let (_dir, snmpd, _daemon) =
        start_with_fixture(Transport::Unix, sample_types(), &["--max-age", "0.01"]);
    let refreshes = || {
        get(snmpd.port, &[&format!("{ROOT}.1.1.5.0")])[0]
            .value
            .parse::<u64>()
            .unwrap()
    };
    let start = refreshes();
    // Wait until the snapshot is older than max-age (memSnapshotAge, in milliseconds, is
    // read without a refresh), so that anything that refreshes would.
    wait_until(
        "a snapshot older than max-age",
        || {
            get(snmpd.port, &[&format!("{ROOT}.1.1.3.0")])[0]
                .value
                .parse::<u64>()
                .unwrap()
                > 10
        },
        String::new,
    );
    // Gets and GetNexts of the scalars, each long after max-age: no refresh. (A walk's last
    // step past the scalars reads the table, which does refresh.)
    let scalars: Vec<String> = (1..=9).map(|i| format!("{ROOT}.1.1.{i}.0")).collect();
    let refs: Vec<&str> = scalars.iter().map(String::as_str).collect();
    for _ in 0..5 {
        assert_eq!(refreshes(), start);
        assert_eq!(get(snmpd.port, &refs).len(), 9);
        let out = snmp_cmd("snmpgetnext", snmpd.port, &["-t", "3"], &refs[..8]);
        let next = parse_lines(&String::from_utf8_lossy(&out.stdout));
        assert_eq!(
            next.iter().map(|l| l.oid.as_str()).collect::<Vec<_>>(),
            refs[1..]
        );
    }
    assert_eq!(refreshes(), start, "idle and scalar reads cost no refresh");
    // A table read does refresh.
    get(snmpd.port, &[&format!("{TYPE_ENTRY}.2.1")]);
    assert_eq!(refreshes(), start + 1);
}
