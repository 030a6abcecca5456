//! What a source is: the definition each source's own module gives (see `source`, the
//! registry, for the list and what is built from it).

use super::error::SourceError;
use super::{Allocator, SourceData};
use std::fmt;
use std::path::Path;

/// One source: what it is called, what it reads, and how.
pub struct SourceDef {
    /// Its own module (`module_path!()`): the one product file besides the registry that may
    /// name it (tests/source_registry.rs holds every other file to that).
    pub module: &'static str,
    /// Its name, and the `--source` entry that selects it (with `:PATH` when it takes one).
    pub name: &'static str,
    /// One line for `--help` and the man page.
    pub summary: &'static str,
    pub path: PathRule,
    /// The operating system whose `auto` includes it, if any.
    pub auto_on: Option<Os>,
    pub opening: Opening,
    pub fills: Fills,
    /// True for a source that only reads a saved file (the fixture): a file whose device,
    /// inode, size and times have not changed holds the same data, and `top` does not read it
    /// again. Never for a kernel file, whose times do not move with what it says.
    pub saved_copy: bool,
    /// The groups of scalars its kernel-wide figures fill, if it reads any.
    pub groups: &'static [FigureGroup],
    /// The rows of memKernelTable its figures fill, if any.
    pub kinds: &'static [KernelKind],
    /// Opens it (before the privilege drop: see [`Opening`]).
    pub(crate) open: OpenFn,
}

impl fmt::Debug for SourceDef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

impl PartialEq for SourceDef {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for SourceDef {}

/// How a source opens: with the path of its entry, where it has one.
pub(crate) type OpenFn = fn(Option<&Path>) -> Result<Box<dyn Reading>, SourceError>;

/// An operating system a source's `auto` may belong to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Os {
    Linux,
    FreeBsd,
}

impl Os {
    /// Its name as `std::env::consts::OS` and `target_os` write it.
    pub fn name(self) -> &'static str {
        match self {
            Os::Linux => "linux",
            Os::FreeBsd => "freebsd",
        }
    }

    /// True on the operating system this was built for.
    pub fn is_this_one(self) -> bool {
        self.name() == std::env::consts::OS
    }
}

/// Whether an entry names a file after its source's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathRule {
    /// `name` alone.
    None,
    /// `name` reads this file; `name:PATH` another in the same format.
    Default(&'static str),
    /// Only `name:PATH`.
    Required,
}

/// When a source is opened, which decides what the privilege drop leaves it able to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opening {
    /// Opened at start-up, while still privileged, and kept open: re-read through the same
    /// descriptor at every refresh (a root-only file stays readable after the drop).
    KeptOpen,
    /// Checked at start-up, opened again at every refresh with the daemon's final rights.
    Reopened,
}

/// What a source's rows may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fills {
    /// Memory types of these allocators only; a row of another is refused as malformed.
    Allocators(&'static [Allocator]),
    /// Any data the snapshot can hold (the fixture, which replays any host).
    Anything,
}

/// An opened source, read at every refresh (on the reading thread).
pub(crate) trait Reading: Send {
    /// The current figures, memory types in kernel order.
    fn read(&mut self) -> Result<SourceData, SourceError>;
}

/// A group of MEMSTAT-MIB scalars that a source's kernel-wide figures fill: each object is
/// one figure, served as a Counter64 (a MemGauge64 or a counter, as its MIB text says), and
/// absent while no source gives the figure.
#[derive(Debug)]
pub struct FigureGroup {
    /// The group's node name in the MIB (an OBJECT IDENTIFIER).
    pub name: &'static str,
    /// What `dump`'s table calls it (its section's heading).
    pub title: &'static str,
    /// Its node below memstatObjects.
    pub node: &'static [u32],
    pub objects: &'static [FigureObject],
}

/// One scalar of a [`FigureGroup`].
#[derive(Debug)]
pub struct FigureObject {
    /// Its arc below the group's node.
    pub sub: u32,
    /// Its OBJECT-TYPE's name.
    pub name: &'static str,
    /// The figure it serves (a key of `Snapshot::figures`).
    pub figure: &'static str,
    /// What the figure is to the group's total: how `dump` prints it and how the pollers'
    /// graphs draw it.
    pub role: Role,
}

/// What one figure of a [`FigureGroup`] is, relative to the group's [`Role::Total`]: the one
/// place that says which figures a graph stacks, draws as lines or turns into a ratio.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// How many statistics the source read: 0 means there is nothing to show.
    Count,
    /// The total, in bytes, that the others are compared with.
    Total,
    /// A target or limit of the total, in bytes: drawn as a line over the parts.
    Limit,
    /// A part of the total, in bytes: the parts do not overlap one another, and add up to the
    /// total (or nearly: the source's description says what they leave out), so they stack.
    Part,
    /// A part of the total, in bytes, in another split of it, which overlaps the
    /// [`Role::Part`]s: stacked among themselves only.
    OtherSplit,
    /// Another level in bytes, neither a part nor a limit.
    Level,
    /// The counter of hits, the numerator of the hit ratio.
    Hits,
    /// The counter of misses: hits / (hits + misses) is the hit ratio.
    Misses,
    /// Another counter.
    Counter,
}

/// A kind of kernel memory: a row of memKernelTable, which a source's figure fills. Its
/// index is a MemKernelKind value, the same on every host and across restarts; the rows form
/// a tree by `parent`, in which the children of one parent never overlap unless one of them
/// says so (`stackable: false`).
#[derive(Debug)]
pub struct KernelKind {
    /// Its MemKernelKind value (memKernelIndex).
    pub index: u32,
    /// Its MemKernelKind label (memKernelName).
    pub name: &'static str,
    /// The figure of its bytes (a key of `Snapshot::figures`); absent figure, absent row.
    pub figure: &'static str,
    /// Where its bytes are read: the field, sysctl or statistic, as MemKernelKind's
    /// DESCRIPTION names it (a test holds the two together).
    pub from: &'static str,
    /// The kind it is a part of, 0 at the top (memKernelParent).
    pub parent: u32,
    /// Memory the kernel gives back under pressure (memKernelReclaimable).
    pub reclaimable: bool,
    /// False when it overlaps its siblings, so that a poller must not stack it with them
    /// (memKernelStackable).
    pub stackable: bool,
}
