//! The AgentX master: listeners, connections, sessions, and the forwarding of bsnmpd's
//! per-varbind ops to subagents.
//!
//! Everything runs on bsnmpd's one thread. Sockets are non-blocking and watched with
//! `fd_select`; a forwarded request is the one place that waits, on one socket, for at most
//! the request timeout (see [`Master::request`]), because bsnmpd's ops must answer before they
//! return. PDUs a subagent sends while a request waits (a Register, a Notify) are queued and
//! handled in `idle`, outside any op.
use crate::registry::{Interval, RegisterError, Registry, SessionId};
use crate::settings::{Claim, Settings};
use agentx_proto::oid::Oid;
use agentx_proto::pdu::{
    CloseReason, Header, HeaderIds, Payload, Pdu, PduType, ResError, SearchRange, Value, VarBind,
    HEADER_LEN,
};
use std::collections::{HashMap, VecDeque};
use std::io::{self, Read};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::io::{AsRawFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// At most this many subagent connections at once; more are accepted and closed at once.
pub const MAX_CONNECTIONS: usize = 64;
/// A connection that has not opened a session within this long is closed.
pub const OPEN_GRACE: Duration = Duration::from_secs(10);
/// At most this many prefetched GetBulk answers are kept (one per repeater of a GETBULK).
const PREFETCH_SLOTS: usize = 8;
/// At most this many sessions per connection; a further Open is answered openFailed.
pub const MAX_SESSIONS_PER_CONNECTION: usize = 16;
/// At most this many PDUs a subagent sent during one request are kept for `idle`; more closes
/// the connection (nothing legitimate sends that many while the master waits).
const MAX_QUEUED: usize = 256;
/// A Notify is sent as a trap with at most this many varbinds besides snmpTrapOID.
pub const MAX_TRAP_VARBINDS: usize = 32;

const SYS_UPTIME_0: &[u32] = &[1, 3, 6, 1, 2, 1, 1, 3, 0];
const SNMP_TRAP_OID_0: &[u32] = &[1, 3, 6, 1, 6, 3, 1, 1, 4, 1, 0];

/// bsnmpd's services, as the master needs them. lib.rs implements it with the daemon's
/// functions; the trait keeps this file free of FFI.
pub trait Host {
    /// `fd_select`: watch `fd` for readability; `None` when bsnmpd refuses.
    fn watch(&mut self, fd: RawFd) -> Option<usize>;
    /// `fd_deselect`.
    fn unwatch(&mut self, id: usize);
    /// sysUpTime in 1/100 s, for Responses.
    fn uptime(&self) -> u32;
    /// `or_register`: a sysORTable row; 0 on failure.
    fn or_register(&mut self, id: &Oid, descr: &[u8]) -> u32;
    /// `or_unregister`.
    fn or_unregister(&mut self, index: u32);
    /// `snmp_send_trap` to bsnmpd's trap sinks.
    fn send_trap(&mut self, trap: &Oid, varbinds: &[VarBind]);
    /// syslog(3), at a `libc::LOG_*` priority.
    fn log(&self, priority: i32, msg: &str);
}

/// SNMP error-status codes the ops return (`lib/snmp.h`).
pub mod snmp_err {
    pub const NOSUCHNAME: i32 = 2;
    pub const GENERR: i32 = 5;
    pub const COMMIT_FAILED: i32 = 14;
    pub const UNDO_FAILED: i32 = 15;
    pub const NOT_WRITEABLE: i32 = 17;
}

enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Stream {
    fn fd(&self) -> RawFd {
        match self {
            Stream::Unix(s) => s.as_raw_fd(),
            Stream::Tcp(s) => s.as_raw_fd(),
        }
    }
    fn set_nonblocking(&self, nb: bool) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_nonblocking(nb),
            Stream::Tcp(s) => s.set_nonblocking(nb),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(b),
            Stream::Tcp(s) => s.read(b),
        }
    }
}

impl Stream {
    /// Writes without SIGPIPE (see sys.rs): bsnmpd does not ignore the signal.
    fn send_all(&self, b: &[u8]) -> io::Result<()> {
        crate::sys::send_all(self.fd(), b)
    }
}

enum ListenerKind {
    Unix(UnixListener, PathBuf),
    Tcp(TcpListener),
}

struct Listener {
    kind: ListenerKind,
    watch: Option<usize>,
}

impl Listener {
    fn fd(&self) -> RawFd {
        match &self.kind {
            ListenerKind::Unix(l, _) => l.as_raw_fd(),
            ListenerKind::Tcp(l) => l.as_raw_fd(),
        }
    }
}

struct Conn {
    stream: Stream,
    watch: Option<usize>,
    buf: Vec<u8>,
    /// PDUs read while a request waited, handled in `idle`.
    queue: VecDeque<Pdu>,
    since: Instant,
    opened: bool,
    peer: &'static str,
}

struct Session {
    conn: RawFd,
    /// The session's own timeout (Open's o.timeout), capped by agentxTimeout.
    timeout: Duration,
    descr: String,
    timeouts_in_row: u32,
    /// Timed out during this pass of bsnmpd's loop: later ops fail at once (the stall bound).
    stalled: bool,
    caps: Vec<(Oid, u32)>,
}

/// A GetBulk answer kept to serve the GETNEXTs that follow within one SNMP PDU.
struct Prefetch {
    session: SessionId,
    start: Oid,
    include: bool,
    end: Option<Oid>,
    entries: Vec<VarBind>,
    /// The subagent said endOfMibView after the entries: nothing else is in the range.
    exhausted: bool,
}

enum Cached {
    Found(VarBind),
    Exhausted,
    Miss,
}

/// A SET forwarded as TestSet+CommitSet, waiting for bsnmpd's COMMIT or ROLLBACK.
struct Txn {
    session: SessionId,
    transaction: u32,
}

/// Why a forwarded request got no Response.
#[derive(Debug, PartialEq, Eq)]
pub enum RequestError {
    NoSession,
    Stalled,
    Timeout,
    Closed,
}

/// Counters for `dump` and the tests.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    pub requests: u64,
    pub timeouts: u64,
    pub prefetch_hits: u64,
    pub sessions_closed_for_timeouts: u64,
}

pub struct Master {
    pub settings: Settings,
    claims: Vec<Claim>,
    registry: Registry,
    host: Box<dyn Host>,
    listeners: Vec<Listener>,
    conns: HashMap<RawFd, Conn>,
    sessions: HashMap<SessionId, Session>,
    next_session: u32,
    next_transaction: u32,
    next_packet: u32,
    prefetch: VecDeque<Prefetch>,
    txns: HashMap<u32, Txn>,
    next_txn: u32,
    pub stats: Stats,
    /// GETNEXT ops in this pass of bsnmpd's loop, and in the last pass that had any: the
    /// first GetBulk of a pass asks for as many as the last PDU needed (a walk's PDUs are
    /// alike), so a plain snmpwalk costs GetNexts and not GetBulks of which one varbind is used.
    getnexts_this_pass: u32,
    getnexts_last_pass: u32,
    /// The listener settings in use, to tell whether a re-read of the config changed them.
    listening_as: Option<(String, u32, String, u16)>,
}

fn response(ids: HeaderIds, uptime: u32, error: ResError) -> Pdu {
    Pdu::with_ids(
        ids,
        Payload::Response {
            sys_uptime: uptime,
            error,
            index: 0,
            varbinds: Vec::new(),
        },
    )
}

/// A group name or number, from /etc/group.
fn group_id(name: &str) -> Option<u32> {
    if let Ok(n) = name.parse() {
        return Some(n);
    }
    let text = std::fs::read_to_string("/etc/group").ok()?;
    text.lines().find_map(|l| {
        let mut f = l.split(':');
        (f.next()? == name).then_some(())?;
        f.nth(1)?.parse().ok()
    })
}

/// The SNMP error-status for a subagent's res.error (RFC 2741 §7.2.4: the SNMP codes pass
/// through; AgentX-only codes become genErr).
fn snmp_status(e: ResError) -> i32 {
    if (1..=18).contains(&e.0) {
        i32::from(e.0)
    } else {
        snmp_err::GENERR
    }
}

impl Master {
    pub fn new(claims: Vec<Claim>, host: Box<dyn Host>) -> Master {
        let registry = Registry::new(claims.iter().map(|c| c.oid.clone()).collect());
        Master {
            settings: Settings::default(),
            claims,
            registry,
            host,
            listeners: Vec::new(),
            conns: HashMap::new(),
            sessions: HashMap::new(),
            next_session: 0,
            next_transaction: 0,
            next_packet: 0,
            prefetch: VecDeque::new(),
            txns: HashMap::new(),
            next_txn: 0,
            stats: Stats::default(),
            getnexts_this_pass: 0,
            getnexts_last_pass: 0,
            listening_as: None,
        }
    }

    pub fn claims(&self) -> &[Claim] {
        &self.claims
    }

    fn log(&self, pri: i32, msg: &str) {
        self.host.log(pri, &format!("agentx: {msg}"));
    }

    // -----------------------------------------------------------------------------------
    // Listeners and connections
    // -----------------------------------------------------------------------------------

    fn listen_key(&self) -> (String, u32, String, u16) {
        let s = &self.settings;
        (
            s.socket.clone(),
            s.socket_mode,
            s.socket_group.clone(),
            s.tcp_port,
        )
    }

    /// Opens the listeners the settings ask for (at `start`, and again when a re-read of the
    /// config changed them). Failures are logged; the module keeps running without them.
    pub fn listen(&mut self) {
        let key = self.listen_key();
        if self.listening_as.as_ref() == Some(&key) {
            return;
        }
        self.close_listeners();
        self.listening_as = Some(key);
        if !self.settings.socket.is_empty() {
            match self.unix_listener() {
                Ok(l) => self.add_listener(l),
                Err(e) => self.log(
                    libc::LOG_ERR,
                    &format!("cannot listen on {}: {e}", self.settings.socket),
                ),
            }
        }
        if self.settings.tcp_port != 0 {
            match TcpListener::bind(("127.0.0.1", self.settings.tcp_port)).and_then(|l| {
                l.set_nonblocking(true)?;
                Ok(l)
            }) {
                Ok(l) => self.add_listener(ListenerKind::Tcp(l)),
                Err(e) => self.log(
                    libc::LOG_ERR,
                    &format!("cannot listen on 127.0.0.1:{}: {e}", self.settings.tcp_port),
                ),
            }
        }
    }

    fn unix_listener(&self) -> io::Result<ListenerKind> {
        use std::os::unix::fs::FileTypeExt;
        let path = PathBuf::from(&self.settings.socket);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        // A socket left by an earlier run is replaced; anything else is not ours to remove.
        if let Ok(m) = std::fs::symlink_metadata(&path) {
            if m.file_type().is_socket() {
                std::fs::remove_file(&path)?;
            } else {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    "exists and is not a socket",
                ));
            }
        }
        let l = UnixListener::bind(&path)?;
        l.set_nonblocking(true)?;
        std::fs::set_permissions(
            &path,
            std::fs::Permissions::from_mode(self.settings.socket_mode),
        )?;
        if !self.settings.socket_group.is_empty() {
            let gid = group_id(&self.settings.socket_group).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("no group {:?}", self.settings.socket_group),
                )
            })?;
            std::os::unix::fs::chown(&path, None, Some(gid))?;
        }
        Ok(ListenerKind::Unix(l, path))
    }

    fn add_listener(&mut self, kind: ListenerKind) {
        let mut l = Listener { kind, watch: None };
        l.watch = self.host.watch(l.fd());
        if l.watch.is_none() {
            self.log(libc::LOG_ERR, "fd_select refused a listening socket");
        }
        self.listeners.push(l);
    }

    fn close_listeners(&mut self) {
        for l in std::mem::take(&mut self.listeners) {
            if let Some(w) = l.watch {
                self.host.unwatch(w);
            }
            if let ListenerKind::Unix(_, p) = &l.kind {
                let _ = std::fs::remove_file(p);
            }
        }
        self.listening_as = None;
    }

    /// fd_select's callback: a listener or a connection is readable.
    pub fn readable(&mut self, fd: RawFd) {
        if let Some(i) = self.listeners.iter().position(|l| l.fd() == fd) {
            self.accept(i);
        } else if self.conns.contains_key(&fd) {
            self.read_conn(fd);
            self.process(fd);
        }
    }

    fn accept(&mut self, i: usize) {
        loop {
            let accepted = match &self.listeners[i].kind {
                ListenerKind::Unix(l, _) => l.accept().map(|(s, _)| (Stream::Unix(s), "unix")),
                ListenerKind::Tcp(l) => l.accept().map(|(s, _)| (Stream::Tcp(s), "tcp")),
            };
            let (stream, peer) = match accepted {
                Ok(x) => x,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    self.log(libc::LOG_WARNING, &format!("accept: {e}"));
                    return;
                }
            };
            if self.conns.len() >= MAX_CONNECTIONS {
                self.log(
                    libc::LOG_WARNING,
                    &format!("{MAX_CONNECTIONS} subagent connections already: refusing one"),
                );
                continue;
            }
            if stream.set_nonblocking(true).is_err() {
                continue;
            }
            let fd = stream.fd();
            let watch = self.host.watch(fd);
            self.conns.insert(
                fd,
                Conn {
                    stream,
                    watch,
                    buf: Vec::new(),
                    queue: VecDeque::new(),
                    since: Instant::now(),
                    opened: false,
                    peer,
                },
            );
        }
    }

    /// Reads what is there (non-blocking); closes the connection on EOF or error.
    fn read_conn(&mut self, fd: RawFd) {
        let Some(c) = self.conns.get_mut(&fd) else {
            return;
        };
        let mut chunk = [0u8; 16384];
        loop {
            match c.stream.read(&mut chunk) {
                Ok(0) => {
                    self.close_conn(fd, None, "the subagent closed the connection");
                    return;
                }
                Ok(n) => {
                    c.buf.extend_from_slice(&chunk[..n]);
                    // Bounded: a frame is at most HEADER_LEN + MAX_PAYLOAD; process() drains.
                    if c.buf.len() > 4 * (HEADER_LEN + 65536) {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.close_conn(fd, None, &format!("read: {e}"));
                    return;
                }
            }
        }
    }

    /// Takes one complete frame off a connection's buffer: `Ok(None)` when none is complete,
    /// `Err` when the stream cannot be framed any more.
    fn next_frame(&mut self, fd: RawFd) -> Result<Option<Result<Pdu, Header>>, String> {
        let Some(c) = self.conns.get_mut(&fd) else {
            return Ok(None);
        };
        if c.buf.len() < HEADER_LEN {
            return Ok(None);
        }
        let h = Header::decode(&c.buf[..HEADER_LEN]).map_err(|e| e.to_string())?;
        let n = h.frame_len();
        if c.buf.len() < n {
            return Ok(None);
        }
        let frame: Vec<u8> = c.buf.drain(..n).collect();
        match Pdu::decode(&frame) {
            Ok(p) => Ok(Some(Ok(p))),
            Err(e) if e.fatal() => Err(e.to_string()),
            Err(_) => Ok(Some(Err(h))),
        }
    }

    /// Handles the queued PDUs and the complete frames of one connection.
    fn process(&mut self, fd: RawFd) {
        while let Some(p) = self.conns.get_mut(&fd).and_then(|c| c.queue.pop_front()) {
            self.handle(fd, p);
        }
        loop {
            match self.next_frame(fd) {
                Ok(Some(Ok(p))) => self.handle(fd, p),
                Ok(Some(Err(h))) => {
                    let r = response(h.ids, self.host.uptime(), ResError::PARSE_ERROR);
                    self.send(fd, &r);
                }
                Ok(None) => return,
                Err(e) => {
                    self.close_conn(fd, Some(CloseReason::PARSE_ERROR), &e);
                    return;
                }
            }
        }
    }

    fn send(&mut self, fd: RawFd, pdu: &Pdu) -> bool {
        let mut out = Vec::with_capacity(64);
        pdu.encode(&mut out);
        let Some(c) = self.conns.get_mut(&fd) else {
            return false;
        };
        // Small writes to a socket we read from: a full send buffer means a subagent that
        // stopped reading, and waiting for it would stall bsnmpd.
        match c.stream.send_all(&out) {
            Ok(()) => true,
            Err(e) => {
                self.close_conn(fd, None, &format!("write: {e}"));
                false
            }
        }
    }

    fn close_conn(&mut self, fd: RawFd, reason: Option<CloseReason>, why: &str) {
        let sessions: Vec<SessionId> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.conn == fd)
            .map(|(id, _)| *id)
            .collect();
        if let Some(reason) = reason {
            if let Some(&sid) = sessions.first() {
                let close = Pdu::new(sid, 0, 0, Payload::Close { reason });
                let mut out = Vec::new();
                close.encode(&mut out);
                if let Some(c) = self.conns.get_mut(&fd) {
                    let _ = c.stream.send_all(&out);
                }
            }
        }
        for sid in sessions {
            self.drop_session(sid);
        }
        if let Some(c) = self.conns.remove(&fd) {
            if let Some(w) = c.watch {
                self.host.unwatch(w);
            }
            self.log(
                libc::LOG_INFO,
                &format!("connection ({}) closed: {why}", c.peer),
            );
        }
    }

    fn drop_session(&mut self, sid: SessionId) {
        if let Some(s) = self.sessions.remove(&sid) {
            for (_, idx) in s.caps {
                self.host.or_unregister(idx);
            }
            self.registry.drop_session(sid);
            self.prefetch.clear();
            self.txns.retain(|_, t| t.session != sid);
        }
    }

    /// Closes one session with a Close PDU; the connection stays if it has other sessions.
    fn close_session(&mut self, sid: SessionId, reason: CloseReason) {
        let Some(fd) = self.sessions.get(&sid).map(|s| s.conn) else {
            return;
        };
        let close = Pdu::new(sid, 0, 0, Payload::Close { reason });
        self.send(fd, &close);
        self.drop_session(sid);
        if !self.sessions.values().any(|s| s.conn == fd) {
            self.close_conn(fd, None, &format!("session {sid} closed ({reason})"));
        }
    }

    // -----------------------------------------------------------------------------------
    // Administrative PDUs from subagents
    // -----------------------------------------------------------------------------------

    fn handle(&mut self, fd: RawFd, p: Pdu) {
        let uptime = self.host.uptime();
        let ids = p.ids;
        let kind = p.pdu_type();
        if kind == PduType::RESPONSE {
            // A Response nobody waits for: a late answer to a request that timed out.
            return;
        }
        if kind == PduType::OPEN {
            let Payload::Open { timeout, id, descr } = p.payload else {
                return;
            };
            if self.sessions.values().filter(|s| s.conn == fd).count()
                >= MAX_SESSIONS_PER_CONNECTION
            {
                self.send(fd, &response(ids, uptime, ResError::OPEN_FAILED));
                return;
            }
            self.next_session = self.next_session.wrapping_add(1).max(1);
            let sid = self.next_session;
            let cap = Duration::from_millis(u64::from(self.settings.timeout_ticks) * 10);
            let asked = Duration::from_secs(u64::from(timeout));
            let descr = String::from_utf8_lossy(&descr).into_owned();
            self.log(
                libc::LOG_INFO,
                &format!("session {sid} opened by {id} ({descr})"),
            );
            self.sessions.insert(
                sid,
                Session {
                    conn: fd,
                    timeout: if timeout == 0 { cap } else { asked.min(cap) },
                    descr,
                    timeouts_in_row: 0,
                    stalled: false,
                    caps: Vec::new(),
                },
            );
            if let Some(c) = self.conns.get_mut(&fd) {
                c.opened = true;
            }
            let ids = HeaderIds::new(sid, ids.transaction_id, ids.packet_id);
            self.send(fd, &response(ids, uptime, ResError::NO_ERROR));
            return;
        }
        let sid = ids.session_id;
        if self.sessions.get(&sid).map(|s| s.conn) != Some(fd) {
            self.send(fd, &response(ids, uptime, ResError::NOT_OPEN));
            return;
        }
        if p.context.is_some() {
            self.send(fd, &response(ids, uptime, ResError::UNSUPPORTED_CONTEXT));
            return;
        }
        let error = match p.payload {
            Payload::Close { reason } => {
                self.log(
                    libc::LOG_INFO,
                    &format!("session {sid} closed by the subagent ({reason})"),
                );
                self.drop_session(sid);
                ResError::NO_ERROR
            }
            Payload::Register {
                priority,
                range_subid,
                subtree,
                upper_bound,
                ..
            } => match self
                .registry
                .register(sid, &subtree, priority, range_subid, upper_bound)
            {
                Ok(()) => {
                    self.prefetch.clear();
                    ResError::NO_ERROR
                }
                Err(RegisterError::OutsideClaims(o)) => {
                    let claims: Vec<String> =
                        self.claims.iter().map(|c| c.oid.to_string()).collect();
                    self.log(
                        libc::LOG_WARNING,
                        &format!(
                            "session {sid} ({}): Register of {o} refused (requestDenied): outside the claims {}; add claim={o} to the module arguments to serve it",
                            self.sessions[&sid].descr,
                            claims.join(", ")
                        ),
                    );
                    ResError::REQUEST_DENIED
                }
                Err(RegisterError::Duplicate(_)) => ResError::DUPLICATE_REGISTRATION,
                Err(RegisterError::BadRange) => ResError::PARSE_ERROR,
                Err(RegisterError::TooMany) => ResError::PROCESSING_ERROR,
            },
            Payload::Unregister {
                priority,
                range_subid,
                subtree,
                upper_bound,
            } => {
                if self
                    .registry
                    .unregister(sid, &subtree, priority, range_subid, upper_bound)
                {
                    self.prefetch.clear();
                    ResError::NO_ERROR
                } else {
                    ResError::UNKNOWN_REGISTRATION
                }
            }
            Payload::Ping => ResError::NO_ERROR,
            Payload::AddAgentCaps { id, descr } => {
                let idx = self.host.or_register(&id, &descr);
                if idx == 0 {
                    ResError::PROCESSING_ERROR
                } else {
                    if let Some(s) = self.sessions.get_mut(&sid) {
                        s.caps.push((id, idx));
                    }
                    ResError::NO_ERROR
                }
            }
            Payload::RemoveAgentCaps { id } => {
                let found = self.sessions.get_mut(&sid).and_then(|s| {
                    let i = s.caps.iter().position(|(o, _)| *o == id)?;
                    Some(s.caps.remove(i).1)
                });
                match found {
                    Some(idx) => {
                        self.host.or_unregister(idx);
                        ResError::NO_ERROR
                    }
                    None => ResError::UNKNOWN_AGENT_CAPS,
                }
            }
            Payload::Notify { varbinds } => self.notify(varbinds),
            // IndexAllocate/IndexDeallocate are not supported; requests are the master's to send.
            _ => ResError::PROCESSING_ERROR,
        };
        self.send(fd, &response(ids, uptime, error));
    }

    /// RFC 2741 §6.2.10: [sysUpTime.0,] snmpTrapOID.0, then the trap's varbinds.
    fn notify(&mut self, mut vbs: Vec<VarBind>) -> ResError {
        if vbs.first().is_some_and(|v| v.name.0 == SYS_UPTIME_0) {
            vbs.remove(0);
        }
        let trap = match vbs.first() {
            Some(VarBind {
                name,
                value: Value::ObjectIdentifier(t),
            }) if name.0 == SNMP_TRAP_OID_0 => t.clone(),
            _ => return ResError::PROCESSING_ERROR,
        };
        let rest = &vbs[1..];
        if rest.len() > MAX_TRAP_VARBINDS || rest.iter().any(|v| v.value.is_exception()) {
            return ResError::PROCESSING_ERROR;
        }
        self.host.send_trap(&trap, rest);
        ResError::NO_ERROR
    }

    // -----------------------------------------------------------------------------------
    // Requests to subagents
    // -----------------------------------------------------------------------------------

    /// Sends a request and waits for its Response, for at most the session's timeout.
    ///
    /// This is the only wait in the module. A session that times out is marked stalled for
    /// the rest of this pass of bsnmpd's loop, so one SNMP request waits for it once at most;
    /// after agentxMaxTimeouts timeouts in a row its session is closed (reason timeouts).
    pub fn request(
        &mut self,
        sid: SessionId,
        transaction: u32,
        payload: Payload,
    ) -> Result<(ResError, Vec<VarBind>), RequestError> {
        let (fd, timeout) = match self.sessions.get(&sid) {
            None => return Err(RequestError::NoSession),
            Some(s) if s.stalled => return Err(RequestError::Stalled),
            Some(s) => (s.conn, s.timeout),
        };
        self.stats.requests += 1;
        self.next_packet = self.next_packet.wrapping_add(1);
        let packet = self.next_packet;
        let mut out = Vec::with_capacity(128);
        Pdu::new(sid, transaction, packet, payload).encode(&mut out);
        let deadline = Instant::now() + timeout;
        let result = self.exchange(fd, sid, packet, &out, deadline);
        match result {
            Ok(r) => {
                if let Some(s) = self.sessions.get_mut(&sid) {
                    s.timeouts_in_row = 0;
                }
                Ok(r)
            }
            Err(RequestError::Timeout) => {
                self.stats.timeouts += 1;
                let max = self.settings.max_timeouts;
                let Some(s) = self.sessions.get_mut(&sid) else {
                    return Err(RequestError::Timeout);
                };
                s.stalled = true;
                s.timeouts_in_row += 1;
                let n = s.timeouts_in_row;
                let descr = s.descr.clone();
                self.log(
                    libc::LOG_WARNING,
                    &format!(
                        "session {sid} ({descr}): no Response within {} ms ({n} in a row)",
                        timeout.as_millis()
                    ),
                );
                if n >= max {
                    self.stats.sessions_closed_for_timeouts += 1;
                    self.log(
                        libc::LOG_WARNING,
                        &format!("session {sid} ({descr}): closed after {n} timeouts in a row"),
                    );
                    self.close_session(sid, CloseReason::TIMEOUTS);
                }
                Err(RequestError::Timeout)
            }
            Err(e) => Err(e),
        }
    }

    fn exchange(
        &mut self,
        fd: RawFd,
        sid: SessionId,
        packet: u32,
        out: &[u8],
        deadline: Instant,
    ) -> Result<(ResError, Vec<VarBind>), RequestError> {
        {
            let c = self.conns.get_mut(&fd).ok_or(RequestError::Closed)?;
            // The socket stays non-blocking: poll(2) waits, so one request costs a send, a
            // poll and a read rather than also switching the socket's mode and timeouts.
            let written = crate::sys::send_all_by(c.stream.fd(), out, deadline);
            if let Err(e) = written {
                // Part of the frame may be out: the stream can no longer be framed.
                self.close_conn(fd, None, &format!("write: {e}"));
                return if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) {
                    Err(RequestError::Timeout)
                } else {
                    Err(RequestError::Closed)
                };
            }
        }
        loop {
            // Frames already read first: the answer may be in the buffer.
            loop {
                match self.next_frame(fd) {
                    Ok(Some(Ok(p))) => {
                        if p.pdu_type() == PduType::RESPONSE
                            && p.ids.packet_id == packet
                            && p.ids.session_id == sid
                        {
                            if let Payload::Response {
                                error, varbinds, ..
                            } = p.payload
                            {
                                return Ok((error, varbinds));
                            }
                        } else if p.pdu_type() != PduType::RESPONSE {
                            let full = self.conns.get_mut(&fd).is_some_and(|c| {
                                c.queue.push_back(p);
                                c.queue.len() > MAX_QUEUED
                            });
                            if full {
                                self.close_conn(
                                    fd,
                                    Some(CloseReason::PROTOCOL_ERROR),
                                    "more than 256 PDUs sent during one request",
                                );
                                return Err(RequestError::Closed);
                            }
                        }
                    }
                    Ok(Some(Err(_))) => {}
                    Ok(None) => break,
                    Err(e) => {
                        self.close_conn(fd, Some(CloseReason::PARSE_ERROR), &e);
                        return Err(RequestError::Closed);
                    }
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(RequestError::Timeout);
            }
            let c = self.conns.get_mut(&fd).ok_or(RequestError::Closed)?;
            let mut chunk = [0u8; 16384];
            let got = match crate::sys::wait_ready(c.stream.fd(), libc::POLLIN, left) {
                Ok(true) => c.stream.read(&mut chunk),
                Ok(false) => Err(io::ErrorKind::TimedOut.into()),
                Err(e) => Err(e),
            };
            match got {
                Ok(0) => {
                    self.close_conn(fd, None, "the subagent closed the connection");
                    return Err(RequestError::Closed);
                }
                Ok(n) => c.buf.extend_from_slice(&chunk[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => {
                    self.close_conn(fd, None, &format!("read: {e}"));
                    return Err(RequestError::Closed);
                }
            }
        }
    }

    fn transaction(&mut self) -> u32 {
        self.next_transaction = self.next_transaction.wrapping_add(1);
        self.next_transaction
    }

    // -----------------------------------------------------------------------------------
    // bsnmpd's ops
    // -----------------------------------------------------------------------------------

    /// SNMP_OP_GET of `oid`. `Err` carries the SNMP error-status (NOSUCHNAME becomes
    /// noSuchInstance in bsnmpd).
    pub fn get(&mut self, oid: &Oid) -> Result<Value, i32> {
        let sid = self.registry.owner_of(&oid.0).ok_or(snmp_err::NOSUCHNAME)?;
        let t = self.transaction();
        let range = SearchRange {
            start: oid.clone(),
            include: false,
            end: Oid::null(),
        };
        let (error, mut vbs) = self
            .request(
                sid,
                t,
                Payload::Get {
                    ranges: vec![range],
                },
            )
            .map_err(|_| snmp_err::GENERR)?;
        if error != ResError::NO_ERROR || vbs.len() != 1 || vbs[0].name != *oid {
            return Err(snmp_err::GENERR);
        }
        let v = vbs.remove(0).value;
        if v.is_exception() {
            return Err(snmp_err::NOSUCHNAME);
        }
        Ok(v)
    }

    fn cached(&mut self, sid: SessionId, start: &Oid, include: bool, end: &Option<Oid>) -> Cached {
        for p in &self.prefetch {
            if p.session != sid || p.end != *end {
                continue;
            }
            let covers = *start > p.start || (*start == p.start && (p.include || !include));
            if !covers {
                continue;
            }
            if let Some(vb) = p
                .entries
                .iter()
                .find(|v| v.name > *start || (include && v.name == *start))
            {
                return Cached::Found(vb.clone());
            }
            if p.exhausted {
                return Cached::Exhausted;
            }
        }
        Cached::Miss
    }

    /// SNMP_OP_GETNEXT in claim `claim`: the first object after `oid` (which lies in the
    /// claim, or is the claim itself).
    pub fn get_next(&mut self, claim: usize, oid: &Oid) -> Result<VarBind, i32> {
        self.getnexts_this_pass += 1;
        let intervals: Vec<Interval> = self.registry.intervals(claim).to_vec();
        for iv in intervals {
            if iv.end.as_ref().is_some_and(|e| oid >= e) {
                continue;
            }
            let Some(sid) = iv.owner else {
                continue;
            };
            let (start, include) = if *oid >= iv.start {
                (oid.clone(), false)
            } else {
                (iv.start.clone(), true)
            };
            match self.cached(sid, &start, include, &iv.end) {
                Cached::Found(vb) => {
                    self.stats.prefetch_hits += 1;
                    return Ok(vb);
                }
                Cached::Exhausted => continue,
                Cached::Miss => {}
            }
            let range = SearchRange {
                start: start.clone(),
                include,
                end: iv.end.clone().unwrap_or_else(Oid::null),
            };
            let n = if self.getnexts_this_pass == 1 && self.getnexts_last_pass > 0 {
                self.settings
                    .prefetch
                    .min(u16::try_from(self.getnexts_last_pass).unwrap_or(u16::MAX))
            } else {
                self.settings.prefetch
            };
            let payload = if n <= 1 {
                Payload::GetNext {
                    ranges: vec![range],
                }
            } else {
                Payload::GetBulk {
                    non_repeaters: 0,
                    max_repetitions: n,
                    ranges: vec![range],
                }
            };
            let t = self.transaction();
            let (error, vbs) = self
                .request(sid, t, payload)
                .map_err(|_| snmp_err::GENERR)?;
            if error != ResError::NO_ERROR {
                return Err(snmp_err::GENERR);
            }
            let mut entries = Vec::with_capacity(vbs.len());
            let mut exhausted = vbs.is_empty();
            for vb in vbs {
                if vb.value == Value::EndOfMibView {
                    exhausted = true;
                    break;
                }
                let after_prev = match entries.last() {
                    Some(VarBind { name, .. }) => vb.name > *name,
                    None => vb.name > start || (include && vb.name == start),
                };
                let before_end = iv.end.as_ref().map_or(true, |e| vb.name < *e);
                if !after_prev || !before_end || vb.value.is_exception() {
                    self.log(
                        libc::LOG_WARNING,
                        &format!(
                            "session {sid}: GetNext/GetBulk from {start} answered {} outside the range or out of order",
                            vb.name
                        ),
                    );
                    return Err(snmp_err::GENERR);
                }
                entries.push(vb);
            }
            let first = entries.first().cloned();
            if self.prefetch.len() == PREFETCH_SLOTS {
                self.prefetch.pop_back();
            }
            self.prefetch.push_front(Prefetch {
                session: sid,
                start,
                include,
                end: iv.end.clone(),
                entries,
                exhausted,
            });
            if let Some(vb) = first {
                return Ok(vb);
            }
        }
        Err(snmp_err::NOSUCHNAME)
    }

    /// SNMP_OP_SET: TestSet then CommitSet, as one AgentX transaction per varbind. Returns the
    /// handle bsnmpd's COMMIT or ROLLBACK of this varbind will bring back.
    pub fn set(&mut self, vb: VarBind) -> Result<u32, i32> {
        self.prefetch.clear();
        let sid = self
            .registry
            .owner_of(&vb.name.0)
            .ok_or(snmp_err::NOT_WRITEABLE)?;
        let t = self.transaction();
        let (error, _) = self
            .request(sid, t, Payload::TestSet { varbinds: vec![vb] })
            .map_err(|_| snmp_err::GENERR)?;
        if error != ResError::NO_ERROR {
            let _ = self.request(sid, t, Payload::CleanupSet);
            return Err(snmp_status(error));
        }
        match self.request(sid, t, Payload::CommitSet) {
            Ok((ResError::NO_ERROR, _)) => {}
            _ => {
                let _ = self.request(sid, t, Payload::UndoSet);
                let _ = self.request(sid, t, Payload::CleanupSet);
                return Err(snmp_err::COMMIT_FAILED);
            }
        }
        self.next_txn = self.next_txn.wrapping_add(1).max(1);
        self.txns.insert(
            self.next_txn,
            Txn {
                session: sid,
                transaction: t,
            },
        );
        Ok(self.next_txn)
    }

    /// SNMP_OP_COMMIT (bsnmpd's "free resources"): CleanupSet.
    pub fn commit(&mut self, txn: u32) -> i32 {
        if let Some(t) = self.txns.remove(&txn) {
            let _ = self.request(t.session, t.transaction, Payload::CleanupSet);
        }
        0
    }

    /// SNMP_OP_ROLLBACK: UndoSet, then CleanupSet.
    pub fn rollback(&mut self, txn: u32) -> i32 {
        let Some(t) = self.txns.remove(&txn) else {
            return 0;
        };
        let undo = self.request(t.session, t.transaction, Payload::UndoSet);
        let _ = self.request(t.session, t.transaction, Payload::CleanupSet);
        match undo {
            Ok((ResError::NO_ERROR, _)) => 0,
            _ => snmp_err::UNDO_FAILED,
        }
    }

    /// bsnmpd's `idle`, run once per pass of its loop, i.e. between SNMP PDUs: ends the
    /// prefetched answers' life and the stalls, and handles PDUs queued during requests.
    pub fn idle(&mut self) {
        self.prefetch.clear();
        if self.getnexts_this_pass > 0 {
            self.getnexts_last_pass = self.getnexts_this_pass;
            self.getnexts_this_pass = 0;
        }
        for s in self.sessions.values_mut() {
            s.stalled = false;
        }
        let fds: Vec<RawFd> = self
            .conns
            .iter()
            .filter(|(_, c)| !c.queue.is_empty() || c.buf.len() >= HEADER_LEN)
            .map(|(fd, _)| *fd)
            .collect();
        for fd in fds {
            self.process(fd);
        }
    }

    /// The housekeeping timer: closes connections that never opened a session.
    pub fn tick(&mut self) {
        let late: Vec<RawFd> = self
            .conns
            .iter()
            .filter(|(_, c)| !c.opened && c.since.elapsed() > OPEN_GRACE)
            .map(|(fd, _)| *fd)
            .collect();
        for fd in late {
            self.close_conn(fd, None, "no Open within 10 s");
        }
    }

    /// `fini`: Close(shutdown) to every session, sockets closed, sysORTable rows removed.
    pub fn shutdown(&mut self) {
        let sids: Vec<SessionId> = self.sessions.keys().copied().collect();
        for sid in sids {
            self.close_session(sid, CloseReason::SHUTDOWN);
        }
        let fds: Vec<RawFd> = self.conns.keys().copied().collect();
        for fd in fds {
            self.close_conn(fd, None, "module unloaded");
        }
        self.close_listeners();
    }

    /// `dump` (SIGUSR1): one line per session and registration.
    pub fn dump(&self) -> Vec<String> {
        let mut lines = vec![format!(
            "{} connections, {} sessions, {:?}",
            self.conns.len(),
            self.sessions.len(),
            self.stats
        )];
        for (sid, s) in &self.sessions {
            lines.push(format!(
                "session {sid}: {} timeout {} ms, {} timeouts in a row",
                s.descr,
                s.timeout.as_millis(),
                s.timeouts_in_row
            ));
        }
        for r in self.registry.registrations() {
            lines.push(format!(
                "registration {} priority {} session {}",
                r.subtree, r.priority, r.session
            ));
        }
        lines
    }
}
