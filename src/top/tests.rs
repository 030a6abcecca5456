use super::*;
use crate::memstat::Allocator;
use std::time::{Duration, UNIX_EPOCH};

#[path = "../../tests/support/memory_types.rs"]
mod memory_types;
use memory_types::{slab, uma};

fn snap(generation: u64, ms: u64, types: Vec<MemoryType>) -> Snapshot {
    Snapshot::new(
        generation,
        UNIX_EPOCH + Duration::from_millis(ms),
        "test".into(),
        types,
    )
}

fn cells(rows: &[TopRow], name: &str) -> Vec<Cell> {
    let c = column(name).unwrap();
    rows.iter().map(|r| (c.cell)(r)).collect()
}

#[test]
fn rates_are_per_snapshot_and_a_snapshot_seen_twice_keeps_them() {
    let mut rates = Rates::default();
    rates.next(snap(1, 1000, vec![uma("a", 10, 100)]));
    let by = column("in_use_bytes").unwrap();
    assert_eq!(
        cells(&rates.rows(by, false, None), "allocs_per_sec"),
        [Cell::Rate(None)],
        "no rate at the first frame"
    );
    // Two seconds later: 40 more allocations, 4 more in use.
    rates.next(snap(2, 3000, vec![uma("a", 14, 140)]));
    let rows = rates.rows(by, false, None);
    assert_eq!(cells(&rows, "allocs_per_sec"), [Cell::Rate(Some(20.0))]);
    assert_eq!(cells(&rows, "items_per_sec"), [Cell::Rate(Some(2.0))]);
    assert_eq!(cells(&rows, "bytes_per_sec"), [Cell::Rate(Some(512.0))]);
    assert_eq!(rates.seconds(), Some(2.0));
    // The same snapshot again (an SNMP walk of an unchanged generation): the same rates, not 0.
    rates.next(snap(2, 3000, vec![uma("a", 14, 140)]));
    assert_eq!(
        cells(&rates.rows(by, false, None), "allocs_per_sec"),
        [Cell::Rate(Some(20.0))]
    );
}

#[test]
fn a_counter_that_went_back_gives_no_rate_and_levels_are_signed() {
    let mut rates = Rates::default();
    rates.next(snap(1, 0, vec![uma("a", 10, 100)]));
    rates.next(snap(2, 1000, vec![uma("a", 4, 50)]));
    let rows = rates.rows(column("name").unwrap(), false, None);
    assert_eq!(cells(&rows, "allocs_per_sec"), [Cell::Rate(None)]);
    assert_eq!(cells(&rows, "items_per_sec"), [Cell::Rate(Some(-6.0))]);
}

#[test]
fn a_slab_cache_has_no_counter_rates_but_has_its_levels_rates() {
    let mut rates = Rates::default();
    rates.next(snap(1, 0, vec![slab("kmalloc-64", 100)]));
    rates.next(snap(2, 4000, vec![slab("kmalloc-64", 140)]));
    let rows = rates.rows(column("name").unwrap(), false, None);
    for absent in ["allocs_per_sec", "frees_per_sec", "failures_per_sec"] {
        assert_eq!(cells(&rows, absent), [Cell::Rate(None)], "{absent}");
    }
    assert_eq!(cells(&rows, "failures"), [Cell::Count(None)]);
    assert_eq!(cells(&rows, "items_per_sec"), [Cell::Rate(Some(10.0))]);
    let text = text_frame("h", rates.last.as_ref().unwrap(), &rows);
    let line = text.lines().find(|l| l.starts_with("kmalloc-64")).unwrap();
    assert!(
        line.split_whitespace().filter(|w| *w == "-").count() == 4,
        "{line}"
    );
    let json: Value = serde_json::from_str(&json_frame(
        rates.last.as_ref().unwrap(),
        rates.seconds(),
        &rows,
    ))
    .unwrap();
    assert_eq!(json["rows"][0]["allocs_per_sec"], Value::Null);
    assert_eq!(json["rows"][0]["items_per_sec"], json!(10.0));
    assert_eq!(json["interval_seconds"], json!(4.0));
}

#[test]
fn rows_sort_by_any_column_absent_last_and_reverse_and_top() {
    let mut rates = Rates::default();
    let types = || vec![uma("b", 5, 50), slab("c", 1), uma("a", 9, 90)];
    rates.next(snap(1, 0, types()));
    let names =
        |rows: &[TopRow]| -> Vec<String> { rows.iter().map(|r| r.ty.name.clone()).collect() };
    let by =
        |c: &str, rev: bool, top: Option<usize>| names(&rates.rows(column(c).unwrap(), rev, top));
    assert_eq!(by("name", false, None), ["a", "b", "c"]);
    assert_eq!(
        by("NAME", true, None),
        ["c", "b", "a"],
        "headers name columns too"
    );
    assert_eq!(by("in_use_bytes", false, None), ["a", "b", "c"]);
    assert_eq!(by("in_use_bytes", false, Some(2)), ["a", "b"]);
    // c has no failure counter: last, whichever the direction.
    assert_eq!(by("failures", false, None)[2], "c");
    assert_eq!(by("failures", true, None)[2], "c");
    assert!(column("nope").is_none());
    assert!(column_names().contains("in_use_bytes"));
}

#[test]
fn the_header_has_each_allocators_totals_absent_sums_as_dashes() {
    let mut rates = Rates::default();
    rates.next(snap(
        1,
        0,
        vec![uma("a", 2, 9), uma("b", 3, 9), slab("c", 4)],
    ));
    let rows = rates.rows(column("name").unwrap(), false, None);
    let last = rates.last.as_ref().unwrap();
    let text = text_frame("h", last, &rows);
    let line = |name: &str| -> Vec<String> {
        text.lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name}: {text}"))
            .split_whitespace()
            .map(String::from)
            .collect()
    };
    assert_eq!(
        line("ALLOCATOR"),
        [
            "ALLOCATOR",
            "TYPES",
            "INUSE-BYTES",
            "FREE-BYTES",
            "FAILURES"
        ]
    );
    // uma: 5 in use × 256; free 3 + 3 items × 256; failures 0 + 0.
    assert_eq!(line("uma "), ["uma", "2", "1280", "1536", "0"]);
    // slab: no failure counter.
    assert_eq!(line("slab "), ["slab", "1", "256", "0", "-"]);
    assert!(
        !text.contains("\nmalloc "),
        "no malloc types, no malloc line: {text}"
    );
    let json: Value = serde_json::from_str(&json_frame(last, None, &rows)).unwrap();
    assert_eq!(json["allocators"][0]["allocator"], "uma");
    assert_eq!(json["allocators"][1]["failures"], Value::Null);
}

mod view_keys {
    use super::*;
    use crate::top::view::{Action, View};
    use ratatui::backend::TestBackend;
    use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    use ratatui::Terminal;

    fn key(c: char) -> KeyEvent {
        KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
    }

    fn code(k: KeyCode) -> KeyEvent {
        KeyEvent::new(k, KeyModifiers::NONE)
    }

    fn screen(view: &View, rates: &Rates, width: u16, height: u16) -> String {
        let mut t = Terminal::new(TestBackend::new(width, height)).unwrap();
        t.draw(|f| view.draw(f, rates, "test")).unwrap();
        let buf = t.backend().buffer().clone();
        let mut out = String::new();
        for y in 0..height {
            for x in 0..width {
                out.push_str(buf[(x, y)].symbol());
            }
            out.push('\n');
        }
        out
    }

    fn names(view: &View, rates: &Rates) -> Vec<String> {
        rates
            .rows(column("name").unwrap(), false, None)
            .into_iter()
            .filter(|r| view.shows(r))
            .map(|r| r.ty.name.clone())
            .collect()
    }

    #[test]
    fn a_typed_filter_is_edited_applied_or_dropped() {
        let mut rates = Rates::default();
        rates.next(snap(1, 1000, vec![uma("abc", 1, 1), uma("xyz", 1, 1)]));
        let mut v = View::new(0, false, Duration::from_secs(3));
        // Keys typed on the line are text: `A` here is a letter, not the allocator filter.
        for k in [
            key('o'),
            key('B'),
            key('x'),
            code(KeyCode::Backspace),
            key('C'),
        ] {
            assert_eq!(v.key(k, &[Allocator::Uma]), Action::Redraw);
        }
        assert_eq!(
            names(&v, &rates),
            ["abc", "xyz"],
            "not applied before Enter"
        );
        v.key(code(KeyCode::Enter), &[]);
        assert_eq!(
            names(&v, &rates),
            ["abc"],
            "\"BC\" matches abc, in any case"
        );
    }

    #[test]
    fn esc_drops_a_line_and_ctrl_c_quits_from_anywhere() {
        let mut v = View::new(0, false, Duration::from_secs(3));
        v.key(key('/'), &[]);
        v.key(key('q'), &[]);
        assert_eq!(
            v.key(code(KeyCode::Esc), &[]),
            Action::Redraw,
            "q was typed, not obeyed"
        );
        v.key(key('d'), &[]);
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(
            v.key(ctrl_c, &[]),
            Action::Quit,
            "even on the interval's line"
        );
        let mut fresh = View::new(0, false, Duration::from_secs(3));
        assert_eq!(fresh.key(key('q'), &[]), Action::Quit);
    }

    #[test]
    fn a_steps_through_the_allocators_present_then_all() {
        let mut rates = Rates::default();
        rates.next(snap(1, 1000, vec![uma("zone", 1, 1), slab("dentry", 1)]));
        let present = rates.allocators_present();
        assert_eq!(present, [Allocator::Uma, Allocator::Slab]);
        let mut v = View::new(0, false, Duration::from_secs(3));
        v.key(key('A'), &present);
        assert_eq!(names(&v, &rates), ["zone"]);
        v.key(key('A'), &present);
        assert_eq!(names(&v, &rates), ["dentry"]);
        v.key(key('A'), &present);
        assert_eq!(names(&v, &rates), ["dentry", "zone"]);
    }

    #[test]
    fn a_frame_shows_as_many_rows_as_fit_and_dashes_for_absent_counters() {
        let mut rates = Rates::default();
        let types: Vec<MemoryType> = (0..50)
            .map(|i| slab(&format!("cache{i:02}"), i + 1))
            .collect();
        rates.next(snap(1, 1000, types));
        let v = View::new(0, false, Duration::from_secs(3));
        let s = screen(&v, &rates, 140, 12);
        // 12 lines: the heading, the totals (2), the table's header, the status line: 7 rows.
        assert!(s.contains("7 of 50 rows, sorted by name"), "{s}");
        let row = s.lines().find(|l| l.starts_with("cache00")).expect(&s);
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(
            cells[6], "-",
            "a slab cache has no allocation counter: {row}"
        );
        assert!(!s.contains("cache07"), "only the rows that fit: {s}");
    }
}

mod call_sites {
    use super::*;
    use crate::memstat::allocinfo::{Profiling, ProfilingState, Site};

    fn site(file: &str, bytes: u64, calls: u64) -> Site {
        Site {
            file: file.into(),
            line: 7,
            module: String::new(),
            function: "f".into(),
            bytes,
            calls,
            accurate: true,
            rows: 1,
        }
    }

    fn with_sites(generation: u64, ms: u64, sites: Vec<Site>) -> Snapshot {
        let mut s = snap(generation, ms, vec![]);
        s.profiling = Some(Profiling {
            state: ProfilingState::On,
            rows: sites.len() as u64,
            sites,
        });
        s
    }

    #[test]
    fn a_sites_levels_give_signed_rates_and_a_new_site_none() {
        let mut rates = Rates::default();
        rates.next(with_sites(
            1,
            1000,
            vec![site("a.c", 1000, 10), site("b.c", 500, 5)],
        ));
        rates.next(with_sites(
            2,
            3000,
            vec![
                site("a.c", 3000, 14),
                site("b.c", 100, 1),
                site("c.c", 1, 1),
            ],
        ));
        assert_eq!(rates.seconds(), Some(2.0));
        let by = site_column("bytes").unwrap();
        let rows = rates.site_rows(by, false, |_| true);
        let got: Vec<(String, Cell, Cell)> = rows
            .iter()
            .map(|r| {
                (
                    r.site.file.clone(),
                    (site_column("bytes_per_sec").unwrap().cell)(r),
                    (site_column("calls_per_sec").unwrap().cell)(r),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (
                    "a.c".into(),
                    Cell::Rate(Some(1000.0)),
                    Cell::Rate(Some(2.0))
                ),
                (
                    "b.c".into(),
                    Cell::Rate(Some(-200.0)),
                    Cell::Rate(Some(-2.0))
                ),
                ("c.c".into(), Cell::Rate(None), Cell::Rate(None)),
            ]
        );
        // Reversed: the least first.
        let rows = rates.site_rows(by, true, |_| true);
        assert_eq!(rows[0].site.file, "c.c");
    }

    #[test]
    fn no_profiling_read_is_no_site_rows_and_says_so() {
        let mut rates = Rates::default();
        rates.next(snap(1, 1000, vec![uma("a", 1, 1)]));
        let by = site_column("bytes").unwrap();
        assert!(rates.site_rows(by, false, |_| true).is_empty());
        let s = rates.last.as_ref().unwrap();
        assert!(
            profiling_line(s, 0).contains("none read"),
            "{}",
            profiling_line(s, 0)
        );
    }
}
