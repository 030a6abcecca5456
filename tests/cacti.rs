//! Cacti, run for real: Debian's cacti (1.2.x) and cacti-spine against a private MariaDB, a
//! private snmpd and the daemon.
//!
//! The test imports contrib/cacti's shipped template export with Cacti's own CLI, adds the
//! device and the data query, creates every graph for every row of a fixture whose names
//! repeat (two `mbuf` zones) and whose values pass 2^32 and 2^63, and polls with cmd.php and
//! then with spine. After each poll, `rrdtool lastupdate` must show in every RRD the values of
//! its own row. Then the daemon restarts: Cacti must notice (memDaemonUptime went back),
//! re-index, and go on writing each row into its own RRD.
//!
//! A second test imports the kernel memory overview export (graph templates over Get SNMP
//! Data, one data template per memKernelTable kind), creates both graphs for a host whose
//! fixture has Linux's and FreeBSD's kinds, some of them missing, and polls with cmd.php and
//! spine: each RRD must hold its own kind's bytes (U for a kind the host lacks), the graphs
//! must stack exactly the rows memKernelTable marks as stackable at their level, and Cacti's
//! own graph code must draw them as one AREA and STACKs on it.
//!
//! Nothing is installed or started system-wide: MariaDB runs from a datadir and socket in the
//! test's temp dir, and Cacti runs from a copy of /usr/share/cacti whose include/config.php
//! points at that socket and whose rra/ and log are in the temp dir.

mod common;
#[path = "support/mariadb.rs"]
mod mariadb;

use common::*;
use mariadb::{need_installed, run, Mariadb};
use memstat_agentx::memstat::source::{FigureObject, KernelKind, Role, SOURCES};
use memstat_agentx::memstat::{fixture, Allocator, MemoryType, Snapshot};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const MANIFEST: &str = env!("CARGO_MANIFEST_DIR");
/// The tests' `--max-age 0.2`, for the waits until a poll must read the source anew.
const MAX_AGE: Duration = Duration::from_millis(200);
const QUERY_XML: &str = "contrib/cacti/memstat_memtypetable.xml";
const EXPORT_XML: &str = "contrib/cacti/cacti_data_query_memstat-mib_kernel_memory_types.xml";
const KERNEL_XML: &str = "contrib/cacti/cacti_graph_template_memstat_kernel_memory_by_kind.xml";
const PACKAGES: &str =
    "apt-get install -y cacti cacti-spine mariadb-server rrdtool (.ci/run installs them)";

/// One Cacti at a time: two mariadb-install-db runs at once fail here (the bootstrap of one
/// breaks the other's), and each test's MariaDB and pollers load the 2 CPUs enough alone.
static ONE_CACTI: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_cacti() -> std::sync::MutexGuard<'static, ()> {
    // A test that failed holding it poisons it; the next one runs all the same.
    ONE_CACTI.lock().unwrap_or_else(|e| e.into_inner())
}

/// Fails with the packages to install when `path` is missing.
fn need(path: &str) {
    need_installed(path, PACKAGES);
}

/// A private Cacti: a copy of Debian's /usr/share/cacti configured for the private MariaDB.
struct Cacti {
    root: PathBuf,
    log: PathBuf,
    db: Mariadb,
}

impl Cacti {
    fn install(dir: &Path) -> Cacti {
        need("/usr/share/cacti/cli/import_template.php");
        need("/usr/sbin/spine");
        need("php");
        need("rrdtool");
        let db = Mariadb::start(dir);
        run(db.client(None).arg("-e").arg("CREATE DATABASE cacti"));
        let schema = std::fs::File::open("/usr/share/cacti/conf_templates/cacti.sql")
            .unwrap_or_else(|e| {
                panic!("/usr/share/cacti/conf_templates/cacti.sql: {e}; {PACKAGES}")
            });
        let out = db.client(Some("cacti")).stdin(schema).output().unwrap();
        assert!(
            out.status.success(),
            "loading cacti.sql: {}",
            String::from_utf8_lossy(&out.stderr)
        );

        let root = dir.join("cacti");
        run(Command::new("cp")
            .arg("-a")
            .arg("/usr/share/cacti")
            .arg(&root));
        let site = root.join("site");
        let version = std::fs::read_to_string(site.join("include/cacti_version")).unwrap();
        // Debian links these to /etc/cacti, /var/lib/cacti and /var/log/cacti.
        for link in ["include/config.php", "rra", "log", "cache"] {
            let _ = std::fs::remove_file(site.join(link));
        }
        for d in ["rra", "log", "cache"] {
            std::fs::create_dir(site.join(d)).unwrap();
        }
        std::fs::write(
            site.join("include/config.php"),
            format!(
                "<?php\n\
                 $database_type = 'mysql';\n\
                 $database_default = 'cacti';\n\
                 $database_hostname = '{}';\n\
                 $database_username = 'root';\n\
                 $database_password = '';\n\
                 $database_port = '3306';\n\
                 $database_retries = 2;\n\
                 $database_ssl = false;\n\
                 $database_ssl_key = '';\n\
                 $database_ssl_cert = '';\n\
                 $database_ssl_ca = '';\n\
                 $database_persist = false;\n\
                 $poller_id = 1;\n\
                 $url_path = '/cacti/';\n\
                 $cacti_session_name = 'Cacti';\n\
                 $cacti_db_session = false;\n\
                 $disable_log_rotation = true;\n\
                 $path_csrf_secret = '{}';\n",
                db.socket.display(),
                dir.join("csrf-secret.php").display()
            ),
        )
        .unwrap();
        let spine_conf = dir.join("spine.conf");
        std::fs::write(
            &spine_conf,
            format!(
                "DB_Host {}\nDB_Database cacti\nDB_User root\nDB_Pass\nDB_Port 3306\n",
                db.socket.display()
            ),
        )
        .unwrap();
        let log = dir.join("cacti.log");
        // As Debian's postinst does for a fresh database: mark it as this version, so the CLI
        // does not ask for the web installer. Then keep everything in the temp dir, and drop
        // the sample automation network (192.168.1.0/24), which the poller would scan.
        db.sql("cacti", &format!(
            "UPDATE version SET cacti='{}';
             REPLACE INTO settings (name, value) VALUES
                ('path_cactilog', '{}'), ('path_spine_config', '{}'), ('path_spine', '/usr/sbin/spine'),
                ('path_rrdtool', '/usr/bin/rrdtool'), ('log_verbosity', '3');
             DELETE FROM automation_networks;",
            version.trim(),
            log.display(),
            spine_conf.display()
        ));
        Cacti { root, log, db }
    }

    /// Runs a PHP script of the private copy (`cli/x.php` or `site/x.php`).
    fn php(&self, script: &str, args: &[&str]) -> String {
        let out = run(Command::new("php")
            .arg(self.root.join(script))
            .args(args)
            .current_dir(&self.root)
            .stdin(Stdio::null()));
        self.wait_for_background();
        out
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `cli/add_device.php`: a device on the private snmpd (SNMP v2c, availability by SNMP);
    /// returns its id.
    fn add_device(&self, description: &str, port: u16) -> String {
        let out = self.php(
            "cli/add_device.php",
            &[
                &format!("--description={description}"),
                "--ip=127.0.0.1",
                "--template=0",
                "--version=2",
                "--community=public",
                &format!("--port={port}"),
                "--avail=snmp",
            ],
        );
        out.split("new device-id: (")
            .nth(1)
            .and_then(|s| s.split(')').next())
            .unwrap_or_else(|| panic!("add_device: {out}"))
            .to_string()
    }

    /// The graph of a graph template (not a data query) for a device, as "Create Graphs for
    /// this Device" makes it: its data sources come with it. Returns the graph's id.
    fn add_template_graph(&self, template: &str, host_id: &str) -> String {
        let id = self.db.sql(
            "cacti",
            &format!("SELECT id FROM graph_templates WHERE name = '{template}'"),
        );
        assert_eq!(id.len(), 1, "graph template {template}");
        let out = self.php(
            "cli/add_graphs.php",
            &[
                "--graph-type=cg",
                &format!("--graph-template-id={}", id[0][0]),
                &format!("--host-id={host_id}"),
            ],
        );
        out.split("Graph Added - Graph[")
            .nth(1)
            .and_then(|s| s.split(']').next())
            .unwrap_or_else(|| panic!("add_graphs: {out}"))
            .to_string()
    }

    /// The processes running a script of this copy of Cacti (the poller starts some in the
    /// background).
    fn our_processes(&self) -> Vec<u32> {
        let needle = self.root.display().to_string();
        let mut pids = Vec::new();
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
                if String::from_utf8_lossy(&cmd).contains(&needle) {
                    pids.push(pid);
                }
            }
        }
        pids
    }

    fn wait_for_background(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.our_processes().is_empty() {
            assert!(
                Instant::now() < deadline,
                "Cacti's background processes did not finish: {:?}\n{}",
                self.our_processes(),
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until the clock has passed the second of every RRD's last update (`rrdtool
    /// last`): rrdtool takes one update per second, so a poll within that second would store
    /// nothing.
    fn wait_past_last_updates(&self) {
        fn rrds(dir: &Path, out: &mut Vec<PathBuf>) {
            for e in std::fs::read_dir(dir).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    rrds(&p, out);
                } else if p.extension().is_some_and(|x| x == "rrd") {
                    out.push(p);
                }
            }
        }
        let mut files = Vec::new();
        rrds(&self.root.join("site/rra"), &mut files);
        let Some(last) = files
            .iter()
            .map(|f| {
                let out = run(Command::new("rrdtool").arg("last").arg(f));
                out.trim()
                    .parse::<u64>()
                    .unwrap_or_else(|_| panic!("rrdtool last {}: {out}", f.display()))
            })
            .max()
        else {
            return;
        };
        let now = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs()
        };
        wait_until(
            &format!("the clock past the RRDs' last update ({last})"),
            || now() > last,
            || self.log_text(),
        );
    }

    /// One run of Cacti's poller.php with the given collector.
    fn poll(&self, collector: &str) {
        let poller_type = match collector {
            "cmd.php" => 1,
            "spine" => 2,
            _ => unreachable!(),
        };
        self.db.sql(
            "cacti",
            &format!("REPLACE INTO settings (name, value) VALUES ('poller_type', '{poller_type}')"),
        );
        self.wait_past_last_updates();
        let before = self.log_text().len();
        self.php("site/poller.php", &["--force"]);
        let log = self.log_text();
        let tail = &log[before..];
        assert!(
            tail.contains(&format!("Method:{collector}")),
            "poller.php did not run {collector}:\n{tail}"
        );
    }
}

impl Drop for Cacti {
    fn drop(&mut self) {
        for pid in self.our_processes() {
            let _ = Command::new("kill").arg(pid.to_string()).status();
        }
    }
}

/// The fixture: two UMA zones named `mbuf`, values past 2^32 and 2^63, a malloc type and a
/// sparse slab cache (its absent cells must be stored as U).
fn fixture(step: u64) -> Vec<MemoryType> {
    let mut temp = MemoryType::new(Allocator::Malloc, "temp");
    temp.in_use_count = Some(7 + step);
    temp.in_use_bytes = Some(1000 + step);
    temp.allocs = Some(123 + step);
    temp.frees = Some(116);
    temp.failures = Some(0);
    let mbuf = full_type(Allocator::Uma, "mbuf", 1 + step);
    let mut mbuf2 = full_type(Allocator::Uma, "mbuf", 100 + step);
    mbuf2.ordinal = 1;
    mbuf2.allocs = Some((1u64 << 63) + 12_345 + step);
    mbuf2.in_use_bytes = Some(u64::MAX - 1000 + step);
    let mut dentry = MemoryType::new(Allocator::Slab, "dentry");
    dentry.size = Some(192);
    dentry.in_use_count = Some(5_000_000_000 + step);
    vec![
        temp,
        mbuf,
        mbuf2,
        full_type(Allocator::Uma, "mbuf_cluster", 2 + step),
        dentry,
    ]
}

/// The data sources of each shipped data template, and the column each reads.
const TEMPLATES: &[(&str, &[(&str, &str)])] = &[
    (
        "MEMSTAT - Bytes in use",
        &[("in_use_bytes", "memTypeInUseBytes")],
    ),
    (
        "MEMSTAT - Items in use",
        &[("in_use_items", "memTypeInUseCount")],
    ),
    (
        "MEMSTAT - Allocations, frees and failures",
        &[
            ("allocs", "memTypeAllocs"),
            ("frees", "memTypeFrees"),
            ("failures", "memTypeFailures"),
        ],
    ),
];

fn cell(t: &MemoryType, column: &str) -> String {
    let v = match column {
        "memTypeInUseBytes" => t.in_use_bytes,
        "memTypeInUseCount" => t.in_use_count,
        "memTypeAllocs" => t.allocs,
        "memTypeFrees" => t.frees,
        "memTypeFailures" => t.failures,
        _ => unreachable!("{column}"),
    };
    v.map_or("U".to_string(), |v| v.to_string())
}

/// memDaemonUptime.0, in hundredths of a second.
fn daemon_uptime(port: u16) -> u64 {
    let l = get(port, &[&format!("{ROOT}.1.1.1.0")]);
    l[0].value
        .strip_prefix('(')
        .and_then(|s| s.split(')').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("memDaemonUptime.0: {l:?}"))
}

/// `rrdtool lastupdate`: data source name → last value stored.
fn lastupdate(rrd: &Path) -> BTreeMap<String, String> {
    let out = run(Command::new("rrdtool").arg("lastupdate").arg(rrd));
    let mut lines = out.lines().filter(|l| !l.trim().is_empty());
    let names: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    let values: Vec<&str> = lines
        .next()
        .and_then(|l| l.split_once(':'))
        .unwrap_or_else(|| panic!("{}: {out}", rrd.display()))
        .1
        .split_whitespace()
        .collect();
    assert_eq!(names.len(), values.len(), "{out}");
    names
        .iter()
        .zip(values)
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

/// A data source Cacti created: its RRD, its data template and its row.
#[derive(Debug)]
struct DataSource {
    rrd: PathBuf,
    template: String,
    index: u32,
}

fn data_sources(cacti: &Cacti) -> Vec<DataSource> {
    let rra = cacti.root.join("site/rra");
    cacti
        .db
        .sql(
            "cacti",
            "SELECT d.data_source_path, t.name, l.snmp_index
             FROM data_template_data d
             JOIN data_local l ON l.id = d.local_data_id
             JOIN data_template t ON t.id = d.data_template_id
             WHERE d.local_data_id > 0 ORDER BY d.local_data_id",
        )
        .into_iter()
        .map(|r| DataSource {
            rrd: PathBuf::from(r[0].replace("<path_rra>", &rra.display().to_string())),
            template: r[1].clone(),
            index: r[2].parse().unwrap(),
        })
        .collect()
}

/// Every RRD holds, for each of its data sources, the value of its own row in `types`.
fn assert_rrds_hold_their_rows(cacti: &Cacti, types: &[MemoryType], when: &str) {
    let sources = data_sources(cacti);
    assert_eq!(sources.len(), types.len() * TEMPLATES.len(), "{sources:?}");
    for s in &sources {
        let row = &types[s.index as usize - 1];
        let (_, dss) = TEMPLATES.iter().find(|t| t.0 == s.template).unwrap();
        let got = lastupdate(&s.rrd);
        for (ds, column) in *dss {
            assert_eq!(
                got.get(*ds).map(String::as_str),
                Some(cell(row, column).as_str()),
                "{when}: {} (row {} = {} ordinal {}) data source {ds} ({column}): {got:?}\n{}",
                s.rrd.display(),
                s.index,
                row.name,
                row.ordinal,
                cacti.log_text()
            );
        }
    }
}

#[test]
fn cacti_polls_each_row_into_its_own_rrd_with_cmd_php_and_spine() {
    let _one = one_cacti();
    let dir = tempfile::tempdir().unwrap();
    let fix = dir.path().join("fixture.json");
    let mut types = fixture(0);
    write_fixture(&fix, types.clone());
    let mut snmpd = Snmpd::start(dir.path(), Transport::Unix);
    let port = snmpd.port;
    let src = format!("fixture:{}", fix.display());
    let state = dir.path().join("state").display().to_string();
    let mut daemon = Daemon::start(
        &snmpd,
        &["--source", &src, "--state-dir", &state, "--max-age", "0.2"],
    );

    let cacti = Cacti::install(dir.path());
    std::fs::copy(
        Path::new(MANIFEST).join(QUERY_XML),
        cacti
            .root
            .join("resource/snmp_queries/memstat_memtypetable.xml"),
    )
    .unwrap();

    // Import the shipped export with Cacti's CLI: the data query, three data templates and
    // three graph templates, and no unmet dependency.
    let export = Path::new(MANIFEST).join(EXPORT_XML);
    let out = cacti.php(
        "cli/import_template.php",
        &[&format!("--filename={}", export.display())],
    );
    let imported: Vec<&str> = out.lines().filter(|l| l.starts_with("[success]")).collect();
    assert_eq!(imported.len(), 7, "import: {out}");
    assert!(
        !out.contains("[fail]") && !out.to_lowercase().contains("unmet"),
        "{out}"
    );
    assert!(
        !cacti.log_text().contains("Import Error"),
        "{}",
        cacti.log_text()
    );
    let query_id = cacti.db.sql(
        "cacti",
        "SELECT id FROM snmp_query WHERE name = 'MEMSTAT-MIB - Kernel Memory Types'",
    );
    let query_id = &query_id[0][0];

    // The device, SNMP v2c on the private snmpd, and the data query, re-indexed on Uptime.
    let host_id = cacti.add_device("memhost", port);
    cacti.php(
        "cli/add_data_query.php",
        &[
            &format!("--host-id={host_id}"),
            &format!("--data-query-id={query_id}"),
            "--reindex-method=1",
        ],
    );

    // Re-indexing filled memTypeIndex, the row identity, for every row.
    let cached = cacti.db.sql(
        "cacti",
        &format!(
            "SELECT snmp_index, field_value FROM host_snmp_cache
         WHERE host_id = {host_id} AND snmp_query_id = {query_id} AND field_name = 'memTypeIndex'
         ORDER BY snmp_index + 0"
        ),
    );
    let want: Vec<Vec<String>> = (1..=types.len())
        .map(|i| vec![i.to_string(), i.to_string()])
        .collect();
    assert_eq!(cached, want, "memTypeIndex field in Cacti's cache");
    let sort = cacti.db.sql("cacti", &format!(
        "SELECT sort_field FROM host_snmp_query WHERE host_id = {host_id} AND snmp_query_id = {query_id}"
    ));
    assert_eq!(sort[0][0], "memTypeIndex");

    // Every graph of every row, chosen by memTypeIndex as New Graphs does.
    let query_graphs = cacti.db.sql("cacti", &format!(
        "SELECT id, graph_template_id FROM snmp_query_graph WHERE snmp_query_id = {query_id} ORDER BY id"
    ));
    assert_eq!(query_graphs.len(), TEMPLATES.len(), "{query_graphs:?}");
    for g in &query_graphs {
        for index in 1..=types.len() {
            cacti.php(
                "cli/add_graphs.php",
                &[
                    "--graph-type=ds",
                    &format!("--graph-template-id={}", g[1]),
                    &format!("--host-id={host_id}"),
                    &format!("--snmp-query-id={query_id}"),
                    &format!("--snmp-query-type-id={}", g[0]),
                    "--snmp-field=memTypeIndex",
                    &format!("--snmp-value={index}"),
                ],
            );
        }
    }

    // Titles name the row: rows with the same name differ by their index.
    let titles: Vec<String> = cacti
        .db
        .sql(
            "cacti",
            "SELECT title_cache FROM graph_templates_graph WHERE local_graph_id > 0",
        )
        .into_iter()
        .map(|r| r[0].clone())
        .collect();
    assert_eq!(titles.len(), types.len() * TEMPLATES.len());
    for (i, t) in types.iter().enumerate() {
        let row = format!("memhost - {} (index {}) - ", t.name, i + 1);
        assert_eq!(
            titles.iter().filter(|x| x.starts_with(&row)).count(),
            TEMPLATES.len(),
            "titles of row {}: {titles:#?}",
            i + 1
        );
    }
    let unique: std::collections::BTreeSet<&String> = titles.iter().collect();
    assert_eq!(unique.len(), titles.len(), "titles repeat: {titles:#?}");

    // The poller items read the OIDs of their own row.
    for r in cacti.db.sql("cacti", 
        "SELECT l.snmp_index, p.arg1 FROM poller_item p JOIN data_local l ON l.id = p.local_data_id",
    ) {
        assert!(
            r[1].ends_with(&format!(".{}", r[0])),
            "poller item of row {} reads {}",
            r[0],
            r[1]
        );
    }

    // cmd.php, then spine, each with new figures.
    cacti.poll("cmd.php");
    assert_rrds_hold_their_rows(&cacti, &types, "after cmd.php");
    types = fixture(1);
    write_fixture(&fix, types.clone());
    wait_refresh_due(port, MAX_AGE, &daemon);
    cacti.poll("spine");
    assert_rrds_hold_their_rows(&cacti, &types, "after spine");

    // The daemon alone restarts, with new figures and the other types in another order (the
    // two mbuf zones keep theirs: their order is what tells them apart). memTypeIndex is kept
    // in the state directory, so each row keeps its index.
    let restarted = fixture(2);
    let reordered = vec![
        restarted[4].clone(),
        restarted[1].clone(),
        restarted[3].clone(),
        restarted[2].clone(),
        restarted[0].clone(),
    ];
    write_fixture(&fix, reordered);
    daemon.restart(port);
    let names = bulkwalk(port, &format!("{TYPE_ENTRY}.2"), &[]);
    let by_index: Vec<String> = names.iter().map(|l| l.value.clone()).collect();
    assert_eq!(by_index, ["temp", "mbuf", "mbuf", "mbuf_cluster", "dentry"]);
    types = restarted;
    for collector in ["spine", "cmd.php"] {
        let before = cacti.log_text().len();
        // The first poll notices that memDaemonUptime went back and re-indexes; Cacti stores
        // U for the device in that poll. The next poll stores the figures.
        cacti.poll(collector);
        let log = cacti.log_text();
        assert!(
            log[before..].contains("Recache Event Detected for Device")
                && log[before..].contains("Recached successfully"),
            "{collector}: no re-index after the restart:\n{}",
            &log[before..]
        );
        // Cacti keeps the memDaemonUptime each poll read (poller_reindex.assert_value) and
        // re-indexes when a poll reads less. Let the uptime grow past 5 s before this poll,
        // which keeps it: the first poll after the next restart reads it about a second after
        // the daemon is back (the wait for rrdtool's next second, PHP's start-up), so the fall
        // is one of seconds.
        wait_until(
            "memDaemonUptime past 5 s",
            || daemon_uptime(port) >= 500,
            || daemon.log_text(),
        );
        cacti.poll(collector);
        assert_rrds_hold_their_rows(&cacti, &types, &format!("{collector} after the restart"));
        let kept = cacti.db.sql(
            "cacti",
            "SELECT assert_value FROM poller_reindex WHERE op = '<'",
        );
        assert!(
            !kept.is_empty()
                && kept
                    .iter()
                    .all(|r| r[0].parse::<u64>().is_ok_and(|t| t >= 500)),
            "{collector}: the uptime Cacti kept is not the one it read: {kept:?}"
        );
        types = fixture(3);
        write_fixture(&fix, types.clone());
        daemon.restart(port);
    }
    drop(cacti);
    snmpd.stop();
}

// ------------------------------------------------------------------------------------------
// The kernel memory overview: memKernelTable as stacked graphs
// ------------------------------------------------------------------------------------------

/// Every kind of memKernelTable, from the sources' own definitions (what the daemon serves).
fn kernel_kinds() -> Vec<&'static KernelKind> {
    SOURCES.iter().flat_map(|d| d.kinds.iter()).collect()
}

/// The kinds a host of the test has, and their bytes: every kind but shadowCallStack and
/// hardwareCorrupted (which the development machine lacks too) and zfsArcWired (no ZFS), all
/// past 2^32, different at each step.
fn kernel_fixture(step: u64) -> BTreeMap<u32, u64> {
    kernel_kinds()
        .iter()
        .filter(|k| {
            !matches!(
                k.name,
                "shadowCallStack" | "hardwareCorrupted" | "zfsArcWired"
            )
        })
        .map(|k| {
            (
                k.index,
                (5u64 << 32) + u64::from(k.index) * 1_000_003 + step,
            )
        })
        .collect()
}

fn write_kernel_fixture(path: &Path, bytes: &BTreeMap<u32, u64>) {
    let mut snap = Snapshot::new(0, std::time::SystemTime::now(), String::new(), Vec::new());
    for k in kernel_kinds() {
        if let Some(v) = bytes.get(&k.index) {
            snap.figures.insert(k.figure.into(), *v);
        }
    }
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, fixture::to_json(&snap)).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// The stack each shipped graph template must draw, bottom to top in kind order, and the
/// line over it: Linux's top level (parent 0, stackable); FreeBSD's top level is wired alone,
/// so its graph stacks the stackable parts of that row and draws the row as a line.
fn expected_stacks() -> Vec<(&'static str, Vec<u32>, Option<u32>)> {
    let kinds = kernel_kinds();
    let stack_under = |parent: u32, freebsd: bool| -> Vec<u32> {
        kinds
            .iter()
            .filter(|k| k.parent == parent && k.stackable && (k.index >= 32) == freebsd)
            .map(|k| k.index)
            .collect()
    };
    let freebsd_top = stack_under(0, true);
    assert_eq!(freebsd_top, [32], "FreeBSD's top level is wired alone");
    vec![
        (
            "MEMSTAT - Kernel memory by kind (Linux)",
            stack_under(0, false),
            None,
        ),
        (
            "MEMSTAT - Wired memory by kind (FreeBSD)",
            stack_under(32, true),
            Some(32),
        ),
    ]
}

const KERNEL_BYTES: &str = ".1.3.6.1.4.1.32473.1.1.6.1.3";

/// Each poller item: the kind its OID reads (memKernelBytes.N) and its RRD.
fn kernel_poller_items(cacti: &Cacti) -> BTreeMap<u32, PathBuf> {
    let rra = cacti.root.join("site/rra").display().to_string();
    cacti
        .db
        .sql("cacti", "SELECT arg1, rrd_path FROM poller_item")
        .into_iter()
        .map(|r| {
            let index = r[0]
                .strip_prefix(&format!("{KERNEL_BYTES}."))
                .and_then(|i| i.parse().ok())
                .unwrap_or_else(|| panic!("poller item reads {}, not memKernelBytes.N", r[0]));
            (index, PathBuf::from(r[1].replace("<path_rra>", &rra)))
        })
        .collect()
}

fn assert_kernel_rrds(cacti: &Cacti, bytes: &BTreeMap<u32, u64>, when: &str) {
    for (index, rrd) in kernel_poller_items(cacti) {
        let got = lastupdate(&rrd);
        let want = bytes.get(&index).map_or("U".to_string(), u64::to_string);
        assert_eq!(got.len(), 1, "{}: {got:?}", rrd.display());
        assert_eq!(
            got.values().next().unwrap(),
            &want,
            "{when}: {} (memKernelBytes.{index}): {got:?}\n{}",
            rrd.display(),
            cacti.log_text()
        );
    }
}

/// Cacti's own graph code (lib/rrd.php's rrdtool_function_graph) for a graph: with
/// `print_source`, the rrdtool command it would run; without, the PNG.
fn cacti_graph(cacti: &Cacti, dir: &Path, graph_id: &str, print_source: bool) -> Vec<u8> {
    let script = dir.join("graph.php");
    std::fs::write(
        &script,
        format!(
            "<?php\n\
             include('{}/site/include/cli_check.php');\n\
             include_once($config['library_path'] . '/rrd.php');\n\
             $a = array('graph_start' => time() - 3600, 'graph_end' => time(){});\n\
             $out = rrdtool_function_graph($argv[1], 0, $a);\n\
             if (is_string($out)) {{ print $out; }}\n",
            cacti.root.display(),
            if print_source {
                ", 'print_source' => true"
            } else {
                ""
            }
        ),
    )
    .unwrap();
    let out = Command::new("php")
        .arg(&script)
        .arg(graph_id)
        .current_dir(&cacti.root)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "graph {graph_id}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

#[test]
fn cacti_stacks_the_kernel_memory_overview_with_cmd_php_and_spine() {
    let _one = one_cacti();
    let dir = tempfile::tempdir().unwrap();
    let fix = dir.path().join("fixture.json");
    let mut bytes = kernel_fixture(0);
    write_kernel_fixture(&fix, &bytes);
    let mut snmpd = Snmpd::start(dir.path(), Transport::Unix);
    let port = snmpd.port;
    let src = format!("fixture:{}", fix.display());
    let state = dir.path().join("state").display().to_string();
    let daemon = Daemon::start(
        &snmpd,
        &["--source", &src, "--state-dir", &state, "--max-age", "0.2"],
    );

    let cacti = Cacti::install(dir.path());
    let export = Path::new(MANIFEST).join(KERNEL_XML);
    let out = cacti.php(
        "cli/import_template.php",
        &[&format!("--filename={}", export.display())],
    );
    let expected = expected_stacks();
    let kinds_drawn: std::collections::BTreeSet<u32> = expected
        .iter()
        .flat_map(|(_, stack, line)| stack.iter().chain(line.iter()).copied())
        .collect();
    // Two graph templates and one data template per kind they draw.
    let imported: Vec<&str> = out.lines().filter(|l| l.starts_with("[success]")).collect();
    assert_eq!(imported.len(), 2 + kinds_drawn.len(), "import: {out}");
    assert!(
        !out.contains("[fail]") && !out.to_lowercase().contains("unmet"),
        "{out}"
    );

    let host_id = cacti.add_device("kernhost", port);

    // One graph per template, with its data sources.
    let mut graphs = Vec::new();
    for (name, stack, line) in &expected {
        let graph_id = cacti.add_template_graph(name, &host_id);

        // The graph's drawn items, bottom first: (item type, memKernelBytes.N), the types
        // as include/global_arrays.php numbers them (GPRINT, 9, is left out).
        let items: Vec<(String, u32)> = cacti
            .db
            .sql(
                "cacti",
                &format!(
                    "SELECT i.graph_type_id, p.arg1 FROM graph_templates_item i
                 JOIN data_template_rrd r ON r.id = i.task_item_id
                 JOIN poller_item p ON p.local_data_id = r.local_data_id
                 WHERE i.local_graph_id = {graph_id} AND i.graph_type_id != 9
                 ORDER BY i.sequence"
                ),
            )
            .into_iter()
            .map(|r| {
                let index = r[1]
                    .strip_prefix(&format!("{KERNEL_BYTES}."))
                    .unwrap()
                    .parse()
                    .unwrap();
                let t = match r[0].as_str() {
                    "4" => "LINE1",
                    "7" => "AREA",
                    "8" => "AREA:STACK",
                    other => panic!("graph item type {other}"),
                };
                (t.to_string(), index)
            })
            .collect();
        let mut want: Vec<(String, u32)> = stack
            .iter()
            .enumerate()
            .map(|(n, i)| {
                let t = if n == 0 { "AREA" } else { "AREA:STACK" };
                (t.to_string(), *i)
            })
            .collect();
        want.extend(line.map(|i| ("LINE1".to_string(), i)));
        assert_eq!(items, want, "{name}: what the graph draws");
        graphs.push((name, graph_id, stack.len()));
    }
    // One data source, and one poller item, per kind drawn.
    let polled: std::collections::BTreeSet<u32> =
        kernel_poller_items(&cacti).keys().copied().collect();
    assert_eq!(polled, kinds_drawn);

    cacti.poll("cmd.php");
    assert_kernel_rrds(&cacti, &bytes, "after cmd.php");
    bytes = kernel_fixture(1);
    write_kernel_fixture(&fix, &bytes);
    wait_refresh_due(port, MAX_AGE, &daemon);
    cacti.poll("spine");
    assert_kernel_rrds(&cacti, &bytes, "after spine");
    // A kind the host lacks is polled all the same, and stored as unknown.
    assert!(polled.iter().any(|i| !bytes.contains_key(i)));

    // Cacti's graph code stacks each graph's rows on one AREA, and rrdtool draws it.
    for (name, graph_id, stacked) in &graphs {
        let source = String::from_utf8(cacti_graph(&cacti, dir.path(), graph_id, true)).unwrap();
        let source = source.replace("\\\n", " ");
        assert_eq!(
            source.matches(" AREA:").count(),
            *stacked,
            "{name}: {source}"
        );
        assert_eq!(
            source.matches(":STACK").count(),
            stacked - 1,
            "{name}: {source}"
        );
        let png = cacti_graph(&cacti, dir.path(), graph_id, false);
        assert!(png.starts_with(b"\x89PNG"), "{name}: not a PNG: {png:?}");
    }
    drop(cacti);
    snmpd.stop();
}

// ------------------------------------------------------------------------------------------
// The ZFS ARC: memstatArc's scalars, graphed by their roles
// ------------------------------------------------------------------------------------------

const ARC_XML: &str = "contrib/cacti/cacti_graph_template_memstat_zfs_arc.xml";
const ARC: &str = ".1.3.6.1.4.1.32473.1.1.7";

/// memstatArc's objects, from their definition.
fn arc_objects() -> Vec<&'static FigureObject> {
    SOURCES
        .iter()
        .flat_map(|d| d.groups.iter())
        .flat_map(|g| g.objects.iter())
        .collect()
}

/// Every object's figure, past 2^32 and different at each step; the counters grow, hits
/// faster than misses.
fn arc_fixture(step: u64) -> BTreeMap<u32, u64> {
    arc_objects()
        .iter()
        .map(|o| {
            let v = match o.role {
                Role::Hits => (9u64 << 32) + step * 300_000,
                Role::Misses => (1u64 << 32) + step * 100_000,
                _ => (5u64 << 32) + u64::from(o.sub) * 1_000_003 + step,
            };
            (o.sub, v)
        })
        .collect()
}

fn write_arc_fixture(path: &Path, values: &BTreeMap<u32, u64>) {
    let mut snap = Snapshot::new(0, std::time::SystemTime::now(), String::new(), Vec::new());
    for o in arc_objects() {
        snap.figures.insert(o.figure.into(), values[&o.sub]);
    }
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, fixture::to_json(&snap)).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// A drawn graph item: its type, the arc of the object it reads, and whether it is drawn
/// through the percent CDEF.
type ArcItem = (&'static str, u32, bool);

/// Each graph template the export must hold, and what it draws bottom first, from the
/// objects' roles.
fn expected_arc_graphs() -> Vec<(&'static str, Vec<ArcItem>)> {
    let objects = arc_objects();
    let stack = |roles: &[Role], cdef: bool| -> Vec<ArcItem> {
        objects
            .iter()
            .filter(|o| roles.contains(&o.role))
            .enumerate()
            .map(|(n, o)| (if n == 0 { "AREA" } else { "AREA:STACK" }, o.sub, cdef))
            .collect()
    };
    let mut size = stack(&[Role::Part], false);
    size.extend(
        objects
            .iter()
            .filter(|o| matches!(o.role, Role::Total | Role::Limit))
            .map(|o| ("LINE1", o.sub, false)),
    );
    vec![
        ("MEMSTAT - ZFS ARC size, target and parts", size),
        (
            "MEMSTAT - ZFS ARC buffers by list",
            stack(&[Role::OtherSplit], false),
        ),
        (
            "MEMSTAT - ZFS ARC hit ratio",
            stack(&[Role::Hits, Role::Misses], true),
        ),
    ]
}

/// Each poller item: the arc of the memstatArc object its OID reads, and its RRD.
fn arc_poller_items(cacti: &Cacti) -> BTreeMap<u32, PathBuf> {
    let rra = cacti.root.join("site/rra").display().to_string();
    cacti
        .db
        .sql("cacti", "SELECT arg1, rrd_path FROM poller_item")
        .into_iter()
        .map(|r| {
            let arc = r[0]
                .strip_prefix(&format!("{ARC}."))
                .and_then(|s| s.strip_suffix(".0"))
                .and_then(|s| s.parse().ok())
                .unwrap_or_else(|| panic!("poller item reads {}, not memstatArc", r[0]));
            (arc, PathBuf::from(r[1].replace("<path_rra>", &rra)))
        })
        .collect()
}

fn assert_arc_rrds(cacti: &Cacti, values: &BTreeMap<u32, u64>, when: &str) {
    for (arc, rrd) in arc_poller_items(cacti) {
        let got = lastupdate(&rrd);
        assert_eq!(got.len(), 1, "{}: {got:?}", rrd.display());
        assert_eq!(
            got.values().next().unwrap(),
            &values[&arc].to_string(),
            "{when}: {} ({ARC}.{arc}.0): {got:?}\n{}",
            rrd.display(),
            cacti.log_text()
        );
    }
}

#[test]
fn cacti_graphs_the_zfs_arc_with_cmd_php_and_spine() {
    let _one = one_cacti();
    let dir = tempfile::tempdir().unwrap();
    let fix = dir.path().join("fixture.json");
    let mut values = arc_fixture(0);
    write_arc_fixture(&fix, &values);
    let mut snmpd = Snmpd::start(dir.path(), Transport::Unix);
    let port = snmpd.port;
    let src = format!("fixture:{}", fix.display());
    let state = dir.path().join("state").display().to_string();
    let daemon = Daemon::start(
        &snmpd,
        &["--source", &src, "--state-dir", &state, "--max-age", "0.2"],
    );

    // The export is what its generator writes.
    let gen = Command::new(Path::new(MANIFEST).join("scripts/cacti-arc-templates"))
        .arg("--check")
        .output()
        .unwrap();
    assert!(
        gen.status.success(),
        "{ARC_XML} is not what scripts/cacti-arc-templates writes: {}",
        String::from_utf8_lossy(&gen.stderr)
    );

    let cacti = Cacti::install(dir.path());
    let export = Path::new(MANIFEST).join(ARC_XML);
    let out = cacti.php(
        "cli/import_template.php",
        &[&format!("--filename={}", export.display())],
    );
    let expected = expected_arc_graphs();
    let drawn: std::collections::BTreeSet<u32> = expected
        .iter()
        .flat_map(|(_, items)| items.iter().map(|i| i.1))
        .collect();
    assert!(
        !out.contains("[fail]") && !out.to_lowercase().contains("unmet"),
        "{out}"
    );
    let imported = out.lines().filter(|l| l.starts_with("[success]")).count();
    // The graph templates, one data template per object drawn, and the CDEF.
    assert_eq!(imported, expected.len() + drawn.len() + 1, "import: {out}");

    let host_id = cacti.add_device("archost", port);

    let mut graphs = Vec::new();
    for (name, want) in &expected {
        let graph_id = cacti.add_template_graph(name, &host_id);
        // The drawn items, bottom first: type, the object read, and the CDEF's name.
        let items: Vec<ArcItem> = cacti
            .db
            .sql(
                "cacti",
                &format!(
                "SELECT i.graph_type_id, p.arg1, COALESCE(c.name, '-') FROM graph_templates_item i
                 JOIN data_template_rrd r ON r.id = i.task_item_id
                 JOIN poller_item p ON p.local_data_id = r.local_data_id
                 LEFT JOIN cdef c ON c.id = i.cdef_id
                 WHERE i.local_graph_id = {graph_id} AND i.graph_type_id != 9
                 ORDER BY i.sequence"
            ),
            )
            .into_iter()
            .map(|r| {
                let arc = r[1]
                    .strip_prefix(&format!("{ARC}."))
                    .and_then(|s| s.strip_suffix(".0"))
                    .unwrap()
                    .parse()
                    .unwrap();
                let t = match r[0].as_str() {
                    "4" => "LINE1",
                    "7" => "AREA",
                    "8" => "AREA:STACK",
                    other => panic!("graph item type {other}"),
                };
                let cdef = match r[2].as_str() {
                    "-" => false,
                    "MEMSTAT - Percent of all data sources" => true,
                    other => panic!("CDEF {other}"),
                };
                (t, arc, cdef)
            })
            .collect();
        assert_eq!(&items, want, "{name}: what the graph draws");
        graphs.push((*name, graph_id, want.clone()));
    }
    let polled: std::collections::BTreeSet<u32> =
        arc_poller_items(&cacti).keys().copied().collect();
    assert_eq!(polled, drawn, "one data source per object drawn");

    cacti.poll("cmd.php");
    assert_arc_rrds(&cacti, &values, "after cmd.php");
    values = arc_fixture(1);
    write_arc_fixture(&fix, &values);
    wait_refresh_due(port, MAX_AGE, &daemon);
    cacti.poll("spine");
    assert_arc_rrds(&cacti, &values, "after spine");

    // Cacti's graph code: one AREA per graph, STACKs on it, lines for the size and its
    // limits, and the hit ratio as each counter's share of the two, in percent.
    for (name, graph_id, items) in &graphs {
        let source = String::from_utf8(cacti_graph(&cacti, dir.path(), graph_id, true)).unwrap();
        let source = source.replace("\\\n", " ");
        let count = |t: &str| items.iter().filter(|i| i.0 == t).count();
        // A STACK is an AREA with :STACK at its end.
        assert_eq!(
            source.matches(" AREA:").count(),
            count("AREA") + count("AREA:STACK"),
            "{name}: {source}"
        );
        assert_eq!(
            source.matches(":STACK").count(),
            count("AREA:STACK"),
            "{name}: {source}"
        );
        assert_eq!(
            source.matches(" LINE1:").count(),
            count("LINE1"),
            "{name}: {source}"
        );
        let cdefs: Vec<&str> = source
            .split_whitespace()
            .filter(|w| w.starts_with("CDEF:"))
            .collect();
        if items.iter().any(|i| i.2) {
            // CDEF:cdefa='a,TIME,...,a,...,b,...,+,/,100,*' for hits (a), and the same
            // with b for misses: each one's share of their sum, in percent.
            assert_eq!(cdefs.len(), 2, "{name}: {source}");
            for (c, current) in cdefs.iter().zip(["a", "b"]) {
                let rpn = c
                    .split_once('=')
                    .map(|(_, r)| r.replace("&apos;", "").replace('\'', ""))
                    .unwrap();
                assert!(rpn.starts_with(&format!("{current},")), "{name}: {c}");
                assert!(rpn.ends_with(",+,/,100,*"), "{name}: {c}");
                assert!(rpn.contains(",a,") && rpn.contains(",b,"), "{name}: {c}");
            }
        } else {
            assert!(cdefs.is_empty(), "{name}: {source}");
        }
        let png = cacti_graph(&cacti, dir.path(), graph_id, false);
        assert!(png.starts_with(b"\x89PNG"), "{name}: not a PNG: {png:?}");
    }
    drop(cacti);
    snmpd.stop();
}
