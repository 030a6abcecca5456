//! Least privilege: switch from root to an unprivileged user, for good.
//!
//! The daemon may start as root so that it can open root-only sources (on Linux,
//! /proc/slabinfo is mode 0400; the open descriptor keeps working afterwards). Then
//! [`drop_privileges`] switches to the configured user: its supplementary groups, its primary
//! group, its uid (real, effective and saved), and on Linux it empties every capability set.
//!
//! # Call it before any thread exists
//!
//! Credentials and capabilities are per *thread* in the Linux kernel: the `setuid`, `setgid`
//! and `setgroups` system calls change only the calling thread. glibc and musl hide this by
//! broadcasting the change to every thread of the process (glibc's "setxid" signal), but only
//! for their own wrappers: raw system calls are not broadcast, and `capset(2)` and `prctl(2)`
//! (which have no broadcasting wrapper at all) change the calling thread only. A thread that
//! already exists would therefore keep root's capabilities. So `drop_privileges` must run
//! while the process has a single thread, i.e. before the tokio runtime (or anything else)
//! starts threads; on Linux it checks `/proc/self/task` and refuses to run otherwise. On
//! FreeBSD credentials belong to the process, but the same order is kept.
//!
//! Its `unsafe` blocks are thin bindings of the set*id and passwd calls; every block says
//! why it is sound.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// True if the effective user is root.
pub fn is_root() -> bool {
    // SAFETY: geteuid cannot fail and has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The effective uid: the user the daemon runs as (after [`drop_privileges`]).
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid cannot fail and has no preconditions.
    unsafe { libc::geteuid() }
}

/// A user's identity as found in the password database.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Account {
    pub name: String,
    pub uid: libc::uid_t,
    pub gid: libc::gid_t,
    /// The name for the C calls that take one (getgrouplist).
    c_name: CString,
}

/// Looks `name` up with getpwnam_r (thread-safe; the buffer grows on ERANGE).
pub fn lookup_user(name: &str) -> Result<Account, String> {
    let cname =
        CString::new(name).map_err(|_| format!("user name {name:?} contains a NUL byte"))?;
    // SAFETY: sysconf has no memory-safety preconditions.
    let hint = unsafe { libc::sysconf(libc::_SC_GETPW_R_SIZE_MAX) };
    let mut size = if hint > 0 { hint as usize } else { 1024 };
    loop {
        let mut buf = vec![0 as libc::c_char; size];
        // SAFETY: passwd is a plain C struct for which all-zero bytes are a valid value.
        let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: every pointer is valid for the duration of the call: cname is a
        // NUL-terminated string, pwd and result are live locals, and buf has `size` bytes,
        // which is the length passed. On return, the strings in pwd point into buf, which
        // outlives every use below.
        let rc = unsafe {
            libc::getpwnam_r(
                cname.as_ptr(),
                &mut pwd,
                buf.as_mut_ptr(),
                size,
                &mut result,
            )
        };
        if rc == libc::ERANGE && size < (1 << 20) {
            size *= 2;
            continue;
        }
        if rc != 0 {
            return Err(format!(
                "cannot look up user {name:?}: {}",
                io::Error::from_raw_os_error(rc)
            ));
        }
        if result.is_null() {
            return Err(format!("no such user: {name:?}"));
        }
        return Ok(Account {
            name: name.to_string(),
            uid: pwd.pw_uid,
            gid: pwd.pw_gid,
            c_name: cname,
        });
    }
}

/// The user's groups (primary group included) from getgrouplist.
fn group_list(account: &Account) -> Result<Vec<libc::gid_t>, String> {
    let mut capacity: usize = 32;
    loop {
        let mut groups: Vec<libc::gid_t> = vec![0; capacity];
        let mut n = capacity as libc::c_int;
        // SAFETY: name is NUL-terminated; groups has room for `n` entries, the count passed,
        // and getgrouplist writes at most that many; n is a live local.
        let rc = unsafe {
            libc::getgrouplist(
                account.c_name.as_ptr(),
                account.gid as _,
                groups.as_mut_ptr() as *mut _,
                &mut n,
            )
        };
        if rc >= 0 {
            groups.truncate(n.max(0) as usize);
            if !groups.contains(&account.gid) {
                groups.insert(0, account.gid);
            }
            return Ok(groups);
        }
        if capacity >= 65_536 {
            return Err(format!(
                "cannot list the groups of {:?}: more than {capacity}",
                account.name
            ));
        }
        capacity = (capacity * 2).max(n.max(0) as usize);
    }
}

fn os_err(what: &str) -> String {
    format!("{what}: {}", io::Error::last_os_error())
}

/// The current supplementary groups.
fn current_groups() -> Result<Vec<libc::gid_t>, String> {
    // SAFETY: with a size of 0, getgroups only returns the count and writes nothing.
    let n = unsafe { libc::getgroups(0, std::ptr::null_mut()) };
    if n < 0 {
        return Err(os_err("getgroups"));
    }
    let mut groups: Vec<libc::gid_t> = vec![0; n as usize];
    // SAFETY: groups has room for `n` entries, the size passed.
    let n = unsafe { libc::getgroups(n, groups.as_mut_ptr()) };
    if n < 0 {
        return Err(os_err("getgroups"));
    }
    groups.truncate(n as usize);
    Ok(groups)
}

/// Switches the process to `user` and its groups, irrevocably.
///
/// Must be called while the process has only one thread (see the module documentation);
/// on Linux it fails otherwise. Refuses to "switch" to uid 0. If we are not root, succeeds
/// only when we already are that user (then it just clears capabilities on Linux).
/// On success, real, effective and saved uids and gids are the user's, the supplementary
/// groups are the user's, a check confirms that root cannot be regained, and on Linux the
/// effective, permitted, inheritable and ambient capability sets are empty and
/// `no_new_privs` is set.
pub fn drop_privileges(account: &Account) -> Result<(), String> {
    check_single_threaded()?;
    let user = account.name.as_str();
    if account.uid == 0 {
        return Err(format!(
            "user {user:?} has uid 0: that would keep root privileges; leave the user unset to run as root"
        ));
    }
    // SAFETY: getuid/geteuid cannot fail and have no preconditions.
    let (uid, euid) = unsafe { (libc::getuid(), libc::geteuid()) };
    if euid != 0 {
        if uid == account.uid && euid == account.uid {
            // Already that user (e.g. started by a supervisor as the user): nothing to switch.
            clear_capabilities()?;
            return Ok(());
        }
        return Err(format!(
            "cannot switch to user {user:?}: not running as root (uid {uid}, euid {euid})"
        ));
    }

    let groups = group_list(account)?;
    #[cfg(target_os = "linux")]
    {
        // Do not keep capabilities across the uid change.
        // SAFETY: prctl with integer arguments only; no pointers are involved.
        if unsafe { libc::prctl(libc::PR_SET_KEEPCAPS, 0, 0, 0, 0) } != 0 {
            return Err(os_err("prctl(PR_SET_KEEPCAPS, 0)"));
        }
    }
    // Groups first, while we still may change them; the uid last.
    // SAFETY: the pointer and length describe the live `groups` vector.
    if unsafe { libc::setgroups(groups.len() as _, groups.as_ptr()) } != 0 {
        return Err(os_err(&format!("setgroups({groups:?})")));
    }
    // SAFETY: setgid takes an integer only.
    if unsafe { libc::setgid(account.gid) } != 0 {
        return Err(os_err(&format!("setgid({})", account.gid)));
    }
    // SAFETY: setuid takes an integer only. As root it sets the real, effective and saved uid.
    if unsafe { libc::setuid(account.uid) } != 0 {
        return Err(os_err(&format!("setuid({})", account.uid)));
    }
    clear_capabilities()?;
    verify(account, &groups, user)
}

/// Whether the real user may create entries in `dir` (write and search it), by access(2):
/// `check-config` asks it as the user run would run as, without creating anything.
pub fn may_write_in(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: a NUL-terminated path that lives across the call; access only reads it.
    match unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// Runs `f` in a forked child that first switches to `account` as [`drop_privileges`] does,
/// and returns what it returned: `check-config` tries reads with the daemon's identity
/// without giving up its own. The caller must be single-threaded (a forked child of a
/// threaded process may only call async-signal-safe functions); `drop_privileges` checks it
/// in the child. A failed switch is an error, as it is for `run`.
pub fn in_child_as(
    account: &Account,
    f: impl FnOnce() -> Result<String, String>,
) -> Result<String, String> {
    use std::io::Read;
    use std::os::fd::FromRawFd;
    /// The most of the child's message the parent reads (a pipe holds at least 4 KiB).
    const MESSAGE_CAP: u64 = 4096;
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: fds has room for the two descriptors pipe2 writes. Close-on-exec, so that no
    // program a check might start inherits them.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(os_err("pipe2"));
    }
    // SAFETY: the caller is single-threaded, so the child may run ordinary code; it ends with
    // _exit, never returning into the parent's frames.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: fds[0] is the read end, which the child does not use; fds[1] is the write
        // end, owned by the child alone from here on.
        let mut out = unsafe {
            libc::close(fds[0]);
            std::fs::File::from_raw_fd(fds[1])
        };
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            drop_privileges(account).and_then(|()| f())
        }))
        .unwrap_or_else(|_| Err("the check panicked".into()));
        let (code, message) = match outcome {
            Ok(m) => (0, m),
            Err(m) => (1, m),
        };
        // Within the parent's cap, so the child never blocks on a pipe the parent stopped
        // reading before it waits.
        let cut = message.len().min(MESSAGE_CAP as usize);
        let _ = std::io::Write::write_all(&mut out, &message.as_bytes()[..cut]);
        // SAFETY: _exit ends the child at once, without running the parent's atexit handlers
        // or flushing its inherited stdio buffers twice.
        unsafe { libc::_exit(code) }
    }
    // SAFETY: fds[1] is the write end, which the parent does not use; fds[0] is the read end,
    // owned by the File from here on.
    let mut input = unsafe {
        libc::close(fds[1]);
        std::fs::File::from_raw_fd(fds[0])
    };
    if pid < 0 {
        return Err(os_err("fork"));
    }
    let mut message = Vec::new();
    let _ = input.by_ref().take(MESSAGE_CAP).read_to_end(&mut message);
    let mut status = 0;
    // SAFETY: pid is our child; status is a live local.
    while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
        if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return Err(os_err("waitpid"));
        }
    }
    let message = String::from_utf8_lossy(&message).into_owned();
    match libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        true => Ok(message),
        false if !message.is_empty() => Err(message),
        false => Err(format!(
            "the check as user {:?} ended abnormally",
            account.name
        )),
    }
}

/// Confirms the switch took effect and cannot be undone.
fn verify(account: &Account, groups: &[libc::gid_t], user: &str) -> Result<(), String> {
    let (mut ruid, mut euid, mut suid) = (0, 0, 0);
    let (mut rgid, mut egid, mut sgid) = (0, 0, 0);
    // SAFETY: the pointers are to live locals of the right type.
    let rc = unsafe {
        libc::getresuid(&mut ruid, &mut euid, &mut suid)
            | libc::getresgid(&mut rgid, &mut egid, &mut sgid)
    };
    if rc != 0 {
        return Err(os_err("getresuid/getresgid"));
    }
    let want = account.uid;
    if (ruid, euid, suid) != (want, want, want) {
        return Err(format!(
            "after setuid({want}): uids are {ruid}/{euid}/{suid} (real/effective/saved)"
        ));
    }
    let want = account.gid;
    if (rgid, egid, sgid) != (want, want, want) {
        return Err(format!(
            "after setgid({want}): gids are {rgid}/{egid}/{sgid} (real/effective/saved)"
        ));
    }
    let mut have = current_groups()?;
    let mut expected = groups.to_vec();
    have.sort_unstable();
    have.dedup();
    // FreeBSD before 15 reports the effective gid as the first "supplementary" group.
    have.retain(|g| *g != account.gid);
    expected.sort_unstable();
    expected.dedup();
    expected.retain(|g| *g != account.gid);
    if have != expected {
        return Err(format!(
            "after setgroups: groups are {have:?}, expected {expected:?}"
        ));
    }
    // SAFETY: setuid/seteuid take an integer only. They must fail now; if either succeeds
    // we are root again and report it (the caller exits).
    let regained = unsafe { libc::setuid(0) == 0 || libc::seteuid(0) == 0 };
    if regained {
        return Err(format!(
            "after switching to {user:?} the process could become root again"
        ));
    }
    Ok(())
}

/// Fails if the process has more than one thread (Linux: /proc/self/task).
fn check_single_threaded() -> Result<(), String> {
    #[cfg(target_os = "linux")]
    {
        if let Ok(dir) = std::fs::read_dir("/proc/self/task") {
            let n = dir.count();
            if n > 1 {
                return Err(format!(
                    "the process has {n} threads: privileges must be dropped before any thread \
                     (e.g. the tokio runtime) starts, because credentials and capabilities are \
                     per thread"
                ));
            }
        }
    }
    Ok(())
}

#[cfg(target_os = "linux")]
mod caps {
    /// `struct __user_cap_header_struct` (linux/capability.h).
    #[repr(C)]
    pub(super) struct Header {
        pub version: u32,
        pub pid: libc::c_int,
    }

    /// `struct __user_cap_data_struct`; version 3 uses two of them (64 capability bits).
    #[repr(C)]
    #[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
    pub(super) struct Data {
        pub effective: u32,
        pub permitted: u32,
        pub inheritable: u32,
    }

    pub(super) const VERSION_3: u32 = 0x2008_0522;
}

/// Empties the capability sets of the (only) thread and forbids gaining new privileges.
#[cfg(target_os = "linux")]
fn clear_capabilities() -> Result<(), String> {
    // SAFETY: prctl with integer arguments only.
    let rc = unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    // EINVAL: a kernel before 4.3 without ambient capabilities, so there are none to clear.
    if rc != 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL) {
        return Err(os_err("prctl(PR_CAP_AMBIENT_CLEAR_ALL)"));
    }
    let mut header = caps::Header {
        version: caps::VERSION_3,
        pid: 0,
    };
    let empty = [caps::Data::default(); 2];
    // SAFETY: header and data are live, correctly laid out (repr(C)) and sized for version 3,
    // which reads exactly two data structs. Lowering capabilities is always permitted.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &mut header, empty.as_ptr()) };
    if rc != 0 {
        return Err(os_err("capset (clearing all capabilities)"));
    }
    let mut now = [caps::Data {
        effective: u32::MAX,
        permitted: u32::MAX,
        inheritable: u32::MAX,
    }; 2];
    let mut header = caps::Header {
        version: caps::VERSION_3,
        pid: 0,
    };
    // SAFETY: as above; capget writes exactly two data structs for version 3.
    let rc = unsafe { libc::syscall(libc::SYS_capget, &mut header, now.as_mut_ptr()) };
    if rc != 0 {
        return Err(os_err("capget"));
    }
    if now != empty {
        return Err(format!("capabilities remain after capset: {now:?}"));
    }
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(os_err("prctl(PR_SET_NO_NEW_PRIVS)"));
    }
    Ok(())
}

/// FreeBSD (and others) have no per-process capability sets to clear.
#[cfg(not(target_os = "linux"))]
fn clear_capabilities() -> Result<(), String> {
    Ok(())
}

/// Gives `dir` and the entries directly inside it to `user` and its primary group, so that
/// the daemon can still write its state after [`drop_privileges`]. Call it before dropping.
///
/// Entries are changed with lchown (a symbolic link is not followed); subdirectories are not
/// descended into. Does nothing unless we are root (an unprivileged process could not give
/// files away; systemd's `StateDirectory=` and the rc.d script's `install -d -o` have then
/// made the directory the user's already), and skips what already belongs to the user.
pub fn chown_to_user(dir: &Path, account: &Account) -> Result<(), String> {
    if !is_root() {
        return Ok(());
    }
    chown_one(dir, account, true)?;
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
        chown_one(&entry.path(), account, false)?;
    }
    Ok(())
}

fn chown_one(path: &Path, account: &Account, follow: bool) -> Result<(), String> {
    let meta = if follow {
        std::fs::metadata(path)
    } else {
        std::fs::symlink_metadata(path)
    }
    .map_err(|e| format!("{}: {e}", path.display()))?;
    if meta.uid() == account.uid && meta.gid() == account.gid {
        return Ok(());
    }
    let cpath = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| format!("{}: path contains a NUL byte", path.display()))?;
    // SAFETY: cpath is a NUL-terminated string that lives across the call; the ids are
    // integers.
    let rc = unsafe {
        if follow {
            libc::chown(cpath.as_ptr(), account.uid, account.gid)
        } else {
            libc::lchown(cpath.as_ptr(), account.uid, account.gid)
        }
    };
    if rc != 0 {
        return Err(os_err(&format!(
            "cannot give {} to user {:?}",
            path.display(),
            account.name
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    /// The name of the user the test runs as.
    fn current_user_name() -> Option<String> {
        // SAFETY: getuid cannot fail.
        let uid = unsafe { libc::getuid() };
        let mut buf = vec![0 as libc::c_char; 4096];
        // SAFETY: passwd is a plain C struct for which all-zero bytes are a valid value.
        let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: pointers to live locals; buf.len() is the buffer's length.
        let rc =
            unsafe { libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut result) };
        if rc != 0 || result.is_null() || pwd.pw_name.is_null() {
            return None;
        }
        // SAFETY: on success pw_name points to a NUL-terminated string inside buf, alive here.
        let name = unsafe { CStr::from_ptr(pwd.pw_name) };
        Some(name.to_string_lossy().into_owned())
    }

    #[test]
    fn looks_up_root_and_rejects_unknown_users() {
        let root = lookup_user("root").unwrap();
        assert_eq!(root.uid, 0);
        let e = lookup_user("no-such-user-memstat-xyz").unwrap_err();
        assert!(e.contains("no such user"), "{e}");
        assert!(lookup_user("a\0b").is_err());
    }

    #[test]
    fn root_target_is_refused() {
        // The test harness runs threads, so on Linux the thread check refuses first; either
        // way nothing is changed.
        assert!(drop_privileges(&lookup_user("root").unwrap()).is_err());
    }

    #[test]
    fn group_list_includes_primary_group() {
        let root = lookup_user("root").unwrap();
        let groups = group_list(&root).unwrap();
        assert!(groups.contains(&root.gid), "{groups:?}");
    }

    #[test]
    fn chown_to_user_gives_the_state_dir_away() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("indexes"), b"x").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("link")).unwrap();
        let me = current_user_name().unwrap();
        // To ourselves: nothing to change.
        chown_to_user(dir.path(), &lookup_user(&me).unwrap()).unwrap();
        if !is_root() || lookup_user("nobody").is_err() {
            return;
        }
        let nobody = lookup_user("nobody").unwrap();
        let passwd_before = std::fs::metadata("/etc/passwd").unwrap();
        chown_to_user(dir.path(), &nobody).unwrap();
        for p in [dir.path().to_path_buf(), dir.path().join("indexes")] {
            let m = std::fs::metadata(&p).unwrap();
            assert_eq!(
                (m.uid(), m.gid()),
                (nobody.uid, nobody.gid),
                "{}",
                p.display()
            );
        }
        // The link itself changed, not its target.
        let l = std::fs::symlink_metadata(dir.path().join("link")).unwrap();
        assert_eq!(l.uid(), nobody.uid);
        let passwd_after = std::fs::metadata("/etc/passwd").unwrap();
        assert_eq!(passwd_before.uid(), passwd_after.uid());
        assert_eq!(passwd_before.gid(), passwd_after.gid());
    }

    #[test]
    fn is_root_matches_euid() {
        // SAFETY: geteuid cannot fail.
        assert_eq!(is_root(), unsafe { libc::geteuid() } == 0);
        assert!(current_user_name().is_some());
    }
}
