//! No import cycles among the modules of src/: at every level of the module tree, the
//! modules under one parent depend on each other without a cycle, judged by their `use
//! crate::` and `use super::` lines (and `crate::` paths written out in the code). The codec
//! is a crate of its own (`agentx-proto`), so the agent and the session no longer meet in
//! `agentx`.
//!
//! A child using its parent's items is not a cycle here: a parent module holds what its
//! children share (the snapshot model in `memstat`, the registry in `mib`).

#[path = "support/product_files.rs"]
mod product_files;

use product_files::{product_files, ProductFile};
use std::collections::{BTreeMap, BTreeSet};

/// The cycles that stay, until their issue removes them: none.
const ALLOWED: &[&[&str]] = &[];

/// The module path of a file of the library (`src/memstat/linux.rs` is `memstat::linux`);
/// `None` for the binary and the other crates.
fn module_of(path: &str) -> Option<Vec<String>> {
    let rest = path.strip_prefix("src/")?;
    if rest == "main.rs" {
        return None;
    }
    let rest = rest.strip_suffix(".rs")?;
    let mut parts: Vec<String> = rest.split('/').map(String::from).collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    Some(parts)
}

/// The paths a `use` tree names: `a::{b, c::{d, e}}` is `a::b`, `a::c::d`, `a::c::e`.
fn expand(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let name = tree.split(" as ").next().unwrap().trim();
        return vec![name.trim_end_matches("::*").to_string()];
    };
    let prefix = tree[..open].trim_end_matches("::").trim();
    let inner = &tree[open + 1..tree.rfind('}').unwrap()];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .flat_map(expand)
        .map(|p| match p.as_str() {
            "self" => prefix.to_string(),
            _ => format!("{prefix}::{p}"),
        })
        .collect()
}

/// Every module path `file` (the module `me`) refers to, as absolute paths from the crate.
fn references(file: &ProductFile, me: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let code = &file.code;
    // `use` statements, which may span lines.
    let mut rest = code.as_str();
    while let Some(at) = rest.find("use ") {
        let before = &rest[..at];
        let starts_statement = before
            .trim_end_matches(' ')
            .chars()
            .last()
            .is_none_or(|c| c == '\n' || c == ')' || c == 'b');
        let after = &rest[at + 4..];
        let Some(end) = after.find(';') else { break };
        if starts_statement {
            for p in expand(&after[..end]) {
                out.push(p);
            }
        }
        rest = &after[end..];
    }
    // Paths written out in the code.
    for (i, _) in code.match_indices("crate::") {
        let tail: String = code[i..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        out.push(tail);
    }
    out.into_iter()
        .filter_map(|p| {
            let segs: Vec<&str> = p.split("::").filter(|s| !s.is_empty()).collect();
            let mut abs: Vec<String> = match segs.first() {
                Some(&"crate") => Vec::new(),
                Some(&"super") => me[..me.len().saturating_sub(1)].to_vec(),
                Some(&"self") => me.to_vec(),
                _ => return None,
            };
            let mut segs = &segs[1..];
            while segs.first() == Some(&"super") {
                abs.pop();
                segs = &segs[1..];
            }
            abs.extend(segs.iter().map(|s| s.to_string()));
            Some(abs)
        })
        .collect()
}

/// The cycles among the children of each module: for each parent, the groups of its
/// children (two or more) that depend on each other in a circle.
fn cycles(files: &[ProductFile]) -> Vec<Vec<String>> {
    let modules: BTreeSet<Vec<String>> = files.iter().filter_map(|f| module_of(&f.path)).collect();
    // child of `parent` that holds `m`, if `m` is below `parent`.
    let child_under = |parent: &[String], m: &[String]| -> Option<String> {
        (m.len() > parent.len() && m.starts_with(parent)).then(|| m[parent.len()].clone())
    };
    let mut edges: BTreeMap<(Vec<String>, String), BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let Some(me) = module_of(&f.path) else {
            continue;
        };
        for target in references(f, &me) {
            // The deepest module the path names (the rest is an item).
            let Some(target) = (0..=target.len())
                .rev()
                .map(|n| target[..n].to_vec())
                .find(|t| modules.contains(t))
            else {
                continue;
            };
            // At each level where the two are under one parent but in different children.
            for depth in 0..me.len().min(target.len()) {
                let parent = &me[..depth];
                if !target.starts_with(parent) {
                    break;
                }
                let (Some(a), Some(b)) = (child_under(parent, &me), child_under(parent, &target))
                else {
                    break;
                };
                if a != b {
                    edges.entry((parent.to_vec(), a)).or_default().insert(b);
                    break;
                }
            }
        }
    }
    // Strongly connected groups, by reachability (the graphs are small).
    let reach = |parent: &Vec<String>, from: &String| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(n) = todo.pop() {
            for m in edges.get(&(parent.clone(), n)).into_iter().flatten() {
                if seen.insert(m.clone()) {
                    todo.push(m.clone());
                }
            }
        }
        seen
    };
    let mut found: BTreeSet<Vec<String>> = BTreeSet::new();
    for (parent, a) in edges.keys() {
        let from_a = reach(parent, a);
        if !from_a.contains(a) {
            continue;
        }
        let mut group: Vec<String> = from_a
            .iter()
            .filter(|b| reach(parent, b).contains(a))
            .map(|b| {
                let mut full = parent.clone();
                full.push(b.clone());
                full.join("::")
            })
            .collect();
        group.sort();
        found.insert(group);
    }
    found.into_iter().collect()
}

#[test]
fn no_import_cycle_among_the_modules() {
    let files = product_files();
    let allowed: Vec<Vec<String>> = ALLOWED
        .iter()
        .map(|g| g.iter().map(|s| s.to_string()).collect())
        .collect();
    let found = cycles(&files);
    let unexpected: Vec<&Vec<String>> = found.iter().filter(|c| !allowed.contains(c)).collect();
    assert!(
        unexpected.is_empty(),
        "import cycles among modules: {unexpected:?}"
    );
    // An allowed cycle is still there: when its issue removes it, it leaves ALLOWED.
    for a in &allowed {
        assert!(
            found.contains(a),
            "{a:?} is no cycle any more: remove it from ALLOWED"
        );
    }
}

/// The check sees a cycle between siblings through `use super::` and `use crate::` lines,
/// with braces and renames, and not between a parent and its child.
#[test]
fn the_check_finds_the_cycles_it_is_for() {
    let file = |path: &str, code: &str| ProductFile {
        path: path.into(),
        code: code.into(),
    };
    let files = [
        file("src/lib.rs", "pub mod a;\npub mod b;\n"),
        file(
            "src/a/mod.rs",
            "use crate::b::{x, y::Z as W};\npub mod c;\npub mod d;\n",
        ),
        file("src/b.rs", "use crate::a::c::Thing;\n"),
        file("src/a/c.rs", "use super::{d::Other, Shared};\n"),
        file("src/a/d.rs", "use super::c;\nuse super::Shared;\n"),
    ];
    let found = cycles(&files);
    assert!(found.contains(&vec!["a".into(), "b".into()]), "{found:?}");
    assert!(
        found.contains(&vec!["a::c".into(), "a::d".into()]),
        "{found:?}"
    );
    assert_eq!(found.len(), 2, "{found:?}");
    assert_eq!(
        expand("x::{a, b::{c, d as e}, self}"),
        ["x::a", "x::b::c", "x::b::d", "x"]
    );
}

/// The AgentX session speaks the protocol and knows nothing of what is served: it uses no
/// module of the product's (the agent, the reader, the sources, the MIB), only the
/// transport beside it and the protocol crate. The daemon's loop joins them.
#[test]
fn the_session_knows_nothing_of_the_product() {
    let files = product_files();
    let session = files
        .iter()
        .find(|f| f.path == "src/agentx/session.rs")
        .expect("the session's file");
    let me = module_of(&session.path).unwrap();
    let used: BTreeSet<String> = references(session, &me)
        .into_iter()
        .filter_map(|p| p.first().cloned())
        .collect();
    for product in ["agent", "reader", "memstat", "mib", "daemon", "alarm"] {
        assert!(
            !used.contains(product),
            "agentx::session uses crate::{product}: {used:?}"
        );
    }
    assert!(
        used.contains("agentx"),
        "it does use its transport: {used:?}"
    );
}
