//! LibreNMS: contrib/librenms/memstat-sensors.yaml against LibreNMS's own rules, and LibreNMS's
//! discovery walk and sensor polling re-created with net-snmp's clients against the daemon
//! behind a private snmpd.
//!
//! LibreNMS cannot run here, so its rules come from its source (read for this test; see
//! contrib/librenms/README.md for the versions):
//! - `resources/definitions/schema/discovery_schema.json` with `oid_types.json` (26.3 and later:
//!   no top-level `mib:`, `oid` as `MIB::name` or numeric); set LIBRENMS_SCHEMA_DIR to a
//!   checkout's schema directory to validate the fragment with a real JSON Schema validator;
//! - sensor discovery (`LibreNMS\Device\YamlDiscovery`, the sensors module): one walk of the
//!   table named by `oid`, rows keyed by index and then by object name, `value` and the
//!   `{{ MIB::name }}` templates looked up in that row;
//! - sensor polling: `snmpget -OUQntea` of each sensor's `num_oid`, at most 10 per request.

mod common;

use common::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

const MANIFEST: &str = env!("CARGO_MANIFEST_DIR");
const FRAGMENT: &str = "contrib/librenms/memstat-sensors.yaml";
/// The kernel memory overview: memKernelTable's rows that add up, chosen with skip_values.
const KERNEL_FRAGMENT: &str = "contrib/librenms/memstat-kernel-sensors.yaml";

/// Sensor keys that LibreNMS's discovery schema allows both before 26.3 and in 26.8.1.
const SENSOR_KEYS: &[&str] = &[
    "oid",
    "num_oid",
    "index",
    "descr",
    "divisor",
    "multiplier",
    "value",
    "group",
    "low_limit",
    "low_warn_limit",
    "warn_limit",
    "high_limit",
    "skip_value_lt",
    "skip_value_gt",
    "skip_values",
    "snmp_flags",
    "snmp_bulk",
    "rrd_type",
    "entPhysicalIndex",
    "entPhysicalIndex_measured",
    "user_func",
    "snmp_no_Ih_flag",
];
const REQUIRED_KEYS: &[&str] = &["descr", "num_oid", "oid"];

/// The fragment, as the YAML parser LibreNMS's checks use would read it (via python3-yaml).
fn fragment() -> serde_json::Value {
    fragment_at(FRAGMENT)
}

fn fragment_at(path: &str) -> serde_json::Value {
    need("python3", "python3-yaml");
    let json = run_ok(
        Command::new("python3")
            .args([
                "-c",
                "import json, sys, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))",
            ])
            .arg(Path::new(MANIFEST).join(path)),
    );
    serde_json::from_str(&json).unwrap()
}

/// The sensor entries: (class, entry).
fn sensors(doc: &serde_json::Value) -> Vec<(String, serde_json::Map<String, serde_json::Value>)> {
    let mut v = Vec::new();
    for (class, body) in doc["modules"]["sensors"].as_object().unwrap() {
        for e in body["data"].as_array().unwrap() {
            v.push((class.clone(), e.as_object().unwrap().clone()));
        }
    }
    v
}

fn text<'a>(e: &'a serde_json::Map<String, serde_json::Value>, key: &str) -> &'a str {
    e.get(key)
        .and_then(|v| v.as_str())
        .unwrap_or_else(|| panic!("{key} is not a string in {e:?}"))
}

/// Needs LibreNMS's schema files: `#[ignore]`d, and run by scripts/test when
/// LIBRENMS_SCHEMA_DIR is set; librenms_fragment_follows_the_rules checks the rules read from
/// LibreNMS's source without them.
#[test]
#[ignore = "needs LIBRENMS_SCHEMA_DIR (a LibreNMS checkout's resources/definitions/schema): \
            scripts/test runs it when set"]
fn librenms_fragment_validates_against_librenms_schema() {
    let dir = std::env::var_os("LIBRENMS_SCHEMA_DIR").unwrap_or_else(|| {
        panic!(
            "LIBRENMS_SCHEMA_DIR is not set: set it to a LibreNMS checkout's \
             resources/definitions/schema to validate {FRAGMENT}, {KERNEL_FRAGMENT} and \
             {ARC_FRAGMENT} with \
             jsonschema"
        )
    });
    need("python3", "python3-jsonschema python3-yaml");
    // jsonschema before 4.18 resolves the oid_types.json reference with a RefResolver, later
    // ones with a referencing.Registry.
    const SCRIPT: &str = r#"
import json, os, sys, yaml, jsonschema
d = sys.argv[1]
schema = json.load(open(os.path.join(d, "discovery_schema.json")))
doc = yaml.safe_load(open(sys.argv[2]))
others = {}
if os.path.exists(os.path.join(d, "oid_types.json")):
    others["oid_types.json"] = json.load(open(os.path.join(d, "oid_types.json")))
cls = jsonschema.validators.validator_for(schema)
try:
    from referencing import Registry, Resource
    reg = Registry().with_resources([(k, Resource.from_contents(v)) for k, v in others.items()])
    v = cls(schema, registry=reg)
except ImportError:
    base = "file://" + os.path.abspath(d) + "/"
    store = {base + k: v for k, v in others.items()}
    v = cls(schema, resolver=jsonschema.RefResolver(base, schema, store=store))
errors = sorted(v.iter_errors(doc), key=lambda e: list(e.absolute_path))
for e in errors:
    print("/".join(str(p) for p in e.absolute_path), ":", e.message)
sys.exit(1 if errors else 0)
"#;
    for fragment in [FRAGMENT, KERNEL_FRAGMENT, ARC_FRAGMENT] {
        let out = Command::new("python3")
            .args(["-c", SCRIPT])
            .arg(&dir)
            .arg(Path::new(MANIFEST).join(fragment))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{fragment} is not valid against {}/discovery_schema.json:\n{}{}",
            Path::new(&dir).display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A `MIB::name` as oid_types.json's mib_oid pattern allows (letters, digits, `_`, `-`).
fn is_mib_oid(s: &str) -> bool {
    let Some((mib, name)) = s.split_once("::") else {
        return false;
    };
    let word = |w: &str, min: usize| {
        w.len() >= min
            && w.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && w.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    };
    word(mib, 2) && word(name, 1)
}

#[test]
fn librenms_fragment_follows_the_rules() {
    let doc = fragment();
    let top: Vec<&String> = doc.as_object().unwrap().keys().collect();
    assert_eq!(
        top,
        ["modules"],
        "only `modules` at the top: LibreNMS 26.3.0 removed `mib:`"
    );
    let modules: Vec<&String> = doc["modules"].as_object().unwrap().keys().collect();
    assert_eq!(modules, ["sensors"]);

    let entries = sensors(&doc);
    assert!(entries.len() >= 7, "{entries:?}");
    let mut values = Vec::new();
    for (class, e) in &entries {
        assert_eq!(class, "count", "sensor class");
        for k in e.keys() {
            assert!(
                SENSOR_KEYS.contains(&k.as_str()),
                "key {k} is not allowed in a sensor"
            );
        }
        for k in REQUIRED_KEYS {
            assert!(e.contains_key(*k), "{k} missing in {e:?}");
        }

        // oid: the table, as MIB::name (26.3.1 rejects a bare name).
        let oid = text(e, "oid");
        assert!(is_mib_oid(oid), "oid {oid} is not MIB::name");
        assert_eq!(oid, "MEMSTAT-MIB::memTypeTable");
        assert_eq!(
            translate(&["-On"], oid),
            TYPE_ENTRY.strip_suffix(".1").unwrap()
        );

        // value: a column of that table, named as the table walk names it.
        let value = text(e, "value");
        assert!(is_mib_oid(value), "value {value} is not MIB::name");
        let column = value.strip_prefix("MEMSTAT-MIB::").unwrap();
        let numeric = translate(&["-On"], value);
        assert!(
            numeric.starts_with(&format!("{TYPE_ENTRY}.")),
            "{value} ({numeric}) is not a memTypeTable column"
        );

        // num_oid: exactly the OID of value, then the row's index; both schemas' patterns.
        let num_oid = text(e, "num_oid");
        assert_eq!(
            num_oid,
            format!("{numeric}.{{{{ $index }}}}"),
            "num_oid of {value}"
        );

        // The RRD type follows the MIB: MemGauge64 columns are levels, Counter64 ones rates.
        let td = translate(&["-Td"], value);
        assert!(td.contains("SYNTAX\tCounter64"), "{value}: {td}");
        let gauge = td.contains("TEXTUAL CONVENTION MemGauge64");
        let rrd = e
            .get("rrd_type")
            .and_then(|v| v.as_str())
            .unwrap_or("GAUGE");
        assert_eq!(
            rrd,
            if gauge { "GAUGE" } else { "COUNTER" },
            "rrd_type of {value}"
        );

        // Rows with the same name get their own title and their own sensor index.
        for key in ["descr", "index"] {
            assert!(
                text(e, key).contains("{{ $index }}"),
                "{key} of {value} must contain {{{{ $index }}}}: names repeat"
            );
        }
        for t in templates(text(e, "descr")) {
            if let Some(col) = t.strip_prefix("MEMSTAT-MIB::") {
                assert!(
                    translate(&["-On"], &t).starts_with(&format!("{TYPE_ENTRY}.")),
                    "descr names {col}, not a memTypeTable column"
                );
            } else {
                assert_eq!(t, "$index", "unknown template {t}");
            }
        }
        values.push(column.to_string());
    }
    for want in [
        "memTypeInUseBytes",
        "memTypeInUseCount",
        "memTypeAllocs",
        "memTypeFrees",
        "memTypeFailures",
    ] {
        assert!(values.iter().any(|v| v == want), "no sensor for {want}");
    }
}

/// `{{ x }}` templates in a string.
fn templates(s: &str) -> Vec<String> {
    s.split("{{ ")
        .skip(1)
        .map(|p| p.split(" }}").next().unwrap().to_string())
        .collect()
}

/// One table walk as LibreNMS's sensor discovery makes it (snmpwalk_cache_oid): each line
/// `name.index = value`, split at the first dot; rows keyed by index, then by name.
fn discovery_walk(port: u16, opts: &[&str]) -> BTreeMap<String, BTreeMap<String, String>> {
    discovery_walk_of(port, "MEMSTAT-MIB::memTypeTable", opts)
}

fn discovery_walk_of(
    port: u16,
    table: &str,
    opts: &[&str],
) -> BTreeMap<String, BTreeMap<String, String>> {
    need("snmpbulkwalk", "snmp");
    let out = run_ok(
        Command::new("snmpbulkwalk")
            .args(["-v2c", "-c", "public"])
            .args(opts)
            .args(["-M", mibs(), "-m", "MEMSTAT-MIB"])
            .arg(format!("127.0.0.1:{port}"))
            .arg(table)
            .env("MIBS", ""),
    );
    let mut rows: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut last: Option<(String, String)> = None;
    for line in out.lines() {
        // -Oa prints binary strings (memTypeSizeMask) as they are, line breaks included;
        // snmpwalk_cache_oid appends a line without " =" to the value before it.
        let Some((lhs, value)) = line.split_once(" = ") else {
            if let Some((index, name)) = &last {
                let v = rows.get_mut(index).unwrap().get_mut(name).unwrap();
                v.push('\n');
                v.push_str(line);
            }
            continue;
        };
        // MEMSTAT-MIB::memTypeName.3: the dot after the object name starts the index.
        let split = lhs.find("::").map_or(0, |p| p + 2);
        let dot = lhs[split..]
            .find('.')
            .unwrap_or_else(|| panic!("{opts:?}: no index in {line:?}"))
            + split;
        let (index, name) = (lhs[dot + 1..].to_string(), lhs[..dot].to_string());
        rows.entry(index.clone())
            .or_default()
            .insert(name.clone(), value.trim_matches('"').to_string());
        last = Some((index, name));
    }
    rows
}

/// A sensor as discovery would create it: (num_oid, descr, value at discovery).
type Found = (String, String, String);

/// LibreNMS's YAML sensor discovery on a walked table: a sensor for each row whose `value`
/// is numeric; num_oid, index and descr filled from the row.
fn discover(
    entry: &serde_json::Map<String, serde_json::Value>,
    rows: &BTreeMap<String, BTreeMap<String, String>>,
    mib_names: bool,
) -> Vec<Found> {
    let key = |name: &str| {
        if mib_names {
            name.to_string()
        } else {
            name.split("::").nth(1).unwrap().to_string()
        }
    };
    let fill = |s: &str, index: &str, row: &BTreeMap<String, String>| {
        let mut out = s.replace("{{ $index }}", index);
        for t in templates(s) {
            if t != "$index" {
                let v = row.get(&key(&t)).cloned().unwrap_or_default();
                out = out.replace(&format!("{{{{ {t} }}}}"), &v);
            }
        }
        out
    };
    let mut found = Vec::new();
    for (index, row) in rows {
        let Some(v) = row.get(&key(text(entry, "value"))) else {
            continue;
        };
        if v.parse::<u64>().is_err() {
            continue;
        }
        found.push((
            fill(text(entry, "num_oid"), index, row),
            fill(text(entry, "descr"), index, row),
            v.clone(),
        ));
    }
    found
}

#[test]
fn librenms_discovery_walk_and_sensor_poll_find_each_row() {
    let types = sample_types();
    let (_dir, snmpd, _daemon) = start_with_fixture(Transport::Unix, types.clone(), &[]);
    let port = snmpd.port;
    let doc = fragment();
    let entries = sensors(&doc);

    // Discovery walks the whole table once per `oid`. Before 26.3 LibreNMS's YamlDiscovery
    // walked a `MIB::` oid with -OteQUSa -Ih (object names keep their MIB); 26.x walks with
    // -OteQUsab -Pu -Ih (names without it). The values must be the same either way.
    let with_mib = discovery_walk(port, &["-OteQUSa", "-Ih"]);
    let without = discovery_walk(port, &["-OteQUsab", "-Pu", "-Ih"]);
    assert_eq!(with_mib.len(), types.len(), "{with_mib:?}");
    for (index, row) in &with_mib {
        let plain: BTreeMap<String, String> = row
            .iter()
            .map(|(k, v)| {
                (
                    k.strip_prefix("MEMSTAT-MIB::").unwrap().to_string(),
                    v.clone(),
                )
            })
            .collect();
        assert_eq!(&plain, &without[index], "row {index}");
    }

    let mut all = Vec::new();
    for (_, e) in &entries {
        let found = discover(e, &with_mib, true);
        let column = text(e, "value").strip_prefix("MEMSTAT-MIB::").unwrap();
        let want = types.iter().filter(|t| cell(t, column).is_some()).count();
        assert_eq!(found.len(), want, "{column}: {found:?}");
        // Repeated names (two `mbuf` rows) still get titles of their own.
        let mut descrs: Vec<&String> = found.iter().map(|f| &f.1).collect();
        descrs.sort();
        descrs.dedup();
        assert_eq!(
            descrs.len(),
            found.len(),
            "{column}: titles repeat: {found:?}"
        );
        for (num_oid, descr, _) in &found {
            let index: usize = num_oid.rsplit('.').next().unwrap().parse().unwrap();
            let t = &types[index - 1];
            assert!(
                descr.starts_with(&format!("{} (index {index}) ", t.name)),
                "{descr}"
            );
        }
        all.extend(found);
    }

    // Polling: snmpget -OUQntea of the sensors' num_oids, 10 per request (LibreNMS's default
    // "max OIDs per request"); every value is the row's own, whole past 2^32.
    need("snmpget", "snmp");
    assert!(all
        .iter()
        .any(|f| f.2.parse::<u64>().unwrap() > u32::MAX as u64));
    for chunk in all.chunks(10) {
        let oids: Vec<&str> = chunk.iter().map(|f| f.0.as_str()).collect();
        let out = run_ok(
            Command::new("snmpget")
                .args(["-v2c", "-c", "public", "-OUQntea"])
                .args(["-M", mibs(), "-m", "MEMSTAT-MIB"])
                .arg(format!("127.0.0.1:{port}"))
                .args(&oids)
                .env("MIBS", ""),
        );
        let got: BTreeMap<&str, &str> = out.lines().filter_map(|l| l.split_once(" = ")).collect();
        for (num_oid, descr, discovered) in chunk {
            let index: usize = num_oid.rsplit('.').next().unwrap().parse().unwrap();
            let column = num_oid.rsplit('.').nth(1).unwrap();
            let name = COLUMN_NAMES
                .iter()
                .find(|c| c.0 == column)
                .unwrap_or_else(|| panic!("column {column}"))
                .1;
            let want = cell(&types[index - 1], name).unwrap().to_string();
            assert_eq!(
                got.get(num_oid.as_str()),
                Some(&want.as_str()),
                "{descr}: {out}"
            );
            assert_eq!(discovered, &want, "{descr} at discovery");
        }
    }
}

/// memTypeTable columns the fragment uses: (sub-identifier, name).
const COLUMN_NAMES: &[(&str, &str)] = &[
    ("9", "memTypeInUseCount"),
    ("10", "memTypeInUseBytes"),
    ("11", "memTypeFreeCount"),
    ("13", "memTypeAllocs"),
    ("14", "memTypeFrees"),
    ("17", "memTypeFailures"),
    ("23", "memTypeSlabBytes"),
];

fn cell(t: &memstat_agentx::memstat::MemoryType, column: &str) -> Option<u64> {
    match column {
        "memTypeInUseCount" => t.in_use_count,
        "memTypeInUseBytes" => t.in_use_bytes,
        "memTypeFreeCount" => t.free_count,
        "memTypeAllocs" => t.allocs,
        "memTypeFrees" => t.frees,
        "memTypeFailures" => t.failures,
        "memTypeSlabBytes" => t.slab_bytes,
        _ => panic!("{column} is not used by the fragment"),
    }
}

// ------------------------------------------------------------------------------------------
// The kernel memory overview: memKernelTable's rows chosen by skip_values
// ------------------------------------------------------------------------------------------

const KERNEL_ENTRY: &str = ".1.3.6.1.4.1.32473.1.1.6.1";

/// The skip_values comparisons the emulation below knows, as LibreNMS's compare_var makes
/// them on numbers: `=` and `!=` compare loosely (`"0" == 0`). `==` would be strict, and
/// false for the string the walk gives against the YAML's number in LibreNMS before 24.x's
/// casting, so the fragment must not use it.
const SKIP_OPS: &[&str] = &["=", "!="];

#[test]
fn librenms_kernel_fragment_follows_the_rules() {
    let doc = fragment_at(KERNEL_FRAGMENT);
    let top: Vec<&String> = doc.as_object().unwrap().keys().collect();
    assert_eq!(top, ["modules"], "only `modules` at the top");
    let entries = sensors(&doc);
    assert_eq!(entries.len(), 2, "the overview and the parts: {entries:?}");
    for (class, e) in &entries {
        assert_eq!(class, "count", "sensor class");
        for k in e.keys() {
            assert!(SENSOR_KEYS.contains(&k.as_str()), "key {k} is not allowed");
        }
        for k in REQUIRED_KEYS {
            assert!(e.contains_key(*k), "{k} missing in {e:?}");
        }
        assert_eq!(text(e, "oid"), "MEMSTAT-MIB::memKernelTable");
        assert_eq!(
            translate(&["-On"], text(e, "oid")),
            KERNEL_ENTRY.strip_suffix(".1").unwrap()
        );
        let value = text(e, "value");
        assert_eq!(value, "MEMSTAT-MIB::memKernelBytes");
        let numeric = translate(&["-On"], value);
        assert_eq!(text(e, "num_oid"), format!("{numeric}.{{{{ $index }}}}"));
        // memKernelBytes is a MemGauge64: a level, the default GAUGE.
        assert!(translate(&["-Td"], value).contains("TEXTUAL CONVENTION MemGauge64"));
        assert!(e.get("rrd_type").is_none(), "a gauge needs no rrd_type");
        assert!(text(e, "index").contains("{{ $index }}"));
        // Numeric indexes (-Ob): memKernelIndex is an enumeration, printed by label without.
        let flags = text(e, "snmp_flags");
        assert!(
            flags.starts_with("-O") && flags.contains('b'),
            "snmp_flags {flags}"
        );
        for key in ["descr", "group"] {
            for t in templates(text(e, key)) {
                assert!(
                    translate(&["-On"], &t).starts_with(&format!("{KERNEL_ENTRY}.")),
                    "{key} names {t}, not a memKernelTable column"
                );
            }
        }

        // skip_values: objects of exactly oid, op and value (discovery_schema.json's
        // minProperties/maxProperties 3), each oid a column of the walked table, without a
        // dot (canSkipItem takes what follows a dot as another row's index).
        let skips = e["skip_values"].as_array().expect("skip_values is a list");
        assert!(!skips.is_empty());
        for s in skips {
            let s = s.as_object().unwrap();
            let mut keys: Vec<&str> = s.keys().map(String::as_str).collect();
            keys.sort();
            assert_eq!(keys, ["oid", "op", "value"], "{s:?}");
            let oid = s["oid"].as_str().unwrap();
            assert!(is_mib_oid(oid) && !oid.contains('.'), "skip oid {oid}");
            assert!(
                translate(&["-On"], oid).starts_with(&format!("{KERNEL_ENTRY}.")),
                "skip oid {oid} is not a memKernelTable column"
            );
            assert!(SKIP_OPS.contains(&s["op"].as_str().unwrap()), "{s:?}");
            assert!(s["value"].is_number(), "{s:?}");
        }
    }
}

/// LibreNMS's compare_var for the ops of SKIP_OPS: numbers compare as numbers.
fn compare_var(a: Option<&str>, b: &serde_json::Value, op: &str) -> bool {
    let b = b.as_f64().unwrap();
    let equal = a.and_then(|a| a.parse::<f64>().ok()) == Some(b);
    match op {
        "=" => equal,
        "!=" => !equal,
        _ => panic!("op {op} is not emulated"),
    }
}

/// A sensor as discovery would create it from the kernel fragment.
#[derive(Debug, Clone)]
struct KernelSensor {
    num_oid: String,
    descr: String,
    group: String,
    value: String,
}

/// LibreNMS's YAML discovery of one entry on a walked table, skip_values included
/// (YamlDiscovery::canSkipItem: each skip oid is looked up in the walked row, and the row is
/// skipped when any comparison holds); templates filled from the row.
fn discover_kernel(
    entry: &serde_json::Map<String, serde_json::Value>,
    rows: &BTreeMap<String, BTreeMap<String, String>>,
    mib_names: bool,
) -> Vec<KernelSensor> {
    let key = |name: &str| {
        if mib_names {
            name.to_string()
        } else {
            name.split("::").nth(1).unwrap().to_string()
        }
    };
    let fill = |s: &str, index: &str, row: &BTreeMap<String, String>| {
        let mut out = s.replace("{{ $index }}", index);
        for t in templates(s) {
            if t != "$index" {
                let v = row.get(&key(&t)).cloned().unwrap_or_default();
                out = out.replace(&format!("{{{{ {t} }}}}"), &v);
            }
        }
        out
    };
    let mut found = Vec::new();
    'rows: for (index, row) in rows {
        let Some(v) = row.get(&key(text(entry, "value"))) else {
            continue;
        };
        for s in entry["skip_values"].as_array().unwrap() {
            let cell = row.get(&key(s["oid"].as_str().unwrap()));
            if compare_var(
                cell.map(String::as_str),
                &s["value"],
                s["op"].as_str().unwrap(),
            ) {
                continue 'rows;
            }
        }
        found.push(KernelSensor {
            num_oid: fill(text(entry, "num_oid"), index, row),
            descr: fill(text(entry, "descr"), index, row),
            group: fill(text(entry, "group"), index, row),
            value: v.clone(),
        });
    }
    found
}

#[test]
fn librenms_kernel_discovery_keeps_the_rows_that_add_up_and_polls_them() {
    use memstat_agentx::memstat::source::SOURCES;
    use memstat_agentx::memstat::{fixture, Snapshot};
    // Linux's kinds and FreeBSD's, as one fixture: the parts of wired add up to it, as the
    // FreeBSD source computes wiredOther; slab is its two parts.
    let kinds: Vec<_> = SOURCES.iter().flat_map(|d| d.kinds.iter()).collect();
    let mut bytes: BTreeMap<u32, u64> = BTreeMap::new();
    for k in &kinds {
        if !matches!(k.name, "shadowCallStack" | "hardwareCorrupted") {
            bytes.insert(k.index, (1u64 << 33) + u64::from(k.index) * 8192);
        }
    }
    bytes.insert(1, bytes[&2] + bytes[&3]);
    bytes.insert(32, 1u64 << 36);
    bytes.insert(38, bytes[&32] - bytes[&34] - bytes[&37]);
    let mut snap = Snapshot::new(0, std::time::SystemTime::now(), String::new(), Vec::new());
    for k in &kinds {
        if let Some(v) = bytes.get(&k.index) {
            snap.figures.insert(k.figure.into(), *v);
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let fix = dir.path().join("fixture.json");
    std::fs::write(&fix, fixture::to_json(&snap)).unwrap();
    let snmpd = Snmpd::start(dir.path(), Transport::Unix);
    let src = format!("fixture:{}", fix.display());
    let state = dir.path().join("state").display().to_string();
    let _daemon = Daemon::start(&snmpd, &["--source", &src, "--state-dir", &state]);
    let port = snmpd.port;

    let table = "MEMSTAT-MIB::memKernelTable";
    let doc = fragment_at(KERNEL_FRAGMENT);
    let entries = sensors(&doc);
    // LibreNMS before 26.3 walks with the entry's snmp_flags and -Ih (LibreNMS walks a table
    // once, with the flags of the first entry naming it: both must say the same). Without
    // them, its -OteQUS default prints this enumerated index by label: that is why they
    // are there.
    let flags = text(&entries[0].1, "snmp_flags");
    for (_, e) in &entries {
        assert_eq!(text(e, "snmp_flags"), flags);
    }
    let by_label = discovery_walk_of(port, table, &["-OteQUS", "-Ih"]);
    assert!(by_label.contains_key("slab"), "{by_label:?}");
    let with_mib = discovery_walk_of(port, table, &[flags, "-Ih"]);
    let without = discovery_walk_of(port, table, &["-OteQUsab", "-Pu", "-Ih"]);
    assert_eq!(with_mib.len(), bytes.len(), "{with_mib:?}");
    for index in with_mib.keys() {
        assert!(index.parse::<u32>().is_ok(), "index {index} is not numeric");
    }
    let index_of =
        |s: &KernelSensor| -> u32 { s.num_oid.rsplit('.').next().unwrap().parse().unwrap() };
    let kind = |i: u32| kinds.iter().find(|k| k.index == i).unwrap();

    let mut all = Vec::new();
    for (n, (_, e)) in entries.iter().enumerate() {
        let found = discover_kernel(e, &with_mib, true);
        // The 26.x walk, without the MIB in the names, finds the same sensors.
        let again = discover_kernel(e, &without, false);
        assert_eq!(format!("{found:?}"), format!("{again:?}"));
        let mut got: Vec<u32> = found.iter().map(index_of).collect();
        got.sort();
        let want: Vec<u32> = bytes
            .keys()
            .copied()
            .filter(|i| kind(*i).stackable && ((kind(*i).parent == 0) == (n == 0)))
            .collect();
        assert_eq!(got, want, "entry {n}: {found:#?}");
        for s in &found {
            let k = kind(index_of(s));
            assert_eq!(s.descr, format!("Kernel {} bytes", k.name));
            assert_eq!(s.value, bytes[&k.index].to_string(), "{s:?} at discovery");
            if n == 1 {
                assert!(
                    s.group.contains(&format!("parts of kind {} ", k.parent)),
                    "{s:?}"
                );
            }
        }
        all.extend(found);
    }
    // The top level overlaps nothing: vmalloc, KReclaimable and the ARC are left out.
    for name in [
        "vmalloc",
        "kernelReclaimable",
        "zfsArc",
        "wiredUser",
        "malloc",
    ] {
        let i = kinds.iter().find(|k| k.name == name).unwrap().index;
        assert!(all.iter().all(|s| index_of(s) != i), "{name} has a sensor");
    }
    // Each group of parts adds up to its row: wired's, and slab's.
    let mut groups: BTreeMap<&str, u64> = BTreeMap::new();
    for s in all.iter().filter(|s| s.group.contains("parts of kind")) {
        *groups.entry(s.group.as_str()).or_default() += s.value.parse::<u64>().unwrap();
    }
    for parent in [1u32, 32] {
        let group = groups
            .iter()
            .find(|(g, _)| g.contains(&format!("parts of kind {parent} ")))
            .unwrap_or_else(|| panic!("no group of the parts of {parent}: {groups:?}"));
        assert_eq!(*group.1, bytes[&parent], "{}", group.0);
    }

    // Polling: snmpget -OUQntea of the num_oids, 10 per request, each the row's bytes.
    need("snmpget", "snmp");
    for chunk in all.chunks(10) {
        let oids: Vec<&str> = chunk.iter().map(|s| s.num_oid.as_str()).collect();
        let out = run_ok(
            Command::new("snmpget")
                .args(["-v2c", "-c", "public", "-OUQntea"])
                .args(["-M", mibs(), "-m", "MEMSTAT-MIB"])
                .arg(format!("127.0.0.1:{port}"))
                .args(&oids)
                .env("MIBS", ""),
        );
        let got: BTreeMap<&str, &str> = out.lines().filter_map(|l| l.split_once(" = ")).collect();
        for s in chunk {
            let want = bytes[&index_of(s)].to_string();
            assert_eq!(
                got.get(s.num_oid.as_str()),
                Some(&want.as_str()),
                "{s:?}: {out}"
            );
        }
    }
}

// ------------------------------------------------------------------------------------------
// The ZFS ARC: memstatArc's scalars as sensors, grouped by the objects' roles
// ------------------------------------------------------------------------------------------

const ARC_FRAGMENT: &str = "contrib/librenms/memstat-arc-sensors.yaml";
const ARC: &str = ".1.3.6.1.4.1.32473.1.1.7";

/// memstatArc's objects, from their definition.
fn arc_objects() -> Vec<&'static memstat_agentx::memstat::source::FigureObject> {
    memstat_agentx::memstat::source::SOURCES
        .iter()
        .flat_map(|d| d.groups.iter())
        .flat_map(|g| g.objects.iter())
        .collect()
}

#[test]
fn librenms_arc_fragment_follows_the_rules_and_groups_the_objects_by_role() {
    use memstat_agentx::memstat::source::Role;
    let doc = fragment_at(ARC_FRAGMENT);
    let top: Vec<&String> = doc.as_object().unwrap().keys().collect();
    assert_eq!(top, ["modules"], "only `modules` at the top");
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (class, e) in sensors(&doc) {
        assert_eq!(class, "count", "sensor class");
        for k in e.keys() {
            assert!(SENSOR_KEYS.contains(&k.as_str()), "key {k} is not allowed");
        }
        for k in REQUIRED_KEYS {
            assert!(e.contains_key(*k), "{k} missing in {e:?}");
        }
        // A scalar: walked by its own name, its value that object, its num_oid the object's
        // OID and the instance (0) the walk finds.
        let oid = text(&e, "oid");
        assert!(is_mib_oid(oid), "oid {oid} is not MIB::name");
        assert_eq!(text(&e, "value"), oid);
        let numeric = translate(&["-On"], oid);
        assert!(numeric.starts_with(&format!("{ARC}.")), "{oid}: {numeric}");
        assert_eq!(text(&e, "num_oid"), format!("{numeric}.{{{{ $index }}}}"));
        assert!(text(&e, "index").contains("{{ $index }}"));
        assert!(templates(text(&e, "descr")).is_empty());
        // The RRD type follows the MIB: MemGauge64 levels, Counter64 rates.
        let gauge = translate(&["-Td"], oid).contains("TEXTUAL CONVENTION MemGauge64");
        let rrd = e.get("rrd_type").and_then(|v| v.as_str());
        assert_eq!(rrd, if gauge { None } else { Some("COUNTER") }, "{oid}");
        let name = oid.strip_prefix("MEMSTAT-MIB::").unwrap().to_string();
        groups
            .entry(text(&e, "group").to_string())
            .or_default()
            .push(name);
    }
    // Three groups: the size with its target, limits and what can be given back; the parts
    // that add up to it, and only those; the hits and misses.
    let of = |roles: &[Role], also: &[&str]| -> Vec<String> {
        arc_objects()
            .iter()
            .filter(|o| roles.contains(&o.role) || also.contains(&o.name))
            .map(|o| o.name.to_string())
            .collect()
    };
    let mut want = vec![
        of(&[Role::Total, Role::Limit], &["memArcShrinkable"]),
        of(&[Role::Part], &[]),
        of(&[Role::Hits, Role::Misses], &[]),
    ];
    let mut got: Vec<Vec<String>> = groups.into_values().collect();
    got.sort();
    want.sort();
    assert_eq!(got, want);
}

#[test]
fn librenms_arc_discovery_finds_instance_0_and_polls_each_object() {
    use memstat_agentx::memstat::{fixture, Snapshot};
    let mut snap = Snapshot::new(0, std::time::SystemTime::now(), String::new(), Vec::new());
    for o in arc_objects() {
        snap.figures
            .insert(o.figure.into(), (3u64 << 34) + u64::from(o.sub) * 65537);
    }
    let dir = tempfile::tempdir().unwrap();
    let fix = dir.path().join("fixture.json");
    std::fs::write(&fix, fixture::to_json(&snap)).unwrap();
    let snmpd = Snmpd::start(dir.path(), Transport::Unix);
    let src = format!("fixture:{}", fix.display());
    let state = dir.path().join("state").display().to_string();
    let _daemon = Daemon::start(&snmpd, &["--source", &src, "--state-dir", &state]);
    let port = snmpd.port;

    let doc = fragment_at(ARC_FRAGMENT);
    let mut found = Vec::new();
    for (_, e) in sensors(&doc) {
        let oid = text(&e, "oid");
        let o = arc_objects()
            .into_iter()
            .find(|o| format!("MEMSTAT-MIB::{}", o.name) == oid)
            .unwrap();
        let want = snap.figures[o.figure].to_string();
        // Before 26.3 (-OteQUS, names with their MIB) and in 26.x (-OteQUsab -Pu).
        let old = discover(&e, &discovery_walk_of(port, oid, &["-OteQUS", "-Ih"]), true);
        let new = discover(
            &e,
            &discovery_walk_of(port, oid, &["-OteQUsab", "-Pu", "-Ih"]),
            false,
        );
        assert_eq!(old, new);
        assert_eq!(old.len(), 1, "{oid}: {old:?}");
        let (num_oid, _, value) = &old[0];
        assert_eq!(num_oid, &format!("{ARC}.{}.0", o.sub));
        assert_eq!(value, &want, "{oid} at discovery");
        found.push((num_oid.clone(), want));
    }
    // Polling: snmpget -OUQntea of the num_oids, 10 per request.
    for chunk in found.chunks(10) {
        let oids: Vec<&str> = chunk.iter().map(|(o, _)| o.as_str()).collect();
        let out = run_ok(
            Command::new("snmpget")
                .args(["-v2c", "-c", "public", "-OUQntea"])
                .args(["-M", mibs(), "-m", "MEMSTAT-MIB"])
                .arg(format!("127.0.0.1:{port}"))
                .args(&oids)
                .env("MIBS", ""),
        );
        let got: BTreeMap<&str, &str> = out.lines().filter_map(|l| l.split_once(" = ")).collect();
        for (oid, want) in chunk {
            assert_eq!(got.get(oid.as_str()), Some(&want.as_str()), "{out}");
        }
    }
}
