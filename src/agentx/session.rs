//! The subagent session: connect, Open, Register, serve requests, Ping, reconnect.
//!
//! Everything runs on one task. Frames are read with a cancel-safe reader, so the task can
//! wait on the master, the Ping timer and control messages (reload, shutdown) at once
//! without losing bytes. Requests are answered in arrival order from the snapshot cache;
//! the master may pipeline them, and a re-sent packetID is simply answered again.
//!
//! The master going away (EOF, an error, a Close, a Ping that fails or goes unanswered) ends
//! the connection; the session then reconnects with jittered exponential backoff and Opens
//! and Registers again. net-snmp never reconnects for us.

use super::pdu::{
    CloseReason, DecodeError, Header, HeaderIds, Payload, Pdu, ResError, ResponseWriter,
    SearchRange, Value, HEADER_LEN, MAX_PAYLOAD,
};
use super::transport::Connection;
pub use super::transport::MasterAddr;
use crate::cache::{Cache, CacheConfig};
use crate::logging::RateLimited;
use crate::mib::{self, MibView, MEMSTAT_MIB_ROOT};
use crate::oid::Oid;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Session settings.
#[derive(Clone, Debug)]
pub struct SessionConfig {
    pub master: MasterAddr,
    /// 0 disables pings.
    pub ping_interval: Duration,
    pub backoff_min: Duration,
    pub backoff_max: Duration,
    /// Send AddAgentCaps so that sysORTable lists the module.
    pub agent_caps: bool,
}

/// What the rest of the daemon asks of the session.
pub enum Control {
    /// New settings (SIGHUP). The connection is kept unless the master address changed.
    Reload(SessionConfig, CacheConfig),
    /// Close(shutdown) and return.
    Shutdown,
}

/// How long we wait for the master to answer an administrative PDU.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(5);
/// The Open's o.timeout: honoured by OpenBSD, ignored by net-snmp.
const OPEN_TIMEOUT_SECS: u8 = 5;
/// The largest Response payload we send: net-snmp refuses PDUs over 64 KiB. A GetBulk stops
/// at the last whole repetition that fits; a Get or GetNext that cannot fit answers tooBig.
const BULK_RESPONSE_BUDGET: usize = MAX_PAYLOAD;

fn descr() -> Vec<u8> {
    format!(
        "memstat-agentx {}: kernel memory allocator statistics (MEMSTAT-MIB)",
        env!("CARGO_PKG_VERSION")
    )
    .into_bytes()
}

/// Reads whole frames. `next` is cancel-safe: bytes read before a cancellation stay in the
/// buffer for the next call.
struct FrameReader {
    buf: Vec<u8>,
}

enum Frame {
    Pdu(Pdu),
    /// A frame whose header was fine but whose payload was not: answer parseError.
    Bad(Header, DecodeError),
}

impl FrameReader {
    async fn next(&mut self, conn: &Connection) -> Result<Frame, String> {
        loop {
            if self.buf.len() >= HEADER_LEN {
                let h = Header::decode(&self.buf).map_err(|e| format!("framing lost: {e}"))?;
                let len = h.frame_len();
                if self.buf.len() >= len {
                    let result = match Pdu::decode(&self.buf[..len]) {
                        Ok(p) => Frame::Pdu(p),
                        Err(e) if !e.fatal() => Frame::Bad(h, e),
                        Err(e) => return Err(format!("framing lost: {e}")),
                    };
                    self.buf.drain(..len);
                    return Ok(result);
                }
            }
            let n = conn
                .read_some(&mut self.buf)
                .await
                .map_err(|e| format!("read: {e}"))?;
            if n == 0 {
                return Err("the master closed the connection".into());
            }
        }
    }
}

/// Why a connection ended.
enum End {
    Shutdown,
    Lost(String),
    /// The master address changed on reload.
    Readdress,
}

/// The subagent: owns the cache and runs sessions until shut down.
pub struct Subagent {
    cfg: SessionConfig,
    cache: Cache,
    packet_id: u32,
    out: Vec<u8>,
    caps_error_logged: bool,
    /// Reconnection delays; reset by a successful Open, replaced by a reload.
    backoff: Backoff,
}

impl Subagent {
    pub fn new(cfg: SessionConfig, cache: Cache) -> Self {
        Subagent {
            backoff: Backoff::new(cfg.backoff_min, cfg.backoff_max),
            cfg,
            cache,
            packet_id: 0,
            out: Vec::with_capacity(64 * 1024),
            caps_error_logged: false,
        }
    }

    /// Runs until a Shutdown control message. A master that is absent is waited for.
    pub async fn run(mut self, mut control: mpsc::Receiver<Control>) {
        let mut down_log = RateLimited::new(Duration::from_secs(10));
        loop {
            let attempt = tokio::select! {
                r = self.open_session() => r,
                c = control.recv() => match c {
                    Some(Control::Reload(s, c)) => { self.apply(s, c); continue; }
                    Some(Control::Shutdown) | None => return,
                },
            };
            match attempt {
                Ok((stream, session_id, reader)) => {
                    self.backoff.reset();
                    down_log.reset();
                    tracing::info!(
                        "connected to the AgentX master at {}, session {session_id}",
                        self.cfg.master
                    );
                    match self.serve(stream, session_id, reader, &mut control).await {
                        End::Shutdown => return,
                        End::Readdress => continue,
                        End::Lost(why) => {
                            tracing::warn!("lost the AgentX master at {}: {why}", self.cfg.master)
                        }
                    }
                }
                Err(why) => {
                    if let Some(suppressed) = down_log.should_log(Instant::now()) {
                        if suppressed > 0 {
                            tracing::warn!(
                                "cannot reach the AgentX master at {}: {why} ({suppressed} similar failures not logged); retrying",
                                self.cfg.master
                            );
                        } else {
                            tracing::warn!(
                                "cannot reach the AgentX master at {}: {why}; retrying",
                                self.cfg.master
                            );
                        }
                    }
                }
            }
            let delay = self.backoff.next();
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                c = control.recv() => match c {
                    Some(Control::Reload(s, c)) => {
                        self.apply(s, c);
                    }
                    Some(Control::Shutdown) | None => return,
                },
            }
        }
    }

    /// Applies reloaded settings; true when the master address changed.
    fn apply(&mut self, s: SessionConfig, c: CacheConfig) -> bool {
        let readdress = s.master != self.cfg.master;
        self.backoff = Backoff::new(s.backoff_min, s.backoff_max);
        self.cfg = s;
        self.cache.set_config(c);
        tracing::info!("configuration reloaded");
        readdress
    }

    fn next_packet_id(&mut self) -> u32 {
        self.packet_id = self.packet_id.wrapping_add(1);
        self.packet_id
    }

    /// Connects, Opens, Registers and (optionally) adds agent capabilities.
    async fn open_session(&mut self) -> Result<(Connection, u32, FrameReader), String> {
        let stream = Connection::connect(&self.cfg.master)
            .await
            .map_err(|e| e.to_string())?;
        let mut reader = FrameReader { buf: Vec::new() };
        let root = Oid::from_slice(MEMSTAT_MIB_ROOT);

        let open = Payload::Open {
            timeout: OPEN_TIMEOUT_SECS,
            id: root.clone(),
            descr: descr(),
        };
        // The master's sysUpTime as we last knew it, to tell a restarted master (its uptime
        // went backwards) from a dropped connection.
        let before = self
            .cache
            .master_uptime_known()
            .then(|| self.cache.master_uptime_now());
        let (session_id, error) = self.admin(&stream, &mut reader, 0, open).await?;
        if error != ResError::NO_ERROR {
            return Err(format!("Open refused: {}", error.name()));
        }
        let restarted =
            before.is_some_and(|b| self.cache.master_uptime_now().saturating_add(100) < b);
        self.cache.new_session(restarted);
        let register = Payload::Register {
            timeout: 0,
            priority: 127,
            range_subid: 0,
            subtree: root.clone(),
            upper_bound: None,
        };
        let (_, error) = self
            .admin(&stream, &mut reader, session_id, register)
            .await?;
        if error != ResError::NO_ERROR {
            return Err(format!("Register of {root} refused: {}", error.name()));
        }
        if self.cfg.agent_caps {
            let caps = Payload::AddAgentCaps {
                id: root.clone(),
                descr: b"MEMSTAT-MIB: kernel memory allocator statistics".to_vec(),
            };
            let (_, error) = self.admin(&stream, &mut reader, session_id, caps).await?;
            // OpenBSD's snmpd answers processingError: not worth failing the session for.
            if error != ResError::NO_ERROR && !self.caps_error_logged {
                self.caps_error_logged = true;
                tracing::warn!(
                    "the master refused AddAgentCaps ({}); sysORTable will not list MEMSTAT-MIB",
                    error.name()
                );
            }
        }
        Ok((stream, session_id, reader))
    }

    /// Sends an administrative PDU and waits for its Response. Returns the session ID from
    /// the Response header and res.error.
    async fn admin(
        &mut self,
        stream: &Connection,
        reader: &mut FrameReader,
        session_id: u32,
        payload: Payload,
    ) -> Result<(u32, ResError), String> {
        let packet_id = self.next_packet_id();
        let kind = payload.pdu_type().name();
        let mut buf = Vec::new();
        Pdu::new(session_id, 0, packet_id, payload).encode(&mut buf);
        stream
            .write_all(&buf)
            .await
            .map_err(|e| format!("write {kind}: {e}"))?;
        let deadline = tokio::time::Instant::now() + ADMIN_TIMEOUT;
        loop {
            let frame = tokio::time::timeout_at(deadline, reader.next(stream))
                .await
                .map_err(|_| format!("no Response to {kind} within {ADMIN_TIMEOUT:?}"))??;
            if let Frame::Pdu(Pdu {
                ids:
                    HeaderIds {
                        session_id,
                        packet_id: p,
                        ..
                    },
                payload:
                    Payload::Response {
                        sys_uptime, error, ..
                    },
                ..
            }) = frame
            {
                if p == packet_id {
                    self.cache.note_master_uptime(sys_uptime);
                    return Ok((session_id, error));
                }
            }
            // Anything else before registration completes is not for us yet.
        }
    }

    /// Serves one connection until it ends.
    async fn serve(
        &mut self,
        conn: Connection,
        session_id: u32,
        mut reader: FrameReader,
        control: &mut mpsc::Receiver<Control>,
    ) -> End {
        let ping_every = self.cfg.ping_interval;
        let mut next_ping =
            (!ping_every.is_zero()).then(|| tokio::time::Instant::now() + ping_every);
        // (packetID, deadline) of the Ping in flight.
        let mut ping_pending: Option<(u32, tokio::time::Instant)> = None;
        // One timer for the whole connection, moved only when its deadline changes: a walk
        // is thousands of requests, and none of them should touch the timer wheel.
        let far = || tokio::time::Instant::now() + Duration::from_secs(86_400);
        let timer = tokio::time::sleep_until(far());
        tokio::pin!(timer);
        loop {
            let wake = match (ping_pending, next_ping) {
                (Some((_, d)), _) => Some(d),
                (None, n) => n,
            };
            let deadline = wake.unwrap_or_else(|| timer.deadline());
            if timer.deadline() != deadline {
                timer.as_mut().reset(deadline);
            }
            tokio::select! {
                frame = reader.next(&conn) => {
                    let frame = match frame {
                        Ok(f) => f,
                        Err(e) => return End::Lost(e),
                    };
                    match self.handle(frame, &mut ping_pending) {
                        Ok(true) => {
                            if let Err(e) = conn.write_all(&self.out).await {
                                return End::Lost(format!("write: {e}"));
                            }
                        }
                        Ok(false) => {}
                        Err(e) => return End::Lost(e),
                    }
                }
                _ = &mut timer => {
                    if ping_pending.is_some() {
                        return End::Lost("no answer to Ping".into());
                    }
                    if next_ping.is_none() {
                        // Pings are off: the timer only marks time.
                        timer.as_mut().reset(far());
                        continue;
                    }
                    let id = self.next_packet_id();
                    let mut buf = Vec::new();
                    Pdu::new(session_id, 0, id, Payload::Ping).encode(&mut buf);
                    if let Err(e) = conn.write_all(&buf).await {
                        return End::Lost(format!("write Ping: {e}"));
                    }
                    ping_pending = Some((id, tokio::time::Instant::now() + ADMIN_TIMEOUT));
                    next_ping = Some(tokio::time::Instant::now() + ping_every);
                }
                c = control.recv() => match c {
                    Some(Control::Reload(s, c)) => {
                        if self.apply(s, c) {
                            let _ = close(&conn, session_id, self.next_packet_id(), CloseReason::SHUTDOWN).await;
                            return End::Readdress;
                        }
                        let every = self.cfg.ping_interval;
                        next_ping = (!every.is_zero()).then(|| tokio::time::Instant::now() + every);
                    }
                    Some(Control::Shutdown) | None => {
                        let id = self.next_packet_id();
                        if let Err(e) = close(&conn, session_id, id, CloseReason::SHUTDOWN).await {
                            tracing::warn!("sending Close: {e}");
                        }
                        tracing::info!("closed the AgentX session");
                        return End::Shutdown;
                    }
                },
            }
        }
    }

    /// Handles one frame from the master, leaving any reply in `self.out`. Returns whether
    /// there is a reply to send, or why the connection must end.
    fn handle(
        &mut self,
        frame: Frame,
        ping_pending: &mut Option<(u32, tokio::time::Instant)>,
    ) -> Result<bool, String> {
        self.out.clear();
        let pdu = match frame {
            Frame::Pdu(p) => p,
            Frame::Bad(h, e) => {
                tracing::debug!("answering parseError: {e}");
                self.response(&h.ids, ResError::PARSE_ERROR, 0).finish();
                return Ok(true);
            }
        };
        let ids = pdu.ids;
        match pdu.payload {
            Payload::Get { ranges } => {
                // Reading the daemon's scalars never triggers a refresh.
                let view = if ranges.iter().all(|r| mib::is_scalar(r.start.as_slice())) {
                    self.cache.peek(ids.transaction_id)
                } else {
                    self.cache.view_for(ids.transaction_id, &[], false)
                };
                let status = || self.cache.status();
                let mut w = ResponseWriter::begin(&mut self.out, ids, 0, ResError::NO_ERROR, 0);
                for r in &ranges {
                    w.push(&r.start, &view.get(r.start.as_slice(), &status));
                }
                w.finish();
            }
            Payload::GetNext { ranges } => {
                // First without refreshing: when every answer is a scalar, the snapshot did
                // not matter and no refresh is due.
                let peeked = self.cache.peek(ids.transaction_id);
                let mut found = self.next_all(&peeked, &ranges);
                let scalars_only = found
                    .iter()
                    .all(|(o, v)| *v != Value::EndOfMibView && mib::is_scalar(o.as_slice()));
                if !scalars_only {
                    let view = self.view_for_search(ids.transaction_id, &ranges);
                    if !std::sync::Arc::ptr_eq(&view, &peeked) {
                        found = self.next_all(&view, &ranges);
                    }
                }
                let mut w = ResponseWriter::begin(&mut self.out, ids, 0, ResError::NO_ERROR, 0);
                for (o, v) in &found {
                    w.push(o, v);
                }
                w.finish();
                if !scalars_only {
                    for (i, (o, v)) in found.into_iter().enumerate() {
                        if v != Value::EndOfMibView {
                            self.cache.note_returned(ids.transaction_id, i, o);
                        }
                    }
                }
            }
            Payload::GetBulk {
                non_repeaters,
                max_repetitions,
                ranges,
            } => self.get_bulk(ids, non_repeaters, max_repetitions, &ranges),
            Payload::TestSet { .. } => {
                // Read-only: every Set fails at its first varbind.
                self.response(&ids, ResError::NOT_WRITABLE, 1).finish();
            }
            Payload::CommitSet | Payload::UndoSet => {
                self.response(&ids, ResError::NO_ERROR, 0).finish();
            }
            // RFC 2741 §7.2.4.3: CleanupSet gets no Response.
            Payload::CleanupSet => return Ok(false),
            Payload::Response {
                sys_uptime, error, ..
            } => {
                if let Some((id, _)) = *ping_pending {
                    if id == ids.packet_id {
                        *ping_pending = None;
                        self.cache.note_master_uptime(sys_uptime);
                        if error != ResError::NO_ERROR {
                            return Err(format!("Ping answered {}", error.name()));
                        }
                    }
                }
                return Ok(false);
            }
            Payload::Close { reason } => {
                return Err(format!("the master sent Close ({})", reason.name()));
            }
            // PDUs a master never sends to a subagent.
            _ => {
                self.response(&ids, ResError::PARSE_ERROR, 0).finish();
            }
        }
        if self.out.len() > HEADER_LEN + MAX_PAYLOAD {
            // Only a request with thousands of ranges gets here; the master could not take
            // the answer, so say so instead.
            self.out.clear();
            self.response(&ids, ResError::TOO_BIG, 0).finish();
        }
        Ok(true)
    }

    fn response(&mut self, ids: &HeaderIds, error: ResError, index: u16) -> ResponseWriter<'_> {
        ResponseWriter::begin(&mut self.out, *ids, 0, error, index)
    }

    /// One GetNext step for every range, from `view`.
    fn next_all(&self, view: &MibView, ranges: &[SearchRange]) -> Vec<(Oid, Value)> {
        let status = || self.cache.status();
        ranges
            .iter()
            .map(|r| next_of(view, r, r.include, &r.start, &status))
            .collect()
    }

    fn view_for_search(&mut self, txn: u32, ranges: &[SearchRange]) -> std::sync::Arc<MibView> {
        let starts: Vec<&Oid> = ranges.iter().map(|r| &r.start).collect();
        self.cache.view_for(txn, &starts, true)
    }

    /// RFC 2741 §7.2.3.3: the first `non_repeaters` ranges once, then the rest repeatedly,
    /// each repetition continuing from the previous one's result.
    fn get_bulk(
        &mut self,
        ids: HeaderIds,
        non_repeaters: u16,
        max_repetitions: u16,
        ranges: &[SearchRange],
    ) {
        let view = self.view_for_search(ids.transaction_id, ranges);
        let n = (non_repeaters as usize).min(ranges.len());
        let mut last: Vec<(usize, Oid)> = Vec::new();
        {
            let status = || self.cache.status();
            let mut w = ResponseWriter::begin(&mut self.out, ids, 0, ResError::NO_ERROR, 0);
            for (i, r) in ranges[..n].iter().enumerate() {
                let (o, v) = next_of(&view, r, r.include, &r.start, &status);
                w.push(&o, &v);
                if v != Value::EndOfMibView {
                    last.push((i, o));
                }
            }
            let repeaters = &ranges[n..];
            // Per repeater: where the next repetition continues, with which include flag,
            // and whether it already reached endOfMibView.
            let mut cursor: Vec<(Oid, bool, bool)> = repeaters
                .iter()
                .map(|r| (r.start.clone(), r.include, false))
                .collect();
            for _ in 0..max_repetitions {
                if repeaters.is_empty() || cursor.iter().all(|c| c.2) {
                    break;
                }
                // Only whole repetitions go out: one that would make the Response too big
                // for the master (64 KiB) is taken back, and the answer stops before it.
                let checkpoint = w.checkpoint();
                let saved = cursor.clone();
                for (j, r) in repeaters.iter().enumerate() {
                    let (start, include, done) = &cursor[j];
                    if *done {
                        w.push(&r.start, &Value::EndOfMibView);
                        continue;
                    }
                    let (o, v) = next_of(&view, r, *include, start, &status);
                    w.push(&o, &v);
                    if v == Value::EndOfMibView {
                        cursor[j].2 = true;
                    } else {
                        cursor[j] = (o, false, false);
                    }
                }
                if w.payload_len() > BULK_RESPONSE_BUDGET {
                    w.rollback(checkpoint);
                    cursor = saved;
                    break;
                }
            }
            for (j, c) in cursor.into_iter().enumerate() {
                if !c.2 && c.0 != repeaters[j].start {
                    last.push((n + j, c.0));
                }
            }
            w.finish();
        }
        for (i, o) in last {
            self.cache.note_returned(ids.transaction_id, i, o);
        }
    }
}

/// One GetNext step: the next instance after `from` within the range, or endOfMibView named
/// by the range's start OID.
fn next_of(
    view: &MibView,
    r: &SearchRange,
    include: bool,
    from: &Oid,
    status: &dyn Fn() -> crate::mib::DaemonStatus,
) -> (Oid, Value) {
    match view.get_next(from.as_slice(), include, r.end.as_slice(), status) {
        Some(found) => found,
        None => (r.start.clone(), Value::EndOfMibView),
    }
}

async fn close(
    conn: &Connection,
    session_id: u32,
    packet_id: u32,
    reason: CloseReason,
) -> std::io::Result<()> {
    let mut buf = Vec::new();
    Pdu::new(session_id, 0, packet_id, Payload::Close { reason }).encode(&mut buf);
    conn.write_all(&buf).await?;
    conn.shutdown()
}

/// Jittered exponential backoff between `min` and `max`.
struct Backoff {
    min: Duration,
    max: Duration,
    current: Duration,
    seed: u64,
}

impl Backoff {
    fn new(min: Duration, max: Duration) -> Self {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
            ^ u64::from(std::process::id()).rotate_left(32);
        Backoff {
            min,
            max: max.max(min),
            current: min,
            seed: seed | 1,
        }
    }

    fn reset(&mut self) {
        self.current = self.min;
    }

    /// The next delay: the current step scaled by a random factor in [0.5, 1.0], so that
    /// many subagents restarted together do not reconnect in lockstep.
    fn next(&mut self) -> Duration {
        // xorshift64: plenty for jitter, no dependency.
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        let frac = 0.5 + (self.seed % 1000) as f64 / 2000.0;
        let d = self.current.mul_f64(frac);
        self.current = (self.current * 2).min(self.max);
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_to_max_with_jitter_and_resets() {
        let mut b = Backoff::new(Duration::from_millis(250), Duration::from_secs(2));
        let d: Vec<Duration> = (0..6).map(|_| b.next()).collect();
        assert!(d[0] >= Duration::from_millis(125) && d[0] <= Duration::from_millis(250));
        assert!(d.iter().all(|x| *x <= Duration::from_secs(2)));
        assert!(d[5] >= Duration::from_secs(1));
        b.reset();
        assert!(b.next() <= Duration::from_millis(250));
    }
}
