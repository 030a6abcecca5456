//! Reading the source off the runtime thread.
//!
//! A read is the one step of the daemon that may block: a sysctl on a busy kernel, a slow
//! disk, a hung network file system. (A FIFO or a device is refused when it is opened.) The source therefore lives on
//! a thread of its own, and the session waits for a read's result the way it waits for the
//! master: asynchronously, next to its timers and the shutdown signal. A read that never
//! returns holds up only that thread; the process still exits on SIGTERM, since nothing
//! joins it.

use crate::memstat::{SourceError, SourceRead, Sources};
use std::sync::mpsc;
use tokio::sync::oneshot;

/// The handle to the reading thread.
pub struct SourceReader {
    jobs: mpsc::SyncSender<oneshot::Sender<SourceRead>>,
    name: String,
    sources: usize,
}

impl SourceReader {
    /// Moves `source` onto a new thread. Call it after privileges are dropped, so that the
    /// thread has the daemon's final credentials.
    pub fn spawn(mut source: Sources) -> std::io::Result<SourceReader> {
        let name = source.name();
        let sources = source.names().len();
        // One job at a time: the agent never asks for a second read while one is in flight.
        let (jobs, rx) = mpsc::sync_channel::<oneshot::Sender<SourceRead>>(1);
        std::thread::Builder::new()
            .name("source-reader".into())
            .spawn(move || {
                while let Ok(reply) = rx.recv() {
                    // The requester may have stopped waiting; the result is then dropped.
                    let _ = reply.send(source.read());
                }
            })?;
        Ok(SourceReader {
            jobs,
            name,
            sources,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Every source failing with `e`: what a read is when the thread cannot do it.
    pub fn failed(&self, e: &SourceError) -> SourceRead {
        SourceRead::failed(self.sources, e)
    }

    /// Starts a read; the receiver yields its result.
    pub fn read(&self) -> oneshot::Receiver<SourceRead> {
        let (tx, rx) = oneshot::channel();
        if let Err(mpsc::TrySendError::Full(tx) | mpsc::TrySendError::Disconnected(tx)) =
            self.jobs.try_send(tx)
        {
            // Two reads already asked for (the agent asks for one at a time), or the thread
            // is gone: say so rather than wait.
            let e = SourceError::Unavailable {
                message: format!("{}: the previous read has not finished", self.name),
            };
            let _ = tx.send(self.failed(&e));
        }
        rx
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memstat::{MemoryType, SourceChoice};

    #[tokio::test(flavor = "current_thread")]
    async fn reads_on_its_own_thread() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.json");
        let snap = crate::memstat::Snapshot::new(
            0,
            std::time::SystemTime::now(),
            String::new(),
            vec![MemoryType::new(crate::memstat::Allocator::Uma, "z")],
        );
        std::fs::write(&p, crate::memstat::fixture::to_json(&snap)).unwrap();
        let choice: SourceChoice = format!("fixture:{}", p.display()).parse().unwrap();
        let r = SourceReader::spawn(Sources::open(&choice).unwrap()).unwrap();
        let types = r.read().await.unwrap().merged().unwrap();
        assert_eq!(types.types[0].name, "z");
    }
}
