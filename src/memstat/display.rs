//! Printing memory types: names from the kernel or a file others wrote, made safe to print
//! on a terminal, and figures that may be absent.

use super::MemoryType;
use std::fmt::Write;

/// `s` with control characters (C0, DEL and C1, all below 0x100) escaped `\x1b` style, and a
/// backslash as `\\`, so that the escaping is unambiguous: a control character in a name
/// (ESC starts a terminal escape sequence) would act on the terminal that shows it.
pub(crate) fn escape_controls(s: &str) -> String {
    if !s.chars().any(|c| c.is_control() || c == '\\') {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out
}

/// A figure as the tables print it: an absent one is `-`, never 0.
pub(crate) fn opt(v: Option<u64>) -> String {
    v.map_or_else(|| "-".to_string(), |n| n.to_string())
}

/// The name as the table shows it. Names come from the kernel or a fixture file, and a
/// control character in one (ESC starts a terminal escape sequence) would act on the
/// terminal that shows the table: control characters (C0, DEL and C1, all below 0x100) are
/// printed escaped, `\x1b` style, and a backslash as `\\` so that the escaping is
/// unambiguous. JSON output keeps names exact (serde escapes them).
pub(crate) fn display_name(t: &MemoryType) -> String {
    let name = escape_controls(&t.name);
    if t.ordinal == 0 {
        name
    } else {
        format!("{name}#{}", t.ordinal)
    }
}
