//! A memory type with every figure present, shared by the tests and the benchmarks
//! (included with `#[path]`).

use memstat_agentx::memstat::{Allocator, MemoryType, PerCpu};

/// A type with every statistic set from `seed`, with values past 2^32.
pub fn full_type(alloc: Allocator, name: &str, seed: u64) -> MemoryType {
    let big = (1u64 << 33) + seed;
    let mut t = MemoryType::new(alloc, name);
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
    t.per_cpu = vec![
        PerCpu {
            cpu: 0,
            allocs: Some(big + 1),
            frees: Some(seed),
            cache_free: Some(3),
            bytes_allocated: Some(big * 7),
            bytes_freed: Some(big * 2),
            size_mask: Some(0x0807_0605_0403_0201 + seed),
        },
        PerCpu {
            cpu: 1,
            allocs: Some(2),
            frees: Some(1),
            cache_free: None,
            ..PerCpu::default()
        },
    ];
    t
}
