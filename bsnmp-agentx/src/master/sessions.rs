//! Session administration: what subagents ask of the master, and what ends their sessions.
//!
//! A subagent opens sessions on its connection, registers subtrees inside the module's claims
//! (the registry decides who answers for what), adds sysORTable rows (AgentCaps), sends
//! notifications and closes. Each of its PDUs gets a Response here. A session ends when the
//! subagent closes it, when its connection goes (`connection`), when it fails to answer
//! agentxMaxTimeouts requests in a row, or at `fini`; a connection that opens no session
//! within [`OPEN_GRACE`] is closed. The requests themselves are `forward`'s; it reports each
//! answer and timeout here, because the stall and the count are the session's state.
use super::Master;
use crate::registry::{RegisterError, SessionId};
use agentx_proto::oid::{Oid, SNMP_TRAP_OID_0, SYS_UPTIME_0};
use agentx_proto::pdu::{CloseReason, HeaderIds, Payload, Pdu, ResError, Value, VarBind};
use std::os::unix::io::RawFd;
use std::time::Duration;

/// A connection that has not opened a session within this long is closed.
pub(super) const OPEN_GRACE: Duration = Duration::from_secs(10);
/// At most this many sessions per connection; a further Open is answered openFailed.
pub(super) const MAX_SESSIONS_PER_CONNECTION: usize = 16;
/// A Notify is sent as a trap with at most this many varbinds besides snmpTrapOID.
pub(crate) const MAX_TRAP_VARBINDS: usize = 32;

pub(super) struct Session {
    /// The connection it was opened on (and the only one it may be used from).
    pub(super) conn: RawFd,
    /// The session's own timeout (Open's o.timeout), capped by agentxTimeout.
    pub(super) timeout: Duration,
    pub(super) descr: String,
    pub(super) timeouts_in_row: u32,
    /// Timed out during this pass of bsnmpd's loop: later ops fail at once (the stall bound).
    pub(super) stalled: bool,
    /// Its sysORTable rows: the AgentCaps id and bsnmpd's row index.
    caps: Vec<(Oid, u32)>,
}

/// The Response to a subagent's PDU, with no varbinds.
pub(super) fn response(ids: HeaderIds, uptime: u32, error: ResError) -> Pdu {
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

impl Master {
    /// Handles the queued PDUs and the complete frames of one connection.
    pub(super) fn process(&mut self, fd: RawFd) {
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

    /// One PDU a subagent sent on connection `fd`, answered with a Response (but a Response
    /// itself, which is late: its request timed out).
    pub(super) fn handle(&mut self, fd: RawFd, p: Pdu) {
        let uptime = self.host.uptime();
        let ids = p.ids;
        match p.payload {
            Payload::Response { .. } => return,
            Payload::Open { timeout, id, descr } => return self.open(fd, ids, timeout, id, descr),
            _ => {}
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
            } => self.register(sid, &subtree, priority, range_subid, upper_bound),
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
            Payload::AddAgentCaps { id, descr } => self.add_agent_caps(sid, id, &descr),
            Payload::RemoveAgentCaps { id } => self.remove_agent_caps(sid, &id),
            Payload::Notify { varbinds } => self.notify(varbinds),
            // IndexAllocate/IndexDeallocate are not supported; requests are the master's to send.
            _ => ResError::PROCESSING_ERROR,
        };
        self.send(fd, &response(ids, uptime, error));
    }

    /// Open: a new session on `fd`, its timeout the subagent's (whole seconds; 0 for the
    /// master's default) capped by agentxTimeout. The Response carries the session's id.
    fn open(&mut self, fd: RawFd, ids: HeaderIds, timeout: u8, id: Oid, descr: Vec<u8>) {
        let uptime = self.host.uptime();
        if self.sessions.values().filter(|s| s.conn == fd).count() >= MAX_SESSIONS_PER_CONNECTION {
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
    }

    /// Register: the registry's verdict as the Response's error. A registration outside the
    /// claims is logged with what to add to the module arguments, since nothing else tells
    /// the operator why a subagent's objects are missing.
    fn register(
        &mut self,
        sid: SessionId,
        subtree: &Oid,
        priority: u8,
        range_subid: u8,
        upper_bound: Option<u32>,
    ) -> ResError {
        match self
            .registry
            .register(sid, subtree, priority, range_subid, upper_bound)
        {
            Ok(()) => {
                self.prefetch.clear();
                ResError::NO_ERROR
            }
            Err(RegisterError::OutsideClaims(o)) => {
                let claims: Vec<String> = self.claims.iter().map(|c| c.oid.to_string()).collect();
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
        }
    }

    /// AddAgentCaps: a sysORTable row, removed again with the session.
    fn add_agent_caps(&mut self, sid: SessionId, id: Oid, descr: &[u8]) -> ResError {
        let idx = self.host.or_register(&id, descr);
        if idx == 0 {
            return ResError::PROCESSING_ERROR;
        }
        if let Some(s) = self.sessions.get_mut(&sid) {
            s.caps.push((id, idx));
        }
        ResError::NO_ERROR
    }

    fn remove_agent_caps(&mut self, sid: SessionId, id: &Oid) -> ResError {
        let found = self.sessions.get_mut(&sid).and_then(|s| {
            let i = s.caps.iter().position(|(o, _)| o == id)?;
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

    /// Forgets a session: its registrations, its sysORTable rows, its SETs in progress, and
    /// every prefetched answer (some may be its).
    pub(super) fn drop_session(&mut self, sid: SessionId) {
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
    pub(super) fn close_session(&mut self, sid: SessionId, reason: CloseReason) {
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

    /// A request of session `sid` was answered: its timeouts are no longer in a row.
    pub(super) fn answered(&mut self, sid: SessionId) {
        if let Some(s) = self.sessions.get_mut(&sid) {
            s.timeouts_in_row = 0;
        }
    }

    /// A request of session `sid` got no Response within `timeout`. The session is stalled
    /// for the rest of this pass of bsnmpd's loop, so one SNMP request waits for it once at
    /// most; after agentxMaxTimeouts timeouts in a row it is closed (reason timeouts).
    pub(super) fn timed_out(&mut self, sid: SessionId, timeout: Duration) {
        self.stats.timeouts += 1;
        let max = self.settings.max_timeouts;
        let Some(s) = self.sessions.get_mut(&sid) else {
            return;
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
    }

    /// The housekeeping timer: closes connections that never opened a session.
    pub(crate) fn tick(&mut self) {
        let now = self.host.now();
        let late: Vec<RawFd> = self
            .conns
            .iter()
            .filter(|(_, c)| !c.opened && now.saturating_duration_since(c.since) > OPEN_GRACE)
            .map(|(fd, _)| *fd)
            .collect();
        for fd in late {
            self.close_conn(fd, None, "no Open within 10 s");
        }
    }
}

#[cfg(test)]
#[path = "sessions_tests.rs"]
mod tests;
