//! The source registry: every source the daemon can read, each one definition.
//!
//! A source is a [`SourceDef`] in its own module (the Linux slab reader in `linux`, the Linux
//! kernel memory of /proc/meminfo in `meminfo`, the ZFS ARC of OpenZFS's kstat file in
//! `arcstats`, the allocation call sites of /proc/allocinfo in `allocinfo`, the FreeBSD
//! sysctl streams in `sysctl`, the
//! JSON fixture in `fixture`), listed once in
//! [`SOURCES`]. Everything else comes from that list: parsing the `source` setting and its
//! errors, what `auto` reads on this platform, the help text and the man page's list (checked
//! against the registry by a test), and opening and reading the sources of one refresh.
//!
//! The `source` setting is `auto` or a comma-separated list of entries, each a source's name
//! with, where its definition allows, `:PATH`. A refresh reads every source of the list; the
//! snapshot is the union of what they read (see [`SourceRead`]).

use super::error::SourceError;
use super::source_def::Reading;
pub use super::source_def::{
    FigureGroup, FigureObject, Fills, KernelKind, Opening, Os, PathRule, Role, SourceDef,
};
use super::{
    allocinfo, arcstats, fixture, linux, meminfo, sysctl, MemoryType, SourceData, MAX_CPU_INDEX,
};
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// Every source, in the order `auto` and the documentation list them.
pub const SOURCES: &[&SourceDef] = &[
    &linux::SOURCE,
    &meminfo::SOURCE,
    &arcstats::SOURCE,
    &allocinfo::SOURCE,
    &sysctl::SOURCE,
    &fixture::SOURCE,
];

/// The words `--help`, the man page and the errors use for one entry: `name`, `name[:PATH]`
/// or `name:PATH`.
pub fn usage(def: &SourceDef) -> String {
    match def.path {
        PathRule::None => def.name.to_string(),
        PathRule::Default(_) => format!("{}[:PATH]", def.name),
        PathRule::Required => format!("{}:PATH", def.name),
    }
}

/// `auto, linux[:PATH], freebsd or fixture:PATH`, from the registry.
fn choices() -> String {
    let entries: Vec<String> = SOURCES.iter().map(|d| usage(d)).collect();
    format!("auto, or one or more of {}", entries.join(", "))
}

/// The sources list for `--help`: one line per source, from the registry.
pub fn help_text() -> String {
    let mut out = String::from(
        "Sources (--source auto, or entries separated by commas; auto is the running kernel's):\n",
    );
    for d in SOURCES {
        let auto = d
            .auto_on
            .map(|os| format!(" (auto on {})", os.name()))
            .unwrap_or_default();
        out.push_str(&format!("  {:<16} {}{auto}\n", usage(d), d.summary));
    }
    out
}

/// One entry of the `source` setting: a source, with its file where it reads one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceSpec {
    pub def: &'static SourceDef,
    pub path: Option<PathBuf>,
}

impl SourceSpec {
    /// The entry for `def` with its default file, as `auto` reads it.
    fn default_of(def: &'static SourceDef) -> SourceSpec {
        let path = match def.path {
            PathRule::Default(p) => Some(PathBuf::from(p)),
            PathRule::None | PathRule::Required => None,
        };
        SourceSpec { def, path }
    }
}

impl fmt::Display for SourceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.path {
            Some(p) => write!(f, "{}:{}", self.def.name, p.display()),
            None => f.write_str(self.def.name),
        }
    }
}

impl FromStr for SourceSpec {
    type Err = SourceError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (name, path) = match s.split_once(':') {
            Some((n, p)) => (n, Some(p)),
            None => (s, None),
        };
        let unknown = |why: String| SourceError::Unavailable {
            message: format!("unknown source {s:?}{why}: use {}", choices()),
        };
        let def = SOURCES
            .iter()
            .copied()
            .find(|d| d.name == name)
            .ok_or_else(|| unknown(String::new()))?;
        let path = match (def.path, path) {
            (_, Some("")) => return Err(unknown(": the path after the colon is empty".into())),
            (PathRule::None, Some(_)) => {
                return Err(unknown(format!(": {} takes no path", def.name)))
            }
            (PathRule::Required, None) => {
                return Err(unknown(format!(": {} needs a path", def.name)))
            }
            (PathRule::Default(d), None) => Some(PathBuf::from(d)),
            (_, p) => p.map(PathBuf::from),
        };
        Ok(SourceSpec { def, path })
    }
}

/// The `source` setting: `auto`, or the listed sources.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SourceChoice {
    /// Every source whose definition says `auto` includes it on this platform.
    Auto,
    List(Vec<SourceSpec>),
}

impl SourceChoice {
    /// The sources this choice reads here. `auto` on a platform with no kernel source is an
    /// error.
    pub fn resolve(&self) -> Result<Vec<SourceSpec>, SourceError> {
        match self {
            SourceChoice::List(l) => Ok(l.clone()),
            SourceChoice::Auto => {
                let here: Vec<SourceSpec> = SOURCES
                    .iter()
                    .filter(|d| d.auto_on.is_some_and(Os::is_this_one))
                    .map(|d| SourceSpec::default_of(d))
                    .collect();
                if here.is_empty() {
                    let needs_path = SOURCES.iter().find(|d| d.fills == Fills::Anything);
                    return Err(SourceError::Unavailable {
                        message: format!(
                            "no kernel source on this platform: use --source {}",
                            needs_path.map_or_else(choices, |d| usage(d))
                        ),
                    });
                }
                Ok(here)
            }
        }
    }
}

impl fmt::Display for SourceChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceChoice::Auto => f.write_str("auto"),
            SourceChoice::List(l) => f.write_str(&names(l)),
        }
    }
}

/// The names of several sources as the setting, memSourceName and the logs write them.
fn names(specs: &[SourceSpec]) -> String {
    let v: Vec<String> = specs.iter().map(ToString::to_string).collect();
    v.join(",")
}

impl FromStr for SourceChoice {
    type Err = SourceError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.trim() == "auto" {
            return Ok(SourceChoice::Auto);
        }
        let mut list: Vec<SourceSpec> = Vec::new();
        for entry in s.split(',').map(str::trim) {
            if entry == "auto" {
                return Err(SourceError::Unavailable {
                    message: format!("source {s:?}: auto stands alone, not in a list"),
                });
            }
            let spec: SourceSpec = entry.parse()?;
            if list.contains(&spec) {
                return Err(SourceError::Unavailable {
                    message: format!("source {s:?}: {spec} is listed twice"),
                });
            }
            list.push(spec);
        }
        Ok(SourceChoice::List(list))
    }
}

struct Opened {
    spec: SourceSpec,
    name: String,
    reading: Box<dyn Reading>,
}

/// The opened sources of the `source` setting.
pub struct Sources {
    opened: Vec<Opened>,
}

/// What one refresh read: per source, in the order of [`Sources::names`], its rows (kernel
/// order) or its error.
#[derive(Debug)]
pub struct SourceRead {
    pub parts: Vec<Result<SourceData, SourceError>>,
}

impl From<Result<Vec<MemoryType>, SourceError>> for SourceRead {
    /// The read of a single source of memory types.
    fn from(r: Result<Vec<MemoryType>, SourceError>) -> SourceRead {
        SourceRead {
            parts: vec![r.map(SourceData::from)],
        }
    }
}

impl SourceRead {
    /// Every source failing alike (the reading thread could not read at all).
    pub fn failed(sources: usize, e: &SourceError) -> SourceRead {
        SourceRead {
            parts: (0..sources.max(1)).map(|_| Err(e.clone())).collect(),
        }
    }

    /// The union of the parts with ordinals assigned, or the first error: what a one-off
    /// read (`dump`, `check-config`) shows.
    pub fn merged(self) -> Result<SourceData, SourceError> {
        let mut all = SourceData::default();
        for r in self.parts {
            let part = r?;
            all.types.extend(part.types);
            for (name, value) in part.figures {
                // The first source to give a figure wins, as in the daemon's snapshots.
                all.figures.entry(name).or_insert(value);
            }
            if all.profiling.is_none() {
                all.profiling = part.profiling;
            }
        }
        super::assign_ordinals(&mut all.types);
        Ok(all)
    }
}

impl Sources {
    /// Opens every source of `choice`, `auto` resolved for this platform.
    pub fn open(choice: &SourceChoice) -> Result<Sources, SourceError> {
        let opened = choice
            .resolve()?
            .into_iter()
            .map(|spec| {
                let reading = (spec.def.open)(spec.path.as_deref())?;
                let name = spec.to_string();
                Ok(Opened {
                    spec,
                    name,
                    reading,
                })
            })
            .collect::<Result<Vec<_>, SourceError>>()?;
        Ok(Sources { opened })
    }

    /// The name of each source, in the order of the setting.
    pub fn names(&self) -> Vec<String> {
        self.opened.iter().map(|o| o.name.clone()).collect()
    }

    /// All of them, as memSourceName and the logs show them.
    pub fn name(&self) -> String {
        self.names().join(",")
    }

    /// Reads every source once.
    pub fn read(&mut self) -> SourceRead {
        let parts = self
            .opened
            .iter_mut()
            .map(|o| {
                o.reading.read().and_then(|mut data| {
                    data.types = check_rows(data.types, &o.name, o.spec.def.fills)?;
                    Ok(data)
                })
            })
            .collect();
        SourceRead { parts }
    }
}

/// Refuses rows a source may not give: an allocator its definition does not fill, or a
/// per-CPU row whose CPU number the MIB cannot carry (memCpuIndex is `Unsigned32
/// (0..65535)`). Fixtures name the line of a bad CPU themselves when parsed; this is the last
/// guard for every source, so that no such index reaches the wire.
fn check_rows(
    types: Vec<MemoryType>,
    source: &str,
    fills: Fills,
) -> Result<Vec<MemoryType>, SourceError> {
    let bad = |t: &MemoryType, field: &str, message: String| SourceError::Malformed {
        what: source.to_string(),
        location: format!("type {} {:?}", t.allocator, t.name),
        field: field.into(),
        message,
    };
    for t in &types {
        if let Fills::Allocators(own) = fills {
            if !own.contains(&t.allocator) {
                return Err(bad(
                    t,
                    "allocator",
                    format!("this source gives no {} types", t.allocator),
                ));
            }
        }
        if let Some(pc) = t.per_cpu.iter().find(|pc| pc.cpu > MAX_CPU_INDEX) {
            let message = format!(
                "CPU {} is out of memCpuIndex's range 0..{MAX_CPU_INDEX}",
                pc.cpu
            );
            return Err(bad(t, "cpu", message));
        }
    }
    Ok(types)
}

#[cfg(test)]
#[path = "source_tests.rs"]
mod tests;
