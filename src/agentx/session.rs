//! The AgentX session: the life of the connection to the master, and nothing else.
//!
//! Connect, Open, Register, AddAgentCaps, Ping, reconnect, Close. Every request PDU goes to
//! the [`Agent`], which answers it without I/O; when the agent needs a fresh snapshot the
//! session has the source read on its own thread (see `reader.rs`) and waits for it next to
//! its timers and the shutdown signal, never on the runtime thread.
//!
//! The master going away (EOF, an error, a Close, a Ping that fails or goes unanswered) ends
//! the connection; the session then reconnects with jittered exponential backoff and Opens
//! and Registers again. net-snmp never reconnects for us.

pub use super::transport::MasterAddr;
use super::transport::{Connection, ConnectionError, Frame, FrameReader};
use crate::agent::{Agent, AgentSettings, Handled};
use crate::alarm::Alarm;
use crate::logging::RateLimited;
use crate::memstat::{SourceError, SourceRead};
use crate::mib::{notification_varbinds, NotificationType, MEMSTAT_MIB_ROOT};
use crate::reader::SourceReader;
use agentx_proto::oid::Oid;
use agentx_proto::pdu::{CloseReason, HeaderIds, Payload, Pdu, ResError};
use std::collections::VecDeque;
use std::fmt;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

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
    /// New settings (SIGHUP). The connection is kept unless the master address or agent-caps
    /// changed.
    Reload(SessionConfig, AgentSettings),
    /// Close(shutdown) and return.
    Shutdown,
}

/// How long we wait for the master to answer an administrative PDU.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(5);
/// The Open's o.timeout: honoured by OpenBSD, ignored by net-snmp.
const OPEN_TIMEOUT_SECS: u8 = 5;
/// How long a request waits for a read of the source before it is answered from the last
/// good snapshot: under net-snmp's 1 s AgentX timeout, so the master never re-sends it.
const READ_WAIT: Duration = Duration::from_millis(800);
/// How long the one read at start-up may take before the session starts without it.
const STARTUP_READ_WAIT: Duration = Duration::from_secs(5);
/// How long writes may go on once a shutdown is asked for (the Response in flight, then
/// the Close): a master that stopped reading must not hold SIGTERM for the full write
/// timeout. Under 1 s, leaving room for the process to exit within the second promised.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(700);
/// Notifies whose Response we still look for: the master answers each at once, so a few
/// dozen cover any burst of a sample; older ones are forgotten.
const NOTIFIES_TRACKED: usize = 64;

fn descr() -> Vec<u8> {
    format!(
        "memstat-agentx {}: kernel memory allocator statistics (MEMSTAT-MIB)",
        env!("CARGO_PKG_VERSION")
    )
    .into_bytes()
}

/// Why a connection ended, or could not be set up.
#[derive(Debug)]
pub enum SessionError {
    Connect(std::io::Error),
    Connection(ConnectionError),
    Write(std::io::Error),
    /// An administrative PDU got no Response in time.
    NoResponse(&'static str),
    /// The master refused an administrative PDU.
    Refused(&'static str, ResError),
    PingFailed(ResError),
    PingUnanswered,
    Closed(CloseReason),
}

impl fmt::Display for SessionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionError::Connect(e) => e.fmt(f),
            SessionError::Connection(e) => e.fmt(f),
            SessionError::Write(e) => write!(f, "write: {e}"),
            SessionError::NoResponse(what) => {
                write!(f, "no Response to {what} within {ADMIN_TIMEOUT:?}")
            }
            SessionError::Refused(what, e) => write!(f, "{what} refused: {e}"),
            SessionError::PingFailed(e) => write!(f, "Ping answered {e}"),
            SessionError::PingUnanswered => f.write_str("no answer to Ping"),
            SessionError::Closed(r) => write!(f, "the master sent Close ({r})"),
        }
    }
}

impl std::error::Error for SessionError {}

/// Why a connection ended.
enum End {
    Shutdown,
    Lost(SessionError),
    /// The master address changed on reload.
    Readdress,
}

/// The subagent: the agent, the source's reading thread, and the connection to the master.
pub struct Subagent {
    cfg: SessionConfig,
    agent: Agent,
    reader: SourceReader,
    packet_id: u32,
    out: Vec<u8>,
    caps_error_logged: bool,
    /// Reconnection delays; reset by a successful Open, replaced by a reload.
    backoff: Backoff,
    /// A read whose request stopped waiting for it; its result is still used.
    late_read: Option<oneshot::Receiver<SourceRead>>,
    /// Pings and periodic work (see `alarm.rs`).
    alarm: Alarm,
    /// A reload that arrived while a write was in progress, applied after it.
    deferred_reload: Option<(SessionConfig, AgentSettings)>,
    /// Set when a shutdown is asked for: every write after it gives up at this instant.
    stop_by: Option<tokio::time::Instant>,
    /// (packetID, notification) of the Notifies sent in this session, newest last.
    notifies: VecDeque<(u32, NotificationType)>,
    /// Refusals of Notifies by the master, logged at most every 10 s.
    refusals: RateLimited,
}

impl Subagent {
    pub fn new(cfg: SessionConfig, agent: Agent, reader: SourceReader) -> std::io::Result<Self> {
        Ok(Subagent {
            alarm: Alarm::start()?,
            backoff: Backoff::new(cfg.backoff_min, cfg.backoff_max),
            cfg,
            agent,
            reader,
            packet_id: 0,
            out: Vec::with_capacity(64 * 1024),
            caps_error_logged: false,
            late_read: None,
            deferred_reload: None,
            stop_by: None,
            notifies: VecDeque::new(),
            refusals: RateLimited::new(Duration::from_secs(10)),
        })
    }

    /// Runs until a Shutdown control message. A master that is absent is waited for.
    pub async fn run(mut self, mut control: mpsc::Receiver<Control>) {
        // One read at start-up: it shows at once whether the source works (as the
        // configured user), and it defines the rows "present at start-up". After this,
        // reads happen only on demand.
        if self.agent.read_due(Instant::now())
            && matches!(
                self.read_within(STARTUP_READ_WAIT, &mut control).await,
                Err(End::Shutdown)
            )
        {
            return;
        }
        let mut down_log = RateLimited::new(Duration::from_secs(10));
        loop {
            // Due before a master was there to take them.
            self.drop_notifications();
            let attempt = tokio::select! {
                r = self.open_session() => r,
                c = control.recv() => match c {
                    Some(Control::Reload(s, a)) => { self.apply(s, a); continue; }
                    Some(Control::Shutdown) | None => return,
                },
            };
            match attempt {
                Ok((conn, session_id, frames)) => {
                    self.backoff.reset();
                    down_log.reset();
                    tracing::info!(
                        "connected to the AgentX master at {}, session {session_id}",
                        self.cfg.master
                    );
                    match self.serve(conn, session_id, frames, &mut control).await {
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
            let until = tokio::time::Instant::now() + self.backoff.next();
            // No master: samples go on (a restart of the master must not hide what happened
            // meanwhile from the counters), and what they find is dropped.
            self.drop_notifications();
            loop {
                self.alarm.set(
                    self.agent
                        .next_sample()
                        .map(|t| t.max(Instant::now() + Duration::from_millis(10))),
                );
                tokio::select! {
                    _ = tokio::time::sleep_until(until) => break,
                    _ = self.alarm.rang() => {
                        if matches!(self.periodic(&mut control).await, Err(End::Shutdown)) {
                            return;
                        }
                        self.drop_notifications();
                    }
                    c = control.recv() => match c {
                        Some(Control::Reload(s, a)) => {
                            self.apply(s, a);
                        }
                        Some(Control::Shutdown) | None => return,
                    },
                }
            }
        }
    }

    /// A sample for notifications, if one is due: the source is read first when a request
    /// would read it now (the same rule, so that samples keep the view bound and the walk
    /// contract), then the newest view is compared with the last sample.
    async fn periodic(&mut self, control: &mut mpsc::Receiver<Control>) -> Result<(), End> {
        let now = Instant::now();
        if !self.agent.sample_due(now) {
            return Ok(());
        }
        if self.agent.read_due(now) {
            self.read_within(READ_WAIT, control).await?;
        }
        self.agent.sample(Instant::now());
        Ok(())
    }

    /// Notifications due while no master is connected are dropped, and counted.
    fn drop_notifications(&mut self) {
        let dropped = self.agent.take_notifications();
        if !dropped.is_empty() {
            let names: Vec<&str> = dropped.iter().map(|n| n.kind().name()).collect();
            tracing::debug!("no master: dropped {}", names.join(", "));
            self.agent.notifications_dropped(dropped.len() as u64);
        }
    }

    /// Sends the notifications due, one Notify PDU each: snmpTrapOID.0 first, then the
    /// notification's objects. The master's Response is matched in [`Self::on_frame`].
    async fn send_notifications(
        &mut self,
        conn: &Connection,
        session_id: u32,
        control: &mut mpsc::Receiver<Control>,
    ) -> Result<(), End> {
        let mut due = self.agent.take_notifications();
        while let Some(n) = due.pop_front() {
            let ids = self.next_ids(session_id);
            let mut buf = Vec::new();
            let varbinds = notification_varbinds(&n);
            Pdu::with_ids(ids, Payload::Notify { varbinds }).encode(&mut buf);
            let written = write_watching(
                conn,
                &buf,
                control,
                &mut self.deferred_reload,
                &mut self.stop_by,
            )
            .await;
            if let Err(end) = written {
                // The connection is gone (or going): the rest cannot be sent.
                self.agent.notifications_dropped(due.len() as u64 + 1);
                return Err(end);
            }
            self.agent.notifications_sent(1);
            tracing::debug!("sent {} (packet {})", n.kind().name(), ids.packet_id);
            if self.notifies.len() == NOTIFIES_TRACKED {
                self.notifies.pop_front();
            }
            self.notifies.push_back((ids.packet_id, n.kind()));
        }
        Ok(())
    }

    /// The master's Response to one of our Notifies: a refusal is logged.
    fn notify_answered(&mut self, packet_id: u32, error: ResError) -> bool {
        let Some(pos) = self.notifies.iter().position(|(p, _)| *p == packet_id) else {
            return false;
        };
        let (_, kind) = self.notifies.remove(pos).expect("found above");
        if error != ResError::NO_ERROR {
            match self.refusals.should_log(Instant::now()) {
                Some(0) => tracing::warn!("the master refused {}: {error}", kind.name()),
                Some(n) => tracing::warn!(
                    "the master refused {}: {error} ({n} more refusals not logged)",
                    kind.name()
                ),
                None => {}
            }
        }
        true
    }

    /// Starts a read of the source and waits for it at most `wait`, next to the control
    /// channel: the master, the timers and reloads wait meanwhile, a shutdown does not. A
    /// read that takes longer goes on; its result is installed when it arrives.
    async fn read_within(
        &mut self,
        wait: Duration,
        control: &mut mpsc::Receiver<Control>,
    ) -> Result<(), End> {
        self.agent.read_started(Instant::now());
        let mut rx = self.reader.read();
        let deadline = tokio::time::sleep(wait);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                r = &mut rx => {
                    self.finish_read(r);
                    return Ok(());
                }
                _ = &mut deadline => {
                    tracing::debug!("no snapshot after {wait:?}; answering from the last one");
                    self.agent.read_overdue(Instant::now());
                    self.late_read = Some(rx);
                    return Ok(());
                }
                c = control.recv() => match c {
                    Some(Control::Reload(s, a)) => {
                        if self.apply(s, a) {
                            return Err(End::Readdress);
                        }
                    }
                    Some(Control::Shutdown) | None => return Err(End::Shutdown),
                },
            }
        }
    }

    fn finish_read(&mut self, r: Result<SourceRead, oneshot::error::RecvError>) {
        let read = r.unwrap_or_else(|_| {
            self.reader.failed(&SourceError::Unavailable {
                message: format!("{}: the reading thread has stopped", self.reader.name()),
            })
        });
        self.agent.read_finished(read, Instant::now());
    }

    /// Applies reloaded settings; true when the master address changed.
    fn apply(&mut self, s: SessionConfig, a: AgentSettings) -> bool {
        // AddAgentCaps is sent when a session opens: a change takes a new session.
        let readdress = s.master != self.cfg.master || s.agent_caps != self.cfg.agent_caps;
        self.backoff = Backoff::new(s.backoff_min, s.backoff_max);
        self.cfg = s;
        self.agent.set_settings(a);
        tracing::info!("configuration reloaded");
        readdress
    }

    fn next_ids(&mut self, session_id: u32) -> HeaderIds {
        self.packet_id = self.packet_id.wrapping_add(1);
        HeaderIds {
            session_id,
            transaction_id: 0,
            packet_id: self.packet_id,
        }
    }

    /// Connects, Opens, Registers and (optionally) adds agent capabilities.
    async fn open_session(&mut self) -> Result<(Connection, u32, FrameReader), SessionError> {
        let conn = Connection::connect(&self.cfg.master)
            .await
            .map_err(SessionError::Connect)?;
        let mut frames = FrameReader::new();
        let root = Oid::from_slice(MEMSTAT_MIB_ROOT);

        let open = Payload::Open {
            timeout: OPEN_TIMEOUT_SECS,
            id: root.clone(),
            descr: descr(),
        };
        // The master's sysUpTime as we last knew it, to tell a restarted master (its uptime
        // went backwards) from a dropped connection.
        let before = self.agent.master_uptime_now(Instant::now());
        let (session_id, error) = self.admin(&conn, &mut frames, 0, open).await?;
        if error != ResError::NO_ERROR {
            return Err(SessionError::Refused("Open", error));
        }
        let after = self.agent.master_uptime_now(Instant::now()).unwrap_or(0);
        let restarted = before.is_some_and(|b| after.saturating_add(100) < b);
        self.agent.new_master_session(restarted);
        let register = Payload::Register {
            timeout: 0,
            priority: 127,
            range_subid: 0,
            subtree: root.clone(),
            upper_bound: None,
        };
        let (_, error) = self.admin(&conn, &mut frames, session_id, register).await?;
        if error != ResError::NO_ERROR {
            return Err(SessionError::Refused("Register", error));
        }
        if self.cfg.agent_caps {
            let caps = Payload::AddAgentCaps {
                id: root.clone(),
                descr: b"MEMSTAT-MIB: kernel memory allocator statistics".to_vec(),
            };
            let (_, error) = self.admin(&conn, &mut frames, session_id, caps).await?;
            // OpenBSD's snmpd answers processingError: not worth failing the session for.
            if error != ResError::NO_ERROR && !self.caps_error_logged {
                self.caps_error_logged = true;
                tracing::warn!(
                    "the master refused AddAgentCaps ({error}); sysORTable will not list MEMSTAT-MIB"
                );
            }
        }
        Ok((conn, session_id, frames))
    }

    /// Sends an administrative PDU and waits for its Response. Returns the session ID from
    /// the Response header and res.error.
    async fn admin(
        &mut self,
        conn: &Connection,
        frames: &mut FrameReader,
        session_id: u32,
        payload: Payload,
    ) -> Result<(u32, ResError), SessionError> {
        let ids = self.next_ids(session_id);
        let kind = payload.pdu_type().name();
        let mut buf = Vec::new();
        Pdu::with_ids(ids, payload).encode(&mut buf);
        conn.write_all(&buf).await.map_err(SessionError::Write)?;
        let deadline = tokio::time::Instant::now() + ADMIN_TIMEOUT;
        loop {
            let frame = tokio::time::timeout_at(deadline, frames.next(conn))
                .await
                .map_err(|_| SessionError::NoResponse(kind))?
                .map_err(SessionError::Connection)?;
            if let Frame::Pdu(Pdu {
                ids: got,
                payload:
                    Payload::Response {
                        sys_uptime, error, ..
                    },
                ..
            }) = frame
            {
                if got.packet_id == ids.packet_id {
                    self.agent.master_uptime(sys_uptime, Instant::now());
                    return Ok((got.session_id, error));
                }
            }
            // Anything else before registration completes is not for us yet.
        }
    }

    /// Applies reloaded settings during a session: a new master address ends it (with a
    /// Close), new Ping settings restart the Ping clock.
    async fn reload(
        &mut self,
        s: SessionConfig,
        a: AgentSettings,
        conn: &Connection,
        session_id: u32,
        next_ping: &mut Option<Instant>,
    ) -> Option<End> {
        if self.apply(s, a) {
            let ids = self.next_ids(session_id);
            let by = tokio::time::Instant::now() + SHUTDOWN_GRACE;
            let _ = close(conn, ids, CloseReason::SHUTDOWN, by).await;
            return Some(End::Readdress);
        }
        let every = self.cfg.ping_interval;
        *next_ping = (!every.is_zero()).then(|| Instant::now() + every);
        None
    }

    /// Serves one connection until it ends.
    async fn serve(
        &mut self,
        conn: Connection,
        session_id: u32,
        mut frames: FrameReader,
        control: &mut mpsc::Receiver<Control>,
    ) -> End {
        let ping_every = self.cfg.ping_interval;
        let mut next_ping = (!ping_every.is_zero()).then(|| Instant::now() + ping_every);
        // (packetID, deadline) of the Ping in flight.
        let mut ping_pending: Option<(u32, Instant)> = None;
        self.alarm.set(None);
        self.notifies.clear();
        loop {
            // A reload that came in during a write.
            if let Some((s, a)) = self.deferred_reload.take() {
                if let Some(end) = self.reload(s, a, &conn, session_id, &mut next_ping).await {
                    return end;
                }
            }
            let ping_wake = match ping_pending {
                Some((_, d)) => Some(d),
                None => next_ping,
            };
            // With Pings on, the periodic work rides on their alarm: expired walk state is
            // no longer honoured anyway, and an idle daemon should wake only to Ping.
            let wake = ping_wake.or_else(|| self.agent.next_tick());
            // Samples for notifications ride on the same alarm. Their deadline moves only
            // when a sample is taken, which is when the alarm has just rung (and is unarmed).
            let wake = match (wake, self.agent.next_sample()) {
                (Some(w), Some(s)) => Some(w.min(s)),
                (w, s) => w.or(s),
            };
            // The Ping deadlines move only on Ping events, so the alarm follows them. The
            // walk-state expiry (the alarm's only job with Pings off) moves a little later
            // with every request of a walk: then only an earlier deadline moves the alarm,
            // and an alarm that rings early finds nothing due and is set again.
            if let Some(w) = wake {
                let moved = match self.alarm.armed() {
                    None => true,
                    Some(a) if ping_wake.is_some() => w != a,
                    Some(a) => w < a,
                };
                if moved {
                    // Never in the past, so that a deadline nothing clears cannot spin.
                    self.alarm
                        .set(Some(w.max(Instant::now() + Duration::from_millis(10))));
                }
            }
            tokio::select! {
                frame = frames.next(&conn) => {
                    let frame = match frame {
                        Ok(f) => f,
                        Err(e) => return End::Lost(SessionError::Connection(e)),
                    };
                    match self.on_frame(&conn, frame, &mut ping_pending, control).await {
                        Ok(()) => {}
                        Err(End::Shutdown) => return self.shut_down(&conn, session_id).await,
                        Err(end) => return end,
                    }
                    // A request's read may have changed memSourceStatus.
                    if self.agent.has_notifications() {
                        match self.send_notifications(&conn, session_id, control).await {
                            Ok(()) => {}
                            Err(End::Shutdown) => return self.shut_down(&conn, session_id).await,
                            Err(end) => return end,
                        }
                    }
                }
                r = async {
                    match self.late_read.as_mut() {
                        Some(rx) => rx.await,
                        None => std::future::pending().await,
                    }
                }, if self.late_read.is_some() => {
                    self.late_read = None;
                    self.finish_read(r);
                    if self.agent.has_notifications() {
                        match self.send_notifications(&conn, session_id, control).await {
                            Ok(()) => {}
                            Err(End::Shutdown) => return self.shut_down(&conn, session_id).await,
                            Err(end) => return end,
                        }
                    }
                }
                _ = self.alarm.rang() => {
                    let mut sampled = self.periodic(control).await;
                    if sampled.is_ok() {
                        sampled = self.send_notifications(&conn, session_id, control).await;
                    }
                    match sampled {
                        Ok(()) => {}
                        Err(End::Shutdown) => return self.shut_down(&conn, session_id).await,
                        Err(end) => return end,
                    }
                    let now = Instant::now();
                    self.agent.tick(now);
                    if let Some((_, d)) = ping_pending {
                        if now >= d {
                            return End::Lost(SessionError::PingUnanswered);
                        }
                    } else if next_ping.is_some_and(|n| now >= n) {
                        let ids = self.next_ids(session_id);
                        let mut buf = Vec::new();
                        Pdu::with_ids(ids, Payload::Ping).encode(&mut buf);
                        match write_watching(
                            &conn,
                            &buf,
                            control,
                            &mut self.deferred_reload,
                            &mut self.stop_by,
                        )
                        .await
                        {
                            Ok(()) => {}
                            Err(End::Shutdown) => return self.shut_down(&conn, session_id).await,
                            Err(end) => return end,
                        }
                        ping_pending = Some((ids.packet_id, now + ADMIN_TIMEOUT));
                        next_ping = Some(now + ping_every);
                    }
                }
                c = control.recv() => match c {
                    Some(Control::Reload(s, a)) => {
                        if let Some(end) = self.reload(s, a, &conn, session_id, &mut next_ping).await {
                            return end;
                        }
                    }
                    Some(Control::Shutdown) | None => {
                        return self.shut_down(&conn, session_id).await;
                    }
                },
            }
        }
    }

    /// One frame from the master: a request goes to the agent, a Response may answer our
    /// Ping, a Close ends the connection.
    async fn on_frame(
        &mut self,
        conn: &Connection,
        frame: Frame,
        ping_pending: &mut Option<(u32, Instant)>,
        control: &mut mpsc::Receiver<Control>,
    ) -> Result<(), End> {
        let pdu = match frame {
            Frame::Pdu(p) => p,
            Frame::Bad(h, e) => {
                tracing::debug!("answering parseError: {e}");
                self.agent.handle_undecodable(&h, &mut self.out);
                return self.send(conn, control).await;
            }
        };
        match &pdu.payload {
            Payload::Response {
                sys_uptime, error, ..
            } => {
                if self.notify_answered(pdu.ids.packet_id, *error) {
                    return Ok(());
                }
                if let Some((id, _)) = *ping_pending {
                    if id == pdu.ids.packet_id {
                        *ping_pending = None;
                        self.agent.master_uptime(*sys_uptime, Instant::now());
                        if *error != ResError::NO_ERROR {
                            return Err(End::Lost(SessionError::PingFailed(*error)));
                        }
                    }
                }
                Ok(())
            }
            Payload::Close { reason } => Err(End::Lost(SessionError::Closed(*reason))),
            _ => match self.agent.handle(&pdu, Instant::now(), true, &mut self.out) {
                Handled::Reply => self.send(conn, control).await,
                Handled::NoReply => Ok(()),
                Handled::NeedsRead => {
                    self.read_within(READ_WAIT, control).await?;
                    if self
                        .agent
                        .handle(&pdu, Instant::now(), false, &mut self.out)
                        == Handled::Reply
                    {
                        self.send(conn, control).await?;
                    }
                    Ok(())
                }
            },
        }
    }

    /// Writes the answer in `self.out`. Err(End::Shutdown): a shutdown came during the
    /// write (which was given until [`SHUTDOWN_GRACE`] after it).
    async fn send(
        &mut self,
        conn: &Connection,
        control: &mut mpsc::Receiver<Control>,
    ) -> Result<(), End> {
        write_watching(
            conn,
            &self.out,
            control,
            &mut self.deferred_reload,
            &mut self.stop_by,
        )
        .await
    }

    /// Sends Close(shutdown), giving up at the shutdown deadline: a master that stopped
    /// reading gets no Close, and SIGTERM still ends the daemon within a second.
    async fn shut_down(&mut self, conn: &Connection, session_id: u32) -> End {
        let by = *self
            .stop_by
            .get_or_insert_with(|| tokio::time::Instant::now() + SHUTDOWN_GRACE);
        let ids = self.next_ids(session_id);
        match close(conn, ids, CloseReason::SHUTDOWN, by).await {
            Ok(()) => tracing::info!("closed the AgentX session"),
            Err(e) => tracing::warn!("sending Close: {e}; leaving without it"),
        }
        End::Shutdown
    }
}

/// Writes `data` while watching the control channel, so that a master that stops reading
/// cannot hold a shutdown for the whole write timeout. A reload that arrives meanwhile is
/// kept in `deferred` for the caller to apply; a shutdown sets `stop_by` (if not set yet)
/// and the write gets until then to finish, after which Err(End::Shutdown) is returned.
async fn write_watching(
    conn: &Connection,
    data: &[u8],
    control: &mut mpsc::Receiver<Control>,
    deferred: &mut Option<(SessionConfig, AgentSettings)>,
    stop_by: &mut Option<tokio::time::Instant>,
) -> Result<(), End> {
    if let Some(by) = *stop_by {
        let _ = conn.write_all_until(data, Some(by)).await;
        return Err(End::Shutdown);
    }
    // Nearly every write goes through at once; only a full socket needs the watch.
    let done = conn
        .write_now(data)
        .map_err(|e| End::Lost(SessionError::Write(e)))?;
    let data = &data[done..];
    if data.is_empty() {
        return Ok(());
    }
    let write = conn.write_all(data);
    tokio::pin!(write);
    loop {
        tokio::select! {
            r = &mut write => {
                return r.map_err(|e| End::Lost(SessionError::Write(e)));
            }
            c = control.recv() => match c {
                Some(Control::Reload(s, a)) => *deferred = Some((s, a)),
                Some(Control::Shutdown) | None => {
                    let by = tokio::time::Instant::now() + SHUTDOWN_GRACE;
                    *stop_by = Some(by);
                    // The write goes on (the Response may still get through) until then.
                    let _ = tokio::time::timeout_at(by, &mut write).await;
                    return Err(End::Shutdown);
                }
            },
        }
    }
}

async fn close(
    conn: &Connection,
    ids: HeaderIds,
    reason: CloseReason,
    by: tokio::time::Instant,
) -> std::io::Result<()> {
    let mut buf = Vec::new();
    Pdu::with_ids(ids, Payload::Close { reason }).encode(&mut buf);
    conn.write_all_until(&buf, Some(by)).await?;
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
