//! Zabbix, run for real: Debian's zabbix-server-mysql and zabbix-frontend-php (6.0) against a
//! private MariaDB, a private snmpd and the daemon.
//!
//! The test imports contrib/zabbix/memstat-agentx.yaml through the frontend's JSON-RPC API
//! (`configuration.import`), checks that importing it again changes nothing
//! (`configuration.importcompare`), and adds a host whose SNMP interface is the private snmpd
//! serving a fixture: two zones named `mbuf`, values past 2^32 and 2^63, a zone near its count
//! limit whose failure counter rises, a small type the default filter leaves out, a sparse slab
//! cache, and kernel kinds of both systems with some missing. The intervals are shortened
//! through the template's macros, set on the host. Read back through the API:
//! - every row the filter keeps is discovered, with its own items, repeated names included;
//! - the values in history equal the fixture's, the rates included (to the unit, past 2^63);
//! - an item whose object is absent stays supported and keeps no value;
//! - the failure and limit triggers fire for the zone that earns them, and no other;
//! - the stale-source trigger fires when the fixture is made unreadable;
//! - the kernel graphs stack exactly the rows memKernelTable marks stackable at their level.
//!
//! Nothing is installed or started system-wide: MariaDB runs from a datadir in the temp dir,
//! zabbix_server runs in the foreground with its configuration, log, pid file and sockets
//! there, and the frontend runs under `php -S` from a copy of /usr/share/zabbix whose
//! configuration file is in the temp dir.
//!
//! A second test, without Zabbix, holds the template to MEMSTAT-MIB and to the daemon: each
//! item's object, its kind (counter or gauge), the kernel kinds and the macros' defaults.

mod common;
#[path = "support/mariadb.rs"]
mod mariadb;

use common::*;
use mariadb::{need_installed, run, Mariadb};
use memstat_agentx::config::SETTINGS;
use memstat_agentx::memstat::source::{KernelKind, SOURCES};
use memstat_agentx::memstat::{fixture, Allocator, MemoryType, Snapshot};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const MANIFEST: &str = env!("CARGO_MANIFEST_DIR");
const TEMPLATE: &str = "contrib/zabbix/memstat-agentx.yaml";
const PACKAGES: &str = "apt-get install -y zabbix-server-mysql zabbix-frontend-php php-mysql \
                        mariadb-server curl (.ci/run installs them)";
/// Where Debian's zabbix-server-mysql keeps the SQL that creates the database.
const SCHEMA_DIR: &str = "/usr/share/zabbix-server-mysql";
/// Debian's zabbix-frontend-php.
const FRONTEND: &str = "/usr/share/zabbix";
/// Debian's frontend reads its configuration from this fixed path (CConfigFile.php); the test's
/// copy of the frontend is pointed at its own file instead.
const DEBIAN_CONF: &str = "const CONFIG_FILE_PATH = '/etc/zabbix/zabbix.conf.php'";
/// The templates of the file, and the host group of 6.0 that the test's host joins.
const BASE: &str = "MEMSTAT by SNMP";
const LINUX: &str = "MEMSTAT Linux kernel by SNMP";
const FREEBSD: &str = "MEMSTAT FreeBSD kernel by SNMP";
/// How long one step of Zabbix's work (a discovery, a poll, a trigger) may take. Each wait
/// ends as soon as what it waits for is seen.
const ZABBIX_PATIENCE: Duration = Duration::from_secs(120);
/// The host's item interval, through {$MEMSTAT.INTERVAL}.
const INTERVAL: &str = "2s";

/// The import rules of Zabbix 6.0's `configuration.import` for a template file.
fn import_params(source: &str) -> Value {
    let all = json!({"createMissing": true, "updateExisting": true, "deleteMissing": true});
    json!({
        "format": "yaml",
        "source": source,
        "rules": {
            "groups": {"createMissing": true},
            "templates": {"createMissing": true, "updateExisting": true},
            "templateLinkage": {"createMissing": true},
            "items": all, "discoveryRules": all, "triggers": all, "graphs": all,
            "valueMaps": all,
        }
    })
}

/// A free TCP port for the server's trapper, which must be in 1024-32767 (below the
/// ephemeral ports `free_port` hands out).
fn trapper_port() -> u16 {
    let start = 20_000 + (std::process::id() % 10_000) as u16;
    (start..32_767)
        .chain(1024..start)
        .find(|&p| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok())
        .expect("no free port in 1024-32767")
}

/// zabbix_server, which leads a process group of its pollers: stopped with the whole group
/// when dropped.
struct ServerGroup(Child);

impl Drop for ServerGroup {
    fn drop(&mut self) {
        // SIGTERM to the group (zabbix_server stops its processes and exits), SIGKILL to
        // what is left after 15 s.
        let pgid = format!("-{}", self.0.id());
        let _ = Command::new("kill").args(["-TERM", "--", &pgid]).status();
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline && matches!(self.0.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = Command::new("kill")
            .args(["-KILL", "--", &pgid])
            .stderr(Stdio::null())
            .status();
        let _ = self.0.wait();
    }
}

/// A private Zabbix: its database, its server, and its frontend's API.
struct Zabbix {
    // Stopped in this order when dropped: the server and the frontend before the database.
    server: ServerGroup,
    _frontend: KillOnDrop,
    log: PathBuf,
    /// The SNMP trapper's file.
    traps: PathBuf,
    url: String,
    auth: Option<String>,
    // Dropped last: the server and the frontend hold connections to it.
    _db: Mariadb,
}

impl Zabbix {
    /// Installs Zabbix in `dir`; its SNMP trapper reads `traps`.
    fn install(dir: &Path, traps: &Path) -> Zabbix {
        need_installed("/usr/sbin/zabbix_server", PACKAGES);
        need_installed(&format!("{FRONTEND}/api_jsonrpc.php"), PACKAGES);
        need_installed("php", PACKAGES);
        need_installed("curl", PACKAGES);
        let db = Mariadb::start(dir);
        run(db.client(None).arg("-e").arg(
            "CREATE DATABASE zabbix CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
             CREATE USER 'zabbix'@'localhost' IDENTIFIED BY 'memstat';
             GRANT ALL ON zabbix.* TO 'zabbix'@'localhost';",
        ));
        // The server does not create its schema: load what the package ships, in the order
        // its README.Debian gives.
        for part in ["schema", "images", "data"] {
            let file = format!("{SCHEMA_DIR}/{part}.sql.gz");
            need_installed(&file, PACKAGES);
            let mut zcat = Command::new("zcat")
                .arg(&file)
                .stdout(Stdio::piped())
                .spawn()
                .expect("zcat");
            let out = db
                .client(Some("zabbix"))
                .stdin(zcat.stdout.take().unwrap())
                .output()
                .expect("mariadb");
            assert!(zcat.wait().unwrap().success(), "zcat {file}");
            assert!(
                out.status.success(),
                "loading {file}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }

        // The server, in the foreground. 6.0.14 supports MariaDB up to 10.10 and refuses to
        // start on Debian 12's 10.11 ("higher than maximum") unless told to allow it.
        let log = dir.join("zabbix_server.log");
        let conf = dir.join("zabbix_server.conf");
        let trapper = trapper_port();
        std::fs::write(
            &conf,
            format!(
                "LogType=file\nLogFile={log}\nPidFile={d}/zabbix_server.pid\nSocketDir={d}\n\
                 DBHost=localhost\nDBSocket={sock}\nDBName=zabbix\nDBUser=zabbix\n\
                 DBPassword=memstat\nAllowUnsupportedDBVersions=1\nListenPort={port}\n\
                 StartPollers=2\nStartPollersUnreachable=1\nStartTrappers=1\nStartPingers=0\n\
                 StartDiscoverers=0\nStartHTTPPollers=0\nStartPreprocessors=2\n\
                 StartLLDProcessors=1\nCacheUpdateFrequency=1\nHousekeepingFrequency=0\n\
                 Timeout=4\nAllowRoot=1\nStartSNMPTrapper=1\nSNMPTrapperFile={traps}\n",
                log = log.display(),
                d = dir.display(),
                sock = db.socket.display(),
                port = trapper,
                traps = traps.display(),
            ),
        )
        .unwrap();
        let server = ServerGroup(
            Command::new("/usr/sbin/zabbix_server")
                .arg("-c")
                .arg(&conf)
                .arg("-f")
                // Its own process group: the server forks a process per poller, and Drop stops
                // them all.
                .process_group(0)
                .stdin(Stdio::null())
                .stdout(std::fs::File::create(dir.join("zabbix_server.out")).unwrap())
                .stderr(std::fs::File::create(dir.join("zabbix_server.err")).unwrap())
                .spawn()
                .expect("start zabbix_server"),
        );

        // The frontend: a copy whose configuration file is the test's.
        let ui = dir.join("ui");
        run(Command::new("cp").arg("-a").arg(FRONTEND).arg(&ui));
        let conf_php = dir.join("zabbix.conf.php");
        let class = ui.join("include/classes/core/CConfigFile.php");
        let code = std::fs::read_to_string(&class).unwrap();
        assert!(
            code.contains(DEBIAN_CONF),
            "{} no longer says {DEBIAN_CONF}: where does this frontend read its configuration?",
            class.display()
        );
        std::fs::write(
            &class,
            code.replace(
                DEBIAN_CONF,
                &format!("const CONFIG_FILE_PATH = '{}'", conf_php.display()),
            ),
        )
        .unwrap();
        std::fs::write(
            &conf_php,
            format!(
                "<?php\n$DB['TYPE'] = 'MYSQL';\n$DB['SERVER'] = 'localhost';\n$DB['PORT'] = '0';\n\
                 $DB['DATABASE'] = 'zabbix';\n$DB['USER'] = 'zabbix';\n$DB['PASSWORD'] = 'memstat';\n\
                 $DB['SCHEMA'] = '';\n$DB['ENCRYPTION'] = false;\n$DB['KEY_FILE'] = '';\n\
                 $DB['CERT_FILE'] = '';\n$DB['CA_FILE'] = '';\n$DB['VERIFY_HOST'] = false;\n\
                 $DB['CIPHER_LIST'] = '';\n$DB['VAULT_URL'] = '';\n$DB['VAULT_DB_PATH'] = '';\n\
                 $DB['VAULT_TOKEN'] = '';\n$DB['DOUBLE_IEEE754'] = true;\n\
                 $ZBX_SERVER = '127.0.0.1';\n$ZBX_SERVER_PORT = '{trapper}';\n\
                 $ZBX_SERVER_NAME = 'memstat-test';\n$IMAGE_FORMAT_DEFAULT = IMAGE_FORMAT_PNG;\n"
            ),
        )
        .unwrap();
        let port = free_port();
        let frontend = KillOnDrop(
            Command::new("php")
                .arg("-S")
                .arg(format!("127.0.0.1:{port}"))
                .arg("-t")
                .arg(&ui)
                .arg("-d")
                .arg(format!("mysqli.default_socket={}", db.socket.display()))
                .args(["-d", "date.timezone=UTC", "-d", "memory_limit=512M"])
                .args(["-d", "post_max_size=16M", "-d", "max_execution_time=300"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(dir.join("php.log")).unwrap())
                .spawn()
                .expect("start php -S"),
        );
        let mut z = Zabbix {
            server,
            _frontend: frontend,
            log,
            traps: traps.to_path_buf(),
            url: format!("http://127.0.0.1:{port}/api_jsonrpc.php"),
            auth: None,
            _db: db,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        let version = loop {
            if let Ok(v) = z.try_api("apiinfo.version", json!([])) {
                break v;
            }
            assert!(
                Instant::now() < deadline,
                "the frontend's API did not answer: {}",
                std::fs::read_to_string(dir.join("php.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        eprintln!("Zabbix frontend API {version}");
        let token = z.api(
            "user.login",
            json!({"username": "Admin", "password": "zabbix"}),
        );
        z.auth = Some(token.as_str().unwrap().to_string());
        z
    }

    /// A JSON-RPC call; the API's error as `Err`.
    fn try_api(&self, method: &str, params: Value) -> Result<Value, String> {
        let body = json!({"jsonrpc": "2.0", "method": method, "params": params, "id": 1,
                          "auth": self.auth});
        let mut curl = Command::new("curl")
            .args([
                "-sS",
                "--max-time",
                "120",
                "-H",
                "Content-Type: application/json-rpc",
            ])
            .args(["--data-binary", "@-", &self.url])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("curl");
        curl.stdin
            .take()
            .unwrap()
            .write_all(body.to_string().as_bytes())
            .unwrap();
        let out = curl.wait_with_output().unwrap();
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        let reply: Value = serde_json::from_slice(&out.stdout)
            .map_err(|e| format!("{e}: {}", String::from_utf8_lossy(&out.stdout)))?;
        match reply.get("result") {
            Some(r) => Ok(r.clone()),
            None => Err(reply["error"].to_string()),
        }
    }

    fn api(&self, method: &str, params: Value) -> Value {
        self.try_api(method, params)
            .unwrap_or_else(|e| panic!("{method}: {e}\n{}", self.log_tail()))
    }

    /// The end of the server's log, and what it wrote to stderr (before its log was open).
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let stderr = std::fs::read_to_string(self.log.with_extension("err")).unwrap_or_default();
        let traps = std::fs::read_to_string(&self.traps).unwrap_or_default();
        format!(
            "zabbix_server's stderr:\n{stderr}\nzabbix_server.log, last lines:\n{}\n\
             the SNMP trapper's file:\n{traps}",
            lines[lines.len().saturating_sub(40)..].join("\n")
        )
    }

    /// Waits until `found` returns something, asking again every half second; fails with
    /// `what`, the last answer and the server's log after [`ZABBIX_PATIENCE`].
    fn wait_for<T>(&mut self, what: &str, mut found: impl FnMut(&Zabbix) -> Option<T>) -> T {
        let deadline = Instant::now() + ZABBIX_PATIENCE;
        loop {
            if let Some(t) = found(self) {
                return t;
            }
            if let Ok(Some(status)) = self.server.0.try_wait() {
                panic!(
                    "zabbix_server exited ({status}) {what}\n{}",
                    self.log_tail()
                );
            }
            assert!(
                Instant::now() < deadline,
                "{what}: not within {ZABBIX_PATIENCE:?}\n{}",
                self.log_tail()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// The host's items: key to (itemid, state, lastvalue, lastclock, error).
    fn items(&self, hostid: &str) -> BTreeMap<String, Item> {
        let items = self.api(
            "item.get",
            json!({"hostids": [hostid], "output":
                   ["itemid", "key_", "name", "state", "lastvalue", "lastclock", "error"]}),
        );
        items
            .as_array()
            .unwrap()
            .iter()
            .map(|i| {
                let s = |k: &str| i[k].as_str().unwrap_or_default().to_string();
                (
                    s("key_"),
                    Item {
                        id: s("itemid"),
                        name: s("name"),
                        state: s("state"),
                        last: (s("lastclock") != "0").then(|| s("lastvalue")),
                        error: s("error"),
                    },
                )
            })
            .collect()
    }

    /// The names of the host's problem events so far (each trigger that fired).
    fn problems(&self, hostid: &str) -> BTreeSet<String> {
        self.api(
            "event.get",
            json!({"hostids": [hostid], "source": 0, "object": 0, "value": 1,
                   "output": ["name"]}),
        )
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_string())
        .collect()
    }
}

/// snmptrapd with the shipped traphandle, on 127.0.0.1 at a free UDP port.
struct TrapHandler {
    _child: KillOnDrop,
    port: u16,
}

impl TrapHandler {
    fn start(dir: &Path, traps: &Path) -> TrapHandler {
        require_tool("/usr/sbin/snmptrapd");
        let port = free_port();
        let conf = dir.join("snmptrapd.conf");
        let handler = Path::new(MANIFEST).join("contrib/zabbix/memstat-zabbix-traps");
        std::fs::write(
            &conf,
            format!(
                "disableAuthorization yes\ntraphandle default /bin/sh {} {}\n",
                handler.display(),
                traps.display()
            ),
        )
        .unwrap();
        let log = dir.join("snmptrapd.log");
        let child = Command::new("/usr/sbin/snmptrapd")
            .args(["-f", "-C", "-n", "-On", "-m", "", "-M", "/dev/null", "-c"])
            .arg(&conf)
            .arg("-Lf")
            .arg(&log)
            .arg("-p")
            .arg(dir.join("snmptrapd.pid"))
            .arg(format!("udp:127.0.0.1:{port}"))
            .env("SNMP_PERSISTENT_DIR", dir.join("snmptrapd-persist"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start snmptrapd");
        let t = TrapHandler {
            _child: KillOnDrop(child),
            port,
        };
        wait_until(
            "snmptrapd listens",
            || {
                std::fs::read_to_string(&log)
                    .unwrap_or_default()
                    .contains("NET-SNMP version")
            },
            || std::fs::read_to_string(&log).unwrap_or_default(),
        );
        t
    }
}

#[derive(Debug, Clone)]
struct Item {
    id: String,
    name: String,
    state: String,
    /// The last value, if the item has one.
    last: Option<String>,
    error: String,
}

/// The fixture's memory types at `step`. Every counter moves by a known amount per step.
fn fixture_types(step: u64) -> Vec<MemoryType> {
    let mut mbuf = MemoryType::new(Allocator::Uma, "mbuf");
    mbuf.in_use_count = Some(1000 + step);
    mbuf.in_use_bytes = Some((5u64 << 32) + 256 * step);
    mbuf.allocs = Some((1u64 << 40) + ALLOCS_STEP[0] * step);
    mbuf.frees = Some(1u64 << 40);
    mbuf.failures = Some(0);
    mbuf.zone_free = Some(3);
    // Its twin by name: no limit (0), and values past 2^63.
    let mut mbuf2 = MemoryType::new(Allocator::Uma, "mbuf");
    mbuf2.ordinal = 1;
    mbuf2.in_use_count = Some(7 + step);
    mbuf2.in_use_bytes = Some(u64::MAX - 1000 + step);
    mbuf2.allocs = Some((1u64 << 63) + 12_345 + ALLOCS_STEP[1] * step);
    mbuf2.frees = Some(1u64 << 63);
    mbuf2.failures = Some(0);
    mbuf2.count_limit = Some(0);
    mbuf2.zone_free = Some(0);
    // 940 in use and 10 cached against a limit of 1000: 95%, past the default 90%.
    let mut nearfull = MemoryType::new(Allocator::Uma, "nearfull");
    nearfull.count_limit = Some(1000);
    nearfull.in_use_count = Some(940);
    nearfull.zone_free = Some(10);
    nearfull.in_use_bytes = Some(2_000_000 + step);
    nearfull.allocs = Some(500 + ALLOCS_STEP[2] * step);
    nearfull.frees = Some(100);
    nearfull.failures = Some(FAILURES_STEP * step);
    // Under the default {$MEMSTAT.TYPE.BYTES.MATCHES} (1,000,000 bytes or more).
    let mut tiny = MemoryType::new(Allocator::Malloc, "tiny");
    tiny.in_use_count = Some(2);
    tiny.in_use_bytes = Some(1000);
    tiny.allocs = Some(9);
    tiny.frees = Some(7);
    tiny.failures = Some(0);
    // A Linux slab cache: no counters of allocations, frees or failures.
    let mut dentry = MemoryType::new(Allocator::Slab, "dentry");
    dentry.size = Some(192);
    dentry.in_use_count = Some(5_000_000_000 + step);
    dentry.in_use_bytes = Some(960_000_000_000 + 192 * step);
    vec![mbuf, mbuf2, nearfull, tiny, dentry]
}

/// memTypeAllocs' increase per step of mbuf, its twin and nearfull.
const ALLOCS_STEP: [u64; 3] = [3, 7, 11];
/// memTypeFailures' increase per step of nearfull.
const FAILURES_STEP: u64 = 5;

fn kernel_kinds() -> Vec<&'static KernelKind> {
    SOURCES.iter().flat_map(|d| d.kinds.iter()).collect()
}

/// The kernel kinds the host has and their bytes: all but shadowCallStack, hardwareCorrupted
/// and zfsArcWired, past 2^32.
fn kernel_bytes(step: u64) -> BTreeMap<&'static str, u64> {
    kernel_kinds()
        .iter()
        .filter(|k| !ABSENT_KINDS.contains(&k.name))
        .map(|k| (k.name, (5u64 << 32) + u64::from(k.index) * 1_000_003 + step))
        .collect()
}

const ABSENT_KINDS: [&str; 3] = ["shadowCallStack", "hardwareCorrupted", "zfsArcWired"];

fn write_step(path: &Path, step: u64) {
    let mut snap = Snapshot::new(
        0,
        std::time::SystemTime::now(),
        String::new(),
        fixture_types(step),
    );
    let bytes = kernel_bytes(step);
    for k in kernel_kinds() {
        if let Some(v) = bytes.get(k.name) {
            snap.figures.insert(k.figure.into(), *v);
        }
    }
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, fixture::to_json(&snap)).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// The rows as the daemon indexes them: memTypeIndex to (name, ordinal).
fn served_rows(port: u16) -> BTreeMap<u32, (String, u64)> {
    let column = |n: u32| -> BTreeMap<u32, String> {
        bulkwalk(port, &format!("{TYPE_ENTRY}.{n}"), &[])
            .into_iter()
            .map(|l| {
                let index = l.oid.rsplit('.').next().unwrap().parse().unwrap();
                (index, l.value.trim_matches('"').to_string())
            })
            .collect()
    };
    let names = column(2);
    let ordinals = column(4);
    names
        .into_iter()
        .map(|(i, name)| (i, (name, ordinals[&i].parse().unwrap())))
        .collect()
}

/// The index of the row named `name` with `ordinal`.
fn index_of(rows: &BTreeMap<u32, (String, u64)>, name: &str, ordinal: u64) -> u32 {
    *rows
        .iter()
        .find(|(_, (n, o))| n == name && *o == ordinal)
        .unwrap_or_else(|| panic!("no row {name} #{ordinal} in {rows:?}"))
        .0
}

/// The row indexes of the host's items whose key is `prefix[N]`.
fn indexes(items: &BTreeMap<String, Item>, prefix: &str) -> BTreeSet<u32> {
    items
        .keys()
        .filter_map(|k| {
            k.strip_prefix(prefix)?
                .strip_prefix('[')?
                .strip_suffix(']')?
                .parse()
                .ok()
        })
        .collect()
}

/// The stack each kernel graph must draw, bottom first: Linux's top level, and the stackable
/// parts of FreeBSD's wired (its top level is wired alone).
fn expected_stacks() -> Vec<(&'static str, Vec<&'static str>)> {
    let kinds = kernel_kinds();
    let under = |parent: u32, freebsd: bool| -> Vec<&'static str> {
        kinds
            .iter()
            .filter(|k| k.parent == parent && k.stackable && (k.index >= 32) == freebsd)
            .map(|k| k.name)
            .collect()
    };
    assert_eq!(
        under(0, true),
        ["wired"],
        "FreeBSD's top level is wired alone"
    );
    vec![
        ("MEMSTAT: kernel memory by kind", under(0, false)),
        ("MEMSTAT: wired memory by kind", under(32, true)),
    ]
}

#[test]
fn zabbix_discovers_polls_and_alarms_on_memstat_mib() {
    let began = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let fix = dir.path().join("fixture.json");
    let mut step = 0;
    write_step(&fix, step);
    // The notifications: snmpd sends them to an snmptrapd whose traphandle is the shipped
    // memstat-zabbix-traps, which writes them where Zabbix's SNMP trapper reads.
    let traps = dir.path().join("snmptraps.log");
    std::fs::write(&traps, "").unwrap();
    let trapd = TrapHandler::start(dir.path(), &traps);
    let snmpd = Snmpd::start_with_conf(
        dir.path(),
        Transport::Unix,
        "0660 0750",
        &format!("trap2sink udp:127.0.0.1:{} public", trapd.port),
    );
    let src = format!("fixture:{}", fix.display());
    let state = dir.path().join("state").display().to_string();
    let _daemon = Daemon::start(
        &snmpd,
        &[
            "--source",
            &src,
            "--state-dir",
            &state,
            "--max-age",
            "0.2",
            "--watch-interval",
            "0.5",
        ],
    );
    let rows = served_rows(snmpd.port);
    let mut zabbix = Zabbix::install(dir.path(), &traps);
    let installed = began.elapsed();

    // Import the shipped file; importing it again changes nothing.
    let source = std::fs::read_to_string(Path::new(MANIFEST).join(TEMPLATE)).unwrap();
    for round in ["first", "second"] {
        let done = zabbix.api("configuration.import", import_params(&source));
        assert_eq!(done, json!(true), "{round} import");
        let diff = zabbix.api("configuration.importcompare", import_params(&source));
        assert_eq!(
            diff,
            json!([]),
            "after the {round} import, importing again would change"
        );
    }

    // The host: SNMPv2c on the private snmpd, the three templates, short intervals.
    let templates = zabbix.api(
        "template.get",
        json!({"output": ["templateid", "host"], "filter": {"host": [BASE, LINUX, FREEBSD]}}),
    );
    let templates: Vec<Value> = templates
        .as_array()
        .unwrap()
        .iter()
        .map(|t| json!({"templateid": t["templateid"]}))
        .collect();
    assert_eq!(templates.len(), 3, "the three templates are imported");
    let group = zabbix.api(
        "hostgroup.get",
        json!({"output": ["groupid"], "filter": {"name": ["Linux servers"]}}),
    );
    let host = zabbix.api(
        "host.create",
        json!({
            "host": "memhost",
            "groups": [{"groupid": group[0]["groupid"]}],
            "templates": templates,
            "interfaces": [{"type": 2, "main": 1, "useip": 1, "ip": "127.0.0.1", "dns": "",
                            "port": snmpd.port.to_string(),
                            "details": {"version": 2, "bulk": 1, "community": "public"}}],
            "macros": [{"macro": "{$MEMSTAT.INTERVAL}", "value": INTERVAL},
                       {"macro": "{$MEMSTAT.DISCOVERY.INTERVAL}", "value": "5s"}],
        }),
    );
    let hostid = host["hostids"][0].as_str().unwrap().to_string();

    // Discovery: every row but the small one, each under its own index; the limit rule finds
    // the one zone with a limit.
    let mbuf = index_of(&rows, "mbuf", 0);
    let mbuf2 = index_of(&rows, "mbuf", 1);
    let nearfull = index_of(&rows, "nearfull", 0);
    let tiny = index_of(&rows, "tiny", 0);
    let dentry = index_of(&rows, "dentry", 0);
    let kept: BTreeSet<u32> = [mbuf, mbuf2, nearfull, dentry].into();
    let items = zabbix.wait_for("memTypeTable discovered", |z| {
        let items = z.items(&hostid);
        let limits = indexes(&items, "memstat.limit.count");
        (indexes(&items, "memstat.type.inuse.bytes") == kept && !limits.is_empty()).then_some(items)
    });
    assert_eq!(indexes(&items, "memstat.limit.count"), [nearfull].into());
    assert!(!indexes(&items, "memstat.type.inuse.bytes").contains(&tiny));
    for (index, name) in [(mbuf, "mbuf"), (mbuf2, "mbuf")] {
        let item = &items[&format!("memstat.type.inuse.bytes[{index}]")];
        assert_eq!(item.name, format!("{name} [{index}]: bytes in use"));
    }

    // Values: each discovered row's gauges equal its own row's, past 2^32 and 2^63; each
    // kernel kind's bytes equal the fixture's. Wait for a step the server has not seen yet.
    step += 1;
    write_step(&fix, step);
    let types = fixture_types(step);
    let by_index: BTreeMap<u32, &MemoryType> = [mbuf, mbuf2, nearfull, tiny, dentry]
        .into_iter()
        .zip(types.iter())
        .collect();
    let kernel = kernel_bytes(step);
    let items = zabbix.wait_for("the values of step 1 in history", |z| {
        let items = z.items(&hostid);
        let gauges = kept.iter().all(|i| {
            let t = by_index[i];
            let bytes = items[&format!("memstat.type.inuse.bytes[{i}]")]
                .last
                .clone();
            let count = items[&format!("memstat.type.inuse.items[{i}]")]
                .last
                .clone();
            let since = &items[&format!("memstat.type.discontinuity[{i}]")].last;
            bytes == t.in_use_bytes.map(|v| v.to_string())
                && count == t.in_use_count.map(|v| v.to_string())
                && since.is_some()
        });
        let kinds = kernel.iter().all(|(name, v)| {
            items[&format!("memstat.kernel.bytes[{name}]")].last == Some(v.to_string())
        });
        (gauges && kinds).then_some(items)
    });
    // An absent object leaves its item supported and empty: the absent kernel kinds, and the
    // slab cache's counters.
    let empty: Vec<String> = ABSENT_KINDS
        .iter()
        .map(|k| format!("memstat.kernel.bytes[{k}]"))
        .chain(
            ["allocs", "frees", "failures"]
                .iter()
                .map(|c| format!("memstat.type.{c}[{dentry}]")),
        )
        .collect();
    for key in &empty {
        let item = &items[key];
        assert_eq!(item.state, "0", "{key} is not supported: {}", item.error);
        assert_eq!(item.last, None, "{key} has a value");
    }
    let unsupported: Vec<(&String, &String)> = items
        .iter()
        .filter(|(_, i)| i.state != "0")
        .map(|(k, i)| (k, &i.error))
        .collect();
    assert!(unsupported.is_empty(), "unsupported items: {unsupported:?}");

    // Rates: several more steps, each seen by the server before the next.
    for _ in 0..4 {
        step += 1;
        write_step(&fix, step);
        let want = fixture_types(step)[0].in_use_bytes.unwrap().to_string();
        zabbix.wait_for(&format!("step {step} polled"), |z| {
            let items = z.items(&hostid);
            (items[&format!("memstat.type.inuse.bytes[{mbuf}]")].last == Some(want.clone()))
                .then_some(())
        });
    }
    let items = zabbix.items(&hostid);
    for (index, key, per_step) in [
        (mbuf, "allocs", ALLOCS_STEP[0]),
        (mbuf2, "allocs", ALLOCS_STEP[1]),
        (nearfull, "allocs", ALLOCS_STEP[2]),
        (nearfull, "failures", FAILURES_STEP),
        (mbuf, "failures", 0),
    ] {
        let key = format!("memstat.type.{key}[{index}]");
        assert_rate_is_whole_steps(&zabbix, &items[&key].id, &key, per_step, step);
    }

    // Triggers: nearfull's failures and limit, and nothing for the mbuf zones.
    let failing = format!("nearfull [{nearfull}]: allocations fail");
    let nearing = format!("nearfull [{nearfull}]: nearing its count limit (>= 90%)");
    let problems = zabbix.wait_for("the failure and limit triggers fire", |z| {
        let p = z.problems(&hostid);
        (p.contains(&failing) && p.contains(&nearing)).then_some(p)
    });
    for index in [mbuf, mbuf2] {
        assert!(
            !problems
                .iter()
                .any(|p| p.starts_with(&format!("mbuf [{index}]"))),
            "a trigger fired for mbuf [{index}] whose failures never rose: {problems:?}"
        );
    }

    // The daemon's memTypeAllocFailure for nearfull reached the host's trap item.
    let alloc_failure = ".1.3.6.1.6.3.1.1.4.1.0 .1.3.6.1.4.1.32473.1.0.1";
    let nearfull_name = format!("{TYPE_ENTRY}.2.{nearfull} \"nearfull\"");
    let trap = zabbix.wait_for("memTypeAllocFailure in the trap item", |z| {
        let items = z.items(&hostid);
        let (_, item) = items.iter().find(|(k, _)| k.starts_with("snmptrap["))?;
        let text = item.last.clone()?;
        (text.contains(alloc_failure) && text.contains(&nearfull_name)).then_some(text)
    });
    // With the row's failure counter, as the daemon sent it.
    let failures = format!("{TYPE_ENTRY}.17.{nearfull} ");
    assert!(trap.contains(&failures), "no {failures} in {trap}");

    // With {$MEMSTAT.TYPE.BYTES.MATCHES} set to ".*" on the host, every row is discovered,
    // the small one too, its counters stored as rates.
    zabbix.api(
        "usermacro.create",
        json!({"hostid": hostid, "macro": "{$MEMSTAT.TYPE.BYTES.MATCHES}", "value": ".*"}),
    );
    let every: BTreeSet<u32> = rows.keys().copied().collect();
    let items = zabbix.wait_for("every row discovered with the filter opened", |z| {
        let items = z.items(&hostid);
        let failures = items.get(&format!("memstat.type.failures[{tiny}]"))?;
        (indexes(&items, "memstat.type.inuse.bytes") == every && failures.last.is_some())
            .then_some(items)
    });
    assert_eq!(
        items[&format!("memstat.type.failures[{tiny}]")]
            .last
            .as_deref(),
        Some("0"),
        "tiny's failures never rose"
    );

    // The stale source: the fixture becomes unparseable (file permissions would not stop a
    // test run as root), memSourceStatus goes to stale(2), and
    // the trigger fires.
    std::fs::write(&fix, "this is not a snapshot").unwrap();
    let stale = "MEMSTAT: the memory statistics are not fresh (source stale (2))";
    zabbix.wait_for("the stale-source trigger fires", |z| {
        let p = z.problems(&hostid);
        p.contains(stale).then_some(())
    });
    let status = zabbix.items(&hostid)["memstat.source.status"].last.clone();
    assert_eq!(status.as_deref(), Some("2"));

    // The kernel graphs stack the rows memKernelTable marks stackable at their level.
    let graphs = zabbix.api(
        "graph.get",
        json!({"hostids": [hostid], "output": ["name", "graphtype"],
               "selectGraphItems": ["itemid", "sortorder"], "selectItems": ["itemid", "key_"]}),
    );
    for (name, stack) in expected_stacks() {
        let graph = graphs
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["name"] == name)
            .unwrap_or_else(|| panic!("no graph {name}: {graphs}"));
        assert_eq!(graph["graphtype"], "1", "{name} is stacked");
        let key_of: BTreeMap<&str, &str> = graph["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| (i["itemid"].as_str().unwrap(), i["key_"].as_str().unwrap()))
            .collect();
        let mut drawn: Vec<(u64, &str)> = graph["gitems"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| {
                (
                    g["sortorder"].as_str().unwrap().parse().unwrap(),
                    key_of[g["itemid"].as_str().unwrap()],
                )
            })
            .collect();
        drawn.sort();
        let drawn: Vec<&str> = drawn.into_iter().map(|(_, k)| k).collect();
        let want: Vec<String> = stack
            .iter()
            .map(|k| format!("memstat.kernel.bytes[{k}]"))
            .collect();
        assert_eq!(drawn, want, "{name}");
    }
    // Each discovered row has its own graphs.
    for index in &kept {
        let name = format!("{} [{index}]: bytes in use", by_index[index].name);
        assert!(
            graphs
                .as_array()
                .unwrap()
                .iter()
                .any(|g| g["name"] == name.as_str()),
            "no graph {name}"
        );
    }
    eprintln!(
        "Zabbix test: {:.0?} in all, {:.0?} of it to install Zabbix",
        began.elapsed(),
        installed
    );
}

/// Each stored rate of `key`, times the time since the value before it, is a whole number of
/// the counter's steps (`per_step` each), and all of them add up to at least one step (unless
/// `per_step` is 0) and at most the `written` steps of the fixture.
/// Zabbix stores a rate at each poll after the first, at the poll's time, so the interval of
/// each rate is the time between two stored rates.
fn assert_rate_is_whole_steps(
    zabbix: &Zabbix,
    itemid: &str,
    key: &str,
    per_step: u64,
    written: u64,
) {
    let history = zabbix.api(
        "history.get",
        json!({"history": 0, "itemids": [itemid], "sortfield": "clock", "sortorder": "ASC",
               "output": "extend"}),
    );
    let points: Vec<(f64, f64)> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            let s = |k: &str| h[k].as_str().unwrap().parse::<f64>().unwrap();
            (s("clock") + s("ns") / 1e9, s("value"))
        })
        .collect();
    assert!(points.len() >= 3, "{key}: too few rates stored: {history}");
    let mut steps = 0.0;
    for pair in points.windows(2) {
        let ((t0, _), (t1, rate)) = (pair[0], pair[1]);
        let increase = rate * (t1 - t0);
        if per_step == 0 {
            assert!(
                increase.abs() < 1e-6,
                "{key}: rate {rate} of a constant counter"
            );
            continue;
        }
        let whole = (increase / per_step as f64).round();
        assert!(
            (increase - whole * per_step as f64).abs() < 1e-3 * per_step as f64,
            "{key}: a rate of {rate} over {:.3} s is an increase of {increase}, not a multiple \
             of {per_step}: {history}",
            t1 - t0
        );
        steps += whole;
    }
    assert!(
        per_step == 0 || (1.0..=written as f64).contains(&steps),
        "{key}: the rates add up to {steps} steps of {per_step}, of {written} written: {history}"
    );
}

/// The template, read by the YAML parser python3-yaml, as JSON.
fn template_json() -> Value {
    need("python3", "python3-yaml");
    let out = run_ok(Command::new("python3").args([
        "-c",
        "import json, sys, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))",
        &format!("{MANIFEST}/{TEMPLATE}"),
    ]));
    serde_json::from_str(&out).unwrap()
}

/// Every SNMP item of the file, prototypes included: (key, OID, value type, its preprocessing
/// steps).
fn snmp_items(template: &Value) -> Vec<(String, String, String, Vec<String>)> {
    let mut out = Vec::new();
    let mut add = |i: &Value| {
        if i["type"] != "SNMP_AGENT" {
            return;
        }
        let steps: Vec<String> = i["preprocessing"]
            .as_array()
            .map(|p| {
                p.iter()
                    .map(|s| s["type"].as_str().unwrap().to_string())
                    .collect()
            })
            .unwrap_or_default();
        out.push((
            i["key"].as_str().unwrap().to_string(),
            i["snmp_oid"].as_str().unwrap().to_string(),
            i["value_type"].as_str().unwrap_or("UNSIGNED").to_string(),
            steps,
        ));
    };
    for t in template["zabbix_export"]["templates"].as_array().unwrap() {
        for i in t["items"].as_array().into_iter().flatten() {
            add(i);
        }
        for rule in t["discovery_rules"].as_array().into_iter().flatten() {
            for i in rule["item_prototypes"].as_array().unwrap() {
                add(i);
            }
        }
    }
    out
}

/// The object an OID names and its syntax, as MEMSTAT-MIB says (snmptranslate): the textual
/// convention where it has one (a MemGauge64 is carried in a Counter64 but is a gauge).
fn object_and_syntax(oid: &str) -> (String, String) {
    let name = translate(&["-Os"], &format!(".{oid}"));
    let text = translate(&["-Td"], &format!(".{oid}"));
    let line = |prefix: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(prefix))
            .map(|s| s.split_whitespace().next().unwrap_or_default().to_string())
    };
    let syntax = line("-- TEXTUAL CONVENTION")
        .or_else(|| line("SYNTAX"))
        .unwrap_or_else(|| panic!("{oid}: no SYNTAX in {text}"));
    (name, syntax)
}

#[test]
fn zabbix_template_reads_each_object_as_memstat_mib_defines_it() {
    let template = template_json();
    assert_eq!(template["zabbix_export"]["version"], "6.0");
    let items = snmp_items(&template);
    assert!(items.len() > 30, "{items:?}");
    for (key, oid, value_type, steps) in &items {
        let oid = oid.strip_suffix(".{#SNMPINDEX}").unwrap_or(oid);
        let (name, syntax) = object_and_syntax(oid);
        assert!(
            !name.starts_with('.') && !name.contains("32473"),
            "{key}: {oid} is no object"
        );
        // A Counter64 is stored as a rate per second, a float, of its last 15 digits (a
        // double's exact range); nothing else is a rate.
        let counter = syntax == "Counter64";
        let rate = steps.iter().any(|s| s == "CHANGE_PER_SECOND");
        assert_eq!(rate, counter, "{key} reads {name} ({syntax}): rate");
        if counter {
            assert_eq!(value_type, "FLOAT", "{key}: a rate is fractional");
            let at = steps.iter().position(|s| s == "CHANGE_PER_SECOND").unwrap();
            assert!(
                at > 0 && steps[at - 1] == "REGEX",
                "{key}: its last 15 digits are taken before the rate: {steps:?}"
            );
        }
        // A cell a row may lack, or a kind a host may lack, leaves the item empty, not
        // unsupported.
        let optional = key.starts_with("memstat.type.") || key.starts_with("memstat.kernel.");
        if optional {
            assert_eq!(
                steps.first().map(String::as_str),
                Some("CHECK_NOT_SUPPORTED"),
                "{key}"
            );
        }
    }

    // The kernel items: one per kind of the daemon's sources, in the template of its system,
    // each reading memKernelBytes of its kind's index.
    let mut kernel: BTreeMap<String, String> = BTreeMap::new();
    for t in template["zabbix_export"]["templates"].as_array().unwrap() {
        for i in t["items"].as_array().into_iter().flatten() {
            if let Some(kind) = i["key"]
                .as_str()
                .unwrap()
                .strip_prefix("memstat.kernel.bytes[")
            {
                let kind = kind.strip_suffix(']').unwrap().to_string();
                let owner = t["template"].as_str().unwrap().to_string();
                kernel.insert(kind.clone(), owner);
                let (name, _) = object_and_syntax(i["snmp_oid"].as_str().unwrap());
                let k = kernel_kinds().into_iter().find(|k| k.name == kind);
                let k = k.unwrap_or_else(|| panic!("{kind} is no kind of memKernelTable"));
                // snmptranslate names the index by its label in MemKernelKind.
                assert_eq!(
                    name,
                    format!("memKernelBytes.{}", k.name),
                    "{kind} ({})",
                    k.index
                );
            }
        }
    }
    for k in kernel_kinds() {
        let system = if k.index >= 32 { FREEBSD } else { LINUX };
        assert_eq!(
            kernel.get(k.name).map(String::as_str),
            Some(system),
            "{}",
            k.name
        );
    }

    // The discovery rules read memTypeTable's columns.
    for t in template["zabbix_export"]["templates"].as_array().unwrap() {
        for rule in t["discovery_rules"].as_array().into_iter().flatten() {
            let oid = rule["snmp_oid"].as_str().unwrap();
            let inner = oid
                .strip_prefix("discovery[")
                .unwrap()
                .strip_suffix(']')
                .unwrap();
            // Each macro is the column its filter and names take it for.
            for pair in inner.split(',').collect::<Vec<_>>().chunks(2) {
                let (name, _) = object_and_syntax(pair[1]);
                let column = match pair[0] {
                    "{#MEMNAME}" => "memTypeName",
                    "{#MEMALLOC}" => "memTypeAllocator",
                    "{#MEMBYTES}" => "memTypeInUseBytes",
                    "{#MEMLIMIT}" => "memTypeCountLimit",
                    other => panic!("{other}: a macro this test does not know"),
                };
                assert_eq!(name, column, "{}", pair[0]);
            }
        }
    }

    // The limit macros default to the daemon's notification settings.
    let default = |key: &str| {
        SETTINGS
            .iter()
            .find(|s| s.key == key)
            .unwrap()
            .default
            .unwrap()
    };
    let macros: BTreeMap<&str, &str> = template["zabbix_export"]["templates"][0]["macros"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["macro"].as_str().unwrap(), m["value"].as_str().unwrap()))
        .collect();
    assert_eq!(
        macros["{$MEMSTAT.LIMIT.PERCENT}"],
        default("notify-limit-percent")
    );
    assert_eq!(
        macros["{$MEMSTAT.LIMIT.HYSTERESIS}"],
        default("notify-limit-hysteresis")
    );
}

/// Runs the shipped traphandle with `input` on stdin and `file` as its argument.
fn traphandle(input: &str, file: &Path) -> std::process::Output {
    let mut child = Command::new("/bin/sh")
        .arg(Path::new(MANIFEST).join("contrib/zabbix/memstat-zabbix-traps"))
        .arg(file)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn memstat_zabbix_traps_writes_a_record_zabbix_reads_per_notification() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("snmptraps.log");
    // Two notifications, the second without a newline after its last varbind and with a
    // value that says ZBXTRAP, which must not start a record of its own.
    let first = "host.example\nUDP: [192.0.2.7]:1024->[192.0.2.1]:162\n\
                 .1.3.6.1.6.3.1.1.4.1.0 .1.3.6.1.4.1.32473.1.0.1\n";
    let second = "UDP: [2001:db8::5]:1024->[2001:db8::1]:162\n\
                  UDP: [2001:db8::5]:1024->[2001:db8::1]:162\n\
                  .1.3.6.1.6.3.1.1.4.1.0 .1.3.6.1.4.1.32473.1.0.4\n\
                  .1.3.6.1.4.1.32473.1.1.1.9.0 \"/x ZBXTRAP 10.0.0.1\"";
    for input in [first, second] {
        let out = traphandle(input, &file);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let text = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    // A record: the time, ZBXTRAP and the sender's address; then snmptrapd's lines, whole.
    assert_eq!(lines.len(), 9, "{text}");
    assert!(lines[0].ends_with(" ZBXTRAP 192.0.2.7\n"), "{text}");
    assert_eq!(lines[1..4].concat(), first);
    assert!(lines[4].ends_with(" ZBXTRAP 2001:db8::5\n"), "{text}");
    assert_eq!(
        lines[5..9].concat(),
        format!("{}\n", second.replace("ZBXTRAP", "ZBX_TRAP"))
    );
    assert_eq!(text.matches("ZBXTRAP").count(), 2, "{text}");

    // A transport without an address in brackets: an error naming it, and nothing written.
    let out = traphandle("host\n<UNKNOWN>\n.1.3.6.1.6.3.1.1.4.1.0 .1.3\n", &file);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no sender address in \"<UNKNOWN>\""), "{err}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
    // Without its argument: a usage error.
    let out = Command::new("/bin/sh")
        .arg(Path::new(MANIFEST).join("contrib/zabbix/memstat-zabbix-traps"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("usage: memstat-zabbix-traps"));
}
