//! A scripted, strict AgentX master for integration tests.
//!
//! It listens on a Unix socket, starts the real `memstat-agentx` daemon against it, answers
//! the daemon's administrative PDUs the way OpenBSD's snmpd does, and checks every PDU the
//! daemon sends against RFC 2741 and OpenBSD's `appl_response` rules.
//!
//! Requests are encoded with the crate's codec; everything received is decoded by the
//! independent parser below (so a bug shared by the codec's encoder and decoder cannot hide),
//! and the expected answers come from [`Model`], which is computed from the fixture and the
//! MEMSTAT-MIB layout written out here, not from `MibView`.

#![allow(dead_code)]

use agentx_proto::oid::Oid;
use agentx_proto::pdu::{Payload, Pdu, ResError, SearchRange};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// memstatMIB.
pub const ROOT: &[u32] = &[1, 3, 6, 1, 4, 1, 32473, 1];

/// `ROOT` followed by `tail`.
pub fn r(tail: &[u32]) -> Vec<u32> {
    let mut v = ROOT.to_vec();
    v.extend_from_slice(tail);
    v
}

pub fn dotted(o: &[u32]) -> String {
    o.iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>()
        .join(".")
}

// PDU types and codes, written out from RFC 2741 §6.1 / §6.2.16 (not taken from the codec).
pub const T_OPEN: u8 = 1;
pub const T_CLOSE: u8 = 2;
pub const T_REGISTER: u8 = 3;
pub const T_GET: u8 = 5;
pub const T_GETNEXT: u8 = 6;
pub const T_PING: u8 = 13;
pub const T_ADD_AGENT_CAPS: u8 = 16;
pub const T_RESPONSE: u8 = 18;
pub const F_INSTANCE_REGISTRATION: u8 = 0x01;
pub const F_NON_DEFAULT_CONTEXT: u8 = 0x08;
pub const F_NBO: u8 = 0x10;
pub const E_NO_ERROR: u16 = 0;
pub const E_NOT_WRITABLE: u16 = 17;
pub const E_PARSE_ERROR: u16 = 266;
pub const E_PROCESSING_ERROR: u16 = 268;
pub const CLOSE_SHUTDOWN: u8 = 5;

// ---------------------------------------------------------------------------------------------
// Independent wire parser (network byte order only: the daemon must always set the NBO flag)
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub version: u8,
    pub ty: u8,
    pub flags: u8,
    pub reserved: u8,
    pub session: u32,
    pub txn: u32,
    pub packet: u32,
    pub plen: u32,
}

#[derive(Clone, Debug)]
pub struct Frame {
    pub h: Header,
    pub raw: Vec<u8>,
}

impl Frame {
    pub fn payload(&self) -> &[u8] {
        &self.raw[20..]
    }
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// Checks the header rules every PDU from the daemon must follow and returns it.
pub fn parse_header(b: &[u8; 20]) -> Header {
    let h = Header {
        version: b[0],
        ty: b[1],
        flags: b[2],
        reserved: b[3],
        session: be32(&b[4..]),
        txn: be32(&b[8..]),
        packet: be32(&b[12..]),
        plen: be32(&b[16..]),
    };
    assert_eq!(h.version, 1, "h.version must be 1: {h:?}");
    assert!(
        h.flags & F_NBO != 0,
        "NETWORK_BYTE_ORDER must be set: {h:?}"
    );
    assert_eq!(h.flags & 0xE0, 0, "reserved flag bits set: {h:?}");
    assert_eq!(h.reserved, 0, "reserved header byte not 0: {h:?}");
    assert_eq!(h.plen % 4, 0, "payload_length not a multiple of 4: {h:?}");
    assert!(h.plen <= 65536, "payload_length over 64 KiB: {h:?}");
    h
}

/// A value as decoded from the wire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum V {
    Int(i32),
    Str(Vec<u8>),
    Null,
    Oid(Vec<u32>),
    Ip([u8; 4]),
    C32(u32),
    G32(u32),
    TT(u32),
    Opaque(Vec<u8>),
    C64(u64),
    NoSuchObject,
    NoSuchInstance,
    EndOfMibView,
}

impl V {
    pub fn code(&self) -> u16 {
        match self {
            V::Int(_) => 2,
            V::Str(_) => 4,
            V::Null => 5,
            V::Oid(_) => 6,
            V::Ip(_) => 64,
            V::C32(_) => 65,
            V::G32(_) => 66,
            V::TT(_) => 67,
            V::Opaque(_) => 68,
            V::C64(_) => 70,
            V::NoSuchObject => 128,
            V::NoSuchInstance => 129,
            V::EndOfMibView => 130,
        }
    }
}

pub struct Cur<'a> {
    b: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Cur<'a> {
    pub fn new(b: &'a [u8], what: &'static str) -> Self {
        Cur { b, pos: 0, what }
    }
    fn take(&mut self, n: usize) -> &'a [u8] {
        assert!(
            self.pos + n <= self.b.len(),
            "{}: truncated at payload byte {} (need {n}, have {})",
            self.what,
            self.pos,
            self.b.len() - self.pos
        );
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        s
    }
    pub fn u8(&mut self) -> u8 {
        self.take(1)[0]
    }
    pub fn u16(&mut self) -> u16 {
        let s = self.take(2);
        u16::from_be_bytes([s[0], s[1]])
    }
    pub fn u32(&mut self) -> u32 {
        be32(self.take(4))
    }
    pub fn u64(&mut self) -> u64 {
        let s = self.take(8);
        u64::from_be_bytes(s.try_into().unwrap())
    }
    pub fn done(&self) -> bool {
        self.pos == self.b.len()
    }
    pub fn finish(&self) {
        assert!(
            self.done(),
            "{}: {} trailing bytes",
            self.what,
            self.b.len() - self.pos
        );
    }
    /// An OID (RFC 2741 §5.1); returns it expanded, and its include byte.
    pub fn oid(&mut self) -> (Vec<u32>, u8) {
        let n = self.u8() as usize;
        let prefix = self.u8();
        let include = self.u8();
        let reserved = self.u8();
        assert_eq!(reserved, 0, "{}: OID reserved byte", self.what);
        let mut v = Vec::new();
        if prefix != 0 {
            v.extend_from_slice(&[1, 3, 6, 1, prefix as u32]);
        }
        for _ in 0..n {
            v.push(self.u32());
        }
        assert!(v.len() <= 128, "{}: OID longer than 128", self.what);
        (v, include)
    }
    /// An octet string (RFC 2741 §5.3), checking that the padding is zero.
    pub fn octets(&mut self) -> Vec<u8> {
        let n = self.u32() as usize;
        let data = self.take(n).to_vec();
        let pad = (4 - n % 4) % 4;
        assert!(
            self.take(pad).iter().all(|&b| b == 0),
            "{}: non-zero octet string padding",
            self.what
        );
        data
    }
    pub fn varbind(&mut self) -> (Vec<u32>, V) {
        let ty = self.u16();
        let reserved = self.u16();
        assert_eq!(reserved, 0, "{}: VarBind reserved field", self.what);
        let (name, include) = self.oid();
        assert_eq!(include, 0, "{}: include set in a VarBind name", self.what);
        let v = match ty {
            2 => V::Int(self.u32() as i32),
            4 => V::Str(self.octets()),
            5 => V::Null,
            6 => {
                let (o, inc) = self.oid();
                assert_eq!(inc, 0);
                V::Oid(o)
            }
            64 => {
                let o = self.octets();
                assert_eq!(o.len(), 4, "IpAddress of {} octets", o.len());
                V::Ip(o.try_into().unwrap())
            }
            65 => V::C32(self.u32()),
            66 => V::G32(self.u32()),
            67 => V::TT(self.u32()),
            68 => V::Opaque(self.octets()),
            70 => V::C64(self.u64()),
            128 => V::NoSuchObject,
            129 => V::NoSuchInstance,
            130 => V::EndOfMibView,
            t => panic!("{}: unknown v.type {t}", self.what),
        };
        (name, v)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resp {
    pub uptime: u32,
    pub error: u16,
    pub index: u16,
    pub vbs: Vec<(Vec<u32>, V)>,
}

/// Parses a Response payload strictly.
pub fn parse_response(f: &Frame) -> Resp {
    assert_eq!(f.h.ty, T_RESPONSE, "expected a Response: {:?}", f.h);
    assert_eq!(
        f.h.flags, F_NBO,
        "a Response carries no flags but NETWORK_BYTE_ORDER: {:?}",
        f.h
    );
    let mut c = Cur::new(f.payload(), "Response");
    let uptime = c.u32();
    let error = c.u16();
    let index = c.u16();
    let mut vbs = Vec::new();
    while !c.done() {
        vbs.push(c.varbind());
    }
    if error == E_NO_ERROR {
        assert_eq!(index, 0, "res.index must be 0 with noError");
    } else if index != 0 {
        assert!(
            (index as usize) <= vbs.len().max(1),
            "res.index {index} out of range"
        );
    }
    Resp {
        uptime,
        error,
        index,
        vbs,
    }
}

// ---------------------------------------------------------------------------------------------
// The fixture and the expected MIB contents
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug, Default)]
pub struct CpuRow {
    pub cpu: u32,
    pub allocs: Option<u64>,
    pub frees: Option<u64>,
    pub cache_free: Option<u64>,
}

/// One fixture row. `stats` holds columns 5..=21 and 23 (memTypeSize .. memTypeKegFree,
/// memTypeSlabBytes) by their JSON field names.
#[derive(Clone, Debug, Default)]
pub struct Row {
    pub allocator: &'static str,
    pub name: &'static str,
    pub stats: Vec<(&'static str, u64)>,
    pub size_mask: Option<u64>,
    pub per_cpu: Vec<CpuRow>,
}

impl Row {
    pub fn stat(&self, field: &str) -> Option<u64> {
        self.stats
            .iter()
            .find(|(f, _)| *f == field)
            .map(|(_, v)| *v)
    }
}

/// memTypeTable columns 5..=21 and 23: (column, fixture field). All MemGauge64 or Counter64,
/// i.e. Counter64 on the wire.
pub const C64_COLUMNS: &[(u32, &str)] = &[
    (5, "size"),
    (6, "real_size"),
    (7, "count_limit"),
    (8, "bytes_limit"),
    (9, "in_use_count"),
    (10, "in_use_bytes"),
    (11, "free_count"),
    (12, "total_count"),
    (13, "allocs"),
    (14, "frees"),
    (15, "bytes_allocated"),
    (16, "bytes_freed"),
    (17, "failures"),
    (18, "sleeps"),
    (19, "xdomain"),
    (20, "zone_free"),
    (21, "keg_free"),
    (23, "slab_bytes"),
];

const BIG: u64 = 1 << 32;

/// A few UMA rows (two with the same name, per-CPU figures out of order, absent cells),
/// one malloc row with a size mask, one slab row, values above 2^32.
pub fn fixture_rows() -> Vec<Row> {
    vec![
        Row {
            allocator: "uma",
            name: "mbuf",
            stats: vec![
                ("size", 256),
                ("real_size", 256),
                ("count_limit", 0),
                ("bytes_limit", 0),
                ("in_use_count", 5 * BIG + 1),
                ("in_use_bytes", 256 * (5 * BIG + 1)),
                ("free_count", 1234),
                ("allocs", u64::MAX - 7),
                ("frees", u64::MAX - 9),
                ("failures", 7),
                ("sleeps", 0),
                ("xdomain", 3),
                ("zone_free", 100),
                ("keg_free", 50),
            ],
            size_mask: None,
            per_cpu: vec![
                CpuRow {
                    cpu: 1,
                    allocs: Some(BIG + 11),
                    frees: Some(BIG + 10),
                    cache_free: Some(4),
                },
                CpuRow {
                    cpu: 0,
                    allocs: Some(3 * BIG),
                    frees: Some(2 * BIG),
                    cache_free: None,
                },
            ],
        },
        Row {
            allocator: "uma",
            name: "mbuf",
            stats: vec![
                ("size", 2048),
                ("in_use_count", 10),
                ("free_count", 20),
                ("allocs", 1000),
                ("frees", 990),
                ("failures", BIG + 5),
            ],
            size_mask: None,
            per_cpu: vec![CpuRow {
                cpu: 3,
                allocs: None,
                frees: Some(1),
                cache_free: Some(BIG * 7),
            }],
        },
        Row {
            allocator: "malloc",
            name: "devbuf",
            stats: vec![
                ("in_use_count", 42),
                ("in_use_bytes", 9 * BIG),
                ("allocs", 77),
                ("frees", 35),
                ("bytes_allocated", 11 * BIG),
                ("bytes_freed", 2 * BIG),
            ],
            size_mask: Some(0x8000_0000_0000_0105),
            per_cpu: vec![
                CpuRow {
                    cpu: 0,
                    allocs: Some(40),
                    frees: Some(20),
                    cache_free: None,
                },
                CpuRow {
                    cpu: 1,
                    allocs: Some(37),
                    frees: Some(15),
                    cache_free: None,
                },
            ],
        },
        Row {
            allocator: "slab",
            name: "kmalloc-64",
            stats: vec![
                ("size", 64),
                ("in_use_count", 3 * BIG),
                ("free_count", 100),
                ("total_count", 3 * BIG + 100),
                ("slab_bytes", 8 * BIG),
            ],
            size_mask: None,
            per_cpu: vec![],
        },
        // Every statistic absent.
        Row {
            allocator: "uma",
            name: "empty zone",
            stats: vec![],
            size_mask: None,
            per_cpu: vec![],
        },
    ]
}

/// The fixture JSON for `rows` (the `Snapshot` serde format, absent figures omitted).
pub fn fixture_json(rows: &[Row]) -> String {
    use serde_json::{json, Map, Value};
    let types: Vec<Value> = rows
        .iter()
        .map(|row| {
            let mut m = Map::new();
            m.insert("allocator".into(), json!(row.allocator));
            m.insert("name".into(), json!(row.name));
            m.insert("ordinal".into(), json!(0));
            for (f, v) in &row.stats {
                m.insert((*f).into(), json!(*v));
            }
            if let Some(s) = row.size_mask {
                m.insert("size_mask".into(), json!(s));
            }
            if !row.per_cpu.is_empty() {
                let cpus: Vec<Value> = row
                    .per_cpu
                    .iter()
                    .map(|c| {
                        let mut cm = Map::new();
                        cm.insert("cpu".into(), json!(c.cpu));
                        for (k, v) in [
                            ("allocs", c.allocs),
                            ("frees", c.frees),
                            ("cache_free", c.cache_free),
                        ] {
                            if let Some(v) = v {
                                cm.insert(k.into(), json!(v));
                            }
                        }
                        Value::Object(cm)
                    })
                    .collect();
                m.insert("per_cpu".into(), Value::Array(cpus));
            }
            Value::Object(m)
        })
        .collect();
    serde_json::to_string_pretty(&json!({
        "generation": 0,
        "taken_at_ms": 0,
        "source": "",
        "types": types,
    }))
    .unwrap()
}

/// What a returned value must be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Exp {
    Is(V),
    /// Any value of this v.type (scalars that change with time).
    TypeOf(u16),
    /// An OctetString of exactly this many octets.
    StrLen(usize),
}

impl Exp {
    pub fn check(&self, got: &V, ctx: &str) {
        match self {
            Exp::Is(v) => assert_eq!(got, v, "{ctx}: wrong value"),
            Exp::TypeOf(t) => assert_eq!(got.code(), *t, "{ctx}: wrong type, got {got:?}"),
            Exp::StrLen(n) => match got {
                V::Str(s) => assert_eq!(s.len(), *n, "{ctx}: wrong length {got:?}"),
                _ => panic!("{ctx}: expected an OctetString, got {got:?}"),
            },
        }
    }
}

/// Every instance the daemon must serve, in OID order, with its expected value.
pub struct Model {
    pub entries: Vec<(Vec<u32>, Exp)>,
}

fn allocator_number(a: &str) -> u32 {
    match a {
        "malloc" => 1,
        "uma" => 2,
        "slab" => 3,
        _ => panic!("allocator {a}"),
    }
}

impl Model {
    /// The MIB as the daemon must lay it out for `rows`, read from a fresh state directory
    /// (indexes 1, 2, ... in fixture order) whose first snapshot it is (discontinuity 0).
    pub fn new(rows: &[Row], source_name: &str) -> Model {
        let mut e: Vec<(Vec<u32>, Exp)> = Vec::new();
        // memstatDaemon scalars, R.1.1.N.0.
        let scalars: [Exp; 11] = [
            Exp::TypeOf(67),
            Exp::StrLen(11),
            Exp::TypeOf(66),
            Exp::TypeOf(70),
            Exp::TypeOf(70),
            Exp::Is(V::C64(0)),
            Exp::Is(V::Str(source_name.as_bytes().to_vec())),
            Exp::Is(V::Int(1)),
            Exp::Is(V::Str(Vec::new())),
            Exp::Is(V::C64(0)),
            Exp::Is(V::C64(0)),
        ];
        for (i, x) in scalars.into_iter().enumerate() {
            e.push((r(&[1, 1, i as u32 + 1, 0]), x));
        }
        // memSourceTable, R.1.1.12.1.col.1: the one source, read once and well.
        let source: [Exp; 5] = [
            Exp::Is(V::Str(source_name.as_bytes().to_vec())),
            Exp::Is(V::Int(1)),
            Exp::Is(V::Str(Vec::new())),
            Exp::StrLen(11),
            Exp::Is(V::G32(rows.len() as u32)),
        ];
        for (i, x) in source.into_iter().enumerate() {
            e.push((r(&[1, 1, 12, 1, i as u32 + 2, 1]), x));
        }
        // Ordinals: the n-th row with the same (allocator, name) gets n.
        let ordinals: Vec<u32> = rows
            .iter()
            .enumerate()
            .map(|(i, row)| {
                rows[..i]
                    .iter()
                    .filter(|o| o.allocator == row.allocator && o.name == row.name)
                    .count() as u32
            })
            .collect();
        // memTypeTable, column by column, rows by index (= fixture position + 1).
        for col in 2..=24u32 {
            for (i, row) in rows.iter().enumerate() {
                let idx = i as u32 + 1;
                let v = match col {
                    2 => Some(V::Str(row.name.as_bytes().to_vec())),
                    3 => Some(V::Int(allocator_number(row.allocator) as i32)),
                    4 => Some(V::G32(ordinals[i])),
                    22 => row.size_mask.map(|m| V::Str(m.to_be_bytes().to_vec())),
                    24 => Some(V::TT(0)),
                    c => {
                        let field = C64_COLUMNS.iter().find(|(cc, _)| *cc == c).unwrap().1;
                        row.stat(field).map(V::C64)
                    }
                };
                if let Some(v) = v {
                    e.push((r(&[1, 2, 1, col, idx]), Exp::Is(v)));
                }
            }
        }
        // memCpuTable, R.1.3.1.col.index.cpu, ordered by (index, cpu).
        for col in 2..=4u32 {
            for (i, row) in rows.iter().enumerate() {
                let mut cpus = row.per_cpu.clone();
                cpus.sort_by_key(|c| c.cpu);
                for c in cpus {
                    let v = match col {
                        2 => c.allocs,
                        3 => c.frees,
                        _ => c.cache_free,
                    };
                    if let Some(v) = v {
                        e.push((r(&[1, 3, 1, col, i as u32 + 1, c.cpu]), Exp::Is(V::C64(v))));
                    }
                }
            }
        }
        // memAllocatorTable, R.1.4.1.col.allocator, allocators that have rows.
        for col in 2..=5u32 {
            for a in ["malloc", "uma", "slab"] {
                let mine: Vec<&Row> = rows.iter().filter(|x| x.allocator == a).collect();
                if mine.is_empty() {
                    continue;
                }
                let sum = |f: &dyn Fn(&Row) -> Option<u64>| {
                    mine.iter().fold(None, |acc: Option<u64>, x| match f(x) {
                        Some(v) => Some(acc.unwrap_or(0).saturating_add(v)),
                        None => acc,
                    })
                };
                let v = match col {
                    2 => Some(V::G32(mine.len() as u32)),
                    3 => sum(&|x| x.stat("in_use_bytes")).map(V::C64),
                    4 => sum(&|x| Some(x.stat("free_count")?.saturating_mul(x.stat("size")?)))
                        .map(V::C64),
                    _ => sum(&|x| x.stat("failures")).map(V::C64),
                };
                if let Some(v) = v {
                    e.push((r(&[1, 4, 1, col, allocator_number(a)]), Exp::Is(v)));
                }
            }
        }
        for w in e.windows(2) {
            assert!(w[0].0 < w[1].0, "model out of order at {}", dotted(&w[1].0));
        }
        Model { entries: e }
    }

    /// RFC 2741 §7.2.3.2: the first instance after `start` (or at it, with `include`) that
    /// lies before `end` (null: unbounded).
    pub fn next(&self, start: &[u32], include: bool, end: &[u32]) -> Option<&(Vec<u32>, Exp)> {
        self.entries.iter().find(|(o, _)| {
            (o.as_slice() > start || (include && o.as_slice() == start))
                && (end.is_empty() || o.as_slice() < end)
        })
    }

    /// RFC 2741 §7.2.3.1: the value, noSuchInstance (an object of the MIB, but no such
    /// instance or an absent cell) or noSuchObject (no object of the MIB has this prefix).
    pub fn get(&self, oid: &[u32]) -> Exp {
        if let Some((_, x)) = self.entries.iter().find(|(o, _)| o.as_slice() == oid) {
            return x.clone();
        }
        let objects: Vec<Vec<u32>> = (1..=11)
            .map(|n| r(&[1, 1, n]))
            .chain((2..=24).map(|c| r(&[1, 2, 1, c])))
            .chain((2..=4).map(|c| r(&[1, 3, 1, c])))
            .chain((2..=5).map(|c| r(&[1, 4, 1, c])))
            .collect();
        if objects.iter().any(|p| oid.starts_with(p)) {
            Exp::Is(V::NoSuchInstance)
        } else {
            Exp::Is(V::NoSuchObject)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Ranges and response checks
// ---------------------------------------------------------------------------------------------

pub fn range(start: &[u32], include: bool, end: &[u32]) -> SearchRange {
    SearchRange {
        start: Oid(start.to_vec()),
        include,
        end: Oid(end.to_vec()),
    }
}

/// The RFC 2741 rules for one GetNext-style answer, then the exact expected answer.
fn check_next_vb(
    model: &Model,
    start: &[u32],
    include: bool,
    end: &[u32],
    got: &(Vec<u32>, V),
    ctx: &str,
) {
    let (name, v) = got;
    assert!(
        !matches!(v, V::NoSuchObject | V::NoSuchInstance),
        "{ctx}: {v:?} in a GetNext answer (OpenBSD closes the session)"
    );
    if *v == V::EndOfMibView {
        assert_eq!(
            name.as_slice(),
            start,
            "{ctx}: endOfMibView must carry the start OID"
        );
    } else {
        if include {
            assert!(
                name.as_slice() >= start,
                "{ctx}: {} is before the start {}",
                dotted(name),
                dotted(start)
            );
        } else {
            assert!(
                name.as_slice() > start,
                "{ctx}: {} does not increase past {}",
                dotted(name),
                dotted(start)
            );
        }
        if !end.is_empty() {
            assert!(
                name.as_slice() < end,
                "{ctx}: {} is not before the (exclusive) end {}",
                dotted(name),
                dotted(end)
            );
        }
    }
    match model.next(start, include, end) {
        None => assert_eq!(
            *v,
            V::EndOfMibView,
            "{ctx}: expected endOfMibView, got {} = {v:?}",
            dotted(name)
        ),
        Some((o, x)) => {
            assert_eq!(
                name,
                o,
                "{ctx}: wrong successor of {} (include={include}, end={}): got {} expected {}",
                dotted(start),
                dotted(end),
                dotted(name),
                dotted(o)
            );
            x.check(v, &format!("{ctx} {}", dotted(name)));
        }
    }
}

pub fn check_getnext(model: &Model, ranges: &[SearchRange], resp: &Resp) {
    assert_eq!(resp.error, E_NO_ERROR, "GetNext error: {resp:?}");
    assert_eq!(
        resp.vbs.len(),
        ranges.len(),
        "GetNext: VarBind count must equal the SearchRange count"
    );
    for (i, (rg, vb)) in ranges.iter().zip(&resp.vbs).enumerate() {
        check_next_vb(
            model,
            rg.start.as_slice(),
            rg.include,
            rg.end.as_slice(),
            vb,
            &format!("GetNext range {i}"),
        );
    }
}

pub fn check_get(model: &Model, ranges: &[SearchRange], resp: &Resp) {
    assert_eq!(resp.error, E_NO_ERROR, "Get error: {resp:?}");
    assert_eq!(resp.vbs.len(), ranges.len(), "Get: VarBind count");
    for (i, (rg, (name, v))) in ranges.iter().zip(&resp.vbs).enumerate() {
        let ctx = format!("Get range {i} ({})", dotted(rg.start.as_slice()));
        assert_eq!(
            name.as_slice(),
            rg.start.as_slice(),
            "{ctx}: v.name must be the start OID"
        );
        assert_ne!(*v, V::EndOfMibView, "{ctx}: endOfMibView on Get");
        model.get(rg.start.as_slice()).check(v, &ctx);
    }
}

/// Checks a GetBulk answer; returns the number of repetitions k.
pub fn check_getbulk(
    model: &Model,
    non_repeaters: u16,
    max_repetitions: u16,
    ranges: &[SearchRange],
    resp: &Resp,
) -> usize {
    assert_eq!(resp.error, E_NO_ERROR, "GetBulk error: {resp:?}");
    let n = (non_repeaters as usize).min(ranges.len());
    let rep = ranges.len() - n;
    assert!(
        resp.vbs.len() >= n,
        "GetBulk: fewer VarBinds than non-repeaters"
    );
    let k = if rep == 0 {
        assert_eq!(resp.vbs.len(), n, "GetBulk without repeaters");
        0
    } else {
        assert_eq!(
            (resp.vbs.len() - n) % rep,
            0,
            "GetBulk: VarBind count {} is not N + k*R (N={n}, R={rep})",
            resp.vbs.len()
        );
        (resp.vbs.len() - n) / rep
    };
    assert!(
        k <= max_repetitions as usize,
        "GetBulk: {k} repetitions > max-repetitions {max_repetitions}"
    );
    for (i, rg) in ranges[..n].iter().enumerate() {
        check_next_vb(
            model,
            rg.start.as_slice(),
            rg.include,
            rg.end.as_slice(),
            &resp.vbs[i],
            &format!("GetBulk non-repeater {i}"),
        );
    }
    // Each repetition continues from the previous result. RFC 2741 §7.2.3.3: from the
    // second repetition on, a repeater's search starts at the name it returned last, so its
    // endOfMibView carries that name; only a repeater that returned nothing names the
    // range's start. An exhausted range stays endOfMibView under that name.
    let mut cursor: Vec<(Vec<u32>, bool, bool)> = ranges[n..]
        .iter()
        .map(|rg| (rg.start.0.clone(), rg.include, false))
        .collect();
    for rep_i in 0..k {
        for (j, rg) in ranges[n..].iter().enumerate() {
            let vb = &resp.vbs[n + rep_i * rep + j];
            let ctx = format!("GetBulk repetition {rep_i} range {}", n + j);
            let (from, include, done) = cursor[j].clone();
            if done {
                assert_eq!(
                    *vb,
                    (from.clone(), V::EndOfMibView),
                    "{ctx}: an exhausted range must stay endOfMibView, named as before"
                );
                continue;
            }
            if vb.1 == V::EndOfMibView {
                assert_eq!(
                    vb.0, from,
                    "{ctx}: endOfMibView must carry the name returned last (the start OID \
                     when nothing was returned)"
                );
                assert!(
                    model.next(&from, include, rg.end.as_slice()).is_none(),
                    "{ctx}: endOfMibView too early after {}",
                    dotted(&from)
                );
                cursor[j].2 = true;
            } else {
                check_next_vb(model, &from, include, rg.end.as_slice(), vb, &ctx);
                cursor[j] = (vb.0.clone(), false, false);
            }
        }
    }
    // The daemon may stop before max-repetitions only when every repeater is exhausted, or
    // when one more repetition would not fit in a 64 KiB Response.
    if k < max_repetitions as usize && rep > 0 {
        let total: usize = resp.vbs.iter().map(vb_wire_len).sum();
        let last_rep: usize = resp.vbs[resp.vbs.len() - rep..]
            .iter()
            .map(vb_wire_len)
            .sum();
        assert!(
            cursor.iter().all(|c| c.2) || (k > 0 && total + last_rep > 60 * 1024),
            "GetBulk stopped after {k} of {max_repetitions} repetitions with live ranges \
             ({total} bytes of VarBinds)"
        );
    }
    // (The frame parser already refuses a payload_length over 64 KiB.)
    k
}

/// Upper bound of a VarBind's encoded size (OIDs counted without the prefix form).
fn vb_wire_len(vb: &(Vec<u32>, V)) -> usize {
    let pad = |n: usize| n.div_ceil(4) * 4;
    4 + 4
        + 4 * vb.0.len()
        + match &vb.1 {
            V::Int(_) | V::C32(_) | V::G32(_) | V::TT(_) => 4,
            V::C64(_) => 8,
            V::Str(b) | V::Opaque(b) => 4 + pad(b.len()),
            V::Ip(_) => 8,
            V::Oid(o) => 4 + 4 * o.len(),
            V::Null | V::NoSuchObject | V::NoSuchInstance | V::EndOfMibView => 0,
        }
}

// ---------------------------------------------------------------------------------------------
// The harness: a listening master and the daemon process
// ---------------------------------------------------------------------------------------------

#[derive(Debug, PartialEq, Eq)]
pub enum ReadErr {
    Timeout,
    Eof,
}

pub struct Conn {
    pub s: UnixStream,
    pub session: u32,
    next_packet: u32,
    next_txn: u32,
}

impl Conn {
    fn read_full(&mut self, buf: &mut [u8], deadline: Instant) -> Result<(), ReadErr> {
        let mut got = 0;
        while got < buf.len() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                assert_eq!(got, 0, "timed out in the middle of a frame");
                return Err(ReadErr::Timeout);
            }
            self.s.set_read_timeout(Some(left)).unwrap();
            match self.s.read(&mut buf[got..]) {
                Ok(0) => {
                    assert_eq!(got, 0, "the daemon closed in the middle of a frame");
                    return Err(ReadErr::Eof);
                }
                Ok(n) => got += n,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::ConnectionReset => return Err(ReadErr::Eof),
                Err(e) => panic!("read: {e}"),
            }
        }
        Ok(())
    }

    /// The next whole frame from the daemon (header rules checked).
    pub fn read_frame(&mut self, timeout: Duration) -> Result<Frame, ReadErr> {
        let deadline = Instant::now() + timeout;
        let mut hb = [0u8; 20];
        self.read_full(&mut hb, deadline)?;
        let h = parse_header(&hb);
        let mut raw = hb.to_vec();
        raw.resize(20 + h.plen as usize, 0);
        // The rest of a frame must follow promptly.
        let deadline = deadline.max(Instant::now() + Duration::from_secs(2));
        match self.read_full(&mut raw[20..], deadline) {
            Ok(()) => Ok(Frame { h, raw }),
            Err(e) => panic!("incomplete frame after header {h:?}: {e:?}"),
        }
    }

    pub fn frame(&mut self) -> Frame {
        self.read_frame(Duration::from_secs(3))
            .expect("no PDU from the daemon")
    }

    pub fn send_raw(&mut self, b: &[u8]) {
        self.s.write_all(b).unwrap();
    }

    /// Encodes a request with fresh packet and transaction IDs; returns the bytes and the IDs.
    pub fn encode(&mut self, payload: Payload) -> (Vec<u8>, u32, u32) {
        self.next_packet += 1;
        self.next_txn += 1;
        let mut b = Vec::new();
        Pdu::new(self.session, self.next_txn, self.next_packet, payload).encode(&mut b);
        (b, self.next_txn, self.next_packet)
    }

    pub fn packet_ids(&mut self) -> (u32, u32) {
        self.next_packet += 1;
        self.next_txn += 1;
        (self.next_txn, self.next_packet)
    }

    /// Reads a Response and checks that it echoes (session, txn, packet).
    pub fn response_for(&mut self, txn: u32, packet: u32) -> Resp {
        let f = self.frame();
        check_echo(&f, self.session, txn, packet);
        parse_response(&f)
    }

    pub fn request(&mut self, payload: Payload) -> Resp {
        let (b, txn, packet) = self.encode(payload);
        self.send_raw(&b);
        self.response_for(txn, packet)
    }

    pub fn getnext(&mut self, model: &Model, ranges: Vec<SearchRange>) -> Resp {
        let resp = self.request(Payload::GetNext {
            ranges: ranges.clone(),
        });
        check_getnext(model, &ranges, &resp);
        resp
    }

    pub fn get(&mut self, model: &Model, ranges: Vec<SearchRange>) -> Resp {
        let resp = self.request(Payload::Get {
            ranges: ranges.clone(),
        });
        check_get(model, &ranges, &resp);
        resp
    }

    pub fn getbulk(
        &mut self,
        model: &Model,
        non_repeaters: u16,
        max_repetitions: u16,
        ranges: Vec<SearchRange>,
    ) -> (Resp, usize) {
        let resp = self.request(Payload::GetBulk {
            non_repeaters,
            max_repetitions,
            ranges: ranges.clone(),
        });
        let k = check_getbulk(model, non_repeaters, max_repetitions, &ranges, &resp);
        (resp, k)
    }

    /// Nothing arrives within `d`.
    pub fn assert_silent(&mut self, d: Duration, why: &str) {
        match self.read_frame(d) {
            Err(ReadErr::Timeout) => {}
            Err(ReadErr::Eof) => panic!("{why}: the daemon closed the connection"),
            Ok(f) => panic!("{why}: unexpected PDU {:?}", f.h),
        }
    }

    /// The daemon closes this connection within `d` (PDUs before the close are returned).
    pub fn expect_eof(&mut self, d: Duration) -> Vec<Frame> {
        let deadline = Instant::now() + d;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.read_frame(left.max(Duration::from_millis(1))) {
                Err(ReadErr::Eof) => return seen,
                Err(ReadErr::Timeout) => panic!("the daemon kept the connection open: {seen:?}"),
                Ok(f) => seen.push(f),
            }
        }
    }

    /// Answers an administrative PDU from the daemon.
    pub fn answer(&mut self, to: &Header, session: u32, error: u16) {
        let mut b = Vec::new();
        Pdu::new(
            session,
            to.txn,
            to.packet,
            Payload::Response {
                sys_uptime: 4242,
                error: ResError(error),
                index: 0,
                varbinds: vec![],
            },
        )
        .encode(&mut b);
        self.send_raw(&b);
    }
}

pub fn check_echo(f: &Frame, session: u32, txn: u32, packet: u32) {
    assert_eq!(
        (f.h.session, f.h.txn, f.h.packet),
        (session, txn, packet),
        "a Response must echo sessionID, transactionID and packetID: {:?}",
        f.h
    );
}

pub struct Daemon {
    pub dir: tempfile::TempDir,
    pub child: Child,
    pub listener: UnixListener,
    pub fixture: PathBuf,
    pub model: Model,
    sessions: u32,
}

impl Daemon {
    pub fn start(extra: &[&str]) -> Daemon {
        let dir = tempfile::Builder::new().prefix("sm").tempdir().unwrap();
        let rows = fixture_rows();
        let fixture = dir.path().join("fixture.json");
        std::fs::write(&fixture, fixture_json(&rows)).unwrap();
        let config = dir.path().join("empty.toml");
        std::fs::write(&config, "").unwrap();
        let sock = dir.path().join("master");
        let listener = UnixListener::bind(&sock).unwrap();
        listener.set_nonblocking(true).unwrap();
        let log = std::fs::File::create(dir.path().join("daemon.log")).unwrap();
        let mut args: Vec<String> = vec![
            "run".into(),
            "--config".into(),
            config.display().to_string(),
            "--agentx-socket".into(),
            format!("unix:{}", sock.display()),
            "--source".into(),
            format!("fixture:{}", fixture.display()),
            "--state-dir".into(),
            dir.path().join("state").display().to_string(),
            "--log-level".into(),
            "debug".into(),
            "--log-target".into(),
            "stderr".into(),
            "--backoff-min".into(),
            "0.05".into(),
            "--backoff-max".into(),
            "0.2".into(),
        ];
        if !extra.contains(&"--ping-interval") {
            args.push("--ping-interval".into());
            args.push("0".into());
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        let child = Command::new(env!("CARGO_BIN_EXE_memstat-agentx"))
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let model = Model::new(&rows, &format!("fixture:{}", fixture.display()));
        Daemon {
            dir,
            child,
            listener,
            fixture,
            model,
            sessions: 0,
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("daemon.log")).unwrap_or_default()
    }

    pub fn assert_alive(&mut self) {
        if let Some(st) = self.child.try_wait().unwrap() {
            panic!("the daemon exited ({st}); log:\n{}", self.log());
        }
    }

    /// Waits for the daemon to connect.
    pub fn accept(&mut self, timeout: Duration) -> UnixStream {
        let deadline = Instant::now() + timeout;
        loop {
            match self.listener.accept() {
                Ok((s, _)) => {
                    s.set_nonblocking(false).unwrap();
                    return s;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    self.assert_alive();
                    assert!(
                        Instant::now() < deadline,
                        "the daemon did not connect within {timeout:?}; log:\n{}",
                        self.log()
                    );
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => panic!("accept: {e}"),
            }
        }
    }

    /// Accepts a connection and plays OpenBSD's side of Open, Register and AddAgentCaps.
    pub fn connect(&mut self, timeout: Duration) -> Conn {
        let s = self.accept(timeout);
        self.sessions += 1;
        let session = 0x5e55_0000 + self.sessions;
        let mut c = Conn {
            s,
            session,
            next_packet: 0x7000_0000,
            next_txn: 0x100 * self.sessions,
        };
        // Open (RFC 2741 §6.2.1): sessionID 0, a short valid descr, an o.id that OpenBSD accepts.
        let f = c.frame();
        assert_eq!(f.h.ty, T_OPEN, "first PDU must be Open: {:?}", f.h);
        assert_eq!(f.h.flags, F_NBO, "Open flags: {:?}", f.h);
        assert_eq!(f.h.session, 0, "Open must carry sessionID 0");
        let mut p = Cur::new(f.payload(), "Open");
        let _timeout = p.u8();
        assert_eq!([p.u8(), p.u8(), p.u8()], [0, 0, 0], "Open reserved bytes");
        let (id, include) = p.oid();
        assert_eq!(include, 0);
        assert_ne!(id.len(), 1, "OpenBSD refuses an o.id of one sub-identifier");
        let descr = p.octets();
        p.finish();
        assert!(descr.len() <= 255, "o.descr over 255 octets");
        assert!(!descr.contains(&0), "o.descr contains NUL");
        assert!(std::str::from_utf8(&descr).is_ok(), "o.descr not UTF-8");
        c.answer(&f.h, session, E_NO_ERROR);

        // Register: one plain subtree at priority 127, default context, no range.
        let f = c.frame();
        assert_eq!(f.h.ty, T_REGISTER, "second PDU must be Register: {:?}", f.h);
        assert_eq!(
            f.h.session, session,
            "Register must use the assigned sessionID"
        );
        assert_eq!(
            f.h.flags & F_NON_DEFAULT_CONTEXT,
            0,
            "Register must use the default context"
        );
        assert_eq!(
            f.h.flags & F_INSTANCE_REGISTRATION,
            0,
            "not an instance registration"
        );
        assert_eq!(f.h.flags, F_NBO);
        let mut p = Cur::new(f.payload(), "Register");
        let _timeout = p.u8();
        assert_eq!(p.u8(), 127, "r.priority");
        assert_eq!(p.u8(), 0, "r.range_subid");
        assert_eq!(p.u8(), 0, "Register reserved byte");
        let (subtree, include) = p.oid();
        assert_eq!(include, 0);
        assert_eq!(subtree, ROOT, "r.subtree");
        p.finish();
        c.answer(&f.h, session, E_NO_ERROR);

        // AddAgentCaps: OpenBSD answers processingError; the daemon must carry on.
        let f = c.frame();
        assert_eq!(f.h.ty, T_ADD_AGENT_CAPS, "third PDU: {:?}", f.h);
        assert_eq!(f.h.session, session);
        assert_eq!(f.h.flags, F_NBO);
        let mut p = Cur::new(f.payload(), "AddAgentCaps");
        let (id, _) = p.oid();
        assert!(!id.is_empty(), "AddAgentCaps with a null OID");
        let _descr = p.octets();
        p.finish();
        c.answer(&f.h, session, E_PROCESSING_ERROR);
        c
    }

    pub fn sigterm(&self) {
        // SAFETY: sending a signal to our own child process.
        let rc = unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        assert_eq!(rc, 0);
    }

    /// Waits for the daemon to exit.
    pub fn wait_exit(&mut self, timeout: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st;
            }
            assert!(
                Instant::now() < deadline,
                "the daemon did not exit within {timeout:?}; log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let log = self.log();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            eprintln!("--- daemon log (last 40 lines) ---");
            for l in tail.iter().rev() {
                eprintln!("{l}");
            }
        }
    }
}
