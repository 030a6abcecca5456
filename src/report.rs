//! The `dump` report: one snapshot as the project's own table, as fixture JSON, or exactly as
//! FreeBSD's vmstat prints it ([`crate::vmstat`]).
//!
//! The table lays out each allocator in the spirit of its native tool: UMA zones like
//! `vmstat -z`, malloc types like `vmstat -m`, slab caches like `slabtop`, with every figure
//! the snapshot has and kernel order. An absent figure is printed as `-`, never as 0.

use crate::memstat::{fixture, sysctl, Allocator, MemoryType, Snapshot};
use crate::vmstat::{self, VmstatError, FREEBSD_MALLOC_ZONE_SIZES};

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

/// The table: one section per allocator present, in the order malloc, UMA, slab.
pub fn table(s: &Snapshot) -> String {
    let mut out = String::new();
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
    if out.is_empty() {
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
}
