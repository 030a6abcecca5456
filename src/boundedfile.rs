//! Reading a file that someone else controls: the configuration, a fixture, /proc/slabinfo
//! and the state file. The configuration and the state file may be written by a less
//! privileged user, and a fixture by anyone a test or an operator lets; each is read the
//! same way, so that none of them can hang the daemon or take its memory.
//!
//! - The open does not block: opening a FIFO for reading would otherwise wait for a writer,
//!   forever, and that is the one call no timeout reaches. O_NONBLOCK is left set; it has no
//!   effect on reads of a regular file, /proc files included.
//! - The type is checked on the open descriptor (`fstat`, not the path, which could be
//!   swapped in between), and only a regular file is read.
//! - A read never takes more than its cap: a file that goes on (a growing file, a huge sparse
//!   one, a size-0 /proc file whose size is not trusted) is refused once it passes the cap.
//!
//! Each caller turns a [`FileError`] into its own error, with its own words for the file.

use std::fmt;
use std::fs::{File, Metadata};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Why a file was not read.
#[derive(Debug)]
pub(crate) enum FileError {
    /// The open, the `fstat` or the read failed.
    Io(std::io::Error),
    /// The path names something else than a regular file: "a FIFO", "a directory", ...
    NotRegular(&'static str),
    /// The file holds more than `cap` bytes.
    TooLarge { cap: u64 },
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FileError::Io(e) => write!(f, "{e}"),
            FileError::NotRegular(kind) => write!(f, "is {kind}, not a regular file; refused"),
            FileError::TooLarge { cap } => write!(
                f,
                "larger than {cap} bytes ({}), the most read; refused",
                mib(*cap)
            ),
        }
    }
}

/// Opens `path` for reading without blocking, with `extra_flags` (O_NOFOLLOW, say) added to
/// O_NONBLOCK and O_CLOEXEC, and refuses it unless it is a regular file.
pub(crate) fn open(path: &Path, extra_flags: libc::c_int) -> Result<(File, Metadata), FileError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | extra_flags)
        .open(path)
        .map_err(FileError::Io)?;
    let meta = file.metadata().map_err(FileError::Io)?;
    match not_regular(&meta) {
        Some(kind) => Err(FileError::NotRegular(kind)),
        None => Ok((file, meta)),
    }
}

/// Reads `file` from its current offset to the end into `buf` (cleared first), but never more
/// than `cap` bytes. On a refusal the buffer is emptied and shrunk.
pub(crate) fn read_capped(file: impl Read, cap: u64, buf: &mut Vec<u8>) -> Result<(), FileError> {
    buf.clear();
    // One byte more than the cap tells "exactly the cap" from "more than the cap".
    let read = file.take(cap + 1).read_to_end(buf);
    if let Err(e) = read {
        return Err(FileError::Io(e));
    }
    if buf.len() as u64 > cap {
        buf.clear();
        buf.shrink_to(64 * 1024);
        return Err(FileError::TooLarge { cap });
    }
    Ok(())
}

/// Opens and reads the whole of `path` (see [`open`] and [`read_capped`]). A file whose size
/// is already over the cap is refused before it is read.
pub(crate) fn read(path: &Path, extra_flags: libc::c_int, cap: u64) -> Result<Vec<u8>, FileError> {
    let (file, meta) = open(path, extra_flags)?;
    if meta.len() > cap {
        return Err(FileError::TooLarge { cap });
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    read_capped(file, cap, &mut bytes)?;
    Ok(bytes)
}

/// What kind of file `meta` describes, when it is not a regular file; `None` for a regular one.
pub(crate) fn not_regular(meta: &Metadata) -> Option<&'static str> {
    let t = meta.file_type();
    if t.is_file() {
        None
    } else if t.is_fifo() {
        Some("a FIFO")
    } else if t.is_char_device() {
        Some("a character device")
    } else if t.is_block_device() {
        Some("a block device")
    } else if t.is_socket() {
        Some("a socket")
    } else if t.is_dir() {
        Some("a directory")
    } else if t.is_symlink() {
        Some("a symbolic link")
    } else {
        Some("not a regular file")
    }
}

/// A byte count for messages: "64 MiB"; below one MiB, "KiB".
pub(crate) fn mib(n: u64) -> String {
    match n >= 1 << 20 {
        true => format!("{} MiB", n >> 20),
        false => format!("{} KiB", n >> 10),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_and_never_past_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, [7u8; 100]).unwrap();
        assert_eq!(read(&p, 0, 100).unwrap(), vec![7u8; 100]);
        assert!(matches!(
            read(&p, 0, 99),
            Err(FileError::TooLarge { cap: 99 })
        ));
        // The size is not trusted: a read past the cap is refused all the same.
        let (file, _) = open(&p, 0).unwrap();
        let mut buf = Vec::new();
        let e = read_capped(file, 99, &mut buf).unwrap_err();
        assert!(matches!(e, FileError::TooLarge { cap: 99 }) && buf.is_empty());
        assert!(matches!(
            read(dir.path(), 0, 10),
            Err(FileError::NotRegular("a directory"))
        ));
        let e = read(Path::new("/dev/zero"), 0, 10).unwrap_err();
        assert_eq!(
            e.to_string(),
            "is a character device, not a regular file; refused"
        );
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path that lives across the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // Returns at once, with no writer: the open does not block.
        assert!(matches!(
            read(&fifo, 0, 10),
            Err(FileError::NotRegular("a FIFO"))
        ));
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&p, &link).unwrap();
        assert_eq!(read(&link, 0, 100).unwrap().len(), 100);
        assert!(matches!(
            read(&link, libc::O_NOFOLLOW, 100),
            Err(FileError::Io(_))
        ));
        assert!(
            matches!(read(&dir.path().join("none"), 0, 1), Err(FileError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound)
        );
        assert_eq!(mib(1 << 20), "1 MiB");
        assert_eq!(mib(64 << 10), "64 KiB");
    }
}
