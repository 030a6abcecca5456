//! `memstat-agentx dump`: the live Linux source, JSON round trips, and error messages.

use std::collections::BTreeMap;
use std::process::{Command, Output};

fn dump(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_memstat-agentx"))
        .arg("dump")
        .args(args)
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    assert!(
        o.status.success(),
        "dump failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

/// name → (active_objs, num_objs, objsize), read straight from slabinfo text.
fn slabinfo_caches(text: &str) -> BTreeMap<String, (u64, u64, u64)> {
    text.lines()
        .skip(2)
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            Some((
                w.first()?.to_string(),
                (w[1].parse().ok()?, w[2].parse().ok()?, w[3].parse().ok()?),
            ))
        })
        .collect()
}

#[test]
#[ignore = "needs root: reads /proc/slabinfo (scripts/test runs it as root)"]
fn needs_root_json_dump_lists_every_live_slab_cache() {
    let before = std::fs::read_to_string("/proc/slabinfo").expect("/proc/slabinfo readable");
    let json: serde_json::Value =
        serde_json::from_str(&stdout(&dump(&["--source", "linux", "--format", "json"]))).unwrap();
    let after = std::fs::read_to_string("/proc/slabinfo").unwrap();
    let (b, a) = (slabinfo_caches(&before), slabinfo_caches(&after));
    let types = json["types"].as_array().unwrap();
    let dumped: BTreeMap<String, &serde_json::Value> = types
        .iter()
        .map(|t| (t["name"].as_str().unwrap().to_string(), t))
        .collect();
    // Every cache present in both reads of the file is in the dump, with the same object
    // size, and counts within the range the two reads bracket (caches change meanwhile).
    let mut checked = 0;
    for (name, &(act_b, num_b, size)) in &b {
        let Some(&(act_a, num_a, _)) = a.get(name) else {
            continue;
        };
        let t = dumped
            .get(name)
            .unwrap_or_else(|| panic!("{name} missing from the dump"));
        assert_eq!(t["allocator"], "slab");
        assert_eq!(t["size"].as_u64(), Some(size), "{name}");
        let within = |v: u64, x: u64, y: u64| {
            let (lo, hi) = (x.min(y), x.max(y));
            // Allow a little slack for changes between the three reads.
            v + hi / 10 + 64 >= lo && v <= hi + hi / 10 + 64
        };
        let active = t["in_use_count"].as_u64().unwrap();
        let total = t["total_count"].as_u64().unwrap();
        assert!(
            within(active, act_b, act_a),
            "{name}: active {active} vs {act_b}..{act_a}"
        );
        assert!(
            within(total, num_b, num_a),
            "{name}: objects {total} vs {num_b}..{num_a}"
        );
        assert_eq!(t["free_count"].as_u64(), Some(total - active));
        assert_eq!(t["in_use_bytes"].as_u64(), Some(active * size));
        checked += 1;
    }
    assert!(checked > 10, "only {checked} caches compared");
}

const SAMPLE: &str = "slabinfo - version: 2.1
# name            <active_objs> <num_objs> <objsize> <objperslab> <pagesperslab> : tunables <limit> <batchcount> <sharedfactor> : slabdata <active_slabs> <num_slabs> <sharedavail>
kmalloc-64          3000   3200     64   64    1 : tunables    0    0    0 : slabdata     50     50      0
task_struct          410    435   6336    5    8 : tunables    0    0    0 : slabdata     87     87      0
kmalloc-64             1     64     64   64    1 : tunables    0    0    0 : slabdata      1      1      0
";

#[test]
fn a_json_dump_replayed_as_a_fixture_reproduces_the_same_table() {
    let dir = tempfile::tempdir().unwrap();
    let slab = dir.path().join("slabinfo");
    std::fs::write(&slab, SAMPLE).unwrap();
    let src = format!("linux:{}", slab.display());
    let table = stdout(&dump(&["--source", &src]));
    assert!(
        table.contains("kmalloc-64#1"),
        "duplicate names carry their ordinal:\n{table}"
    );
    let json = stdout(&dump(&["--source", &src, "--format", "json"]));
    let fix = dir.path().join("dump.json");
    std::fs::write(&fix, &json).unwrap();
    let replay = format!("fixture:{}", fix.display());
    assert_eq!(stdout(&dump(&["--source", &replay])), table);
    // And the JSON itself round-trips, apart from the source name.
    let again: serde_json::Value =
        serde_json::from_str(&stdout(&dump(&["--source", &replay, "--format", "json"]))).unwrap();
    let first: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(again["types"], first["types"]);
}

fn fails_with(args: &[&str], needles: &[&str]) {
    let o = dump(args);
    assert!(!o.status.success(), "{args:?} succeeded");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    for n in needles {
        assert!(err.contains(n), "{args:?}: {err:?} lacks {n:?}");
    }
}

#[test]
fn errors_exit_non_zero_with_one_line_that_says_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    fails_with(&["--source", "bogus"], &["bogus", "fixture:PATH"]);
    fails_with(
        &["--source", "fixture:/nonexistent/x.json"],
        &["/nonexistent/x.json"],
    );
    let bad = dir.path().join("slabinfo");
    std::fs::write(&bad, "slabinfo - version: 1.1\n").unwrap();
    let src = format!("linux:{}", bad.display());
    fails_with(
        &["--source", &src],
        &["unsupported version", "1.1", "slabinfo"],
    );
    std::fs::write(&bad, SAMPLE.replace("  3200 ", " 32x0 ")).unwrap();
    fails_with(&["--source", &src], &["line 3", "num_objs"]);
    let garbage = dir.path().join("g.json");
    std::fs::write(&garbage, "{\"types\": [\n  {\"allocator\": 7}\n]}").unwrap();
    fails_with(
        &["--source", &format!("fixture:{}", garbage.display())],
        &["g.json", "line 2"],
    );
    if cfg!(target_os = "linux") {
        fails_with(&["--source", "freebsd"], &["FreeBSD"]);
    }
}

/// An arcstats file of OpenZFS 2.2 (its statistics' names and order, `pd` and `pm` rather
/// than `p`, in kstat text), with made-up values that add up as OpenZFS counts them: size is
/// data + metadata + hdr + l2_hdr + dbuf + dnode + bonus + abd_chunk_waste
/// (module/zfs/arc.c, `arc_space_consume`), and anon + mru + mfu is data + metadata.
const ARCSTATS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/arcstats-openzfs-2.2"
);

/// The statistics of the file, by name.
fn arcstats() -> BTreeMap<String, u64> {
    std::fs::read_to_string(ARCSTATS)
        .unwrap()
        .lines()
        .skip(2)
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w[0].to_string(), w[2].parse().unwrap())
        })
        .collect()
}

#[test]
fn the_table_shows_the_arc_against_its_target_and_limits_with_its_parts() {
    use memstat_agentx::memstat::source::{Role, SOURCES};
    let stats = arcstats();
    let src = format!("arcstats:{ARCSTATS}");
    let table = stdout(&dump(&["--source", &src]));
    let lines: Vec<&str> = table.lines().collect();
    // The overview first (the ARC's size is its zfsArc row), then the ARC.
    assert!(lines[0].starts_with("KERNEL MEMORY"), "{table}");
    assert!(lines.iter().any(|l| l.starts_with("ZFS ARC ")), "{table}");
    // Every object of the group has its row: the statistic's name, the object, its value
    // (a dash for `p`, which OpenZFS 2.2 no longer has), and for bytes the share of size.
    let objects: Vec<_> = SOURCES
        .iter()
        .flat_map(|d| d.groups.iter())
        .flat_map(|g| g.objects.iter())
        .filter(|o| o.role != Role::Count)
        .collect();
    assert!(objects.len() > 25);
    let size = stats["size"] as f64;
    for o in &objects {
        let row: Vec<&str> = lines
            .iter()
            .find(|l| l.split_whitespace().nth(1) == Some(o.name))
            .unwrap_or_else(|| panic!("no row of {}:\n{table}", o.name))
            .split_whitespace()
            .collect();
        let stat = o.figure.split_once('.').unwrap().1;
        let want = match stat {
            "shrinkable" => Some(stats["size"] - stats["c_min"]),
            s => stats.get(s).copied(),
        };
        assert_eq!(row[0], stat, "{row:?}");
        assert_eq!(
            row[2],
            want.map_or("-".into(), |v| v.to_string()),
            "{row:?}"
        );
        if matches!(o.role, Role::Total | Role::Limit | Role::Part) {
            let share = format!("{:.1}%", want.unwrap() as f64 * 100.0 / size);
            assert_eq!(row[3], share, "{row:?}");
        }
    }
    // The parts add up to size but for the ABD chunk waste, which is not served.
    let sum_line = lines
        .iter()
        .find(|l| l.contains("(sum of the parts)"))
        .unwrap();
    let sum = stats["size"] - stats["abd_chunk_waste_size"];
    assert!(sum_line.contains(&format!(" {sum} ")), "{sum_line}");
    let hits = stats["hits"] as f64;
    let ratio = format!("{:.2}%", hits * 100.0 / (hits + stats["misses"] as f64));
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("hit ratio") && l.ends_with(&ratio)),
        "{ratio}\n{table}"
    );

    // JSON carries every statistic read, and a replay of it prints the same table.
    let dir = tempfile::tempdir().unwrap();
    let json = stdout(&dump(&["--source", &src, "--format", "json"]));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    for (name, value) in &stats {
        assert_eq!(
            v["figures"][format!("arcstats.{name}")].as_u64(),
            Some(*value),
            "{name}"
        );
    }
    assert_eq!(
        v["figures"]["arcstats.statistics"].as_u64(),
        Some(stats.len() as u64)
    );
    let fix = dir.path().join("dump.json");
    std::fs::write(&fix, &json).unwrap();
    let replay = format!("fixture:{}", fix.display());
    assert_eq!(stdout(&dump(&["--source", &replay])), table);

    // Without ZFS (no arcstats file), no ARC section at all.
    let none = format!("arcstats:{}", dir.path().join("absent").display());
    let table = stdout(&dump(&["--source", &none]));
    assert!(!table.contains("ARC"), "{table}");
    assert!(!table.contains("memArc"), "{table}");
}

/// A fixture of slab caches with known sizes: (name, active objects, object size).
fn slab_fixture(dir: &std::path::Path) -> String {
    let text = "slabinfo - version: 2.1\n\
        # name            <active_objs> <num_objs> <objsize> <objperslab> <pagesperslab> : tunables <limit> <batchcount> <sharedfactor> : slabdata <active_slabs> <num_slabs> <sharedavail>\n\
        kmalloc-64          3000   3200     64   64    1 : tunables    0    0    0 : slabdata     50     50      0\n\
        dentry            400000 400000    192   21    1 : tunables    0    0    0 : slabdata  19048  19048      0\n\
        kmalloc-1k           100    128   1024   16    4 : tunables    0    0    0 : slabdata      8      8      0\n\
        task_struct          410    435   6336    5    8 : tunables    0    0    0 : slabdata     87     87      0\n";
    let path = dir.join("slabinfo");
    std::fs::write(&path, text).unwrap();
    format!("linux:{}", path.display())
}

/// The caches of a table's slab section, in its order, and its totals line.
fn slab_rows(table: &str) -> (Vec<String>, String) {
    let rows = table
        .lines()
        .skip_while(|l| !l.starts_with("NAME "))
        .skip(1)
        .take_while(|l| !l.starts_with("total: "))
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect();
    let total = table
        .lines()
        .find(|l| l.starts_with("total: "))
        .unwrap_or_else(|| panic!("no totals line:\n{table}"))
        .to_string();
    (rows, total)
}

#[test]
fn the_table_sorts_picks_filters_and_adds_up_each_allocator() {
    let dir = tempfile::tempdir().unwrap();
    let src = slab_fixture(dir.path());
    // Kernel order by default, every type, and the totals: bytes are active objects times
    // their size (3000*64 + 400000*192 + 100*1024 + 410*6336).
    let (rows, total) = slab_rows(&stdout(&dump(&["--source", &src])));
    assert_eq!(rows, ["kmalloc-64", "dentry", "kmalloc-1k", "task_struct"]);
    let bytes = 3000 * 64 + 400_000 * 192 + 100 * 1024 + 410 * 6336;
    let items = 3000 + 400_000 + 100 + 410;
    assert_eq!(
        total,
        format!("total: 4 slab types, {bytes} bytes in use, {items} items")
    );
    // --top: the biggest by bytes in use; the totals stay those of every type.
    let (rows, total) = slab_rows(&stdout(&dump(&["--source", &src, "--top", "2"])));
    assert_eq!(rows, ["dentry", "task_struct"]);
    assert!(
        total.starts_with("total: 4 slab types (2 shown), "),
        "{total}"
    );
    // --sort: by items, or by name.
    let (rows, _) = slab_rows(&stdout(&dump(&["--source", &src, "--sort", "items"])));
    assert_eq!(rows, ["dentry", "kmalloc-64", "task_struct", "kmalloc-1k"]);
    let (rows, _) = slab_rows(&stdout(&dump(&["--source", &src, "--sort", "name"])));
    assert_eq!(rows, ["dentry", "kmalloc-1k", "kmalloc-64", "task_struct"]);
    // --name: a part of the name; the totals are those of the types shown.
    let (rows, total) = slab_rows(&stdout(&dump(&["--source", &src, "--name", "kmalloc"])));
    assert_eq!(rows, ["kmalloc-64", "kmalloc-1k"]);
    let b = 3000 * 64 + 100 * 1024;
    assert_eq!(
        total,
        format!("total: 2 slab types, {b} bytes in use, 3100 items")
    );
    let out = stdout(&dump(&["--source", &src, "--name", "nothing-like-it"]));
    assert!(
        out.contains("(no memory type's name contains \"nothing-like-it\")"),
        "{out}"
    );
    // -h: sizes in powers of 1024; counts stay whole.
    let out = stdout(&dump(&["--source", &src, "-h", "--name", "dentry"]));
    let row = out.lines().find(|l| l.starts_with("dentry ")).unwrap();
    assert_eq!(row.split_whitespace().nth(4), Some("192"), "{row}");
    let (_, total) = slab_rows(&out);
    assert_eq!(total, "total: 1 slab types, 74M in use, 400000 items");
}

#[test]
fn the_table_options_are_refused_for_json_and_vmstat() {
    let dir = tempfile::tempdir().unwrap();
    let src = slab_fixture(dir.path());
    for format in ["json", "vmstat"] {
        for option in [&["--sort", "bytes"][..], &["--name", "x"], &["-h"]] {
            let mut args = vec!["--source", &src, "--format", format];
            args.extend_from_slice(option);
            let out = dump(&args);
            assert!(!out.status.success(), "{args:?}");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                err.contains("--sort, --name and -h choose what the table shows"),
                "{err}"
            );
        }
    }
    // --help still prints the help.
    let out = dump(&["--help"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("--sort <KEY>"));
}
