//! A private MariaDB for the tests that run a real poller on it (tests/cacti.rs,
//! tests/zabbix.rs), included with `#[path]`: a datadir and a socket in the test's temp dir,
//! no networking, nothing system-wide.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Fails naming `packages` when `path` (a file, or a command on PATH) is missing.
pub fn need_installed(path: &str, packages: &str) {
    let found = Path::new(path).exists()
        || Command::new("sh")
            .args(["-c", &format!("command -v {path}")])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
    assert!(found, "{path} is not installed: {packages}");
}

/// Runs a command that must succeed; returns its stdout and stderr.
pub fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}): {text}",
        out.status
    );
    text
}

pub fn is_root() -> bool {
    run(Command::new("id").arg("-u")).trim() == "0"
}

/// A MariaDB server on a private datadir, reachable only through a socket in the temp dir.
pub struct Mariadb {
    child: Child,
    pub socket: PathBuf,
}

impl Mariadb {
    pub fn start(dir: &Path) -> Mariadb {
        const PACKAGES: &str = "apt-get install -y mariadb-server (.ci/run installs it)";
        need_installed("mariadb-install-db", PACKAGES);
        need_installed("/usr/sbin/mariadbd", PACKAGES);
        let datadir = dir.join("db");
        let mut user = Vec::new();
        if is_root() {
            // mariadbd refuses to run as root unless told to.
            user.push("--user=root");
        }
        run(Command::new("mariadb-install-db")
            .arg("--no-defaults")
            .arg(format!("--datadir={}", datadir.display()))
            .args(&user)
            .args(["--auth-root-authentication-method=normal", "--skip-test-db"]));
        let socket = dir.join("mysql.sock");
        let log = std::fs::File::create(dir.join("mariadbd.log")).unwrap();
        let child = Command::new("/usr/sbin/mariadbd")
            .arg("--no-defaults")
            .arg(format!("--datadir={}", datadir.display()))
            .arg(format!("--socket={}", socket.display()))
            .arg(format!("--pid-file={}", dir.join("mariadbd.pid").display()))
            .arg("--skip-networking")
            .args(&user)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start mariadbd");
        let db = Mariadb { child, socket };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !db
            .client(None)
            .arg("-e")
            .arg("SELECT 1")
            .output()
            .is_ok_and(|o| o.status.success())
        {
            assert!(
                Instant::now() < deadline,
                "mariadbd did not start: {}",
                std::fs::read_to_string(dir.join("mariadbd.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        db
    }

    pub fn client(&self, database: Option<&str>) -> Command {
        let mut c = Command::new("mariadb");
        c.arg("--no-defaults")
            .arg(format!("--socket={}", self.socket.display()))
            .args(["-u", "root", "--batch", "--skip-column-names"]);
        if let Some(d) = database {
            c.arg(d);
        }
        c
    }

    /// Runs SQL on `database`; returns the rows, tab-separated.
    pub fn sql(&self, database: &str, q: &str) -> Vec<Vec<String>> {
        run(self.client(Some(database)).arg("-e").arg(q))
            .lines()
            .map(|l| l.split('\t').map(str::to_string).collect())
            .collect()
    }
}

impl Drop for Mariadb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
