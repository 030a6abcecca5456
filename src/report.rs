//! The `dump` report: one snapshot as the project's own table, as fixture JSON, or exactly as
//! FreeBSD's vmstat prints it ([`crate::vmstat`]).
//!
//! The table lays out each allocator in the spirit of its native tool: UMA zones like
//! `vmstat -z`, malloc types like `vmstat -m`, slab caches like `slabtop`, with every figure
//! the snapshot has and kernel order. An absent figure is printed as `-`, never as 0.

use crate::memstat::source::{KernelKind, SOURCES};
use crate::memstat::{fixture, sysctl, Allocator, MemoryType, Snapshot};
use crate::vmstat::{self, VmstatError, FREEBSD_MALLOC_ZONE_SIZES};
use std::fmt::Write as _;

/// Output formats of `dump`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Table,
    Json,
    /// What `vmstat -m -z` prints to a pipe; refused for slab rows.
    Vmstat,
}

pub fn render(s: &Snapshot, format: Format) -> Result<String, VmstatError> {
    match format {
        Format::Json => {
            let mut j = fixture::to_json(s);
            j.push('\n');
            Ok(j)
        }
        Format::Table => Ok(table(s)),
        Format::Vmstat => {
            // The size masks index the running kernel's malloc zone table: read it when the
            // snapshot is the running kernel's, else use FreeBSD 15.0's.
            let live = sysctl::live_malloc_zone_sizes(s);
            vmstat::render(s, live.as_deref().unwrap_or(&FREEBSD_MALLOC_ZONE_SIZES))
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

/// The table: the kernel's memory by kind, then one section per allocator present, in the
/// order malloc, UMA, slab.
pub fn table(s: &Snapshot) -> String {
    let mut out = overview(s);
    for alloc in Allocator::ALL {
        let rows: Vec<&MemoryType> = s.iter().filter(|t| t.allocator == alloc).collect();
        if rows.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        (alloc.def().dump_table)(&mut out, &rows);
    }
    if s.iter().next().is_none() {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str("(no memory types)\n");
    }
    out
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
        let out = table(&s);
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
        let out = table(&s);
        assert!(!out.chars().any(|c| c.is_control() && c != '\n'), "{out:?}");
        assert_eq!(
            out.matches("evil\\x1b[2J\\x07\\x85\\\\x\\x09tab").count(),
            3,
            "{out}"
        );
        let json = render(&s, Format::Json).unwrap();
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
        let out = table(&s);
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
        let out = table(&s);
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
}
