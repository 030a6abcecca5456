use super::*;

const SAMPLE: &str = "MemTotal:       24683584 kB
MemFree:        16568736 kB
KReclaimable:     774804 kB
Slab:             842804 kB
SReclaimable:     774804 kB
SUnreclaim:        68000 kB
KernelStack:        1384 kB
PageTables:         1520 kB
SecPageTables:\t       0 kB
VmallocTotal:   34359738367 kB
VmallocUsed:       14172 kB
Percpu:              792 kB
HugePages_Total:       0
Zswap:                 0 kB
";

#[test]
fn reads_the_fields_it_serves_in_bytes() {
    let f = parse(SAMPLE.as_bytes(), "m").unwrap();
    assert_eq!(f["meminfo.Slab"], 842_804 * 1024);
    assert_eq!(f["meminfo.SReclaimable"], 774_804 * 1024);
    assert_eq!(f["meminfo.SUnreclaim"], 68_000 * 1024);
    assert_eq!(f["meminfo.VmallocUsed"], 14_172 * 1024);
    // A tab after the colon (one release printed one) is whitespace like any other.
    assert_eq!(f["meminfo.SecPageTables"], 0);
    // Present at 0 is not absent.
    assert_eq!(f["meminfo.Zswap"], 0);
    // Not in this kernel's file: absent, not 0.
    assert!(!f.contains_key("meminfo.HardwareCorrupted"));
    assert!(!f.contains_key("meminfo.ShadowCallStack"));
    // Lines it does not serve are not read (VmallocTotal, HugePages_Total).
    assert_eq!(f.len(), 10, "{f:?}");
}

#[test]
fn every_kind_is_one_line_of_the_file() {
    for k in KINDS {
        assert_eq!(k.figure, format!("meminfo.{}", k.from));
        assert_eq!(figure_of(k.from.as_bytes()), Some(k.figure));
    }
}

#[test]
fn malformed_lines_name_the_file_line_and_field() {
    let cases = [
        ("Slab: x kB\n", "not a number"),
        ("Slab:\n", "missing value"),
        ("Slab: 12\n", "expected `kB`"),
        ("Slab: 12 kB extra\n", "expected `kB`"),
        ("Slab: 12 MB\n", "expected `kB`"),
        ("Slab: 1 kB\nSlab: 2 kB\n", "listed twice"),
    ];
    for (text, want) in cases {
        let e = parse(text.as_bytes(), "/proc/meminfo")
            .unwrap_err()
            .to_string();
        assert!(e.contains("/proc/meminfo"), "{e}");
        assert!(e.contains("Slab"), "{e}");
        assert!(e.contains("line "), "{e}");
        assert!(e.contains(want), "{text:?}: {e}");
    }
}

#[test]
fn a_value_past_two_to_the_64_bytes_saturates() {
    let f = parse(format!("Slab: {} kB\n", u64::MAX / 2).as_bytes(), "m").unwrap();
    assert_eq!(f["meminfo.Slab"], u64::MAX);
}

#[test]
#[cfg_attr(not(target_os = "linux"), ignore = "needs Linux's /proc/meminfo")]
fn the_live_file_reads() {
    let mut r = open_source(None).unwrap();
    let data = r.read().unwrap();
    assert!(data.types.is_empty());
    assert!(
        data.figures.contains_key("meminfo.Slab"),
        "{:?}",
        data.figures
    );
}
