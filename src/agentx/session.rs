//! The AgentX session: the protocol's side of the connection to the master, and nothing
//! else.
//!
//! Connect, then Open, Register and (optionally) AddAgentCaps, each waited for; then the
//! session hands the daemon what the master sends ([`Event`]s), takes the Responses and
//! Notifies the daemon writes, keeps the Ping clock, and sends Close. It knows nothing of
//! what is served: the subtree to register and the descriptions are the caller's
//! ([`Registration`]). The daemon's loop (`daemon.rs`) decides when to reconnect, with a
//! [`Backoff`] from here; net-snmp never reconnects for us.

pub use super::transport::MasterAddr;
use super::transport::{Connection, ConnectionError, Frame, FrameReader};
use agentx_proto::oid::Oid;
use agentx_proto::pdu::{CloseReason, DecodeError, Header, HeaderIds, Payload, Pdu, ResError};
use agentx_proto::value::VarBind;
use std::fmt;
use std::time::{Duration, Instant};

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

/// How long we wait for the master to answer an administrative PDU (and a Ping).
const ADMIN_TIMEOUT: Duration = Duration::from_secs(5);
/// The Open's o.timeout: honoured by OpenBSD, ignored by net-snmp.
const OPEN_TIMEOUT_SECS: u8 = 5;

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

/// What a session registers: the subtree and the descriptions of the Open and of the
/// AddAgentCaps (`None`: no AddAgentCaps).
#[derive(Clone, Debug)]
pub struct Registration {
    pub subtree: Oid,
    pub descr: Vec<u8>,
    pub caps_descr: Option<Vec<u8>>,
}

/// A session just opened, with what the master said while it was set up.
pub struct Opened {
    pub session: Session,
    /// The master's sysUpTime from each administrative Response, with when it came.
    pub uptimes: Vec<(u32, Instant)>,
    /// The master refused AddAgentCaps with this error (OpenBSD's snmpd answers
    /// processingError): the session still stands.
    pub caps_refused: Option<ResError>,
}

/// What the master sent, for the daemon.
#[derive(Debug)]
pub enum Event {
    /// A request for the subagent to answer (Get, GetNext, GetBulk, a Set's phases, ...).
    Request(Pdu),
    /// A frame whose header was fine and whose payload was not: it is answered parseError.
    Bad(Header, DecodeError),
    /// The master answered our Ping, with its sysUpTime.
    PingAnswered { sys_uptime: u32 },
    /// A Response to something else the daemon sent (a Notify).
    Response {
        packet_id: u32,
        sys_uptime: u32,
        error: ResError,
    },
}

/// An open session with the master.
pub struct Session {
    conn: Connection,
    frames: FrameReader,
    session_id: u32,
    packet_id: u32,
    ping_every: Duration,
    /// When the next Ping is due; `None` with Pings off.
    next_ping: Option<Instant>,
    /// (packetID, deadline) of the Ping in flight.
    ping_pending: Option<(u32, Instant)>,
}

impl Session {
    /// Connects to `cfg.master`, Opens and Registers `reg.subtree`, and adds agent
    /// capabilities when `reg.caps_descr` says so.
    pub async fn open(cfg: &SessionConfig, reg: &Registration) -> Result<Opened, SessionError> {
        let conn = Connection::connect(&cfg.master)
            .await
            .map_err(SessionError::Connect)?;
        let mut session = Session {
            conn,
            frames: FrameReader::new(),
            session_id: 0,
            packet_id: 0,
            ping_every: Duration::ZERO,
            next_ping: None,
            ping_pending: None,
        };
        let mut uptimes = Vec::new();
        let open = Payload::Open {
            timeout: OPEN_TIMEOUT_SECS,
            id: reg.subtree.clone(),
            descr: reg.descr.clone(),
        };
        let (session_id, error) = session.admin(open, &mut uptimes).await?;
        if error != ResError::NO_ERROR {
            return Err(SessionError::Refused("Open", error));
        }
        session.session_id = session_id;
        let register = Payload::Register {
            timeout: 0,
            priority: 127,
            range_subid: 0,
            subtree: reg.subtree.clone(),
            upper_bound: None,
        };
        let (_, error) = session.admin(register, &mut uptimes).await?;
        if error != ResError::NO_ERROR {
            return Err(SessionError::Refused("Register", error));
        }
        let mut caps_refused = None;
        if let Some(descr) = &reg.caps_descr {
            let caps = Payload::AddAgentCaps {
                id: reg.subtree.clone(),
                descr: descr.clone(),
            };
            let (_, error) = session.admin(caps, &mut uptimes).await?;
            caps_refused = (error != ResError::NO_ERROR).then_some(error);
        }
        session.set_ping_interval(cfg.ping_interval, Instant::now());
        Ok(Opened {
            session,
            uptimes,
            caps_refused,
        })
    }

    pub fn id(&self) -> u32 {
        self.session_id
    }

    fn next_ids(&mut self) -> HeaderIds {
        self.packet_id = self.packet_id.wrapping_add(1);
        HeaderIds {
            session_id: self.session_id,
            transaction_id: 0,
            packet_id: self.packet_id,
        }
    }

    /// Sends an administrative PDU and waits for its Response. Returns the session ID from
    /// the Response header and res.error.
    async fn admin(
        &mut self,
        payload: Payload,
        uptimes: &mut Vec<(u32, Instant)>,
    ) -> Result<(u32, ResError), SessionError> {
        let ids = self.next_ids();
        let kind = payload.pdu_type().name();
        let mut buf = Vec::new();
        Pdu::with_ids(ids, payload).encode(&mut buf);
        self.conn
            .write_all(&buf)
            .await
            .map_err(SessionError::Write)?;
        let deadline = tokio::time::Instant::now() + ADMIN_TIMEOUT;
        loop {
            let frame = crate::timers::timeout_at(deadline, self.frames.next(&self.conn))
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
                    uptimes.push((sys_uptime, Instant::now()));
                    return Ok((got.session_id, error));
                }
            }
            // Anything else before registration completes is not for us yet.
        }
    }

    /// The next thing the master sent. Cancel-safe: a frame cut short stays buffered. A
    /// Close, a Ping answered with an error, or the stream ending ends the session.
    pub async fn next_event(&mut self) -> Result<Event, SessionError> {
        let frame = self
            .frames
            .next(&self.conn)
            .await
            .map_err(SessionError::Connection)?;
        let pdu = match frame {
            Frame::Pdu(p) => p,
            Frame::Bad(h, e) => return Ok(Event::Bad(h, e)),
        };
        match pdu.payload {
            Payload::Response {
                sys_uptime, error, ..
            } => {
                if self
                    .ping_pending
                    .is_some_and(|(id, _)| id == pdu.ids.packet_id)
                {
                    self.ping_pending = None;
                    if error != ResError::NO_ERROR {
                        return Err(SessionError::PingFailed(error));
                    }
                    return Ok(Event::PingAnswered { sys_uptime });
                }
                Ok(Event::Response {
                    packet_id: pdu.ids.packet_id,
                    sys_uptime,
                    error,
                })
            }
            Payload::Close { reason } => Err(SessionError::Closed(reason)),
            _ => Ok(Event::Request(pdu)),
        }
    }

    /// Hands back a request from [`Event::Request`] once answered, so that the next one is
    /// decoded into its memory instead of new allocations.
    pub fn recycle(&mut self, request: Pdu) {
        self.frames.recycle(request);
    }

    /// A new Ping interval (0: no Pings), counted from `now`.
    pub fn set_ping_interval(&mut self, every: Duration, now: Instant) {
        self.ping_every = every;
        self.next_ping = (!every.is_zero()).then(|| now + every);
    }

    /// When the session next needs the daemon: a Ping due, or the deadline of the one in
    /// flight.
    pub fn ping_deadline(&self) -> Option<Instant> {
        match self.ping_pending {
            Some((_, d)) => Some(d),
            None => self.next_ping,
        }
    }

    /// The Ping to write now, if one is due; an error if the one in flight is overdue.
    pub fn ping_due(&mut self, now: Instant) -> Result<Option<Vec<u8>>, SessionError> {
        if let Some((_, d)) = self.ping_pending {
            if now >= d {
                return Err(SessionError::PingUnanswered);
            }
            return Ok(None);
        }
        if self.next_ping.is_none_or(|n| now < n) {
            return Ok(None);
        }
        let ids = self.next_ids();
        let mut buf = Vec::new();
        Pdu::with_ids(ids, Payload::Ping).encode(&mut buf);
        self.ping_pending = Some((ids.packet_id, now + ADMIN_TIMEOUT));
        self.next_ping = Some(now + self.ping_every);
        Ok(Some(buf))
    }

    /// A Notify of `varbinds` (snmpTrapOID.0 first), encoded, with its packetID: the
    /// master's Response comes back as an [`Event::Response`] with it.
    pub fn notify(&mut self, varbinds: Vec<VarBind>) -> (u32, Vec<u8>) {
        let ids = self.next_ids();
        let mut buf = Vec::new();
        Pdu::with_ids(ids, Payload::Notify { varbinds }).encode(&mut buf);
        (ids.packet_id, buf)
    }

    /// Writes as much of `data` as the socket takes now, without waiting.
    pub fn write_now(&self, data: &[u8]) -> std::io::Result<usize> {
        self.conn.write_now(data)
    }

    /// Writes all of `data`, giving up at `by` (or after the write timeout without
    /// progress, with `None`).
    pub async fn write_until(
        &self,
        data: &[u8],
        by: Option<tokio::time::Instant>,
    ) -> std::io::Result<()> {
        self.conn.write_all_until(data, by).await
    }

    /// Sends Close(`reason`), giving up at `by`, and shuts the connection down.
    pub async fn close(
        &mut self,
        reason: CloseReason,
        by: tokio::time::Instant,
    ) -> std::io::Result<()> {
        let ids = self.next_ids();
        let mut buf = Vec::new();
        Pdu::with_ids(ids, Payload::Close { reason }).encode(&mut buf);
        self.conn.write_all_until(&buf, Some(by)).await?;
        self.conn.shutdown()
    }
}

/// Jittered exponential backoff between `min` and `max`.
#[derive(Debug)]
pub(crate) struct Backoff {
    min: Duration,
    max: Duration,
    current: Duration,
    seed: u64,
}

impl Backoff {
    pub(crate) fn new(min: Duration, max: Duration) -> Self {
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

    pub(crate) fn reset(&mut self) {
        self.current = self.min;
    }

    /// The next delay: the current step scaled by a random factor in [0.5, 1.0], so that
    /// many subagents restarted together do not reconnect in lockstep.
    pub(crate) fn next(&mut self) -> Duration {
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
