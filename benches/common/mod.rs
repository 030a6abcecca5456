//! Shared helpers for the benchmarks (included with `#[path]`, not a bench of its own).
#![allow(dead_code)]

use memstat_agentx::memstat::{Allocator, MemoryType, PerCpu, Snapshot};
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

/// A UMA-like type with every memTypeTable column present and two per-CPU rows.
pub fn full_type(i: usize) -> MemoryType {
    let seed = i as u64;
    let big = (1u64 << 33) + seed;
    let mut t = MemoryType::new(Allocator::Uma, format!("zone-{i:06}"));
    t.size = Some(256 + seed);
    t.real_size = Some(272 + seed);
    t.count_limit = Some(1000 + seed);
    t.bytes_limit = Some(big * 3);
    t.in_use_count = Some(10 + seed);
    t.in_use_bytes = Some(big * 2);
    t.free_count = Some(5 + seed);
    t.total_count = Some(15 + seed);
    t.allocs = Some(big + 7);
    t.frees = Some(big);
    t.bytes_allocated = Some(big * 5);
    t.bytes_freed = Some(big * 4);
    t.failures = Some(seed);
    t.sleeps = Some(seed + 1);
    t.xdomain = Some(seed + 2);
    t.zone_free = Some(seed + 3);
    t.keg_free = Some(seed + 4);
    t.size_mask = Some(0x0102_0304_0506_0708 + seed);
    t.slab_bytes = Some(big * 6);
    t.per_cpu = (0..2)
        .map(|cpu| PerCpu {
            cpu,
            allocs: Some(big + u64::from(cpu)),
            frees: Some(seed),
            cache_free: Some(3),
        })
        .collect();
    t
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
