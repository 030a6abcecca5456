//! The sources and the allocators are each one definition: outside the registry
//! (src/memstat/source.rs, source_def.rs), the allocators' definition (src/memstat/mod.rs)
//! and a source's or allocator's own module, no product file names a source's name or
//! `--source` prefix as a literal, refers to a source's definition, or matches an `Allocator`
//! variant. A new source then touches its own module, the registry's list and its docs, and a
//! new allocator its own module and the `Allocator` definition; nothing else needs to know.

#[path = "support/product_files.rs"]
mod product_files;

use memstat_agentx::memstat::source::SOURCES;
use memstat_agentx::memstat::Allocator;
use product_files::{file_of_module, product_files, string_literals, ProductFile};

/// Files that may name every source and allocator: the registry and the definitions.
const REGISTRY: &[&str] = &[
    "src/memstat/source.rs",
    "src/memstat/source_def.rs",
    "src/memstat/mod.rs",
];

/// What `file` names that only the registry and the thing's own module may.
fn violations(file: &ProductFile) -> Vec<String> {
    if REGISTRY.contains(&file.path.as_str()) {
        return Vec::new();
    }
    let mut found = Vec::new();
    for d in SOURCES {
        if file_of_module(d.module) == file.path {
            continue;
        }
        let prefix = format!("{}:", d.name);
        for (before, lit) in string_literals(&file.code) {
            // `cfg!(target_os = "linux")` names an operating system, not the source.
            if before.trim_end().ends_with("target_os =") || before.ends_with("OS == ") {
                continue;
            }
            if lit == d.name || lit.contains(&prefix) {
                found.push(format!(
                    "{}: the literal \"{lit}\" names the source {}",
                    file.path, d.name
                ));
            }
        }
        let module = d.module.rsplit("::").next().unwrap();
        if file.code.contains(&format!("{module}::SOURCE")) {
            found.push(format!("{}: refers to {module}::SOURCE", file.path));
        }
    }
    for a in Allocator::ALL {
        if file_of_module(a.def().module) == file.path {
            continue;
        }
        let variant = format!("Allocator::{a:?}");
        if file.code.contains(&variant) {
            found.push(format!("{}: matches {variant}", file.path));
        }
    }
    found
}

#[test]
fn no_product_file_names_a_source_or_an_allocator_outside_its_definition() {
    let files = product_files();
    assert!(files.len() > 30, "found only {} product files", files.len());
    // The registry and the own modules are among them, so the exemptions mean something.
    for d in SOURCES {
        let own = file_of_module(d.module);
        assert!(files.iter().any(|f| f.path == own), "{own}");
    }
    let found: Vec<String> = files.iter().flat_map(violations).collect();
    assert!(
        found.is_empty(),
        "named outside the registry and their own modules:\n  {}",
        found.join("\n  ")
    );
}

/// The check finds what it is for: a literal, a prefix, a definition and a variant, in a
/// file that is neither the registry nor an own module; and leaves comments and
/// `target_os` alone.
#[test]
fn the_check_catches_each_kind_of_naming() {
    let code = |text: &str| ProductFile {
        path: "src/report.rs".into(),
        code: text.into(),
    };
    let cases = [
        ("let s = \"linux\";", true),
        ("let s = format!(\"fixture:{}\", p);", true),
        ("let d = &sysctl::SOURCE;", true),
        ("if t.allocator == Allocator::Uma {}", true),
        ("match a { Allocator::Slab => 1, _ => 2 }", true),
        ("if cfg!(target_os = \"linux\") {}", false),
        ("let s = \"a linux kernel\";", false),
        ("let a = Allocator::ALL;", false),
    ];
    for (text, bad) in cases {
        assert_eq!(!violations(&code(text)).is_empty(), bad, "{text}");
    }
    // In its own module a source may name itself.
    let own = ProductFile {
        path: "src/memstat/linux.rs".into(),
        code: "name: \"linux\", Allocator::Slab".into(),
    };
    assert!(violations(&own).is_empty(), "{:?}", violations(&own));
}
