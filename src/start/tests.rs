//! Start-up's steps, each on its own: the state directory as `run` opens it, `check-config`'s
//! verdict, and the signals as controls (fed by the test, not sent to the process).

use super::*;
use crate::memstat::{fixture, Allocator, MemoryType, Snapshot};
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;
use tokio::sync::mpsc;

fn fixture_file(dir: &Path) -> PathBuf {
    let p = dir.join("f.json");
    let snap = Snapshot::new(
        0,
        std::time::SystemTime::now(),
        String::new(),
        vec![MemoryType::new(Allocator::Uma, "z")],
    );
    std::fs::write(&p, fixture::to_json(&snap)).unwrap();
    p
}

/// Settings from a file in `dir`: a fixture source, the state directory and the AgentX
/// socket under `dir`, and `extra` lines.
fn settings_file(dir: &Path, extra: &str) -> SettingArgs {
    let fixture = fixture_file(dir);
    let file = dir.join("memstat-agentx.toml");
    std::fs::write(
        &file,
        format!(
            "source = \"fixture:{}\"\nstate-dir = \"{}\"\nagentx-socket = \"{}\"\n{extra}",
            fixture.display(),
            dir.join("state").display(),
            dir.join("master").display(),
        ),
    )
    .unwrap();
    SettingArgs {
        config: Some(file),
        raw: RawSettings::default(),
    }
}

#[test]
fn open_state_creates_the_directory_and_holds_it() {
    let dir = tempfile::tempdir().unwrap();
    let state_dir = dir.path().join("a/b");
    let state = open_state(&state_dir).expect("usable");
    assert!(state.lock.is_some() && state.problem.is_none(), "{state:?}");
    let mode = std::fs::metadata(&state_dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o750);
    // A second daemon on the same directory is refused while the first holds it.
    match open_state(&state_dir) {
        Err(StartError::StateBusy(e)) => {
            assert!(e.contains("in use by another memstat-agentx"), "{e}")
        }
        other => panic!("{other:?}"),
    }
    drop(state);
    assert!(
        open_state(&state_dir).is_ok(),
        "free again once the first is gone"
    );
}

#[test]
fn an_unsafe_state_directory_is_served_without_persisting() {
    let dir = tempfile::tempdir().unwrap();
    let state_dir = dir.path().join("state");
    std::fs::create_dir(&state_dir).unwrap();
    std::fs::set_permissions(&state_dir, std::fs::Permissions::from_mode(0o770)).unwrap();
    let state = open_state(&state_dir).expect("not fatal");
    assert!(state.lock.is_none());
    match state.problem {
        Some(StateDirProblem::Unsafe(e)) => assert!(e.contains("writable by its group"), "{e}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_state_file_over_its_cap_is_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let state_dir = dir.path().join("state");
    std::fs::create_dir(&state_dir).unwrap();
    std::fs::set_permissions(&state_dir, std::fs::Permissions::from_mode(0o750)).unwrap();
    // Sparse: the size is what counts.
    let file = std::fs::File::create(state_dir.join(crate::index::STATE_FILE)).unwrap();
    file.set_len(crate::index::STATE_FILE_CAP + 1).unwrap();
    match open_state(&state_dir) {
        Err(e @ StartError::StateFile(_)) => {
            assert!(e.to_string().contains(crate::index::STATE_FILE), "{e}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn check_config_prints_the_settings_and_warns_of_what_run_tolerates() {
    let dir = tempfile::tempdir().unwrap();
    let args = settings_file(dir.path(), "max-age = 7\n");
    let checked = check_config(&args, None, None).expect("run would start");
    assert!(
        checked.effective.contains("max-age = 7"),
        "{}",
        checked.effective
    );
    let warnings = checked.warnings.join("\n");
    assert!(
        warnings.contains("does not exist: run creates it"),
        "{warnings}"
    );
    assert!(
        warnings.contains("the AgentX socket") && warnings.contains("does not exist (yet)"),
        "{warnings}"
    );
}

#[test]
fn check_config_says_which_file_it_read() {
    let dir = tempfile::tempdir().unwrap();
    let args = settings_file(dir.path(), "");
    let checked = check_config(&args, None, None).expect("run would start");
    let file = args.config.as_ref().unwrap();
    let mut lines = checked.effective.lines();
    assert_eq!(
        lines.next(),
        Some("# memstat-agentx: effective configuration")
    );
    assert_eq!(
        lines.next(),
        Some(format!("# read from {}", file.display()).as_str())
    );
    // Without --config, and without the default file, it says it read none.
    assert!(read_from(None).starts_with(&format!(
        "# no configuration file ({DEFAULT_CONFIG_PATH} does not exist"
    )));
}

/// A source that cannot be opened is blamed on where `source` was set, as any other wrong
/// value is: the file and line, or the option.
#[test]
fn a_source_that_cannot_be_opened_names_where_it_was_set() {
    let dir = tempfile::tempdir().unwrap();
    let args = settings_file(dir.path(), "");
    let file = args.config.clone().unwrap();
    std::fs::write(
        &file,
        format!(
            "state-dir = \"{}\"\nsource = \"linux:/nonexistent/slabinfo\"\n",
            dir.path().join("state").display()
        ),
    )
    .unwrap();
    let e = check_config(&args, None, None).expect_err("the source cannot be opened");
    let text = e.to_string();
    assert!(
        text.starts_with(&format!(
            "{}:2: key `source`: /nonexistent/slabinfo",
            file.display()
        )),
        "{text}"
    );
    let mut raw = RawSettings::default();
    raw.set_arg("source", "linux:/nonexistent/slabinfo".into());
    let args = SettingArgs {
        config: Some(PathBuf::from("/dev/null")),
        raw,
    };
    let text = check_config(&args, None, None)
        .expect_err("cannot be opened")
        .to_string();
    assert!(
        text.starts_with("command line: option `--source`: /nonexistent/slabinfo"),
        "{text}"
    );
}

#[test]
fn check_config_refuses_what_run_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let args = settings_file(dir.path(), "max-age = -1\n");
    assert!(matches!(
        check_config(&args, None, None),
        Err(StartError::Config(_))
    ));
    let args = settings_file(dir.path(), "");
    match check_config(&args, Some("no-such-user-here"), None) {
        Err(e @ StartError::RunAs(_)) => assert!(e.to_string().starts_with("--run-as: "), "{e}"),
        other => panic!("{other:?}"),
    }
}

/// The controls `controls` sends for `signals`, with the settings file rewritten to `then`
/// before the signals (the daemon started with `first`).
async fn controls_for(first: &str, then: &str, signals: &[Signal]) -> Vec<Control> {
    let dir = tempfile::tempdir().unwrap();
    let args = settings_file(dir.path(), first);
    let (started, _) = args.load().unwrap();
    settings_file(dir.path(), then);
    let (sig_tx, sig_rx) = mpsc::channel(8);
    let (tx, mut rx) =
        crate::daemon::controls::control_channel(crate::doorbell::Doorbell::new(), 8);
    let task = tokio::spawn(controls(sig_rx, args, started, tx));
    let mut got = Vec::new();
    for &s in signals {
        sig_tx.send(s).await.unwrap();
        if s == Signal::Hangup {
            // A reload's file is read on a thread: its outcome comes before the next
            // signal is sent, or never (a refused file sends nothing).
            match tokio::time::timeout(Duration::from_secs(30), rx.recv()).await {
                Ok(Some(c)) => got.push(c),
                Ok(None) => break,
                Err(_) => panic!("no answer to the Hangup within 30 s"),
            }
        }
    }
    drop(sig_tx);
    while let Some(c) = rx.recv().await {
        got.push(c);
    }
    task.await.unwrap();
    got
}

#[tokio::test(flavor = "current_thread")]
async fn a_hangup_reloads_and_a_terminate_shuts_down() {
    let got = controls_for(
        "max-age = 5\n",
        "max-age = 9\n",
        &[Signal::Hangup, Signal::Terminate],
    )
    .await;
    match got.as_slice() {
        [Control::Reload(_, a), Control::Shutdown] => {
            assert_eq!(a.max_age, Duration::from_secs(9))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_refused_file_keeps_the_old_settings() {
    let dir = tempfile::tempdir().unwrap();
    let (started, _) = settings_file(dir.path(), "max-age = 5\n").load().unwrap();
    let refused = settings_file(dir.path(), "max-age = -3\n").load();
    assert!(refused.is_err());
    assert!(
        reloaded(&started, &started, refused).is_none(),
        "nothing to apply"
    );
    let good = settings_file(dir.path(), "max-age = 9\n").load();
    match reloaded(&started, &started, good) {
        Some((new, Control::Reload(_, a))) => {
            assert_eq!(new.max_age, Duration::from_secs(9));
            assert_eq!(a.max_age, Duration::from_secs(9));
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "current_thread")]
async fn the_signals_ending_is_a_shutdown() {
    let got = controls_for("", "", &[]).await;
    assert!(matches!(got.as_slice(), [Control::Shutdown]), "{got:?}");
}
