//! The README's set-up by hand on Linux, run as written: each line of its block, in a
//! temporary root that stands for `/`, with Debian's own snmpd.conf (the one the snmpd
//! package installs) and a private snmpd. It must end in a walk by name.
//!
//! What cannot run inside a test is stood in for, and only that: the `useradd` line is checked
//! for its form (safe to run twice), and the `systemctl` line (re)starts the installed daemon
//! with the installed configuration file and snmpd with the installed snmpd.conf, as the unit
//! and the service would (the daemon as the test's user, with a fixture as its source). Every
//! `install` line runs as written with its destination under the root, its condition too;
//! the check at the end runs once, as written, with `localhost` made the private snmpd's
//! address: it waits for the daemon itself. A line of another kind fails the test, so that the
//! README cannot grow a step this test does not run. The block runs twice: the second time
//! keeps the configuration file the user edited, and restarts both services.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const MANIFEST: &str = env!("CARGO_MANIFEST_DIR");
/// Debian's snmpd.conf, as the snmpd package installs it.
const DEBIAN_SNMPD_CONF: &str = "/etc/snmp/snmpd.conf";

/// The lines of the README's "By hand on Linux (systemd)" block.
fn by_hand_lines() -> Vec<String> {
    let readme = std::fs::read_to_string(Path::new(MANIFEST).join("README.md")).unwrap();
    let section = readme
        .split("### By hand on Linux (systemd)")
        .nth(1)
        .expect("the README has no section \"By hand on Linux (systemd)\"");
    let block = section
        .split("```sh\n")
        .nth(1)
        .expect("the section has no sh block");
    block
        .split("\n```")
        .next()
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(String::from)
        .collect()
}

/// The directories Debian has, under `root`.
fn debian_tree(root: &Path) {
    for d in [
        "usr/sbin",
        "usr/bin",
        "usr/share/man/man1",
        "usr/share/man/man8",
        "usr/share/snmp/mibs",
        "etc/systemd/system",
        "etc/snmp/snmpd.conf.d",
        "var/agentx",
    ] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
}

/// `path` under `root`.
fn under(root: &Path, path: &str) -> PathBuf {
    root.join(path.trim_start_matches('/'))
}

/// Runs an `install` line: its sources from the checkout (`target/release/` is the build this
/// test runs), its destination under `root`.
fn install(line: &str, root: &Path) {
    let mut words: Vec<String> = line.split_whitespace().map(String::from).collect();
    assert_eq!(words[0], "install", "{line}");
    let dest = words.pop().unwrap();
    assert!(
        dest.starts_with('/'),
        "{line}: the destination is not absolute"
    );
    let built = Path::new(common::bin())
        .parent()
        .unwrap()
        .display()
        .to_string();
    let args: Vec<String> = words[1..]
        .iter()
        .map(|w| w.replace("target/release", &built))
        .collect();
    let target = under(root, &dest);
    let out = Command::new("install")
        .args(&args)
        .arg(&target)
        .current_dir(MANIFEST)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{line}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What `systemctl restart snmpd` and `systemctl enable --now memstat-agentx` start: snmpd
/// with the installed snmpd.conf, on a private port, and the installed daemon with the
/// installed configuration. Paths the files name are taken under `root`.
fn start_services(root: &Path, dir: &Path) -> (KillOnDrop, KillOnDrop, u16) {
    assert!(
        under(root, "/etc/systemd/system/memstat-agentx.service").exists(),
        "the unit was not installed"
    );
    // snmpd.conf as Debian ships it, but for where it listens (a private port, given on the
    // command line) and where it includes from (the root's snmpd.conf.d).
    let conf = under(root, "/etc/snmp/snmpd.conf");
    let debian = std::fs::read_to_string(&conf).unwrap();
    let include = format!(
        "includeDir {}",
        under(root, "/etc/snmp/snmpd.conf.d").display()
    );
    let ours: String = debian
        .lines()
        .map(|l| {
            if l.starts_with("agentaddress") {
                format!("# {l}")
            } else if l.starts_with("includeDir /etc/snmp/snmpd.conf.d") {
                include.clone()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        ours.contains(&include),
        "Debian's snmpd.conf has no includeDir:\n{debian}"
    );
    std::fs::write(&conf, ours + "\n").unwrap();
    // The snippet's socket, under the root.
    let snippet = under(root, "/etc/snmp/snmpd.conf.d/memstat-agentx.conf");
    let text = std::fs::read_to_string(&snippet).expect("the snippet was not installed");
    let socket = under(root, "/var/agentx/master");
    std::fs::write(
        &snippet,
        text.replace("/var/agentx/master", &socket.display().to_string()),
    )
    .unwrap();

    let port = free_port();
    std::fs::create_dir_all(dir.join("persist")).unwrap();
    let snmpd = KillOnDrop(
        Command::new("/usr/sbin/snmpd")
            .args(["-f", "-Lf"])
            .arg(dir.join("snmpd.log"))
            .arg("-C")
            .arg("-c")
            .arg(&conf)
            .arg("-p")
            .arg(dir.join("snmpd.pid"))
            .arg(format!("udp:127.0.0.1:{port}"))
            .env("SNMP_PERSISTENT_DIR", dir.join("persist"))
            .env("MIBS", "")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start snmpd"),
    );
    let fixture = dir.join("fixture.json");
    write_fixture(&fixture, sample_types());
    let daemon = KillOnDrop(
        Command::new(under(root, "/usr/sbin/memstat-agentx"))
            .arg("run")
            .arg("--config")
            .arg(under(root, "/etc/memstat-agentx.toml"))
            .arg("--agentx-socket")
            .arg(format!("unix:{}", socket.display()))
            .arg("--source")
            .arg(format!("fixture:{}", fixture.display()))
            .arg("--state-dir")
            .arg(dir.join("state"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("daemon.log")).unwrap())
            .spawn()
            .expect("start the installed memstat-agentx"),
    );
    (snmpd, daemon, port)
}

#[test]
#[ignore = "needs root: Debian's snmpd.conf is mode 0640 (scripts/test runs it as root)"]
fn needs_root_the_readmes_set_up_by_hand_ends_in_a_walk_by_name() {
    require_tool("/usr/sbin/snmpd");
    need("snmpwalk", "snmp");
    assert!(
        Path::new(DEBIAN_SNMPD_CONF).exists(),
        "{DEBIAN_SNMPD_CONF} is missing: apt-get install -y snmpd (.ci/run installs it)"
    );
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    debian_tree(&root);
    std::fs::copy(DEBIAN_SNMPD_CONF, under(&root, DEBIAN_SNMPD_CONF)).unwrap();

    let lines = by_hand_lines();
    let mut services = None;
    let mut walked = None;
    let config = under(&root, "/etc/memstat-agentx.toml");
    // Twice: the steps are safe to run again.
    for round in 0..2 {
        if round == 1 {
            // The user's edit of the configuration file survives the second run.
            let mut text = std::fs::read_to_string(&config).unwrap();
            text.push_str("\n# edited by the user\n");
            std::fs::write(&config, text).unwrap();
        }
        for line in &lines {
            let line = line.replace("sudo ", "");
            if line.starts_with("id memstat ") {
                assert!(
                    line.starts_with("id memstat >/dev/null 2>&1 || useradd --system "),
                    "the user is created only when missing: {line}"
                );
            } else if line.starts_with("install ") {
                install(&line, &root);
            } else if let Some(rest) = line.strip_prefix("[ -e ") {
                // `[ -e FILE ] || install ...`: installed only when missing.
                let (file, command) = rest
                    .split_once(" ] || ")
                    .unwrap_or_else(|| panic!("{line}: not `[ -e FILE ] || COMMAND`"));
                if !under(&root, file).exists() {
                    install(command, &root);
                }
            } else if line.starts_with("systemctl ") {
                for step in [
                    "daemon-reload",
                    "restart snmpd",
                    "enable memstat-agentx",
                    "restart memstat-agentx",
                ] {
                    assert!(
                        line.contains(&format!("systemctl {step}")),
                        "{line}: {step}"
                    );
                }
                // Both restarted: the old ones stop before the new ones start.
                drop(services.take());
                services = Some(start_services(&root, dir.path()));
            } else if line.starts_with("for ") && line.contains("snmpwalk ") {
                let (_, _, port) = services.as_ref().expect("walked before starting");
                let line = line.replace(" localhost ", &format!(" 127.0.0.1:{port} "));
                // The root's MIB directory stands for /usr/share/snmp/mibs.
                let mibdirs = format!(
                    "{}:/usr/share/snmp/mibs",
                    under(&root, "/usr/share/snmp/mibs").display()
                );
                // Once: the line waits for the daemon to register itself.
                let out = Command::new("bash")
                    .args(["-c", &line])
                    .current_dir(MANIFEST)
                    .env("MIBDIRS", &mibdirs)
                    .output()
                    .unwrap();
                let text = String::from_utf8_lossy(&out.stdout).into_owned();
                assert!(
                    text.contains("MEMSTAT-MIB::memSrcName.1 = STRING: fixture:"),
                    "round {round}: {line}\n{text}{}\ndaemon: {}\nsnmpd: {}",
                    String::from_utf8_lossy(&out.stderr),
                    std::fs::read_to_string(dir.path().join("daemon.log")).unwrap_or_default(),
                    std::fs::read_to_string(dir.path().join("snmpd.log")).unwrap_or_default()
                );
                walked = Some(text);
            } else {
                panic!("the README's by-hand block has a line this test does not run: {line}");
            }
        }
    }
    assert!(walked.is_some(), "the block has no check walk");
    assert!(
        std::fs::read_to_string(&config)
            .unwrap()
            .contains("# edited by the user"),
        "the second run overwrote the configuration file"
    );
    // Everything the block installs is in place.
    for path in [
        "/usr/sbin/memstat-agentx",
        "/usr/bin/memstat-top",
        "/usr/share/man/man8/memstat-agentx.8",
        "/usr/share/man/man1/memstat-top.1",
        "/usr/share/snmp/mibs/MEMSTAT-MIB.txt",
        "/etc/memstat-agentx.toml",
    ] {
        assert!(under(&root, path).exists(), "{path} was not installed");
    }
}
