//! `memstat-top --snmp`: MEMSTAT-MIB read from the private snmpd of the harness, which
//! serves the daemon's fixture, with v2c and with an SNMPv3 user (authPriv, SHA and AES) added
//! to that snmpd's configuration; and the one-line errors of a host that cannot be read.

#[path = "support/allocinfo_text.rs"]
mod allocinfo_text;
mod common;
#[path = "support/memory_types.rs"]
mod memory_types;

use allocinfo_text::{replace, two_sites};
use common::*;
use memory_types::*;
use memstat_agentx::memstat::{Allocator, MemoryType};
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

const V3_USER: &str = "topv3";
const V3_AUTH: &str = "authpass123";
const V3_PRIV: &str = "privpass123";

/// The harness's snmpd, with a v3 user, and the daemon serving a fixture with a short
/// max-age, so that a changed fixture is served at the next frame.
struct Served {
    dir: tempfile::TempDir,
    snmpd: Snmpd,
    daemon: Daemon,
}

impl Served {
    fn start(types: Vec<MemoryType>) -> Served {
        let dir = tempfile::tempdir().unwrap();
        let fix = dir.path().join("fixture.json");
        write_fixture(&fix, types);
        let snmpd = Snmpd::start_with_conf(
            dir.path(),
            Transport::Unix,
            "0660 0750",
            &format!("createUser {V3_USER} SHA {V3_AUTH} AES {V3_PRIV}\nrouser {V3_USER} priv"),
        );
        let src = format!("fixture:{}", fix.display());
        let state = dir.path().join("state").display().to_string();
        // Started once the master serves its subtree.
        let daemon = Daemon::start(
            &snmpd,
            &["--source", &src, "--state-dir", &state, "--max-age", "0.5"],
        );
        Served { dir, snmpd, daemon }
    }

    fn fixture(&self) -> std::path::PathBuf {
        self.dir.path().join("fixture.json")
    }

    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.snmpd.port)
    }
}

/// `memstat-top -b -n 2 -d 2 --format json ARGS`: its two frames, with `change` made once
/// the first is printed.
fn two_frames(args: &[&str], change: impl FnOnce()) -> Vec<serde_json::Value> {
    let mut child = Command::new(bin())
        .args(["top", "-b", "-n", "2", "-d", "2", "--format", "json"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut frames = Vec::new();
    let first = lines.next().map(|l| l.unwrap()).unwrap_or_default();
    if first.is_empty() {
        let out = child.wait_with_output().unwrap();
        panic!("no frame: {}", String::from_utf8_lossy(&out.stderr));
    }
    frames.push(serde_json::from_str(&first).unwrap());
    change();
    for l in lines {
        frames.push(serde_json::from_str(&l.unwrap()).unwrap());
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    frames
}

/// The frames show the fixture's rows, then the rates of its change over the time between
/// the two snapshots' reads, with null for what a slab cache lacks.
fn check_frames(served: &Served, frames: &[serde_json::Value]) {
    assert_eq!(frames.len(), 2);
    let host = served.host();
    assert_eq!(frames[0]["source"], format!("snmp:{host}"));
    let names: Vec<&str> = frames[0]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["mbuf", "dentry"], "{}", frames[0]);
    assert_eq!(frames[0]["rows"][0]["in_use_bytes"], 100 * 256);
    assert_eq!(
        frames[0]["rows"][0]["allocs_per_sec"],
        serde_json::Value::Null
    );
    let g0 = frames[0]["generation"].as_u64().unwrap();
    let g1 = frames[1]["generation"].as_u64().unwrap();
    assert!(g1 > g0, "a new snapshot: {g0} then {g1}");
    // The interval is between the snapshots' reads (memSnapshotAge), not between frames.
    let secs = frames[1]["interval_seconds"].as_f64().unwrap();
    let taken = |f: &serde_json::Value| f["taken_at_ms"].as_u64().unwrap() as f64 / 1000.0;
    assert!(
        (secs - (taken(&frames[1]) - taken(&frames[0]))).abs() < 0.002,
        "{secs} against {} and {}",
        frames[0]["taken_at_ms"],
        frames[1]["taken_at_ms"]
    );
    let mbuf = &frames[1]["rows"][0];
    assert_eq!(mbuf["name"], "mbuf");
    let allocs = mbuf["allocs_per_sec"].as_f64().unwrap();
    assert!(
        (allocs * secs - 600.0).abs() <= 0.06 * secs + 1e-6,
        "{mbuf}"
    );
    let dentry = &frames[1]["rows"][1];
    assert_eq!(
        dentry["allocs_per_sec"],
        serde_json::Value::Null,
        "{dentry}"
    );
    let items = dentry["items_per_sec"].as_f64().unwrap();
    assert!(
        (items * secs + 20.0).abs() <= 0.06 * secs + 1e-6,
        "{dentry}"
    );
}

fn first_types() -> Vec<MemoryType> {
    vec![uma("mbuf", 100, 1000), slab("dentry", 50)]
}

fn changed_types() -> Vec<MemoryType> {
    vec![uma("mbuf", 140, 1600), slab("dentry", 30)]
}

#[test]
fn v2c_frames_show_the_served_fixture_and_its_rates() {
    let served = Served::start(first_types());
    let host = served.host();
    let frames = two_frames(&["--snmp", &host, "--community", "public"], || {
        write_fixture(&served.fixture(), changed_types())
    });
    check_frames(&served, &frames);
}

#[test]
fn v3_authpriv_frames_from_the_command_line_and_from_a_credentials_file() {
    let served = Served::start(first_types());
    let host = served.host();
    let frames = two_frames(
        &[
            "--snmp",
            &host,
            "--user",
            V3_USER,
            "--auth-protocol",
            "SHA",
            "--auth-password",
            V3_AUTH,
            "--priv-protocol",
            "AES",
            "--priv-password",
            V3_PRIV,
        ],
        || write_fixture(&served.fixture(), changed_types()),
    );
    check_frames(&served, &frames);
    // The same from a file readable by its owner only.
    write_fixture(&served.fixture(), first_types());
    let creds = served.dir.path().join("creds.toml");
    std::fs::write(
        &creds,
        format!(
            "user = \"{V3_USER}\"\nauth-protocol = \"SHA\"\nauth-password = \"{V3_AUTH}\"\n\
             priv-protocol = \"AES\"\npriv-password = \"{V3_PRIV}\"\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&creds, std::fs::Permissions::from_mode(0o600)).unwrap();
    // The fixture is back to the first types: wait until the agent serves them (a Get is
    // answered from the newest snapshot; the walks between the looks refresh it).
    let in_use_bytes = format!("{TYPE_ENTRY}.10.1");
    eventually(
        served.snmpd.port,
        "the first fixture served again",
        &served.daemon,
        std::time::Duration::from_millis(700),
        || get(served.snmpd.port, &[&in_use_bytes])[0].value == "25600",
    );
    let creds_arg = creds.display().to_string();
    let frames = two_frames(&["--snmp", &host, "--credentials", &creds_arg], || {
        write_fixture(&served.fixture(), changed_types())
    });
    check_frames(&served, &frames);
}

/// Runs `top -b -n 1 ARGS`; its exit status and standard error.
fn refused(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(bin())
        .args(["top", "-b", "-n", "1"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.stdout.is_empty(), "{args:?}: no frame");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn one_line(err: &str) {
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err:?}");
}

#[test]
fn a_wrong_community_an_unreachable_host_and_a_host_without_the_mib_are_one_line_errors() {
    let served = Served::start(first_types());
    let host = served.host();
    let (status, err) = refused(&[
        "--snmp",
        &host,
        "--community",
        "wrong",
        "--timeout",
        "0.5",
        "--retries",
        "1",
    ]);
    assert_eq!(status, Some(1), "{err}");
    assert!(
        err.contains("no answer within 0.5 s (2 attempts)") && err.contains("community"),
        "{err}"
    );
    one_line(&err);
    // Nothing listens on this port.
    let nobody = format!("127.0.0.1:{}", free_port());
    let (status, err) = refused(&["--snmp", &nobody, "--timeout", "0.5", "--retries", "0"]);
    assert_eq!(status, Some(1), "{err}");
    assert!(err.contains(&nobody), "{err}");
    one_line(&err);
    // A wrong v3 password.
    let (status, err) = refused(&[
        "--snmp",
        &host,
        "--user",
        V3_USER,
        "--auth-password",
        "wrongpass123",
        "--priv-password",
        V3_PRIV,
        "--timeout",
        "0.5",
    ]);
    assert_eq!(status, Some(1), "{err}");
    one_line(&err);
    // An snmpd without the daemon.
    let bare_dir = tempfile::tempdir().unwrap();
    let bare = Snmpd::start(bare_dir.path(), Transport::Unix);
    let (status, err) = refused(&["--snmp", &format!("127.0.0.1:{}", bare.port)]);
    assert_eq!(status, Some(1), "{err}");
    assert!(err.contains("does not serve MEMSTAT-MIB"), "{err}");
    one_line(&err);
}

#[test]
fn bad_credentials_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let creds = dir.path().join("creds.toml");
    std::fs::write(&creds, "community = \"public\"\n").unwrap();
    std::fs::set_permissions(&creds, std::fs::Permissions::from_mode(0o644)).unwrap();
    let c = creds.display().to_string();
    let cases: [(&[&str], i32, String); 6] = [
        (
            &["--snmp", "localhost", "--credentials", &c],
            1,
            format!("{c}: readable or writable by others (mode 644)"),
        ),
        (
            &["--snmp", "localhost", "--community", "a", "--user", "b"],
            2,
            "a community (v2c) or a user (v3), not both".into(),
        ),
        (
            &[
                "--snmp",
                "localhost",
                "--user",
                "u",
                "--auth-password",
                "short",
            ],
            2,
            "shorter than 8 characters".into(),
        ),
        (
            &[
                "--snmp",
                "localhost",
                "--user",
                "u",
                "--auth-password",
                "longenough",
                "--auth-protocol",
                "SHA-999",
            ],
            2,
            "auth protocol \"SHA-999\"".into(),
        ),
        (&["--community", "public"], 2, "--snmp".into()),
        (
            &["--snmp", "localhost", "--source", "auto"],
            2,
            "cannot be used with".into(),
        ),
    ];
    for (args, status, message) in cases {
        let (got, err) = refused(args);
        assert_eq!(got, Some(status), "{args:?}: {err}");
        assert!(err.contains(&message), "{args:?}: {err}");
    }
    // A mistyped key, or an unterminated string, is named by file and line, and the error
    // never shows the line itself: it may hold a password.
    for (text, hidden) in [
        (
            "user = \"u\"\nauth_password = \"hunter2hunter2\"\n",
            "hunter2hunter2",
        ),
        ("community = \"s3cret-community\n", "s3cret-community"),
    ] {
        std::fs::write(&creds, text).unwrap();
        std::fs::set_permissions(&creds, std::fs::Permissions::from_mode(0o600)).unwrap();
        let (got, err) = refused(&["--snmp", "localhost", "--credentials", &c]);
        assert_eq!(got, Some(1), "{err}");
        assert!(err.contains(&format!("{c}:")), "{err}");
        assert!(!err.contains(hidden), "the secret is on stderr: {err}");
        one_line(&err);
    }
    // Mode 600, but not TOML of the known keys: the file and the key are named.
    std::fs::write(&creds, "comunity = \"public\"\n").unwrap();
    std::fs::set_permissions(&creds, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (got, err) = refused(&["--snmp", "localhost", "--credentials", &c]);
    assert_eq!(got, Some(1), "{err}");
    assert!(err.contains(&c) && err.contains("comunity"), "{err}");
    let _ = Path::new(&c);
}

#[test]
fn call_sites_over_snmp_come_from_mem_alloc_site_table() {
    let dir = tempfile::tempdir().unwrap();
    let fix = dir.path().join("fixture.json");
    write_fixture(&fix, first_types());
    let info = dir.path().join("allocinfo");
    let write_info = |slub: i64, calls: u64| replace(&info, &two_sites(slub, calls, true));
    write_info(1_000_000, 100);
    let snmpd = Snmpd::start(dir.path(), Transport::Unix);
    let src = format!("fixture:{},allocinfo:{}", fix.display(), info.display());
    let state = dir.path().join("state").display().to_string();
    let _daemon = Daemon::start(
        &snmpd,
        &[
            "--source",
            &src,
            "--state-dir",
            &state,
            "--max-age",
            "0.5",
            "--allocinfo-min-bytes",
            "0",
        ],
    );
    let host = format!("127.0.0.1:{}", snmpd.port);
    let frames = two_frames(&["--snmp", &host, "--sites"], || write_info(1_400_000, 140));
    assert_eq!(frames[0]["profiling"], "on", "{}", frames[0]);
    let sites = frames[0]["sites"].as_array().unwrap();
    assert_eq!(sites.len(), 2, "{}", frames[0]);
    assert_eq!(sites[0]["site"], "mm/slub.c:2452");
    assert_eq!(sites[0]["function"], "alloc_slab_page");
    assert_eq!(sites[1]["module"], "ext4");
    assert_eq!(sites[0]["bytes"], 1_000_000);
    let secs = frames[1]["interval_seconds"].as_f64().expect("rates");
    let slub = &frames[1]["sites"][0];
    assert_eq!(slub["bytes"], 1_400_000, "{}", frames[1]);
    let bytes = slub["bytes_per_sec"].as_f64().unwrap();
    assert!(
        (bytes * secs - 400_000.0).abs() <= 0.06 * secs * 1000.0,
        "{}",
        frames[1]
    );
}

/// A relay between `top` and snmpd that sends each answer twice, as a network that
/// duplicates a datagram does, and as a late answer after its retry leaves one behind.
fn duplicating_relay(agent_port: u16) -> u16 {
    use std::net::UdpSocket;
    let front = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = front.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let back = UdpSocket::bind("127.0.0.1:0").unwrap();
        back.connect(("127.0.0.1", agent_port)).unwrap();
        back.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        let mut buf = vec![0u8; 65_536];
        loop {
            let Ok((n, client)) = front.recv_from(&mut buf) else {
                return;
            };
            if back.send(&buf[..n]).is_err() {
                return;
            }
            let Ok(m) = back.recv(&mut buf) else { continue };
            let _ = front.send_to(&buf[..m], client);
            let _ = front.send_to(&buf[..m], client);
        }
    });
    port
}

#[test]
fn an_answer_left_behind_in_the_socket_does_not_throw_every_later_request_off() {
    let served = Served::start(first_types());
    let relay = format!("127.0.0.1:{}", duplicating_relay(served.snmpd.port));
    // v2c only: with every datagram doubled, a v3 session's engine discovery leaves a twin
    // of its Report behind at every new session too.
    let out = Command::new(bin())
        .args([
            "top", "-b", "-n", "2", "-d", "0.5", "--format", "json", "--snmp", &relay,
        ])
        .args(["--community", "public"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let frames: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(frames.len(), 2);
    assert_eq!(frames[1]["rows"][0]["name"], "mbuf", "{}", frames[1]);
}
