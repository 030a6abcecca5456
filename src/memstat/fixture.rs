//! The fixture source: a JSON file in exactly the format `dump --format json` prints.
//!
//! It is re-read at every refresh, so tests can change the figures by rewriting the file, any
//! real dump can be replayed on another host, and hosts whose kernel data cannot be read can
//! still run the daemon.

use super::error::{file_error, open_regular, refuse_if_not_regular};
use super::source_def::{Fills, Opening, PathRule, Reading, SourceDef};
use super::{Snapshot, SourceData, SourceError};
use crate::boundedfile::FileError;
use serde::Deserialize as _;
use std::io::Read as _;
use std::path::Path;

/// The `fixture` source: a JSON file as `dump --format json` prints it, with any data a
/// snapshot holds, so that any host can be replayed on another.
pub const SOURCE: SourceDef = SourceDef {
    module: module_path!(),
    name: "fixture",
    summary: "a JSON file as dump --format json prints it, re-read at every refresh",
    path: PathRule::Required,
    auto_on: None,
    opening: Opening::Reopened,
    fills: Fills::Anything,
    saved_copy: true,
    groups: &[],
    kinds: &[],
    open: open_source,
};

fn open_source(path: Option<&Path>) -> Result<Box<dyn Reading>, SourceError> {
    let path = path.ok_or_else(|| SourceError::Unavailable {
        message: "the fixture source needs a path: fixture:PATH".into(),
    })?;
    // Refused now rather than at the first refresh: a FIFO or device named by mistake is a
    // configuration error the operator should see at start-up. A missing file is not: it
    // may appear later, and the read says it is missing.
    refuse_if_not_regular(path)?;
    Ok(Box::new(FixtureFile(path.to_path_buf())))
}

/// A fixture source: only its path, since it is opened again at every read.
struct FixtureFile(std::path::PathBuf);

impl Reading for FixtureFile {
    fn read(&mut self) -> Result<SourceData, SourceError> {
        read(&self.0).map(|s| SourceData {
            types: s.types,
            figures: s.figures,
            profiling: s.profiling,
        })
    }
}

/// A fixture larger than this is refused rather than read into memory.
pub const MAX_FIXTURE_BYTES: u64 = 512 * 1024 * 1024;

/// The largest fixture read whole before it is parsed (see [`read`]).
const WHOLE_READ_BYTES: u64 = 8 * 1024 * 1024;

/// Reads and parses a fixture file. Anything but a regular file is refused (see
/// [`crate::boundedfile`]), and so is a file larger than [`MAX_FIXTURE_BYTES`].
pub fn read(path: &Path) -> Result<Snapshot, SourceError> {
    let what = path.display().to_string();
    let (file, meta) = open_regular(path, "fixture file")?;
    let cap = MAX_FIXTURE_BYTES;
    let too_large = || file_error(&what, "", FileError::TooLarge { cap });
    if meta.len() > cap {
        return Err(too_large());
    }
    // A fixture of up to WHOLE_READ_BYTES is read whole and parsed from memory, which
    // serde_json does several times faster than from a reader (byte by byte): `top` reads a
    // fixture every second. A larger one (100,000 types is about 50 MiB of JSON) is parsed
    // from a buffered reader, so as not to double the daemon's peak memory; a file that grew
    // past the first read's bound goes on that way, from the bytes already read. The `take`
    // bounds a file that grows while it is read; one byte past the cap tells a file over the
    // cap from one exactly at it.
    let mut head = Vec::new();
    (&file)
        .take(WHOLE_READ_BYTES + 1)
        .read_to_end(&mut head)
        .map_err(|e| SourceError::from_io(&what, &e, "fixture file"))?;
    if head.len() as u64 <= WHOLE_READ_BYTES {
        return parse(&head, &what);
    }
    let read_so_far = head.len() as u64;
    let rest = file.take(cap + 1 - read_so_far);
    let mut reader =
        std::io::BufReader::with_capacity(64 * 1024, std::io::Cursor::new(head).chain(rest));
    let mut de = serde_json::Deserializer::from_reader(&mut reader);
    let parsed = Snapshot::deserialize(&mut de).and_then(|s| de.end().map(|()| s));
    if reader.get_ref().get_ref().1.limit() == 0 {
        return Err(too_large());
    }
    parsed.map_err(|e| json_error(e, &what))
}

fn json_error(e: serde_json::Error, what: &str) -> SourceError {
    if e.is_io() {
        return SourceError::Io {
            what: what.into(),
            message: e.to_string(),
        };
    }
    // serde_json's message ends with the position, which `location` already gives.
    let location = format!("line {} column {}", e.line(), e.column());
    let text = e.to_string();
    let message = text
        .strip_suffix(&format!(" at {location}"))
        .unwrap_or(&text)
        .to_string();
    SourceError::Malformed {
        what: what.into(),
        location,
        field: String::new(),
        message,
    }
}

/// Parses fixture JSON; errors carry the line and column.
pub fn parse(text: &[u8], what: &str) -> Result<Snapshot, SourceError> {
    serde_json::from_slice(text).map_err(|e| json_error(e, what))
}

/// Renders a snapshot as fixture JSON (what `dump --format json` prints).
pub fn to_json(s: &Snapshot) -> String {
    serde_json::to_string_pretty(s).expect("a snapshot always serializes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memstat::{Allocator, MemoryType, PerCpu};
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn a_malformed_fixture_gives_its_position_once() {
        let e = parse(b"not json", "f.json").unwrap_err().to_string();
        assert_eq!(e, "f.json: line 1 column 2: expected ident");
        let e = parse(b"{\n  \"types\": 3\n}", "f.json")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("f.json: line 2 column "), "{e}");
        assert_eq!(e.matches("line 2").count(), 1, "{e}");
    }

    #[test]
    fn a_fixture_past_the_whole_read_is_parsed_from_what_was_read_and_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.json");
        let types: Vec<MemoryType> = (0..60_000)
            .map(|i| {
                let mut t = MemoryType::new(Allocator::Uma, format!("zone_{i:08}"));
                t.size = Some(i);
                t.allocs = Some(u64::MAX - i);
                t
            })
            .collect();
        let s = Snapshot::new(0, UNIX_EPOCH, "big".into(), types);
        let json = to_json(&s);
        assert!(json.len() as u64 > WHOLE_READ_BYTES, "{} bytes", json.len());
        std::fs::write(&path, &json).unwrap();
        let back = read(&path).unwrap();
        assert_eq!(back.types.len(), 60_000);
        assert_eq!(back.types[59_999].allocs, Some(u64::MAX - 59_999));
        // And a small one, read whole, the same way.
        let small = Snapshot::new(0, UNIX_EPOCH, "small".into(), s.types[..3].to_vec());
        std::fs::write(&path, to_json(&small)).unwrap();
        assert_eq!(read(&path).unwrap().types, small.types);
        // A bad byte past the whole read is named by its line, as one before it.
        let mut bad = json.clone().into_bytes();
        let at = bad.len() - 10;
        bad[at] = b'@';
        std::fs::write(&path, &bad).unwrap();
        let e = read(&path).unwrap_err().to_string();
        assert!(e.contains("line "), "{e}");
    }

    #[test]
    fn round_trips_including_absent_figures_and_big_values() {
        let mut t = MemoryType::new(Allocator::Uma, "mbuf");
        t.size = Some(256);
        t.allocs = Some(u64::MAX - 1);
        t.per_cpu = vec![PerCpu {
            cpu: 1,
            allocs: Some(5),
            frees: None,
            cache_free: Some(2),
            bytes_allocated: Some(u64::MAX),
            bytes_freed: None,
            size_mask: Some(1 << 63),
        }];
        let s = Snapshot::new(
            7,
            UNIX_EPOCH + Duration::from_millis(1234),
            "x".into(),
            vec![t],
        );
        let j = to_json(&s);
        assert!(
            !j.contains("figures"),
            "no kernel-wide figures, no key: {j}"
        );
        let mut with = s.clone();
        with.figures
            .insert("vmstat.nr_slab_reclaimable".into(), u64::MAX);
        assert_eq!(parse(to_json(&with).as_bytes(), "f").unwrap(), with);
        assert!(!j.contains("failures"), "absent figures are omitted: {j}");
        // Per-CPU bytes and size mask are in the JSON, an absent one is not.
        assert!(
            j.contains(r#""bytes_allocated": 18446744073709551615"#),
            "{j}"
        );
        assert!(j.contains(r#""size_mask": 9223372036854775808"#), "{j}");
        assert!(!j.contains("bytes_freed"), "{j}");
        assert_eq!(parse(j.as_bytes(), "f").unwrap(), s);
    }

    #[test]
    fn errors_name_file_and_line() {
        let m = parse(
            b"{\n \"types\": [ {\"allocator\": \"bogus\"} ]\n}",
            "/tmp/f.json",
        )
        .unwrap_err()
        .to_string();
        assert!(m.contains("/tmp/f.json") && m.contains("line 2"), "{m}");
        let m = read(Path::new("/nonexistent/f.json"))
            .unwrap_err()
            .to_string();
        assert!(m.contains("/nonexistent/f.json"), "{m}");
    }

    #[test]
    fn a_cpu_beyond_the_mib_range_names_file_line_and_field() {
        for cpu in ["70000", "4294967295", "18446744073709551615"] {
            let text = format!(
                "{{\n \"types\": [\n  {{\"allocator\": \"uma\", \"name\": \"z\",\n   \"per_cpu\": [\n    {{\"cpu\": {cpu}}}]}}]\n}}"
            );
            let m = parse(text.as_bytes(), "/tmp/f.json")
                .unwrap_err()
                .to_string();
            assert!(
                m.contains("/tmp/f.json") && m.contains("line 5") && m.contains("field cpu"),
                "{m}"
            );
        }
        let ok = "{\"types\": [{\"allocator\": \"uma\", \"name\": \"z\", \"per_cpu\": [{\"cpu\": 65535}]}]}";
        assert_eq!(
            parse(ok.as_bytes(), "f").unwrap().types[0].per_cpu[0].cpu,
            65535
        );
    }

    #[test]
    fn a_fixture_over_the_cap_is_refused_unread() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("big.json");
        // Sparse: no disk used, and the size alone refuses it.
        std::fs::File::create(&p)
            .unwrap()
            .set_len(MAX_FIXTURE_BYTES + 1)
            .unwrap();
        let m = read(&p).unwrap_err().to_string();
        assert!(
            m.contains(&p.display().to_string()) && m.contains("512 MiB"),
            "{m}"
        );
    }
}
