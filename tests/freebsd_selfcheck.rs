//! scripts/freebsd-selfcheck's comparison (`--compare BEFORE OURS AFTER`), on outputs made by
//! hand from FreeBSD 15.0's vmstat.c formats (see tests/vmstat_format.rs for the formats).
//!
//! The script must run on FreeBSD's base system, so it is run here by dash (a POSIX sh, as
//! FreeBSD's /bin/sh is) with `awk` being the one true awk (Debian's original-awk, the awk
//! FreeBSD ships) and, as a second implementation, mawk.

use std::path::{Path, PathBuf};
use std::process::Command;

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/freebsd-selfcheck");

/// `vmstat -m` then `vmstat -z`, first reading.
const BEFORE: &str = concat!(
    "            Type  Use Memory Req Size(s)\n",
    "          devbuf  100  4096  500 16,32\n",
    "            temp    0     0    3 \n",
    "          devbuf    1    64    1 64\n",
    "   CAM dev queue    2   256    2 128\n",
    "ITEM                   SIZE   LIMIT     USED     FREE      REQ FAIL SLEEP XDOM\n",
    "UMA Kegs:               384,      0,     123,       7,     123,   0,   0,   0\n",
    "mbuf_packet:            256,      0,      15,       0,      20,   0,   0,   0\n",
    "mbuf_packet:            256,      0,      10,      50,    1000,   0,   0,   0\n",
    "abcdefghijklmnopqrstuvwxyz01234:4096,1234567,       0,       3,       7,12345,   1,99999\n",
);

/// The second reading: devbuf (the first) and the second mbuf_packet moved.
const AFTER: &str = concat!(
    "            Type  Use Memory Req Size(s)\n",
    "          devbuf  102  4160  510 16,32\n",
    "            temp    0     0    3 \n",
    "          devbuf    1    64    1 64\n",
    "   CAM dev queue    2   256    2 128\n",
    "ITEM                   SIZE   LIMIT     USED     FREE      REQ FAIL SLEEP XDOM\n",
    "UMA Kegs:               384,      0,     123,       7,     123,   0,   0,   0\n",
    "mbuf_packet:            256,      0,      15,       0,      20,   0,   0,   0\n",
    "mbuf_packet:            256,      0,      12,      48,    1010,   0,   0,   0\n",
    "abcdefghijklmnopqrstuvwxyz01234:4096,1234567,       0,       3,       7,12345,   1,99999\n",
);

/// memstat-agentx between the two: the moving rows between their readings.
const OURS: &str = concat!(
    "            Type  Use Memory Req Size(s)\n",
    "          devbuf  101  4128  505 16,32\n",
    "            temp    0     0    3 \n",
    "          devbuf    1    64    1 64\n",
    "   CAM dev queue    2   256    2 128\n",
    "ITEM                   SIZE   LIMIT     USED     FREE      REQ FAIL SLEEP XDOM\n",
    "UMA Kegs:               384,      0,     123,       7,     123,   0,   0,   0\n",
    "mbuf_packet:            256,      0,      15,       0,      20,   0,   0,   0\n",
    "mbuf_packet:            256,      0,      11,      49,    1005,   0,   0,   0\n",
    "abcdefghijklmnopqrstuvwxyz01234:4096,1234567,       0,       3,       7,12345,   1,99999\n",
);

struct Run {
    code: Option<i32>,
    out: String,
}

/// A directory whose `awk` is the given implementation, put first in PATH.
fn awk_dir(awk: &str, tmp: &Path) -> PathBuf {
    let dir = tmp.join(format!("bin-{awk}"));
    std::fs::create_dir_all(&dir).unwrap();
    let link = dir.join("awk");
    if !link.exists() {
        std::os::unix::fs::symlink(format!("/usr/bin/{awk}"), &link).unwrap();
    }
    dir
}

/// The awk implementations to run the script with; original-awk (FreeBSD's awk) is required.
fn awks() -> Vec<&'static str> {
    assert!(
        Path::new("/usr/bin/original-awk").exists(),
        "original-awk (the one true awk, FreeBSD's awk) is missing: scripts/install-deps \
         installs it"
    );
    let mut v = vec!["original-awk"];
    if Path::new("/usr/bin/mawk").exists() {
        v.push("mawk");
    }
    v
}

/// Runs the comparison under every awk, on the same files; all must agree on the status and
/// the report.
fn compare(before: &str, ours: &str, after: &str) -> Run {
    compare_with("--compare", before, ours, after)
}

fn compare_with(mode: &str, before: &str, ours: &str, after: &str) -> Run {
    let tmp = tempfile::tempdir().unwrap();
    let mut paths = Vec::new();
    for (name, text) in [("before", before), ("ours", ours), ("after", after)] {
        let p = tmp.path().join(name);
        std::fs::write(&p, text).unwrap();
        paths.push(p);
    }
    let runs: Vec<(&str, Run)> = awks()
        .into_iter()
        .map(|awk| {
            let bin = awk_dir(awk, tmp.path());
            let out = Command::new("dash")
                .arg(SCRIPT)
                .arg(mode)
                .args(&paths)
                .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
                .output()
                .expect("dash (Debian's POSIX sh) is needed to run the script");
            let text =
                String::from_utf8(out.stdout).unwrap() + &String::from_utf8(out.stderr).unwrap();
            (
                awk,
                Run {
                    code: out.status.code(),
                    out: text,
                },
            )
        })
        .collect();
    let (first_awk, first) = &runs[0];
    for (awk, r) in &runs[1..] {
        assert_eq!(
            (r.code, &r.out),
            (first.code, &first.out),
            "{awk} and {first_awk} disagree"
        );
    }
    let (_, r) = runs.into_iter().next().unwrap();
    r
}

fn mismatch(ours: &str) -> Run {
    let r = compare(BEFORE, ours, AFTER);
    assert_eq!(r.code, Some(1), "{}", r.out);
    r
}

#[test]
fn agreement_within_the_allowed_movement_passes() {
    let r = compare(BEFORE, OURS, AFTER);
    assert_eq!(r.code, Some(0), "{}", r.out);
    assert!(
        r.out
            .ends_with("freebsd-selfcheck: 8 rows compared, 0 mismatches, 0 notes\n"),
        "{}",
        r.out
    );
    // Equal readings and equal output: the trivial case.
    let r = compare(BEFORE, BEFORE, BEFORE);
    assert_eq!(r.code, Some(0), "{}", r.out);
}

#[test]
fn a_counter_beyond_the_second_reading_is_a_mismatch() {
    let ours = OURS.replace("      11,      49,    1005,", "      11,      49,    1011,");
    let r = mismatch(&ours);
    assert!(
        r.out.contains(
            "MISMATCH vmstat -z mbuf_packet (#2 of that name): REQ 1011 (vmstat read 1000 \
             before and 1010 after): a counter must lie between its two readings"
        ),
        "{}",
        r.out
    );
    assert!(r.out.contains("1 mismatches"), "{}", r.out);
    // And below the first reading, in vmstat -m.
    let ours = OURS.replace("  101  4128  505 ", "  101  4128  499 ");
    let r = mismatch(&ours);
    assert!(
        r.out.contains("MISMATCH vmstat -m devbuf: Req 499"),
        "{}",
        r.out
    );
}

#[test]
fn fixed_figures_must_be_equal() {
    let ours = OURS.replace(
        "UMA Kegs:               384,",
        "UMA Kegs:               383,",
    );
    let r = mismatch(&ours);
    assert!(
        r.out.contains("MISMATCH vmstat -z UMA Kegs: SIZE 383 (vmstat read 384 before and 384 after), a fixed figure, differs"),
        "{}",
        r.out
    );
}

#[test]
fn in_use_must_stay_within_what_the_requests_allow() {
    // Between the readings there were 10 requests: USED lies in 12 - 10 .. 10 + 10.
    let ours = OURS.replace("      11,      49,    1005,", "      21,      49,    1005,");
    let r = mismatch(&ours);
    assert!(
        r.out.contains("USED 21 (vmstat read 10 before and 12 after): in use can only lie in 2..20 with 10 requests between the readings"),
        "{}",
        r.out
    );
    let ours = OURS.replace("      11,      49,    1005,", "      20,      49,    1005,");
    assert_eq!(compare(BEFORE, &ours, AFTER).code, Some(0));
}

#[test]
fn an_idle_row_must_match_byte_for_byte() {
    // The same figures with the name column one space short (the old bug).
    let ours = OURS.replace(
        "UMA Kegs:               384,",
        "UMA Kegs:              384,",
    );
    let r = mismatch(&ours);
    assert!(
        r.out
            .contains("MISMATCH vmstat -z UMA Kegs: same figures, different layout"),
        "{}",
        r.out
    );
    // An idle zone's FREE must be equal.
    let ours = OURS.replace("     123,       7,     123,", "     123,       8,     123,");
    let r = mismatch(&ours);
    assert!(
        r.out
            .contains("FREE 8 (vmstat read 7 before and 7 after): the row was idle"),
        "{}",
        r.out
    );
}

#[test]
fn missing_extra_and_unparsable_rows_are_mismatches() {
    let r = mismatch(&OURS.replace("            temp    0     0    3 \n", ""));
    assert!(
        r.out.contains(
            "MISMATCH vmstat -m temp: in both vmstat readings, missing from memstat-agentx"
        ),
        "{}",
        r.out
    );
    let r = mismatch(&OURS.replace("ITEM ", "           bogus    1     1    1 16\nITEM "));
    assert!(
        r.out.contains(
            "MISMATCH vmstat -m bogus: printed by memstat-agentx, in neither vmstat reading"
        ),
        "{}",
        r.out
    );
    let r = mismatch(&OURS.replace("ITEM ", "garbage here\nITEM "));
    assert!(
        r.out.contains("not a row of vmstat -m or -z: garbage here"),
        "{}",
        r.out
    );
}

#[test]
fn the_old_header_is_a_mismatch() {
    let old = "         Type InUse MemUse Requests  Size(s)\n";
    let ours = OURS.replacen("            Type  Use Memory Req Size(s)\n", old, 1);
    let r = mismatch(&ours);
    // The old header is not recognised as vmstat -m's, so its rows cannot be read either.
    assert!(r.out.contains("not a row of vmstat -m or -z"), "{}", r.out);
    let ours = OURS.replace("ITEM                   SIZE", "ITEM                  SIZE ");
    let r = mismatch(&ours);
    assert!(r.out.contains("MISMATCH vmstat -z header"), "{}", r.out);
}

#[test]
fn a_type_created_between_the_readings_is_a_note_not_a_mismatch() {
    let new_row =
        "new_zone:                 64,      0,       1,       0,       1,   0,   0,   0\n";
    let after = format!("{AFTER}{new_row}");
    let ours = format!("{OURS}{new_row}");
    let r = compare(BEFORE, &ours, &after);
    assert_eq!(r.code, Some(0), "{}", r.out);
    assert!(
        r.out
            .contains("note     vmstat -z new_zone: in only one vmstat reading"),
        "{}",
        r.out
    );
}

#[test]
fn counters_beyond_2_pow_53_are_compared_exactly() {
    // 2^53 + 3 is not a double: numeric comparison would round it.
    let row = |req: &str| format!("            racy 18446744073709551614   100 {req} 16\n");
    let with = |text: &str, req: &str| text.replace("ITEM ", &format!("{}ITEM ", row(req)));
    let (before, after) = (
        with(BEFORE, "9007199254740993"),
        with(AFTER, "9007199254740995"),
    );
    let r = compare(&before, &with(OURS, "9007199254740994"), &after);
    assert_eq!(r.code, Some(0), "{}", r.out);
    let r = compare(&before, &with(OURS, "9007199254740996"), &after);
    assert_eq!(r.code, Some(1), "{}", r.out);
    assert!(r.out.contains("Req 9007199254740996"), "{}", r.out);
}

#[test]
fn the_real_output_of_dump_is_read_by_the_comparison() {
    // A fixture dumped by the binary is compared with the rows vmstat would print for it,
    // worked out by hand.
    let tmp = tempfile::tempdir().unwrap();
    let fixture = tmp.path().join("f.json");
    std::fs::write(
        &fixture,
        r#"{"source": "t", "types": [
            {"allocator": "malloc", "name": "CAM dev queue", "allocs": 2, "frees": 0,
             "bytes_allocated": 256, "bytes_freed": 0, "size_mask": 8},
            {"allocator": "uma", "name": "mbuf_packet", "size": 256, "count_limit": 0,
             "allocs": 20, "frees": 5, "free_count": 0, "failures": 0, "sleeps": 0, "xdomain": 0},
            {"allocator": "uma", "name": "mbuf_packet", "size": 256, "count_limit": 0,
             "allocs": 1000, "frees": 990, "free_count": 50, "failures": 0, "sleeps": 0, "xdomain": 0}
        ]}"#,
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_memstat-agentx"))
        .args(["dump", "--format", "vmstat", "--source"])
        .arg(format!("fixture:{}", fixture.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ours = String::from_utf8(out.stdout).unwrap();
    let vmstat = concat!(
        "            Type  Use Memory Req Size(s)\n",
        "   CAM dev queue    2   256    2 128\n",
        "ITEM                   SIZE   LIMIT     USED     FREE      REQ FAIL SLEEP XDOM\n",
        "mbuf_packet:            256,      0,      10,      50,    1000,   0,   0,   0\n",
        "mbuf_packet:            256,      0,      15,       0,      20,   0,   0,   0\n",
    );
    let r = compare(vmstat, &ours, vmstat);
    assert_eq!(r.code, Some(0), "{}\n{ours}", r.out);
    assert!(r.out.contains("3 rows compared, 0 mismatches"), "{}", r.out);
}

#[test]
fn off_freebsd_the_script_refuses_to_run_and_says_why() {
    let out = Command::new("dash").arg(SCRIPT).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("runs on FreeBSD only") && err.contains("--compare"),
        "{err}"
    );
}

/// `sysctl` as FreeBSD prints the overview's names.
fn sysctl_text(wire_count: u64, uma: u64, bufspace: u64, arc: Option<u64>) -> String {
    let mut t = format!(
        "hw.pagesize: 4096\nvm.stats.vm.v_wire_count: {wire_count}\nvm.uma_kmem_total: {uma}\nvfs.bufspace: {bufspace}\n"
    );
    if let Some(a) = arc {
        t.push_str(&format!("kstat.zfs.misc.arcstats.size: {a}\n"));
    }
    t
}

/// The table the binary prints for a FreeBSD host's figures.
fn overview_table(figures: &[(&str, u64)]) -> String {
    use memstat_agentx::memstat::{fixture, Snapshot};
    let tmp = tempfile::tempdir().unwrap();
    let mut snap = Snapshot::new(1, std::time::UNIX_EPOCH, "freebsd".into(), Vec::new());
    for (k, v) in figures {
        snap.figures.insert(k.to_string(), *v);
    }
    let fix = tmp.path().join("f.json");
    std::fs::write(&fix, fixture::to_json(&snap)).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_memstat-agentx"))
        .args(["dump", "--source", &format!("fixture:{}", fix.display())])
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_overview_is_compared_with_sysctl() {
    let before = sysctl_text(1000, 2_000_000, 1_000_000, None);
    let after = sysctl_text(1010, 2_100_000, 1_000_000, None);
    let good = overview_table(&[
        ("freebsd.wired", 1005 * 4096),
        ("freebsd.uma", 2_050_000),
        ("freebsd.bufspace", 1_000_000),
        ("freebsd.wired_other", 1005 * 4096 - 3_050_000),
    ]);
    let r = compare_with("--compare-overview", &before, &good, &after);
    assert_eq!(r.code, Some(0), "{}", r.out);
    assert!(
        r.out.contains("overview: 4 rows compared, 0 mismatches"),
        "{}",
        r.out
    );

    // Wired outside the readings.
    let off = overview_table(&[
        ("freebsd.wired", 2000 * 4096),
        ("freebsd.uma", 2_050_000),
        ("freebsd.bufspace", 1_000_000),
        ("freebsd.wired_other", 0),
    ]);
    let r = compare_with("--compare-overview", &before, &off, &after);
    assert_eq!(r.code, Some(1), "{}", r.out);
    assert!(r.out.contains("MISMATCH wired"), "{}", r.out);

    // The ARC in sysctl but not in the overview, and a missing wiredOther.
    let with_arc = sysctl_text(1000, 2_000_000, 1_000_000, Some(500_000));
    let r = compare_with("--compare-overview", &with_arc, &good, &with_arc);
    assert_eq!(r.code, Some(1), "{}", r.out);
    assert!(
        r.out.contains("MISMATCH zfsArcWired: not in the overview"),
        "{}",
        r.out
    );
    let no_rest = overview_table(&[
        ("freebsd.wired", 1005 * 4096),
        ("freebsd.uma", 2_050_000),
        ("freebsd.bufspace", 1_000_000),
    ]);
    let r = compare_with("--compare-overview", &before, &no_rest, &after);
    assert!(
        r.out.contains("MISMATCH wiredOther: not in the overview"),
        "{}",
        r.out
    );
}
