//! A do-nothing AgentX subagent, as benches/floor/stub.c: Open, Register, then answer each
//! GetNext under memTypeTable with the next cell of an N-row, 23-column table. The same work
//! per PDU on three loops, chosen by the third argument:
//! - `tokio`: a current-thread runtime, the socket read through `AsyncFd` with the daemon's
//!   rule (a read that did not fill the buffer clears the readiness), so three system calls
//!   per PDU, as the daemon makes;
//! - `epoll`: a loop of its own over edge-triggered epoll, as the C stub;
//! - `block`: blocking reads, no epoll at all.
//!
//! Usage: rust-stub SOCKET [ROWS] [tokio|epoll|block]

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;

const ROOT: [u32; 8] = [1, 3, 6, 1, 4, 1, 32473, 1];

fn put32(b: &mut Vec<u8>, v: u32) {
    b.extend_from_slice(&v.to_be_bytes());
}

fn get32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}

fn header(b: &mut Vec<u8>, ty: u8, session: u32, transaction: u32, packet: u32) {
    b.clear();
    b.extend_from_slice(&[1, ty, 0x10, 0]);
    for v in [session, transaction, packet, 0] {
        put32(b, v);
    }
}

fn oid(b: &mut Vec<u8>, subids: &[u32]) {
    b.extend_from_slice(&[subids.len() as u8, 0, 0, 0]);
    for &s in subids {
        put32(b, s);
    }
}

fn set_length(b: &mut [u8]) {
    let n = (b.len() - 20) as u32;
    b[16..20].copy_from_slice(&n.to_be_bytes());
}

/// Whether `buf[..got]` holds a whole PDU.
fn whole(buf: &[u8], got: usize) -> bool {
    got >= 20 && got >= 20 + get32(buf, 16) as usize
}

fn read_pdu(s: &mut UnixStream, buf: &mut [u8]) {
    let mut got = 0;
    while !whole(buf, got) {
        match s.read(&mut buf[got..]) {
            Ok(0) | Err(_) => std::process::exit(0),
            Ok(n) => got += n,
        }
    }
}

/// The Response to the PDU in `pdu`, in `out`; false when none is due (a Response from the
/// master).
fn answer(pdu: &[u8], session: u32, rows: u32, out: &mut Vec<u8>) -> bool {
    let (transaction, packet) = (get32(pdu, 8), get32(pdu, 12));
    if pdu[1] != 6 {
        if pdu[1] == 18 {
            return false;
        }
        header(out, 18, session, transaction, packet);
        out.extend_from_slice(&[0; 8]);
        set_length(out);
        return true;
    }
    // The first SearchRange's start.
    let p = &pdu[20..];
    let (n, prefix) = (p[0] as usize, p[1]);
    let mut start = [0u32; 140];
    let mut k = 0;
    if prefix != 0 {
        start[..5].copy_from_slice(&[1, 3, 6, 1, u32::from(prefix)]);
        k = 5;
    }
    for i in 0..n.min(140 - k) {
        start[k] = get32(p, 4 + 4 * i);
        k += 1;
    }
    let start = &start[..k];
    let (mut column, mut row, mut end) = (2, 1, false);
    if k >= 12 && start[10] == 1 {
        column = start[11].max(2);
        row = if k >= 13 { start[12] + 1 } else { 1 };
        if row > rows {
            row = 1;
            column += 1;
        }
        end = column > 24;
    }
    header(out, 18, session, transaction, packet);
    out.extend_from_slice(&[0; 8]);
    if end {
        out.extend_from_slice(&[0, 130, 0, 0]);
        oid(out, start);
    } else {
        let mut name = [0u32; 13];
        name[..8].copy_from_slice(&ROOT);
        name[8..].copy_from_slice(&[1, 2, 1, column, row]);
        out.extend_from_slice(&[0, 70, 0, 0]);
        oid(out, &name);
        put32(out, 2);
        put32(out, row);
    }
    set_length(out);
    true
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rows: u32 = args.get(2).map_or(300, |r| r.parse().expect("ROWS"));
    let mode = args.get(3).map_or("tokio", String::as_str);
    let mut s = UnixStream::connect(&args[1]).expect("the AgentX socket");
    let mut out = Vec::with_capacity(70_000);
    let mut buf = vec![0u8; 70_000];
    header(&mut out, 1, 0, 0, 1);
    out.extend_from_slice(&[5, 0, 0, 0]);
    oid(&mut out, &ROOT);
    put32(&mut out, 4);
    out.extend_from_slice(b"stub");
    set_length(&mut out);
    s.write_all(&out).unwrap();
    read_pdu(&mut s, &mut buf);
    let session = get32(&buf, 4);
    header(&mut out, 3, session, 0, 2);
    out.extend_from_slice(&[0, 127, 0, 0]);
    oid(&mut out, &ROOT);
    set_length(&mut out);
    s.write_all(&out).unwrap();
    read_pdu(&mut s, &mut buf);
    match mode {
        "block" => loop {
            read_pdu(&mut s, &mut buf);
            if answer(&buf, session, rows, &mut out) {
                s.write_all(&out).unwrap();
            }
        },
        "epoll" => {
            s.set_nonblocking(true).unwrap();
            // SAFETY: plain calls on descriptors this function owns, with a valid event.
            let ep = unsafe { libc::epoll_create1(0) };
            let mut ev = libc::epoll_event {
                events: (libc::EPOLLIN | libc::EPOLLET) as u32,
                u64: 0,
            };
            // SAFETY: as above.
            unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, s.as_raw_fd(), &mut ev) };
            let wait = |ev: &mut libc::epoll_event| {
                // SAFETY: room for one event, as the count says.
                unsafe { libc::epoll_wait(ep, ev, 1, 15_000) };
            };
            loop {
                wait(&mut ev);
                let mut got = 0;
                while !whole(&buf, got) {
                    match s.read(&mut buf[got..]) {
                        Ok(0) => std::process::exit(0),
                        Ok(n) => got += n,
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => wait(&mut ev),
                        Err(_) => std::process::exit(0),
                    }
                }
                if answer(&buf, session, rows, &mut out) {
                    s.write_all(&out).unwrap();
                }
            }
        }
        _ => {
            s.set_nonblocking(true).unwrap();
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_io()
                .build()
                .unwrap();
            runtime.block_on(async move {
                use tokio::io::{unix::AsyncFd, Interest};
                // SAFETY: the socket is owned by the AsyncFd from here on, and is closed only
                // when it drops.
                let fd = unsafe { AsyncFd::register_with_interest(s, Interest::READABLE) }.unwrap();
                loop {
                    let mut got = 0;
                    while !whole(&buf, got) {
                        let mut ready = fd.readable().await.unwrap();
                        match ready.try_io(|s| s.get_ref().read(&mut buf[got..])) {
                            Ok(Ok(0)) | Ok(Err(_)) => std::process::exit(0),
                            Ok(Ok(n)) => {
                                if n < buf.len() - got {
                                    ready.clear_ready();
                                }
                                got += n;
                            }
                            Err(_would_block) => {}
                        }
                    }
                    if answer(&buf, session, rows, &mut out) {
                        fd.get_ref().write_all(&out).unwrap();
                    }
                }
            });
        }
    }
}
