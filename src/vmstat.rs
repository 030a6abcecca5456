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

use crate::memstat::{Allocator, MemoryType, Snapshot, VmstatTable};
use std::fmt;

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
    // Rows of an allocator vmstat has no layout for (Linux slab caches) are refused.
    let unprintable = s
        .iter()
        .filter(|t| t.allocator.def().vmstat_table.is_none())
        .count();
    if unprintable > 0 {
        return Err(VmstatError::SlabRows { count: unprintable });
    }
    let sections: Vec<(VmstatTable, Vec<&MemoryType>)> = Allocator::ALL
        .iter()
        .filter_map(|a| {
            let print = a.def().vmstat_table?;
            // libmemstat's list order: the reverse of kernel order.
            let rows = s.types.iter().filter(|t| t.allocator == *a).rev().collect();
            Some((print, rows))
        })
        .collect();
    // An empty snapshot still gets every section's header, as vmstat prints them.
    let none = sections.iter().all(|(_, rows)| rows.is_empty());
    let mut out = String::new();
    for (print, rows) in &sections {
        if !rows.is_empty() || none {
            print(&mut out, rows, zone_sizes);
        }
    }
    Ok(out)
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
