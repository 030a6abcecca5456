//! Walk consistency, freshness and staleness of memTypeTable, checked end to end: the daemon
//! behind a real net-snmp snmpd (the AgentX master), queried with net-snmp's own clients
//! (snmpwalk, snmpbulkwalk, snmpbulkget, snmpgetnext, snmpget).
//!
//! The contract under test (per walk = a sequence of requests each starting where the
//! previous one stopped):
//! - Consistency: a walk is served from one snapshot unless it runs longer than walk-window,
//!   whatever the mix of requests, max-repetitions, managers, pauses.
//! - Freshness: a new walk or Get sees figures no older than max-age when nothing else is
//!   walking, and no older than F = max(max_age, walk_window - max_age) while other walks run.
//! - Staleness: once the source moved on and nobody asked anything for max_age +
//!   walk_window, no old figure is served from any OID, including where old walks parked.
//!
//! The fixture is rewritten continuously by [`FixtureWriter`] with a generation number g that
//! every numeric figure encodes (`g * 1_000_000 + row * 100 + column`), so the generation of
//! every varbind a client receives can be decoded, and a walk that mixes snapshots shows up.

mod common;

use common::*;
use memstat_agentx::memstat::{Allocator, MemoryType};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// memTypeTable's accessible columns.
const FIRST_COL: u32 = 2;
const LAST_COL: u32 = 24;
/// Columns whose value encodes the generation (the Counter64 columns and the size mask).
const GEN_COLS: std::ops::RangeInclusive<u32> = 5..=23;
const GEN_UNIT: u64 = 1_000_000;
const MEM_TYPE_IN_USE_COUNT: u32 = 9;
const MEM_TYPE_ALLOCS: u32 = 13;

// ---------------------------------------------------------------------------------------------
// The generation-encoding fixture
// ---------------------------------------------------------------------------------------------

/// What a cell of `row` (memTypeIndex, 1-based) and `col` holds besides its generation.
fn offset(row: u32, col: u32) -> u64 {
    u64::from(row) * 100 + u64::from(col)
}

fn type_name(row: u32) -> String {
    format!("zone{row:04}")
}

/// `rows` memory types of generation `gen`. Names (so row identity and memTypeIndex) never
/// change; every statistic is `gen * GEN_UNIT + offset(row, column)`. The per-CPU table is
/// left empty: only memTypeTable is walked.
fn gen_types(gen: u64, rows: u32) -> Vec<MemoryType> {
    (1..=rows)
        .map(|row| {
            let v = |col| Some(gen * GEN_UNIT + offset(row, col));
            let mut t = MemoryType::new(Allocator::Uma, type_name(row));
            t.size = v(5);
            t.real_size = v(6);
            t.count_limit = v(7);
            t.bytes_limit = v(8);
            t.in_use_count = v(9);
            t.in_use_bytes = v(10);
            t.free_count = v(11);
            t.total_count = v(12);
            t.allocs = v(13);
            t.frees = v(14);
            t.bytes_allocated = v(15);
            t.bytes_freed = v(16);
            t.failures = v(17);
            t.sleeps = v(18);
            t.xdomain = v(19);
            t.zone_free = v(20);
            t.keg_free = v(21);
            t.size_mask = v(22);
            t.slab_bytes = v(23);
            t
        })
        .collect()
}

/// A background thread that rewrites the fixture every `period` with the next generation
/// (atomically, through [`write_fixture`]'s temp file and rename).
struct FixtureWriter {
    path: PathBuf,
    rows: u32,
    stop: Arc<AtomicBool>,
    /// The newest generation written completely.
    written: Arc<AtomicU64>,
    handle: Option<JoinHandle<()>>,
}

impl FixtureWriter {
    fn start(path: &Path, rows: u32, first_gen: u64, period: Duration) -> FixtureWriter {
        let stop = Arc::new(AtomicBool::new(false));
        let written = Arc::new(AtomicU64::new(first_gen - 1));
        let handle = {
            let (stop, written, path) = (stop.clone(), written.clone(), path.to_path_buf());
            std::thread::spawn(move || {
                let mut gen = first_gen;
                while !stop.load(Ordering::Relaxed) {
                    write_fixture(&path, gen_types(gen, rows));
                    written.store(gen, Ordering::SeqCst);
                    gen += 1;
                    std::thread::sleep(period);
                }
            })
        };
        FixtureWriter {
            path: path.to_path_buf(),
            rows,
            stop,
            written,
            handle: Some(handle),
        }
    }

    fn written(&self) -> u64 {
        self.written.load(Ordering::SeqCst)
    }

    /// Stops the thread; returns the last generation written.
    fn stop(&mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            h.join().expect("fixture writer panicked");
        }
        self.written()
    }

    /// Stops the thread and writes one more generation, `jump` past the last one, so that it
    /// cannot be confused with any generation served before. Returns it.
    fn stop_and_jump(&mut self, jump: u64) -> u64 {
        let gen = self.stop() + jump;
        write_fixture(&self.path, gen_types(gen, self.rows));
        self.written.store(gen, Ordering::SeqCst);
        gen
    }
}

impl Drop for FixtureWriter {
    fn drop(&mut self) {
        self.stop();
    }
}

// ---------------------------------------------------------------------------------------------
// Decoding what the clients print
// ---------------------------------------------------------------------------------------------

fn oid_parts(oid: &str) -> Vec<u32> {
    oid.trim_start_matches('.')
        .split('.')
        .map(|p| p.parse().unwrap_or(u32::MAX))
        .collect()
}

/// (column, memTypeIndex) of a memTypeTable instance OID.
fn type_cell(oid: &str) -> Option<(u32, u32)> {
    let rest = oid.strip_prefix(TYPE_ENTRY)?.strip_prefix('.')?;
    let (col, row) = rest.split_once('.')?;
    Some((col.parse().ok()?, row.parse().ok()?))
}

fn cell_oid(col: u32, row: u32) -> String {
    format!("{TYPE_ENTRY}.{col}.{row}")
}

fn in_table(l: &Line) -> bool {
    type_cell(&l.oid).is_some()
}

/// The generation a memTypeTable varbind encodes: `Ok(None)` for the identity columns and
/// memTypeDiscontinuityTime (checked, but carrying no generation), `Err` when the cell is
/// not what this row and column should hold.
fn cell_gen(l: &Line) -> Result<Option<u64>, String> {
    let (col, row) =
        type_cell(&l.oid).ok_or_else(|| format!("{} is not in memTypeTable", l.oid))?;
    let value = l.value.trim();
    let bad = |what: &str| Err(format!("{} = {}: {}: {what}", l.oid, l.ty, value));
    let numeric = match (col, l.ty.as_str()) {
        (2, "STRING") if value == type_name(row) => return Ok(None),
        (3, "INTEGER") if value == "2" => return Ok(None),
        (4, "Gauge32") if value == "0" => return Ok(None),
        (24, "Timeticks") => return Ok(None),
        (22, "Hex-STRING") => {
            let bytes: Result<Vec<u8>, _> = value
                .split_whitespace()
                .map(|b| u8::from_str_radix(b, 16))
                .collect();
            match bytes {
                Ok(b) if b.len() == 8 => u64::from_be_bytes(b.try_into().unwrap()),
                _ => return bad("not 8 hex octets"),
            }
        }
        (c, "Counter64") if GEN_COLS.contains(&c) => match value.parse::<u64>() {
            Ok(v) => v,
            Err(_) => return bad("not a number"),
        },
        _ => return bad("unexpected type or value for this column"),
    };
    if numeric % GEN_UNIT != offset(row, col) {
        return bad(&format!(
            "belongs to another cell (expected offset {})",
            offset(row, col)
        ));
    }
    Ok(Some(numeric / GEN_UNIT))
}

/// The generations of the memTypeTable varbinds in `lines`; cells that decode wrongly are
/// added to `problems`.
fn gens_of(lines: &[Line], problems: &mut Vec<String>) -> BTreeSet<u64> {
    let mut gens = BTreeSet::new();
    for l in lines.iter().filter(|l| in_table(l)) {
        match cell_gen(l) {
            Ok(Some(g)) => {
                gens.insert(g);
            }
            Ok(None) => {}
            Err(e) => problems.push(e),
        }
    }
    gens
}

/// Checks one walk of the whole memTypeTable: every row × column exactly once, OIDs strictly
/// increasing, every cell holding its own row's and column's value. Returns the generations
/// seen and the problems found.
fn check_table_walk(lines: &[Line], rows: u32) -> (BTreeSet<u64>, Vec<String>) {
    let mut problems = Vec::new();
    let mut prev: Option<Vec<u32>> = None;
    let mut seen = BTreeSet::new();
    for l in lines {
        let parts = oid_parts(&l.oid);
        if let Some(p) = &prev {
            if parts <= *p {
                problems.push(format!("OID not increasing: {} after {:?}", l.oid, p));
            }
        }
        prev = Some(parts);
        match type_cell(&l.oid) {
            Some(c) => {
                if !seen.insert(c) {
                    problems.push(format!("duplicate {}", l.oid));
                }
            }
            None => problems.push(format!("{} is outside memTypeTable", l.oid)),
        }
    }
    let missing: Vec<String> = (FIRST_COL..=LAST_COL)
        .flat_map(|c| (1..=rows).map(move |r| (c, r)))
        .filter(|c| !seen.contains(c))
        .map(|(c, r)| cell_oid(c, r))
        .collect();
    if !missing.is_empty() {
        problems.push(format!(
            "{} cells missing, first {:?}",
            missing.len(),
            &missing[..missing.len().min(5)]
        ));
    }
    let extra = seen
        .iter()
        .filter(|(c, r)| !(FIRST_COL..=LAST_COL).contains(c) || !(1..=rows).contains(r))
        .count();
    if extra > 0 {
        problems.push(format!("{extra} cells that no row has"));
    }
    let gens = gens_of(lines, &mut problems);
    (gens, problems)
}

/// [`start_with_fixture`] with `gen_types(1, rows)`, retried when snmpd could not bind the
/// port the harness picked: the harness picks a free port and releases it before snmpd binds
/// it, and with hundreds of client processes per second binding ephemeral UDP ports in the
/// tests running alongside, another process occasionally takes it in between.
fn start_daemon(rows: u32, args: &[&str]) -> (tempfile::TempDir, Snmpd, Daemon) {
    let mut attempt = 1;
    loop {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            start_with_fixture(Transport::Unix, gen_types(1, rows), args)
        }));
        match r {
            Ok(started) => return started,
            Err(e) => {
                let msg = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                if attempt >= 3 || !msg.contains("Error opening specified endpoint") {
                    std::panic::resume_unwind(e);
                }
                println!("snmpd could not bind its port (attempt {attempt}); retrying");
                attempt += 1;
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Clients
// ---------------------------------------------------------------------------------------------

/// Runs a client; its memTypeTable (and other) lines, or its stderr when it fails.
fn run(tool: &str, port: u16, opts: &[&str], oids: &[&str]) -> Result<Vec<Line>, String> {
    let mut o = vec!["-t", "3", "-r", "1"];
    o.extend_from_slice(opts);
    let out = snmp_cmd(tool, port, &o, oids);
    if out.status.success() {
        Ok(parse_lines(&String::from_utf8_lossy(&out.stdout)))
    } else {
        Err(format!(
            "{tool} {opts:?} {oids:?} failed: {} {}",
            String::from_utf8_lossy(&out.stderr).trim(),
            String::from_utf8_lossy(&out.stdout).trim()
        ))
    }
}

/// Runs a client that must succeed.
fn must(tool: &str, port: u16, opts: &[&str], oids: &[&str]) -> Vec<Line> {
    run(tool, port, opts, oids).unwrap_or_else(|e| panic!("{e}"))
}

/// The one generation of a response's memTypeTable cells; panics (with `what`) when the
/// response has none, mixes generations, or holds a wrong cell.
fn one_gen(lines: &[Line], what: &str) -> u64 {
    let mut problems = Vec::new();
    let gens = gens_of(lines, &mut problems);
    assert!(problems.is_empty(), "{what}: wrong cells {problems:?}");
    assert_eq!(
        gens.len(),
        1,
        "{what}: expected one generation, got {gens:?} in {lines:?}"
    );
    *gens.iter().next().unwrap()
}

/// The last memTypeTable OID of a response (where a walk that sent it is parked).
fn last_table_oid(lines: &[Line]) -> String {
    lines
        .iter()
        .rev()
        .find(|l| in_table(l))
        .map(|l| l.oid.clone())
        .expect("a response with memTypeTable cells")
}

/// Small xorshift generator: no extra dev-dependency for a few random choices.
struct Rng(u64);

impl Rng {
    fn new(salt: u64) -> Rng {
        let t = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        Rng((t ^ salt.wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1)
    }

    fn below(&mut self, n: u32) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % u64::from(n)) as u32
    }

    /// Uniform in `lo..=hi`.
    fn between(&mut self, lo: u32, hi: u32) -> u32 {
        lo + self.below(hi - lo + 1)
    }
}

// ---------------------------------------------------------------------------------------------
// Walking managers
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug)]
enum Manager {
    /// `snmpbulkwalk -Cr<n>` of memTypeEntry.
    Bulk(u32),
    /// `snmpwalk` (GetNext only) of memTypeEntry.
    Walk,
}

impl Manager {
    fn label(self) -> String {
        match self {
            Manager::Bulk(r) => format!("snmpbulkwalk -Cr{r}"),
            Manager::Walk => "snmpwalk".into(),
        }
    }
}

/// One complete walk of memTypeTable by one manager.
struct WalkRecord {
    manager: String,
    took: Duration,
    /// Wall-clock start and end, to match the daemon's log lines.
    span: (SystemTime, SystemTime),
    /// The client's error, if it failed.
    failed: Option<String>,
    gens: BTreeSet<u64>,
    problems: Vec<String>,
}

/// Walks memTypeTable over and over until `stop`, the first walk after `start_after`,
/// counting each walk it finishes in `walked`, for a test that waits for walks to have been
/// made.
fn spawn_counted_walker(
    port: u16,
    m: Manager,
    rows: u32,
    start_after: Duration,
    stop: Arc<AtomicBool>,
    walked: Arc<AtomicU64>,
) -> JoinHandle<Vec<WalkRecord>> {
    std::thread::spawn(move || {
        // Staggered starts, as independent pollers have: the shape of the load, not a wait
        // for anything (nothing is asserted about the time a walker starts).
        std::thread::sleep(start_after);
        let mut out = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let t0 = Instant::now();
            let wall0 = SystemTime::now();
            let res = match m {
                Manager::Bulk(r) => run("snmpbulkwalk", port, &[&format!("-Cr{r}")], &[TYPE_ENTRY]),
                Manager::Walk => run("snmpwalk", port, &[], &[TYPE_ENTRY]),
            };
            let took = t0.elapsed();
            let span = (wall0, SystemTime::now());
            let rec = match res {
                Ok(lines) => {
                    let (gens, problems) = check_table_walk(&lines, rows);
                    WalkRecord {
                        manager: m.label(),
                        took,
                        span,
                        failed: None,
                        gens,
                        problems,
                    }
                }
                Err(e) => WalkRecord {
                    manager: m.label(),
                    took,
                    span,
                    failed: Some(e),
                    gens: BTreeSet::new(),
                    problems: Vec::new(),
                },
            };
            out.push(rec);
            walked.fetch_add(1, Ordering::Relaxed);
        }
        out
    })
}

/// What the random Get/GetNext manager saw.
#[derive(Default)]
struct RandomStats {
    requests: u64,
    problems: Vec<String>,
}

/// Random `snmpget`s of three instances in one request (which must be single-generation:
/// one request is one snapshot) and random `snmpgetnext`s (which must return the successor
/// cell), until `stop`.
fn spawn_random_manager(
    port: u16,
    rows: u32,
    seed: u64,
    stop: Arc<AtomicBool>,
) -> JoinHandle<RandomStats> {
    std::thread::spawn(move || {
        let mut rng = Rng::new(u64::from(port) ^ seed);
        let mut st = RandomStats::default();
        while !stop.load(Ordering::Relaxed) {
            st.requests += 1;
            if rng.below(2) == 0 {
                let oids: Vec<String> = (0..3)
                    .map(|_| cell_oid(rng.between(5, 23), rng.between(1, rows)))
                    .collect();
                let refs: Vec<&str> = oids.iter().map(String::as_str).collect();
                match run("snmpget", port, &[], &refs) {
                    Ok(lines) => {
                        let gens = gens_of(&lines, &mut st.problems);
                        if lines.len() != 3 || gens.len() != 1 {
                            st.problems
                                .push(format!("snmpget {oids:?}: {gens:?} from {lines:?}"));
                        }
                    }
                    Err(e) => st.problems.push(e),
                }
            } else {
                let (col, row) = (rng.between(FIRST_COL, LAST_COL), rng.between(1, rows));
                let want = if row < rows {
                    Some(cell_oid(col, row + 1))
                } else if col < LAST_COL {
                    Some(cell_oid(col + 1, 1))
                } else {
                    None // past the table: whatever follows it
                };
                match run("snmpgetnext", port, &[], &[&cell_oid(col, row)]) {
                    Ok(lines) => {
                        let got = lines.first().map(|l| l.oid.clone());
                        if want.is_some() && got != want {
                            st.problems
                                .push(format!("snmpgetnext {col}.{row}: {got:?}, want {want:?}"));
                        }
                        gens_of(&lines, &mut st.problems);
                    }
                    Err(e) => st.problems.push(e),
                }
            }
        }
        st
    })
}

/// When the daemon logged each "ambiguous continuation" (the residual case of
/// ARCHITECTURE.md: walks on two snapshots parked at the same OID at once).
fn ambiguous_times(daemon: &Daemon, which: Explains) -> Vec<SystemTime> {
    daemon
        .log_text()
        .lines()
        .filter(|l| l.contains("ambiguous continuation"))
        .filter(|l| which == Explains::Ambiguous || l.contains("(contest)"))
        .filter_map(|l| log_time(l.split_whitespace().next()?))
        .collect()
}

/// A tracing timestamp, `2026-12-01T00:45:16.820214Z`, as a SystemTime.
fn log_time(s: &str) -> Option<SystemTime> {
    let s = s.strip_suffix('Z')?;
    let (date, time) = s.split_once('T')?;
    let d: Vec<i64> = date
        .split('-')
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
    let t: Vec<u64> = hms
        .split(':')
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    if d.len() != 3 || t.len() != 3 {
        return None;
    }
    // Days since 1970-01-01 of a proleptic Gregorian date.
    let (y, m) = if d[1] <= 2 {
        (d[0] - 1, d[1] + 9)
    } else {
        (d[0], d[1] - 3)
    };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + d[2] - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = u64::try_from(era * 146_097 + doe - 719_468).ok()?;
    let nanos: u64 = format!("{frac:0<9}")[..9].parse().ok()?;
    Some(
        SystemTime::UNIX_EPOCH
            + Duration::from_secs(days * 86_400 + t[0] * 3600 + t[1] * 60 + t[2])
            + Duration::from_nanos(nanos),
    )
}

fn fmt_dur(d: Duration) -> String {
    format!("{:.2}s", d.as_secs_f64())
}

// ---------------------------------------------------------------------------------------------
// 1. Concurrent managers
// ---------------------------------------------------------------------------------------------

/// Who walks and asks, how often the source changes, and how many mixed walks are allowed.
struct Load<'a> {
    managers: &'a [Manager],
    random_clients: usize,
    fixture_period: Duration,
    /// Mixed walks shorter than walk-window, at most `.0` in `.1` of the completed walks.
    mixed_at_most: (usize, usize),
    /// Which logged ambiguous continuations explain a mixed walk.
    explained_by: Explains,
}

/// The daemon logs every ambiguous continuation; a walk may mix snapshots only while one it
/// names ran.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Explains {
    /// Any ambiguous continuation.
    Ambiguous,
    /// Only a contest as the agent counts one: parks of two snapshots at the very OID, both
    /// younger than the in-progress window and not passed over by an earlier contest (the
    /// residual case, which nothing but timing tells apart). The agent cannot tell a moving walk from a stand-in a lone request
    /// left within that window, so a contest may involve one; a walk moved through an older
    /// park, or through anything but a contest, is a failure whatever the rate.
    Contest,
}

/// The load of the residual-case measurement: eight bulk walkers of every stride, a GetNext
/// walker and one random client, the fixture rewritten every 3 ms.
const EVERY_STRIDE: Load = Load {
    managers: &[
        Manager::Bulk(1),
        Manager::Bulk(2),
        Manager::Bulk(3),
        Manager::Bulk(5),
        Manager::Bulk(7),
        Manager::Bulk(10),
        Manager::Bulk(20),
        Manager::Bulk(50),
        Manager::Walk,
    ],
    random_clients: 1,
    fixture_period: Duration::from_millis(3),
    mixed_at_most: (1, 20),
    explained_by: Explains::Ambiguous,
};

/// Runs `load` for `run_for` against a daemon started with `args`, and checks every walk.
fn concurrent_managers(
    label: &str,
    rows: u32,
    args: &[&str],
    window: Duration,
    run_for: Duration,
    load: &Load,
) {
    let (dir, snmpd, daemon) = start_daemon(rows, args);
    let port = snmpd.port;
    let mut writer = FixtureWriter::start(
        &dir.path().join("fixture.json"),
        rows,
        2,
        load.fixture_period,
    );
    let stop = Arc::new(AtomicBool::new(false));
    let managers = load.managers;
    // Managers start 50 ms apart, as independent pollers would, rather than all in the same
    // millisecond (with max-age 10 ms that would put walkers of the same stride on different
    // snapshots in lockstep at the same OIDs: the residual ambiguous case, not the common one).
    // They fall in and out of step with each other afterwards anyway.
    let walked: Vec<Arc<AtomicU64>> = managers.iter().map(|_| Arc::default()).collect();
    let walkers: Vec<_> = managers
        .iter()
        .zip(&walked)
        .enumerate()
        .map(|(i, (&m, walked))| {
            let after = Duration::from_millis(50 * i as u64);
            spawn_counted_walker(port, m, rows, after, stop.clone(), walked.clone())
        })
        .collect();
    let randoms: Vec<_> = (0..load.random_clients)
        .map(|i| spawn_random_manager(port, rows, i as u64 * 7919, stop.clone()))
        .collect();
    // The load runs for `run_for`: its length is the condition under test (the rate of
    // mixed walks is measured over it), not a wait for something. It then goes on until every
    // walker has finished a walk, so that a slow machine makes the run longer, never a
    // manager with no walk to check.
    let t_load = Instant::now();
    wait_until(
        &format!("{run_for:?} of load, and a walk finished by every walker"),
        || t_load.elapsed() >= run_for && walked.iter().all(|w| w.load(Ordering::Relaxed) >= 1),
        || daemon.log_text(),
    );
    stop.store(true, Ordering::Relaxed);
    let walks: Vec<WalkRecord> = walkers
        .into_iter()
        .flat_map(|h| h.join().expect("walker panicked"))
        .collect();
    let mut random = RandomStats::default();
    for r in randoms {
        let r = r.join().expect("random manager panicked");
        random.requests += r.requests;
        random.problems.extend(r.problems);
    }
    let last_gen = writer.stop();
    let ambiguous_at = ambiguous_times(&daemon, load.explained_by);
    let kind = match load.explained_by {
        Explains::Ambiguous => "ambiguous continuation",
        Explains::Contest => "ambiguous continuation between moving walks (contest)",
    };
    let ambiguous = ambiguous_at.len();

    // Report.
    println!("[{label}] fixture went through {last_gen} generations");
    let mut by_manager: BTreeMap<&str, Vec<&WalkRecord>> = BTreeMap::new();
    for w in &walks {
        by_manager.entry(&w.manager).or_default().push(w);
    }
    for (m, ws) in &by_manager {
        let mut d: Vec<Duration> = ws.iter().map(|w| w.took).collect();
        d.sort();
        let mixed = ws.iter().filter(|w| w.gens.len() > 1).count();
        println!(
            "[{label}] {m:>20}: {} walks, {} mixed, {} failed, duration min {} median {} max {}",
            ws.len(),
            mixed,
            ws.iter().filter(|w| w.failed.is_some()).count(),
            fmt_dur(d[0]),
            fmt_dur(d[d.len() / 2]),
            fmt_dur(d[d.len() - 1]),
        );
    }
    let completed: Vec<&WalkRecord> = walks.iter().filter(|w| w.failed.is_none()).collect();
    let mixed: Vec<&WalkRecord> = completed
        .iter()
        .copied()
        .filter(|w| w.gens.len() > 1)
        .collect();
    let long: Vec<&WalkRecord> = completed
        .iter()
        .copied()
        .filter(|w| w.took >= window)
        .collect();
    let mixed_short: Vec<&WalkRecord> = mixed.iter().copied().filter(|w| w.took < window).collect();
    println!(
        "[{label}] walks: {} ({} completed), mixed: {} ({} of them shorter than walk-window {}), \
         longer than walk-window: {}, random Get/GetNext requests: {}, \
         {kind} log lines: {ambiguous}",
        walks.len(),
        completed.len(),
        mixed.len(),
        mixed_short.len(),
        fmt_dur(window),
        long.len(),
        random.requests,
    );
    for w in &long {
        println!(
            "[{label}] long walk: {} took {} (generations {:?})",
            w.manager,
            fmt_dur(w.took),
            w.gens
        );
    }
    for w in &mixed {
        println!(
            "[{label}] mixed walk: {} took {}, generations {:?}",
            w.manager,
            fmt_dur(w.took),
            w.gens
        );
    }

    // Checks.
    let failed: Vec<&String> = walks.iter().filter_map(|w| w.failed.as_ref()).collect();
    assert!(
        failed.is_empty(),
        "[{label}] {} walks failed (client error), first: {}",
        failed.len(),
        failed[0]
    );
    for (m, ws) in &by_manager {
        assert!(!ws.is_empty(), "[{label}] {m} completed no walk");
    }
    let broken: Vec<String> = completed
        .iter()
        .filter(|w| !w.problems.is_empty())
        .map(|w| {
            format!(
                "{}: {:?}",
                w.manager,
                &w.problems[..w.problems.len().min(3)]
            )
        })
        .collect();
    assert!(
        broken.is_empty(),
        "[{label}] {} walks are incomplete or out of order, e.g. {:?}",
        broken.len(),
        &broken[..broken.len().min(3)]
    );
    assert!(
        random.problems.is_empty(),
        "[{label}] random Get/GetNext manager: {} problems, e.g. {:?}",
        random.problems.len(),
        &random.problems[..random.problems.len().min(3)]
    );
    // A walk shorter than walk-window may mix snapshots only through the residual case the
    // daemon names: an ambiguous continuation logged while that walk ran. Any other mixing is
    // a failure, and the residual case must stay rare.
    let explained = |w: &WalkRecord| {
        ambiguous_at
            .iter()
            .any(|t| *t >= w.span.0 && *t <= w.span.1)
    };
    let unexplained: Vec<&WalkRecord> = mixed_short
        .iter()
        .copied()
        .filter(|w| !explained(w))
        .collect();
    println!(
        "[{label}] residual case: {} of {} walks mixed snapshots, each during an {kind}",
        mixed_short.len() - unexplained.len(),
        completed.len()
    );
    assert!(
        unexplained.is_empty(),
        "[{label}] {} of {} walks shorter than walk-window {} mixed snapshots with no \
         {kind} logged while they ran ({kind} log lines: {ambiguous}): {:?}",
        unexplained.len(),
        completed.len(),
        fmt_dur(window),
        unexplained
            .iter()
            .map(|w| format!(
                "{} in {}: generations {:?}",
                w.manager,
                fmt_dur(w.took),
                w.gens
            ))
            .collect::<Vec<_>>()
    );
    // The limit is a rate, and a run sees only some 150 walks: a daemon whose walks mix at
    // 0.8 in 100 shows 2 or more of 150 one run in three. So the check is the one-sided
    // binomial test of the limit: the run fails when a daemon whose walks mix at exactly
    // `most` in `per` would show this many mixed walks or more less than once in a thousand
    // runs. A limit of 0 is still exact: one mixed walk fails.
    let (most, per) = load.mixed_at_most;
    let rate = most as f64 / per as f64;
    let chance = binomial_tail(completed.len(), mixed_short.len(), rate);
    println!(
        "[{label}] at {most} in {per}, {} or more mixed walks of {} have a chance of {chance:.2e}",
        mixed_short.len(),
        completed.len()
    );
    assert!(
        chance >= FALSE_FAILURE,
        "[{label}] {} of {} walks mixed snapshots: more than {most} in {per} (a daemon that \
         mixes at that rate shows as many or more with a chance of {chance:.2e}, below \
         {FALSE_FAILURE:e})",
        mixed_short.len(),
        completed.len()
    );
}

/// How rarely a rate test may fail a daemon that meets its limit exactly.
const FALSE_FAILURE: f64 = 1e-3;

/// P(X ≥ k) for X binomial with `n` trials of probability `p`: summed from the terms at k
/// and above, so that a small tail is not lost to cancellation.
fn binomial_tail(n: usize, k: usize, p: f64) -> f64 {
    if k == 0 {
        return 1.0;
    }
    if p <= 0.0 || k > n {
        return 0.0;
    }
    if p >= 1.0 {
        return 1.0;
    }
    let mut term = (1.0 - p).powi(n as i32); // P(X = 0)
    let mut tail = 0.0;
    for i in 0..=n {
        if i >= k {
            tail += term;
        }
        term *= (n - i) as f64 / (i + 1) as f64 * p / (1.0 - p);
    }
    tail.min(1.0)
}

#[test]
fn the_rate_test_fails_only_what_the_limit_makes_unlikely() {
    // Exact values: P(X ≥ 1) = 1 − (1 − p)^n, and the whole distribution sums to 1.
    assert!((binomial_tail(150, 1, 0.01) - (1.0 - 0.99f64.powi(150))).abs() < 1e-12);
    assert!((binomial_tail(150, 0, 0.01) - 1.0).abs() < 1e-12);
    assert_eq!(binomial_tail(150, 151, 0.01), 0.0);
    // A limit of 0 in 1: no mixed walk passes, one fails.
    assert!(binomial_tail(140, 0, 0.0) >= FALSE_FAILURE);
    assert!(binomial_tail(140, 1, 0.0) < FALSE_FAILURE);
    // 1 in 100 over 150 walks: 2 (this suite's old check failed it) passes; the test fails
    // from 7 (P(X ≥ 6) ≈ 4.2e-3, P(X ≥ 7) ≈ 8.7e-4).
    assert!(binomial_tail(150, 2, 0.01) >= FALSE_FAILURE);
    assert!(binomial_tail(150, 6, 0.01) >= FALSE_FAILURE);
    assert!(binomial_tail(150, 7, 0.01) < FALSE_FAILURE);
    // 1 in 20 over 600 walks: the mean is 30; the test fails from 49 (P(X ≥ 48) ≈ 1.1e-3,
    // P(X ≥ 49) ≈ 6.4e-4).
    assert!(binomial_tail(600, 30, 0.05) >= FALSE_FAILURE);
    assert!(binomial_tail(600, 48, 0.05) >= FALSE_FAILURE);
    assert!(binomial_tail(600, 49, 0.05) < FALSE_FAILURE);
}

/// Checks consistency under load: eight `snmpbulkwalk`s with different max-repetitions, a
/// GetNext-only `snmpwalk` and a manager doing random Gets/GetNexts all run at once for ~15 s
/// while the fixture changes every few ms and max-age is 10 ms, so nearly every new request
/// could see a new snapshot. Every walk must be complete, in order, and (if shorter than
/// walk-window) single-generation: walks of different managers park at the same OIDs all the
/// time (every -Cr1 and snmpwalk request stops at every cell), which is where a daemon that
/// keys continuations by OID alone lets one walk move another onto its snapshot.
#[test]
#[ignore = "a rate of crossed walks: scripts/test runs it alone, after the others"]
fn deadline_concurrent_managers_each_walk_one_snapshot() {
    concurrent_managers(
        "max-age 0.01",
        40,
        &["--max-age", "0.01", "--walk-window", "5"],
        Duration::from_secs(5),
        Duration::from_secs(15),
        &EVERY_STRIDE,
    );
}

/// The same with the default max-age (5 s) and walk-window (30 s), the deployed settings:
/// snapshots change only every 5 s, so walks that straddle a refresh are what is tested.
#[test]
#[ignore = "a rate of crossed walks: scripts/test runs it alone, after the others"]
fn deadline_concurrent_managers_each_walk_one_snapshot_default_max_age() {
    concurrent_managers(
        "default max-age",
        40,
        &[],
        Duration::from_secs(30),
        Duration::from_secs(10),
        &EVERY_STRIDE,
    );
}

/// The issue's load, scaled to the debug build the suite runs: 200 types (the issue had
/// 1,000 with a release build; a walk of 1,000 through the debug daemon beside 20 others
/// outlasts the walk-window), the fixture rewritten every 0.1 s, walkers with their own
/// max-repetitions beside clients sending random Gets and GetNexts of memTypeTable's cells.
/// A lone GetNext that starts where a walk is parked must not move that walk to another
/// snapshot. With 4 walkers and 2 clients no walk may mix through anything but the residual
/// case between two moving walks (a contest), and that at most 1 in 100; with 20 and 4, at
/// most 1 in 100 walks may mix, each during an ambiguous continuation.
///
/// Why the 4-walker load allows contests: walkers alone meet there. At the one refresh of a
/// run (every 25 s while walks go on), a new walk that is faster than one still on the old
/// snapshot catches it up, and both wait at one OID; the protocol names no walk, so the
/// agent goes by their timing, and now and then the slower one asks first. The model check
/// (`contract_crowd_*`, 100 traces) counts 17 mixed walks in 6,708 at this load. Runs of
/// this test alone on 3 December 2026 mixed none: 2,483 walks in fifteen runs on the rule
/// before the last mend, and more since (ARCHITECTURE.md, "The residual case").
fn pollers_beside_random_clients(label: &str, walkers: u32, clients: usize, args: &[&str]) {
    let managers: Vec<Manager> = (0..walkers).map(|i| Manager::Bulk(5 + 3 * i)).collect();
    let load = Load {
        managers: &managers,
        random_clients: clients,
        fixture_period: Duration::from_millis(100),
        mixed_at_most: (1, 100),
        explained_by: if walkers <= 4 {
            Explains::Contest
        } else {
            Explains::Ambiguous
        },
    };
    concurrent_managers(
        label,
        200,
        args,
        Duration::from_secs(30),
        Duration::from_secs(40),
        &load,
    );
}

#[test]
#[ignore = "a rate of crossed walks: scripts/test runs it alone, after the others"]
fn deadline_four_pollers_beside_two_random_clients_mix_only_in_rare_contests() {
    pollers_beside_random_clients("4 walkers, 2 clients", 4, 2, &[]);
}

#[test]
#[ignore = "a rate of crossed walks: scripts/test runs it alone, after the others"]
fn deadline_twenty_pollers_beside_four_random_clients_mix_at_most_1_in_100() {
    pollers_beside_random_clients("20 walkers, 4 clients", 20, 4, &[]);
}

// ---------------------------------------------------------------------------------------------
// 2. The deterministic case from the bug report
// ---------------------------------------------------------------------------------------------

/// A GetNext by another manager must not move a parked walk onto a newer snapshot.
///
/// Manager B stops at memTypeInUseCount.10 after one `snmpbulkget -Cr10` (generation 1). The
/// source moves on and max-age passes. Manager A does one `snmpgetnext` of
/// memTypeInUseCount.9, which returns .10: a daemon that remembers continuations by OID only
/// now thinks .10 belongs to A's (newer) snapshot, and B's next request, from .10, is served
/// from it. B must still get generation 1. The control walk C (memTypeAllocs), which nobody
/// disturbs, shows that continuing past max-age keeps the snapshot at all.
///
/// Since the walk heuristics of issue 23, A's GetNext, which starts where B's walk just went
/// by, is taken for a re-sent request of B's and answered from B's snapshot (A's generation
/// is printed): then there is no newer snapshot at .10 to confuse B with, and the case the
/// report describes is not reached here. What is asserted, B staying on generation 1, is
/// the contract either way; the unit tests of `agent::walks` (walks parked at one OID on two
/// views) drive the case of two snapshots at one OID.
#[test]
fn a_getnext_by_another_manager_does_not_move_a_parked_walk() {
    let rows = 30;
    let (dir, snmpd, daemon) = start_daemon(rows, &["--max-age", "0.5"]);
    let port = snmpd.port;
    let fix = dir.path().join("fixture.json");
    let col = |c: u32| format!("{TYPE_ENTRY}.{c}");

    let b1 = must(
        "snmpbulkget",
        port,
        &["-Cn0", "-Cr10"],
        &[&col(MEM_TYPE_IN_USE_COUNT)],
    );
    let c1 = must(
        "snmpbulkget",
        port,
        &["-Cn0", "-Cr10"],
        &[&col(MEM_TYPE_ALLOCS)],
    );
    assert_eq!(one_gen(&b1, "B's first request"), 1);
    assert_eq!(one_gen(&c1, "C's first request"), 1);
    let b_park = last_table_oid(&b1);
    let c_park = last_table_oid(&c1);
    assert_eq!(b_park, cell_oid(MEM_TYPE_IN_USE_COUNT, 10));
    assert_eq!(c_park, cell_oid(MEM_TYPE_ALLOCS, 10));

    write_fixture(&fix, gen_types(2, rows));
    // Past max-age, with B and C paused: A's lone GetNext must then read the source anew.
    wait_refresh_due(port, Duration::from_millis(500), &daemon);

    let a = must(
        "snmpgetnext",
        port,
        &[],
        &[&cell_oid(MEM_TYPE_IN_USE_COUNT, 9)],
    );
    assert_eq!(
        a.first().map(|l| l.oid.clone()),
        Some(b_park.clone()),
        "A's GetNext of .9 returns .10"
    );
    let a_gen = one_gen(&a, "A's GetNext");

    let c2 = must("snmpbulkget", port, &["-Cn0", "-Cr10"], &[&c_park]);
    let c_gen = one_gen(&c2, "C's continuation");
    let b2 = must("snmpbulkget", port, &["-Cn0", "-Cr10"], &[&b_park]);
    let b_gen = one_gen(&b2, "B's continuation");
    println!(
        "A's GetNext saw generation {a_gen}; control C continued on {c_gen}; \
         B continued on {b_gen}"
    );
    assert_eq!(
        c_gen, 1,
        "control: a walk continued past max-age with nobody else at its OID must stay on \
         its snapshot (generation 1), got {c_gen}"
    );
    assert_eq!(
        b_gen, 1,
        "B parked at {b_park} on generation 1; A's snmpgetnext of .9 (which returned .10 \
         from generation {a_gen}) moved B's walk onto generation {b_gen}"
    );
}

// ---------------------------------------------------------------------------------------------
// 3. Freshness under continuous walking
// ---------------------------------------------------------------------------------------------

/// Polls `probe` (which returns the generation it saw) every 50 ms until it returns `want`
/// or `limit` passes since `since`. Returns when it first saw `want`, relative to `since`.
fn time_until(
    since: Instant,
    limit: Duration,
    want: u64,
    mut probe: impl FnMut() -> u64,
) -> Option<Duration> {
    loop {
        if probe() == want {
            return Some(since.elapsed());
        }
        if since.elapsed() > limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A change reaches new Gets and new walks within F = max(max_age, walk_window - max_age)
/// even while other managers walk continuously (pinned snapshots must not keep serving new
/// requests old data), and within max-age once nobody else walks.
#[test]
#[ignore = "deadline: scripts/test runs it alone, after the others"]
fn deadline_a_change_reaches_new_gets_and_walks_within_the_bound() {
    let rows = 40;
    let max_age = Duration::from_millis(500);
    let window = Duration::from_secs(3);
    let f = max_age.max(window - max_age);
    let slack = Duration::from_secs(1);
    let (dir, snmpd, daemon) = start_daemon(rows, &["--max-age", "0.5", "--walk-window", "3"]);
    let port = snmpd.port;
    let fix = dir.path().join("fixture.json");
    let mut writer = FixtureWriter::start(&fix, rows, 2, Duration::from_millis(5));
    let stop = Arc::new(AtomicBool::new(false));
    let walked: Vec<Arc<AtomicU64>> = (0..4).map(|_| Arc::default()).collect();
    let t_start = Instant::now();
    let walkers: Vec<_> = [
        Manager::Bulk(1),
        Manager::Bulk(3),
        Manager::Bulk(10),
        Manager::Walk,
    ]
    .iter()
    .zip(&walked)
    .enumerate()
    .map(|(i, (&m, walked))| {
        spawn_counted_walker(
            port,
            m,
            rows,
            Duration::from_millis(100 * i as u64),
            stop.clone(),
            walked.clone(),
        )
    })
    .collect();
    // Let the walkers get going (each has finished a walk and is on its next), so the change
    // below lands among walks in progress.
    wait_until(
        "every walker's first walk",
        || walked.iter().all(|w| w.load(Ordering::Relaxed) >= 1),
        || daemon.log_text(),
    );

    let probe_oids: Vec<String> = [1, rows / 2, rows]
        .iter()
        .map(|&r| cell_oid(MEM_TYPE_IN_USE_COUNT, r))
        .collect();
    let probe_refs: Vec<&str> = probe_oids.iter().map(String::as_str).collect();
    let get_gen = || one_gen(&must("snmpget", port, &[], &probe_refs), "probe snmpget");
    let col9 = format!("{TYPE_ENTRY}.{MEM_TYPE_IN_USE_COUNT}");
    let walk_gen = || {
        one_gen(
            &must("snmpbulkget", port, &["-Cn0", "-Cr20"], &[&col9]),
            "new short walk from the column root",
        )
    };

    let g = writer.stop_and_jump(1000);
    let t = Instant::now();
    let limit = f + slack + Duration::from_secs(5); // measure a little past the bound
    let get_after = time_until(t, limit, g, get_gen);
    let walk_after = time_until(t, limit, g, walk_gen);

    stop.store(true, Ordering::Relaxed);
    let walks: Vec<WalkRecord> = walkers
        .into_iter()
        .flat_map(|h| h.join().expect("walker panicked"))
        .collect();
    let last_walk = Instant::now();
    let mixed = walks.iter().filter(|w| w.gens.len() > 1).count();
    println!(
        "background: {} walks in {} ({mixed} mixed, {} failed); change to generation {g}: \
         new Get saw it after {:?}, new walk after {:?} (bound F + slack = {})",
        walks.len(),
        fmt_dur(t_start.elapsed()),
        walks.iter().filter(|w| w.failed.is_some()).count(),
        get_after.map(fmt_dur),
        walk_after.map(fmt_dur),
        fmt_dur(f + slack)
    );
    assert!(
        get_after.is_some_and(|d| d <= f + slack),
        "a new snmpget saw generation {g} only after {get_after:?} (None: not within {limit:?}), \
         bound F + slack = {:?}",
        f + slack
    );
    assert!(
        walk_after.is_some_and(|d| d <= f + slack),
        "a new walk saw generation {g} only after {walk_after:?} (None: not within {limit:?}), \
         bound F + slack = {:?}",
        f + slack
    );

    // Nobody walks any more. Let every walk's window run out, so that no reading of "a walk
    // in progress" can apply, then change the source once more: a Get sent once max-age has
    // passed since the change must see it. The quiet time is the condition under test (the
    // clause's "while nothing else walks"), not a wait for something to happen.
    std::thread::sleep(window.saturating_sub(last_walk.elapsed()) + Duration::from_millis(200));
    assert_eq!(get_gen(), g, "an idle Get sees the current generation");
    let g2 = g + 1000;
    write_fixture(&fix, gen_types(g2, rows));
    let t2 = Instant::now();
    // The deadline under test: the clause promises the change to a Get sent max-age after
    // it, so the Get is sent then (this test runs alone, with the other deadlines).
    std::thread::sleep(max_age + Duration::from_millis(100));
    let seen = get_gen();
    println!(
        "idle: generation {g2} written; a Get {} later saw {seen}",
        fmt_dur(t2.elapsed())
    );
    assert_eq!(
        seen,
        g2,
        "with nobody walking, a Get {} after the change (max-age {}) must see generation {g2}",
        fmt_dur(t2.elapsed()),
        fmt_dur(max_age)
    );
    drop(daemon);
}

// ---------------------------------------------------------------------------------------------
// 4. No old figure after max_age + walk_window
// ---------------------------------------------------------------------------------------------

/// Once the source has moved on and nobody asked anything for max_age + walk_window, no OID
/// serves an old figure, in particular not the OIDs where earlier walks parked (the bug
/// report: 45 s after the source moved on, a GetNext from an OID where an earlier walk had
/// parked returned figures two generations old). Walks are parked with partial
/// `snmpbulkget`s (one to three requests each, so that some walks moved on from an OID and
/// some did not) and partial `snmpgetnext` chains, spread over several snapshots.
#[test]
fn no_old_figure_after_max_age_plus_walk_window() {
    let rows = 40;
    let max_age = Duration::from_secs(1);
    let window = Duration::from_secs(5);
    let (dir, snmpd, daemon) = start_daemon(rows, &["--max-age", "1", "--walk-window", "5"]);
    let port = snmpd.port;
    let mut writer = FixtureWriter::start(
        &dir.path().join("fixture.json"),
        rows,
        2,
        Duration::from_millis(5),
    );

    // Park walks. Starts stay in columns whose values encode the generation, and chains are
    // short enough to stay there too, so a GetNext from any parked OID can be decoded.
    let mut parked: BTreeSet<String> = BTreeSet::new();
    let mut parked_gens: BTreeMap<u64, usize> = BTreeMap::new();
    let starts = [
        format!("{TYPE_ENTRY}.5"),
        cell_oid(7, 3),
        cell_oid(MEM_TYPE_IN_USE_COUNT, 17),
        cell_oid(11, 30),
        cell_oid(MEM_TYPE_ALLOCS, 1),
        cell_oid(15, 22),
        cell_oid(18, 9),
    ];
    let reps = [1u32, 3, 7, 11];
    for (i, start) in starts.iter().enumerate() {
        for (j, r) in reps.iter().enumerate() {
            let steps = 1 + (i + j) % 3;
            let mut from = start.clone();
            let cr = format!("-Cr{r}");
            for _ in 0..steps {
                let lines = must("snmpbulkget", port, &["-Cn0", &cr], &[&from]);
                *parked_gens
                    .entry(one_gen(&lines, "parking snmpbulkget"))
                    .or_default() += 1;
                from = last_table_oid(&lines);
                parked.insert(from.clone());
            }
        }
        // GetNext chains of one to three steps.
        let mut from = start.clone();
        for _ in 0..=(i % 3) {
            let lines = must("snmpgetnext", port, &[], &[&from]);
            *parked_gens
                .entry(one_gen(&lines, "parking snmpgetnext"))
                .or_default() += 1;
            from = last_table_oid(&lines);
            parked.insert(from.clone());
        }
        // Spread the parked walks over several snapshots: the next start comes once a new
        // walk must read the source anew (the current snapshot older than max-age, nothing
        // asked for the in-progress window).
        if i % 2 == 1 {
            wait_refresh_due(port, max_age, &daemon);
        }
    }
    let g = writer.stop_and_jump(1000);
    let quiet = max_age + window + Duration::from_millis(500);
    println!(
        "walks parked at {} OIDs (parking responses per generation: {parked_gens:?}); source \
         now at generation {g}; asking nothing for {}",
        parked.len(),
        fmt_dur(quiet)
    );
    // Asking nothing for this long is the condition under test.
    std::thread::sleep(quiet);

    let mut old: Vec<String> = Vec::new();
    for p in &parked {
        let lines = must("snmpgetnext", port, &[], &[p]);
        let got = one_gen(&lines, &format!("snmpgetnext from parked {p}"));
        if got != g {
            old.push(format!(
                "snmpgetnext {p} -> {} generation {got}",
                lines[0].oid
            ));
        }
    }
    let gets: Vec<String> = [
        (5, 1),
        (MEM_TYPE_IN_USE_COUNT, 17),
        (MEM_TYPE_ALLOCS, 40),
        (22, 20),
        (23, 33),
    ]
    .iter()
    .map(|&(c, r)| cell_oid(c, r))
    .collect();
    for o in &gets {
        let got = one_gen(&must("snmpget", port, &[], &[o]), &format!("snmpget {o}"));
        if got != g {
            old.push(format!("snmpget {o} generation {got}"));
        }
    }
    println!(
        "{} of {} requests after the quiet period served an old generation",
        old.len(),
        parked.len() + gets.len()
    );
    assert!(
        old.is_empty(),
        "{} s after the source moved on to generation {g} with nothing asked, {} of {} requests \
         still served old figures: {old:#?}",
        quiet.as_secs_f64(),
        old.len(),
        parked.len() + gets.len()
    );
}

// ---------------------------------------------------------------------------------------------
// 5. A probe does not pin later walks to its snapshot (issue 23)
// ---------------------------------------------------------------------------------------------

/// memTypeTable itself, as the probe and the walks of issue 23 name it
/// (MEMSTAT-MIB::memTypeTable; [`TYPE_ENTRY`] is its memTypeEntry).
const TYPE_TABLE: &str = ".1.3.6.1.4.1.32473.1.1.2";

/// The availability probe of issue 23, `snmpgetnext -v2c -c public HOST
/// MEMSTAT-MIB::memTypeTable`: one GetNext that returns memTypeName.1 and is never followed
/// up, so it stays parked there.
fn availability_probe(port: u16) {
    let lines = must("snmpgetnext", port, &[], &[TYPE_TABLE]);
    assert_eq!(
        lines.first().map(|l| l.oid.clone()),
        Some(cell_oid(FIRST_COL, 1)),
        "the probe returns memTypeName.1: {lines:?}"
    );
}

/// `snmpbulkwalk -Cr25` of memTypeTable, as in the bug report: a complete, ordered walk
/// (checked), and its generations.
fn table_walk(port: u16, rows: u32) -> BTreeSet<u64> {
    let lines = must("snmpbulkwalk", port, &["-Cr25"], &[TYPE_TABLE]);
    let (gens, problems) = check_table_walk(&lines, rows);
    assert!(
        problems.is_empty(),
        "snmpbulkwalk -Cr25 of memTypeTable is incomplete or wrong: {:?}",
        &problems[..problems.len().min(5)]
    );
    gens
}

/// The scenario of issue 23: the probe, then for each of `pauses`: a new generation is
/// written, nothing is asked for the pause, a walk of memTypeTable, memSnapshotAge, and the
/// probe again. Nothing else walks, so each walk must see figures no older than max-age
/// when it started: the generation written a pause (longer than max-age) before it, which
/// is the newest, and a snapshot read no earlier than max-age before it started.
fn probe_then_paused_walks(label: &str, max_age: Duration, args: &[&str], pauses: &[Duration]) {
    let rows = 30;
    let (dir, snmpd, _daemon) = start_daemon(rows, args);
    let port = snmpd.port;
    let fix = dir.path().join("fixture.json");
    // The first read of the source: generation 1, with the probe parked on it.
    availability_probe(port);

    let mut bad = Vec::new();
    for (k, &pause) in pauses.iter().enumerate() {
        assert!(
            pause > max_age,
            "the scenario needs pauses longer than max-age"
        );
        let g = 100 * (k as u64 + 1);
        write_fixture(&fix, gen_types(g, rows));
        // Nobody asks anything for the pause: that is the condition under test (no walk in
        // progress when the next one starts), not a wait for something to happen.
        std::thread::sleep(pause);
        let t0 = Instant::now();
        let gens = table_walk(port, rows);
        let took = t0.elapsed();
        let age = snapshot_age(port);
        // The walk started at t0 and must have seen a snapshot read no earlier than
        // max-age before that; memSnapshotAge was read (without refreshing) by now.
        let age_bound = t0.elapsed() + max_age + Duration::from_millis(10);
        availability_probe(port);
        println!(
            "[{label}] after {} idle: walk took {}, saw generations {gens:?} (newest written: \
             {g}); memSnapshotAge right after it {} (bound {})",
            fmt_dur(pause),
            fmt_dur(took),
            fmt_dur(age),
            fmt_dur(age_bound)
        );
        let pinned = if gens.contains(&1) {
            " (generation 1 is the probe's snapshot)"
        } else {
            ""
        };
        if gens != BTreeSet::from([g]) {
            bad.push(format!(
                "walk after {} idle saw generations {gens:?}{pinned}, but generation {g} was \
                 written {} before it started (max-age {})",
                fmt_dur(pause),
                fmt_dur(pause),
                fmt_dur(max_age)
            ));
        }
        if age > age_bound {
            bad.push(format!(
                "memSnapshotAge right after the walk after {} idle was {}, more than max-age \
                 {} plus the {} since the walk started",
                fmt_dur(pause),
                fmt_dur(age),
                fmt_dur(max_age),
                fmt_dur(age_bound - max_age)
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "[{label}] a probe (snmpgetnext of memTypeTable) pinned later walks, started while \
         nothing else walked, to an old snapshot: {bad:#?}"
    );
}

/// Issue 23 as reported, at max-age 0.5 s (walk-window 30 s): an availability probe
/// parked at memTypeName.1 made every later walk of memTypeTable join its snapshot, so that
/// memSnapshotAge reached 1.5 s, 5.5 s and 13.5 s with nobody else asking. Each walk must
/// instead see the newest figures: nothing else walks when it starts.
#[test]
fn a_probe_does_not_pin_later_walks_to_its_snapshot() {
    probe_then_paused_walks(
        "max-age 0.5",
        Duration::from_millis(500),
        &["--max-age", "0.5"],
        &[
            Duration::from_millis(1500),
            Duration::from_secs(4),
            Duration::from_secs(8),
        ],
    );
}

/// The same at the default max-age (5 s) and walk-window (30 s), the deployed settings,
/// with pauses longer than max-age (well within the freshness bound F = 25 s under which
/// the old code kept joining the probe's snapshot).
#[test]
fn a_probe_does_not_pin_later_walks_to_its_snapshot_default_max_age() {
    probe_then_paused_walks(
        "default max-age",
        Duration::from_secs(5),
        &[],
        &[Duration::from_secs(6), Duration::from_secs(12)],
    );
}

/// Issue 23's second symptom: after a probe, a source that fails (the fixture deleted) was
/// reported ok(1) for ~39 s, because every later walk joined the probe's snapshot and none
/// read the source. With max-age 0.05 s and the default walk-window (30 s) as in the report,
/// a manager walks memTypeTable (and probes) with 1.5 s of nothing asked in between, and
/// reads memSourceStatus after each walk.
///
/// Bounds: memSourceStatus must read stale(2) at the latest after a walk that started more
/// than F = max(max-age, walk-window - max-age) = 29.95 s after the deletion (the bound
/// while other walks run), polled until then and failing the test once it passes. And since
/// nothing else walks when each walk starts, the first one (started 1.5 s after the
/// deletion, more than max-age) must already have read the source: figures no older than
/// max-age while nothing else walks.
#[test]
fn a_probe_then_a_failing_source_is_stale_within_the_bound() {
    let rows = 30;
    let max_age = Duration::from_millis(50);
    let window = Duration::from_secs(30); // the default
    let f = max_age.max(window - max_age);
    let pause = Duration::from_millis(1500);
    let (dir, snmpd, _daemon) = start_daemon(rows, &["--max-age", "0.05"]);
    let port = snmpd.port;
    let fix = dir.path().join("fixture.json");

    // The first read of the source (generation 1), the probe parked on it.
    availability_probe(port);
    assert_eq!(
        source_status(port).0,
        "1",
        "memSourceStatus before the failure"
    );
    std::fs::remove_file(&fix).unwrap();
    let deleted = Instant::now();

    // (walk start since the deletion, memSourceStatus after it)
    let mut polls: Vec<(Duration, String)> = Vec::new();
    let stale_after = loop {
        // Nothing is asked for the pause: the condition under test (no walk in progress
        // when the next one starts), not a wait for something to happen.
        std::thread::sleep(pause);
        let started = deleted.elapsed();
        let gens = table_walk(port, rows);
        assert_eq!(
            gens,
            BTreeSet::from([1]),
            "a walk after the failure is answered from the last good snapshot"
        );
        let (status, err) = source_status(port);
        availability_probe(port);
        polls.push((started, status.clone()));
        if status == "2" {
            assert!(!err.is_empty(), "stale(2) with no memSourceLastError");
            break Some(started);
        }
        assert_eq!(status, "1", "memSourceStatus is ok(1) or stale(2)");
        if started > f {
            break None;
        }
    };
    let shown: Vec<String> = polls
        .iter()
        .map(|(t, s)| format!("walk at +{}: {s}", fmt_dur(*t)))
        .collect();
    println!(
        "fixture deleted; memSourceStatus after each walk: {shown:?}; stale(2) from the walk \
         started {:?} after the deletion",
        stale_after.map(fmt_dur)
    );
    assert!(
        stale_after.is_some(),
        "memSourceStatus still ok(1) after a walk started {} after the source failed, past the \
         freshness bound F = {}: {shown:?}",
        fmt_dur(polls.last().unwrap().0),
        fmt_dur(f)
    );
    assert!(
        polls.len() == 1,
        "the first walk, started {} after the source failed with nothing asked for {} \
         before it (max-age {}), must have read the source and found it failing; \
         memSourceStatus was stale(2) only from the walk started {} after: {shown:?}",
        fmt_dur(polls[0].0),
        fmt_dur(pause),
        fmt_dur(max_age),
        fmt_dur(stale_after.unwrap())
    );
}
