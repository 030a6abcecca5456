//! Property: GetNext over any snapshot returns exactly the sorted successor, or endOfMibView.
//!
//! A random snapshot (allocators, names, absent and present figures, per-CPU rows) is laid out
//! with `MibView::new` under random distinct memTypeIndex values. The test enumerates every
//! (OID, value) the MIB should serve *independently* of src/mib.rs, from MEMSTAT-MIB's
//! documented layout:
//!
//! - scalars `R.1.1.N.0`, from the `DaemonStatus` passed in;
//! - memTypeTable `R.1.2.1.col.index`, for the cells that are present;
//! - memCpuTable `R.1.3.1.col.index.cpu`;
//! - memAllocatorTable `R.1.4.1.col.allocator`, one row per allocator that has types;
//!
//! sorts it, and checks `get_next(start, include, end)` against a linear scan for random
//! starts (instance OIDs with include 0/1, OIDs near and inside the tables, OIDs outside the
//! MIB) and random end bounds. `get` of every expected instance must return its value.

use memstat_agentx::agentx::pdu::Value;
use memstat_agentx::memstat::{Allocator, MemoryType, PerCpu, Snapshot};
use memstat_agentx::mib::{DaemonStatus, Mib, MibView, SourceStatus};
use proptest::prelude::*;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

const R: [u32; 8] = [1, 3, 6, 1, 4, 1, 32473, 1];

fn r(tail: &[u32]) -> Vec<u32> {
    let mut v = R.to_vec();
    v.extend_from_slice(tail);
    v
}

// ---------------------------------------------------------------------------------------------
// The expected objects, written from the MIB file rather than from src/mib.rs
// ---------------------------------------------------------------------------------------------

/// SnmpAdminString (SIZE (0..255)): the UTF-8 bytes, cut to 255 on a character boundary.
fn admin_string(s: &str) -> Value {
    let mut out = Vec::new();
    for c in s.chars() {
        let mut b = [0u8; 4];
        let e = c.encode_utf8(&mut b).as_bytes();
        if out.len() + e.len() > 255 {
            break;
        }
        out.extend_from_slice(e);
    }
    Value::OctetString(out)
}

/// DateAndTime (SNMPv2-TC) in UTC, computed by counting days year by year.
fn date_and_time(ms: u64) -> Vec<u8> {
    let leap = |y: u64| (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let secs = ms / 1000;
    let mut days = secs / 86_400;
    let mut year = 1970u64;
    loop {
        let n = if leap(year) { 366 } else { 365 };
        if days < n {
            break;
        }
        days -= n;
        year += 1;
    }
    let lengths = [
        31,
        if leap(year) { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    let mut month = 0;
    while days >= lengths[month] {
        days -= lengths[month];
        month += 1;
    }
    let sod = secs % 86_400;
    let mut v = (year as u16).to_be_bytes().to_vec();
    v.extend_from_slice(&[
        month as u8 + 1,
        days as u8 + 1,
        (sod / 3600) as u8,
        (sod / 60 % 60) as u8,
        (sod % 60) as u8,
        (ms % 1000 / 100) as u8,
        b'+',
        0,
        0,
    ]);
    v
}

fn c64(v: Option<u64>) -> Option<Value> {
    v.map(Value::Counter64)
}

/// memAllocatorType / memTypeAllocator: malloc(1), uma(2), slab(3).
fn allocator_number(a: Allocator) -> u32 {
    match a {
        Allocator::Malloc => 1,
        Allocator::Uma => 2,
        Allocator::Slab => 3,
    }
}

fn expected(
    types: &[MemoryType],
    indexes: &[u32],
    discontinuity: &[u32],
    st: &DaemonStatus,
) -> Vec<(Vec<u32>, Value)> {
    let mut out: Vec<(Vec<u32>, Value)> = Vec::new();
    let mut put = |oid: Vec<u32>, v: Option<Value>| {
        if let Some(v) = v {
            out.push((oid, v));
        }
    };

    // memDaemonObjects: R.1.1.N.0
    let scalars: [(u32, Option<Value>); 11] = [
        (1, Some(Value::TimeTicks(st.uptime_ticks))),
        (
            2,
            st.snapshot_time_ms
                .map(|ms| Value::OctetString(date_and_time(ms))),
        ),
        (
            3,
            st.snapshot_age_ms
                .map(|a| Value::Gauge32(u32::try_from(a).unwrap_or(u32::MAX))),
        ),
        (4, c64(st.snapshot_generation)),
        (5, Some(Value::Counter64(st.refreshes))),
        (6, Some(Value::Counter64(st.refresh_failures))),
        (7, Some(admin_string(&st.source_name))),
        (
            8,
            Some(Value::Integer(match st.status {
                SourceStatus::Ok => 1,
                SourceStatus::Stale => 2,
                SourceStatus::Error => 3,
            })),
        ),
        (9, Some(admin_string(&st.last_error))),
        (10, Some(Value::Counter64(st.notifications_sent))),
        (11, Some(Value::Counter64(st.notifications_dropped))),
    ];
    for (n, v) in scalars {
        put(r(&[1, 1, n, 0]), v);
    }

    // memTypeTable: R.1.2.1.col.index
    for (i, t) in types.iter().enumerate() {
        let idx = indexes[i];
        let cols: [(u32, Option<Value>); 23] = [
            (2, Some(admin_string(&t.name))),
            (
                3,
                Some(Value::Integer(allocator_number(t.allocator) as i32)),
            ),
            (4, Some(Value::Gauge32(t.ordinal))),
            (5, c64(t.size)),
            (6, c64(t.real_size)),
            (7, c64(t.count_limit)),
            (8, c64(t.bytes_limit)),
            (9, c64(t.in_use_count)),
            (10, c64(t.in_use_bytes)),
            (11, c64(t.free_count)),
            (12, c64(t.total_count)),
            (13, c64(t.allocs)),
            (14, c64(t.frees)),
            (15, c64(t.bytes_allocated)),
            (16, c64(t.bytes_freed)),
            (17, c64(t.failures)),
            (18, c64(t.sleeps)),
            (19, c64(t.xdomain)),
            (20, c64(t.zone_free)),
            (21, c64(t.keg_free)),
            (
                22,
                t.size_mask
                    .map(|m| Value::OctetString(m.to_be_bytes().to_vec())),
            ),
            (23, c64(t.slab_bytes)),
            (24, Some(Value::TimeTicks(discontinuity[i]))),
        ];
        for (col, v) in cols {
            put(r(&[1, 2, 1, col, idx]), v);
        }
        // memCpuTable: R.1.3.1.col.index.cpu
        for c in &t.per_cpu {
            put(r(&[1, 3, 1, 2, idx, c.cpu]), c64(c.allocs));
            put(r(&[1, 3, 1, 3, idx, c.cpu]), c64(c.frees));
            put(r(&[1, 3, 1, 4, idx, c.cpu]), c64(c.cache_free));
            put(r(&[1, 3, 1, 5, idx, c.cpu]), c64(c.bytes_allocated));
            put(r(&[1, 3, 1, 6, idx, c.cpu]), c64(c.bytes_freed));
            put(
                r(&[1, 3, 1, 7, idx, c.cpu]),
                c.size_mask
                    .map(|m| Value::OctetString(m.to_be_bytes().to_vec())),
            );
        }
    }

    // memAllocatorTable: R.1.4.1.col.allocator, for allocators with at least one type. A sum
    // is present when at least one type has the figure; free bytes = free count × size.
    for a in [Allocator::Malloc, Allocator::Uma, Allocator::Slab] {
        let of: Vec<&MemoryType> = types.iter().filter(|t| t.allocator == a).collect();
        if of.is_empty() {
            continue;
        }
        let sum = |f: &dyn Fn(&MemoryType) -> Option<u64>| {
            of.iter()
                .filter_map(|t| f(t))
                .fold(None, |acc: Option<u64>, v| {
                    Some(acc.unwrap_or(0).saturating_add(v))
                })
        };
        let n = allocator_number(a);
        put(r(&[1, 4, 1, 2, n]), Some(Value::Gauge32(of.len() as u32)));
        put(r(&[1, 4, 1, 3, n]), c64(sum(&|t| t.in_use_bytes)));
        put(
            r(&[1, 4, 1, 4, n]),
            c64(sum(&|t| Some(t.free_count?.saturating_mul(t.size?)))),
        );
        put(r(&[1, 4, 1, 5, n]), c64(sum(&|t| t.failures)));
    }

    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// The successor by linear scan: the first object after `start` (or at it, with `include`)
/// and before `end` (exclusive; empty means unbounded).
fn successor<'a>(
    all: &'a [(Vec<u32>, Value)],
    start: &[u32],
    include: bool,
    end: &[u32],
) -> Option<&'a (Vec<u32>, Value)> {
    all.iter()
        .find(|(oid, _)| {
            if include {
                oid.as_slice() >= start
            } else {
                oid.as_slice() > start
            }
        })
        .filter(|(oid, _)| end.is_empty() || oid.as_slice() < end)
}

// ---------------------------------------------------------------------------------------------
// Strategies
// ---------------------------------------------------------------------------------------------

fn arb_allocator() -> impl Strategy<Value = Allocator> {
    prop_oneof![
        Just(Allocator::Malloc),
        Just(Allocator::Uma),
        Just(Allocator::Slab)
    ]
}

fn arb_name() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => "[a-z][a-z0-9_ -]{0,12}",
        1 => "[é€a]{80,140}", // more than 255 bytes: cut on a character boundary
        1 => Just(String::new()),
    ]
}

fn fig() -> impl Strategy<Value = Option<u64>> {
    prop_oneof![
        2 => Just(None),
        2 => (0u64..1000).prop_map(Some),
        1 => any::<u64>().prop_map(Some),
    ]
}

fn arb_per_cpu() -> impl Strategy<Value = Vec<PerCpu>> {
    // Distinct CPU numbers, in any order (a source may list them unsorted).
    let cpus: Vec<u32> = (0u32..6).chain([63, 1023]).collect();
    (
        proptest::sample::subsequence(cpus, 0..5),
        proptest::collection::vec((fig(), fig(), fig(), fig(), fig(), fig()), 8),
    )
        .prop_map(|(cpus, figs)| {
            cpus.into_iter()
                .zip(figs)
                .map(
                    |(
                        cpu,
                        (allocs, frees, cache_free, bytes_allocated, bytes_freed, size_mask),
                    )| {
                        PerCpu {
                            cpu,
                            allocs,
                            frees,
                            cache_free,
                            bytes_allocated,
                            bytes_freed,
                            size_mask,
                        }
                    },
                )
                .collect::<Vec<_>>()
        })
        .prop_shuffle()
}

prop_compose! {
    fn arb_type()(
        allocator in arb_allocator(),
        name in arb_name(),
        ordinal in prop_oneof![3 => 0u32..3, 1 => any::<u32>()],
        a in proptest::collection::vec(fig(), 19),
        size_mask in fig(),
        per_cpu in arb_per_cpu(),
    ) -> MemoryType {
        let mut t = MemoryType::new(allocator, name);
        t.ordinal = ordinal;
        t.size = a[0];
        t.real_size = a[1];
        t.count_limit = a[2];
        t.bytes_limit = a[3];
        t.in_use_count = a[4];
        t.in_use_bytes = a[5];
        t.free_count = a[6];
        t.total_count = a[7];
        t.allocs = a[8];
        t.frees = a[9];
        t.bytes_allocated = a[10];
        t.bytes_freed = a[11];
        t.failures = a[12];
        t.sleeps = a[13];
        t.xdomain = a[14];
        t.zone_free = a[15];
        t.keg_free = a[16];
        t.slab_bytes = a[17];
        t.size_mask = size_mask;
        t.per_cpu = per_cpu;
        t
    }
}

fn arb_status() -> impl Strategy<Value = DaemonStatus> {
    (
        any::<u32>(),
        proptest::option::of(0u64..4_102_444_800_000), // up to 2100-01-01
        proptest::option::of(prop_oneof![0u64..100_000, any::<u64>()]),
        proptest::option::of(any::<u64>()),
        (any::<u64>(), any::<u64>()),
        arb_name(),
        prop_oneof![
            Just(SourceStatus::Ok),
            Just(SourceStatus::Stale),
            Just(SourceStatus::Error)
        ],
        arb_name(),
    )
        .prop_map(
            |(up, time, age, generation, (refreshes, failures), source, status, err)| {
                DaemonStatus {
                    uptime_ticks: up,
                    snapshot_time_ms: time,
                    snapshot_age_ms: age,
                    snapshot_generation: generation,
                    refreshes,
                    refresh_failures: failures,
                    source_name: source,
                    status,
                    last_error: err,
                    notifications_sent: refreshes / 3,
                    notifications_dropped: failures / 2,
                    sources: Vec::new(),
                }
            },
        )
}

/// A snapshot with one distinct memTypeIndex and one discontinuity time per type.
fn arb_view() -> impl Strategy<Value = (Vec<MemoryType>, Vec<u32>, Vec<u32>)> {
    proptest::collection::vec(arb_type(), 0..10).prop_flat_map(|types| {
        let n = types.len();
        let pool: Vec<u32> = (1u32..=24).chain([1000, u32::MAX - 1, u32::MAX]).collect();
        (
            Just(types),
            proptest::sample::subsequence(pool, n).prop_shuffle(),
            proptest::collection::vec(any::<u32>(), n),
        )
    })
}

/// How a query's start (or end) OID is chosen; resolved against the expected set.
#[derive(Clone, Debug)]
enum Pick {
    /// An existing instance.
    Instance(usize),
    /// An existing instance, changed: 0 = truncated by one, 1 = last sub-id + 1, 2 = last
    /// sub-id - 1, 3 = extended by a sub-id.
    Near(usize, u8, u32),
    /// The root followed by a few small arcs: tables, columns, rows that may not exist.
    Inside(Vec<u32>),
    /// An arbitrary OID, mostly outside the MIB.
    Anywhere(Vec<u32>),
    /// The null OID.
    Null,
}

fn arb_pick() -> impl Strategy<Value = Pick> {
    prop_oneof![
        4 => any::<usize>().prop_map(Pick::Instance),
        3 => (any::<usize>(), 0u8..4, 0u32..3).prop_map(|(i, k, x)| Pick::Near(i, k, x)),
        4 => proptest::collection::vec(prop_oneof![0u32..6, 0u32..26, Just(u32::MAX)], 0..7)
            .prop_map(Pick::Inside),
        1 => proptest::collection::vec(prop_oneof![0u32..8, Just(32473), any::<u32>()], 0..10)
            .prop_map(Pick::Anywhere),
        1 => Just(Pick::Null),
    ]
}

fn resolve(p: &Pick, all: &[(Vec<u32>, Value)]) -> Vec<u32> {
    match p {
        Pick::Instance(i) if !all.is_empty() => all[i % all.len()].0.clone(),
        Pick::Near(i, k, x) if !all.is_empty() => {
            let mut o = all[i % all.len()].0.clone();
            let last = o.len() - 1;
            match k {
                0 => {
                    o.pop();
                }
                1 => o[last] = o[last].saturating_add(1),
                2 => o[last] = o[last].saturating_sub(1),
                _ => o.push(*x),
            }
            o
        }
        Pick::Instance(_) | Pick::Near(..) | Pick::Null => Vec::new(),
        Pick::Inside(tail) => r(tail),
        Pick::Anywhere(o) => o.clone(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn getnext_is_the_sorted_successor(
        (types, indexes, disc) in arb_view(),
        st in arb_status(),
        queries in proptest::collection::vec((arb_pick(), any::<bool>(), arb_pick(), any::<bool>()), 1..40),
    ) {
        let all = expected(&types, &indexes, &disc, &st);
        let snapshot = Snapshot::new(1, UNIX_EPOCH + Duration::from_secs(1), "prop".into(), types);
        let view = MibView::new(Arc::new(snapshot), &indexes, &disc);
        let mib = Mib::new(&view, &st);

        for (oid, value) in &all {
            prop_assert_eq!(&mib.get(oid), value, "get {:?}", oid);
        }
        for (start, include, end, bounded) in &queries {
            let start = resolve(start, &all);
            let end = if *bounded { resolve(end, &all) } else { Vec::new() };
            let want = successor(&all, &start, *include, &end);
            let got = mib.get_next(&start, *include, &end);
            prop_assert_eq!(
                got.as_ref().map(|(o, v)| (o.as_slice(), v)),
                want.map(|(o, v)| (o.as_slice(), v)),
                "get_next(start {:?}, include {}, end {:?})", start, include, end
            );
        }
        // A full walk visits exactly the expected objects, in order.
        let mut walked = Vec::new();
        let mut at = Vec::new();
        while let Some((o, v)) = mib.get_next(&at, false, &[]) {
            prop_assert!(o.as_slice() > at.as_slice(), "walk went backwards at {:?}", o);
            at = o.0.clone();
            walked.push((o.0, v));
            prop_assert!(walked.len() <= all.len(), "walk does not end");
        }
        prop_assert_eq!(walked, all);
    }
}

/// Per-CPU rows with repeated CPU numbers (a hand-edited fixture can have them), many of
/// them, in any order.
fn arb_dup_per_cpu() -> impl Strategy<Value = Vec<PerCpu>> {
    proptest::collection::vec((0u32..12, 0u64..1000), 0..60).prop_map(|v| {
        v.into_iter()
            .map(|(cpu, x)| PerCpu {
                cpu,
                allocs: Some(x),
                frees: Some(x + 1),
                cache_free: None,
                ..PerCpu::default()
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, failure_persistence: None, ..ProptestConfig::default() })]

    /// Whatever the per-CPU rows, a walk answers each instance with the value a Get of that
    /// instance returns, and no instance twice.
    #[test]
    fn walk_agrees_with_get_even_with_repeated_cpus(
        rows in proptest::collection::vec(arb_dup_per_cpu(), 1..4),
        st in arb_status(),
    ) {
        let types: Vec<MemoryType> = rows
            .into_iter()
            .enumerate()
            .map(|(i, per_cpu)| {
                let mut t = MemoryType::new(Allocator::Uma, format!("z{i}"));
                t.per_cpu = per_cpu;
                t
            })
            .collect();
        let n = types.len() as u32;
        let indexes: Vec<u32> = (1..=n).collect();
        let disc = vec![0; types.len()];
        let view = MibView::new(
            Arc::new(Snapshot::new(1, UNIX_EPOCH, "prop".into(), types)),
            &indexes,
            &disc,
        );
        let mib = Mib::new(&view, &st);
        let mut at = r(&[1, 3]);
        while let Some((o, v)) = mib.get_next(&at, false, &r(&[1, 4])) {
            prop_assert!(o.as_slice() > at.as_slice());
            prop_assert_eq!(&mib.get(o.as_slice()), &v, "instance {:?}", o);
            at = o.0;
        }
    }
}

/// Regression (found by the property above): with repeated CPU numbers in a row of more than
/// ~20 per-CPU entries, the walk (GetNext) served a different entry than Get for the same
/// memCpuTable instance, because `MibView::new` orders the CPUs with an unstable sort
/// before de-duplicating them, while `get` takes the first listed entry.
#[test]
fn repeated_cpu_numbers_get_and_getnext_agree() {
    let mut t = MemoryType::new(Allocator::Uma, "dup");
    t.per_cpu = (0..40u64)
        .map(|k| PerCpu {
            cpu: (k * 7 % 5) as u32,
            allocs: Some(k),
            frees: None,
            cache_free: None,
            ..PerCpu::default()
        })
        .collect();
    let view = MibView::new(
        Arc::new(Snapshot::new(1, UNIX_EPOCH, "dup".into(), vec![t])),
        &[1],
        &[0],
    );
    let st = DaemonStatus {
        uptime_ticks: 0,
        snapshot_time_ms: None,
        snapshot_age_ms: None,
        snapshot_generation: None,
        refreshes: 0,
        refresh_failures: 0,
        source_name: String::new(),
        status: SourceStatus::Ok,
        last_error: String::new(),
        notifications_sent: 0,
        notifications_dropped: 0,
        sources: Vec::new(),
    };
    let mib = Mib::new(&view, &st);
    let mut at = r(&[1, 3, 1, 2]);
    let mut seen = Vec::new();
    while let Some((o, v)) = mib.get_next(&at, false, &r(&[1, 3, 1, 3])) {
        let cpu = *o.as_slice().last().unwrap();
        // The first entry listed for a CPU is the one Get serves.
        assert_eq!(mib.get(o.as_slice()), v, "cpu {cpu}");
        assert_eq!(v, Value::Counter64(u64::from(cpu * 3 % 5)), "cpu {cpu}");
        seen.push(cpu);
        at = o.0;
    }
    assert_eq!(seen, [0, 1, 2, 3, 4]);
}
