//! drop_privileges in a real, single-threaded process.
//!
//! The test harness runs each test on its own thread, and drop_privileges (rightly) refuses
//! to run in a multi-threaded process. So the test re-executes this binary with
//! `MEMSTAT_PRIVDROP_CHILD` set; in that child a constructor (`.init_array`, run by the
//! dynamic loader before `main`, while the process still has one thread) drops privileges to
//! `nobody`, prints its credentials from /proc/self/status and exits before the harness
//! starts. The parent checks what it printed. Needs root: `#[ignore]`d, and run by scripts/test
//! as root.
#![cfg(target_os = "linux")]

use std::io::{Read, Seek, SeekFrom};
use std::process::Command;

const CHILD_ENV: &str = "MEMSTAT_PRIVDROP_CHILD";

extern "C" fn child_hook() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    // Open the root-only file first, as the daemon does with /proc/slabinfo.
    let mut slab = std::fs::File::open("/proc/slabinfo").ok();
    match memstat_agentx::privdrop::lookup_user("nobody")
        .and_then(|a| memstat_agentx::privdrop::drop_privileges(&a))
    {
        Ok(()) => println!("RESULT=ok"),
        Err(e) => println!("RESULT=err {e}"),
    }
    if let Some(f) = slab.as_mut() {
        let mut text = String::new();
        let reread = f
            .seek(SeekFrom::Start(0))
            .and_then(|_| f.read_to_string(&mut text));
        println!(
            "SLAB_REREAD={}",
            match reread {
                Ok(_) if text.starts_with("slabinfo") => "ok".to_string(),
                Ok(_) => "empty".to_string(),
                Err(e) => e.to_string(),
            }
        );
        let reopen = std::fs::File::open("/proc/slabinfo");
        println!(
            "SLAB_REOPEN={}",
            if reopen.is_ok() { "allowed" } else { "denied" }
        );
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    for line in status.lines() {
        for key in [
            "Uid:",
            "Gid:",
            "Groups:",
            "CapInh:",
            "CapPrm:",
            "CapEff:",
            "CapAmb:",
            "NoNewPrivs:",
        ] {
            if line.starts_with(key) {
                println!("{line}");
            }
        }
    }
    let threads = std::fs::read_dir("/proc/self/task").map(|d| d.count());
    println!("Threads: {}", threads.unwrap_or(0));
    std::process::exit(0);
}

#[used]
#[link_section = ".init_array"]
static CHILD_HOOK: extern "C" fn() = child_hook;

fn id(args: &[&str]) -> String {
    let out = Command::new("id").args(args).output().expect("run id(1)");
    assert!(out.status.success(), "id {args:?} failed");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// The whitespace-separated fields after `key` in the child's output.
fn fields<'a>(out: &'a str, key: &str) -> Vec<&'a str> {
    out.lines()
        .find_map(|l| l.strip_prefix(key))
        .unwrap_or_else(|| panic!("no {key} in:\n{out}"))
        .split_whitespace()
        .collect()
}

#[test]
#[ignore = "needs root: drops privileges to nobody (scripts/test runs it as root)"]
fn needs_root_drops_to_nobody_and_clears_capabilities() {
    assert!(memstat_agentx::privdrop::is_root(), "needs root");
    assert!(
        Command::new("id")
            .arg("nobody")
            .output()
            .is_ok_and(|o| o.status.success()),
        "no user `nobody` here"
    );
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe).env(CHILD_ENV, "1").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "child failed: {text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{text}");
    assert!(text.contains("RESULT=ok\n"), "{text}");

    let uid = id(&["-u", "nobody"]);
    let gid = id(&["-g", "nobody"]);
    let mut groups: Vec<String> = id(&["-G", "nobody"])
        .split_whitespace()
        .map(str::to_string)
        .collect();
    groups.sort();
    assert_ne!(uid, "0");
    // Real, effective, saved and filesystem ids.
    assert_eq!(fields(&text, "Uid:"), vec![uid.as_str(); 4], "{text}");
    assert_eq!(fields(&text, "Gid:"), vec![gid.as_str(); 4], "{text}");
    let mut got: Vec<String> = fields(&text, "Groups:")
        .into_iter()
        .map(str::to_string)
        .collect();
    got.sort();
    assert_eq!(got, groups, "supplementary groups: {text}");
    assert!(!got.iter().any(|g| g == "0"), "still in group 0: {text}");
    for key in ["CapInh:", "CapPrm:", "CapEff:", "CapAmb:"] {
        let v = fields(&text, key);
        assert_eq!(v.len(), 1, "{text}");
        assert_eq!(u64::from_str_radix(v[0], 16).unwrap(), 0, "{key} {text}");
    }
    assert_eq!(fields(&text, "NoNewPrivs:"), vec!["1"], "{text}");
    assert_eq!(fields(&text, "Threads:"), vec!["1"], "{text}");
    if text.contains("SLAB_REREAD=") {
        // The descriptor opened as root still reads; a new open is refused.
        assert!(text.contains("SLAB_REREAD=ok\n"), "{text}");
        assert!(text.contains("SLAB_REOPEN=denied\n"), "{text}");
    }
}

#[test]
fn refuses_in_a_multithreaded_process() {
    // The harness already runs this on a second thread.
    let e = memstat_agentx::privdrop::lookup_user("nobody")
        .and_then(|a| memstat_agentx::privdrop::drop_privileges(&a))
        .unwrap_err();
    assert!(e.contains("threads"), "{e}");
}
