//! `memstat-agentx top`'s full-screen view, used as a person would: in a real terminal
//! (tmux, a private server per test), with keys sent by `send-keys`, the screen read with
//! `capture-pane`, and every byte the program wrote recorded with `pipe-pane`.
//!
//! The program starts only once the recording is attached (its shell waits for a line), so
//! the recording holds its first byte, and "no full clear after the first frame" is checked
//! on all of its output.

#[path = "support/allocinfo_text.rs"]
mod allocinfo_text;
mod common;
#[path = "support/memory_types.rs"]
mod memory_types;

use allocinfo_text::{header, row};
use common::*;
use memory_types::*;
use memstat_agentx::memstat::{Allocator, MemoryType};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The fixture the tests start from: three allocators, names that sort differently by each
/// column.
fn first_types() -> Vec<MemoryType> {
    vec![
        uma("mbuf", 1000, 5000),
        uma("zfs_znode", 10, 20),
        malloc("devbuf", 50, 4096),
        slab("dentry", 300),
    ]
}

/// A private tmux server running `top` on a fixture.
struct Top {
    dir: tempfile::TempDir,
    fixture: PathBuf,
    socket: PathBuf,
    raw: PathBuf,
}

impl Top {
    /// Starts `top ARGS` on a fixture of `types` in a `width` × `height` terminal, with its
    /// output recorded from the first byte.
    fn start(types: Vec<MemoryType>, args: &str, width: u16, height: u16) -> Top {
        let dir = tempfile::tempdir().unwrap();
        let fixture = dir.path().join("fixture.json");
        write_fixture(&fixture, types);
        let args = format!("--source fixture:{} {args}", fixture.display());
        Top::launch(dir, fixture, &args, width, height)
    }

    /// Starts `top ARGS` in `dir`; `fixture` is the file whose changes the test makes.
    fn launch(
        dir: tempfile::TempDir,
        fixture: PathBuf,
        args: &str,
        width: u16,
        height: u16,
    ) -> Top {
        let top = Top::launch_with(dir, fixture, "", args, width, height);
        // The status line is the frame's last line, written last.
        top.wait_screen("the first frame", |s| {
            s.contains("memstat-agentx top: snapshot") && s.contains("(h for help)")
        });
        top
    }

    /// Starts `ENV top ARGS` (ENV: `NAME=value` words for the shell), without waiting.
    fn launch_with(
        dir: tempfile::TempDir,
        fixture: PathBuf,
        env: &str,
        args: &str,
        width: u16,
        height: u16,
    ) -> Top {
        need("tmux", "tmux");
        let socket = dir.path().join("tmux.sock");
        let raw = dir.path().join("raw.out");
        let conf = dir.path().join("tmux.conf");
        // remain-on-exit keeps the pane, so that the screen the program left can be read
        // after it ends.
        std::fs::write(&conf, "set -g remain-on-exit on\nset -g status off\n").unwrap();
        let top = Top {
            fixture,
            socket,
            raw,
            dir,
        };
        let cmd = format!(
            "read go; {env} {} top {args}; echo $? > {}.tmp; mv {}.tmp {}",
            bin(),
            top.dir.path().join("status").display(),
            top.dir.path().join("status").display(),
            top.dir.path().join("status").display(),
        );
        top.tmux(&[
            "-f",
            conf.to_str().unwrap(),
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            &width.to_string(),
            "-y",
            &height.to_string(),
            &cmd,
        ]);
        top.tmux(&[
            "pipe-pane",
            "-O",
            "-t",
            "t",
            &format!("cat >> {}", top.raw.display()),
        ]);
        top.tmux(&["send-keys", "-t", "t", "Enter"]);
        top
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", "t"])
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "t"];
        args.extend_from_slice(keys);
        self.tmux(&args);
    }

    /// Types `text` literally.
    fn type_text(&self, text: &str) {
        self.tmux(&["send-keys", "-t", "t", "-l", text]);
    }

    fn wait_screen(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        let mut last = String::new();
        wait_until(
            what,
            || {
                last = self.screen();
                done(&last)
            },
            || self.screen(),
        );
        last
    }

    /// A tmux format's value for the pane (`#{pane_dead}` and the like).
    fn format(&self, f: &str) -> String {
        self.tmux(&["display-message", "-p", "-t", "t", f])
            .trim()
            .to_string()
    }

    /// The names of the table's rows, in the order shown.
    fn row_names(screen: &str) -> Vec<String> {
        let mut lines = screen.lines().skip_while(|l| !l.starts_with("NAME"));
        lines.next();
        lines
            .take_while(|l| !l.trim().is_empty() && !l.contains(" rows, sorted by "))
            .map(|l| l.split_whitespace().next().unwrap_or("").to_string())
            .collect()
    }

    fn raw_output(&self) -> Vec<u8> {
        std::fs::read(&self.raw).unwrap_or_default()
    }

    /// Waits for the program to end; its exit status, as its shell saw it (128 + the signal
    /// when a signal ended it). The shell writes it: tmux 3.3a sometimes marks a pane dead
    /// without ever giving its `pane_dead_status`.
    fn wait_exit(&self) -> i32 {
        let status = self.dir.path().join("status");
        wait_until("the program to end", || status.exists(), || self.screen());
        let text = std::fs::read_to_string(&status).unwrap();
        text.trim().parse().unwrap()
    }

    /// The program's process: the one child of the pane's shell.
    fn pid(&self) -> String {
        let shell = self.format("#{pane_pid}");
        let children = format!("/proc/{shell}/task/{shell}/children");
        let mut pid = String::new();
        wait_until(
            "the program's process",
            || {
                pid = std::fs::read_to_string(&children)
                    .unwrap_or_default()
                    .trim()
                    .to_string();
                !pid.is_empty()
            },
            || children.clone(),
        );
        pid
    }

    /// The program's last words to the terminal left the alternate screen and then showed
    /// the cursor. (tmux's own `cursor_flag` cannot tell: a pane left dead by remain-on-exit
    /// has its cursor hidden by tmux.)
    fn assert_cursor_shown(&self) {
        let raw = self.raw_output();
        let left = find_all(&raw, b"\x1b[?1049l");
        let shown = find_all(&raw, b"\x1b[?25h");
        let hidden = find_all(&raw, b"\x1b[?25l");
        let (Some(left), Some(shown)) = (left.last(), shown.last()) else {
            panic!(
                "no restore in the output: {:?}",
                String::from_utf8_lossy(&raw[raw.len().saturating_sub(200)..])
            );
        };
        assert!(
            shown > left,
            "the cursor is shown after leaving the alternate screen"
        );
        assert!(
            hidden.last().is_none_or(|h| h < shown),
            "nothing hides it again"
        );
    }

    fn fixture(&self) -> &Path {
        &self.fixture
    }
}

impl Drop for Top {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .output();
        let _ = &self.dir;
    }
}

/// Where `needle` occurs in `haystack`.
fn find_all(haystack: &[u8], needle: &[u8]) -> Vec<usize> {
    haystack
        .windows(needle.len())
        .enumerate()
        .filter(|(_, w)| *w == needle)
        .map(|(i, _)| i)
        .collect()
}

#[test]
fn the_header_shows_the_allocator_totals_and_q_restores_the_terminal() {
    let top = Top::start(first_types(), "-d 60", 140, 30);
    let screen = top.screen();
    // The allocators' totals: uma 1010 items × 256, malloc 50 × 4096, slab 300 × 64.
    let totals: Vec<&str> = screen
        .lines()
        .filter(|l| l.starts_with("uma ") || l.starts_with("malloc ") || l.starts_with("slab "))
        .collect();
    assert_eq!(totals.len(), 3, "{screen}");
    assert!(
        totals
            .iter()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()[..3] == ["uma", "2", "258560"]),
        "{screen}"
    );
    assert!(
        totals
            .iter()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()[..3] == ["malloc", "1", "204800"]),
        "{screen}"
    );
    assert!(screen.contains("ALLOCATOR"), "{screen}");
    assert!(screen.contains("INUSE-BYTES"), "{screen}");
    assert_eq!(
        top.format("#{alternate_on}"),
        "1",
        "the view is on the alternate screen"
    );
    top.keys(&["q"]);
    assert_eq!(top.wait_exit(), 0);
    assert_eq!(
        top.format("#{alternate_on}"),
        "0",
        "the alternate screen was left"
    );
    top.assert_cursor_shown();
    let after = top.screen();
    assert!(
        !after.contains("INUSE-BYTES"),
        "the table is gone with the alternate screen: {after}"
    );
    let raw = top.raw_output();
    assert!(
        !find_all(&raw, b"\x1b[?1049l").is_empty(),
        "left the alternate screen"
    );
}

#[test]
fn each_sort_key_orders_the_rows_and_r_reverses() {
    let top = Top::start(first_types(), "-d 60", 140, 30);
    // The default: in-use bytes, largest first. devbuf 204800, dentry 19200, mbuf 256000...
    let by_bytes = ["mbuf", "devbuf", "dentry", "zfs_znode"];
    let s = top.wait_screen("sorted by in-use bytes", |s| Top::row_names(s) == by_bytes);
    assert!(s.contains("sorted by in_use_bytes"), "{s}");
    let cases: &[(&str, &str, [&str; 4])] = &[
        ("n", "name", ["dentry", "devbuf", "mbuf", "zfs_znode"]),
        (
            "a",
            "in_use_items",
            ["mbuf", "dentry", "devbuf", "zfs_znode"],
        ),
        ("S", "size", ["devbuf", "mbuf", "zfs_znode", "dentry"]),
        ("c", "in_use_bytes", by_bytes),
    ];
    for (key, column, order) in cases {
        top.keys(&[key]);
        let s = top.wait_screen(&format!("sorted by {column}"), |s| {
            s.contains(&format!("sorted by {column}  "))
                || s.contains(&format!("sorted by {column},"))
        });
        assert_eq!(Top::row_names(&s), order, "key {key}: {s}");
    }
    top.keys(&["R"]);
    let s = top.wait_screen("reversed", |s| s.contains("reversed"));
    let mut reversed = by_bytes;
    reversed.reverse();
    assert_eq!(Top::row_names(&s), reversed, "{s}");
    // `<` from in-use bytes: size, sorted largest first (reversed is kept).
    top.keys(&["R", "<"]);
    let s = top.wait_screen("sorted by size", |s| s.contains("sorted by size  "));
    assert_eq!(
        Top::row_names(&s),
        ["devbuf", "mbuf", "zfs_znode", "dentry"],
        "{s}"
    );
    top.keys(&["q"]);
    assert_eq!(top.wait_exit(), 0);
}

#[test]
fn the_name_and_allocator_filters_keep_the_rows_they_name() {
    let top = Top::start(first_types(), "-d 60", 140, 30);
    top.keys(&["o"]);
    top.wait_screen("the filter prompt", |s| s.contains("filter by name"));
    top.type_text("ZN");
    top.keys(&["Enter"]);
    let s = top.wait_screen("the name filter", |s| s.contains("name contains \"zn\""));
    assert_eq!(Top::row_names(&s), ["zfs_znode"], "{s}");
    // `=` clears it; `A` steps through the allocators present.
    top.keys(&["=", "A"]);
    let s = top.wait_screen("the allocator filter", |s| s.contains("allocator malloc"));
    assert_eq!(Top::row_names(&s), ["devbuf"], "{s}");
    top.keys(&["A"]);
    let s = top.wait_screen("the next allocator", |s| s.contains("allocator uma"));
    assert_eq!(Top::row_names(&s), ["mbuf", "zfs_znode"], "{s}");
    top.keys(&["A"]);
    let s = top.wait_screen("the last allocator", |s| s.contains("allocator slab"));
    assert_eq!(Top::row_names(&s), ["dentry"], "{s}");
    top.keys(&["A"]);
    let s = top.wait_screen("every allocator again", |s| s.contains("4 of 4 rows"));
    assert_eq!(Top::row_names(&s).len(), 4, "{s}");
    top.keys(&["q"]);
    assert_eq!(top.wait_exit(), 0);
}

#[test]
fn rates_follow_the_fixture_and_absent_counters_show_as_a_dash() {
    let top = Top::start(first_types(), "-d 0.5", 140, 30);
    // The first snapshot has no rates.
    let s = top.screen();
    assert!(s.contains("rates over - (the first snapshot)"), "{s}");
    let mut next = first_types();
    next[0] = uma("mbuf", 1400, 9000);
    write_fixture(top.fixture(), next);
    let s = top.wait_screen("a rate of mbuf's allocations", |s| {
        s.lines()
            .any(|l| l.starts_with("mbuf ") && !l.contains(" - "))
    });
    let mbuf: Vec<&str> = s
        .lines()
        .find(|l| l.starts_with("mbuf "))
        .unwrap()
        .split_whitespace()
        .collect();
    // NAME ALLOC SIZE INUSE-BYTES INUSE FREE ALLOC/s FREE/s BYTES/s INUSE/s FAIL FAIL/s
    let secs: f64 = s
        .split("rates over ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|r| r.parse().ok())
        .unwrap();
    let allocs: f64 = mbuf[6].parse().unwrap();
    assert!(
        (allocs - 4000.0 / secs).abs() <= 4000.0 / secs * 0.06,
        "{allocs} over {secs} s: {s}"
    );
    let dentry: Vec<&str> = s
        .lines()
        .find(|l| l.starts_with("dentry "))
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(
        dentry[6], "-",
        "a slab cache has no allocation counter: {s}"
    );
    assert_eq!(dentry[7], "-", "{s}");
    assert_eq!(
        dentry[9], "0.0",
        "its in-use items have a rate of change: {s}"
    );
    top.keys(&["q"]);
    assert_eq!(top.wait_exit(), 0);
}

#[test]
fn a_resize_is_followed_and_no_refresh_clears_the_whole_screen() {
    let top = Top::start(first_types(), "-d 0.2", 140, 30);
    // Several refreshes, with a change that redraws rows.
    let mut next = first_types();
    next[0] = uma("mbuf", 1001, 5010);
    write_fixture(top.fixture(), next);
    top.wait_screen("a refresh with rates", |s| {
        s.lines()
            .any(|l| l.starts_with("mbuf ") && !l.contains(" - "))
    });
    let before_resize = top.raw_output().len();
    let clears = |raw: &[u8]| find_all(raw, b"\x1b[2J").len() + find_all(raw, b"\x1b[3J").len();
    let raw = top.raw_output();
    assert!(
        clears(&raw) <= 1,
        "at most the first frame clears: {} clears",
        clears(&raw)
    );
    // Later refreshes write only the cells that changed: far less than the screen holds.
    let on_screen: usize = top.screen().chars().filter(|c| !c.is_whitespace()).count();
    let shown = |n: u32| {
        let s = top.wait_screen(&format!("snapshot {n}"), |s| {
            s.split("snapshot ")
                .nth(1)
                .and_then(|r| r.split(',').next())
                .and_then(|g| g.parse::<u32>().ok())
                .is_some_and(|g| g >= n)
        });
        let g: u32 = s
            .split("snapshot ")
            .nth(1)
            .unwrap()
            .split(',')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        (g, top.raw_output().len())
    };
    // A snapshot comes when the fixture changes (an unchanged one is not read again): one
    // row's figures at a time.
    let (g0, len0) = shown(2);
    let mut g1 = g0;
    let mut len1 = len0;
    for i in 0..8 {
        let mut next = first_types();
        next[0] = uma("mbuf", 1002 + i, 5020 + 10 * i);
        write_fixture(top.fixture(), next);
        (g1, len1) = shown(g1 + 1);
    }
    let per_refresh = (len1 - len0) / (g1 - g0) as usize;
    // The first frame wrote every cell that is not blank: its bytes are those before its
    // status line's last word, written last.
    let raw = top.raw_output();
    let first_frame = find_all(&raw, b"help)")[0];
    assert!(
        per_refresh * 3 < first_frame,
        "{per_refresh} bytes per new snapshot, against {first_frame} for the first frame \
         ({on_screen} cells on the screen)"
    );
    top.tmux(&["resize-window", "-t", "t", "-x", "90", "-y", "12"]);
    let s = top.wait_screen("the smaller size", |s| {
        s.lines().all(|l| l.chars().count() <= 90)
            && s.lines().count() <= 12
            && s.contains("rows, sorted by")
    });
    // The status line says how many rows fit.
    assert!(s.contains(" of 4 rows"), "{s}");
    let raw = top.raw_output();
    assert!(raw.len() > before_resize, "the resize redrew the screen");
    top.keys(&["q"]);
    assert_eq!(top.wait_exit(), 0);
}

#[test]
fn sigterm_restores_the_terminal_and_exits_143() {
    let top = Top::start(first_types(), "-d 60", 140, 30);
    let pid = top.pid();
    let killed = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(killed.success());
    assert_eq!(top.wait_exit(), 143);
    assert_eq!(
        top.format("#{alternate_on}"),
        "0",
        "the alternate screen was left"
    );
    top.assert_cursor_shown();
}

#[test]
fn a_panic_restores_the_terminal_and_its_message_is_seen() {
    // The debug build panics after its first frame when asked to (src/top/mod.rs).
    let dir = tempfile::tempdir().unwrap();
    let fixture = dir.path().join("fixture.json");
    write_fixture(&fixture, first_types());
    let args = format!("--source fixture:{} -d 60", fixture.display());
    let top = Top::launch_with(dir, fixture, "MEMSTAT_TOP_TEST_PANIC=1", &args, 140, 30);
    // It panicked once the frame was drawn; the pane's shell writes the status.
    assert_eq!(top.wait_exit(), 101, "Rust's exit status for a panic");
    assert_eq!(
        top.format("#{alternate_on}"),
        "0",
        "the alternate screen was left"
    );
    top.assert_cursor_shown();
    let s = top.screen();
    assert!(
        s.contains("MEMSTAT_TOP_TEST_PANIC is set"),
        "the message, on the normal screen: {s}"
    );
}

#[test]
fn help_lists_every_key_and_a_bad_interval_is_refused_by_name() {
    let top = Top::start(first_types(), "-d 60", 140, 40);
    top.keys(&["h"]);
    // Its last line is written last: the whole screen is drawn once it shows.
    let s = top.wait_screen("the help screen", |s| {
        s.contains("Any key returns to the table.")
    });
    for (key, _) in memstat_agentx::top::KEYS {
        assert!(s.contains(key), "{key} is missing from the help: {s}");
    }
    assert!(s.contains("top and slabtop disagree on s"), "{s}");
    top.keys(&["x"]);
    top.wait_screen("the table again", |s| s.contains("INUSE-BYTES"));
    top.keys(&["d"]);
    top.wait_screen("the interval prompt", |s| s.contains("interval in seconds"));
    top.type_text("0.01");
    top.keys(&["Enter"]);
    top.wait_screen("the refusal", |s| {
        s.contains("\"0.01\": the interval must be")
    });
    top.keys(&["s"]);
    top.type_text("2.5");
    top.keys(&["Enter"]);
    top.wait_screen("the new interval", |s| s.contains("interval 2.5 s"));
    top.keys(&["p"]);
    top.wait_screen("paused", |s| s.contains("[paused]"));
    top.keys(&["C-c"]);
    assert_eq!(top.wait_exit(), 0);
}

#[test]
fn the_man_page_lists_every_key_the_help_screen_lists() {
    let man = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/man/memstat-top.1"))
        .unwrap()
        .replace("\\&", "");
    let section = man
        .split(".Sh KEYS")
        .nth(1)
        .and_then(|s| s.split("\n.Sh ").next())
        .expect("a KEYS section");
    let listed: Vec<&str> = section
        .lines()
        .filter_map(|l| l.strip_prefix(".It Li \""))
        .map(|l| l.trim_end_matches('"'))
        .collect();
    let keys: Vec<&str> = memstat_agentx::top::KEYS.iter().map(|(k, _)| *k).collect();
    assert_eq!(listed, keys, "KEYS in man/memstat-top.1 against top::KEYS");
}

#[test]
fn over_snmp_v2c_the_screen_shows_the_served_fixture_and_its_rates() {
    // The harness's snmpd, and the daemon serving the fixture with a short max-age.
    let (served, snmpd, _daemon) =
        start_with_fixture(Transport::Unix, first_types(), &["--max-age", "0.5"]);
    let fixture = served.path().join("fixture.json");
    let args = format!("--snmp 127.0.0.1:{} --community public -d 0.5", snmpd.port);
    let top = Top::launch(tempfile::tempdir().unwrap(), fixture, &args, 140, 30);
    let s = top.screen();
    assert!(
        s.contains(&format!("source snmp:127.0.0.1:{}", snmpd.port)),
        "{s}"
    );
    assert_eq!(
        Top::row_names(&s),
        ["mbuf", "devbuf", "dentry", "zfs_znode"],
        "the fixture's rows, by in-use bytes: {s}"
    );
    let mut next = first_types();
    next[0] = uma("mbuf", 1400, 9000);
    write_fixture(top.fixture(), next);
    let s = top.wait_screen("mbuf's rates over SNMP", |s| {
        s.lines()
            .any(|l| l.starts_with("mbuf ") && l.split_whitespace().nth(6) != Some("-"))
    });
    let mbuf: Vec<&str> = s
        .lines()
        .find(|l| l.starts_with("mbuf "))
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(mbuf[3], (1400 * 256).to_string(), "{s}");
    let allocs: f64 = mbuf[6].parse().unwrap();
    assert!(allocs > 0.0, "{s}");
    let dentry: Vec<&str> = s
        .lines()
        .find(|l| l.starts_with("dentry "))
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(
        dentry[6], "-",
        "a slab cache has no allocation counter, over SNMP too: {s}"
    );
    top.keys(&["q"]);
    assert_eq!(top.wait_exit(), 0);
}

#[test]
fn i_turns_the_table_to_the_call_sites_and_back() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = dir.path().join("fixture.json");
    write_fixture(&fixture, first_types());
    let info = dir.path().join("allocinfo");
    std::fs::write(
        &info,
        header("2.0")
            + &row(
                1_000_000,
                10,
                "mm/slub.c:2452",
                None,
                "alloc_slab_page",
                false,
            )
            + &row(
                4096,
                300,
                "fs/ext4/super.c:100",
                Some("ext4"),
                "ext4_fill_super",
                false,
            ),
    )
    .unwrap();
    let args = format!(
        "--source fixture:{},allocinfo:{} -d 60",
        fixture.display(),
        info.display()
    );
    let top = Top::launch(dir, fixture, &args, 140, 30);
    top.keys(&["i"]);
    let s = top.wait_screen("the call sites", |s| {
        s.contains("call sites, sorted by bytes")
    });
    assert!(
        s.contains("ALLOCATION CALL SITES: profiling on; 2 of 2 sites"),
        "{s}"
    );
    let rows: Vec<&str> = s
        .lines()
        .skip_while(|l| !l.starts_with("SITE"))
        .skip(1)
        .take(2)
        .collect();
    assert!(
        rows[0].starts_with("mm/slub.c:2452") && rows[0].contains("alloc_slab_page"),
        "{s}"
    );
    assert!(
        rows[1].starts_with("fs/ext4/super.c:100") && rows[1].contains("ext4"),
        "{s}"
    );
    // a sorts by calls here.
    top.keys(&["a"]);
    let s = top.wait_screen("sorted by calls", |s| s.contains("sorted by calls"));
    let first = s
        .lines()
        .skip_while(|l| !l.starts_with("SITE"))
        .nth(1)
        .unwrap();
    assert!(first.starts_with("fs/ext4/super.c:100"), "{s}");
    top.keys(&["i"]);
    top.wait_screen("the types again", |s| {
        s.contains("4 of 4 rows, sorted by in_use_bytes")
    });
    top.keys(&["q"]);
    assert_eq!(top.wait_exit(), 0);
}

#[test]
fn the_man_page_documents_every_option() {
    use clap::Args;
    let cmd = memstat_agentx::top::TopArgs::augment_args(clap::Command::new("memstat-top"));
    let man =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/man/memstat-top.1")).unwrap();
    let mut missing = Vec::new();
    for arg in cmd.get_arguments() {
        if let Some(long) = arg.get_long() {
            if !man.contains(&format!("Fl -{long}")) {
                missing.push(format!("--{long}"));
            }
        }
        if let Some(short) = arg.get_short() {
            if !man.contains(&format!("Fl {short}")) {
                missing.push(format!("-{short}"));
            }
        }
    }
    assert!(missing.is_empty(), "man/memstat-top.1 lacks {missing:?}");
}

#[test]
fn a_terminal_that_hangs_up_ends_the_view() {
    let top = Top::start(first_types(), "-d 60", 140, 30);
    let pid = top.pid();
    // The terminal goes away, as when a window closes or an ssh session drops: tmux's server
    // ends, and its ptys with it.
    top.tmux(&["kill-server"]);
    let stat = format!("/proc/{pid}/stat");
    let ended = || {
        std::fs::read_to_string(&stat)
            .map(|s| {
                s.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            })
            .unwrap_or(true)
    };
    wait_until("the view to end once its terminal hung up", ended, || {
        std::fs::read_to_string(&stat).unwrap_or_default()
    });
}
