//! The `kern.malloc_stats` stream: FreeBSD malloc(9) type statistics.
//!
//! Layout (`sys/sys/malloc.h`, host byte order): a 16-byte `malloc_type_stream_header`
//! (version, maxcpus, count, pad), then for each type a 32-byte `malloc_type_header` (the name)
//! followed by `mtsh_maxcpus` 64-byte `malloc_type_stats` records. The kernel writes MAXCPU
//! records per type (1024 on amd64): real ones for CPUs `0..=mp_maxid`, zero padding after.
//!
//! Malloc types have no item size, limit, free count, failures or sleeps: those stay `None`.
//!
//! Counters are summed modulo 2^64, as libmemstat and the kernel sum them; the in-use levels
//! are computed modulo 2^64 too, then clamped to zero where a lock-free read shows more freed
//! than allocated ([`level_between`]).

use super::display::{bytes, display_name, opt, pad_left, vmstat_name, Sizes};
use super::stream::{self, array_at, u64_at, Names};
use super::{level_between, Allocator, MemoryType, PerCpu, SourceError};
use super::{AllocatorDef, VmstatRelease};
use std::fmt::Write as _;

/// The sysctl this stream is read from; also the `what` of its errors.
pub const WHAT: &str = "kern.malloc_stats";

/// `sizeof(struct malloc_type_header)`: just the name.
const TYPE_HEADER_LEN: usize = 32;

// Byte offsets inside `struct malloc_type_stats`.
const MTS_MEMALLOCED: usize = 0;
const MTS_MEMFREED: usize = 8;
const MTS_NUMALLOCS: usize = 16;
const MTS_NUMFREES: usize = 24;
const MTS_SIZE: usize = 32;

const _: () = assert!(stream::NAME_LEN == TYPE_HEADER_LEN);
const _: () = assert!(MTS_SIZE + 8 <= stream::PERCPU_LEN);

const NAMES: Names = Names {
    what: WHAT,
    prefix: "mtsh",
    unit: "type",
};

/// Parses a `kern.malloc_stats` stream into one [`MemoryType`] per malloc type, in stream
/// order.
///
/// `maxid` is `kern.smp.maxid`. Only records `0..=maxid` (clamped to `mtsh_maxcpus`) are
/// read, both for the per-CPU rows and for the totals: the kernel zero-fills the rest, so
/// summing them would change nothing, but on a typical machine it would mean reading 1024
/// records per type instead of a handful, and the stream is ~40 MB. Records are read in place,
/// never copied.
pub fn parse_malloc(buf: &[u8], maxid: u32) -> Result<Vec<MemoryType>, SourceError> {
    let layout = stream::layout(buf, &NAMES, TYPE_HEADER_LEN)?;
    let exposed = stream::exposed_cpus(maxid, layout.maxcpus);
    let mut types = Vec::with_capacity(layout.count as usize);
    for index in 0..layout.count {
        let at = stream::HEADER_LEN + index as usize * layout.record_len;
        types.push(parse_type(buf, index, at, exposed)?);
    }
    Ok(types)
}

fn parse_type(
    buf: &[u8],
    index: u32,
    at: usize,
    exposed: usize,
) -> Result<MemoryType, SourceError> {
    let truncated = |off: usize| {
        stream::malformed(
            &NAMES,
            format!("type {index} (byte {off})"),
            "",
            "record extends past the end of the stream".into(),
        )
    };
    let name_field: &[u8; TYPE_HEADER_LEN] = array_at(buf, at).ok_or_else(|| truncated(at))?;
    let mut t = MemoryType::new(
        Allocator::Malloc,
        stream::name(name_field, &NAMES, index, at),
    );

    let (mut bytes_allocated, mut bytes_freed, mut allocs, mut frees, mut size_mask) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    t.per_cpu.reserve_exact(exposed);
    let cpus_at = at + TYPE_HEADER_LEN;
    for cpu in 0..exposed {
        let off = cpus_at + cpu * stream::PERCPU_LEN;
        let r: &[u8; stream::PERCPU_LEN] = array_at(buf, off).ok_or_else(|| truncated(off))?;
        let (a, f) = (u64_at(r, MTS_NUMALLOCS), u64_at(r, MTS_NUMFREES));
        let (ba, bf) = (u64_at(r, MTS_MEMALLOCED), u64_at(r, MTS_MEMFREED));
        let mask = u64_at(r, MTS_SIZE);
        bytes_allocated = bytes_allocated.wrapping_add(ba);
        bytes_freed = bytes_freed.wrapping_add(bf);
        allocs = allocs.wrapping_add(a);
        frees = frees.wrapping_add(f);
        size_mask |= mask;
        t.per_cpu.push(PerCpu {
            cpu: cpu as u32,
            allocs: Some(a),
            frees: Some(f),
            cache_free: None,
            bytes_allocated: Some(ba),
            bytes_freed: Some(bf),
            size_mask: Some(mask),
        });
    }

    t.allocs = Some(allocs);
    t.frees = Some(frees);
    t.bytes_allocated = Some(bytes_allocated);
    t.bytes_freed = Some(bytes_freed);
    // Per-CPU counters are read without locks, so a snapshot can show more freed than
    // allocated; libmemstat then wraps to near 2^64, we report 0.
    t.in_use_count = Some(level_between(allocs, frees));
    t.in_use_bytes = Some(level_between(bytes_allocated, bytes_freed));
    t.size_mask = Some(size_mask);
    Ok(t)
}

/// malloc(9) types' place among the allocators.
pub const ALLOCATOR: AllocatorDef = AllocatorDef {
    module: module_path!(),
    allocator: Allocator::Malloc,
    name: "malloc",
    dump_table,
    vmstat_table: Some(vmstat_table),
};

/// `vmstat -m`: Type InUse MemUse Requests Size mask.
fn dump_table(out: &mut String, rows: &[&MemoryType], sizes: Sizes) {
    let _ = writeln!(
        out,
        "{:>16} {:>10} {:>12} {:>12}  SizeMask",
        "Type", "InUse", "MemUse", "Requests"
    );
    for t in rows {
        let _ = writeln!(
            out,
            "{:>16} {:>10} {:>12} {:>12}  {}",
            display_name(t),
            opt(t.in_use_count),
            bytes(t.in_use_bytes, sizes),
            opt(t.allocs),
            t.size_mask
                .map_or_else(|| "-".into(), |m| format!("{m:#x}")),
        );
    }
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

/// `vmstat -m`, in the layout of `release` (`domemstat_malloc` in usr.bin/vmstat/vmstat.c; see
/// [`crate::vmstat`] for the copies read):
///
/// - 15.0: the header `{T:/%16s} {T:/%4s} {T:/%5s} {T:/%3s} {T:Size(s)}` over `Type Use Memory
///   Req`, then per type the name as `%16s`, in-use, bytes and requests each padded on the
///   left to 4, 5 and 4 columns (libxo anchors `{[:N}..{]:}`; to a pipe vmstat does not
///   humanize them), a blank, and the sizes;
/// - 13 and 14: the header `{T:/%13s} {T:/%5s} {T:/%6s} {T:/%8s}  {T:Size(s)}` over `Type InUse
///   MemUse Requests`, then per type `%13s %5ju %5juK %8ju` (memory in KiB, `(bytes + 1023) /
///   1024` in `uintmax_t`, so it wraps as C's does), two blanks, and the sizes.
///
/// The sizes are those of the zones in the type's size mask, comma-separated. libxo pads the
/// name by display columns.
fn vmstat_table(
    out: &mut String,
    rows: &[&MemoryType],
    zone_sizes: &[u32],
    release: VmstatRelease,
) {
    let old = release < VmstatRelease::V15;
    let _ = if old {
        writeln!(
            out,
            "{:>13} {:>5} {:>6} {:>8}  Size(s)",
            "Type", "InUse", "MemUse", "Requests"
        )
    } else {
        writeln!(
            out,
            "{:>16} {:>4} {:>5} {:>3} Size(s)",
            "Type", "Use", "Memory", "Req"
        )
    };
    for t in rows {
        let (allocs, count, bytes) = malloc_figures(t);
        if allocs == 0 && count == 0 {
            continue;
        }
        let name = vmstat_name(&t.name);
        let _ = if old {
            let kib = bytes.wrapping_add(1023) / 1024;
            write!(
                out,
                "{} {count:>5} {kib:>5}K {allocs:>8}  ",
                pad_left(&name, 13)
            )
        } else {
            write!(
                out,
                "{} {count:>4} {bytes:>5} {allocs:>4} ",
                pad_left(&name, 16)
            )
        };
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

#[cfg(test)]
mod tests {
    use super::*;

    fn stream_of(maxcpus: u32, types: &[(&[u8], &[[u64; 5]])]) -> Vec<u8> {
        let mut s: Vec<u8> = [1, maxcpus, types.len() as u32, 0]
            .iter()
            .flat_map(|v: &u32| v.to_ne_bytes())
            .collect();
        for (name, cpus) in types {
            let mut n = [0u8; 32];
            n[..name.len()].copy_from_slice(name);
            s.extend(n);
            for i in 0..maxcpus as usize {
                let mut r = [0u8; 64];
                if let Some(c) = cpus.get(i) {
                    for (k, v) in c.iter().enumerate() {
                        r[k * 8..k * 8 + 8].copy_from_slice(&v.to_ne_bytes());
                    }
                }
                s.extend(r);
            }
        }
        s
    }

    #[test]
    fn sums_exposed_cpus_and_leaves_absent_figures_none() {
        let s = stream_of(
            8,
            &[(
                b"devbuf\0",
                &[[4096, 1024, 10, 4, 0b10], [64, 128, 1, 2, 0b100]],
            )],
        );
        let t = parse_malloc(&s, 1).unwrap();
        let d = &t[0];
        assert_eq!(
            (d.allocator, d.name.as_str()),
            (Allocator::Malloc, "devbuf")
        );
        assert_eq!(
            (d.allocs, d.frees, d.in_use_count),
            (Some(11), Some(6), Some(5))
        );
        assert_eq!(
            (d.bytes_allocated, d.bytes_freed, d.in_use_bytes),
            (Some(4160), Some(1152), Some(3008))
        );
        assert_eq!(d.size_mask, Some(0b110));
        assert_eq!(d.per_cpu.len(), 2);
        assert_eq!(
            d.per_cpu[1],
            PerCpu {
                cpu: 1,
                allocs: Some(1),
                frees: Some(2),
                cache_free: None,
                bytes_allocated: Some(64),
                bytes_freed: Some(128),
                size_mask: Some(0b100),
            }
        );
        for absent in [
            d.size,
            d.real_size,
            d.count_limit,
            d.bytes_limit,
            d.free_count,
            d.failures,
            d.sleeps,
            d.keg_free,
            d.zone_free,
            d.xdomain,
        ] {
            assert_eq!(absent, None);
        }
    }

    #[test]
    fn rejects_bad_headers() {
        let mut s = stream_of(1, &[(b"a\0", &[])]);
        s[0] = 7;
        assert!(matches!(
            parse_malloc(&s, 0),
            Err(SourceError::UnsupportedVersion { .. })
        ));
        let mut s = stream_of(1, &[]);
        s[4..8].copy_from_slice(&70000u32.to_ne_bytes());
        let e = parse_malloc(&s, 0).unwrap_err();
        assert!(
            matches!(&e, SourceError::Malformed { field, .. } if field == "mtsh_maxcpus"),
            "{e:?}"
        );
    }
}
