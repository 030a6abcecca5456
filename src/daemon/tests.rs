//! The loop on a controlled clock: tokio's time is paused, so it moves only when everything
//! waits, straight to the next timer (a read's wait, a write's timeout, a backoff). The
//! master is a scripted peer on a Unix socket in a temp dir; the source is the test's hand,
//! which answers each read when the test says so. Nothing here sleeps: every step waits on
//! what the daemon does (a PDU, a read asked for, a connection, the loop ending).

use super::*;
use crate::agent::{SiteSettings, WatchSettings};
use crate::index::StableIndexes;
use crate::memstat::{Allocator, MemoryType};
use agentx_proto::frame::{Frame, Splitter};
use agentx_proto::pdu::{HeaderIds, Payload, Pdu, SearchRange};
use agentx_proto::value::Value;
use std::path::{Path, PathBuf};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio::task::JoinHandle;
use tokio::time::Instant as TokioInstant;

/// Longer than any wait of the daemon's: a step that takes this long has failed.
const LIMIT: Duration = Duration::from_secs(120);

/// The source as the test's hand: each read the daemon starts arrives on `reads`, to be
/// answered (or held) by the test.
struct Hand {
    reads: UnboundedSender<oneshot::Sender<SourceRead>>,
}

impl ReadSource for Hand {
    fn name(&self) -> &str {
        "test"
    }

    fn read(&self) -> oneshot::Receiver<SourceRead> {
        let (tx, rx) = oneshot::channel();
        self.reads.send(tx).expect("the test holds the other end");
        rx
    }

    fn failed(&self, e: &SourceError) -> SourceRead {
        SourceRead::failed(1, e)
    }
}

fn types(names: &[&str]) -> SourceRead {
    let v: Vec<MemoryType> = names
        .iter()
        .map(|n| {
            let mut t = MemoryType::new(Allocator::Slab, *n);
            t.size = Some(64);
            t
        })
        .collect();
    Ok(v).into()
}

fn failing() -> SourceRead {
    let e = SourceError::Unavailable {
        message: "the test's source is failing".into(),
    };
    Err::<Vec<MemoryType>, _>(e).into()
}

fn settings(max_age: Duration) -> AgentSettings {
    let mut notify = WatchSettings::defaults();
    // No samples: the alarm's thread keeps real time, which this test does not control.
    notify.interval = Duration::ZERO;
    AgentSettings {
        max_age,
        walk_window: Duration::from_secs(10),
        notify,
        sites: SiteSettings::default(),
    }
}

fn session_config(master: &Path) -> SessionConfig {
    SessionConfig {
        master: MasterAddr::Unix(master.to_path_buf()),
        ping_interval: Duration::ZERO,
        backoff_min: Duration::from_millis(250),
        backoff_max: Duration::from_secs(2),
        agent_caps: false,
    }
}

use crate::agentx::session::MasterAddr;

/// A daemon running on this runtime, its control channel, and the reads it asks for.
struct Running {
    control: ControlSender,
    reads: UnboundedReceiver<oneshot::Sender<SourceRead>>,
    done: JoinHandle<()>,
}

impl Running {
    fn start(master: &Path, max_age: Duration) -> Running {
        let (reads_tx, reads) = unbounded_channel();
        let agent = Agent::new(
            &["test".into()],
            StableIndexes::in_memory(),
            settings(max_age),
            Instant::now(),
        );
        let daemon = Daemon::new(
            session_config(master),
            agent,
            Box::new(Hand { reads: reads_tx }),
        )
        .expect("the alarm starts");
        let (control, rx) = daemon.control_channel();
        let done = tokio::spawn(daemon.run(rx));
        Running {
            control,
            reads,
            done,
        }
    }

    /// The next read the daemon asks for.
    async fn read_asked(&mut self) -> oneshot::Sender<SourceRead> {
        within(self.reads.recv())
            .await
            .expect("a read is asked for")
    }

    /// The answer to the request `peer` just sent, failing any read the daemon asks for
    /// meanwhile: whether a request reads depends on the walks the agent sees on its own
    /// (real) clock, and either way it must answer from the last good snapshot.
    async fn answer_without_a_good_read(&mut self, peer: &mut Peer) -> (Vec<u32>, Value) {
        let answer = peer.answer();
        tokio::pin!(answer);
        loop {
            tokio::select! {
                a = &mut answer => return a,
                r = self.reads.recv() => {
                    r.expect("the daemon runs").send(failing()).ok();
                }
            }
        }
    }

    async fn send(&self, c: Control) {
        self.control.send(c).await.expect("the daemon listens");
    }

    /// Waits for the loop to end; the time it took from `since`.
    async fn ended(self, since: TokioInstant) -> Duration {
        within(self.done).await.expect("the loop ends cleanly");
        since.elapsed()
    }
}

async fn within<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(LIMIT, f)
        .await
        .expect("the daemon acted within the limit")
}

/// The master's end of one session.
struct Peer {
    stream: UnixStream,
    frames: Splitter,
    session_id: u32,
    packet_id: u32,
}

impl Peer {
    /// Accepts the daemon's connection and answers its Open and Register.
    async fn accept(listener: &UnixListener) -> Peer {
        let (stream, _) = within(listener.accept()).await.expect("accept");
        let mut peer = Peer {
            stream,
            frames: Splitter::new(),
            session_id: 7,
            packet_id: 100,
        };
        for want in ["Open", "Register"] {
            let p = peer.recv().await.expect("an administrative PDU");
            assert_eq!(p.payload.pdu_type().name(), want);
            peer.respond(&p, Vec::new()).await;
        }
        peer
    }

    /// The next PDU from the daemon; `None` at end of stream.
    async fn recv(&mut self) -> Option<Pdu> {
        let mut chunk = [0u8; 4096];
        loop {
            match self
                .frames
                .next_frame()
                .expect("the daemon frames its PDUs")
            {
                Some(Frame::Pdu(p)) => return Some(p),
                Some(Frame::Bad(_, e)) => panic!("the daemon sent a bad PDU: {e}"),
                None => {}
            }
            within(self.stream.readable()).await.expect("readable");
            match self.stream.try_read(&mut chunk) {
                Ok(0) => return None,
                Ok(n) => self.frames.push(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return None,
                Err(e) => panic!("read: {e}"),
            }
        }
    }

    async fn send_bytes(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            within(self.stream.writable()).await.expect("writable");
            match self.stream.try_write(data) {
                Ok(n) => data = &data[n..],
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("write: {e}"),
            }
        }
    }

    async fn respond(&mut self, to: &Pdu, varbinds: Vec<agentx_proto::value::VarBind>) {
        let mut buf = Vec::new();
        let ids = HeaderIds {
            session_id: self.session_id,
            ..to.ids
        };
        Pdu::with_ids(
            ids,
            Payload::Response {
                sys_uptime: 1000,
                error: ResError::NO_ERROR,
                index: 0,
                varbinds,
            },
        )
        .encode(&mut buf);
        self.send_bytes(&buf).await;
    }

    fn get_next_pdu(&mut self, oid: &[u32]) -> Vec<u8> {
        self.packet_id += 1;
        let mut buf = Vec::new();
        Pdu::with_ids(
            HeaderIds {
                session_id: self.session_id,
                transaction_id: self.packet_id,
                packet_id: self.packet_id,
            },
            Payload::GetNext {
                ranges: vec![SearchRange {
                    start: Oid::from_slice(oid),
                    end: Oid::from_slice(&[]),
                    include: false,
                }],
            },
        )
        .encode(&mut buf);
        buf
    }

    async fn get_next(&mut self, oid: &[u32]) {
        let buf = self.get_next_pdu(oid);
        self.send_bytes(&buf).await;
    }

    /// The Response to the last request: its first varbind's name and value. Notifies that
    /// come first (memSourceStale when a read is overdue) are answered and passed over.
    async fn answer(&mut self) -> (Vec<u32>, Value) {
        let p = self.next_not_notify().await.expect("a Response");
        match p.payload {
            Payload::Response { varbinds, .. } => {
                assert_eq!(
                    p.ids.packet_id, self.packet_id,
                    "the answer to the last request"
                );
                let vb = varbinds.into_iter().next().expect("one varbind");
                (vb.name.0, vb.value)
            }
            other => panic!("not a Response: {other:?}"),
        }
    }

    /// The next PDU that is not a Notify, the Notifies before it answered.
    async fn next_not_notify(&mut self) -> Option<Pdu> {
        loop {
            let p = self.recv().await?;
            match p.payload {
                Payload::Notify { .. } => self.respond(&p, Vec::new()).await,
                _ => return Some(p),
            }
        }
    }

    /// The daemon's Close, then the end of the stream.
    async fn closed(&mut self) {
        let p = self.next_not_notify().await.expect("a Close");
        assert!(
            matches!(p.payload, Payload::Close { reason } if reason == CloseReason::SHUTDOWN),
            "{p:?}"
        );
        assert!(self.recv().await.is_none(), "nothing after the Close");
    }
}

/// memTypeName's column: a GetNext from it gets the first row's name.
fn type_names() -> Vec<u32> {
    let mut v = MEMSTAT_MIB_ROOT.to_vec();
    v.extend_from_slice(&[1, 2, 1, 2]);
    v
}

fn text(v: &Value) -> &str {
    match v {
        Value::OctetString(b) => std::str::from_utf8(b).expect("a name"),
        other => panic!("not a name: {other:?}"),
    }
}

fn socket(dir: &tempfile::TempDir, name: &str) -> (PathBuf, UnixListener) {
    let path = dir.path().join(name);
    let listener = UnixListener::bind(&path).expect("bind");
    (path, listener)
}

/// A daemon that read its start-up snapshot (`names`) and has a session with `listener`.
async fn connected(
    path: &Path,
    listener: &UnixListener,
    max_age: Duration,
    names: &[&str],
) -> (Running, Peer) {
    let mut d = Running::start(path, max_age);
    d.read_asked().await.send(types(names)).ok();
    let peer = Peer::accept(listener).await;
    (d, peer)
}

#[tokio::test(start_paused = true)]
async fn a_read_that_outlasts_the_wait_is_answered_from_the_last_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let (path, listener) = socket(&dir, "master");
    let (mut d, mut peer) = connected(&path, &listener, Duration::ZERO, &["a"]).await;

    let asked = TokioInstant::now();
    peer.get_next(&type_names()).await;
    let slow = d.read_asked().await;
    let (name, value) = peer.answer().await;
    let waited = asked.elapsed();
    assert!(
        waited >= READ_WAIT && waited < Duration::from_secs(1),
        "answered after {waited:?}: at the read's wait, under the master's 1 s"
    );
    assert_eq!(
        (name.last(), text(&value)),
        (Some(&1), "a"),
        "the last snapshot"
    );

    // The slow read ends later: its snapshot is installed, and is what a request gets when
    // the next read fails.
    slow.send(types(&["b"])).ok();
    peer.get_next(&type_names()).await;
    let (name, value) = d.answer_without_a_good_read(&mut peer).await;
    assert_eq!(
        (name.last(), text(&value)),
        (Some(&2), "b"),
        "the late read's rows"
    );

    let stop = TokioInstant::now();
    d.send(Control::Shutdown).await;
    peer.closed().await;
    d.ended(stop).await;
}

#[tokio::test(start_paused = true)]
async fn shutdown_during_the_start_up_read_ends_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (path, listener) = socket(&dir, "master");
    let mut d = Running::start(&path, Duration::ZERO);
    let _held = d.read_asked().await;
    let stop = TokioInstant::now();
    d.send(Control::Shutdown).await;
    let took = d.ended(stop).await;
    assert!(
        took < STARTUP_READ_WAIT,
        "{took:?}: the read is not waited for"
    );
    // No session was opened.
    let accepted = tokio::time::timeout(Duration::from_secs(10), listener.accept()).await;
    assert!(accepted.is_err(), "no connection after a shutdown");
}

#[tokio::test(start_paused = true)]
async fn shutdown_with_no_master_ends_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nobody-listens");
    let mut d = Running::start(&path, Duration::ZERO);
    d.read_asked().await.send(types(&["a"])).ok();
    // Let it fail to connect and wait in its backoff.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let stop = TokioInstant::now();
    d.send(Control::Shutdown).await;
    let took = d.ended(stop).await;
    assert!(
        took < Duration::from_millis(250),
        "{took:?}: the backoff is not waited out"
    );
}

#[tokio::test(start_paused = true)]
async fn shutdown_in_a_session_sends_close() {
    let dir = tempfile::tempdir().unwrap();
    let (path, listener) = socket(&dir, "master");
    let (d, mut peer) = connected(&path, &listener, Duration::from_secs(3600), &["a"]).await;
    peer.get_next(&type_names()).await;
    assert_eq!(text(&peer.answer().await.1), "a");
    let stop = TokioInstant::now();
    d.send(Control::Shutdown).await;
    peer.closed().await;
    let took = d.ended(stop).await;
    assert!(took < Duration::from_secs(1), "{took:?}");
}

#[tokio::test(start_paused = true)]
async fn shutdown_while_a_request_waits_for_its_read_sends_close() {
    let dir = tempfile::tempdir().unwrap();
    let (path, listener) = socket(&dir, "master");
    let (mut d, mut peer) = connected(&path, &listener, Duration::ZERO, &["a"]).await;
    peer.get_next(&type_names()).await;
    let _held = d.read_asked().await;
    let stop = TokioInstant::now();
    d.send(Control::Shutdown).await;
    // The request is not answered: the Close comes first, and then nothing.
    peer.closed().await;
    let took = d.ended(stop).await;
    assert!(took < READ_WAIT, "{took:?}: the read is not waited for");
}

#[tokio::test(start_paused = true)]
async fn a_reload_during_a_read_is_applied_and_the_request_answered() {
    let dir = tempfile::tempdir().unwrap();
    let (path, listener) = socket(&dir, "master");
    let (mut d, mut peer) = connected(&path, &listener, Duration::ZERO, &["a"]).await;
    peer.get_next(&type_names()).await;
    let read = d.read_asked().await;
    // A max-age of an hour: after the reload no request needs a read.
    d.send(Control::Reload(
        session_config(&path),
        settings(Duration::from_secs(3600)),
    ))
    .await;
    read.send(types(&["a", "b"])).ok();
    assert_eq!(text(&peer.answer().await.1), "a");
    peer.get_next(&type_names()).await;
    assert_eq!(text(&peer.answer().await.1), "a", "answered without a read");
    assert!(
        d.reads.try_recv().is_err(),
        "no read asked for after the reload"
    );

    // A reload to another master, during a read: Close here, a session there.
    let (other, other_listener) = socket(&dir, "other");
    d.send(Control::Reload(
        session_config(&other),
        settings(Duration::ZERO),
    ))
    .await;
    // The reload is taken between requests; the next request reads.
    peer.closed().await;
    let mut there = Peer::accept(&other_listener).await;
    there.get_next(&type_names()).await;
    let read = d.read_asked().await;
    d.send(Control::Reload(
        session_config(&path),
        settings(Duration::ZERO),
    ))
    .await;
    // The reload moved the daemon back: Close there, a session here again.
    there.closed().await;
    let mut back = Peer::accept(&listener).await;
    // The read the reload interrupted still counts: it is what the next request gets, and
    // until it ends no other read starts.
    read.send(types(&["c"])).ok();
    back.get_next(&type_names()).await;
    let (name, value) = d.answer_without_a_good_read(&mut back).await;
    assert_eq!(
        (name.last(), text(&value)),
        (Some(&3), "c"),
        "the interrupted read's rows"
    );
    let stop = TokioInstant::now();
    d.send(Control::Shutdown).await;
    back.closed().await;
    d.ended(stop).await;
}

/// Requests until the daemon's Responses fill the socket (the master reads none).
async fn flood(peer: &mut Peer) {
    let one = peer.get_next_pdu(&type_names());
    let mut burst = Vec::new();
    for _ in 0..20_000 {
        burst.extend_from_slice(&one);
    }
    // The daemon stops reading once its writes block: the burst's end stays unsent.
    let _ = tokio::time::timeout(Duration::from_secs(1), peer.send_bytes(&burst)).await;
}

#[tokio::test(start_paused = true)]
async fn a_master_that_stops_reading_is_dropped_and_reconnected() {
    let dir = tempfile::tempdir().unwrap();
    let (path, listener) = socket(&dir, "master");
    let (d, mut peer) = connected(&path, &listener, Duration::from_secs(3600), &["a"]).await;
    let since = TokioInstant::now();
    flood(&mut peer).await;
    // The write gives up after its timeout, and the daemon opens a new session.
    let mut again = Peer::accept(&listener).await;
    assert!(
        since.elapsed() >= Duration::from_secs(5),
        "the write was given its timeout: {:?}",
        since.elapsed()
    );
    again.get_next(&type_names()).await;
    assert_eq!(text(&again.answer().await.1), "a");
    drop(peer);
    let stop = TokioInstant::now();
    d.send(Control::Shutdown).await;
    again.closed().await;
    d.ended(stop).await;
}

#[tokio::test(start_paused = true)]
async fn shutdown_while_a_write_is_blocked_ends_within_the_grace() {
    let dir = tempfile::tempdir().unwrap();
    let (path, listener) = socket(&dir, "master");
    let (d, mut peer) = connected(&path, &listener, Duration::from_secs(3600), &["a"]).await;
    flood(&mut peer).await;
    let stop = TokioInstant::now();
    d.send(Control::Shutdown).await;
    let took = d.ended(stop).await;
    assert!(
        took >= SHUTDOWN_GRACE && took < Duration::from_secs(1),
        "{took:?}: the write gets the grace, and the daemon leaves within a second"
    );
}
