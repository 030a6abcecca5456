//! The daemon's loop: what it waits for, and what it does when each thing happens.
//!
//! One loop over one `select!` waits for the master's next event (while a session is up), a
//! read of the source that a request stopped waiting for, the alarm (Pings, samples for
//! notifications, walk-state expiry) and the control channel (reloads, shutdown). It owns
//! the reads, the notifications, reloads and shutdown; the AgentX session
//! ([`crate::agentx::session`]) only speaks the protocol, and the agent answers a request
//! with no I/O. Every way out of the loop is one [`Stop`], and there is one exit path
//! ([`Daemon::run`]'s end), which Closes the session if there is one.
//!
//! A request that needs a fresh snapshot has the source read on its own thread (see
//! `reader.rs`) and waits for it at most [`READ_WAIT`], next to the control channel: under
//! net-snmp's 1 s AgentX timeout, so the master never re-sends it. A read that takes longer
//! goes on; its result is installed when it arrives.

use crate::agent::{Agent, AgentSettings, Handled};
use crate::agentx::session::{
    Backoff, Event, Opened, Registration, Session, SessionConfig, SessionError,
};
use crate::alarm::Alarm;
use crate::doorbell::{Doorbell, ALARM, CONTROL};
use crate::logging::RateLimited;
use crate::master_addr::{MasterAddr, AGENTX_PERMS_ADVICE};
use crate::memstat::{SourceError, SourceRead};
use crate::mib::{notification_varbinds, NotificationType, MEMSTAT_MIB_ROOT};
use crate::reader::SourceReader;
use agentx_proto::oid::Oid;
use agentx_proto::pdu::{CloseReason, ResError};
use controls::Polled;
pub use controls::{ControlSender, Controls};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

pub(crate) mod controls;

/// What the rest of the process asks of the daemon.
#[derive(Debug)]
pub enum Control {
    /// New settings (SIGHUP). The session is kept unless the master address or agent-caps
    /// changed.
    Reload(SessionConfig, AgentSettings),
    /// Close(shutdown) and return.
    Shutdown,
}

/// How long a request waits for a read of the source before it is answered from the last
/// good snapshot: under net-snmp's 1 s AgentX timeout, so the master never re-sends it.
pub(crate) const READ_WAIT: Duration = Duration::from_millis(800);
/// How long the one read at start-up may take before the daemon starts without it.
const STARTUP_READ_WAIT: Duration = Duration::from_secs(5);
/// How long writes may go on once a shutdown is asked for (the Response in flight, then
/// the Close): a master that stopped reading must not hold SIGTERM for the full write
/// timeout. Under 1 s, leaving room for the process to exit within the second promised.
pub(crate) const SHUTDOWN_GRACE: Duration = Duration::from_millis(700);
/// Notifies whose Response we still look for: the master answers each at once, so a few
/// dozen cover any burst of a sample; older ones are forgotten.
const NOTIFIES_TRACKED: usize = 64;

/// Where the source is read: the reading thread, or a test's stand-in.
pub trait ReadSource: Send {
    /// The sources' names, for messages.
    fn name(&self) -> &str;
    /// Starts a read; the receiver yields its result.
    fn read(&self) -> oneshot::Receiver<SourceRead>;
    /// Every source failing with `e`: what a read is when it cannot be done.
    fn failed(&self, e: &SourceError) -> SourceRead;
}

impl ReadSource for SourceReader {
    fn name(&self) -> &str {
        SourceReader::name(self)
    }

    fn read(&self) -> oneshot::Receiver<SourceRead> {
        SourceReader::read(self)
    }

    fn failed(&self, e: &SourceError) -> SourceRead {
        SourceReader::failed(self, e)
    }
}

/// Why the loop, or a step of it, stops what it is doing.
#[derive(Debug)]
enum Stop {
    /// A shutdown was asked for (or the control channel closed): leave.
    Shutdown,
    /// The session is lost; reconnect after the backoff.
    Lost(SessionError),
    /// The master address (or agent-caps) changed on reload: Close, then reconnect now.
    Readdress,
}

/// The session, if there is one.
enum Link {
    /// No session: the next attempt to open one is at `retry_at`.
    Down {
        retry_at: tokio::time::Instant,
    },
    Up(Session),
}

/// The daemon: the agent, the source's reader, the alarm and the session's settings.
pub struct Daemon {
    cfg: SessionConfig,
    agent: Agent,
    reader: Box<dyn ReadSource>,
    /// Every Response is written from here.
    out: Vec<u8>,
    caps_error_logged: bool,
    /// Reconnection delays; reset by a successful Open, replaced by a reload.
    backoff: Backoff,
    /// A read whose request stopped waiting for it; its result is still used.
    late_read: Option<oneshot::Receiver<SourceRead>>,
    /// Pings and periodic work (see `alarm.rs`).
    alarm: Alarm,
    /// Rung by the alarm and the control channel: what the loop waits on beside the master.
    bell: Arc<Doorbell>,
    /// A reload that arrived while a write was in progress, applied after it.
    deferred_reload: Option<(SessionConfig, AgentSettings)>,
    /// Set when a shutdown is asked for: every write after it gives up at this instant.
    stop_by: Option<tokio::time::Instant>,
    /// (packetID, notification) of the Notifies sent in this session, newest last.
    notifies: VecDeque<(u32, NotificationType)>,
    /// Refusals of Notifies by the master, logged at most every 10 s.
    refusals: RateLimited,
    /// Failures to reach the master, logged at most every 10 s.
    down_log: RateLimited,
}

/// The late read's result, when there is one (never, with none).
async fn late(
    read: &mut Option<oneshot::Receiver<SourceRead>>,
) -> Result<SourceRead, oneshot::error::RecvError> {
    match read.as_mut() {
        Some(rx) => rx.await,
        None => std::future::pending().await,
    }
}

fn registration(agent_caps: bool) -> Registration {
    Registration {
        subtree: Oid::from_slice(MEMSTAT_MIB_ROOT),
        descr: format!(
            "memstat-agentx {}: kernel memory allocator statistics (MEMSTAT-MIB)",
            env!("CARGO_PKG_VERSION")
        )
        .into_bytes(),
        caps_descr: agent_caps.then(|| b"MEMSTAT-MIB: kernel memory allocator statistics".to_vec()),
    }
}

impl Daemon {
    pub fn new(
        cfg: SessionConfig,
        agent: Agent,
        reader: Box<dyn ReadSource>,
    ) -> std::io::Result<Daemon> {
        let bell = Doorbell::new();
        Ok(Daemon {
            alarm: Alarm::start(bell.clone())?,
            bell,
            backoff: Backoff::new(cfg.backoff_min, cfg.backoff_max),
            cfg,
            agent,
            reader,
            out: Vec::with_capacity(64 * 1024),
            caps_error_logged: false,
            late_read: None,
            deferred_reload: None,
            stop_by: None,
            notifies: VecDeque::new(),
            refusals: RateLimited::new(Duration::from_secs(10)),
            down_log: RateLimited::new(Duration::from_secs(10)),
        })
    }

    /// The channel on which the rest of the process controls this daemon: the receiver is
    /// for [`run`](Self::run).
    pub fn control_channel(&self) -> (ControlSender, Controls) {
        controls::control_channel(self.bell.clone(), 4)
    }

    /// Runs until a shutdown is asked for (or the control channel closes). A master that is
    /// absent is waited for.
    pub async fn run(mut self, mut control: Controls) {
        let mut link = Link::Down {
            retry_at: tokio::time::Instant::now(),
        };
        // One read at start-up: it shows at once whether the source works (as the
        // configured user), and it defines the rows "present at start-up". After this,
        // reads happen only on demand.
        let mut result = match self.agent.read_due(Instant::now()) {
            true => self.read_within(STARTUP_READ_WAIT, &mut control).await,
            false => Ok(()),
        };
        loop {
            match result {
                Ok(()) => {}
                Err(Stop::Shutdown) => break,
                Err(why) => link = self.session_ended(link, why).await,
            }
            let step = match &mut link {
                Link::Down { retry_at } => self.while_down(*retry_at, &mut control).await,
                Link::Up(session) => self.serve_once(session, &mut control).await.map(|()| None),
            };
            result = match step {
                Ok(Some(next)) => {
                    link = next;
                    Ok(())
                }
                Ok(None) => Ok(()),
                Err(stop) => Err(stop),
            };
        }
        // The one exit path: a session still up gets its Close.
        if let Link::Up(mut session) = link {
            let by = *self
                .stop_by
                .get_or_insert_with(|| tokio::time::Instant::now() + SHUTDOWN_GRACE);
            match session.close(CloseReason::SHUTDOWN, by).await {
                Ok(()) => tracing::info!("closed the AgentX session"),
                Err(e) => tracing::warn!("sending Close: {e}; leaving without it"),
            }
        }
    }

    /// What follows a session's end (or a reload's new address, with no session): the link
    /// to try next.
    async fn session_ended(&mut self, link: Link, why: Stop) -> Link {
        let now = tokio::time::Instant::now();
        match why {
            Stop::Readdress => {
                if let Link::Up(mut session) = link {
                    let _ = session
                        .close(CloseReason::SHUTDOWN, now + SHUTDOWN_GRACE)
                        .await;
                }
                Link::Down { retry_at: now }
            }
            Stop::Lost(why) => {
                tracing::warn!("lost the AgentX master at {}: {why}", self.cfg.master);
                Link::Down {
                    retry_at: now + self.backoff.next(),
                }
            }
            Stop::Shutdown => link,
        }
    }

    /// With no session: samples go on (a restart of the master must not hide what happened
    /// meanwhile from the counters), and what they find is dropped, until `retry_at`, when a
    /// session is opened (next to the control channel). A new link when it changes.
    async fn while_down(
        &mut self,
        retry_at: tokio::time::Instant,
        control: &mut Controls,
    ) -> Result<Option<Link>, Stop> {
        // Due before a master was there to take them.
        self.drop_notifications();
        self.alarm.set(
            self.agent
                .next_sample()
                .map(|t| t.max(Instant::now() + Duration::from_millis(10))),
        );
        tokio::select! {
            _ = crate::timers::sleep_until(retry_at) => {}
            r = late(&mut self.late_read), if self.late_read.is_some() => {
                self.late_read = None;
                self.finish_read(r);
                return Ok(None);
            }
            _ = self.alarm.rang() => {
                self.periodic(control).await?;
                self.drop_notifications();
                return Ok(None);
            }
            c = control.recv() => {
                self.on_control(c)?;
                return Ok(None);
            }
        }
        // The master's sysUpTime as we last knew it, to tell a restarted master (its uptime
        // went backwards) from a dropped connection.
        let before = self.agent.master_uptime_now(Instant::now());
        let reg = registration(self.cfg.agent_caps);
        let attempt = tokio::select! {
            r = Session::open(&self.cfg, &reg) => r,
            c = control.recv() => {
                // A reload retries at once, with its settings.
                self.on_control(c)?;
                return Ok(Some(Link::Down { retry_at: tokio::time::Instant::now() }));
            }
        };
        match attempt {
            Ok(opened) => Ok(Some(Link::Up(self.session_opened(opened, before)))),
            Err(why) => {
                if let Some(suppressed) = self.down_log.should_log(Instant::now()) {
                    let more = match suppressed {
                        0 => String::new(),
                        n => format!(" ({n} similar failures not logged)"),
                    };
                    tracing::warn!(
                        "cannot reach the AgentX master at {}: {why}{}{more}; retrying",
                        self.cfg.master,
                        socket_hint(&why, &self.cfg.master)
                    );
                }
                Ok(Some(Link::Down {
                    retry_at: tokio::time::Instant::now() + self.backoff.next(),
                }))
            }
        }
    }

    fn session_opened(&mut self, opened: Opened, before: Option<u32>) -> Session {
        let Opened {
            session,
            uptimes,
            caps_refused,
        } = opened;
        for (ticks, at) in uptimes {
            self.agent.master_uptime(ticks, at);
        }
        let after = self.agent.master_uptime_now(Instant::now()).unwrap_or(0);
        let restarted = before.is_some_and(|b| after.saturating_add(100) < b);
        self.agent.new_master_session(restarted);
        if let Some(error) = caps_refused {
            // OpenBSD's snmpd answers processingError: not worth failing the session for.
            if !self.caps_error_logged {
                self.caps_error_logged = true;
                tracing::warn!(
                    "the master refused AddAgentCaps ({error}); sysORTable will not list MEMSTAT-MIB"
                );
            }
        }
        self.backoff.reset();
        self.down_log.reset();
        self.alarm.set(None);
        self.notifies.clear();
        tracing::info!(
            "connected to the AgentX master at {}, session {}",
            self.cfg.master,
            session.id()
        );
        session
    }

    /// A control message while nothing else is in progress: a reload is applied (a new
    /// address is [`Stop::Readdress`]); a shutdown, or the channel closing, stops.
    fn on_control(&mut self, c: Option<Control>) -> Result<(), Stop> {
        match c {
            Some(Control::Reload(s, a)) => match self.apply(s, a) {
                true => Err(Stop::Readdress),
                false => Ok(()),
            },
            Some(Control::Shutdown) | None => Err(Stop::Shutdown),
        }
    }

    /// Applies reloaded settings; true when the master address (or agent-caps, which is
    /// sent when a session opens) changed.
    fn apply(&mut self, s: SessionConfig, a: AgentSettings) -> bool {
        let readdress = s.master != self.cfg.master || s.agent_caps != self.cfg.agent_caps;
        self.backoff = Backoff::new(s.backoff_min, s.backoff_max);
        self.cfg = s;
        self.agent.set_settings(a);
        tracing::info!("configuration reloaded");
        readdress
    }

    /// One turn of a session: the alarm set for what is due next, then whichever comes
    /// first of the master's next event, a late read, the alarm and a control message.
    async fn serve_once(
        &mut self,
        session: &mut Session,
        control: &mut Controls,
    ) -> Result<(), Stop> {
        // A reload that came in during a write.
        if let Some((s, a)) = self.deferred_reload.take() {
            self.reload_in_session(session, s, a)?;
        }
        self.arm_alarm(session.ping_deadline());
        // In this order when several are ready: a read that came in is installed before the
        // next request is answered, a shutdown or reload is taken before more requests, and
        // the alarm (ready only when it rang) before the requests of a walk that never
        // pauses. The control channel and the alarm share one doorbell, so that a turn
        // waits on two things, not four.
        tokio::select! {
            biased;
            r = late(&mut self.late_read), if self.late_read.is_some() => {
                self.late_read = None;
                self.finish_read(r);
            }
            rung = self.bell.rung(CONTROL | ALARM) => {
                if rung & CONTROL != 0 {
                    match control.poll_now() {
                        Polled::Control(Control::Reload(s, a)) => {
                            self.reload_in_session(session, s, a)?
                        }
                        Polled::Control(Control::Shutdown) | Polled::Closed => {
                            return Err(Stop::Shutdown)
                        }
                        Polled::Empty => {}
                    }
                }
                if rung & ALARM != 0 {
                    self.alarm.rang_now();
                    self.periodic(control).await?;
                    self.send_notifications(session, control).await?;
                    let now = Instant::now();
                    self.agent.tick(now);
                    if let Some(ping) = session.ping_due(now).map_err(Stop::Lost)? {
                        self.write(session, &ping, control).await?;
                    }
                }
            }
            event = session.next_event() => {
                let event = event.map_err(Stop::Lost)?;
                self.on_event(session, event, control).await?;
            }
        }
        // A request's read, or a late one, may have changed memSourceStatus.
        self.send_notifications(session, control).await
    }

    /// Reloaded settings during a session: a new master address ends it, new Ping settings
    /// restart the Ping clock.
    fn reload_in_session(
        &mut self,
        session: &mut Session,
        s: SessionConfig,
        a: AgentSettings,
    ) -> Result<(), Stop> {
        if self.apply(s, a) {
            return Err(Stop::Readdress);
        }
        session.set_ping_interval(self.cfg.ping_interval, Instant::now());
        Ok(())
    }

    /// Sets the alarm for the next of: the Ping clock (`ping`), the walk-state expiry (when
    /// Pings are off) and the next sample.
    fn arm_alarm(&mut self, ping: Option<Instant>) {
        // With Pings on, the periodic work rides on their alarm: expired walk state is no
        // longer honoured anyway, and an idle daemon should wake only to Ping.
        let wake = ping.or_else(|| self.agent.next_tick());
        // Samples for notifications ride on the same alarm. Their deadline moves only when a
        // sample is taken, which is when the alarm has just rung (and is unarmed).
        let wake = match (wake, self.agent.next_sample()) {
            (Some(w), Some(s)) => Some(w.min(s)),
            (w, s) => w.or(s),
        };
        // The Ping deadlines move only on Ping events, so the alarm follows them. The
        // walk-state expiry (the alarm's only job with Pings off) moves a little later with
        // every request of a walk: then only an earlier deadline moves the alarm, and an
        // alarm that rings early finds nothing due and is set again.
        if let Some(w) = wake {
            let moved = match self.alarm.armed() {
                None => true,
                Some(a) if ping.is_some() => w != a,
                Some(a) => w < a,
            };
            if moved {
                // Never in the past, so that a deadline nothing clears cannot spin.
                self.alarm
                    .set(Some(w.max(Instant::now() + Duration::from_millis(10))));
            }
        }
    }

    /// One event from the master: a request goes to the agent, a Response may answer a
    /// Notify.
    async fn on_event(
        &mut self,
        session: &mut Session,
        event: Event,
        control: &mut Controls,
    ) -> Result<(), Stop> {
        match event {
            Event::Bad(h, e) => {
                tracing::debug!("answering parseError: {e}");
                self.agent.handle_undecodable(&h, &mut self.out);
                self.send_out(session, control).await
            }
            Event::PingAnswered { sys_uptime } => {
                self.agent.master_uptime(sys_uptime, Instant::now());
                Ok(())
            }
            Event::Response {
                packet_id, error, ..
            } => {
                self.notify_answered(packet_id, error);
                Ok(())
            }
            Event::Request(pdu) => {
                let answered = match self.agent.handle(&pdu, Instant::now(), true, &mut self.out) {
                    Handled::Reply => self.send_out(session, control).await,
                    Handled::NoReply => Ok(()),
                    Handled::NeedsRead => {
                        self.read_within(READ_WAIT, control).await?;
                        match self
                            .agent
                            .handle(&pdu, Instant::now(), false, &mut self.out)
                        {
                            Handled::Reply => self.send_out(session, control).await,
                            _ => Ok(()),
                        }
                    }
                };
                session.recycle(pdu);
                answered
            }
        }
    }

    /// Writes the answer in `self.out`.
    async fn send_out(&mut self, session: &Session, control: &mut Controls) -> Result<(), Stop> {
        let out = std::mem::take(&mut self.out);
        let written = self.write(session, &out, control).await;
        self.out = out;
        written
    }

    /// Writes `data` while watching the control channel, so that a master that stops
    /// reading cannot hold a shutdown for the whole write timeout. A reload that arrives
    /// meanwhile is applied after the write; a shutdown gives the write until
    /// [`SHUTDOWN_GRACE`] after it (the Response may still get through), then stops.
    async fn write(
        &mut self,
        session: &Session,
        data: &[u8],
        control: &mut Controls,
    ) -> Result<(), Stop> {
        if let Some(by) = self.stop_by {
            let _ = session.write_until(data, Some(by)).await;
            return Err(Stop::Shutdown);
        }
        // Nearly every write goes through at once; only a full socket needs the watch.
        let lost = |e| Stop::Lost(SessionError::Write(e));
        let done = session.write_now(data).map_err(lost)?;
        let data = &data[done..];
        if data.is_empty() {
            return Ok(());
        }
        let write = session.write_until(data, None);
        tokio::pin!(write);
        loop {
            tokio::select! {
                r = &mut write => return r.map_err(lost),
                c = control.recv() => match c {
                    Some(Control::Reload(s, a)) => self.deferred_reload = Some((s, a)),
                    Some(Control::Shutdown) | None => {
                        let by = tokio::time::Instant::now() + SHUTDOWN_GRACE;
                        self.stop_by = Some(by);
                        let _ = crate::timers::timeout_at(by, &mut write).await;
                        return Err(Stop::Shutdown);
                    }
                },
            }
        }
    }

    /// A sample for notifications, if one is due: the source is read first when a request
    /// would read it now (the same rule, so that samples keep the view bound and the walk
    /// contract), then the newest view is compared with the last sample.
    async fn periodic(&mut self, control: &mut Controls) -> Result<(), Stop> {
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
    /// notification's objects. The master's Response is matched in [`Self::on_event`].
    async fn send_notifications(
        &mut self,
        session: &mut Session,
        control: &mut Controls,
    ) -> Result<(), Stop> {
        if !self.agent.has_notifications() {
            return Ok(());
        }
        let mut due = self.agent.take_notifications();
        while let Some(n) = due.pop_front() {
            let (packet_id, buf) = session.notify(notification_varbinds(&n));
            if let Err(stop) = self.write(session, &buf, control).await {
                // The connection is gone (or going): the rest cannot be sent.
                self.agent.notifications_dropped(due.len() as u64 + 1);
                return Err(stop);
            }
            self.agent.notifications_sent(1);
            tracing::debug!("sent {} (packet {packet_id})", n.kind().name());
            if self.notifies.len() == NOTIFIES_TRACKED {
                self.notifies.pop_front();
            }
            self.notifies.push_back((packet_id, n.kind()));
        }
        Ok(())
    }

    /// The master's Response to one of our Notifies: a refusal is logged.
    fn notify_answered(&mut self, packet_id: u32, error: ResError) {
        let Some(pos) = self.notifies.iter().position(|(p, _)| *p == packet_id) else {
            return;
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
    }

    /// Starts a read of the source and waits for it at most `wait`, next to the control
    /// channel: the master, the timers and reloads wait meanwhile, a shutdown does not. A
    /// read that takes longer goes on; its result is installed when it arrives.
    async fn read_within(&mut self, wait: Duration, control: &mut Controls) -> Result<(), Stop> {
        self.agent.read_started(Instant::now());
        let mut rx = self.reader.read();
        let deadline = crate::timers::sleep(wait);
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
                c = control.recv() => {
                    if let Err(stop) = self.on_control(c) {
                        // A reload to another master goes on with the read: its result is
                        // installed when it comes (the agent reads nothing else until then).
                        self.late_read = Some(rx);
                        return Err(stop);
                    }
                }
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
}

/// What to do about a master's socket this user may not open ([`AGENTX_PERMS_ADVICE`]).
fn socket_hint(why: &SessionError, master: &MasterAddr) -> String {
    match (why, master) {
        (SessionError::Connect(e), MasterAddr::Unix(_))
            if e.kind() == std::io::ErrorKind::PermissionDenied =>
        {
            format!(
                " (this user may not open the socket or its directory: {AGENTX_PERMS_ADVICE}, \
                 as memstat-agentx(8) says)"
            )
        }
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests;
