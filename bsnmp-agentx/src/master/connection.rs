//! One subagent connection's bytes: reading what the socket has, cutting it into frames,
//! writing PDUs, and closing it.
//!
//! A connection carries sessions (`sessions`), but its life is the socket's: a read of EOF,
//! a write error or a stream that can no longer be framed closes it, and with it every session
//! it carries. Reads never block here (`readable` is fd_select's callback); the one blocking
//! read is `forward`'s, waiting for a Response.
use super::Master;
use crate::registry::SessionId;
use agentx_proto::pdu::{CloseReason, Header, Payload, Pdu, HEADER_LEN};
use std::collections::VecDeque;
use std::io::{self, Read};
use std::net::TcpStream;
use std::os::unix::io::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::time::Instant;

pub(super) enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Stream {
    pub(super) fn fd(&self) -> RawFd {
        match self {
            Stream::Unix(s) => s.as_raw_fd(),
            Stream::Tcp(s) => s.as_raw_fd(),
        }
    }

    pub(super) fn set_nonblocking(&self, nb: bool) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_nonblocking(nb),
            Stream::Tcp(s) => s.set_nonblocking(nb),
        }
    }

    /// Writes without SIGPIPE (see sys.rs): bsnmpd does not ignore the signal.
    pub(super) fn send_all(&self, b: &[u8]) -> io::Result<()> {
        crate::sys::send_all(self.fd(), b)
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

pub(super) struct Conn {
    pub(super) stream: Stream,
    watch: Option<usize>,
    /// Bytes read and not yet cut into frames.
    pub(super) buf: Vec<u8>,
    /// PDUs read while a request waited, handled in `idle`.
    pub(super) queue: VecDeque<Pdu>,
    /// When it was accepted, for the Open grace (`sessions`).
    pub(super) since: Instant,
    /// It has opened a session (it keeps the connection past the Open grace).
    pub(super) opened: bool,
    peer: &'static str,
}

impl Conn {
    pub(super) fn new(
        stream: Stream,
        watch: Option<usize>,
        since: Instant,
        peer: &'static str,
    ) -> Conn {
        Conn {
            stream,
            watch,
            buf: Vec::new(),
            queue: VecDeque::new(),
            since,
            opened: false,
            peer,
        }
    }
}

impl Master {
    /// Reads what is there (non-blocking); closes the connection on EOF or error.
    pub(super) fn read_conn(&mut self, fd: RawFd) {
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
    /// `Ok(Some(Err(header)))` for a frame whose payload does not decode (answered with
    /// parseError), `Err` when the stream cannot be framed any more.
    pub(super) fn next_frame(&mut self, fd: RawFd) -> Result<Option<Result<Pdu, Header>>, String> {
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

    /// Sends one PDU; false (and the connection closed) when the write failed.
    pub(super) fn send(&mut self, fd: RawFd, pdu: &Pdu) -> bool {
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

    /// Closes a connection and drops its sessions; with a `reason`, the first session is sent
    /// a Close first (one is enough: the subagent sees the connection go).
    pub(super) fn close_conn(&mut self, fd: RawFd, reason: Option<CloseReason>, why: &str) {
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
}
