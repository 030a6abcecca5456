//! The control channel: reloads and shutdown, sent by the rest of the process, rung on the
//! daemon's doorbell (`doorbell.rs`) so that a turn of the loop need not poll the channel.

use super::Control;
use crate::doorbell::{Doorbell, CONTROL};
use std::sync::Arc;
use tokio::sync::mpsc;

/// Where the rest of the process sends [`Control`](Control)s to the daemon.
pub struct ControlSender {
    /// `None` only while dropping: the channel must close before the last ring, so that
    /// the daemon, woken, sees it closed.
    tx: Option<mpsc::Sender<Control>>,
    bell: Arc<Doorbell>,
}

impl ControlSender {
    /// Sends `c`, waiting for room; an error when the daemon has stopped.
    pub async fn send(&self, c: Control) -> Result<(), mpsc::error::SendError<Control>> {
        let tx = self.tx.as_ref().expect("set until drop");
        tx.send(c).await?;
        self.bell.ring(CONTROL);
        Ok(())
    }
}

impl Drop for ControlSender {
    fn drop(&mut self) {
        drop(self.tx.take());
        self.bell.ring(CONTROL);
    }
}

/// The daemon's end of the control channel, for [`Daemon::run`](super::Daemon::run).
pub struct Controls {
    rx: mpsc::Receiver<Control>,
    bell: Arc<Doorbell>,
}

/// What the control channel holds now.
pub(crate) enum Polled {
    Control(Control),
    /// Nothing now.
    Empty,
    /// The sender is gone: nothing will come.
    Closed,
}

impl Controls {
    /// The next message without waiting.
    pub(crate) fn poll_now(&mut self) -> Polled {
        match self.rx.try_recv() {
            Ok(c) => {
                // More may be queued behind it: the next turn looks again.
                self.bell.set_quietly(CONTROL);
                Polled::Control(c)
            }
            Err(mpsc::error::TryRecvError::Empty) => Polled::Empty,
            Err(mpsc::error::TryRecvError::Disconnected) => Polled::Closed,
        }
    }

    /// The next message; `None` once the sender is gone. Cancel-safe.
    pub(crate) async fn recv(&mut self) -> Option<Control> {
        loop {
            match self.poll_now() {
                Polled::Control(c) => return Some(c),
                Polled::Closed => return None,
                Polled::Empty => {
                    self.bell.rung(CONTROL).await;
                }
            }
        }
    }
}

/// A control channel of `capacity` messages whose sends ring `bell`.
pub(crate) fn control_channel(bell: Arc<Doorbell>, capacity: usize) -> (ControlSender, Controls) {
    let (tx, rx) = mpsc::channel(capacity);
    (
        ControlSender {
            tx: Some(tx),
            bell: bell.clone(),
        },
        Controls { rx, bell },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(flavor = "current_thread")]
    async fn controls_arrive_in_order_and_the_channel_closes_with_its_sender() {
        let (tx, mut rx) = control_channel(Doorbell::new(), 4);
        tx.send(Control::Shutdown).await.unwrap();
        tx.send(Control::Shutdown).await.unwrap();
        assert!(matches!(rx.poll_now(), Polled::Control(Control::Shutdown)));
        assert!(matches!(rx.recv().await, Some(Control::Shutdown)));
        assert!(matches!(rx.poll_now(), Polled::Empty));
        let waiting = tokio::spawn(async move { rx.recv().await.is_none() });
        tokio::task::yield_now().await;
        drop(tx);
        let closed = tokio::time::timeout(Duration::from_secs(30), waiting)
            .await
            .expect("woken by the sender's drop")
            .unwrap();
        assert!(closed, "a closed channel yields None");
    }
}
