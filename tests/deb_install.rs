//! The Debian package, installed on this machine for real (issue 18).
//!
//! `dpkg -i` the package scripts/package-deb built (lintian-checked there); run the *installed*
//! binary with the *installed* configuration the way the installed unit runs it (its ExecStart,
//! as its User= with its capabilities) against a private snmpd; walk memTypeTable by name with
//! the installed MIB and the IETF base MIBs only; `systemd-analyze verify` the installed unit;
//! install it again (user, state and edited configuration kept); `dpkg -P`; and check that
//! the machine is as it was before: accounts, state directory, files, snmpd.conf, systemd
//! state.
//!
//! It changes the machine (a package, a system user), so it needs root and runs alone:
//! `#[ignore]` keeps it out of `cargo test`, and scripts/test runs it after every other test
//! has finished (`MEMSTAT_DEB=PATH cargo test --test deb_install -- --ignored`). It is the
//! only test in this binary. A guard purges the package even when an assertion fails.
mod common;

use common::{Snmpd, Transport, ROOT};
use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const PACKAGE: &str = "memstat-agentx";
const BINARY: &str = "/usr/sbin/memstat-agentx";
const CONFIG: &str = "/etc/memstat-agentx.toml";
const MIB_DIR: &str = "/usr/share/snmp/mibs";
const STATE_DIR: &str = "/var/lib/memstat-agentx";
const UNIT: &str = "/usr/lib/systemd/system/memstat-agentx.service";
/// snmptrapd's traphandle for Zabbix (contrib/zabbix/memstat-zabbix-traps).
const TRAPHANDLE: &str = "/usr/libexec/memstat-agentx/memstat-zabbix-traps";
const ENABLED_LINK: &str = "/etc/systemd/system/multi-user.target.wants/memstat-agentx.service";

fn run(program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"))
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn must(program: &str, args: &[&str]) -> String {
    let o = run(program, args);
    assert!(
        o.status.success(),
        "{program} {args:?} failed ({}):\n{}",
        o.status,
        text(&o)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Runs dpkg, waiting (up to 5 min) while another dpkg or apt holds its lock: an
/// `apt-get install` elsewhere on the machine is no reason to fail.
fn dpkg(args: &[&str]) -> Output {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let o = run("dpkg", args);
        if o.status.success() || !text(&o).contains("lock") || Instant::now() > deadline {
            return o;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

fn must_dpkg(args: &[&str]) {
    let o = dpkg(args);
    assert!(
        o.status.success(),
        "dpkg {args:?} failed ({}):\n{}",
        o.status,
        text(&o)
    );
}

/// dpkg's status of the package ("" when dpkg has never heard of it or forgot it on purge).
fn dpkg_status() -> String {
    let o = run("dpkg-query", &["-W", "-f=${Status}", PACKAGE]);
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// An account's entry from getent, if any.
fn getent(db: &str, name: &str) -> Option<Vec<String>> {
    let o = run("getent", &[db, name]);
    o.status.success().then(|| {
        String::from_utf8_lossy(&o.stdout)
            .trim()
            .split(':')
            .map(str::to_string)
            .collect()
    })
}

/// Everything on the machine the package may touch, read before and after.
#[derive(Debug, PartialEq, Eq)]
struct MachineState {
    /// /etc/passwd, group, shadow, gshadow: the accounts, byte for byte.
    accounts: BTreeMap<String, Option<String>>,
    /// snmpd's configuration, which the package must never edit.
    snmpd_conf: Option<String>,
    /// Paths under /etc/systemd/system and deb-systemd-helper's state.
    systemd: Vec<String>,
    state_dir_exists: bool,
    dpkg_status: String,
}

fn list_tree(root: &Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        out.push(p.display().to_string());
        if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            list_tree(&p, out);
        }
    }
}

impl MachineState {
    fn read() -> MachineState {
        let accounts = ["passwd", "group", "shadow", "gshadow"]
            .iter()
            .map(|f| {
                let path = format!("/etc/{f}");
                (path.clone(), std::fs::read_to_string(&path).ok())
            })
            .collect();
        let mut systemd = Vec::new();
        for root in [
            "/etc/systemd/system",
            "/var/lib/systemd/deb-systemd-helper-enabled",
            "/var/lib/systemd/deb-systemd-helper-masked",
        ] {
            list_tree(Path::new(root), &mut systemd);
        }
        systemd.sort();
        MachineState {
            accounts,
            snmpd_conf: std::fs::read_to_string("/etc/snmp/snmpd.conf").ok(),
            systemd,
            state_dir_exists: Path::new(STATE_DIR).exists(),
            dpkg_status: dpkg_status(),
        }
    }
}

/// The regular files in the .deb, as absolute paths.
fn package_files(deb: &str) -> Vec<PathBuf> {
    must("dpkg-deb", &["-c", deb])
        .lines()
        .filter(|l| l.starts_with('-'))
        .filter_map(|l| l.split_whitespace().last())
        .map(|p| PathBuf::from(p.trim_start_matches('.')))
        .collect()
}

/// Purges the package when the test ends, however it ends. Should the purge itself fail (a
/// broken postrm), what the test checked was absent before it installed is removed by hand:
/// the user, the group and the state directory. dpkg then still knows the package (in
/// state config-files); the next run says so, and installing a fixed package and purging it
/// clears it.
struct PurgeOnDrop;

impl Drop for PurgeOnDrop {
    fn drop(&mut self) {
        if !dpkg_status().is_empty() {
            let o = dpkg(&["-P", PACKAGE]);
            if !o.status.success() {
                eprintln!(
                    "deb_install cleanup: dpkg -P {PACKAGE} failed:\n{}",
                    text(&o)
                );
            }
        }
        if getent("passwd", "memstat").is_some() {
            let _ = run("userdel", &["memstat"]);
        }
        if getent("group", "memstat").is_some() {
            let _ = run("groupdel", &["memstat"]);
        }
        let _ = std::fs::remove_dir_all(STATE_DIR);
    }
}

/// A process killed when the test ends.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `Key=value` settings of the unit's [Service] section (the last one wins, as in systemd,
/// except for keys that accumulate, which this test does not read).
fn unit_settings(unit: &str) -> BTreeMap<String, String> {
    let mut section = String::new();
    let mut settings = BTreeMap::new();
    for line in unit.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line.to_string();
        } else if section == "[Service]" && !line.starts_with('#') {
            if let Some((k, v)) = line.split_once('=') {
                settings.insert(k.trim().to_string(), v.trim().to_string());
            }
        }
    }
    settings
}

/// The slab cache names the kernel lists in /proc/slabinfo (read as root).
fn kernel_slab_names() -> Vec<String> {
    let text = std::fs::read_to_string("/proc/slabinfo").expect("read /proc/slabinfo as root");
    text.lines()
        .skip(2)
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

#[test]
#[ignore = "installs a system package as root: scripts/test runs it alone, after every other test"]
fn package_installs_serves_and_purges_cleanly() {
    assert!(
        memstat_agentx::privdrop::is_root(),
        "installing the package needs root (dpkg -i, a system user)"
    );
    let deb = std::env::var("MEMSTAT_DEB").expect(
        "MEMSTAT_DEB must name the .deb to install: scripts/test sets it from scripts/package-deb",
    );
    assert!(Path::new(&deb).is_file(), "MEMSTAT_DEB={deb}: no such file");
    common::require_tool("/usr/sbin/snmpd");
    common::require_tool("snmpwalk");
    common::require_tool("systemd-analyze");
    common::require_tool("setpriv");
    let base_mibs = common::base_mibs();

    // The machine must not have any of it yet, or "as before" could not be checked.
    let files = package_files(&deb);
    for must_have in [
        BINARY,
        CONFIG,
        UNIT,
        "/usr/share/snmp/mibs/MEMSTAT-MIB.txt",
        TRAPHANDLE,
    ] {
        assert!(
            files.iter().any(|f| f == Path::new(must_have)),
            "the package does not contain {must_have}: {files:?}"
        );
    }
    for doc in [
        "snmpd.conf.memstat",
        "cacti/memstat_memtypetable.xml",
        "cacti/cacti_graph_template_memstat_kernel_memory_by_kind.xml",
        "librenms/memstat-sensors.yaml",
        "librenms/memstat-kernel-sensors.yaml",
        "cacti/cacti_graph_template_memstat_zfs_arc.xml",
        "librenms/memstat-arc-sensors.yaml",
        "prometheus/generator.yml",
        "zabbix/memstat-agentx.yaml",
        "zabbix/README.md",
        "copyright",
        "changelog.Debian.gz",
    ] {
        let p = PathBuf::from("/usr/share/doc/memstat-agentx").join(doc);
        assert!(files.contains(&p), "the package does not contain {p:?}");
    }
    assert!(
        files.iter().any(|f| f.starts_with("/usr/share/man/man8")),
        "no manual page in {files:?}"
    );
    let before = MachineState::read();
    assert_eq!(
        before.dpkg_status, "",
        "{PACKAGE} is already known to dpkg here: purge it first (dpkg -P {PACKAGE})"
    );
    assert!(
        getent("passwd", "memstat").is_none() && getent("group", "memstat").is_none(),
        "a user or group memstat already exists here; remove it first (deluser --system memstat)"
    );
    assert!(!before.state_dir_exists, "{STATE_DIR} already exists here");
    for f in &files {
        assert!(!f.exists(), "{f:?} already exists here");
    }

    let _purge = PurgeOnDrop;
    must_dpkg(&["-i", &deb]);
    assert_eq!(dpkg_status(), "install ok installed");

    // The service user and group, system accounts; the user's primary group is memstat.
    let user = getent("passwd", "memstat").expect("dpkg -i created no user memstat");
    let group = getent("group", "memstat").expect("dpkg -i created no group memstat");
    let uid: u32 = user[2].parse().unwrap();
    let gid: u32 = group[2].parse().unwrap();
    assert!(uid < 1000, "memstat is not a system user: {user:?}");
    assert_eq!(
        user[3], group[2],
        "memstat's primary group: {user:?} {group:?}"
    );
    assert_eq!(user[6], "/usr/sbin/nologin", "memstat's shell: {user:?}");
    // The state directory: memstat's, 0750.
    let meta = std::fs::metadata(STATE_DIR).expect("dpkg -i created no state directory");
    assert!(meta.is_dir());
    assert_eq!((meta.uid(), meta.gid()), (uid, gid), "{STATE_DIR} owner");
    assert_eq!(
        meta.permissions().mode() & 0o7777,
        0o750,
        "{STATE_DIR} mode"
    );
    // The configuration is a conffile; nothing is enabled or started; snmpd.conf untouched.
    let conffiles = must("dpkg-query", &["-W", "-f=${Conffiles}", PACKAGE]);
    assert!(conffiles.contains(CONFIG), "conffiles: {conffiles}");
    assert!(
        !Path::new(ENABLED_LINK).exists(),
        "dpkg -i enabled the unit"
    );
    assert_eq!(
        MachineState::read().snmpd_conf,
        before.snmpd_conf,
        "dpkg -i changed /etc/snmp/snmpd.conf"
    );
    // (Other memstat-agentx processes, from a build tree, may run here: only the installed
    // binary counts.)
    let running = run("pgrep", &["-f", &format!("^{BINARY}( |$)")]);
    assert!(
        !running.status.success(),
        "dpkg -i started memstat-agentx: {}",
        text(&running)
    );

    // The installed unit passes systemd's own check (its binary and man page exist now).
    let o = run("systemd-analyze", &["verify", UNIT]);
    assert!(
        o.status.success() && text(&o).trim().is_empty(),
        "systemd-analyze verify {UNIT}:\n{}",
        text(&o)
    );

    // Run it as the installed unit does: its ExecStart, as its User=/Group=, with its
    // ambient capability and bounding set and no_new_privs, against a private snmpd whose
    // socket the group memstat may reach (the agentXPerms of the shipped snmpd.conf lines).
    let unit_text = std::fs::read_to_string(UNIT).unwrap();
    let unit = unit_settings(&unit_text);
    let exec: Vec<&str> = unit["ExecStart"].split_whitespace().collect();
    assert_eq!(exec[0], BINARY, "ExecStart: {exec:?}");
    assert_eq!(unit["User"], "memstat");
    assert_eq!(unit["Group"], "memstat");
    assert_eq!(unit["NoNewPrivileges"], "yes");
    let caps = |key: &str| -> String {
        unit[key]
            .split_whitespace()
            .map(|c| format!("+{}", c.trim_start_matches("CAP_").to_lowercase()))
            .collect::<Vec<_>>()
            .join(",")
    };
    let ambient = caps("AmbientCapabilities");
    let bounding = format!("-all,{}", caps("CapabilityBoundingSet"));

    let dir = tempfile::tempdir().unwrap();
    // memstat must reach the socket inside the test's directory.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let snmpd = Snmpd::start_with_perms(dir.path(), Transport::Unix, "0660 0755 root memstat");
    // Point the installed configuration at that master, as an administrator would: the
    // daemon gets no --agentx-socket, so serving at all shows that it read this file.
    let shipped = std::fs::read_to_string(CONFIG).unwrap();
    let default_line = "\nagentx-socket = \"/var/agentx/master\"\n";
    assert!(shipped.contains(default_line), "{CONFIG}:\n{shipped}");
    let edited = shipped.replace(
        default_line,
        &format!("\nagentx-socket = \"{}\"\n", snmpd.agentx),
    );
    std::fs::write(CONFIG, edited).unwrap();
    // The installed binary's own check agrees (as root, given the user it runs as, like the
    // rc.d script's prestart check).
    let check = must(BINARY, &["check-config", "--user", "memstat"]);
    assert!(
        check.contains(&format!("agentx-socket = \"{}\"", snmpd.agentx)),
        "check-config did not read {CONFIG}:\n{check}"
    );
    // `top` runs the live view's own program, /usr/bin/memstat-top, from /usr/sbin: one frame
    // of the slab caches in batch mode.
    let frame = must(BINARY, &["top", "-b", "-n", "1", "--top", "3"]);
    assert!(
        frame.contains("memstat-agentx top: frame 1 of 1") && frame.contains("INUSE-BYTES"),
        "memstat-agentx top through the installed memstat-top:\n{frame}"
    );
    // The installed traphandle for Zabbix runs as snmptrapd runs it: a notification on stdin,
    // the SNMPTrapperFile as its argument.
    let trapper_file = dir.path().join("snmptraps.log");
    let mut handler = Command::new(TRAPHANDLE)
        .arg(&trapper_file)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{TRAPHANDLE}: {e}"));
    handler
        .stdin
        .take()
        .unwrap()
        .write_all(b"host\nUDP: [192.0.2.7]:1024->[127.0.0.1]:162\n.1.3.6.1.6.3.1.1.4.1.0 .1.3.6.1.4.1.32473.1.0.4\n")
        .unwrap();
    assert!(handler.wait().unwrap().success(), "{TRAPHANDLE} failed");
    let record = std::fs::read_to_string(&trapper_file).unwrap();
    assert!(
        record.contains(" ZBXTRAP 192.0.2.7\n") && record.contains(".1.3.6.1.4.1.32473.1.0.4"),
        "{TRAPHANDLE} wrote {record:?}"
    );
    let log = dir.path().join("installed-daemon.log");
    let log_file = std::fs::File::create(&log).unwrap();
    let mut daemon = KillOnDrop(
        Command::new("setpriv")
            .arg(format!("--reuid={}", unit["User"]))
            .arg(format!("--regid={}", unit["Group"]))
            .arg("--init-groups")
            .arg(format!("--inh-caps={ambient}"))
            .arg(format!("--ambient-caps={ambient}"))
            .arg(format!("--bounding-set={bounding}"))
            .arg("--no-new-privs")
            .args(&exec)
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().unwrap())
            .stderr(log_file)
            .spawn()
            .expect("start the installed memstat-agentx under setpriv"),
    );
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let o = common::snmp_cmd(
            "snmpget",
            snmpd.port,
            &["-t", "0.5", "-r", "0"],
            &[&format!("{ROOT}.1.1.7.0")],
        );
        if o.status.success() && String::from_utf8_lossy(&o.stdout).contains("STRING") {
            break;
        }
        if let Some(status) = daemon.0.try_wait().unwrap() {
            panic!("the installed daemon exited with {status}:\n{}", log_text());
        }
        assert!(
            Instant::now() < deadline,
            "the installed daemon did not register:\n{}",
            log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // It runs as memstat.
    let status = std::fs::read_to_string(format!("/proc/{}/status", daemon.0.id())).unwrap();
    let uid_line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    assert!(
        uid_line
            .split_whitespace()
            .skip(1)
            .all(|u| u == uid.to_string()),
        "the daemon is not running as memstat: {uid_line}"
    );

    // Walk memTypeTable by name, with the installed MIB and the base MIBs only.
    let mibs = format!("{MIB_DIR}:{base_mibs}");
    let walk = Command::new("snmpwalk")
        .args(["-v2c", "-c", "public", "-M", &mibs, "-m", "MEMSTAT-MIB"])
        .arg(format!("127.0.0.1:{}", snmpd.port))
        .arg("MEMSTAT-MIB::memTypeTable")
        .env_remove("MIBS")
        .env_remove("MIBDIRS")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&walk.stdout);
    assert!(
        walk.status.success(),
        "snmpwalk failed: {}",
        String::from_utf8_lossy(&walk.stderr)
    );
    let names: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("MEMSTAT-MIB::memTypeName."))
        .filter_map(|l| l.split("STRING: ").nth(1))
        .map(|n| n.trim_matches('"'))
        .collect();
    let kernel = kernel_slab_names();
    assert!(!kernel.is_empty(), "/proc/slabinfo lists no cache");
    for name in &kernel {
        assert!(
            names.contains(&name.as_str()),
            "slab cache {name} is not in the walk:\n{out}"
        );
    }
    assert!(
        out.contains("MEMSTAT-MIB::memTypeAllocator.1 = INTEGER: slab(3)"),
        "{out}"
    );
    assert!(
        out.contains("MEMSTAT-MIB::memTypeInUseBytes.1 = Counter64: "),
        "{out}"
    );

    // The state directory works for it: the row indexes are saved there, as memstat.
    let state_file = Path::new(STATE_DIR).join(memstat_agentx::index::STATE_FILE);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !state_file.exists() {
        assert!(
            Instant::now() < deadline,
            "no {state_file:?} after the walk:\n{}",
            log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(std::fs::metadata(&state_file).unwrap().uid(), uid);
    let _ = Command::new("kill")
        .args(["-TERM", &daemon.0.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(5);
    let exit = loop {
        if let Some(s) = daemon.0.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "no exit on SIGTERM:\n{}",
            log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        exit.success(),
        "the daemon exited with {exit}:\n{}",
        log_text()
    );
    drop(daemon);
    let snmpd_agentx = snmpd.agentx.clone();
    drop(snmpd);

    // Installing it again (what an upgrade runs: postinst configure with the old version)
    // keeps the user, the state and the administrator's configuration.
    must_dpkg(&["-i", &deb]);
    let again = getent("passwd", "memstat").expect("reinstalling removed the user");
    assert_eq!(again, user, "reinstalling changed the user");
    assert!(state_file.exists(), "reinstalling lost {state_file:?}");
    let meta = std::fs::metadata(STATE_DIR).unwrap();
    assert_eq!(
        (meta.uid(), meta.gid(), meta.permissions().mode() & 0o7777),
        (uid, gid, 0o750)
    );
    assert!(
        std::fs::read_to_string(CONFIG)
            .unwrap()
            .contains(&snmpd_agentx),
        "reinstalling replaced the edited {CONFIG}"
    );

    // Purge: the user, the group, the state directory (with the daemon's state in it) and
    // every file, the edited configuration included, go, and the machine is as before.
    must_dpkg(&["-P", PACKAGE]);
    assert!(
        getent("passwd", "memstat").is_none(),
        "dpkg -P left the user memstat"
    );
    assert!(
        getent("group", "memstat").is_none(),
        "dpkg -P left the group memstat"
    );
    assert!(!Path::new(STATE_DIR).exists(), "dpkg -P left {STATE_DIR}");
    for f in &files {
        assert!(!f.exists(), "dpkg -P left {f:?}");
    }
    assert_eq!(
        MachineState::read(),
        before,
        "the machine differs after dpkg -P"
    );
}
