//! What wakes the daemon besides the master: the control channel and the alarm, behind one
//! doorbell (the channel is `daemon/controls.rs`).
//!
//! Each turn of the loop waits for the master's next request next to everything else that
//! can happen, and on a walk there is one turn per varbind. Waiting on a tokio channel per
//! source costs every turn a pass over each channel's lists and a waker registration in
//! each (about a tenth of the daemon's own instructions per request, measured with
//! callgrind). Here the control channel and the alarm set bits in one word and wake the one
//! task that waits: a turn with nothing for it reads the word and checks its waker.

use std::future::Future;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Poll, Waker};

/// Which source rang: a set of these bits.
pub(crate) type Rung = u8;
/// A control message was sent, or the sender went away.
pub(crate) const CONTROL: Rung = 1;
/// The alarm's deadline passed.
pub(crate) const ALARM: Rung = 2;

/// Bits set by other threads, and the waker of the one task that takes them.
#[derive(Default)]
pub(crate) struct Doorbell {
    rung: AtomicU8,
    /// Kept after a wake: the daemon's task keeps one waker, so that a turn finds the same
    /// one already there and clones nothing.
    waker: Mutex<Option<Waker>>,
}

impl Doorbell {
    pub(crate) fn new() -> Arc<Doorbell> {
        Arc::new(Doorbell::default())
    }

    /// Sets `what` and wakes the waiting task.
    pub(crate) fn ring(&self, what: Rung) {
        self.rung.fetch_or(what, Ordering::AcqRel);
        let slot = self.waker.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(w) = slot.as_ref() {
            w.wake_by_ref();
        }
    }

    /// Sets `what` without waking: for the waiting task itself, to look again on its next
    /// turn.
    pub(crate) fn set_quietly(&self, what: Rung) {
        self.rung.fetch_or(what, Ordering::AcqRel);
    }

    /// Takes the bits of `mask` that are set.
    fn take(&self, mask: Rung) -> Rung {
        if self.rung.load(Ordering::Acquire) & mask == 0 {
            return 0;
        }
        self.rung.fetch_and(!mask, Ordering::AcqRel) & mask
    }

    /// Waits until a bit of `mask` is set, and takes those bits. Cancel-safe: bits are taken
    /// only by the poll that returns them.
    pub(crate) fn rung(&self, mask: Rung) -> impl Future<Output = Rung> + '_ {
        std::future::poll_fn(move |cx| {
            let got = self.take(mask);
            if got != 0 {
                return Poll::Ready(got);
            }
            {
                let mut slot = self.waker.lock().unwrap_or_else(PoisonError::into_inner);
                if !slot.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    *slot = Some(cx.waker().clone());
                }
            }
            // A ring between the first look and the registration found no waker, or the
            // old one: look again now that ours is there.
            match self.take(mask) {
                0 => Poll::Pending,
                got => Poll::Ready(got),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(flavor = "current_thread")]
    async fn a_ring_from_another_thread_wakes_the_waiter_with_its_bits_only() {
        let bell = Doorbell::new();
        let other = bell.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            other.ring(ALARM);
        });
        let got = tokio::time::timeout(Duration::from_secs(30), bell.rung(ALARM | CONTROL))
            .await
            .expect("woken");
        assert_eq!(got, ALARM);
        t.join().unwrap();
        // Taken: nothing is left to see.
        assert_eq!(bell.take(ALARM | CONTROL), 0);
        // A bit outside the mask stays for the one who waits for it.
        bell.ring(CONTROL | ALARM);
        assert_eq!(bell.rung(ALARM).await, ALARM);
        assert_eq!(bell.take(CONTROL), CONTROL);
    }
}
