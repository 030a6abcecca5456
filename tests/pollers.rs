//! The pollers people actually use, against the daemon behind a real net-snmp snmpd:
//!
//! - Cacti: contrib/cacti/memstat_memtypetable.xml parses, names the right objects, and
//!   Cacti's polling pattern (multi-OID Gets of `column.index`) returns the served values;
//! - (LibreNMS: tests/librenms.rs; Cacti run for real: tests/cacti.rs);
//! - Prometheus: contrib/prometheus/generator.yml through the real generator and exporter,
//!   scraped over HTTP;
//! - counter semantics across a restart of the daemon alone, and memTypeDiscontinuityTime.
//!
//! Every tool is required: a missing one fails the test with the package to install.

mod common;

use common::*;
use memstat_agentx::memstat::{Allocator, MemoryType};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const MANIFEST: &str = env!("CARGO_MANIFEST_DIR");

/// How a memTypeTable column is typed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Text,
    Enum,
    Gauge32,
    /// MemGauge64: a TEXTUAL-CONVENTION over Counter64 with gauge semantics.
    Gauge64,
    Counter64,
    Hex,
    Ticks,
}

/// The accessible columns of memTypeTable, from the MIB.
const COLUMNS: &[(u32, &str, Kind)] = &[
    (2, "memTypeName", Kind::Text),
    (3, "memTypeAllocator", Kind::Enum),
    (4, "memTypeOrdinal", Kind::Gauge32),
    (5, "memTypeSize", Kind::Gauge64),
    (6, "memTypeRealSize", Kind::Gauge64),
    (7, "memTypeCountLimit", Kind::Gauge64),
    (8, "memTypeBytesLimit", Kind::Gauge64),
    (9, "memTypeInUseCount", Kind::Gauge64),
    (10, "memTypeInUseBytes", Kind::Gauge64),
    (11, "memTypeFreeCount", Kind::Gauge64),
    (12, "memTypeTotalCount", Kind::Gauge64),
    (13, "memTypeAllocs", Kind::Counter64),
    (14, "memTypeFrees", Kind::Counter64),
    (15, "memTypeBytesAllocated", Kind::Counter64),
    (16, "memTypeBytesFreed", Kind::Counter64),
    (17, "memTypeFailures", Kind::Counter64),
    (18, "memTypeSleeps", Kind::Counter64),
    (19, "memTypeCrossDomainFrees", Kind::Counter64),
    (20, "memTypeZoneFree", Kind::Gauge64),
    (21, "memTypeKegFree", Kind::Gauge64),
    (22, "memTypeSizeMask", Kind::Hex),
    (23, "memTypeSlabBytes", Kind::Gauge64),
    (24, "memTypeDiscontinuityTime", Kind::Ticks),
];

fn column(name: &str) -> (u32, Kind) {
    COLUMNS
        .iter()
        .find(|c| c.1 == name)
        .map(|c| (c.0, c.2))
        .unwrap_or_else(|| panic!("{name} is not a memTypeTable column"))
}

/// The numeric value of a cell of `t` (None: absent). Text columns are not numeric.
fn num(t: &MemoryType, col: &str) -> Option<u64> {
    match col {
        "memTypeAllocator" => Some(t.allocator as u64),
        "memTypeOrdinal" => Some(t.ordinal as u64),
        "memTypeSize" => t.size,
        "memTypeRealSize" => t.real_size,
        "memTypeCountLimit" => t.count_limit,
        "memTypeBytesLimit" => t.bytes_limit,
        "memTypeInUseCount" => t.in_use_count,
        "memTypeInUseBytes" => t.in_use_bytes,
        "memTypeFreeCount" => t.free_count,
        "memTypeTotalCount" => t.total_count,
        "memTypeAllocs" => t.allocs,
        "memTypeFrees" => t.frees,
        "memTypeBytesAllocated" => t.bytes_allocated,
        "memTypeBytesFreed" => t.bytes_freed,
        "memTypeFailures" => t.failures,
        "memTypeSleeps" => t.sleeps,
        "memTypeCrossDomainFrees" => t.xdomain,
        "memTypeZoneFree" => t.zone_free,
        "memTypeKegFree" => t.keg_free,
        "memTypeSizeMask" => t.size_mask,
        "memTypeSlabBytes" => t.slab_bytes,
        _ => panic!("{col} has no numeric value"),
    }
}

// ------------------------------------------------------------------------------------------
// Tools and helpers
// ------------------------------------------------------------------------------------------

/// The master's sysUpTime.0, in ticks.
fn sys_uptime(port: u16) -> u64 {
    let l = get(port, &[".1.3.6.1.2.1.1.3.0"]);
    ticks(&l[0].value)
}

/// `(1234) 0:00:12.34` → 1234.
fn ticks(v: &str) -> u64 {
    v.trim()
        .strip_prefix('(')
        .and_then(|s| s.split(')').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not a Timeticks value: {v:?}"))
}

/// A child process killed when dropped.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A private snmpd and the daemon on a fixture.
struct Env {
    dir: tempfile::TempDir,
    snmpd: Snmpd,
    daemon: Daemon,
    fixture: PathBuf,
}

fn setup(types: Vec<MemoryType>, extra: &[&str]) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let fixture = dir.path().join("fixture.json");
    write_fixture(&fixture, types);
    let snmpd = Snmpd::start(dir.path(), Transport::Unix);
    let src = format!("fixture:{}", fixture.display());
    let state = dir.path().join("state").display().to_string();
    let mut args = vec!["--source", &src, "--state-dir", &state];
    args.extend_from_slice(extra);
    let daemon = Daemon::start(&snmpd, &args);
    Env {
        dir,
        snmpd,
        daemon,
        fixture,
    }
}

// ------------------------------------------------------------------------------------------
// Cacti
// ------------------------------------------------------------------------------------------

/// The data query as python3's xml.etree reads it: a well-formedness check and a parse.
fn cacti_query(path: &Path) -> serde_json::Value {
    need("python3", "python3");
    const SCRIPT: &str = r#"
import json, sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
out = {k: (root.findtext(k) or "").strip() for k in
       ("name", "oid_uptime", "oid_index", "oid_index_parse", "index_order")}
out["root"] = root.tag
out["fields"] = [
    dict(tag=f.tag, **{k: (f.findtext(k) or "").strip()
                       for k in ("name", "method", "source", "direction", "oid")})
    for f in root.find("fields")
]
print(json.dumps(out))
"#;
    let json = run_ok(Command::new("python3").args(["-c", SCRIPT]).arg(path));
    serde_json::from_str(&json).unwrap()
}

#[test]
fn cacti_data_query_names_the_right_objects_and_polls_by_multi_oid_get() {
    let xml = Path::new(MANIFEST).join("contrib/cacti/memstat_memtypetable.xml");
    let q = cacti_query(&xml);
    let s = |v: &serde_json::Value| v.as_str().unwrap().to_string();
    assert_eq!(q["root"], "interface");
    assert!(!s(&q["name"]).is_empty(), "the query needs a <name>");

    // oid_uptime is the subagent's uptime scalar, oid_index the memTypeName column.
    let uptime = s(&q["oid_uptime"]);
    assert_eq!(uptime, ".1.3.6.1.4.1.32473.1.1.1.1.0");
    assert_eq!(
        translate(&["-OS"], &uptime),
        "MEMSTAT-MIB::memDaemonUptime.0"
    );
    assert!(translate(&["-Td"], &uptime).contains("SYNTAX\tTimeTicks"));
    let index_oid = s(&q["oid_index"]);
    assert_eq!(translate(&["-OS"], &index_oid), "MEMSTAT-MIB::memTypeName");
    assert_eq!(s(&q["oid_index_parse"]), r"OID/REGEXP:.*\.([0-9]+)$");
    // The row identity is memTypeIndex alone: Cacti takes the first index_order field whose
    // OID is oid_index as the sort field without checking that its values are unique, so
    // memTypeName (which repeats) must not come first.
    assert_eq!(s(&q["index_order"]), "memTypeIndex");

    // Every field's OID is the object it is named after, both ways; output fields say
    // whether they are a gauge or a counter, and that agrees with the MIB.
    let fields = q["fields"].as_array().unwrap();
    let mut by_dir: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for f in fields {
        let (tag, oid, source) = (s(&f["tag"]), s(&f["oid"]), s(&f["source"]));
        assert_eq!(s(&f["method"]), "walk", "{tag}");
        by_dir
            .entry(s(&f["direction"]))
            .or_default()
            .push(tag.clone());
        if source == "index" {
            // Cacti fills a source=index field only when it has no <oid> (lib/data_query.php,
            // query_snmp_host); with one, the field stays empty and rows lose their identity.
            assert_eq!(tag, "memTypeIndex");
            assert_eq!(oid, "", "the index field must not have an <oid>");
            continue;
        }
        assert_eq!(source, "value", "{tag}");
        assert_eq!(
            translate(&["-OS"], &oid),
            format!("MEMSTAT-MIB::{tag}"),
            "field <{tag}> has the OID of another object"
        );
        assert_eq!(translate(&["-On"], &format!("MEMSTAT-MIB::{tag}")), oid);
        if s(&f["direction"]) == "output" {
            let td = translate(&["-Td"], &oid);
            let gauge = td.contains("TEXTUAL CONVENTION MemGauge64");
            assert!(
                td.contains("SYNTAX\tCounter64"),
                "{tag} is not 64-bit: {td}"
            );
            let name = s(&f["name"]);
            let want = if gauge { "(gauge" } else { "(counter)" };
            assert!(
                name.contains(want),
                "{tag}: name {name:?} should say {want}"
            );
            assert_eq!(
                column(&tag).1,
                if gauge {
                    Kind::Gauge64
                } else {
                    Kind::Counter64
                }
            );
        }
    }
    let has = |dir: &str, names: &[&str]| {
        for n in names {
            assert!(
                by_dir.get(dir).is_some_and(|v| v.iter().any(|t| t == n)),
                "{n} is not an {dir} field: {by_dir:?}"
            );
        }
    };
    has(
        "input",
        &[
            "memTypeIndex",
            "memTypeName",
            "memTypeAllocator",
            "memTypeSize",
        ],
    );
    has(
        "output",
        &[
            "memTypeInUseCount",
            "memTypeInUseBytes",
            "memTypeFreeCount",
            "memTypeAllocs",
            "memTypeFrees",
            "memTypeFailures",
        ],
    );

    // Against the running daemon: the uptime Get, the re-index walk, then polling Gets.
    let types = sample_types();
    let env = setup(types.clone(), &[]);
    let port = env.snmpd.port;
    let up = get(port, &[&uptime]);
    assert_eq!(up[0].ty, "Timeticks", "{up:?}");

    // Re-index: walk oid_index, apply oid_index_parse (the last arc).
    let walked = bulkwalk(port, &index_oid, &[]);
    let rows: Vec<(u32, String)> = walked
        .iter()
        .map(|l| {
            let idx = l.oid.rsplit('.').next().unwrap().parse().unwrap();
            (idx, l.value.clone())
        })
        .collect();
    let expected_rows: Vec<(u32, String)> = types
        .iter()
        .enumerate()
        .map(|(i, t)| (i as u32 + 1, t.name.clone()))
        .collect();
    assert_eq!(rows, expected_rows);

    // Poll: every output field of three rows (2, 3: full UMA rows; 5: a sparse slab row)
    // in one Get request, as spine batches them (up to 60 OIDs per request; cmd.php sends
    // one OID per Get).
    let outputs: Vec<(String, String)> = fields
        .iter()
        .filter(|f| f["direction"] == "output")
        .map(|f| (s(&f["tag"]), s(&f["oid"])))
        .collect();
    let mut oids = Vec::new();
    let mut want = BTreeMap::new();
    for row in [2usize, 3, 5] {
        for (tag, oid) in &outputs {
            let o = format!("{oid}.{row}");
            want.insert(o.clone(), num(&types[row - 1], tag));
            oids.push(o);
        }
    }
    assert!(oids.len() >= 10 && oids.len() <= 60, "{}", oids.len());
    let refs: Vec<&str> = oids.iter().map(String::as_str).collect();
    let got = get(port, &refs);
    assert_eq!(got.len(), oids.len(), "one varbind per OID: {got:?}");
    for l in &got {
        match want[&l.oid] {
            Some(v) => assert_eq!(
                (l.ty.as_str(), l.value.trim()),
                ("Counter64", v.to_string().as_str()),
                "{}",
                l.oid
            ),
            // Absent cells are noSuchInstance (Cacti stores NaN), never 0.
            None => assert!(l.ty.contains("No Such Instance"), "{l:?}"),
        }
    }

    // The smallest Cacti batch: 10 OIDs across 3 rows, mixed columns.
    let ten = [
        "10.2", "13.2", "14.2", "17.2", "9.3", "11.3", "13.3", "10.4", "15.4", "16.4",
    ];
    let oids: Vec<String> = ten.iter().map(|s| format!("{TYPE_ENTRY}.{s}")).collect();
    let refs: Vec<&str> = oids.iter().map(String::as_str).collect();
    let got = get(port, &refs);
    assert_eq!(got.len(), 10);
    for (l, cell) in got.iter().zip(ten) {
        let (col, row) = cell.split_once('.').unwrap();
        let col: u32 = col.parse().unwrap();
        let name = COLUMNS.iter().find(|c| c.0 == col).unwrap().1;
        let v = num(&types[row.parse::<usize>().unwrap() - 1], name).unwrap();
        assert_eq!(
            (l.ty.as_str(), l.value.trim()),
            ("Counter64", v.to_string().as_str())
        );
    }
    drop(env);
}

// ------------------------------------------------------------------------------------------
// Prometheus
// ------------------------------------------------------------------------------------------

/// A full row whose every value is below 2^53 (the exporter's float64 is exact there), but
/// past 2^32 where the column is 64-bit.
fn exact_type(alloc: Allocator, name: &str, seed: u64) -> MemoryType {
    let mut t = full_type(alloc, name, seed);
    let big = (1u64 << 40) + seed * 1000;
    t.bytes_limit = Some(big * 3);
    t.in_use_bytes = Some(big * 2);
    t.allocs = Some(big + 7);
    t.frees = Some(big);
    t.bytes_allocated = Some(big * 5);
    t.bytes_freed = Some(big * 4);
    t.slab_bytes = Some(big * 6);
    t.size_mask = Some(0x24 + seed);
    for c in &mut t.per_cpu {
        c.allocs = c.allocs.map(|_| big + 1);
    }
    t
}

fn exact_types() -> Vec<MemoryType> {
    let mut sparse = MemoryType::new(Allocator::Slab, "dentry");
    sparse.size = Some(192);
    sparse.in_use_count = Some(5_000_000_000);
    sparse.total_count = Some(5_000_000_100);
    sparse.free_count = Some(100);
    sparse.slab_bytes = Some(1 << 45);
    let mut malloc = MemoryType::new(Allocator::Malloc, "temp");
    malloc.allocs = Some(123);
    malloc.in_use_bytes = Some(4096);
    let mut dup = exact_type(Allocator::Uma, "mbuf", 9);
    dup.ordinal = 1;
    vec![
        malloc,
        exact_type(Allocator::Uma, "mbuf", 1),
        dup,
        exact_type(Allocator::Uma, "mbuf_cluster", 2),
        sparse,
    ]
}

/// One sample of the exposition format.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

fn parse_exposition(body: &str) -> (BTreeMap<String, String>, Vec<Sample>) {
    let mut types = BTreeMap::new();
    let mut samples = Vec::new();
    for line in body.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (n, t) = rest.split_once(' ').unwrap();
            types.insert(n.to_string(), t.to_string());
            continue;
        }
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap();
        let (name, labels) = match series.split_once('{') {
            None => (series.to_string(), BTreeMap::new()),
            Some((n, rest)) => (n.to_string(), parse_labels(rest.strip_suffix('}').unwrap())),
        };
        samples.push(Sample {
            name,
            labels,
            value: value
                .parse()
                .unwrap_or_else(|_| panic!("value of {line:?}")),
        });
    }
    (types, samples)
}

/// `a="x",b="y\"z"` → {a: x, b: y"z}.
fn parse_labels(s: &str) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    let mut chars = s.chars().peekable();
    loop {
        let key: String = chars.by_ref().take_while(|&c| c != '=').collect();
        if key.is_empty() {
            break;
        }
        assert_eq!(chars.next(), Some('"'), "label {key} in {s:?}");
        let mut v = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some('n') => v.push('\n'),
                    Some(o) => v.push(o),
                    None => break,
                },
                '"' => break,
                o => v.push(o),
            }
        }
        m.insert(key.trim_start_matches(',').to_string(), v);
        if chars.peek() == Some(&',') {
            chars.next();
        }
    }
    m
}

/// A plain HTTP/1.0 GET; returns the body of a 200 response.
fn http_get(port: u16, path: &str) -> String {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n").unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    let (head, body) = resp.split_once("\r\n\r\n").unwrap_or((&resp, ""));
    assert!(
        head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
        "GET {path}: {resp}"
    );
    body.to_string()
}

/// contrib/prometheus/generator.yml through the real generator, then the real exporter on
/// the snmp.yml it wrote: the exporter (killed when dropped) and its HTTP port.
fn generate_and_export(dir: &Path) -> (Proc, u16) {
    for t in ["prometheus-snmp-generator", "prometheus-snmp-exporter"] {
        need(t, "prometheus-snmp-exporter");
    }
    let work = dir.join("prometheus");
    std::fs::create_dir_all(&work).unwrap();

    // The real generator (0.21: per-module version and auth) reads generator.yml from its
    // working directory and MIBs from MIBDIRS.
    std::fs::copy(
        Path::new(MANIFEST).join("contrib/prometheus/generator.yml"),
        work.join("generator.yml"),
    )
    .unwrap();
    let gen = Command::new("prometheus-snmp-generator")
        .args(["--fail-on-parse-errors", "generate", "-o", "snmp.yml"])
        .current_dir(&work)
        // Only the base MIBs and ours: the generator loads every module in MIBDIRS, and
        // --fail-on-parse-errors then proves that MEMSTAT-MIB parses cleanly.
        .env("MIBDIRS", format!("{}:{MANIFEST}/mibs", base_mibs()))
        .env("MIBS", "")
        .output()
        .expect("run prometheus-snmp-generator");
    assert!(
        gen.status.success(),
        "generator failed: {}",
        String::from_utf8_lossy(&gen.stderr)
    );
    let snmp_yml = std::fs::read_to_string(work.join("snmp.yml")).unwrap();
    assert!(snmp_yml.contains("memstat:"), "{snmp_yml}");

    // The real exporter.
    let http = free_port();
    let log = std::fs::File::create(work.join("exporter.log")).unwrap();
    let mut exporter = Proc(
        Command::new("prometheus-snmp-exporter")
            .arg(format!("--config.file={}", work.join("snmp.yml").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{http}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start prometheus-snmp-exporter"),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", http)).is_err() {
        let log = || std::fs::read_to_string(work.join("exporter.log")).unwrap_or_default();
        if let Some(st) = exporter.0.try_wait().unwrap() {
            panic!("exporter exited with {st}: {}", log());
        }
        assert!(
            Instant::now() < deadline,
            "exporter did not listen: {}",
            log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    (exporter, http)
}

#[test]
fn prometheus_generator_and_exporter_scrape_the_fixture() {
    let types = exact_types();
    let env = setup(types.clone(), &[]);
    let (exporter, http) = generate_and_export(env.dir.path());
    let body = http_get(
        http,
        &format!("/snmp?target=127.0.0.1:{}&module=memstat", env.snmpd.port),
    );
    let (mtypes, samples) = parse_exposition(&body);

    // # TYPE: gauges for MemGauge64 columns, counters for Counter64 columns.
    for &(_, col, kind) in COLUMNS {
        let want = match kind {
            Kind::Gauge64 => "gauge",
            Kind::Counter64 => "counter",
            _ => continue,
        };
        assert_eq!(
            mtypes.get(col).map(String::as_str),
            Some(want),
            "# TYPE {col}\n{body}"
        );
    }
    for (m, t) in [
        ("memAllocatorInUseBytes", "gauge"),
        ("memAllocatorFreeBytes", "gauge"),
        ("memAllocatorFailures", "counter"),
        ("memAllocatorTypeCount", "gauge"),
        ("memTypeDiscontinuityTime", "gauge"),
        ("memDaemonUptime", "gauge"),
        ("memSnapshotGeneration", "counter"),
    ] {
        assert_eq!(mtypes.get(m).map(String::as_str), Some(t), "{m}\n{body}");
    }
    // Lookups become labels, not metrics.
    for m in ["memTypeName", "memTypeAllocator", "memTypeSizeMask"] {
        assert!(!mtypes.contains_key(m), "{m} should be a label only");
    }

    // Three rows (two UMA zones with one name, and a sparse slab cache): every numeric
    // column equals the fixture, every absent cell has no series, labels name the row.
    for row in [2usize, 3, 5] {
        let t = &types[row - 1];
        for &(_, col, kind) in COLUMNS {
            if !matches!(kind, Kind::Gauge64 | Kind::Counter64 | Kind::Gauge32) {
                continue;
            }
            let found: Vec<&Sample> = samples
                .iter()
                .filter(|s| s.name == col && s.labels["memTypeIndex"] == row.to_string())
                .collect();
            match num(t, col) {
                None => assert!(found.is_empty(), "{col}[{row}] is absent: {found:?}"),
                Some(v) => {
                    assert_eq!(found.len(), 1, "{col}[{row}]\n{body}");
                    let s = found[0];
                    assert!(v < 1 << 53);
                    assert_eq!(s.value, v as f64, "{col}[{row}]");
                    assert_eq!(s.labels["memTypeName"], t.name, "{s:?}");
                    assert_eq!(
                        s.labels["memTypeAllocator"],
                        (t.allocator as u32).to_string(),
                        "{s:?}"
                    );
                }
            }
        }
    }
    // Every row is there, each series once.
    let in_use: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.name == "memTypeInUseCount")
        .collect();
    assert_eq!(
        in_use.len(),
        types.iter().filter(|t| t.in_use_count.is_some()).count()
    );
    let up: Vec<&Sample> = samples.iter().filter(|s| s.name == "up").collect();
    assert!(up.is_empty() || up[0].value == 1.0);
    drop(exporter);
    drop(env);
}

/// The PromQL selector of the overview's stacked area, as contrib/prometheus documents it.
const OVERVIEW_SELECTOR: &str = r#"memKernelBytes{memKernelParent="0",memKernelStackable="1"}"#;

#[test]
fn prometheus_labels_the_kernel_rows_so_that_the_overview_selects_the_stackable_ones() {
    use memstat_agentx::memstat::source::SOURCES;
    use memstat_agentx::memstat::{fixture, Snapshot};
    // Every kind the sources define but three a host may lack, below 2^53 (the exporter's
    // float64 is exact there) and past 2^32.
    let kinds: Vec<_> = SOURCES.iter().flat_map(|d| d.kinds.iter()).collect();
    let mut snap = Snapshot::new(0, std::time::SystemTime::now(), String::new(), Vec::new());
    let mut served = BTreeMap::new();
    for k in &kinds {
        if matches!(
            k.name,
            "shadowCallStack" | "hardwareCorrupted" | "zfsArcWired"
        ) {
            continue;
        }
        let v = (3u64 << 40) + u64::from(k.index) * 4096;
        snap.figures.insert(k.figure.into(), v);
        served.insert(k.index, (*k, v));
    }
    let dir = tempfile::tempdir().unwrap();
    let fix = dir.path().join("fixture.json");
    std::fs::write(&fix, fixture::to_json(&snap)).unwrap();
    let snmpd = Snmpd::start(dir.path(), Transport::Unix);
    let src = format!("fixture:{}", fix.display());
    let state = dir.path().join("state").display().to_string();
    let _daemon = Daemon::start(&snmpd, &["--source", &src, "--state-dir", &state]);

    let (exporter, http) = generate_and_export(dir.path());
    let body = http_get(
        http,
        &format!("/snmp?target=127.0.0.1:{}&module=memstat", snmpd.port),
    );
    let (mtypes, samples) = parse_exposition(&body);
    assert_eq!(
        mtypes.get("memKernelBytes").map(String::as_str),
        Some("gauge"),
        "MemGauge64 is a gauge\n{body}"
    );
    for m in [
        "memKernelName",
        "memKernelParent",
        "memKernelStackable",
        "memKernelReclaimable",
    ] {
        assert!(!mtypes.contains_key(m), "{m} should be a label only");
    }

    // One series per served row, its bytes exact, labelled with the row's name and place.
    let kernel: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.name == "memKernelBytes")
        .collect();
    assert_eq!(kernel.len(), served.len(), "{body}");
    let truth = |b: bool| if b { "1" } else { "2" };
    for s in &kernel {
        let index: u32 = s.labels["memKernelIndex"].parse().unwrap();
        let (k, v) = served[&index];
        assert_eq!(s.value, v as f64, "{s:?}");
        assert_eq!(s.labels["memKernelName"], k.name, "{s:?}");
        assert_eq!(s.labels["memKernelParent"], k.parent.to_string(), "{s:?}");
        assert_eq!(s.labels["memKernelStackable"], truth(k.stackable), "{s:?}");
        assert_eq!(
            s.labels["memKernelReclaimable"],
            truth(k.reclaimable),
            "{s:?}"
        );
    }

    // The documented selector, applied to the scrape as Prometheus would, gives exactly the
    // top-level rows that do not overlap: what the overview stacks.
    let (_, matchers) = OVERVIEW_SELECTOR.split_once('{').unwrap();
    let matchers = parse_labels(matchers.strip_suffix('}').unwrap());
    let mut selected: Vec<&str> = kernel
        .iter()
        .filter(|s| matchers.iter().all(|(l, v)| s.labels.get(l) == Some(v)))
        .map(|s| s.labels["memKernelName"].as_str())
        .collect();
    selected.sort();
    let mut want: Vec<&str> = served
        .values()
        .filter(|(k, _)| k.parent == 0 && k.stackable)
        .map(|(k, _)| k.name)
        .collect();
    want.sort();
    assert_eq!(selected, want);
    assert!(
        !selected.contains(&"vmalloc") && selected.contains(&"slab") && selected.contains(&"wired")
    );
    for f in [
        "contrib/prometheus/README.md",
        "contrib/prometheus/generator.yml",
    ] {
        let text = std::fs::read_to_string(Path::new(MANIFEST).join(f)).unwrap();
        assert!(
            text.contains(OVERVIEW_SELECTOR),
            "{f} does not give the overview's selector {OVERVIEW_SELECTOR}"
        );
    }
    drop(exporter);
}

/// The hit ratio, as contrib/prometheus documents it.
const ARC_HIT_RATIO: &str =
    "rate(memArcHits[5m]) / (rate(memArcHits[5m]) + rate(memArcMisses[5m]))";

#[test]
fn prometheus_scrapes_the_arc_as_gauges_and_counters_by_their_roles() {
    use memstat_agentx::memstat::source::{Role, SOURCES};
    use memstat_agentx::memstat::{fixture, Snapshot};
    // Every object of memstatArc, from its definition, with a value of its own (below 2^53,
    // where the exporter's float64 is exact, and past 2^32).
    let objects: Vec<_> = SOURCES
        .iter()
        .flat_map(|d| d.groups.iter())
        .flat_map(|g| g.objects.iter())
        .collect();
    let mut snap = Snapshot::new(0, std::time::SystemTime::now(), String::new(), Vec::new());
    for o in &objects {
        snap.figures
            .insert(o.figure.into(), (7u64 << 36) + u64::from(o.sub) * 4099);
    }
    let dir = tempfile::tempdir().unwrap();
    let fix = dir.path().join("fixture.json");
    std::fs::write(&fix, fixture::to_json(&snap)).unwrap();
    let snmpd = Snmpd::start(dir.path(), Transport::Unix);
    let src = format!("fixture:{}", fix.display());
    let state = dir.path().join("state").display().to_string();
    let _daemon = Daemon::start(&snmpd, &["--source", &src, "--state-dir", &state]);

    let (exporter, http) = generate_and_export(dir.path());
    let body = http_get(
        http,
        &format!("/snmp?target=127.0.0.1:{}&module=memstat", snmpd.port),
    );
    let (mtypes, samples) = parse_exposition(&body);
    for o in &objects {
        let want = match o.role {
            Role::Hits | Role::Misses | Role::Counter => "counter",
            _ => "gauge",
        };
        assert_eq!(
            mtypes.get(o.name).map(String::as_str),
            Some(want),
            "# TYPE {}\n{body}",
            o.name
        );
        let found: Vec<&Sample> = samples.iter().filter(|s| s.name == o.name).collect();
        assert_eq!(found.len(), 1, "{}: {found:?}", o.name);
        assert!(found[0].labels.is_empty(), "{found:?}");
        assert_eq!(found[0].value, snap.figures[o.figure] as f64, "{}", o.name);
    }
    drop(exporter);

    // The documents give the hit ratio's query, the stack of the parts that add up (and only
    // those), the lines, and what can be given back.
    let readme =
        std::fs::read_to_string(Path::new(MANIFEST).join("contrib/prometheus/README.md")).unwrap();
    let generator =
        std::fs::read_to_string(Path::new(MANIFEST).join("contrib/prometheus/generator.yml"))
            .unwrap();
    for text in [&readme, &generator] {
        assert!(text.contains(ARC_HIT_RATIO), "no {ARC_HIT_RATIO}");
        assert!(text.contains("memArcShrinkable"));
    }
    let stack_line = readme
        .lines()
        .find(|l| l.starts_with("ARC stack:"))
        .expect("README's `ARC stack:` line");
    let lines_line = readme
        .lines()
        .find(|l| l.starts_with("ARC lines:"))
        .expect("README's `ARC lines:` line");
    let named = |line: &str| -> Vec<String> {
        line.split(|c: char| !c.is_ascii_alphanumeric())
            .filter(|w| w.starts_with("memArc"))
            .map(str::to_string)
            .collect()
    };
    let of = |roles: &[Role]| -> Vec<String> {
        objects
            .iter()
            .filter(|o| roles.contains(&o.role))
            .map(|o| o.name.to_string())
            .collect()
    };
    assert_eq!(named(stack_line), of(&[Role::Part]));
    assert_eq!(named(lines_line), of(&[Role::Total, Role::Limit]));
}

// ------------------------------------------------------------------------------------------
// Counters across restarts, and memTypeDiscontinuityTime
// ------------------------------------------------------------------------------------------

/// memTypeTable as (memTypeIndex → name, column number → value) from a numeric walk.
fn walk_table(port: u16) -> BTreeMap<u32, BTreeMap<u32, String>> {
    let mut t: BTreeMap<u32, BTreeMap<u32, String>> = BTreeMap::new();
    for l in bulkwalk(port, TYPE_ENTRY, &[]) {
        let rest = l.oid.strip_prefix(&format!("{TYPE_ENTRY}.")).unwrap();
        let (col, idx) = rest.split_once('.').unwrap();
        let v = if l.ty == "Timeticks" {
            ticks(&l.value).to_string()
        } else {
            l.value.trim().to_string()
        };
        t.entry(idx.parse().unwrap())
            .or_default()
            .insert(col.parse().unwrap(), v);
    }
    t
}

fn index_of(table: &BTreeMap<u32, BTreeMap<u32, String>>, name: &str) -> u32 {
    let found: Vec<u32> = table
        .iter()
        .filter(|(_, r)| r[&2] == name)
        .map(|(i, _)| *i)
        .collect();
    assert_eq!(found.len(), 1, "{name} in {table:?}");
    found[0]
}

fn daemon_uptime(port: u16) -> u64 {
    let l = get(port, &[&format!("{ROOT}.1.1.1.0")]);
    assert_eq!(l[0].ty, "Timeticks", "{l:?}");
    ticks(&l[0].value)
}

/// memRefreshCount.0: the reads of the source so far.
fn refresh_count(port: u16) -> u64 {
    let l = get(port, &[&format!("{ROOT}.1.1.5.0")]);
    l[0].value
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{l:?}"))
}

/// The tests' `--max-age 0.2`, for the waits until a walk must read the source anew.
const MAX_AGE: Duration = Duration::from_millis(200);

fn counter_types(step: u64) -> Vec<MemoryType> {
    ["alpha", "beta", "gamma", "delta"]
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let mut t = full_type(Allocator::Uma, name, i as u64);
            let bump = step * (1000 + i as u64);
            for c in [
                &mut t.allocs,
                &mut t.frees,
                &mut t.bytes_allocated,
                &mut t.bytes_freed,
                &mut t.failures,
                &mut t.sleeps,
                &mut t.xdomain,
            ] {
                *c = c.map(|v| v + bump);
            }
            t.per_cpu.clear();
            t
        })
        .collect()
}

#[test]
fn counters_indexes_and_discontinuities_across_a_daemon_restart() {
    let counters: Vec<u32> = COLUMNS
        .iter()
        .filter(|c| c.2 == Kind::Counter64)
        .map(|c| c.0)
        .collect();
    let start = counter_types(0);
    let mut env = setup(start.clone(), &["--max-age", "0.2"]);
    let port = env.snmpd.port;

    let before = walk_table(port);
    assert_eq!(before.len(), start.len());
    for r in before.values() {
        assert_eq!(
            r[&24], "0",
            "rows present at start have no discontinuity: {r:?}"
        );
    }
    // Let the daemon's own uptime grow past 1.2 s, so that its fall at the restart is
    // visible.
    wait_until(
        "memDaemonUptime past 1.2 s",
        || daemon_uptime(port) >= 120,
        || env.daemon.log_text(),
    );
    let uptime_before = daemon_uptime(port);
    assert!(uptime_before >= 100, "memDaemonUptime {uptime_before}");

    // Restart the daemon alone: same state directory; the kernel's counters went on growing
    // and its order of types changed.
    let mut grown = counter_types(1);
    grown.reverse();
    write_fixture(&env.fixture, grown.clone());
    let master_before = sys_uptime(port);
    env.daemon.restart(port);
    let uptime_after = daemon_uptime(port);
    assert!(
        uptime_after < uptime_before,
        "memDaemonUptime must fall back at a restart (Cacti's oid_uptime): {uptime_before} → {uptime_after}"
    );
    assert!(
        sys_uptime(port) >= master_before,
        "snmpd's sysUpTime does not move"
    );

    let after = walk_table(port);
    assert_eq!(after.len(), before.len());
    for (idx, row) in &before {
        let name = &row[&2];
        assert_eq!(
            index_of(&after, name),
            *idx,
            "memTypeIndex of {name} changed"
        );
        let now = &after[idx];
        for c in &counters {
            let (b, a): (u64, u64) = (row[c].parse().unwrap(), now[c].parse().unwrap());
            assert!(a >= b, "{name} column {c} dropped: {b} → {a}");
        }
        let t = grown.iter().find(|t| &t.name == name).unwrap();
        assert_eq!(now[&13], t.allocs.unwrap().to_string());
        assert_eq!(now[&24], "0", "{name} was present at the (re)start");
    }

    // A type destroyed and re-created (allocs went backwards) and a type that appears:
    // both get the master's sysUpTime; the others stay as they were.
    let mut changed = grown.clone();
    let reset = changed.iter_mut().find(|t| t.name == "beta").unwrap();
    reset.allocs = Some(5);
    reset.frees = Some(2);
    let mut newcomer = full_type(Allocator::Slab, "newcomer", 7);
    newcomer.per_cpu.clear();
    changed.push(newcomer);
    write_fixture(&env.fixture, changed.clone());
    // The next walk reads the source anew (written above): past --max-age, nothing walking.
    wait_refresh_due(port, MAX_AGE, &env.daemon);
    let t0 = sys_uptime(port);
    let third = walk_table(port);
    let t1 = sys_uptime(port);
    assert_eq!(third.len(), before.len() + 1);
    let max_before = *before.keys().max().unwrap();
    let new_idx = index_of(&third, "newcomer");
    assert_eq!(new_idx, max_before + 1, "a new key gets the next index");
    let near_master = |d: u64, what: &str| {
        // The master's sysUpTime as the daemon tracks it (the last administrative Response's
        // res.sysUpTime plus the time since), at the refresh: between the two readings, give
        // or take the Response's time in transit and rounding.
        assert!(
            d > 0 && d + 25 >= t0 && d <= t1 + 5,
            "{what}: discontinuity {d} not within sysUpTime {t0}..{t1}"
        );
    };
    for (idx, row) in &third {
        let name = &row[&2];
        let d: u64 = row[&24].parse().unwrap();
        match name.as_str() {
            "beta" => {
                assert_eq!(*idx, index_of(&before, "beta"));
                assert_eq!(row[&13], "5");
                near_master(d, "beta (allocs went backwards)");
            }
            "newcomer" => near_master(d, "newcomer (appeared after start)"),
            _ => {
                assert_eq!(d, 0, "{name}: unchanged rows keep 0");
                assert_eq!(row, &after[idx], "{name} changed");
            }
        }
    }

    // The marks are sticky: a later refresh with the same figures keeps them.
    wait_refresh_due(port, MAX_AGE, &env.daemon);
    let refreshes = refresh_count(port);
    let fourth = walk_table(port);
    assert_eq!(
        refresh_count(port),
        refreshes + 1,
        "the walk past max-age refreshed once"
    );
    for idx in [index_of(&before, "beta"), new_idx] {
        assert_eq!(fourth[&idx][&24], third[&idx][&24]);
    }
}

/// SNMPv2-TC TimeStamp: an occurrence before the last re-initialization of the management
/// subsystem reads 0. After snmpd restarts (its sysUpTime starts again from 0), a
/// discontinuity time recorded against the old master's clock must become 0, not stay a
/// time in the new master's future.
#[test]
fn discontinuity_times_reset_when_the_master_restarts() {
    let start = counter_types(0);
    let mut env = setup(start.clone(), &["--max-age", "0.2"]);
    let port = env.snmpd.port;
    let first = walk_table(port);
    let beta = index_of(&first, "beta");
    // The master's clock well past 1 s, so that beta's discontinuity time below is not 0.
    wait_until(
        "snmpd's sysUpTime past 1.5 s",
        || sys_uptime(port) >= 150,
        || env.daemon.log_text(),
    );
    let mut changed = start.clone();
    changed
        .iter_mut()
        .find(|t| t.name == "beta")
        .unwrap()
        .allocs = Some(5);
    write_fixture(&env.fixture, changed);
    wait_refresh_due(port, MAX_AGE, &env.daemon);
    let d: u64 = walk_table(port)[&beta][&24].parse().unwrap();
    assert!(d >= 100, "beta's discontinuity {d}");

    env.snmpd.restart();
    env.daemon.wait_registered(port);
    wait_refresh_due(port, MAX_AGE, &env.daemon);
    let table = walk_table(port);
    let up = sys_uptime(port);
    for (idx, row) in &table {
        let d: u64 = row[&24].parse().unwrap();
        assert!(
            d == 0,
            "{}: memTypeDiscontinuityTime {d} after the master restarted (sysUpTime {up}); \
             it predates the master's re-initialization and must read 0",
            row[&2]
        );
        assert_eq!(row[&2], first[idx][&2]);
    }
    assert_eq!(
        table[&beta][&13], "5",
        "served from a view of before the restart"
    );
}

/// net-snmp numbers its transactions afresh when it restarts, so transactionIDs pinned by
/// the old master's requests come again within the walk window; they must not be served
/// from the old session's pinned views.
#[test]
fn requests_after_a_master_restart_are_not_served_from_old_pins() {
    let start = counter_types(0);
    let mut env = setup(start.clone(), &["--max-age", "0.2"]);
    let port = env.snmpd.port;
    let oid = format!("{TYPE_ENTRY}.13.2"); // beta's memTypeAllocs
    let old = start[1].allocs.unwrap().to_string();
    for _ in 0..40 {
        assert_eq!(get(port, &[&oid])[0].value, old);
    }
    let mut changed = start.clone();
    changed[1].allocs = Some(5);
    write_fixture(&env.fixture, changed);
    env.snmpd.restart();
    env.daemon.wait_registered(port);
    wait_refresh_due(port, MAX_AGE, &env.daemon);
    let stale = (0..40)
        .filter(|_| get(port, &[&oid])[0].value != "5")
        .count();
    assert_eq!(
        stale, 0,
        "{stale} of 40 Gets after the restart were served stale data"
    );
}
