//! Shared helpers for the benchmarks (included with `#[path]`, not a bench of its own).
#![allow(dead_code)]

use memstat_agentx::memstat::{Allocator, MemoryType, Snapshot};
use memstat_agentx::mib::{DaemonStatus, MibView, SourceStatus, MEMSTAT_MIB_ROOT};
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

pub fn status() -> DaemonStatus {
    DaemonStatus {
        uptime_ticks: 12345,
        snapshot_time_ms: Some(1_700_000_000_000),
        snapshot_generation: Some(1),
        snapshot_age_ms: Some(10),
        refreshes: 1,
        refresh_failures: 0,
        source_name: "bench".into(),
        status: SourceStatus::Ok,
        last_error: String::new(),
        notifications_sent: 0,
        notifications_dropped: 0,
        sources: Vec::new(),
    }
}

/// memTypeTable (`memstatObjects.2`).
pub fn type_table() -> Vec<u32> {
    let mut v = MEMSTAT_MIB_ROOT.to_vec();
    v.extend_from_slice(&[1, 2]);
    v
}

/// memTypeInUseBytes (column 10) of row `index`.
pub fn in_use_bytes(index: u32) -> Vec<u32> {
    let mut v = type_table();
    v.extend_from_slice(&[1, 10, index]);
    v
}
