//! The OS calls std does not offer: writing to a socket without SIGPIPE, and waiting for a
//! socket with poll(2).
//!
//! A write to a socket whose peer has gone raises SIGPIPE. A Rust program ignores SIGPIPE,
//! but this code runs inside bsnmpd, which does not: a subagent that disconnects at the
//! wrong moment would kill the SNMP daemon. send(2) with MSG_NOSIGNAL (Linux, FreeBSD)
//! reports EPIPE instead. Recent versions of std send with MSG_NOSIGNAL too; the module does
//! not depend on the toolchain for it.
use std::io;
use std::os::unix::io::RawFd;
use std::time::{Duration, Instant};

/// One send(2) of `buf` to the socket `fd` without SIGPIPE; how many bytes went out (at
/// least one). A non-blocking socket that is full gives `WouldBlock`.
fn send_some(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    loop {
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
        return Ok(n as usize);
    }
}

/// Writes all of `buf` to the socket `fd`, as `Write::write_all` would, without SIGPIPE.
/// A non-blocking socket that is full gives `WouldBlock`.
pub(crate) fn send_all(fd: RawFd, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        buf = &buf[send_some(fd, buf)?..];
    }
    Ok(())
}

/// Writes all of `buf` to the non-blocking socket `fd`, waiting with poll(2) while it is
/// full, for at most `timeout` in all: then `TimedOut`, with part of `buf` possibly written.
/// (A time left rather than a deadline: the caller's deadlines are on the master's clock.)
pub(crate) fn send_all_within(fd: RawFd, mut buf: &[u8], timeout: Duration) -> io::Result<()> {
    let deadline = Instant::now() + timeout;
    while !buf.is_empty() {
        match send_some(fd, buf) {
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() || !wait_ready(fd, libc::POLLOUT, left)? {
                    return Err(io::ErrorKind::TimedOut.into());
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Waits until the socket `fd` is ready for `events` (`libc::POLLIN`, `libc::POLLOUT`), or
/// has hung up or failed, for at most `timeout`. `Ok(false)` when the time ran out.
pub(crate) fn wait_ready(fd: RawFd, events: libc::c_short, timeout: Duration) -> io::Result<bool> {
    // Rounded up, so that a wait of less than a millisecond does not become a busy loop.
    let ms = timeout.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as libc::c_int;
    let mut p = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    // SAFETY: `p` is one valid pollfd for the duration of the call, and the count is 1.
    let n = unsafe { libc::poll(&mut p, 1, ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(e);
    }
    Ok(n > 0)
}
