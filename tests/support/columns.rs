//! The accessible columns of MEMSTAT-MIB's tables, counted from the object definitions
//! (`mib::object_defs`, which tests/mib_validation.rs holds to mibs/MEMSTAT-MIB.txt) rather
//! than written down, shared by the tests and the benchmarks (included with `#[path]`).
#![allow(dead_code)]

use memstat_agentx::mib::{object_defs, Access};

/// The OID of the object named `name`, from the definitions.
pub fn object_oid(name: &str) -> Vec<u32> {
    object_defs()
        .into_iter()
        .find(|d| d.name == name)
        .unwrap_or_else(|| panic!("the MIB defines no object {name}"))
        .oid
}

/// The read-only columns of the conceptual row `entry` (e.g. "memTypeEntry"): their
/// sub-identifiers under the entry, and their names, in OID order.
pub fn accessible_columns(entry: &str) -> Vec<(u32, &'static str)> {
    let columns = accessible_under(&object_oid(entry));
    assert!(!columns.is_empty(), "{entry} has no accessible columns");
    columns
}

/// The read-only objects right under `parent` (a conceptual row, or the group of scalars):
/// their last sub-identifiers and their names, in OID order.
pub fn accessible_under(parent: &[u32]) -> Vec<(u32, &'static str)> {
    object_defs()
        .into_iter()
        .filter(|d| d.access == Access::ReadOnly)
        .filter(|d| d.oid.len() == parent.len() + 1 && d.oid.starts_with(parent))
        .map(|d| (*d.oid.last().unwrap(), d.name))
        .collect()
}

/// How many accessible columns memTypeEntry has: the cells of one memTypeTable row whose
/// every figure is present.
pub fn type_columns() -> usize {
    accessible_columns("memTypeEntry").len()
}

/// Checks that `cells` (instance OIDs under memTypeTable, e.g. from a walk of it) hold every
/// accessible column of memTypeEntry for each of `rows` rows, as they must when the rows were
/// built by tests/support/full_type.rs. Panics naming the columns that fall short, which is
/// what a column added to the MIB without a figure in `full_type` looks like.
pub fn assert_full_rows<'a>(cells: impl IntoIterator<Item = &'a [u32]>, rows: usize) {
    let entry = object_oid("memTypeEntry");
    let columns = accessible_columns("memTypeEntry");
    let mut per_column = vec![0usize; columns.len()];
    let mut total = 0usize;
    for oid in cells {
        total += 1;
        let col = oid
            .strip_prefix(entry.as_slice())
            .and_then(|rest| rest.first())
            .unwrap_or_else(|| panic!("{oid:?} is not a memTypeTable cell"));
        if let Some(i) = columns.iter().position(|(c, _)| c == col) {
            per_column[i] += 1;
        }
    }
    let short: Vec<String> = columns
        .iter()
        .zip(&per_column)
        .filter(|(_, &n)| n != rows)
        .map(|((c, name), n)| format!("{name} (column {c}): {n} of {rows} rows"))
        .collect();
    assert!(
        short.is_empty(),
        "memTypeEntry has {} accessible columns in the MIB's definitions, but not every row \
         has each of them: {}. A column added to the MIB needs its figure filled in \
         tests/support/full_type.rs (and in scripts/lib/fixture.sh)",
        columns.len(),
        short.join("; ")
    );
    assert_eq!(
        total,
        rows * columns.len(),
        "{rows} full rows × {} accessible memTypeEntry columns",
        columns.len()
    );
}
