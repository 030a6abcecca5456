//! Replays fuzzer inputs through the fuzz entry points under plain `cargo test`: no fuzzer,
//! no nightly. The entry points are the very functions the cargo-fuzz targets call
//! (fuzz/entry_points.rs), so a crash found by `scripts/fuzz` stays fixed once its input is
//! saved here.
//!
//! - `tests/data/fuzz-regressions/<target>/*`: inputs that crashed a target (or almost did).
//! - `fuzz/seeds/<target>/*`: the committed seed corpora; they must all pass as well.
//!
//! `cargo test --test fuzz_regressions -- --ignored write_seeds` regenerates the seeds.

#[path = "../fuzz/entry_points.rs"]
mod entry_points;

use agentx_proto::oid::Oid;
use agentx_proto::pdu::{CloseReason, Payload, Pdu, ResError, SearchRange, Value, VarBind};
use entry_points::TARGETS;
use memstat_agentx::memstat::{fixture, Allocator, MemoryType, PerCpu, Snapshot};
use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every file under `dir/<target>/`, as (target, path).
fn inputs(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for t in TARGETS {
        let Ok(rd) = std::fs::read_dir(dir.join(t)) else {
            continue;
        };
        let mut files: Vec<PathBuf> = rd.map(|e| e.unwrap().path()).collect();
        files.sort();
        out.extend(files.into_iter().map(|p| (t.to_string(), p)));
    }
    out
}

/// Runs every input, reporting all failures (not just the first) with the file that caused it.
fn replay(dir: &Path) -> usize {
    let all = inputs(dir);
    let mut failed = Vec::new();
    for (target, path) in &all {
        let data = std::fs::read(path).unwrap();
        let r = std::panic::catch_unwind(|| entry_points::run(target, &data));
        if r.is_err() {
            failed.push(format!("{target}: {}", path.display()));
        }
    }
    assert!(
        failed.is_empty(),
        "fuzz inputs that still fail:\n  {}",
        failed.join("\n  ")
    );
    all.len()
}

#[test]
fn saved_crashes_stay_fixed() {
    replay(&repo().join("tests/data/fuzz-regressions"));
}

#[test]
fn seed_corpora_pass() {
    let n = replay(&repo().join("fuzz/seeds"));
    assert!(n >= TARGETS.len(), "seed corpora missing: {n} files");
    for t in TARGETS {
        assert!(
            repo().join("fuzz/seeds").join(t).is_dir(),
            "no seeds for {t}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Seed generation
// ---------------------------------------------------------------------------------------------

fn oid(s: &[u32]) -> Oid {
    Oid::from_slice(s)
}

const MIB: [u32; 8] = [1, 3, 6, 1, 4, 1, 32473, 1];

fn mib(tail: &[u32]) -> Oid {
    let mut v = MIB.to_vec();
    v.extend_from_slice(tail);
    oid(&v)
}

fn frame(p: &Pdu) -> Vec<u8> {
    let mut out = Vec::new();
    p.encode(&mut out);
    out
}

fn pdu_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let range = |start: Oid, include: bool, end: Oid| SearchRange {
        start,
        include,
        end,
    };
    let mut ctx = Pdu::new(
        9,
        10,
        11,
        Payload::Get {
            ranges: vec![range(mib(&[1, 1, 1, 0]), false, Oid::null())],
        },
    );
    ctx.context = Some(b"ctx".to_vec());
    let all_values = vec![
        VarBind {
            name: mib(&[1, 2, 1, 2, 1]),
            value: Value::OctetString(b"mbuf".to_vec()),
        },
        VarBind {
            name: mib(&[1, 2, 1, 3, 1]),
            value: Value::Integer(-2),
        },
        VarBind {
            name: oid(&[1, 3, 6, 1, 2, 1, 1, 2, 0]),
            value: Value::ObjectIdentifier(mib(&[])),
        },
        VarBind {
            name: oid(&[1, 3, 6, 1, 2, 1, 4, 20, 1, 1]),
            value: Value::IpAddress([127, 0, 0, 1]),
        },
        VarBind {
            name: mib(&[1, 2, 1, 6, 1]),
            value: Value::Counter64(u64::MAX),
        },
        VarBind {
            name: oid(&[1, 3]),
            value: Value::Counter32(7),
        },
        VarBind {
            name: oid(&[1, 3]),
            value: Value::Gauge32(8),
        },
        VarBind {
            name: oid(&[1, 3]),
            value: Value::TimeTicks(9),
        },
        VarBind {
            name: oid(&[1, 3]),
            value: Value::Opaque(vec![1, 2, 3, 4, 5]),
        },
        VarBind {
            name: oid(&[1, 3]),
            value: Value::Null,
        },
        VarBind {
            name: oid(&[]),
            value: Value::NoSuchObject,
        },
        VarBind {
            name: oid(&[1]),
            value: Value::NoSuchInstance,
        },
        VarBind {
            name: oid(&[1, 3, 6, 1, 4, 1, 32473, 1, 9]),
            value: Value::EndOfMibView,
        },
    ];
    vec![
        (
            "open",
            frame(&Pdu::new(
                0,
                0,
                1,
                Payload::Open {
                    timeout: 5,
                    id: mib(&[]),
                    descr: b"memstat-agentx".to_vec(),
                },
            )),
        ),
        (
            "register",
            frame(&Pdu::new(
                1,
                0,
                2,
                Payload::Register {
                    timeout: 0,
                    priority: 127,
                    range_subid: 0,
                    subtree: mib(&[]),
                    upper_bound: None,
                },
            )),
        ),
        (
            "register-range",
            frame(&Pdu::new(
                1,
                0,
                3,
                Payload::Register {
                    timeout: 0,
                    priority: 127,
                    range_subid: 9,
                    subtree: mib(&[1, 2, 1, 2]),
                    upper_bound: Some(22),
                },
            )),
        ),
        (
            "unregister",
            frame(&Pdu::new(
                1,
                0,
                4,
                Payload::Unregister {
                    priority: 127,
                    range_subid: 0,
                    subtree: mib(&[]),
                    upper_bound: None,
                },
            )),
        ),
        (
            "getnext",
            frame(&Pdu::new(
                1,
                77,
                5,
                Payload::GetNext {
                    ranges: vec![
                        range(mib(&[1, 2, 1, 2]), false, mib(&[1, 2, 1, 3])),
                        range(mib(&[1, 3]), true, Oid::null()),
                    ],
                },
            )),
        ),
        (
            "getbulk",
            frame(&Pdu::new(
                1,
                78,
                6,
                Payload::GetBulk {
                    non_repeaters: 1,
                    max_repetitions: 10,
                    ranges: vec![
                        range(oid(&[1, 3, 6, 1, 2, 1, 1, 3]), false, Oid::null()),
                        range(mib(&[]), false, Oid::null()),
                    ],
                },
            )),
        ),
        ("get-context", frame(&ctx)),
        (
            "testset",
            frame(&Pdu::new(
                1,
                79,
                7,
                Payload::TestSet {
                    varbinds: all_values.clone(),
                },
            )),
        ),
        ("commitset", frame(&Pdu::new(1, 79, 8, Payload::CommitSet))),
        (
            "cleanupset",
            frame(&Pdu::new(1, 79, 9, Payload::CleanupSet)),
        ),
        ("ping", frame(&Pdu::new(1, 0, 10, Payload::Ping))),
        (
            "close",
            frame(&Pdu::new(
                1,
                0,
                11,
                Payload::Close {
                    reason: CloseReason::SHUTDOWN,
                },
            )),
        ),
        (
            "addagentcaps",
            frame(&Pdu::new(
                1,
                0,
                12,
                Payload::AddAgentCaps {
                    id: mib(&[3]),
                    descr: b"MEMSTAT-MIB".to_vec(),
                },
            )),
        ),
        (
            "response",
            frame(&Pdu::new(
                1,
                80,
                13,
                Payload::Response {
                    sys_uptime: 123456,
                    error: ResError::NO_ERROR,
                    index: 0,
                    varbinds: all_values,
                },
            )),
        ),
        (
            "notify",
            frame(&Pdu::new(
                1,
                81,
                14,
                Payload::Notify {
                    varbinds: vec![VarBind {
                        name: oid(&[1, 3, 6, 1, 6, 3, 1, 1, 4, 1, 0]),
                        value: Value::ObjectIdentifier(mib(&[0, 1])),
                    }],
                },
            )),
        ),
        // Hand-written, little-endian, with an OID using the 1.3.6.1 prefix byte.
        ("getnext-le-prefix", {
            let mut b = vec![1u8, 6, 0, 0];
            for w in [1u32, 2, 3] {
                b.extend(w.to_le_bytes());
            }
            let payload: Vec<u8> = [
                &[3u8, 4, 1, 0][..], // n_subid 3, prefix 4 (1.3.6.1.4), include 1
                &1u32.to_le_bytes(),
                &32473u32.to_le_bytes(),
                &1u32.to_le_bytes(),
                &[0u8, 0, 0, 0][..], // null end
            ]
            .concat();
            b.extend((payload.len() as u32).to_le_bytes());
            b.extend(payload);
            b
        }),
    ]
}

/// The text of a `.hex` stream file: `#` comments, whitespace ignored.
fn unhex(path: &Path) -> Vec<u8> {
    let text = std::fs::read_to_string(path).unwrap();
    let digits: String = text
        .lines()
        .map(|l| l.split('#').next().unwrap())
        .flat_map(|l| l.split_whitespace())
        .collect();
    (0..digits.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&digits[i..i + 2], 16).unwrap())
        .collect()
}

/// A stream: header, then per type a name field of `type_header_len` bytes (name first) and
/// `maxcpus` 64-byte records filled from `fill`.
fn stream(maxcpus: u32, type_header_len: usize, names: &[&str], fill: u64) -> Vec<u8> {
    let mut s: Vec<u8> = [1u32, maxcpus, names.len() as u32, 0]
        .iter()
        .flat_map(|v| v.to_ne_bytes())
        .collect();
    for (k, name) in names.iter().enumerate() {
        let mut h = vec![0u8; type_header_len];
        h[..name.len()].copy_from_slice(name.as_bytes());
        if type_header_len == 120 {
            // uth_size, uth_limit, uth_zone_flags, allocs, frees.
            h[36..40].copy_from_slice(&256u32.to_ne_bytes());
            h[48..52].copy_from_slice(&1000u32.to_ne_bytes());
            h[68..72].copy_from_slice(&(k as u32 & 1).to_ne_bytes());
            h[72..80].copy_from_slice(&(fill * 10).to_ne_bytes());
            h[80..88].copy_from_slice(&(fill * 3).to_ne_bytes());
        }
        s.extend(h);
        for cpu in 0..maxcpus as u64 {
            for f in 0..8u64 {
                s.extend((fill + cpu * 8 + f).to_ne_bytes());
            }
        }
    }
    s
}

fn with_maxid(maxid: u32, stream: Vec<u8>) -> Vec<u8> {
    let mut v = maxid.to_le_bytes().to_vec();
    v.extend(stream);
    v
}

fn fixture_seed() -> Vec<u8> {
    let mut t = MemoryType::new(Allocator::Uma, "mbuf");
    t.size = Some(256);
    t.allocs = Some(u64::MAX);
    t.frees = Some(3);
    t.in_use_count = Some(9);
    t.per_cpu = vec![
        PerCpu {
            cpu: 0,
            allocs: Some(1),
            frees: None,
            cache_free: Some(2),
            ..PerCpu::default()
        },
        PerCpu {
            cpu: 3,
            allocs: None,
            frees: Some(4),
            cache_free: None,
            ..PerCpu::default()
        },
    ];
    let mut m = MemoryType::new(Allocator::Malloc, "devbuf");
    m.bytes_allocated = Some(4096);
    m.size_mask = Some(0b110);
    let mut m2 = m.clone();
    m2.ordinal = 1;
    let s = Snapshot::new(
        3,
        UNIX_EPOCH + Duration::from_millis(1_700_000_000_123),
        "fixture:seed".into(),
        vec![t, m, m2],
    );
    fixture::to_json(&s).into_bytes()
}

/// /proc/allocinfo in the kernel's format (lib/alloc_tag.c, lib/codetag.c): the header, then
/// rows of `"%12lli %8llu "`, the tag and a final space.
fn allocinfo_seeds() -> Vec<(&'static str, String)> {
    let header = |v: &str| format!("allocinfo - version: {v}\n#     <size>  <calls> <tag info>\n");
    let row = |bytes: i64, calls: u64, tag: &str| format!("{bytes:12} {calls:8} {tag} \n");
    let rows = [
        row(
            2_883_584,
            22_648,
            "fs/kernfs/dir.c:615 func:__kernfs_new_node",
        ),
        row(
            4_194_304,
            1_010,
            "drivers/staging/ctagmod/ctagmod.c:20 [ctagmod] func:ctagmod_start",
        ),
        row(
            0,
            0,
            "arch/x86/kernel/kdebugfs.c:105 func:create_setup_data_nodes",
        ),
        row(-4096, 1, "mm/compaction.c:1800 func:compaction_alloc"),
        row(8192, 2, "include/linux/inlined.h:12 func:helper"),
        row(4096, 1, "include/linux/inlined.h:12 func:helper"),
    ]
    .concat();
    let v2 = [
        row(
            0,
            0,
            "arch/x86/kernel/alternative.c:127 func:__its_alloc accurate:no",
        ),
        row(
            49_152,
            48,
            "arch/x86/kernel/cpu/mce/core.c:2709 func:mce_device_create accurate:no",
        ),
        row(
            8192,
            2,
            "net/netfilter/x.c:9 [nf_tables] func:nft_alloc accurate:no",
        ),
    ]
    .concat();
    vec![
        ("sample-1.0", header("1.0") + &rows),
        ("sample-2.0", header("2.0") + &rows + &v2),
        ("header-only-2.0", header("2.0")),
        ("version-3.0", header("3.0") + &rows),
    ]
}

/// Writes fuzz/seeds/<target>/*. Run by hand after a format change:
/// `cargo test --test fuzz_regressions -- --ignored write_seeds`.
#[test]
#[ignore = "writes fuzz/seeds: run by hand after a format change"]
fn write_seeds() {
    let root = repo().join("fuzz/seeds");
    let put = |target: &str, name: &str, data: &[u8]| {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(name), data).unwrap();
    };
    for (name, b) in pdu_seeds() {
        put("agentx_pdu", name, &b);
    }

    let slab = "slabinfo - version: 2.1\n\
# name            <active_objs> <num_objs> <objsize> <objperslab> <pagesperslab> : tunables <limit> <batchcount> <sharedfactor> : slabdata <active_slabs> <num_slabs> <sharedavail>\n\
kmalloc-64          3000   3200     64   64    1 : tunables    0    0    0 : slabdata     50     50      0\n\
task_struct          410    435   6336    5    8 : tunables    0    0    0 : slabdata     87     87      0\n\
weird 10 5 8 1 1 : tunables 0 0 0 : slabdata 1 1 0\n";
    put("slabinfo", "sample", slab.as_bytes());
    put("slabinfo", "empty-2.1", b"slabinfo - version: 2.1\n");
    put("slabinfo", "version-1.1", b"slabinfo - version: 1.1\n");
    // The live file, when it is readable (root), cut to its first 40 lines.
    if let Ok(live) = std::fs::read_to_string("/proc/slabinfo") {
        let head: Vec<&str> = live.lines().take(40).collect();
        put("slabinfo", "live-head", (head.join("\n") + "\n").as_bytes());
    }

    let meminfo = "MemTotal:       24683584 kB\n\
Slab:             842804 kB\n\
SReclaimable:     774804 kB\n\
SUnreclaim:        68000 kB\n\
SecPageTables:\t       0 kB\n\
HugePages_Total:       0\n";
    put("meminfo", "sample", meminfo.as_bytes());
    if let Ok(live) = std::fs::read("/proc/meminfo") {
        put("meminfo", "live", &live);
    }
    let arc = "13 1 0x01 3 240 5404391811 1099539417562993\n\
name                            type data\n\
hits                            4    1234567\n\
size                            4    2147483648\n\
arc_raw_size                    3    -1\n";
    put("arcstats", "sample", arc.as_bytes());
    for (name, text) in allocinfo_seeds() {
        put("allocinfo", name, text.as_bytes());
    }

    let data = repo().join("tests/data/freebsd");
    put(
        "uma_stream",
        "hand-written",
        &with_maxid(1, unhex(&data.join("uma-stream.hex"))),
    );
    put(
        "uma_stream",
        "two-zones-4cpu",
        &with_maxid(3, stream(4, 120, &["mbuf", "mbuf_cluster"], 5)),
    );
    put(
        "uma_stream",
        "maxid-below-maxcpus",
        &with_maxid(0, stream(2, 120, &["vmem btag"], 1)),
    );
    put(
        "uma_stream",
        "empty",
        &with_maxid(0, stream(1, 120, &[], 0)),
    );
    put(
        "malloc_stream",
        "hand-written",
        &with_maxid(1, unhex(&data.join("malloc-stream.hex"))),
    );
    put(
        "malloc_stream",
        "three-types-4cpu",
        &with_maxid(1, stream(4, 32, &["devbuf", "temp", "pcb"], 7)),
    );
    put(
        "malloc_stream",
        "maxid-above-maxcpus",
        &with_maxid(9, stream(2, 32, &["M_TEMP"], 2)),
    );

    put("fixture_json", "snapshot", &fixture_seed());
    put(
        "fixture_json",
        "demo",
        &std::fs::read(repo().join("tests/data/demo-fixture.json")).unwrap(),
    );
    put("fixture_json", "minimal", br#"{"types":[]}"#);

    put(
        "config_toml",
        "shipped",
        &std::fs::read(repo().join("config/memstat-agentx.toml")).unwrap(),
    );
    put(
        "config_toml",
        "all-keys",
        br#"agentx-socket = "tcp:127.0.0.1:705"
source = "fixture:/tmp/x.json"
max-age = 0.1
walk-window = 30
ping-interval = 0
backoff-min = 0.25
backoff-max = 2.5
state-dir = "/var/lib/memstat-agentx"
log-level = "debug"
log-target = "syslog"
user = "memstat"
agent-caps = false
"#,
    );
    put("config_toml", "empty", b"");
    put("config_toml", "unknown-key", b"max-age = 5\nbogus = 1\n");
}
