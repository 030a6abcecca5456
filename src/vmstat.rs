//! `dump --format vmstat`: a snapshot printed exactly as FreeBSD's `vmstat -m -z` prints it
//! when its standard output is not a terminal, in the layout of FreeBSD 13, 14 or 15.0
//! ([`Release`]).
//!
//! The layouts follow `usr.bin/vmstat/vmstat.c`, functions `domemstat_malloc` and
//! `domemstat_zone`, as read in these copies (the format strings are quoted where each
//! allocator prints its table, in `memstat::malloc` and `memstat::uma`):
//!
//! - 13: sobomax/freebsd14_vendor@0f7ff342 (a 13-era tree: the `-z` header runs `FAIL` and
//!   `SLEEP` together, `{T:/%8s}{T:/%4s}`);
//! - 14: freebsd/freebsd-src@01b1f8f1 (the same rows, with a blank in that header);
//! - 15.0: fel1x-developer/freebsd-src@2d614aa2 (2024 main, where the current layout was
//!   introduced), checked unchanged at CTSRD-CHERI/cheribsd@0506ab62 (a 2025 merge of main).
//!
//! vmstat prints through libxo, whose text style pads an anchored field (`{[:N}...{]:}`) to
//! at least N columns on the left, and pads a `%Ns` field by display columns (a wide
//! character counts two).
//!
//! - Which layout: the host's release (`kern.osreldate`) on FreeBSD, 15.0's elsewhere, unless
//!   `dump --vmstat-release` chooses one.
//! - vmstat humanizes the 15.0 `-m` figures (`{h,hn-decimal}`) only when its output is a
//!   terminal (or with `-h`): it sets libxo's `no-humanize` option unless `isatty(1)`. This
//!   module prints what vmstat prints to a pipe: whole numbers, never `1.2K`.
//! - Rows come in libmemstat's list order, the reverse of kernel order (libmemstat inserts
//!   each type at the head of its list), and a name the kernel has twice is printed twice,
//!   plainly (libmemstat keeps both entries on a first read, as vmstat's always is).
//! - The figures are libmemstat's: a UMA zone's requests are its allocations raised to its
//!   frees, in-use figures are differences modulo 2^64, and a zone's free count is a sum
//!   modulo 2^64, as libmemstat computes them (the snapshot's own levels are clamped or
//!   saturate; see [`crate::memstat::level_between`]). Names are libmemstat's copies, at most
//!   31 bytes.
//! - `vmstat -m` skips malloc types that have no allocations and nothing in use.
//! - The output is that of `vmstat -m -z`: the malloc table, then the zone table, as vmstat
//!   runs them in that order, each with its header even when it has no rows.
//! - The malloc zone sizes are the running kernel's, or else those of `kmemzones` in
//!   sys/kern/kern_malloc.c, the same table in the three releases (read at
//!   sobomax/freebsd14_vendor@0f7ff342 for 13 and at fel1x-developer/freebsd-src@2d614aa2).
//!
//! Deliberate differences, documented in memstat-agentx(8): a control character in a name (no
//! kernel registers such a name; a fixture could) is printed escaped, as in the table
//! format, rather than sent to the terminal; a name that is not valid UTF-8 was decoded with
//! U+FFFD when it was read (vmstat's libxo drops such a name from `-m`); and zero-width
//! characters count one column when a name is padded (libxo counts them zero).

pub use crate::memstat::VmstatRelease as Release;
use crate::memstat::{Allocator, MemoryType, Snapshot, VmstatTable};
use std::fmt;

/// The malloc zone sizes of FreeBSD 13 to 15.0 (`kmemzones` in `sys/kern/kern_malloc.c`, as
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

/// The layout `--format vmstat` prints here when none is chosen: the running kernel's
/// release on FreeBSD (`kern.osreldate`), else [`Release::DEFAULT`] (15.0).
pub fn host_release() -> Release {
    crate::memstat::sysctl::os_reldate().map_or(Release::DEFAULT, Release::from_osreldate)
}

/// The snapshot as `vmstat -m -z` of `release` prints it to a pipe. `zone_sizes` is the malloc
/// zone size table (`vm.malloc.zone_sizes`) that the size masks index.
pub fn render(s: &Snapshot, zone_sizes: &[u32], release: Release) -> Result<String, VmstatError> {
    // Rows of an allocator vmstat has no layout for (Linux slab caches) are refused.
    let unprintable = s
        .iter()
        .filter(|t| t.allocator.def().vmstat_table.is_none())
        .count();
    if unprintable > 0 {
        return Err(VmstatError::SlabRows { count: unprintable });
    }
    let mut out = String::new();
    for a in Allocator::ALL {
        let Some(print): Option<VmstatTable> = a.def().vmstat_table else {
            continue;
        };
        // libmemstat's list order: the reverse of kernel order.
        let rows: Vec<&MemoryType> = s.types.iter().filter(|t| t.allocator == a).rev().collect();
        // Every table with its header, rows or not: vmstat prints the header first.
        print(&mut out, &rows, zone_sizes, release);
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
        let e = render(&s, &FREEBSD_MALLOC_ZONE_SIZES, Release::V15).unwrap_err();
        assert_eq!(e, VmstatError::SlabRows { count: 1 });
        let m = e.to_string();
        assert!(
            m.contains("1 Linux slab cache") && m.contains("--format table"),
            "{m}"
        );
    }

    #[test]
    fn an_empty_snapshot_prints_both_headers() {
        let out = render(&snap(vec![]), &FREEBSD_MALLOC_ZONE_SIZES, Release::V15).unwrap();
        assert_eq!(
            out,
            "            Type  Use Memory Req Size(s)\n\
             ITEM                   SIZE   LIMIT     USED     FREE      REQ FAIL SLEEP XDOM\n"
        );
        let out = render(&snap(vec![]), &FREEBSD_MALLOC_ZONE_SIZES, Release::V14).unwrap();
        assert_eq!(
            out,
            "         Type InUse MemUse Requests  Size(s)\n\
             ITEM                   SIZE  LIMIT     USED     FREE      REQ     FAIL SLEEP XDOMAIN\n"
        );
        let out = render(&snap(vec![]), &FREEBSD_MALLOC_ZONE_SIZES, Release::V13).unwrap();
        assert!(out.ends_with("     FAILSLEEP XDOMAIN\n"), "{out}");
    }

    #[test]
    fn names_are_cut_to_31_bytes_and_padded_by_columns() {
        use crate::memstat::display::{columns, pad_left, pad_right, vmstat_name};
        assert_eq!(vmstat_name(&"x".repeat(40)), "x".repeat(31));
        // A 3-byte character across byte 31 is dropped whole.
        let name = format!("{}日", "x".repeat(30));
        assert_eq!(vmstat_name(&name), "x".repeat(30));
        assert_eq!(vmstat_name("a\\b\u{7}"), "a\\b\\x07");
        assert_eq!(columns("日本語タイプ"), 12);
        assert_eq!(columns("ａｂ〃"), 6);
        assert_eq!(columns("〿"), 1, "U+303F is not wide");
        assert_eq!(pad_left("日本", 6), "  日本");
        assert_eq!(pad_right("日本", 6), "日本  ");
        assert_eq!(pad_left("toolong", 3), "toolong");
    }
}
