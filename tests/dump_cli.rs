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
