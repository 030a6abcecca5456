//! The `vm.zone_stats` stream: FreeBSD UMA zone statistics.
//!
//! Layout (`sys/vm/uma.h`, host byte order): a 16-byte `uma_stream_header` (version, maxcpus,
//! count, pad), then for each zone a 120-byte `uma_type_header` followed by `ush_maxcpus`
//! 64-byte `uma_percpu_stat` records. The kernel writes `mp_maxid + 1` records per zone, all
//! real.
//!
//! The figures are derived as libmemstat's `memstat_sysctl_uma` derives them: counters are
//! summed and multiplied modulo 2^64, as libmemstat's `uint64_t` arithmetic and the kernel's
//! own counters do, so a counter that passes 2^64 wraps to a small number and goes on counting
//! (a poller sees one wrap, not a value stuck at the top). There are three deliberate
//! differences: allocs and frees are the raw sums (libmemstat raises allocs to frees when a
//! lock-free snapshot shows more frees, which makes the counter non-monotonic), the in-use
//! level is clamped to zero where a lock-free read shows more frees than allocations
//! ([`level_between`]; libmemstat wraps to a number near 2^64), and the byte limit is computed
//! in 64 bits (libmemstat multiplies two `uint32_t`s and wraps).

use super::display::{bytes, display_name, opt, pad_right, vmstat_name, Sizes};
use super::stream::{self, array_at, u32_at, u64_at, Names};
use super::{level_between, Allocator, MemoryType, PerCpu, SourceError};
use super::{AllocatorDef, VmstatRelease};
use std::fmt::Write as _;

/// The sysctl this stream is read from; also the `what` of its errors.
pub const WHAT: &str = "vm.zone_stats";

/// `sizeof(struct uma_type_header)`.
const TYPE_HEADER_LEN: usize = 120;

// Byte offsets inside `struct uma_type_header`.
const UTH_NAME: usize = 0;
const UTH_SIZE: usize = 36;
const UTH_RSIZE: usize = 40;
const UTH_LIMIT: usize = 48;
const UTH_KEG_FREE: usize = 56;
const UTH_ZONE_FREE: usize = 60;
const UTH_ZONE_FLAGS: usize = 68;
const UTH_ALLOCS: usize = 72;
const UTH_FREES: usize = 80;
const UTH_FAILS: usize = 88;
const UTH_SLEEPS: usize = 96;
const UTH_XDOMAIN: usize = 104;

// Byte offsets inside `struct uma_percpu_stat`.
const UPS_ALLOCS: usize = 0;
const UPS_FREES: usize = 8;
const UPS_CACHE_FREE: usize = 16;

/// `uth_zone_flags` bit: the zone shares its keg with an earlier (primary) zone.
const UTH_ZONE_SECONDARY: u32 = 0x1;

// Every field read lies inside its record.
const _: () = assert!(UTH_XDOMAIN + 8 <= TYPE_HEADER_LEN);
const _: () = assert!(UTH_NAME + stream::NAME_LEN <= TYPE_HEADER_LEN);
const _: () = assert!(UPS_CACHE_FREE + 8 <= stream::PERCPU_LEN);

const NAMES: Names = Names {
    what: WHAT,
    prefix: "ush",
    unit: "zone",
};

/// Parses a `vm.zone_stats` stream into one [`MemoryType`] per zone, in stream order.
///
/// `maxid` is `kern.smp.maxid`: per-CPU rows are produced for CPUs `0..=maxid` (clamped to the
/// records the stream has). The totals sum every record in the stream, as libmemstat does;
/// for UMA all of them are real CPUs, since the kernel writes exactly `mp_maxid + 1`.
///
/// Nothing is allocated beyond what the buffer length justifies: the header's counts are
/// checked against the length before any record is read.
pub fn parse_uma(buf: &[u8], maxid: u32) -> Result<Vec<MemoryType>, SourceError> {
    let layout = stream::layout(buf, &NAMES, TYPE_HEADER_LEN)?;
    let exposed = stream::exposed_cpus(maxid, layout.maxcpus);
    let mut types = Vec::with_capacity(layout.count as usize);
    for index in 0..layout.count {
        let at = stream::HEADER_LEN + index as usize * layout.record_len;
        types.push(parse_zone(buf, index, at, layout.maxcpus, exposed)?);
    }
    Ok(types)
}

fn parse_zone(
    buf: &[u8],
    index: u32,
    at: usize,
    maxcpus: u32,
    exposed: usize,
) -> Result<MemoryType, SourceError> {
    let truncated = |off: usize| {
        stream::malformed(
            &NAMES,
            format!("zone {index} (byte {off})"),
            "",
            "record extends past the end of the stream".into(),
        )
    };
    let h: &[u8; TYPE_HEADER_LEN] = array_at(buf, at).ok_or_else(|| truncated(at))?;
    let name_field: &[u8; stream::NAME_LEN] = array_at(h, UTH_NAME).ok_or_else(|| truncated(at))?;
    let mut t = MemoryType::new(Allocator::Uma, stream::name(name_field, &NAMES, index, at));

    let size = u64::from(u32_at(h, UTH_SIZE));
    let limit = u64::from(u32_at(h, UTH_LIMIT));
    let zone_free = u64::from(u32_at(h, UTH_ZONE_FREE));
    let secondary = u32_at(h, UTH_ZONE_FLAGS) & UTH_ZONE_SECONDARY != 0;
    // The keg's free items are reported on its primary zone only (as libmemstat does):
    // repeating the keg's figure on a secondary zone would count them twice when zones are
    // summed. For a secondary zone the figure is absent, as the MIB's memTypeKegFree says,
    // and its free count is cache + zone free.
    let keg_free = if secondary {
        0
    } else {
        u64::from(u32_at(h, UTH_KEG_FREE))
    };

    let mut allocs = u64_at(h, UTH_ALLOCS);
    let mut frees = u64_at(h, UTH_FREES);
    let mut cache_free = 0u64;
    t.per_cpu.reserve_exact(exposed);
    let cpus_at = at + TYPE_HEADER_LEN;
    for cpu in 0..maxcpus as usize {
        let off = cpus_at + cpu * stream::PERCPU_LEN;
        let r: &[u8; stream::PERCPU_LEN] = array_at(buf, off).ok_or_else(|| truncated(off))?;
        let (a, f, c) = (
            u64_at(r, UPS_ALLOCS),
            u64_at(r, UPS_FREES),
            u64_at(r, UPS_CACHE_FREE),
        );
        // Counters wrap as the kernel's do; the cache's free items are a level, which
        // saturates (MemGauge64 never wraps).
        allocs = allocs.wrapping_add(a);
        frees = frees.wrapping_add(f);
        cache_free = cache_free.saturating_add(c);
        if cpu < exposed {
            t.per_cpu.push(PerCpu {
                cpu: cpu as u32,
                allocs: Some(a),
                frees: Some(f),
                cache_free: Some(c),
                ..PerCpu::default()
            });
        }
    }

    let in_use = level_between(allocs, frees);
    t.size = Some(size);
    t.real_size = Some(u64::from(u32_at(h, UTH_RSIZE)));
    t.count_limit = Some(limit);
    t.bytes_limit = Some(limit * size); // both < 2^32, so no overflow in u64
    t.allocs = Some(allocs);
    t.frees = Some(frees);
    t.in_use_count = Some(in_use);
    t.in_use_bytes = Some(in_use.saturating_mul(size));
    // Counters times a constant stay counters modulo 2^64: (allocs mod 2^64) × size is the
    // true byte count mod 2^64, which a poller reads across the wrap like any Counter64.
    t.bytes_allocated = Some(allocs.wrapping_mul(size));
    t.bytes_freed = Some(frees.wrapping_mul(size));
    t.free_count = Some(
        cache_free
            .saturating_add(zone_free)
            .saturating_add(keg_free),
    );
    t.failures = Some(u64_at(h, UTH_FAILS));
    t.sleeps = Some(u64_at(h, UTH_SLEEPS));
    t.xdomain = Some(u64_at(h, UTH_XDOMAIN));
    t.zone_free = Some(zone_free);
    t.keg_free = (!secondary).then_some(keg_free);
    Ok(t)
}

/// UMA zones' place among the allocators: their name, their MIB number and how the tables
/// print them.
pub const ALLOCATOR: AllocatorDef = AllocatorDef {
    module: module_path!(),
    allocator: Allocator::Uma,
    name: "uma",
    dump_table,
    vmstat_table: Some(vmstat_table),
};

/// `vmstat -z`: ITEM SIZE LIMIT USED FREE REQ FAIL SLEEP XDOM.
fn dump_table(out: &mut String, rows: &[&MemoryType], sizes: Sizes) {
    let _ = writeln!(
        out,
        "{:<19} {:>7}  {:>7} {:>8} {:>8} {:>8} {:>4} {:>4} {:>4}",
        "ITEM", "SIZE", "LIMIT", "USED", "FREE", "REQ", "FAIL", "SLEEP", "XDOM"
    );
    for t in rows {
        let name = format!("{}:", display_name(t));
        let width = 26usize.saturating_sub(name.len()).max(1);
        let _ = writeln!(
            out,
            "{name}{:>width$},{:>7},{:>8},{:>8},{:>8},{:>4},{:>4},{:>4}",
            bytes(t.size, sizes),
            opt(t.count_limit),
            opt(t.in_use_count),
            opt(t.free_count),
            opt(t.allocs),
            opt(t.failures),
            opt(t.sleeps),
            opt(t.xdomain),
        );
    }
}

/// libmemstat's free count of a zone: the per-CPU caches' free items, the zone's and (on a
/// primary zone) the keg's, added in `uint64_t`, so a sum past 2^64 wraps. The snapshot's own
/// figure saturates instead (a level: MemGauge64 never wraps); this is recomputed from the
/// parts when they are there and account for that figure, else the figure is used as it is.
fn vmstat_free(t: &MemoryType) -> u64 {
    let shown = t.free_count.unwrap_or(0);
    let Some(zone) = t.zone_free else {
        return shown;
    };
    let parts = t
        .per_cpu
        .iter()
        .map(|c| c.cache_free)
        .chain([Some(zone), t.keg_free]);
    let (mut wrapped, mut saturated) = (0u64, 0u64);
    for v in parts.flatten() {
        wrapped = wrapped.wrapping_add(v);
        saturated = saturated.saturating_add(v);
    }
    if saturated == shown {
        wrapped
    } else {
        shown
    }
}

/// `vmstat -z`, in the layout of `release` (`domemstat_zone` in usr.bin/vmstat/vmstat.c; see
/// [`crate::vmstat`] for the copies read):
///
/// - 15.0: the header `{T:/%-19s} {T:/%7s} {T:/%7s} {T:/%8s} {T:/%8s} {T:/%8s} {T:/%4s} {T:/%4s}
///   {T:/%4s}` over `ITEM SIZE LIMIT USED FREE REQ FAIL SLEEP XDOM`, then per zone `name:`
///   followed by the size right-aligned in `MAX(1, 26 - strlen(name))` columns and
///   `,%7ju,%8ju,%8ju,%8ju,%4ju,%4ju,%4ju`;
/// - 14: the header `{T:/%-20s} {T:/%6s} {T:/%6s} {T:/%8s} {T:/%8s} {T:/%8s} {T:/%8s} {T:/%4s}
///   {T:/%4s}` over `ITEM SIZE LIMIT USED FREE REQ FAIL SLEEP XDOMAIN`, then per zone the name
///   cut to 31 bytes with `:` appended, as `%-20s` (libxo pads by display columns), and
///   ` %6ju, %6ju,%8ju,%8ju,%8ju,%4ju,%4ju,%4ju`;
/// - 13: as 14, but the header has no blank between `%8s` (FAIL) and `%4s` (SLEEP).
fn vmstat_table(
    out: &mut String,
    rows: &[&MemoryType],
    _zone_sizes: &[u32],
    release: VmstatRelease,
) {
    let _ = match release {
        VmstatRelease::V13 | VmstatRelease::V14 => writeln!(
            out,
            "{:<20} {:>6} {:>6} {:>8} {:>8} {:>8} {:>8}{}{:>4} {:>4}",
            "ITEM",
            "SIZE",
            "LIMIT",
            "USED",
            "FREE",
            "REQ",
            "FAIL",
            if release == VmstatRelease::V13 {
                ""
            } else {
                " "
            },
            "SLEEP",
            "XDOMAIN"
        ),
        VmstatRelease::V15 => writeln!(
            out,
            "{:<19} {:>7} {:>7} {:>8} {:>8} {:>8} {:>4} {:>4} {:>4}",
            "ITEM", "SIZE", "LIMIT", "USED", "FREE", "REQ", "FAIL", "SLEEP", "XDOM"
        ),
    };
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
        let name = vmstat_name(&t.name);
        let n = |v: Option<u64>| v.unwrap_or(0);
        let (size, limit, free) = (n(t.size), n(t.count_limit), vmstat_free(t));
        let (fail, sleep, xdom) = (n(t.failures), n(t.sleeps), n(t.xdomain));
        let _ = match release {
            VmstatRelease::V13 | VmstatRelease::V14 => writeln!(
                out,
                "{} {size:>6}, {limit:>6},{used:>8},{free:>8},{req:>8},{fail:>4},{sleep:>4},{xdom:>4}",
                pad_right(&format!("{name}:"), 20),
            ),
            VmstatRelease::V15 => {
                // strlen counts bytes; the width is at least 1.
                let width = 26usize.saturating_sub(name.len()).max(1);
                writeln!(
                    out,
                    "{name}:{size:>width$},{limit:>7},{used:>8},{free:>8},{req:>8},{fail:>4},{sleep:>4},{xdom:>4}",
                )
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(version: u32, maxcpus: u32, count: u32) -> Vec<u8> {
        [version, maxcpus, count, 0]
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect()
    }

    fn zone(name: &[u8], flags: u32, allocs: u64, frees: u64, cpus: &[(u64, u64, u64)]) -> Vec<u8> {
        let mut z = vec![0u8; TYPE_HEADER_LEN];
        z[..name.len()].copy_from_slice(name);
        z[36..40].copy_from_slice(&64u32.to_ne_bytes());
        z[48..52].copy_from_slice(&u32::MAX.to_ne_bytes());
        z[56..60].copy_from_slice(&5u32.to_ne_bytes());
        z[68..72].copy_from_slice(&flags.to_ne_bytes());
        z[72..80].copy_from_slice(&allocs.to_ne_bytes());
        z[80..88].copy_from_slice(&frees.to_ne_bytes());
        for &(a, f, c) in cpus {
            let mut r = vec![0u8; 64];
            r[0..8].copy_from_slice(&a.to_ne_bytes());
            r[8..16].copy_from_slice(&f.to_ne_bytes());
            r[16..24].copy_from_slice(&c.to_ne_bytes());
            z.extend(r);
        }
        z
    }

    #[test]
    fn sums_and_wraps() {
        let mut s = header(1, 2, 2);
        s.extend(zone(b"a\0", 0, 10, 1, &[(5, 2, 3), (1, 1, 4)]));
        s.extend(zone(
            b"b\0",
            UTH_ZONE_SECONDARY,
            1,
            u64::MAX,
            &[(0, 0, 0), (0, 0, 0)],
        ));
        let t = parse_uma(&s, 0).unwrap();
        assert_eq!(t[0].name, "a");
        assert_eq!(
            (t[0].allocs, t[0].frees, t[0].in_use_count),
            (Some(16), Some(4), Some(12))
        );
        // 3 + 4 cache, 0 zone, 5 keg.
        assert_eq!(t[0].free_count, Some(12));
        assert_eq!(t[0].per_cpu.len(), 1, "maxid 0 exposes CPU 0 only");
        // u32::MAX × 64 needs more than 32 bits.
        assert_eq!(t[0].bytes_limit, Some(u64::from(u32::MAX) * 64));
        // allocs 1, frees 2^64 - 1: modulo 2^64 that is 2 in use (allocations wrapped
        // once, frees not yet).
        assert_eq!(
            (t[1].in_use_count, t[1].keg_free, t[1].free_count),
            (Some(2), None, Some(0))
        );
        // (2^64 - 1) × 64 modulo 2^64.
        assert_eq!(t[1].bytes_freed, Some(u64::MAX - 63));
        assert_eq!(t[1].in_use_bytes, Some(128));
    }

    #[test]
    fn header_errors_name_field_and_byte() {
        let e = parse_uma(&header(2, 1, 0), 0).unwrap_err();
        assert!(
            matches!(&e, SourceError::UnsupportedVersion { what, found } if what == WHAT && found.starts_with('2')),
            "{e:?}"
        );
        let e = parse_uma(&header(1, 0, 0), 0).unwrap_err();
        assert!(
            matches!(&e, SourceError::Malformed { field, location, .. } if field == "ush_maxcpus" && location == "byte 4"),
            "{e:?}"
        );
        let mut s = header(1, 1, 3);
        s.extend(zone(b"a\0", 0, 0, 0, &[(0, 0, 0)]));
        let e = parse_uma(&s, 0).unwrap_err();
        // Zone 0 is complete; the stream ends where zone 1 should start (16 + 184).
        assert!(
            matches!(&e, SourceError::Malformed { field, location, .. } if field == "ush_count" && location == "zone 1 (byte 200)"),
            "{e:?}"
        );
        assert!(parse_uma(&[], 0).is_err());
        assert!(parse_uma(&header(1, 1, 0)[..12], 0).is_err());
        assert_eq!(parse_uma(&header(1, 1, 0), 0).unwrap(), vec![]);
    }

    #[test]
    fn names_without_nul_or_utf8_are_kept_lossily() {
        let mut s = header(1, 1, 1);
        let mut name = [b'x'; 32];
        name[0] = 0xff;
        s.extend(zone(&name, 0, 0, 0, &[(0, 0, 0)]));
        let t = parse_uma(&s, 0).unwrap();
        assert_eq!(t[0].name, format!("\u{fffd}{}", "x".repeat(31)));
    }
}
