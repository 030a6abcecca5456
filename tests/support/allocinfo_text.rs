//! /proc/allocinfo as the kernel writes it, for the tests of the allocinfo source: its unit
//! tests (src/memstat/allocinfo_tests.rs) and the walks through snmpd (tests/allocinfo.rs,
//! tests/ops.rs) include this file with `#[path]`, so the one writer of the format is here.
//! The format strings are lib/alloc_tag.c's and lib/codetag.c's (see src/memstat/allocinfo.rs).

/// Line 1 and 2 as `print_allocinfo_header` writes them.
pub(crate) fn header(version: &str) -> String {
    format!("allocinfo - version: {version}\n#     <size>  <calls> <tag info>\n")
}

/// A row as `alloc_tag_to_text` and `codetag_to_text` write it: `"%12lli %8llu "`, the tag
/// (with ` [module]` for a module's site), ` accurate:no` when asked (format 2.0), a space,
/// the newline.
pub(crate) fn row(
    bytes: i64,
    calls: u64,
    place: &str,
    module: Option<&str>,
    func: &str,
    inaccurate: bool,
) -> String {
    let module = module.map(|m| format!(" [{m}]")).unwrap_or_default();
    let marker = if inaccurate { " accurate:no" } else { "" };
    format!("{bytes:12} {calls:8} {place}{module} func:{func}{marker} \n")
}
