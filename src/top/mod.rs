//! `memstat-top` (and `memstat-agentx top`, which runs it): the kernel's memory types with
//! their rates, interval after interval.
//!
//! On a terminal it is a full-screen view ([`interactive`]; the keys and the layout are in
//! `view.rs`, the terminal's modes and their restoring in `terminal.rs`). With `-b`, or into a
//! pipe, [`batch`] prints plain text, one frame per interval, as `top -b` does, or with
//! `--format json` one JSON object per interval. With `--snmp` it reads MEMSTAT-MIB from a
//! host's agent instead of a source (`snmp.rs`).
//!
//! A frame is made from two snapshots. Rates are per snapshot, not per frame: they are taken
//! over the time between the two snapshots' reads, and a frame that gets the same snapshot
//! again (the same generation) keeps the last rates instead of showing 0 and then a spike. A
//! counter that went backwards (the type was destroyed and made again) gives no rate for that
//! interval. A figure the source does not give (a Linux slab cache has no allocation, free or
//! failure counters) is absent, shown as `-` and `null`, never as 0; every allocator has its
//! in-use items and bytes, so their rates of change are shown for every row.
//!
//! The columns are one table of definitions ([`COLUMNS`]): the text layout, the JSON keys and
//! the sort keys all come from it.

mod args;
mod sites;
mod snmp;
mod terminal;
mod view;

pub use args::{TopArgs, TopFormat};
pub use sites::{site_column, SiteColumn, SiteRow, SITE_COLUMNS};
pub use view::KEYS;

use crate::memstat::source::{SourceChoice, Sources};
use crate::memstat::{MemoryType, Rate, Snapshot, SourceError, TypeKey};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::fmt::{self, Write as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

/// The program of the live view: `memstat-agentx top` runs it.
pub const PROGRAM: &str = "memstat-top";

/// Where [`PROGRAM`] is: beside the running program (a build tree, or both in one
/// directory), else in the `bin` beside its directory (memstat-agentx in /usr/sbin, or the
/// port's sbin, and memstat-top in the `bin` next to it). Never looked up on PATH: what
/// `sudo memstat-agentx top` runs must not depend on the caller's PATH.
pub fn program() -> Result<std::path::PathBuf, String> {
    let me =
        std::env::current_exe().map_err(|e| format!("cannot find this program's own path: {e}"))?;
    let dir = me
        .parent()
        .ok_or_else(|| format!("{}: no directory", me.display()))?;
    let beside = dir.join(PROGRAM);
    let bin = dir.parent().map(|p| p.join("bin").join(PROGRAM));
    [Some(beside.clone()), bin]
        .into_iter()
        .flatten()
        .find(|p| p.is_file())
        .ok_or_else(|| {
            format!(
                "{PROGRAM} is not installed: looked for {}{}",
                beside.display(),
                dir.parent()
                    .map(|p| format!(" and {}", p.join("bin").join(PROGRAM).display()))
                    .unwrap_or_default()
            )
        })
}

/// What `top -b` was asked for.
#[derive(Clone, Debug)]
pub struct Options {
    /// The `source` setting's words.
    pub source: String,
    /// Read MEMSTAT-MIB from this host instead of `source`.
    pub snmp: Option<snmp::Target>,
    /// Frames to print; `None` until interrupted.
    pub iterations: Option<u64>,
    pub delay: Duration,
    /// One JSON object per frame instead of text.
    pub json: bool,
    /// Rows per frame.
    pub top: Option<usize>,
    /// A column's name or header; the table's default when `None`.
    pub sort: Option<String>,
    /// Rows of call sites instead of types.
    pub sites: bool,
    pub reverse: bool,
}

/// Why `top` stopped before its frames were printed.
#[derive(Debug)]
pub enum TopError {
    /// The options ask for what cannot be (a column that does not exist).
    Usage(String),
    /// The source could not be opened or read.
    Source(SourceError),
    /// Standard output failed for another reason than a reader that went away.
    Output(std::io::Error),
    /// `--snmp`: the host could not be read (unreachable, refused, or without MEMSTAT-MIB).
    Snmp(String),
    /// `--credentials`: the file could not be read, or holds others' secrets.
    Credentials(String),
}

impl TopError {
    /// The exit status: 2 for a usage error, as clap's, else 1.
    pub fn exit_status(&self) -> u8 {
        match self {
            TopError::Usage(_) => 2,
            TopError::Source(_)
            | TopError::Output(_)
            | TopError::Snmp(_)
            | TopError::Credentials(_) => 1,
        }
    }
}

impl fmt::Display for TopError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TopError::Usage(m) => f.write_str(m),
            TopError::Source(e @ SourceError::PermissionDenied { .. }) => {
                write!(
                    f,
                    "{e} (run it as root, for example with sudo, or read it through the \
                     host's agent with --snmp localhost)"
                )
            }
            TopError::Source(e) => e.fmt(f),
            TopError::Output(e) => write!(f, "cannot write to standard output: {e}"),
            TopError::Snmp(m) | TopError::Credentials(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for TopError {}

/// `top -b`: reads the sources every `delay`, and writes a frame of each read to `out`, until
/// `iterations` frames are written or `out`'s reader goes away (which is not an error, as
/// with `top -b | head`).
pub fn batch(options: &Options, out: &mut impl std::io::Write) -> Result<(), TopError> {
    let sort = sort_column(options)?;
    let site_sort = site_sort_column(options)?;
    let mut reader = Reader::open(options)?;
    let mut rates = Rates::default();
    for frame in 1u64.. {
        if let Read::New(snap, moved) = reader.read()? {
            rates.next(snap);
            rates.forget(&moved);
        }
        let snap = rates.last.as_ref().expect("just taken in");
        let text = if options.sites {
            let mut rows = rates.site_rows(site_sort, options.reverse, |_| true);
            rows.truncate(options.top.unwrap_or(usize::MAX));
            match options.json {
                true => site_json_frame(snap, rates.seconds(), &rows) + "\n",
                false => {
                    let heading = batch_heading(options, frame, snap, rates.seconds());
                    site_text_frame(&heading, snap, &rows) + "\n"
                }
            }
        } else if options.json {
            let rows = rates.rows(sort, options.reverse, options.top);
            json_frame(snap, rates.seconds(), &rows) + "\n"
        } else {
            let rows = rates.rows(sort, options.reverse, options.top);
            let heading = batch_heading(options, frame, snap, rates.seconds());
            text_frame(&heading, snap, &rows) + "\n"
        };
        match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
            Err(e) => return Err(TopError::Output(e)),
        }
        if options.iterations.is_some_and(|n| frame >= n) {
            break;
        }
        std::thread::sleep(options.delay);
    }
    Ok(())
}

/// A batch frame's first line.
fn batch_heading(options: &Options, frame: u64, snap: &Snapshot, seconds: Option<f64>) -> String {
    let of = options
        .iterations
        .map(|n| format!(" of {n}"))
        .unwrap_or_default();
    let over = seconds.map_or_else(|| "- (the first frame)".into(), |s| format!("{s:.1} s"));
    format!(
        "memstat-agentx top: frame {frame}{of}, source {}, rates over {over}",
        snap.source
    )
}

/// Where `top` reads from: the sources, or a host's agent (`--snmp`).
enum Reader {
    Local(LocalReader),
    /// Boxed: the SNMP session holds a 64 KiB receive buffer.
    Snmp(Box<snmp::SnmpReader>),
}

impl Reader {
    fn open(options: &Options) -> Result<Reader, TopError> {
        Ok(match &options.snmp {
            Some(target) => Reader::Snmp(Box::new(snmp::SnmpReader::open(target)?)),
            None => Reader::Local(LocalReader::open(options)?),
        })
    }

    fn name(&self) -> String {
        match self {
            Reader::Local(r) => r.sources.name(),
            Reader::Snmp(r) => r.name(),
        }
    }

    fn read(&mut self) -> Result<Read, TopError> {
        match self {
            Reader::Local(r) => r.read(),
            Reader::Snmp(r) => r.read(),
        }
    }
}

/// The sources as `top` reads them. A replay of fixture files only, none of which changed
/// since the last read, is not read again: the last snapshot stands, with its rates (a
/// snapshot seen twice keeps them), as an SNMP walk of an unchanged snapshot will give. A
/// 10,000-type fixture is 5.5 MB of JSON, and parsing it every second cost `top` 3.7% of a
/// CPU (BENCHMARKS.md). A kernel source is read every time.
struct LocalReader {
    sources: Sources,
    /// The files of the sources, when every source is a saved copy (a fixture).
    fixtures: Option<Vec<PathBuf>>,
    /// What they were when last read; `None` before a read, or when one could not be looked at.
    stamps: Option<Vec<FileStamp>>,
    generation: u64,
}

/// A file's identity and times: a replaced file (a new inode) or one written in place (new
/// times) differs.
#[derive(Clone, Debug, PartialEq, Eq)]
struct FileStamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl FileStamp {
    fn of(path: &Path) -> Option<FileStamp> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path).ok()?;
        Some(FileStamp {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        })
    }
}

/// What a read gave.
enum Read {
    /// A new snapshot, and the types whose counters restarted since the last one (their
    /// discontinuity time moved): they get no rate for this interval.
    New(Snapshot, Vec<TypeKey>),
    /// Every source is a fixture that has not changed: the last snapshot stands.
    Unchanged,
}

impl LocalReader {
    fn open(options: &Options) -> Result<LocalReader, TopError> {
        let choice = options
            .source
            .parse::<SourceChoice>()
            .map_err(TopError::Source)?;
        let fixtures = choice.resolve().ok().and_then(|specs| {
            specs
                .iter()
                .map(|s| match s.def.saved_copy {
                    true => s.path.clone(),
                    false => None,
                })
                .collect::<Option<Vec<PathBuf>>>()
        });
        Ok(LocalReader {
            sources: Sources::open(&choice).map_err(TopError::Source)?,
            fixtures,
            stamps: None,
            generation: 0,
        })
    }

    /// The next snapshot, unless only unchanged fixtures would be read.
    fn read(&mut self) -> Result<Read, TopError> {
        let stamps = self.fixtures.as_ref().and_then(|paths| {
            paths
                .iter()
                .map(|p| FileStamp::of(p))
                .collect::<Option<Vec<_>>>()
        });
        if stamps.is_some() && stamps == self.stamps {
            return Ok(Read::Unchanged);
        }
        // Taken before the read: a file that changes during it is read again next time.
        self.stamps = None;
        let data = self.sources.read().merged().map_err(TopError::Source)?;
        self.stamps = stamps;
        self.generation += 1;
        let mut snap = Snapshot::new(
            self.generation,
            SystemTime::now(),
            self.sources.name(),
            data.types,
        );
        snap.figures = data.figures;
        snap.profiling = data.profiling;
        Ok(Read::New(snap, Vec::new()))
    }
}

/// How the full-screen view ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// `q` or Ctrl-C.
    Quit,
    /// This signal asked it to end (SIGTERM, SIGHUP, SIGINT or SIGQUIT).
    Signal(i32),
}

/// How long the view waits for a key before it looks at the signal flags again: the bound on
/// how long a SIGTERM waits.
const KEY_WAIT: Duration = Duration::from_millis(100);

/// The full-screen view: reads the sources every interval and draws a frame of each read,
/// and between reads follows the keys (see `view.rs`) and the terminal's size.
///
/// The first read is made before the terminal is touched, so that a source that cannot be
/// read is a one-line error on a normal screen.
pub fn interactive(options: &Options) -> Result<Ended, TopError> {
    use ratatui::crossterm::event::{self, Event, KeyEventKind};
    use std::io::IsTerminal;
    let sort = sort_column(options)?;
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        return Err(TopError::Usage(
            "the full-screen view needs a terminal; use -b for batch output".into(),
        ));
    }
    let mut reader = Reader::open(options)?;
    let mut rates = Rates::default();
    if let Read::New(snap, moved) = reader.read()? {
        rates.next(snap);
        rates.forget(&moved);
    }
    // By name: a `const` table's address is not one address.
    let sort = COLUMNS
        .iter()
        .position(|c| c.name == sort.name)
        .unwrap_or(0);
    let site_sort = site_sort_column(options)?;
    let site_sort = SITE_COLUMNS
        .iter()
        .position(|c| c.name == site_sort.name)
        .unwrap_or(0);
    let mut view = view::View::new(sort, options.reverse, options.delay);
    view.show_sites(options.sites, site_sort);
    let mut screen = terminal::Screen::enter().map_err(TopError::Output)?;
    let source = reader.name();
    let mut next_read = Instant::now() + view.delay;
    let mut dirty = true;
    // A read that failed after the first: shown in the heading, the last snapshot kept.
    loop {
        if let Some(signal) = screen.signalled() {
            return Ok(Ended::Signal(signal));
        }
        let now = Instant::now();
        if !view.paused && now >= next_read {
            match reader.read() {
                Ok(Read::New(snap, moved)) => {
                    rates.next(snap);
                    rates.forget(&moved);
                    view.stale = None;
                }
                Ok(Read::Unchanged) => view.stale = None,
                Err(e) => view.stale = Some(e.to_string()),
            }
            next_read = now + view.delay;
            dirty = true;
        }
        if dirty {
            screen
                .terminal
                .draw(|f| view.draw(f, &rates, &source))
                .map_err(TopError::Output)?;
            dirty = false;
            // The tests' way to a panic with the view on the screen, in debug builds only:
            // nothing in the view panics by design, and the restore on a panic is promised.
            #[cfg(debug_assertions)]
            if std::env::var_os("MEMSTAT_TOP_TEST_PANIC").is_some() {
                panic!("MEMSTAT_TOP_TEST_PANIC is set");
            }
        }
        let wait = match view.paused {
            true => KEY_WAIT,
            false => next_read
                .saturating_duration_since(Instant::now())
                .min(KEY_WAIT),
        };
        let ready = event::poll(wait).map_err(TopError::Output)?;
        // A terminal that hung up (its window closed, the ssh session dropped) is no longer
        // a terminal: leave as for SIGHUP, which may not come, rather than poll a dead one.
        if !std::io::stdout().is_terminal() {
            return Ok(Ended::Signal(signal_hook::consts::SIGHUP));
        }
        if !ready {
            continue;
        }
        match event::read().map_err(TopError::Output)? {
            Event::Key(k) if k.kind != KeyEventKind::Release => {
                let present = rates.allocators_present();
                match view.key(k, &present) {
                    view::Action::None => {}
                    view::Action::Redraw => dirty = true,
                    view::Action::ReadNow => {
                        next_read = Instant::now();
                        dirty = true;
                    }
                    view::Action::Quit => return Ok(Ended::Quit),
                }
            }
            Event::Resize(..) => dirty = true,
            _ => {}
        }
    }
}

/// `--sort`'s column of the types (in_use_bytes by default); any, with `--sites`.
fn sort_column(options: &Options) -> Result<&'static Column, TopError> {
    match (&options.sort, options.sites) {
        (Some(name), false) => column(name).ok_or_else(|| {
            TopError::Usage(format!(
                "--sort {name:?}: no such column; the columns are {}",
                column_names()
            ))
        }),
        _ => Ok(column("in_use_bytes").expect("a column of COLUMNS")),
    }
}

/// `--sort`'s column of the call sites with `--sites` (bytes by default).
fn site_sort_column(options: &Options) -> Result<&'static SiteColumn, TopError> {
    match (&options.sort, options.sites) {
        (Some(name), true) => site_column(name).ok_or_else(|| {
            TopError::Usage(format!(
                "--sort {name:?}: no such column of the call sites; they are {}",
                sites::site_column_names()
            ))
        }),
        _ => Ok(site_column("bytes").expect("a column of SITE_COLUMNS")),
    }
}

/// One row of a frame: a memory type with its rates.
#[derive(Clone, Debug)]
pub struct TopRow<'a> {
    pub ty: &'a MemoryType,
    /// Its rates over the last interval, where it has them.
    pub rate: Option<&'a Rate>,
}

impl TopRow<'_> {
    fn per_sec(&self, delta: impl Fn(&Rate) -> Option<i128>) -> Option<f64> {
        let r = self.rate?;
        (r.seconds > 0.0).then(|| delta(r).map(|d| d as f64 / r.seconds))?
    }
}

/// A cell of a column.
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    Text(String),
    Count(Option<u64>),
    /// Per second, possibly negative (a level that fell).
    Rate(Option<f64>),
}

impl Cell {
    /// How it is printed in the text layout: `-` when absent.
    fn text(&self) -> String {
        match self {
            Cell::Text(s) => crate::memstat::display::escape_controls(s),
            Cell::Count(Some(n)) => n.to_string(),
            Cell::Rate(Some(r)) => format!("{r:.1}"),
            Cell::Count(None) | Cell::Rate(None) => "-".into(),
        }
    }

    fn json(&self) -> Value {
        match self {
            Cell::Text(s) => json!(s),
            Cell::Count(n) => json!(n),
            Cell::Rate(r) => json!(r.map(|r| (r * 10.0).round() / 10.0)),
        }
    }

    /// The order of a sort: numbers, absent ones last whatever the direction; names by text.
    fn sort_key(&self) -> (bool, f64, String) {
        match self {
            Cell::Text(s) => (false, 0.0, s.clone()),
            Cell::Count(n) => (n.is_none(), n.map_or(0.0, |n| n as f64), String::new()),
            Cell::Rate(r) => (r.is_none(), r.unwrap_or(0.0), String::new()),
        }
    }
}

/// One column: its JSON key and `--sort` name, its text header and width, and its cell.
pub struct Column {
    pub name: &'static str,
    pub header: &'static str,
    pub width: usize,
    /// Sorted from the largest by default (names from A).
    pub descending: bool,
    pub cell: fn(&TopRow) -> Cell,
}

/// Every column, in the order shown.
pub const COLUMNS: &[Column] = &[
    Column {
        name: "name",
        header: "NAME",
        width: 24,
        descending: false,
        cell: |r| Cell::Text(crate::memstat::display::display_name(r.ty)),
    },
    Column {
        name: "allocator",
        header: "ALLOC",
        width: 6,
        descending: false,
        cell: |r| Cell::Text(r.ty.allocator.to_string()),
    },
    Column {
        name: "size",
        header: "SIZE",
        width: 8,
        descending: true,
        cell: |r| Cell::Count(r.ty.size),
    },
    Column {
        name: "in_use_bytes",
        header: "INUSE-BYTES",
        width: 14,
        descending: true,
        cell: |r| Cell::Count(r.ty.in_use_bytes),
    },
    Column {
        name: "in_use_items",
        header: "INUSE",
        width: 10,
        descending: true,
        cell: |r| Cell::Count(r.ty.in_use_count),
    },
    Column {
        name: "free_items",
        header: "FREE",
        width: 10,
        descending: true,
        cell: |r| Cell::Count(r.ty.free_count),
    },
    Column {
        name: "allocs_per_sec",
        header: "ALLOC/s",
        width: 10,
        descending: true,
        cell: |r| Cell::Rate(r.rate.and_then(|r| r.allocs_per_sec)),
    },
    Column {
        name: "frees_per_sec",
        header: "FREE/s",
        width: 10,
        descending: true,
        cell: |r| Cell::Rate(r.rate.and_then(|r| r.frees_per_sec)),
    },
    Column {
        name: "bytes_per_sec",
        header: "BYTES/s",
        width: 12,
        descending: true,
        cell: |r| Cell::Rate(r.per_sec(|r| r.in_use_bytes_delta)),
    },
    Column {
        name: "items_per_sec",
        header: "INUSE/s",
        width: 10,
        descending: true,
        cell: |r| Cell::Rate(r.per_sec(|r| r.in_use_count_delta)),
    },
    Column {
        name: "failures",
        header: "FAIL",
        width: 8,
        descending: true,
        cell: |r| Cell::Count(r.ty.failures),
    },
    Column {
        name: "failures_per_sec",
        header: "FAIL/s",
        width: 8,
        descending: true,
        cell: |r| Cell::Rate(r.rate.and_then(|r| r.failures_per_sec)),
    },
];

/// The column `--sort` names, by its name or header, in any case.
pub fn column(name: &str) -> Option<&'static Column> {
    COLUMNS
        .iter()
        .find(|c| c.name.eq_ignore_ascii_case(name) || c.header.eq_ignore_ascii_case(name))
}

/// The names `--sort` takes, for its error.
pub fn column_names() -> String {
    let v: Vec<&str> = COLUMNS.iter().map(|c| c.name).collect();
    v.join(", ")
}

/// The rates between successive snapshots, kept across a snapshot seen twice.
#[derive(Default)]
pub struct Rates {
    last: Option<Snapshot>,
    rates: HashMap<TypeKey, Rate>,
    site_rates: HashMap<crate::memstat::allocinfo::SiteKey, sites::SiteRate>,
}

impl Rates {
    /// Takes in the next snapshot. A new one (another generation, or another time) gives new
    /// rates against the last; the same one again keeps the rates it gave.
    pub fn next(&mut self, snap: Snapshot) -> &Snapshot {
        let same = self
            .last
            .as_ref()
            .is_some_and(|l| l.generation == snap.generation && l.taken_at_ms == snap.taken_at_ms);
        if !same {
            self.rates = match &self.last {
                Some(last) => snap
                    .diff(last)
                    .into_iter()
                    .map(|r| (r.key.clone(), r))
                    .collect(),
                None => HashMap::new(),
            };
            self.site_rates = match &self.last {
                Some(last) => sites::site_rates(&snap, last),
                None => HashMap::new(),
            };
        }
        self.last.insert(snap)
    }

    /// The rows of the last snapshot, sorted by `sort` (reversed with `reverse`), at most `top`.
    pub fn rows(&self, sort: &Column, reverse: bool, top: Option<usize>) -> Vec<TopRow<'_>> {
        let mut rows = self.rows_where(sort, reverse, |_| true);
        rows.truncate(top.unwrap_or(usize::MAX));
        rows
    }

    /// The rows of the last snapshot that `keep` keeps, sorted by `sort` (reversed with
    /// `reverse`).
    pub fn rows_where(
        &self,
        sort: &Column,
        reverse: bool,
        keep: impl Fn(&TopRow) -> bool,
    ) -> Vec<TopRow<'_>> {
        let Some(snap) = &self.last else {
            return Vec::new();
        };
        let rows = snap
            .types
            .iter()
            .map(|ty| TopRow {
                ty,
                rate: self.rates.get(&ty.key()),
            })
            .filter(|row| keep(row));
        sorted(
            rows,
            |r| (sort.cell)(r).sort_key(),
            sort.descending != reverse,
        )
    }

    /// The call sites of the last snapshot that `keep` keeps, sorted by `sort`.
    pub fn site_rows(
        &self,
        sort: &SiteColumn,
        reverse: bool,
        keep: impl Fn(&SiteRow) -> bool,
    ) -> Vec<SiteRow<'_>> {
        match &self.last {
            Some(snap) => sites::site_rows(snap, &self.site_rates, sort, reverse, keep),
            None => Vec::new(),
        }
    }

    /// Drops the rates of `keys`: their counters restarted in the last interval.
    pub fn forget(&mut self, keys: &[TypeKey]) {
        for k in keys {
            self.rates.remove(k);
        }
    }

    /// The allocators of the last snapshot's types, in the allocators' order.
    pub fn allocators_present(&self) -> Vec<crate::memstat::Allocator> {
        let mut present = Vec::new();
        for t in self.last.iter().flat_map(|s| s.types.iter()) {
            if !present.contains(&t.allocator) {
                present.push(t.allocator);
            }
        }
        present.sort();
        present
    }

    /// The interval the rates were taken over, in seconds, once there are two snapshots.
    pub fn seconds(&self) -> Option<f64> {
        self.rates
            .values()
            .next()
            .map(|r| r.seconds)
            .or_else(|| self.site_rates.values().next().map(|r| r.seconds))
    }
}

/// What every text frame starts with: a line saying what it is, the kernel overview and the
/// allocators' totals.
fn text_head(heading: &str, snap: &Snapshot) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{heading}");
    out.push_str(&crate::report::overview(snap));
    out.push_str(&totals_text(snap));
    out
}

/// What every JSON frame holds besides its rows: when, the snapshot's generation and source,
/// and the interval the rates cover (null at the first).
fn json_head(snap: &Snapshot, seconds: Option<f64>) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("taken_at_ms".into(), json!(snap.taken_at_ms));
    m.insert("generation".into(), json!(snap.generation));
    m.insert("source".into(), json!(snap.source));
    m.insert("interval_seconds".into(), json!(seconds));
    m
}

/// A frame as text: the head, then the table.
pub fn text_frame(heading: &str, snap: &Snapshot, rows: &[TopRow]) -> String {
    let mut out = text_head(heading, snap);
    let _ = writeln!(out);
    let _ = writeln!(out, "{}", text_cells(COLUMNS.iter().map(|c| c.header)));
    for r in rows {
        let cells: Vec<String> = COLUMNS.iter().map(|c| (c.cell)(r).text()).collect();
        let _ = writeln!(out, "{}", text_cells(cells.iter().map(String::as_str)));
    }
    out
}

/// The allocators' totals, a line each under a header; empty with no types.
pub(crate) fn totals_text(snap: &Snapshot) -> String {
    let mut out = String::new();
    let totals: Vec<_> = snap
        .allocator_totals()
        .into_iter()
        .filter(|t| t.types > 0)
        .collect();
    if totals.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "{:<10} {:>8} {:>16} {:>16} {:>12}",
        "ALLOCATOR", "TYPES", "INUSE-BYTES", "FREE-BYTES", "FAILURES"
    );
    let n = |v: Option<u64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
    for t in totals {
        let _ = writeln!(
            out,
            "{:<10} {:>8} {:>16} {:>16} {:>12}",
            t.allocator.to_string(),
            t.types,
            n(t.in_use_bytes),
            n(t.free_bytes),
            n(t.failures)
        );
    }
    out
}

/// A line of the table from its cells' texts, in the columns' order.
pub(crate) fn text_cells<'a>(cells: impl Iterator<Item = &'a str>) -> String {
    let mut line = String::new();
    for ((i, c), text) in COLUMNS.iter().enumerate().zip(cells) {
        push_cell(&mut line, i, c.width, is_numeric(c), text);
    }
    line.truncate(line.trim_end().len());
    line
}

/// Appends one cell: text left-aligned, numbers right-aligned, a space between.
pub(crate) fn push_cell(line: &mut String, i: usize, width: usize, numeric: bool, text: &str) {
    if i > 0 {
        line.push(' ');
    }
    if numeric {
        let _ = write!(line, "{text:>width$}");
    } else {
        let _ = write!(line, "{text:<width$}");
    }
}

/// Whether a type column holds numbers (right-aligned).
pub(crate) fn is_numeric(c: &Column) -> bool {
    !matches!(c.name, "name" | "allocator")
}

/// `rows` sorted by `key`: absent figures last, whatever the direction; then by value; then
/// by text.
pub(crate) fn sorted<R>(
    rows: impl Iterator<Item = R>,
    key: impl Fn(&R) -> (bool, f64, String),
    descending: bool,
) -> Vec<R> {
    let mut keyed: Vec<(R, (bool, f64, String))> = rows
        .map(|r| {
            let k = key(&r);
            (r, k)
        })
        .collect();
    keyed.sort_by(|(_, a), (_, b)| {
        a.0.cmp(&b.0).then_with(|| {
            let by_value = a.1.total_cmp(&b.1).then_with(|| a.2.cmp(&b.2));
            if descending {
                by_value.reverse()
            } else {
                by_value
            }
        })
    });
    keyed.into_iter().map(|(r, _)| r).collect()
}

/// A frame as one JSON object: the head, the allocators' totals, and the rows with every
/// column (null when absent).
pub fn json_frame(snap: &Snapshot, seconds: Option<f64>, rows: &[TopRow]) -> String {
    let rows: Vec<Value> = rows
        .iter()
        .map(|r| {
            let mut m = Map::new();
            for c in COLUMNS {
                m.insert(c.name.into(), (c.cell)(r).json());
            }
            Value::Object(m)
        })
        .collect();
    let allocators: Vec<Value> = snap
        .allocator_totals()
        .into_iter()
        .filter(|t| t.types > 0)
        .map(|t| {
            json!({
                "allocator": t.allocator.to_string(),
                "types": t.types,
                "in_use_bytes": t.in_use_bytes,
                "free_bytes": t.free_bytes,
                "failures": t.failures,
            })
        })
        .collect();
    let mut frame = json_head(snap, seconds);
    frame.insert("allocators".into(), Value::Array(allocators));
    frame.insert("rows".into(), Value::Array(rows));
    serde_json::to_string(&Value::Object(frame)).expect("a frame always serialises")
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;

/// A frame of call sites as text: the head, the state of profiling, then the sites.
pub fn site_text_frame(heading: &str, snap: &Snapshot, rows: &[SiteRow]) -> String {
    let mut out = text_head(heading, snap);
    let _ = writeln!(out, "{}", profiling_line(snap, rows.len()));
    let _ = writeln!(out);
    let _ = writeln!(out, "{}", sites::header_line());
    for r in rows {
        let _ = writeln!(out, "{}", sites::row_line(r));
    }
    out
}

/// What is known of allocation profiling, in a line.
pub(crate) fn profiling_line(snap: &Snapshot, shown: usize) -> String {
    match &snap.profiling {
        Some(p) => format!(
            "ALLOCATION CALL SITES: profiling {}; {shown} of {} sites",
            p.state.describe(),
            p.sites.len()
        ),
        None => "ALLOCATION CALL SITES: none read (allocation profiling is Linux's \
                 /proc/allocinfo, 6.10 and later)"
            .to_string(),
    }
}

/// A frame of call sites as one JSON object: the head, the state of profiling, and the
/// sites.
pub fn site_json_frame(snap: &Snapshot, seconds: Option<f64>, rows: &[SiteRow]) -> String {
    let sites: Vec<Value> = rows
        .iter()
        .map(|r| {
            let mut m = Map::new();
            for c in SITE_COLUMNS {
                m.insert(c.name.into(), (c.cell)(r).json());
            }
            Value::Object(m)
        })
        .collect();
    let mut frame = json_head(snap, seconds);
    let profiling = snap.profiling.as_ref();
    frame.insert("profiling".into(), json!(profiling.map(|p| p.state)));
    frame.insert("sites_read".into(), json!(profiling.map(|p| p.sites.len())));
    frame.insert("sites".into(), Value::Array(sites));
    serde_json::to_string(&Value::Object(frame)).expect("a frame always serialises")
}
