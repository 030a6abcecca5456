//! The AgentX codec on the hot path: every varbind of a walk is one GetNext in and one
//! Response out (net-snmp turns a GetBulk into one GetNext per repetition).

use agentx_proto::oid::Oid;
use agentx_proto::pdu::{
    HeaderIds, Payload, Pdu, ResError, ResponseWriter, SearchRange, Value, VarBind,
};
use criterion::{black_box, criterion_group, criterion_main, Criterion};

#[path = "common/mod.rs"]
mod common;

/// A GetNext as net-snmp sends it during a walk: one range, from the last returned OID to
/// the end of our registration.
fn getnext_pdu() -> Pdu {
    let mut end = memstat_agentx::mib::MEMSTAT_MIB_ROOT.to_vec();
    *end.last_mut().unwrap() += 1;
    Pdu::new(
        7,
        1234,
        99,
        Payload::GetNext {
            ranges: vec![SearchRange {
                start: Oid(common::in_use_bytes(150)),
                include: false,
                end: Oid(end),
            }],
        },
    )
}

fn response_varbind() -> VarBind {
    VarBind {
        name: Oid(common::in_use_bytes(151)),
        value: Value::Counter64((1u64 << 34) + 151),
    }
}

fn response_pdu() -> Pdu {
    Pdu::new(
        7,
        1234,
        99,
        Payload::Response {
            sys_uptime: 0,
            error: ResError::NO_ERROR,
            index: 0,
            varbinds: vec![response_varbind()],
        },
    )
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("pdu");
    let getnext = getnext_pdu();
    let mut getnext_frame = Vec::new();
    getnext.encode(&mut getnext_frame);
    let response = response_pdu();
    let mut response_frame = Vec::new();
    response.encode(&mut response_frame);
    let vb = response_varbind();

    let mut out = Vec::with_capacity(64 * 1024);
    g.bench_function("getnext_encode", |b| {
        b.iter(|| {
            out.clear();
            black_box(&getnext).encode(&mut out);
            black_box(out.len())
        })
    });
    g.bench_function("getnext_decode", |b| {
        b.iter(|| Pdu::decode(black_box(&getnext_frame)).unwrap())
    });
    g.bench_function("response_encode_pdu", |b| {
        b.iter(|| {
            out.clear();
            black_box(&response).encode(&mut out);
            black_box(out.len())
        })
    });
    // What the session uses: the Response is written in place, one varbind at a time.
    g.bench_function("response_encode_writer", |b| {
        b.iter(|| {
            out.clear();
            let mut w = ResponseWriter::begin(
                &mut out,
                HeaderIds::new(7, 1234, 99),
                0,
                ResError::NO_ERROR,
                0,
            );
            w.push(black_box(&vb.name), black_box(&vb.value));
            w.finish()
        })
    });
    g.bench_function("response_decode", |b| {
        b.iter(|| Pdu::decode(black_box(&response_frame)).unwrap())
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
