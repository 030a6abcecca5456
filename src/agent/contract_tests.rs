//! The walk contract of ARCHITECTURE.md ("The contract: one snapshot per walk"), checked
//! against a reference model on random traces.
//!
//! The reference is written from the contract's words, not from the agent: it knows only
//! what the trace did (who asked what, when, and what the kernel held) and what came back.
//! Every figure the kernel hands out names the read it came from (`Kernel::stamp_reads`),
//! so the model sees which snapshot answered each request and how old it was. Managers
//! probe, walk with GetNext, with GetBulk of any max-repetitions, or as net-snmp forwards a
//! GetBulk (one GetNext per repetition, one transactionID); they pause, resume, re-send
//! lost requests and send lone Gets and GetNexts; the source moves on and fails. After
//! every Response each clause is checked:
//!
//! - **consistency**: a walk shorter than the walk-window sees one snapshot. A walk that
//!   mixes is counted, not failed, only in the two cases the contract names: it paused for
//!   more than the grace (2 s), or another walk on another snapshot waited at the very OID
//!   it continued from (the residual case);
//! - **freshness**: a new walk or a Get sees figures no older than max-age when no walk
//!   asked anything in the quiet window, and no older than F = max(A, W − A) otherwise;
//! - **staleness**: after max-age + walk-window with no request, no old figure; and no
//!   snapshot serves anything once a walk-window has passed since a request that wanted
//!   newer figures than it had;
//! - **memory**: at most three snapshots alive (the rig checks it after every request);
//! - **a failing source**: marked stale(2) within F, and read at most once per max-age.
//!
//! A failure names its seed; `MEMSTAT_MODEL_SEED=N cargo test --lib contract_` replays it,
//! and `MEMSTAT_MODEL_TRACES=N` runs N traces per test instead of the default.

use super::rig::*;
use super::*;
use crate::mib::MEMSTAT_MIB_ROOT;
use agentx_proto::pdu::Payload;

/// The contract's figures, from its words in ARCHITECTURE.md.
#[derive(Clone, Copy, Debug)]
struct Contract {
    /// max-age.
    a: Duration,
    /// walk-window.
    w: Duration,
    /// F = max(A, W − A): how old a new walk's figures may be while others walk.
    f: Duration,
    /// "No walk asked anything in the last A, counted as at least 0.1 s and at most 1 s."
    quiet: Duration,
    /// A walk that pauses longer than this may lose its snapshot while all three are in use.
    grace: Duration,
}

impl Contract {
    fn new(a: Duration, w: Duration) -> Contract {
        Contract {
            a,
            w,
            f: a.max(w.saturating_sub(a)),
            quiet: a.clamp(Duration::from_millis(100), Duration::from_secs(1)),
            grace: Duration::from_secs(2),
        }
    }
}

/// What the model counts over a run: the checks made (so that none is vacuous) and the
/// mixed walks the contract allows.
#[derive(Clone, Copy, Debug, Default)]
struct Tally {
    traces: u64,
    requests: u64,
    walks: u64,
    fresh_quiet: u64,
    fresh_busy: u64,
    /// Quiet new walks that got figures older than max-age (no older than F) while three
    /// snapshots were held: the residual case of freshness.
    fresh_held: u64,
    stale_quiet: u64,
    stale_retired: u64,
    failing: u64,
    mixed_residual: u64,
    mixed_paused: u64,
    mixed_long: u64,
    /// Distinct snapshots walks started on: more than one means walks straddled refreshes.
    snapshots_walked: u64,
}

impl Tally {
    fn add(&mut self, o: &Tally) {
        self.traces += o.traces;
        self.requests += o.requests;
        self.walks += o.walks;
        self.fresh_quiet += o.fresh_quiet;
        self.fresh_busy += o.fresh_busy;
        self.fresh_held += o.fresh_held;
        self.stale_quiet += o.stale_quiet;
        self.stale_retired += o.stale_retired;
        self.failing += o.failing;
        self.mixed_residual += o.mixed_residual;
        self.mixed_paused += o.mixed_paused;
        self.mixed_long += o.mixed_long;
        self.snapshots_walked += o.snapshots_walked;
    }
}

/// xorshift64*: small, seeded, reproducible.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
    /// Log-uniform between `lo` and `hi`: pauses of every scale.
    fn log_between(&mut self, lo: Duration, hi: Duration) -> Duration {
        let (l, h) = (
            lo.as_secs_f64().max(1e-6).ln(),
            hi.as_secs_f64().max(1e-6).ln(),
        );
        let x = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        Duration::from_secs_f64((l + (h - l) * x).exp())
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
}

/// How a walker asks.
#[derive(Clone, Copy, Debug)]
enum How {
    GetNext,
    /// AgentX GetBulk with these max-repetitions.
    Bulk(u16),
    /// An SNMP GetBulk as net-snmp forwards it: one GetNext per repetition, one transaction.
    NetSnmp(u16),
}

#[derive(Clone, Copy, Debug)]
enum Role {
    Walker {
        how: How,
        /// memTypeTable, or one column.
        column: Option<u32>,
        /// Each walk comes after a probe (a GetNext of memTypeTable) and a pause.
        probes: bool,
    },
    /// Lone Gets and GetNexts of random cells, and of memSourceStatus.
    Client,
}

#[derive(Clone, Copy, Debug)]
struct Behaviour {
    role: Role,
    /// Time from a Response to the next request.
    turnaround: Duration,
    /// Chance, per request, of a pause before it, and of losing its answer (re-sent).
    pause: f64,
    resend: f64,
}

/// What one request of a walker came to.
enum Step {
    Going,
    Done,
    /// Its answer was lost: the same request goes again.
    Lost,
}

/// A walk as the model sees it.
#[derive(Clone, Debug)]
struct Walk {
    id: u64,
    started: Instant,
    /// Its last request, and its last request the manager saw answered: where it waits
    /// from (a lost answer does not move it).
    last: Instant,
    parked: Instant,
    /// The snapshot its first answer came from.
    snapshot: Option<u64>,
    /// The snapshot its last answer came from (its first, unless it mixed).
    on: Option<u64>,
    longest_pause: Duration,
    /// Where it continues from.
    at: Oid,
    /// The last OID it was given (past its subtree at the end).
    last_given: Option<Oid>,
    /// Its last request's answer was lost: this one is sent again.
    resending: bool,
    subtree: Oid,
    /// Set once the walk mixed snapshots (it is counted once).
    mixed: bool,
}

/// A place where a walk waits, as the contract counts them: the walk's last answer until it
/// asks again, a finished walk's last answer for a walk-window (nothing tells it from a
/// paused one), and the answer of a request that started where a walk waited (it "takes
/// that walk off", so it parks in its stead).
#[derive(Clone, Debug)]
struct Park {
    oid: Oid,
    /// None: its answer carried no figure (a probe's memTypeName.1).
    snapshot: Option<u64>,
    at: Instant,
    walk: u64,
    /// In the history: when the walk went on from there (None: it has not).
    left: Option<Instant>,
}

/// When a snapshot last answered a request that parks (a walk's, a probe's, a stand-in's),
/// and a lone GetNext (which leaves a mark).
#[derive(Clone, Copy, Debug, Default)]
struct Served {
    park: Option<Instant>,
    mark: Option<Instant>,
}

/// What the model knows just before a request goes out.
#[derive(Clone, Copy, Debug)]
struct Before {
    /// No GetNext or GetBulk in the quiet window.
    quiet: bool,
    /// Since the last request of any kind.
    gap: Duration,
}

struct Manager {
    b: Behaviour,
    next: Instant,
    walk: Option<Walk>,
    /// A probe was answered; the walk follows after the pause.
    probed: bool,
}

/// One trace's shape, drawn from its seed.
#[derive(Clone, Copy, Debug)]
enum Family {
    /// Any mix of managers, settings and faults.
    Mixed,
    /// The load: walkers of different max-repetitions beside random clients, a
    /// source that changes every 0.1 s, default max-age.
    Crowd {
        walkers: usize,
        clients: usize,
        max_age_ms: u64,
    },
}

struct Model {
    c: Contract,
    rng: Rng,
    seed: u64,
    rig: Rig,
    tally: Tally,
    managers: Vec<Manager>,
    parks: std::collections::HashMap<Oid, Vec<Park>>,
    /// Where walks went on from, and when last: a lone request that starts there within
    /// the in-progress window is the walk itself (its park was taken), and within the
    /// resend window it is answered from that walk's snapshot and parks nothing.
    /// Per OID, per snapshot (a mark on one view leaves the others alone).
    went_on: std::collections::HashMap<Oid, Vec<(u64, Instant)>>,
    /// Every place a walk (or a stand-in) stopped within a walk-window, by OID, continued
    /// or not: two walks on different snapshots that waited at one OID at the same time
    /// are the residual case even after one of them went on (they may cross over).
    history: std::collections::HashMap<Oid, Vec<Park>>,
    /// The table's instances, from a walk of it at the start: a GetNext that starts
    /// anywhere else is a new walk, not a lone request.
    instances: std::collections::HashSet<Oid>,
    /// Per snapshot: when it last answered anything, and a GetNext or GetBulk.
    served: std::collections::HashMap<u64, Served>,
    walked_on: std::collections::HashSet<u64>,
    /// Walks whose place a lone GetNext took while they waited: the contract counts such a
    /// walk as the second walk of the residual case when it comes back.
    stolen: std::collections::HashSet<u64>,
    next_walk: u64,
    /// The last request of any kind, and the last GetNext or GetBulk.
    last_request: Option<Instant>,
    last_walk_request: Option<Instant>,
    /// When requests that want the newest figures (new walks, Gets) were answered.
    wanting_newest: Vec<Instant>,
    /// The kernel's failures: from, to (None: still failing), reads during it.
    failures: Vec<(Instant, Option<Instant>, u64)>,
    next_change: Instant,
    change_every: Duration,
    next_fault: Instant,
    fault_every: Option<Duration>,
    end: Instant,
    max_requests: u64,
}

const STATUS: [u32; 4] = [1, 1, 8, 0];
/// "A re-sent request comes within the manager's retry budget": net-snmp's tools, 1 s × 5
/// retries, and a little more.
const RESEND_WINDOW: Duration = Duration::from_secs(6);
/// A trace ends after this many requests, or at its length, whichever comes first.
const MAX_REQUESTS: u64 = 1_000;

fn violation(seed: u64, what: &str) -> ! {
    panic!("seed {seed}: {what} (replay: MEMSTAT_MODEL_SEED={seed} cargo test --lib contract_)")
}

impl Model {
    fn violation(&self, what: &str) -> ! {
        violation(
            self.seed,
            &format!("{what}; max-age {:?}, walk-window {:?}", self.c.a, self.c.w),
        )
    }
}

impl Model {
    fn new(seed: u64, family: Family) -> Model {
        let mut rng = Rng::new(seed);
        let ms = Duration::from_millis;
        let (a, w, rows, behaviours, change_every, fault_every, length) = match family {
            Family::Mixed => {
                let a = rng.pick(&[0, 5, 10, 100, 500, 1_000, 5_000]);
                let w = rng.pick(&[300, 1_000, 3_000, 10_000, 30_000]).max(a * 2);
                let n = 1 + rng.below(6) as usize;
                let b: Vec<Behaviour> = (0..n).map(|_| random_behaviour(&mut rng)).collect();
                let change = rng.log_between(ms(1), ms(3 * a.max(10)));
                let fault = rng.chance(0.3).then(|| rng.log_between(ms(50), ms(3 * w)));
                let length = ms(w * (2 + rng.below(4)));
                (
                    ms(a),
                    ms(w),
                    2 + rng.below(5) as u32,
                    b,
                    change,
                    fault,
                    length,
                )
            }
            Family::Crowd {
                walkers,
                clients,
                max_age_ms,
            } => {
                // At the default max-age, refreshes while walks go on come every 25 s: the
                // managers are slower so that a bounded trace spans several.
                let slow = if max_age_ms >= 1_000 { 10 } else { 1 };
                let mut b: Vec<Behaviour> = (0..walkers)
                    .map(|i| Behaviour {
                        role: Role::Walker {
                            // Each its own max-repetitions, as snmpbulkwalk -Cr pollers
                            // are configured; net-snmp forwards most as GetNexts.
                            how: {
                                let reps = 5 + 3 * i as u16;
                                if i % 3 == 2 {
                                    How::Bulk(reps)
                                } else {
                                    How::NetSnmp(reps)
                                }
                            },
                            column: None,
                            probes: false,
                        },
                        turnaround: rng.log_between(ms(slow), ms(10 * slow)),
                        pause: 0.0,
                        resend: 0.0,
                    })
                    .collect();
                b.extend((0..clients).map(|_| Behaviour {
                    role: Role::Client,
                    turnaround: rng.log_between(ms(2 * slow), ms(20 * slow)),
                    pause: 0.0,
                    resend: 0.0,
                }));
                let w = if max_age_ms >= 1_000 { 30_000 } else { 5_000 };
                (ms(max_age_ms), ms(w), 100, b, ms(100), None, ms(120_000))
            }
        };
        let mut kernel = Kernel::new(rows);
        kernel.stamp_reads = true;
        let rig = Rig::with(a, w, kernel);
        let t0 = rig.now;
        let managers = behaviours
            .into_iter()
            .map(|b| Manager {
                next: t0 + rng.log_between(Duration::from_micros(10), ms(200)),
                b,
                walk: None,
                probed: false,
            })
            .collect();
        Model {
            c: Contract::new(a, w),
            seed,
            tally: Tally {
                traces: 1,
                ..Tally::default()
            },
            rig,
            managers,
            parks: std::collections::HashMap::new(),
            went_on: std::collections::HashMap::new(),
            served: std::collections::HashMap::new(),
            walked_on: std::collections::HashSet::new(),
            stolen: std::collections::HashSet::new(),
            instances: instances(rows),
            history: std::collections::HashMap::new(),
            next_walk: 0,
            last_request: None,
            last_walk_request: None,
            wanting_newest: Vec::new(),
            failures: Vec::new(),
            next_change: t0 + change_every,
            change_every,
            next_fault: t0 + fault_every.unwrap_or(Duration::ZERO),
            fault_every,
            end: t0 + length,
            max_requests: match family {
                Family::Mixed => MAX_REQUESTS,
                Family::Crowd { walkers, .. } => (5 * walkers as u64).max(40) * MAX_REQUESTS,
            },
            rng,
        }
    }

    fn run(mut self) -> Tally {
        loop {
            let (k, at) = self
                .managers
                .iter()
                .enumerate()
                .map(|(k, m)| (k, m.next))
                .min_by_key(|(_, t)| *t)
                .expect("a manager");
            if at >= self.end || self.tally.requests >= self.max_requests {
                break;
            }
            self.kernel_until(at);
            self.rig.now = at;
            if self.rig.agent.next_tick().is_some_and(|t| t <= at) {
                self.rig.agent.tick(at);
            }
            self.step(k);
        }
        self.tally
    }

    /// The kernel's own life up to `at`: new figures, failures and recoveries.
    fn kernel_until(&mut self, at: Instant) {
        while self.next_change <= at {
            self.rig.kernel.gen += 1;
            let every = self.change_every;
            self.next_change += self.rng.log_between(every / 4, every * 2);
        }
        if let Some(every) = self.fault_every {
            while self.next_fault <= at {
                let t = self.next_fault;
                if self.rig.kernel.failing {
                    self.rig.kernel.failing = false;
                    let (from, to, reads) = self.failures.last_mut().expect("a failure");
                    *to = Some(t);
                    let (from, reads) = (*from, self.rig.kernel.reads - *reads);
                    self.check_retries(from, t, reads);
                } else {
                    self.rig.kernel.failing = true;
                    self.failures.push((t, None, self.rig.kernel.reads));
                }
                self.next_fault += self.rng.log_between(every / 4, every * 2);
            }
        }
    }

    fn step(&mut self, k: usize) {
        let b = self.managers[k].b;
        let now = self.rig.now;
        let mut wait = self.rng.log_between(b.turnaround / 2, b.turnaround * 2);
        match b.role {
            Role::Client => self.lone(),
            Role::Walker {
                how,
                column,
                probes,
            } => {
                if self.managers[k].walk.is_none() && probes && !self.managers[k].probed {
                    self.probe();
                    self.managers[k].probed = true;
                    wait = self.rng.log_between(Duration::from_millis(1), self.c.w * 2);
                } else {
                    let step = self.walk_step(k, how, column, b.resend);
                    if matches!(step, Step::Lost) {
                        // net-snmp's tools wait 1 s; other managers less.
                        wait = self
                            .rng
                            .log_between(Duration::from_millis(1), Duration::from_secs(1));
                    } else if matches!(step, Step::Done) {
                        self.managers[k].probed = false;
                        wait = if self.rng.chance(0.5) {
                            wait
                        } else {
                            self.rng.log_between(Duration::from_millis(1), self.c.w * 3)
                        };
                    } else if self.rng.chance(b.pause) {
                        wait = self
                            .rng
                            .log_between(Duration::from_millis(1), self.c.w * 13 / 10);
                    }
                }
            }
        }
        self.managers[k].next = now + wait.max(Duration::from_micros(1));
    }

    // --- what the managers send ---------------------------------------------------------

    fn send(&mut self, txn: u32, payload: Payload) -> Vec<(Oid, Value)> {
        let now = self.rig.now;
        let walks = !matches!(payload, Payload::Get { .. });
        let got = self.rig.ask_in(txn, payload);
        self.tally.requests += 1;
        self.last_request = Some(now);
        if walks {
            self.last_walk_request = Some(now);
        }
        got
    }

    fn new_txn(&mut self) -> u32 {
        self.rig.txn += 1;
        self.rig.txn
    }

    /// The probe before a walk: one GetNext of memTypeTable. It is a walk of one step that
    /// ends there, so its answer waits like any finished walk's.
    fn probe(&mut self) {
        self.probe_at(type_table(), "a probe");
    }

    /// A walk of one GetNext from `start`, which is no instance.
    fn probe_at(&mut self, start: Oid, what: &str) {
        let id = self.walk_id();
        let before = self.before();
        let txn = self.new_txn();
        let got = self.send(
            txn,
            Payload::GetNext {
                ranges: vec![range(start)],
            },
        );
        let now = self.rig.now;
        let s = self.one_snapshot(&got, before, what);
        if let Some(s) = s {
            self.parked_on(s, now);
            self.check_new(s, before, now, what);
        }
        self.wanted_newest(now);
        if let Some((oid, _)) = got.first() {
            self.stopped(&oid.clone(), s, id);
            self.wait(Park {
                oid: oid.clone(),
                snapshot: s,
                at: now,
                walk: id,
                left: None,
            });
        }
    }

    /// A lone Get or GetNext of a random cell, or a Get of memSourceStatus.
    fn lone(&mut self) {
        let rows = u64::from(self.rig.kernel.rows);
        let row = 1 + self.rng.below(rows + 1) as u32;
        let c = 2 + self.rng.below(23) as u32;
        let oid = col(c, Some(row));
        let before = self.before();
        let txn = self.new_txn();
        match self.rng.below(5) {
            0 => drop(self.status()),
            1 | 2 => {
                let got = self.send(
                    txn,
                    Payload::Get {
                        ranges: vec![range(oid)],
                    },
                );
                if let Some(s) = self.one_snapshot(&got, before, "a Get") {
                    self.check_new(s, before, self.rig.now, "a Get");
                }
                self.wanted_newest(self.rig.now);
            }
            _ if !self.instances.contains(&oid) => self.probe_at(oid, "a GetNext of no instance"),
            _ => {
                let waiting = self.waiting_at(&oid, None).into_iter().next();
                let now = self.rig.now;
                let went_on = self.went_on.get(&oid).and_then(|v| {
                    v.iter()
                        .map(|(_, t)| now.saturating_duration_since(*t))
                        .min()
                });
                let just_now = went_on.is_some_and(|d| d < self.c.quiet);
                let went_by = went_on.is_some_and(|d| d < RESEND_WINDOW.min(self.c.w));
                let got = self.send(
                    txn,
                    Payload::GetNext {
                        ranges: vec![range(oid.clone())],
                    },
                );
                let s = self.one_snapshot(&got, before, "a lone GetNext");
                let stands_in = waiting.is_some() || just_now;
                if let Some(s) = s {
                    let now = self.rig.now;
                    if stands_in {
                        self.parked_on(s, now);
                    } else {
                        self.served.entry(s).or_default().mark = Some(now);
                    }
                }
                match (stands_in, s, got.first()) {
                    // It started where a walk waits, or went by: it continues that walk (it
                    // takes it off), and waits in its stead (the walk itself is still there,
                    // as far as the model knows).
                    (true, s, Some((next, _))) => {
                        if let Some(p) = &waiting {
                            self.stolen.insert(p.walk);
                        }
                        if let Some(s) = s {
                            self.went_on_at(&oid, s, now);
                        }
                        let walk = self.walk_id();
                        self.stopped(&next.clone(), s, walk);
                        self.wait(Park {
                            oid: next.clone(),
                            snapshot: s,
                            at: self.rig.now,
                            walk,
                            left: None,
                        });
                    }
                    (false, s, next) => {
                        // Where a walk went by earlier, it leaves where it stopped as a
                        // place a walk went by; elsewhere a mark, which is no walk's and
                        // leaves a place a walk went by as it is.
                        if let (Some((next, _)), Some(s), true) = (next, s, went_by) {
                            let next = next.clone();
                            self.went_on_at(&next, s, now);
                        }
                        if !went_by {
                            if let Some(s) = s {
                                self.check_new(s, before, now, "a lone GetNext");
                            }
                            self.wanted_newest(now);
                        }
                    }
                    _ => {}
                }
            }
        }
    }

    /// One SNMP request of walker `k`.
    fn walk_step(&mut self, k: usize, how: How, column: Option<u32>, resend: f64) -> Step {
        let now = self.rig.now;
        if self.managers[k].walk.is_none() {
            let subtree = match column {
                Some(c) => col(c, None),
                None => type_table(),
            };
            let id = self.walk_id();
            self.tally.walks += 1;
            self.managers[k].walk = Some(Walk {
                id,
                started: now,
                last: now,
                parked: now,
                snapshot: None,
                on: None,
                longest_pause: Duration::ZERO,
                at: subtree.clone(),
                last_given: None,
                resending: false,
                subtree,
                mixed: false,
            });
        }
        let mut walk = self.managers[k].walk.take().expect("a walk");
        // A lost answer: the manager sends the same request again after its timeout.
        if self.rng.chance(resend) {
            self.request(&mut walk, how, false);
            walk.resending = true;
            self.managers[k].walk = Some(walk);
            return Step::Lost;
        }
        let done = self.request(&mut walk, how, true);
        if done {
            // The last answer waits there like a paused walk's, for a walk-window.
            if let Some(oid) = walk.last_given.clone() {
                self.wait(Park {
                    oid,
                    snapshot: walk.on,
                    at: self.rig.now,
                    walk: walk.id,
                    left: None,
                });
            }
        } else {
            self.managers[k].walk = Some(walk);
        }
        if done {
            Step::Done
        } else {
            Step::Going
        }
    }

    /// One SNMP request of `walk`: its PDUs, checked as they are answered. `sees`: the
    /// manager gets the answer (otherwise it is lost and re-sent).
    fn request(&mut self, walk: &mut Walk, how: How, sees: bool) -> bool {
        let txn = self.new_txn();
        let mut at = walk.at.clone();
        let (pdus, reps) = match how {
            How::GetNext => (1, 1),
            How::Bulk(r) => (1, r),
            How::NetSnmp(r) => (u32::from(r), 1),
        };
        let mut done = false;
        for _ in 0..pdus {
            let before = self.before();
            let now = self.rig.now;
            let parked_at = walk.last;
            let pause = now.saturating_duration_since(parked_at);
            walk.longest_pause = walk.longest_pause.max(pause);
            // The residual case, as the contract names it: another walk on another snapshot
            // waits where this one continues from.
            let stolen = sees && self.stolen.remove(&walk.id);
            let residual = stolen
                || walk
                    .on
                    .is_some_and(|s| self.residual(&at, s, walk.id, walk.parked));
            let payload = if reps == 1 {
                Payload::GetNext {
                    ranges: vec![range(at.clone())],
                }
            } else {
                Payload::GetBulk {
                    non_repeaters: 0,
                    max_repetitions: reps,
                    ranges: vec![range(at.clone())],
                }
            };
            let got = self.send(txn, payload);
            if sees {
                self.leaving(&at, walk.id, now);
            }
            let s = self.one_snapshot(&got, before, "a walk's request");
            if let Some(s) = s {
                self.went_on_at(&at, s, now);
            }
            if let Some(s) = s {
                self.parked_on(s, now);
            }
            walk.last = now;
            if sees {
                walk.parked = now;
            }
            if let (Some(on), Some(s)) = (walk.on, s) {
                if on != s && sees {
                    // It went on from another walk's park: its own waits on where it was,
                    // as a walk's that never comes back.
                    let ghost = self.walk_id();
                    self.wait(Park {
                        oid: at.clone(),
                        snapshot: Some(on),
                        at: parked_at,
                        walk: ghost,
                        left: None,
                    });
                }
            }
            if sees && s.is_some() {
                walk.on = s;
            }
            match (walk.snapshot, s) {
                (None, Some(s)) => {
                    self.check_new(s, before, now, "a new walk");
                    self.wanted_newest(now);
                    if sees {
                        walk.snapshot = Some(s);
                        if self.walked_on.insert(s) {
                            self.tally.snapshots_walked += 1;
                        }
                    }
                }
                (Some(mine), Some(s)) if mine != s && sees && !walk.mixed => {
                    walk.mixed = true;

                    let took = now.saturating_duration_since(walk.started);
                    if took > self.c.w {
                        self.tally.mixed_long += 1;
                    } else if walk.longest_pause > self.c.grace {
                        self.tally.mixed_paused += 1;
                    } else if residual {
                        self.tally.mixed_residual += 1;
                    } else {
                        self.violation(&format!(
                            "consistency: a walk of {took:?} (longest pause {:?}) on read \
                                 {mine} was answered from read {s} at {at}, with no other walk \
                                 on another snapshot waiting there ({:?})",
                            walk.longest_pause,
                            self.rig.agent.walk_stats()
                        ));
                    }
                }
                _ => {}
            }
            if !sees {
                // Nobody continues from a lost answer: it waits like a finished walk's.
                if let Some((last, _)) = got.last() {
                    let walk = self.walk_id();
                    self.stopped(&last.clone(), s, walk);
                    self.wait(Park {
                        oid: last.clone(),
                        snapshot: s,
                        at: now,
                        walk,
                        left: None,
                    });
                }
                return false;
            }
            for (o, v) in &got {
                if *v == Value::EndOfMibView || !o.starts_with(walk.subtree.as_slice()) {
                    done = true;
                    break;
                }
                at = o.clone();
            }
            if let Some((last, _)) = got.last() {
                walk.last_given = Some(last.clone());
                self.stopped(last, s, walk.id);
                if std::mem::take(&mut walk.resending) {
                    // The lost answer parked there too: one of the two waits on for good.
                    let ghost = self.walk_id();
                    self.wait(Park {
                        oid: last.clone(),
                        snapshot: s,
                        at: now,
                        walk: ghost,
                        left: None,
                    });
                }
            }
            if got.is_empty() {
                done = true;
            }
            if done {
                break;
            }
        }
        walk.at = at;
        done
    }

    fn walk_id(&mut self) -> u64 {
        self.next_walk += 1;
        self.next_walk
    }

    // --- the model's bookkeeping ----------------------------------------------------------

    /// Places where a walk other than `except` waits at `oid`: finished walks' last
    /// answers and stand-ins within a walk-window, and the walks in progress.
    fn waiting_at(&self, oid: &Oid, except: Option<u64>) -> Vec<Park> {
        let now = self.rig.now;
        let in_progress = self.managers.iter().filter_map(|m| {
            let w = m.walk.as_ref()?;
            w.on?;
            Some(Park {
                oid: w.at.clone(),
                snapshot: w.on,
                at: w.last,
                walk: w.id,
                left: None,
            })
        });
        self.parks
            .get(oid)
            .into_iter()
            .flatten()
            .filter(|p| now.saturating_duration_since(p.at) < self.c.w)
            .cloned()
            .chain(in_progress.filter(|p| &p.oid == oid))
            .filter(|p| Some(p.walk) != except)
            .collect()
    }

    /// A walk went on from `oid` on snapshot `s` at `now`.
    fn went_on_at(&mut self, oid: &Oid, s: u64, now: Instant) {
        let v = self.went_on.entry(oid.clone()).or_default();
        v.retain(|(on, _)| *on != s);
        v.push((s, now));
    }

    /// A walk (or a stand-in) stopped at `oid` now.
    fn stopped(&mut self, oid: &Oid, snapshot: Option<u64>, walk: u64) {
        let (now, w) = (self.rig.now, self.c.w);
        // Walks waiting at one OID of one snapshot share one record, which lasts a
        // walk-window from the last stop there ("how many walks parked there have not come
        // back yet", and when one last parked there): a stop keeps the others waiting.
        if let Some(ps) = self.parks.get_mut(oid) {
            for p in ps
                .iter_mut()
                .filter(|p| p.snapshot == snapshot && now.saturating_duration_since(p.at) < w)
            {
                p.at = now;
            }
        }
        let here = self.history.entry(oid.clone()).or_default();
        here.retain(|p| now.saturating_duration_since(p.left.unwrap_or(p.at)) < w);
        here.push(Park {
            oid: oid.clone(),
            snapshot,
            at: now,
            walk,
            left: None,
        });
    }

    /// The residual case for walk `me` on snapshot `mine`, waiting at `oid` since `since`:
    /// another walk on another snapshot waits there, or stopped there while `me` waited.
    fn residual(&self, oid: &Oid, mine: u64, me: u64, since: Instant) -> bool {
        let other = |p: &Park| p.walk != me && p.snapshot != Some(mine);
        self.waiting_at(oid, Some(me)).iter().any(other)
            || self.history.get(oid).is_some_and(|h| {
                h.iter()
                    .any(|p| other(p) && p.left.is_none_or(|left| left >= since))
            })
    }

    /// Walk `walk` goes on from `oid` now.
    fn leaving(&mut self, oid: &Oid, walk: u64, now: Instant) {
        if let Some(h) = self.history.get_mut(oid) {
            for p in h.iter_mut().filter(|p| p.walk == walk && p.left.is_none()) {
                p.left = Some(now);
            }
        }
    }

    /// A place where a walk that will not come back waits.
    fn wait(&mut self, park: Park) {
        let (now, w) = (self.rig.now, self.c.w);
        let here = self.parks.entry(park.oid.clone()).or_default();
        here.retain(|p| now.saturating_duration_since(p.at) < w);
        here.push(park);
    }

    fn before(&self) -> Before {
        let since = |t: Option<Instant>| {
            t.map_or(Duration::MAX, |t| self.rig.now.saturating_duration_since(t))
        };
        Before {
            quiet: since(self.last_walk_request) >= self.c.quiet,
            gap: since(self.last_request),
        }
    }

    fn status(&mut self) -> Value {
        let oid = Oid([MEMSTAT_MIB_ROOT, &STATUS].concat());
        let txn = self.new_txn();
        let got = self.send(
            txn,
            Payload::Get {
                ranges: vec![range(oid)],
            },
        );
        got[0].1.clone()
    }

    /// The snapshot (the read) that answered a Response's table cells. Its figures say so
    /// too: a figure from any other read is always a violation.
    fn one_snapshot(&mut self, got: &[(Oid, Value)], before: Before, what: &str) -> Option<u64> {
        // Generation 0 is the empty view served before any good read: no snapshot.
        let answered = self.rig.agent.answered_from.filter(|g| *g > 0);
        let table = type_table();
        for (o, v) in got {
            let Some(&c) = o.0.get(table.0.len() + 1) else {
                continue;
            };
            if !o.starts_with(table.as_slice()) || !STAMPED_COLUMNS.contains(&c) {
                continue;
            }
            if let Some(read) = gen_of(v) {
                if Some(read) != answered {
                    violation(
                        self.seed,
                        &format!("{what} was answered from snapshot {answered:?} with a figure of read {read}"),
                    );
                }
            }
        }
        let read = answered?;
        self.check_stale(read, before, what);
        Some(read)
    }

    fn read_time(&self, read: u64) -> (Instant, u64) {
        self.rig.kernel.log[read as usize - 1]
    }

    /// The last good snapshot may be served while the source fails, and until a read is
    /// allowed again (once per max-age) after it recovered.
    fn excused_by_failure(&self, read_at: Instant, now: Instant) -> bool {
        self.failures.iter().any(|&(from, to, _)| {
            from <= now && to.is_none_or(|to| to > read_at && to + self.c.a >= now)
        })
    }

    /// Freshness, for a new walk or a Get answered from `read`.
    fn check_new(&mut self, read: u64, before: Before, now: Instant, what: &str) {
        let quiet = before.quiet;
        let (read_at, _) = self.read_time(read);
        let age = now.saturating_duration_since(read_at);
        let bound = if quiet { self.c.a } else { self.c.f };
        if quiet {
            self.tally.fresh_quiet += 1;
        } else {
            self.tally.fresh_busy += 1;
        }
        if quiet && age > bound && age <= self.c.f && self.views_held(now) {
            self.tally.fresh_held += 1;
            return;
        }
        if age > bound && !self.excused_by_failure(read_at, now) {
            violation(
                self.seed,
                &format!(
                    "freshness: {what} got figures {age:?} old, bound {bound:?} ({}; max-age \
                     {:?}, walk-window {:?})",
                    if quiet {
                        "nothing walked in the quiet window"
                    } else {
                        "others walk"
                    },
                    self.c.a,
                    self.c.w
                ),
            );
        }
    }

    /// The residual case of freshness the contract names: the two snapshots before the
    /// current one are both still in use (each served something within a walk-window of
    /// being replaced), and a walk on the older one asked within the pause grace. A walk
    /// paused that briefly keeps its snapshot, so no fourth can be read, and a new walk gets
    /// the current one, no older than F.
    fn parked_on(&mut self, s: u64, now: Instant) {
        self.served.entry(s).or_default().park = Some(now);
    }

    fn views_held(&self, now: Instant) -> bool {
        let latest = self.rig.kernel.log.len() as u64;
        // In use: replaced less than a walk-window ago, and a walk parked on it within a
        // walk-window, or a lone GetNext was answered from it within the resend window.
        let resend = RESEND_WINDOW.min(self.c.w);
        let within = |t: &Option<Instant>, d: Duration| {
            t.is_some_and(|t| now.saturating_duration_since(t) < d)
        };
        let mut in_use = (1..latest).rev().filter(|&s| {
            let retired = self.read_time(s + 1).0;
            now.saturating_duration_since(retired) < self.c.w
                && self
                    .served
                    .get(&s)
                    .is_some_and(|sv| within(&sv.park, self.c.w) || within(&sv.mark, resend))
        });
        let (Some(_), Some(older)) = (in_use.next(), in_use.next()) else {
            return false;
        };
        within(&self.served[&older].park, self.c.grace)
    }

    /// Staleness, for every Response answered from `read`: after max-age + walk-window with
    /// nothing asked, no old figure; and a snapshot that a request wanting newer figures
    /// passed over (it was older than F then) serves nothing a walk-window later.
    fn check_stale(&mut self, read: u64, before: Before, what: &str) {
        let now = self.rig.now;
        let (read_at, gen) = self.read_time(read);
        let quiet_long = before.gap >= self.c.a + self.c.w;
        if quiet_long {
            self.tally.stale_quiet += 1;
        }
        if gen == self.rig.kernel.gen || self.excused_by_failure(read_at, now) {
            return;
        }
        if quiet_long {
            violation(
                self.seed,
                &format!(
                    "staleness: after {:?} with no request, {what} got a figure read {:?} ago",
                    before.gap,
                    now.saturating_duration_since(read_at)
                ),
            );
        }
        let passed_over = read_at + self.c.f + Duration::from_millis(1);
        let first = self.wanting_newest.partition_point(|t| *t < passed_over);
        if let Some(&q) = self.wanting_newest.get(first) {
            if now > q + self.c.w {
                violation(
                    self.seed,
                    &format!(
                        "staleness: {what} got a figure read {:?} ago, though a request {:?} \
                         ago wanted newer figures than it had",
                        now.saturating_duration_since(read_at),
                        now.saturating_duration_since(q)
                    ),
                );
            }
            self.tally.stale_retired += 1;
        }
    }

    /// A failing source is read at most once per max-age (the first attempt, and one per
    /// max-age after it).
    fn check_retries(&mut self, from: Instant, to: Instant, reads: u64) {
        if self.c.a.is_zero() {
            return;
        }
        let most = 2 + (to.saturating_duration_since(from).as_nanos() / self.c.a.as_nanos()) as u64;
        self.tally.failing += 1;
        if reads > most {
            violation(
                self.seed,
                &format!(
                    "a failing source was read {reads} times in {:?}, max-age {:?}",
                    to.saturating_duration_since(from),
                    self.c.a
                ),
            );
        }
    }

    /// A request that wanted the newest figures was answered at `now`. With the source
    /// sound (and read again since it recovered, at most max-age after), it is remembered:
    /// the snapshot it passed over must be gone a walk-window later. With the source
    /// failing for longer than F, memSourceStatus must say so.
    fn wanted_newest(&mut self, now: Instant) {
        let sound = match self.failures.last() {
            None => true,
            Some(&(_, to, _)) => to.is_some_and(|to| now >= to + self.c.a),
        };
        if sound {
            self.wanting_newest.push(now);
        }
        if let Some(&(from, None, _)) = self.failures.last() {
            if now.saturating_duration_since(from) > self.c.f {
                let status = self.status();
                self.tally.failing += 1;
                if !matches!(status, Value::Integer(2) | Value::Integer(3)) {
                    violation(
                        self.seed,
                        &format!(
                            "a failing source: {:?} after the source has failed for {:?}, \
                             memSourceStatus is {status:?}",
                            self.rig.agent.walk_stats(),
                            now.saturating_duration_since(from)
                        ),
                    );
                }
            }
        }
    }
}

/// The OIDs of memTypeTable's cells for `rows` rows, from a walk of the table.
fn instances(rows: u32) -> std::collections::HashSet<Oid> {
    let mut r = Rig::with(Duration::ZERO, Duration::from_secs(1), Kernel::new(rows));
    let table = type_table();
    let mut at = table.clone();
    let mut found = std::collections::HashSet::new();
    loop {
        let (o, v) = r.get_next(&at);
        if v == Value::EndOfMibView || !o.starts_with(table.as_slice()) {
            return found;
        }
        found.insert(o.clone());
        at = o;
    }
}

fn random_behaviour(rng: &mut Rng) -> Behaviour {
    let role = if rng.chance(0.25) {
        Role::Client
    } else {
        Role::Walker {
            how: match rng.below(3) {
                0 => How::GetNext,
                1 => How::Bulk(1 + rng.below(30) as u16),
                _ => How::NetSnmp(1 + rng.below(12) as u16),
            },
            column: rng.chance(0.4).then(|| rng.pick(&[2, 5, 9, 13, 24])),
            probes: rng.chance(0.35),
        }
    };
    Behaviour {
        role,
        turnaround: rng.log_between(Duration::from_micros(100), Duration::from_millis(50)),
        pause: rng.pick(&[0.0, 0.01, 0.05]),
        resend: rng.pick(&[0.0, 0.01, 0.05]),
    }
}

// --- the runs ----------------------------------------------------------------------------

/// Traces per test: the default, or MEMSTAT_MODEL_TRACES; MEMSTAT_MODEL_SEED runs that one.
fn seeds(salt: u64, default: u64) -> Vec<u64> {
    if let Some(seed) = std::env::var("MEMSTAT_MODEL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return vec![seed];
    }
    let n = std::env::var("MEMSTAT_MODEL_TRACES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default);
    (0..n).map(|i| salt * 1_000_000 + i).collect()
}

fn run_family(family: Family, salt: u64, default: u64) -> Tally {
    let mut total = Tally::default();
    for seed in seeds(salt, default) {
        total.add(&Model::new(seed, family).run());
    }
    println!("{family:?}: {total:?}");
    total
}

/// Random traces of every kind: each clause holds after every Response, and each kind of
/// check ran often enough to mean something.
#[test]
fn contract_holds_on_random_traces_a() {
    mixed_traces(1);
}

#[test]
fn contract_holds_on_random_traces_b() {
    mixed_traces(2);
}

fn mixed_traces(salt: u64) {
    let t = run_family(Family::Mixed, salt, 1_000);
    if std::env::var("MEMSTAT_MODEL_SEED").is_ok() {
        return;
    }
    assert!(t.fresh_quiet > 1_000 && t.fresh_busy > 1_000, "{t:?}");
    assert!(t.stale_quiet > 10 && t.stale_retired > 10, "{t:?}");
    assert!(t.failing > 10, "{t:?}");
    // These traces are built to collide: tables of 2 to 6 rows, walks of every stride on
    // one OID at a time, refreshes every few milliseconds. The residual case stays below
    // one walk in twenty even so (the load is `contract_crowd_*`).
    let mixed = t.mixed_residual + t.mixed_paused;
    assert!(
        mixed * 20 <= t.walks,
        "the residual case is not rare: {t:?}"
    );
}

/// The load, scaled to the model: walkers with different max-repetitions (AgentX
/// GetBulk, net-snmp's GetNexts, plain GetNext) beside clients sending random Gets and
/// GetNexts of the table's cells, a source that changes every 0.1 s. Target: at most 1 walk
/// in 100 mixes, and only in the residual case (or after a pause the contract allows).
fn crowd(walkers: usize, clients: usize, max_age_ms: u64, salt: u64, traces: u64) -> Tally {
    let family = Family::Crowd {
        walkers,
        clients,
        max_age_ms,
    };
    let t = run_family(family, salt, traces);
    assert!(t.walks > 50 * traces, "{t:?}");
    // Some trace's walks straddled a refresh (walked on more than one snapshot).
    assert!(
        t.snapshots_walked > traces,
        "walks never straddled refreshes: {t:?}"
    );
    t
}

/// Walkers meet at a refresh, clients or not: a new walk faster than one still on the old
/// snapshot catches it up, and both wait at one OID (the residual case). The limit was "no
/// mixed walk" until 3 December 2026, which held on one trace but not over 100 (17 of
/// 6,708 walks at max-age 5 s, with `MEMSTAT_MODEL_TRACES=100`); it is now the 20-walker
/// one, as in the real test (`tests/walk_consistency.rs`). A mix the contract does not
/// allow fails the model on any trace, whatever the limit.
#[test]
fn contract_crowd_of_4_walkers_and_2_clients_mixes_at_most_1_in_100() {
    crowd_mixes_at_most_1_in_100(4, 2, 10, 4);
}

#[test]
fn contract_crowd_of_20_walkers_and_4_clients_mixes_at_most_1_in_100() {
    crowd_mixes_at_most_1_in_100(20, 4, 20, 5);
}

/// The crowd's limit, at the default max-age and at 10 ms.
fn crowd_mixes_at_most_1_in_100(walkers: usize, clients: usize, salt: u64, traces: u64) {
    for max_age in [5_000, 10] {
        let t = crowd(walkers, clients, max_age, salt + max_age, traces);
        assert!(
            (t.mixed_residual + t.mixed_paused) * 100 <= t.walks,
            "max-age {max_age} ms: {t:?}"
        );
    }
}
