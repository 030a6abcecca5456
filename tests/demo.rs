//! scripts/demo, as a user runs it with the bundled fixture: what it shows first is the 10
//! memory types with the most bytes in use (checked against the fixture itself), then every
//! cell of the biggest one, then the allocator table and the daemon scalars, within 50 lines
//! of 100 columns.
mod common;

use std::process::Command;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/demo-fixture.json");

/// (in-use bytes, name) of the fixture's types, biggest first.
fn fixture_by_bytes() -> Vec<(u64, String)> {
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(FIXTURE).unwrap()).unwrap();
    let mut types: Vec<(u64, String)> = json["types"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| Some((t["in_use_bytes"].as_u64()?, t["name"].as_str()?.to_string())))
        .collect();
    types.sort_by_key(|t| std::cmp::Reverse(t.0));
    types
}

#[test]
fn demo_starts_with_the_ten_biggest_types_and_fits_fifty_lines() {
    common::require_tool("/usr/sbin/snmpd");
    let out = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/demo"))
        .arg(format!("fixture:{FIXTURE}"))
        .env("MEMSTAT_AGENTX_BIN", common::bin())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "scripts/demo failed: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() <= 50, "{} lines:\n{text}", lines.len());
    for l in &lines {
        assert!(l.chars().count() <= 100, "wider than 100 columns: {l:?}");
    }

    // First: a header, then 10 rows "index name allocator bytes items failures", biggest
    // first, exactly the fixture's 10 biggest.
    assert!(lines[0].starts_with("# The 10 memory types with the most bytes in use"));
    let header = lines
        .iter()
        .position(|l| l.trim_start().starts_with("index  name"))
        .expect("no table header");
    assert!(header <= 3, "the table is not at the top:\n{text}");
    let rows: Vec<Vec<&str>> = lines[header + 1..header + 11]
        .iter()
        .map(|l| l.split_whitespace().collect())
        .collect();
    let expected = fixture_by_bytes();
    for (row, (bytes, name)) in rows.iter().zip(&expected) {
        assert_eq!(row.len(), 6, "{row:?}");
        assert_eq!(row[1], name, "{text}");
        assert_eq!(row[2], "slab");
        assert_eq!(row[3], bytes.to_string(), "{text}");
        assert_eq!(row[5], "-", "slab caches have no failure count: {row:?}");
    }
    assert_eq!(
        lines[header + 11],
        "",
        "more than 10 rows in the table:\n{text}"
    );

    // Then every cell of the biggest type's row, from the walk.
    let top_index = rows[0][0];
    let name_cell = format!("memTypeName.{top_index} = STRING: {}", expected[0].1);
    let name_at = lines
        .iter()
        .position(|l| *l == name_cell)
        .unwrap_or_else(|| panic!("no {name_cell:?}:\n{text}"));
    assert!(name_at > header + 11);
    assert!(
        text.contains(&format!(
            "memTypeInUseBytes.{top_index} = Counter64: {} bytes",
            expected[0].0
        )),
        "{text}"
    );
    // Then the allocator table and the daemon scalars.
    let alloc_at = text
        .find("memAllocatorTypeCount")
        .expect("no allocator table");
    let daemon_at = text
        .find("memSourceStatus.0 = INTEGER: ok(1)")
        .expect("no daemon scalars");
    assert!(text.find(&name_cell).unwrap() < alloc_at && alloc_at < daemon_at);
}
