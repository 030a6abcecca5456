use super::*;
use crate::boundedfile::FileError;
use crate::memstat::error::{file_error, open_regular, refuse_if_not_regular};
use crate::memstat::{Allocator, PerCpu};
use std::path::Path;

fn spec(s: &str) -> SourceSpec {
    s.parse().unwrap()
}

#[test]
fn parses_entries_and_lists_from_the_registry() {
    assert_eq!("auto".parse::<SourceChoice>().unwrap(), SourceChoice::Auto);
    let f = spec("fixture:/x.json");
    assert_eq!(
        (f.def.name, f.path.as_deref()),
        ("fixture", Some(Path::new("/x.json")))
    );
    // A source with a default file reads it when named alone, and shows it.
    assert_eq!(spec("linux").to_string(), "linux:/proc/slabinfo");
    assert_eq!(spec("freebsd").to_string(), "freebsd");
    let list: SourceChoice = "linux, fixture:/a.json".parse().unwrap();
    assert_eq!(list.to_string(), "linux:/proc/slabinfo,fixture:/a.json");
    assert_eq!(list.to_string().parse::<SourceChoice>().unwrap(), list);
    for (bad, says) in [
        ("bogus", "unknown source \"bogus\""),
        ("fixture:", "empty"),
        ("fixture", "needs a path"),
        ("freebsd:/x", "takes no path"),
        ("linux,auto", "auto stands alone"),
        ("linux,linux", "listed twice"),
        ("linux,", "unknown source \"\""),
    ] {
        let e = bad.parse::<SourceChoice>().unwrap_err().to_string();
        assert!(e.contains(says), "{bad}: {e}");
    }
    // The error lists every source of the registry.
    let e = "bogus".parse::<SourceChoice>().unwrap_err().to_string();
    for d in SOURCES {
        assert!(e.contains(&usage(d)), "{e}");
    }
}

#[test]
fn auto_is_every_source_the_registry_names_for_this_platform() {
    let want: Vec<&str> = SOURCES
        .iter()
        .filter(|d| d.auto_on.is_some_and(Os::is_this_one))
        .map(|d| d.name)
        .collect();
    match SourceChoice::Auto.resolve() {
        Ok(specs) => {
            let got: Vec<&str> = specs.iter().map(|s| s.def.name).collect();
            assert_eq!(got, want);
        }
        Err(e) => {
            assert!(want.is_empty(), "{e}");
            assert!(e.to_string().contains("fixture:PATH"), "{e}");
        }
    }
    if cfg!(target_os = "linux") {
        assert_eq!(want, ["linux", "meminfo", "arcstats", "allocinfo"]);
    }
}

#[test]
fn every_definition_is_consistent() {
    let mut names: Vec<&str> = SOURCES.iter().map(|d| d.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), SOURCES.len(), "names are unique");
    for d in SOURCES {
        assert!(!d.name.contains([':', ',']) && !d.name.is_empty(), "{d:?}");
        assert!(!d.summary.is_empty(), "{d:?}");
        assert!(help_text().contains(&usage(d)), "{d:?}");
        // Only a source that fills anything can replay another host: it needs no kernel.
        if d.fills == Fills::Anything {
            assert!(d.auto_on.is_none(), "{d:?}");
        }
    }
}

fn mkfifo(p: &Path) {
    let st = std::process::Command::new("mkfifo")
        .arg(p)
        .status()
        .unwrap();
    assert!(st.success(), "mkfifo {}", p.display());
}

#[test]
fn a_fifo_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("fifo");
    mkfifo(&p);
    // No writer ever opens it: a blocking open would hang this test.
    let e = open_regular(&p, "x").unwrap_err().to_string();
    assert!(
        e.contains(&p.display().to_string()) && e.contains("FIFO"),
        "{e}"
    );
    let e = refuse_if_not_regular(&p).unwrap_err().to_string();
    assert!(e.contains("not a regular file"), "{e}");
    for kind in ["fixture", "linux"] {
        let choice: SourceChoice = format!("{kind}:{}", p.display()).parse().unwrap();
        let e = Sources::open(&choice).err().unwrap().to_string();
        assert!(e.contains("FIFO"), "{kind}: {e}");
    }
    let e = open_regular(Path::new("/dev/zero"), "x")
        .unwrap_err()
        .to_string();
    assert!(e.contains("character device"), "{e}");
    // A missing fixture is not refused at open: it may appear later.
    let later: SourceChoice = format!("fixture:{}", dir.path().join("later.json").display())
        .parse()
        .unwrap();
    assert!(Sources::open(&later).is_ok());
}

#[test]
fn refusals_keep_the_source_wording() {
    let e = file_error("f", "x", FileError::TooLarge { cap: 64 << 20 }).to_string();
    assert_eq!(
        e,
        "f: larger than 64 MiB (67108864 bytes), the most this source reads; refused"
    );
    let e = file_error("f", "x", FileError::NotRegular("a socket")).to_string();
    assert_eq!(
        e,
        "f: is a socket, not a regular file; a file source must be a regular file"
    );
    let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
    assert_eq!(
        file_error("f", "run as root", FileError::Io(denied)),
        SourceError::PermissionDenied {
            what: "f".into(),
            hint: "run as root".into()
        }
    );
}

#[test]
fn no_source_emits_a_cpu_beyond_the_mib_range_or_another_sources_rows() {
    let mut t = MemoryType::new(Allocator::Uma, "z");
    t.per_cpu = vec![PerCpu {
        cpu: 70_000,
        ..Default::default()
    }];
    let e = check_rows(vec![t.clone()], "freebsd", Fills::Anything)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("freebsd") && e.contains("cpu") && e.contains("70000"),
        "{e}"
    );
    t.per_cpu[0].cpu = MAX_CPU_INDEX;
    assert!(check_rows(vec![t.clone()], "freebsd", Fills::Anything).is_ok());
    let slab_only = Fills::Allocators(&[Allocator::Slab]);
    let e = check_rows(vec![t], "linux:/x", slab_only)
        .unwrap_err()
        .to_string();
    assert!(e.contains("linux:/x") && e.contains("no uma types"), "{e}");
}

#[test]
fn several_sources_read_as_one_list_and_each_fails_alone() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, types: Vec<MemoryType>| {
        let p = dir.path().join(name);
        let s = crate::memstat::Snapshot::new(0, std::time::UNIX_EPOCH, String::new(), types);
        std::fs::write(&p, crate::memstat::fixture::to_json(&s)).unwrap();
        p
    };
    let a = write("a.json", vec![MemoryType::new(Allocator::Uma, "z")]);
    let b = write("b.json", vec![MemoryType::new(Allocator::Uma, "z")]);
    let choice: SourceChoice = format!("fixture:{},fixture:{}", a.display(), b.display())
        .parse()
        .unwrap();
    let mut sources = Sources::open(&choice).unwrap();
    assert_eq!(sources.names().len(), 2);
    let read = sources.read();
    assert_eq!(read.parts.len(), 2);
    // The union, with ordinals over both: the second "z" is the second of its name.
    let all = read.merged().unwrap();
    assert_eq!(
        all.types.iter().map(|t| t.ordinal).collect::<Vec<_>>(),
        [0, 1]
    );
    std::fs::write(&b, "not json").unwrap();
    let read = sources.read();
    assert!(read.parts[0].is_ok());
    let e = read.parts[1].as_ref().unwrap_err().to_string();
    assert!(e.contains("b.json") && e.contains("line 1"), "{e}");
}
