//! The AgentX master: the state the module keeps between bsnmpd's calls, and the entry points
//! lib.rs calls into. No FFI here or below: bsnmpd's services come through [`Host`], so that
//! the tests can drive the master with a fake one.
//!
//! Everything runs on bsnmpd's one thread. Sockets are non-blocking and watched with
//! `fd_select`; a forwarded request is the one place that waits, on one socket, for at most
//! the request timeout (see `forward`), because bsnmpd's ops must answer before they return.
//! PDUs a subagent sends while a request waits (a Register, a Notify) are queued and handled
//! in `idle`, outside any op.
//!
//! The parts, each a concept of its own:
//! - `listener`: the listening sockets, and accepting subagents' connections;
//! - `connection`: one connection's bytes: reading, framing, writing, closing;
//! - `sessions`: session administration: the PDUs a subagent sends (Open, Close, Register,
//!   AgentCaps, Notify, ...), and the timeouts that stall and close a session;
//! - `forward`: bsnmpd's ops forwarded to subagents as requests, and their answers;
//! - `prefetch`: GetBulk answers kept to serve the GETNEXTs of one SNMP PDU.
mod connection;
mod forward;
mod listener;
mod prefetch;
mod sessions;

pub(crate) use sessions::MAX_TRAP_VARBINDS;

use crate::registry::{Registry, SessionId};
use crate::settings::{Claim, Settings};
use agentx_proto::oid::Oid;
use agentx_proto::pdu::{CloseReason, VarBind, HEADER_LEN};
use std::collections::HashMap;
use std::os::unix::io::RawFd;
use std::time::Instant;

/// bsnmpd's services, as the master needs them. lib.rs implements it with the daemon's
/// functions; the tests implement it with a recording fake.
pub(crate) trait Host {
    /// `fd_select`: watch `fd` for readability; `None` when bsnmpd refuses.
    fn watch(&mut self, fd: RawFd) -> Option<usize>;
    /// `fd_deselect`.
    fn unwatch(&mut self, id: usize);
    /// sysUpTime in 1/100 s, for Responses.
    fn uptime(&self) -> u32;
    /// The clock request deadlines and the Open grace are measured with: a monotonic one
    /// (bsnmpd's `get_ticks` follows the wall clock, which can jump).
    fn now(&self) -> Instant;
    /// `or_register`: a sysORTable row; 0 on failure.
    fn or_register(&mut self, id: &Oid, descr: &[u8]) -> u32;
    /// `or_unregister`.
    fn or_unregister(&mut self, index: u32);
    /// `snmp_send_trap` to bsnmpd's trap sinks.
    fn send_trap(&mut self, trap: &Oid, varbinds: &[VarBind]);
    /// syslog(3), at a `libc::LOG_*` priority.
    fn log(&self, priority: i32, msg: &str);
}

/// Counters for `dump` and the tests.
#[derive(Clone, Copy, Debug, Default)]
struct Stats {
    requests: u64,
    timeouts: u64,
    prefetch_hits: u64,
    sessions_closed_for_timeouts: u64,
}

pub(crate) struct Master {
    pub(crate) settings: Settings,
    claims: Vec<Claim>,
    registry: Registry,
    host: Box<dyn Host>,
    listeners: Vec<listener::Listener>,
    /// The listener settings in use, to tell whether a re-read of the config changed them.
    listening_as: Option<listener::ListenKey>,
    conns: HashMap<RawFd, connection::Conn>,
    sessions: HashMap<SessionId, sessions::Session>,
    next_session: u32,
    next_transaction: u32,
    next_packet: u32,
    prefetch: prefetch::Prefetched,
    txns: HashMap<u32, forward::Txn>,
    next_txn: u32,
    stats: Stats,
    /// GETNEXT ops in this pass of bsnmpd's loop, and in the last pass that had any: the
    /// first GetBulk of a pass asks for as many as the last PDU needed (a walk's PDUs are
    /// alike), so a plain snmpwalk costs GetNexts and not GetBulks of which one varbind is used.
    getnexts_this_pass: u32,
    getnexts_last_pass: u32,
}

impl Master {
    pub(crate) fn new(claims: Vec<Claim>, host: Box<dyn Host>) -> Master {
        let registry = Registry::new(claims.iter().map(|c| c.oid.clone()).collect());
        Master {
            settings: Settings::default(),
            claims,
            registry,
            host,
            listeners: Vec::new(),
            listening_as: None,
            conns: HashMap::new(),
            sessions: HashMap::new(),
            next_session: 0,
            next_transaction: 0,
            next_packet: 0,
            prefetch: prefetch::Prefetched::default(),
            txns: HashMap::new(),
            next_txn: 0,
            stats: Stats::default(),
            getnexts_this_pass: 0,
            getnexts_last_pass: 0,
        }
    }

    fn log(&self, pri: i32, msg: &str) {
        self.host.log(pri, &format!("agentx: {msg}"));
    }

    /// fd_select's callback: a listener or a connection is readable.
    pub(crate) fn readable(&mut self, fd: RawFd) {
        if let Some(i) = self.listeners.iter().position(|l| l.fd() == fd) {
            self.accept(i);
        } else if self.conns.contains_key(&fd) {
            self.read_conn(fd);
            self.process(fd);
        }
    }

    /// bsnmpd's `idle`, run once per pass of its loop, i.e. between SNMP PDUs: ends the
    /// prefetched answers' life and the stalls, and handles PDUs queued during requests.
    pub(crate) fn idle(&mut self) {
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

    /// `fini`: Close(shutdown) to every session, sockets closed, sysORTable rows removed.
    pub(crate) fn shutdown(&mut self) {
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
    pub(crate) fn dump(&self) -> Vec<String> {
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

#[cfg(test)]
mod fake_host;
