//! The test rig of the agent's tests: the agent answering whole request streams on a clock
//! the test controls, with a source whose every figure encodes the snapshot it was read
//! into, so an answer that mixes snapshots shows. `tests.rs` and the contract's model check
//! (`contract_tests.rs`) both drive it.

use super::*;
use crate::memstat::{Allocator, MemoryType};
use crate::mib::MEMSTAT_MIB_ROOT;
use agentx_proto::pdu::{Payload, Pdu};

pub(super) const ROWS: u32 = 40;

/// The columns the kernel fills with an encoded figure: memTypeSize, memTypeInUseCount and
/// memTypeAllocs.
pub(super) const STAMPED_COLUMNS: [u32; 3] = [5, 9, 13];

/// A source that moves on to a new generation whenever the test says so.
pub(super) struct Kernel {
    /// The figures' generation, set by the test.
    pub(super) gen: u64,
    /// Reads so far, failed ones included.
    pub(super) reads: u64,
    pub(super) rows: u32,
    /// Every good read stamps its figures with its own number (1, 2, …) instead of `gen`,
    /// so that a figure names the read it came from; `log` says when that was.
    pub(super) stamp_reads: bool,
    /// Good reads in order: when, and the generation they saw.
    pub(super) log: Vec<(Instant, u64)>,
    /// While set, every read fails.
    pub(super) failing: bool,
}

impl Kernel {
    pub(super) fn new(rows: u32) -> Kernel {
        Kernel {
            gen: 1,
            reads: 0,
            rows,
            stamp_reads: false,
            log: Vec::new(),
            failing: false,
        }
    }

    pub(super) fn types(&mut self) -> Result<Vec<MemoryType>, SourceError> {
        self.read_at(None)
    }

    /// A read at `now` (logged when the reads are stamped).
    pub(super) fn read_at(&mut self, now: Option<Instant>) -> Result<Vec<MemoryType>, SourceError> {
        self.reads += 1;
        if self.failing {
            return Err(SourceError::Unavailable {
                message: "the kernel is failing".into(),
            });
        }
        let stamp = if self.stamp_reads {
            self.log
                .push((now.expect("a stamped read has a time"), self.gen));
            self.log.len() as u64
        } else {
            self.gen
        };
        Ok((0..self.rows)
            .map(|i| {
                let mut t = MemoryType::new(Allocator::Uma, format!("zone{i}"));
                t.size = Some(stamp * 1000 + u64::from(i));
                t.in_use_count = Some(stamp * 1000 + u64::from(i));
                t.allocs = Some(stamp * 1000 + u64::from(i));
                t
            })
            .collect())
    }
}

/// The generation (or read, with stamped reads) a counter value was read at.
pub(super) fn gen_of(v: &Value) -> Option<u64> {
    match v {
        Value::Counter64(n) => Some(n / 1000),
        _ => None,
    }
}

pub(super) struct Rig {
    pub(super) agent: Agent,
    pub(super) kernel: Kernel,
    pub(super) t0: Instant,
    pub(super) now: Instant,
    pub(super) txn: u32,
    pub(super) out: Vec<u8>,
}

pub(super) fn col(c: u32, row: Option<u32>) -> Oid {
    let mut v = MEMSTAT_MIB_ROOT.to_vec();
    v.extend_from_slice(&[1, 2, 1, c]);
    v.extend(row);
    Oid(v)
}

pub(super) fn range(start: Oid) -> SearchRange {
    SearchRange {
        start,
        include: false,
        end: Oid::null(),
    }
}

pub(super) fn type_table() -> Oid {
    Oid(col(2, None).0[..MEMSTAT_MIB_ROOT.len() + 2].to_vec())
}

impl Rig {
    pub(super) fn new(max_age_ms: u64, window_ms: u64) -> Rig {
        Rig::with(
            Duration::from_millis(max_age_ms),
            Duration::from_millis(window_ms),
            Kernel::new(ROWS),
        )
    }

    pub(super) fn with(max_age: Duration, walk_window: Duration, kernel: Kernel) -> Rig {
        let t0 = Instant::now();
        let settings = AgentSettings {
            notify: super::WatchSettings::defaults(),
            sites: super::SiteSettings::default(),
            max_age,
            walk_window,
        };
        Rig {
            agent: Agent::new(&["test".into()], TypeIndexes::in_memory(), settings, t0),
            kernel,
            t0,
            now: t0,
            txn: 0,
            out: Vec::new(),
        }
    }

    pub(super) fn advance(&mut self, ms: u64) {
        self.now += Duration::from_millis(ms);
    }

    pub(super) fn at_ms(&self) -> u64 {
        self.now.duration_since(self.t0).as_millis() as u64
    }

    pub(super) fn tick_now(&mut self) {
        self.agent.tick(self.now);
    }

    pub(super) fn ask(&mut self, payload: Payload) -> Vec<(Oid, Value)> {
        self.txn += 1;
        self.ask_in(self.txn, payload)
    }

    /// Asks as part of SNMP request (AgentX transaction) `txn`.
    pub(super) fn ask_in(&mut self, txn: u32, payload: Payload) -> Vec<(Oid, Value)> {
        let pdu = Pdu::with_ids(
            HeaderIds {
                session_id: 1,
                transaction_id: txn,
                packet_id: txn,
            },
            payload,
        );
        let kernel = &mut self.kernel;
        let now = self.now;
        let replied = self
            .agent
            .answer_blocking(&pdu, now, &mut self.out, &mut || kernel.read_at(Some(now)));
        assert!(replied);
        assert!(self.agent.live_views() <= walks::MAX_LIVE_VIEWS);
        match Pdu::decode(&self.out).unwrap().payload {
            Payload::Response { varbinds, .. } => {
                varbinds.into_iter().map(|vb| (vb.name, vb.value)).collect()
            }
            p => panic!("not a Response: {p:?}"),
        }
    }

    pub(super) fn get_next(&mut self, from: &Oid) -> (Oid, Value) {
        self.ask(Payload::GetNext {
            ranges: vec![range(from.clone())],
        })
        .remove(0)
    }

    pub(super) fn get_bulk(&mut self, from: &Oid, reps: u16) -> Vec<(Oid, Value)> {
        self.ask(Payload::GetBulk {
            non_repeaters: 0,
            max_repetitions: reps,
            ranges: vec![range(from.clone())],
        })
    }

    pub(super) fn get(&mut self, oid: &Oid) -> Value {
        self.ask(Payload::Get {
            ranges: vec![range(oid.clone())],
        })
        .remove(0)
        .1
    }

    /// net-snmp's way of serving an SNMP GetBulk: one GetNext per repetition, all with the
    /// transactionID of the SNMP request.
    pub(super) fn bulk_as_getnexts(&mut self, from: &Oid, reps: u32) -> Vec<(Oid, Value)> {
        self.txn += 1;
        let txn = self.txn;
        let mut cur = from.clone();
        let mut got = Vec::new();
        for _ in 0..reps {
            let (o, v) = self
                .ask_in(
                    txn,
                    Payload::GetNext {
                        ranges: vec![range(cur.clone())],
                    },
                )
                .remove(0);
            if v == Value::EndOfMibView {
                break;
            }
            cur = o.clone();
            got.push((o, v));
        }
        got
    }
}

pub(super) fn gens(vbs: &[(Oid, Value)]) -> Vec<u64> {
    let mut g: Vec<u64> = vbs.iter().filter_map(|(_, v)| gen_of(v)).collect();
    g.sort_unstable();
    g.dedup();
    g
}
