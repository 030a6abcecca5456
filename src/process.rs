//! Process-wide settings made at start-up (a thin OS binding).

/// Ignores SIGHUP until the runtime's handler replaces this disposition: the default
/// action, termination, would turn a reload sent during a slow start into a stop.
pub fn ignore_hangups() {
    // SAFETY: signal with SIG_IGN installs no handler code; it only changes the disposition
    // of SIGHUP for the whole process, which nothing else depends on at this point.
    unsafe {
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
    }
}
