//! The fixture source: a JSON file in exactly the format `dump --format json` prints.
//!
//! It is re-read at every refresh, so tests can change the figures by rewriting the file, any
//! real dump can be replayed on another host, and hosts whose kernel data cannot be read can
//! still run the daemon.

use super::{Snapshot, SourceError};
use std::io::Read as _;
use std::path::Path;

/// A fixture larger than this is refused rather than read into memory.
pub const MAX_FIXTURE_BYTES: u64 = 512 * 1024 * 1024;

/// Reads and parses a fixture file.
pub fn read(path: &Path) -> Result<Snapshot, SourceError> {
    let what = path.display().to_string();
    let io_err = |e: std::io::Error| SourceError::from_io(&what, &e, "fixture file");
    let file = std::fs::File::open(path).map_err(io_err)?;
    let len = file.metadata().map_err(io_err)?.len();
    if len > MAX_FIXTURE_BYTES {
        return Err(SourceError::Malformed {
            what,
            location: format!("byte {MAX_FIXTURE_BYTES}"),
            field: String::new(),
            message: "fixture is larger than 512 MiB".into(),
        });
    }
    // Parsed from a buffered reader, not from the file read whole: a large fixture (100,000
    // types is about 50 MiB of JSON) would otherwise double the daemon's peak memory. The
    // `take` bounds a file that grows while it is read.
    let reader = std::io::BufReader::with_capacity(64 * 1024, file.take(MAX_FIXTURE_BYTES));
    serde_json::from_reader(reader).map_err(|e| json_error(e, &what))
}

fn json_error(e: serde_json::Error, what: &str) -> SourceError {
    if e.is_io() {
        return SourceError::Io {
            what: what.into(),
            message: e.to_string(),
        };
    }
    SourceError::Malformed {
        what: what.into(),
        location: format!("line {} column {}", e.line(), e.column()),
        field: String::new(),
        message: e.to_string(),
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
    fn round_trips_including_absent_figures_and_big_values() {
        let mut t = MemoryType::new(Allocator::Uma, "mbuf");
        t.size = Some(256);
        t.allocs = Some(u64::MAX - 1);
        t.per_cpu = vec![PerCpu {
            cpu: 1,
            allocs: Some(5),
            frees: None,
            cache_free: Some(2),
        }];
        let s = Snapshot::new(
            7,
            UNIX_EPOCH + Duration::from_millis(1234),
            "x".into(),
            vec![t],
        );
        let j = to_json(&s);
        assert!(!j.contains("failures"), "absent figures are omitted: {j}");
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
}
