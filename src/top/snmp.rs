//! `--snmp HOST[:PORT]`: MEMSTAT-MIB read from a host's SNMP agent, v2c or v3, so that `top`
//! can watch a host from the monitoring host.
//!
//! One frame is one snapshot, as the daemon promises per walk: memSnapshotGeneration is read
//! before and after the walks of a frame, and the walks are made again when it moved. The
//! first is read after the first cell of memTypeTable, which starts a walk for the agent and
//! so has it refresh a snapshot older than its max-age. A generation already shown is not
//! walked again: the last snapshot stands, with its rates.
//! A snapshot's time is the time of the answer less memSnapshotAge, so that rates are over
//! the time between the two snapshots' reads, not between two screens.
//!
//! The client is the snmp2 crate's synchronous session (ARCHITECTURE.md says why). Only
//! the columns `top` shows are walked, several in one GetBulk, as snmptable does.

use super::{Read, TopError};
use crate::memstat::allocinfo::{Profiling, ProfilingState, Site};
use crate::memstat::source::SOURCES;
use crate::memstat::{Allocator, Figures, MemoryType, Snapshot, TypeKey};
use snmp2::{v3, Oid, SyncSession, Value};
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::time::{Duration, SystemTime};

/// MEMSTAT-MIB's objects: memstatMIB.1.
const OBJECTS: [u64; 9] = [1, 3, 6, 1, 4, 1, 32473, 1, 1];

/// memstatDaemon's scalars (memstatObjects.1.x.0).
const SNAPSHOT_AGE: u64 = 3;
const SNAPSHOT_GENERATION: u64 = 4;
/// memTypeEntry (memstatObjects.2.1) and memKernelEntry (memstatObjects.6.1).
const TYPE_ENTRY: [u64; 2] = [2, 1];
const KERNEL_ENTRY: [u64; 2] = [6, 1];
/// memKernelBytes.
const KERNEL_BYTES: u64 = 3;
/// memAllocinfoState.0 (memstatAllocinfo.1.0) and memAllocSiteEntry (memstatAllocinfo.4.1).
const ALLOCINFO_STATE: [u64; 3] = [8, 1, 0];
const SITE_ENTRY: [u64; 3] = [8, 4, 1];

/// The most cells one frame may hold: a million types of ten columns. A host that serves
/// more is refused rather than let fill this program's memory.
const MAX_CELLS: usize = 10_000_000;
/// The most text one frame may hold: names, files and functions of a million rows are far
/// less.
const MAX_TEXT_BYTES: usize = 256 << 20;
/// Varbinds asked for in one GetBulk: the answer stays well under the 64 KiB of a datagram.
const BULK_VARBINDS: u32 = 48;
/// Walks of one frame tried before giving up on a snapshot that keeps changing.
const ATTEMPTS: usize = 3;

/// What memTypeTable gives a row of `top`: one definition per column walked.
struct TypeColumn {
    /// Its number under memTypeEntry.
    column: u64,
    /// Where its value goes.
    set: fn(&mut MemoryType, u64),
}

/// memTypeName (2) and memTypeAllocator (3) make the type; these fill it in.
const TYPE_COLUMNS: &[TypeColumn] = &[
    TypeColumn {
        column: 5,
        set: |t, v| t.size = Some(v),
    },
    TypeColumn {
        column: 9,
        set: |t, v| t.in_use_count = Some(v),
    },
    TypeColumn {
        column: 10,
        set: |t, v| t.in_use_bytes = Some(v),
    },
    TypeColumn {
        column: 11,
        set: |t, v| t.free_count = Some(v),
    },
    TypeColumn {
        column: 13,
        set: |t, v| t.allocs = Some(v),
    },
    TypeColumn {
        column: 14,
        set: |t, v| t.frees = Some(v),
    },
    TypeColumn {
        column: 17,
        set: |t, v| t.failures = Some(v),
    },
];
const TYPE_NAME: u64 = 2;
const TYPE_ALLOCATOR: u64 = 3;
/// memTypeDiscontinuityTime: a row whose value moved gets no rate for that interval.
const TYPE_DISCONTINUITY: u64 = 24;

/// How to reach the host.
#[derive(Clone)]
pub struct Target {
    /// HOST or HOST:PORT (161 when absent).
    pub host: String,
    pub credentials: Credentials,
    /// How long one request waits for its answer.
    pub timeout: Duration,
    /// How many times a request that got no answer is sent again.
    pub retries: u32,
}

/// SNMP v2c or v3 credentials.
#[derive(Clone)]
pub enum Credentials {
    Community(Vec<u8>),
    V3 {
        user: String,
        /// The authentication protocol and password: authNoPriv, or authPriv with `privacy`.
        auth: Option<(v3::AuthProtocol, Vec<u8>)>,
        privacy: Option<(v3::Cipher, Vec<u8>)>,
    },
}

impl fmt::Debug for Credentials {
    // Never the secrets, whoever prints the options.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Credentials::Community(_) => f.write_str("Community(..)"),
            Credentials::V3 { user, .. } => write!(f, "V3 {{ user: {user:?}, .. }}"),
        }
    }
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Target")
            .field("host", &self.host)
            .field("credentials", &self.credentials)
            .field("timeout", &self.timeout)
            .field("retries", &self.retries)
            .finish()
    }
}

/// A value as `top` keeps it: a number or text.
enum Cell {
    Number(u64),
    Text(String),
}

/// A varbind's value, out of the session's buffer.
enum Owned {
    Cell(Cell),
    EndOfMibView,
    NoSuchObject,
    NoSuchInstance,
    /// Another type, by snmp2's description.
    Other(String),
}

impl fmt::Debug for Cell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cell::Number(n) => write!(f, "{n}"),
            Cell::Text(t) => write!(f, "{t:?}"),
        }
    }
}

/// An answer, out of the session's buffer.
struct Answer {
    error_status: u32,
    varbinds: Vec<(Vec<u64>, Owned)>,
}

impl Answer {
    fn of(pdu: snmp2::Pdu<'_>) -> Answer {
        let varbinds = pdu
            .varbinds
            .map(|(name, value)| {
                let name: Vec<u64> = name.iter().map(|it| it.collect()).unwrap_or_default();
                let value = match value {
                    Value::OctetString(s) => {
                        Owned::Cell(Cell::Text(String::from_utf8_lossy(s).into_owned()))
                    }
                    Value::Counter64(n) => Owned::Cell(Cell::Number(n)),
                    Value::Integer(n) => match u64::try_from(n) {
                        Ok(n) => Owned::Cell(Cell::Number(n)),
                        Err(_) => Owned::Other(format!("INTEGER {n}")),
                    },
                    Value::Unsigned32(n) | Value::Counter32(n) | Value::Timeticks(n) => {
                        Owned::Cell(Cell::Number(u64::from(n)))
                    }
                    Value::EndOfMibView => Owned::EndOfMibView,
                    Value::NoSuchObject => Owned::NoSuchObject,
                    Value::NoSuchInstance => Owned::NoSuchInstance,
                    other => Owned::Other(format!("{other:?}")),
                };
                (name, value)
            })
            .collect();
        Answer {
            error_status: pdu.error_status,
            varbinds,
        }
    }
}

/// The host's SNMP agent as `top` reads it.
pub(super) struct SnmpReader {
    target: Target,
    session: SyncSession,
    /// The generation last shown, and the discontinuity times of its rows by index.
    last: Option<u64>,
    discontinuities: BTreeMap<u32, u64>,
}

impl SnmpReader {
    pub(super) fn open(target: &Target) -> Result<SnmpReader, TopError> {
        Ok(SnmpReader {
            target: target.clone(),
            session: open_session(target)?,
            last: None,
            discontinuities: BTreeMap::new(),
        })
    }

    pub(super) fn name(&self) -> String {
        format!("snmp:{}", self.target.host)
    }

    /// The next snapshot, unless the host still shows the one shown last.
    pub(super) fn read(&mut self) -> Result<Read, TopError> {
        for _ in 0..ATTEMPTS {
            // The start of a walk is what has the agent refresh a snapshot older than its
            // max-age (a Get of a scalar does not): one cell first, then the generation that
            // the walk proper will see.
            self.walk_start()?;
            let (generation, age) = self.generation_and_age()?;
            let answered = SystemTime::now();
            if self.last == Some(generation) {
                return Ok(Read::Unchanged);
            }
            let types = self.walk(&TYPE_ENTRY, &type_columns())?;
            let kernel = self.walk(&KERNEL_ENTRY, &[KERNEL_BYTES])?;
            let profiling = match self.profiling_state()? {
                Some(state) => Some((state, self.walk(&SITE_ENTRY, &site_columns())?)),
                None => None,
            };
            let (after, _) = self.generation_and_age()?;
            if after != generation {
                continue;
            }
            let taken = answered
                .checked_sub(Duration::from_millis(age))
                .unwrap_or(answered);
            let (mut snap, moved) = self.snapshot(generation, taken, types, kernel);
            snap.profiling = profiling.map(|(state, rows)| sites_of(state, rows));
            self.last = Some(generation);
            return Ok(Read::New(snap, moved));
        }
        Err(TopError::Snmp(format!(
            "{}: memSnapshotGeneration changed during each of {ATTEMPTS} walks: the agent's \
             max-age is shorter than a walk, or something refreshes it that often",
            self.target.host
        )))
    }

    /// Sends a request (`send`) and takes its answer: again after a timeout (`retries` times;
    /// snmp2 keeps the request's id, so a late answer to an earlier attempt still counts),
    /// once more when a v3 session only learnt the engine's time (snmp2's `AuthUpdated`), and
    /// on a new session when the answer read was another request's. That happens when an
    /// answer came after its retry had been sent: its twin is left in the socket, and as
    /// snmp2 reads one datagram per request, every later request would read the answer of
    /// the one before. A new session has a new socket, and starts even.
    fn request(
        &mut self,
        doing: &str,
        send: impl Fn(&mut SyncSession) -> Result<Answer, snmp2::Error>,
    ) -> Result<Answer, TopError> {
        let (mut timeouts, mut updated, mut reopened) = (0, false, false);
        loop {
            match send(&mut self.session) {
                Ok(answer) => return Ok(answer),
                Err(snmp2::Error::Receive) if timeouts < self.target.retries => timeouts += 1,
                Err(snmp2::Error::AuthUpdated) if !updated => updated = true,
                // In v3 the other request's answer fails the message checks instead (a twin
                // of the engine discovery's Report is not authenticated): a wrong password
                // fails again on the new session, and is reported then.
                Err(snmp2::Error::RequestIdMismatch | snmp2::Error::AuthFailure(_))
                    if !reopened =>
                {
                    reopened = true;
                    self.session = open_session(&self.target)?;
                }
                Err(e) => return Err(snmp_error(&self.target, doing, e)),
            }
        }
    }

    /// memAllocinfoState.0; `None` from an agent without it (before allocinfo was served).
    fn profiling_state(&mut self) -> Result<Option<ProfilingState>, TopError> {
        let state = oid(&[&OBJECTS, &ALLOCINFO_STATE]);
        let pdu = self.request("reading memAllocinfoState.0", |s| {
            s.get(&state).map(Answer::of)
        })?;
        Ok(match pdu.varbinds.first() {
            Some((_, Owned::Cell(Cell::Number(n)))) => [
                ProfilingState::NotCompiled,
                ProfilingState::Unavailable,
                ProfilingState::Off,
                ProfilingState::On,
            ]
            .into_iter()
            .find(|s| s.number() as u64 == *n),
            _ => None,
        })
    }

    /// The first cell of memTypeTable: the start of a walk, for the agent.
    fn walk_start(&mut self) -> Result<(), TopError> {
        let first = oid(&[&OBJECTS, &TYPE_ENTRY, &[TYPE_NAME]]);
        self.request("walking MEMSTAT-MIB", |s| {
            s.getbulk(&[&first], 0, 1).map(Answer::of)
        })?;
        Ok(())
    }

    /// memSnapshotGeneration.0 and memSnapshotAge.0 (milliseconds).
    fn generation_and_age(&mut self) -> Result<(u64, u64), TopError> {
        let generation = oid(&[&OBJECTS, &[1, SNAPSHOT_GENERATION, 0]]);
        let age = oid(&[&OBJECTS, &[1, SNAPSHOT_AGE, 0]]);
        let pdu = self.request("reading memSnapshotGeneration.0", |s| {
            s.get_many(&[&generation, &age]).map(Answer::of)
        })?;
        let target = &self.target;
        if pdu.error_status != 0 {
            return Err(TopError::Snmp(format!(
                "{}: the agent answered error-status {} to a Get of memSnapshotGeneration.0",
                target.host, pdu.error_status
            )));
        }
        let mut values = pdu.varbinds.into_iter().map(|(_, v)| match v {
            Owned::Cell(Cell::Number(n)) => Ok(n),
            Owned::NoSuchObject => Err(format!(
                "{} does not serve MEMSTAT-MIB (memSnapshotGeneration.0: noSuchObject); \
                 is memstat-agentx registered with its master?",
                target.host
            )),
            Owned::NoSuchInstance => Err(format!(
                "{}: memstat-agentx has no snapshot yet (memSnapshotGeneration.0: \
                 noSuchInstance); memSourceStatus and memSourceLastError say why",
                target.host
            )),
            Owned::Other(t) => Err(format!(
                "{}: memSnapshotGeneration.0 is {t}, not a counter",
                target.host
            )),
            Owned::Cell(Cell::Text(t)) => Err(format!(
                "{}: memSnapshotGeneration.0 is the text {t:?}, not a counter",
                target.host
            )),
            Owned::EndOfMibView => Err(format!(
                "{}: memSnapshotGeneration.0: endOfMibView",
                target.host
            )),
        });
        let generation = values.next().unwrap_or(Err(format!(
            "{}: an answer without memSnapshotGeneration.0",
            target.host
        )));
        let age = values.next().unwrap_or(Ok(0));
        match (generation, age) {
            (Ok(g), Ok(a)) => Ok((g, a)),
            (Err(e), _) | (_, Err(e)) => Err(TopError::Snmp(e)),
        }
    }

    /// The cells of `columns` under `entry` (memstatObjects.entry.column.index), by index:
    /// GetBulks of every column not yet at its end, until each has left its column.
    fn walk(
        &mut self,
        entry: &[u64],
        columns: &[u64],
    ) -> Result<BTreeMap<u32, Vec<(u64, Cell)>>, TopError> {
        let base: Vec<u64> = [&OBJECTS[..], entry].concat();
        // Per column still walked: the column and the last OID it reached.
        let mut open: Vec<(u64, Vec<u64>)> = columns
            .iter()
            .map(|&c| (c, [&base[..], &[c]].concat()))
            .collect();
        let mut rows: BTreeMap<u32, Vec<(u64, Cell)>> = BTreeMap::new();
        let mut cells = 0usize;
        let mut bytes = 0usize;
        while !open.is_empty() {
            let oids: Vec<Oid> = open
                .iter()
                .map(|(_, o)| Oid::from(o).expect("an OID of u64s"))
                .collect();
            let refs: Vec<&Oid> = oids.iter().collect();
            let repetitions = (BULK_VARBINDS / open.len() as u32).max(1);
            let pdu = self.request("walking MEMSTAT-MIB", |s| {
                s.getbulk(&refs, 0, repetitions).map(Answer::of)
            })?;
            let target = &self.target;
            if pdu.error_status != 0 {
                return Err(TopError::Snmp(format!(
                    "{}: the agent answered error-status {} to a GetBulk of MEMSTAT-MIB",
                    target.host, pdu.error_status
                )));
            }
            let mut done = vec![false; open.len()];
            let mut progressed = vec![false; open.len()];
            for (i, (name, value)) in pdu.varbinds.into_iter().enumerate() {
                let k = i % open.len();
                if done[k] {
                    continue;
                }
                let (column, last) = &mut open[k];
                let prefix_len = base.len() + 1;
                let in_column = name.len() == prefix_len + 1
                    && name[..base.len()] == base[..]
                    && name[base.len()] == *column
                    && name > *last;
                if !in_column || matches!(value, Owned::EndOfMibView) {
                    done[k] = true;
                    continue;
                }
                let Ok(index) = u32::try_from(name[prefix_len]) else {
                    done[k] = true;
                    continue;
                };
                // Every step of a column counts, kept or not, and the text it brings: a
                // hostile agent can neither walk on forever nor fill this program's memory.
                cells += 1;
                if let Owned::Cell(Cell::Text(t)) = &value {
                    bytes += t.len();
                }
                if cells > MAX_CELLS || bytes > MAX_TEXT_BYTES {
                    return Err(TopError::Snmp(format!(
                        "{}: more than {MAX_CELLS} cells or {MAX_TEXT_BYTES} bytes of text of \
                         MEMSTAT-MIB in one frame; refused",
                        target.host
                    )));
                }
                let cell = match value {
                    Owned::Cell(c) => c,
                    _ => {
                        *last = name;
                        progressed[k] = true;
                        continue;
                    }
                };
                rows.entry(index).or_default().push((*column, cell));
                *last = name;
                progressed[k] = true;
            }
            // A column that got nothing new is at its end (or the agent answered nothing
            // for it): never ask the same thing again.
            let mut k = 0;
            open.retain(|_| {
                let keep = !done[k] && progressed[k];
                k += 1;
                keep
            });
        }
        Ok(rows)
    }

    /// The snapshot of the cells walked, and the keys of the types whose discontinuity time
    /// moved since the last snapshot.
    fn snapshot(
        &mut self,
        generation: u64,
        taken: SystemTime,
        types: BTreeMap<u32, Vec<(u64, Cell)>>,
        kernel: BTreeMap<u32, Vec<(u64, Cell)>>,
    ) -> (Snapshot, Vec<TypeKey>) {
        let mut out = Vec::with_capacity(types.len());
        let mut moved = Vec::new();
        let mut discontinuities = BTreeMap::new();
        for (index, cells) in types {
            let mut name = None;
            let mut allocator = None;
            let mut numbers: Vec<(u64, u64)> = Vec::with_capacity(cells.len());
            for (column, cell) in cells {
                match (column, cell) {
                    (TYPE_NAME, Cell::Text(s)) => name = Some(s),
                    (TYPE_ALLOCATOR, Cell::Number(n)) => allocator = allocator_of(n),
                    (c, Cell::Number(n)) => numbers.push((c, n)),
                    _ => {}
                }
            }
            let (Some(name), Some(allocator)) = (name, allocator) else {
                continue;
            };
            let mut ty = MemoryType::new(allocator, &name);
            for (column, value) in numbers {
                if column == TYPE_DISCONTINUITY {
                    discontinuities.insert(index, value);
                    if self
                        .discontinuities
                        .get(&index)
                        .is_some_and(|d| *d != value)
                    {
                        moved.push(ty.key());
                    }
                } else if let Some(def) = TYPE_COLUMNS.iter().find(|d| d.column == column) {
                    (def.set)(&mut ty, value);
                }
            }
            out.push(ty);
        }
        self.discontinuities = discontinuities;
        let mut figures = Figures::new();
        for (index, cells) in kernel {
            let kind = SOURCES
                .iter()
                .flat_map(|d| d.kinds.iter())
                .find(|k| k.index == index);
            if let (Some(kind), Some((_, Cell::Number(bytes)))) = (kind, cells.first()) {
                figures.insert(kind.figure.to_string(), *bytes);
            }
        }
        let mut snap = Snapshot::new(generation, taken, self.name(), out);
        snap.figures = figures;
        (snap, moved)
    }
}

/// What memAllocSiteTable gives a call site: one definition per column walked, as
/// [`TYPE_COLUMNS`] for memTypeTable.
struct AllocSiteColumn {
    /// Its number under memAllocSiteEntry.
    column: u64,
    /// Where its value goes.
    set: SiteSetter,
}

/// Where a column's value goes, by the kind of cell it has; a cell of the other kind is left
/// out.
enum SiteSetter {
    Text(fn(&mut Site, String)),
    Number(fn(&mut Site, u64)),
}

impl SiteSetter {
    fn set(&self, site: &mut Site, cell: Cell) {
        match (self, cell) {
            (SiteSetter::Text(f), Cell::Text(t)) => f(site, t),
            (SiteSetter::Number(f), Cell::Number(n)) => f(site, n),
            _ => {}
        }
    }
}

/// memAllocSiteFile: a row without it is no site.
const ALLOC_SITE_FILE: u64 = 2;
const ALLOC_SITE_COLUMNS: &[AllocSiteColumn] = &[
    AllocSiteColumn {
        column: ALLOC_SITE_FILE,
        set: SiteSetter::Text(|s, t| s.file = t),
    },
    AllocSiteColumn {
        column: 3,
        set: SiteSetter::Number(|s, n| s.line = u32::try_from(n).unwrap_or(u32::MAX)),
    },
    AllocSiteColumn {
        column: 4,
        set: SiteSetter::Text(|s, t| s.function = t),
    },
    AllocSiteColumn {
        column: 5,
        set: SiteSetter::Text(|s, t| s.module = t),
    },
    AllocSiteColumn {
        column: 6,
        set: SiteSetter::Number(|s, n| s.bytes = n),
    },
    AllocSiteColumn {
        column: 7,
        set: SiteSetter::Number(|s, n| s.calls = n),
    },
    AllocSiteColumn {
        column: 8,
        // TruthValue: true(1), false(2).
        set: SiteSetter::Number(|s, n| s.accurate = n == 1),
    },
];

/// Every column walked in memAllocSiteTable.
fn site_columns() -> Vec<u64> {
    ALLOC_SITE_COLUMNS.iter().map(|d| d.column).collect()
}

/// The call sites of memAllocSiteTable's cells.
fn sites_of(state: ProfilingState, rows: BTreeMap<u32, Vec<(u64, Cell)>>) -> Profiling {
    let sites: Vec<Site> = rows
        .into_values()
        .filter_map(|cells| {
            let named = cells
                .iter()
                .any(|(column, cell)| *column == ALLOC_SITE_FILE && matches!(cell, Cell::Text(_)));
            let mut site = Site {
                file: String::new(),
                line: 0,
                module: String::new(),
                function: String::new(),
                bytes: 0,
                calls: 0,
                accurate: true,
                rows: 1,
            };
            for (column, cell) in cells {
                if let Some(def) = ALLOC_SITE_COLUMNS.iter().find(|d| d.column == column) {
                    def.set.set(&mut site, cell);
                }
            }
            named.then_some(site)
        })
        .collect();
    Profiling {
        state,
        rows: sites.len() as u64,
        sites,
    }
}

/// Every column walked in memTypeTable.
fn type_columns() -> Vec<u64> {
    let mut c = vec![TYPE_NAME, TYPE_ALLOCATOR];
    c.extend(TYPE_COLUMNS.iter().map(|d| d.column));
    c.push(TYPE_DISCONTINUITY);
    c
}

/// MemAllocator's value.
fn allocator_of(n: u64) -> Option<Allocator> {
    Allocator::ALL.into_iter().find(|a| *a as u64 == n)
}

fn oid(parts: &[&[u64]]) -> Oid<'static> {
    Oid::from(&parts.concat()).expect("an OID of u64s")
}

/// A session with the host, with the engine found first for v3.
fn open_session(target: &Target) -> Result<SyncSession, TopError> {
    let host = with_port(&target.host);
    let fail = |e: std::io::Error| TopError::Snmp(format!("{}: {e}", target.host));
    let mut session = match &target.credentials {
        Credentials::Community(c) => {
            SyncSession::new_v2c(host.as_str(), c, Some(target.timeout), 0).map_err(fail)?
        }
        Credentials::V3 {
            user,
            auth,
            privacy,
        } => {
            let (protocol, password) = auth.clone().unwrap_or((v3::AuthProtocol::Sha1, Vec::new()));
            let mut security = v3::Security::new(user.as_bytes(), &password)
                .with_auth_protocol(protocol)
                .with_auth(match (auth, privacy) {
                    (None, _) => v3::Auth::NoAuthNoPriv,
                    (Some(_), None) => v3::Auth::AuthNoPriv,
                    (Some(_), Some((cipher, p))) => v3::Auth::AuthPriv {
                        cipher: *cipher,
                        privacy_password: p.clone(),
                    },
                });
            if privacy.is_some() {
                // net-snmp localises AES-192/256 keys as Blumenthal's draft does.
                security = security.with_key_extension_method(v3::KeyExtension::Blumenthal);
            }
            SyncSession::new_v3(host.as_str(), Some(target.timeout), 0, security).map_err(fail)?
        }
    };
    if matches!(target.credentials, Credentials::V3 { .. }) {
        session
            .init()
            .map_err(|e| snmp_error(target, "SNMPv3 engine discovery", e))?;
    }
    Ok(session)
}

/// HOST:PORT from HOST or HOST:PORT (an IPv6 address in brackets).
fn with_port(host: &str) -> String {
    let has_port = match host.strip_prefix('[') {
        Some(rest) => rest.contains("]:"),
        None => host.matches(':').count() == 1,
    };
    match has_port {
        true => host.to_string(),
        false if host.contains(':') && !host.starts_with('[') => format!("[{host}]:161"),
        false => format!("{host}:161"),
    }
}

/// The one-line error of a failed request.
fn snmp_error(target: &Target, doing: &str, e: snmp2::Error) -> TopError {
    let t = target.timeout.as_secs_f64();
    let why = match e {
        snmp2::Error::Receive => format!(
            "no answer within {t} s ({}): the host is unreachable, no agent listens there, or \
             the {} is wrong",
            match target.retries {
                0 => "1 attempt".to_string(),
                r => format!("{} attempts", r + 1),
            },
            match target.credentials {
                Credentials::Community(_) => "community",
                Credentials::V3 { .. } => "user or its keys",
            }
        ),
        snmp2::Error::Send => "the request could not be sent".to_string(),
        snmp2::Error::AuthFailure(kind) => format!("SNMPv3 authentication failed ({kind:?})"),
        other => format!("{other:?}"),
    };
    TopError::Snmp(format!("{}: {doing}: {why}", target.host))
}

/// The credentials of a file readable by its owner only (TOML: `community`, or `user`,
/// `auth-protocol`, `auth-password`, `priv-protocol`, `priv-password`).
pub(super) fn credentials_file(path: &Path) -> Result<CredentialWords, String> {
    use std::os::unix::fs::MetadataExt;
    let at = path.display();
    let (file, meta) =
        crate::boundedfile::open(path, libc::O_NOFOLLOW).map_err(|e| format!("{at}: {e}"))?;
    let me = crate::privdrop::effective_uid();
    if meta.mode() & 0o077 != 0 {
        return Err(format!(
            "{at}: readable or writable by others (mode {:o}); it holds secrets: chmod 600 {at}",
            meta.mode() & 0o7777
        ));
    }
    // Root (sudo memstat-top) may use a user's own file; anyone else only their own.
    if meta.uid() != me && me != 0 {
        return Err(format!(
            "{at}: owned by uid {}, not by this user (uid {me}); refused",
            meta.uid()
        ));
    }
    let mut bytes = Vec::new();
    crate::boundedfile::read_capped(file, 64 * 1024, &mut bytes)
        .map_err(|e| format!("{at}: {e}"))?;
    let text = String::from_utf8(bytes).map_err(|_| format!("{at}: not UTF-8"))?;
    // The message and the line, never toml's quote of the line: it may hold a password.
    toml::from_str(&text).map_err(|e: toml::de::Error| {
        let line = e
            .span()
            .map(|s| format!(":{}", crate::config::line_of(text.as_bytes(), s.start)))
            .unwrap_or_default();
        format!("{at}{line}: {}", e.message().trim_end())
    })
}

/// The words of the credentials, from the command line or a file, before they are checked.
#[derive(Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct CredentialWords {
    pub community: Option<String>,
    pub user: Option<String>,
    pub auth_protocol: Option<String>,
    pub auth_password: Option<String>,
    pub priv_protocol: Option<String>,
    pub priv_password: Option<String>,
}

impl CredentialWords {
    /// Each word given here replaces the one of `base`.
    pub(super) fn over(self, base: CredentialWords) -> CredentialWords {
        CredentialWords {
            community: self.community.or(base.community),
            user: self.user.or(base.user),
            auth_protocol: self.auth_protocol.or(base.auth_protocol),
            auth_password: self.auth_password.or(base.auth_password),
            priv_protocol: self.priv_protocol.or(base.priv_protocol),
            priv_password: self.priv_password.or(base.priv_password),
        }
    }

    /// v2c with a community, or v3 with a user; the protocols by their net-snmp names.
    pub(super) fn credentials(self) -> Result<Credentials, String> {
        match (self.community, self.user) {
            (Some(_), Some(_)) => Err("a community (v2c) or a user (v3), not both".into()),
            (Some(c), None) => {
                if self.auth_protocol.is_some()
                    || self.auth_password.is_some()
                    || self.priv_protocol.is_some()
                    || self.priv_password.is_some()
                {
                    return Err(
                        "the auth and priv settings are for a v3 user, not a community".into(),
                    );
                }
                Ok(Credentials::Community(c.into_bytes()))
            }
            (None, None) => Ok(Credentials::Community(b"public".to_vec())),
            (None, Some(user)) => {
                let auth = match (self.auth_protocol, self.auth_password) {
                    (None, None) => None,
                    (p, Some(password)) => {
                        let protocol = auth_protocol(p.as_deref().unwrap_or("SHA"))?;
                        if password.len() < 8 {
                            return Err("the auth password is shorter than 8 characters, the least SNMPv3 takes".into());
                        }
                        Some((protocol, password.into_bytes()))
                    }
                    (Some(_), None) => {
                        return Err("an auth protocol without an auth password".into())
                    }
                };
                let privacy = match (self.priv_protocol, self.priv_password) {
                    (None, None) => None,
                    (_, Some(_)) if auth.is_none() => {
                        return Err(
                            "privacy needs authentication: give the auth password too".into()
                        )
                    }
                    (p, Some(password)) => {
                        let cipher = cipher(p.as_deref().unwrap_or("AES"))?;
                        if password.len() < 8 {
                            return Err("the priv password is shorter than 8 characters, the least SNMPv3 takes".into());
                        }
                        Some((cipher, password.into_bytes()))
                    }
                    (Some(_), None) => return Err("a priv protocol without a priv password".into()),
                };
                Ok(Credentials::V3 {
                    user,
                    auth,
                    privacy,
                })
            }
        }
    }
}

/// net-snmp's names of the authentication protocols (`-a`).
fn auth_protocol(name: &str) -> Result<v3::AuthProtocol, String> {
    Ok(match name.to_ascii_uppercase().as_str() {
        "MD5" => v3::AuthProtocol::Md5,
        "SHA" | "SHA1" | "SHA-1" => v3::AuthProtocol::Sha1,
        "SHA-224" | "SHA224" => v3::AuthProtocol::Sha224,
        "SHA-256" | "SHA256" => v3::AuthProtocol::Sha256,
        "SHA-384" | "SHA384" => v3::AuthProtocol::Sha384,
        "SHA-512" | "SHA512" => v3::AuthProtocol::Sha512,
        _ => {
            return Err(format!(
                "auth protocol {name:?}: one of MD5, SHA, SHA-224, SHA-256, SHA-384, SHA-512"
            ))
        }
    })
}

/// net-snmp's names of the privacy protocols (`-x`).
fn cipher(name: &str) -> Result<v3::Cipher, String> {
    Ok(match name.to_ascii_uppercase().as_str() {
        "DES" => v3::Cipher::Des,
        "AES" | "AES128" | "AES-128" => v3::Cipher::Aes128,
        "AES192" | "AES-192" => v3::Cipher::Aes192,
        "AES256" | "AES-256" => v3::Cipher::Aes256,
        _ => {
            return Err(format!(
                "priv protocol {name:?}: one of DES, AES, AES-192, AES-256"
            ))
        }
    })
}
