//! Linux memory allocation profiling, from /proc/allocinfo: for every allocation call site of
//! the kernel and its modules, the bytes it holds now and its number of live allocations.
//! This module is the `allocinfo` source (see [`SOURCE`] and "The source" below) and its
//! parser.
//!
//! # The format
//!
//! Read from the kernel's source, torvalds/linux:
//! - lib/alloc_tag.c at d5aa943f68f1a06ea30b35333e662bc9fb856314 (format 1.0):
//!   `print_allocinfo_header` writes `allocinfo - version: 1.0` and the column line
//!   `#     <size>  <calls> <tag info>`; `alloc_tag_to_text` writes each row as
//!   `"%12lli %8llu "` (bytes, signed; calls, unsigned), the tag, a space, and the newline;
//! - lib/codetag.c at 0db6f8d7820a4b788565dac8eed52bfc2c3216da: `codetag_to_text` writes the
//!   tag as `file:line [module] func:function` for a loadable module's site and as
//!   `file:line func:function` for the core kernel's (`line` is `%u`);
//! - commit 39d117e04d15, "alloc_tag: mark inaccurate allocation counters in /proc/allocinfo
//!   output" (linux-mm, September 2025, read as posted with its follow-up documentation
//!   patch): version 2.0, which appends ` accurate:no` after the tag when a slab allocation
//!   could not be counted; Documentation/filesystems/proc.rst then says that from 2.0 a row
//!   "may contain additional <key>:<value> pairs", and that for `accurate:no` the absolute
//!   values are wrong but their deltas are right;
//! - Documentation/mm/allocation-profiling.rst at 18fbf5151d2c0bfe433c7428eef03cabf5fdb2fa:
//!   the switches, and an example of the output.
//!
//! The header is printed with the first row (`allocinfo_show`), so a kernel with no tags at
//! all would give an empty file: an empty input is read as no sites, of no version.
//!
//! # The source
//!
//! /proc/allocinfo is mode 0400 (0444 in the first patches): it is opened before the privilege
//! drop and kept open, as /proc/slabinfo is ([`KeptFile`]). What the kernel offers is one of
//! four states ([`ProfilingState`], MEMSTAT-MIB's MemProfilingState), from the file and the
//! switch /proc/sys/vm/mem_profiling (lib/alloc_tag.c):
//! - **not compiled in**: neither file exists (no CONFIG_MEM_ALLOC_PROFILING);
//! - **unavailable**: the switch exists, /proc/allocinfo does not: booted with
//!   `sysctl.vm.mem_profiling=never`, or not enabled by default and no boot option; or the
//!   kernel removed the file at run time, giving profiling up (too many module tags);
//! - **off**: the switch reads 0 and the file is there: its figures are frozen since profiling
//!   was turned off, and are still served;
//! - **on**: the switch reads 1 (or, for a replayed copy, the file reads).
//!
//! `auto` on Linux includes this source whatever the state: the kernel's own file,
//! /proc/allocinfo, may be missing, and then the source reads no sites and says why. A copy
//! named with `allocinfo:PATH` must be there at start-up, and is read like a file that is on.
//! A state is logged once when it changes, not at each refresh.
//!
//! # What this reader does
//!
//! - **Versions.** Any 1.x and 2.x is read; another major version is refused
//!   ([`SourceError::UnsupportedVersion`], naming the file and line 1), since a new major is
//!   how the kernel says its rows changed. In 1.x nothing may follow the function; in 2.x
//!   every word after it must be a `key:value` pair: `accurate:no` (and `accurate:yes`) is
//!   read, a key this reader does not know is passed over, as the kernel's documentation
//!   allows.
//! - **Repeated tags are summed.** The key `file:line [module] func` is a multiset: an
//!   inlined helper that allocates puts one tag in every unit it is inlined into, all printed
//!   with the same file, line and function (LKML, May 2025, "Data key in /proc/allocinfo is a
//!   multiset"). Such rows are one call site: their bytes and calls are added up into one
//!   [`Site`], which keeps how many rows it came from. [`Allocinfo::rows`] counts the rows
//!   read and `sites.len()` the distinct sites; sites are in the order of their first row.
//! - **Negative counters.** Bytes are signed in the file and have been seen negative (after
//!   compaction and `drop_caches`); calls are unsigned, so a count below zero shows as a
//!   number past 2⁶³. Both are read as the kernel's signed 64-bit counters (calls past 2⁶³
//!   are a count that went below zero, wrapped) and summed exactly over a site's rows. A site
//!   whose sum is negative holds 0 in that figure, and a site with any negative row, any
//!   `accurate:no` row, or a negative sum is not accurate ([`Site::accurate`] false): its
//!   figures are served, but marked as not to be trusted.
//! - **The end of a row.** The kernel ends every row with a space before the newline, and the
//!   reader requires it: it is the only sign that a row is whole. As in the other file
//!   parsers (meminfo, arcstats, slabinfo), the last line needs no newline and is read like
//!   any other, so a row cut only of its newline is read, and a row cut anywhere before its
//!   final space is refused as cut short, naming its line. One cut cannot be told from a
//!   whole row: a 2.x row cut just after the space that follows its function reads as the
//!   row without its pairs (`accurate:no` lost). The kernel's own file always ends with a
//!   newline (a read takes it whole), so only a replayed copy can be cut. Empty lines are
//!   passed over.
//! - **Errors** name the file, the line and the field ([`SourceError::Malformed`]); names
//!   (file, module, function) must be UTF-8.
//! - **Bounded.** The parser allocates in proportion to its input only: one [`Site`] per
//!   distinct tag and an index of them. The future source reads at most
//!   [`MAX_ALLOCINFO_BYTES`].

use super::kept::KeptFile;
use super::source_def::{Fills, Opening, Os, PathRule, Reading, SourceDef};
use super::{SourceData, SourceError};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Where the kernel serves it (mode 0400: root only).
pub const ALLOCINFO: &str = "/proc/allocinfo";

/// The kernel's switch for profiling (0644; 0444 and always 0 when booted without it).
pub const MEM_PROFILING: &str = "/proc/sys/vm/mem_profiling";

/// The `allocinfo` source: the allocation call sites of /proc/allocinfo, or of a copy.
pub const SOURCE: SourceDef = SourceDef {
    module: module_path!(),
    name: "allocinfo",
    summary: "the Linux kernel's allocation call sites (/proc/allocinfo, or PATH in its format)",
    path: PathRule::Default(ALLOCINFO),
    auto_on: Some(Os::Linux),
    opening: Opening::KeptOpen,
    fills: Fills::Allocators(&[]),
    saved_copy: false,
    groups: &[],
    kinds: &[],
    open: open_source,
};

/// The state of the kernel's allocation profiling: MEMSTAT-MIB's MemProfilingState, whose
/// values these are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ProfilingState {
    NotCompiled = 1,
    Unavailable = 2,
    Off = 3,
    On = 4,
}

impl ProfilingState {
    /// Its MemProfilingState value.
    pub fn number(self) -> i32 {
        self as i32
    }

    /// What the log and `dump` say of it.
    pub fn describe(self) -> &'static str {
        match self {
            ProfilingState::NotCompiled => {
                "not compiled in (no CONFIG_MEM_ALLOC_PROFILING: neither /proc/allocinfo nor /proc/sys/vm/mem_profiling)"
            }
            ProfilingState::Unavailable => {
                "unavailable (/proc/allocinfo is absent: booted without profiling, or the kernel gave it up)"
            }
            ProfilingState::Off => "off (vm.mem_profiling is 0: the figures are frozen)",
            ProfilingState::On => "on",
        }
    }
}

/// What the allocinfo source read: the state of profiling and the call sites.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Profiling {
    pub state: ProfilingState,
    /// The rows of the file, repeated tags included.
    #[serde(default)]
    pub rows: u64,
    /// The distinct sites, in the order of their first row.
    #[serde(default)]
    pub sites: Vec<Site>,
}

/// The most a read of the file will take in, for the source that will read it (with
/// `error::reread_capped`'s or `boundedfile::read_capped`'s cap, as the other sources do). A
/// row is some 100 bytes (22 of figures, a path, a function, a module's name), under 256 for
/// any site of the kernel tree. The kernel reserves room for 100,000 module tags
/// (MODULE_ALLOC_TAG_VMAP_SIZE) on top of the core kernel's some tens of thousands, and
/// 64 MiB holds 262,144 rows of 256 bytes, about twice the most a kernel can print; past
/// that the file is not allocinfo, and reading on would only exhaust memory. The parser's
/// own memory is a few times what it reads (a [`Site`] and an index entry per distinct tag).
pub const MAX_ALLOCINFO_BYTES: u64 = 64 * 1024 * 1024;

/// The longest file, module or function name read. The kernel's are far shorter: a path is
/// under PATH_MAX (4096), a function under KSYM_NAME_LEN (512), a module under
/// MODULE_NAME_LEN (56). A longer one is not the kernel's, and each name read is kept, in the
/// snapshots and in the sites' index state (whose file a few such names would push over its
/// cap).
pub const MAX_NAME_BYTES: usize = 4096;

/// The format version of line 1, `allocinfo - version: MAJOR.MINOR`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
}

/// The major versions this reader knows.
pub const MAJORS: [u32; 2] = [1, 2];

/// One allocation call site: every row of the file with its file, line, module and function,
/// summed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Site {
    /// The source file, as the kernel's build named it (`mm/slub.c`).
    pub file: String,
    pub line: u32,
    /// The loadable module the site is in; empty for the core kernel.
    #[serde(default)]
    pub module: String,
    pub function: String,
    /// The bytes its live allocations hold: the sum of its rows, 0 when that is negative.
    pub bytes: u64,
    /// Its live allocations (a level, not a counter): the sum of its rows, 0 when negative.
    pub calls: u64,
    /// False when a row said `accurate:no` or had a negative counter, or a sum was negative.
    #[serde(default = "yes")]
    pub accurate: bool,
    /// How many rows of the file were summed into it (more than 1 for an inlined helper).
    #[serde(default = "one")]
    pub rows: u32,
}

/// A replayed site's defaults (the fixture format): accurate, from one row.
fn yes() -> bool {
    true
}

fn one() -> u32 {
    1
}

impl Site {
    /// Its key: what stays the same for the site across reads and restarts.
    pub fn key(&self) -> SiteKey {
        SiteKey {
            file: self.file.clone(),
            line: self.line,
            module: self.module.clone(),
            function: self.function.clone(),
        }
    }
}

/// What makes a call site one: its file, line, module and function (the kernel's tag). The
/// key of its stable memAllocSiteIndex.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SiteKey {
    pub file: String,
    pub line: u32,
    /// Empty for the core kernel.
    pub module: String,
    pub function: String,
}

/// A parsed /proc/allocinfo.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allocinfo {
    /// None for an empty file (a kernel without tags prints nothing, not even the header).
    pub version: Option<Version>,
    /// The rows read, repeated tags included.
    pub rows: usize,
    /// The distinct sites, in the order of their first row.
    pub sites: Vec<Site>,
}

/// A row as read, borrowing its names from the input.
struct Row<'a> {
    bytes: i64,
    calls: i64,
    file: &'a [u8],
    line: u32,
    module: &'a [u8],
    function: &'a [u8],
    accurate: bool,
}

/// What makes a site, borrowed from the input: file, line, module and function.
type Key<'a> = (&'a [u8], u32, &'a [u8], &'a [u8]);

/// A site's exact sums while rows are added; a sum of 64-bit values cannot overflow an i128
/// before 2⁶⁴ rows.
#[derive(Default)]
struct Sums {
    bytes: i128,
    calls: i128,
}

/// Builds the error for `field` at line `line` of `what`.
fn malformed(what: &str, line: usize, field: &str, message: String) -> SourceError {
    SourceError::Malformed {
        what: what.into(),
        location: format!("line {line}"),
        field: field.into(),
        message,
    }
}

fn shown(b: &[u8]) -> String {
    format!("{:?}", String::from_utf8_lossy(b))
}

/// Parses /proc/allocinfo text (see the module's documentation). `what` names the file in
/// errors, which give the line and field.
pub fn parse(bytes: &[u8], what: &str) -> Result<Allocinfo, SourceError> {
    if bytes.is_empty() {
        return Ok(Allocinfo {
            version: None,
            rows: 0,
            sites: Vec::new(),
        });
    }
    let mut lines = lines(bytes);
    let version = parse_version(lines.next().unwrap_or_default(), what)?;
    match lines.next() {
        Some(l) if l.first() == Some(&b'#') => {}
        found => {
            return Err(malformed(
                what,
                2,
                "header",
                format!(
                    "expected the column line `#     <size>  <calls> <tag info>`, found {}",
                    found.map_or_else(|| "the end of the file".into(), shown)
                ),
            ))
        }
    }
    // Sized from the input, without trusting it: a kernel's row is rarely under 64 bytes
    // (22 of figures, then a path and a function), so a file of short lines reserves no
    // more than a few times its own size, a file of a few long lines little, and the tables
    // grow past that only with the sites really read.
    let newlines = memchr::memchr_iter(b'\n', bytes).count();
    let most = newlines.min(bytes.len() / 64);
    let mut sites: Vec<Site> = Vec::with_capacity(most);
    let mut sums: Vec<Sums> = Vec::with_capacity(most);
    // FxHash, not std's SipHash: the keys are the kernel's tags, not an attacker's choice of
    // collisions (a file that did collide would cost time, bounded by its cap, never
    // memory), and hashing was a quarter of the parse.
    let mut index: FxHashMap<Key<'_>, usize> =
        FxHashMap::with_capacity_and_hasher(most, Default::default());
    // UTF-8 checked once for the whole file, when it is (a kernel's always is): the names
    // are then cut from it without checking each again.
    let text = std::str::from_utf8(bytes).ok();
    let mut rows = 0usize;
    let mut lines = lines.enumerate().peekable();
    while let Some((i, line)) = lines.next() {
        if line.is_empty() {
            continue;
        }
        let lineno = i + 3;
        // Only the last piece can lack its newline.
        let unended = lines.peek().is_none();
        let row = parse_row(line, lineno, version.major, unended, what)?;
        rows += 1;
        let key = (row.file, row.line, row.module, row.function);
        let at = match index.get(&key) {
            Some(&at) => at,
            None => {
                let text = |field: &str, b: &[u8]| {
                    if b.len() > MAX_NAME_BYTES {
                        return Err(malformed(
                            what,
                            lineno,
                            field,
                            format!(
                                "{} bytes long, more than the {MAX_NAME_BYTES} any kernel name can be",
                                b.len()
                            ),
                        ));
                    }
                    let checked = text.and_then(|t| {
                        // Where `b` lies in the input; names end at ASCII delimiters, so at
                        // character boundaries.
                        let at = (b.as_ptr() as usize).checked_sub(bytes.as_ptr() as usize)?;
                        t.get(at..at + b.len())
                    });
                    match checked {
                        Some(s) => Ok(s.to_owned()),
                        None => std::str::from_utf8(b).map(str::to_owned).map_err(|_| {
                            malformed(what, lineno, field, format!("not UTF-8: {}", shown(b)))
                        }),
                    }
                };
                sites.push(Site {
                    file: text("file", row.file)?,
                    line: row.line,
                    module: text("module", row.module)?,
                    function: text("function", row.function)?,
                    bytes: 0,
                    calls: 0,
                    accurate: true,
                    rows: 0,
                });
                sums.push(Sums::default());
                index.insert(key, sites.len() - 1);
                sites.len() - 1
            }
        };
        let (site, sum) = (&mut sites[at], &mut sums[at]);
        sum.bytes += i128::from(row.bytes);
        sum.calls += i128::from(row.calls);
        site.accurate &= row.accurate && row.bytes >= 0 && row.calls >= 0;
        site.rows = site.rows.saturating_add(1);
    }
    for (site, sum) in sites.iter_mut().zip(&sums) {
        site.accurate &= sum.bytes >= 0 && sum.calls >= 0;
        site.bytes = clamp(sum.bytes);
        site.calls = clamp(sum.calls);
    }
    Ok(Allocinfo {
        version: Some(version),
        rows,
        sites,
    })
}

/// A sum as a level: 0 below zero, `u64::MAX` above it.
fn clamp(v: i128) -> u64 {
    u64::try_from(v.max(0)).unwrap_or(u64::MAX)
}

/// The lines of `bytes`, as `split` on newlines gives them (the piece after the last
/// newline too, empty when the file ends with one), found with `memchr`: a byte-by-byte
/// search was a sixth of the parse.
fn lines(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut start = 0;
    memchr::memchr_iter(b'\n', bytes)
        .chain(std::iter::once(bytes.len()))
        .map(move |end| {
            let line = &bytes[start..end];
            start = end + 1;
            line
        })
}

/// Line 1, `allocinfo - version: MAJOR.MINOR`, of a major version this reader knows.
fn parse_version(line: &[u8], what: &str) -> Result<Version, SourceError> {
    let bad = || {
        malformed(
            what,
            1,
            "version",
            format!("expected `allocinfo - version: X.Y`, found {}", shown(line)),
        )
    };
    let number = |b: &[u8]| -> Option<u32> {
        if b.is_empty() || !b.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(b).ok()?.parse().ok()
    };
    let v = line
        .strip_prefix(b"allocinfo - version:")
        .ok_or_else(bad)?
        .trim_ascii();
    let dot = v.iter().position(|&b| b == b'.').ok_or_else(bad)?;
    let (major, minor) = (
        number(&v[..dot]).ok_or_else(bad)?,
        number(&v[dot + 1..]).ok_or_else(bad)?,
    );
    if !MAJORS.contains(&major) {
        return Err(SourceError::UnsupportedVersion {
            what: what.into(),
            found: format!(
                "{major}.{minor} (line 1; this reader knows allocinfo versions 1.x and 2.x)"
            ),
        });
    }
    Ok(Version { major, minor })
}

/// A decimal number of ASCII digits only (no sign), as `%llu` and `%u` print it; `None` when
/// it is empty, has anything but digits, or passes `u64::MAX`. Written out rather than through
/// `str::parse`, which checks UTF-8 and signs first: the parser reads three numbers per row,
/// and a kernel's file has tens of thousands of rows.
fn unsigned(b: &[u8]) -> Option<u64> {
    if b.is_empty() {
        return None;
    }
    b.iter().try_fold(0u64, |n, &d| {
        let digit = d.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        n.checked_mul(10)?.checked_add(u64::from(digit))
    })
}

/// A decimal number as `%lli` prints it: digits, after a `-` for a negative one; `None`
/// outside `i64`.
fn signed(b: &[u8]) -> Option<i64> {
    match b.strip_prefix(b"-") {
        Some(magnitude) => {
            let m = unsigned(magnitude)?;
            // i64::MIN's magnitude is one past i64::MAX.
            0i64.checked_sub_unsigned(m)
        }
        None => i64::try_from(unsigned(b)?).ok(),
    }
}

/// One row: `%12lli %8llu `, the tag, in 2.x `key:value` pairs, and the final space.
/// `unended` says the line is the file's last and has no newline: if it does not end with the
/// row's final space either, the file was cut in its middle, and that is the error given,
/// whatever the field it was cut in.
fn parse_row<'a>(
    line: &'a [u8],
    lineno: usize,
    major: u32,
    unended: bool,
    what: &str,
) -> Result<Row<'a>, SourceError> {
    let bad = |field: &str, message: String| malformed(what, lineno, field, message);
    let ended = line.last() == Some(&b' ');
    if unended && !ended {
        return Err(bad(
            "end of row",
            "the file ends in the middle of this row (no newline, and not the space the kernel ends every row with): it was cut short".into(),
        ));
    }
    let mut words = line.split(|&b| b == b' ').filter(|w| !w.is_empty());
    let bytes = words.next().ok_or_else(|| bad("bytes", "missing".into()))?;
    let bytes: i64 = signed(bytes).ok_or_else(|| {
        bad(
            "bytes",
            format!("not a signed 64-bit number: {}", shown(bytes)),
        )
    })?;
    let calls = words.next().ok_or_else(|| bad("calls", "missing".into()))?;
    let calls: u64 = unsigned(calls).ok_or_else(|| {
        bad(
            "calls",
            format!("not an unsigned 64-bit number: {}", shown(calls)),
        )
    })?;
    // The kernel's counter is a u64 printed with %llu: past 2⁶³ it went below zero.
    let calls = calls as i64;
    let place = words
        .next()
        .ok_or_else(|| bad("file:line", "missing the tag".into()))?;
    let colon = place
        .iter()
        .rposition(|&b| b == b':')
        .filter(|&c| c > 0)
        .ok_or_else(|| {
            bad(
                "file:line",
                format!("expected `file:line`, found {}", shown(place)),
            )
        })?;
    let (file, digits) = (&place[..colon], &place[colon + 1..]);
    let line_no: u32 = unsigned(digits)
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| {
            bad(
                "file:line",
                format!("the line is not a number: {}", shown(place)),
            )
        })?;
    let mut next = words
        .next()
        .ok_or_else(|| bad("function", "missing `func:NAME`".into()))?;
    let mut module: &[u8] = b"";
    if next.first() == Some(&b'[') {
        module = next
            .strip_prefix(b"[")
            .and_then(|m| m.strip_suffix(b"]"))
            .filter(|m| !m.is_empty() && !m.iter().any(|b| b"[]".contains(b)))
            .ok_or_else(|| {
                bad(
                    "module",
                    format!("expected `[module]`, found {}", shown(next)),
                )
            })?;
        next = words
            .next()
            .ok_or_else(|| bad("function", "missing `func:NAME`".into()))?;
    }
    let function = next
        .strip_prefix(b"func:")
        .filter(|f| !f.is_empty())
        .ok_or_else(|| {
            bad(
                "function",
                format!("expected `func:NAME`, found {}", shown(next)),
            )
        })?;
    let mut accurate = true;
    for pair in words {
        if major < 2 {
            return Err(bad(
                "tag",
                format!(
                    "unexpected {} after the function (only version 2.0 and later add `key:value` pairs)",
                    shown(pair)
                ),
            ));
        }
        let colon = pair
            .iter()
            .position(|&b| b == b':')
            .filter(|&c| c > 0)
            .ok_or_else(|| {
                bad(
                    "tag",
                    format!("expected `key:value`, found {}", shown(pair)),
                )
            })?;
        match (&pair[..colon], &pair[colon + 1..]) {
            (b"accurate", b"no") => accurate = false,
            (b"accurate", b"yes") => {}
            (b"accurate", other) => {
                return Err(bad(
                    "accurate",
                    format!("expected `no` or `yes`, found {}", shown(other)),
                ))
            }
            // A pair a later 2.x kernel adds: not this reader's to judge.
            _ => {}
        }
    }
    if !ended {
        return Err(bad(
            "end of row",
            "no space before the newline, where the kernel ends every row with one".into(),
        ));
    }
    Ok(Row {
        bytes,
        calls,
        file,
        line: line_no,
        module,
        function,
        accurate,
    })
}

// --- the source -----------------------------------------------------------------------

fn open_source(path: Option<&Path>) -> Result<Box<dyn Reading>, SourceError> {
    let path = path.unwrap_or(Path::new(ALLOCINFO));
    let switch = (path == Path::new(ALLOCINFO)).then_some(Path::new(MEM_PROFILING));
    Ok(Box::new(AllocinfoReader::open(path, switch)?))
}

/// The most a read of the switch takes in: it holds `0` or `1` and a newline.
const MAX_SWITCH_BYTES: u64 = 64;

/// An allocinfo source: the file kept open (absent when the kernel has none), the kernel's
/// switch for the kernel's own file, and a buffer reused across reads.
pub(crate) struct AllocinfoReader {
    file: Option<KeptFile>,
    /// The path of the file, for telling whether the kernel removed it.
    path: std::path::PathBuf,
    /// /proc/sys/vm/mem_profiling for the kernel's file; `None` for a replayed copy.
    switch: Option<std::path::PathBuf>,
    buf: Vec<u8>,
    /// The state logged last, so that each change is logged once.
    logged: Option<ProfilingState>,
    /// The switch's last error, logged once.
    switch_error: Option<String>,
}

impl AllocinfoReader {
    /// Opens `path` now. With `switch` (the kernel's own file) a missing file is a state, not
    /// an error; without it (a copy) the file must open.
    pub(crate) fn open(path: &Path, switch: Option<&Path>) -> Result<Self, SourceError> {
        let file = match (KeptFile::open(path), switch) {
            (Ok(f), _) => Some(f),
            (Err(SourceError::Io { .. }), Some(_)) if !exists(path) => None,
            (Err(e), _) => return Err(e),
        };
        let mut reader = AllocinfoReader {
            file,
            path: path.to_path_buf(),
            switch: switch.map(Path::to_path_buf),
            buf: Vec::with_capacity(64 * 1024),
            logged: None,
            switch_error: None,
        };
        // A copy of an unknown version is refused at start-up, naming the file and line, as
        // slabinfo's header is: a daemon that could never read the file it was given should
        // not start. The kernel's own file is left to the reads: `auto` includes it, and a
        // future kernel's format must not stop the slab caches and the rest from being
        // served (the source turns stale, saying why).
        if let (Some(f), None) = (&mut reader.file, switch) {
            f.reread(MAX_ALLOCINFO_BYTES, &mut reader.buf)?;
            if let Err(e @ SourceError::UnsupportedVersion { .. }) = parse(&reader.buf, f.what()) {
                return Err(e);
            }
        }
        Ok(reader)
    }

    /// The switch's value: `Some(true)` for 1, `None` when there is no switch, or it cannot
    /// be read or understood. The switch only tells on from off: the file's figures are served
    /// either way, so a switch this reader cannot read is logged (once) and taken as on,
    /// rather than made an error that would hide the figures.
    fn switch_on(&mut self) -> Option<bool> {
        let path = self.switch.as_ref()?;
        let what = path.display().to_string();
        let value = match crate::boundedfile::read(path, 0, MAX_SWITCH_BYTES) {
            Ok(bytes) => match bytes.trim_ascii() {
                b"0" => Ok(false),
                b"1" => Ok(true),
                other => Err(malformed(
                    &what,
                    1,
                    "value",
                    format!("expected 0 or 1, found {}", shown(other)),
                )),
            },
            Err(crate::boundedfile::FileError::Io(e))
                if e.kind() == std::io::ErrorKind::NotFound =>
            {
                return None
            }
            Err(e) => Err(super::error::file_error(&what, "", e)),
        };
        match value {
            Ok(on) => {
                self.switch_error = None;
                Some(on)
            }
            Err(e) => {
                let message = e.to_string();
                if self.switch_error.as_ref() != Some(&message) {
                    tracing::warn!("{message}; allocation profiling is taken as on");
                    self.switch_error = Some(message);
                }
                None
            }
        }
    }

    fn read_now(&mut self) -> Result<Profiling, SourceError> {
        let none = |state| Profiling {
            state,
            rows: 0,
            sites: Vec::new(),
        };
        if let Some(switch_path) = &self.switch {
            if !exists(&self.path) {
                // No file: the kernel has none, or removed it giving profiling up.
                return Ok(none(match exists(switch_path) {
                    true => ProfilingState::Unavailable,
                    false => ProfilingState::NotCompiled,
                }));
            }
        }
        let switch = self.switch_on();
        let file = match &mut self.file {
            Some(f) => f,
            // The file appeared after start-up: opened now, if the daemon still may.
            None => self.file.insert(KeptFile::open(&self.path)?),
        };
        file.reread(MAX_ALLOCINFO_BYTES, &mut self.buf)?;
        let parsed = parse(&self.buf, file.what())?;
        Ok(Profiling {
            state: match switch {
                Some(false) => ProfilingState::Off,
                Some(true) | None => ProfilingState::On,
            },
            rows: parsed.rows as u64,
            sites: parsed.sites,
        })
    }
}

/// True when `path` names something (a `stat`, which never blocks).
fn exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

impl Reading for AllocinfoReader {
    fn read(&mut self) -> Result<SourceData, SourceError> {
        let profiling = self.read_now()?;
        if self.logged != Some(profiling.state) {
            let what = self.path.display();
            if self.logged.is_some() || profiling.state != ProfilingState::On {
                tracing::info!(
                    "{what}: allocation profiling is {}",
                    profiling.state.describe()
                );
            }
            self.logged = Some(profiling.state);
        }
        Ok(SourceData {
            profiling: Some(profiling),
            ..SourceData::default()
        })
    }
}

#[cfg(test)]
#[path = "allocinfo_tests.rs"]
mod tests;
