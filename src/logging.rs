//! Logging: `tracing` to standard error, or to the local syslog daemon.
//!
//! Syslog is spoken directly: one Unix datagram per event to `/dev/log` (Linux) or
//! `/var/run/log` (FreeBSD), formatted RFC 3164-style as `<PRI>memstat-agentx[PID]: message`
//! with facility daemon and a severity taken from the event's level. The syslog daemon adds
//! the timestamp and host name. No syslog crate is needed.
//!
//! Standard error is written through [`LossyWriter`]: a destination that cannot be written
//! (a pipe whose reader has exited, a full disk) loses lines instead of panicking the daemon,
//! and the count of lost lines is logged once writing works again.
//!
//! [`RateLimited`] keeps a condition that repeats (the master is down for an hour) from
//! filling the log: it lets a bounded, exponentially thinning number of lines through.

use std::fmt;
use std::io::{self, IsTerminal, Write};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tracing::{Level, Metadata};
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{reload, Registry};

/// The syslog tag (and the tag daemon(8) is given in the rc.d script).
pub const SYSLOG_TAG: &str = "memstat-agentx";

/// The local syslog socket.
pub const SYSLOG_SOCKET: &str = if cfg!(target_os = "freebsd") {
    "/var/run/log"
} else {
    "/dev/log"
};

/// syslog facility LOG_DAEMON (3), shifted as in `<PRI>`.
const FACILITY_DAEMON: u8 = 3 << 3;

/// Longest datagram sent; FreeBSD's syslogd reads at most 8 KiB per message.
const MAX_DATAGRAM: usize = 8000;

/// The least severe messages logged. One word per level, not per-target directives: the file,
/// the option, check-config and the docs then agree on what is accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

const LEVELS: [(&str, LogLevel); 5] = [
    ("error", LogLevel::Error),
    ("warn", LogLevel::Warn),
    ("info", LogLevel::Info),
    ("debug", LogLevel::Debug),
    ("trace", LogLevel::Trace),
];

impl FromStr for LogLevel {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let level = LEVELS.iter().find(|(name, _)| *name == s).map(|(_, l)| *l);
        level.ok_or_else(|| {
            format!("unknown log level {s:?}: use error, warn, info, debug or trace")
        })
    }
}

impl fmt::Display for LogLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = LEVELS
            .iter()
            .find(|(_, l)| l == self)
            .map_or("info", |(n, _)| n);
        f.write_str(name)
    }
}

/// Where log lines go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogTarget {
    /// Standard error, for the foreground and for supervisors that capture output.
    Stderr,
    /// The local syslog daemon, facility daemon.
    Syslog,
}

impl FromStr for LogTarget {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "stderr" => Ok(LogTarget::Stderr),
            "syslog" => Ok(LogTarget::Syslog),
            _ => Err(format!(
                "unknown log target {s:?}: use \"stderr\" or \"syslog\""
            )),
        }
    }
}

impl fmt::Display for LogTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LogTarget::Stderr => "stderr",
            LogTarget::Syslog => "syslog",
        })
    }
}

/// How long a send may wait for a busy syslog daemon before the line is dropped. The daemon
/// answers snmpd from the threads that log, so it must never stall on logging.
const SEND_TIMEOUT: Duration = Duration::from_millis(100);

/// The handle [`set_level`] changes the installed subscriber's level through. The filter
/// sits directly on the registry under either target, so one handle type serves both.
static LEVEL: OnceLock<reload::Handle<LevelFilter, Registry>> = OnceLock::new();

/// Installs the global subscriber.
///
/// `level` applies to every message, whatever its target (see [`LogLevel`]). For
/// [`LogTarget::Syslog`] the socket is connected now, so a missing syslog daemon is reported
/// here rather than losing lines. Fails if a global subscriber is already installed.
pub fn init(target: LogTarget, level: LogLevel) -> Result<(), String> {
    let (filter, handle) = reload::Layer::new(level_filter(level));
    let stack = tracing_subscriber::registry().with(filter);
    let installed = match target {
        LogTarget::Stderr => stack
            .with(
                tracing_subscriber::fmt::layer()
                    // Never io::stderr itself: tracing-subscriber reports a failed write with
                    // eprintln!, which panics when stderr is a broken pipe.
                    .with_writer(LossyWriter::new(StderrLines))
                    .with_ansi(io::stderr().is_terminal()),
            )
            .try_init(),
        LogTarget::Syslog => {
            let sink = SyslogSink::connect(Path::new(SYSLOG_SOCKET), SYSLOG_TAG)?;
            stack
                .with(
                    tracing_subscriber::fmt::layer()
                        .with_writer(sink)
                        .with_ansi(false)
                        .without_time(),
                )
                .try_init()
        }
    };
    installed.map_err(|e| e.to_string())?;
    let _ = LEVEL.set(handle);
    Ok(())
}

/// Where [`LossyWriter`] puts whole lines; a seam for tests.
pub trait LineSink: Send + 'static {
    fn write_line(&mut self, line: &[u8]) -> io::Result<()>;
}

/// Standard error, one `write_all` per line.
pub struct StderrLines;

impl LineSink for StderrLines {
    fn write_line(&mut self, line: &[u8]) -> io::Result<()> {
        let mut e = io::stderr().lock();
        e.write_all(line)?;
        e.flush()
    }
}

/// A `MakeWriter` that never fails: each event is collected and written as one line; a line
/// that cannot be written is dropped and counted, and the next write that works is preceded
/// by a note of how many were dropped.
pub struct LossyWriter<S> {
    inner: Arc<Mutex<Lossy<S>>>,
}

impl<S> Clone for LossyWriter<S> {
    fn clone(&self) -> Self {
        LossyWriter {
            inner: Arc::clone(&self.inner),
        }
    }
}

struct Lossy<S> {
    sink: S,
    /// Lines lost since the last one that got through.
    dropped: u64,
}

impl<S: LineSink> LossyWriter<S> {
    pub fn new(sink: S) -> Self {
        LossyWriter {
            inner: Arc::new(Mutex::new(Lossy { sink, dropped: 0 })),
        }
    }

    /// Writes one line (newline included), or counts it as dropped.
    pub fn write_line(&self, line: &[u8]) {
        let mut g = match self.inner.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        let st = &mut *g;
        if st.dropped > 0 {
            let note = format!(
                "memstat-agentx: {} log lines were dropped: the log could not be written\n",
                st.dropped
            );
            if st.sink.write_line(note.as_bytes()).is_err() {
                st.dropped += 1;
                return;
            }
            st.dropped = 0;
        }
        if st.sink.write_line(line).is_err() {
            st.dropped += 1;
        }
    }

    /// Lines dropped and not yet reported.
    pub fn dropped(&self) -> u64 {
        match self.inner.lock() {
            Ok(g) => g.dropped,
            Err(poisoned) => poisoned.into_inner().dropped,
        }
    }
}

/// The per-event writer of [`LossyWriter`]: collects the event, writes it when dropped.
pub struct LossyLine<'a, S: LineSink> {
    writer: &'a LossyWriter<S>,
    buf: Vec<u8>,
}

impl<S: LineSink> Write for LossyLine<'_, S> {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(b);
        Ok(b.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<S: LineSink> Drop for LossyLine<'_, S> {
    fn drop(&mut self) {
        if !self.buf.is_empty() {
            self.writer.write_line(&self.buf);
        }
    }
}

impl<'a, S: LineSink> MakeWriter<'a> for LossyWriter<S> {
    type Writer = LossyLine<'a, S>;

    fn make_writer(&'a self) -> Self::Writer {
        LossyLine {
            writer: self,
            buf: Vec::new(),
        }
    }
}

/// Changes the level of the subscriber [`init`] installed (for SIGHUP). The target cannot
/// change without a restart.
pub fn set_level(level: LogLevel) -> Result<(), String> {
    match LEVEL.get() {
        // Reloading also recomputes tracing's global maximum level, so a raised level takes
        // effect at call sites that were already found disabled.
        Some(handle) => handle
            .reload(level_filter(level))
            .map_err(|e| e.to_string()),
        None => Err("logging is not initialised".into()),
    }
}

fn level_filter(level: LogLevel) -> LevelFilter {
    match level {
        LogLevel::Error => LevelFilter::ERROR,
        LogLevel::Warn => LevelFilter::WARN,
        LogLevel::Info => LevelFilter::INFO,
        LogLevel::Debug => LevelFilter::DEBUG,
        LogLevel::Trace => LevelFilter::TRACE,
    }
}

/// What [`init`] would refuse about `target`, without installing anything: `check-config`
/// gives run's verdict on a syslog daemon that is not there.
pub fn check_target(target: LogTarget) -> Result<(), String> {
    match target {
        LogTarget::Stderr => Ok(()),
        LogTarget::Syslog => SyslogSink::connect(Path::new(SYSLOG_SOCKET), SYSLOG_TAG).map(drop),
    }
}

/// The syslog severity of a tracing level.
pub fn severity(level: &Level) -> u8 {
    match *level {
        Level::ERROR => 3, // LOG_ERR
        Level::WARN => 4,  // LOG_WARNING
        Level::INFO => 6,  // LOG_INFO
        _ => 7,            // LOG_DEBUG
    }
}

/// One RFC 3164-style datagram: `<PRI>TAG[PID]: MESSAGE`, without the trailing newline and
/// cut (on a character boundary) to fit [`MAX_DATAGRAM`].
pub fn syslog_datagram(severity: u8, tag: &str, pid: u32, message: &str) -> Vec<u8> {
    let mut out = format!("<{}>{tag}[{pid}]: ", FACILITY_DAEMON | (severity & 7)).into_bytes();
    let mut msg = message.trim_end_matches(['\n', '\r']);
    let room = MAX_DATAGRAM.saturating_sub(out.len());
    if msg.len() > room {
        let mut cut = room;
        while !msg.is_char_boundary(cut) {
            cut -= 1;
        }
        msg = &msg[..cut];
    }
    out.extend_from_slice(msg.as_bytes());
    out
}

/// A `MakeWriter` that sends each event as one datagram to the syslog socket.
#[derive(Clone)]
pub struct SyslogSink {
    inner: Arc<SinkInner>,
}

struct SinkInner {
    path: PathBuf,
    tag: String,
    state: Mutex<SinkState>,
}

struct SinkState {
    socket: Option<UnixDatagram>,
    /// Lines lost since the last one that got through.
    dropped: u64,
}

fn connect(path: &Path) -> io::Result<UnixDatagram> {
    let s = UnixDatagram::unbound()?;
    s.connect(path)?;
    s.set_write_timeout(Some(SEND_TIMEOUT))?;
    Ok(s)
}

impl SyslogSink {
    /// Connects to the syslog socket at `path`; messages carry `tag` and our pid.
    pub fn connect(path: &Path, tag: &str) -> Result<SyslogSink, String> {
        let socket = connect(path).map_err(|e| {
            format!(
                "cannot connect to the syslog socket {}: {e}",
                path.display()
            )
        })?;
        Ok(SyslogSink {
            inner: Arc::new(SinkInner {
                path: path.to_path_buf(),
                tag: tag.to_string(),
                state: Mutex::new(SinkState {
                    socket: Some(socket),
                    dropped: 0,
                }),
            }),
        })
    }

    /// Sends one message. If the syslog daemon was restarted, reconnects once; if it still
    /// fails the line goes to standard error (as a last resort) and is counted as dropped.
    pub fn send(&self, severity: u8, message: &str) {
        let datagram = syslog_datagram(severity, &self.inner.tag, std::process::id(), message);
        let mut state = match self.inner.state.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        if self.try_send(&mut state, &datagram) {
            if state.dropped > 0 {
                let note = format!("{} earlier log messages were lost", state.dropped);
                let d = syslog_datagram(4, &self.inner.tag, std::process::id(), &note);
                if self.try_send(&mut state, &d) {
                    state.dropped = 0;
                }
            }
        } else {
            state.dropped += 1;
            let _ = io::stderr().write_all(&[message.trim_end().as_bytes(), b"\n"].concat());
        }
    }

    fn try_send(&self, state: &mut SinkState, datagram: &[u8]) -> bool {
        for _attempt in 0..2 {
            if state.socket.is_none() {
                state.socket = connect(&self.inner.path).ok();
            }
            let Some(sock) = &state.socket else {
                return false;
            };
            match sock.send(datagram) {
                Ok(_) => return true,
                // The daemon is busy: drop this line rather than stall.
                Err(e)
                    if e.kind() == io::ErrorKind::WouldBlock
                        || e.kind() == io::ErrorKind::TimedOut =>
                {
                    return false
                }
                // ECONNREFUSED, ENOTCONN, ...: syslogd restarted; reconnect and retry once.
                Err(_) => state.socket = None,
            }
        }
        false
    }
}

/// The per-event writer: collects the formatted event and sends it when dropped.
pub struct SyslogLine<'a> {
    sink: &'a SyslogSink,
    severity: u8,
    buf: Vec<u8>,
}

impl Write for SyslogLine<'_> {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(b);
        Ok(b.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for SyslogLine<'_> {
    fn drop(&mut self) {
        if !self.buf.is_empty() {
            self.sink
                .send(self.severity, &String::from_utf8_lossy(&self.buf));
        }
    }
}

impl<'a> MakeWriter<'a> for SyslogSink {
    type Writer = SyslogLine<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        SyslogLine {
            sink: self,
            severity: severity(&Level::INFO),
            buf: Vec::new(),
        }
    }

    fn make_writer_for(&'a self, meta: &Metadata<'_>) -> Self::Writer {
        SyslogLine {
            sink: self,
            severity: severity(meta.level()),
            buf: Vec::new(),
        }
    }
}

/// Lets a repeating condition log a bounded number of lines.
///
/// The first occurrence logs at once; after that the gap between logged lines starts at
/// `min_interval` and doubles up to a cap (10 minutes by default). Each logged line learns
/// how many occurrences were suppressed since the previous one. [`RateLimited::reset`] when
/// the condition clears, so that the next failure is reported immediately.
///
/// ```
/// # use memstat_agentx::logging::RateLimited;
/// # use std::time::{Duration, Instant};
/// let mut rl = RateLimited::new(Duration::from_secs(10));
/// let t0 = Instant::now();
/// assert_eq!(rl.should_log(t0), Some(0));
/// assert_eq!(rl.should_log(t0 + Duration::from_secs(1)), None);
/// assert_eq!(rl.should_log(t0 + Duration::from_secs(10)), Some(1));
/// ```
#[derive(Clone, Debug)]
pub struct RateLimited {
    min: Duration,
    max: Duration,
    /// The gap after the next logged line.
    interval: Duration,
    /// No line before this.
    next: Option<Instant>,
    suppressed: u64,
}

impl RateLimited {
    /// The default cap on the gap between lines.
    pub const DEFAULT_CAP: Duration = Duration::from_secs(600);

    /// First line immediately, then `min_interval`, doubling up to 10 minutes.
    pub fn new(min_interval: Duration) -> Self {
        Self::with_cap(min_interval, Self::DEFAULT_CAP)
    }

    /// As [`RateLimited::new`] with another cap (raised to `min_interval` if below it).
    pub fn with_cap(min_interval: Duration, cap: Duration) -> Self {
        RateLimited {
            min: min_interval,
            max: cap.max(min_interval),
            interval: min_interval,
            next: None,
            suppressed: 0,
        }
    }

    /// Records one occurrence at `now`. `Some(n)`: log it, mentioning the `n` occurrences
    /// suppressed since the last line; `None`: stay quiet.
    pub fn should_log(&mut self, now: Instant) -> Option<u64> {
        if let Some(next) = self.next {
            if now < next {
                self.suppressed += 1;
                return None;
            }
        }
        self.next = Some(now + self.interval);
        self.interval = self.interval.saturating_mul(2).min(self.max);
        Some(std::mem::take(&mut self.suppressed))
    }

    /// Occurrences suppressed since the last logged line (e.g. for a "recovered" message,
    /// read before [`RateLimited::reset`]).
    pub fn suppressed(&self) -> u64 {
        self.suppressed
    }

    /// The condition cleared: the next occurrence logs at once, and the gap starts over.
    pub fn reset(&mut self) {
        self.interval = self.min;
        self.next = None;
        self.suppressed = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_hour_of_failures_logs_few_lines() {
        let mut rl = RateLimited::new(Duration::from_secs(10));
        let t0 = Instant::now();
        let step = Duration::from_millis(250);
        let total = 3600 * 4;
        let mut logged = Vec::new();
        let mut accounted = 0;
        for i in 0..total {
            let now = t0 + step * i;
            if let Some(n) = rl.should_log(now) {
                logged.push(now - t0);
                accounted += n + 1;
            }
        }
        accounted += rl.suppressed();
        assert!(logged.len() < 20, "{} lines: {logged:?}", logged.len());
        assert_eq!(
            accounted,
            u64::from(total),
            "every occurrence is logged or counted"
        );
        let secs: Vec<u64> = logged.iter().map(|d| d.as_secs()).collect();
        assert_eq!(&secs[..6], &[0, 10, 30, 70, 150, 310]);
        // The gap never exceeds the cap.
        for w in secs.windows(2) {
            assert!(w[1] - w[0] <= 600, "{secs:?}");
        }
    }

    #[test]
    fn reset_logs_the_next_failure_at_once() {
        let mut rl = RateLimited::with_cap(Duration::from_secs(1), Duration::from_secs(4));
        let t0 = Instant::now();
        assert_eq!(rl.should_log(t0), Some(0));
        assert_eq!(rl.should_log(t0), None);
        assert_eq!(rl.suppressed(), 1);
        rl.reset();
        assert_eq!(rl.suppressed(), 0);
        assert_eq!(rl.should_log(t0), Some(0));
        assert_eq!(rl.should_log(t0 + Duration::from_millis(999)), None);
        assert_eq!(rl.should_log(t0 + Duration::from_secs(1)), Some(1));
        // 2 s, then capped at 4 s.
        assert_eq!(rl.should_log(t0 + Duration::from_secs(3)), Some(0));
        assert_eq!(rl.should_log(t0 + Duration::from_secs(7)), Some(0));
        assert_eq!(rl.should_log(t0 + Duration::from_secs(10)), None);
        assert_eq!(rl.should_log(t0 + Duration::from_secs(11)), Some(1));
    }

    #[test]
    fn datagram_format() {
        let d = syslog_datagram(6, "memstat-agentx", 42, "hello\n");
        assert_eq!(d, b"<30>memstat-agentx[42]: hello");
        let d = syslog_datagram(severity(&Level::ERROR), "t", 1, "x");
        assert_eq!(d, b"<27>t[1]: x");
        assert_eq!(severity(&Level::WARN), 4);
        assert_eq!(severity(&Level::TRACE), 7);
        // Long messages are cut on a character boundary.
        let long = "é".repeat(10_000);
        let d = syslog_datagram(6, "t", 1, &long);
        assert!(d.len() <= MAX_DATAGRAM);
        assert!(std::str::from_utf8(&d).is_ok());
    }

    #[test]
    fn events_reach_the_syslog_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let server = UnixDatagram::bind(&path).unwrap();
        server
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let sink = SyslogSink::connect(&path, SYSLOG_TAG).unwrap();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(sink.clone())
            .with_ansi(false)
            .without_time()
            .with_max_level(Level::DEBUG)
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(socket = "/var/agentx/master", "master unreachable");
            tracing::debug!("details");
        });
        let mut buf = [0u8; 9000];
        let n = server.recv(&mut buf).unwrap();
        let got = String::from_utf8_lossy(&buf[..n]).into_owned();
        let prefix = format!("<28>memstat-agentx[{}]: ", std::process::id());
        assert!(got.starts_with(&prefix), "{got}");
        assert!(
            got.contains("master unreachable") && !got.ends_with('\n'),
            "{got}"
        );
        let n = server.recv(&mut buf).unwrap();
        let got = String::from_utf8_lossy(&buf[..n]).into_owned();
        assert!(got.starts_with("<31>") && got.contains("details"), "{got}");

        // syslogd restarts: the sink reconnects.
        drop(server);
        std::fs::remove_file(&path).unwrap();
        let server = UnixDatagram::bind(&path).unwrap();
        server
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        sink.send(3, "after restart");
        let n = server.recv(&mut buf).unwrap();
        assert!(String::from_utf8_lossy(&buf[..n]).ends_with("after restart"));
    }

    /// A sink that fails while `broken` is set.
    struct Flaky {
        broken: Arc<Mutex<bool>>,
        got: Arc<Mutex<Vec<String>>>,
    }

    impl LineSink for Flaky {
        fn write_line(&mut self, line: &[u8]) -> io::Result<()> {
            if *self.broken.lock().unwrap() {
                return Err(io::ErrorKind::BrokenPipe.into());
            }
            self.got
                .lock()
                .unwrap()
                .push(String::from_utf8_lossy(line).into_owned());
            Ok(())
        }
    }

    #[test]
    fn a_broken_destination_drops_lines_and_says_how_many_once_it_works() {
        let broken = Arc::new(Mutex::new(false));
        let got = Arc::new(Mutex::new(Vec::new()));
        let w = LossyWriter::new(Flaky {
            broken: broken.clone(),
            got: got.clone(),
        });
        let subscriber = tracing_subscriber::fmt()
            .with_writer(w.clone())
            .with_ansi(false)
            .without_time()
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!("first");
            *broken.lock().unwrap() = true;
            for i in 0..3 {
                tracing::info!("lost {i}");
            }
            assert_eq!(w.dropped(), 3);
            *broken.lock().unwrap() = false;
            tracing::info!("back");
        });
        let got = got.lock().unwrap();
        assert_eq!(got.len(), 3, "{got:?}");
        assert!(got[0].contains("first"), "{got:?}");
        assert!(got[1].contains("3 log lines were dropped"), "{got:?}");
        assert!(got[2].contains("back"), "{got:?}");
        assert_eq!(w.dropped(), 0);
    }

    /// The filter as [`init`] installs it: the level changes under a subscriber in use, both
    /// ways, and a call site already found disabled is written once the level allows it.
    #[test]
    fn a_reloaded_level_applies_at_once() {
        let got = Arc::new(Mutex::new(Vec::new()));
        // Never broken: it only keeps the lines.
        let sink = Flaky {
            broken: Arc::new(Mutex::new(false)),
            got: got.clone(),
        };
        let (filter, handle) = reload::Layer::new(level_filter(LogLevel::Info));
        let subscriber = tracing_subscriber::registry().with(filter).with(
            tracing_subscriber::fmt::layer()
                .with_writer(LossyWriter::new(sink))
                .with_ansi(false)
                .without_time(),
        );
        tracing::subscriber::with_default(subscriber, || {
            let levels = [
                LogLevel::Info,
                LogLevel::Debug,
                LogLevel::Error,
                LogLevel::Warn,
            ];
            for (step, level) in levels.into_iter().enumerate() {
                handle.reload(level_filter(level)).unwrap();
                tracing::debug!("debug {step}");
                tracing::warn!("warn {step}");
            }
        });
        let got = got.lock().unwrap();
        let messages: Vec<&str> = got
            .iter()
            .map(|l| l.trim_end().rsplit(": ").next().unwrap())
            .collect();
        assert_eq!(
            messages,
            ["warn 0", "debug 1", "warn 1", "warn 3"],
            "{got:?}"
        );
    }

    #[test]
    fn syslog_lines_lost_while_the_socket_is_gone_are_counted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let server = UnixDatagram::bind(&path).unwrap();
        let sink = SyslogSink::connect(&path, SYSLOG_TAG).unwrap();
        drop(server);
        std::fs::remove_file(&path).unwrap();
        sink.send(6, "lost one");
        sink.send(6, "lost two");
        let server = UnixDatagram::bind(&path).unwrap();
        server
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        sink.send(6, "back");
        let mut buf = [0u8; 9000];
        let mut lines = Vec::new();
        for _ in 0..2 {
            let n = server.recv(&mut buf).unwrap();
            lines.push(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
        assert!(lines[0].ends_with("back"), "{lines:?}");
        assert!(
            lines[1].ends_with("2 earlier log messages were lost"),
            "{lines:?}"
        );
    }

    #[test]
    fn missing_syslog_socket_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("none");
        let e = SyslogSink::connect(&path, SYSLOG_TAG).err().unwrap();
        assert!(e.contains(&path.display().to_string()), "{e}");
    }
}
