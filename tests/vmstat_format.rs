//! `dump --format vmstat` against rows worked out by hand from FreeBSD 15.0's vmstat.c.
//!
//! The format strings (usr.bin/vmstat/vmstat.c, `domemstat_zone` and `domemstat_malloc`):
//!
//! ```text
//! -z header: "{T:/%-19s} {T:/%7s} {T:/%7s} {T:/%8s} {T:/%8s} {T:/%8s} {T:/%4s} {T:/%4s} {T:/%4s}\n"
//!            ITEM SIZE LIMIT USED FREE REQ FAIL SLEEP XDOM
//! -z row:    "{k:name/%s}:{d:size/%*ju}{e:size/%ju},{:limit/%7ju},{:used/%8ju},{:free/%8ju},
//!             {:requests/%8ju},{:fail/%4ju},{:sleep/%4ju},{:xdomain/%4ju}\n", width MAX(1, 26 - len)
//! -m header: "{T:/%16s} {T:/%4s} {T:/%5s} {T:/%3s} {T:Size(s)}\n", Type Use Memory Req
//! -m row:    "{k:type/%16s/%s} {[:4}{h,hn-decimal,hn-1000:in-use/%ju}{]:} {[:5}{h,hn-decimal:
//!             memory-use/%ju}{]:} {[:4}{h,hn-decimal,hn-1000:requests/%ju}{]:} " then the
//!             sizes "{lh:size/%d}" joined by "," and "\n"
//! ```
//!
//! To a pipe vmstat turns humanizing off (`no-humanize` unless `isatty(1)`), and libxo pads an
//! anchor `{[:N}..{]:}` on the left to N columns. Rows come in libmemstat's list order, the
//! reverse of kernel order; types with no allocations and nothing in use are skipped by -m.
//! The expected lines below were written by hand from those rules (and cross-checked with C
//! printf semantics), not produced by the code under test.

use memstat_agentx::memstat::{assign_ordinals, fixture, Allocator, MemoryType, Snapshot};
use memstat_agentx::report::{render, Format};
use memstat_agentx::vmstat::{self, VmstatError, FREEBSD_MALLOC_ZONE_SIZES};
use std::process::Command;
use std::time::UNIX_EPOCH;

#[allow(clippy::too_many_arguments)]
fn zone(
    name: &str,
    size: u64,
    limit: u64,
    allocs: u64,
    frees: u64,
    free: u64,
    fail: u64,
    sleep: u64,
    xdom: u64,
) -> MemoryType {
    let mut t = MemoryType::new(Allocator::Uma, name);
    t.size = Some(size);
    t.count_limit = Some(limit);
    t.allocs = Some(allocs);
    t.frees = Some(frees);
    // The snapshot's own (clamped) level; vmstat's figure is computed from the counters.
    t.in_use_count = Some(allocs.saturating_sub(frees));
    t.free_count = Some(free);
    t.failures = Some(fail);
    t.sleeps = Some(sleep);
    t.xdomain = Some(xdom);
    t
}

fn mtype(name: &str, allocs: u64, frees: u64, alloced: u64, freed: u64, mask: u64) -> MemoryType {
    let mut t = MemoryType::new(Allocator::Malloc, name);
    t.allocs = Some(allocs);
    t.frees = Some(frees);
    t.bytes_allocated = Some(alloced);
    t.bytes_freed = Some(freed);
    t.in_use_count = Some(allocs.saturating_sub(frees));
    t.in_use_bytes = Some(alloced.saturating_sub(freed));
    t.size_mask = Some(mask);
    t
}

/// Kernel order: malloc types first (as the FreeBSD source reads them), then UMA zones.
fn kernel_types() -> Vec<MemoryType> {
    let mut v = vec![
        mtype(
            "devbuf", 1_234_567, 1_000_000, 10_000_000, 1_000_000, 0b10_0011,
        ),
        mtype("unused", 0, 0, 0, 0, 0),
        mtype("temp", 3, 3, 96, 96, 0),
        mtype("devbuf", 1, 0, 64, 0, 1 << 2),
        mtype(
            "a_very_long_malloc_type_name",
            40_000,
            39_999,
            131_072,
            65_536,
            (1 << 7) | (1 << 13),
        ),
        // Frees read ahead of allocations: libmemstat's differences wrap.
        mtype("racy", 5, 7, 100, 200, 1),
        // Bit 14 is kmemzones' terminator (size 0), bit 20 is past vm.malloc.zone_count.
        mtype("bit14", 1, 1, 64, 64, (1 << 2) | (1 << 14) | (1 << 20)),
        zone("mbuf_packet", 256, 0, 1000, 990, 50, 0, 0, 0),
        zone(
            "abcdefghijklmnopqrstuvwxyz01234",
            4096,
            1_234_567,
            5,
            7,
            3,
            12_345,
            1,
            99_999,
        ),
        zone("mbuf_packet", 256, 0, 20, 5, 0, 0, 0, 0),
        zone("UMA Kegs", 384, 0, 123, 0, 7, 0, 0, 0),
        zone("abcdefghijklmnopqrstuvwxy", 8, 0, 2, 1, 0, 0, 0, 0),
    ];
    assign_ordinals(&mut v);
    v
}

/// vmstat -m, then vmstat -z, as `vmstat -m -z` prints them to a pipe.
const EXPECTED: &str = concat!(
    "            Type  Use Memory Req Size(s)\n",
    "           bit14    0     0    1 64,0\n",
    "            racy 18446744073709551614 18446744073709551516    5 16\n",
    "a_very_long_malloc_type_name    1 65536 40000 1024,65536\n",
    "          devbuf    1    64    1 64\n",
    "            temp    0     0    3 \n",
    "          devbuf 234567 9000000 1234567 16,32,384\n",
    "ITEM                   SIZE   LIMIT     USED     FREE      REQ FAIL SLEEP XDOM\n",
    "abcdefghijklmnopqrstuvwxy:8,      0,       1,       0,       2,   0,   0,   0\n",
    "UMA Kegs:               384,      0,     123,       7,     123,   0,   0,   0\n",
    "mbuf_packet:            256,      0,      15,       0,      20,   0,   0,   0\n",
    "abcdefghijklmnopqrstuvwxyz01234:4096,1234567,       0,       3,       7,12345,   1,99999\n",
    "mbuf_packet:            256,      0,      10,      50,    1000,   0,   0,   0\n",
);

fn snapshot(types: Vec<MemoryType>) -> Snapshot {
    Snapshot::new(0, UNIX_EPOCH, "fixture".into(), types)
}

#[test]
fn rows_match_the_hand_worked_vmstat_output() {
    let out = render(&snapshot(kernel_types()), Format::Vmstat).unwrap();
    for (n, (got, want)) in out.lines().zip(EXPECTED.lines()).enumerate() {
        assert_eq!(got, want, "line {}", n + 1);
    }
    assert_eq!(out, EXPECTED);
}

#[test]
fn one_allocator_prints_only_its_own_table() {
    let uma: Vec<MemoryType> = kernel_types()
        .into_iter()
        .filter(|t| t.allocator == Allocator::Uma)
        .collect();
    let out = render(&snapshot(uma), Format::Vmstat).unwrap();
    let z_start = EXPECTED.find("ITEM").unwrap();
    assert_eq!(out, EXPECTED[z_start..]);

    let malloc: Vec<MemoryType> = kernel_types()
        .into_iter()
        .filter(|t| t.allocator == Allocator::Malloc)
        .collect();
    let out = render(&snapshot(malloc), Format::Vmstat).unwrap();
    assert_eq!(out, EXPECTED[..z_start]);
}

#[test]
fn size_lists_follow_the_zone_table_given() {
    // A kernel whose zone table has no 384 zone (FreeBSD 13's): bit 5 is 512.
    let sizes = [
        16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 0,
    ];
    let s = snapshot(vec![mtype("m", 2, 0, 64, 0, 0b10_0011)]);
    let out = vmstat::render(&s, &sizes).unwrap();
    assert_eq!(
        out.lines().nth(1),
        Some("               m    2    64    2 16,32,512")
    );
    let out = vmstat::render(&s, &FREEBSD_MALLOC_ZONE_SIZES).unwrap();
    assert_eq!(
        out.lines().nth(1),
        Some("               m    2    64    2 16,32,384")
    );
}

#[test]
fn slab_rows_are_refused() {
    let mut types = kernel_types();
    types.push(MemoryType::new(Allocator::Slab, "dentry"));
    let e = render(&snapshot(types), Format::Vmstat).unwrap_err();
    assert_eq!(e, VmstatError::SlabRows { count: 1 });
}

fn write_fixture(dir: &std::path::Path, types: Vec<MemoryType>) -> std::path::PathBuf {
    let path = dir.join("fixture.json");
    std::fs::write(&path, fixture::to_json(&snapshot(types))).unwrap();
    path
}

fn dump(fixture: &std::path::Path, format: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_memstat-agentx"))
        .args(["dump", "--source"])
        .arg(format!("fixture:{}", fixture.display()))
        .args(["--format", format])
        .output()
        .unwrap()
}

#[test]
fn the_command_prints_the_hand_worked_rows_and_refuses_slab_rows() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_fixture(dir.path(), kernel_types());
    let out = dump(&path, "vmstat");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8(out.stdout).unwrap(), EXPECTED);

    // The project's own table stays as it was: kernel order, repeated names marked.
    let table = dump(&path, "table");
    assert!(table.status.success());
    let table = String::from_utf8(table.stdout).unwrap();
    assert!(table.contains("mbuf_packet#1:"), "{table}");
    assert!(table.contains("SizeMask"), "{table}");

    let mut types = kernel_types();
    types.push(MemoryType::new(Allocator::Slab, "dentry"));
    let path = write_fixture(dir.path(), types);
    let out = dump(&path, "vmstat");
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.starts_with("memstat-agentx: --format vmstat prints FreeBSD UMA zones")
            && err.contains("1 Linux slab cache(s)")
            && err.contains("--format table"),
        "{err}"
    );
}

#[test]
#[ignore = "needs root: reads /proc/slabinfo (scripts/test runs it as root)"]
fn needs_root_the_live_linux_source_is_refused_for_vmstat() {
    std::fs::File::open("/proc/slabinfo").expect("/proc/slabinfo readable");
    let out = Command::new(env!("CARGO_BIN_EXE_memstat-agentx"))
        .args(["dump", "--source", "linux", "--format", "vmstat"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Linux slab cache"));
}
