//! Standard output and standard error that cannot be written (a pipe whose reader has exited,
//! a closed descriptor) never panic the daemon, `dump` or `check-config` (exit status 101).

mod common;

use common::*;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A descriptor whose reader has exited: writes fail with EPIPE (Rust ignores SIGPIPE).
fn broken() -> Stdio {
    let (ours, peer) = UnixStream::pair().unwrap();
    drop(peer);
    Stdio::from(OwnedFd::from(ours))
}

/// Runs the binary with stdout and/or stderr broken (the other one captured).
fn run_broken(args: &[&str], out_broken: bool, err_broken: bool) -> (ExitStatus, String) {
    let mut cmd = Command::new(bin());
    cmd.args(args).stdin(Stdio::null());
    cmd.stdout(if out_broken { broken() } else { Stdio::piped() });
    cmd.stderr(if err_broken { broken() } else { Stdio::piped() });
    let o = cmd.output().unwrap();
    let text = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_ne!(o.status.code(), Some(101), "panicked: {text}");
    (o.status, text)
}

/// Runs the binary with stdout (`>&-`) or stderr (`2>&-`) closed, through sh.
fn run_closed(redirect: &str, args: &[&str]) -> ExitStatus {
    let st = Command::new("sh")
        .arg("-c")
        .arg(format!("exec \"$0\" \"$@\" {redirect}"))
        .arg(bin())
        .args(args)
        .stdin(Stdio::null())
        .status()
        .unwrap();
    assert_ne!(st.code(), Some(101), "panicked with {redirect}");
    st
}

fn fixture(dir: &std::path::Path) -> String {
    let fix = dir.join("fixture.json");
    write_fixture(&fix, sample_types());
    format!("fixture:{}", fix.display())
}

#[test]
fn check_config_and_dump_do_not_panic_on_broken_output() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.toml");
    std::fs::write(&good, "").unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "max-age = \"x\"\n").unwrap();
    let (g, b) = (good.to_str().unwrap(), bad.to_str().unwrap());
    let src = fixture(dir.path());

    // A reader that went away chose to stop reading (`| head`): success, as before.
    let (st, err) = run_broken(&["check-config", "--config", g], true, false);
    assert!(st.success(), "{st}: {err}");
    let (st, err) = run_broken(&["dump", "--source", &src], true, false);
    assert!(st.success(), "{st}: {err}");
    let (st, err) = run_broken(&["dump", "--source", &src, "--format", "json"], true, false);
    assert!(st.success(), "{st}: {err}");
    // Errors with stderr broken: the message is lost, the status still says so.
    let (st, _) = run_broken(&["check-config", "--config", b], false, true);
    assert_eq!(st.code(), Some(1));
    let (st, _) = run_broken(&["check-config", "--config", b], true, true);
    assert_eq!(st.code(), Some(1));
    let (st, _) = run_broken(&["dump", "--source", "fixture:/nonexistent"], true, true);
    assert_eq!(st.code(), Some(1));
    // The final error print of `run`, with stderr (and so the log) broken. Its state
    // directory is the test's: the default one is the installed package's (tests/deb_install.rs).
    let state = dir.path().join("state");
    let state = state.to_str().unwrap();
    let (st, _) = run_broken(
        &[
            "run",
            "--config",
            g,
            "--state-dir",
            state,
            "--agentx-socket",
            "tcp:nohost",
        ],
        true,
        true,
    );
    assert_eq!(st.code(), Some(1));

    // Closed descriptors.
    assert!(run_closed(">&-", &["check-config", "--config", g]).success());
    assert!(run_closed(">&-", &["dump", "--source", &src]).success());
    assert_eq!(
        run_closed("2>&-", &["check-config", "--config", b]).code(),
        Some(1)
    );
    assert_eq!(
        run_closed(">&- 2>&-", &["dump", "--source", "fixture:/x"]).code(),
        Some(1)
    );
}

/// The daemon logs to a stderr whose reader (a log collector) has exited: it keeps serving,
/// and SIGTERM ends it normally.
#[test]
fn daemon_keeps_serving_with_a_dead_log_reader() {
    let dir = tempfile::tempdir().unwrap();
    let src = fixture(dir.path());
    let snmpd = Snmpd::start(dir.path(), Transport::Unix);
    let config = dir.path().join("empty.toml");
    std::fs::write(&config, "").unwrap();
    let mut child = Command::new(bin())
        .args(["run", "--config"])
        .arg(&config)
        .args(["--agentx-socket", &snmpd.agentx, "--source", &src])
        .args(["--state-dir", dir.path().join("state").to_str().unwrap()])
        .args(["--log-level", "debug", "--log-target", "stderr"])
        .stdin(Stdio::null())
        .stdout(broken())
        .stderr(broken())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + PATIENCE;
    let lines = loop {
        if let Some(st) = child.try_wait().unwrap() {
            panic!("the daemon exited with {st} (101 is a panic)");
        }
        let o = snmp_cmd(
            "snmpbulkwalk",
            snmpd.port,
            &["-t", "0.5", "-r", "0"],
            &[ROOT],
        );
        let lines = parse_lines(&String::from_utf8_lossy(&o.stdout));
        if o.status.success() && lines.len() > 10 {
            break lines;
        }
        assert!(Instant::now() < deadline, "the daemon never served");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(lines.iter().any(|l| l.oid.starts_with(TYPE_ENTRY)));
    // Debug logging of every request went nowhere meanwhile; it still runs and serves.
    let o = snmp_cmd("snmpbulkwalk", snmpd.port, &["-t", "1"], &[ROOT]);
    assert!(o.status.success());
    assert!(child.try_wait().unwrap().is_none(), "the daemon exited");
    // SAFETY: signalling our own child.
    assert_eq!(
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) },
        0
    );
    // A hang is what is looked for here, not how long the exit takes: that is
    // tests/ops.rs's deadline_sigterm_exits_zero_within_a_second, run alone.
    let deadline = Instant::now() + PATIENCE;
    let st = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < deadline, "still running after SIGTERM");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_ne!(st.code(), Some(101), "panicked");
    assert_eq!(st.signal(), None);
    assert!(st.success(), "{st}");
}
