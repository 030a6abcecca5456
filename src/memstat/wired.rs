//! FreeBSD's wired memory and what holds it, as rows of memKernelTable: the `freebsd`
//! source reads these sysctls beside its two streams (see `sysctl.rs`, which resolves each
//! name to its MIB once and reads it with the same ENOMEM retry as the streams), and this
//! module turns their values into figures. It is plain Rust, tested on every platform with
//! values laid out as the kernel's types are.
//!
//! What each is, read in FreeBSD's sources (freebsd-src main; see MEMSTAT-MIB's
//! MemKernelKind for the overlaps):
//! - `vm.stats.vm.v_wire_count`: wired pages (u_int, sys/vm/vm_meter.c), times `hw.pagesize`;
//! - `vm.stats.vm.v_user_wire_count`: pages wired by user processes (mlock(2)), charged per
//!   mapping, so a part of wired only approximately;
//! - `vm.uma_kmem_total`: the bytes of every UMA slab, free items included, and of large
//!   malloc(9) requests (sys/vm/uma_core.c, uma_total_inc); UMA's pages are wired;
//! - the malloc(9) total: the malloc types' memory in use, from `kern.malloc_stats`. Small
//!   requests come from UMA's malloc-N zones and large ones are counted in UMA's total, so
//!   malloc is inside UMA, except contigmalloc(9), which is counted in its malloc type but
//!   not in UMA's total;
//! - `kstat.zfs.misc.arcstats.size`: the ZFS ARC, whose buffers are UMA zones (zio_buf_*,
//!   zio_data_buf_*, abd_chunk), so inside UMA; present while ZFS is loaded;
//! - `vfs.bufspace`: the buffer cache's bytes (sys/kern/vfs_bio.c), wired pages that are
//!   not UMA's;
//! - other wired: wired minus UMA minus the buffer cache, floored at 0, because the sysctls
//!   are read one after the other and the figures move in between.

use super::source_def::KernelKind;
use super::Figures;

/// The sysctls read, each with the figure its raw value is kept under (the page counts and
/// the page size are not served as they are; the others are bytes already). The ARC's size
/// is read with its other statistics, as `arcstats.size`.
pub(crate) const SYSCTLS: &[(&str, &str)] = &[
    ("hw.pagesize", PAGE_SIZE),
    ("vm.stats.vm.v_wire_count", WIRED_PAGES),
    ("vm.stats.vm.v_user_wire_count", USER_WIRED_PAGES),
    ("vm.uma_kmem_total", UMA),
    ("vfs.bufspace", BUFSPACE),
];

/// Raw values, as read (not served: no kind has these figures).
const PAGE_SIZE: &str = "sysctl.hw.pagesize";
const WIRED_PAGES: &str = "sysctl.v_wire_count";
const USER_WIRED_PAGES: &str = "sysctl.v_user_wire_count";

/// The served figures, in bytes.
pub const WIRED: &str = "freebsd.wired";
pub const USER_WIRED: &str = "freebsd.wired_user";
pub const UMA: &str = "freebsd.uma";
pub const MALLOC: &str = "freebsd.malloc";
pub const ARC: &str = "freebsd.zfs_arc";
pub const BUFSPACE: &str = "freebsd.bufspace";
pub const OTHER_WIRED: &str = "freebsd.wired_other";

/// The rows the `freebsd` source fills: wired, and what holds it.
pub const KINDS: &[KernelKind] = &[
    KernelKind {
        index: 32,
        name: "wired",
        figure: WIRED,
        from: "vm.stats.vm.v_wire_count",
        parent: 0,
        reclaimable: false,
        stackable: true,
    },
    KernelKind {
        index: 33,
        name: "wiredUser",
        figure: USER_WIRED,
        from: "vm.stats.vm.v_user_wire_count",
        parent: 32,
        reclaimable: false,
        // Charged per mapping, and not subtracted from wiredOther: it overlaps it.
        stackable: false,
    },
    KernelKind {
        index: 34,
        name: "uma",
        figure: UMA,
        from: "vm.uma_kmem_total",
        parent: 32,
        reclaimable: false,
        stackable: true,
    },
    KernelKind {
        index: 35,
        name: "malloc",
        figure: MALLOC,
        from: "kern.malloc_stats",
        parent: 34,
        reclaimable: false,
        // contigmalloc(9)'s bytes are in it and not in UMA's total.
        stackable: false,
    },
    KernelKind {
        index: 36,
        name: "zfsArcWired",
        figure: ARC,
        from: "kstat.zfs.misc.arcstats.size",
        parent: 34,
        reclaimable: true,
        stackable: true,
    },
    KernelKind {
        index: 37,
        name: "bufferCache",
        figure: BUFSPACE,
        from: "vfs.bufspace",
        parent: 32,
        reclaimable: true,
        stackable: true,
    },
    KernelKind {
        index: 38,
        name: "wiredOther",
        figure: OTHER_WIRED,
        from: "wired minus uma minus bufferCache",
        parent: 32,
        reclaimable: false,
        stackable: true,
    },
];

#[cfg_attr(not(target_os = "freebsd"), allow(dead_code))]
/// A sysctl's value as the kernel lays it out: an int, u_int, long or u_long (4 or 8 bytes,
/// native order). `None` for another length.
pub(crate) fn value_of(bytes: &[u8]) -> Option<u64> {
    match bytes.len() {
        // hw.pagesize is an int, the page counts u_ints: all of them non-negative.
        4 => Some(u64::from(u32::from_ne_bytes(bytes.try_into().ok()?))),
        8 => Some(u64::from_ne_bytes(bytes.try_into().ok()?)),
        _ => None,
    }
}

/// The served figures from the sysctls' raw values (by [`SYSCTLS`]' figure names; an
/// absent sysctl is absent) and the malloc types' bytes in use (`None`: no malloc type had
/// the figure).
pub(crate) fn figures(raw: &Figures, malloc_in_use: Option<u64>) -> Figures {
    let mut out = Figures::new();
    let page = raw.get(PAGE_SIZE).copied();
    let pages = |f: &str| Some(raw.get(f)?.saturating_mul(page?));
    let wired = pages(WIRED_PAGES);
    let mut put = |k: &str, v: Option<u64>| {
        if let Some(v) = v {
            out.insert(k.to_string(), v);
        }
    };
    put(WIRED, wired);
    put(USER_WIRED, pages(USER_WIRED_PAGES));
    put(UMA, raw.get(UMA).copied());
    put(MALLOC, malloc_in_use);
    // Read once, with the ARC's other statistics (`arcstats::served_statistics`).
    put(ARC, raw.get(super::arcstats::SIZE).copied());
    put(BUFSPACE, raw.get(BUFSPACE).copied());
    if let (Some(w), Some(u)) = (wired, raw.get(UMA)) {
        let b = raw.get(BUFSPACE).copied().unwrap_or(0);
        put(OTHER_WIRED, Some(w.saturating_sub(*u).saturating_sub(b)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(values: &[(&str, u64)]) -> Figures {
        values.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn wired_is_pages_times_the_page_size_and_other_wired_the_rest() {
        let r = raw(&[
            (PAGE_SIZE, 4096),
            (WIRED_PAGES, 1000),
            (USER_WIRED_PAGES, 10),
            (UMA, 2_000_000),
            (BUFSPACE, 1_000_000),
        ]);
        let f = figures(&r, Some(500_000));
        assert_eq!(f[WIRED], 4_096_000);
        assert_eq!(f[USER_WIRED], 40_960);
        assert_eq!(f[UMA], 2_000_000);
        assert_eq!(f[MALLOC], 500_000);
        assert_eq!(f[BUFSPACE], 1_000_000);
        assert_eq!(f[OTHER_WIRED], 4_096_000 - 2_000_000 - 1_000_000);
        // No ZFS: no ARC figure.
        assert!(!f.contains_key(ARC));
        // The raw values are not served.
        assert!(f.keys().all(|k| KINDS.iter().any(|kind| kind.figure == k)));
    }

    #[test]
    fn other_wired_is_floored_when_the_figures_moved_between_reads() {
        let r = raw(&[(PAGE_SIZE, 4096), (WIRED_PAGES, 100), (UMA, 1 << 30)]);
        assert_eq!(figures(&r, None)[OTHER_WIRED], 0);
    }

    #[test]
    fn without_the_page_size_or_uma_nothing_is_made_up() {
        let f = figures(&raw(&[(WIRED_PAGES, 100)]), None);
        assert!(
            !f.contains_key(WIRED) && !f.contains_key(OTHER_WIRED),
            "{f:?}"
        );
        let f = figures(&raw(&[(PAGE_SIZE, 4096), (WIRED_PAGES, 100)]), None);
        assert_eq!(f[WIRED], 409_600);
        assert!(!f.contains_key(OTHER_WIRED), "{f:?}");
    }

    #[test]
    fn values_are_read_as_the_kernel_lays_them_out() {
        assert_eq!(value_of(&4096i32.to_ne_bytes()), Some(4096));
        assert_eq!(value_of(&7u32.to_ne_bytes()), Some(7));
        assert_eq!(value_of(&(1u64 << 40).to_ne_bytes()), Some(1 << 40));
        assert_eq!(value_of(&[1, 2]), None);
        assert_eq!(value_of(&[0; 16]), None);
    }
}
