//! Stable memTypeIndex values: the MIB's index contract.
//!
//! Pollers (Cacti, LibreNMS) key their graphs by row index, so the same row key
//! (allocator, name, ordinal) must keep its memTypeIndex across refreshes and across daemon
//! restarts. Assignments are kept in a small JSON state file, written atomically (temporary
//! file, fsync, rename) whenever something new must be remembered. A key that vanishes keeps
//! its index reserved, so the type gets the same row back if it returns, and no index is ever
//! handed to another type. Problems with the state file are reported and repaired entry by
//! entry, and a bad entry never costs the other rows their indexes.
//!
//! The daemon may run as root in a directory another user can write to, so nothing here
//! follows a symbolic link: the state file is opened with O_NOFOLLOW and must be a regular
//! file, and each save writes a temporary file of its own, created with O_EXCL. Two
//! problems are fatal ([`IndexError::is_fatal`]): a state file over [`STATE_FILE_CAP`] and
//! one that is not a regular file. Rebuilding either would renumber every row.

use crate::boundedfile::{self, FileError};
use crate::memstat::{Allocator, MemoryType, TypeKey};
use serde::{Deserialize, Serialize};
use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The state file's name inside the state directory.
pub const STATE_FILE: &str = "indexes.json";

/// The largest state file read: 200,000 types take about 22 MB, so this leaves room while
/// keeping a huge (or endless) file from exhausting memory.
pub const STATE_FILE_CAP: u64 = 64 << 20;

/// The only state file version this code reads and writes.
const STATE_VERSION: u32 = 1;

#[derive(Deserialize)]
struct StateFile {
    version: u32,
    entries: Vec<EntryIn>,
}

/// Just the version, to tell a file of another version from a corrupt one.
#[derive(Deserialize)]
struct VersionOnly {
    version: u32,
}

/// An entry as read: the [`TypeKey`] fields and the index, side by side. Spelled out rather
/// than `#[serde(flatten)]`, which buffers every entry and made loading several times slower.
#[derive(Deserialize)]
struct EntryIn {
    allocator: Allocator,
    name: String,
    ordinal: u32,
    index: u32,
}

impl EntryIn {
    fn into_parts(self) -> (TypeKey, u32) {
        let key = TypeKey {
            allocator: self.allocator,
            name: self.name,
            ordinal: self.ordinal,
        };
        (key, self.index)
    }
}

/// [`StateFile`] as written: borrows the keys instead of cloning them all for each save.
#[derive(Serialize)]
struct StateFileOut<'a> {
    version: u32,
    entries: Vec<EntryOut<'a>>,
}

#[derive(Serialize)]
struct EntryOut<'a> {
    #[serde(flatten)]
    key: &'a TypeKey,
    index: u32,
}

/// A problem with the index state. Load problems are warnings (the file is repaired);
/// [`IndexError::Full`] means some types are not served.
#[derive(Debug)]
pub enum IndexError {
    /// The state file exists but cannot be read.
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The state file is not valid JSON of the expected shape.
    Corrupt {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    /// The state file has a version this code does not know.
    UnknownVersion { path: PathBuf, version: u32 },
    /// An entry claims an index that an earlier entry already has; the entry is dropped.
    Duplicate {
        path: PathBuf,
        index: u32,
        key: TypeKey,
    },
    /// An entry has index 0, which memTypeIndex (1..4294967295) cannot be; it is dropped.
    ZeroIndex { path: PathBuf, key: TypeKey },
    /// A key is listed again with another index: it keeps its first, the other stays reserved.
    RepeatedKey {
        path: PathBuf,
        key: TypeKey,
        kept: u32,
        reserved: u32,
    },
    /// The state file cannot be written; the indexes are still valid for this run.
    Save {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Every index is taken, so a new type cannot get one.
    Full,
    /// The state file is larger than the cap (fatal: it is never rebuilt in its place).
    TooLarge { path: PathBuf, cap: u64 },
    /// The state file is a link, FIFO, directory... (fatal: nothing is read or written
    /// through it).
    NotRegular { path: PathBuf, what: &'static str },
}

impl IndexError {
    /// True for a state file the daemon must not start on: starting would renumber every
    /// row (over the cap), or write where it was not asked to (not a regular file).
    pub fn is_fatal(&self) -> bool {
        matches!(
            self,
            IndexError::TooLarge { .. } | IndexError::NotRegular { .. }
        )
    }
}

/// A row key as the warnings show it: `uma "mbuf" (ordinal 0)`.
struct ShowKey<'a>(&'a TypeKey);

impl fmt::Display for ShowKey<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let k = self.0;
        write!(f, "{} {:?} (ordinal {})", k.allocator, k.name, k.ordinal)
    }
}

impl fmt::Display for IndexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IndexError::Read { path, source } => write!(
                f,
                "{}: cannot read the index state ({source}); starting with fresh indexes",
                path.display()
            ),
            IndexError::Corrupt {
                path,
                line,
                column,
                message,
            } => write!(
                f,
                "{}: corrupt index state at line {line}, column {column} ({message}); \
                 starting with fresh indexes",
                path.display()
            ),
            IndexError::UnknownVersion { path, version } => write!(
                f,
                "{}: unknown index state version {version} (this version reads \
                 {STATE_VERSION}); starting with fresh indexes",
                path.display()
            ),
            IndexError::Duplicate { path, index, key } => write!(
                f,
                "{}: index {index} of {} already belongs to an earlier entry; \
                 dropped, the type gets a new index",
                path.display(),
                ShowKey(key)
            ),
            IndexError::ZeroIndex { path, key } => write!(
                f,
                "{}: index 0 of {} is not a valid memTypeIndex; dropped, the type gets a \
                 new index",
                path.display(),
                ShowKey(key)
            ),
            IndexError::RepeatedKey {
                path,
                key,
                kept,
                reserved,
            } => write!(
                f,
                "{}: {} is listed again with index {reserved}; it keeps index {kept}, and \
                 {reserved} stays reserved",
                path.display(),
                ShowKey(key)
            ),
            IndexError::Save { path, source } => write!(
                f,
                "{}: cannot save the index state ({source}); new indexes will not survive \
                 a restart",
                path.display()
            ),
            IndexError::Full => {
                f.write_str("every memTypeIndex (1..4294967295) is taken; new types are not served")
            }
            IndexError::TooLarge { path, cap } => write!(
                f,
                "{}: the index state is larger than {cap} bytes, the most this version reads; \
                 not starting, so that rows are not renumbered (move the file away to start \
                 with fresh indexes)",
                path.display()
            ),
            IndexError::NotRegular { path, what } => write!(
                f,
                "{}: the index state is {what}, not a regular file; not starting, and nothing \
                 is read or written through it (remove it to start with fresh indexes)",
                path.display()
            ),
        }
    }
}

impl std::error::Error for IndexError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            IndexError::Read { source, .. } | IndexError::Save { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// The result of [`StableIndexes::assign`].
#[derive(Debug)]
pub struct Assigned {
    /// One entry per type, in the order given: its index, or `None` when the index space is
    /// full and the type is new (such a type cannot be served).
    pub indexes: Vec<Option<u32>>,
    /// What the caller should log: [`IndexError::Full`] (at most once) and a failed save.
    pub problems: Vec<IndexError>,
}

/// The key → index assignments, optionally backed by a state file.
pub struct StableIndexes {
    by_key: HashMap<TypeKey, u32>,
    /// Every index taken: those in `by_key` and those in `extra_claims`.
    used: HashSet<u32>,
    /// Further indexes of keys the state file listed more than once. No row shows them, but
    /// a poller may have seen one as that type's row, so they are saved and never reused.
    extra_claims: Vec<(TypeKey, u32)>,
    /// Where the search for a free index starts; always in `1..=max_index`.
    cursor: u32,
    /// The largest index handed out: u32::MAX (memTypeIndex is Unsigned32 without 0), less
    /// only in tests, so that exhaustion can be tested without 4 billion types.
    max_index: u32,
    path: Option<PathBuf>,
    /// The state file lacks something memory has: a new key, or the repair of a bad file.
    unsaved: bool,
}

impl StableIndexes {
    /// An in-memory map (no persistence).
    pub fn in_memory() -> Self {
        StableIndexes {
            by_key: HashMap::new(),
            used: HashSet::new(),
            extra_claims: Vec::new(),
            cursor: 1,
            max_index: u32::MAX,
            path: None,
            unsaved: false,
        }
    }

    /// Loads dir/indexes.json; problems with the file are returned as warnings, fatal only
    /// as [`IndexError::is_fatal`] says (then nothing is ever saved by this map).
    ///
    /// A missing file starts empty. An unreadable, corrupt or unknown-version file starts
    /// empty too, and is rewritten at the next [`assign`](Self::assign). A bad entry (index
    /// 0, or an index an earlier entry has) is dropped alone: its type gets a new index when
    /// next seen, and every other row keeps its index.
    pub fn load(dir: &Path) -> (Self, Vec<IndexError>) {
        let path = dir.join(STATE_FILE);
        let mut indexes = StableIndexes::in_memory();
        let mut problems = Vec::new();
        match read_entries(&path, STATE_FILE_CAP) {
            Ok(entries) => indexes.restore(entries, &path, &mut problems),
            Err(e) => problems.push(e),
        }
        if problems.iter().any(IndexError::is_fatal) {
            return (indexes, problems);
        }
        // Rewrite a file that needed repair, so that its problems are reported once, not at
        // every start. (A file with a repeated key is rewritten the same way each time.)
        indexes.unsaved = !problems.is_empty();
        indexes.path = Some(path);
        (indexes, problems)
    }

    /// Takes the file's entries in order: the first entry to claim an index keeps it.
    fn restore(&mut self, entries: Vec<EntryIn>, path: &Path, problems: &mut Vec<IndexError>) {
        self.by_key.reserve(entries.len());
        self.used.reserve(entries.len());
        let mut highest = 0;
        for (key, index) in entries.into_iter().map(EntryIn::into_parts) {
            if index == 0 {
                problems.push(IndexError::ZeroIndex {
                    path: path.to_owned(),
                    key,
                });
                continue;
            }
            if !self.used.insert(index) {
                problems.push(IndexError::Duplicate {
                    path: path.to_owned(),
                    index,
                    key,
                });
                continue;
            }
            highest = highest.max(index);
            match self.by_key.entry(key) {
                Entry::Occupied(first) => {
                    problems.push(IndexError::RepeatedKey {
                        path: path.to_owned(),
                        key: first.key().clone(),
                        kept: *first.get(),
                        reserved: index,
                    });
                    self.extra_claims.push((first.key().clone(), index));
                }
                Entry::Vacant(slot) => {
                    slot.insert(index);
                }
            }
        }
        // New keys go after the highest index, as they always have; from u32::MAX the search
        // wraps around to 1.
        self.cursor = self.after(highest);
    }

    /// One entry per type: Some(index), or None when the index space is full (then `problems`
    /// holds IndexError::Full once).
    ///
    /// New keys get indexes in the order given (kernel order). The keys must be distinct, as
    /// [`assign_ordinals`](crate::memstat::assign_ordinals) makes them. Saves the state file
    /// when it lacks something; a failed save is in `problems`, and is tried again next time.
    pub fn assign(&mut self, types: &[MemoryType]) -> Assigned {
        let mut indexes = Vec::with_capacity(types.len());
        let mut problems = Vec::new();
        let mut full_reported = false;
        for t in types {
            let key = t.key();
            if let Some(&index) = self.by_key.get(&key) {
                indexes.push(Some(index));
                continue;
            }
            match self.take_free_index() {
                Some(index) => {
                    self.by_key.insert(key, index);
                    self.unsaved = true;
                    indexes.push(Some(index));
                }
                None => {
                    if !full_reported {
                        problems.push(IndexError::Full);
                        full_reported = true;
                    }
                    indexes.push(None);
                }
            }
        }
        if self.unsaved {
            match self.save() {
                Ok(()) => self.unsaved = false,
                Err(e) => problems.push(e),
            }
        }
        Assigned { indexes, problems }
    }

    /// The number of keys ever assigned (including vanished ones).
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// The index after `index`, wrapping from `max_index` to 1.
    fn after(&self, index: u32) -> u32 {
        if index >= self.max_index {
            1
        } else {
            index + 1
        }
    }

    /// The first unused index at or after the cursor, or `None` when all are used.
    ///
    /// Amortised O(1): the cursor only moves forward, and each used index it steps over was
    /// either taken by this search or is passed once per trip around the index space.
    fn take_free_index(&mut self) -> Option<u32> {
        if self.used.len() as u64 >= u64::from(self.max_index) {
            return None;
        }
        loop {
            let candidate = self.cursor;
            self.cursor = self.after(candidate);
            if self.used.insert(candidate) {
                return Some(candidate);
            }
        }
    }

    fn save(&self) -> Result<(), IndexError> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        // Each key's own index first: on reload, the first entry for a key is its row.
        let mut entries: Vec<EntryOut> = self
            .by_key
            .iter()
            .map(|(key, &index)| EntryOut { key, index })
            .collect();
        entries.sort_unstable_by_key(|e| e.index);
        let mut extra: Vec<EntryOut> = self
            .extra_claims
            .iter()
            .map(|(key, index)| EntryOut { key, index: *index })
            .collect();
        extra.sort_unstable_by_key(|e| e.index);
        entries.append(&mut extra);
        let save_error = |source| IndexError::Save {
            path: path.clone(),
            source,
        };
        let body = serde_json::to_vec_pretty(&StateFileOut {
            version: STATE_VERSION,
            entries,
        })
        .map_err(|e| save_error(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))?;
        write_atomically(path, &body).map_err(save_error)
    }

    /// Shrinks the index space to `1..=max_index`, to test exhaustion.
    #[cfg(test)]
    fn with_max_index(mut self, max_index: u32) -> Self {
        assert!(max_index >= 1 && self.used.iter().all(|&i| i <= max_index));
        self.max_index = max_index;
        if self.cursor > max_index {
            self.cursor = 1;
        }
        self
    }
}

/// The state file's bytes, at most `cap` of them; `None` when there is no file.
///
/// Read by [`boundedfile::read`] with O_NOFOLLOW: a planted link is not followed, a FIFO
/// cannot hang the open, and only a regular file is read.
fn read_capped(path: &Path, cap: u64) -> Result<Option<Vec<u8>>, IndexError> {
    let read_error = |source| IndexError::Read {
        path: path.to_owned(),
        source,
    };
    let not_regular = |what| IndexError::NotRegular {
        path: path.to_owned(),
        what,
    };
    match boundedfile::read(path, libc::O_NOFOLLOW, cap) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(FileError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        // O_NOFOLLOW on a link fails with ELOOP on Linux, EMLINK on FreeBSD; either can also
        // mean something else, so a link is told apart by looking.
        Err(FileError::Io(e)) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::EMLINK)) => {
            match std::fs::symlink_metadata(path) {
                Ok(m) if m.file_type().is_symlink() => Err(not_regular("a symbolic link")),
                _ => Err(read_error(e)),
            }
        }
        Err(FileError::Io(e)) => Err(read_error(e)),
        // Kept as a read error, as before: a directory cannot hang or be written through.
        Err(FileError::NotRegular("a directory")) => Err(read_error(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "is a directory",
        ))),
        Err(FileError::NotRegular(what)) => Err(not_regular(what)),
        Err(FileError::TooLarge { cap }) => Err(IndexError::TooLarge {
            path: path.to_owned(),
            cap,
        }),
    }
}

/// The entries of the state file at `path`, in file order; none when there is no file.
fn read_entries(path: &Path, cap: u64) -> Result<Vec<EntryIn>, IndexError> {
    let Some(bytes) = read_capped(path, cap)? else {
        return Ok(Vec::new());
    };
    match serde_json::from_slice::<StateFile>(&bytes) {
        Ok(file) if file.version == STATE_VERSION => Ok(file.entries),
        Ok(StateFile { version, .. }) => Err(IndexError::UnknownVersion {
            path: path.to_owned(),
            version,
        }),
        Err(e) => match serde_json::from_slice::<VersionOnly>(&bytes) {
            // Another version may have another shape: that is not corruption.
            Ok(VersionOnly { version }) if version != STATE_VERSION => {
                Err(IndexError::UnknownVersion {
                    path: path.to_owned(),
                    version,
                })
            }
            _ => Err(IndexError::Corrupt {
                path: path.to_owned(),
                line: e.line(),
                column: e.column(),
                message: bare_message(&e),
            }),
        },
    }
}

/// serde_json's message without the " at line L column C" that `IndexError` shows itself.
fn bare_message(e: &serde_json::Error) -> String {
    let full = e.to_string();
    let position = format!(" at line {} column {}", e.line(), e.column());
    match full.strip_suffix(&position) {
        Some(message) => message.to_owned(),
        None => full,
    }
}

/// Tells apart the temporary files of one process's saves.
static TMP_SEQUENCE: AtomicU64 = AtomicU64::new(0);

/// A temporary name next to `path` that no other save (of this or another process) uses:
/// `indexes.json.tmp.PID.N`.
fn temporary_name(path: &Path) -> PathBuf {
    let n = TMP_SEQUENCE.fetch_add(1, Ordering::Relaxed);
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".tmp.{}.{n}", std::process::id()));
    path.with_file_name(name)
}

/// Removes the temporary files that saves interrupted by a crash left in `dir`; returns how
/// many. Only for the daemon holding the directory's lock: another process's save in
/// progress would lose its temporary file. unlink(2) removes a link, never its target.
pub fn remove_stale_temporaries(dir: &Path) -> usize {
    let prefix = format!("{STATE_FILE}.tmp.");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .filter(|e| std::fs::remove_file(e.path()).is_ok())
        .count()
}

/// Writes `body` to `path` so that a crash leaves either the old or the new file.
///
/// The temporary file gets a name of its own and is created with O_EXCL and O_NOFOLLOW:
/// whatever sits at a predictable name (a link planted to a root-only file) is never opened,
/// truncated or renamed into place. rename(2) replaces `path` itself, never a link's target.
fn write_atomically(path: &Path, body: &[u8]) -> std::io::Result<()> {
    write_via(&temporary_name(path), path, body)
}

/// [`write_atomically`] through the temporary file `tmp`.
fn write_via(tmp: &Path, path: &Path, body: &[u8]) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o640)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(tmp)?;
    let written = f
        .write_all(body)
        .and_then(|()| f.sync_all())
        .and_then(|()| std::fs::rename(tmp, path));
    if let Err(e) = written {
        // We created it (create_new), so removing it removes nothing of anyone else's.
        let _ = std::fs::remove_file(tmp);
        return Err(e);
    }
    if let Some(dir) = path.parent() {
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memstat::assign_ordinals;

    fn types(names: &[&str]) -> Vec<MemoryType> {
        let mut v: Vec<MemoryType> = names
            .iter()
            .map(|n| MemoryType::new(Allocator::Uma, *n))
            .collect();
        assign_ordinals(&mut v);
        v
    }

    /// The indexes of an assignment that must have served every type and saved cleanly.
    fn served(a: Assigned) -> Vec<u32> {
        assert!(a.problems.is_empty(), "{:?}", a.problems);
        a.indexes.into_iter().map(Option::unwrap).collect()
    }

    fn uma(name: &str, ordinal: u32) -> TypeKey {
        TypeKey {
            allocator: Allocator::Uma,
            name: name.into(),
            ordinal,
        }
    }

    /// Writes a state file of (uma name with ordinal 0, index) entries, in this order.
    fn write_state(dir: &Path, entries: &[(&str, u32)]) {
        let entries: Vec<serde_json::Value> = entries
            .iter()
            .map(|&(name, index)| {
                serde_json::json!({"allocator": "uma", "name": name, "ordinal": 0, "index": index})
            })
            .collect();
        let body = serde_json::json!({"version": 1, "entries": entries});
        std::fs::write(dir.join(STATE_FILE), body.to_string()).unwrap();
    }

    /// The (name, index) entries of the saved state file, in file order.
    fn saved_entries(dir: &Path) -> Vec<(String, u32)> {
        let body = std::fs::read(dir.join(STATE_FILE)).unwrap();
        let file: StateFile = serde_json::from_slice(&body).unwrap();
        assert_eq!(file.version, 1);
        file.entries
            .into_iter()
            .map(|e| (e.name, e.index))
            .collect()
    }

    fn assert_distinct(indexes: impl IntoIterator<Item = u32>) {
        let mut seen = HashSet::new();
        for i in indexes {
            assert!(
                i != 0 && seen.insert(i),
                "index {i} is zero or served twice"
            );
        }
    }

    #[test]
    fn indexes_survive_restart_vanish_and_return() {
        let dir = tempfile::tempdir().unwrap();
        let (mut m, problems) = StableIndexes::load(dir.path());
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(served(m.assign(&types(&["x", "y", "x"]))), vec![1, 2, 3]);
        // "y" vanishes, "z" appears: z gets a new index, y's stays reserved.
        assert_eq!(served(m.assign(&types(&["x", "z", "x"]))), vec![1, 4, 3]);
        assert_eq!(m.len(), 4);
        // Restart: the same keys get the same indexes, and y comes back as 2.
        let (mut m2, problems) = StableIndexes::load(dir.path());
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(
            served(m2.assign(&types(&["z", "y", "x", "x", "w"]))),
            vec![4, 2, 1, 3, 5]
        );
    }

    #[test]
    fn in_memory_assigns_without_a_file() {
        let mut m = StableIndexes::in_memory();
        assert!(m.is_empty());
        assert_eq!(served(m.assign(&types(&["a", "b"]))), vec![1, 2]);
        assert_eq!(served(m.assign(&types(&["b", "c"]))), vec![2, 3]);
        assert_eq!(m.len(), 3);
    }

    #[test]
    fn corrupt_state_is_reported_and_rebuilt() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(STATE_FILE), b"{ not json").unwrap();
        let (mut m, problems) = StableIndexes::load(dir.path());
        assert!(
            matches!(&problems[..], [IndexError::Corrupt { path, line: 1, .. }]
                if path == &dir.path().join(STATE_FILE)),
            "{problems:?}"
        );
        let w = problems[0].to_string();
        assert!(w.contains("corrupt") && w.contains(STATE_FILE), "{w}");
        assert!(!w.contains("at line 1 column"), "position shown twice: {w}");
        assert_eq!(served(m.assign(&types(&["x"]))), vec![1]);
        let (_, problems) = StableIndexes::load(dir.path());
        assert!(problems.is_empty(), "rewritten cleanly: {problems:?}");
    }

    #[test]
    fn unknown_version_is_reported_even_with_another_shape() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(STATE_FILE),
            br#"{"version": 2, "entries": {"uma/x/0": 7}}"#,
        )
        .unwrap();
        let (m, problems) = StableIndexes::load(dir.path());
        assert!(
            matches!(
                &problems[..],
                [IndexError::UnknownVersion { version: 2, .. }]
            ),
            "{problems:?}"
        );
        assert!(problems[0].to_string().contains(STATE_FILE));
        assert!(m.is_empty());
    }

    #[test]
    fn unreadable_state_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        // A directory where the file should be: reading it fails, even as root.
        std::fs::create_dir(dir.path().join(STATE_FILE)).unwrap();
        let (_, problems) = StableIndexes::load(dir.path());
        assert!(
            matches!(&problems[..], [IndexError::Read { .. }]),
            "{problems:?}"
        );
        assert!(std::error::Error::source(&problems[0]).is_some());
    }

    #[test]
    fn highest_index_in_the_file_does_not_stop_new_types() {
        let dir = tempfile::tempdir().unwrap();
        write_state(dir.path(), &[("top", u32::MAX), ("one", 1)]);
        let (mut m, problems) = StableIndexes::load(dir.path());
        assert!(problems.is_empty(), "{problems:?}");
        let got = served(m.assign(&types(&["top", "a", "one", "b", "c"])));
        // After u32::MAX the search wraps to 1, which is taken: new types start at 2.
        assert_eq!(got, vec![u32::MAX, 2, 1, 3, 4]);
        let saved = saved_entries(dir.path());
        assert_eq!(saved.len(), 5);
        assert_distinct(saved.iter().map(|e| e.1));

        let (mut m2, problems) = StableIndexes::load(dir.path());
        assert!(problems.is_empty(), "{problems:?}");
        let again = served(m2.assign(&types(&["c", "b", "a", "one", "top", "d"])));
        assert_eq!(again, vec![4, 3, 2, 1, u32::MAX, 5]);
        assert_distinct(saved_entries(dir.path()).iter().map(|e| e.1));
    }

    #[test]
    fn bad_entries_are_dropped_alone_and_reassigned() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(STATE_FILE);
        write_state(
            dir.path(),
            &[("a", 1), ("b", 2), ("dup", 2), ("zero", 0), ("e", 3)],
        );
        let (mut m, problems) = StableIndexes::load(dir.path());
        match &problems[..] {
            [IndexError::Duplicate {
                path: p1,
                index: 2,
                key: k1,
            }, IndexError::ZeroIndex { path: p2, key: k2 }] => {
                assert_eq!((p1, p2), (&path, &path));
                assert_eq!((k1, k2), (&uma("dup", 0), &uma("zero", 0)));
            }
            other => panic!("{other:?}"),
        }
        let dup = problems[0].to_string();
        assert!(
            dup.contains(&path.display().to_string())
                && dup.contains("index 2")
                && dup.contains("\"dup\""),
            "{dup}"
        );
        let zero = problems[1].to_string();
        assert!(
            zero.contains(STATE_FILE) && zero.contains("index 0") && zero.contains("\"zero\""),
            "{zero}"
        );
        assert_eq!(m.len(), 3, "only the offenders are dropped");

        // The kept rows keep their indexes; the offenders get fresh ones.
        let got = served(m.assign(&types(&["a", "b", "dup", "zero", "e"])));
        assert_eq!(got, vec![1, 2, 4, 5, 3]);
        let saved = saved_entries(dir.path());
        assert_eq!(saved.len(), 5);
        assert_distinct(saved.iter().map(|e| e.1));
        let (mut m2, problems) = StableIndexes::load(dir.path());
        assert!(problems.is_empty(), "repaired: {problems:?}");
        assert_eq!(
            served(m2.assign(&types(&["e", "zero", "dup", "b", "a"]))),
            vec![3, 5, 4, 2, 1]
        );
    }

    #[test]
    fn a_repaired_file_is_rewritten_even_without_new_types() {
        let dir = tempfile::tempdir().unwrap();
        write_state(dir.path(), &[("a", 1), ("dup", 1)]);
        let (mut m, problems) = StableIndexes::load(dir.path());
        assert_eq!(problems.len(), 1);
        assert_eq!(served(m.assign(&types(&["a"]))), vec![1]);
        assert_eq!(saved_entries(dir.path()), vec![("a".to_string(), 1)]);
    }

    #[test]
    fn a_key_listed_twice_keeps_its_first_index_and_reserves_the_other() {
        let dir = tempfile::tempdir().unwrap();
        write_state(dir.path(), &[("a", 5), ("b", 1), ("a", 7)]);
        let (m, problems) = StableIndexes::load(dir.path());
        match &problems[..] {
            [IndexError::RepeatedKey {
                key,
                kept: 5,
                reserved: 7,
                ..
            }] => assert_eq!(key, &uma("a", 0)),
            other => panic!("{other:?}"),
        }
        let w = problems[0].to_string();
        assert!(
            w.contains(STATE_FILE) && w.contains("\"a\"") && w.contains('7'),
            "{w}"
        );
        assert_eq!(m.len(), 2);

        // With room for 8 indexes, 7 is never handed out: the space is full after 6 others.
        let mut m = m.with_max_index(8);
        let a = m.assign(&types(&["a", "b", "c", "d", "e", "f", "g", "h"]));
        assert!(
            matches!(&a.problems[..], [IndexError::Full]),
            "{:?}",
            a.problems
        );
        assert_eq!(
            a.indexes,
            vec![
                Some(5),
                Some(1),
                Some(8),
                Some(2),
                Some(3),
                Some(4),
                Some(6),
                None
            ]
        );

        // The reserved claim is saved after the key's own entry, so a reload keeps a's row.
        let saved = saved_entries(dir.path());
        assert_eq!(saved.last(), Some(&("a".to_string(), 7)));
        let (mut m2, problems) = StableIndexes::load(dir.path());
        assert!(
            matches!(
                &problems[..],
                [IndexError::RepeatedKey {
                    kept: 5,
                    reserved: 7,
                    ..
                }]
            ),
            "{problems:?}"
        );
        assert_eq!(served(m2.assign(&types(&["a", "g"]))), vec![5, 6]);
    }

    #[test]
    fn exhaustion_is_reported_once_and_nothing_is_served_twice() {
        let dir = tempfile::tempdir().unwrap();
        let (m, _) = StableIndexes::load(dir.path());
        let mut m = m.with_max_index(3);
        assert_eq!(served(m.assign(&types(&["a", "b"]))), vec![1, 2]);
        let a = m.assign(&types(&["a", "c", "d", "e", "b"]));
        assert_eq!(a.indexes, vec![Some(1), Some(3), None, None, Some(2)]);
        assert!(
            matches!(&a.problems[..], [IndexError::Full]),
            "{:?}",
            a.problems
        );
        assert!(a.problems[0].to_string().contains("taken"));
        // Still full next time, still reported once; the known types keep being served.
        let a = m.assign(&types(&["d", "c", "e"]));
        assert_eq!(a.indexes, vec![None, Some(3), None]);
        assert_eq!(a.problems.len(), 1);
        let saved = saved_entries(dir.path());
        assert_eq!(saved.len(), 3);
        assert_distinct(saved.iter().map(|e| e.1));
    }

    #[test]
    fn the_search_wraps_and_skips_reserved_indexes() {
        let dir = tempfile::tempdir().unwrap();
        write_state(dir.path(), &[("x", 2), ("y", 4)]);
        let (m, _) = StableIndexes::load(dir.path());
        let mut m = m.with_max_index(6);
        // After 4 come 5 and 6, then the search wraps to 1, skips 2, takes 3.
        let got = served(m.assign(&types(&["p", "q", "r", "s"])));
        assert_eq!(got, vec![5, 6, 1, 3]);
    }

    #[test]
    fn a_failed_save_is_reported_and_retried() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("missing");
        let (mut m, problems) = StableIndexes::load(&state);
        assert!(problems.is_empty());
        let a = m.assign(&types(&["a"]));
        assert_eq!(a.indexes, vec![Some(1)], "still valid for this run");
        assert!(
            matches!(&a.problems[..], [IndexError::Save { path, .. }] if path.starts_with(&state)),
            "{:?}",
            a.problems
        );
        std::fs::create_dir(&state).unwrap();
        // Nothing new, but the file still lacks "a".
        assert_eq!(served(m.assign(&types(&["a"]))), vec![1]);
        assert_eq!(saved_entries(&state), vec![("a".to_string(), 1)]);
    }

    #[test]
    fn saves_use_unique_temporary_names_and_never_follow_a_planted_link() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(STATE_FILE);
        let (a, b) = (temporary_name(&path), temporary_name(&path));
        assert_ne!(a, b);
        assert_eq!(a.parent(), Some(dir.path()));
        assert!(a
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("indexes.json.tmp."));

        // Links at the old fixed temporary name and at the next unique one: neither is
        // written through, and the state file ends up a regular file of ours.
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"root only").unwrap();
        std::os::unix::fs::symlink(&victim, dir.path().join("indexes.json.tmp")).unwrap();
        let planted = temporary_name(&path);
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        let e = write_via(&planted, &path, b"{}").unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists, "{e}");
        assert!(
            std::fs::symlink_metadata(&planted).is_ok(),
            "not ours: left alone"
        );
        write_atomically(&path, b"{}").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"root only");
        assert!(std::fs::symlink_metadata(&path).unwrap().is_file());
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".tmp.") && dir.path().join(n) != planted)
            .collect();
        assert!(left.is_empty(), "temporary files left: {left:?}");
    }

    #[test]
    fn stale_temporaries_are_removed_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        std::fs::write(dir.path().join("indexes.json.tmp.123.0"), b"{").unwrap();
        std::os::unix::fs::symlink(&victim, dir.path().join("indexes.json.tmp.9.9")).unwrap();
        std::fs::write(dir.path().join(STATE_FILE), b"{}").unwrap();
        std::fs::write(dir.path().join("indexes.json.tmp"), b"old name").unwrap();
        assert_eq!(remove_stale_temporaries(dir.path()), 2);
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["indexes.json", "indexes.json.tmp", "victim"]);
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
    }

    #[test]
    fn a_linked_state_file_is_refused_and_never_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, br#"{"version": 1, "entries": []}"#).unwrap();
        std::os::unix::fs::symlink(&victim, dir.path().join(STATE_FILE)).unwrap();
        let (mut m, problems) = StableIndexes::load(dir.path());
        assert!(
            matches!(
                &problems[..],
                [IndexError::NotRegular {
                    what: "a symbolic link",
                    ..
                }]
            ),
            "{problems:?}"
        );
        assert!(problems[0].is_fatal());
        assert!(problems[0].to_string().contains(STATE_FILE));
        // Even if a caller went on, nothing would be saved.
        assert_eq!(served(m.assign(&types(&["a"]))), vec![1]);
        assert!(std::fs::symlink_metadata(dir.path().join(STATE_FILE))
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(
            std::fs::read(&victim).unwrap(),
            br#"{"version": 1, "entries": []}"#
        );
    }

    #[test]
    fn a_fifo_as_state_file_is_refused_without_hanging() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join(STATE_FILE);
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        let (_, problems) = StableIndexes::load(dir.path());
        assert!(
            matches!(
                &problems[..],
                [IndexError::NotRegular { what: "a FIFO", .. }]
            ),
            "{problems:?}"
        );
        assert!(problems[0].is_fatal());
        // A device: named by its kind, never read (/dev/zero would never end).
        assert!(matches!(
            read_capped(Path::new("/dev/zero"), STATE_FILE_CAP),
            Err(IndexError::NotRegular {
                what: "a character device",
                ..
            })
        ));
    }

    #[test]
    fn a_state_file_over_the_cap_is_fatal_not_rebuilt() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(STATE_FILE);
        write_state(dir.path(), &[("a", 1), ("b", 2)]);
        let size = std::fs::metadata(&path).unwrap().len();
        assert_eq!(read_entries(&path, size).unwrap().len(), 2);
        match read_entries(&path, size - 1) {
            Err(IndexError::TooLarge { cap, .. }) => assert_eq!(cap, size - 1),
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("read past the cap"),
        }
        // The real cap, with a sparse file just over it.
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(STATE_FILE_CAP + 1).unwrap();
        let (mut m, problems) = StableIndexes::load(dir.path());
        assert!(
            matches!(&problems[..], [IndexError::TooLarge { .. }]),
            "{problems:?}"
        );
        assert!(problems[0].is_fatal());
        let e = problems[0].to_string();
        assert!(
            e.contains(STATE_FILE) && e.contains(&STATE_FILE_CAP.to_string()),
            "{e}"
        );
        m.assign(&types(&["a"]));
        assert_eq!(std::fs::metadata(&path).unwrap().len(), STATE_FILE_CAP + 1);
    }

    #[test]
    fn a_large_state_file_loads() {
        const N: usize = 100_000;
        let dir = tempfile::tempdir().unwrap();
        let many: Vec<MemoryType> = (0..N)
            .map(|i| MemoryType::new(Allocator::Slab, format!("cache-{i}")))
            .collect();
        let (mut m, _) = StableIndexes::load(dir.path());
        let first = served(m.assign(&many));
        let (mut m2, problems) = StableIndexes::load(dir.path());
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(m2.len(), N);
        assert_eq!(served(m2.assign(&many)), first);
        assert_eq!(first.last(), Some(&(N as u32)));
    }
}
