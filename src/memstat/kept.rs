//! A file source kept open across the privilege drop: opened once while the daemon is still
//! privileged, and re-read through the same descriptor at every refresh (/proc/slabinfo and
//! /proc/allocinfo are readable by root alone).

use super::error::{file_error, open_regular};
use super::SourceError;
use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The hint a permission error on a root-only kept file gives.
pub(crate) const ROOT_ONLY_HINT: &str = "the file is readable by root only: run as root, or start as root with --user to drop privileges after opening it";

/// An open file source, the path it was opened by, and its identity.
pub(crate) struct KeptFile {
    path: PathBuf,
    /// The name errors give the file.
    what: String,
    file: File,
    /// The device and inode of `file`, to notice that `path` now names another file.
    id: (u64, u64),
}

impl KeptFile {
    /// Opens `path` now; anything but a regular file is refused (a /proc file is a regular
    /// file of size 0).
    pub(crate) fn open(path: &Path) -> Result<KeptFile, SourceError> {
        let (file, meta) = open_regular(path, ROOT_ONLY_HINT)?;
        Ok(KeptFile {
            path: path.to_path_buf(),
            what: path.display().to_string(),
            file,
            id: (meta.dev(), meta.ino()),
        })
    }

    /// The file's name, as errors give it.
    pub(crate) fn what(&self) -> &str {
        &self.what
    }

    /// Reads the whole file again into `buf`, at most `cap` bytes (a bigger file is refused).
    pub(crate) fn reread(&mut self, cap: u64, buf: &mut Vec<u8>) -> Result<(), SourceError> {
        self.follow_path()?;
        let what = &self.what;
        self.file
            .seek(SeekFrom::Start(0))
            .map_err(|e| SourceError::from_io(what, &e, "re-reading the open descriptor"))?;
        crate::boundedfile::read_capped(&mut self.file, cap, buf)
            .map_err(|e| file_error(what, "re-reading the open descriptor", e))
    }

    /// Makes sure the descriptor still reads the file the path names.
    ///
    /// The descriptor is kept for the privilege drop, but for a plain file that an operator
    /// or a tool replaces (a rename over it) or deletes, re-reading it would serve the old
    /// file's figures as fresh forever. So the path is compared with the descriptor by device
    /// and inode at every read: a replaced file is opened again (which fails, and the source
    /// turns stale, when we no longer have the rights to open it); a deleted one is an
    /// error. A /proc file keeps its inode, so it is always the same file.
    fn follow_path(&mut self) -> Result<(), SourceError> {
        let what = &self.what;
        let gone = |why: &str| SourceError::Io {
            what: what.to_string(),
            message: format!("{why} since the daemon opened it; the old figures are not served"),
        };
        match std::fs::metadata(&self.path) {
            Ok(m) if (m.dev(), m.ino()) == self.id => Ok(()),
            Ok(_) => {
                let (file, meta) = open_regular(&self.path, ROOT_ONLY_HINT).map_err(|e| {
                    SourceError::Io {
                        what: what.to_string(),
                        message: format!(
                            "replaced since the daemon opened it, and the new file cannot be opened: {}",
                            strip_what(&e.to_string(), what)
                        ),
                    }
                })?;
                tracing::info!("{what}: replaced since it was opened; reading the new file");
                self.file = file;
                self.id = (meta.dev(), meta.ino());
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(gone("deleted")),
            Err(e) => {
                // The path cannot be looked up any more (e.g. a directory closed to the user
                // we dropped to): the descriptor is all we have, and it is read unless its
                // file has lost its last link.
                match self.file.metadata() {
                    Ok(m) if m.nlink() == 0 => Err(gone("deleted")),
                    Ok(_) => {
                        tracing::debug!(
                            "{what}: cannot check the path ({e}); reading the open descriptor"
                        );
                        Ok(())
                    }
                    Err(e) => Err(SourceError::from_io(
                        what,
                        &e,
                        "checking the open descriptor",
                    )),
                }
            }
        }
    }
}

/// `message` without a leading "what: ", so that a wrapped error names the file once.
fn strip_what<'a>(message: &'a str, what: &str) -> &'a str {
    message
        .strip_prefix(what)
        .and_then(|m| m.strip_prefix(": "))
        .unwrap_or(message)
}
