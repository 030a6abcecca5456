//! Memory types for the tests of `top`, one builder per allocator, each with figures that
//! agree with one another (in-use bytes are in-use items × size, frees are allocations less
//! the items in use). Its unit tests (src/top/tests.rs) and tests/top_batch.rs, top_screen.rs
//! and top_snmp.rs include this file with `#[path]`; the includer has `Allocator` and
//! `MemoryType` in scope.
// Each includer uses only part of this file.
#![allow(dead_code)]

use super::{Allocator, MemoryType};

/// A UMA zone of 256-byte items: 3 free in its caches, no failure.
pub(crate) fn uma(name: &str, in_use: u64, allocs: u64) -> MemoryType {
    let mut t = MemoryType::new(Allocator::Uma, name);
    t.size = Some(256);
    t.in_use_count = Some(in_use);
    t.in_use_bytes = Some(in_use * 256);
    t.free_count = Some(3);
    t.allocs = Some(allocs);
    t.frees = Some(allocs - in_use);
    t.failures = Some(0);
    t
}

/// A malloc(9) type of `size`-byte requests, allocated twice for each one in use.
pub(crate) fn malloc(name: &str, in_use: u64, size: u64) -> MemoryType {
    let mut t = MemoryType::new(Allocator::Malloc, name);
    t.size = Some(size);
    t.in_use_count = Some(in_use);
    t.in_use_bytes = Some(in_use * size);
    t.allocs = Some(in_use * 2);
    t.frees = Some(in_use);
    t.failures = Some(0);
    t
}

/// A slab cache of 64-byte objects: levels only, as /proc/slabinfo gives them.
pub(crate) fn slab(name: &str, in_use: u64) -> MemoryType {
    let mut t = MemoryType::new(Allocator::Slab, name);
    t.size = Some(64);
    t.in_use_count = Some(in_use);
    t.in_use_bytes = Some(in_use * 64);
    t.free_count = Some(0);
    t
}
