//! The product's source files as the structure tests read them: every `.rs` file under
//! src/, agentx-proto/src/ and bsnmp-agentx/src/, with its test code left out (files only `#[cfg(test)]`
//! modules declare, and the `#[cfg(test)] mod` that ends a file) and its comments blanked.
//! Included with `#[path]`.

// Each test crate that includes this uses part of it.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

pub struct ProductFile {
    /// Relative to the repository, e.g. `src/memstat/linux.rs`.
    pub path: String,
    /// The code, without test code or comments; string literals are kept.
    pub code: String,
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The files that a `#[cfg(test)]` module declaration in `file` names (`mod x;` or
/// `#[path = "p"] mod x;`).
fn test_only_children(file: &Path, text: &str) -> Vec<PathBuf> {
    let dir = file.parent().unwrap();
    let own_dir = match file.file_name().and_then(|n| n.to_str()) {
        Some("mod.rs" | "lib.rs" | "main.rs") => dir.to_path_buf(),
        _ => dir.join(file.file_stem().unwrap()),
    };
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if *l != "#[cfg(test)]" {
            continue;
        }
        let mut j = i + 1;
        let mut path = None;
        if let Some(p) = lines.get(j).and_then(|l| l.strip_prefix("#[path = \"")) {
            path = p.strip_suffix("\"]").map(String::from);
            j += 1;
        }
        let Some(m) = lines.get(j).and_then(|l| l.strip_prefix("mod ")) else {
            continue;
        };
        let Some(name) = m.strip_suffix(';') else {
            continue;
        };
        out.push(match path {
            Some(p) => dir.join(p),
            None => own_dir.join(format!("{name}.rs")),
        });
    }
    out
}

/// `text` without its trailing `#[cfg(test)] mod ... {` block and with `//` comments blanked
/// (outside string literals).
fn product_code(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut end = lines.len();
    for (i, l) in lines.iter().enumerate() {
        let next = lines.get(i + 1).map(|l| l.trim()).unwrap_or("");
        if l.trim() == "#[cfg(test)]" && next.starts_with("mod ") && next.ends_with('{') {
            end = i;
            break;
        }
    }
    let mut out = String::new();
    for l in &lines[..end] {
        let mut in_str = false;
        let mut escaped = false;
        let mut cut = l.len();
        let b = l.as_bytes();
        for (k, &c) in b.iter().enumerate() {
            if in_str {
                match c {
                    _ if escaped => escaped = false,
                    b'\\' => escaped = true,
                    b'"' => in_str = false,
                    _ => {}
                }
            } else if c == b'"' && !(k > 0 && b[k - 1] == b'\'' && b.get(k + 1) == Some(&b'\'')) {
                in_str = true;
            } else if c == b'/' && b.get(k + 1) == Some(&b'/') {
                cut = k;
                break;
            }
        }
        out.push_str(&l[..cut]);
        out.push('\n');
    }
    out
}

/// Every product file, test code left out.
pub fn product_files() -> Vec<ProductFile> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["src", "agentx-proto/src", "bsnmp-agentx/src"] {
        rs_files(&root.join(dir), &mut files);
    }
    let mut test_only = BTreeSet::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        test_only.extend(test_only_children(f, &text));
    }
    files.sort();
    files
        .into_iter()
        .filter(|f| !test_only.contains(f))
        .map(|f| ProductFile {
            path: f.strip_prefix(root).unwrap().display().to_string(),
            code: product_code(&std::fs::read_to_string(&f).unwrap()),
        })
        .collect()
}

/// The string literals of `code` (their contents, escapes as written), with the text before
/// each on its line.
pub fn string_literals(code: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for line in code.lines() {
        let b = line.as_bytes();
        let mut k = 0;
        while k < b.len() {
            let is_char = k > 0 && b[k - 1] == b'\'';
            if b[k] == b'"' && !is_char {
                let start = k + 1;
                let mut j = start;
                while j < b.len() && b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                let end = j.min(b.len());
                out.push((line[..k].to_string(), line[start..end].to_string()));
                k = end + 1;
            } else {
                k += 1;
            }
        }
    }
    out
}

/// The file of a module path (`memstat_agentx::memstat::linux` is `src/memstat/linux.rs` or
/// `src/memstat/linux/mod.rs`).
pub fn file_of_module(module: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut parts: Vec<&str> = module.split("::").collect();
    let krate = parts.remove(0);
    let base = match krate {
        "memstat_agentx" => "src",
        "agentx_proto" => "agentx-proto/src",
        "bsnmp_agentx" => "bsnmp-agentx/src",
        other => panic!("a module of another crate: {other}"),
    };
    if parts.is_empty() {
        return format!("{base}/lib.rs");
    }
    let plain = format!("{base}/{}.rs", parts.join("/"));
    if root.join(&plain).exists() {
        plain
    } else {
        format!("{base}/{}/mod.rs", parts.join("/"))
    }
}
