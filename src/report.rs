//! The `dump` report: one snapshot as the project's own table, as fixture JSON, or exactly as
//! FreeBSD's vmstat prints it ([`crate::vmstat`]).
//!
//! The table lays out each allocator in the spirit of its native tool: UMA zones like
//! `vmstat -z`, malloc types like `vmstat -m`, slab caches like `slabtop`, with every figure
//! the snapshot has and kernel order. An absent figure is printed as `-`, never as 0.

use crate::memstat::allocinfo::Site;
use crate::memstat::display::{bytes, escape_controls, opt};
use crate::memstat::source::{FigureGroup, FigureObject, KernelKind, Role, SOURCES};
use crate::memstat::{fixture, sysctl, Allocator, MemoryType, Sizes, Snapshot};
use crate::vmstat::{self, Release, VmstatError, FREEBSD_MALLOC_ZONE_SIZES};
use std::fmt::Write as _;

/// Output formats of `dump`. `top` is how many allocation call sites to show, by bytes (the
/// table shows [`DEFAULT_TOP_SITES`] when it is not given, JSON every site).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Format {
    Table(TableOptions),
    Json {
        top: Option<usize>,
    },
    /// What `vmstat -m -z` of this FreeBSD release prints to a pipe; refused for slab rows.
    Vmstat(Release),
}

/// The call sites the table shows when `--top` is not given: a screenful.
pub const DEFAULT_TOP_SITES: usize = 20;

/// What the table shows of the memory types, and how.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableOptions {
    /// The call sites shown, and the types shown of each allocator (the first by `sort`, by
    /// default the most bytes in use). `None`: [`DEFAULT_TOP_SITES`] sites and every type.
    pub top: Option<usize>,
    /// The order of each allocator's types; `None`: the kernel's (unless `top` is given).
    pub sort: Option<SortKey>,
    /// Only the types whose name contains this text.
    pub name: Option<String>,
    pub sizes: Sizes,
}

/// The orders of `dump --sort`: the figures largest first (an absent one last), the name
/// alphabetically.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SortKey {
    /// Bytes in use.
    Bytes,
    /// Items in use.
    Items,
    /// Allocations since boot.
    Allocs,
    /// Failed allocations since boot.
    Failures,
    /// The name.
    Name,
}

impl SortKey {
    fn figure(self, t: &MemoryType) -> Option<u64> {
        match self {
            SortKey::Bytes => t.in_use_bytes,
            SortKey::Items => t.in_use_count,
            SortKey::Allocs => t.allocs,
            SortKey::Failures => t.failures,
            SortKey::Name => None,
        }
    }

    /// Orders `rows` by this key; a stable sort, so ties keep the kernel's order.
    fn sort(self, rows: &mut [&MemoryType]) {
        match self {
            SortKey::Name => rows.sort_by(|a, b| a.name.cmp(&b.name)),
            key => rows.sort_by_key(|t| std::cmp::Reverse(key.figure(t))),
        }
    }
}

pub fn render(s: &Snapshot, format: Format) -> Result<String, VmstatError> {
    match format {
        Format::Json { top } => {
            let mut s = s.clone();
            if let Some(p) = &mut s.profiling {
                p.sites = top_sites(&p.sites, top.unwrap_or(usize::MAX))
                    .into_iter()
                    .cloned()
                    .collect();
            }
            let mut j = fixture::to_json(&s);
            j.push('\n');
            Ok(j)
        }
        Format::Table(options) => Ok(table(s, &options)),
        Format::Vmstat(release) => {
            // The size masks index the running kernel's malloc zone table: read it when the
            // snapshot is the running kernel's, else use FreeBSD's (the same in 13 to 15.0).
            let live = sysctl::live_malloc_zone_sizes(s);
            vmstat::render(
                s,
                live.as_deref().unwrap_or(&FREEBSD_MALLOC_ZONE_SIZES),
                release,
            )
        }
    }
}

/// The kernel's memory by kind (memKernelTable's rows), as a tree by parent: each row's
/// bytes and its share of its parent (of the stackable rows' sum, at the top). A row that
/// overlaps its siblings is marked and left out of the shares' base. Empty when the
/// snapshot has no kind's figure.
pub fn overview(s: &Snapshot) -> String {
    let kinds: Vec<&KernelKind> = SOURCES
        .iter()
        .flat_map(|d| d.kinds.iter())
        .filter(|k| s.figures.contains_key(k.figure))
        .collect();
    if kinds.is_empty() {
        return String::new();
    }
    let bytes = |k: &KernelKind| s.figures[k.figure];
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<32} {:>20} {:>7}",
        "KERNEL MEMORY", "BYTES", "SHARE"
    );
    fn rows(
        out: &mut String,
        kinds: &[&KernelKind],
        parent: u32,
        base: Option<u64>,
        depth: usize,
        bytes: &dyn Fn(&KernelKind) -> u64,
    ) {
        let children: Vec<&KernelKind> = kinds
            .iter()
            .copied()
            .filter(|k| k.parent == parent)
            .collect();
        // The base of the top rows' shares: what the stackable ones add up to.
        let base = base.unwrap_or_else(|| {
            children
                .iter()
                .filter(|k| k.stackable)
                .map(|k| bytes(k))
                .fold(0u64, u64::saturating_add)
        });
        for k in children {
            let b = bytes(k);
            let share = match (k.stackable, base) {
                (true, base) if base > 0 => format!("{:.1}%", b as f64 * 100.0 / base as f64),
                _ => "-".to_string(),
            };
            let mark = match (k.stackable, k.reclaimable) {
                (false, _) => " *",
                (true, true) => " +",
                (true, false) => "",
            };
            let label = format!("{:indent$}{}{mark}", "", k.name, indent = depth * 2);
            let _ = writeln!(out, "{label:<32} {b:>20} {share:>7}");
            rows(out, kinds, k.index, Some(b), depth + 1, bytes);
        }
    }
    rows(&mut out, &kinds, 0, None, 0, &bytes);
    out.push_str("* overlaps the rows beside it: not in their shares; + reclaimable\n");
    out
}

/// The sources' groups of figures (the ZFS ARC's), each laid out by its objects' roles: the
/// total, its limits, its parts with their sum, the other split of it and the other levels,
/// each with its share of the total; then the counters and the hit ratio. A group whose
/// [`Role::Count`] figure is absent or 0 (no ZFS) prints nothing.
pub fn figure_groups(s: &Snapshot) -> String {
    let mut out = String::new();
    let mut seen: Vec<&str> = Vec::new();
    for g in SOURCES.iter().flat_map(|d| d.groups.iter()) {
        if seen.contains(&g.name) {
            continue;
        }
        seen.push(g.name);
        let count = g.objects.iter().find(|o| o.role == Role::Count);
        if count.map_or(0, |o| s.figures.get(o.figure).copied().unwrap_or(0)) == 0 {
            continue;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        figure_group(&mut out, s, g);
    }
    out
}

fn figure_group(out: &mut String, s: &Snapshot, g: &FigureGroup) {
    let value = |o: &FigureObject| s.figures.get(o.figure).copied();
    let total = g
        .objects
        .iter()
        .find(|o| o.role == Role::Total)
        .and_then(value);
    let share = |v: Option<u64>| match (v, total) {
        (Some(v), Some(t)) if t > 0 => format!("{:.1}%", v as f64 * 100.0 / t as f64),
        _ => "-".to_string(),
    };
    // The statistic as the kernel names it (the figure's key after its source's prefix).
    let statistic = |o: &FigureObject| o.figure.split_once('.').map_or(o.figure, |(_, n)| n);
    let row = |out: &mut String, indent: &str, label: &str, object: &str, v: Option<u64>| {
        let label = format!("{indent}{label}");
        let _ = writeln!(
            out,
            "{label:<28} {object:<30} {:>20} {:>8}",
            opt(v),
            share(v)
        );
    };
    let of = |role: Role| g.objects.iter().filter(move |o| o.role == role);
    let _ = writeln!(
        out,
        "{:<28} {:<30} {:>20} {:>8}",
        g.title.to_uppercase(),
        "OBJECT",
        "BYTES",
        "OF SIZE"
    );
    for role in [Role::Total, Role::Limit] {
        for o in of(role) {
            row(out, "", statistic(o), o.name, value(o));
        }
    }
    let sections = [
        (Role::Part, "parts, stacked"),
        (Role::OtherSplit, "another split of them"),
        (Role::Level, "other levels"),
    ];
    for (role, heading) in sections {
        if of(role).next().is_none() {
            continue;
        }
        let _ = writeln!(out, "{heading}:");
        for o in of(role) {
            row(out, "  ", statistic(o), o.name, value(o));
        }
        if role == Role::Part {
            let sum = of(role).filter_map(value).fold(0u64, u64::saturating_add);
            row(out, "  ", "(sum of the parts)", "", Some(sum));
        }
    }
    let _ = writeln!(out, "{:<28} {:<30} {:>20}", "COUNTERS", "OBJECT", "COUNT");
    for role in [Role::Hits, Role::Misses, Role::Counter] {
        for o in of(role) {
            let _ = writeln!(
                out,
                "{:<28} {:<30} {:>20}",
                statistic(o),
                o.name,
                opt(value(o))
            );
        }
    }
    let sum_of = |role: Role| -> Option<u64> {
        of(role)
            .map(value)
            .try_fold(0u64, |a, v| v.map(|v| a.saturating_add(v)))
    };
    let ratio = match (sum_of(Role::Hits), sum_of(Role::Misses)) {
        (Some(h), Some(m)) if h.saturating_add(m) > 0 => {
            format!("{:.2}%", h as f64 * 100.0 / (h as f64 + m as f64))
        }
        _ => "-".to_string(),
    };
    let _ = writeln!(
        out,
        "{:<28} {:<30} {ratio:>20}",
        "hit ratio", "hits/(hits+misses)"
    );
}

/// The `top` sites holding the most bytes, most first (ties in the kernel's order).
pub fn top_sites(sites: &[Site], top: usize) -> Vec<&Site> {
    let mut v: Vec<&Site> = sites.iter().collect();
    v.sort_by_key(|s| std::cmp::Reverse(s.bytes));
    v.truncate(top);
    v
}

/// The allocation call sites: the state of profiling, then the `top` sites by bytes. Empty
/// when no source reads profiling.
pub fn call_sites(s: &Snapshot, top: usize) -> String {
    let Some(p) = &s.profiling else {
        return String::new();
    };
    let mut out = String::new();
    let shown = top_sites(&p.sites, top);
    let _ = writeln!(
        out,
        "ALLOCATION CALL SITES: profiling {}; {} of {} sites ({} rows), by bytes",
        p.state.describe(),
        shown.len(),
        p.sites.len(),
        p.rows
    );
    if shown.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "{:>16} {:>10} {:>8} {:<16} {:<32} FILE:LINE",
        "BYTES", "CALLS", "ACCURATE", "MODULE", "FUNCTION"
    );
    for site in shown {
        let _ = writeln!(
            out,
            "{:>16} {:>10} {:>8} {:<16} {:<32} {}:{}",
            site.bytes,
            site.calls,
            if site.accurate { "yes" } else { "no" },
            escape_controls(if site.module.is_empty() {
                "-"
            } else {
                &site.module
            }),
            escape_controls(&site.function),
            escape_controls(&site.file),
            site.line
        );
    }
    out
}

/// The table: the kernel's memory by kind, the sources' groups of figures (the ZFS ARC), the
/// `top` allocation call sites, then one section per allocator present, in the order malloc,
/// UMA, slab, each with its types as `options` choose them and a line of totals.
pub fn table(s: &Snapshot, options: &TableOptions) -> String {
    let top_sites = options.top.unwrap_or(DEFAULT_TOP_SITES);
    let mut out = overview(s);
    for section in [figure_groups(s), call_sites(s, top_sites)] {
        if section.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&section);
    }
    let named = |t: &&MemoryType| options.name.as_ref().is_none_or(|n| t.name.contains(n));
    for alloc in Allocator::ALL {
        let mut rows: Vec<&MemoryType> = s
            .iter()
            .filter(|t| t.allocator == alloc)
            .filter(named)
            .collect();
        if rows.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        let all = rows.len();
        // The top N are the biggest unless another order is asked for.
        let order = options.sort.or(options.top.map(|_| SortKey::Bytes));
        if let Some(key) = order {
            key.sort(&mut rows);
        }
        let total = Totals::of(&rows);
        rows.truncate(options.top.unwrap_or(usize::MAX));
        (alloc.def().dump_table)(&mut out, &rows, options.sizes);
        total.write(&mut out, alloc, all, rows.len(), options.sizes);
    }
    if !s.iter().any(|t| named(&t)) {
        if !out.is_empty() {
            out.push('\n');
        }
        match &options.name {
            Some(n) if s.iter().next().is_some() => {
                let _ = writeln!(out, "(no memory type's name contains {n:?})");
            }
            _ => out.push_str("(no memory types)\n"),
        }
    }
    out
}

/// An allocator's types added up: what memAllocatorTable serves, for the rows shown by name.
struct Totals {
    bytes: Option<u64>,
    items: Option<u64>,
}

impl Totals {
    /// The sums of the figures the rows have (saturating: levels never wrap); `None` when no
    /// row has the figure.
    fn of(rows: &[&MemoryType]) -> Totals {
        let sum = |f: fn(&MemoryType) -> Option<u64>| {
            rows.iter().filter_map(|t| f(t)).reduce(u64::saturating_add)
        };
        Totals {
            bytes: sum(|t| t.in_use_bytes),
            items: sum(|t| t.in_use_count),
        }
    }

    /// "total: 212 uma types (10 shown), 1.2G in use, 3456789 items".
    fn write(&self, out: &mut String, alloc: Allocator, all: usize, shown: usize, sizes: Sizes) {
        let shown = match shown < all {
            true => format!(" ({shown} shown)"),
            false => String::new(),
        };
        let unit = match sizes {
            Sizes::Bytes => " bytes",
            Sizes::Human => "",
        };
        let _ = writeln!(
            out,
            "total: {all} {} types{shown}, {}{unit} in use, {} items",
            alloc.def().name,
            bytes(self.bytes, sizes),
            opt(self.items),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    #[test]
    fn uma_row_is_laid_out_like_vmstat_z() {
        let mut t = MemoryType::new(Allocator::Uma, "mbuf");
        t.size = Some(256);
        t.count_limit = Some(0);
        t.in_use_count = Some(10);
        t.free_count = Some(5);
        t.allocs = Some(100);
        t.failures = Some(0);
        t.sleeps = Some(0);
        t.xdomain = Some(0);
        let s = Snapshot::new(0, UNIX_EPOCH, "t".into(), vec![t]);
        let out = table(&s, &TableOptions::default());
        let row = out.lines().nth(1).unwrap();
        assert_eq!(
            row,
            "mbuf:                  256,      0,      10,       5,     100,   0,   0,   0"
        );
    }

    #[test]
    fn control_characters_in_names_are_escaped_in_the_table_only() {
        let mut types = Vec::new();
        for alloc in Allocator::ALL {
            types.push(MemoryType::new(alloc, "evil\x1b[2J\x07\u{85}\\x\ttab"));
        }
        let s = Snapshot::new(0, UNIX_EPOCH, "t".into(), types);
        let out = table(&s, &TableOptions::default());
        assert!(!out.chars().any(|c| c.is_control() && c != '\n'), "{out:?}");
        assert_eq!(
            out.matches("evil\\x1b[2J\\x07\\x85\\\\x\\x09tab").count(),
            3,
            "{out}"
        );
        let json = render(&s, Format::Json { top: None }).unwrap();
        assert!(
            json.contains("evil\\u001b[2J\\u0007\u{85}\\\\x\\ttab"),
            "{json}"
        );
    }

    #[test]
    fn absent_figures_print_as_dash() {
        let mut t = MemoryType::new(Allocator::Slab, "dentry");
        t.size = Some(192);
        let s = Snapshot::new(0, UNIX_EPOCH, "t".into(), vec![t]);
        let out = table(&s, &TableOptions::default());
        assert!(out.lines().nth(1).unwrap().contains(" - "), "{out}");
    }

    #[test]
    fn the_overview_is_a_tree_with_shares_and_comes_first() {
        let mut s = Snapshot::new(
            0,
            UNIX_EPOCH,
            "t".into(),
            vec![MemoryType::new(Allocator::Slab, "c")],
        );
        for (figure, kb) in [
            ("meminfo.Slab", 800u64),
            ("meminfo.SReclaimable", 600),
            ("meminfo.SUnreclaim", 200),
            ("meminfo.KReclaimable", 600),
            ("meminfo.PageTables", 200),
        ] {
            s.figures.insert(figure.into(), kb * 1024);
        }
        let out = table(&s, &TableOptions::default());
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[0].starts_with("KERNEL MEMORY"), "{out}");
        let row = |i: usize| lines[i].split_whitespace().collect::<Vec<_>>();
        // Top rows share the stackable rows' sum (slab + pageTables), children their parent's.
        assert_eq!(row(1), ["slab", "819200", "80.0%"]);
        assert_eq!(row(2), ["slabReclaimable", "+", "614400", "75.0%"]);
        assert_eq!(row(3), ["slabUnreclaimable", "204800", "25.0%"]);
        assert_eq!(row(4), ["kernelReclaimable", "*", "614400", "-"]);
        assert_eq!(row(5), ["pageTables", "204800", "20.0%"]);
        assert!(lines[6].starts_with("* overlaps"), "{out}");
        // Kinds with no figure are not listed; the allocators' tables follow.
        assert!(!out.contains("vmalloc"), "{out}");
        assert!(out.contains("c "), "{out}");
        assert_eq!(
            overview(&Snapshot::new(0, UNIX_EPOCH, "t".into(), vec![])),
            ""
        );
    }

    /// The figure groups' objects, with their roles (the ARC's, from its definition).
    fn grouped() -> Vec<&'static FigureObject> {
        SOURCES
            .iter()
            .flat_map(|d| d.groups.iter())
            .flat_map(|g| g.objects.iter())
            .collect()
    }

    #[test]
    fn a_figure_group_is_laid_out_by_its_roles_and_absent_without_statistics() {
        let mut s = Snapshot::new(0, UNIX_EPOCH, "t".into(), vec![]);
        let objects = grouped();
        let mut v = 1000u64;
        for o in &objects {
            v += 1000;
            s.figures.insert(o.figure.into(), v);
        }
        let total = objects.iter().find(|o| o.role == Role::Total).unwrap();
        s.figures.insert(total.figure.into(), 100_000);
        let count = objects.iter().find(|o| o.role == Role::Count).unwrap();
        s.figures.insert(count.figure.into(), 0);
        assert_eq!(figure_groups(&s), "", "statistics 0: nothing printed");
        s.figures.insert(count.figure.into(), 30);
        let out = table(&s, &TableOptions::default());
        let lines: Vec<&str> = out.lines().collect();
        // After the overview (whose zfsArc row is the size), before the allocators.
        assert!(lines[0].starts_with("KERNEL MEMORY"), "{out}");
        let heading = lines.iter().position(|l| l.starts_with("ZFS ARC "));
        assert!(heading.is_some_and(|h| h > 1), "{out}");
        assert_eq!(lines.last(), Some(&"(no memory types)"), "{out}");
        let row = |name: &str| -> Vec<&str> {
            lines
                .iter()
                .find(|l| l.split_whitespace().nth(1) == Some(name))
                .unwrap_or_else(|| panic!("no row of {name}:\n{out}"))
                .split_whitespace()
                .collect()
        };
        assert_eq!(row(total.name), ["size", total.name, "100000", "100.0%"]);
        // Every object but the count has its row, with its own figure; bytes have a share.
        for o in objects.iter().filter(|o| o.role != Role::Count) {
            let r = row(o.name);
            assert_eq!(r[2], s.figures[o.figure].to_string(), "{r:?}");
            let bytes = !matches!(o.role, Role::Hits | Role::Misses | Role::Counter);
            assert_eq!(r.len(), if bytes { 4 } else { 3 }, "{r:?}");
        }
        // The parts come under their heading, with their sum.
        let parts: Vec<u64> = objects
            .iter()
            .filter(|o| o.role == Role::Part)
            .map(|o| s.figures[o.figure])
            .collect();
        let at = |needle: &str| lines.iter().position(|l| l.contains(needle)).unwrap();
        let heading = at("parts, stacked:");
        for (i, o) in objects.iter().filter(|o| o.role == Role::Part).enumerate() {
            assert_eq!(at(o.name), heading + 1 + i, "{out}");
        }
        let sum: u64 = parts.iter().sum();
        assert!(
            lines[heading + 1 + parts.len()].contains(&format!(" {sum} ")),
            "{out}"
        );
        // hits / (hits + misses).
        let [h, m] = [Role::Hits, Role::Misses].map(|r| {
            let o = objects.iter().find(|o| o.role == r).unwrap();
            s.figures[o.figure] as f64
        });
        let ratio = format!("{:.2}%", h * 100.0 / (h + m));
        assert!(lines[at("hit ratio")].ends_with(&ratio), "{out}");
        // An absent statistic is a dash, never 0.
        let mru = objects.iter().find(|o| o.role == Role::OtherSplit).unwrap();
        s.figures.remove(mru.figure);
        let out = table(&s, &TableOptions::default());
        let line = out.lines().find(|l| l.contains(mru.name)).unwrap();
        assert_eq!(line.split_whitespace().nth(2), Some("-"), "{out}");
    }
}
