use super::*;
use crate::memstat::{Allocator, PerCpu};
use std::time::UNIX_EPOCH;

fn status() -> DaemonStatus {
    DaemonStatus {
        uptime_ticks: 42,
        snapshot_time_ms: Some(0),
        snapshot_generation: Some(3),
        snapshot_age_ms: Some(10),
        refreshes: 3,
        refresh_failures: 0,
        source_name: "test".into(),
        status: SourceStatus::Ok,
        last_error: String::new(),
        notifications_sent: 0,
        notifications_dropped: 0,
        sources: Vec::new(),
    }
}

fn view() -> MibView {
    let mut a = MemoryType::new(Allocator::Uma, "a");
    a.size = Some(1 << 40);
    a.allocs = Some(5);
    a.per_cpu = vec![
        PerCpu {
            cpu: 1,
            allocs: Some(2),
            frees: Some(1),
            cache_free: None,
            ..PerCpu::default()
        },
        PerCpu {
            cpu: 0,
            allocs: Some(3),
            frees: Some(0),
            cache_free: Some(7),
            ..PerCpu::default()
        },
    ];
    let mut b = MemoryType::new(Allocator::Slab, "b");
    b.size = Some(64);
    let s = Arc::new(Snapshot::new(1, UNIX_EPOCH, "t".into(), vec![a, b]));
    // b gets the lower index, so it comes first in the table.
    MibView::new(s, &[7, 3], &[0, 0])
}

fn col(sub: u32, idx: &[u32]) -> Vec<u32> {
    let mut v = root(&[1, 2, 1, sub]);
    v.extend_from_slice(idx);
    v
}

#[test]
fn get_distinguishes_object_and_instance() {
    let v = view();
    assert_eq!(v.get(&col(5, &[7])), Value::Counter64(1 << 40));
    assert_eq!(v.get(&col(13, &[3])), Value::NoSuchInstance, "absent cell");
    assert_eq!(v.get(&col(5, &[99])), Value::NoSuchInstance);
    assert_eq!(v.get(&col(1, &[7])), Value::NoSuchObject, "index column");
    assert_eq!(v.get(&root(&[9])), Value::NoSuchObject);
    let st = StatusView::new(status());
    assert_eq!(st.get(&root(&[1, 1, 1, 0])), Value::TimeTicks(42));
    assert_eq!(st.get(&root(&[1, 1, 1, 1])), Value::NoSuchInstance);
    assert_eq!(st.get(&root(&[1, 1, 99, 0])), Value::NoSuchObject);
}

#[test]
fn get_next_walks_in_order_and_skips_absent_cells() {
    let v = view();
    // From memTypeSize: b (index 3) then a (index 7).
    let f = v.get_next(&col(5, &[]), false, &[]).unwrap();
    assert_eq!((f.oid.0, f.value), (col(5, &[3]), Value::Counter64(64)));
    let f = v.get_next(&col(5, &[3]), false, &[]).unwrap();
    assert_eq!(f.oid.0, col(5, &[7]));
    // include=1 returns the start itself when it exists.
    let f = v.get_next(&col(5, &[7]), true, &[]).unwrap();
    assert_eq!(f.oid.0, col(5, &[7]));
    // memTypeAllocs is absent for b: the walk goes straight to a.
    let f = v.get_next(&col(12, &[99]), false, &[]).unwrap();
    assert_eq!(f.oid.0, col(13, &[7]));
    // The end bound is exclusive.
    assert!(v.get_next(&col(5, &[3]), false, &col(5, &[7])).is_none());
    // Per-CPU rows come out sorted by CPU.
    let f = v.get_next(&root(&[1, 3]), false, &[]).unwrap();
    assert_eq!(f.oid.0, root(&[1, 3, 1, 2, 7, 0]));
    // Past the last object: endOfMibView.
    assert!(v.get_next(&root(&[2]), false, &[]).is_none());
    // From before the tables, the tables start with the first cell.
    let f = v.get_next(MEMSTAT_MIB_ROOT, false, &[]).unwrap();
    assert_eq!(f.oid.0, col(2, &[3]));
}

#[test]
fn full_walk_is_strictly_increasing() {
    let v = view();
    let st = StatusView::new(status());
    let mut cur = MEMSTAT_MIB_ROOT.to_vec();
    let mut n = 0;
    while let Some((o, _)) = st.get_next(&cur, false, &[]) {
        assert!(o.0 > cur);
        cur = o.0;
        n += 1;
    }
    assert_eq!(n, 11, "every scalar");
    let mut instances = Vec::new();
    while let Some(f) = v.get_next(&cur, false, &[]) {
        assert!(f.oid.0 > cur);
        assert_eq!(v.instance_of(&f.oid.0), Some(f.instance));
        instances.push(f.instance);
        cur = f.oid.0;
        n += 1;
    }
    // Instance numbers run 0.. in OID order.
    assert_eq!(instances, (0..v.instance_count()).collect::<Vec<_>>());
    assert_eq!(v.instance_of(&col(13, &[3])), None, "absent cell");
    assert_eq!(v.instance_of(&col(5, &[3, 1])), None, "no such instance");
    // 11 scalars, 2 rows with 20 + 20 present type cells... count exactly:
    // a: name, alloc, ordinal, size, allocs, disc = 6; b: name, alloc, ordinal, size, disc = 5
    // cpu: allocs 2, frees 2, cache 1; alloc table: 2 allocators × typecount + uma none...
    assert_eq!(n, 11 + 6 + 5 + 5 + 2);
}

/// Every cell of `v`, walked in order.
fn every_cell(v: &MibView) -> Vec<Found> {
    let mut cells = Vec::new();
    let mut cur = MEMSTAT_MIB_ROOT.to_vec();
    while let Some(f) = v.get_next(&cur, false, &[]) {
        cur = f.oid.0.clone();
        cells.push(f);
    }
    cells
}

#[test]
fn next_after_an_instance_answers_as_get_next_from_its_oid() {
    let v = view();
    let cells = every_cell(&v);
    assert!(cells.len() > 10, "a view with cells in several tables");
    // Every end bound that matters: none, each cell's own OID (the next one's is the
    // exclusive end that stops it), and one inside a column's subtree.
    let mut ends: Vec<Vec<u32>> = vec![Vec::new(), col(13, &[5])];
    ends.extend(cells.iter().map(|f| f.oid.0.clone()));
    for f in &cells {
        for end in &ends {
            assert_eq!(
                v.next_after(f.instance, end),
                v.get_next(&f.oid.0, false, end),
                "from {:?} to {end:?}",
                f.oid
            );
        }
    }
    assert_eq!(v.next_after(v.instance_count(), &[]), None);
    assert_eq!(v.next_after(u32::MAX, &[]), None);
}

#[test]
fn instance_of_is_right_whichever_column_was_looked_up_before() {
    // The view remembers the last column it found: looking cells up in an order that
    // jumps between columns must give the same answers as in walk order.
    let v = view();
    let cells = every_cell(&v);
    let n = cells.len();
    for step in [1, 2, 3, 5, 7] {
        for k in 0..n {
            let f = &cells[(k * step) % n];
            assert_eq!(v.instance_of(&f.oid.0), Some(f.instance));
            // A miss in the remembered column, then in another.
            assert_eq!(v.instance_of(&col(5, &[99])), None);
            assert_eq!(v.instance_of(&root(&[9])), None);
        }
    }
}

#[test]
fn no_served_column_lies_inside_another() {
    // A view's remembered column (`View::column_of`) is right only if at most one column
    // holds any OID: no column's prefix may be a prefix of another's.
    for (what, columns) in [
        ("the tables", snapshot_columns()),
        ("the daemon's objects", status_columns()),
    ] {
        let prefixes: Vec<&[u32]> = columns.prefixes().collect();
        assert!(prefixes.len() > 1, "{what}: served columns");
        for (i, a) in prefixes.iter().enumerate() {
            for (j, b) in prefixes.iter().enumerate() {
                assert!(
                    i == j || !b.starts_with(a),
                    "{what}: column {a:?} holds column {b:?}"
                );
            }
        }
    }
}

#[test]
fn admin_strings_are_cut_at_255_octets_on_a_character_boundary() {
    let long = "é".repeat(200); // 400 octets
    match text(&long) {
        Value::OctetString(b) => {
            assert_eq!(b.len(), 254);
            assert!(std::str::from_utf8(&b).is_ok());
        }
        v => panic!("{v:?}"),
    }
}

#[test]
fn a_sources_figure_group_serves_its_figures_and_skips_absent_ones() {
    use crate::memstat::source::{FigureGroup, FigureObject, Role};
    use group::{served_columns, View};
    static G: FigureGroup = FigureGroup {
        name: "memTestFigures",
        title: "test",
        node: &[9],
        objects: &[
            FigureObject {
                sub: 1,
                name: "memTestA",
                figure: "test.a",
                role: Role::Total,
            },
            FigureObject {
                sub: 2,
                name: "memTestB",
                figure: "test.b",
                role: Role::Part,
            },
        ],
    };
    let scalars = figures::FigureScalars(&G);
    let groups: Vec<&dyn group::Group<SnapshotRows>> = vec![&scalars];
    let columns: &'static group::ServedColumns = Box::leak(Box::new(served_columns(&groups)));
    let mut snap = Snapshot::new(1, UNIX_EPOCH, "t".into(), Vec::new());
    snap.figures.insert("test.b".into(), 1 << 40);
    let ctx = SnapshotRows {
        snapshot: Arc::new(snap),
        rows: Vec::new(),
        sites: Vec::new(),
        allocators: std::sync::OnceLock::new(),
    };
    let v = View::new(ctx, &groups, columns);
    assert_eq!(v.get(&root(&[1, 9, 2, 0])), Value::Counter64(1 << 40));
    assert_eq!(
        v.get(&root(&[1, 9, 1, 0])),
        Value::NoSuchInstance,
        "no figure"
    );
    assert_eq!(v.get(&root(&[1, 9, 3, 0])), Value::NoSuchObject);
    let f = v.get_next(&root(&[1, 9]), false, &[]).unwrap();
    assert_eq!(f.oid.0, root(&[1, 9, 2, 0]), "the absent one is skipped");
    assert!(v.get_next(&f.oid.0, false, &[]).is_none());
    let mut defs = Vec::new();
    groups[0].objects(&mut defs);
    let names: Vec<&str> = defs.iter().map(|d| d.name).collect();
    assert_eq!(names, ["memTestA", "memTestB"]);
}

/// The kind of value each served instance carries is the one its object's SYNTAX says (a
/// column's function returns a `Cell`, which does not know its column's syntax).
#[test]
fn every_served_value_has_its_objects_syntax() {
    let defs = object_defs();
    let syntax_of = |oid: &[u32]| {
        defs.iter()
            .filter(|d| oid.starts_with(&d.oid) && d.access == Access::ReadOnly)
            .max_by_key(|d| d.oid.len())
            .map(|d| (d.name, d.syntax))
            .expect("a served OID belongs to an object")
    };
    let fits = |syntax: Syntax, v: &Value| match syntax {
        Syntax::Integer => matches!(v, Value::Integer(_)),
        Syntax::OctetString => matches!(v, Value::OctetString(_)),
        Syntax::Unsigned32 | Syntax::Gauge32 => matches!(v, Value::Gauge32(_)),
        Syntax::Counter64 => matches!(v, Value::Counter64(_)),
        Syntax::TimeTicks => matches!(v, Value::TimeTicks(_)),
        Syntax::Table | Syntax::Entry => false,
    };
    let mut st = status();
    st.sources = vec![crate::mib::SourceLine {
        name: "fixture".into(),
        status: SourceStatus::Ok,
        last_error: String::new(),
        last_good_ms: Some(0),
        types: Some(2),
    }];
    let st = StatusView::new(st);
    let mut t = MemoryType::new(Allocator::Malloc, "m");
    t.size_mask = Some(0x81);
    t.in_use_bytes = Some(1);
    t.per_cpu = vec![PerCpu {
        cpu: 0,
        allocs: Some(1),
        size_mask: Some(1),
        ..PerCpu::default()
    }];
    let v = MibView::new(
        Arc::new(Snapshot::new(1, UNIX_EPOCH, "t".into(), vec![t])),
        &[1],
        &[5],
    );
    let mut cur = MEMSTAT_MIB_ROOT.to_vec();
    let mut seen = std::collections::BTreeSet::new();
    loop {
        let next = st
            .get_next(&cur, false, &[])
            .or_else(|| v.get_next(&cur, false, &[]).map(|f| (f.oid, f.value)));
        let Some((oid, value)) = next else { break };
        let (name, syntax) = syntax_of(&oid.0);
        assert!(fits(syntax, &value), "{name}: {value:?} is not {syntax:?}");
        seen.insert(name);
        cur = oid.0;
    }
    for name in [
        "memSnapshotTime",
        "memSrcLastGoodRead",
        "memSrcTypes",
        "memTypeName",
        "memTypeSizeMask",
        "memCpuSizeMask",
        "memAllocatorInUseBytes",
    ] {
        assert!(seen.contains(name), "{name} was walked");
    }
}
