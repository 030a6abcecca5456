//! `check-config` gives `run`'s verdict: every case found in issue 13 goes through both, and
//! both must accept or both refuse. `run` accepts when it gets through its start-up and
//! starts serving (it logs "serving"; with no master it then keeps trying to connect).
//! Also: the settings' one definition against the docs (man page, shipped file, --help).

mod common;

use common::*;
use memstat_agentx::config::{Reload, Rule, SETTINGS};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One configuration, as a file (or none) and options.
struct Case {
    name: &'static str,
    file: Option<&'static str>,
    args: Vec<String>,
    /// None: whichever verdict, as long as both give it (it depends on the machine).
    accept: Option<bool>,
    /// What check-config's standard error must contain.
    says: &'static str,
}

struct Verdict {
    ok: bool,
    text: String,
}

/// The file or options of a case, completed with a source, a state directory and a master
/// address that do not depend on the machine, unless the case sets them itself.
fn arguments(case: &Case, dir: &Path) -> Vec<String> {
    let good = dir.join("good.json");
    write_fixture(&good, sample_types());
    let mut args = vec!["--config".to_string()];
    match case.file {
        Some(body) if body.starts_with('@') => args.push(body[1..].to_string()),
        Some(body) => {
            let p = dir.join("memstat-agentx.toml");
            std::fs::write(&p, body).unwrap();
            args.push(p.display().to_string());
        }
        None => args.push("/dev/null".into()),
    }
    let defaults = [
        ("source", format!("fixture:{}", good.display())),
        ("state-dir", dir.join("state").display().to_string()),
        ("agentx-socket", dir.join("no-master").display().to_string()),
    ];
    for (key, value) in defaults {
        let in_file = case.file.is_some_and(|f| f.contains(key));
        let in_args = case.args.iter().any(|a| a.starts_with(&format!("--{key}")));
        if !in_file && !in_args {
            args.extend([format!("--{key}"), value]);
        }
    }
    args.extend(case.args.iter().cloned());
    args
}

fn check_config(args: &[String]) -> Verdict {
    let out = Command::new(bin())
        .arg("check-config")
        .args(args)
        .output()
        .unwrap();
    Verdict {
        ok: out.status.success(),
        text: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Starts `run`; accepted once it logs that it serves, refused if it exits first.
fn run(args: &[String], dir: &Path) -> Verdict {
    let log = dir.join("run.log");
    let mut child = Command::new(bin())
        .arg("run")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let text = || std::fs::read_to_string(&log).unwrap_or_default();
    let t0 = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.code().is_some(), "run was killed: {status}");
            return Verdict {
                ok: status.success(),
                text: text(),
            };
        }
        if text().contains(" serving ") {
            let _ = child.kill();
            let _ = child.wait();
            return Verdict {
                ok: true,
                text: text(),
            };
        }
        assert!(t0.elapsed() < PATIENCE, "run hangs: {}", text());
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn cases(dir: &Path) -> Vec<Case> {
    let fifo = dir.join("fifo.toml");
    let c = std::ffi::CString::new(fifo.display().to_string()).unwrap();
    // SAFETY: a NUL-terminated path that lives across the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let sparse = dir.join("sparse.toml");
    std::fs::File::create(&sparse)
        .unwrap()
        .set_len(3 << 30)
        .unwrap();
    let leak = |p: PathBuf| -> &'static str { Box::leak(format!("@{}", p.display()).into()) };
    let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let refuse = |name, file, a: &[&str], says| Case {
        name,
        file,
        args: args(a),
        accept: Some(false),
        says,
    };
    let accept = |name, file, a: &[&str], says| Case {
        name,
        file,
        args: args(a),
        accept: Some(true),
        says,
    };
    let mut all = vec![
        refuse(
            "user unknown",
            None,
            &["--user", "no-such-user-x"],
            "no such user",
        ),
        refuse("user root", None, &["--user", "root"], "uid 0"),
        refuse(
            "user root in the file",
            Some("user = \"root\"\n"),
            &[],
            ":1: key `user`",
        ),
        refuse(
            "NUL in source",
            Some("source = \"fixture:/tmp/a\\u0000b\"\n"),
            &[],
            "NUL",
        ),
        refuse(
            "NUL in state-dir",
            Some("state-dir = \"/tmp/a\\u0000b\"\n"),
            &[],
            "NUL",
        ),
        refuse(
            "NUL in agentx-socket",
            Some("agentx-socket = \"/tmp/a\\u0000b\"\n"),
            &[],
            "NUL",
        ),
        refuse(
            "relative master",
            None,
            &["--agentx-socket", "master"],
            "absolute",
        ),
        refuse(
            "port 0",
            None,
            &["--agentx-socket", "tcp:h:0"],
            "port \"0\"",
        ),
        refuse(
            "EnvFilter directive",
            None,
            &["--log-level", "memstat_agentx=debug"],
            "unknown log level",
        ),
        refuse(
            "unknown source",
            Some("\nsource = \"solaris\"\n"),
            &[],
            ":2: key `source`: unknown source",
        ),
        refuse(
            "an unknown entry of a list",
            None,
            &["--source", "freebsd,solaris:/x"],
            "option `--source`: unknown source \"solaris:/x\"",
        ),
        refuse(
            "a source listed twice",
            None,
            &["--source", "fixture:/a.json,fixture:/a.json"],
            "fixture:/a.json is listed twice",
        ),
        refuse(
            "config /dev/zero",
            Some("@/dev/zero"),
            &[],
            "not a regular file",
        ),
        refuse(
            "config FIFO",
            Some(leak(fifo)),
            &[],
            "a FIFO, not a regular file",
        ),
        refuse(
            "config 3 GB sparse",
            Some(leak(sparse)),
            &[],
            "larger than 1048576 bytes",
        ),
        refuse(
            "negative max-age flag",
            None,
            &["--max-age", "-1"],
            "option `--max-age`: -1: must be a number of seconds",
        ),
        refuse(
            "max-age 1e308",
            Some("max-age = 1e308\n"),
            &[],
            "1e308: must be a number of seconds from 1e-9 to 86400",
        ),
        refuse(
            "misspelt key",
            Some("max_age = 3\n"),
            &[],
            "did you mean `max-age`",
        ),
        refuse(
            "backoff order",
            Some("backoff-min = 3\nbackoff-max = 1\n"),
            &[],
            ":2: key `backoff-max`: backoff-min (3s) must not exceed",
        ),
        refuse(
            "missing linux file",
            None,
            &["--source", "linux:/nonexistent/slabinfo"],
            "slabinfo",
        ),
        accept("good", None, &[], "does not exist (yet)"),
        accept(
            "absent fixture",
            None,
            &["--source", "fixture:/nonexistent/f.json"],
            "error(3)",
        ),
        accept("absent state directory", None, &[], "run creates it"),
        Case {
            name: "syslog",
            file: None,
            args: args(&["--log-target", "syslog"]),
            accept: None,
            says: "",
        },
        Case {
            name: "freebsd source",
            file: None,
            args: args(&["--source", "freebsd"]),
            accept: if cfg!(target_os = "freebsd") {
                Some(true)
            } else {
                Some(false)
            },
            says: "",
        },
    ];
    if memstat_agentx::privdrop::is_root()
        && memstat_agentx::privdrop::lookup_user("nobody").is_ok()
    {
        // The fixture sits in a 0700 directory: nobody cannot read it. run serves error(3).
        all.push(accept(
            "user nobody",
            None,
            &["--user", "nobody"],
            "permission denied",
        ));
    }
    all
}

#[test]
fn check_config_and_run_give_the_same_verdict() {
    let fixtures = tempfile::tempdir().unwrap();
    for case in cases(fixtures.path()) {
        let dir = tempfile::tempdir().unwrap();
        // Private, whatever the umask: the fixture inside is then unreadable by nobody.
        std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o700),
        )
        .unwrap();
        let args = arguments(&case, dir.path());
        let check = check_config(&args);
        // --run-as tells check-config who starts run; run itself is started as we are.
        let run_args: Vec<String> = match args.iter().position(|a| a == "--run-as") {
            Some(i) => [&args[..i], &args[i + 2..]].concat(),
            None => args.clone(),
        };
        let run = run(&run_args, dir.path());
        let name = case.name;
        assert_eq!(
            check.ok, run.ok,
            "{name}: check-config {} but run {}\ncheck-config: {}\nrun: {}",
            check.ok, run.ok, check.text, run.text
        );
        if let Some(accept) = case.accept {
            assert_eq!(check.ok, accept, "{name}: {}", check.text);
        }
        assert!(check.text.contains(case.says), "{name}: {}", check.text);
        if !check.ok {
            // The one conversion: run names the same problem.
            let first = check.text.lines().last().unwrap_or_default();
            let problem = first.rsplit(": ").next().unwrap_or_default();
            assert!(
                run.text.contains(problem),
                "{name}: {problem:?} not in {}",
                run.text
            );
        }
    }
}

/// With --run-as, the source is opened and read as that user, as under rc.subr or
/// systemd's User=: /proc/slabinfo, which only root may read, is then refused by both.
#[test]
#[ignore = "needs root: reads /proc/slabinfo (scripts/test runs it as root)"]
fn needs_root_run_as_opens_the_source_as_that_user() {
    assert!(memstat_agentx::privdrop::is_root(), "needs root");
    assert!(
        Path::new("/proc/slabinfo").exists(),
        "no /proc/slabinfo here"
    );
    let dir = tempfile::tempdir().unwrap();
    let base = [
        "--config",
        "/dev/null",
        "--source",
        "linux",
        "--agentx-socket",
        "/nonexistent/master",
    ];
    let state = dir.path().join("state").display().to_string();
    let ok = Command::new(bin())
        .arg("check-config")
        .args(base)
        .args(["--state-dir", &state])
        .output()
        .unwrap();
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let out = Command::new(bin())
        .arg("check-config")
        .args(base)
        .args(["--state-dir", &state, "--run-as", "nobody"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("/proc/slabinfo"),
        "{err}"
    );
    // With --user, root opens it and the read happens as nobody, through the open file.
    let out = Command::new(bin())
        .arg("check-config")
        .args(base)
        .args(["--state-dir", &state, "--user", "nobody"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && !err.contains("slabinfo"), "{err}");
    let out = Command::new(bin())
        .args([
            "check-config",
            "--config",
            "/dev/null",
            "--run-as",
            "no-such-user-x",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("--run-as: no such user"),
        "{err}"
    );
}

fn help(command: &str) -> String {
    let out = Command::new(bin())
        .args([command, "--help"])
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

/// Every setting of the one definition is in the man page, the shipped file and --help;
/// the man page names every setting a reload cannot change.
#[test]
fn the_docs_list_every_setting() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let man = std::fs::read_to_string(root.join("man/memstat-agentx.8")).unwrap();
    let shipped = std::fs::read_to_string(root.join("config/memstat-agentx.toml")).unwrap();
    let (run_help, check_help) = (help("run"), help("check-config"));
    let restart_paragraph = man
        .split(".Pp")
        .find(|p| p.contains("SIGHUP") && p.contains("restart"))
        .expect("the man page says what a reload applies");
    let mut missing = Vec::new();
    for s in SETTINGS {
        let key = s.key;
        let option = match s.rule {
            Rule::Switch => format!("Fl -no-{key}"),
            _ => format!(".It Fl -{key}"),
        };
        let documented_option = man.contains(&option) || man.contains(&format!("Fl -{key} Ar"));
        if !documented_option {
            missing.push(format!("man page: option --{key}"));
        }
        if !man.contains(&format!(".Li {key}")) {
            missing.push(format!("man page: file key {key}"));
        }
        let in_file = shipped.lines().any(|l| {
            l.trim_start_matches(['#', ' '])
                .starts_with(&format!("{key} ="))
        });
        if !in_file {
            missing.push(format!("config/memstat-agentx.toml: {key}"));
        }
        for (name, text) in [("run", &run_help), ("check-config", &check_help)] {
            if !text.contains(&format!("--{key} ")) && !text.contains(&format!("--{key}\n")) {
                missing.push(format!("{name} --help: --{key}"));
            }
        }
        let says_restart = restart_paragraph.contains(&format!(".Li {key}"));
        if says_restart != (s.reload == Reload::Restart) {
            missing.push(format!("man page SIGHUP paragraph: {key} ({:?})", s.reload));
        }
    }
    assert!(missing.is_empty(), "not documented: {missing:#?}");
}

/// Every source of the registry is in the man page's SOURCES, the shipped file, the README
/// and `--help` of every command that takes one: the docs are checked against the one
/// definition, as the settings are.
#[test]
fn the_docs_list_every_source() {
    use memstat_agentx::memstat::source::{usage, SOURCES};
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap();
    let man = read("man/memstat-agentx.8");
    let sources = man
        .split(".Sh ")
        .find(|s| s.starts_with("SOURCES"))
        .expect("the man page has a SOURCES section");
    let (shipped, readme) = (read("config/memstat-agentx.toml"), read("README.md"));
    let helps = [help("run"), help("check-config"), help("dump")];
    let mut missing = Vec::new();
    for d in SOURCES {
        if !sources.contains(&format!(".It Cm {}", d.name)) {
            missing.push(format!("man page SOURCES: {}", d.name));
        }
        if !shipped.contains(&format!("\"{}", d.name)) {
            missing.push(format!("config/memstat-agentx.toml: {}", d.name));
        }
        if !readme.contains(&format!("`{}", usage(d))) {
            missing.push(format!("README: {}", usage(d)));
        }
        for h in &helps {
            if !h.contains(&usage(d)) || !h.contains(d.summary) {
                missing.push(format!("--help: {}", usage(d)));
            }
        }
    }
    assert!(missing.is_empty(), "not documented: {missing:#?}");
}

/// check-config says which sources `auto` reads on this host, from the registry.
#[test]
fn check_config_says_what_auto_reads_here() {
    use memstat_agentx::memstat::source::SOURCES;
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(bin())
        .args(["check-config", "--config", "/dev/null", "--source", "auto"])
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let here: Vec<&str> = SOURCES
        .iter()
        .filter(|d| d.auto_on.is_some_and(|os| os.is_this_one()))
        .map(|d| d.name)
        .collect();
    if !out.status.success() {
        // Not root on Linux: /proc/slabinfo cannot be opened, and the refusal names it.
        assert!(
            stderr.contains("permission denied") && stderr.contains("/proc/slabinfo"),
            "{stderr}"
        );
        return;
    }
    let line = stdout
        .lines()
        .find(|l| l.starts_with("# source auto reads "))
        .unwrap_or_else(|| panic!("no auto line: {stdout}"));
    for name in here {
        assert!(line.contains(name), "{line}");
    }
}

#[cfg(target_os = "linux")]
/// run's start-up line names the sources it opened, as memSourceName does: `meminfo` with
/// the file it reads, `auto` as what it resolved to here, not the setting as written.
#[test]
fn run_says_which_sources_it_serves() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = dir.path().join("f.json");
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/demo-fixture.json"),
        &fixture,
    )
    .unwrap();
    let args: Vec<String> = [
        "--config",
        "/dev/null",
        "--source",
        &format!("fixture:{},meminfo", fixture.display()),
        "--state-dir",
        &dir.path().join("state").display().to_string(),
        "--agentx-socket",
        &dir.path().join("no-master").display().to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let verdict = run(&args, dir.path());
    assert!(verdict.ok, "{}", verdict.text);
    let want = format!(
        " serving fixture:{},meminfo:/proc/meminfo to unix:",
        fixture.display()
    );
    assert!(
        verdict.text.contains(&want),
        "no {want:?} in {}",
        verdict.text
    );
}

/// `run --help` and `check-config --help` give each setting's default, from the one
/// definition, and the configuration file read when `--config` is not given.
#[test]
fn help_gives_each_default_and_the_configuration_path() {
    use memstat_agentx::config::{Rule, DEFAULT_CONFIG_PATH, SETTINGS};
    for command in ["run", "check-config"] {
        let text = help(command);
        let line = |flag: &str| {
            text.lines()
                .find(|l| l.trim_start().starts_with(&format!("{flag} ")) || l.trim() == flag)
                .unwrap_or_else(|| panic!("{command} --help has no {flag}:\n{text}"))
                .to_string()
        };
        assert!(
            line("--config <FILE>").contains(&format!("default: {DEFAULT_CONFIG_PATH}")),
            "{text}"
        );
        for s in SETTINGS {
            match (s.rule, s.default) {
                (Rule::Switch, Some(d)) => {
                    let (on, off) = (
                        line(&format!("--{}", s.key)),
                        line(&format!("--no-{}", s.key)),
                    );
                    assert_eq!(on.ends_with("[default]"), d == "true", "{on}");
                    assert_eq!(off.ends_with("[default]"), d == "false", "{off}");
                }
                (_, Some(d)) => {
                    let l = line(&format!("--{}", s.key));
                    assert!(l.ends_with(&format!("[default: {d}]")), "{command}: {l}");
                }
                (_, None) => assert!(!line(&format!("--{}", s.key)).contains("[default")),
            }
        }
    }
}

/// `--run-as` rehearses the real deployment: the unit's ambient CAP_DAC_READ_SEARCH
/// (`--run-as-cap dac-read-search`) lets its user open a root-only source; a user who may not
/// create the state directory, or open the master's socket, is warned of it.
#[test]
#[ignore = "needs root: rehearses as another user (scripts/test runs it as root)"]
fn needs_root_run_as_rehearses_the_capability_the_socket_and_the_state_directory() {
    use std::os::unix::fs::PermissionsExt;
    assert!(memstat_agentx::privdrop::is_root(), "needs root");
    let dir = tempfile::tempdir().unwrap();
    let mode =
        |p: &Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    mode(dir.path(), 0o755);
    // A source only root may read, as /proc/slabinfo is.
    let slabinfo = dir.path().join("slabinfo");
    std::fs::write(
        &slabinfo,
        "slabinfo - version: 2.1\n# name <active_objs> <num_objs> <objsize> <objperslab> \
         <pagesperslab> : tunables <limit> <batchcount> <sharedfactor> : slabdata \
         <active_slabs> <num_slabs> <sharedavail>\nkmalloc-64 3000 3200 64 64 1 : tunables \
         0 0 0 : slabdata 50 50 0\n",
    )
    .unwrap();
    mode(&slabinfo, 0o600);
    // The master's socket, root's alone (snmpd's default agentXPerms).
    let socket = dir.path().join("master");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    mode(&socket, 0o600);
    // A state directory under a directory only root may write.
    let locked = dir.path().join("locked");
    std::fs::create_dir(&locked).unwrap();
    let state = locked.join("state").display().to_string();
    let root_only = format!("linux:{}", slabinfo.display());
    let check_with = |source: &str, extra: &[&str]| {
        let out = Command::new(bin())
            .args([
                "check-config",
                "--config",
                "/dev/null",
                "--state-dir",
                &state,
            ])
            .args(["--source", source])
            .arg("--agentx-socket")
            .arg(&socket)
            .args(extra)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let check = |extra: &[&str]| check_with(&root_only, extra);

    // As the unit starts it (User=nobody, --user nobody) but without the capability: refused.
    let (ok, err) = check(&["--user", "nobody", "--run-as", "nobody"]);
    assert!(
        !ok && err.contains(&slabinfo.display().to_string()),
        "{err}"
    );
    // With it: accepted, the source opened as the capability allows.
    let (ok, err) = check(&[
        "--user",
        "nobody",
        "--run-as",
        "nobody",
        "--run-as-cap",
        "dac-read-search",
    ]);
    assert!(ok, "{err}");
    assert!(
        err.contains("agentXPerms 0660 0755 root GROUP"),
        "the socket nobody may not open is not warned of: {err}"
    );
    // The user started with the capability is not root: it must create the state directory
    // itself, or a supervisor for it.
    assert!(
        err.contains(&format!(
            "{state} does not exist, and this user cannot create it"
        )),
        "{err}"
    );
    // A capability for root, or for a user `user` does not name, is refused.
    let (ok, err) = check(&["--run-as", "root", "--run-as-cap", "dac-read-search"]);
    assert!(
        !ok && err.contains("--run-as-cap: the --run-as user is this one, or root"),
        "{err}"
    );
    let (ok, err) = check(&[
        "--user",
        "daemon",
        "--run-as",
        "nobody",
        "--run-as-cap",
        "dac-read-search",
    ]);
    assert!(!ok && err.contains("`user` names another"), "{err}");
    // The capability belongs to the --run-as user.
    let (ok, err) = check(&["--run-as-cap", "dac-read-search"]);
    assert!(!ok && err.contains("give --run-as too"), "{err}");

    // A world-readable source, started as nobody without --user: nobody cannot create the
    // state directory, nor open the socket. As root, neither is a problem.
    let fixture = dir.path().join("fixture.json");
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/demo-fixture.json"),
        &fixture,
    )
    .unwrap();
    mode(&fixture, 0o644);
    let source = format!("fixture:{}", fixture.display());
    let (ok, err) = check_with(&source, &["--run-as", "nobody"]);
    assert!(ok, "{err}");
    assert!(
        err.contains(&format!(
            "{state} does not exist, and this user cannot create it"
        )),
        "{err}"
    );
    assert!(err.contains("agentXPerms 0660 0755 root GROUP"), "{err}");
    let (ok, err) = check_with(&source, &[]);
    assert!(ok, "{err}");
    assert!(
        err.contains(&format!("{state} does not exist: run creates it")),
        "{err}"
    );
    assert!(!err.contains("agentXPerms"), "{err}");
}
