//! Printing memory types: names from the kernel or a file others wrote, made safe to print
//! on a terminal, and figures that may be absent.

use super::MemoryType;
use std::fmt::Write;

/// `s` with control characters (C0, DEL and C1, all below 0x100) escaped `\x1b` style, and a
/// backslash as `\\`, so that the escaping is unambiguous: a control character in a name
/// (ESC starts a terminal escape sequence) would act on the terminal that shows it.
pub(crate) fn escape_controls(s: &str) -> String {
    escape(s, true)
}

/// `s` with control characters escaped `\x1b` style, and backslashes doubled if `backslash`.
fn escape(s: &str, backslash: bool) -> String {
    if !s
        .chars()
        .any(|c| c.is_control() || (backslash && c == '\\'))
    {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' if backslash => out.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out
}

/// libmemstat's `MEMTYPE_MAXNAME`: `mt_name` is a `char[32]`, filled with `strlcpy`, so a
/// name keeps at most 31 bytes.
const MEMTYPE_MAXNAME: usize = 32;

/// A name as `vmstat -m` and `-z` print it: libmemstat's copy of it, at most 31 bytes (a
/// longer name, such as a kernel's 32-byte name without a NUL, loses its end; a character
/// that would be cut in two is dropped whole), with control characters escaped `\x1b` style
/// (vmstat would send them to the terminal) and backslashes as they are (vmstat prints them
/// so).
pub(crate) fn vmstat_name(name: &str) -> String {
    let mut end = name.len().min(MEMTYPE_MAXNAME - 1);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    escape(&name[..end], false)
}

/// The terminal columns of `s` as libxo counts them when it pads a field (`xo_wcwidth`, from
/// Markus Kuhn's wcwidth): two for East Asian wide and full-width characters, one for
/// every other character. libxo counts combining and other zero-width characters as 0
/// columns; they count 1 here (documented in memstat-agentx(8)).
pub(crate) fn columns(s: &str) -> usize {
    s.chars().map(char_columns).sum()
}

/// 2 for a character in the East Asian wide ranges libxo's `xo_wcwidth` lists, else 1.
fn char_columns(c: char) -> usize {
    let wide = matches!(
        u32::from(c),
        0x1100..=0x115f // Hangul Jamo leading consonants
            | 0x2329..=0x232a // angle brackets
            | 0x2e80..=0x303e // CJK radicals .. CJK symbols (not U+303F)
            | 0x3040..=0xa4cf // kana .. Yi
            | 0xac00..=0xd7a3 // Hangul syllables
            | 0xf900..=0xfaff // CJK compatibility ideographs
            | 0xfe10..=0xfe19 // vertical forms
            | 0xfe30..=0xfe6f // CJK compatibility forms
            | 0xff00..=0xff60 // full-width forms
            | 0xffe0..=0xffe6 // full-width signs
            | 0x20000..=0x2fffd // CJK extension planes
            | 0x30000..=0x3fffd
    );
    if wide {
        2
    } else {
        1
    }
}

/// `s` right-aligned in `width` columns (C's `%*s` as libxo pads it, by [`columns`]).
pub(crate) fn pad_left(s: &str, width: usize) -> String {
    let pad = width.saturating_sub(columns(s));
    format!("{:pad$}{s}", "")
}

/// `s` left-aligned in `width` columns (C's `%-*s` as libxo pads it, by [`columns`]).
pub(crate) fn pad_right(s: &str, width: usize) -> String {
    let pad = width.saturating_sub(columns(s));
    format!("{s}{:pad$}", "")
}

/// A figure as the tables print it: an absent one is `-`, never 0.
pub(crate) fn opt(v: Option<u64>) -> String {
    v.map_or_else(|| "-".to_string(), |n| n.to_string())
}

/// How `dump`'s table prints a figure in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Sizes {
    /// Exactly, as vmstat and slabtop do.
    #[default]
    Bytes,
    /// In powers of 1024 with a unit, as `ls -h` does: `512`, `1.5K`, `12M`, `3.0G`.
    Human,
}

/// A figure in bytes as the tables print it (absent: `-`).
pub(crate) fn bytes(v: Option<u64>, sizes: Sizes) -> String {
    match (v, sizes) {
        (Some(n), Sizes::Human) => human(n),
        (v, _) => opt(v),
    }
}

/// `n` bytes in the largest unit of 1024 it reaches, rounded up as GNU `ls -h` rounds: one
/// decimal below 10 of the unit, else whole; a value that rounds up to 1024 of a unit is 1.0
/// of the next.
pub(crate) fn human(n: u64) -> String {
    const UNITS: [&str; 6] = ["K", "M", "G", "T", "P", "E"];
    if n < 1024 {
        return n.to_string();
    }
    let n = u128::from(n);
    let (mut unit, mut scale) = (0, 1024u128);
    while n >= scale * 1024 && unit + 1 < UNITS.len() {
        scale *= 1024;
        unit += 1;
    }
    let tenths = (n * 10).div_ceil(scale);
    if tenths < 100 {
        return format!("{}.{}{}", tenths / 10, tenths % 10, UNITS[unit]);
    }
    match n.div_ceil(scale) {
        whole if whole < 1024 || unit + 1 == UNITS.len() => format!("{whole}{}", UNITS[unit]),
        _ => format!("1.0{}", UNITS[unit + 1]),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_sizes_are_powers_of_1024_rounded_up_as_ls_h_rounds() {
        for (n, want) in [
            (0, "0"),
            (1023, "1023"),
            (1024, "1.0K"),
            (1025, "1.1K"),
            (1536, "1.5K"),
            (10 * 1024 - 1, "10K"),
            (10 * 1024, "10K"),
            (10 * 1024 + 1, "11K"),
            (1023 * 1024, "1023K"),
            (1024 * 1024 - 1, "1.0M"),
            (1024 * 1024, "1.0M"),
            (76_800_000, "74M"),
            (u64::MAX, "16E"),
        ] {
            assert_eq!(human(n), want, "{n}");
        }
        assert_eq!(bytes(None, Sizes::Human), "-");
        assert_eq!(bytes(Some(2048), Sizes::Bytes), "2048");
    }
}
