//! Test harness: a private net-snmp snmpd master, the daemon, and the real net-snmp clients.
//!
//! Each test gets its own temp dir, a free UDP port on 127.0.0.1 and its own AgentX socket,
//! so tests run in parallel without seeing each other.
#![allow(dead_code)]

#[path = "../support/full_type.rs"]
mod full_type;
pub use full_type::full_type;

use memstat_agentx::memstat::{fixture, Allocator, MemoryType, Snapshot};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime};

pub const ROOT: &str = ".1.3.6.1.4.1.32473.1";
pub const TYPE_ENTRY: &str = ".1.3.6.1.4.1.32473.1.1.2.1";
pub const SOURCE_STATUS: &str = ".1.3.6.1.4.1.32473.1.1.1.8.0";
pub const SOURCE_LAST_ERROR: &str = ".1.3.6.1.4.1.32473.1.1.1.9.0";

/// How long a wait for something observable may take before it fails the test: far more
/// than any of them takes on a loaded two-core machine, so that reaching it means the thing
/// waited for did not happen. A wait ends as soon as its condition holds, so the limit costs
/// a passing test nothing.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// How often a wait looks again.
const POLL: Duration = Duration::from_millis(20);

/// Waits until `done` holds, looking every few milliseconds; fails the test, saying `what`
/// and `context()`, once [`PATIENCE`] has passed without it.
pub fn wait_until(what: &str, mut done: impl FnMut() -> bool, context: impl Fn() -> String) {
    let deadline = Instant::now() + PATIENCE;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "{what}: not within {PATIENCE:?}\n{}",
            context()
        );
        std::thread::sleep(POLL);
    }
}

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_memstat-agentx")
}

/// Whether `tool` is on PATH.
fn on_path(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// Fails the test with a clear message when a required tool is missing.
pub fn require_tool(tool: &str) {
    assert!(
        on_path(tool) || Path::new(tool).exists(),
        "{tool} is not installed: run .ci/run, or apt-get install snmpd snmp"
    );
}

/// Fails the test naming the Debian package to install when `tool` is not on PATH.
pub fn need(tool: &str, package: &str) {
    assert!(
        on_path(tool),
        "{tool} is not installed: apt-get install -y {package} (.ci/run installs it)"
    );
}

/// Runs a command that must succeed; returns its stdout.
pub fn run_ok(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A free UDP port on 127.0.0.1 (also free for TCP in practice).
pub fn free_port() -> u16 {
    let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let t = std::net::TcpListener::bind(("127.0.0.1", s.local_addr().unwrap().port()));
    let port = s.local_addr().unwrap().port();
    drop(t);
    port
}

/// The IETF base MIBs directory (downloaded once by scripts/fetch-base-mibs).
pub fn base_mibs() -> String {
    let out = Command::new("bash")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/scripts/fetch-base-mibs"
        ))
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/target/base-mibs"))
        .output()
        .expect("run scripts/fetch-base-mibs");
    assert!(
        out.status.success(),
        "fetch-base-mibs failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// `-M` argument that finds MEMSTAT-MIB and the base MIBs.
pub fn mib_dirs() -> String {
    format!(
        "{}:{}/mibs:/usr/share/snmp/mibs",
        base_mibs(),
        env!("CARGO_MANIFEST_DIR")
    )
}

/// [`mib_dirs`], computed once per test binary.
pub fn mibs() -> &'static str {
    static DIRS: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DIRS.get_or_init(mib_dirs)
}

/// snmptranslate with MEMSTAT-MIB and the base MIBs loaded.
pub fn translate(opts: &[&str], oid: &str) -> String {
    need("snmptranslate", "snmp");
    run_ok(
        Command::new("snmptranslate")
            .args(["-M", mibs(), "-m", "MEMSTAT-MIB"])
            .args(opts)
            .arg(oid)
            .env("MIBS", ""),
    )
    .trim()
    .to_string()
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Transport {
    Unix,
    Tcp,
}

/// A private snmpd acting as AgentX master.
pub struct Snmpd {
    child: Option<Child>,
    pub port: u16,
    pub dir: PathBuf,
    /// The address to give the daemon's --agentx-socket.
    pub agentx: String,
    conf: PathBuf,
}

impl Snmpd {
    pub fn start(dir: &Path, transport: Transport) -> Snmpd {
        Snmpd::start_with_perms(dir, transport, "0660 0750")
    }

    /// Like [`Snmpd::start`], with the `agentXPerms` arguments given (e.g. to let an
    /// unprivileged daemon reach the socket).
    pub fn start_with_perms(dir: &Path, transport: Transport, perms: &str) -> Snmpd {
        Snmpd::start_with_conf(dir, transport, perms, "")
    }

    /// Like [`Snmpd::start`], with `extra` lines in snmpd.conf (e.g. `trap2sink`).
    pub fn start_with_conf(dir: &Path, transport: Transport, perms: &str, extra: &str) -> Snmpd {
        require_tool("/usr/sbin/snmpd");
        let port = free_port();
        let (listen, agentx) = match transport {
            Transport::Unix => {
                let p = dir.join("agentx.sock");
                (p.display().to_string(), format!("unix:{}", p.display()))
            }
            Transport::Tcp => {
                let ap = free_port();
                (format!("tcp:127.0.0.1:{ap}"), format!("tcp:127.0.0.1:{ap}"))
            }
        };
        let conf = dir.join("snmpd.conf");
        std::fs::write(
            &conf,
            format!(
                "master agentx\n\
                 agentXSocket {listen}\n\
                 agentXPerms {perms}\n\
                 rwcommunity public 127.0.0.1\n\
                 dontLogTCPWrappersConnects yes\n\
                 {extra}\n"
            ),
        )
        .unwrap();
        std::fs::create_dir_all(dir.join("persist")).unwrap();
        let mut s = Snmpd {
            child: None,
            port,
            dir: dir.to_path_buf(),
            agentx,
            conf,
        };
        s.launch();
        s
    }

    fn launch(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("snmpd.log"))
            .unwrap();
        let child = Command::new("/usr/sbin/snmpd")
            .args(["-f", "-Lo", "-C", "-c"])
            .arg(&self.conf)
            .arg("-p")
            .arg(self.dir.join("snmpd.pid"))
            .arg(format!("udp:127.0.0.1:{}", self.port))
            .env("SNMP_PERSISTENT_DIR", self.dir.join("persist"))
            .env("MIBS", "")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start snmpd");
        self.child = Some(child);
        let deadline = Instant::now() + PATIENCE;
        loop {
            let o = snmp_cmd(
                "snmpget",
                self.port,
                &["-t", "0.3", "-r", "0"],
                &[".1.3.6.1.2.1.1.3.0"],
            );
            if o.status.success() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "snmpd did not start: {}",
                std::fs::read_to_string(self.dir.join("snmpd.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn restart(&mut self) {
        self.stop();
        self.launch();
    }
}

impl Drop for Snmpd {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The daemon under test.
pub struct Daemon {
    child: Option<Child>,
    pub log: PathBuf,
    /// A command that execs the daemon (its arguments follow), as `unshare` does; or none.
    wrapper: Vec<String>,
    args: Vec<String>,
}

impl Daemon {
    /// Starts `memstat-agentx run` with `--agentx-socket` and the given extra arguments, and
    /// waits until the master serves its subtree.
    pub fn start(snmpd: &Snmpd, args: &[&str]) -> Daemon {
        let mut d = Daemon::spawn(snmpd, args);
        d.wait_registered(snmpd.port);
        d
    }

    /// Starts the daemon through `wrapper`, a command that ends by exec'ing the daemon with
    /// the arguments that follow it (so the pid is the daemon's), and waits as [`Self::start`].
    pub fn start_wrapped(snmpd: &Snmpd, wrapper: &[&str], args: &[&str]) -> Daemon {
        let mut d = Daemon::new(snmpd, args);
        d.wrapper = wrapper.iter().map(|s| s.to_string()).collect();
        d.launch();
        d.wait_registered(snmpd.port);
        d
    }

    /// Starts the daemon without waiting for it to register (the master may be down).
    pub fn spawn(snmpd: &Snmpd, args: &[&str]) -> Daemon {
        let mut d = Daemon::new(snmpd, args);
        d.launch();
        d
    }

    fn new(snmpd: &Snmpd, args: &[&str]) -> Daemon {
        let mut all = vec![
            "run".to_string(),
            "--agentx-socket".into(),
            snmpd.agentx.clone(),
            "--log-level".into(),
            "debug".into(),
        ];
        all.extend(args.iter().map(|s| s.to_string()));
        Daemon {
            child: None,
            log: snmpd.dir.join(format!("daemon-{}.log", free_port())),
            wrapper: Vec::new(),
            args: all,
        }
    }

    fn launch(&mut self) {
        let log = std::fs::File::create(&self.log).unwrap();
        let mut cmd = match self.wrapper.split_first() {
            Some((program, rest)) => {
                let mut c = Command::new(program);
                c.args(rest).arg(bin());
                c
            }
            None => Command::new(bin()),
        };
        let child = cmd
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start memstat-agentx");
        self.child = Some(child);
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Waits until the master answers for our subtree.
    pub fn wait_registered(&mut self, port: u16) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let o = snmp_cmd(
                "snmpget",
                port,
                &["-t", "0.5", "-r", "0"],
                &[&format!("{ROOT}.1.1.7.0")],
            );
            let text = String::from_utf8_lossy(&o.stdout);
            if o.status.success() && text.contains("STRING") {
                return;
            }
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("daemon exited with {status}: {}", self.log_text());
            }
            assert!(
                Instant::now() < deadline,
                "daemon did not register: {}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the log holds `what` at least `times` times.
    pub fn wait_log(&self, what: &str, times: usize) {
        wait_until(
            &format!("{times} x {what:?} in the daemon's log"),
            || self.log_text().matches(what).count() >= times,
            || self.log_text(),
        );
    }

    /// The samples for notifications taken so far: the N of the last `sample N taken` debug
    /// line (the daemon's one mark of a sample, see the man page's NOTIFICATIONS).
    pub fn samples_taken(&self) -> u64 {
        self.log_text()
            .lines()
            .filter_map(|l| l.trim_end().strip_suffix(" taken")?.rsplit_once("sample "))
            .filter_map(|(_, n)| n.parse().ok())
            .max()
            .unwrap_or(0)
    }

    /// Waits until `n` more samples were taken than when called. A sample that began before
    /// the call may have read the source before a change the caller just made, so a caller
    /// that needs `k` samples of what it wrote waits for `k + 1`; and the notifications a
    /// sample found are handed to the master before the next sample is taken.
    pub fn wait_samples(&self, n: u64) {
        let target = self.samples_taken() + n;
        wait_until(
            &format!("sample {target} (the daemon logs `sample N taken` at debug level)"),
            || self.samples_taken() >= target,
            || self.log_text(),
        );
    }

    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().unwrap().is_none())
    }

    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Sends a signal and waits up to `within` for the exit status.
    pub fn signal_and_wait(
        &mut self,
        sig: &str,
        within: Duration,
    ) -> Option<std::process::ExitStatus> {
        let pid = self.pid().to_string();
        Command::new("kill")
            .args(["-s", sig, &pid])
            .status()
            .unwrap();
        self.wait_exit(within)
    }

    /// Waits up to `within` for the daemon to exit on its own; `None` if it is still running.
    pub fn wait_exit(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + within;
        let c = self.child.as_mut()?;
        loop {
            if let Some(s) = c.try_wait().unwrap() {
                self.child = None;
                return Some(s);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn restart(&mut self, port: u16) {
        self.kill();
        self.launch();
        self.wait_registered(port);
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Runs a net-snmp client against 127.0.0.1:port, v2c, community public, numeric output.
/// Options go before the agent address and OIDs after it, as the clients require.
pub fn snmp_cmd(tool: &str, port: u16, opts: &[&str], oids: &[&str]) -> Output {
    Command::new(tool)
        .args(["-v2c", "-c", "public", "-On", "-Oe", "-m", ""])
        .args(opts)
        .arg(format!("127.0.0.1:{port}"))
        .args(oids)
        .env("MIBS", "")
        .output()
        .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

/// Waits until the master answers for the daemon's subtree again (memTypeName of row 1), and
/// fails the test if that takes `within` or longer. Returns how long it took.
pub fn wait_until_served(port: u16, within: Duration, daemon: &Daemon) -> Duration {
    let t0 = Instant::now();
    loop {
        let o = snmp_cmd(
            "snmpget",
            port,
            &["-t", "0.2", "-r", "0"],
            &[&format!("{TYPE_ENTRY}.2.1")],
        );
        if String::from_utf8_lossy(&o.stdout).contains("STRING") {
            return t0.elapsed();
        }
        assert!(
            t0.elapsed() < within,
            "no answer within {within:?} of the master being back: {}",
            daemon.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One line of client output: `.1.3... = TYPE: value`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    pub oid: String,
    pub ty: String,
    pub value: String,
}

pub fn parse_lines(out: &str) -> Vec<Line> {
    out.lines()
        .filter_map(|l| {
            let (oid, rest) = l.split_once(" = ")?;
            let (ty, value) = match rest.split_once(": ") {
                Some((t, v)) => (t.to_string(), v.trim_matches('"').to_string()),
                None => (rest.to_string(), String::new()),
            };
            Some(Line {
                oid: oid.to_string(),
                ty,
                value,
            })
        })
        .collect()
}

/// snmpbulkwalk of `oid`; panics when the client fails.
pub fn bulkwalk(port: u16, oid: &str, opts: &[&str]) -> Vec<Line> {
    let mut o: Vec<&str> = vec!["-t", "3", "-r", "1"];
    o.extend_from_slice(opts);
    let out = snmp_cmd("snmpbulkwalk", port, &o, &[oid]);
    assert!(
        out.status.success(),
        "snmpbulkwalk {oid} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    parse_lines(&String::from_utf8_lossy(&out.stdout))
}

pub fn get(port: u16, oids: &[&str]) -> Vec<Line> {
    let out = snmp_cmd("snmpget", port, &["-t", "3", "-r", "1"], oids);
    assert!(
        out.status.success(),
        "snmpget failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    parse_lines(&String::from_utf8_lossy(&out.stdout))
}

/// A temp dir holding `fixture.json` with `types`, a private snmpd on `transport`, and the
/// daemon serving that fixture with its state in the temp dir, plus `extra` arguments.
pub fn start_with_fixture(
    transport: Transport,
    types: Vec<MemoryType>,
    extra: &[&str],
) -> (tempfile::TempDir, Snmpd, Daemon) {
    let dir = tempfile::tempdir().unwrap();
    let fix = dir.path().join("fixture.json");
    write_fixture(&fix, types);
    let snmpd = Snmpd::start(dir.path(), transport);
    let src = format!("fixture:{}", fix.display());
    let state = dir.path().join("state").display().to_string();
    let mut args = vec!["--source", &src, "--state-dir", &state];
    args.extend_from_slice(extra);
    let daemon = Daemon::start(&snmpd, &args);
    (dir, snmpd, daemon)
}

/// A fixture with full rows, sparse rows (absent cells), a duplicate name and every allocator.
pub fn sample_types() -> Vec<MemoryType> {
    let mut sparse = MemoryType::new(Allocator::Slab, "dentry");
    sparse.size = Some(192);
    sparse.in_use_count = Some(5_000_000_000);
    let mut malloc = MemoryType::new(Allocator::Malloc, "temp");
    malloc.allocs = Some(123);
    malloc.size_mask = Some(0x24);
    // A malloc type's per-CPU figures: counts, bytes and the size mask, none for the cache.
    malloc.per_cpu = vec![memstat_agentx::memstat::PerCpu {
        cpu: 3,
        allocs: Some(120),
        frees: Some(7),
        bytes_allocated: Some(u64::MAX - 5),
        bytes_freed: Some(448),
        size_mask: Some(0x20),
        ..Default::default()
    }];
    let mut dup = full_type(Allocator::Uma, "mbuf", 9);
    dup.ordinal = 1;
    vec![
        malloc,
        full_type(Allocator::Uma, "mbuf", 1),
        dup,
        full_type(Allocator::Uma, "mbuf_cluster", 2),
        sparse,
    ]
}

pub fn write_fixture(path: &Path, types: Vec<MemoryType>) {
    let s = Snapshot::new(0, SystemTime::now(), String::new(), types);
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, fixture::to_json(&s)).unwrap();
    // Atomic replace: the daemon never reads a half-written file.
    std::fs::rename(&tmp, path).unwrap();
}

/// memSourceStatus and memSourceLastError, as the client prints them.
pub fn source_status(port: u16) -> (String, String) {
    let l = get(port, &[SOURCE_STATUS, SOURCE_LAST_ERROR]);
    assert_eq!(l.len(), 2, "{l:?}");
    (l[0].value.clone(), l[1].value.clone())
}

/// Walks memTypeTable (which refreshes an expired snapshot) until `check` holds, every
/// `every`, for at most [`PATIENCE`].
pub fn eventually(
    port: u16,
    what: &str,
    daemon: &Daemon,
    every: Duration,
    check: impl Fn() -> bool,
) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let _ = bulkwalk(port, TYPE_ENTRY, &[]);
        if check() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not within {PATIENCE:?}\n{}",
            daemon.log_text()
        );
        std::thread::sleep(every);
    }
}

/// memSnapshotAge.0: milliseconds since the snapshot the tables serve was read.
pub const SNAPSHOT_AGE: &str = ".1.3.6.1.4.1.32473.1.1.1.3.0";

/// memSnapshotAge.0. memstatDaemon's scalars are answered without reading the source (the
/// contract's "Scalars" clause), so asking never refreshes the snapshot.
pub fn snapshot_age(port: u16) -> Duration {
    let l = get(port, &[SNAPSHOT_AGE]);
    let ms = l
        .first()
        .and_then(|l| l.value.trim().parse::<u64>().ok())
        .unwrap_or_else(|| panic!("memSnapshotAge.0: {l:?}"));
    Duration::from_millis(ms)
}

/// The in-progress window at `max_age`: a walk that asked anything within it counts as in
/// progress. It is max-age, counted as at least 0.1 s and at most 1 s (ARCHITECTURE.md).
pub fn in_progress_window(max_age: Duration) -> Duration {
    max_age.clamp(Duration::from_millis(100), Duration::from_secs(1))
}

/// Waits until the next new walk or Get of the tables must be answered from a new read of
/// the source, by the freshness clause: the snapshot is older than `max_age` and nothing
/// walks (no request since the call for longer than the in-progress window). Both are read
/// from memSnapshotAge, which asking does not change: its value at the call is taken after
/// the caller's last request, and once it has grown by the window, that much time has passed
/// with nothing asked. Call it once the caller's last request was answered; nothing else may
/// ask the daemon meanwhile. A new walk after it that is served figures read before the wait
/// is a stale snapshot.
pub fn wait_refresh_due(port: u16, max_age: Duration, daemon: &Daemon) {
    // The reported age is whole milliseconds, rounded down: a millisecond more is safe.
    let ms = Duration::from_millis(1);
    let at_call = snapshot_age(port);
    let due = max_age.max(at_call + in_progress_window(max_age)) + ms;
    wait_until(
        &format!(
            "memSnapshotAge past {due:?} (max-age {max_age:?}; {at_call:?} when the wait began)"
        ),
        || snapshot_age(port) > due,
        || daemon.log_text(),
    );
}

/// A private snmptrapd on 127.0.0.1 at a free UDP port, logging each notification it
/// receives as one line of its log file: `NOTIFICATION ` and the varbinds (numeric OIDs),
/// separated by tabs.
pub struct Snmptrapd {
    child: Option<Child>,
    pub port: u16,
    pub log: PathBuf,
}

/// One notification as snmptrapd logged it.
#[derive(Clone, Debug)]
pub struct Received {
    /// The value of snmpTrapOID.0.
    pub trap_oid: String,
    /// Every varbind, sysUpTime.0 and snmpTrapOID.0 included.
    pub varbinds: Vec<Line>,
}

impl Received {
    /// The value of the varbind named `oid`.
    pub fn value(&self, oid: &str) -> Option<&str> {
        self.varbinds
            .iter()
            .find(|l| l.oid == oid)
            .map(|l| l.value.as_str())
    }
}

impl Snmptrapd {
    /// Starts snmptrapd in `dir` (its files are named after `name`) and waits until it
    /// listens.
    pub fn start(dir: &Path, name: &str) -> Snmptrapd {
        require_tool("/usr/sbin/snmptrapd");
        let port = free_port();
        let conf = dir.join(format!("{name}.conf"));
        std::fs::write(
            &conf,
            "disableAuthorization yes\nformat print2 NOTIFICATION %v\\n\n",
        )
        .unwrap();
        let log = dir.join(format!("{name}.log"));
        let child = Command::new("/usr/sbin/snmptrapd")
            .args([
                "-f",
                "-C",
                "-n",
                "-On",
                "-Oe",
                "-m",
                "",
                "-M",
                "/dev/null",
                "-c",
            ])
            .arg(&conf)
            .arg("-Lf")
            .arg(&log)
            .arg("-p")
            .arg(dir.join(format!("{name}.pid")))
            .arg(format!("udp:127.0.0.1:{port}"))
            .env("SNMP_PERSISTENT_DIR", dir.join(format!("{name}-persist")))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start snmptrapd");
        let t = Snmptrapd {
            child: Some(child),
            port,
            log,
        };
        let deadline = Instant::now() + PATIENCE;
        while !std::fs::read_to_string(&t.log)
            .unwrap_or_default()
            .contains("NET-SNMP version")
        {
            assert!(Instant::now() < deadline, "snmptrapd did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        t
    }

    /// Every notification logged so far, in order.
    pub fn received(&self) -> Vec<Received> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines()
            .filter_map(|l| l.strip_prefix("NOTIFICATION "))
            .map(|l| {
                let varbinds = parse_lines(&l.replace('\t', "\n"));
                let trap_oid = varbinds
                    .iter()
                    .find(|v| v.oid == ".1.3.6.1.6.3.1.1.4.1.0")
                    .map(|v| v.value.clone())
                    .unwrap_or_default();
                Received { trap_oid, varbinds }
            })
            .collect()
    }

    /// The notifications of type `trap_oid` logged so far.
    pub fn of_type(&self, trap_oid: &str) -> Vec<Received> {
        self.received()
            .into_iter()
            .filter(|r| r.trap_oid == trap_oid)
            .collect()
    }

    /// Waits up to `within` until at least `n` notifications of type `trap_oid` were
    /// logged, and returns them; fails the test with `context` otherwise.
    pub fn wait_for(
        &self,
        trap_oid: &str,
        n: usize,
        within: Duration,
        context: &str,
    ) -> Vec<Received> {
        let deadline = Instant::now() + within;
        loop {
            let got = self.of_type(trap_oid);
            if got.len() >= n {
                return got;
            }
            assert!(
                Instant::now() < deadline,
                "{n} x {trap_oid} not received within {within:?} (got {}):\n{}\n{context}",
                got.len(),
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Snmptrapd {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Ends a process started with Command when the test ends, passed or failed.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
