//! The listening sockets, and accepting the connections subagents make to them.
//!
//! A Unix socket (agentxSocket, with its mode and group) and optionally a TCP port on
//! 127.0.0.1 (agentxTcpPort). They are opened at `start` and again whenever a re-read of the
//! config changed their settings, and a failure to open one is logged, not fatal: bsnmpd keeps
//! serving its own MIBs. What a connection does once accepted is `connection`'s and
//! `sessions`' business.
use super::connection::{Conn, Stream};
use super::Master;
use std::io;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::io::{AsRawFd, RawFd};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;

/// At most this many subagent connections at once; more are accepted and closed at once.
pub(super) const MAX_CONNECTIONS: usize = 64;

/// The settings a set of listeners was opened with: socket, mode, group, TCP port.
pub(super) type ListenKey = (String, u32, String, u16);

enum ListenerKind {
    /// The path is kept to remove the socket file on close.
    Unix(UnixListener, PathBuf),
    Tcp(TcpListener),
}

pub(super) struct Listener {
    kind: ListenerKind,
    watch: Option<usize>,
}

impl Listener {
    pub(super) fn fd(&self) -> RawFd {
        match &self.kind {
            ListenerKind::Unix(l, _) => l.as_raw_fd(),
            ListenerKind::Tcp(l) => l.as_raw_fd(),
        }
    }
}

/// A group name or number, from /etc/group.
fn group_id(name: &str) -> Option<u32> {
    if let Ok(n) = name.parse() {
        return Some(n);
    }
    let text = std::fs::read_to_string("/etc/group").ok()?;
    text.lines().find_map(|l| {
        let mut f = l.split(':');
        (f.next()? == name).then_some(())?;
        f.nth(1)?.parse().ok()
    })
}

impl Master {
    fn listen_key(&self) -> ListenKey {
        let s = &self.settings;
        (
            s.socket.clone(),
            s.socket_mode,
            s.socket_group.clone(),
            s.tcp_port,
        )
    }

    /// Opens the listeners the settings ask for (at `start`, and again when a re-read of the
    /// config changed them). Failures are logged; the module keeps running without them.
    pub(crate) fn listen(&mut self) {
        let key = self.listen_key();
        if self.listening_as.as_ref() == Some(&key) {
            return;
        }
        self.close_listeners();
        self.listening_as = Some(key);
        if !self.settings.socket.is_empty() {
            match self.unix_listener() {
                Ok(l) => self.add_listener(l),
                Err(e) => self.log(
                    libc::LOG_ERR,
                    &format!("cannot listen on {}: {e}", self.settings.socket),
                ),
            }
        }
        if self.settings.tcp_port != 0 {
            match TcpListener::bind(("127.0.0.1", self.settings.tcp_port)).and_then(|l| {
                l.set_nonblocking(true)?;
                Ok(l)
            }) {
                Ok(l) => self.add_listener(ListenerKind::Tcp(l)),
                Err(e) => self.log(
                    libc::LOG_ERR,
                    &format!("cannot listen on 127.0.0.1:{}: {e}", self.settings.tcp_port),
                ),
            }
        }
    }

    fn unix_listener(&self) -> io::Result<ListenerKind> {
        use std::os::unix::fs::FileTypeExt;
        let path = PathBuf::from(&self.settings.socket);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        // A socket left by an earlier run is replaced; anything else is not ours to remove.
        if let Ok(m) = std::fs::symlink_metadata(&path) {
            if m.file_type().is_socket() {
                std::fs::remove_file(&path)?;
            } else {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    "exists and is not a socket",
                ));
            }
        }
        let l = UnixListener::bind(&path)?;
        l.set_nonblocking(true)?;
        std::fs::set_permissions(
            &path,
            std::fs::Permissions::from_mode(self.settings.socket_mode),
        )?;
        if !self.settings.socket_group.is_empty() {
            let gid = group_id(&self.settings.socket_group).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("no group {:?}", self.settings.socket_group),
                )
            })?;
            std::os::unix::fs::chown(&path, None, Some(gid))?;
        }
        Ok(ListenerKind::Unix(l, path))
    }

    fn add_listener(&mut self, kind: ListenerKind) {
        let mut l = Listener { kind, watch: None };
        l.watch = self.host.watch(l.fd());
        if l.watch.is_none() {
            self.log(libc::LOG_ERR, "fd_select refused a listening socket");
        }
        self.listeners.push(l);
    }

    pub(super) fn close_listeners(&mut self) {
        for l in std::mem::take(&mut self.listeners) {
            if let Some(w) = l.watch {
                self.host.unwatch(w);
            }
            if let ListenerKind::Unix(_, p) = &l.kind {
                let _ = std::fs::remove_file(p);
            }
        }
        self.listening_as = None;
    }

    /// Accepts every connection waiting on listener `i`.
    pub(super) fn accept(&mut self, i: usize) {
        loop {
            let accepted = match &self.listeners[i].kind {
                ListenerKind::Unix(l, _) => l.accept().map(|(s, _)| (Stream::Unix(s), "unix")),
                ListenerKind::Tcp(l) => l.accept().map(|(s, _)| (Stream::Tcp(s), "tcp")),
            };
            let (stream, peer) = match accepted {
                Ok(x) => x,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    self.log(libc::LOG_WARNING, &format!("accept: {e}"));
                    return;
                }
            };
            if self.conns.len() >= MAX_CONNECTIONS {
                self.log(
                    libc::LOG_WARNING,
                    &format!("{MAX_CONNECTIONS} subagent connections already: refusing one"),
                );
                continue;
            }
            if stream.set_nonblocking(true).is_err() {
                continue;
            }
            let fd = stream.fd();
            let watch = self.host.watch(fd);
            let since = self.host.now();
            self.conns.insert(fd, Conn::new(stream, watch, since, peer));
        }
    }
}

#[cfg(test)]
#[path = "listener_tests.rs"]
mod tests;
