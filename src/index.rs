//! Stable row indexes: the MIB's index contract, for memory types (memTypeIndex) and for
//! allocation call sites (memAllocSiteIndex).
//!
//! Pollers (Cacti, LibreNMS) key their graphs by row index, so the same row key must keep its
//! index across refreshes and across daemon restarts. A [`StableIndexes`] holds the
//! assignments of one kind of row, keyed by a [`RowKey`]: [`TypeIndexes`] for types
//! (allocator, name, ordinal), [`SiteIndexes`] for call sites ([`SiteKey`]). Each kind has a
//! small JSON state file of its own (`indexes.json`, `sites.json`), written
//! atomically (temporary file, fsync, rename) whenever something new must be remembered.
//! Problems with a state file are reported and repaired entry by entry, and a bad entry never
//! costs the other rows their indexes.
//!
//! # Types: every key kept
//!
//! A type that vanishes keeps its index reserved, so it gets the same row back if it returns,
//! and no index is ever handed to another type. Nothing is ever forgotten: a kernel has some
//! hundred thousand types at most. New types get the next free index after the highest one,
//! and the search wraps around to the free indexes below it.
//!
//! # Sites: a bounded state, indexes that only grow
//!
//! Only served sites get an index, but over kernel upgrades (a new kernel moves line numbers)
//! and module loads their number has no bound, so at most [`MAX_SITE_ENTRIES`] entries are
//! kept. Each entry records when it was last served ([`StableIndexes::assign_keys`]'s
//! `now_unix`), and when a new site needs room, the entry unserved the longest is forgotten
//! first (never one served in the same call). A forgotten index is never handed out again:
//! site indexes only grow, from the highest one ever handed out, which the file keeps
//! (`highest`) so that this holds across restarts. A forgotten site that returns gets a new,
//! higher index, so a poller never sees one row turn into another site.
//!
//! The file is saved when an entry is added, forgotten or repaired, never for `last_served`
//! alone: refreshes come every few seconds and the file can hold 65,536 entries. So
//! `last_served` in the file is as of the last save, and that is enough for the order that
//! forgetting follows. Entries are only forgotten when the state is full, and then every new
//! site forgets one and saves, so the file's times are current exactly while they matter.
//! Across a restart, the sites that were still served at the last save and went away before
//! the restart tie, and are forgotten lowest index first. An hourly save (say) would only
//! break those ties, by rewriting up to some 10 MB that pollers gain nothing from.
//!
//! # Protections
//!
//! The daemon may run as root in a directory another user can write to, so nothing here
//! follows a symbolic link: a state file is opened with O_NOFOLLOW and must be a regular
//! file, and each save writes a temporary file of its own, created with O_EXCL. Two
//! problems are fatal ([`IndexError::is_fatal`]): a state file over [`STATE_FILE_CAP`] and
//! one that is not a regular file. Rebuilding either would renumber every row.

use crate::boundedfile::{self, FileError};
use crate::memstat::allocinfo::SiteKey;
use crate::memstat::{Allocator, MemoryType, TypeKey};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::hash::Hash;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The types' state file's name inside the state directory.
pub const STATE_FILE: &str = "indexes.json";

/// The sites' state file's name inside the state directory.
pub(crate) const SITES_STATE_FILE: &str = "sites.json";

/// The largest state file read: 200,000 types take about 22 MB, and the most sites kept about
/// 10 MB, so this leaves room while keeping a huge (or endless) file from exhausting memory.
pub const STATE_FILE_CAP: u64 = 64 << 20;

/// The most site entries kept. A kernel has some tens of thousands of call sites, and only
/// the served ones get an index, so this is room for all of them and a kernel upgrade's worth
/// of new ones before any is forgotten.
pub const MAX_SITE_ENTRIES: usize = 65_536;

/// The only types' state file version this code reads and writes.
const STATE_VERSION: u32 = 1;

/// The only sites' state file version this code reads and writes.
const SITES_STATE_VERSION: u32 = 1;

/// Which stable index a state file, or a problem with it, is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexKind {
    /// memTypeIndex, of memory types ([`TypeKey`]).
    Type,
    /// memAllocSiteIndex, of allocation call sites ([`SiteKey`]).
    Site,
}

impl IndexKind {
    /// A row of this kind in the warnings: "the type gets a new index".
    fn row(self) -> &'static str {
        match self {
            IndexKind::Type => "type",
            IndexKind::Site => "site",
        }
    }

    fn rows(self) -> &'static str {
        match self {
            IndexKind::Type => "types",
            IndexKind::Site => "sites",
        }
    }

    /// The MIB's index object.
    fn object(self) -> &'static str {
        match self {
            IndexKind::Type => "memTypeIndex",
            IndexKind::Site => "memAllocSiteIndex",
        }
    }

    fn state_version(self) -> u32 {
        match self {
            IndexKind::Type => TypeKey::STATE_VERSION,
            IndexKind::Site => SiteKey::STATE_VERSION,
        }
    }

    /// True when a new index is always above every index handed out before, so that an
    /// entry can be forgotten without its index ever coming back (sites); false when new
    /// indexes fill the free ones (types, whose every entry is kept).
    fn grows_only(self) -> bool {
        matches!(self, IndexKind::Site)
    }
}

/// The key of a kind of row: what [`StableIndexes`] needs to know of it.
///
/// Public only because [`StableIndexes`] is, and a bound of its methods must be as visible;
/// its signatures mention no private type, so each kind's entry structs stay private.
pub trait RowKey: Clone + Eq + Hash {
    /// Which index this is: the warnings' words and how new indexes are found.
    const KIND: IndexKind;
    /// The state file's name inside the state directory.
    const STATE_FILE: &'static str;
    /// The only version of that file this code reads and writes.
    const STATE_VERSION: u32;
    /// The most entries kept; `usize::MAX` keeps every one.
    const MAX_ENTRIES: usize;

    /// Writes the key as the warnings show it.
    fn show(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result;

    /// Reads one state file entry: the key, its index and when it was last served.
    fn deserialize_entry<'de, D: Deserializer<'de>>(d: D) -> Result<(Self, u32, u64), D::Error>;

    /// Writes one state file entry.
    fn serialize_entry<S: Serializer>(
        &self,
        index: u32,
        last_served: u64,
        s: S,
    ) -> Result<S::Ok, S::Error>;
}

/// A types' entry as read: the [`TypeKey`] fields and the index, side by side. Spelled out
/// rather than `#[serde(flatten)]`, which buffers every entry and made loading several times
/// slower.
#[derive(Deserialize)]
struct TypeEntryIn {
    allocator: Allocator,
    name: String,
    ordinal: u32,
    index: u32,
}

#[derive(Serialize)]
struct TypeEntryOut<'a> {
    #[serde(flatten)]
    key: &'a TypeKey,
    index: u32,
}

impl RowKey for TypeKey {
    const KIND: IndexKind = IndexKind::Type;
    const STATE_FILE: &'static str = STATE_FILE;
    const STATE_VERSION: u32 = STATE_VERSION;
    const MAX_ENTRIES: usize = usize::MAX;

    /// `uma "mbuf" (ordinal 0)`.
    fn show(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {:?} (ordinal {})",
            self.allocator, self.name, self.ordinal
        )
    }

    /// Types are never forgotten, so when they were served is not kept: always 0.
    fn deserialize_entry<'de, D: Deserializer<'de>>(d: D) -> Result<(Self, u32, u64), D::Error> {
        let e = TypeEntryIn::deserialize(d)?;
        let key = TypeKey {
            allocator: e.allocator,
            name: e.name,
            ordinal: e.ordinal,
        };
        Ok((key, e.index, 0))
    }

    fn serialize_entry<S: Serializer>(
        &self,
        index: u32,
        _last_served: u64,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        TypeEntryOut { key: self, index }.serialize(s)
    }
}

/// A sites' entry as read, spelled out for the same reason as [`TypeEntryIn`].
#[derive(Deserialize)]
struct SiteEntryIn {
    file: String,
    line: u32,
    /// Empty for the core kernel, and so when missing.
    #[serde(default)]
    module: String,
    function: String,
    index: u32,
    /// Seconds since the Unix epoch. Any value is taken (one in the future only makes the
    /// entry the last forgotten); a missing one is 0, the first forgotten.
    #[serde(default)]
    last_served: u64,
}

#[derive(Serialize)]
struct SiteEntryOut<'a> {
    file: &'a str,
    line: u32,
    module: &'a str,
    function: &'a str,
    index: u32,
    last_served: u64,
}

impl RowKey for SiteKey {
    const KIND: IndexKind = IndexKind::Site;
    const STATE_FILE: &'static str = SITES_STATE_FILE;
    const STATE_VERSION: u32 = SITES_STATE_VERSION;
    const MAX_ENTRIES: usize = MAX_SITE_ENTRIES;

    /// As the kernel writes a tag, `mm/slub.c:123 [xfs] func:kmalloc` (without `[module]`
    /// for the core kernel), with the names escaped so that a warning stays one line.
    fn show(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file.escape_debug(), self.line)?;
        if !self.module.is_empty() {
            write!(f, " [{}]", self.module.escape_debug())?;
        }
        write!(f, " func:{}", self.function.escape_debug())
    }

    fn deserialize_entry<'de, D: Deserializer<'de>>(d: D) -> Result<(Self, u32, u64), D::Error> {
        let e = SiteEntryIn::deserialize(d)?;
        let key = SiteKey {
            file: e.file,
            line: e.line,
            module: e.module,
            function: e.function,
        };
        Ok((key, e.index, e.last_served))
    }

    fn serialize_entry<S: Serializer>(
        &self,
        index: u32,
        last_served: u64,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        SiteEntryOut {
            file: &self.file,
            line: self.line,
            module: &self.module,
            function: &self.function,
            index,
            last_served,
        }
        .serialize(s)
    }
}

/// A state file as read.
#[derive(Deserialize)]
#[serde(bound = "K: RowKey")]
struct StateFile<K> {
    version: u32,
    /// Sites: the highest index ever handed out (absent in the types' file).
    #[serde(default)]
    highest: Option<u32>,
    entries: Vec<Stored<K>>,
}

/// An entry as read, in the kind's own format.
struct Stored<K> {
    key: K,
    index: u32,
    last_served: u64,
}

impl<'de, K: RowKey> Deserialize<'de> for Stored<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let (key, index, last_served) = K::deserialize_entry(d)?;
        Ok(Stored {
            key,
            index,
            last_served,
        })
    }
}

/// Just the version, to tell a file of another version from a corrupt one.
#[derive(Deserialize)]
struct VersionOnly {
    version: u32,
}

/// [`StateFile`] as written: borrows the keys instead of cloning them all for each save.
#[derive(Serialize)]
#[serde(bound = "K: RowKey")]
struct StateFileOut<'a, K> {
    version: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    highest: Option<u32>,
    entries: Vec<EntryOut<'a, K>>,
}

struct EntryOut<'a, K> {
    key: &'a K,
    index: u32,
    last_served: u64,
}

impl<K: RowKey> Serialize for EntryOut<'_, K> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.key.serialize_entry(self.index, self.last_served, s)
    }
}

/// A key as the warnings show it.
struct Shown<'a, K>(&'a K);

impl<K: RowKey> fmt::Display for Shown<'_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.show(f)
    }
}

fn shown<K: RowKey>(key: &K) -> String {
    Shown(key).to_string()
}

/// A problem with the index state. Load problems are warnings (the file is repaired);
/// [`IndexError::Full`] and [`IndexError::TooManyServed`] mean some rows are not served.
///
/// One type for every kind of index, so that problems can be logged and kept alike: keys
/// are carried as the warnings show them, and `kind` says which index a problem is about
/// where the message depends on it.
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
    UnknownVersion {
        path: PathBuf,
        kind: IndexKind,
        version: u32,
    },
    /// An entry claims an index that an earlier entry already has; the entry is dropped.
    Duplicate {
        path: PathBuf,
        kind: IndexKind,
        index: u32,
        key: String,
    },
    /// An entry has index 0, which an index (1..4294967295) cannot be; it is dropped.
    ZeroIndex {
        path: PathBuf,
        kind: IndexKind,
        key: String,
    },
    /// A key is listed again with another index: it keeps its first, the other stays reserved.
    RepeatedKey {
        path: PathBuf,
        key: String,
        kept: u32,
        reserved: u32,
    },
    /// The state file cannot be written; the indexes are still valid for this run.
    Save {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Every index is taken (types), or has been handed out (sites, whose indexes are never
    /// reused), so a new row cannot get one.
    Full { kind: IndexKind },
    /// More rows are served at once than entries are kept, so the ones past the bound get
    /// no index (sites).
    TooManyServed { kind: IndexKind, max_entries: usize },
    /// The state file has more entries than are kept: those unserved the longest are
    /// forgotten (sites).
    TooManyEntries {
        path: PathBuf,
        kind: IndexKind,
        entries: usize,
        max_entries: usize,
    },
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
            IndexError::UnknownVersion {
                path,
                kind,
                version,
            } => write!(
                f,
                "{}: unknown index state version {version} (this version reads {}); \
                 starting with fresh indexes",
                path.display(),
                kind.state_version()
            ),
            IndexError::Duplicate {
                path,
                kind,
                index,
                key,
            } => write!(
                f,
                "{}: index {index} of {key} already belongs to an earlier entry; \
                 dropped, the {} gets a new index",
                path.display(),
                kind.row()
            ),
            IndexError::ZeroIndex { path, kind, key } => write!(
                f,
                "{}: index 0 of {key} is not a valid {}; dropped, the {} gets a new index",
                path.display(),
                kind.object(),
                kind.row()
            ),
            IndexError::RepeatedKey {
                path,
                key,
                kept,
                reserved,
            } => write!(
                f,
                "{}: {key} is listed again with index {reserved}; it keeps index {kept}, and \
                 {reserved} stays reserved",
                path.display()
            ),
            IndexError::Save { path, source } => write!(
                f,
                "{}: cannot save the index state ({source}); new indexes will not survive \
                 a restart",
                path.display()
            ),
            IndexError::Full { kind } if kind.grows_only() => write!(
                f,
                "every {} (1..4294967295) has been handed out, and none is ever handed out \
                 twice; new {} are not served",
                kind.object(),
                kind.rows()
            ),
            IndexError::Full { kind } => write!(
                f,
                "every {} (1..4294967295) is taken; new {} are not served",
                kind.object(),
                kind.rows()
            ),
            IndexError::TooManyServed { kind, max_entries } => write!(
                f,
                "more than {max_entries} {} are served at once, the most whose {} is kept; \
                 the others are not served",
                kind.rows(),
                kind.object()
            ),
            IndexError::TooManyEntries {
                path,
                kind,
                entries,
                max_entries,
            } => write!(
                f,
                "{}: {entries} entries, more than the {max_entries} kept; the {} {} unserved \
                 the longest are forgotten, and their indexes are not handed out again",
                path.display(),
                entries.saturating_sub(*max_entries),
                kind.rows()
            ),
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

/// The result of [`StableIndexes::assign`] and [`StableIndexes::assign_keys`].
#[derive(Debug)]
pub struct Assigned {
    /// One entry per key, in the order given: its index, or `None` when the key is new and
    /// cannot get one (the index space is full, or more keys are served than are kept).
    pub indexes: Vec<Option<u32>>,
    /// What the caller should log: [`IndexError::Full`] and [`IndexError::TooManyServed`]
    /// (each at most once) and a failed save.
    pub problems: Vec<IndexError>,
}

/// A kept entry.
struct Slot {
    index: u32,
    /// When the key was last given to [`StableIndexes::assign_keys`], in seconds since the
    /// Unix epoch: the entry unserved the longest is forgotten first. Unused for types.
    last_served: u64,
}

/// How a new key's index is found: each kind has its own ([`IndexKind::grows_only`]).
enum Numbering {
    /// Types: the first free index at or after `cursor`, wrapping from `max_index` to 1.
    Search {
        /// Every index taken: the kept entries' and the reserved claims'. An index stays in
        /// here even if its entry were forgotten, so that it is never reused.
        used: HashSet<u32>,
        /// Where the search starts; always in `1..=max_index`.
        cursor: u32,
    },
    /// Sites: one above `highest`, the highest index ever handed out (0 before any), so that
    /// a forgotten entry's index never comes back, though no set of them is kept.
    Grow { highest: u32 },
}

/// The key → index assignments of one kind of row, optionally backed by a state file.
pub struct StableIndexes<K> {
    by_key: HashMap<K, Slot>,
    /// Further indexes of keys the types' state file listed more than once. No row shows
    /// them, but a poller may have seen one as that type's row, so they are saved and never
    /// reused. (Sites need none: their highest index already keeps these from coming back.)
    extra_claims: Vec<(K, u32)>,
    numbering: Numbering,
    /// The largest index handed out: u32::MAX (the MIB's indexes are Unsigned32 without 0),
    /// less only in tests, so that exhaustion can be tested without 4 billion keys.
    max_index: u32,
    /// The most entries kept ([`RowKey::MAX_ENTRIES`]), less only in tests.
    max_entries: usize,
    path: Option<PathBuf>,
    /// The state file lacks something memory has: a new key, a forgotten one, or the repair
    /// of a bad file. (Not a newer `last_served`: see the module's documentation.)
    unsaved: bool,
    /// How many times the entries were scanned for ones to forget, to test that an assign
    /// call scans them at most once however many keys it forgets for.
    #[cfg(test)]
    eviction_scans: std::cell::Cell<usize>,
}

/// The memTypeIndex assignments, kept in [`STATE_FILE`].
pub type TypeIndexes = StableIndexes<TypeKey>;

/// The memAllocSiteIndex assignments, kept in `sites.json`.
pub type SiteIndexes = StableIndexes<SiteKey>;

impl<K: RowKey> StableIndexes<K> {
    /// An in-memory map (no persistence).
    pub fn in_memory() -> Self {
        let numbering = if K::KIND.grows_only() {
            Numbering::Grow { highest: 0 }
        } else {
            Numbering::Search {
                used: HashSet::new(),
                cursor: 1,
            }
        };
        StableIndexes {
            by_key: HashMap::new(),
            extra_claims: Vec::new(),
            numbering,
            max_index: u32::MAX,
            max_entries: K::MAX_ENTRIES,
            path: None,
            unsaved: false,
            #[cfg(test)]
            eviction_scans: std::cell::Cell::new(0),
        }
    }

    /// Loads the kind's state file (dir/indexes.json, dir/sites.json); problems with the
    /// file are returned as warnings, fatal only as [`IndexError::is_fatal`] says (then
    /// nothing is ever saved by this map).
    ///
    /// A missing file starts empty. An unreadable, corrupt or unknown-version file starts
    /// empty too, and is rewritten at the next assign call. A bad entry (index 0, or an
    /// index an earlier entry has) is dropped alone: its key gets a new index when next
    /// seen, and every other row keeps its index. Entries past the kind's bound are
    /// forgotten, those unserved the longest first.
    pub fn load(dir: &Path) -> (Self, Vec<IndexError>) {
        let path = dir.join(K::STATE_FILE);
        let mut indexes = Self::in_memory();
        let mut problems = Vec::new();
        match read_state::<K>(&path, STATE_FILE_CAP) {
            Ok(file) => indexes.restore(file, &path, &mut problems),
            Err(e) => problems.push(e),
        }
        if problems.iter().any(IndexError::is_fatal) {
            return (indexes, problems);
        }
        // Rewrite a file that needed repair, so that its problems are reported once, not at
        // every start. (A types' file with a repeated key is rewritten the same way each
        // time.)
        indexes.unsaved = !problems.is_empty();
        indexes.path = Some(path);
        (indexes, problems)
    }

    /// Takes the file's entries in order: the first entry to claim an index keeps it.
    fn restore(&mut self, file: StateFile<K>, path: &Path, problems: &mut Vec<IndexError>) {
        let entries = file.entries;
        self.by_key.reserve(entries.len());
        // The indexes claimed so far, to tell a later claim of the same index.
        let mut claimed = HashSet::with_capacity(entries.len());
        let mut highest = 0;
        for Stored {
            key,
            index,
            last_served,
        } in entries
        {
            if index == 0 {
                problems.push(IndexError::ZeroIndex {
                    path: path.to_owned(),
                    kind: K::KIND,
                    key: shown(&key),
                });
                continue;
            }
            if !claimed.insert(index) {
                problems.push(IndexError::Duplicate {
                    path: path.to_owned(),
                    kind: K::KIND,
                    index,
                    key: shown(&key),
                });
                continue;
            }
            highest = highest.max(index);
            match self.by_key.entry(key) {
                Entry::Occupied(first) => {
                    problems.push(IndexError::RepeatedKey {
                        path: path.to_owned(),
                        key: shown(first.key()),
                        kept: first.get().index,
                        reserved: index,
                    });
                    if !K::KIND.grows_only() {
                        self.extra_claims.push((first.key().clone(), index));
                    }
                }
                Entry::Vacant(slot) => {
                    slot.insert(Slot { index, last_served });
                }
            }
        }
        self.numbering = match self.numbering {
            // New keys go after the highest index, as they always have; from u32::MAX the
            // search wraps around to 1.
            Numbering::Search { .. } => Numbering::Search {
                cursor: after(highest, self.max_index),
                used: claimed,
            },
            // The file's mark covers the entries forgotten before the save; an entry above
            // it (a file edited by hand) raises it, so that its index is not handed out again.
            Numbering::Grow { .. } => Numbering::Grow {
                highest: highest.max(file.highest.unwrap_or(0)),
            },
        };
        let entries = self.by_key.len();
        if entries > self.max_entries {
            let forgotten = self.longest_unserved(&[], entries - self.max_entries);
            for key in forgotten {
                self.forget(&key);
            }
            problems.push(IndexError::TooManyEntries {
                path: path.to_owned(),
                kind: K::KIND,
                entries,
                max_entries: self.max_entries,
            });
        }
    }

    /// One entry per key: Some(index), or None when a new key cannot get one (then
    /// `problems` holds IndexError::Full or IndexError::TooManyServed, once each).
    ///
    /// Every key given is served now: its `last_served` becomes `now_unix` (seconds since
    /// the Unix epoch; types, never forgotten, do not save it). When a new key needs an
    /// entry and the kind's bound is reached, the entry unserved the longest is forgotten,
    /// never one of the keys given. New keys get indexes in the order given; the keys should
    /// be distinct (a repeated key gets the same index). Saves the state file when it lacks
    /// something (a newer `last_served` alone is not saved); a failed save is in `problems`,
    /// and is tried again next time.
    pub fn assign_keys<'k>(
        &mut self,
        keys: impl IntoIterator<Item = &'k K>,
        now_unix: u64,
    ) -> Assigned
    where
        K: 'k,
    {
        let keys: Vec<&K> = keys.into_iter().collect();
        // The known keys first, so that a new key earlier in the list cannot forget them.
        let mut indexes = Vec::with_capacity(keys.len());
        let mut new = 0;
        for &key in &keys {
            match self.by_key.get_mut(key) {
                Some(slot) => {
                    // Not a reason to save: the file's last_served is as of the last save,
                    // which is current whenever entries are being forgotten (see the
                    // module's documentation).
                    slot.last_served = now_unix;
                    indexes.push(Some(slot.index));
                }
                None => {
                    new += 1;
                    indexes.push(None);
                }
            }
        }
        let mut problems = Vec::new();
        if new > 0 {
            self.add_new(&keys, &mut indexes, new, now_unix, &mut problems);
        }
        if self.unsaved {
            match self.save() {
                Ok(()) => self.unsaved = false,
                Err(e) => problems.push(e),
            }
        }
        Assigned { indexes, problems }
    }

    /// Gives the keys that have no index yet (`None` in `indexes`, `new` of them) one each.
    fn add_new(
        &mut self,
        keys: &[&K],
        indexes: &mut [Option<u32>],
        new: usize,
        now_unix: u64,
        problems: &mut Vec<IndexError>,
    ) {
        // The entries that may be forgotten, the longest unserved first: found once, at the
        // first key that needs room, so that forgetting many entries costs one scan and one
        // sort, not one scan per key.
        let mut forgettable: Option<std::vec::IntoIter<K>> = None;
        let (mut full, mut crowded) = (false, false);
        let mut left = new;
        for (i, &key) in keys.iter().enumerate() {
            if indexes[i].is_some() {
                continue;
            }
            left -= 1;
            // Given twice, and added at its first place.
            if let Some(slot) = self.by_key.get(key) {
                indexes[i] = Some(slot.index);
                continue;
            }
            // Room is made only for a key that can get an index.
            if self.by_key.len() >= self.max_entries && self.has_free_index() {
                let candidates = forgettable.get_or_insert_with(|| {
                    let need = self.by_key.len() + left + 1 - self.max_entries;
                    self.longest_unserved(indexes, need)
                });
                match candidates.next() {
                    Some(old) => self.forget(&old),
                    None => {
                        if !crowded {
                            problems.push(IndexError::TooManyServed {
                                kind: K::KIND,
                                max_entries: self.max_entries,
                            });
                            crowded = true;
                        }
                        continue;
                    }
                }
            }
            match self.take_free_index() {
                Some(index) => {
                    self.by_key.insert(
                        key.clone(),
                        Slot {
                            index,
                            last_served: now_unix,
                        },
                    );
                    self.unsaved = true;
                    indexes[i] = Some(index);
                }
                None => {
                    if !full {
                        problems.push(IndexError::Full { kind: K::KIND });
                        full = true;
                    }
                }
            }
        }
    }

    /// At most `count` kept keys whose index is not in `served`, those unserved the longest
    /// first (then the lowest index: the oldest assignment). One pass over the entries and a
    /// sort of those returned: O(n + count log count).
    fn longest_unserved(&self, served: &[Option<u32>], count: usize) -> std::vec::IntoIter<K> {
        #[cfg(test)]
        self.eviction_scans.set(self.eviction_scans.get() + 1);
        let served: HashSet<u32> = served.iter().flatten().copied().collect();
        let mut candidates: Vec<(u64, u32, &K)> = self
            .by_key
            .iter()
            .filter(|(_, slot)| !served.contains(&slot.index))
            .map(|(key, slot)| (slot.last_served, slot.index, key))
            .collect();
        let order = |c: &(u64, u32, &K)| (c.0, c.1);
        if count < candidates.len() {
            candidates.select_nth_unstable_by_key(count, order);
            candidates.truncate(count);
        }
        // Indexes are distinct, so the order is total and an unstable sort is deterministic.
        candidates.sort_unstable_by_key(order);
        let keys: Vec<K> = candidates.into_iter().map(|c| c.2.clone()).collect();
        keys.into_iter()
    }

    /// Drops a key's entry. Its index is not handed out again: a growing kind's new indexes
    /// are above it, and a searching kind keeps it among the used ones.
    fn forget(&mut self, key: &K) {
        if self.by_key.remove(key).is_some() {
            self.unsaved = true;
        }
    }

    /// The number of keys kept: for types, every key ever assigned (including vanished
    /// ones); for sites, those not forgotten.
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// True when [`take_free_index`](Self::take_free_index) would find one.
    fn has_free_index(&self) -> bool {
        match &self.numbering {
            Numbering::Search { used, .. } => (used.len() as u64) < u64::from(self.max_index),
            Numbering::Grow { highest } => *highest < self.max_index,
        }
    }

    /// A new index, or `None` when none is left.
    ///
    /// Searching: the first unused index at or after the cursor. Amortised O(1): the cursor
    /// only moves forward, and each used index it steps over was either taken by this search
    /// or is passed once per trip around the index space.
    fn take_free_index(&mut self) -> Option<u32> {
        if !self.has_free_index() {
            return None;
        }
        let max_index = self.max_index;
        match &mut self.numbering {
            Numbering::Search { used, cursor } => loop {
                let candidate = *cursor;
                *cursor = after(candidate, max_index);
                if used.insert(candidate) {
                    return Some(candidate);
                }
            },
            Numbering::Grow { highest } => {
                *highest += 1;
                Some(*highest)
            }
        }
    }

    fn save(&self) -> Result<(), IndexError> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        // Each key's own index first: on reload, the first entry for a key is its row.
        let mut entries: Vec<EntryOut<K>> = self
            .by_key
            .iter()
            .map(|(key, slot)| EntryOut {
                key,
                index: slot.index,
                last_served: slot.last_served,
            })
            .collect();
        entries.sort_unstable_by_key(|e| e.index);
        let mut extra: Vec<EntryOut<K>> = self
            .extra_claims
            .iter()
            .map(|(key, index)| EntryOut {
                key,
                index: *index,
                last_served: 0,
            })
            .collect();
        extra.sort_unstable_by_key(|e| e.index);
        entries.append(&mut extra);
        let highest = match self.numbering {
            Numbering::Search { .. } => None,
            Numbering::Grow { highest } => Some(highest),
        };
        let save_error = |source| IndexError::Save {
            path: path.clone(),
            source,
        };
        let body = serde_json::to_vec_pretty(&StateFileOut {
            version: K::STATE_VERSION,
            highest,
            entries,
        })
        .map_err(|e| save_error(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))?;
        write_atomically(path, &body).map_err(save_error)
    }

    /// Shrinks the index space to `1..=max_index`, to test exhaustion.
    #[cfg(test)]
    fn with_max_index(mut self, max_index: u32) -> Self {
        assert!(max_index >= 1);
        match &mut self.numbering {
            Numbering::Search { used, cursor } => {
                assert!(used.iter().all(|&i| i <= max_index));
                if *cursor > max_index {
                    *cursor = 1;
                }
            }
            Numbering::Grow { highest } => assert!(*highest <= max_index),
        }
        self.max_index = max_index;
        self
    }

    /// Shrinks the bound on kept entries, to test forgetting without 65,536 sites.
    #[cfg(test)]
    fn with_max_entries(mut self, max_entries: usize) -> Self {
        assert!(max_entries >= 1 && self.by_key.len() <= max_entries);
        self.max_entries = max_entries;
        self
    }
}

impl StableIndexes<TypeKey> {
    /// One entry per type: Some(index), or None when the index space is full (then
    /// `problems` holds IndexError::Full once). See [`assign_keys`](Self::assign_keys).
    ///
    /// New keys get indexes in the order given (kernel order). The keys must be distinct, as
    /// [`assign_ordinals`](crate::memstat::assign_ordinals) makes them.
    pub fn assign(&mut self, types: &[MemoryType]) -> Assigned {
        let keys: Vec<TypeKey> = types.iter().map(MemoryType::key).collect();
        // Types are never forgotten, so when they are served does not matter.
        self.assign_keys(&keys, 0)
    }
}

/// The index after `index`, wrapping from `max_index` to 1.
fn after(index: u32, max_index: u32) -> u32 {
    if index >= max_index {
        1
    } else {
        index + 1
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

/// The state file of kind `K` at `path`, its entries in file order; empty when there is no
/// file.
fn read_state<K: RowKey>(path: &Path, cap: u64) -> Result<StateFile<K>, IndexError> {
    let Some(bytes) = read_capped(path, cap)? else {
        return Ok(StateFile {
            version: K::STATE_VERSION,
            highest: None,
            entries: Vec::new(),
        });
    };
    let unknown = |version| IndexError::UnknownVersion {
        path: path.to_owned(),
        kind: K::KIND,
        version,
    };
    match serde_json::from_slice::<StateFile<K>>(&bytes) {
        Ok(file) if file.version == K::STATE_VERSION => Ok(file),
        Ok(StateFile { version, .. }) => Err(unknown(version)),
        Err(e) => match serde_json::from_slice::<VersionOnly>(&bytes) {
            // Another version may have another shape: that is not corruption.
            Ok(VersionOnly { version }) if version != K::STATE_VERSION => Err(unknown(version)),
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
/// `indexes.json.tmp.PID.N`, `sites.json.tmp.PID.N`.
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
    let prefixes = [TypeKey::STATE_FILE, SiteKey::STATE_FILE].map(|file| format!("{file}.tmp."));
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            prefixes
                .iter()
                .any(|prefix| name.starts_with(prefix.as_str()))
        })
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
#[path = "index_tests.rs"]
mod tests;
