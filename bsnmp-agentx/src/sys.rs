//! The one OS call std does not offer: writing to a socket without SIGPIPE.
//!
//! A write to a socket whose peer has gone raises SIGPIPE. A Rust program ignores SIGPIPE,
//! but this code runs inside bsnmpd, which does not: a subagent that disconnects at the
//! wrong moment would kill the SNMP daemon. send(2) with MSG_NOSIGNAL (Linux, FreeBSD)
//! reports EPIPE instead. Recent versions of std send with MSG_NOSIGNAL too; the module does
//! not depend on the toolchain for it.
use std::io;
use std::os::unix::io::RawFd;

/// Writes all of `buf` to the socket `fd`, as `Write::write_all` would, without SIGPIPE.
/// A non-blocking socket that is full, or a blocking one past its SO_SNDTIMEO, gives
/// `WouldBlock`.
pub fn send_all(fd: RawFd, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        // SAFETY: `buf` is valid for `buf.len()` bytes for the call, and `fd` is a socket the
        // caller owns and keeps open for the call.
        let n = unsafe { libc::send(fd, buf.as_ptr().cast(), buf.len(), libc::MSG_NOSIGNAL) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        buf = &buf[n as usize..];
    }
    Ok(())
}
