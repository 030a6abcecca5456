//! `dump --format vmstat`: a snapshot printed exactly as FreeBSD's `vmstat -m` and `vmstat -z`
//! print it when their standard output is not a terminal.
//!
//! The layout follows `usr.bin/vmstat/vmstat.c` of FreeBSD 15.0 (`domemstat_malloc` and
//! `domemstat_zone`), read at fel1x-developer/freebsd-src@2d614aa2 (2024 main, where the
//! current layout was introduced) and checked unchanged at CTSRD-CHERI/cheribsd@0506ab62 (a
//! 2025 merge of main); vmstat prints through libxo, whose text style pads an anchored field
//! (`{[:N}...{]:}`) to at least N columns on the left.
//!
//! - vmstat humanizes the `-m` figures (`{h,hn-decimal}`) only when its output is a terminal
//!   (or with `-h`): it sets libxo's `no-humanize` option unless `isatty(1)`. This module
//!   prints what vmstat prints to a pipe: whole numbers, never `1.2K`.
//! - Rows come in libmemstat's list order, the reverse of kernel order (libmemstat inserts
//!   each type at the head of its list), and a name the kernel has twice is printed twice,
//!   plainly (libmemstat keeps both entries on a first read, as vmstat's always is).
//! - The figures are libmemstat's: a UMA zone's requests are its allocations raised to its
//!   frees, and in-use figures are differences modulo 2^64, as libmemstat computes them (the
//!   snapshot's own in-use figures are clamped; see [`crate::memstat::level_between`]).
//! - `vmstat -m` skips malloc types that have no allocations and nothing in use.
//! - With both allocators the output is that of `vmstat -m -z`: the malloc table, then the
//!   zone table, as vmstat runs them in that order.
//!
//! One deliberate difference: a control character in a name (no kernel registers such a name;
//! a fixture could) is printed escaped, as in the table format, rather than sent to the
//! terminal.

use crate::escape::escape_controls;
use crate::memstat::{Allocator, MemoryType, Snapshot};
use std::fmt::{self, Write};

/// The malloc zone sizes of FreeBSD 15.0 (`kmemzones` in `sys/kern/kern_malloc.c`, as
/// `vm.malloc.zone_sizes` reports them, with the terminating 0 that `vm.malloc.zone_count`
/// counts). Used when the snapshot was not read from the running FreeBSD kernel.
pub const FREEBSD_MALLOC_ZONE_SIZES: [u32; 15] = [
    16, 32, 64, 128, 256, 384, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 0,
];

/// Why a snapshot cannot be printed as vmstat prints it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VmstatError {
    /// The snapshot has Linux slab caches, for which there is no vmstat.
    SlabRows { count: usize },
}

impl fmt::Display for VmstatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VmstatError::SlabRows { count } => write!(
                f,
                "--format vmstat prints FreeBSD UMA zones and malloc types as vmstat -z and \
                 vmstat -m do; this snapshot has {count} Linux slab cache(s), which vmstat has \
                 no layout for: use --format table or --format json"
            ),
        }
    }
}

impl std::error::Error for VmstatError {}

/// The snapshot as `vmstat -m -z` prints it to a pipe. `zone_sizes` is the malloc zone size
/// table (`vm.malloc.zone_sizes`) that the size masks index.
pub fn render(s: &Snapshot, zone_sizes: &[u32]) -> Result<String, VmstatError> {
    let slabs = s.iter().filter(|t| t.allocator == Allocator::Slab).count();
    if slabs > 0 {
        return Err(VmstatError::SlabRows { count: slabs });
    }
    let of = |a: Allocator| -> Vec<&MemoryType> {
        // libmemstat's list order: the reverse of kernel order.
        s.types.iter().filter(|t| t.allocator == a).rev().collect()
    };
    let (malloc, uma) = (of(Allocator::Malloc), of(Allocator::Uma));
    let neither = malloc.is_empty() && uma.is_empty();
    let mut out = String::new();
    if !malloc.is_empty() || neither {
        malloc_table(&mut out, &malloc, zone_sizes);
    }
    if !uma.is_empty() || neither {
        zone_table(&mut out, &uma);
    }
    Ok(out)
}

/// libmemstat's `numallocs` and `count` of a malloc type: the sums, and their difference
/// modulo 2^64 (no clamp). A fixture row without the counters falls back to its level.
fn malloc_figures(t: &MemoryType) -> (u64, u64, u64) {
    let allocs = t.allocs.unwrap_or(0);
    let count = match (t.allocs, t.frees) {
        (Some(a), Some(f)) => a.wrapping_sub(f),
        _ => t.in_use_count.unwrap_or(0),
    };
    let bytes = match (t.bytes_allocated, t.bytes_freed) {
        (Some(a), Some(f)) => a.wrapping_sub(f),
        _ => t.in_use_bytes.unwrap_or(0),
    };
    (allocs, count, bytes)
}

/// `vmstat -m`: `{T:/%16s} {T:/%4s} {T:/%5s} {T:/%3s} {T:Size(s)}` over `Type Use Memory Req`,
/// then per type `%16s`, in-use, bytes and requests each padded on the left to 4, 5 and 4
/// columns, a blank, and the sizes of the zones in the type's size mask, comma-separated.
fn malloc_table(out: &mut String, rows: &[&MemoryType], zone_sizes: &[u32]) {
    let _ = writeln!(
        out,
        "{:>16} {:>4} {:>5} {:>3} Size(s)",
        "Type", "Use", "Memory", "Req"
    );
    for t in rows {
        let (allocs, count, bytes) = malloc_figures(t);
        if allocs == 0 && count == 0 {
            continue;
        }
        let _ = write!(
            out,
            "{:>16} {count:>4} {bytes:>5} {allocs:>4} ",
            escape_controls(&t.name)
        );
        let mask = t.size_mask.unwrap_or(0);
        let mut first = true;
        // memstat_malloc_zone_used tests bit n of the mask for each n below
        // vm.malloc.zone_count (at most 32).
        for (n, size) in zone_sizes.iter().enumerate().take(32) {
            if mask & (1u64 << n) != 0 {
                if !first {
                    out.push(',');
                }
                let _ = write!(out, "{size}");
                first = false;
            }
        }
        out.push('\n');
    }
}

/// `vmstat -z`: `{T:/%-19s} {T:/%7s} {T:/%7s} {T:/%8s} {T:/%8s} {T:/%8s} {T:/%4s} {T:/%4s}
/// {T:/%4s}`, then per zone `name:` followed by the size right-aligned in
/// `MAX(1, 26 - strlen(name))` columns and `,%7ju,%8ju,%8ju,%8ju,%4ju,%4ju,%4ju`.
fn zone_table(out: &mut String, rows: &[&MemoryType]) {
    let _ = writeln!(
        out,
        "{:<19} {:>7} {:>7} {:>8} {:>8} {:>8} {:>4} {:>4} {:>4}",
        "ITEM", "SIZE", "LIMIT", "USED", "FREE", "REQ", "FAIL", "SLEEP", "XDOM"
    );
    for t in rows {
        // libmemstat raises the allocations to the frees when a lock-free read shows more
        // frees, and computes in use from the raised figure.
        let (req, used) = match (t.allocs, t.frees) {
            (Some(a), Some(f)) => {
                let req = a.max(f);
                (req, req.wrapping_sub(f))
            }
            (a, _) => (a.unwrap_or(0), t.in_use_count.unwrap_or(0)),
        };
        let name = escape_controls(&t.name);
        // strlen counts bytes; the width is at least 1.
        let width = 26usize.saturating_sub(name.len()).max(1);
        let n = |v: Option<u64>| v.unwrap_or(0);
        let _ = writeln!(
            out,
            "{name}:{:>width$},{:>7},{used:>8},{:>8},{req:>8},{:>4},{:>4},{:>4}",
            n(t.size),
            n(t.count_limit),
            n(t.free_count),
            n(t.failures),
            n(t.sleeps),
            n(t.xdomain),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    fn snap(types: Vec<MemoryType>) -> Snapshot {
        let mut types = types;
        crate::memstat::assign_ordinals(&mut types);
        Snapshot::new(0, UNIX_EPOCH, "t".into(), types)
    }

    #[test]
    fn slab_rows_are_refused_with_a_clear_message() {
        let s = snap(vec![
            MemoryType::new(Allocator::Uma, "a"),
            MemoryType::new(Allocator::Slab, "dentry"),
        ]);
        let e = render(&s, &FREEBSD_MALLOC_ZONE_SIZES).unwrap_err();
        assert_eq!(e, VmstatError::SlabRows { count: 1 });
        let m = e.to_string();
        assert!(
            m.contains("1 Linux slab cache") && m.contains("--format table"),
            "{m}"
        );
    }

    #[test]
    fn an_empty_snapshot_prints_both_headers() {
        let out = render(&snap(vec![]), &FREEBSD_MALLOC_ZONE_SIZES).unwrap();
        assert_eq!(
            out,
            "            Type  Use Memory Req Size(s)\n\
             ITEM                   SIZE   LIMIT     USED     FREE      REQ FAIL SLEEP XDOM\n"
        );
    }
}
