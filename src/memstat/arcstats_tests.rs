use super::*;

/// Lines as OpenZFS 2.2 prints them (a few of some 150), with a row of another type.
const SAMPLE: &str = "13 1 0x01 147 39984 5404391811 1099539417562993
name                            type data
hits                            4    1234567
misses                          4    8910
c                               4    4294967296
c_min                           4    1073741824
c_max                           4    8589934592
size                            4    2147483648
pd                              4    2147483648
memory_throttle_count           4    0
arc_raw_size                    3    -1
";

#[test]
fn reads_every_uint64_statistic_by_name() {
    let f = parse(SAMPLE.as_bytes(), "a").unwrap();
    assert_eq!(f[SIZE], 2_147_483_648);
    assert_eq!(f["arcstats.c_min"], 1 << 30);
    assert_eq!(f["arcstats.memory_throttle_count"], 0);
    // Renamed in OpenZFS 2.2.0: `p` is absent, not 0.
    assert!(!f.contains_key("arcstats.p"));
    // Another kstat type is not a figure.
    assert!(!f.contains_key("arcstats.arc_raw_size"));
    // Derived: how many statistics there were, and size − c_min.
    assert_eq!(f[STATISTICS], 8);
    assert_eq!(f[SHRINKABLE], 2_147_483_648 - (1 << 30));
    assert_eq!(f.len(), 10, "{f:?}");
}

#[test]
fn what_is_not_kstat_text_is_an_error_naming_the_line() {
    let cases = [
        ("", "line 1", "kstat header"),
        ("name type data\nsize 4 1\n", "line 1", "kstat header"),
        ("13 1 0x01\nsize 4 1\n", "line 2", "name type data"),
        (
            "13 1 0x01\nname type data\nsize 4\n",
            "line 3",
            "name type value",
        ),
        (
            "13 1 0x01\nname type data\nsize 4 x\n",
            "line 3",
            "not a number",
        ),
        (
            "13 1 0x01\nname type data\nsize 4 1\nsize 4 2\n",
            "line 4",
            "listed twice",
        ),
    ];
    for (text, line, want) in cases {
        let e = parse(text.as_bytes(), ARCSTATS).unwrap_err().to_string();
        assert!(
            e.contains(ARCSTATS) && e.contains(line) && e.contains(want),
            "{text:?}: {e}"
        );
    }
}

#[test]
fn no_zfs_is_no_arc_and_loading_it_is_seen_at_the_next_read() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("arcstats");
    let mut r = open_source(Some(&file)).unwrap();
    // Not loaded: no statistics, no error, and the count says so.
    let none = r.read().unwrap().figures;
    assert_eq!(none.len(), 1, "{none:?}");
    assert_eq!(none[STATISTICS], 0);
    // Loaded.
    std::fs::write(&file, SAMPLE).unwrap();
    let f = r.read().unwrap().figures;
    assert_eq!(f[SIZE], 2_147_483_648);
    // Unloaded again.
    std::fs::remove_file(&file).unwrap();
    assert_eq!(r.read().unwrap().figures[STATISTICS], 0);
}

#[test]
fn shrinkable_is_floored_at_zero() {
    let mut f: Figures = [(SIZE.to_string(), 10), ("arcstats.c_min".to_string(), 20)]
        .into_iter()
        .collect();
    derive(&mut f);
    assert_eq!(f[SHRINKABLE], 0);
    let mut f: Figures = [(SIZE.to_string(), 10)].into_iter().collect();
    derive(&mut f);
    assert!(!f.contains_key(SHRINKABLE), "no c_min, no shrinkable");
}

#[test]
fn every_served_statistic_is_named_as_openzfs_names_it() {
    let served: Vec<&str> = served_statistics().collect();
    assert!(served.contains(&"size") && served.contains(&"c_min") && served.contains(&"p"));
    assert!(!served.contains(&"statistics") && !served.contains(&"shrinkable"));
    assert_eq!(served.len(), ARC_GROUP.objects.len() - 2);
}
