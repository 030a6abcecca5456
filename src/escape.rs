//! Names from the kernel or a file others wrote, made safe to print on a terminal.

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
