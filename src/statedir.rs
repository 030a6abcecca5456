//! The state directory's safety rules: who may own it, and one daemon per directory.
//!
//! The daemon may run as root, so anything it opens in the state directory could be a trap
//! planted by whoever else can write there (a symbolic link to a root-only file, a FIFO).
//! The files themselves are opened without following links ([`crate::index`]); this module
//! decides whether the directory may be written to at all:
//! - [`check_owner`]: it must belong to root or to the user the daemon runs as, and no one
//!   else (group, others) may write to it. Otherwise the daemon serves without persisting.
//! - [`lock`]: one daemon per directory, by an exclusive `flock` on [`LOCK_FILE`], which
//!   holds the pid of the daemon that has it. Two daemons saving the same assignments would
//!   lose each other's rows.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The lock file's name inside the state directory.
pub const LOCK_FILE: &str = "memstat-agentx.lock";

/// The most read from the lock file: a pid and a newline.
const LOCK_READ_CAP: u64 = 64;

/// Checks that `dir` is a directory owned by root or by `uid`, and writable by its owner
/// alone (no group or other write bit). Anyone else who can write there could plant links
/// that a root daemon would write through, or swap the files it relies on.
pub fn check_owner(dir: &Path, uid: u32) -> Result<(), String> {
    // Follows a link at `dir` itself: what matters is the directory the files land in.
    let meta = std::fs::metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if !meta.is_dir() {
        return Err(format!("{} is not a directory", dir.display()));
    }
    let owner = meta.uid();
    if owner != 0 && owner != uid {
        return Err(format!(
            "state directory {} belongs to uid {owner}, not to root or to the daemon's user \
             (uid {uid}); not writing there",
            dir.display()
        ));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(format!(
            "state directory {} is writable by its group or by others (mode {mode:04o}); \
             not writing there",
            dir.display()
        ));
    }
    Ok(())
}

/// Why the state directory is not used: the daemon then serves with its indexes in memory,
/// and says why in memSourceLastError while its sources have no error of their own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StateDirProblem {
    /// It was missing and cannot be created.
    CannotCreate(String),
    /// It is not safe to write to (see [`check_owner`]).
    Unsafe(String),
    /// Its lock cannot be taken (a read-only directory, a link or a FIFO in the lock file's
    /// place).
    CannotLock(String),
}

impl std::fmt::Display for StateDirProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StateDirProblem::CannotCreate(e)
            | StateDirProblem::Unsafe(e)
            | StateDirProblem::CannotLock(e) => f.write_str(e),
        }
    }
}

/// Holds the state directory's lock while alive (the lock goes with the descriptor).
#[derive(Debug)]
pub struct StateLock {
    _file: File,
    pub path: PathBuf,
}

/// Why [`lock`] did not take the lock.
#[derive(Debug)]
pub enum LockError {
    /// Another daemon holds it: starting would lose assignments, so the caller exits.
    Busy(String),
    /// No lock can be taken here (read-only directory, a link or a FIFO in the lock file's
    /// place): serve without persisting.
    Unusable(String),
}

/// Takes the exclusive lock on `dir`/[`LOCK_FILE`] without waiting, and writes our pid in it.
pub fn lock(dir: &Path) -> Result<StateLock, LockError> {
    let path = dir.join(LOCK_FILE);
    let unusable = |e: io::Error| {
        LockError::Unusable(format!(
            "{}: cannot take the state directory's lock ({e})",
            path.display()
        ))
    };
    // O_NOFOLLOW: a link planted in the lock file's place is not opened (nor created through);
    // O_NONBLOCK: a FIFO there cannot hang the open. Not truncated before we hold the lock,
    // so that a running daemon's pid stays readable.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o640)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(&path)
        .map_err(unusable)?;
    let meta = file.metadata().map_err(unusable)?;
    if let Some(kind) = crate::boundedfile::not_regular(&meta) {
        return Err(LockError::Unusable(format!(
            "{} is {kind}, not a regular file; cannot take the state directory's lock",
            path.display()
        )));
    }
    match try_lock_exclusive(&file) {
        Ok(true) => {}
        Ok(false) => {
            let pid = read_pid(&file);
            return Err(LockError::Busy(format!(
                "state directory {} is in use by another memstat-agentx ({}); only one daemon \
                 may use a state directory",
                dir.display(),
                match pid {
                    Some(pid) => format!("pid {pid}"),
                    None => "pid unknown".to_string(),
                }
            )));
        }
        Err(e) => return Err(unusable(e)),
    }
    // Ours now: record the pid for the next daemon's error message (best effort).
    let pid = format!("{}\n", std::process::id());
    if file.set_len(0).is_ok() {
        let _ = file.write_all_at(pid.as_bytes(), 0);
    }
    Ok(StateLock { _file: file, path })
}

fn read_pid(file: &File) -> Option<u32> {
    let mut s = String::new();
    file.take(LOCK_READ_CAP).read_to_string(&mut s).ok()?;
    s.trim().parse().ok()
}

/// flock(LOCK_EX | LOCK_NB): Ok(false) when another open file description holds it.
fn try_lock_exclusive(file: &File) -> io::Result<bool> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock takes a descriptor and integer flags; the descriptor belongs to `file`,
    // which is borrowed (so open) for the duration of the call. No memory is passed.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn uid() -> u32 {
        crate::privdrop::effective_uid()
    }

    #[test]
    fn owner_and_mode_rules() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o750)).unwrap();
        check_owner(p, uid()).unwrap();
        for mode in [0o770, 0o752, 0o777] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
            let e = check_owner(p, uid()).unwrap_err();
            assert!(
                e.contains("writable") && e.contains(&p.display().to_string()),
                "{e}"
            );
        }
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o700)).unwrap();
        if uid() == 0 {
            // Owned by root: fine for any daemon user. Owned by someone else: refused.
            check_owner(p, 65534).unwrap();
            std::os::unix::fs::chown(p, Some(65534), None).unwrap();
            let e = check_owner(p, 0).unwrap_err();
            assert!(e.contains("uid 65534"), "{e}");
            check_owner(p, 65534).unwrap();
        }
        let f = p.join("file");
        std::fs::write(&f, b"").unwrap();
        assert!(check_owner(&f, uid())
            .unwrap_err()
            .contains("not a directory"));
    }

    #[test]
    fn one_lock_per_directory_and_the_pid_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let first = lock(dir.path()).unwrap();
        let text = std::fs::read_to_string(dir.path().join(LOCK_FILE)).unwrap();
        assert_eq!(text.trim(), std::process::id().to_string());
        match lock(dir.path()) {
            Err(LockError::Busy(e)) => assert!(
                e.contains(&dir.path().display().to_string())
                    && e.contains(&format!("pid {}", std::process::id())),
                "{e}"
            ),
            other => panic!("{other:?}"),
        }
        drop(first);
        lock(dir.path()).unwrap();
    }

    #[test]
    fn a_link_or_fifo_as_lock_file_is_not_used() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::write(&target, b"keep").unwrap();
        std::os::unix::fs::symlink(&target, dir.path().join(LOCK_FILE)).unwrap();
        assert!(matches!(lock(dir.path()), Err(LockError::Unusable(_))));
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");

        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join(LOCK_FILE);
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        match lock(dir.path()) {
            Err(LockError::Unusable(e)) => assert!(
                e.contains("is a FIFO, not a regular file") && e.contains(LOCK_FILE),
                "{e}"
            ),
            other => panic!("{other:?}"),
        }
    }
}
