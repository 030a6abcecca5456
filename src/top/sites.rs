//! `top`'s call-site rows, where allocation profiling is read (Linux's /proc/allocinfo, or
//! memAllocSiteTable over SNMP): one row per call site with the bytes and the live
//! allocations it holds, and their rates of change between two snapshots. The columns are
//! one table of definitions ([`SITE_COLUMNS`]), as the types' are.
//!
//! A site's figures are levels, not counters: the kernel counts what each call site holds
//! now. So a site has no allocation rate, only the rates of change of its bytes and calls.

use super::Cell;
use crate::memstat::allocinfo::{Site, SiteKey};
use crate::memstat::Snapshot;
use std::collections::HashMap;

/// One row: a call site with its rates.
#[derive(Clone, Debug)]
pub struct SiteRow<'a> {
    pub site: &'a Site,
    pub rate: Option<&'a SiteRate>,
}

/// The changes of a site's levels over an interval.
#[derive(Clone, Debug, PartialEq)]
pub struct SiteRate {
    pub seconds: f64,
    pub bytes: i128,
    pub calls: i128,
}

impl SiteRow<'_> {
    fn per_sec(&self, delta: impl Fn(&SiteRate) -> i128) -> Option<f64> {
        let r = self.rate?;
        (r.seconds > 0.0).then(|| delta(r) as f64 / r.seconds)
    }

    /// What the name filter looks in: where, which function and which module.
    pub fn text(&self) -> String {
        let s = self.site;
        format!("{}:{} {} {}", s.file, s.line, s.function, s.module)
    }
}

/// One column of the call-site rows.
pub struct SiteColumn {
    pub name: &'static str,
    pub header: &'static str,
    pub width: usize,
    /// Sorted from the largest by default (text from A).
    pub descending: bool,
    /// Left-aligned.
    pub text: bool,
    pub cell: fn(&SiteRow) -> Cell,
}

/// Every call-site column, in the order shown.
pub const SITE_COLUMNS: &[SiteColumn] = &[
    SiteColumn {
        name: "site",
        header: "SITE",
        width: 36,
        descending: false,
        text: true,
        cell: |r| Cell::Text(format!("{}:{}", r.site.file, r.site.line)),
    },
    SiteColumn {
        name: "function",
        header: "FUNCTION",
        width: 28,
        descending: false,
        text: true,
        cell: |r| Cell::Text(r.site.function.clone()),
    },
    SiteColumn {
        name: "module",
        header: "MODULE",
        width: 12,
        descending: false,
        text: true,
        cell: |r| Cell::Text(r.site.module.clone()),
    },
    SiteColumn {
        name: "bytes",
        header: "BYTES",
        width: 14,
        descending: true,
        text: false,
        cell: |r| Cell::Count(Some(r.site.bytes)),
    },
    SiteColumn {
        name: "calls",
        header: "CALLS",
        width: 10,
        descending: true,
        text: false,
        cell: |r| Cell::Count(Some(r.site.calls)),
    },
    SiteColumn {
        name: "bytes_per_sec",
        header: "BYTES/s",
        width: 12,
        descending: true,
        text: false,
        cell: |r| Cell::Rate(r.per_sec(|d| d.bytes)),
    },
    SiteColumn {
        name: "calls_per_sec",
        header: "CALLS/s",
        width: 10,
        descending: true,
        text: false,
        cell: |r| Cell::Rate(r.per_sec(|d| d.calls)),
    },
];

/// The call-site column named (by name or header, in any case).
pub fn site_column(name: &str) -> Option<&'static SiteColumn> {
    SITE_COLUMNS
        .iter()
        .find(|c| c.name.eq_ignore_ascii_case(name) || c.header.eq_ignore_ascii_case(name))
}

/// The names `--sort` takes with `--sites`.
pub(super) fn site_column_names() -> String {
    let v: Vec<&str> = SITE_COLUMNS.iter().map(|c| c.name).collect();
    v.join(", ")
}

/// The changes of each site present in both snapshots, over the time between their reads.
pub(super) fn site_rates(now: &Snapshot, last: &Snapshot) -> HashMap<SiteKey, SiteRate> {
    let (Some(now_p), Some(last_p)) = (&now.profiling, &last.profiling) else {
        return HashMap::new();
    };
    let seconds = now.taken_at_ms.saturating_sub(last.taken_at_ms) as f64 / 1000.0;
    let before: HashMap<SiteKey, &Site> = last_p.sites.iter().map(|s| (s.key(), s)).collect();
    now_p
        .sites
        .iter()
        .filter_map(|s| {
            let key = s.key();
            let b = before.get(&key)?;
            let rate = SiteRate {
                seconds,
                bytes: i128::from(s.bytes) - i128::from(b.bytes),
                calls: i128::from(s.calls) - i128::from(b.calls),
            };
            Some((key, rate))
        })
        .collect()
}

/// The sites of `snap` that `keep` keeps, sorted by `sort` (reversed with `reverse`).
pub(super) fn site_rows<'a>(
    snap: &'a Snapshot,
    rates: &'a HashMap<SiteKey, SiteRate>,
    sort: &SiteColumn,
    reverse: bool,
    keep: impl Fn(&SiteRow) -> bool,
) -> Vec<SiteRow<'a>> {
    let Some(p) = &snap.profiling else {
        return Vec::new();
    };
    let rows = p
        .sites
        .iter()
        .map(|site| SiteRow {
            site,
            rate: rates.get(&site.key()),
        })
        .filter(|r| keep(r));
    super::sorted(
        rows,
        |r| (sort.cell)(r).sort_key(),
        sort.descending != reverse,
    )
}

/// A line of the call-site table from its cells' texts.
pub(super) fn site_line<'a>(cells: impl Iterator<Item = &'a str>) -> String {
    let mut line = String::new();
    for ((i, c), text) in SITE_COLUMNS.iter().enumerate().zip(cells) {
        super::push_cell(&mut line, i, c.width, !c.text, text);
    }
    line.truncate(line.trim_end().len());
    line
}

/// A row's line.
pub(super) fn row_line(r: &SiteRow) -> String {
    let cells: Vec<String> = SITE_COLUMNS.iter().map(|c| (c.cell)(r).text()).collect();
    site_line(cells.iter().map(String::as_str))
}

/// The header's line.
pub(super) fn header_line() -> String {
    site_line(SITE_COLUMNS.iter().map(|c| c.header))
}
