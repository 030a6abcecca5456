//! One alarm clock on a thread of its own, for the session's Pings and periodic work.
//!
//! A timer in tokio's wheel costs every wake-up of the runtime an extra clock read, and on a
//! virtual machine a clock read is expensive: a walk is one wake-up per varbind. The alarm
//! keeps the wheel empty while requests flow: its thread sleeps until the one deadline it
//! holds and then rings the daemon's doorbell. Setting it is a message, so the session sets
//! it only when the deadline really moves, which is at Ping events.

use crate::doorbell::{Doorbell, ALARM};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Instant;

/// The session's end of the alarm.
pub(crate) struct Alarm {
    set: mpsc::Sender<Option<Instant>>,
    bell: Arc<Doorbell>,
    armed: Option<Instant>,
}

impl Alarm {
    /// Starts the alarm's thread, which rings `bell` ([`ALARM`]). It ends when the `Alarm`
    /// is dropped.
    pub(crate) fn start(bell: Arc<Doorbell>) -> std::io::Result<Alarm> {
        let (set, deadlines) = mpsc::channel::<Option<Instant>>();
        let ring = bell.clone();
        std::thread::Builder::new()
            .name("alarm".into())
            .spawn(move || {
                let mut deadline: Option<Instant> = None;
                loop {
                    let next = match deadline {
                        None => deadlines.recv().map_err(|_| ()),
                        Some(d) => {
                            match deadlines
                                .recv_timeout(d.saturating_duration_since(Instant::now()))
                            {
                                Ok(n) => Ok(n),
                                Err(mpsc::RecvTimeoutError::Timeout) => {
                                    // A ring not yet taken says the same: one bit.
                                    ring.ring(ALARM);
                                    Ok(None)
                                }
                                Err(mpsc::RecvTimeoutError::Disconnected) => Err(()),
                            }
                        }
                    };
                    match next {
                        Ok(d) => deadline = d,
                        Err(()) => return,
                    }
                }
            })?;
        Ok(Alarm {
            set,
            bell,
            armed: None,
        })
    }

    /// The deadline the alarm holds, if any.
    pub(crate) fn armed(&self) -> Option<Instant> {
        self.armed
    }

    /// Sets (or, with `None`, clears) the one deadline.
    pub(crate) fn set(&mut self, at: Option<Instant>) {
        if self.armed != at {
            self.armed = at;
            let _ = self.set.send(at);
        }
    }

    /// Waits for the deadline. Cancel-safe. A ring may be late news: the deadline may have
    /// moved since, so the caller checks what is due.
    pub(crate) async fn rang(&mut self) {
        self.bell.rung(ALARM).await;
        self.rang_now();
    }

    /// The ring was taken from the doorbell by the caller: the alarm is unarmed.
    pub(crate) fn rang_now(&mut self) {
        self.armed = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(flavor = "current_thread")]
    async fn rings_at_the_deadline_and_follows_moves() {
        let mut a = Alarm::start(Doorbell::new()).unwrap();
        let t0 = Instant::now();
        a.set(Some(t0 + Duration::from_millis(300)));
        // Moved earlier: rings at the new deadline.
        a.set(Some(t0 + Duration::from_millis(50)));
        a.rang().await;
        let took = t0.elapsed();
        assert!(
            took >= Duration::from_millis(50) && took < Duration::from_millis(250),
            "{took:?}"
        );
        assert_eq!(a.armed(), None);
        // Cleared: no ring.
        a.set(Some(Instant::now() + Duration::from_millis(30)));
        a.set(None);
        let quiet = tokio::time::timeout(Duration::from_millis(150), a.rang()).await;
        assert!(quiet.is_err(), "a cleared alarm rang");
    }
}
