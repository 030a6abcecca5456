//! /proc/allocinfo as the kernel writes it, for the tests of the allocinfo source: its unit
//! tests (src/memstat/allocinfo_tests.rs) and the walks through snmpd (tests/allocinfo.rs,
//! tests/ops.rs) include this file with `#[path]`, so the one writer of the format is here.
//! The format strings are lib/alloc_tag.c's and lib/codetag.c's (see src/memstat/allocinfo.rs).
// Each includer uses only part of this file.
#![allow(dead_code)]

use std::path::Path;

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

/// Two call sites, a page allocation of the slab allocator's with `slub_bytes` and
/// `slub_calls` and one of a module (ext4), marked inaccurate with `module_inaccurate`: the
/// file the tests of `top` change between two frames.
pub(crate) fn two_sites(slub_bytes: i64, slub_calls: u64, module_inaccurate: bool) -> String {
    header("2.0")
        + &row(
            slub_bytes,
            slub_calls,
            "mm/slub.c:2452",
            None,
            "alloc_slab_page",
            false,
        )
        + &row(
            4096,
            1,
            "fs/ext4/super.c:100",
            Some("ext4"),
            "ext4_fill_super",
            module_inaccurate,
        )
}

/// Writes `text` to `path` by a rename, as a tool replacing a saved copy would: a reader
/// sees the old file or the new one, never half of one.
pub(crate) fn replace(path: &Path, text: &str) {
    let tmp = path.with_extension("next");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}
