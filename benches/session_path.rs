//! The daemon's whole in-process cost per GetNext, as `Subagent::handle` spends it: decode the
//! frame, pick the pinned view (`Cache::view_for`), answer (`MibView::get_next`), write the
//! Response, and remember the continuation (`Cache::note_returned`). Only the socket I/O and
//! the tokio wake-up are left out, which the end-to-end scripts/bench-walk measures.
//!
//! The workload is a snmpbulkwalk of memTypeTable at 300 types as net-snmp forwards it: one
//! GetNext per varbind, a new transactionID every 10 varbinds (max-repetitions 10).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use memstat_agentx::agentx::pdu::{Payload, Pdu, ResError, ResponseWriter, SearchRange, Value};
use memstat_agentx::cache::{Cache, CacheConfig};
use memstat_agentx::index::StableIndexes;
use memstat_agentx::memstat::{fixture, Snapshot, Source, SourceKind};
use memstat_agentx::mib::MEMSTAT_MIB_ROOT;
use memstat_agentx::oid::Oid;
use std::time::{Duration, UNIX_EPOCH};

#[path = "common/mod.rs"]
mod common;

const TYPES: usize = 300;
const REPETITIONS: u32 = 10;

/// The GetNext frames of one walk, as the master sends them (transactionID patched per run).
fn walk_frames() -> Vec<Vec<u8>> {
    let view = common::view_of(TYPES);
    let table = common::type_table();
    let mut end = MEMSTAT_MIB_ROOT.to_vec();
    *end.last_mut().unwrap() += 1;
    let status = common::status;
    let mut frames = Vec::new();
    let mut cur = table.clone();
    loop {
        let mut f = Vec::new();
        Pdu::new(
            7,
            0,
            frames.len() as u32,
            Payload::GetNext {
                ranges: vec![SearchRange {
                    start: Oid(cur.clone()),
                    include: false,
                    end: Oid(end.clone()),
                }],
            },
        )
        .encode(&mut f);
        frames.push(f);
        match view.get_next(&cur, false, &[], &status) {
            Some((o, _)) if o.starts_with(&table) => cur = o.0,
            _ => break,
        }
    }
    frames
}

/// What `Subagent::handle` does for one GetNext frame.
fn handle(cache: &mut Cache, frame: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let pdu = Pdu::decode(frame).unwrap();
    let Payload::GetNext { ranges } = pdu.payload else {
        unreachable!()
    };
    let starts: Vec<&Oid> = ranges.iter().map(|r| &r.start).collect();
    let view = cache.view_for(pdu.ids.transaction_id, &starts, true);
    let mut found = Vec::with_capacity(ranges.len());
    {
        let status = || cache.status();
        for r in &ranges {
            found.push(
                match view.get_next(r.start.as_slice(), r.include, r.end.as_slice(), &status) {
                    Some(f) => f,
                    None => (r.start.clone(), Value::EndOfMibView),
                },
            );
        }
    }
    let mut w = ResponseWriter::begin(out, pdu.ids, 0, ResError::NO_ERROR, 0);
    for (o, v) in &found {
        w.push(o, v);
    }
    w.finish();
    for (i, (o, v)) in found.into_iter().enumerate() {
        if v != Value::EndOfMibView {
            cache.note_returned(pdu.ids.transaction_id, i, o);
        }
    }
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fixture.json");
    let types = (0..TYPES).map(common::full_type).collect();
    let snap = Snapshot::new(0, UNIX_EPOCH, String::new(), types);
    std::fs::write(&path, fixture::to_json(&snap)).unwrap();
    let source = Source::open(&SourceKind::Fixture(path)).unwrap();
    // A long max-age: the steady state of a walk, without a refresh inside the timing.
    let mut cache = Cache::new(
        source,
        StableIndexes::in_memory(),
        CacheConfig {
            max_age: Duration::from_secs(3600),
            walk_window: Duration::from_secs(30),
        },
    );
    let mut frames = walk_frames();
    assert_eq!(frames.len(), TYPES * 23 + 1);
    let mut out = Vec::with_capacity(64 * 1024);
    let mut txn = 1u32;

    let mut g = c.benchmark_group("session_path");
    g.throughput(Throughput::Elements(frames.len() as u64));
    g.bench_function("walk_type_table_300", |b| {
        b.iter(|| {
            for (i, f) in frames.iter_mut().enumerate() {
                if i as u32 % REPETITIONS == 0 {
                    txn = txn.wrapping_add(1);
                }
                // h.transactionID, network byte order.
                f[8..12].copy_from_slice(&txn.to_be_bytes());
                handle(&mut cache, f, &mut out);
            }
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
