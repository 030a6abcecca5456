//! Answering from a snapshot: one GetNext at several table sizes, and a whole walk of
//! memTypeTable in process.

use criterion::{black_box, criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion};
use memstat_agentx::memstat::{MemoryType, Snapshot};
use memstat_agentx::mib::MibView;
use std::sync::Arc;
use std::time::UNIX_EPOCH;

#[path = "common/mod.rs"]
mod common;

/// Every varbind of memTypeTable, by repeated GetNext from the table's OID.
fn walk_type_table(view: &MibView) -> usize {
    let table = common::type_table();
    let mut cur = table.clone();
    let mut n = 0;
    while let Some(found) = view.get_next(&cur, false, &[]) {
        if !found.oid.starts_with(&table) {
            break;
        }
        black_box(&found.value);
        cur = found.oid.0;
        n += 1;
    }
    n
}

/// The names [`walk_type_table`] walks, outside the timing.
fn type_table_cells(view: &MibView) -> Vec<Vec<u32>> {
    let table = common::type_table();
    let mut cells: Vec<Vec<u32>> = Vec::new();
    let mut cur = table.clone();
    while let Some(found) = view.get_next(&cur, false, &[]) {
        if !found.oid.starts_with(&table) {
            break;
        }
        cur = found.oid.0;
        cells.push(cur.clone());
    }
    cells
}

fn get_next(c: &mut Criterion) {
    let mut g = c.benchmark_group("mib_get_next");
    // 100,000 types take a while to build; in test mode the sizes are capped.
    let mut done = Vec::new();
    for n in [300usize, 1_000, 10_000, 100_000] {
        let real = common::size(n, 1_000);
        if done.contains(&real) {
            continue;
        }
        done.push(real);
        let view = common::view_of(real);
        let start = common::in_use_bytes(real as u32 / 2);
        g.bench_with_input(BenchmarkId::from_parameter(real), &start, |b, start| {
            b.iter(|| view.get_next(black_box(start), false, &[]))
        });
    }
    g.finish();
}

fn walk(c: &mut Criterion) {
    let mut g = c.benchmark_group("mib_walk_type_table");
    let view = common::view_of(300);
    // 300 rows × every accessible column of memTypeEntry, as the MIB's definitions count
    // them (full_type fills each, or this says which it does not).
    let cells = type_table_cells(&view);
    common::assert_full_rows(cells.iter().map(Vec::as_slice), 300);
    assert_eq!(walk_type_table(&view), 300 * common::type_columns());
    g.bench_function("300", |b| b.iter(|| walk_type_table(&view)));
    g.finish();
}

/// Laying out a snapshot, which every refresh does (off the request path, but on the path of
/// the request that triggers the refresh, which the master times out after 1 s).
fn view_new(c: &mut Criterion) {
    let mut g = c.benchmark_group("mib_view_new");
    g.sample_size(10);
    let mut done = Vec::new();
    for n in [1_000usize, 10_000] {
        let n = common::size(n, 1_000);
        if done.contains(&n) {
            continue;
        }
        done.push(n);
        let types: Vec<MemoryType> = (0..n).map(common::full_type).collect();
        let indexes: Vec<u32> = (1..=n as u32).collect();
        let disc = vec![0u32; n];
        g.bench_with_input(BenchmarkId::from_parameter(n), &types, |b, types| {
            b.iter_batched(
                || Arc::new(Snapshot::new(1, UNIX_EPOCH, String::new(), types.clone())),
                |snap| MibView::new(snap, &indexes, &disc),
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, get_next, walk, view_new);
criterion_main!(benches);
