use super::*;

#[path = "../../tests/support/allocinfo_text.rs"]
mod allocinfo_text;

use allocinfo_text::{header, row};

fn core(bytes: i64, calls: u64, place: &str, func: &str) -> String {
    row(bytes, calls, place, None, func, false)
}

fn parse_ok(text: &str) -> Allocinfo {
    parse(text.as_bytes(), ALLOCINFO).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn err(text: &str) -> String {
    parse(text.as_bytes(), ALLOCINFO).unwrap_err().to_string()
}

#[test]
fn the_writer_prints_the_kernels_columns() {
    // The fixtures below are only as good as this: widths 12 and 8, right-aligned, a space
    // between and after, the tag, a space, the newline.
    assert_eq!(
        core(-4096, 3, "mm/slub.c:2259", "alloc_slab_page"),
        "       -4096        3 mm/slub.c:2259 func:alloc_slab_page \n"
    );
    assert_eq!(
        row(1 << 40, 123_456_789, "fs/x.c:1", Some("xfs"), "f", true),
        "1099511627776 123456789 fs/x.c:1 [xfs] func:f accurate:no \n"
    );
}

#[test]
fn version_1_0_core_and_module_sites() {
    let text = header("1.0")
        + &core(
            2_883_584,
            22_648,
            "fs/kernfs/dir.c:615",
            "__kernfs_new_node",
        )
        + &row(
            4_194_304,
            1_010,
            "drivers/staging/ctagmod/ctagmod.c:20",
            Some("ctagmod"),
            "ctagmod_start",
            false,
        )
        + &core(
            0,
            0,
            "arch/x86/kernel/kdebugfs.c:105",
            "create_setup_data_nodes",
        );
    let a = parse_ok(&text);
    assert_eq!(a.version, Some(Version { major: 1, minor: 0 }));
    assert_eq!((a.rows, a.sites.len()), (3, 3));
    assert_eq!(
        a.sites[0],
        Site {
            file: "fs/kernfs/dir.c".into(),
            line: 615,
            module: String::new(),
            function: "__kernfs_new_node".into(),
            bytes: 2_883_584,
            calls: 22_648,
            accurate: true,
            rows: 1,
        }
    );
    let m = &a.sites[1];
    assert_eq!(
        (
            m.file.as_str(),
            m.line,
            m.module.as_str(),
            m.function.as_str()
        ),
        (
            "drivers/staging/ctagmod/ctagmod.c",
            20,
            "ctagmod",
            "ctagmod_start"
        )
    );
    assert_eq!((m.bytes, m.calls, m.accurate), (4_194_304, 1_010, true));
    // A site holding nothing is a site: every tag is printed, `0 0` included.
    let z = &a.sites[2];
    assert_eq!((z.bytes, z.calls, z.accurate), (0, 0, true));
    assert_eq!(z.function, "create_setup_data_nodes");
}

#[test]
fn version_2_0_reads_accurate_no() {
    let text = header("2.0")
        + &core(
            0,
            0,
            "arch/x86/kernel/alternative.c:2090",
            "alternatives_smp_module_add",
        )
        + &row(
            0,
            0,
            "arch/x86/kernel/alternative.c:127",
            None,
            "__its_alloc",
            true,
        )
        + &row(
            49_152,
            48,
            "arch/x86/kernel/cpu/mce/core.c:2709",
            None,
            "mce_device_create",
            true,
        )
        + &row(8_192, 2, "net/x.c:9", Some("nf_tables"), "nft_alloc", true);
    let a = parse_ok(&text);
    assert_eq!(a.version, Some(Version { major: 2, minor: 0 }));
    let accurate: Vec<bool> = a.sites.iter().map(|s| s.accurate).collect();
    assert_eq!(accurate, [true, false, false, false]);
    // Inaccurate figures are still served: their deltas are right.
    assert_eq!((a.sites[2].bytes, a.sites[2].calls), (49_152, 48));
    assert_eq!(
        (a.sites[3].module.as_str(), a.sites[3].bytes),
        ("nf_tables", 8_192)
    );
}

#[test]
fn later_minor_versions_and_unknown_pairs_in_2_x_are_read() {
    let text = header("2.7") + "         100        1 mm/a.c:1 func:f color:blue accurate:yes \n";
    let a = parse_ok(&text);
    assert_eq!(a.version, Some(Version { major: 2, minor: 7 }));
    assert_eq!((a.sites[0].bytes, a.sites[0].accurate), (100, true));
    assert_eq!(
        parse_ok(&header("1.3")).version,
        Some(Version { major: 1, minor: 3 })
    );
}

#[test]
fn repeated_tags_are_one_site_summed() {
    // An inlined helper: the same file, line and function from three tags, a module's site
    // of the same place apart, and a core site in between.
    let text = header("2.0")
        + &core(4096, 1, "include/linux/x.h:12", "helper")
        + &core(100, 5, "mm/a.c:1", "other")
        + &core(8192, 2, "include/linux/x.h:12", "helper")
        + &row(1, 1, "include/linux/x.h:12", Some("m"), "helper", false)
        + &row(512, 3, "include/linux/x.h:12", None, "helper", true);
    let a = parse_ok(&text);
    assert_eq!(a.rows, 5);
    assert_eq!(a.sites.len(), 3, "{:?}", a.sites);
    let h = &a.sites[0];
    assert_eq!((h.function.as_str(), h.module.as_str()), ("helper", ""));
    assert_eq!((h.bytes, h.calls, h.rows), (4096 + 8192 + 512, 6, 3));
    // One inaccurate row makes the site inaccurate.
    assert!(!h.accurate);
    assert_eq!(a.sites[1].function, "other");
    let m = &a.sites[2];
    assert_eq!(
        (m.module.as_str(), m.bytes, m.rows, m.accurate),
        ("m", 1, 1, true)
    );
}

#[test]
fn negative_bytes_are_zero_and_not_accurate() {
    let text = header("1.0")
        + &core(-8192, 0, "mm/compaction.c:1", "alone")
        + &core(-4096, 1, "mm/a.c:1", "summed")
        + &core(1 << 20, 3, "mm/a.c:1", "summed")
        + &core(i64::MIN, 0, "mm/b.c:2", "lowest");
    let a = parse_ok(&text);
    // Negative alone: 0 bytes, not accurate, its calls kept.
    assert_eq!(
        (a.sites[0].bytes, a.sites[0].calls, a.sites[0].accurate),
        (0, 0, false)
    );
    // A negative row in a positive sum: the exact sum, not accurate.
    assert_eq!(
        (a.sites[1].bytes, a.sites[1].calls, a.sites[1].accurate),
        ((1 << 20) - 4096, 4, false)
    );
    assert_eq!((a.sites[2].bytes, a.sites[2].accurate), (0, false));
}

#[test]
fn calls_that_went_below_zero_are_zero_and_not_accurate() {
    // %llu of a u64 counter one below zero.
    let text = header("1.0") + &core(0, u64::MAX, "mm/a.c:1", "f") + &core(0, 5, "mm/b.c:1", "g");
    let a = parse_ok(&text);
    assert_eq!((a.sites[0].calls, a.sites[0].accurate), (0, false));
    assert_eq!((a.sites[1].calls, a.sites[1].accurate), (5, true));
    // Wrapped: -1 + 5 = 4 live allocations, not 2⁶⁴ + 4.
    let text = header("1.0") + &core(0, u64::MAX, "mm/a.c:1", "f") + &core(0, 5, "mm/a.c:1", "f");
    let s = &parse_ok(&text).sites[0];
    assert_eq!((s.calls, s.accurate), (4, false));
}

#[test]
fn sums_past_two_to_the_64_saturate() {
    let text = header("1.0")
        + &core(i64::MAX, 1, "mm/a.c:1", "f")
        + &core(i64::MAX, 1, "mm/a.c:1", "f")
        + &core(i64::MAX, 1, "mm/a.c:1", "f");
    let s = &parse_ok(&text).sites[0];
    assert_eq!(
        (s.bytes, s.calls, s.rows, s.accurate),
        (u64::MAX, 3, 3, true)
    );
}

#[test]
fn empty_files_and_header_only_files_have_no_sites() {
    // No tags: the kernel prints not even the header.
    let a = parse_ok("");
    assert_eq!((a.version, a.rows, a.sites.len()), (None, 0, 0));
    let a = parse_ok(&header("2.0"));
    assert_eq!(
        (a.version.map(|v| v.major), a.rows, a.sites.len()),
        (Some(2), 0, 0)
    );
    // Empty lines are passed over; the line numbers still count them.
    let text = header("1.0") + "\n" + &core(1, 1, "mm/a.c:1", "f") + "\n" + "x\n";
    let e = err(&text);
    assert!(e.contains("line 6"), "{e}");
}

#[test]
fn the_trailing_space_is_required_and_a_last_line_needs_no_newline() {
    let whole =
        header("2.0") + &core(4096, 1, "mm/a.c:1", "f") + &row(10, 1, "mm/b.c:2", None, "g", true);
    // Cut only of its final newline: the row is whole and read, as the other parsers read a
    // last line without its newline.
    let no_newline = whole.strip_suffix('\n').unwrap();
    let a = parse_ok(no_newline);
    assert_eq!(a.rows, 2);
    assert_eq!((a.sites[1].bytes, a.sites[1].accurate), (10, false));
    // Cut just before the final space: refused as cut short, naming the line, even where
    // what is left would read as a row of its own (`accurate:n`).
    for cut in 1..=2 {
        let text = &whole[..whole.len() - cut - 1];
        let e = parse(text.as_bytes(), ALLOCINFO).unwrap_err().to_string();
        assert!(
            e.contains(ALLOCINFO) && e.contains("line 4"),
            "{text:?}: {e}"
        );
        assert!(e.contains("cut short"), "{text:?}: {e}");
    }
    // Every other cut of the last row is refused too, naming its line, but one: cut right
    // after the space that ends its function, a 2.x row reads as a whole row without its
    // pairs (the module's documentation says so). The first row is untouched throughout.
    let last = row(10, 1, "mm/b.c:2", None, "g", true);
    let start = whole.len() - last.len();
    let mut read = Vec::new();
    for end in start + 1..whole.len() - 1 {
        match parse(&whole.as_bytes()[..end], ALLOCINFO) {
            Ok(a) => {
                assert_eq!(a.sites[0].bytes, 4096);
                read.push((
                    whole[start..end].trim_start().to_string(),
                    a.sites[1].accurate,
                ));
            }
            Err(e) => assert!(e.to_string().contains("line 4"), "cut at {end}: {e}"),
        }
    }
    assert_eq!(read, [("10        1 mm/b.c:2 func:g ".to_string(), true)]);
    // A cut right after the header's column line leaves a file of no rows, as the kernel's
    // own file never is but a replay may be; a cut inside it is refused (line 2).
    assert_eq!(parse_ok(&whole[..header("2.0").len()]).rows, 0);
    // In the middle of the file too: a row without its final space is not whole.
    let text =
        header("1.0") + "           1        1 mm/a.c:1 func:f\n" + &core(1, 1, "mm/b.c:1", "g");
    let e = err(&text);
    assert!(e.contains("line 3") && e.contains("end of row"), "{e}");
}

#[test]
fn an_unknown_major_version_is_refused_naming_file_and_line_1() {
    for v in ["3.0", "0.9", "10.1"] {
        let e = parse(
            (header(v) + &core(1, 1, "mm/a.c:1", "f")).as_bytes(),
            ALLOCINFO,
        )
        .unwrap_err();
        assert!(matches!(e, SourceError::UnsupportedVersion { .. }), "{e:?}");
        let m = e.to_string();
        assert!(
            m.contains(ALLOCINFO) && m.contains("line 1") && m.contains(v),
            "{m}"
        );
    }
}

#[test]
fn a_bad_header_names_line_1_or_2() {
    let cases = [
        ("slabinfo - version: 2.1\n", "line 1", "version"),
        ("allocinfo - version: 2\n#\n", "line 1", "version"),
        ("allocinfo - version: 2.x\n#\n", "line 1", "version"),
        ("allocinfo - version: .0\n#\n", "line 1", "version"),
        (
            "allocinfo - version: 99999999999.0\n#\n",
            "line 1",
            "version",
        ),
        ("allocinfo - version: 1.0", "line 2", "end of the file"),
        ("allocinfo - version: 1.0\n", "line 2", "column line"),
        (
            "allocinfo - version: 1.0\n 1 1 mm/a.c:1 func:f \n",
            "line 2",
            "column line",
        ),
    ];
    for (text, line, want) in cases {
        let e = err(text);
        assert!(
            e.contains(ALLOCINFO) && e.contains(line) && e.contains(want),
            "{text:?}: {e}"
        );
    }
}

#[test]
fn malformed_rows_name_the_file_line_and_field() {
    let cases = [
        ("x 1 mm/a.c:1 func:f ", "bytes", "not a signed"),
        ("+1 1 mm/a.c:1 func:f ", "bytes", "not a signed"),
        (
            "9223372036854775808 1 mm/a.c:1 func:f ",
            "bytes",
            "not a signed",
        ),
        (" ", "bytes", "missing"),
        ("1 ", "calls", "missing"),
        ("1 -1 mm/a.c:1 func:f ", "calls", "not an unsigned"),
        (
            "1 18446744073709551616 mm/a.c:1 func:f ",
            "calls",
            "not an unsigned",
        ),
        ("1 1 ", "file:line", "missing"),
        ("1 1 mm/a.c func:f ", "file:line", "expected `file:line`"),
        ("1 1 :12 func:f ", "file:line", "expected `file:line`"),
        ("1 1 mm/a.c:-1 func:f ", "file:line", "not a number"),
        ("1 1 mm/a.c:4294967296 func:f ", "file:line", "not a number"),
        ("1 1 mm/a.c:1 ", "function", "missing"),
        ("1 1 mm/a.c:1 f ", "function", "func:NAME"),
        ("1 1 mm/a.c:1 func: ", "function", "func:NAME"),
        ("1 1 mm/a.c:1 [m] ", "function", "missing"),
        ("1 1 mm/a.c:1 [] func:f ", "module", "[module]"),
        ("1 1 mm/a.c:1 [m func:f ", "module", "[module]"),
        ("1 1 mm/a.c:1 [[m]] func:f ", "module", "[module]"),
        (
            "1 1 mm/a.c:1 func:f accurate:maybe ",
            "accurate",
            "`no` or `yes`",
        ),
        ("1 1 mm/a.c:1 func:f accurate ", "tag", "key:value"),
        ("1 1 mm/a.c:1 func:f :no ", "tag", "key:value"),
        ("1 1 mm/a.c:1 func:f", "end of row", "before the newline"),
    ];
    for (line, field, want) in cases {
        // After a good row, so that the line number is the row's own.
        let text = header("2.0") + &core(1, 1, "mm/ok.c:1", "ok") + line + "\n";
        let e = parse(text.as_bytes(), ALLOCINFO).unwrap_err().to_string();
        assert!(
            e.contains(ALLOCINFO)
                && e.contains("line 4")
                && e.contains(&format!("field {field}:"))
                && e.contains(want),
            "{line:?}: {e}"
        );
    }
}

#[test]
fn pairs_are_refused_in_version_1() {
    let text = header("1.0") + &row(1, 1, "mm/a.c:1", None, "f", true);
    let e = err(&text);
    assert!(
        e.contains("line 3") && e.contains("field tag") && e.contains("2.0"),
        "{e}"
    );
}

#[test]
fn not_utf8_names_are_refused_by_field() {
    for (field, row) in [
        ("file", &b"1 1 mm/\xff.c:1 func:f \n"[..]),
        ("module", &b"1 1 mm/a.c:1 [\xff] func:f \n"[..]),
        ("function", &b"1 1 mm/a.c:1 func:\xff \n"[..]),
    ] {
        let mut text = header("1.0").into_bytes();
        text.extend_from_slice(row);
        let e = parse(&text, ALLOCINFO).unwrap_err().to_string();
        assert!(
            e.contains("line 3") && e.contains(&format!("field {field}:")) && e.contains("UTF-8"),
            "{e}"
        );
    }
}

#[test]
fn a_generated_file_of_50000_rows_reads_every_row() {
    // The benchmark's shape: a few hundred files, repeated tags every 1,000 rows.
    let mut text = header("2.0");
    for i in 0..50_000u32 {
        let module = (i % 7 == 0).then_some("mod");
        let line = if i % 1000 == 999 { 0 } else { i };
        text += &row(
            i64::from(i) * 64,
            u64::from(i),
            &format!("fs/f{}.c:{line}", i % 300),
            module,
            &format!("fn_{}", line),
            i % 97 == 0,
        );
    }
    assert!(text.len() < MAX_ALLOCINFO_BYTES as usize);
    let a = parse_ok(&text);
    assert_eq!(a.rows, 50_000);
    // Rows 999, 1999, ... share line 0 and fn_0 with the others of their file and module.
    let distinct: std::collections::HashSet<String> = (0..50_000u32)
        .map(|i| {
            let line = if i % 1000 == 999 { 0 } else { i };
            format!("{} {line} {}", i % 300, i % 7 == 0)
        })
        .collect();
    assert!(distinct.len() < 49_960, "{}", distinct.len());
    assert_eq!(a.sites.len(), distinct.len());
    let total: u64 = a.sites.iter().map(|s| s.rows as u64).sum();
    assert_eq!(total, 50_000);
}

/// The fuzz seeds and saved inputs (replayed through the fuzz entry point by
/// tests/fuzz_regressions.rs) read as their names say.
#[test]
fn the_saved_fuzz_inputs_read_as_named() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |dir: &str, name: &str| {
        let bytes = std::fs::read(root.join(dir).join("allocinfo").join(name)).unwrap();
        parse(&bytes, "saved")
    };
    let seeds = "fuzz/seeds";
    let one = read(seeds, "sample-1.0").unwrap();
    assert_eq!((one.rows, one.sites.len()), (6, 5));
    let two = read(seeds, "sample-2.0").unwrap();
    assert_eq!((two.rows, two.sites.len()), (9, 8));
    assert_eq!(two.sites.iter().filter(|s| !s.accurate).count(), 4);
    assert_eq!(read(seeds, "header-only-2.0").unwrap().rows, 0);
    assert!(matches!(
        read(seeds, "version-3.0"),
        Err(SourceError::UnsupportedVersion { .. })
    ));

    let saved = "tests/data/fuzz-regressions";
    let x = read(saved, "extreme-counters-summed").unwrap();
    // 3 × −2⁶³ + 5 × (2⁶³ − 1) bytes; 3 × −1 + 5 × (2⁶³ − 1) calls, past u64::MAX.
    assert_eq!(
        (x.sites[0].bytes, x.sites[0].calls, x.sites[0].accurate),
        (u64::MAX - 4, u64::MAX, false)
    );
    assert_eq!((x.sites[1].line, x.sites[1].bytes), (u32::MAX, 0));
    let e = read(saved, "version-past-u32").unwrap_err().to_string();
    assert!(e.contains("line 1") && e.contains("field version"), "{e}");
    let c = read(saved, "cut-after-function").unwrap();
    assert_eq!((c.sites[0].bytes, c.sites[0].accurate), (10, true));
    let e = read(saved, "brackets-and-colons").unwrap_err().to_string();
    assert!(e.contains("line 3") && e.contains("field module"), "{e}");
    let e = read(saved, "not-utf8-and-no-newline")
        .unwrap_err()
        .to_string();
    assert!(e.contains("line 3") && e.contains("cut short"), "{e}");
}

// --- the source's states -----------------------------------------------------------------

/// A fake /proc: `allocinfo` and `sys/vm/mem_profiling` in a temporary directory, each
/// present or not.
struct FakeProc {
    dir: tempfile::TempDir,
}

impl FakeProc {
    fn new() -> FakeProc {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sys/vm")).unwrap();
        FakeProc { dir }
    }
    fn file(&self) -> std::path::PathBuf {
        self.dir.path().join("allocinfo")
    }
    fn switch(&self) -> std::path::PathBuf {
        self.dir.path().join("sys/vm/mem_profiling")
    }
    fn write_file(&self, text: &str) {
        // Written in place, as the kernel's file keeps its inode.
        std::fs::write(self.file(), text).unwrap();
    }
    fn set_switch(&self, value: &str) {
        std::fs::write(self.switch(), value).unwrap();
    }
    /// The reader of the kernel's own file: absence is a state.
    fn open(&self) -> Result<AllocinfoReader, SourceError> {
        AllocinfoReader::open(&self.file(), Some(&self.switch()))
    }
}

fn read_state(r: &mut AllocinfoReader) -> Profiling {
    r.read().unwrap().profiling.expect("the source always says")
}

fn two_sites() -> String {
    header("1.0")
        + &core(4 << 20, 10, "mm/a.c:1", "a")
        + &row(8192, 2, "fs/b.c:2", Some("xfs"), "b", false)
}

#[test]
fn neither_file_is_not_compiled_and_no_error() {
    let p = FakeProc::new();
    let mut r = p.open().unwrap();
    let got = read_state(&mut r);
    assert_eq!(got.state, ProfilingState::NotCompiled);
    assert!(got.sites.is_empty());
}

#[test]
fn a_switch_without_the_file_is_unavailable() {
    let p = FakeProc::new();
    p.set_switch("0\n");
    let mut r = p.open().unwrap();
    assert_eq!(read_state(&mut r).state, ProfilingState::Unavailable);
}

#[test]
fn the_switch_says_on_or_off_and_off_still_serves_the_frozen_figures() {
    let p = FakeProc::new();
    p.set_switch("1\n");
    p.write_file(&two_sites());
    let mut r = p.open().unwrap();
    let on = read_state(&mut r);
    assert_eq!(on.state, ProfilingState::On);
    assert_eq!(on.sites.len(), 2);
    assert_eq!(on.rows, 2);
    p.set_switch("0\n");
    let off = read_state(&mut r);
    assert_eq!(off.state, ProfilingState::Off);
    assert_eq!(off.sites, on.sites);
}

#[test]
fn a_file_the_kernel_removes_at_run_time_empties_the_table_and_says_unavailable() {
    let p = FakeProc::new();
    p.set_switch("1\n");
    p.write_file(&two_sites());
    let mut r = p.open().unwrap();
    assert_eq!(read_state(&mut r).sites.len(), 2);
    std::fs::remove_file(p.file()).unwrap();
    let gone = read_state(&mut r);
    assert_eq!(gone.state, ProfilingState::Unavailable);
    assert!(gone.sites.is_empty());
}

#[test]
fn a_copy_must_open_and_reads_as_on() {
    let p = FakeProc::new();
    let e = AllocinfoReader::open(&p.file(), None)
        .err()
        .expect("no file");
    assert!(e.to_string().contains("allocinfo"), "{e}");
    p.write_file(&two_sites());
    let mut r = AllocinfoReader::open(&p.file(), None).unwrap();
    assert_eq!(read_state(&mut r).state, ProfilingState::On);
}

#[test]
fn an_unknown_major_version_is_refused_at_start_up_naming_file_and_line() {
    let p = FakeProc::new();
    p.write_file(&(header("3.0") + &core(1, 1, "mm/a.c:1", "a")));
    let e = AllocinfoReader::open(&p.file(), None)
        .err()
        .expect("refused")
        .to_string();
    assert!(e.contains(&p.file().display().to_string()), "{e}");
    assert!(e.contains("3.0"), "{e}");
    // A malformed row is not a start-up error: it is the read's, and the daemon serves on.
    p.write_file(&(header("1.0") + "garbage\n"));
    let mut r = AllocinfoReader::open(&p.file(), None).unwrap();
    assert!(r.read().is_err());
}

#[test]
fn a_replaced_copy_is_read_again() {
    let p = FakeProc::new();
    p.write_file(&two_sites());
    let mut r = AllocinfoReader::open(&p.file(), None).unwrap();
    assert_eq!(read_state(&mut r).sites.len(), 2);
    let tmp = p.dir.path().join("next");
    std::fs::write(&tmp, header("1.0") + &core(1, 1, "mm/c.c:3", "c")).unwrap();
    std::fs::rename(&tmp, p.file()).unwrap();
    let again = read_state(&mut r);
    assert_eq!(again.sites.len(), 1);
    assert_eq!(again.sites[0].function, "c");
}

#[test]
fn a_name_longer_than_any_kernel_name_is_refused_naming_line_and_field() {
    let long = "x".repeat(MAX_NAME_BYTES + 1);
    let ok = "y".repeat(MAX_NAME_BYTES);
    assert_eq!(
        parse_ok(&(header("1.0") + &core(1, 1, "mm/a.c:1", &ok))).sites[0].function,
        ok
    );
    let e = err(&(header("1.0") + &core(1, 1, "mm/a.c:1", "f") + &core(1, 1, "mm/b.c:2", &long)));
    assert!(e.contains("line 4") && e.contains("function"), "{e}");
    assert!(e.contains("4097 bytes"), "{e}");
    let e = err(&(header("1.0") + &core(1, 1, &format!("{long}:1"), "f")));
    assert!(e.contains("line 3") && e.contains("field file"), "{e}");
}

#[test]
fn an_unreadable_or_strange_switch_is_taken_as_on_and_the_figures_served() {
    let p = FakeProc::new();
    p.set_switch("maybe\n");
    p.write_file(&two_sites());
    let mut r = p.open().unwrap();
    let got = read_state(&mut r);
    assert_eq!(got.state, ProfilingState::On);
    assert_eq!(got.sites.len(), 2);
}

#[test]
fn the_kernels_own_file_of_an_unknown_version_does_not_stop_the_start() {
    // `auto` includes the kernel's file: a future format makes the source stale, while the
    // other sources are served.
    let p = FakeProc::new();
    p.set_switch("1\n");
    p.write_file(&(header("3.0") + &core(1, 1, "mm/a.c:1", "a")));
    let mut r = p
        .open()
        .expect("the kernel's file opens whatever its version");
    let e = r.read().unwrap_err().to_string();
    assert!(e.contains("3.0") && e.contains("line 1"), "{e}");
}
