//! The packaging files agree with the tree (issue 18), without a FreeBSD machine or root:
//! - the FreeBSD port (contrib/freebsd/sysutils/memstat-agentx): CARGO_CRATES and distinfo
//!   match Cargo.lock; pkg-plist lists exactly the files its do-install installs (the recipe
//!   is run here, into a staging directory); its rc.d script is rc.d/memstat_agentx; its
//!   version, user and group agree with the rest;
//! - the Debian package's metadata: its changelog's version is Cargo.toml's, and the
//!   synopsis fits Debian's one line.
//!
//! scripts/update-port regenerates the port's generated files; scripts/test also runs
//! `scripts/update-port --check` (the crate sizes in distinfo need cargo's download cache).
mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn port_dir() -> PathBuf {
    Path::new(ROOT).join("contrib/freebsd/sysutils/memstat-agentx")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// (name, version) -> checksum of every crates.io package in Cargo.lock, in its order.
fn locked_crates() -> Vec<(String, String, String)> {
    let lock: toml::Value = read(&Path::new(ROOT).join("Cargo.lock")).parse().unwrap();
    lock["package"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| {
            p.get("source").and_then(|s| s.as_str())
                == Some("registry+https://github.com/rust-lang/crates.io-index")
        })
        .map(|p| {
            let field = |k: &str| {
                p.get(k)
                    .and_then(|v| v.as_str())
                    .unwrap_or_else(|| panic!("Cargo.lock: {p:?} has no {k}"))
                    .to_string()
            };
            (field("name"), field("version"), field("checksum"))
        })
        .collect()
}

/// The value of a make variable assignment `NAME=<tab>...`, joining `\`-continued lines.
fn make_variable(makefile: &str, name: &str) -> Option<String> {
    let mut lines = makefile.lines();
    let first = lines.find(|l| {
        l.strip_prefix(name)
            .is_some_and(|rest| rest.starts_with('=') || rest.starts_with("+="))
    })?;
    let mut value = first.split_once('=').unwrap().1.to_string();
    while value.trim_end().ends_with('\\') {
        value = value.trim_end().trim_end_matches('\\').to_string();
        value.push(' ');
        value.push_str(lines.next().unwrap_or(""));
    }
    Some(value.split('#').next().unwrap().trim().to_string())
}

#[test]
fn cargo_crates_and_distinfo_match_cargo_lock() {
    let locked = locked_crates();
    assert!(locked.len() > 10, "{locked:?}");
    let crates_file = read(&port_dir().join("Makefile.crates"));
    let listed: Vec<String> = make_variable(&crates_file, "CARGO_CRATES")
        .expect("Makefile.crates has no CARGO_CRATES")
        .split_whitespace()
        .map(str::to_string)
        .collect();
    let expected: Vec<String> = locked.iter().map(|(n, v, _)| format!("{n}-{v}")).collect();
    assert_eq!(
        listed, expected,
        "CARGO_CRATES differs from Cargo.lock: run scripts/update-port"
    );

    // distinfo: each crate's SHA256 is Cargo.lock's checksum, and it has a SIZE; nothing else.
    let distinfo = read(&port_dir().join("distinfo"));
    let mut sha = BTreeMap::new();
    let mut size = BTreeSet::new();
    for line in distinfo.lines() {
        let (key, value) = line.split_once(" = ").expect(line);
        if let Some(file) = key
            .strip_prefix("SHA256 (")
            .and_then(|k| k.strip_suffix(')'))
        {
            sha.insert(file.to_string(), value.to_string());
        } else if let Some(file) = key.strip_prefix("SIZE (").and_then(|k| k.strip_suffix(')')) {
            assert!(value.parse::<u64>().is_ok_and(|s| s > 0), "{line}");
            size.insert(file.to_string());
        } else {
            panic!("distinfo: unexpected line {line:?}");
        }
    }
    let wanted: BTreeMap<String, String> = locked
        .iter()
        .map(|(n, v, c)| (format!("rust/crates/{n}-{v}.crate"), c.clone()))
        .collect();
    assert_eq!(
        sha, wanted,
        "distinfo differs from Cargo.lock: run scripts/update-port"
    );
    assert_eq!(
        size,
        wanted.keys().cloned().collect::<BTreeSet<_>>(),
        "distinfo SIZE lines"
    );
}

#[test]
fn port_rc_script_is_the_one_in_rc_d() {
    let port = std::fs::read(port_dir().join("files/memstat_agentx.in")).unwrap();
    let tree = std::fs::read(Path::new(ROOT).join("rc.d/memstat_agentx")).unwrap();
    assert!(
        port == tree,
        "files/memstat_agentx.in differs from rc.d/memstat_agentx: run scripts/update-port"
    );
    assert!(String::from_utf8(tree).unwrap().contains("%%PREFIX%%"));
}

/// The port's do-install recipe as shell commands, with the ports framework's variables
/// replaced by what they are during a build (PREFIX /usr/local, WRKSRC the tree).
fn do_install_script(makefile: &str, stage: &Path) -> String {
    // Recipe lines start with a tab; a `.for` loop of make becomes a shell loop, whose
    // variable keeps its ${NAME} form.
    let mut loop_vars = Vec::new();
    let recipe: Vec<String> = makefile
        .lines()
        .skip_while(|l| *l != "do-install:")
        .skip(1)
        .take_while(|l| l.starts_with('\t') || l.starts_with(".for ") || *l == ".endfor")
        .map(|l| {
            if let Some(rest) = l.strip_prefix(".for ") {
                loop_vars.push(format!("${{{}}}", rest.split_whitespace().next().unwrap()));
                format!("for {rest}; do")
            } else if l == ".endfor" {
                "done".to_string()
            } else {
                l.to_string()
            }
        })
        .collect();
    assert!(
        !recipe.is_empty(),
        "the port's Makefile has no do-install recipe"
    );
    let binary = env!("CARGO_BIN_EXE_memstat-agentx");
    // The bsnmpd module, built beside the binary as a default member of the workspace.
    let module = Path::new(binary).with_file_name("libsnmp_agentx.so");
    assert!(
        module.exists(),
        "{} is not built: cargo build --workspace",
        module.display()
    );
    let vars = [
        ("${INSTALL_PROGRAM}", "install -m 555".to_string()),
        ("${INSTALL_SCRIPT}", "install -m 555".to_string()),
        ("${INSTALL_DATA}", "install -m 444".to_string()),
        ("${INSTALL_MAN}", "install -m 444".to_string()),
        ("${INSTALL_LIB}", "install -m 444".to_string()),
        ("${MKDIR}", "mkdir -p".to_string()),
        (
            "${CARGO_TARGET_DIR}/${CARGO_BUILD_TARGET}/release/memstat-agentx",
            binary.to_string(),
        ),
        (
            "${CARGO_TARGET_DIR}/${CARGO_BUILD_TARGET}/release/memstat-top",
            env!("CARGO_BIN_EXE_memstat-top").to_string(),
        ),
        (
            "${CARGO_TARGET_DIR}/${CARGO_BUILD_TARGET}/release/libsnmp_agentx.so",
            module.display().to_string(),
        ),
        ("${STAGEDIR}", stage.display().to_string()),
        (
            "${DOCSDIR}",
            "/usr/local/share/doc/memstat-agentx".to_string(),
        ),
        ("${PREFIX}", "/usr/local".to_string()),
        ("${WRKSRC}", ROOT.to_string()),
        (
            "${FILESDIR}",
            port_dir().join("files").display().to_string(),
        ),
    ];
    let mut script = recipe.join("\n");
    for (var, value) in vars {
        script = script.replace(var, &value);
    }
    let mut unknown = script.clone();
    for var in &loop_vars {
        unknown = unknown.replace(var.as_str(), "");
    }
    assert!(
        !unknown.contains("${"),
        "do-install uses a variable this test does not know: {script}"
    );
    script
}

fn files_under(dir: &Path, base: &Path, out: &mut BTreeSet<String>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            files_under(&p, base, out);
        } else {
            out.insert(p.strip_prefix(base).unwrap().display().to_string());
        }
    }
}

#[test]
fn pkg_plist_lists_every_file_the_port_installs() {
    let makefile = read(&port_dir().join("Makefile"));
    let stage = tempfile::tempdir().unwrap();
    // The framework makes the staging tree from the hierarchy of /usr/local first
    // (mtree(8) BSD.local.dist); these are the parts of it that matter here.
    for dir in [
        "bin",
        "etc/rc.d",
        "lib",
        "libexec",
        "sbin",
        "share/doc",
        "share/man/man1",
        "share/man/man3",
        "share/man/man8",
    ] {
        std::fs::create_dir_all(stage.path().join("usr/local").join(dir)).unwrap();
    }
    let script = do_install_script(&makefile, stage.path());
    let out = Command::new("sh").args(["-ec", &script]).output().unwrap();
    assert!(
        out.status.success(),
        "do-install failed here:\n{script}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let prefix = stage.path().join("usr/local");
    let mut staged = BTreeSet::new();
    files_under(stage.path(), &prefix, &mut staged);
    assert!(
        staged.iter().all(|f| !f.starts_with("..")),
        "do-install wrote outside PREFIX: {staged:?}"
    );
    // The framework compresses manual pages; USE_RC_SUBR installs and lists the rc.d script.
    let staged: BTreeSet<String> = staged
        .into_iter()
        .map(|f| {
            if f.starts_with("share/man/") {
                format!("{f}.gz")
            } else {
                f
            }
        })
        .collect();
    assert_eq!(
        make_variable(&makefile, "USE_RC_SUBR").unwrap(),
        "memstat_agentx"
    );

    let mut listed = BTreeSet::new();
    for line in read(&port_dir().join("pkg-plist")).lines() {
        let entry = match line.split_once(' ') {
            Some(("@sample", file)) => file.to_string(),
            _ if line.starts_with('@') => panic!("pkg-plist: unexpected keyword in {line:?}"),
            _ => line.to_string(),
        };
        let entry = entry.replace("%%DOCSDIR%%", "share/doc/memstat-agentx");
        assert!(!entry.contains("%%"), "pkg-plist: {line:?}");
        assert!(listed.insert(entry), "pkg-plist lists {line:?} twice");
    }
    assert_eq!(
        listed, staged,
        "pkg-plist (left) and the files do-install installs (right) differ"
    );
    for must in [
        "sbin/memstat-agentx",
        // The live view, a program of its own (`memstat-agentx top` runs it), and its page.
        "bin/memstat-top",
        "share/man/man1/memstat-top.1.gz",
        "etc/memstat-agentx.toml.sample",
        "share/snmp/mibs/MEMSTAT-MIB.txt",
        "share/man/man8/memstat-agentx.8.gz",
        "share/doc/memstat-agentx/snmpd.conf.memstat",
        // The pollers' kernel memory overview (contrib/cacti, contrib/librenms).
        "share/doc/memstat-agentx/cacti/cacti_graph_template_memstat_kernel_memory_by_kind.xml",
        "share/doc/memstat-agentx/librenms/memstat-kernel-sensors.yaml",
        // The pollers' ZFS ARC graphs.
        "share/doc/memstat-agentx/cacti/cacti_graph_template_memstat_zfs_arc.xml",
        "share/doc/memstat-agentx/librenms/memstat-arc-sensors.yaml",
        // Zabbix's template and the traphandle for its SNMP trapper.
        "share/doc/memstat-agentx/zabbix/memstat-agentx.yaml",
        "libexec/memstat-agentx/memstat-zabbix-traps",
    ] {
        assert!(listed.contains(must), "pkg-plist lacks {must}");
    }
    // The sample is the shipped configuration, and the binary the one built here.
    assert_eq!(
        std::fs::read(prefix.join("etc/memstat-agentx.toml.sample")).unwrap(),
        std::fs::read(Path::new(ROOT).join("config/memstat-agentx.toml")).unwrap()
    );
}

#[test]
fn port_version_user_and_group_agree_with_the_tree() {
    let makefile = read(&port_dir().join("Makefile"));
    assert_eq!(
        make_variable(&makefile, "DISTVERSION").unwrap(),
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(make_variable(&makefile, "USES").unwrap(), "cargo");
    // The rc.d script's default user and group, and the out-of-tree UID/GID entries.
    let rc = read(&Path::new(ROOT).join("rc.d/memstat_agentx"));
    for (var, default) in [
        ("USERS", "memstat_agentx_user"),
        ("GROUPS", "memstat_agentx_group"),
    ] {
        let name = make_variable(&makefile, var).unwrap();
        assert!(
            rc.contains(&format!(": \"${{{default}:={name}}}\"")),
            "rc.d's {default} default is not {name}"
        );
    }
    let uids = read(&port_dir().join("files/UIDs"));
    let gids = read(&port_dir().join("files/GIDs"));
    let user: Vec<&str> = uids.trim().split(':').collect();
    let group: Vec<&str> = gids.trim().split(':').collect();
    assert_eq!(user.len(), 10, "files/UIDs: {uids}");
    assert_eq!((user[0], group[0]), ("memstat", "memstat"));
    assert_eq!(user[3], group[2], "the user's GID is the group's");
    assert!(user[2].parse::<u32>().is_ok_and(|u| u < 1000), "{uids}");
    for var in ["UID_FILES", "GID_FILES"] {
        let v = make_variable(&makefile, var).unwrap();
        assert!(v.contains("${FILESDIR}/"), "{var} = {v}");
    }
}

/// make itself reads the port (bmake, the BSD make the ports framework is written for), with
/// stand-ins for sys.mk and bsd.port.mk that include Makefile.crates as USES=cargo does and
/// print what the framework would use.
#[test]
fn port_makefile_parses_with_bsd_make() {
    common::require_tool("bmake");
    let mk = tempfile::tempdir().unwrap();
    std::fs::write(mk.path().join("sys.mk"), "").unwrap();
    std::fs::write(
        mk.path().join("bsd.port.mk"),
        ".sinclude \"${.CURDIR}/Makefile.crates\"\n\
         FILESDIR?=${.CURDIR}/files\n\
         show:\n\
         \t@echo ${MEMSTAT_SRCDIR}\n\
         \t@echo ${CARGO_CRATES}\n\
         \t@echo ${UID_FILES}\n\
         \t@echo ${DISTFILES}\n",
    )
    .unwrap();
    let out = Command::new("bmake")
        .arg("-m")
        .arg(mk.path())
        .args(["show", "PORTSDIR=/usr/ports", "LOCALBASE=/usr/local"])
        .current_dir(port_dir())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "bmake: {}{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    assert_eq!(
        Path::new(lines[0]).canonicalize().unwrap(),
        Path::new(ROOT).canonicalize().unwrap(),
        "MEMSTAT_SRCDIR is not the tree"
    );
    let crates: Vec<String> = locked_crates()
        .iter()
        .map(|(n, v, _)| format!("{n}-{v}"))
        .collect();
    assert_eq!(lines[1].split_whitespace().collect::<Vec<_>>(), crates);
    assert_eq!(
        lines[2],
        format!("/usr/ports/UIDs {}/files/UIDs", port_dir().display())
    );
    assert_eq!(lines[3], "", "DISTFILES beyond the crates: {}", lines[3]);
}

#[test]
fn debian_metadata_agrees_with_cargo_toml() {
    let changelog = read(&Path::new(ROOT).join("debian/changelog"));
    let first = changelog.lines().next().unwrap();
    assert!(
        first.starts_with(&format!("memstat-agentx ({}-", env!("CARGO_PKG_VERSION"))),
        "debian/changelog's last entry is not for version {}: {first}",
        env!("CARGO_PKG_VERSION")
    );
    // cargo-deb takes the synopsis from Cargo.toml's description and wraps it past 79
    // characters, which would make its tail a line of the long description.
    let description = env!("CARGO_PKG_DESCRIPTION");
    assert!(
        description.len() <= 79,
        "Cargo.toml's description is the Debian synopsis: {} characters",
        description.len()
    );
}

/// Every place that tells a user how to open snmpd's AgentX socket to the daemon's group gives
/// the same `agentXPerms` (the directory mode 0755: with 0750 the group of snmpd's directory,
/// not the daemon's, decides), as contrib/snmpd/snmpd.conf.memstat, the snippet the packages
/// install, does.
#[test]
fn every_document_gives_the_same_agentxperms() {
    let shipped = read(&Path::new(ROOT).join("contrib/snmpd/snmpd.conf.memstat"));
    let line = shipped
        .lines()
        .find(|l| l.starts_with("agentXPerms "))
        .expect("the snippet has no agentXPerms line");
    let want: Vec<&str> = line.split_whitespace().skip(1).take(4).collect();
    assert_eq!(want, ["0660", "0755", "root", "memstat"], "{line}");
    let mut seen = 0;
    for doc in [
        "README.md",
        "man/memstat-agentx.8",
        "contrib/systemd/memstat-agentx.service",
        "contrib/freebsd/sysutils/memstat-agentx/pkg-message",
        "config/memstat-agentx.toml",
        "contrib/snmpd/snmpd.conf.memstat",
    ] {
        let text = read(&Path::new(ROOT).join(doc));
        for (n, l) in text.lines().enumerate() {
            let Some(at) = l.find("agentXPerms 0") else {
                continue;
            };
            let given: Vec<&str> = l[at..]
                .split(|c: char| c.is_whitespace() || c == ';' || c == ')')
                .filter(|w| !w.is_empty())
                .skip(1)
                .take(4)
                .collect();
            assert_eq!(given, want, "{doc}:{}: {l}", n + 1);
            seen += 1;
        }
    }
    assert!(seen >= 5, "agentXPerms lines found: {seen}");
}

/// LICENSE is the licence Cargo.toml names and debian/copyright states, word for word.
#[test]
fn license_file_is_the_licence_cargo_toml_and_debian_copyright_give() {
    let license = read(&Path::new(ROOT).join("LICENSE"));
    assert!(license.starts_with("BSD 2-Clause License\n"), "{license}");
    let cargo = read(&Path::new(ROOT).join("Cargo.toml"));
    assert!(cargo.contains("\nlicense = \"BSD-2-Clause\"\n"));
    let copyright = read(&Path::new(ROOT).join("debian/copyright"));
    let stated: String = copyright
        .split("License: BSD-2-Clause\n")
        .nth(1)
        .expect("debian/copyright states no BSD-2-Clause licence")
        .lines()
        .take_while(|l| l.starts_with(' '))
        .map(|l| match &l[1..] {
            "." => "",
            text => text,
        })
        .collect::<Vec<_>>()
        .join(" ");
    let words = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words(&license).ends_with(&words(&stated)),
        "LICENSE and debian/copyright differ"
    );
}
