//! The snapshot model: libmemstat's `struct memory_type`, done the Rust way.
//!
//! Every source (Linux slab, FreeBSD UMA and malloc, a JSON fixture) produces a list of
//! [`MemoryType`] rows in kernel order. A [`Snapshot`] freezes one such list together with the
//! time it was taken and a generation number; it is never modified afterwards, so a walk that
//! holds an `Arc<Snapshot>` sees one consistent picture of the kernel.
//!
//! A figure a source does not provide is `None`, never a made-up zero: the MIB turns `None`
//! into an absent cell (noSuchInstance on Get, skipped by GetNext).

pub mod allocinfo;
pub mod arcstats;
pub(crate) mod display;
pub use display::Sizes;
pub(crate) mod error;
pub mod fixture;
pub(crate) mod kept;
pub mod linux;
pub mod malloc;
pub mod meminfo;
pub mod source;
pub(crate) mod source_def;
pub(crate) mod stream;
// The stream loop reads on FreeBSD only; its tests run it on every platform.
#[cfg_attr(not(target_os = "freebsd"), allow(dead_code))]
pub(crate) mod sysctl;
pub mod uma;
pub mod wired;

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use error::SourceError;
pub use source::{SourceChoice, SourceRead, SourceSpec, Sources};

/// The kernel allocator a memory type belongs to. The discriminants are the values of the
/// MIB's `MemAllocator` enumeration (and, for malloc and UMA, libmemstat's ALLOCATOR_*).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Allocator {
    Malloc = 1,
    Uma = 2,
    Slab = 3,
}

/// What the rest of the daemon knows of an allocator: each is one definition, in the module
/// of its own statistics (`malloc`, `uma`, `linux` for slab caches).
pub struct AllocatorDef {
    /// Its own module (`module_path!()`), which may name it where others may not.
    pub module: &'static str,
    pub allocator: Allocator,
    /// Its name in fixtures, logs and the tables (the `Allocator`'s serde name).
    pub name: &'static str,
    /// Its section of `dump --format table`, in the spirit of its native tool.
    pub dump_table: fn(&mut String, &[&MemoryType], display::Sizes),
    /// Its section of `dump --format vmstat`, where FreeBSD's vmstat prints it, given the
    /// malloc zone sizes the size masks index.
    pub vmstat_table: Option<VmstatTable>,
}

/// An allocator's section of `dump --format vmstat`: the rows, in libmemstat's order, the
/// malloc zone sizes, and the FreeBSD release whose vmstat layout to print.
pub type VmstatTable = fn(&mut String, &[&MemoryType], &[u32], VmstatRelease);

/// The FreeBSD release whose `vmstat -m -z` layout `dump --format vmstat` prints: the layouts
/// changed twice (see [`crate::vmstat`] for the copies of vmstat.c each one was read from).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum VmstatRelease {
    /// FreeBSD 13: `-m` as `Type InUse MemUse Requests  Size(s)` (memory in KiB, rounded up),
    /// `-z` with the name padded to 20 columns and the header's `FAILSLEEP` run together.
    V13,
    /// FreeBSD 14: as 13, with a blank between `FAIL` and `SLEEP` in the `-z` header.
    V14,
    /// FreeBSD 15.0: `-m` as `Type Use Memory Req Size(s)` in bytes, `-z` with the size
    /// right-aligned to column 26 and an `XDOM` column.
    V15,
}

impl VmstatRelease {
    /// Every release, oldest first.
    pub const ALL: [VmstatRelease; 3] = [Self::V13, Self::V14, Self::V15];

    /// The layout printed off FreeBSD when no release is chosen.
    pub const DEFAULT: VmstatRelease = Self::V15;

    /// The major release number (13, 14, 15).
    pub fn number(self) -> u32 {
        match self {
            Self::V13 => 13,
            Self::V14 => 14,
            Self::V15 => 15,
        }
    }

    /// The layout of the release a `kern.osreldate` value (`__FreeBSD_version`, e.g.
    /// 1402000 for 14.2) belongs to: its major number is the value divided by 100000. A
    /// release before 13 gets 13's layout (the oldest known here), one after 15 gets 15's.
    pub fn from_osreldate(osreldate: u32) -> VmstatRelease {
        match osreldate / 100_000 {
            ..=13 => Self::V13,
            14 => Self::V14,
            _ => Self::V15,
        }
    }
}

impl fmt::Display for VmstatRelease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.number())
    }
}

impl std::str::FromStr for VmstatRelease {
    type Err = String;

    /// `13`, `14` or `15`.
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|r| r.number().to_string() == s)
            .ok_or_else(|| {
                "must be 13, 14 or 15 (the FreeBSD release whose vmstat layout to print)"
                    .to_string()
            })
    }
}

impl Allocator {
    /// Every allocator, in the order the tables list them.
    pub const ALL: [Allocator; 3] = [Allocator::Malloc, Allocator::Uma, Allocator::Slab];

    /// Its definition.
    pub fn def(self) -> &'static AllocatorDef {
        match self {
            Allocator::Malloc => &malloc::ALLOCATOR,
            Allocator::Uma => &uma::ALLOCATOR,
            Allocator::Slab => &linux::ALLOCATOR,
        }
    }

    pub fn as_str(self) -> &'static str {
        self.def().name
    }

    /// The MIB enumeration value.
    pub fn number(self) -> u32 {
        self as u32
    }
}

impl fmt::Display for Allocator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What identifies a memory type across refreshes and daemon restarts.
///
/// FreeBSD can register two UMA zones or malloc types under the same name, so the name alone
/// is not a key: `ordinal` counts earlier types of the same allocator and name in kernel order.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TypeKey {
    pub allocator: Allocator,
    pub name: String,
    pub ordinal: u32,
}

/// The largest CPU number the MIB can carry: memCpuIndex is `Unsigned32 (0..65535)`.
pub const MAX_CPU_INDEX: u32 = 65535;

/// Deserializes a per-CPU row's `cpu`, refusing numbers beyond [`MAX_CPU_INDEX`] so that the
/// JSON parser's error names the line and column of the bad field.
fn cpu_index<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let n = u64::deserialize(d)?;
    if n > u64::from(MAX_CPU_INDEX) {
        return Err(serde::de::Error::custom(format!(
            "field cpu: {n} is out of memCpuIndex's range 0..{MAX_CPU_INDEX}"
        )));
    }
    Ok(n as u32)
}

/// Per-CPU figures, where the source has them (UMA: allocations, frees, cache free; malloc:
/// allocations, frees, bytes allocated and freed, size mask: every per-CPU figure libmemstat
/// has). Only CPUs `0..=kern.smp.maxid` are present.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PerCpu {
    #[serde(deserialize_with = "cpu_index")]
    pub cpu: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocs: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frees: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_free: Option<u64>,
    /// Bytes allocated on this CPU (malloc `mts_memalloced`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_allocated: Option<u64>,
    /// Bytes freed on this CPU (malloc `mts_memfreed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_freed: Option<u64>,
    /// Malloc zones this type has used on this CPU (malloc `mts_size`); the type's
    /// [`MemoryType::size_mask`] is these OR-ed together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_mask: Option<u64>,
}

/// A level (a MemGauge64: items or bytes in use) derived from two counters read without a
/// lock: `added - removed`, computed modulo 2^64 like the counters themselves, so that it
/// stays right when `added` has wrapped and `removed` not yet. A difference of 2^63 or more
/// cannot be a real level: it means `removed` was read ahead of `added` (the kernel's per-CPU
/// counters are read one after another while other CPUs keep counting), and gives 0.
/// libmemstat reports such a difference as it is (a number near 2^64).
pub fn level_between(added: u64, removed: u64) -> u64 {
    let level = added.wrapping_sub(removed);
    if level >= 1 << 63 {
        0
    } else {
        level
    }
}

/// One memory type: a UMA zone, a malloc(9) type, or a Linux slab cache.
///
/// The field list follows libmemstat's accessors. Counts are items, `*_bytes` are bytes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryType {
    pub allocator: Allocator,
    pub name: String,
    /// 0 for the first type of this allocator and name in kernel order, 1 for the next, ...
    #[serde(default)]
    pub ordinal: u32,
    /// Requested item size (UMA `uth_size`, slab `objsize`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Real item size including alignment and headers (UMA `uth_rsize`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub real_size: Option<u64>,
    /// Maximum number of items (UMA `uth_limit`; 0 means unlimited).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count_limit: Option<u64>,
    /// Maximum bytes (limit × size, computed in 64 bits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_limit: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_use_count: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_use_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub free_count: Option<u64>,
    /// Total objects the allocator holds, in use or free (slab `num_objs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_count: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocs: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frees: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_allocated: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_freed: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failures: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sleeps: Option<u64>,
    /// Cross-NUMA-domain frees (UMA `uth_xdomain`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xdomain: Option<u64>,
    /// Items free in the zone's bucket cache (UMA `uth_zone_free`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone_free: Option<u64>,
    /// Items free in the keg; only primary zones report it (UMA `uth_keg_free`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keg_free: Option<u64>,
    /// Bitmask of malloc zone indices this type has used (malloc `mts_size`, OR-ed over CPUs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_mask: Option<u64>,
    /// Memory held in slabs: slabs × pages per slab × page size (Linux).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slab_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_cpu: Vec<PerCpu>,
}

impl MemoryType {
    /// A row with only its identity set; every statistic absent.
    pub fn new(allocator: Allocator, name: impl Into<String>) -> Self {
        MemoryType {
            allocator,
            name: name.into(),
            ordinal: 0,
            size: None,
            real_size: None,
            count_limit: None,
            bytes_limit: None,
            in_use_count: None,
            in_use_bytes: None,
            free_count: None,
            total_count: None,
            allocs: None,
            frees: None,
            bytes_allocated: None,
            bytes_freed: None,
            failures: None,
            sleeps: None,
            xdomain: None,
            zone_free: None,
            keg_free: None,
            size_mask: None,
            slab_bytes: None,
            per_cpu: Vec::new(),
        }
    }

    pub fn key(&self) -> TypeKey {
        TypeKey {
            allocator: self.allocator,
            name: self.name.clone(),
            ordinal: self.ordinal,
        }
    }

    /// Free bytes, where both the free count and the item size are known.
    pub fn free_bytes(&self) -> Option<u64> {
        Some(self.free_count?.saturating_mul(self.size?))
    }
}

/// Assigns ordinals in kernel order: the n-th type of a given (allocator, name) gets n.
pub fn assign_ordinals(types: &mut [MemoryType]) {
    let mut seen: HashMap<(Allocator, String), u32> = HashMap::with_capacity(types.len());
    for t in types.iter_mut() {
        let n = seen.entry((t.allocator, t.name.clone())).or_insert(0);
        t.ordinal = *n;
        *n += 1;
    }
}

/// Kernel-wide figures a source reads besides its memory types, by name (each source's own
/// names, which its definition's MIB groups serve: see `source_def::FigureGroup`).
pub type Figures = BTreeMap<String, u64>;

/// What one source read at one refresh.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SourceData {
    pub types: Vec<MemoryType>,
    pub figures: Figures,
    /// The kernel's allocation profiling, from the source that reads it.
    pub profiling: Option<allocinfo::Profiling>,
}

impl From<Vec<MemoryType>> for SourceData {
    fn from(types: Vec<MemoryType>) -> SourceData {
        SourceData {
            types,
            ..SourceData::default()
        }
    }
}

/// What the `i`-th source of a daemon gave a snapshot.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Part {
    /// How many of the snapshot's types, in order after the earlier parts'.
    pub types: u32,
    /// The names of its figures.
    pub figures: Vec<String>,
    /// Whether the snapshot's allocation profiling is its.
    pub profiling: bool,
}

/// One immutable reading of the kernel's allocator statistics.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Increases by one with every successful refresh of a daemon; 0 for a one-off read.
    #[serde(default)]
    pub generation: u64,
    /// When the source was read, in milliseconds since the Unix epoch.
    #[serde(default)]
    pub taken_at_ms: u64,
    /// The sources' names, e.g. `linux:/proc/slabinfo`, separated by commas.
    #[serde(default)]
    pub source: String,
    pub types: Vec<MemoryType>,
    /// The kernel-wide figures of every source.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub figures: Figures,
    /// The kernel's allocation profiling: its state and every call site read (the table
    /// serves those the settings choose).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profiling: Option<allocinfo::Profiling>,
    /// What each source gave (in the order of the `source` setting), where the daemon read
    /// them; empty for a snapshot read whole. Not part of the fixture format: a fixture is
    /// one source, whatever it replays.
    #[serde(skip)]
    pub parts: Vec<Part>,
}

impl Snapshot {
    pub fn new(
        generation: u64,
        taken_at: SystemTime,
        source: String,
        types: Vec<MemoryType>,
    ) -> Self {
        Snapshot {
            generation,
            taken_at_ms: Snapshot::epoch_ms(taken_at),
            source,
            types,
            figures: Figures::new(),
            profiling: None,
            parts: Vec::new(),
        }
    }

    /// Milliseconds since the Unix epoch (0 before it).
    pub fn epoch_ms(t: SystemTime) -> u64 {
        t.duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_millis() as u64
    }

    /// The rows the `i`-th source gave, where the snapshot records its parts.
    pub fn part(&self, i: usize) -> Option<&[MemoryType]> {
        let start: usize = self.parts.get(..i)?.iter().map(|p| p.types as usize).sum();
        let n = self.parts.get(i)?.types as usize;
        self.types.get(start..start + n)
    }

    /// The figures the `i`-th source gave, where the snapshot records its parts.
    pub fn part_figures(&self, i: usize) -> impl Iterator<Item = (&String, &u64)> {
        self.parts
            .get(i)
            .into_iter()
            .flat_map(|p| p.figures.iter())
            .filter_map(|name| self.figures.get_key_value(name))
    }

    pub fn taken_at(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.taken_at_ms)
    }

    /// All types across allocators, in kernel order per allocator.
    pub fn iter(&self) -> impl Iterator<Item = &MemoryType> {
        self.types.iter()
    }

    /// Every allocator's totals (memAllocatorTable's rows, `top`'s header), in the order of
    /// [`Allocator::ALL`], with 0 types for an allocator the snapshot has none of. A sum is
    /// absent when no type of the allocator has the figure.
    pub fn allocator_totals(&self) -> Vec<AllocatorTotals> {
        let add = |acc: &mut Option<u64>, v: Option<u64>| {
            if let Some(v) = v {
                *acc = Some(acc.unwrap_or(0).saturating_add(v));
            }
        };
        Allocator::ALL
            .into_iter()
            .map(|allocator| {
                let mut sum = AllocatorTotals {
                    allocator,
                    types: 0,
                    in_use_bytes: None,
                    free_bytes: None,
                    failures: None,
                };
                for t in self.types.iter().filter(|t| t.allocator == allocator) {
                    sum.types += 1;
                    add(&mut sum.in_use_bytes, t.in_use_bytes);
                    add(&mut sum.free_bytes, t.free_bytes());
                    add(&mut sum.failures, t.failures);
                }
                sum
            })
            .collect()
    }

    /// Rates between an earlier snapshot and this one, as memtop(8) shows them.
    ///
    /// Types present in both snapshots get a [`Rate`]; a counter that went backwards (the type
    /// was destroyed and re-created) gives `None` for that rate rather than a huge number.
    pub fn diff(&self, earlier: &Snapshot) -> Vec<Rate> {
        let secs = self.taken_at_ms.saturating_sub(earlier.taken_at_ms) as f64 / 1000.0;
        let old: HashMap<TypeKey, &MemoryType> =
            earlier.types.iter().map(|t| (t.key(), t)).collect();
        self.types
            .iter()
            .filter_map(|t| {
                let o = old.get(&t.key())?;
                let per_sec = |now: Option<u64>, then: Option<u64>| -> Option<f64> {
                    let (n, p) = (now?, then?);
                    if n < p || secs <= 0.0 {
                        return None;
                    }
                    Some((n - p) as f64 / secs)
                };
                let delta = |now: Option<u64>, then: Option<u64>| -> Option<i128> {
                    Some(now? as i128 - then? as i128)
                };
                Some(Rate {
                    key: t.key(),
                    seconds: secs,
                    allocs_per_sec: per_sec(t.allocs, o.allocs),
                    frees_per_sec: per_sec(t.frees, o.frees),
                    failures_per_sec: per_sec(t.failures, o.failures),
                    in_use_count_delta: delta(t.in_use_count, o.in_use_count),
                    in_use_bytes_delta: delta(t.in_use_bytes, o.in_use_bytes),
                })
            })
            .collect()
    }
}

/// One allocator's totals over a snapshot's types.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllocatorTotals {
    pub allocator: Allocator,
    pub types: u64,
    pub in_use_bytes: Option<u64>,
    /// Free items times their size, where both are known.
    pub free_bytes: Option<u64>,
    pub failures: Option<u64>,
}

/// The change of one type between two snapshots.
#[derive(Clone, Debug, PartialEq)]
pub struct Rate {
    pub key: TypeKey,
    pub seconds: f64,
    pub allocs_per_sec: Option<f64>,
    pub frees_per_sec: Option<f64>,
    pub failures_per_sec: Option<f64>,
    pub in_use_count_delta: Option<i128>,
    pub in_use_bytes_delta: Option<i128>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The type of this allocator and name that libmemstat's `memstat_mtl_find` returns.
    ///
    /// libmemstat keeps its list in the reverse of kernel order (it inserts each type at the
    /// head) and returns the first match in that list, so where the kernel has several types
    /// of one name this is the *last* of them in kernel order: the one with the highest
    /// ordinal. Use [`get`] to pick one by ordinal.
    fn find<'a>(s: &'a Snapshot, allocator: Allocator, name: &str) -> Option<&'a MemoryType> {
        s.types
            .iter()
            .rev()
            .find(|t| t.allocator == allocator && t.name == name)
    }

    /// The type with exactly this key.
    fn get<'a>(s: &'a Snapshot, key: &TypeKey) -> Option<&'a MemoryType> {
        s.types.iter().find(|t| {
            t.allocator == key.allocator && t.ordinal == key.ordinal && t.name == key.name
        })
    }

    fn t(alloc: Allocator, name: &str, allocs: u64) -> MemoryType {
        let mut m = MemoryType::new(alloc, name);
        m.allocs = Some(allocs);
        m.in_use_count = Some(allocs / 2);
        m
    }

    #[test]
    fn each_allocator_definition_is_its_own() {
        for a in Allocator::ALL {
            assert_eq!(a.def().allocator, a);
            // The name is the one fixtures use.
            let json = serde_json::to_string(&a).unwrap();
            assert_eq!(json, format!("\"{}\"", a.def().name));
        }
    }

    #[test]
    fn ordinals_count_duplicates_per_allocator() {
        let mut v = vec![
            t(Allocator::Uma, "a", 1),
            t(Allocator::Uma, "b", 1),
            t(Allocator::Uma, "a", 1),
            t(Allocator::Malloc, "a", 1),
        ];
        assign_ordinals(&mut v);
        let o: Vec<u32> = v.iter().map(|m| m.ordinal).collect();
        assert_eq!(o, vec![0, 0, 1, 0]);
    }

    #[test]
    fn find_matches_memstat_mtl_find_with_repeated_names() {
        // Kernel order: uma a (ordinal 0), uma b, malloc a, uma a (ordinal 1), uma a (2).
        let mut v = vec![
            t(Allocator::Uma, "a", 10),
            t(Allocator::Uma, "b", 20),
            t(Allocator::Malloc, "a", 30),
            t(Allocator::Uma, "a", 40),
            t(Allocator::Uma, "a", 50),
        ];
        assign_ordinals(&mut v);
        let s = Snapshot::new(0, UNIX_EPOCH, "t".into(), v);
        // libmemstat's list is the reverse of kernel order and its find returns the first
        // match there: the last uma "a" in kernel order.
        let a = find(&s, Allocator::Uma, "a").unwrap();
        assert_eq!((a.ordinal, a.allocs), (2, Some(50)));
        // Other allocators' types of the same name are not candidates.
        let m = find(&s, Allocator::Malloc, "a").unwrap();
        assert_eq!((m.ordinal, m.allocs), (0, Some(30)));
        assert_eq!(find(&s, Allocator::Uma, "b").unwrap().allocs, Some(20));
        assert!(find(&s, Allocator::Slab, "a").is_none());
        assert!(find(&s, Allocator::Uma, "c").is_none());
        // The earlier ones stay reachable by key.
        let first = TypeKey {
            allocator: Allocator::Uma,
            name: "a".into(),
            ordinal: 0,
        };
        assert_eq!(get(&s, &first).unwrap().allocs, Some(10));
    }

    #[test]
    fn levels_wrap_with_their_counters_then_clamp() {
        assert_eq!(level_between(10, 4), 6);
        assert_eq!(level_between(4, 4), 0);
        // Frees read ahead of allocations: clamped, not 2^64 - 1.
        assert_eq!(level_between(4, 5), 0);
        // Allocations wrapped past 2^64, frees not yet: the true level.
        assert_eq!(level_between(3, u64::MAX - 1), 5);
        // The boundary: 2^63 - 1 is a level, 2^63 is not.
        assert_eq!(level_between(1 << 63, 1), (1 << 63) - 1);
        assert_eq!(level_between(1 << 63, 0), 0);
    }

    #[test]
    fn find_get_and_diff() {
        let mut a = vec![t(Allocator::Uma, "x", 100), t(Allocator::Uma, "x", 10)];
        assign_ordinals(&mut a);
        let s1 = Snapshot::new(1, UNIX_EPOCH + Duration::from_secs(10), "t".into(), a);
        let mut b = vec![t(Allocator::Uma, "x", 300), t(Allocator::Uma, "x", 5)];
        assign_ordinals(&mut b);
        let s2 = Snapshot::new(2, UNIX_EPOCH + Duration::from_secs(12), "t".into(), b);
        // Two types named x: find returns the last in kernel order, as memstat_mtl_find.
        assert_eq!(find(&s2, Allocator::Uma, "x").unwrap().allocs, Some(5));
        assert!(find(&s2, Allocator::Malloc, "x").is_none());
        let k1 = TypeKey {
            allocator: Allocator::Uma,
            name: "x".into(),
            ordinal: 1,
        };
        assert_eq!(get(&s2, &k1).unwrap().allocs, Some(5));
        let d = s2.diff(&s1);
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].allocs_per_sec, Some(100.0));
        assert_eq!(d[0].in_use_count_delta, Some(100));
        // A counter that went backwards gives no rate.
        assert_eq!(d[1].allocs_per_sec, None);
    }
}
