//! The daemon's whole in-process cost per GetNext, on the path the session takes for every
//! request: decode the frame (into the last request's memory), then `Agent::handle` (which
//! continuation, the answer from the view, the Response, the park). Only the socket I/O and
//! the tokio wake-up are left out, which the end-to-end scripts/bench-walk measures.
//!
//! The workload is a snmpbulkwalk of memTypeTable at 300 types as net-snmp forwards it: one
//! GetNext per varbind, one transactionID for every 10 of them (max-repetitions 10).

use agentx_proto::oid::Oid;
use agentx_proto::pdu::{Payload, Pdu, SearchRange, Value};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use memstat_agentx::agent::{Agent, AgentSettings, Handled, SiteSettings, WatchSettings};
use memstat_agentx::config::RawSettings;
use memstat_agentx::index::StableIndexes;
use memstat_agentx::memstat::MemoryType;
use memstat_agentx::mib::MEMSTAT_MIB_ROOT;
use std::time::{Duration, Instant};

#[path = "common/mod.rs"]
mod common;

const TYPES: usize = 300;
const REPETITIONS: u32 = 10;

/// A long max-age: the steady state of a walk, without a refresh inside the timing.
fn settings() -> AgentSettings {
    AgentSettings {
        notify: WatchSettings::from(&RawSettings::default().convert().unwrap()),
        sites: SiteSettings::default(),
        max_age: Duration::from_secs(3600),
        walk_window: Duration::from_secs(30),
    }
}

/// The GetNext frames of one walk of memTypeTable over `types`, as the master sends them
/// (transactionID patched per run), and the cells the walk returns. Each frame starts where
/// the previous one's answer, by an agent of its own serving `types`, stopped; the last one
/// is answered from past the table.
fn walk_frames(types: &[MemoryType]) -> (Vec<Vec<u8>>, Vec<Vec<u32>>) {
    let now = Instant::now();
    let mut agent = Agent::new(
        &["bench".into()],
        StableIndexes::in_memory(),
        settings(),
        now,
    );
    let table = common::type_table();
    let mut end = MEMSTAT_MIB_ROOT.to_vec();
    *end.last_mut().unwrap() += 1;
    let mut frames = Vec::new();
    let mut cells = Vec::new();
    let mut out = Vec::new();
    let mut cur = table.clone();
    loop {
        let mut pdu = Pdu::new(
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
        );
        let mut f = Vec::new();
        pdu.encode(&mut f);
        frames.push(f);
        pdu.ids.transaction_id = frames.len() as u32;
        assert!(agent.answer_blocking(&pdu, now, &mut out, &mut || Ok(types.to_vec())));
        let Payload::Response { mut varbinds, .. } = Pdu::decode(&out).unwrap().payload else {
            panic!("not a Response");
        };
        let vb = varbinds.remove(0);
        if vb.value == Value::EndOfMibView || !vb.name.starts_with(&table) {
            break;
        }
        cur = vb.name.0;
        cells.push(cur.clone());
    }
    (frames, cells)
}

fn bench(c: &mut Criterion) {
    let types: Vec<MemoryType> = (0..TYPES).map(common::full_type).collect();
    let mut agent = Agent::new(
        &["bench".into()],
        StableIndexes::in_memory(),
        settings(),
        Instant::now(),
    );
    let (mut frames, cells) = walk_frames(&types);
    // One GetNext per cell (every accessible memTypeEntry column of every row, as the MIB's
    // definitions count them), and the one that leaves the table.
    common::assert_full_rows(cells.iter().map(Vec::as_slice), TYPES);
    assert_eq!(frames.len(), TYPES * common::type_columns() + 1);
    let mut out = Vec::with_capacity(64 * 1024);
    // The first request reads the source, as the daemon's does.
    let first = Pdu::decode(&frames[0]).unwrap();
    assert!(agent.answer_blocking(&first, Instant::now(), &mut out, &mut || Ok(types.clone())));
    let mut txn = 1u32;
    let mut spare: Option<Pdu> = None;

    let mut g = c.benchmark_group("session_path");
    g.throughput(Throughput::Elements(frames.len() as u64));
    g.bench_function("walk_type_table_300", |b| {
        b.iter(|| {
            for (i, f) in frames.iter_mut().enumerate() {
                if (i as u32).is_multiple_of(REPETITIONS) {
                    txn = txn.wrapping_add(1);
                }
                // h.transactionID, network byte order.
                f[8..12].copy_from_slice(&txn.to_be_bytes());
                // Decoded into the last request's memory, as the session's splitter does.
                let pdu = Pdu::decode_reusing(f, spare.take()).unwrap();
                let handled = agent.handle(&pdu, Instant::now(), true, &mut out);
                assert_eq!(handled, Handled::Reply);
                spare = Some(pdu);
            }
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
