//! bsnmpd's ops forwarded to the subagents, and their answers turned into what bsnmpd wants.
//!
//! An op is synchronous and per varbind: it must return the value, so each one becomes a
//! request on the owning session's socket and a wait for its Response, bounded by the
//! session's timeout ([`Master::request`], the one wait in the module). A GET becomes an AgentX
//! Get; a GETNEXT a GetBulk (or GetNext) bounded by the owning interval, whose answer is kept
//! (`prefetch`); a SET becomes TestSet then CommitSet, and bsnmpd's COMMIT and ROLLBACK become
//! CleanupSet and UndoSet+CleanupSet. What goes wrong comes back as an [`ErrorStatus`].
use super::prefetch::{Cached, Run};
use super::Master;
use crate::error_status::ErrorStatus;
use crate::registry::{Interval, SessionId};
use agentx_proto::oid::Oid;
use agentx_proto::pdu::{
    CloseReason, Payload, Pdu, PduType, ResError, SearchRange, Value, VarBind,
};
use std::io::{self, Read};
use std::os::unix::io::RawFd;
use std::time::Instant;

/// At most this many PDUs a subagent sent during one request are kept for `idle`; more closes
/// the connection (nothing legitimate sends that many while the master waits).
const MAX_QUEUED: usize = 256;

/// Why a forwarded request got no Response.
#[derive(Debug, PartialEq, Eq)]
enum RequestError {
    NoSession,
    /// The session timed out earlier in this pass of bsnmpd's loop.
    Stalled,
    Timeout,
    /// The connection went, or was closed for what the subagent sent.
    Closed,
}

/// A SET forwarded as TestSet+CommitSet, waiting for bsnmpd's COMMIT or ROLLBACK.
pub(super) struct Txn {
    pub(super) session: SessionId,
    transaction: u32,
}

impl Master {
    /// Sends a request and waits for its Response, for at most the session's timeout.
    ///
    /// This is the only wait in the module. How a timeout stalls and closes the session is
    /// `sessions`' ([`Master::timed_out`]).
    fn request(
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
        let deadline = self.host.now() + timeout;
        let result = self.exchange(fd, sid, packet, &out, deadline);
        match result {
            Ok(_) => self.answered(sid),
            Err(RequestError::Timeout) => self.timed_out(sid, timeout),
            Err(_) => {}
        }
        result
    }

    /// Writes the request `out` and reads until the Response to `packet` arrives, the
    /// deadline passes or the connection fails. Other PDUs read meanwhile are queued for
    /// `idle`; other Responses (late ones) are dropped.
    fn exchange(
        &mut self,
        fd: RawFd,
        sid: SessionId,
        packet: u32,
        out: &[u8],
        deadline: Instant,
    ) -> Result<(ResError, Vec<VarBind>), RequestError> {
        {
            let left = deadline.saturating_duration_since(self.host.now());
            let c = self.conns.get_mut(&fd).ok_or(RequestError::Closed)?;
            // The socket stays non-blocking: poll(2) waits, so one request costs a send, a
            // poll and a read rather than also switching the socket's mode and timeouts.
            let written = crate::sys::send_all_within(c.stream.fd(), out, left);
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
            let left = deadline.saturating_duration_since(self.host.now());
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

    /// SNMP_OP_GET of `oid`. noSuchName when nobody or nothing answers for it (bsnmpd turns
    /// it into noSuchInstance); genErr when the subagent fails to answer, or answers wrong.
    pub(crate) fn get(&mut self, oid: &Oid) -> Result<Value, ErrorStatus> {
        let sid = self
            .registry
            .owner_of(&oid.0)
            .ok_or(ErrorStatus::NO_SUCH_NAME)?;
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
            .map_err(|_| ErrorStatus::GEN_ERR)?;
        if error != ResError::NO_ERROR || vbs.len() != 1 || vbs[0].name != *oid {
            return Err(ErrorStatus::GEN_ERR);
        }
        let v = vbs.remove(0).value;
        if v.is_exception() {
            return Err(ErrorStatus::NO_SUCH_NAME);
        }
        Ok(v)
    }

    /// SNMP_OP_GETNEXT in claim `claim`: the first object after `oid` (which lies in the
    /// claim, or is the claim itself). noSuchName when the claim has nothing after it (bsnmpd
    /// goes on with the next node of its tree).
    pub(crate) fn get_next(&mut self, claim: usize, oid: &Oid) -> Result<VarBind, ErrorStatus> {
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
            match self.prefetch.lookup(sid, &start, include, &iv.end) {
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
                .map_err(|_| ErrorStatus::GEN_ERR)?;
            if error != ResError::NO_ERROR {
                return Err(ErrorStatus::GEN_ERR);
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
                let before_end = iv.end.as_ref().is_none_or(|e| vb.name < *e);
                if !after_prev || !before_end || vb.value.is_exception() {
                    self.log(
                        libc::LOG_WARNING,
                        &format!(
                            "session {sid}: GetNext/GetBulk from {start} answered {} outside the range or out of order",
                            vb.name
                        ),
                    );
                    return Err(ErrorStatus::GEN_ERR);
                }
                entries.push(vb);
            }
            let first = entries.first().cloned();
            self.prefetch.keep(Run {
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
        Err(ErrorStatus::NO_SUCH_NAME)
    }

    /// SNMP_OP_SET: TestSet then CommitSet, as one AgentX transaction per varbind. Returns the
    /// handle bsnmpd's COMMIT or ROLLBACK of this varbind will bring back. A TestSet refused
    /// is the subagent's error-status; a CommitSet that fails is undone, and commitFailed.
    pub(crate) fn set(&mut self, vb: VarBind) -> Result<u32, ErrorStatus> {
        self.prefetch.clear();
        let sid = self
            .registry
            .owner_of(&vb.name.0)
            .ok_or(ErrorStatus::NOT_WRITABLE)?;
        let t = self.transaction();
        let (error, _) = self
            .request(sid, t, Payload::TestSet { varbinds: vec![vb] })
            .map_err(|_| ErrorStatus::GEN_ERR)?;
        if error != ResError::NO_ERROR {
            let _ = self.request(sid, t, Payload::CleanupSet);
            return Err(ErrorStatus::from_agentx(error));
        }
        match self.request(sid, t, Payload::CommitSet) {
            Ok((ResError::NO_ERROR, _)) => {}
            _ => {
                let _ = self.request(sid, t, Payload::UndoSet);
                let _ = self.request(sid, t, Payload::CleanupSet);
                return Err(ErrorStatus::COMMIT_FAILED);
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

    /// SNMP_OP_COMMIT (bsnmpd's "free resources"): CleanupSet. Nothing can fail any more.
    pub(crate) fn commit(&mut self, txn: u32) {
        if let Some(t) = self.txns.remove(&txn) {
            let _ = self.request(t.session, t.transaction, Payload::CleanupSet);
        }
    }

    /// SNMP_OP_ROLLBACK: UndoSet, then CleanupSet; undoFailed when the UndoSet was not done.
    /// A handle already gone (its session closed) has nothing to undo.
    pub(crate) fn rollback(&mut self, txn: u32) -> Result<(), ErrorStatus> {
        let Some(t) = self.txns.remove(&txn) else {
            return Ok(());
        };
        let undo = self.request(t.session, t.transaction, Payload::UndoSet);
        let _ = self.request(t.session, t.transaction, Payload::CleanupSet);
        match undo {
            Ok((ResError::NO_ERROR, _)) => Ok(()),
            _ => Err(ErrorStatus::UNDO_FAILED),
        }
    }
}

#[cfg(test)]
#[path = "forward_tests.rs"]
mod tests;
