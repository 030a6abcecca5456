//! MEMSTAT-MIB validation.
//!
//! - `smilint -l 6` must print nothing at all about mibs/MEMSTAT-MIB.txt.
//! - net-snmp's `snmptranslate` must load the module without a warning and place it where
//!   `memstat_agentx::mib::MEMSTAT_MIB_ROOT` says.
//! - Drift: every OBJECT-TYPE of the MIB file and every entry of `mib::object_defs()` must
//!   agree on name, numeric OID, SMI base type and access, both as this file's own parser
//!   reads the MIB text and as net-snmp reads it.
//! - Notifications: every NOTIFICATION-TYPE of the MIB file and every definition of
//!   `agent::watch::DEFINITIONS` agree on name, OID and OBJECTS (as net-snmp reads them), the
//!   NOTIFICATION-GROUP lists them all, and the varbinds the daemon sends name those objects
//!   in that order, after snmpTrapOID.0.
//!
//! The IETF base modules (SNMPv2-SMI, SNMPv2-TC, SNMPv2-CONF, SNMP-FRAMEWORK-MIB) come from
//! `scripts/fetch-base-mibs`, which unpacks Debian's erlang-snmp package into
//! `target/base-mibs` (under the repository, whatever CARGO_TARGET_DIR is) and prints the
//! directory. Setting `MEMSTAT_BASE_MIBS` to a directory that already holds those modules
//! skips the script. The tools (smilint from smitools, snmptranslate from net-snmp's snmp
//! package) are required: a missing tool fails the test with a message saying what to install.

use agentx_proto::oid::SNMP_TRAP_OID_0;
use agentx_proto::value::Value;
use memstat_agentx::agent::watch::DEFINITIONS;
use memstat_agentx::mib::{
    notification_varbinds, object_defs, Access, Notification, NotificationType, NotifiedRow,
    ObjectDef, Syntax, MEMSTAT_MIB_ROOT,
};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::fmt;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

const MODULE: &str = "MEMSTAT-MIB";
const MIB_FILE: &str = "mibs/MEMSTAT-MIB.txt";
/// Base modules the MIB imports from; the base directory must provide each as `NAME.mib`.
const BASE_MODULES: &[&str] = &[
    "SNMPv2-SMI",
    "SNMPv2-TC",
    "SNMPv2-CONF",
    "SNMP-FRAMEWORK-MIB",
];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn mib_dir() -> PathBuf {
    repo().join("mibs")
}

fn oid_str(oid: &[u32]) -> String {
    oid.iter()
        .map(|n| n.to_string())
        .collect::<Vec<_>>()
        .join(".")
}

fn check_base_dir(dir: &Path, origin: &str) {
    for m in BASE_MODULES {
        let f = dir.join(format!("{m}.mib"));
        assert!(
            f.is_file(),
            "{origin}: {} does not exist; the base MIB directory must hold {m}",
            f.display()
        );
    }
}

/// The directory holding the IETF base modules as text (fetched once per test process).
fn base_mibs() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        if let Some(d) = std::env::var_os("MEMSTAT_BASE_MIBS").filter(|d| !d.is_empty()) {
            let d = PathBuf::from(d);
            check_base_dir(&d, "MEMSTAT_BASE_MIBS");
            return d;
        }
        let script = repo().join("scripts/fetch-base-mibs");
        let out = Command::new("bash")
            .arg(&script)
            .current_dir(repo())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
        assert!(
            out.status.success(),
            "{} failed ({}); it needs apt-get and dpkg and access to Debian's package \
             archive (or set MEMSTAT_BASE_MIBS to a directory with {:?}):\n{}",
            script.display(),
            out.status,
            BASE_MODULES,
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let line = stdout.trim();
        assert!(
            !line.is_empty() && !line.contains('\n'),
            "fetch-base-mibs must print exactly one directory, printed {stdout:?}"
        );
        let d = PathBuf::from(line);
        check_base_dir(&d, "fetch-base-mibs");
        d
    })
}

/// Runs a required tool; a missing tool is a failure that says what to install.
fn run_tool(tool: &str, args: &[OsString], env: &[(&str, OsString)]) -> Output {
    let mut cmd = Command::new(tool);
    cmd.args(args).current_dir(repo());
    // Only the search paths given here count, not the caller's.
    for var in ["SMIPATH", "MIBS", "MIBDIRS"] {
        cmd.env_remove(var);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    match cmd.output() {
        Ok(out) => out,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            let pkg = match tool {
                "smilint" => "smitools (libsmi)",
                "snmptranslate" => "net-snmp's command-line tools (Debian: snmp)",
                _ => "it",
            };
            panic!("`{tool}` was not found on PATH; install {pkg} to run the MIB tests")
        }
        Err(e) => panic!("cannot run `{tool}`: {e}"),
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `snmptranslate -M +<base>:<dir> -m MEMSTAT-MIB <args>`; returns (success, stdout, stderr).
fn snmptranslate(dir: &Path, args: &[&str]) -> (bool, String, String) {
    let mut a: Vec<OsString> = vec!["-M".into()];
    let mut path = OsString::from("+");
    path.push(base_mibs());
    path.push(":");
    path.push(dir);
    a.push(path);
    a.push("-m".into());
    a.push(MODULE.into());
    a.extend(args.iter().map(OsString::from));
    let out = run_tool("snmptranslate", &a, &[]);
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

/// `SMIPATH=<base>:<dir> smilint -l 6 <file>`; returns (stdout, stderr).
fn smilint(dir: &Path, file: &Path) -> (String, String) {
    let mut smipath = OsString::from(base_mibs());
    smipath.push(":");
    smipath.push(dir);
    // `-c /dev/null`: no user or system configuration may change the level or hide errors.
    let args: Vec<OsString> = vec![
        "-c".into(),
        "/dev/null".into(),
        "-l".into(),
        "6".into(),
        file.into(),
    ];
    let out = run_tool("smilint", &args, &[("SMIPATH", smipath)]);
    assert!(out.status.success(), "smilint failed: {}", out.status);
    (text(&out.stdout), text(&out.stderr))
}

// ---------------------------------------------------------------------------------------
// 1. smilint
// ---------------------------------------------------------------------------------------

#[test]
fn smilint_level_6_prints_nothing() {
    let (stdout, stderr) = smilint(&mib_dir(), &repo().join(MIB_FILE));
    assert!(
        stdout.is_empty() && stderr.is_empty(),
        "smilint -l 6 {MIB_FILE} must print nothing.\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}"
    );
}

/// The silence above means something only if smilint does read the module and its imports:
/// a broken copy must draw complaints.
#[test]
fn smilint_reports_a_broken_copy() {
    let tmp = tempfile::tempdir().unwrap();
    let good = std::fs::read_to_string(repo().join(MIB_FILE)).unwrap();
    let bad = good.replacen(
        "INDEX       { memTypeIndex, memCpuIndex }",
        "INDEX       { memTypeIndex, memCpuIndexTypo }",
        1,
    );
    assert_ne!(good, bad, "the INDEX clause of memCpuEntry was not found");
    let file = tmp.path().join("MEMSTAT-MIB.txt");
    std::fs::write(&file, bad).unwrap();
    let (stdout, stderr) = smilint(tmp.path(), &file);
    let all = format!("{stdout}{stderr}");
    assert!(
        all.contains("memCpuIndexTypo"),
        "smilint did not report the undefined index of the broken copy; it printed:\n{all}"
    );
    assert!(
        !all.contains("failed to locate"),
        "smilint did not find the base modules in {}:\n{all}",
        base_mibs().display()
    );
}

// ---------------------------------------------------------------------------------------
// 2. net-snmp
// ---------------------------------------------------------------------------------------

#[test]
fn snmptranslate_loads_the_module_and_shows_the_tree() {
    let (ok, tree, stderr) = snmptranslate(&mib_dir(), &["-Tp"]);
    assert!(ok && stderr.is_empty(), "snmptranslate -Tp: {stderr}");
    for node in [
        "memstatDocEnterprise(32473)",
        "memstatMIB(1)",
        "memstatObjects(1)",
        "memstatDaemon(1)",
        "memDaemonUptime(1)",
        "memSourceLastError(9)",
        "memTypeTable(2)",
        "memTypeEntry(1)",
        "memTypeSizeMask(22)",
        "memTypeDiscontinuityTime(24)",
        "memCpuTable(3)",
        "memCpuCacheFree(4)",
        "memCpuBytesAllocated(5)",
        "memCpuBytesFreed(6)",
        "memCpuSizeMask(7)",
        "memAllocatorTable(4)",
        "memAllocatorFailures(5)",
        "memstatConformance(2)",
        "memstatCompliance(1)",
        "memstatCompliance2(2)",
        "memAllocatorGroup(4)",
        "memCpuBytesGroup(5)",
    ] {
        assert!(
            tree.contains(node),
            "snmptranslate -Tp lacks {node}:\n{tree}"
        );
    }
    // Index clauses and resolved textual conventions, as net-snmp understood them.
    for line in [
        "Index: memTypeIndex, memCpuIndex",
        "Textual Convention: MemGauge64",
        "Values: malloc(1), uma(2), slab(3)",
    ] {
        assert!(
            tree.contains(line),
            "snmptranslate -Tp lacks {line:?}:\n{tree}"
        );
    }
}

fn translate_numeric(name: &str) -> String {
    let (ok, out, stderr) = snmptranslate(&mib_dir(), &["-On", &format!("{MODULE}::{name}")]);
    assert!(
        ok && stderr.is_empty(),
        "snmptranslate -On {name}: {stderr}"
    );
    out.trim().to_string()
}

#[test]
fn snmptranslate_resolves_numeric_oids() {
    // The MIB file and MEMSTAT_MIB_ROOT must name the same root; everything else is placed
    // relative to it, so that a packager who moves the root (one line in each) keeps these.
    let root = format!(".{}", oid_str(MEMSTAT_MIB_ROOT));
    assert_eq!(translate_numeric("memstatMIB"), root);
    assert_eq!(translate_numeric("memstatObjects"), format!("{root}.1"));
    assert_eq!(
        translate_numeric("memDaemonUptime"),
        format!("{root}.1.1.1")
    );
    assert_eq!(translate_numeric("memTypeTable"), format!("{root}.1.2"));
    assert_eq!(
        translate_numeric("memTypeDiscontinuityTime"),
        format!("{root}.1.2.1.24")
    );
    assert_eq!(translate_numeric("memCpuEntry"), format!("{root}.1.3.1"));
    assert_eq!(
        translate_numeric("memAllocatorTable"),
        format!("{root}.1.4")
    );
    assert_eq!(
        translate_numeric("memstatCompliance"),
        format!("{root}.2.1.1")
    );
    assert_eq!(
        translate_numeric("memAllocatorGroup"),
        format!("{root}.2.2.4")
    );
}

#[test]
fn root_is_an_enterprise_subtree_and_never_the_playpen() {
    const ENTERPRISES: &[u32] = &[1, 3, 6, 1, 4, 1];
    const NET_SNMP_PLAYPEN: &[u32] = &[1, 3, 6, 1, 4, 1, 8072, 9999];
    let root = MEMSTAT_MIB_ROOT;
    assert!(
        root.starts_with(ENTERPRISES) && root.len() > ENTERPRISES.len() + 1,
        "MEMSTAT_MIB_ROOT {} is not below an enterprise number",
        oid_str(root)
    );
    assert!(
        !root.starts_with(NET_SNMP_PLAYPEN),
        "MEMSTAT_MIB_ROOT must not be under netSnmpPlaypen"
    );
    // As shipped: the documentation enterprise of RFC 5612, memstatMIB = 32473.1, i.e.
    // memTypeTable = .1.3.6.1.4.1.32473.1.1.2. A packager's own enterprise replaces it.
    if root[ENTERPRISES.len()] == 32473 {
        assert_eq!(root, &[1, 3, 6, 1, 4, 1, 32473, 1]);
        assert_eq!(
            translate_numeric("memTypeTable"),
            ".1.3.6.1.4.1.32473.1.1.2"
        );
    }
}

// ---------------------------------------------------------------------------------------
// 3. Drift between the MIB file and `memstat_agentx::mib`
// ---------------------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq, Eq)]
struct Def {
    oid: Vec<u32>,
    syntax: Syntax,
    access: Access,
}

impl fmt::Display for Def {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {:?} {:?}",
            oid_str(&self.oid),
            self.syntax,
            self.access
        )
    }
}

type Defs = BTreeMap<String, Def>;

fn code_view(defs: &[ObjectDef]) -> Defs {
    let mut m = Defs::new();
    for d in defs {
        let prev = m.insert(
            d.name.to_string(),
            Def {
                oid: d.oid.clone(),
                syntax: d.syntax,
                access: d.access,
            },
        );
        assert!(prev.is_none(), "object_defs() lists {} twice", d.name);
    }
    m
}

/// Maps a SYNTAX as written (base type, standard TC, or local TC already looked up) to the
/// base type. `words` are the first words of the SYNTAX clause.
fn base_syntax(
    words: &[&str],
    local_tcs: &BTreeMap<String, String>,
    sequences: &BTreeSet<String>,
) -> Option<Syntax> {
    let first = *words.first()?;
    let second = words.get(1).copied().unwrap_or("");
    Some(match first {
        "SEQUENCE" if second == "OF" => Syntax::Table,
        "OCTET" if second.starts_with("STRING") => Syntax::OctetString,
        "INTEGER" | "Integer32" => Syntax::Integer,
        "Unsigned32" => Syntax::Unsigned32,
        "Gauge32" => Syntax::Gauge32,
        "Counter64" => Syntax::Counter64,
        "TimeTicks" => Syntax::TimeTicks,
        // Standard textual conventions (RFC 2579, RFC 3411).
        "DisplayString" | "SnmpAdminString" | "DateAndTime" => Syntax::OctetString,
        "TimeStamp" | "TimeInterval" => Syntax::TimeTicks,
        "TruthValue" => Syntax::Integer,
        other if sequences.contains(other) => Syntax::Entry,
        other => {
            let under = local_tcs.get(other)?;
            let w: Vec<&str> = under.split_whitespace().collect();
            // A TC is never defined in terms of another TC (RFC 2579, section 3.5).
            return base_syntax(&w, &BTreeMap::new(), &BTreeSet::new());
        }
    })
}

fn parse_access(s: &str) -> Option<Access> {
    match s {
        "not-accessible" => Some(Access::NotAccessible),
        "read-only" => Some(Access::ReadOnly),
        "accessible-for-notify" => Some(Access::AccessibleForNotify),
        _ => None,
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Word(String),
    Str,
    Punct(&'static str),
}

/// Splits SMI text into words, strings (contents dropped) and punctuation, without comments.
fn tokenize(src: &str) -> Vec<Tok> {
    let b = src.as_bytes();
    let mut toks = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if b[i..].starts_with(b"--") {
            // A comment ends at the end of its line or at the next "--".
            i += 2;
            while i < b.len() {
                if b[i] == b'\n' {
                    i += 1;
                    break;
                }
                if b[i..].starts_with(b"--") {
                    i += 2;
                    break;
                }
                i += 1;
            }
        } else if c == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += 1;
            }
            i += 1;
            toks.push(Tok::Str);
        } else if b[i..].starts_with(b"::=") {
            toks.push(Tok::Punct("::="));
            i += 3;
        } else if b[i..].starts_with(b"..") {
            toks.push(Tok::Punct(".."));
            i += 2;
        } else if c.is_ascii_alphanumeric() {
            let start = i;
            while i < b.len()
                && (b[i].is_ascii_alphanumeric() || (b[i] == b'-' && b.get(i + 1) != Some(&b'-')))
            {
                i += 1;
            }
            toks.push(Tok::Word(src[start..i].to_string()));
        } else {
            let p = match c {
                b'{' => "{",
                b'}' => "}",
                b'(' => "(",
                b')' => ")",
                b',' => ",",
                b';' => ";",
                b'|' => "|",
                b'\'' => "'",
                _ => "?",
            };
            toks.push(Tok::Punct(p));
            i += 1;
        }
    }
    toks
}

fn word(t: Option<&Tok>) -> Option<&str> {
    match t {
        Some(Tok::Word(w)) => Some(w),
        _ => None,
    }
}

const VALUE_MACROS: &[&str] = &[
    "OBJECT-TYPE",
    "MODULE-IDENTITY",
    "OBJECT-IDENTITY",
    "OBJECT-GROUP",
    "NOTIFICATION-TYPE",
    "NOTIFICATION-GROUP",
    "MODULE-COMPLIANCE",
    "AGENT-CAPABILITIES",
];

/// The MIB file as this test's own parser reads it: every OBJECT-TYPE with its OID (resolved
/// through the module's own OID assignments down to `enterprises`), base type and access.
fn text_view(src: &str) -> Result<Defs, Vec<String>> {
    let toks = tokenize(src);
    let mut errors = Vec::new();
    // Definitions start after the IMPORTS statement's ';'.
    let body_start = toks
        .iter()
        .position(|t| *t == Tok::Punct(";"))
        .map_or(0, |p| p + 1);
    // (name, kind, first token index)
    let mut starts: Vec<(String, String, usize)> = Vec::new();
    for i in body_start..toks.len() {
        let Some(name) = word(toks.get(i)) else {
            continue;
        };
        let next = word(toks.get(i + 1));
        let lower = name.starts_with(|c: char| c.is_ascii_lowercase());
        if lower {
            if let Some(m) = next.filter(|m| VALUE_MACROS.contains(m)) {
                starts.push((name.to_string(), m.to_string(), i));
            } else if next == Some("OBJECT")
                && word(toks.get(i + 2)) == Some("IDENTIFIER")
                && toks.get(i + 3) == Some(&Tok::Punct("::="))
            {
                starts.push((name.to_string(), "OBJECT IDENTIFIER".into(), i));
            }
        } else if toks.get(i + 1) == Some(&Tok::Punct("::="))
            && !(name == "IDENTIFIER" && word(toks.get(i - 1)) == Some("OBJECT"))
        {
            let kind = match (word(toks.get(i + 2)), toks.get(i + 3)) {
                (Some("TEXTUAL-CONVENTION"), _) => "TC",
                (Some("SEQUENCE"), Some(Tok::Punct("{"))) => "SEQUENCE",
                _ => "TYPE",
            };
            starts.push((name.to_string(), kind.into(), i));
        }
    }
    let mut parents: BTreeMap<String, (String, u32)> = BTreeMap::new();
    let mut local_tcs: BTreeMap<String, String> = BTreeMap::new();
    let mut sequences: BTreeSet<String> = BTreeSet::new();
    // name -> (SYNTAX words, MAX-ACCESS)
    let mut object_types: BTreeMap<String, (Vec<String>, String)> = BTreeMap::new();
    for (n, (name, kind, start)) in starts.iter().enumerate() {
        let end = starts.get(n + 1).map_or(toks.len(), |s| s.2);
        let body = &toks[*start..end];
        // The words of a clause up to the next clause keyword.
        let clause = |kw: &str, stop: &[&str]| -> Option<Vec<String>> {
            let p = body.iter().position(|t| word(Some(t)) == Some(kw))?;
            Some(
                body[p + 1..]
                    .iter()
                    .take_while(|t| !matches!(word(Some(t)), Some(w) if stop.contains(&w)))
                    .filter_map(|t| word(Some(t)).map(str::to_string))
                    .collect(),
            )
        };
        match kind.as_str() {
            "TC" => match clause("SYNTAX", &[]) {
                Some(w) if !w.is_empty() => {
                    local_tcs.insert(name.clone(), w.join(" "));
                }
                _ => errors.push(format!("TEXTUAL-CONVENTION {name} has no SYNTAX")),
            },
            "SEQUENCE" => {
                sequences.insert(name.clone());
            }
            "TYPE" => {}
            _ => {
                // A value assignment: `::= { parent n }`.
                let p = body.iter().rposition(|t| *t == Tok::Punct("::="));
                let val = p.map(|p| &body[p + 1..]);
                match val {
                    Some(
                        [Tok::Punct("{"), Tok::Word(parent), Tok::Word(num), Tok::Punct("}"), ..],
                    ) if num.parse::<u32>().is_ok() => {
                        parents.insert(name.clone(), (parent.clone(), num.parse().unwrap()));
                    }
                    _ => errors.push(format!("{name}: cannot read its `::= {{ parent n }}`")),
                }
                if kind == "OBJECT-TYPE" {
                    let syntax = clause("SYNTAX", &["UNITS", "MAX-ACCESS"]).unwrap_or_default();
                    let access = clause("MAX-ACCESS", &[])
                        .and_then(|w| w.first().cloned())
                        .unwrap_or_default();
                    if object_types
                        .insert(name.clone(), (syntax, access))
                        .is_some()
                    {
                        errors.push(format!("{name} is defined twice"));
                    }
                }
            }
        }
    }
    let known: BTreeMap<&str, Vec<u32>> = [
        ("iso", vec![1]),
        ("internet", vec![1, 3, 6, 1]),
        ("mib-2", vec![1, 3, 6, 1, 2, 1]),
        ("experimental", vec![1, 3, 6, 1, 3]),
        ("private", vec![1, 3, 6, 1, 4]),
        ("enterprises", vec![1, 3, 6, 1, 4, 1]),
    ]
    .into_iter()
    .collect();
    let resolve = |name: &str| -> Option<Vec<u32>> {
        let mut arcs = Vec::new();
        let mut cur = name.to_string();
        for _ in 0..64 {
            if let Some(base) = known.get(cur.as_str()) {
                let mut oid = base.clone();
                oid.extend(arcs.iter().rev());
                return Some(oid);
            }
            let (parent, n) = parents.get(&cur)?;
            arcs.push(*n);
            cur = parent.clone();
        }
        None
    };
    let mut defs = Defs::new();
    for (name, (syntax_words, access_word)) in &object_types {
        let Some(oid) = resolve(name) else {
            errors.push(format!("{name}: its OID does not resolve to a known node"));
            continue;
        };
        let w: Vec<&str> = syntax_words.iter().map(String::as_str).collect();
        let Some(syntax) = base_syntax(&w, &local_tcs, &sequences) else {
            errors.push(format!(
                "{name}: unknown SYNTAX {:?}",
                syntax_words.join(" ")
            ));
            continue;
        };
        let Some(access) = parse_access(access_word) else {
            errors.push(format!("{name}: unexpected MAX-ACCESS {access_word:?}"));
            continue;
        };
        defs.insert(
            name.clone(),
            Def {
                oid,
                syntax,
                access,
            },
        );
    }
    if errors.is_empty() {
        Ok(defs)
    } else {
        Err(errors)
    }
}

/// The MIB as net-snmp reads it: `snmptranslate -Td -On MEMSTAT-MIB::<name>` for each name.
/// Tables and entries have no SYNTAX line there: an OBJECT-TYPE with an INDEX (or AUGMENTS)
/// clause is an entry, one without SYNTAX and INDEX a table. Returns the objects net-snmp
/// knows as OBJECT-TYPEs and the problems it had.
fn net_snmp_view(dir: &Path, names: &BTreeSet<String>, src: &str) -> (Defs, Vec<String>) {
    let toks = tokenize(src);
    let mut local_tcs = BTreeMap::new();
    for (i, t) in toks.iter().enumerate() {
        if let (Tok::Word(name), Some(Tok::Punct("::=")), Some("TEXTUAL-CONVENTION")) =
            (t, toks.get(i + 1), word(toks.get(i + 2)))
        {
            let syn = toks[i..]
                .iter()
                .position(|t| word(Some(t)) == Some("SYNTAX"))
                .and_then(|p| word(toks.get(i + p + 1)));
            if let Some(s) = syn {
                local_tcs.insert(name.clone(), s.to_string());
            }
        }
    }
    let mut defs = Defs::new();
    let mut errors = Vec::new();
    let mut warnings = BTreeSet::new();
    for name in names {
        let (ok, out, stderr) = snmptranslate(dir, &["-Td", "-On", &format!("{MODULE}::{name}")]);
        if !ok {
            errors.push(format!("net-snmp does not know {name}: {}", stderr.trim()));
            continue;
        }
        if !stderr.is_empty() {
            warnings.insert(format!("net-snmp warns: {}", stderr.trim()));
        }
        let mut lines = out.lines();
        let oid: Option<Vec<u32>> = lines.next().and_then(|l| {
            l.trim()
                .trim_start_matches('.')
                .split('.')
                .map(|a| a.parse().ok())
                .collect()
        });
        let Some(oid) = oid else {
            errors.push(format!("net-snmp: no numeric OID for {name}:\n{out}"));
            continue;
        };
        if lines.next().map(str::trim) != Some(&format!("{name} OBJECT-TYPE")) {
            errors.push(format!("net-snmp: {name} is not an OBJECT-TYPE:\n{out}"));
            continue;
        }
        let clause = |kw: &str| -> Option<String> {
            out.lines().find_map(|l| {
                let l = l.trim_start();
                let rest = l.strip_prefix(kw)?;
                rest.starts_with(char::is_whitespace)
                    .then(|| rest.trim().to_string())
            })
        };
        let Some(access) = clause("MAX-ACCESS") else {
            errors.push(format!(
                "net-snmp: {name} has no MAX-ACCESS, so no OBJECT-TYPE"
            ));
            continue;
        };
        let Some(access) = parse_access(&access) else {
            errors.push(format!(
                "net-snmp: {name}: unexpected MAX-ACCESS {access:?}"
            ));
            continue;
        };
        let syntax = match clause("SYNTAX") {
            Some(s) => {
                let w: Vec<&str> = s
                    .split(|c: char| c.is_whitespace() || c == '(' || c == '{')
                    .filter(|w| !w.is_empty())
                    .collect();
                base_syntax(&w, &local_tcs, &BTreeSet::new())
            }
            None if clause("INDEX").is_some() || clause("AUGMENTS").is_some() => {
                Some(Syntax::Entry)
            }
            None => Some(Syntax::Table),
        };
        let Some(syntax) = syntax else {
            errors.push(format!("net-snmp: {name}: unknown SYNTAX in\n{out}"));
            continue;
        };
        defs.insert(
            name.clone(),
            Def {
                oid,
                syntax,
                access,
            },
        );
    }
    errors.extend(warnings);
    (defs, errors)
}

/// Differences between the code's objects and a view of the MIB, one line each.
fn compare(code: &Defs, what: &str, mib: &Defs) -> Vec<String> {
    let mut out = Vec::new();
    for (name, c) in code {
        match mib.get(name) {
            None => out.push(format!(
                "{name} ({c}) is in object_defs() but not an OBJECT-TYPE of {what}"
            )),
            Some(m) => {
                if c.oid != m.oid {
                    out.push(format!(
                        "{name}: OID {} in code, {} in {what}",
                        oid_str(&c.oid),
                        oid_str(&m.oid)
                    ));
                }
                if c.syntax != m.syntax {
                    out.push(format!(
                        "{name}: syntax {:?} in code, {:?} in {what}",
                        c.syntax, m.syntax
                    ));
                }
                if c.access != m.access {
                    out.push(format!(
                        "{name}: access {:?} in code, {:?} in {what}",
                        c.access, m.access
                    ));
                }
            }
        }
    }
    for (name, m) in mib {
        if !code.contains_key(name) {
            out.push(format!(
                "{name} ({m}) is an OBJECT-TYPE of {what} but missing from object_defs()"
            ));
        }
    }
    out
}

/// All drift between `code` and the MIB file in `dir`, through both readings of the MIB.
fn drift(code: &Defs, dir: &Path) -> Vec<String> {
    let src = std::fs::read_to_string(dir.join("MEMSTAT-MIB.txt")).unwrap();
    let mut problems = Vec::new();
    let text = match text_view(&src) {
        Ok(t) => t,
        Err(e) => {
            problems.extend(e.into_iter().map(|e| format!("MIB text: {e}")));
            Defs::new()
        }
    };
    problems.extend(compare(code, "the MIB text", &text));
    // Ask net-snmp about every name either side has.
    let names: BTreeSet<String> = code.keys().chain(text.keys()).cloned().collect();
    let (net, errors) = net_snmp_view(dir, &names, &src);
    problems.extend(errors);
    problems.extend(compare(code, "net-snmp's reading of the MIB", &net));
    problems
}

#[test]
fn code_and_mib_file_define_the_same_objects() {
    let code = code_view(&object_defs());
    let problems = drift(&code, &mib_dir());
    assert!(
        problems.is_empty(),
        "src/mib/ and {MIB_FILE} disagree:\n  {}",
        problems.join("\n  ")
    );
    // The layout is not empty and covers every kind of object.
    for s in [
        Syntax::Table,
        Syntax::Entry,
        Syntax::Counter64,
        Syntax::Integer,
    ] {
        assert!(code.values().any(|d| d.syntax == s), "no {s:?} object");
    }
    // A new group is covered by being defined: no count to keep up to date here.
}

#[test]
fn object_defs_are_in_oid_order_under_the_root() {
    let defs = object_defs();
    for w in defs.windows(2) {
        assert!(
            w[0].oid < w[1].oid,
            "object_defs() not in OID order: {} ({}) before {} ({})",
            w[0].name,
            oid_str(&w[0].oid),
            w[1].name,
            oid_str(&w[1].oid)
        );
    }
    for d in &defs {
        assert!(
            d.oid.starts_with(MEMSTAT_MIB_ROOT) && d.oid.len() > MEMSTAT_MIB_ROOT.len(),
            "{} ({}) is not under MEMSTAT_MIB_ROOT",
            d.name,
            oid_str(&d.oid)
        );
    }
}

/// The drift check itself must notice a column removed or renumbered on either side.
#[test]
fn drift_check_catches_changes_on_either_side() {
    let real = object_defs();
    let root = MEMSTAT_MIB_ROOT;

    // Code side: a column removed, one renumbered, one retyped, one with another access.
    let mut changed: Vec<ObjectDef> = real
        .iter()
        .filter(|d| d.name != "memTypeKegFree")
        .cloned()
        .collect();
    for d in &mut changed {
        match d.name {
            "memTypeSleeps" => *d.oid.last_mut().unwrap() = 99,
            "memTypeSize" => d.syntax = Syntax::Gauge32,
            "memTypeName" => d.access = Access::NotAccessible,
            _ => {}
        }
    }
    let problems = drift(&code_view(&changed), &mib_dir()).join("\n");
    for name in [
        "memTypeKegFree",
        "memTypeSleeps",
        "memTypeSize",
        "memTypeName",
    ] {
        assert!(
            problems.contains(name),
            "a change of {name} in the code went unnoticed:\n{problems}"
        );
    }

    // MIB side: a column renumbered and another removed, in a copy of the file.
    let src = std::fs::read_to_string(repo().join(MIB_FILE)).unwrap();
    let renumbered = src.replacen("::= { memTypeEntry 23 }", "::= { memTypeEntry 25 }", 1);
    assert_ne!(src, renumbered, "memTypeSlabBytes' assignment not found");
    // The column removed is one of the 2026-12-01 revision, so that the revision's
    // additions are held to the code like the rest.
    let start = renumbered
        .find("memCpuSizeMask OBJECT-TYPE")
        .expect("memCpuSizeMask not found");
    let end_marker = "::= { memCpuEntry 7 }";
    let end = renumbered[start..].find(end_marker).unwrap() + start + end_marker.len();
    let mut changed_mib = renumbered.clone();
    changed_mib.replace_range(start..end, "");
    // Also from its SEQUENCE and its group, so that the copy is still a valid module.
    for (from, to) in [
        (
            "    memCpuBytesFreed        Counter64,\n    memCpuSizeMask          OCTET STRING\n",
            "    memCpuBytesFreed        Counter64\n",
        ),
        (
            "        memCpuBytesFreed,\n        memCpuSizeMask\n",
            "        memCpuBytesFreed\n",
        ),
    ] {
        assert!(
            changed_mib.contains(from),
            "{from:?} not found in {MIB_FILE}"
        );
        changed_mib = changed_mib.replacen(from, to, 1);
    }
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("MEMSTAT-MIB.txt"), &changed_mib).unwrap();
    let problems = drift(&code_view(&real), tmp.path());
    let joined = problems.join("\n");
    let slab = format!("{}.1.2.1.25", oid_str(root));
    assert!(
        joined.contains("memTypeSlabBytes") && joined.contains(&slab),
        "renumbering memTypeSlabBytes in the MIB went unnoticed:\n{joined}"
    );
    assert!(
        problems.iter().any(|p| p.starts_with("memCpuSizeMask (")
            && p.ends_with("is in object_defs() but not an OBJECT-TYPE of the MIB text")),
        "removing memCpuSizeMask from the MIB went unnoticed by the text parser:\n{joined}"
    );
    assert!(
        joined.contains("net-snmp does not know memCpuSizeMask"),
        "removing memCpuSizeMask from the MIB went unnoticed by net-snmp:\n{joined}"
    );
}

/// The parser that the drift test relies on reads comments and strings correctly.
#[test]
fn text_parser_handles_comments_and_strings() {
    let src = r#"X-MIB DEFINITIONS ::= BEGIN
IMPORTS OBJECT-TYPE, Counter64, enterprises FROM SNMPv2-SMI;
x OBJECT IDENTIFIER ::= { enterprises 9 } -- a comment with fooObj OBJECT-TYPE
-- a comment closed by -- y OBJECT IDENTIFIER ::= { x 1 }
G ::= TEXTUAL-CONVENTION STATUS current DESCRIPTION "SYNTAX Integer32 -- not a comment" SYNTAX Counter64
xA OBJECT-TYPE SYNTAX G UNITS "bytes" MAX-ACCESS read-only STATUS current
  DESCRIPTION "x OBJECT-TYPE ::= { x 7 }" ::= { y 2 }
END
"#;
    let defs = text_view(src).unwrap();
    assert_eq!(defs.len(), 1, "{defs:?}");
    assert_eq!(
        defs["xA"],
        Def {
            oid: vec![1, 3, 6, 1, 4, 1, 9, 1, 2],
            syntax: Syntax::Counter64,
            access: Access::ReadOnly,
        }
    );
}

// ---------------------------------------------------------------------------------------
// 4. Notifications
// ---------------------------------------------------------------------------------------

/// A notification of type `t` about row 7, with a value for each object (its figures are
/// not what this file checks: `agent::watch`'s tests check those of every rule).
fn sample_notification(t: NotificationType) -> Notification {
    let row = Some(NotifiedRow { index: 7 });
    t.objects()
        .iter()
        .fold(Notification::new(t, row), |n, object| {
            n.with(object, Value::Null)
        })
}

/// Differences between the code's notifications and the MIB file in `dir`, one line each.
fn notification_drift(dir: &Path) -> Vec<String> {
    let src = std::fs::read_to_string(dir.join("MEMSTAT-MIB.txt")).unwrap();
    let toks = tokenize(&src);
    let in_text: BTreeSet<String> = toks
        .windows(2)
        .filter_map(|w| match (&w[0], word(Some(&w[1]))) {
            (Tok::Word(n), Some("NOTIFICATION-TYPE")) if n.starts_with(char::is_lowercase) => {
                Some(n.clone())
            }
            _ => None,
        })
        .collect();
    let in_code: BTreeSet<String> = DEFINITIONS
        .iter()
        .map(|d| d.kind.name().to_string())
        .collect();
    let mut out = Vec::new();
    for n in in_text.difference(&in_code) {
        out.push(format!(
            "{n} is a NOTIFICATION-TYPE of the MIB text but not in the code"
        ));
    }
    for n in in_code.difference(&in_text) {
        out.push(format!(
            "{n} is in the code but not a NOTIFICATION-TYPE of the MIB text"
        ));
    }
    // The NOTIFICATION-GROUP names every notification.
    let group: BTreeSet<String> = toks
        .iter()
        .position(|t| word(Some(t)) == Some("NOTIFICATIONS"))
        .map(|p| {
            toks[p + 1..]
                .iter()
                .take_while(|t| **t != Tok::Punct("}"))
                .filter_map(|t| word(Some(t)).map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    if group != in_text {
        out.push(format!(
            "the NOTIFICATION-GROUP lists {group:?}, the MIB text defines {in_text:?}"
        ));
    }
    let defs = object_defs();
    for t in DEFINITIONS.iter().map(|d| d.kind) {
        let name = t.name();
        let (ok, text, stderr) = snmptranslate(dir, &["-Td", "-On", &format!("{MODULE}::{name}")]);
        if !ok {
            out.push(format!("net-snmp does not know {name}: {}", stderr.trim()));
            continue;
        }
        let oid = text.lines().next().unwrap_or("").trim().to_string();
        if oid != format!(".{}", oid_str(&t.oid().0)) {
            out.push(format!(
                "{name}: OID {} in code, {oid} in net-snmp's reading",
                oid_str(&t.oid().0)
            ));
        }
        let objects: Vec<String> = text
            .lines()
            .find_map(|l| l.trim_start().strip_prefix("OBJECTS"))
            .map(|l| {
                l.trim()
                    .trim_start_matches('{')
                    .trim_end_matches('}')
                    .split(',')
                    .map(|o| o.trim().to_string())
                    .filter(|o| !o.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        if objects != t.objects() {
            out.push(format!(
                "{name}: OBJECTS {:?} in code, {objects:?} in net-snmp's reading",
                t.objects()
            ));
        }
        // Each object is one of the code's objects (the registry the varbinds are built
        // from), whatever net-snmp says of it.
        let unknown: Vec<&str> = t
            .objects()
            .iter()
            .copied()
            .filter(|o| !defs.iter().any(|d| d.name == *o))
            .collect();
        if !unknown.is_empty() {
            out.push(format!(
                "{name}: OBJECTS {unknown:?} are not in mib::object_defs()"
            ));
            continue;
        }
        // The varbinds sent: snmpTrapOID.0 = the notification's OID, then one instance of
        // each object, in order, never an object the agent serves for reading only.
        let vbs = notification_varbinds(&sample_notification(t));
        if vbs.first().map(|v| (v.name.0.as_slice(), &v.value))
            != Some((SNMP_TRAP_OID_0, &Value::ObjectIdentifier(t.oid())))
        {
            out.push(format!(
                "{name}: the first varbind is not snmpTrapOID.0 = {name}"
            ));
        }
        let named: Vec<&str> = vbs[1..]
            .iter()
            .map(|v| {
                defs.iter()
                    .find(|d| v.name.0.starts_with(&d.oid) && v.name.0.len() == d.oid.len() + 1)
                    .map_or("?", |d| d.name)
            })
            .collect();
        if named != t.objects() {
            out.push(format!(
                "{name}: the daemon sends {named:?}, the OBJECTS clause is {:?}",
                t.objects()
            ));
        }
    }
    out
}

#[test]
fn code_and_mib_file_define_the_same_notifications() {
    let problems = notification_drift(&mib_dir());
    assert!(
        problems.is_empty(),
        "agent::watch::DEFINITIONS and {MIB_FILE} disagree on notifications:\n  {}",
        problems.join("\n  ")
    );
    assert_eq!(
        translate_numeric("memstatNotifications"),
        format!(".{}.0", oid_str(MEMSTAT_MIB_ROOT))
    );
}

/// The notification drift check notices an object dropped from an OBJECTS clause, a
/// notification renumbered in the MIB, and one the MIB defines and the code does not.
#[test]
fn notification_drift_catches_changes() {
    let src = std::fs::read_to_string(repo().join(MIB_FILE)).unwrap();
    let added = "memTypeAdded NOTIFICATION-TYPE\n    OBJECTS     { memTypeName }\n    \
                 STATUS      current\n    DESCRIPTION \"Not defined in the code.\"\n    \
                 ::= { memstatNotifications 7 }\n\n";
    let changed = src
        .replacen(
            "memNotificationsSuppressed NOTIFICATION-TYPE",
            &format!("{added}memNotificationsSuppressed NOTIFICATION-TYPE"),
            1,
        )
        .replacen(
            "        memTypeFailures,\n        memNotifyFailureIncrease\n",
            "        memTypeFailures\n",
            1,
        )
        .replacen(
            "::= { memstatNotifications 5 }",
            "::= { memstatNotifications 9 }",
            1,
        );
    assert_ne!(src, changed);
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("MEMSTAT-MIB.txt"), &changed).unwrap();
    let joined = notification_drift(tmp.path()).join("\n");
    assert!(
        joined.contains("memTypeAllocFailure: OBJECTS"),
        "a dropped object went unnoticed:\n{joined}"
    );
    assert!(
        joined.contains("memSourceRecovered: OID"),
        "a renumbered notification went unnoticed:\n{joined}"
    );
    assert!(
        joined.contains("memTypeAdded is a NOTIFICATION-TYPE of the MIB text but not in the code"),
        "a notification without a definition went unnoticed:\n{joined}"
    );
}

/// The enumeration of a textual convention of `src`: its labels and values, in order.
fn tc_enumeration(src: &str, tc: &str) -> (String, Vec<(String, u32)>) {
    let start = src
        .find(&format!("\n{tc} ::= TEXTUAL-CONVENTION"))
        .unwrap_or_else(|| panic!("{tc} is in the MIB"));
    let body = &src[start..];
    let syntax = body.find("SYNTAX").expect("a SYNTAX clause");
    let open = syntax + body[syntax..].find('{').expect("an enumeration");
    let close = open + body[open..].find('}').expect("its end");
    let values = body[open + 1..close]
        .split(',')
        .map(|item| {
            let item = item.trim();
            let (label, rest) = item.split_once('(').expect("label(value)");
            let value = rest.trim_end_matches(')').parse().expect("a number");
            (label.trim().to_string(), value)
        })
        .collect();
    (body[..syntax].to_string(), values)
}

/// MemKernelKind lists exactly the kinds the sources define, by label and value, and its
/// DESCRIPTION names where each kind is read from; every kind's parent is another kind (or 0).
#[test]
fn memkernelkind_is_the_sources_kinds() {
    use memstat_agentx::memstat::source::SOURCES;
    let src = std::fs::read_to_string(repo().join(MIB_FILE)).unwrap();
    let (description, mib) = tc_enumeration(&src, "MemKernelKind");
    let kinds: Vec<_> = SOURCES.iter().flat_map(|d| d.kinds.iter()).collect();
    let code: Vec<(String, u32)> = kinds
        .iter()
        .map(|k| (k.name.to_string(), k.index))
        .collect();
    let mut sorted = code.clone();
    sorted.sort_by_key(|(_, v)| *v);
    assert_eq!(mib, sorted, "MemKernelKind against the sources' kinds");
    for k in &kinds {
        let field = k.from;
        let entry = format!("{}({})", k.name, k.index);
        let at = description
            .find(&entry)
            .unwrap_or_else(|| panic!("MemKernelKind describes {entry}"));
        let next = description[at + entry.len()..]
            .find(" - ")
            .map(|p| at + entry.len() + p);
        let text = &description[next.unwrap_or(at)..];
        let text = &text[..text.find("\n\n").unwrap_or(text.len()).min(400)];
        assert!(
            text.contains(field),
            "{entry}'s description names {field}: {text}"
        );
        assert!(
            k.parent == 0 || kinds.iter().any(|p| p.index == k.parent),
            "{}'s parent {} is a kind",
            k.name,
            k.parent
        );
    }
}

/// scripts/fetch-base-mibs keeps one cache per checkout, in its target/base-mibs, wherever it
/// is run from (it used to cache under the ./target of the directory it was run in).
#[test]
fn fetch_base_mibs_caches_in_the_checkout_wherever_it_is_run_from() {
    let elsewhere = tempfile::tempdir().unwrap();
    let out = Command::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scripts/fetch-base-mibs"
    ))
    .current_dir(elsewhere.path())
    .output()
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = String::from_utf8(out.stdout).unwrap();
    let cache = concat!(env!("CARGO_MANIFEST_DIR"), "/target/base-mibs/");
    assert!(dir.trim().starts_with(cache), "{dir} is not under {cache}");
    assert!(
        !elsewhere.path().join("target").exists(),
        "it cached in the directory it was run from"
    );
}
