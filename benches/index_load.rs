//! Loading the index state file: 100,000 entries must load in well under 100 ms (loading
//! used to be quadratic in the number of entries).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use memstat_agentx::index::TypeIndexes;
use memstat_agentx::memstat::{Allocator, MemoryType};

#[path = "common/mod.rs"]
mod common;

fn load(c: &mut Criterion) {
    // Scaled down when `cargo test --all-targets` runs this once as a smoke test.
    let entries = common::size(100_000, 1_000);
    let dir = tempfile::tempdir().unwrap();
    // The file is written by the code under test, so the bench reads the real format.
    let types: Vec<MemoryType> = (0..entries)
        .map(|i| MemoryType::new(Allocator::Uma, format!("zone-{i:06}")))
        .collect();
    let (mut indexes, problems) = TypeIndexes::load(dir.path());
    assert!(problems.is_empty());
    let assigned = indexes.assign(&types);
    assert!(assigned.problems.is_empty(), "{:?}", assigned.problems);

    let mut g = c.benchmark_group("index_load");
    g.throughput(Throughput::Elements(entries as u64));
    g.bench_function(format!("{entries}_entries"), |b| {
        b.iter(|| {
            let (loaded, problems) = TypeIndexes::load(dir.path());
            assert!(problems.is_empty());
            assert_eq!(loaded.len(), entries);
            loaded
        })
    });
    g.finish();
}

criterion_group!(benches, load);
criterion_main!(benches);
