//! The connection to the master: a Unix or TCP stream socket, watched for readability only.
//!
//! net-snmp answers nothing on its own: every wake-up of the daemon should be a request.
//! Tokio's own stream types register for both readable and writable events, so each time
//! the master reads one of our Responses the (edge-triggered) writable event wakes the
//! daemon for nothing, which doubles the context switches of a walk. Here the socket is
//! registered for readable events only, and Responses are written straight to the
//! non-blocking socket: they are small, the send buffer is nearly always empty, and on the
//! rare `WouldBlock` the writer retries after a millisecond until a deadline.
//!
//! [`FrameReader`] reads the byte stream into `agentx_proto`'s splitter, which cuts it into
//! whole PDUs.

pub use crate::master_addr::MasterAddr;
pub(crate) use agentx_proto::frame::Frame;
use agentx_proto::frame::Splitter;
use agentx_proto::pdu::DecodeError;
use std::fmt;
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::unix::io::{AsRawFd, RawFd};
use std::time::Duration;
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// A connected, non-blocking stream socket.
enum Socket {
    Unix(std::os::unix::net::UnixStream),
    Tcp(std::net::TcpStream),
}

impl AsRawFd for Socket {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Socket::Unix(s) => s.as_raw_fd(),
            Socket::Tcp(s) => s.as_raw_fd(),
        }
    }
}

impl Socket {
    fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Socket::Unix(s) => (&*s).read(buf),
            Socket::Tcp(s) => (&*s).read(buf),
        }
    }

    fn write(&self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Socket::Unix(s) => (&*s).write(buf),
            Socket::Tcp(s) => (&*s).write(buf),
        }
    }

    fn shutdown(&self) -> io::Result<()> {
        match self {
            Socket::Unix(s) => s.shutdown(Shutdown::Both),
            Socket::Tcp(s) => s.shutdown(Shutdown::Both),
        }
    }
}

/// How long a Response may wait for room in a full send buffer before the master is
/// considered gone (net-snmp itself gives up after about 6 s).
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// One connection to the master.
pub(crate) struct Connection {
    fd: AsyncFd<Socket>,
}

impl Connection {
    pub(crate) async fn connect(addr: &MasterAddr) -> io::Result<Connection> {
        let socket = match addr {
            MasterAddr::Unix(p) => {
                Socket::Unix(tokio::net::UnixStream::connect(p).await?.into_std()?)
            }
            MasterAddr::Tcp(hp) => {
                let s = tokio::net::TcpStream::connect(hp.as_str()).await?;
                // Every request is one small round trip; Nagle would add delay to each.
                s.set_nodelay(true)?;
                Socket::Tcp(s.into_std()?)
            }
        };
        // into_std leaves the socket non-blocking, as AsyncFd needs.
        // SAFETY: `socket` owns its descriptor and the AsyncFd owns `socket`, so the
        // descriptor stays open and unchanged for as long as it is registered, and
        // `as_raw_fd` always returns that same descriptor.
        let fd = unsafe { AsyncFd::register_with_interest(socket, Interest::READABLE) }?;
        Ok(Connection { fd })
    }

    /// Reads what the socket has into `chunk`; Ok(0) is end of file. Cancel-safe: bytes are
    /// moved only by a synchronous read after readiness. The caller owns `chunk`, so that no
    /// request pays for zeroing a buffer.
    pub(crate) async fn read_some(&self, chunk: &mut [u8]) -> io::Result<usize> {
        loop {
            let mut guard = self.fd.readable().await?;
            match guard.try_io(|s| s.get_ref().read(chunk)) {
                Ok(Ok(n)) => {
                    // A read that did not fill the chunk emptied the socket: say so now and
                    // save the read that would only return WouldBlock. Data that arrives
                    // later is a new readiness event, which this does not clear.
                    if n > 0 && n < chunk.len() {
                        guard.clear_ready();
                    }
                    return Ok(n);
                }
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => continue,
                Ok(Err(e)) => return Err(e),
                // Readiness was stale; wait for the next event.
                Err(_would_block) => continue,
            }
        }
    }

    /// Writes as much of `data` as the socket takes now, without waiting: the usual case,
    /// a small Response into an empty send buffer, needs nothing more.
    pub(crate) fn write_now(&self, data: &[u8]) -> io::Result<usize> {
        let mut done = 0;
        while done < data.len() {
            match self.fd.get_ref().write(&data[done..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }

    /// Writes all of `data`, giving up after [`WRITE_TIMEOUT`] without progress.
    pub(crate) async fn write_all(&self, data: &[u8]) -> io::Result<()> {
        self.write_all_until(data, None).await
    }

    /// Writes all of `data`, giving up (TimedOut) at `deadline`, or [`WRITE_TIMEOUT`] after
    /// the socket first stopped taking data: a shutdown must not wait the full timeout for
    /// a master that stopped reading. The clock is read only once the socket is full: a
    /// clock read is dear on a virtual machine, and nearly every write goes through at once.
    pub(crate) async fn write_all_until(
        &self,
        mut data: &[u8],
        deadline: Option<tokio::time::Instant>,
    ) -> io::Result<()> {
        let mut blocked_since: Option<tokio::time::Instant> = None;
        loop {
            data = &data[self.write_now(data)?..];
            if data.is_empty() {
                return Ok(());
            }
            // The socket is full.
            let now = tokio::time::Instant::now();
            let since = *blocked_since.get_or_insert(now);
            if now >= deadline.unwrap_or(since + WRITE_TIMEOUT) {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "the master has not read for {:.1} s",
                        (now - since).as_secs_f64()
                    ),
                ));
            }
            crate::timers::sleep(Duration::from_millis(1)).await;
        }
    }

    /// Shuts both directions down (the descriptor closes on drop).
    pub(crate) fn shutdown(&self) -> io::Result<()> {
        self.fd.get_ref().shutdown()
    }
}

/// Why a connection cannot go on.
#[derive(Debug)]
pub enum ConnectionError {
    /// The master closed the stream.
    Closed,
    Io(io::Error),
    /// A header we cannot frame by (bad version, oversized or unaligned payload): nothing
    /// after it can be trusted.
    Framing(DecodeError),
}

impl fmt::Display for ConnectionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectionError::Closed => f.write_str("the master closed the connection"),
            ConnectionError::Io(e) => write!(f, "read: {e}"),
            ConnectionError::Framing(e) => write!(f, "framing lost: {e}"),
        }
    }
}

impl std::error::Error for ConnectionError {}

/// Reads whole frames. [`next`](Self::next) is cancel-safe: bytes read before a
/// cancellation stay in the splitter for the next call.
pub(crate) struct FrameReader {
    frames: Splitter,
    /// What one read may bring, allocated (and zeroed) once per connection.
    chunk: Box<[u8]>,
}

impl Default for FrameReader {
    fn default() -> Self {
        FrameReader::new()
    }
}

impl FrameReader {
    pub(crate) fn new() -> FrameReader {
        FrameReader {
            frames: Splitter::new(),
            chunk: vec![0u8; 16 * 1024].into_boxed_slice(),
        }
    }

    /// Hands back a request once answered: the next one is decoded into its memory.
    pub(crate) fn recycle(&mut self, pdu: agentx_proto::pdu::Pdu) {
        self.frames.recycle(pdu);
    }

    /// The next frame from `conn`.
    pub(crate) async fn next(&mut self, conn: &Connection) -> Result<Frame, ConnectionError> {
        loop {
            if let Some(frame) = self.frames.next_frame().map_err(ConnectionError::Framing)? {
                return Ok(frame);
            }
            let n = conn
                .read_some(&mut self.chunk)
                .await
                .map_err(ConnectionError::Io)?;
            if n == 0 {
                return Err(ConnectionError::Closed);
            }
            self.frames.push(&self.chunk[..n]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn reads_and_writes_through_a_unix_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let conn = Connection::connect(&MasterAddr::Unix(path)).await.unwrap();
        let (mut peer, _) = listener.accept().unwrap();
        conn.write_all(b"hello").await.unwrap();
        let mut got = [0u8; 5];
        peer.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"hello");
        peer.write_all(b"abc").unwrap();
        let mut buf = [0u8; 64];
        assert_eq!(conn.read_some(&mut buf).await.unwrap(), 3);
        assert_eq!(&buf[..3], b"abc");
        drop(peer);
        assert_eq!(conn.read_some(&mut buf).await.unwrap(), 0, "EOF");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn frames_split_across_reads_come_out_whole() {
        use agentx_proto::pdu::{Payload, Pdu};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let conn = Connection::connect(&MasterAddr::Unix(path)).await.unwrap();
        let (mut peer, _) = listener.accept().unwrap();
        let mut bytes = Vec::new();
        Pdu::new(1, 2, 3, Payload::Ping).encode(&mut bytes);
        Pdu::new(1, 2, 4, Payload::CommitSet).encode(&mut bytes);
        let mut reader = FrameReader::new();
        peer.write_all(&bytes[..7]).unwrap();
        let wait = tokio::time::timeout(Duration::from_millis(50), reader.next(&conn)).await;
        assert!(wait.is_err(), "half a header is not a frame");
        peer.write_all(&bytes[7..]).unwrap();
        for want in [3, 4] {
            match reader.next(&conn).await.unwrap() {
                Frame::Pdu(p) => assert_eq!(p.ids.packet_id, want),
                Frame::Bad(_, e) => panic!("{e}"),
            }
        }
        drop(peer);
        assert!(matches!(
            reader.next(&conn).await,
            Err(ConnectionError::Closed)
        ));
    }
}
