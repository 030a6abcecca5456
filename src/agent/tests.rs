//! The agent answering whole request streams, on a clock the tests control (see `rig.rs`).

use super::rig::*;
use super::*;
use crate::mib::MEMSTAT_MIB_ROOT;
use agentx_proto::pdu::Payload;

/// The bug report's deterministic case, once with net-snmp's GetNext per repetition and
/// once with a master that sends GetBulk.
#[test]
fn a_getnext_by_another_manager_does_not_move_a_parked_walk() {
    for bulk in [false, true] {
        let mut r = Rig::new(500, 30_000);
        let column = col(9, None);
        // Manager B: ten rows of memTypeInUseCount, generation 1; it stops at row .10.
        let b1 = if bulk {
            r.get_bulk(&column, 10)
        } else {
            r.bulk_as_getnexts(&column, 10)
        };
        assert_eq!(b1.last().unwrap().0, col(9, Some(10)));
        assert_eq!(gens(&b1), [1]);
        r.kernel.gen = 2;
        r.advance(600);
        // Manager A: one GetNext of .9, which returns .10.
        let (a, _) = r.get_next(&col(9, Some(9)));
        assert_eq!(a, col(9, Some(10)));
        // B goes on from .10 and must stay on generation 1.
        let b2 = if bulk {
            r.get_bulk(&col(9, Some(10)), 10)
        } else {
            r.bulk_as_getnexts(&col(9, Some(10)), 10)
        };
        assert_eq!(gens(&b2), [1], "bulk={bulk}: B moved to another snapshot");
        // A new walk from the column sees the new figures.
        r.advance(600);
        assert_eq!(gens(&[r.get_next(&column)]), [2], "bulk={bulk}");
    }
}

/// A manager walking memTypeTable with its own max-repetitions, through a master that
/// sends AgentX GetBulk or one that sends a GetNext per repetition.
struct Walker {
    reps: u16,
    bulk: bool,
    at: Option<Oid>,
    seen: Vec<(Oid, Value)>,
    started_us: u64,
}

impl Walker {
    fn fleet() -> Vec<Walker> {
        // Eight bulk walkers with their own max-repetitions, and a plain GetNext walker.
        [1u16, 2, 3, 5, 7, 10, 20, 50, 1]
            .iter()
            .enumerate()
            .map(|(i, &reps)| Walker {
                reps,
                bulk: i % 2 == 0 && i != 8,
                at: None,
                seen: Vec::new(),
                started_us: 0,
            })
            .collect()
    }
}

/// One request of walker `w`. Returns the walk's duration and generations when it ended.
fn walker_step(r: &mut Rig, w: &mut Walker, now_us: u64) -> Option<(u64, Vec<u64>)> {
    let table = type_table();
    if w.at.is_none() {
        w.started_us = now_us;
    }
    let from = w.at.clone().unwrap_or_else(|| table.clone());
    let got = if w.bulk {
        r.get_bulk(&from, w.reps)
    } else {
        r.bulk_as_getnexts(&from, u32::from(w.reps))
    };
    let mut done = got.is_empty();
    for (o, v) in got {
        if !o.starts_with(table.as_slice()) || v == Value::EndOfMibView {
            done = true;
            break;
        }
        w.seen.push((o, v));
    }
    w.at = w.seen.last().map(|(o, _)| o.clone());
    if !done {
        return None;
    }
    // Complete: the 7 columns the source fills, all rows, in order.
    let oids: Vec<&Oid> = w.seen.iter().map(|(o, _)| o).collect();
    assert!(oids.windows(2).all(|p| p[0] < p[1]), "increasing");
    assert_eq!(oids.len(), 7 * ROWS as usize, "complete walk");
    let g = gens(&w.seen);
    w.seen.clear();
    w.at = None;
    Some((now_us - w.started_us, g))
}

/// Concurrent managers on one clock: every manager takes the same time to turn a Response
/// into its next request, the source moves on every 3 ms, and a client does random Gets and
/// GetNexts in between. Every walk shorter than the window stays on one snapshot, whatever
/// max-age, and at most three views are alive at any time.
#[test]
fn concurrent_walkers_each_see_one_snapshot() {
    for (max_age, window) in [(10u64, 1_000u64), (0, 1_000), (5_000, 30_000)] {
        let mut r = Rig::new(max_age, window);
        let mut walkers = Walker::fleet();
        const TURN_US: u64 = 1_500;
        // Next request time of each walker, staggered starts; the last slot is the client.
        let mut next: Vec<u64> = (0..walkers.len() as u64).map(|i| i * 700).collect();
        next.push(300);
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let (mut now_us, mut walks, mut checked) = (0u64, 0, 0);
        while now_us < 4_000_000 {
            let (k, &t) = next.iter().enumerate().min_by_key(|(_, t)| **t).unwrap();
            r.advance((t - now_us) / 1000);
            now_us = t;
            r.kernel.gen = 1 + now_us / 3_000;
            if k == walkers.len() {
                let row = 1 + (rnd() % u64::from(ROWS)) as u32;
                let c = [5, 9, 13][(rnd() % 3) as usize];
                if rnd() % 2 == 0 {
                    r.get(&col(c, Some(row)));
                } else {
                    r.get_next(&col(c, Some(row)));
                }
                next[k] = t + 500 + rnd() % 1_000;
                continue;
            }
            if let Some((took_us, g)) = walker_step(&mut r, &mut walkers[k], now_us) {
                walks += 1;
                if took_us < window * 1000 {
                    checked += 1;
                    assert_eq!(
                        g.len(),
                        1,
                        "max-age {max_age} ms: a walk of {} ms with {} reps mixed {g:?} ({:?})",
                        took_us / 1000,
                        walkers[k].reps,
                        r.agent.walk_stats()
                    );
                }
            }
            next[k] = t + TURN_US;
        }
        let stats = r.agent.walk_stats();
        assert!(
            walks > 50 && checked == walks,
            "{walks} walks, {checked} checked"
        );
        assert!(stats.continued > 1000, "{stats:?}");
    }
}

/// Random request streams: requests from any manager in any order, any mix, pauses, a
/// source that keeps moving, and clocks from 0 to 5 s per step. The live views never
/// exceed the bound and every answer is well formed.
#[test]
fn live_views_never_exceed_the_bound_under_random_streams() {
    for (max_age, window) in [(0u64, 50u64), (10, 3_000), (1_000, 5_000)] {
        let mut r = Rig::new(max_age, window);
        let mut walkers = Walker::fleet();
        let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ max_age;
        let mut rnd = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut most = 0;
        for step in 0..20_000u64 {
            r.advance(match rnd() % 100 {
                0 => 5_000,
                1..=5 => 200,
                _ => rnd() % 3,
            });
            if step % 3 == 0 {
                r.kernel.gen += 1;
            }
            let k = (rnd() % (walkers.len() as u64 + 1)) as usize;
            if k == walkers.len() {
                let row = 1 + (rnd() % u64::from(ROWS + 2)) as u32;
                let c = 2 + (rnd() % 24) as u32;
                match rnd() % 3 {
                    0 => drop(r.get(&col(c, Some(row)))),
                    1 => drop(r.get_next(&col(c, Some(row)))),
                    _ => drop(r.get_bulk(&col(c, Some(row)), (rnd() % 30) as u16)),
                }
            } else {
                let at_ms = r.at_ms();
                walker_step(&mut r, &mut walkers[k], at_ms * 1000);
            }
            if step % 100 == 0 {
                r.tick_now();
            }
            most = most.max(r.agent.live_views());
            assert!(r.agent.live_views() <= walks::MAX_LIVE_VIEWS);
        }
        assert!(most >= 2, "the streams never needed a second view");
    }
}

/// Freshness: while walks keep going, a change reaches new Gets and new walks within
/// max(max-age, walk-window − max-age); with nobody walking, within max-age.
#[test]
fn a_change_reaches_new_requests_within_the_bound() {
    let (max_age, window) = (500u64, 3_000u64);
    let bound = max_age.max(window - max_age);
    let mut r = Rig::new(max_age, window);
    let row5 = col(9, Some(5));
    r.get(&row5);
    // Walkers that never stop: each step continues where the last one parked.
    let mut parked = [col(9, None), col(13, None), col(5, None)];
    let mut changed_at = None;
    let mut seen_at = None;
    for step in 0..20_000u64 {
        r.advance(1);
        let k = (step % 3) as usize;
        let (o, _) = r.get_next(&parked[k]);
        parked[k] = if o.0.len() == row5.0.len() && o < col(24, None) {
            o
        } else {
            col(9, None)
        };
        if step == 2_000 {
            r.kernel.gen = 2;
            changed_at = Some(r.at_ms());
        }
        if changed_at.is_some() && step % 50 == 0 && gen_of(&r.get(&row5)) == Some(2) {
            seen_at = Some(r.at_ms());
            break;
        }
    }
    let lag = seen_at.expect("the change never showed") - changed_at.unwrap();
    assert!(
        lag <= bound + 50,
        "a Get saw the change after {lag} ms, bound {bound} ms"
    );
    // Nobody walking: the next Get after max-age reads the source again.
    r.kernel.gen = 3;
    r.advance(window + 1);
    r.tick_now();
    r.advance(max_age);
    assert_eq!(gen_of(&r.get(&row5)), Some(3));
}

/// Staleness: once the source moved on and nobody asked anything for max-age +
/// walk-window, no OID where a walk parked still serves old figures.
#[test]
fn no_old_figure_after_max_age_plus_walk_window() {
    let (max_age, window) = (1_000u64, 5_000u64);
    let mut r = Rig::new(max_age, window);
    let mut parked = Vec::new();
    for (c, reps) in [(5, 3u16), (9, 10), (13, 7)] {
        let got = r.get_bulk(&col(c, None), reps);
        parked.push(got.last().unwrap().0.clone());
        let got = r.bulk_as_getnexts(&col(c, Some(20)), u32::from(reps));
        parked.push(got.last().unwrap().0.clone());
    }
    r.kernel.gen = 2;
    r.advance(max_age + window);
    for p in &parked {
        let (_, v) = r.get_next(p);
        assert_eq!(gen_of(&v), Some(2), "GetNext from {p}");
    }
    assert_eq!(gen_of(&r.get(&col(9, Some(1)))), Some(2));
    assert_eq!(r.agent.live_views(), 1);
}

#[test]
fn reading_the_scalars_never_reads_the_source() {
    let mut r = Rig::new(0, 1_000);
    let uptime = Oid([MEMSTAT_MIB_ROOT, &[1, 1, 1, 0]].concat());
    let status = Oid([MEMSTAT_MIB_ROOT, &[1, 1, 8, 0]].concat());
    r.get(&col(5, Some(1)));
    let reads = r.kernel.reads;
    r.advance(10);
    assert!(matches!(r.get(&uptime), Value::TimeTicks(_)));
    assert_eq!(r.get(&status), Value::Integer(1));
    let (o, _) = r.get_next(&Oid(MEMSTAT_MIB_ROOT.to_vec()));
    assert_eq!(o, uptime);
    // After the scalars, memSourceTable: the daemon's too.
    let (o, v) = r.get_next(&Oid([MEMSTAT_MIB_ROOT, &[1, 1, 11, 0]].concat()));
    assert_eq!(o, Oid([MEMSTAT_MIB_ROOT, &[1, 1, 12, 1, 2, 1]].concat()));
    assert_eq!(v, Value::OctetString(b"test".to_vec()));
    assert_eq!(
        r.kernel.reads, reads,
        "the daemon's objects read the source"
    );
    // The first table cell does.
    r.get_next(&Oid([MEMSTAT_MIB_ROOT, &[1, 1, 99]].concat()));
    assert_eq!(r.kernel.reads, reads + 1);
}

/// RFC 2741 §7.2.3.3: from the second repetition on, a repeater searches from the name it
/// returned last, so its endOfMibView carries that name; the range's start only when it
/// returned nothing at all.
#[test]
fn get_bulk_end_of_mib_view_carries_the_last_name() {
    let mut r = Rig::new(5_000, 30_000);
    let ranges = vec![
        // Returns the last row, then runs out.
        SearchRange {
            start: col(9, Some(ROWS - 1)),
            include: false,
            end: col(9, Some(ROWS + 1)),
        },
        // Returns nothing at all.
        SearchRange {
            start: col(13, Some(ROWS)),
            include: false,
            end: col(13, Some(ROWS + 1)),
        },
    ];
    let got = r.ask(Payload::GetBulk {
        non_repeaters: 0,
        max_repetitions: 4,
        ranges,
    });
    let names: Vec<(Oid, bool)> = got
        .iter()
        .map(|(o, v)| (o.clone(), *v == Value::EndOfMibView))
        .collect();
    let (a, b) = (col(9, Some(ROWS)), col(13, Some(ROWS)));
    // Once every repeater is exhausted the answer stops (fewer repetitions are allowed).
    assert_eq!(
        names,
        [(a.clone(), false), (b.clone(), true), (a, true), (b, true)]
    );
}

/// One SNMP GetBulk that net-snmp forwards as a GetNext per repetition (one transactionID)
/// is one request: even when it is no walk (it starts at an instance) and the source moves
/// and max-age passes between its repetitions, it is answered from one snapshot.
#[test]
fn the_repetitions_of_one_request_share_a_snapshot_even_when_it_is_no_walk() {
    let mut r = Rig::new(0, 5_000);
    r.get(&col(9, Some(1)));
    r.txn += 1;
    let txn = r.txn;
    let mut cur = col(9, Some(3));
    let mut seen = Vec::new();
    for _ in 0..8 {
        r.kernel.gen += 1;
        r.advance(5);
        let (o, v) = r
            .ask_in(
                txn,
                Payload::GetNext {
                    ranges: vec![range(cur.clone())],
                },
            )
            .remove(0);
        cur = o.clone();
        seen.push((o, v));
    }
    assert_eq!(gens(&seen).len(), 1, "{:?}", gens(&seen));
    // It left no walk behind: a GetNext of another request from where it stopped is no
    // continuation of a waiting walk.
    let before = r.agent.walk_stats();
    r.get_next(&cur);
    assert_eq!(r.agent.walk_stats().continued, before.continued);
}

/// memSourceStale when a refresh fails after a good one, memSourceRecovered when one succeeds
/// again; the switch turns both off. With sampling off, no sample is ever due.
#[test]
fn source_state_changes_queue_notifications() {
    let mut r = Rig::new(100, 1000);
    assert_eq!(r.agent.next_sample(), None, "watch-interval 0: never");
    let now = r.now;
    r.agent.read_started(now);
    r.agent.read_finished(r.kernel.types(), now);
    assert!(
        !r.agent.has_notifications(),
        "the first good read is no change"
    );
    let gone = || {
        Err(SourceError::Unavailable {
            message: "gone".into(),
        })
    };
    r.agent.read_started(now);
    r.agent.read_finished(gone(), now);
    r.agent.read_started(now);
    r.agent.read_finished(gone(), now);
    let n: Vec<_> = r.agent.take_notifications().into_iter().collect();
    let stale = Notification::new(watch::SOURCE_STALE.kind, None)
        .with_text("memSourceName", "test")
        .with(
            "memSourceStatus",
            Value::Integer(SourceStatus::Stale as i32),
        )
        .with_text("memSourceLastError", "gone")
        .also("memSrcName", 1, crate::mib::admin_string("test"))
        .also(
            "memSrcStatus",
            1,
            Value::Integer(SourceStatus::Stale as i32),
        );
    assert_eq!(n, [stale], "one per change");
    r.agent.read_started(now);
    r.agent.read_finished(r.kernel.types(), now);
    let n: Vec<_> = r.agent.take_notifications().into_iter().collect();
    let recovered = Notification::new(watch::SOURCE_RECOVERED.kind, None)
        .with_text("memSourceName", "test")
        .with("memSourceStatus", Value::Integer(SourceStatus::Ok as i32))
        .also("memSrcName", 1, crate::mib::admin_string("test"))
        .also("memSrcStatus", 1, Value::Integer(SourceStatus::Ok as i32));
    assert_eq!(n, [recovered]);
    // An overdue read makes the source stale too, and its late result recovers it.
    r.agent.read_started(now);
    r.agent.read_overdue(now + Duration::from_millis(800));
    r.agent
        .read_finished(r.kernel.types(), now + Duration::from_secs(1));
    let kinds: Vec<_> = r
        .agent
        .take_notifications()
        .iter()
        .map(Notification::kind)
        .collect();
    assert_eq!(
        kinds,
        [watch::SOURCE_STALE.kind, watch::SOURCE_RECOVERED.kind]
    );
    let mut off = r.agent.settings();
    let mut raw = crate::config::RawSettings::default();
    raw.set_arg("notify-source", "false".into());
    off.notify = WatchSettings::from(&raw.convert().unwrap());
    r.agent.set_settings(off);
    r.agent.read_started(now);
    r.agent.read_finished(gone(), now);
    assert!(!r.agent.has_notifications(), "notify-source off");
    assert_eq!(r.agent.status(now).notifications_sent, 0);
    r.agent.notifications_dropped(2);
    r.agent.notifications_sent(3);
    let st = r.agent.status(now);
    assert_eq!((st.notifications_sent, st.notifications_dropped), (3, 2));
}

/// Samples are due at the watch interval, take the newest view, and never read by
/// themselves (the session reads first when `read_due` says so).
#[test]
fn samples_follow_the_interval_and_compare_views() {
    let mut r = Rig::new(100, 1000);
    let mut s = r.agent.settings();
    s.notify.interval = Duration::from_secs(1);
    s.notify.holdoff = Duration::ZERO;
    r.agent.set_settings(s);
    let t0 = r.t0;
    assert_eq!(r.agent.next_sample(), Some(t0 + Duration::from_secs(1)));
    assert!(!r.agent.sample_due(t0 + Duration::from_millis(999)));
    assert!(r.agent.sample_due(t0 + Duration::from_secs(1)));
    let read = |r: &mut Rig, at: Instant| {
        r.agent.read_started(at);
        let t = r.kernel.types();
        r.agent.read_finished(t, at);
    };
    let t1 = t0 + Duration::from_secs(1);
    read(&mut r, t1);
    let reads = r.kernel.reads;
    r.agent.sample(t1);
    assert_eq!(r.kernel.reads, reads, "a sample reads nothing itself");
    assert!(
        !r.agent.has_notifications(),
        "the first sample is a baseline"
    );
    assert_eq!(r.agent.next_sample(), Some(t1 + Duration::from_secs(1)));
    // Nothing that the watcher compares changed: nothing due.
    r.kernel.gen = 2;
    let t2 = t1 + Duration::from_secs(1);
    read(&mut r, t2);
    r.agent.sample(t2);
    assert!(!r.agent.has_notifications());
}

/// Samples taken the way the session takes them (read first only when `read_due` says so)
/// while walks go on: every walk still sees one snapshot, and no more than three views live.
#[test]
fn samples_keep_the_walk_contract_and_the_view_bound() {
    let mut r = Rig::new(10, 1000);
    let mut s = r.agent.settings();
    s.notify.interval = Duration::from_millis(5);
    r.agent.set_settings(s);
    let column = col(9, None);
    // Three interleaved walks, the source moving on at every step, a sample due at most
    // steps.
    let mut walks: Vec<(Oid, Vec<(Oid, Value)>)> = vec![(column.clone(), Vec::new()); 3];
    let mut samples = 0;
    for step in 0..400u32 {
        r.kernel.gen += 1;
        r.advance(3);
        let w = (step % 3) as usize;
        let from = walks[w].0.clone();
        let got = r.bulk_as_getnexts(&from, 2);
        if got.is_empty() || !got.last().unwrap().0.starts_with(column.as_slice()) {
            let done = std::mem::take(&mut walks[w].1);
            assert_eq!(
                gens(&done).len(),
                1,
                "walk {w} mixed snapshots: {:?}",
                gens(&done)
            );
            walks[w].0 = column.clone();
            continue;
        }
        walks[w].0 = got.last().unwrap().0.clone();
        walks[w].1.extend(
            got.into_iter()
                .filter(|(o, _)| o.starts_with(column.as_slice())),
        );
        let now = r.now;
        if r.agent.sample_due(now) {
            if r.agent.read_due(now) {
                r.agent.read_started(now);
                let t = r.kernel.types();
                r.agent.read_finished(t, now);
            }
            r.agent.sample(now);
            samples += 1;
        }
        assert!(r.agent.live_views() <= walks::MAX_LIVE_VIEWS);
    }
    assert!(samples > 100, "{samples} samples");
}

/// The probe: one GetNext of memTypeTable before every walk (availability checks
/// send exactly that) parks at memTypeName.1 and never comes back. With nothing else asking,
/// every later walk must still see figures no older than max-age, and a failing source must
/// show as stale, however recently the probe stopped where the walk starts.
#[test]
fn a_probe_before_each_walk_does_not_pin_walks_to_its_snapshot() {
    let mut r = Rig::new(500, 30_000);
    let table = type_table();
    r.get_next(&table);
    for (pause, gen) in [(1_500, 2), (4_000, 3), (8_000, 4)] {
        r.kernel.gen = gen;
        r.advance(pause);
        let mut at = table.clone();
        let mut seen = Vec::new();
        loop {
            let got = r.get_bulk(&at, 25);
            let inside: Vec<_> = got
                .into_iter()
                .take_while(|(o, v)| o.starts_with(table.as_slice()) && *v != Value::EndOfMibView)
                .collect();
            if inside.is_empty() {
                break;
            }
            at = inside.last().unwrap().0.clone();
            seen.extend(inside);
            r.advance(1);
        }
        assert_eq!(gens(&seen), [gen], "after {pause} ms with nothing asked");
        r.get_next(&table);
    }
    // A probe, then the source fails: the next walk reads, fails, and says so.
    r.kernel.failing = true;
    r.advance(1_500);
    r.get_bulk(&table, 25);
    let status = Oid([MEMSTAT_MIB_ROOT, &[1, 1, 8, 0]].concat());
    assert_eq!(
        r.get(&status),
        Value::Integer(2),
        "memSourceStatus stale(2)"
    );
}

/// With several sources, memSourceStale and memSourceRecovered are sent per source, each
/// followed by its row of memSourceTable, and memSourceStatus is ok only when all are.
#[test]
fn each_source_that_turns_stale_or_recovers_is_named() {
    use crate::memstat::{Allocator, SourceData, SourceRead};
    let t0 = Instant::now();
    let settings = AgentSettings {
        max_age: Duration::from_secs(5),
        walk_window: Duration::from_secs(30),
        notify: WatchSettings::defaults(),
        sites: super::SiteSettings::default(),
    };
    let names = ["a".to_string(), "b".to_string()];
    let mut agent = Agent::new(&names, TypeIndexes::in_memory(), settings, t0);
    let good = || Ok(SourceData::from(vec![MemoryType::new(Allocator::Uma, "z")]));
    let bad = || {
        Err(SourceError::Unavailable {
            message: "b: gone".into(),
        })
    };
    let read = |agent: &mut Agent, parts| {
        agent.read_started(t0);
        agent.read_finished(SourceRead { parts }, t0);
        agent.take_notifications().into_iter().collect::<Vec<_>>()
    };
    assert!(read(&mut agent, vec![good(), good()]).is_empty());
    let n = read(&mut agent, vec![good(), bad()]);
    assert_eq!(n.len(), 1, "{n:?}");
    assert_eq!(n[0].kind(), watch::SOURCE_STALE.kind);
    assert_eq!(
        n[0].value("memSourceName"),
        Some(&crate::mib::admin_string("a,b"))
    );
    let b = ("memSrcName", 2, crate::mib::admin_string("b"));
    assert_eq!(n[0].extra()[0], b, "names the source that failed");
    // Still failing: no change, nothing sent; the first recovers too: one for it alone.
    assert!(read(&mut agent, vec![good(), bad()]).is_empty());
    let n = read(&mut agent, vec![bad(), good()]);
    let kinds: Vec<_> = n.iter().map(|n| (n.kind(), n.extra()[0].1)).collect();
    assert_eq!(
        kinds,
        [
            (watch::SOURCE_STALE.kind, 1),
            (watch::SOURCE_RECOVERED.kind, 2)
        ]
    );
    // memSourceStatus stays stale while one source is.
    assert_eq!(
        n[1].value("memSourceStatus"),
        Some(&Value::Integer(SourceStatus::Stale as i32))
    );
    let n = read(&mut agent, vec![good(), good()]);
    assert_eq!(n.len(), 1);
    assert_eq!(
        n[0].value("memSourceStatus"),
        Some(&Value::Integer(SourceStatus::Ok as i32))
    );
    // The wire: memSrcName.1 and memSrcStatus.1 after the OBJECTS clause's varbinds.
    let vbs = crate::mib::notification_varbinds(&n[0]);
    let tail: Vec<Vec<u32>> = vbs[vbs.len() - 2..]
        .iter()
        .map(|v| v.name.0.clone())
        .collect();
    let root = crate::mib::MEMSTAT_MIB_ROOT;
    assert_eq!(
        tail,
        [
            [root, &[1, 1, 12, 1, 2, 1]].concat(),
            [root, &[1, 1, 12, 1, 3, 1]].concat()
        ]
    );
}
