use super::*;
use crate::memstat::assign_ordinals;

fn types(names: &[&str]) -> Vec<MemoryType> {
    let mut v: Vec<MemoryType> = names
        .iter()
        .map(|n| MemoryType::new(Allocator::Uma, *n))
        .collect();
    assign_ordinals(&mut v);
    v
}

/// The indexes of an assignment that must have served every type and saved cleanly.
fn served(a: Assigned) -> Vec<u32> {
    assert!(a.problems.is_empty(), "{:?}", a.problems);
    a.indexes.into_iter().map(Option::unwrap).collect()
}

fn uma(name: &str, ordinal: u32) -> TypeKey {
    TypeKey {
        allocator: Allocator::Uma,
        name: name.into(),
        ordinal,
    }
}

/// Writes a state file of (uma name with ordinal 0, index) entries, in this order.
fn write_state(dir: &Path, entries: &[(&str, u32)]) {
    let entries: Vec<serde_json::Value> = entries
        .iter()
        .map(|&(name, index)| {
            serde_json::json!({"allocator": "uma", "name": name, "ordinal": 0, "index": index})
        })
        .collect();
    let body = serde_json::json!({"version": 1, "entries": entries});
    std::fs::write(dir.join(STATE_FILE), body.to_string()).unwrap();
}

/// The types' state file exactly as it has always been written: nothing more.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TypesFile {
    version: u32,
    entries: Vec<TypeEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TypeEntry {
    #[allow(dead_code)] // Only its presence is checked.
    allocator: Allocator,
    name: String,
    #[allow(dead_code)]
    ordinal: u32,
    index: u32,
}

/// The (name, index) entries of the saved state file, in file order.
fn saved_entries(dir: &Path) -> Vec<(String, u32)> {
    let body = std::fs::read(dir.join(STATE_FILE)).unwrap();
    let file: TypesFile = serde_json::from_slice(&body).unwrap();
    assert_eq!(file.version, 1);
    file.entries
        .into_iter()
        .map(|e| (e.name, e.index))
        .collect()
}

fn assert_distinct(indexes: impl IntoIterator<Item = u32>) {
    let mut seen = HashSet::new();
    for i in indexes {
        assert!(
            i != 0 && seen.insert(i),
            "index {i} is zero or served twice"
        );
    }
}

#[test]
fn indexes_survive_restart_vanish_and_return() {
    let dir = tempfile::tempdir().unwrap();
    let (mut m, problems) = TypeIndexes::load(dir.path());
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(served(m.assign(&types(&["x", "y", "x"]))), vec![1, 2, 3]);
    // "y" vanishes, "z" appears: z gets a new index, y's stays reserved.
    assert_eq!(served(m.assign(&types(&["x", "z", "x"]))), vec![1, 4, 3]);
    assert_eq!(m.len(), 4);
    // Restart: the same keys get the same indexes, and y comes back as 2.
    let (mut m2, problems) = TypeIndexes::load(dir.path());
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(
        served(m2.assign(&types(&["z", "y", "x", "x", "w"]))),
        vec![4, 2, 1, 3, 5]
    );
}

#[test]
fn in_memory_assigns_without_a_file() {
    let mut m = TypeIndexes::in_memory();
    assert!(m.is_empty());
    assert_eq!(served(m.assign(&types(&["a", "b"]))), vec![1, 2]);
    assert_eq!(served(m.assign(&types(&["b", "c"]))), vec![2, 3]);
    assert_eq!(m.len(), 3);
}

#[test]
fn corrupt_state_is_reported_and_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(STATE_FILE), b"{ not json").unwrap();
    let (mut m, problems) = TypeIndexes::load(dir.path());
    assert!(
        matches!(&problems[..], [IndexError::Corrupt { path, line: 1, .. }]
            if path == &dir.path().join(STATE_FILE)),
        "{problems:?}"
    );
    let w = problems[0].to_string();
    assert!(w.contains("corrupt") && w.contains(STATE_FILE), "{w}");
    assert!(!w.contains("at line 1 column"), "position shown twice: {w}");
    assert_eq!(served(m.assign(&types(&["x"]))), vec![1]);
    let (_, problems) = TypeIndexes::load(dir.path());
    assert!(problems.is_empty(), "rewritten cleanly: {problems:?}");
}

#[test]
fn unknown_version_is_reported_even_with_another_shape() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join(STATE_FILE),
        br#"{"version": 2, "entries": {"uma/x/0": 7}}"#,
    )
    .unwrap();
    let (m, problems) = TypeIndexes::load(dir.path());
    assert!(
        matches!(
            &problems[..],
            [IndexError::UnknownVersion { version: 2, .. }]
        ),
        "{problems:?}"
    );
    assert!(problems[0].to_string().contains(STATE_FILE));
    assert!(m.is_empty());
}

#[test]
fn unreadable_state_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    // A directory where the file should be: reading it fails, even as root.
    std::fs::create_dir(dir.path().join(STATE_FILE)).unwrap();
    let (_, problems) = TypeIndexes::load(dir.path());
    assert!(
        matches!(&problems[..], [IndexError::Read { .. }]),
        "{problems:?}"
    );
    assert!(std::error::Error::source(&problems[0]).is_some());
}

#[test]
fn highest_index_in_the_file_does_not_stop_new_types() {
    let dir = tempfile::tempdir().unwrap();
    write_state(dir.path(), &[("top", u32::MAX), ("one", 1)]);
    let (mut m, problems) = TypeIndexes::load(dir.path());
    assert!(problems.is_empty(), "{problems:?}");
    let got = served(m.assign(&types(&["top", "a", "one", "b", "c"])));
    // After u32::MAX the search wraps to 1, which is taken: new types start at 2.
    assert_eq!(got, vec![u32::MAX, 2, 1, 3, 4]);
    let saved = saved_entries(dir.path());
    assert_eq!(saved.len(), 5);
    assert_distinct(saved.iter().map(|e| e.1));

    let (mut m2, problems) = TypeIndexes::load(dir.path());
    assert!(problems.is_empty(), "{problems:?}");
    let again = served(m2.assign(&types(&["c", "b", "a", "one", "top", "d"])));
    assert_eq!(again, vec![4, 3, 2, 1, u32::MAX, 5]);
    assert_distinct(saved_entries(dir.path()).iter().map(|e| e.1));
}

#[test]
fn bad_entries_are_dropped_alone_and_reassigned() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(STATE_FILE);
    write_state(
        dir.path(),
        &[("a", 1), ("b", 2), ("dup", 2), ("zero", 0), ("e", 3)],
    );
    let (mut m, problems) = TypeIndexes::load(dir.path());
    match &problems[..] {
        [IndexError::Duplicate {
            path: p1,
            kind: IndexKind::Type,
            index: 2,
            key: k1,
        }, IndexError::ZeroIndex {
            path: p2,
            kind: IndexKind::Type,
            key: k2,
        }] => {
            assert_eq!((p1, p2), (&path, &path));
            assert_eq!(
                (k1.as_str(), k2.as_str()),
                (r#"uma "dup" (ordinal 0)"#, r#"uma "zero" (ordinal 0)"#)
            );
        }
        other => panic!("{other:?}"),
    }
    let dup = problems[0].to_string();
    assert!(
        dup.contains(&path.display().to_string())
            && dup.contains("index 2")
            && dup.contains("\"dup\""),
        "{dup}"
    );
    let zero = problems[1].to_string();
    assert!(
        zero.contains(STATE_FILE) && zero.contains("index 0") && zero.contains("\"zero\""),
        "{zero}"
    );
    assert_eq!(m.len(), 3, "only the offenders are dropped");

    // The kept rows keep their indexes; the offenders get fresh ones.
    let got = served(m.assign(&types(&["a", "b", "dup", "zero", "e"])));
    assert_eq!(got, vec![1, 2, 4, 5, 3]);
    let saved = saved_entries(dir.path());
    assert_eq!(saved.len(), 5);
    assert_distinct(saved.iter().map(|e| e.1));
    let (mut m2, problems) = TypeIndexes::load(dir.path());
    assert!(problems.is_empty(), "repaired: {problems:?}");
    assert_eq!(
        served(m2.assign(&types(&["e", "zero", "dup", "b", "a"]))),
        vec![3, 5, 4, 2, 1]
    );
}

#[test]
fn a_repaired_file_is_rewritten_even_without_new_types() {
    let dir = tempfile::tempdir().unwrap();
    write_state(dir.path(), &[("a", 1), ("dup", 1)]);
    let (mut m, problems) = TypeIndexes::load(dir.path());
    assert_eq!(problems.len(), 1);
    assert_eq!(served(m.assign(&types(&["a"]))), vec![1]);
    assert_eq!(saved_entries(dir.path()), vec![("a".to_string(), 1)]);
}

#[test]
fn a_key_listed_twice_keeps_its_first_index_and_reserves_the_other() {
    let dir = tempfile::tempdir().unwrap();
    write_state(dir.path(), &[("a", 5), ("b", 1), ("a", 7)]);
    let (m, problems) = TypeIndexes::load(dir.path());
    match &problems[..] {
        [IndexError::RepeatedKey {
            key,
            kept: 5,
            reserved: 7,
            ..
        }] => assert_eq!(key, r#"uma "a" (ordinal 0)"#),
        other => panic!("{other:?}"),
    }
    let w = problems[0].to_string();
    assert!(
        w.contains(STATE_FILE) && w.contains("\"a\"") && w.contains('7'),
        "{w}"
    );
    assert_eq!(m.len(), 2);

    // With room for 8 indexes, 7 is never handed out: the space is full after 6 others.
    let mut m = m.with_max_index(8);
    let a = m.assign(&types(&["a", "b", "c", "d", "e", "f", "g", "h"]));
    assert!(
        matches!(&a.problems[..], [IndexError::Full { .. }]),
        "{:?}",
        a.problems
    );
    assert_eq!(
        a.indexes,
        vec![
            Some(5),
            Some(1),
            Some(8),
            Some(2),
            Some(3),
            Some(4),
            Some(6),
            None
        ]
    );

    // The reserved claim is saved after the key's own entry, so a reload keeps a's row.
    let saved = saved_entries(dir.path());
    assert_eq!(saved.last(), Some(&("a".to_string(), 7)));
    let (mut m2, problems) = TypeIndexes::load(dir.path());
    assert!(
        matches!(
            &problems[..],
            [IndexError::RepeatedKey {
                kept: 5,
                reserved: 7,
                ..
            }]
        ),
        "{problems:?}"
    );
    assert_eq!(served(m2.assign(&types(&["a", "g"]))), vec![5, 6]);
}

#[test]
fn exhaustion_is_reported_once_and_nothing_is_served_twice() {
    let dir = tempfile::tempdir().unwrap();
    let (m, _) = TypeIndexes::load(dir.path());
    let mut m = m.with_max_index(3);
    assert_eq!(served(m.assign(&types(&["a", "b"]))), vec![1, 2]);
    let a = m.assign(&types(&["a", "c", "d", "e", "b"]));
    assert_eq!(a.indexes, vec![Some(1), Some(3), None, None, Some(2)]);
    assert!(
        matches!(&a.problems[..], [IndexError::Full { .. }]),
        "{:?}",
        a.problems
    );
    assert!(a.problems[0].to_string().contains("taken"));
    // Still full next time, still reported once; the known types keep being served.
    let a = m.assign(&types(&["d", "c", "e"]));
    assert_eq!(a.indexes, vec![None, Some(3), None]);
    assert_eq!(a.problems.len(), 1);
    let saved = saved_entries(dir.path());
    assert_eq!(saved.len(), 3);
    assert_distinct(saved.iter().map(|e| e.1));
}

#[test]
fn the_search_wraps_and_skips_reserved_indexes() {
    let dir = tempfile::tempdir().unwrap();
    write_state(dir.path(), &[("x", 2), ("y", 4)]);
    let (m, _) = TypeIndexes::load(dir.path());
    let mut m = m.with_max_index(6);
    // After 4 come 5 and 6, then the search wraps to 1, skips 2, takes 3.
    let got = served(m.assign(&types(&["p", "q", "r", "s"])));
    assert_eq!(got, vec![5, 6, 1, 3]);
}

#[test]
fn a_failed_save_is_reported_and_retried() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("missing");
    let (mut m, problems) = TypeIndexes::load(&state);
    assert!(problems.is_empty());
    let a = m.assign(&types(&["a"]));
    assert_eq!(a.indexes, vec![Some(1)], "still valid for this run");
    assert!(
        matches!(&a.problems[..], [IndexError::Save { path, .. }] if path.starts_with(&state)),
        "{:?}",
        a.problems
    );
    std::fs::create_dir(&state).unwrap();
    // Nothing new, but the file still lacks "a".
    assert_eq!(served(m.assign(&types(&["a"]))), vec![1]);
    assert_eq!(saved_entries(&state), vec![("a".to_string(), 1)]);
}

#[test]
fn saves_use_unique_temporary_names_and_never_follow_a_planted_link() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(STATE_FILE);
    let (a, b) = (temporary_name(&path), temporary_name(&path));
    assert_ne!(a, b);
    assert_eq!(a.parent(), Some(dir.path()));
    assert!(a
        .file_name()
        .unwrap()
        .to_string_lossy()
        .starts_with("indexes.json.tmp."));

    // Links at the old fixed temporary name and at the next unique one: neither is
    // written through, and the state file ends up a regular file of ours.
    let victim = dir.path().join("victim");
    std::fs::write(&victim, b"root only").unwrap();
    std::os::unix::fs::symlink(&victim, dir.path().join("indexes.json.tmp")).unwrap();
    let planted = temporary_name(&path);
    std::os::unix::fs::symlink(&victim, &planted).unwrap();
    let e = write_via(&planted, &path, b"{}").unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists, "{e}");
    assert!(
        std::fs::symlink_metadata(&planted).is_ok(),
        "not ours: left alone"
    );
    write_atomically(&path, b"{}").unwrap();
    assert_eq!(std::fs::read(&victim).unwrap(), b"root only");
    assert!(std::fs::symlink_metadata(&path).unwrap().is_file());
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp.") && dir.path().join(n) != planted)
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
}

#[test]
fn stale_temporaries_are_removed_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, b"keep").unwrap();
    std::fs::write(dir.path().join("indexes.json.tmp.123.0"), b"{").unwrap();
    std::os::unix::fs::symlink(&victim, dir.path().join("indexes.json.tmp.9.9")).unwrap();
    std::fs::write(dir.path().join(STATE_FILE), b"{}").unwrap();
    std::fs::write(dir.path().join("indexes.json.tmp"), b"old name").unwrap();
    assert_eq!(remove_stale_temporaries(dir.path()), 2);
    let mut left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["indexes.json", "indexes.json.tmp", "victim"]);
    assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
}

/// A kind of row as the tests of both kinds make its keys and state files.
trait Sample: RowKey + fmt::Debug {
    /// The `i`th key of this kind.
    fn sample(i: u32) -> Self;
    /// That key's entry in a state file written by hand, with `index`.
    fn sample_entry(i: u32, index: u32) -> serde_json::Value;
}

impl Sample for TypeKey {
    fn sample(i: u32) -> Self {
        uma(&format!("t{i}"), 0)
    }

    fn sample_entry(i: u32, index: u32) -> serde_json::Value {
        let name = format!("t{i}");
        serde_json::json!({"allocator": "uma", "name": name, "ordinal": 0, "index": index})
    }
}

impl Sample for SiteKey {
    fn sample(i: u32) -> Self {
        site(&format!("f{i}"))
    }

    fn sample_entry(i: u32, index: u32) -> serde_json::Value {
        site_entry(&format!("f{i}"), index, Some(1.into()))
    }
}

/// Writes kind K's state file of (sample number, index) entries, in this order.
fn write_samples<K: Sample>(dir: &Path, entries: &[(u32, u32)]) {
    let entries: Vec<serde_json::Value> = entries
        .iter()
        .map(|&(i, index)| K::sample_entry(i, index))
        .collect();
    let body = serde_json::json!({"version": K::STATE_VERSION, "entries": entries});
    std::fs::write(dir.join(K::STATE_FILE), body.to_string()).unwrap();
}

/// Serves K's first sample key, which must get index 1.
fn serve_one<K: Sample>(m: &mut StableIndexes<K>) {
    assert_eq!(
        served(m.assign_keys([&K::sample(1)], 10)),
        vec![1],
        "{}",
        K::STATE_FILE
    );
}

fn check_a_linked_state_file_is_refused<K: Sample>() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, br#"{"version": 1, "entries": []}"#).unwrap();
    std::os::unix::fs::symlink(&victim, dir.path().join(K::STATE_FILE)).unwrap();
    let (mut m, problems) = StableIndexes::<K>::load(dir.path());
    assert!(
        matches!(
            &problems[..],
            [IndexError::NotRegular {
                what: "a symbolic link",
                ..
            }]
        ),
        "{problems:?}"
    );
    assert!(problems[0].is_fatal());
    assert!(problems[0].to_string().contains(K::STATE_FILE));
    // Even if a caller went on, nothing would be saved.
    serve_one(&mut m);
    assert!(std::fs::symlink_metadata(dir.path().join(K::STATE_FILE))
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        std::fs::read(&victim).unwrap(),
        br#"{"version": 1, "entries": []}"#
    );
}

#[test]
fn a_linked_state_file_is_refused_and_never_written_through() {
    check_a_linked_state_file_is_refused::<TypeKey>();
    check_a_linked_state_file_is_refused::<SiteKey>();
}

fn check_a_fifo_as_state_file_is_refused<K: Sample>() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join(K::STATE_FILE);
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let (_, problems) = StableIndexes::<K>::load(dir.path());
    assert!(
        matches!(
            &problems[..],
            [IndexError::NotRegular { what: "a FIFO", .. }]
        ),
        "{problems:?}"
    );
    assert!(problems[0].is_fatal());
}

#[test]
fn a_fifo_as_state_file_is_refused_without_hanging() {
    check_a_fifo_as_state_file_is_refused::<TypeKey>();
    check_a_fifo_as_state_file_is_refused::<SiteKey>();
    // A device: named by its kind, never read (/dev/zero would never end).
    assert!(matches!(
        read_capped(Path::new("/dev/zero"), STATE_FILE_CAP),
        Err(IndexError::NotRegular {
            what: "a character device",
            ..
        })
    ));
}

fn check_a_state_file_over_the_cap_is_fatal<K: Sample>() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(K::STATE_FILE);
    write_samples::<K>(dir.path(), &[(1, 1), (2, 2)]);
    let size = std::fs::metadata(&path).unwrap().len();
    assert_eq!(read_state::<K>(&path, size).unwrap().entries.len(), 2);
    match read_state::<K>(&path, size - 1) {
        Err(IndexError::TooLarge { cap, .. }) => assert_eq!(cap, size - 1),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("read past the cap"),
    }
    // The real cap, with a sparse file just over it.
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(STATE_FILE_CAP + 1).unwrap();
    let (mut m, problems) = StableIndexes::<K>::load(dir.path());
    assert!(
        matches!(&problems[..], [IndexError::TooLarge { .. }]),
        "{problems:?}"
    );
    assert!(problems[0].is_fatal());
    let e = problems[0].to_string();
    assert!(
        e.contains(K::STATE_FILE) && e.contains(&STATE_FILE_CAP.to_string()),
        "{e}"
    );
    m.assign_keys([&K::sample(1)], 10);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), STATE_FILE_CAP + 1);
}

#[test]
fn a_state_file_over_the_cap_is_fatal_not_rebuilt() {
    check_a_state_file_over_the_cap_is_fatal::<TypeKey>();
    check_a_state_file_over_the_cap_is_fatal::<SiteKey>();
}

#[test]
fn a_large_state_file_loads() {
    const N: usize = 100_000;
    let dir = tempfile::tempdir().unwrap();
    let many: Vec<MemoryType> = (0..N)
        .map(|i| MemoryType::new(Allocator::Slab, format!("cache-{i}")))
        .collect();
    let (mut m, _) = TypeIndexes::load(dir.path());
    let first = served(m.assign(&many));
    let (mut m2, problems) = TypeIndexes::load(dir.path());
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(m2.len(), N);
    assert_eq!(served(m2.assign(&many)), first);
    assert_eq!(first.last(), Some(&(N as u32)));
}

// Sites: their own file, a bounded state, indexes that only grow.

fn site(function: &str) -> SiteKey {
    SiteKey {
        file: "mm/util.c".into(),
        line: 42,
        module: String::new(),
        function: function.into(),
    }
}

/// Assigns the sites of these functions, served at `now`.
fn serve(m: &mut SiteIndexes, functions: &[&str], now: u64) -> Assigned {
    let keys: Vec<SiteKey> = functions.iter().map(|f| site(f)).collect();
    m.assign_keys(&keys, now)
}

/// A site's entry in a sites' state file written by hand; `last_served` left out if None.
fn site_entry(
    function: &str,
    index: u32,
    last_served: Option<serde_json::Value>,
) -> serde_json::Value {
    let mut e = serde_json::json!({
        "file": "mm/util.c", "line": 42, "module": "", "function": function, "index": index
    });
    if let Some(t) = last_served {
        e["last_served"] = t;
    }
    e
}

/// Writes a sites' state file by hand, with `highest` left out if None.
fn write_sites(dir: &Path, highest: Option<u32>, entries: Vec<serde_json::Value>) {
    let mut body = serde_json::json!({"version": 1, "entries": entries});
    if let Some(h) = highest {
        body["highest"] = h.into();
    }
    std::fs::write(dir.join(SITES_STATE_FILE), body.to_string()).unwrap();
}

/// The sites' state file as written: every field present, nothing more.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SitesFile {
    version: u32,
    highest: u32,
    entries: Vec<SiteEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SiteEntry {
    file: String,
    line: u32,
    module: String,
    function: String,
    index: u32,
    last_served: u64,
}

/// The saved sites' file: its highest index and its (function, index, last_served) entries,
/// in file order.
fn saved_sites(dir: &Path) -> (u32, Vec<(String, u32, u64)>) {
    let body = std::fs::read(dir.join(SITES_STATE_FILE)).unwrap();
    let file: SitesFile = serde_json::from_slice(&body).unwrap();
    assert_eq!(file.version, 1);
    let entries = file
        .entries
        .into_iter()
        .map(|e| {
            assert_eq!(
                (e.file.as_str(), e.line, e.module.as_str()),
                ("mm/util.c", 42, "")
            );
            (e.function, e.index, e.last_served)
        })
        .collect();
    (file.highest, entries)
}

fn entries(list: &[(&str, u32, u64)]) -> Vec<(String, u32, u64)> {
    list.iter()
        .map(|&(f, i, t)| (f.to_string(), i, t))
        .collect()
}

#[test]
fn sites_persist_across_a_reload_in_their_own_file() {
    let dir = tempfile::tempdir().unwrap();
    let (mut m, problems) = SiteIndexes::load(dir.path());
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(served(serve(&mut m, &["a", "b", "c"], 100)), vec![1, 2, 3]);
    // Types are numbered apart, in their own file.
    let (mut t, _) = TypeIndexes::load(dir.path());
    assert_eq!(served(t.assign(&types(&["a"]))), vec![1]);
    assert_eq!(saved_entries(dir.path()), vec![("a".to_string(), 1)]);
    assert_eq!(
        saved_sites(dir.path()),
        (3, entries(&[("a", 1, 100), ("b", 2, 100), ("c", 3, 100)]))
    );

    let (mut m2, problems) = SiteIndexes::load(dir.path());
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(m2.len(), 3);
    assert_eq!(
        served(serve(&mut m2, &["c", "a", "d", "b"], 200)),
        vec![3, 1, 4, 2]
    );
    let raw: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join(SITES_STATE_FILE)).unwrap()).unwrap();
    assert_eq!(raw["entries"][0], site_entry("a", 1, Some(200.into())));
}

#[test]
fn a_site_that_vanishes_keeps_its_index() {
    let dir = tempfile::tempdir().unwrap();
    let (mut m, _) = SiteIndexes::load(dir.path());
    assert_eq!(served(serve(&mut m, &["a", "b", "c"], 10)), vec![1, 2, 3]);
    // "b" vanishes, "d" appears: d gets a new index, b keeps its own.
    assert_eq!(served(serve(&mut m, &["a", "c", "d"], 20)), vec![1, 3, 4]);
    assert_eq!(served(serve(&mut m, &["b"], 30)), vec![2]);
    assert_eq!(m.len(), 4);
    let (mut m2, _) = SiteIndexes::load(dir.path());
    assert_eq!(served(serve(&mut m2, &["d", "b"], 40)), vec![4, 2]);
}

#[test]
fn the_bound_forgets_the_longest_unserved_first() {
    let dir = tempfile::tempdir().unwrap();
    let (m, _) = SiteIndexes::load(dir.path());
    let mut m = m.with_max_entries(3);
    assert_eq!(served(serve(&mut m, &["a", "b", "c"], 10)), vec![1, 2, 3]);
    assert_eq!(served(serve(&mut m, &["c"], 20)), vec![3]);
    assert_eq!(served(serve(&mut m, &["a"], 30)), vec![1]);
    // b was served the longest ago (10).
    assert_eq!(served(serve(&mut m, &["d"], 40)), vec![4]);
    assert_eq!(m.len(), 3);
    assert_eq!(
        saved_sites(dir.path()),
        (4, entries(&[("a", 1, 30), ("c", 3, 20), ("d", 4, 40)]))
    );
    // Then c (20).
    assert_eq!(served(serve(&mut m, &["e"], 50)), vec![5]);
    // Never a site served in the same call, even one served longer ago than the others:
    // a (30) and d (40) are served now, so e (50) goes.
    assert_eq!(served(serve(&mut m, &["a", "f", "d"], 60)), vec![1, 6, 4]);
    assert_eq!(
        saved_sites(dir.path()),
        (6, entries(&[("a", 1, 60), ("d", 4, 60), ("f", 6, 60)]))
    );
}

#[test]
fn a_forgotten_site_that_returns_gets_a_new_higher_index() {
    let dir = tempfile::tempdir().unwrap();
    let (m, _) = SiteIndexes::load(dir.path());
    let mut m = m.with_max_entries(2);
    assert_eq!(served(serve(&mut m, &["a", "b"], 10)), vec![1, 2]);
    // a and b tie: the lower index, the older assignment, is forgotten first.
    assert_eq!(served(serve(&mut m, &["c"], 20)), vec![3]);
    // a returns: its old row 1 is not given back (a poller may have graphed it), nor to
    // anyone else.
    assert_eq!(served(serve(&mut m, &["a"], 30)), vec![4]);
    assert_eq!(
        saved_sites(dir.path()),
        (4, entries(&[("c", 3, 20), ("a", 4, 30)]))
    );
}

#[test]
fn forgotten_indexes_are_never_reused_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (m, _) = SiteIndexes::load(dir.path());
    let mut m = m.with_max_entries(2).with_max_index(3);
    assert_eq!(served(serve(&mut m, &["a", "b"], 10)), vec![1, 2]);
    assert_eq!(served(serve(&mut m, &["c"], 20)), vec![3]);
    assert_eq!(saved_sites(dir.path()).0, 3);

    // Index 1 belongs to no one now, but was a's: with the space 1..=3 it cannot be
    // handed out, after a restart as before.
    let (m, problems) = SiteIndexes::load(dir.path());
    assert!(problems.is_empty(), "{problems:?}");
    let mut m = m.with_max_entries(2).with_max_index(3);
    let a = serve(&mut m, &["a"], 30);
    assert_eq!(a.indexes, vec![None]);
    match &a.problems[..] {
        [IndexError::Full {
            kind: IndexKind::Site,
        }] => {}
        other => panic!("{other:?}"),
    }
    let w = a.problems[0].to_string();
    assert!(
        w.contains("memAllocSiteIndex") && w.contains("new sites"),
        "{w}"
    );
    assert_eq!(
        m.len(),
        2,
        "nothing forgotten for a site that gets no index"
    );
    let (mut m, _) = SiteIndexes::load(dir.path());
    assert_eq!(served(serve(&mut m, &["a"], 40)), vec![4]);

    // The mark is kept even when no entry is that high any more, is derived from the
    // entries when missing, and is raised by an entry above it.
    for (highest, top, next) in [(Some(7), 1, 8), (None, 5, 6), (Some(2), 5, 6)] {
        write_sites(dir.path(), highest, vec![site_entry("a", top, None)]);
        let (mut m, problems) = SiteIndexes::load(dir.path());
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(served(serve(&mut m, &["a", "b"], 50)), vec![top, next]);
        assert_eq!(saved_sites(dir.path()).0, next);
    }
}

#[test]
fn more_sites_served_than_kept_get_none_and_one_problem() {
    let dir = tempfile::tempdir().unwrap();
    let (m, _) = SiteIndexes::load(dir.path());
    let mut m = m.with_max_entries(3);
    assert_eq!(served(serve(&mut m, &["x"], 1)), vec![1]);
    // x, not served now, makes room; then there is none for d and e.
    let a = serve(&mut m, &["a", "b", "c", "d", "e"], 2);
    assert_eq!(a.indexes, vec![Some(2), Some(3), Some(4), None, None]);
    match &a.problems[..] {
        [IndexError::TooManyServed {
            kind: IndexKind::Site,
            max_entries: 3,
        }] => {}
        other => panic!("{other:?}"),
    }
    let w = a.problems[0].to_string();
    assert!(w.contains("more than 3 sites"), "{w}");
    let saved = saved_sites(dir.path());
    assert_eq!(
        saved,
        (4, entries(&[("a", 2, 2), ("b", 3, 2), ("c", 4, 2)]))
    );

    // The same again: the same rows, the problem once more, nothing forgotten or saved.
    let a = serve(&mut m, &["a", "b", "c", "d", "e"], 3);
    assert_eq!(a.indexes, vec![Some(2), Some(3), Some(4), None, None]);
    assert_eq!(a.problems.len(), 1);
    assert_eq!(saved_sites(dir.path()), saved);
    // Served alone, d makes room by forgetting a (a, b, c all served at 3: lowest index).
    assert_eq!(served(serve(&mut m, &["d"], 4)), vec![5]);
}

#[test]
fn serving_alone_does_not_rewrite_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(SITES_STATE_FILE);
    let (mut m, _) = SiteIndexes::load(dir.path());
    assert_eq!(served(serve(&mut m, &["a"], 10)), vec![1]);
    let first = std::fs::read(&path).unwrap();
    let inode = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&path).unwrap());
    for now in [20, 30, 40] {
        assert_eq!(served(serve(&mut m, &["a"], now)), vec![1]);
    }
    // Not rewritten: a save renames a new file into place.
    assert_eq!(
        std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&path).unwrap()),
        inode
    );
    assert_eq!(std::fs::read(&path).unwrap(), first);
    // A new site saves, and with it every entry's latest last_served.
    assert_eq!(served(serve(&mut m, &["b"], 50)), vec![2]);
    assert_eq!(
        saved_sites(dir.path()),
        (2, entries(&[("a", 1, 40), ("b", 2, 50)]))
    );
}

#[test]
fn last_served_from_the_file_is_taken_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    write_sites(
        dir.path(),
        None,
        vec![
            site_entry("future", 1, Some(u64::MAX.into())),
            site_entry("missing", 2, None),
            site_entry("old", 3, Some(5.into())),
            site_entry("later", 4, Some(1000.into())),
        ],
    );
    let (m, problems) = SiteIndexes::load(dir.path());
    assert!(problems.is_empty(), "{problems:?}");
    let mut m = m.with_max_entries(4);
    // Forgotten in the order of last_served: missing (0), old (5), then the new sites
    // served before 1000; "later" and "future" stay.
    assert_eq!(served(serve(&mut m, &["n1"], 500)), vec![5]);
    assert_eq!(served(serve(&mut m, &["n2"], 600)), vec![6]);
    assert_eq!(served(serve(&mut m, &["n3"], 700)), vec![7]);
    assert_eq!(served(serve(&mut m, &["n4"], 800)), vec![8]);
    assert_eq!(
        saved_sites(dir.path()),
        (
            8,
            entries(&[
                ("future", 1, u64::MAX),
                ("later", 4, 1000),
                ("n3", 7, 700),
                ("n4", 8, 800)
            ])
        )
    );
    // Then "later" (1000): the one from the future is kept over every other.
    assert_eq!(
        served(serve(&mut m, &["n5", "n6", "n7"], 900)),
        vec![9, 10, 11]
    );
    assert_eq!(
        saved_sites(dir.path()).1[0],
        ("future".to_string(), 1, u64::MAX)
    );
    // Until it is the only one not served.
    assert_eq!(
        served(serve(&mut m, &["n5", "n6", "n7", "n8"], 950)),
        vec![9, 10, 11, 12]
    );
    assert!(saved_sites(dir.path()).1.iter().all(|e| e.0 != "future"));

    // A value that is no u64 is a bad field like any other: the file is corrupt.
    for bad in [
        serde_json::json!(-1),
        serde_json::json!(1.5),
        serde_json::json!("now"),
    ] {
        write_sites(dir.path(), None, vec![site_entry("a", 1, Some(bad))]);
        let (_, problems) = SiteIndexes::load(dir.path());
        assert!(
            matches!(&problems[..], [IndexError::Corrupt { .. }]),
            "{problems:?}"
        );
    }
}

#[test]
fn a_corrupt_site_entry_is_repaired_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(SITES_STATE_FILE);
    write_sites(
        dir.path(),
        Some(3),
        vec![
            site_entry("a", 1, Some(7.into())),
            site_entry("b", 2, None),
            site_entry("dup", 2, None),
            site_entry("zero", 0, None),
            site_entry("e", 3, None),
        ],
    );
    let (mut m, problems) = SiteIndexes::load(dir.path());
    match &problems[..] {
        [IndexError::Duplicate {
            path: p1,
            kind: IndexKind::Site,
            index: 2,
            key: k1,
        }, IndexError::ZeroIndex {
            path: p2,
            kind: IndexKind::Site,
            key: k2,
        }] => {
            assert_eq!((p1, p2), (&path, &path));
            assert_eq!(
                (k1.as_str(), k2.as_str()),
                ("mm/util.c:42 func:dup", "mm/util.c:42 func:zero")
            );
        }
        other => panic!("{other:?}"),
    }
    let dup = problems[0].to_string();
    assert!(
        dup.contains(SITES_STATE_FILE)
            && dup.contains("index 2")
            && dup.contains("func:dup")
            && dup.contains("the site gets a new index"),
        "{dup}"
    );
    let zero = problems[1].to_string();
    assert!(
        zero.contains("not a valid memAllocSiteIndex") && zero.contains("func:zero"),
        "{zero}"
    );
    assert_eq!(m.len(), 3, "only the offenders are dropped");
    assert_eq!(
        served(serve(&mut m, &["a", "b", "dup", "zero", "e"], 10)),
        vec![1, 2, 4, 5, 3]
    );
    let (mut m2, problems) = SiteIndexes::load(dir.path());
    assert!(problems.is_empty(), "repaired: {problems:?}");
    assert_eq!(
        served(serve(&mut m2, &["e", "zero", "dup", "b", "a"], 20)),
        vec![3, 5, 4, 2, 1]
    );
}

#[test]
fn a_site_listed_twice_keeps_its_first_index_and_the_other_is_never_reused() {
    let dir = tempfile::tempdir().unwrap();
    write_sites(
        dir.path(),
        None,
        vec![
            site_entry("a", 5, None),
            site_entry("b", 1, None),
            site_entry("a", 7, None),
        ],
    );
    let (mut m, problems) = SiteIndexes::load(dir.path());
    match &problems[..] {
        [IndexError::RepeatedKey {
            key,
            kept: 5,
            reserved: 7,
            ..
        }] => assert_eq!(key, "mm/util.c:42 func:a"),
        other => panic!("{other:?}"),
    }
    assert_eq!(served(serve(&mut m, &["a", "c"], 10)), vec![5, 8]);
    // The high mark keeps 7 from coming back, so the extra claim need not be saved, and the
    // repaired file loads cleanly (a types' file keeps the claim, and the warning).
    assert_eq!(
        saved_sites(dir.path()),
        (8, entries(&[("b", 1, 0), ("a", 5, 10), ("c", 8, 10)]))
    );
    let (mut m2, problems) = SiteIndexes::load(dir.path());
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(served(serve(&mut m2, &["a", "d"], 20)), vec![5, 9]);
}

#[test]
fn a_file_over_the_bound_keeps_the_latest_served() {
    // Loading applies MAX_SITE_ENTRIES; restore is given a shrunk bound, so that the file
    // need not hold 65,537 entries.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(SITES_STATE_FILE);
    write_sites(
        dir.path(),
        Some(9),
        vec![
            site_entry("a", 1, Some(30.into())),
            site_entry("b", 2, Some(10.into())),
            site_entry("c", 3, Some(20.into())),
            site_entry("d", 4, Some(40.into())),
        ],
    );
    let file = read_state::<SiteKey>(&path, STATE_FILE_CAP).unwrap();
    let mut m = SiteIndexes::in_memory().with_max_entries(2);
    let mut problems = Vec::new();
    m.restore(file, &path, &mut problems);
    match &problems[..] {
        [IndexError::TooManyEntries {
            kind: IndexKind::Site,
            entries: 4,
            max_entries: 2,
            ..
        }] => {}
        other => panic!("{other:?}"),
    }
    let w = problems[0].to_string();
    assert!(
        w.contains(SITES_STATE_FILE) && w.contains("the 2 sites unserved the longest"),
        "{w}"
    );
    assert_eq!(m.len(), 2);
    assert_eq!(served(serve(&mut m, &["a", "d"], 50)), vec![1, 4]);
    // b and c were forgotten: b returns with an index above the file's mark.
    assert_eq!(served(serve(&mut m, &["b"], 60)), vec![10]);
}

#[test]
fn a_site_is_shown_as_the_kernel_writes_its_tag() {
    let mut key = SiteKey {
        file: "fs/xfs/kmem.c".into(),
        line: 7,
        module: "xfs".into(),
        function: "kmem_alloc".into(),
    };
    assert_eq!(shown(&key), "fs/xfs/kmem.c:7 [xfs] func:kmem_alloc");
    // A warning stays one line whatever the names hold.
    key.module = String::new();
    key.function = "evil\nline".into();
    assert_eq!(shown(&key), r"fs/xfs/kmem.c:7 func:evil\nline");
}

#[test]
fn stale_site_temporaries_are_removed_too() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("sites.json.tmp.123.0"), b"{").unwrap();
    std::fs::write(dir.path().join("indexes.json.tmp.123.1"), b"{").unwrap();
    std::fs::write(dir.path().join(SITES_STATE_FILE), b"{}").unwrap();
    std::fs::write(dir.path().join("sites.json.tmpx"), b"not ours").unwrap();
    assert_eq!(remove_stale_temporaries(dir.path()), 2);
    let mut left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["sites.json", "sites.json.tmpx"]);
}

#[test]
fn forgetting_50_000_sites_at_once_scans_the_entries_once() {
    let numbered = |prefix: &str, n: usize| -> Vec<SiteKey> {
        (0..n).map(|i| site(&format!("{prefix}{i}"))).collect()
    };
    let mut m = SiteIndexes::in_memory();
    let first = numbered("old", MAX_SITE_ENTRIES);
    let a = m.assign_keys(&first, 1);
    assert!(a.problems.is_empty() && a.indexes.iter().all(Option::is_some));
    assert_eq!(m.eviction_scans.get(), 0, "not full before the last key");

    let second = numbered("new", 50_000);
    let got = served(m.assign_keys(&second, 2));
    let expected: Vec<u32> = (MAX_SITE_ENTRIES as u32 + 1..).take(50_000).collect();
    assert_eq!(got, expected);
    assert_eq!(m.eviction_scans.get(), 1, "one scan for the whole call");
    assert_eq!(m.len(), MAX_SITE_ENTRIES);
    // All tied at 1: the lowest indexes went, the rest of the old sites are kept.
    assert!(!m.by_key.contains_key(&first[49_999]));
    let rest = served(m.assign_keys(&first[50_000..], 3));
    assert_eq!(rest, (50_001..=MAX_SITE_ENTRIES as u32).collect::<Vec<_>>());
    assert_eq!(m.eviction_scans.get(), 1, "no new site, no scan");
}
