//! Shared helpers for the benchmarks (included with `#[path]`, not a bench of its own).
#![allow(dead_code)]

use memstat_agentx::memstat::{Allocator, MemoryType, Snapshot};
use memstat_agentx::mib::MibView;
use std::sync::Arc;
use std::time::UNIX_EPOCH;

/// True under `cargo bench` (criterion gets `--bench`); false when `cargo test --all-targets`
/// runs the bench once in test mode, where the sizes are scaled down to keep the test fast.
pub fn full_run() -> bool {
    std::env::args().any(|a| a == "--bench")
}

/// `n` in a real benchmark run, `min(n, cap)` in test mode.
pub fn size(n: usize, cap: usize) -> usize {
    if full_run() {
        n
    } else {
        n.min(cap)
    }
}

#[path = "../../tests/support/full_type.rs"]
mod shared;

#[path = "../../tests/support/columns.rs"]
mod columns;

/// The accessible columns of memTypeEntry, counted from the MIB's definitions: the cells of
/// one [`full_type`] row.
pub fn type_columns() -> usize {
    columns::type_columns()
}

/// Checks that `cells` (memTypeTable instances) are every accessible column of `rows` rows,
/// naming the columns [`full_type`] leaves out (see tests/support/columns.rs).
pub fn assert_full_rows<'a>(cells: impl IntoIterator<Item = &'a [u32]>, rows: usize) {
    columns::assert_full_rows(cells, rows)
}

/// A UMA-like type with every memTypeTable column present and two per-CPU rows.
pub fn full_type(i: usize) -> MemoryType {
    shared::full_type(Allocator::Uma, &format!("zone-{i:06}"), i as u64)
}

/// A view of `n` full types with indexes 1..=n.
pub fn view_of(n: usize) -> MibView {
    let types: Vec<MemoryType> = (0..n).map(full_type).collect();
    let snap = Arc::new(Snapshot::new(1, UNIX_EPOCH, "bench".into(), types));
    let indexes: Vec<u32> = (1..=n as u32).collect();
    let disc = vec![0u32; n];
    MibView::new(snap, &indexes, &disc)
}

/// memTypeTable, from the MIB's definitions.
pub fn type_table() -> Vec<u32> {
    columns::object_oid("memTypeTable")
}

/// memTypeInUseBytes of row `index`.
pub fn in_use_bytes(index: u32) -> Vec<u32> {
    let mut v = columns::object_oid("memTypeInUseBytes");
    v.push(index);
    v
}
