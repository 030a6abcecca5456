//! Stable memTypeIndex values: the MIB's index contract.
//!
//! Pollers (Cacti, LibreNMS) key their graphs by row index, so the same row key
//! (allocator, name, ordinal) must keep its memTypeIndex across refreshes and across daemon
//! restarts. Assignments are kept in a small JSON state file, written atomically (temporary
//! file, fsync, rename) whenever a new key appears. A key that vanishes keeps its index
//! reserved, so the type gets the same row back if it returns. A corrupt or unreadable state
//! file is reported and rebuilt; it is never fatal.

use crate::memstat::{MemoryType, TypeKey};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The state file's name inside the state directory.
pub const STATE_FILE: &str = "indexes.json";

#[derive(Serialize, Deserialize)]
struct StateFile {
    version: u32,
    entries: Vec<Entry>,
}

#[derive(Serialize, Deserialize)]
struct Entry {
    #[serde(flatten)]
    key: TypeKey,
    index: u32,
}

/// The key → index assignments, optionally backed by a state file.
pub struct IndexMap {
    map: HashMap<TypeKey, u32>,
    next: u32,
    path: Option<PathBuf>,
    /// A problem with the state file that the caller should log (once).
    pub warning: Option<String>,
}

impl IndexMap {
    /// An in-memory map (no persistence).
    pub fn in_memory() -> Self {
        IndexMap {
            map: HashMap::new(),
            next: 1,
            path: None,
            warning: None,
        }
    }

    /// Loads `dir/indexes.json`. A missing file starts empty; a corrupt one is reported in
    /// `warning` and rebuilt from scratch.
    pub fn load(dir: &Path) -> Self {
        let path = dir.join(STATE_FILE);
        let mut m = IndexMap::in_memory();
        m.path = Some(path.clone());
        match std::fs::read(&path) {
            Ok(bytes) => match serde_json::from_slice::<StateFile>(&bytes) {
                Ok(sf) if sf.version == 1 => {
                    for e in sf.entries {
                        if e.index == 0 || m.map.values().any(|&i| i == e.index) {
                            m.warning = Some(format!(
                                "{}: duplicate or zero index {} for {:?}; rebuilding",
                                path.display(),
                                e.index,
                                e.key.name
                            ));
                            m.map.clear();
                            break;
                        }
                        m.map.insert(e.key, e.index);
                    }
                }
                Ok(sf) => {
                    m.warning = Some(format!(
                        "{}: unknown state version {}; rebuilding",
                        path.display(),
                        sf.version
                    ))
                }
                Err(e) => {
                    m.warning = Some(format!(
                        "{}: corrupt index state (line {}, column {}: {e}); rebuilding",
                        path.display(),
                        e.line(),
                        e.column()
                    ))
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                m.warning = Some(format!(
                    "{}: cannot read index state ({e}); indexes will not survive a restart",
                    path.display()
                ))
            }
        }
        m.next = m
            .map
            .values()
            .copied()
            .max()
            .map_or(1, |x| x.saturating_add(1));
        m
    }

    /// The index of each type, assigning new ones in kernel order. Saves the state file when
    /// something was added; a failed save is returned as an error message but the indexes
    /// are still valid for this run.
    pub fn assign(&mut self, types: &[MemoryType]) -> (Vec<u32>, Result<(), String>) {
        let mut added = false;
        let mut out = Vec::with_capacity(types.len());
        for t in types {
            let key = t.key();
            let idx = match self.map.get(&key) {
                Some(&i) => i,
                None => {
                    let i = self.next;
                    // Unsigned32 (1..4294967295): after 4 billion distinct keys there is no
                    // index left; reuse the last rather than wrap to 0.
                    self.next = self.next.saturating_add(1);
                    self.map.insert(key, i);
                    added = true;
                    i
                }
            };
            out.push(idx);
        }
        let saved = if added { self.save() } else { Ok(()) };
        (out, saved)
    }

    /// The number of keys ever assigned (including vanished ones).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    fn save(&self) -> Result<(), String> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let mut entries: Vec<Entry> = self
            .map
            .iter()
            .map(|(k, &i)| Entry {
                key: k.clone(),
                index: i,
            })
            .collect();
        entries.sort_by_key(|e| e.index);
        let body = serde_json::to_vec_pretty(&StateFile {
            version: 1,
            entries,
        })
        .map_err(|e| e.to_string())?;
        write_atomically(path, &body).map_err(|e| format!("{}: {e}", path.display()))
    }
}

/// Writes `body` to `path` so that a crash leaves either the old or the new file.
fn write_atomically(path: &Path, body: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("json.tmp");
    {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        f.write_all(body)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
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
    use crate::memstat::{assign_ordinals, Allocator};

    fn types(names: &[&str]) -> Vec<MemoryType> {
        let mut v: Vec<MemoryType> = names
            .iter()
            .map(|n| MemoryType::new(Allocator::Uma, *n))
            .collect();
        assign_ordinals(&mut v);
        v
    }

    #[test]
    fn indexes_survive_restart_vanish_and_return() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = IndexMap::load(dir.path());
        assert!(m.warning.is_none());
        let (a, r) = m.assign(&types(&["x", "y", "x"]));
        r.unwrap();
        assert_eq!(a, vec![1, 2, 3]);
        // "y" vanishes, "z" appears: z gets a new index, y's stays reserved.
        let (b, _) = m.assign(&types(&["x", "z", "x"]));
        assert_eq!(b, vec![1, 4, 3]);
        // Restart: the same keys get the same indexes, and y comes back as 2.
        let mut m2 = IndexMap::load(dir.path());
        let (c, _) = m2.assign(&types(&["z", "y", "x", "x", "w"]));
        assert_eq!(c, vec![4, 2, 1, 3, 5]);
    }

    #[test]
    fn corrupt_state_is_reported_and_rebuilt() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(STATE_FILE), b"{ not json").unwrap();
        let mut m = IndexMap::load(dir.path());
        let w = m.warning.clone().unwrap();
        assert!(w.contains("corrupt") && w.contains(STATE_FILE), "{w}");
        let (a, r) = m.assign(&types(&["x"]));
        r.unwrap();
        assert_eq!(a, vec![1]);
        assert!(
            IndexMap::load(dir.path()).warning.is_none(),
            "rewritten cleanly"
        );
    }
}
