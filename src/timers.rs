//! Sleeps and timeouts for the daemon's cold paths, kept off the daemon's runtime.
//!
//! While tokio's time driver is enabled, every wake-up of the runtime locks its timer wheel
//! and reads the clock, timers or not; on a walk that is one wake-up per varbind, and the
//! driver cost about 500 of the daemon's 8,800 instructions per request (callgrind). Only
//! rare paths need a timer: the wait for a slow read, a full socket, an administrative
//! PDU's answer, the reconnect backoff, the shutdown grace. So the daemon's runtime is built
//! without the time driver, and [`start`] gives these sleeps a runtime of their own on a
//! thread; a sleep is a task there that the daemon awaits, cancelled when dropped.
//!
//! Without [`start`] (the library's unit tests), sleeps are the calling runtime's own, so
//! tests on tokio's paused clock keep controlling them.

use std::future::Future;
use std::sync::OnceLock;
use tokio::time::Instant;

/// The timers' runtime, once [`start`] ran.
static TIMERS: OnceLock<tokio::runtime::Handle> = OnceLock::new();

/// Starts the timers' thread: from then on every sleep of the process runs there. Once per
/// process; a second call is refused.
pub(crate) fn start() -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()?;
    let handle = runtime.handle().clone();
    std::thread::Builder::new()
        .name("timers".into())
        .spawn(move || runtime.block_on(std::future::pending::<()>()))?;
    TIMERS
        .set(handle)
        .map_err(|_| std::io::Error::other("the timers' thread was started twice"))
}

/// A task on the timers' runtime, aborted when dropped (a sleep nobody waits for any more).
struct Remote(tokio::task::JoinHandle<()>);

impl Drop for Remote {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Waits until `at`.
pub(crate) async fn sleep_until(at: Instant) {
    sleep_until_on(TIMERS.get(), at).await
}

/// Waits until `at` on `timers`, or with none on the caller's runtime.
async fn sleep_until_on(timers: Option<&tokio::runtime::Handle>, at: Instant) {
    match timers {
        None => tokio::time::sleep_until(at).await,
        Some(timers) => {
            // The Sleep is made in the task, where the time driver is: made here it would
            // look for this runtime's.
            let mut task = Remote(timers.spawn(async move { tokio::time::sleep_until(at).await }));
            // An error is the timers' runtime gone, which happens only as the process
            // exits: then the sleep is over too.
            let _ = (&mut task.0).await;
        }
    }
}

/// Waits for `d`.
pub(crate) async fn sleep(d: std::time::Duration) {
    sleep_until(Instant::now() + d).await;
}

/// `at` came before the future finished.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Elapsed;

/// `f`'s output, unless `at` comes first.
pub(crate) async fn timeout_at<F: Future>(at: Instant, f: F) -> Result<F::Output, Elapsed> {
    tokio::select! {
        biased;
        out = f => Ok(out),
        () = sleep_until(at) => Err(Elapsed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn without_the_thread_sleeps_follow_the_callers_clock() {
        let t0 = Instant::now();
        sleep(Duration::from_secs(3600)).await;
        assert!(t0.elapsed() >= Duration::from_secs(3600));
        let never = std::future::pending::<()>();
        assert_eq!(
            timeout_at(Instant::now() + Duration::from_secs(5), never).await,
            Err(Elapsed)
        );
        assert_eq!(
            timeout_at(Instant::now() + Duration::from_secs(5), async { 7 }).await,
            Ok(7)
        );
    }

    /// The runtime the daemon runs on in production has no time driver: a sleep there
    /// must work through a timers' runtime on another thread. ([`start`] itself is for the
    /// whole process, so it is not called here: other tests run on paused clocks.)
    #[test]
    fn on_a_runtime_without_time_a_timers_thread_keeps_the_sleeps() {
        let timers = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let handle = timers.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || timers.block_on(stopped));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .unwrap();
        runtime.block_on(async {
            let t0 = std::time::Instant::now();
            sleep_until_on(Some(&handle), Instant::now() + Duration::from_millis(30)).await;
            assert!(t0.elapsed() >= Duration::from_millis(30));
            // Dropped before its time: the task is aborted, nothing is left running.
            let early = sleep_until_on(Some(&handle), Instant::now() + Duration::from_secs(3600));
            let quick = async {};
            tokio::select! { biased; () = quick => {}, () = early => panic!("an hour passed") }
        });
        stop.send(()).unwrap();
        thread.join().unwrap().unwrap();
    }
}
