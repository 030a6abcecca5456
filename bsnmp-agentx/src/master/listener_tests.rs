//! The listening socket through a fake bsnmpd: where it is made, what it replaces, when it
//! is made again, and how many connections it lets in.
use super::MAX_CONNECTIONS;
use crate::master::fake_host::*;
use std::io::Read;
use std::os::unix::net::{UnixListener, UnixStream};

#[test]
fn a_socket_left_by_an_earlier_run_is_replaced_and_the_old_one_closed() {
    let mut rig = Rig::new();
    let first = rig.socket.clone();
    let old_watches: Vec<usize> = rig.host.borrow().watched.keys().copied().collect();
    let stale = rig.dir.join("stale");
    drop(UnixListener::bind(&stale).unwrap());
    rig.master.settings.socket = stale.display().to_string();
    rig.master.listen();
    // The old listener unwatched (and closed), one new one watched.
    let watches: Vec<usize> = rig.host.borrow().watched.keys().copied().collect();
    assert_eq!(watches.len(), 1);
    assert!(
        !old_watches.contains(&watches[0]),
        "{old_watches:?} {watches:?}"
    );
    assert!(!first.exists(), "the socket given up is removed");
    rig.socket = stale;
    let mut sub = rig.connect();
    rig.open(&mut sub);
    assert!(rig.host.borrow().stray_unwatches.is_empty());
}

#[test]
fn a_file_that_is_no_socket_is_left_alone_and_not_listened_on() {
    let mut rig = Rig::new();
    let plain = rig.dir.join("plain");
    std::fs::write(&plain, "keep me").unwrap();
    rig.master.settings.socket = plain.display().to_string();
    rig.master.listen();
    assert!(rig.logged("exists and is not a socket"));
    assert_eq!(std::fs::read_to_string(&plain).unwrap(), "keep me");
    assert!(rig.host.borrow().watched.is_empty());
}

#[test]
fn listening_again_with_the_same_settings_keeps_the_listener() {
    let mut rig = Rig::new();
    let before = rig.host.borrow().watched.clone();
    rig.master.listen();
    assert_eq!(rig.host.borrow().watched, before);
    let mut sub = rig.connect();
    rig.open(&mut sub);
}

#[test]
fn a_listener_bsnmpd_will_not_watch_is_logged() {
    let mut rig = Rig::new();
    rig.host.borrow_mut().refuse_watch = true;
    rig.master.settings.socket = rig.dir.join("unwatched").display().to_string();
    rig.master.listen();
    assert!(rig.logged("fd_select refused a listening socket"));
}

#[test]
fn connections_beyond_the_limit_are_accepted_and_closed_at_once() {
    let mut rig = Rig::new();
    let subs: Vec<Sub> = (0..MAX_CONNECTIONS).map(|_| rig.connect()).collect();
    let mut extra = UnixStream::connect(&rig.socket).unwrap();
    extra
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    rig.master.readable(rig.listener_fd());
    let mut rest = Vec::new();
    assert_eq!(
        extra.read_to_end(&mut rest).unwrap(),
        0,
        "closed, nothing said"
    );
    assert!(rig.logged("64 subagent connections already: refusing one"));
    assert_eq!(rig.master.conns.len(), MAX_CONNECTIONS);
    // Those already in are unaffected.
    let mut first = subs.into_iter().next().unwrap();
    rig.open(&mut first);
}
