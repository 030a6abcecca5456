//! What the master's unit tests drive it with: a fake bsnmpd ([`FakeHost`]) that records
//! what the master asks of it and whose clock the tests move, and subagents on the other end
//! of real Unix sockets, accepted through the master's own listener.
//!
//! Nothing here sleeps. A PDU a test writes is in the master's socket before `readable` is
//! called, and the master's answer is in the test's socket before `readable` returns, since
//! the master runs on the test's thread. Only a forwarded request needs a subagent that
//! answers while the master waits: [`serve`] runs one on a thread, and a timeout is made by
//! moving the clock past the deadline rather than by waiting for it.
use super::{Host, Master};
use crate::registry::SessionId;
use crate::settings::{parse_args, Settings};
use agentx_proto::oid::Oid;
use agentx_proto::pdu::{Header, HeaderIds, Payload, Pdu, PduType, ResError, VarBind, HEADER_LEN};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::io::RawFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The claim every rig's master has.
pub(super) const CLAIM: &str = "1.3.6.1.4.1.32473.1";
/// The sysUpTime the fake answers with.
pub(super) const UPTIME: u32 = 4242;
/// How long a test waits for something the master is sure to send before it fails: long,
/// since it is only reached when the master is wrong.
const PATIENCE: Duration = Duration::from_secs(10);

/// `CLAIM` with `tail` appended.
pub(super) fn oid(tail: &[u32]) -> Oid {
    let claim: Oid = CLAIM.parse().unwrap();
    claim.child(tail)
}

/// The master's clock: the real monotonic clock plus an offset the tests (and their
/// subagent threads) move forward. It keeps running, so a request whose deadline a test
/// failed to pass still ends.
#[derive(Clone)]
pub(super) struct Clock {
    ahead_ns: Arc<AtomicU64>,
}

impl Clock {
    pub(super) fn now(&self) -> Instant {
        Instant::now() + Duration::from_nanos(self.ahead_ns.load(Ordering::SeqCst))
    }

    pub(super) fn advance(&self, by: Duration) {
        let ns = u64::try_from(by.as_nanos()).unwrap();
        self.ahead_ns.fetch_add(ns, Ordering::SeqCst);
    }
}

/// What the master asked of bsnmpd.
#[derive(Default)]
pub(super) struct Recorded {
    /// Live watches: fd_select's id, and the fd.
    pub(super) watched: BTreeMap<usize, RawFd>,
    next_watch: usize,
    /// Deselects of an id that was not watched (a double `fd_deselect` would crash bsnmpd).
    pub(super) stray_unwatches: Vec<usize>,
    /// Make fd_select fail.
    pub(super) refuse_watch: bool,
    /// Live sysORTable rows, by index.
    pub(super) rows: BTreeMap<u32, (Oid, Vec<u8>)>,
    next_row: u32,
    /// Make or_register fail.
    pub(super) refuse_rows: bool,
    pub(super) traps: Vec<(Oid, Vec<VarBind>)>,
    pub(super) logs: Vec<(i32, String)>,
}

pub(super) struct FakeHost {
    rec: Rc<RefCell<Recorded>>,
    clock: Clock,
}

impl Host for FakeHost {
    fn watch(&mut self, fd: RawFd) -> Option<usize> {
        let mut r = self.rec.borrow_mut();
        if r.refuse_watch {
            return None;
        }
        r.next_watch += 1;
        let id = r.next_watch;
        r.watched.insert(id, fd);
        Some(id)
    }

    fn unwatch(&mut self, id: usize) {
        let mut r = self.rec.borrow_mut();
        if r.watched.remove(&id).is_none() {
            r.stray_unwatches.push(id);
        }
    }

    fn uptime(&self) -> u32 {
        UPTIME
    }

    fn now(&self) -> Instant {
        self.clock.now()
    }

    fn or_register(&mut self, id: &Oid, descr: &[u8]) -> u32 {
        let mut r = self.rec.borrow_mut();
        if r.refuse_rows {
            return 0;
        }
        r.next_row += 1;
        let idx = r.next_row;
        r.rows.insert(idx, (id.clone(), descr.to_vec()));
        idx
    }

    fn or_unregister(&mut self, index: u32) {
        let removed = self.rec.borrow_mut().rows.remove(&index);
        assert!(removed.is_some(), "or_unregister({index}): no such row");
    }

    fn send_trap(&mut self, trap: &Oid, varbinds: &[VarBind]) {
        self.rec
            .borrow_mut()
            .traps
            .push((trap.clone(), varbinds.to_vec()));
    }

    fn log(&self, priority: i32, msg: &str) {
        self.rec.borrow_mut().logs.push((priority, msg.to_string()));
    }
}

/// A master with one claim ([`CLAIM`]) listening on a Unix socket of its own, its host
/// recorded, its clock in the test's hands.
pub(super) struct Rig {
    pub(super) master: Master,
    pub(super) host: Rc<RefCell<Recorded>>,
    pub(super) clock: Clock,
    /// The rig's own directory, removed with it.
    pub(super) dir: PathBuf,
    /// Where [`Rig::connect`] connects: the master's socket.
    pub(super) socket: PathBuf,
}

impl Rig {
    pub(super) fn new() -> Rig {
        Rig::with(|_| {})
    }

    /// A rig whose settings `configure` changes before the master listens.
    pub(super) fn with(configure: impl FnOnce(&mut Settings)) -> Rig {
        static RIGS: AtomicUsize = AtomicUsize::new(0);
        let n = RIGS.fetch_add(1, Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("bsnmp-agentx-{}-{n}", std::process::id()));
        let socket = dir.join("master");
        let rec = Rc::new(RefCell::new(Recorded::default()));
        let clock = Clock {
            ahead_ns: Arc::new(AtomicU64::new(0)),
        };
        let host = FakeHost {
            rec: rec.clone(),
            clock: clock.clone(),
        };
        let claims = parse_args([format!("claim={CLAIM}").as_str()]).unwrap();
        let mut master = Master::new(claims, Box::new(host));
        master.settings.socket = socket.display().to_string();
        configure(&mut master.settings);
        master.listen();
        Rig {
            master,
            host: rec,
            clock,
            dir,
            socket,
        }
    }

    /// The fd the master listens on (the first it watches).
    pub(super) fn listener_fd(&self) -> RawFd {
        let r = self.host.borrow();
        let (_, &fd) = r
            .watched
            .iter()
            .next()
            .expect("the master watches its listener");
        fd
    }

    /// A subagent connected and accepted (not yet with a session).
    pub(super) fn connect(&mut self) -> Sub {
        let s = UnixStream::connect(&self.socket).expect("connect to the master's socket");
        s.set_read_timeout(Some(PATIENCE)).unwrap();
        let before = self.host.borrow().next_watch;
        self.master.readable(self.listener_fd());
        let r = self.host.borrow();
        let (&id, &fd) = r
            .watched
            .iter()
            .next_back()
            .expect("the master watches the connection it accepted");
        assert!(id > before, "the master accepted no connection");
        Sub {
            s,
            fd,
            next_packet: 0,
        }
    }

    /// `sub` sends `payload` for session `sid`; the master reads it; the Response it sends
    /// back.
    pub(super) fn ask(&mut self, sub: &mut Sub, sid: SessionId, payload: Payload) -> Pdu {
        let packet = sub.send_for(sid, payload);
        self.master.readable(sub.fd);
        let r = sub.recv();
        assert_eq!(r.pdu_type(), PduType::RESPONSE, "{r:?}");
        assert_eq!(r.ids.packet_id, packet, "a Response to another PDU: {r:?}");
        r
    }

    /// [`Rig::ask`], for the Response's error only.
    pub(super) fn ask_error(
        &mut self,
        sub: &mut Sub,
        sid: SessionId,
        payload: Payload,
    ) -> ResError {
        response_error(&self.ask(sub, sid, payload))
    }

    /// Opens a session with `timeout` (whole seconds, 0 for the master's default).
    pub(super) fn open_with_timeout(&mut self, sub: &mut Sub, timeout: u8) -> SessionId {
        let r = self.ask(
            sub,
            0,
            Payload::Open {
                timeout,
                id: Oid::from_slice(&[1, 3, 6, 1, 4, 1, 32473, 9]),
                descr: b"unit-test subagent".to_vec(),
            },
        );
        assert_eq!(response_error(&r), ResError::NO_ERROR);
        assert_ne!(
            r.ids.session_id, 0,
            "an Open's Response carries the session id"
        );
        r.ids.session_id
    }

    pub(super) fn open(&mut self, sub: &mut Sub) -> SessionId {
        self.open_with_timeout(sub, 0)
    }

    pub(super) fn register(&mut self, sub: &mut Sub, sid: SessionId, subtree: &Oid) -> ResError {
        self.ask_error(sub, sid, register(subtree, 127))
    }

    /// A connected subagent with a session that registered `subtree`.
    pub(super) fn registered(&mut self, subtree: &Oid) -> (Sub, SessionId) {
        let mut sub = self.connect();
        let sid = self.open(&mut sub);
        assert_eq!(self.register(&mut sub, sid, subtree), ResError::NO_ERROR);
        (sub, sid)
    }

    /// Whether the master logged a line containing `text`.
    pub(super) fn logged(&self, text: &str) -> bool {
        self.host
            .borrow()
            .logs
            .iter()
            .any(|(_, l)| l.contains(text))
    }

    /// Whether the master still watches `fd` (it unwatches a connection it closes).
    pub(super) fn watches(&self, fd: RawFd) -> bool {
        self.host.borrow().watched.values().any(|&w| w == fd)
    }

    /// The master's `dump` line of session `sid`.
    pub(super) fn dumped_session(&self, sid: SessionId) -> Option<String> {
        let prefix = format!("session {sid}:");
        self.master
            .dump()
            .into_iter()
            .find(|l| l.starts_with(&prefix))
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.master.shutdown();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The error of a Response PDU.
pub(super) fn response_error(p: &Pdu) -> ResError {
    match &p.payload {
        Payload::Response { error, .. } => *error,
        other => panic!("not a Response: {other:?}"),
    }
}

pub(super) fn register(subtree: &Oid, priority: u8) -> Payload {
    Payload::Register {
        timeout: 0,
        priority,
        range_subid: 0,
        subtree: subtree.clone(),
        upper_bound: None,
    }
}

/// A subagent's end of a connection.
pub(super) struct Sub {
    pub(super) s: UnixStream,
    /// The master's end: what `readable` is called with.
    pub(super) fd: RawFd,
    next_packet: u32,
}

impl Sub {
    /// Sends `payload` for session `sid` with a packet id of its own; that id.
    pub(super) fn send_for(&mut self, sid: SessionId, payload: Payload) -> u32 {
        self.next_packet += 1;
        let packet = self.next_packet;
        self.send(&Pdu::new(sid, 0, packet, payload));
        packet
    }

    pub(super) fn send(&mut self, p: &Pdu) {
        assert!(
            self.try_send(p),
            "the master's end of the connection is gone"
        );
    }

    /// Sends `p`; false when the master has closed the connection.
    fn try_send(&mut self, p: &Pdu) -> bool {
        let mut out = Vec::new();
        p.encode(&mut out);
        self.s.write_all(&out).is_ok()
    }

    /// The next PDU from the master; fails the test if none comes.
    pub(super) fn recv(&mut self) -> Pdu {
        self.try_recv()
            .unwrap_or_else(|| panic!("no PDU from the master within {PATIENCE:?}"))
    }

    /// The next PDU, or `None` at EOF (the master closed the connection) or after
    /// [`PATIENCE`].
    fn try_recv(&mut self) -> Option<Pdu> {
        let mut frame = vec![0u8; HEADER_LEN];
        self.s.read_exact(&mut frame).ok()?;
        let h = Header::decode(&frame).expect("a header from the master");
        frame.resize(h.frame_len(), 0);
        self.s.read_exact(&mut frame[HEADER_LEN..]).ok()?;
        Some(Pdu::decode(&frame).expect("a PDU from the master"))
    }

    /// Whether the master has sent nothing that is not read yet. Meaningful right after a
    /// call into the master: whatever it sends, it has sent by the time the call returns.
    pub(super) fn nothing_sent(&self) -> bool {
        self.s.set_nonblocking(true).unwrap();
        let mut b = [0u8; 1];
        let r = (&self.s).read(&mut b);
        self.s.set_nonblocking(false).unwrap();
        matches!(r, Err(e) if e.kind() == ErrorKind::WouldBlock)
    }

    /// Whether the master closed the connection (after whatever it sent first).
    pub(super) fn closed_by_master(&mut self) -> bool {
        let mut rest = Vec::new();
        self.s.read_to_end(&mut rest).is_ok()
    }
}

/// What a served subagent does with a request.
pub(super) enum Reply {
    /// Answers with a Response carrying these.
    Answer(ResError, Vec<VarBind>),
    /// Moves the master's clock forward by this much, past the request's deadline, then
    /// wakes the master with a Response to an earlier packet: the request has timed out,
    /// and no one waited for it.
    Hang(Duration),
    /// Closes the connection without answering.
    Die,
    /// Writes these bytes (part of a Response, say), then closes the connection.
    DieAfter(Vec<u8>),
    /// Sends these PDUs first, then answers as the inner reply says.
    SendFirst(Vec<Pdu>, Box<Reply>),
}

/// A subagent answering on a thread of its own while the master waits for it.
pub(super) struct Serving {
    handle: JoinHandle<Vec<Pdu>>,
}

impl Serving {
    /// The requests it received, in order, once it has ended: at a Close, at the end of the
    /// connection, or after it died. Call it after the master has closed or will close the
    /// connection (the rig's shutdown at the latest).
    pub(super) fn received(self) -> Vec<Pdu> {
        self.handle.join().expect("the served subagent panicked")
    }
}

/// The PDU types of `pdus`, for comparing sequences.
pub(super) fn types(pdus: &[Pdu]) -> Vec<PduType> {
    pdus.iter().map(Pdu::pdu_type).collect()
}

/// Serves `sub` on a thread: every PDU the master sends gets `script`'s reply.
pub(super) fn serve(
    sub: Sub,
    clock: &Clock,
    mut script: impl FnMut(&Pdu) -> Reply + Send + 'static,
) -> Serving {
    let clock = clock.clone();
    let mut sub = sub;
    let handle = std::thread::spawn(move || {
        let mut seen = Vec::new();
        while let Some(p) = sub.try_recv() {
            if p.pdu_type() == PduType::CLOSE {
                seen.push(p);
                break;
            }
            // The answers to what it sent itself (Reply::SendFirst) are seen, not answered.
            if p.pdu_type() == PduType::RESPONSE {
                seen.push(p);
                continue;
            }
            let reply = script(&p);
            let ids = p.ids;
            seen.push(p);
            if !act(&mut sub, &clock, ids, reply) {
                break;
            }
        }
        seen
    });
    Serving { handle }
}

/// Carries out one reply; false when the subagent is gone. A write that fails (the master
/// closed the connection meanwhile) is no failure: what the master sent before closing is
/// still to be read, and the serving loop reads it.
fn act(sub: &mut Sub, clock: &Clock, ids: HeaderIds, reply: Reply) -> bool {
    let response = |ids, error, varbinds| {
        Pdu::with_ids(
            ids,
            Payload::Response {
                sys_uptime: 0,
                error,
                index: 0,
                varbinds,
            },
        )
    };
    match reply {
        Reply::Answer(error, varbinds) => {
            sub.try_send(&response(ids, error, varbinds));
            true
        }
        Reply::Hang(by) => {
            clock.advance(by);
            let mut earlier = ids;
            earlier.packet_id = earlier.packet_id.wrapping_sub(1);
            sub.try_send(&response(earlier, ResError::NO_ERROR, Vec::new()));
            true
        }
        Reply::Die => false,
        Reply::DieAfter(bytes) => {
            let _ = sub.s.write_all(&bytes);
            false
        }
        Reply::SendFirst(pdus, then) => {
            for p in &pdus {
                sub.try_send(p);
            }
            act(sub, clock, ids, *then)
        }
    }
}
