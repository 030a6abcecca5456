//! scripts/freebsd-selfcheck's comparison (`--compare BEFORE OURS AFTER`), on outputs made by
//! hand from the vmstat.c formats of FreeBSD 15.0 and, further down, of 13 and 14 (see
//! tests/vmstat_format.rs for the formats).
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
    // 13's and 14's header over 15.0's rows: the rows are not rows of that layout, and the
    // layouts differ from vmstat's.
    let old = "         Type InUse MemUse Requests  Size(s)\n";
    let ours = OURS.replacen("            Type  Use Memory Req Size(s)\n", old, 1);
    let r = mismatch(&ours);
    assert!(r.out.contains("not a row of vmstat -m or -z"), "{}", r.out);
    assert!(
        r.out.contains(
            "MISMATCH vmstat -m header: memstat-agentx prints the layout of FreeBSD 13 and 14"
        ),
        "{}",
        r.out
    );
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

// ---------------------------------------------------------------------------------------------
// FreeBSD 13 and 14: `-m` is "%13s %5ju %5juK %8ju  " and the sizes (memory in KiB, rounded
// up), `-z` is "%-20s %6ju, %6ju,%8ju,..." of the name and ":", and the `-z` headers differ
// (13 runs FAILSLEEP together). The same types as above, in that layout.

/// 13's and 14's `vmstat -m` header: `%13s %5s %6s %8s  Size(s)`.
const M_HEADER_13_14: &str = "         Type InUse MemUse Requests  Size(s)\n";
/// 14's `vmstat -z` header: `%-20s %6s %6s %8s %8s %8s %8s %4s %4s`.
const Z_HEADER_14: &str =
    "ITEM                   SIZE  LIMIT     USED     FREE      REQ     FAIL SLEEP XDOMAIN\n";
/// 13's: no blank between FAIL's `%8s` and SLEEP's `%4s`.
const Z_HEADER_13: &str =
    "ITEM                   SIZE  LIMIT     USED     FREE      REQ     FAILSLEEP XDOMAIN\n";

/// The releases and their `-z` headers.
const RELEASES_13_14: [(&str, &str); 2] = [("13", Z_HEADER_13), ("14", Z_HEADER_14)];

/// The first reading's rows: devbuf's 4096 bytes are 4K; 64 and 256 bytes are 1K each. The
/// 25-byte zone name shows the 13/14 padding (15.0 prints "...xy:8,").
const M_ROWS_13_14: &str = concat!(
    "       devbuf   100     4K      500  16,32\n",
    "         temp     0     0K        3  \n",
    "       devbuf     1     1K        1  64\n",
    "CAM dev queue     2     1K        2  128\n",
);
const Z_ROWS_13_14: &str = concat!(
    "UMA Kegs:               384,      0,     123,       7,     123,   0,   0,   0\n",
    "mbuf_packet:            256,      0,      15,       0,      20,   0,   0,   0\n",
    "mbuf_packet:            256,      0,      10,      50,    1000,   0,   0,   0\n",
    "abcdefghijklmnopqrstuvwxyz01234:   4096, 1234567,       0,       3,       7,12345,   1,99999\n",
    "abcdefghijklmnopqrstuvwxy:      8,      0,       1,       0,       2,   0,   0,   0\n",
);

/// Before, memstat-agentx and after in the layout of 13 or 14 (given by its `-z` header), as
/// in BEFORE, OURS and AFTER: devbuf moves (4096, 4128 and 4160 bytes: 4K, 5K and 5K) and so
/// does the second mbuf_packet.
fn readings_13_14(z_header: &str) -> (String, String, String) {
    let text = |devbuf: &str, mbuf: &str| {
        format!("{M_HEADER_13_14}{M_ROWS_13_14}{z_header}{Z_ROWS_13_14}")
            .replace("       devbuf   100     4K      500  ", devbuf)
            .replace("      10,      50,    1000,", mbuf)
    };
    (
        text(
            "       devbuf   100     4K      500  ",
            "      10,      50,    1000,",
        ),
        text(
            "       devbuf   101     5K      505  ",
            "      11,      49,    1005,",
        ),
        text(
            "       devbuf   102     5K      510  ",
            "      12,      48,    1010,",
        ),
    )
}

#[test]
fn releases_13_and_14_agree_within_the_allowed_movement() {
    for (release, z_header) in RELEASES_13_14 {
        let (before, ours, after) = readings_13_14(z_header);
        let r = compare(&before, &ours, &after);
        assert_eq!(r.code, Some(0), "{release}: {}", r.out);
        assert!(
            r.out
                .ends_with("freebsd-selfcheck: 9 rows compared, 0 mismatches, 0 notes\n"),
            "{release}: {}",
            r.out
        );
        let r = compare(&before, &before, &before);
        assert_eq!(r.code, Some(0), "{release}: {}", r.out);
    }
}

#[test]
fn releases_13_and_14_refuse_figures_out_of_range() {
    for (release, z_header) in RELEASES_13_14 {
        let (before, ours, after) = readings_13_14(z_header);
        let refused = |ours: &str, want: &str| {
            let r = compare(&before, ours, &after);
            assert_eq!(r.code, Some(1), "{release}: {}", r.out);
            assert!(
                r.out.contains(want),
                "{release}: want {want:?} in\n{}",
                r.out
            );
            assert!(r.out.contains(", 1 mismatches, "), "{release}: {}", r.out);
        };
        // A zone's counter beyond the second reading.
        refused(
            &ours.replace("      11,      49,    1005,", "      11,      49,    1011,"),
            "MISMATCH vmstat -z mbuf_packet (#2 of that name): REQ 1011 (vmstat read 1000 \
             before and 1010 after): a counter must lie between its two readings",
        );
        // A malloc type's Requests below the first reading.
        refused(
            &ours.replace("   101     5K      505  ", "   101     5K      499  "),
            "MISMATCH vmstat -m devbuf: Requests 499 (vmstat read 500 before and 510 after): \
             a counter must lie between its two readings",
        );
        // InUse beyond what the 10 requests between the readings allow.
        refused(
            &ours.replace("   101     5K      505  ", "   113     5K      505  "),
            "MISMATCH vmstat -m devbuf: InUse 113 (vmstat read 100 before and 102 after): in \
             use can only lie in 92..110 with 10 requests between the readings",
        );
        // An idle type's MemUse, in KiB as printed.
        refused(
            &ours.replace("CAM dev queue     2     1K ", "CAM dev queue     2     2K "),
            "MISMATCH vmstat -m CAM dev queue: MemUse 2K (vmstat read 1K before and 1K after): \
             the row was idle, so it must be equal",
        );
        // A fixed figure.
        refused(
            &ours.replace(
                "UMA Kegs:               384,",
                "UMA Kegs:               383,",
            ),
            "MISMATCH vmstat -z UMA Kegs: SIZE 383 (vmstat read 384 before and 384 after), a \
             fixed figure, differs",
        );
        // 15.0's padding of a zone's row under 13's or 14's header: same figures.
        refused(
            &ours.replace(
                "abcdefghijklmnopqrstuvwxy:      8,",
                "abcdefghijklmnopqrstuvwxy:8,",
            ),
            "MISMATCH vmstat -z abcdefghijklmnopqrstuvwxy: same figures, different layout",
        );
        // 15.0's `%16s` for a type's name under 13's or 14's header.
        refused(
            &ours.replace("         temp     0 ", "            temp     0 "),
            "MISMATCH vmstat -m temp: same figures, different layout",
        );
    }
}

#[test]
fn a_layout_other_than_vmstats_is_one_mismatch_per_table() {
    // memstat-agentx in 15.0's layout on a 14 host: each table's header says so once, and
    // rows printed in bytes are not set against rows printed in KiB.
    let (before, _, after) = readings_13_14(Z_HEADER_14);
    let r = compare(&before, OURS, &after);
    assert_eq!(r.code, Some(1), "{}", r.out);
    assert!(
        r.out.contains(
            "MISMATCH vmstat -m header: memstat-agentx prints the layout of FreeBSD 15.0 \
             (\"            Type  Use Memory Req Size(s)\"), vmstat the layout of FreeBSD 13 \
             and 14 (\"         Type InUse MemUse Requests  Size(s)\"); the rows of vmstat -m \
             are not compared"
        ),
        "{}",
        r.out
    );
    assert!(
        r.out.contains(
            "MISMATCH vmstat -z header: memstat-agentx prints the layout of FreeBSD 15.0"
        ),
        "{}",
        r.out
    );
    assert!(
        r.out.ends_with("0 rows compared, 2 mismatches, 0 notes\n"),
        "{}",
        r.out
    );
    // 13's zone header on a 14 host: only -z differs, and -m's rows are still compared.
    let ours13 = readings_13_14(Z_HEADER_13).1;
    let r = compare(&before, &ours13, &after);
    assert_eq!(r.code, Some(1), "{}", r.out);
    assert!(
        r.out.contains(
            "MISMATCH vmstat -z header: memstat-agentx prints the layout of FreeBSD 13 (\"ITEM \
             "
        ) && r.out.contains("vmstat the layout of FreeBSD 14 (\"ITEM "),
        "{}",
        r.out
    );
    assert!(
        r.out.ends_with("4 rows compared, 1 mismatches, 0 notes\n"),
        "{}",
        r.out
    );
}

#[test]
fn the_real_output_of_dump_for_13_and_14_is_read_by_the_comparison() {
    let tmp = tempfile::tempdir().unwrap();
    let fixture = tmp.path().join("f.json");
    std::fs::write(
        &fixture,
        r#"{"source": "t", "types": [
            {"allocator": "malloc", "name": "CAM dev queue", "allocs": 2, "frees": 0,
             "bytes_allocated": 256, "bytes_freed": 0, "size_mask": 8},
            {"allocator": "uma", "name": "mbuf_packet", "size": 256, "count_limit": 0,
             "allocs": 20, "frees": 5, "free_count": 0, "failures": 0, "sleeps": 0, "xdomain": 0},
            {"allocator": "uma", "name": "abcdefghijklmnopqrstuvwxy", "size": 8, "count_limit": 0,
             "allocs": 2, "frees": 1, "free_count": 0, "failures": 0, "sleeps": 0, "xdomain": 0}
        ]}"#,
    )
    .unwrap();
    for (release, z_header) in RELEASES_13_14 {
        let out = Command::new(env!("CARGO_BIN_EXE_memstat-agentx"))
            .args(["dump", "--format", "vmstat", "--vmstat-release", release])
            .arg("--source")
            .arg(format!("fixture:{}", fixture.display()))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let ours = String::from_utf8(out.stdout).unwrap();
        let vmstat = format!(
            "{M_HEADER_13_14}CAM dev queue     2     1K        2  128\n{z_header}{}{}",
            "abcdefghijklmnopqrstuvwxy:      8,      0,       1,       0,       2,   0,   0,   0\n",
            "mbuf_packet:            256,      0,      15,       0,      20,   0,   0,   0\n",
        );
        let r = compare(&vmstat, &ours, &vmstat);
        assert_eq!(r.code, Some(0), "{release}: {}\n{ours}", r.out);
        assert!(
            r.out.contains("3 rows compared, 0 mismatches"),
            "{release}: {}",
            r.out
        );
    }
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
