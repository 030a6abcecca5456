//! scripts/demo, as a user runs it with the bundled fixture: what it shows first is the
//! overview, memKernelTable as a tree (on Linux the live /proc/meminfo served beside the
//! fixture, each row checked against the file read before and after the demo), then the 10
//! memory types with the most bytes in use (checked against the fixture itself), then every
//! cell of the biggest one, then the allocator table and the sources, within 50 lines of 100
//! columns. And the demo fails loudly: it refuses what it cannot serve, takes a relative
//! fixture path from where it is run, and when the subagent does not register it prints the
//! subagent's log and exits 1.
mod common;

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output};

const DEMO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/demo");

/// The demo with `args`, run from `cwd`, with `bin` as the daemon.
fn demo(args: &[&str], cwd: &std::path::Path, bin: &str) -> Output {
    Command::new(DEMO)
        .args(args)
        .current_dir(cwd)
        .env("MEMSTAT_AGENTX_BIN", bin)
        .output()
        .unwrap()
}

#[test]
fn demo_refuses_what_it_cannot_serve_and_says_why() {
    let here = std::env::temp_dir();
    let out = demo(&["--help"], &here, common::bin());
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("usage: scripts/demo [SOURCE]"));
    for (args, why) in [
        (&["bogus"][..], "demo: unknown SOURCE \"bogus\""),
        (&["auto", "linux"][..], "demo: one SOURCE at most, got 2"),
        (
            &["fixture:no-such-dump.json"][..],
            "demo: fixture source: cannot read ",
        ),
    ] {
        let out = demo(args, &here, common::bin());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(why), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?} printed a table");
    }
    // The unreadable path is named as the demo resolved it: from where it was run.
    let out = demo(&["fixture:no-such-dump.json"], &here, common::bin());
    let expected = here.join("no-such-dump.json");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&expected.display().to_string()),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn demo_takes_a_relative_fixture_path_from_where_it_is_run() {
    common::require_tool("/usr/sbin/snmpd");
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(FIXTURE, dir.path().join("mydump.json")).unwrap();
    let out = demo(&["fixture:mydump.json"], dir.path(), common::bin());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (_, biggest) = &fixture_by_bytes()[0];
    assert!(
        text.contains(biggest.as_str()),
        "{biggest} not served:\n{text}"
    );
    assert!(
        text.contains("mydump.json"),
        "the source is not named:\n{text}"
    );
}

#[test]
fn demo_prints_the_subagents_log_and_fails_when_it_does_not_register() {
    common::require_tool("/usr/sbin/snmpd");
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken-agent");
    std::fs::write(
        &broken,
        "#!/bin/sh\necho 'memstat-agentx: cannot start: a reason of its own' >&2\nexit 3\n",
    )
    .unwrap();
    std::fs::set_permissions(&broken, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = demo(
        &[&format!("fixture:{FIXTURE}")],
        dir.path(),
        broken.to_str().unwrap(),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("memstat-agentx exited (status 3) before registering; its log:")
            && err.contains("a reason of its own"),
        "{err}"
    );
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/demo-fixture.json");

/// (in-use bytes, name) of the fixture's types, biggest first.
fn fixture_by_bytes() -> Vec<(u64, String)> {
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(FIXTURE).unwrap()).unwrap();
    let mut types: Vec<(u64, String)> = json["types"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| Some((t["in_use_bytes"].as_u64()?, t["name"].as_str()?.to_string())))
        .collect();
    types.sort_by_key(|t| std::cmp::Reverse(t.0));
    types
}

#[test]
fn demo_starts_with_the_ten_biggest_types_and_fits_fifty_lines() {
    common::require_tool("/usr/sbin/snmpd");
    #[cfg(target_os = "linux")]
    let sampler = MeminfoSampler::start();
    let out = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/demo"))
        .arg(format!("fixture:{FIXTURE}"))
        .env("MEMSTAT_AGENTX_BIN", common::bin())
        .output()
        .unwrap();
    #[cfg(target_os = "linux")]
    let seen = sampler.stop();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "scripts/demo failed: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() <= 50, "{} lines:\n{text}", lines.len());
    for l in &lines {
        assert!(l.chars().count() <= 100, "wider than 100 columns: {l:?}");
    }

    // First: the overview, a header and a row per kind "index kind [*] [+] bytes share".
    assert!(
        lines[0].starts_with("# Where the kernel's memory goes: memKernelTable"),
        "the overview is not first:\n{text}"
    );
    assert!(lines[1].trim_start().starts_with("index  kind"), "{text}");
    let overview_end = lines.iter().position(|l| l.is_empty()).unwrap();
    let overview = &lines[2..overview_end];
    #[cfg(target_os = "linux")]
    check_overview_against_meminfo(overview, &seen, &text);
    #[cfg(not(target_os = "linux"))]
    assert_eq!(
        overview,
        ["(no rows: the source gives no kernel-wide figures)"]
    );

    // Then a header, then 10 rows "index name allocator bytes items failures", biggest
    // first, exactly the fixture's 10 biggest.
    let types_at = lines
        .iter()
        .position(|l| l.starts_with("# The 10 memory types with the most bytes in use"))
        .expect("no type table");
    assert_eq!(types_at, overview_end + 1, "{text}");
    let header = lines
        .iter()
        .position(|l| l.trim_start().starts_with("index  name"))
        .expect("no table header");
    assert!(
        header <= types_at + 3,
        "the table is not after the overview:\n{text}"
    );
    let rows: Vec<Vec<&str>> = lines[header + 1..header + 11]
        .iter()
        .map(|l| l.split_whitespace().collect())
        .collect();
    let expected = fixture_by_bytes();
    for (row, (bytes, name)) in rows.iter().zip(&expected) {
        assert_eq!(row.len(), 6, "{row:?}");
        assert_eq!(row[1], name, "{text}");
        assert_eq!(row[2], "slab");
        assert_eq!(row[3], bytes.to_string(), "{text}");
        assert_eq!(row[5], "-", "slab caches have no failure count: {row:?}");
    }
    assert_eq!(
        lines[header + 11],
        "",
        "more than 10 rows in the table:\n{text}"
    );

    // Then every cell of the biggest type's row, from the walk.
    let top_index = rows[0][0];
    let name_cell = format!("memTypeName.{top_index} = STRING: {}", expected[0].1);
    let name_at = lines
        .iter()
        .position(|l| *l == name_cell)
        .unwrap_or_else(|| panic!("no {name_cell:?}:\n{text}"));
    assert!(name_at > header + 11);
    assert!(
        text.contains(&format!(
            "memTypeInUseBytes.{top_index} = Counter64: {} bytes",
            expected[0].0
        )),
        "{text}"
    );
    // Then the allocator table and the daemon scalars.
    let alloc_at = text
        .find("memAllocatorTypeCount")
        .expect("no allocator table");
    let daemon_at = text
        .find("memSourceStatus.0 = INTEGER: ok(1)")
        .expect("no daemon scalars");
    assert!(text.find(&name_cell).unwrap() < alloc_at && alloc_at < daemon_at);
    assert!(
        text.contains(&format!("memSrcName.1 = STRING: fixture:{FIXTURE}")),
        "{text}"
    );
    #[cfg(target_os = "linux")]
    assert!(
        text.contains("memSrcName.2 = STRING: meminfo:/proc/meminfo"),
        "{text}"
    );
}

/// /proc/meminfo read over and over while the demo runs: each field's lowest and highest
/// reading. The demo's own processes (snmpd, the daemon, the clients) move the kernel's
/// figures, kernel stacks and page tables first, so a reading before the demo and one after
/// it do not bracket what it served; readings during it nearly do.
#[cfg(target_os = "linux")]
struct MeminfoSampler {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<std::collections::BTreeMap<String, (u64, u64)>>,
}

#[cfg(target_os = "linux")]
impl MeminfoSampler {
    fn start() -> MeminfoSampler {
        use memstat_agentx::memstat::meminfo;
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut seen: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
            loop {
                let text = std::fs::read(meminfo::MEMINFO).expect("/proc/meminfo");
                let figures = meminfo::parse(&text, meminfo::MEMINFO).expect("it parses");
                for (k, v) in figures {
                    let e = seen.entry(k).or_insert((v, v));
                    *e = (e.0.min(v), e.1.max(v));
                }
                if flag.load(Ordering::Relaxed) {
                    return seen;
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        });
        MeminfoSampler { stop, thread }
    }

    fn stop(self) -> std::collections::BTreeMap<String, (u64, u64)> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

/// The overview's rows are this machine's /proc/meminfo: every kind whose field the file has,
/// in tree order (a child right after its parent or its siblings, indented one step more),
/// its bytes what the file read while the demo ran, marked `*` when it overlaps and `+` when
/// reclaimable, and its share of its parent; slab is its two parts exactly (the kernel
/// prints their sum, and one read of the file fills the three rows).
#[cfg(target_os = "linux")]
fn check_overview_against_meminfo(
    overview: &[&str],
    seen: &std::collections::BTreeMap<String, (u64, u64)>,
    text: &str,
) {
    use memstat_agentx::memstat::meminfo::KINDS;
    let want: Vec<u32> = KINDS
        .iter()
        .filter(|k| seen.contains_key(k.figure))
        .map(|k| k.index)
        .collect();
    let mut got = Vec::new();
    let mut bytes_of = std::collections::BTreeMap::new();
    for l in overview {
        let f: Vec<&str> = l.split_whitespace().collect();
        let index: u32 = f[0].parse().unwrap_or_else(|_| panic!("{l:?}\n{text}"));
        let k = KINDS
            .iter()
            .find(|k| k.index == index)
            .expect("a meminfo kind");
        // The kind's name, indented two columns per level (8 is where the column starts).
        let depth = if k.parent == 0 { 0 } else { 1 };
        assert_eq!(
            &l[8..8 + 2 * depth + k.name.len()],
            format!("{}{}", " ".repeat(2 * depth), k.name),
            "{l:?}"
        );
        assert_eq!(f.contains(&"*"), !k.stackable, "{l:?}");
        assert_eq!(f.contains(&"+"), k.reclaimable, "{l:?}");
        let bytes: u64 = f[f.len() - 2].parse().unwrap();
        assert_eq!(bytes % 1024, 0, "{}: the file's fields are in kB", k.name);
        // The readings every 2 ms miss what moves between two of them: a margin of 4 MiB and
        // 2 % for that. (tests/kernel_memory.rs holds each field to its row exactly.)
        let (lo, hi) = seen[k.figure];
        let margin = (4 << 20) + hi / 50;
        assert!(
            (lo.saturating_sub(margin)..=hi + margin).contains(&bytes),
            "{}: shown {bytes}, /proc/meminfo read {lo} to {hi} during the demo",
            k.name
        );
        if k.parent != 0 {
            let parent = bytes_of[&k.parent];
            let share = format!("{:.1}%", 100.0 * bytes as f64 / parent as f64);
            assert_eq!(f[f.len() - 1], share, "{l:?}");
        }
        bytes_of.insert(index, bytes);
        got.push(index);
    }
    if let (Some(slab), Some(r), Some(u)) = (bytes_of.get(&1), bytes_of.get(&2), bytes_of.get(&3)) {
        assert_eq!(*slab, r + u, "slab is SReclaimable + SUnreclaim:\n{text}");
    }
    let mut sorted = got.clone();
    sorted.sort();
    assert_eq!(
        sorted, want,
        "the kinds of this machine's /proc/meminfo:\n{text}"
    );
    // Tree order: a child comes after its parent, with only its siblings between.
    for (n, i) in got.iter().enumerate() {
        let k = KINDS.iter().find(|k| k.index == *i).unwrap();
        if k.parent != 0 {
            let p = got.iter().position(|x| *x == k.parent).unwrap();
            assert!(
                got[p + 1..n]
                    .iter()
                    .all(|s| KINDS.iter().any(|x| x.index == *s && x.parent == k.parent)),
                "{} is not under {}:\n{text}",
                k.name,
                k.parent
            );
        }
    }
}
