//! snmp_agentx.so, the bsnmpd AgentX master module (bsnmp-agentx/), tested through a host
//! that loads it as bsnmpd does (bsnmp-agentx/tests/host/bsnmp_host.c), and through a real
//! bsnmpd when one is available. Every test name starts with `bsnmpd`, so `cargo test
//! bsnmpd` runs them all.
//!
//! The subagents are memstat-agentx itself (compared with what net-snmp's snmpd serves from
//! the same fixture), and small scripted ones for what memstat-agentx cannot do: register
//! outside the claims, hang, take SETs, send notifications.
mod common;

use agentx_proto::oid::Oid;
use agentx_proto::pdu::{Header, Payload, Pdu, PduType, ResError, Value, VarBind, HEADER_LEN};
use common::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

const CLAIM: &str = "1.3.6.1.4.1.32473.1";

/// scripts/build-bsnmp-module, once per test binary.
fn module_path() -> &'static str {
    static P: OnceLock<String> = OnceLock::new();
    P.get_or_init(|| {
        let o = Command::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/scripts/build-bsnmp-module"
        ))
        .output()
        .expect("run scripts/build-bsnmp-module");
        assert!(
            o.status.success(),
            "build-bsnmp-module failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let out = String::from_utf8(o.stdout).unwrap();
        let p = out
            .lines()
            .last()
            .expect("a path on the last line")
            .to_string();
        assert!(Path::new(&p).exists(), "{p} does not exist");
        p
    })
}

/// The test host, compiled once per test binary. Its name carries a hash of its source, and
/// it is renamed into place, so concurrent test binaries share one file and never run a
/// half-written one.
fn host_path() -> &'static str {
    static P: OnceLock<String> = OnceLock::new();
    P.get_or_init(|| {
        use std::hash::{Hash, Hasher};
        let src = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/bsnmp-agentx/tests/host/bsnmp_host.c"
        );
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        std::fs::read(src).unwrap().hash(&mut hasher);
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bsnmp-host");
        std::fs::create_dir_all(&dir).unwrap();
        let exe = dir.join(format!("bsnmp_host-{:016x}", hasher.finish()));
        if exe.exists() {
            return exe.display().to_string();
        }
        let tmp = dir.join(format!("bsnmp_host.tmp.{}", std::process::id()));
        let o = Command::new("cc")
            .args(["-Wall", "-Werror", "-O1", "-rdynamic", "-o"])
            .arg(&tmp)
            .arg(src)
            .arg("-ldl")
            .output()
            .expect("run cc");
        assert!(
            o.status.success(),
            "compiling the test host failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        std::fs::rename(&tmp, &exe).unwrap();
        exe.display().to_string()
    })
}

/// A running test host with the module loaded and started.
struct BsnmpHost {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    log: PathBuf,
    socket: PathBuf,
}

impl BsnmpHost {
    fn spawn(dir: &Path) -> BsnmpHost {
        let log = dir.join(format!("host-{}.log", free_port()));
        let mut child = Command::new(host_path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start the test host");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        BsnmpHost {
            child,
            stdin,
            stdout,
            log,
            socket: dir.join("master.sock"),
        }
    }

    /// Loads and starts the module with `args` and config-section `vars` (the socket is set).
    fn start(dir: &Path, args: &[&str], vars: &[(&str, &str)]) -> BsnmpHost {
        let mut h = BsnmpHost::spawn(dir);
        let mut load = format!("load {} agentx", module_path());
        for a in args {
            load.push(' ');
            load.push_str(a);
        }
        let out = h.cmd(&load);
        assert!(out[0].starts_with("loaded"), "{out:?}: {}", h.log_text());
        let socket = h.socket.display().to_string();
        h.cmd(&format!("config agentxSocket {socket}"));
        for (k, v) in vars {
            h.cmd(&format!("config {k} {v}"));
        }
        let out = h.cmd("start");
        assert_eq!(out, vec!["started"], "{}", h.log_text());
        h
    }

    /// One command; its output lines (without the closing ".").
    fn cmd(&mut self, line: &str) -> Vec<String> {
        writeln!(self.stdin, "{line}").unwrap();
        self.stdin.flush().unwrap();
        let mut out = Vec::new();
        loop {
            let mut l = String::new();
            let n = self.stdout.read_line(&mut l).unwrap();
            assert!(
                n > 0,
                "the host exited during {line:?}: {}",
                self.log_text()
            );
            let l = l.trim_end_matches(['\n', '\r']).to_string();
            if l == "." {
                return out;
            }
            out.push(l);
        }
    }

    fn lines(&mut self, line: &str) -> Vec<Line> {
        parse_lines(&self.cmd(line).join("\n"))
    }

    /// Runs the host's loop until `check` holds (5 s at most).
    fn until(&mut self, what: &str, mut check: impl FnMut(&mut BsnmpHost) -> bool) {
        let deadline = Instant::now() + PATIENCE;
        while !check(self) {
            assert!(Instant::now() < deadline, "{what}: {}", self.log_text());
            self.cmd("run 50");
        }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The module's forwarded-request count, from its dump.
    fn requests(&mut self) -> u64 {
        self.cmd("dump");
        let log = self.log_text();
        let line = log
            .lines()
            .rev()
            .find(|l| l.contains("requests: "))
            .unwrap();
        let n = line.split("requests: ").nth(1).unwrap();
        n.split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    }
}

impl Drop for BsnmpHost {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// memstat-agentx serving `fixture` to the module's socket.
fn subagent(dir: &Path, socket: &Path, fixture: &Path) -> Child {
    let state = dir.join(format!("state-{}", free_port()));
    Command::new(bin())
        .args(["run", "--log-level", "debug", "--agentx-socket"])
        .arg(format!("unix:{}", socket.display()))
        .arg("--source")
        .arg(format!("fixture:{}", fixture.display()))
        .arg("--state-dir")
        .arg(&state)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(dir.join("subagent.log")).unwrap())
        .stderr(std::fs::File::create(dir.join("subagent.err")).unwrap())
        .spawn()
        .expect("start memstat-agentx")
}

struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn served(h: &mut BsnmpHost) -> bool {
    let l = h.lines(&format!("get {TYPE_ENTRY}.2.1"));
    l.len() == 1 && l[0].ty == "STRING"
}

/// A Notify's varbinds: sysUpTime.0 (`uptime`), snmpTrapOID.0 of the scripted
/// notification, and one "hello" object.
fn hello_notification(uptime: u32) -> Vec<VarBind> {
    vec![
        VarBind {
            name: "1.3.6.1.2.1.1.3.0".parse().unwrap(),
            value: Value::TimeTicks(uptime),
        },
        VarBind {
            name: "1.3.6.1.6.3.1.1.4.1.0".parse().unwrap(),
            value: Value::ObjectIdentifier("1.3.6.1.4.1.32473.7.0.1".parse().unwrap()),
        },
        VarBind {
            name: "1.3.6.1.4.1.32473.7.1.1.0".parse().unwrap(),
            value: Value::OctetString(b"hello".to_vec()),
        },
    ]
}

#[test]
fn bsnmpd_host_serves_memstat_mib_as_net_snmp_does() {
    let (dir, snmpd, _daemon) = start_with_fixture(Transport::Unix, sample_types(), &[]);
    let expected = bulkwalk(snmpd.port, TYPE_ENTRY, &[]);
    assert!(expected.len() > 20, "{expected:?}");

    let mut h = BsnmpHost::start(dir.path(), &[&format!("claim={CLAIM}")], &[]);
    let _sub = Killed(subagent(
        dir.path(),
        &h.socket,
        &dir.path().join("fixture.json"),
    ));
    h.until("memstat-agentx registers with the module", served);

    // A walk of GETNEXT PDUs, and one of GETBULK PDUs (max-repetitions 10), as bsnmpd runs them.
    let by_getnext = h.lines(&format!("walk {TYPE_ENTRY}"));
    assert_eq!(by_getnext, expected);
    let before = h.requests();
    let by_getbulk = h.lines(&format!("walk {TYPE_ENTRY} 10"));
    assert_eq!(by_getbulk, expected);
    // The prefetch: one AgentX GetBulk serves a whole SNMP GETBULK of 10 varbinds.
    let used = h.requests() - before;
    let pdus = expected.len().div_ceil(10) as u64 + 1;
    assert!(
        used <= pdus + 1,
        "{used} AgentX requests for {} varbinds in {pdus} PDUs",
        expected.len()
    );

    // GET of cells that exist, do not exist, and lie outside every registration.
    let cells = [
        format!("{TYPE_ENTRY}.2.1"),
        format!("{TYPE_ENTRY}.4.2"),
        format!("{TYPE_ENTRY}.2.999"),
        format!("{ROOT}.1.1.7.0"),
    ];
    let want = get(
        snmpd.port,
        &cells.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let got = h.lines(&format!("get {}", cells.join(" ")));
    assert_eq!(got[..2], want[..2]);
    assert_eq!(got[2].ty, "No Such Instance currently exists at this OID");
    assert_eq!(got[3].ty, "STRING");
    // AddAgentCaps became a sysORTable row.
    let or = h.cmd("orlist");
    assert!(
        or.iter()
            .any(|l| l.contains(&format!(".{CLAIM} MEMSTAT-MIB"))),
        "{or:?}"
    );
}

/// A scripted subagent: raw PDUs over the module's socket.
struct Sub {
    s: UnixStream,
    sid: u32,
    packet: u32,
}

impl Sub {
    fn connect(socket: &Path) -> Sub {
        let s = UnixStream::connect(socket).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        Sub {
            s,
            sid: 0,
            packet: 0,
        }
    }

    fn send(&mut self, p: &Pdu) {
        let mut out = Vec::new();
        p.encode(&mut out);
        self.s.write_all(&out).unwrap();
    }

    fn recv(&mut self) -> Pdu {
        read_pdu(&mut self.s).expect("a PDU from the master")
    }

    /// Sends an administrative PDU and returns the Response's error.
    fn admin(&mut self, payload: Payload) -> ResError {
        self.packet += 1;
        self.send(&Pdu::new(self.sid, 0, self.packet, payload));
        let r = self.recv();
        assert_eq!(r.ids.packet_id, self.packet);
        match r.payload {
            Payload::Response { error, .. } => {
                if self.sid == 0 {
                    self.sid = r.ids.session_id;
                }
                error
            }
            other => panic!("expected a Response, got {other:?}"),
        }
    }

    fn open(socket: &Path, descr: &str) -> Sub {
        let mut s = Sub::connect(socket);
        let e = s.admin(Payload::Open {
            timeout: 0,
            id: Oid::null(),
            descr: descr.as_bytes().to_vec(),
        });
        assert_eq!(e, ResError::NO_ERROR);
        assert_ne!(s.sid, 0);
        s
    }

    fn register(&mut self, subtree: &str, priority: u8) -> ResError {
        self.admin(Payload::Register {
            timeout: 0,
            priority,
            range_subid: 0,
            subtree: subtree.parse().unwrap(),
            upper_bound: None,
        })
    }
}

fn read_pdu(s: &mut UnixStream) -> Option<Pdu> {
    let mut h = [0u8; HEADER_LEN];
    s.read_exact(&mut h).ok()?;
    let header = Header::decode(&h).ok()?;
    let mut frame = h.to_vec();
    frame.resize(header.frame_len(), 0);
    s.read_exact(&mut frame[HEADER_LEN..]).ok()?;
    Pdu::decode(&frame).ok()
}

/// Runs the host's loop while `f` talks to the module from this thread.
fn with_loop<R: Send>(h: &mut BsnmpHost, f: impl FnOnce() -> R + Send) -> R {
    std::thread::scope(|sc| {
        let t = sc.spawn(f);
        while !t.is_finished() {
            h.cmd("run 20");
        }
        t.join().unwrap()
    })
}

#[test]
fn bsnmpd_host_administrative_pdus() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = BsnmpHost::start(
        dir.path(),
        &[
            "claim=1.3.6.1.4.1.32473.7",
            "claim=1.3.6.1.4.1.32473.8/octetstring",
        ],
        &[],
    );
    let socket = h.socket.clone();
    let mut sub = with_loop(&mut h, || Sub::open(&socket, "scripted"));

    let results = with_loop(&mut h, || {
        let r = vec![
            // Outside every claim: refused, and logged.
            sub.register("1.3.6.1.2.1.1", 127),
            // A claim's parent is outside it too.
            sub.register("1.3.6.1.4.1.32473", 127),
            sub.register("1.3.6.1.4.1.32473.7.1", 127),
            sub.register("1.3.6.1.4.1.32473.7.1", 127),
            sub.register("1.3.6.1.4.1.32473.7.1", 100),
            sub.admin(Payload::Unregister {
                priority: 5,
                range_subid: 0,
                subtree: "1.3.6.1.4.1.32473.7.1".parse().unwrap(),
                upper_bound: None,
            }),
            sub.admin(Payload::Unregister {
                priority: 100,
                range_subid: 0,
                subtree: "1.3.6.1.4.1.32473.7.1".parse().unwrap(),
                upper_bound: None,
            }),
            sub.admin(Payload::Ping),
            sub.admin(Payload::AddAgentCaps {
                id: "1.3.6.1.4.1.32473.7".parse().unwrap(),
                descr: b"SCRIPTED-MIB".to_vec(),
            }),
        ];
        r
    });
    assert_eq!(
        results,
        vec![
            ResError::REQUEST_DENIED,
            ResError::REQUEST_DENIED,
            ResError::NO_ERROR,
            ResError::DUPLICATE_REGISTRATION,
            ResError::NO_ERROR,
            ResError::UNKNOWN_REGISTRATION,
            ResError::NO_ERROR,
            ResError::NO_ERROR,
            ResError::NO_ERROR,
        ]
    );
    let log = h.log_text();
    assert!(
        log.contains("Register of 1.3.6.1.2.1.1 refused (requestDenied): outside the claims 1.3.6.1.4.1.32473.7, 1.3.6.1.4.1.32473.8"),
        "{log}"
    );
    let or = h.cmd("orlist");
    assert!(
        or.iter()
            .any(|l| l.ends_with(".1.3.6.1.4.1.32473.7 SCRIPTED-MIB")),
        "{or:?}"
    );

    // A Notify becomes a trap to bsnmpd's sinks, without the leading sysUpTime.0.
    let e = with_loop(&mut h, || {
        let r = sub.admin(Payload::Notify {
            varbinds: hello_notification(5),
        });
        let caps = sub.admin(Payload::RemoveAgentCaps {
            id: "1.3.6.1.4.1.32473.7".parse().unwrap(),
        });
        let again = sub.admin(Payload::RemoveAgentCaps {
            id: "1.3.6.1.4.1.32473.7".parse().unwrap(),
        });
        (r, caps, again)
    });
    assert_eq!(
        e,
        (
            ResError::NO_ERROR,
            ResError::NO_ERROR,
            ResError::UNKNOWN_AGENT_CAPS
        )
    );
    let traps = h.cmd("traps");
    assert_eq!(
        traps,
        vec![
            "trap .1.3.6.1.4.1.32473.7.0.1".to_string(),
            "  .1.3.6.1.4.1.32473.7.1.1.0 = STRING: \"hello\"".to_string()
        ]
    );
    assert!(h.cmd("orlist").is_empty());

    // A PDU for a session that is not open.
    let e = with_loop(&mut h, || {
        let mut other = Sub::connect(&socket);
        other.sid = 4242;
        other.admin(Payload::Ping)
    });
    assert_eq!(e, ResError::NOT_OPEN);

    // The module's variables read back through SNMP, and refuse an SNMP SET.
    let l = h.lines("get .1.3.6.1.4.1.32473.2.1.5.0 .1.3.6.1.4.1.32473.2.1.1.0");
    assert_eq!(l[0].value, "50");
    assert_eq!(l[1].value, socket.display().to_string());
    assert_eq!(
        h.cmd("set .1.3.6.1.4.1.32473.2.1.5.0 integer 10"),
        vec!["ERROR status=17 index=1"]
    );
}

/// What a scripted subagent received, by PDU type name.
type Seen = Arc<Mutex<Vec<String>>>;

/// A subagent thread that registers `subtree` and answers with `answer` (None: never).
fn scripted_subagent(
    socket: PathBuf,
    subtree: &str,
    answer: impl Fn(&Pdu) -> Option<Payload> + Send + 'static,
) -> (Seen, std::thread::JoinHandle<()>) {
    let seen: Seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let subtree = subtree.to_string();
    let t = std::thread::spawn(move || {
        let mut sub = Sub::open(&socket, "scripted");
        assert_eq!(sub.register(&subtree, 127), ResError::NO_ERROR);
        tx.send(()).unwrap();
        sub.s.set_read_timeout(None).unwrap();
        while let Some(p) = read_pdu(&mut sub.s) {
            seen2.lock().unwrap().push(p.pdu_type().name().to_string());
            if p.pdu_type() == PduType::CLOSE {
                return;
            }
            if let Some(payload) = answer(&p) {
                sub.send(&Pdu::with_ids(p.ids, payload));
            }
        }
    });
    rx.recv_timeout(PATIENCE)
        .expect("the scripted subagent did not register");
    (seen, t)
}

fn resp(varbinds: Vec<VarBind>) -> Payload {
    Payload::Response {
        sys_uptime: 0,
        error: ResError::NO_ERROR,
        index: 0,
        varbinds,
    }
}

#[test]
#[ignore = "deadline: scripts/test runs it alone, after the others"]
fn bsnmpd_deadline_host_hanging_subagent_stalls_one_timeout_then_is_closed() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = BsnmpHost::start(
        dir.path(),
        &["claim=1.3.6.1.4.1.32473.7"],
        &[("agentxTimeout", "30"), ("agentxMaxTimeouts", "2")],
    );
    let socket = h.socket.clone();
    // Registers, then answers nothing.
    let (seen, _t) = std::thread::scope(|sc| {
        let t = sc.spawn(|| scripted_subagent(socket.clone(), "1.3.6.1.4.1.32473.7", |_| None));
        while !t.is_finished() {
            h.cmd("run 20");
        }
        t.join().unwrap()
    });

    // One SNMP GETBULK of 3 repeaters x 10: the whole PDU waits one timeout (0.3 s), not 30.
    let t0 = Instant::now();
    let out =
        h.cmd("getbulk 0 10 .1.3.6.1.4.1.32473.7 .1.3.6.1.4.1.32473.7.1 .1.3.6.1.4.1.32473.7.2");
    let stall = t0.elapsed();
    assert_eq!(out, vec!["ERROR status=5 index=1"]);
    assert!(
        stall >= Duration::from_millis(290) && stall < Duration::from_millis(900),
        "stalled {stall:?}"
    );
    // The daemon answers its own objects at once meanwhile.
    let t0 = Instant::now();
    assert_eq!(h.lines("get .1.3.6.1.4.1.32473.2.1.5.0")[0].value, "30");
    assert!(t0.elapsed() < Duration::from_millis(200));

    // A second timeout in a row closes the session (agentxMaxTimeouts 2) with reason timeouts.
    let out = h.cmd("get .1.3.6.1.4.1.32473.7.1.0");
    assert_eq!(out, vec!["ERROR status=5 index=1"]);
    let log = h.log_text();
    assert!(log.contains("closed after 2 timeouts in a row"), "{log}");
    h.until("the subagent sees its Close", |_| {
        seen.lock().unwrap().last().map(String::as_str) == Some("Close")
    });
    // Its registration is gone: nothing waits any more.
    let t0 = Instant::now();
    let l = h.lines("get .1.3.6.1.4.1.32473.7.1.0");
    assert_eq!(l[0].ty, "No Such Instance currently exists at this OID");
    assert!(t0.elapsed() < Duration::from_millis(200));
}

/// A scripted read-write subagent under 1.3.6.1.4.1.32473.7.1: an integer scalar per instance
/// .1.N.0. TestSet refuses values over 99; CommitSet applies; UndoSet restores.
fn read_write_subagent(socket: PathBuf) -> (Seen, std::thread::JoinHandle<()>) {
    // Per AgentX transaction: the varbind TestSet accepted, then the value CommitSet replaced.
    let store = Arc::new(Mutex::new(std::collections::BTreeMap::<Oid, i32>::new()));
    let txns = Arc::new(Mutex::new(
        std::collections::HashMap::<u32, (Oid, i32, i32)>::new(),
    ));
    scripted_subagent(socket, "1.3.6.1.4.1.32473.7.1", move |p| {
        let mut store = store.lock().unwrap();
        let mut txns = txns.lock().unwrap();
        let id = p.ids.transaction_id;
        let err = |e: ResError| Payload::Response {
            sys_uptime: 0,
            error: e,
            index: 1,
            varbinds: Vec::new(),
        };
        Some(match &p.payload {
            Payload::Get { ranges } => resp(
                ranges
                    .iter()
                    .map(|r| VarBind {
                        name: r.start.clone(),
                        value: store
                            .get(&r.start)
                            .map(|v| Value::Integer(*v))
                            .unwrap_or(Value::NoSuchInstance),
                    })
                    .collect(),
            ),
            Payload::TestSet { varbinds } => match &varbinds[0].value {
                Value::Integer(v) if *v < 100 => {
                    txns.insert(id, (varbinds[0].name.clone(), *v, 0));
                    resp(vec![])
                }
                _ => err(ResError::WRONG_VALUE),
            },
            Payload::CommitSet => {
                let t = txns.get_mut(&id).unwrap();
                t.2 = store.insert(t.0.clone(), t.1).unwrap_or(0);
                resp(vec![])
            }
            Payload::UndoSet => {
                let t = &txns[&id];
                store.insert(t.0.clone(), t.2);
                resp(vec![])
            }
            Payload::CleanupSet => {
                txns.remove(&id);
                resp(vec![])
            }
            _ => resp(vec![]),
        })
    })
}

#[test]
fn bsnmpd_host_set_maps_to_testset_commitset_undoset_cleanupset() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = BsnmpHost::start(dir.path(), &["claim=1.3.6.1.4.1.32473.7/integer"], &[]);
    let socket = h.socket.clone();
    let (seen, _t) = std::thread::scope(|sc| {
        let t = sc.spawn(|| read_write_subagent(socket.clone()));
        while !t.is_finished() {
            h.cmd("run 20");
        }
        t.join().unwrap()
    });
    let a = ".1.3.6.1.4.1.32473.7.1.1.0";
    let b = ".1.3.6.1.4.1.32473.7.1.2.0";
    let take = |seen: &Seen| std::mem::take(&mut *seen.lock().unwrap());

    assert_eq!(
        h.cmd(&format!("set {a} integer 42")),
        vec![format!("{a} = INTEGER: 42")]
    );
    assert_eq!(take(&seen), ["TestSet", "CommitSet", "CleanupSet"]);
    assert_eq!(h.lines(&format!("get {a}"))[0].value, "42");
    take(&seen);

    // Refused by TestSet: wrongValue, and a CleanupSet.
    assert_eq!(
        h.cmd(&format!("set {a} integer 500")),
        vec!["ERROR status=10 index=1"]
    );
    assert_eq!(take(&seen), ["TestSet", "CleanupSet"]);

    // Two varbinds, the second refused: bsnmpd's ROLLBACK of the first becomes UndoSet.
    assert_eq!(
        h.cmd(&format!("set {a} integer 7 {b} integer 500")),
        vec!["ERROR status=10 index=2"]
    );
    assert_eq!(
        take(&seen),
        [
            "TestSet",
            "CommitSet",
            "TestSet",
            "CleanupSet",
            "UndoSet",
            "CleanupSet"
        ]
    );
    assert_eq!(h.lines(&format!("get {a}"))[0].value, "42");

    // One syntax per claim node: bsnmpd refuses another syntax before the module sees it.
    assert_eq!(
        h.cmd(&format!("set {a} string x")),
        vec!["ERROR status=7 index=1"]
    );
    take(&seen);
    // Outside every registration: notWritable.
    assert_eq!(
        h.cmd("set .1.3.6.1.4.1.32473.7.9.0 integer 1"),
        vec!["ERROR status=17 index=1"]
    );
    assert!(take(&seen).is_empty());
}

#[test]
fn bsnmpd_host_load_start_unload_is_safe() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = dir.path().join("fixture.json");
    write_fixture(&fixture, sample_types());
    let mut h = BsnmpHost::spawn(dir.path());
    let socket = h.socket.display().to_string();
    for round in 0..3 {
        let out = h.cmd(&format!("load {} agentx claim={CLAIM}", module_path()));
        assert!(out[0].starts_with("loaded"), "round {round}: {out:?}");
        h.cmd(&format!("config agentxSocket {socket}"));
        assert_eq!(h.cmd("start"), vec!["started"]);
        assert!(h.socket.exists());
        let sub = Killed(subagent(dir.path(), &h.socket, &fixture));
        h.until("memstat-agentx registers", served);
        assert_eq!(
            h.cmd("unload"),
            vec!["fini: 0", "dlclose: 0"],
            "round {round}"
        );
        // The socket is gone with the module; the host still runs.
        assert!(!h.socket.exists());
        drop(sub);
        assert!(h.cmd("tree").is_empty());
    }
    // Bad module arguments fail init with a message that says why.
    let out = h.cmd(&format!(
        "load {} agentx 1.3.6.1.4.1.32473.1",
        module_path()
    ));
    assert_eq!(out, vec!["init failed: 1"]);
    let out = h.cmd(&format!("load {} agentx", module_path()));
    assert_eq!(out, vec!["init failed: 1"]);
    let out = h.cmd(&format!(
        "load {} agentx claim=1.3.6.1.4.1.32473",
        module_path()
    ));
    assert_eq!(out, vec!["init failed: 1"]);
    let log = h.log_text();
    assert!(
        log.contains("expected claim=OID or claim=OID/SYNTAX"),
        "{log}"
    );
    assert!(
        log.contains("no claim: start bsnmpd with SECTION:claim=OID"),
        "{log}"
    );
    assert!(log.contains("overlaps the module's own variables"), "{log}");
}

/// The bsnmpd to test against: $BSNMPD, or FreeBSD's /usr/sbin/bsnmpd.
fn real_bsnmpd() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("BSNMPD") {
        let p = PathBuf::from(p);
        assert!(p.exists(), "BSNMPD={} does not exist", p.display());
        return Some(p);
    }
    let p = Path::new("/usr/sbin/bsnmpd");
    p.exists().then(|| p.to_path_buf())
}

/// A real bsnmpd in the foreground on 127.0.0.1 at a high port, with the module loaded from
/// its config file and claiming MEMSTAT-MIB's subtree.
struct RealBsnmpd {
    child: Child,
    port: u16,
    socket: PathBuf,
    log: PathBuf,
}

impl RealBsnmpd {
    fn start(bsnmpd: &Path, dir: &Path) -> RealBsnmpd {
        Self::start_with(bsnmpd, dir, &[&format!("claim={CLAIM}")], "", "")
    }

    /// `args` are the module's arguments (`agentx:` is prepended); `snmpd_vars` and
    /// `agentx_vars` are extra lines of the `%snmpd` and `%agentx` config sections.
    fn start_with(
        bsnmpd: &Path,
        dir: &Path,
        args: &[&str],
        snmpd_vars: &str,
        agentx_vars: &str,
    ) -> RealBsnmpd {
        let port = free_port();
        let socket = dir.join("agentx-master.sock");
        let conf = dir.join("bsnmpd.config");
        // bsnmpd's config idiom: the daemon's section, then the module's own (snmp_agentx(3)).
        std::fs::write(
            &conf,
            format!(
                "%snmpd\n\
                 begemotSnmpdCommunityString.0.1 = \"public\"\n\
                 begemotSnmpdCommunityDisable = 1\n\
                 begemotSnmpdPortStatus.127.0.0.1.{port} = 1\n\
                 begemotSnmpdModulePath.\"agentx\" = \"{module}\"\n\
                 {snmpd_vars}\n\
                 %agentx\n\
                 agentxSocket = \"{socket}\"\n\
                 agentxSocketMode = 0600\n\
                 agentxTimeout = 50\n\
                 {agentx_vars}\n",
                module = module_path(),
                socket = socket.display(),
            ),
        )
        .unwrap();
        let log = dir.join("bsnmpd.log");
        let child = Command::new(bsnmpd)
            .arg("-d")
            .arg("-c")
            .arg(&conf)
            .arg("-p")
            .arg(dir.join("bsnmpd.pid"))
            .arg("-e")
            .arg(dir.join("bsnmpd.engine"))
            .args(args.iter().map(|a| format!("agentx:{a}")))
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(dir.join("bsnmpd.err")).unwrap())
            .spawn()
            .expect("start bsnmpd");
        let b = RealBsnmpd {
            child,
            port,
            socket,
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !b.socket.exists() {
            assert!(
                Instant::now() < deadline,
                "bsnmpd did not open the AgentX socket: {} {}",
                std::fs::read_to_string(&b.log).unwrap_or_default(),
                std::fs::read_to_string(dir.join("bsnmpd.err")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        b
    }
}

impl Drop for RealBsnmpd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
#[ignore = "needs a real bsnmpd (BSNMPD, or FreeBSD's /usr/sbin/bsnmpd): scripts/test runs it when there is one"]
fn bsnmpd_real_daemon_serves_memstat_mib() {
    let bsnmpd = real_bsnmpd_or_fail("bsnmpd_real_daemon_serves_memstat_mib");
    require_tool("snmpbulkwalk");
    let (dir, snmpd, _daemon) = start_with_fixture(Transport::Unix, sample_types(), &[]);
    let b = RealBsnmpd::start(&bsnmpd, dir.path());
    let _sub = Killed(subagent(
        dir.path(),
        &b.socket,
        &dir.path().join("fixture.json"),
    ));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let o = snmp_cmd(
            "snmpget",
            b.port,
            &["-t", "0.5", "-r", "0"],
            &[&format!("{TYPE_ENTRY}.2.1")],
        );
        if String::from_utf8_lossy(&o.stdout).contains("STRING") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "memstat-agentx is not served through bsnmpd: {} {}",
            std::fs::read_to_string(&b.log).unwrap_or_default(),
            std::fs::read_to_string(b.log.with_extension("err")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // snmpbulkwalk, as plain and with -Cr10, and snmpget: the same as net-snmp serves.
    let want = bulkwalk(snmpd.port, TYPE_ENTRY, &[]);
    assert!(want.len() > 20);
    assert_eq!(bulkwalk(b.port, TYPE_ENTRY, &[]), want);
    assert_eq!(bulkwalk(b.port, TYPE_ENTRY, &["-Cr10"]), want);
    let cells = [
        format!("{TYPE_ENTRY}.2.1"),
        format!("{TYPE_ENTRY}.5.2"),
        format!("{ROOT}.1.1.7.0"),
    ];
    let cells: Vec<&str> = cells.iter().map(String::as_str).collect();
    assert_eq!(get(b.port, &cells), get(snmpd.port, &cells));
    // snmptable of memTypeTable, with MEMSTAT-MIB loaded.
    let table = |port: u16| {
        let o = Command::new("snmptable")
            .args([
                "-v2c",
                "-c",
                "public",
                "-M",
                &mib_dirs(),
                "-m",
                "MEMSTAT-MIB",
                "-Cf",
                "|",
            ])
            .arg(format!("127.0.0.1:{port}"))
            .arg("MEMSTAT-MIB::memTypeTable")
            .output()
            .expect("snmptable");
        assert!(
            o.status.success(),
            "snmptable: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap()
    };
    let t = table(b.port);
    assert!(t.lines().count() > 5, "{t}");
    assert_eq!(t, table(snmpd.port));
}

/// The real bsnmpd, which the `bsnmpd_real_daemon` tests need: they are `#[ignore]`d, and
/// scripts/test runs them when there is one; run without one, they fail here.
fn real_bsnmpd_or_fail(test: &str) -> PathBuf {
    real_bsnmpd().unwrap_or_else(|| {
        panic!(
            "{test}: no bsnmpd (set BSNMPD to a bsnmpd binary, and BSNMP_INCLUDE to its \
             headers; FreeBSD has /usr/sbin/bsnmpd)"
        )
    })
}

#[test]
#[ignore = "needs a real bsnmpd (BSNMPD, or FreeBSD's /usr/sbin/bsnmpd): scripts/test runs it when there is one"]
fn bsnmpd_real_daemon_set_maps_to_testset_commitset_undoset_cleanupset() {
    let bsnmpd =
        real_bsnmpd_or_fail("bsnmpd_real_daemon_set_maps_to_testset_commitset_undoset_cleanupset");
    require_tool("snmpset");
    let dir = tempfile::tempdir().unwrap();
    // bsnmpd's second standard community is the write community.
    let b = RealBsnmpd::start_with(
        &bsnmpd,
        dir.path(),
        &["claim=1.3.6.1.4.1.32473.7/integer"],
        "begemotSnmpdCommunityString.0.2 = \"private\"",
        "",
    );
    let (seen, _t) = read_write_subagent(b.socket.clone());
    let take = |seen: &Seen| std::mem::take(&mut *seen.lock().unwrap());
    // snmpset with the write community (the last -c wins); stdout, or the error report.
    let set = |args: &[&str]| {
        let o = snmp_cmd(
            "snmpset",
            b.port,
            &["-c", "private", "-t", "3", "-r", "0"],
            args,
        );
        let out = String::from_utf8_lossy(&o.stdout).to_string();
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        (o.status.success(), out, err)
    };
    let a = ".1.3.6.1.4.1.32473.7.1.1.0";
    let bb = ".1.3.6.1.4.1.32473.7.1.2.0";

    let (ok, out, err) = set(&[a, "i", "42"]);
    assert!(ok, "{err}");
    assert_eq!(out.trim(), format!("{a} = INTEGER: 42"));
    assert_eq!(take(&seen), ["TestSet", "CommitSet", "CleanupSet"]);
    assert_eq!(get(b.port, &[a])[0].value, "42");
    take(&seen);

    // Refused by TestSet: wrongValue, and a CleanupSet.
    let (ok, _, err) = set(&[a, "i", "500"]);
    assert!(
        !ok && err.contains("wrongValue") && err.contains(a),
        "{err}"
    );
    assert_eq!(take(&seen), ["TestSet", "CleanupSet"]);

    // Two varbinds, the second refused: bsnmpd's ROLLBACK of the first becomes UndoSet.
    let (ok, _, err) = set(&[a, "i", "7", bb, "i", "500"]);
    assert!(
        !ok && err.contains("wrongValue") && err.contains(bb),
        "{err}"
    );
    assert_eq!(
        take(&seen),
        [
            "TestSet",
            "CommitSet",
            "TestSet",
            "CleanupSet",
            "UndoSet",
            "CleanupSet"
        ]
    );
    assert_eq!(get(b.port, &[a])[0].value, "42");
    take(&seen);

    // One syntax per claim node: bsnmpd refuses another syntax before the module sees it.
    let (ok, _, err) = set(&[a, "s", "x"]);
    assert!(!ok && err.contains("wrongType"), "{err}");
    // Outside every registration: notWritable.
    let (ok, _, err) = set(&[".1.3.6.1.4.1.32473.7.9.0", "i", "1"]);
    assert!(!ok && err.contains("notWritable"), "{err}");
    assert!(take(&seen).is_empty());
}

#[test]
#[ignore = "needs a real bsnmpd (BSNMPD, or FreeBSD's /usr/sbin/bsnmpd): scripts/test runs it when there is one"]
fn bsnmpd_real_daemon_deadline_hanging_subagent_stalls_one_timeout_then_is_closed() {
    let bsnmpd = real_bsnmpd_or_fail(
        "bsnmpd_real_daemon_deadline_hanging_subagent_stalls_one_timeout_then_is_closed",
    );
    require_tool("snmpbulkget");
    let dir = tempfile::tempdir().unwrap();
    let b = RealBsnmpd::start_with(
        &bsnmpd,
        dir.path(),
        &["claim=1.3.6.1.4.1.32473.7"],
        "",
        "agentxMaxTimeouts = 2",
    );
    // Registers, then answers nothing.
    let (seen, _t) = scripted_subagent(b.socket.clone(), "1.3.6.1.4.1.32473.7", |_| None);
    let timeout = Duration::from_millis(500); // agentxTimeout = 50

    // One GETBULK of 3 repeaters x 10: the whole PDU waits one timeout, not 30.
    let t0 = Instant::now();
    let o = snmp_cmd(
        "snmpbulkget",
        b.port,
        &["-t", "5", "-r", "0", "-Cn0", "-Cr10"],
        &[
            ".1.3.6.1.4.1.32473.7",
            ".1.3.6.1.4.1.32473.7.1",
            ".1.3.6.1.4.1.32473.7.2",
        ],
    );
    let stall = t0.elapsed();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("genError"), "{err}");
    assert!(
        stall >= timeout - Duration::from_millis(20) && stall < 3 * timeout,
        "stalled {stall:?}"
    );
    // bsnmpd answers its own objects, and the module's, at once meanwhile.
    let t0 = Instant::now();
    assert_eq!(get(b.port, &[".1.3.6.1.4.1.32473.2.1.5.0"])[0].value, "50");
    assert!(t0.elapsed() < Duration::from_millis(300));

    // A second timeout in a row closes the session (agentxMaxTimeouts 2).
    let o = snmp_cmd(
        "snmpget",
        b.port,
        &["-t", "5", "-r", "0"],
        &[".1.3.6.1.4.1.32473.7.1.0"],
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("genError"));
    let deadline = Instant::now() + Duration::from_secs(5);
    while seen.lock().unwrap().last().map(String::as_str) != Some("Close") {
        assert!(
            Instant::now() < deadline,
            "no Close: {:?}",
            seen.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let log = std::fs::read_to_string(b.log.with_extension("err")).unwrap_or_default()
        + &std::fs::read_to_string(&b.log).unwrap_or_default();
    assert!(log.contains("closed after 2 timeouts in a row"), "{log}");
    // Its registration is gone: nothing waits any more.
    let t0 = Instant::now();
    let l = get(b.port, &[".1.3.6.1.4.1.32473.7.1.0"]);
    assert_eq!(l[0].ty, "No Such Instance currently exists at this OID");
    assert!(t0.elapsed() < Duration::from_millis(300));
}

#[test]
#[ignore = "needs a real bsnmpd (BSNMPD, or FreeBSD's /usr/sbin/bsnmpd): scripts/test runs it when there is one"]
fn bsnmpd_real_daemon_unloads_and_reloads_the_module_at_run_time() {
    let bsnmpd =
        real_bsnmpd_or_fail("bsnmpd_real_daemon_unloads_and_reloads_the_module_at_run_time");
    require_tool("snmpset");
    let (dir, _snmpd, _daemon) = start_with_fixture(Transport::Unix, sample_types(), &[]);
    let mut b = RealBsnmpd::start_with(
        &bsnmpd,
        dir.path(),
        &[&format!("claim={CLAIM}")],
        "begemotSnmpdCommunityString.0.2 = \"private\"",
        "",
    );
    let _sub = Killed(subagent(
        dir.path(),
        &b.socket,
        &dir.path().join("fixture.json"),
    ));
    let cell = format!("{TYPE_ENTRY}.2.1");
    let served = |port: u16| {
        let o = snmp_cmd("snmpget", port, &["-t", "0.5", "-r", "0"], &[&cell]);
        String::from_utf8_lossy(&o.stdout).contains("STRING")
    };
    let wait = |what: &str, port: u16, want: bool| {
        let deadline = Instant::now() + Duration::from_secs(20);
        while served(port) != want {
            assert!(Instant::now() < deadline, "{what}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    wait("memstat-agentx is not served through bsnmpd", b.port, true);

    // begemotSnmpdModulePath."agentx": an empty path unloads the module (fini, dlclose), a
    // path loads and starts it again, as bsnmpd's config file and bsnmpctl do.
    let path_oid = format!(
        ".1.3.6.1.4.1.12325.1.1.1.6.1.2.6.{}",
        "agentx"
            .bytes()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(".")
    );
    let set_path = |path: &str| {
        let o = snmp_cmd(
            "snmpset",
            b.port,
            &["-c", "private", "-t", "5", "-r", "0"],
            &[&path_oid, "s", path],
        );
        assert!(
            o.status.success(),
            "snmpset of the module path {path:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    set_path("");
    assert!(
        b.child.try_wait().unwrap().is_none(),
        "bsnmpd exited on unload"
    );
    assert!(!served(b.port));
    assert!(!b.socket.exists(), "the module left its socket behind");
    // bsnmpd itself goes on answering.
    assert_eq!(get(b.port, &[".1.3.6.1.2.1.1.5.0"])[0].ty, "STRING");

    set_path(module_path());
    // The module listens again, and memstat-agentx reconnects and registers.
    wait(
        "memstat-agentx is not served after the reload",
        b.port,
        true,
    );
    assert!(b.child.try_wait().unwrap().is_none(), "bsnmpd exited");
}

#[test]
#[ignore = "needs a real bsnmpd (BSNMPD, or FreeBSD's /usr/sbin/bsnmpd): scripts/test runs it when there is one"]
fn bsnmpd_real_daemon_notify_reaches_snmptrapd_and_agentcaps_fill_sysortable() {
    let bsnmpd = real_bsnmpd_or_fail(
        "bsnmpd_real_daemon_notify_reaches_snmptrapd_and_agentcaps_fill_sysortable",
    );
    let dir = tempfile::tempdir().unwrap();
    let traps = Snmptrapd::start(dir.path(), "snmptrapd");
    // A v2c trap sink, configured as FreeBSD's stock snmpd.config does.
    let sink = format!("127.0.0.1.{}", traps.port);
    let b = RealBsnmpd::start_with(
        &bsnmpd,
        dir.path(),
        &["claim=1.3.6.1.4.1.32473.7"],
        &format!(
            "begemotTrapSinkStatus.{sink} = 4\n\
             begemotTrapSinkVersion.{sink} = 2\n\
             begemotTrapSinkComm.{sink} = \"public\""
        ),
        "",
    );
    // bsnmpd's own coldStart went through the sink.
    let wait = Duration::from_secs(5);
    traps.wait_for(".1.3.6.1.6.3.1.1.5.1", 1, wait, "bsnmpd's coldStart");

    let mut sub = Sub::open(&b.socket, "scripted");
    assert_eq!(sub.register("1.3.6.1.2.1.1", 127), ResError::REQUEST_DENIED);
    assert_eq!(
        sub.register("1.3.6.1.4.1.32473.7.1", 127),
        ResError::NO_ERROR
    );
    assert_eq!(
        sub.admin(Payload::AddAgentCaps {
            id: "1.3.6.1.4.1.32473.7".parse().unwrap(),
            descr: b"SCRIPTED-MIB".to_vec(),
        }),
        ResError::NO_ERROR
    );
    // AddAgentCaps is a sysORTable row of bsnmpd's.
    let or_rows = |port: u16| {
        bulkwalk(port, ".1.3.6.1.2.1.1.9", &[])
            .into_iter()
            .map(|l| l.value)
            .collect::<Vec<_>>()
    };
    let rows = or_rows(b.port);
    assert!(rows.iter().any(|v| v == "SCRIPTED-MIB"), "{rows:?}");
    assert!(rows.iter().any(|v| v == ".1.3.6.1.4.1.32473.7"), "{rows:?}");

    // A Notify becomes a trap to bsnmpd's sinks, with bsnmpd's own sysUpTime.0.
    let e = sub.admin(Payload::Notify {
        varbinds: hello_notification(123_456_789),
    });
    assert_eq!(e, ResError::NO_ERROR);
    let got = traps.wait_for(".1.3.6.1.4.1.32473.7.0.1", 1, wait, "the Notify");
    let trap = &got[0];
    assert_eq!(
        trap.value(".1.3.6.1.4.1.32473.7.1.1.0"),
        Some("hello"),
        "{trap:?}"
    );
    // The subagent's sysUpTime.0 was replaced by bsnmpd's, not sent twice.
    let uptimes: Vec<_> = trap
        .varbinds
        .iter()
        .filter(|v| v.oid == ".1.3.6.1.2.1.1.3.0")
        .collect();
    assert_eq!(uptimes.len(), 1, "{trap:?}");
    assert!(!uptimes[0].value.contains("123456789"), "{trap:?}");

    assert_eq!(
        sub.admin(Payload::RemoveAgentCaps {
            id: "1.3.6.1.4.1.32473.7".parse().unwrap(),
        }),
        ResError::NO_ERROR
    );
    let rows = or_rows(b.port);
    assert!(!rows.iter().any(|v| v == "SCRIPTED-MIB"), "{rows:?}");
}

/// GetNext/GetBulk over a fixed sorted list of objects, as a subagent answers them.
fn answer_from(objects: &[(Oid, Value)], p: &Pdu) -> Option<Payload> {
    let (ranges, reps) = match &p.payload {
        Payload::GetNext { ranges } => (ranges, 1),
        Payload::GetBulk {
            max_repetitions,
            ranges,
            ..
        } => (ranges, *max_repetitions as usize),
        Payload::Get { ranges } => {
            return Some(resp(
                ranges
                    .iter()
                    .map(|r| VarBind {
                        name: r.start.clone(),
                        value: objects
                            .iter()
                            .find(|o| o.0 == r.start)
                            .map(|o| o.1.clone())
                            .unwrap_or(Value::NoSuchInstance),
                    })
                    .collect(),
            ))
        }
        _ => return Some(resp(vec![])),
    };
    let r = &ranges[0];
    let mut out = Vec::new();
    let mut after = r.start.clone();
    let mut include = r.include;
    for _ in 0..reps {
        let next = objects.iter().find(|o| {
            (o.0 > after || (include && o.0 == after)) && (r.end.is_null() || o.0 < r.end)
        });
        match next {
            Some((n, v)) => {
                out.push(VarBind {
                    name: n.clone(),
                    value: v.clone(),
                });
                after = n.clone();
                include = false;
            }
            None => {
                out.push(VarBind {
                    name: after.clone(),
                    value: Value::EndOfMibView,
                });
                break;
            }
        }
    }
    Some(resp(out))
}

#[test]
fn bsnmpd_host_walk_crosses_registrations_of_two_subagents() {
    let (dir, snmpd, _daemon) = start_with_fixture(Transport::Unix, sample_types(), &[]);
    let from_net_snmp = bulkwalk(snmpd.port, TYPE_ENTRY, &[]);
    let mut h = BsnmpHost::start(dir.path(), &[&format!("claim={CLAIM}")], &[]);
    let _sub = Killed(subagent(
        dir.path(),
        &h.socket,
        &dir.path().join("fixture.json"),
    ));
    h.until("memstat-agentx registers", served);

    // A second subagent takes over memTypeAllocator (column 3): a longer subtree wins.
    let column = format!("{}.3", &TYPE_ENTRY[1..]);
    let objects: Vec<(Oid, Value)> = (1..=3)
        .map(|i| {
            (
                format!("{column}.{i}").parse().unwrap(),
                Value::Integer(90 + i),
            )
        })
        .collect();
    let socket = h.socket.clone();
    let (_seen, _t) = std::thread::scope(|sc| {
        let t = sc.spawn(|| {
            scripted_subagent(socket.clone(), &column, move |p| answer_from(&objects, p))
        });
        while !t.is_finished() {
            h.cmd("run 20");
        }
        t.join().unwrap()
    });
    let mut want: Vec<Line> = from_net_snmp
        .iter()
        .filter(|l| !l.oid.starts_with(&format!("{TYPE_ENTRY}.3.")))
        .cloned()
        .collect();
    let at = want
        .iter()
        .position(|l| l.oid.starts_with(&format!("{TYPE_ENTRY}.4.")))
        .unwrap();
    for i in (1..=3).rev() {
        want.insert(
            at,
            Line {
                oid: format!("{TYPE_ENTRY}.3.{i}"),
                ty: "INTEGER".into(),
                value: format!("{}", 90 + i),
            },
        );
    }
    // Each GETBULK crosses from one subagent's interval into the other's and back.
    for maxrep in ["", " 10", " 7"] {
        assert_eq!(
            h.lines(&format!("walk {TYPE_ENTRY}{maxrep}")),
            want,
            "walk{maxrep}"
        );
    }
    let l = h.lines(&format!(
        "get {TYPE_ENTRY}.3.2 {TYPE_ENTRY}.3.5 {TYPE_ENTRY}.2.2"
    ));
    assert_eq!(l[0].value, "92");
    assert_eq!(l[1].ty, "No Such Instance currently exists at this OID");
    assert_eq!(l[2].value, "mbuf");
}

/// Not a test: the figures for BENCHMARKS.md (AgentX round trips and time of a walk of
/// memTypeTable at 300 types through the module in the host, and through net-snmp's snmpd).
/// `cargo test --release --test bsnmpd_module bsnmpd_measure -- --ignored --nocapture`
#[test]
#[ignore = "a measurement, not a test: run it by name with --ignored"]
fn bsnmpd_measure_walk_round_trips() {
    let types: Vec<_> = (0..300)
        .map(|i| {
            full_type(
                memstat_agentx::memstat::Allocator::Uma,
                &format!("zone{i}"),
                i,
            )
        })
        .collect();
    let (dir, snmpd, _daemon) = start_with_fixture(Transport::Unix, types, &[]);
    let mut h = BsnmpHost::start(dir.path(), &[&format!("claim={CLAIM}")], &[]);
    let _sub = Killed(subagent(
        dir.path(),
        &h.socket,
        &dir.path().join("fixture.json"),
    ));
    h.until("memstat-agentx registers", served);
    let reference = bulkwalk(snmpd.port, TYPE_ENTRY, &["-Cr10"]);
    for (what, cmd) in [
        (
            "GETBULK max-repetitions 10",
            format!("walk {TYPE_ENTRY} 10"),
        ),
        ("GETNEXT", format!("walk {TYPE_ENTRY}")),
    ] {
        let mut best = Duration::MAX;
        let mut requests = 0;
        for _ in 0..5 {
            let before = h.requests();
            let t0 = Instant::now();
            let got = h.lines(&cmd);
            best = best.min(t0.elapsed());
            requests = h.requests() - before;
            assert_eq!(got, reference);
        }
        println!(
            "module in the host, {what}: {} varbinds, {requests} AgentX requests, best of 5 {:.1} ms",
            reference.len(),
            best.as_secs_f64() * 1000.0
        );
    }
    let mut best = Duration::MAX;
    for _ in 0..5 {
        let t0 = Instant::now();
        bulkwalk(snmpd.port, TYPE_ENTRY, &["-Cr10"]);
        best = best.min(t0.elapsed());
    }
    println!(
        "net-snmp snmpd, snmpbulkwalk -Cr10 (client start-up and UDP included): best of 5 {:.1} ms",
        best.as_secs_f64() * 1000.0
    );
}

#[test]
fn bsnmpd_host_survives_a_subagent_that_stops_reading() {
    // bsnmpd does not ignore SIGPIPE: a Response written to a subagent that shut its
    // reading side must not kill the daemon (here, the host).
    let dir = tempfile::tempdir().unwrap();
    let mut h = BsnmpHost::start(dir.path(), &[&format!("claim={CLAIM}")], &[]);
    let socket = h.socket.clone();
    let mut sub = with_loop(&mut h, || Sub::open(&socket, "half-closed"));
    sub.s.shutdown(std::net::Shutdown::Read).unwrap();
    sub.packet += 1;
    let ping = Pdu::new(sub.sid, 0, sub.packet, Payload::Ping);
    sub.send(&ping);
    h.cmd("run 200");
    assert!(
        h.child.try_wait().unwrap().is_none(),
        "the host died: {}",
        h.log_text()
    );
    assert_eq!(h.lines("get .1.3.6.1.4.1.32473.2.1.5.0")[0].value, "50");
    let log = h.log_text();
    assert!(log.contains("write: "), "{log}");
}

#[test]
fn bsnmpd_host_tcp_listener_and_socket_permissions() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let dir = tempfile::tempdir().unwrap();
    let fixture = dir.path().join("fixture.json");
    write_fixture(&fixture, sample_types());
    let port = free_port().to_string();
    let mut h = BsnmpHost::start(
        dir.path(),
        &[&format!("claim={CLAIM}")],
        &[
            ("agentxTcpPort", &port),
            ("agentxSocketMode", "0640"),
            ("agentxSocketGroup", "daemon"),
        ],
    );
    let meta = std::fs::metadata(&h.socket).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o640);
    assert_eq!(meta.gid(), 1, "group daemon (gid 1 on Debian and FreeBSD)");
    // memstat-agentx over TCP to 127.0.0.1.
    let state = dir.path().join("state");
    let _sub = Killed(
        Command::new(bin())
            .args(["run", "--agentx-socket", &format!("tcp:127.0.0.1:{port}")])
            .arg("--source")
            .arg(format!("fixture:{}", fixture.display()))
            .arg("--state-dir")
            .arg(&state)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    h.until("memstat-agentx registers over TCP", served);
    // A bad value in the config section fails the transaction, names the variable, and
    // bsnmpd (lm_start) unloads the module.
    let mut bad = BsnmpHost::spawn(dir.path());
    let out = bad.cmd(&format!("load {} agentx claim={CLAIM}", module_path()));
    assert!(out[0].starts_with("loaded"));
    bad.cmd("config agentxTimeout 0");
    assert_eq!(
        bad.cmd("start"),
        vec![
            "assignment to agentxTimeout returns 10",
            "error in config file",
            "dlclose: 0"
        ]
    );
    assert!(
        bad.log_text()
            .contains("agentxTimeout: 0 is outside 1..3000"),
        "{}",
        bad.log_text()
    );
}

#[test]
fn bsnmpd_host_bad_pdus_get_parse_error_or_close() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = BsnmpHost::start(dir.path(), &[&format!("claim={CLAIM}")], &[]);
    let socket = h.socket.clone();
    let (answer, closed) = with_loop(&mut h, || {
        let mut sub = Sub::open(&socket, "garbage");
        // A well-framed PDU of an unknown type: answered parseError, the session goes on.
        let mut frame = Vec::new();
        Pdu::new(sub.sid, 0, 77, Payload::Ping).encode(&mut frame);
        frame[1] = 99;
        sub.s.write_all(&frame).unwrap();
        let r = sub.recv();
        let answer = match r.payload {
            Payload::Response { error, .. } => (r.ids.packet_id, error),
            other => panic!("{other:?}"),
        };
        assert_eq!(sub.admin(Payload::Ping), ResError::NO_ERROR);
        // A version the codec cannot frame: the connection is closed.
        frame[0] = 2;
        sub.s.write_all(&frame).unwrap();
        let close = read_pdu(&mut sub.s).map(|p| p.payload);
        let mut b = [0u8; 1];
        let eof = matches!(sub.s.read(&mut b), Ok(0));
        let closed = (close, eof);
        (answer, closed)
    });
    assert_eq!(answer, (77, ResError::PARSE_ERROR));
    assert_eq!(
        closed,
        (
            Some(Payload::Close {
                reason: agentx_proto::pdu::CloseReason::PARSE_ERROR
            }),
            true
        )
    );
    assert!(h.log_text().contains("closed"), "{}", h.log_text());
}
