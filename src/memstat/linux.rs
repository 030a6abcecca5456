//! Linux slab caches from /proc/slabinfo, format version 2.1.
//!
//! The file is readable by root alone. The reader opens it once (while the daemon is still
//! privileged) and keeps the descriptor, re-reading from offset 0 at every refresh, so the
//! daemon can drop to an unprivileged user and still refresh.
//!
//! A 2.1 line reads
//! `name active_objs num_objs objsize objperslab pagesperslab : tunables l b s : slabdata active_slabs num_slabs sharedavail`.

use super::display::{bytes, display_name, opt, Sizes};
use super::kept::KeptFile;
use super::source_def::{Fills, Opening, Os, PathRule, Reading, SourceDef};
use super::AllocatorDef;
use super::{Allocator, MemoryType, SourceData, SourceError};
use std::fmt::Write as _;
use std::path::Path;

pub const SLABINFO: &str = "/proc/slabinfo";

/// The `linux` source: the slab caches of /proc/slabinfo, or of another file in its format.
pub const SOURCE: SourceDef = SourceDef {
    module: module_path!(),
    name: "linux",
    summary: "the Linux kernel's slab caches (/proc/slabinfo, or PATH in its format)",
    path: PathRule::Default(SLABINFO),
    auto_on: Some(Os::Linux),
    opening: Opening::KeptOpen,
    fills: Fills::Allocators(&[Allocator::Slab]),
    saved_copy: false,
    groups: &[],
    kinds: &[],
    open: open_source,
};

fn open_source(path: Option<&Path>) -> Result<Box<dyn Reading>, SourceError> {
    let path = path.unwrap_or(Path::new(SLABINFO));
    Ok(Box::new(SlabinfoReader::open(path)?))
}

impl Reading for SlabinfoReader {
    fn read(&mut self) -> Result<SourceData, SourceError> {
        SlabinfoReader::read(self).map(SourceData::from)
    }
}

/// The most a slabinfo read takes in. A line is under 200 bytes, so 64 MiB holds some
/// 300,000 slab caches, three times the largest system we know of (about 100,000 caches,
/// some 8 MB); past that the file is not slabinfo, and reading on would only exhaust memory.
pub const MAX_SLABINFO_BYTES: u64 = 64 * 1024 * 1024;

/// An open slabinfo file and a read buffer reused across refreshes.
pub struct SlabinfoReader {
    file: KeptFile,
    buf: Vec<u8>,
    page_size: u64,
}

impl SlabinfoReader {
    /// Opens the file now; later reads reuse the descriptor (see [`KeptFile`]).
    pub fn open(path: &Path) -> Result<Self, SourceError> {
        Ok(SlabinfoReader {
            file: KeptFile::open(path)?,
            buf: Vec::with_capacity(64 * 1024),
            page_size: page_size(),
        })
    }

    /// Reads and parses the whole file again.
    pub fn read(&mut self) -> Result<Vec<MemoryType>, SourceError> {
        self.file.reread(MAX_SLABINFO_BYTES, &mut self.buf)?;
        let what = self.file.what();
        let text = std::str::from_utf8(&self.buf).map_err(|e| SourceError::Malformed {
            what: what.to_string(),
            location: format!("byte {}", e.valid_up_to()),
            field: String::new(),
            message: "not valid UTF-8".into(),
        })?;
        parse(text, what, self.page_size)
    }
}

/// The system page size, for slab memory.
fn page_size() -> u64 {
    // SAFETY: sysconf has no memory-safety preconditions; it only returns a value.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as u64
    } else {
        4096
    }
}

/// Parses slabinfo 2.x text. `what` names the file in errors.
pub fn parse(text: &str, what: &str, page_size: u64) -> Result<Vec<MemoryType>, SourceError> {
    let mut lines = text.lines().enumerate();
    let (_, first) = lines.next().ok_or_else(|| SourceError::Malformed {
        what: what.into(),
        location: "line 1".into(),
        field: String::new(),
        message: "empty file; expected \"slabinfo - version: 2.1\"".into(),
    })?;
    let version = first
        .strip_prefix("slabinfo - version:")
        .map(str::trim)
        .ok_or_else(|| SourceError::Malformed {
            what: what.into(),
            location: "line 1".into(),
            field: "version".into(),
            message: format!("expected \"slabinfo - version: 2.1\", found {first:?}"),
        })?;
    // 2.0 lacked nothing we use but is not documented to keep the same columns; only 2.1 is
    // what every kernel since 2.6.x prints, so accept exactly 2.1.
    if version != "2.1" {
        return Err(SourceError::UnsupportedVersion {
            what: what.into(),
            found: format!("{version} (only slabinfo version 2.1 is supported)"),
        });
    }
    let mut out = Vec::with_capacity(256);
    for (i, line) in lines {
        let lineno = i + 1;
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        out.push(parse_line(line, lineno, what, page_size)?);
    }
    Ok(out)
}

const FIELDS: [&str; 5] = [
    "active_objs",
    "num_objs",
    "objsize",
    "objperslab",
    "pagesperslab",
];

fn parse_line(
    line: &str,
    lineno: usize,
    what: &str,
    page_size: u64,
) -> Result<MemoryType, SourceError> {
    let bad = |field: &str, message: String| SourceError::Malformed {
        what: what.into(),
        location: format!("line {lineno}"),
        field: field.into(),
        message,
    };
    let mut parts = line.split(':');
    let head = parts.next().unwrap_or("");
    let _tunables = parts
        .next()
        .ok_or_else(|| bad("tunables", "missing \": tunables\" section".into()))?;
    let slabdata = parts
        .next()
        .ok_or_else(|| bad("slabdata", "missing \": slabdata\" section".into()))?;
    if parts.next().is_some() {
        return Err(bad("", "too many ':' sections".into()));
    }
    let mut words = head.split_ascii_whitespace();
    let name = words
        .next()
        .ok_or_else(|| bad("name", "missing cache name".into()))?;
    let mut nums = [0u64; 5];
    for (slot, field) in nums.iter_mut().zip(FIELDS) {
        let w = words.next().ok_or_else(|| bad(field, "missing".into()))?;
        *slot = w
            .parse()
            .map_err(|_| bad(field, format!("not a number: {w:?}")))?;
    }
    if let Some(extra) = words.next() {
        return Err(bad("", format!("unexpected extra field {extra:?}")));
    }
    let [active, total, objsize, _perslab, pages_per_slab] = nums;
    let mut sd = slabdata.split_ascii_whitespace();
    if sd.next() != Some("slabdata") {
        return Err(bad(
            "slabdata",
            "section does not start with \"slabdata\"".into(),
        ));
    }
    let _active_slabs: u64 = parse_word(sd.next(), "active_slabs", &bad)?;
    let num_slabs: u64 = parse_word(sd.next(), "num_slabs", &bad)?;
    let _shared: u64 = parse_word(sd.next(), "sharedavail", &bad)?;

    let mut t = MemoryType::new(Allocator::Slab, name);
    t.size = Some(objsize);
    t.in_use_count = Some(active);
    t.total_count = Some(total);
    t.free_count = Some(total.saturating_sub(active));
    t.in_use_bytes = Some(active.saturating_mul(objsize));
    t.slab_bytes = Some(
        num_slabs
            .saturating_mul(pages_per_slab)
            .saturating_mul(page_size),
    );
    Ok(t)
}

fn parse_word(
    w: Option<&str>,
    field: &str,
    bad: &dyn Fn(&str, String) -> SourceError,
) -> Result<u64, SourceError> {
    let w = w.ok_or_else(|| bad(field, "missing".into()))?;
    w.parse()
        .map_err(|_| bad(field, format!("not a number: {w:?}")))
}

/// Linux slab caches' place among the allocators: FreeBSD's vmstat has no layout for them.
pub const ALLOCATOR: AllocatorDef = AllocatorDef {
    module: module_path!(),
    allocator: Allocator::Slab,
    name: "slab",
    dump_table,
    vmstat_table: None,
};

/// slabtop-like: OBJS ACTIVE USE OBJ SIZE SLAB MEMORY NAME.
fn dump_table(out: &mut String, rows: &[&MemoryType], sizes: Sizes) {
    let _ = writeln!(
        out,
        "{:<28} {:>10} {:>10} {:>10} {:>8} {:>12}",
        "NAME", "ACTIVE", "OBJS", "FREE", "OBJSIZE", "SLABBYTES"
    );
    for t in rows {
        let _ = writeln!(
            out,
            "{:<28} {:>10} {:>10} {:>10} {:>8} {:>12}",
            display_name(t),
            opt(t.in_use_count),
            opt(t.total_count),
            opt(t.free_count),
            bytes(t.size, sizes),
            bytes(t.slab_bytes, sizes),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;

    const GOOD: &str = "slabinfo - version: 2.1
# name            <active_objs> <num_objs> <objsize> <objperslab> <pagesperslab> : tunables <limit> <batchcount> <sharedfactor> : slabdata <active_slabs> <num_slabs> <sharedavail>
kmalloc-64          3000   3200     64   64    1 : tunables    0    0    0 : slabdata     50     50      0
task_struct          410    435   6336    5    8 : tunables    0    0    0 : slabdata     87     87      0
";

    #[test]
    fn derives_figures() {
        let v = parse(GOOD, "slabinfo", 4096).unwrap();
        assert_eq!(v.len(), 2);
        let k = &v[0];
        assert_eq!(k.name, "kmalloc-64");
        assert_eq!(k.allocator, Allocator::Slab);
        assert_eq!(k.size, Some(64));
        assert_eq!(k.in_use_count, Some(3000));
        assert_eq!(k.total_count, Some(3200));
        assert_eq!(k.free_count, Some(200));
        assert_eq!(k.in_use_bytes, Some(3000 * 64));
        assert_eq!(k.slab_bytes, Some(50 * 4096));
        assert_eq!(v[1].slab_bytes, Some(87 * 8 * 4096));
        // Figures slabinfo does not have stay absent.
        assert_eq!(k.allocs, None);
        assert_eq!(k.failures, None);
    }

    #[test]
    fn unknown_version_is_named() {
        let e = parse("slabinfo - version: 1.1\n", "/proc/slabinfo", 4096).unwrap_err();
        let m = e.to_string();
        assert!(m.contains("/proc/slabinfo") && m.contains("1.1"), "{m}");
        assert!(matches!(e, SourceError::UnsupportedVersion { .. }));
    }

    #[test]
    fn malformed_line_names_line_and_field() {
        let text = GOOD.replace("task_struct          410", "task_struct          4x0");
        let m = parse(&text, "/proc/slabinfo", 4096)
            .unwrap_err()
            .to_string();
        assert!(m.contains("line 4") && m.contains("active_objs"), "{m}");
        let text = GOOD.replace(": slabdata     87     87      0", "");
        let m = parse(&text, "/proc/slabinfo", 4096)
            .unwrap_err()
            .to_string();
        assert!(m.contains("line 4") && m.contains("slabdata"), "{m}");
        let m = parse("", "x", 4096).unwrap_err().to_string();
        assert!(m.contains("line 1"), "{m}");
    }

    #[test]
    fn free_count_never_underflows() {
        let text = "slabinfo - version: 2.1\nweird 10 5 8 1 1 : tunables 0 0 0 : slabdata 1 1 0\n";
        let v = parse(text, "x", 4096).unwrap();
        assert_eq!(v[0].free_count, Some(0));
    }

    #[test]
    fn permission_denied_names_file() {
        let e = SourceError::from_io(
            "/proc/slabinfo",
            &std::io::Error::from(std::io::ErrorKind::PermissionDenied),
            "root only",
        );
        let m = e.to_string();
        assert!(
            m.contains("/proc/slabinfo") && m.contains("permission denied"),
            "{m}"
        );
    }

    fn replace(path: &Path, text: &str) {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, path).unwrap();
    }

    #[test]
    fn a_replaced_file_is_reopened_and_a_deleted_one_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("slabinfo");
        std::fs::write(&p, GOOD).unwrap();
        let mut r = SlabinfoReader::open(&p).unwrap();
        assert_eq!(r.read().unwrap()[0].in_use_count, Some(3000));
        replace(&p, &GOOD.replace("3000   3200", "3100   3200"));
        assert_eq!(
            r.read().unwrap()[0].in_use_count,
            Some(3100),
            "new file read"
        );
        std::fs::remove_file(&p).unwrap();
        let m = r.read().unwrap_err().to_string();
        assert!(
            m.contains(&p.display().to_string()) && m.contains("deleted"),
            "{m}"
        );
        // Back again: read again.
        std::fs::write(&p, GOOD).unwrap();
        assert_eq!(r.read().unwrap()[0].in_use_count, Some(3000));
    }

    #[test]
    fn a_file_over_the_cap_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sparse");
        let f = File::create(&p).unwrap();
        f.set_len(MAX_SLABINFO_BYTES + 1).unwrap();
        let mut r = SlabinfoReader::open(&p).unwrap();
        let m = r.read().unwrap_err().to_string();
        assert!(
            m.contains(&p.display().to_string()) && m.contains("64 MiB"),
            "{m}"
        );
        assert!(r.buf.capacity() <= 64 * 1024 * 1024, "buffer given back");
    }

    #[test]
    fn reads_the_live_file_when_permitted() {
        match SlabinfoReader::open(Path::new(SLABINFO)) {
            Ok(mut r) => {
                let a = r.read().unwrap();
                let b = r.read().unwrap();
                assert!(!a.is_empty());
                assert_eq!(a.len(), b.len(), "re-reading the same descriptor");
            }
            Err(SourceError::PermissionDenied { .. }) => {}
            Err(e) if !Path::new(SLABINFO).exists() => eprintln!("no slabinfo here: {e}"),
            Err(e) => panic!("{e}"),
        }
    }
}
