//! `memstat-agentx top -b`, run as a script would: frames of a fixture that changes between
//! them, in text and JSON, with the rates the change gives, `-` and null for what a slab cache
//! does not have, a fixture that did not change served as the same snapshot, and the errors of
//! bad options. The full-screen view is tested in tests/top_screen.rs, `--snmp` in
//! tests/top_snmp.rs.

#[path = "support/allocinfo_text.rs"]
mod allocinfo_text;
mod common;
#[path = "support/memory_types.rs"]
mod memory_types;

use allocinfo_text::{replace, two_sites};
use common::*;
use memory_types::*;
use memstat_agentx::memstat::{Allocator, MemoryType};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

/// Starts `top -b` on the fixture with `args`, reads its first line (the first frame),
/// changes the fixture with `change`, and returns every line it printed.
fn two_frames(fixture: &std::path::Path, args: &[&str], change: impl FnOnce()) -> Vec<String> {
    let src = format!("fixture:{}", fixture.display());
    let mut child = Command::new(bin())
        .args(["top", "-b", "-n", "2", "-d", "2", "--source", &src])
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut lines = Vec::new();
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    lines.push(first.trim_end().to_string());
    // The first frame is printed: the next read is two seconds away.
    change();
    for l in out.lines() {
        lines.push(l.unwrap());
    }
    assert!(child.wait().unwrap().success());
    lines
}

#[test]
fn json_frames_give_the_rates_of_the_change_and_null_for_what_a_slab_cache_lacks() {
    let dir = tempfile::tempdir().unwrap();
    let fix = dir.path().join("fixture.json");
    write_fixture(&fix, vec![uma("mbuf", 100, 1000), slab("dentry", 50)]);
    let lines = two_frames(&fix, &["--format", "json"], || {
        write_fixture(&fix, vec![uma("mbuf", 140, 1600), slab("dentry", 30)]);
    });
    assert_eq!(lines.len(), 2, "one JSON object per frame: {lines:?}");
    let frames: Vec<serde_json::Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(frames[0]["interval_seconds"], serde_json::Value::Null);
    assert_eq!(
        frames[0]["rows"][0]["allocs_per_sec"],
        serde_json::Value::Null
    );
    let secs = frames[1]["interval_seconds"].as_f64().unwrap();
    assert!(secs >= 2.0, "{secs}");
    let rows = frames[1]["rows"].as_array().unwrap();
    // Sorted by in-use bytes: mbuf (140 × 256) before dentry (30 × 64).
    assert_eq!(rows[0]["name"], "mbuf");
    assert_eq!(rows[0]["allocator"], "uma");
    let per = |row: &serde_json::Value, key: &str| row[key].as_f64().unwrap();
    let close = |rate: f64, delta: f64| (rate * secs - delta).abs() <= 0.06 * secs + 1e-9;
    assert!(close(per(&rows[0], "allocs_per_sec"), 600.0), "{rows:?}");
    assert!(close(per(&rows[0], "items_per_sec"), 40.0), "{rows:?}");
    assert!(
        close(per(&rows[0], "bytes_per_sec"), 40.0 * 256.0),
        "{rows:?}"
    );
    assert_eq!(rows[1]["name"], "dentry");
    for absent in [
        "allocs_per_sec",
        "frees_per_sec",
        "failures",
        "failures_per_sec",
    ] {
        assert_eq!(rows[1][absent], serde_json::Value::Null, "{absent}");
    }
    assert!(close(per(&rows[1], "items_per_sec"), -20.0), "{rows:?}");
    assert_eq!(rows[1]["in_use_items"], 30);
}

#[test]
fn text_frames_are_plain_with_dashes_for_absent_figures_sorted_and_limited() {
    let dir = tempfile::tempdir().unwrap();
    let fix = dir.path().join("fixture.json");
    write_fixture(
        &fix,
        vec![
            uma("mbuf", 100, 1000),
            slab("dentry", 50),
            uma("zone", 1, 1),
        ],
    );
    let src = format!("fixture:{}", fix.display());
    let out = run_ok(Command::new(bin()).args([
        "top", "-b", "-n", "1", "--source", &src, "--sort", "name", "--top", "2",
    ]));
    assert!(
        !out.contains('\x1b'),
        "a pipe gets no escape codes: {out:?}"
    );
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with("memstat-agentx top: frame 1 of 1, source fixture:"),
        "{out}"
    );
    assert!(
        lines[0].ends_with("rates over - (the first frame)"),
        "{out}"
    );
    let header = lines
        .iter()
        .position(|l| l.starts_with("NAME"))
        .expect("the header");
    let words: Vec<&str> = lines[header].split_whitespace().collect();
    assert_eq!(
        words,
        [
            "NAME",
            "ALLOC",
            "SIZE",
            "INUSE-BYTES",
            "INUSE",
            "FREE",
            "ALLOC/s",
            "FREE/s",
            "BYTES/s",
            "INUSE/s",
            "FAIL",
            "FAIL/s"
        ]
    );
    let rows: Vec<Vec<&str>> = lines[header + 1..]
        .iter()
        .filter(|l| !l.is_empty())
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 2, "--top 2: {out}");
    assert_eq!(
        rows[0],
        ["dentry", "slab", "64", "3200", "50", "0", "-", "-", "-", "-", "-", "-"]
    );
    assert_eq!(
        rows[1],
        ["mbuf", "uma", "256", "25600", "100", "3", "-", "-", "-", "-", "0", "-"]
    );
}

#[test]
fn bad_options_and_sources_are_refused_with_their_messages() {
    let dir = tempfile::tempdir().unwrap();
    let fix = dir.path().join("fixture.json");
    write_fixture(&fix, vec![uma("mbuf", 1, 1)]);
    let src = format!("fixture:{}", fix.display());
    let cases: [(&[&str], i32, &str); 5] = [
        (
            &["-n", "1", "--sort", "nope"],
            2,
            "--sort \"nope\": no such column; the columns are name",
        ),
        (
            &["-n", "1", "-d", "0"],
            2,
            "must be a number of seconds from 0.1 to 86400",
        ),
        (&["-n", "0"], 2, "0 is not in 1.."),
        (&["-n", "1", "--format", "xml"], 2, "xml"),
        (
            &["-n", "1", "--source", "fixture:/nonexistent/x.json"],
            1,
            "/nonexistent/x.json",
        ),
    ];
    for (args, status, message) in cases {
        let mut cmd = Command::new(bin());
        cmd.args(["top", "-b"]);
        if !args.contains(&"--source") {
            cmd.args(["--source", &src]);
        }
        let out = cmd.args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(status), "{args:?}: {err}");
        assert!(err.contains(message), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}: nothing on stdout");
    }
}

#[test]
fn an_unchanged_fixture_is_the_same_snapshot_again_and_keeps_its_rates() {
    let dir = tempfile::tempdir().unwrap();
    let fix = dir.path().join("fixture.json");
    write_fixture(&fix, vec![uma("mbuf", 100, 1000), slab("dentry", 50)]);
    let src = format!("fixture:{}", fix.display());
    let mut child = Command::new(bin())
        .args([
            "top", "-b", "-n", "4", "-d", "2", "--format", "json", "--source", &src,
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut frame = || -> serde_json::Value {
        serde_json::from_str(&out.next().expect("a frame").unwrap()).unwrap()
    };
    let first = frame();
    // Nothing changed: the same snapshot, still without rates.
    let second = frame();
    assert_eq!(second["generation"], first["generation"], "{second}");
    assert_eq!(second["taken_at_ms"], first["taken_at_ms"], "{second}");
    assert_eq!(second["interval_seconds"], serde_json::Value::Null);
    // Printed; the next read is two seconds away.
    write_fixture(&fix, vec![uma("mbuf", 140, 1600), slab("dentry", 30)]);
    let third = frame();
    assert_ne!(third["generation"], first["generation"], "{third}");
    let secs = third["interval_seconds"].as_f64().expect("rates now");
    assert!(
        secs >= 4.0,
        "over both intervals since the first read: {secs}"
    );
    let allocs = third["rows"][0]["allocs_per_sec"].as_f64().unwrap();
    assert!((allocs * secs - 600.0).abs() <= 0.06 * secs, "{third}");
    // Unchanged again: the same snapshot, and its rates kept, not 0.
    let fourth = frame();
    assert_eq!(fourth["generation"], third["generation"]);
    assert_eq!(fourth["rows"], third["rows"], "the rates are kept");
    assert_eq!(fourth["interval_seconds"], third["interval_seconds"]);
    assert!(child.wait().unwrap().success());
}

#[test]
fn call_sites_are_rows_with_the_rates_of_their_bytes_and_calls() {
    let dir = tempfile::tempdir().unwrap();
    let fix = dir.path().join("fixture.json");
    write_fixture(&fix, vec![uma("mbuf", 100, 1000)]);
    let info = dir.path().join("allocinfo");
    let write_info = |slub: i64, calls: u64| replace(&info, &two_sites(slub, calls, false));
    write_info(1_000_000, 100);
    let src = format!("fixture:{},allocinfo:{}", fix.display(), info.display());
    let mut child = Command::new(bin())
        .args([
            "top", "-b", "-n", "2", "-d", "2", "--sites", "--format", "json",
        ])
        .args(["--source", &src])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut frame = || -> serde_json::Value {
        serde_json::from_str(&out.next().expect("a frame").unwrap()).unwrap()
    };
    let first = frame();
    assert_eq!(first["profiling"], "on", "{first}");
    assert_eq!(first["sites_read"], 2);
    let sites = first["sites"].as_array().unwrap();
    // By bytes, the most first.
    assert_eq!(sites[0]["site"], "mm/slub.c:2452");
    assert_eq!(sites[0]["function"], "alloc_slab_page");
    assert_eq!(sites[0]["module"], "");
    assert_eq!(sites[1]["module"], "ext4");
    assert_eq!(
        sites[0]["bytes_per_sec"],
        serde_json::Value::Null,
        "no rate at first"
    );
    // Printed; the next read is two seconds away.
    write_info(1_400_000, 140);
    let second = frame();
    let secs = second["interval_seconds"].as_f64().expect("rates now");
    let slub = &second["sites"][0];
    assert_eq!(slub["bytes"], 1_400_000);
    let bytes = slub["bytes_per_sec"].as_f64().unwrap();
    assert!(
        (bytes * secs - 400_000.0).abs() <= 0.06 * secs * 1000.0,
        "{second}"
    );
    let calls = slub["calls_per_sec"].as_f64().unwrap();
    assert!((calls * secs - 40.0).abs() <= 0.06 * secs + 0.1, "{second}");
    assert_eq!(second["sites"][1]["bytes_per_sec"], 0.0, "{second}");
    assert!(child.wait().unwrap().success());
    // Text, sorted by calls, and a column of the types refused by name.
    let text = run_ok(Command::new(bin()).args([
        "top", "-b", "-n", "1", "--sites", "--sort", "calls", "--source", &src,
    ]));
    let lines: Vec<&str> = text.lines().collect();
    let head = lines
        .iter()
        .position(|l| l.starts_with("SITE"))
        .expect(&text);
    assert!(lines[head + 1].starts_with("mm/slub.c:2452"), "{text}");
    assert!(
        text.contains("ALLOCATION CALL SITES: profiling on; 2 of 2 sites"),
        "{text}"
    );
    let out = Command::new(bin())
        .args([
            "top", "-b", "-n", "1", "--sites", "--sort", "size", "--source", &src,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no such column of the call sites"), "{err}");
}

#[test]
#[ignore = "needs root: runs top as nobody, for whom /proc/slabinfo is closed (scripts/test runs it as root)"]
fn needs_root_as_another_user_the_live_slab_caches_are_refused_with_what_to_do() {
    assert!(
        std::fs::read_to_string("/proc/slabinfo").is_ok(),
        "/proc/slabinfo is readable here"
    );
    need("setpriv", "util-linux");
    let out = Command::new("setpriv")
        .args([
            "--reuid",
            "nobody",
            "--regid",
            "nogroup",
            "--clear-groups",
            "--",
        ])
        .arg(bin())
        .args(["top", "-b", "-n", "1", "--source", "linux"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(out.stdout.is_empty(), "no frame");
    assert!(err.contains("/proc/slabinfo"), "{err}");
    assert!(
        err.contains("sudo") && err.contains("--snmp localhost"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}
