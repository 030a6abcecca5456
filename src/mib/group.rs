//! Groups of objects, each one definition, and the view that answers them.
//!
//! A [`GroupDef`] is a table or a group of scalars: its name, where it sits, its index (for
//! a table), its columns (for scalars, its objects), and how a context fills it: the rows
//! it has, each with its instance suffix, and a function per column from a row to its
//! value. A [`View`] lays out a list of groups over one context, once, and answers Get and
//! GetNext over all of them the same way, whatever the group: per column, the rows whose cell
//! is present, sorted by suffix, so that GetNext is a binary search and absent cells are
//! skipped without scanning. Nothing here knows what a group is about.

use super::date_and_time::date_and_time;
use super::{root, text, Access, ObjectDef, Syntax, OBJECTS};
use agentx_proto::oid::Oid;
use agentx_proto::value::Value;
use std::cmp::Ordering;
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};

/// An instance suffix (one index, or two), built without allocating: GetNext builds one for
/// every varbind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Suffix([u32; 2], u8);

impl Suffix {
    pub(crate) fn one(a: u32) -> Suffix {
        Suffix([a, 0], 1)
    }

    pub(crate) fn two(a: u32, b: u32) -> Suffix {
        Suffix([a, b], 2)
    }

    /// The suffix as one integer that sorts as the suffixes of one length do, so that a
    /// column's search compares integers: the instance order of a one-index table is its
    /// index's, of a two-index table the first index's, then the second's.
    fn key(&self) -> u64 {
        match self.1 {
            1 => u64::from(self.0[0]),
            _ => u64::from(self.0[0]) << 32 | u64::from(self.0[1]),
        }
    }
}

/// Where the instances after `s` start, among suffixes of `arity` sub-identifiers sorted by
/// [`Suffix::key`]: the key to compare with, and whether an instance whose key equals it is
/// still before `s` (`true`) or after it. Lexicographic OID order: a suffix that is a prefix
/// of `s` is before it, one that `s` is a prefix of is after it.
#[inline(always)]
fn search_key(s: &[u32], arity: u8, include: bool) -> (u64, bool) {
    let at = |i: usize| u64::from(s.get(i).copied().unwrap_or(0));
    let key = match arity {
        1 => at(0),
        _ => at(0) << 32 | at(1),
    };
    let equal_is_before = match s.len().cmp(&usize::from(arity)) {
        // `s` is longer: an instance equal on the common part is a prefix of it.
        Ordering::Greater => true,
        // `s` is shorter (or empty): an instance that starts with it comes after it.
        Ordering::Less => false,
        Ordering::Equal => !include,
    };
    (key, equal_is_before)
}

/// A cell's value as its context holds it, borrowed: a layout asks every cell whether it is
/// present, and builds nothing to do so (an SnmpAdminString or a mask would each be an
/// allocation, per cell, per refresh); the [`Value`] is built only for the cell served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cell<'a> {
    Integer(i32),
    Gauge32(u32),
    TimeTicks(u32),
    Counter64(u64),
    /// An SnmpAdminString: served cut to 255 octets, at a character boundary.
    Text(&'a str),
    /// Eight octets, the most significant first (a size mask).
    Octets64(u64),
    /// A DateAndTime, from milliseconds since the epoch.
    DateAndTime(u64),
}

impl Cell<'_> {
    #[inline]
    pub(crate) fn value(self) -> Value {
        match self {
            Cell::Integer(v) => Value::Integer(v),
            Cell::Gauge32(v) => Value::Gauge32(v),
            Cell::TimeTicks(v) => Value::TimeTicks(v),
            Cell::Counter64(v) => Value::Counter64(v),
            Cell::Text(s) => text(s),
            Cell::Octets64(m) => Value::OctetString(m.to_be_bytes().to_vec()),
            Cell::DateAndTime(ms) => Value::OctetString(date_and_time(ms).to_vec()),
        }
    }
}

/// How a group's objects are arranged under its node.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Shape {
    /// Scalars: object N at `node.N`, each with the one instance `.0`.
    Scalars,
    /// A table at `node`, its entry at `node.1`, column N at `node.1.N`; `index` lists the
    /// entry's own index objects (not-accessible), as (column, name, syntax).
    Table {
        entry: &'static str,
        index: &'static [(u32, &'static str, Syntax)],
    },
}

/// One column of a table, or one scalar of a group: served read-only.
pub(crate) struct Column<C: 'static> {
    pub(crate) sub: u32,
    pub(crate) name: &'static str,
    pub(crate) syntax: Syntax,
    /// The cell of a row, given the row's handle; `None` is an absent cell (noSuchInstance,
    /// skipped by GetNext).
    pub(crate) value: fn(&C, u64) -> Option<Cell<'_>>,
}

/// A table or a group of scalars, filled from a context `C` (a laid-out snapshot, or the
/// daemon's status). A row is a handle, a plain integer that the group's own functions
/// read the context with (a position, or two packed): so a cell's value is one call of its
/// column's function, with nothing to look up in between.
pub(crate) struct GroupDef<C: 'static> {
    /// The table's name, or the scalars' group's.
    pub(crate) name: &'static str,
    /// Its node, below memstatObjects.
    pub(crate) node: &'static [u32],
    pub(crate) shape: Shape,
    pub(crate) columns: &'static [Column<C>],
    /// The rows of a context, each with its instance suffix (a scalar group has one row,
    /// with suffix 0) and its handle, in any order.
    pub(crate) rows: fn(&C) -> Vec<(Suffix, u64)>,
}

/// A group, however it is defined: what a [`View`] and the object registry need of it.
pub(crate) trait Group<C>: Sync {
    /// Its OBJECT-TYPEs, for the registry and the drift test.
    fn objects(&self, out: &mut Vec<ObjectDef>);
    /// The OID prefix of each served column, in column order.
    fn column_prefixes(&self) -> Vec<Vec<u32>>;
    fn lay_out(&self, ctx: &C) -> Laid<C>;
}

impl<C: 'static> GroupDef<C> {
    fn node_oid(&self) -> Vec<u32> {
        let mut v = vec![OBJECTS];
        v.extend_from_slice(self.node);
        root(&v)
    }

    fn column_oid(&self, sub: u32) -> Vec<u32> {
        let mut v = self.node_oid();
        if let Shape::Table { .. } = self.shape {
            v.push(1);
        }
        v.push(sub);
        v
    }
}

impl<C: 'static> Group<C> for GroupDef<C> {
    fn objects(&self, out: &mut Vec<ObjectDef>) {
        let def = |name, oid, syntax, access| ObjectDef {
            name,
            oid,
            syntax,
            access,
        };
        if let Shape::Table { entry, index } = self.shape {
            let table = self.node_oid();
            let mut entry_oid = table.clone();
            entry_oid.push(1);
            out.push(def(self.name, table, Syntax::Table, Access::NotAccessible));
            out.push(def(entry, entry_oid, Syntax::Entry, Access::NotAccessible));
            for &(sub, name, syntax) in index {
                out.push(def(
                    name,
                    self.column_oid(sub),
                    syntax,
                    Access::NotAccessible,
                ));
            }
        }
        for c in self.columns {
            out.push(def(
                c.name,
                self.column_oid(c.sub),
                c.syntax,
                Access::ReadOnly,
            ));
        }
    }

    fn column_prefixes(&self) -> Vec<Vec<u32>> {
        self.columns
            .iter()
            .map(|c| self.column_oid(c.sub))
            .collect()
    }

    fn lay_out(&self, ctx: &C) -> Laid<C> {
        let rows = (self.rows)(ctx);
        let arity = rows.first().map_or(1, |r| r.0 .1);
        debug_assert!(
            rows.iter().all(|r| r.0 .1 == arity),
            "{}: one index length",
            self.name
        );
        let mut rows: Vec<(u64, u64)> = rows.into_iter().map(|(s, r)| (s.key(), r)).collect();
        // A stable sort (skipped when the rows come in order, as memTypeTable's do), then one
        // pass that keeps the first of a suffix listed twice (a CPU a source lists twice for
        // one type): Get and GetNext then agree on which.
        if !rows.windows(2).all(|w| w[0].0 <= w[1].0) {
            rows.sort_by_key(|r| r.0);
        }
        rows.dedup_by(|later, earlier| later.0 == earlier.0);
        let (keys, handles): (Vec<u64>, Vec<u64>) = rows.into_iter().unzip();
        let present = self
            .columns
            .iter()
            .map(|c| {
                (0..handles.len() as u32)
                    .filter(|&p| (c.value)(ctx, handles[p as usize]).is_some())
                    .collect()
            })
            .collect();
        Laid {
            keys,
            arity,
            present,
            handles,
            cells: Cells::Columns(self.columns),
        }
    }
}

/// One group laid out over a context: its rows' suffixes in order (as [`Suffix::key`]s, all
/// of `arity` sub-identifiers), per column the rows whose cell is present, and the cells
/// themselves.
pub(crate) struct Laid<C: 'static> {
    keys: Vec<u64>,
    arity: u8,
    present: Vec<Vec<u32>>,
    /// Each row's handle, for a group of columns.
    handles: Vec<u64>,
    cells: Cells<C>,
}

/// Where a laid-out group's values come from.
enum Cells<C: 'static> {
    /// A [`GroupDef`]'s columns, called with the row's handle.
    Columns(&'static [Column<C>]),
    /// A group that computes its cells itself.
    Computed(Box<dyn CellValues<C>>),
}

impl<C: 'static> Laid<C> {
    /// A group laid out by hand: `suffixes` in order, all of one length, per column the rows
    /// whose cell is present, and the cells.
    pub(crate) fn new(
        suffixes: Vec<Suffix>,
        present: Vec<Vec<u32>>,
        cells: Box<dyn CellValues<C>>,
    ) -> Laid<C> {
        Laid {
            arity: suffixes.first().map_or(1, |s| s.1),
            keys: suffixes.iter().map(Suffix::key).collect(),
            present,
            handles: Vec::new(),
            cells: Cells::Computed(cells),
        }
    }

    /// The cell of `column` in the row at `row`.
    #[inline(always)]
    fn value<'c>(&self, ctx: &'c C, column: usize, row: u32) -> Option<Cell<'c>> {
        match &self.cells {
            Cells::Columns(columns) => (columns[column].value)(ctx, self.handles[row as usize]),
            Cells::Computed(cells) => cells.value(ctx, column, row),
        }
    }

    /// The position, among `column`'s present cells, of the first one after `s` (or at it,
    /// with `include`). A binary search that branches: a walk asks for neighbouring
    /// instances one after another, whose searches take the same turns but the last few, so
    /// the branches are predicted and the steps overlap; a branch-free search waits for each
    /// step's two loads (the present row, then its key) before the next.
    #[inline(always)]
    fn first_after(&self, column: usize, s: &[u32], include: bool) -> usize {
        let (key, equal_is_before) = search_key(s, self.arity, include);
        let present = &self.present[column];
        // The instances before `s` are those whose key is below `bound`.
        let bound = match key.checked_add(u64::from(equal_is_before)) {
            Some(b) => b,
            None => return present.len(),
        };
        // A column with every cell present (most are) lists every row: its position among
        // the present cells is the row's, and the keys are searched alone.
        let dense = present.len() == self.keys.len();
        let (mut lo, mut hi) = (0, present.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let row = if dense { mid } else { present[mid] as usize };
            if self.keys[row] < bound {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }
}

/// The values of the cells of a group that computes them itself (a source's figures).
pub(crate) trait CellValues<C>: Send + Sync {
    fn value<'c>(&self, ctx: &'c C, column: usize, row: u32) -> Option<Cell<'c>>;
}

/// A served column: its OID prefix (instances follow it), and where it is laid out.
pub(crate) struct ServedColumn {
    prefix: Vec<u32>,
    group: usize,
    column: usize,
}

/// Every served column of a list of groups, in OID order, and the prefix all of them share:
/// built once per list of groups. Searches compare an OID with the shared prefix once and
/// then only with the few sub-identifiers after it, where comparing whole prefixes spent
/// most of a GetNext's instructions on the dozen that every column has in common.
pub(crate) struct ServedColumns {
    shared: Vec<u32>,
    columns: Vec<ServedColumn>,
}

impl ServedColumns {
    /// Every served column's whole prefix, in OID order.
    #[cfg(test)]
    pub(crate) fn prefixes(&self) -> impl Iterator<Item = &[u32]> {
        self.columns.iter().map(|c| c.prefix.as_slice())
    }

    /// A column's prefix after the shared part.
    #[inline(always)]
    fn tail<'c>(&self, c: &'c ServedColumn) -> &'c [u32] {
        &c.prefix[self.shared.len()..]
    }

    /// Where `oid` stands against the shared prefix: `Ok(rest)`, the sub-identifiers after
    /// it, when `oid` is in its subtree; `Err(Less)` when `oid` sorts before every column
    /// (a prefix of the shared part counts as before), `Err(Greater)` after them all.
    #[inline(always)]
    fn rest<'a>(&self, oid: &'a [u32]) -> Result<&'a [u32], Ordering> {
        match place(&self.shared, oid) {
            Place::Holds => Ok(&oid[self.shared.len()..]),
            Place::After => Err(Ordering::Less),
            Place::Before => Err(Ordering::Greater),
        }
    }
}

/// Where a column's subtree stands against an OID (both after the shared prefix).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    /// The whole subtree sorts before the OID.
    Before,
    /// The OID is in the subtree (the column's prefix is a prefix of it).
    Holds,
    /// The subtree sorts after the OID.
    After,
}

/// Where the subtree of `tail` stands against `rest`: one pass over a few sub-identifiers,
/// element by element (slice equality would call `memcmp`, a quarter of a GetNext's time for
/// these few words).
#[inline(always)]
fn place(tail: &[u32], rest: &[u32]) -> Place {
    for (i, &t) in tail.iter().enumerate() {
        match rest.get(i) {
            None => return Place::After,
            Some(&r) if t < r => return Place::Before,
            Some(&r) if t > r => return Place::After,
            Some(_) => {}
        }
    }
    Place::Holds
}

/// Every served column of `groups`, in OID order, with their shared prefix.
pub(crate) fn served_columns<C>(groups: &[&dyn Group<C>]) -> ServedColumns {
    let mut columns: Vec<ServedColumn> = groups
        .iter()
        .enumerate()
        .flat_map(|(g, def)| {
            def.column_prefixes()
                .into_iter()
                .enumerate()
                .map(move |(column, prefix)| ServedColumn {
                    prefix,
                    group: g,
                    column,
                })
        })
        .collect();
    columns.sort_by(|a, b| a.prefix.cmp(&b.prefix));
    // The longest prefix every column starts with, short of a whole column's prefix (each
    // column keeps at least one sub-identifier of its own to be told apart by).
    let mut shared: Vec<u32> = columns.first().map_or(Vec::new(), |c| c.prefix.clone());
    for c in &columns {
        let same = shared
            .iter()
            .zip(&c.prefix)
            .take_while(|(a, b)| a == b)
            .count();
        shared.truncate(same.min(c.prefix.len().saturating_sub(1)));
    }
    ServedColumns { shared, columns }
}

/// A GetNext answer from a [`View`]: the instance's OID and value, and its instance number
/// in that view (see [`View::instance_of`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    pub oid: Oid,
    pub value: Value,
    pub instance: u32,
}

/// A list of groups laid out over one context, ready to answer Get and GetNext.
pub(crate) struct View<C: 'static> {
    ctx: C,
    laid: Vec<Laid<C>>,
    columns: &'static ServedColumns,
    /// Per served column: the instance number of its first present cell. Instances are
    /// numbered 0.. in OID order, so that walk tracking can keep one small slot per instance
    /// instead of OIDs.
    first_instance: Vec<u32>,
    instances: u32,
    /// The served column [`column_of`](Self::column_of) found last. Walks go down one
    /// column at a time, so the next request is nearly always in it, and one comparison
    /// replaces the binary search (half the walk tracker's work per request). A relaxed
    /// atomic: views are shared, and a stale hint is only a miss. The hint's answer is the
    /// search's because no served column's prefix is a prefix of another's (a test in
    /// mib/tests.rs holds every list of groups to that).
    last_column: AtomicUsize,
}

impl<C: 'static> View<C> {
    /// Lays out `groups` over `ctx`; `columns` is [`served_columns`] of the same list.
    pub(crate) fn new(
        ctx: C,
        groups: &[&dyn Group<C>],
        columns: &'static ServedColumns,
    ) -> View<C> {
        let laid: Vec<Laid<C>> = groups.iter().map(|g| g.lay_out(&ctx)).collect();
        let mut first_instance = Vec::with_capacity(columns.columns.len());
        let mut next = 0u32;
        for c in &columns.columns {
            first_instance.push(next);
            let n = laid[c.group].present[c.column].len();
            next = next.saturating_add(n as u32);
        }
        View {
            ctx,
            laid,
            columns,
            first_instance,
            instances: next,
            last_column: AtomicUsize::new(0),
        }
    }

    pub(crate) fn context(&self) -> &C {
        &self.ctx
    }

    /// The number of instances (present cells) in the view.
    pub(crate) fn instance_count(&self) -> u32 {
        self.instances
    }

    /// The served column whose subtree holds `oid`, with its position.
    fn column_of(&self, oid: &[u32]) -> Option<(usize, &'static ServedColumn)> {
        let served = self.columns;
        let rest = served.rest(oid).ok()?;
        let cols = served.columns.as_slice();
        let hint = self.last_column.load(AtomicOrdering::Relaxed);
        if let Some(c) = cols.get(hint) {
            if place(served.tail(c), rest) == Place::Holds {
                return Some((hint, c));
            }
        }
        let i = cols.partition_point(|c| place(served.tail(c), rest) == Place::Before);
        let c = cols
            .get(i)
            .filter(|c| place(served.tail(c), rest) == Place::Holds)?;
        self.last_column.store(i, AtomicOrdering::Relaxed);
        Some((i, c))
    }

    /// The position of the present cell with this suffix among its column's present cells.
    #[inline]
    fn present_at(&self, col: &ServedColumn, suffix: &[u32]) -> Option<usize> {
        let laid = &self.laid[col.group];
        if suffix.len() != usize::from(laid.arity) {
            return None;
        }
        let i = laid.first_after(col.column, suffix, true);
        let &p = laid.present[col.column].get(i)?;
        let (key, _) = search_key(suffix, laid.arity, true);
        (laid.keys[p as usize] == key).then_some(i)
    }

    /// Answers a Get: the value, noSuchObject (no such object here) or noSuchInstance (the
    /// object exists but not this instance, or its cell is absent).
    pub(crate) fn get(&self, oid: &[u32]) -> Value {
        let Some((_, col)) = self.column_of(oid) else {
            return Value::NoSuchObject;
        };
        let suffix = &oid[col.prefix.len()..];
        let laid = &self.laid[col.group];
        self.present_at(col, suffix)
            .and_then(|i| {
                let p = laid.present[col.column][i];
                laid.value(&self.ctx, col.column, p)
            })
            .map_or(Value::NoSuchInstance, Cell::value)
    }

    /// The instance number of `oid` when it names a present cell of this view. Exact
    /// searches, with no value built: this runs for every continuation.
    pub(crate) fn instance_of(&self, oid: &[u32]) -> Option<u32> {
        let (k, col) = self.column_of(oid)?;
        let at = self.present_at(col, &oid[col.prefix.len()..])?;
        Some(self.first_instance[k] + at as u32)
    }

    /// Answers a GetNext: the first present instance after `start` (or at it, with
    /// `include`) and before `end` (exclusive; a null `end` is unbounded), or `None`.
    pub(crate) fn get_next(&self, start: &[u32], include: bool, end: &[u32]) -> Option<Found> {
        let served = self.columns;
        let cols = served.columns.as_slice();
        // Columns whose whole subtree lies before `start` are skipped by binary search.
        let (first, rest) = match served.rest(start) {
            Ok(rest) => (
                cols.partition_point(|c| place(served.tail(c), rest) == Place::Before),
                Some(rest),
            ),
            Err(Ordering::Less) => (0, None),
            Err(_) => return None,
        };
        for (k, col) in cols.iter().enumerate().skip(first) {
            // The instance suffix to search after; None means "from the first instance".
            let after = rest.and_then(|rest| {
                let tail = served.tail(col);
                (place(tail, rest) == Place::Holds).then(|| &rest[tail.len()..])
            });
            let laid = &self.laid[col.group];
            if let Some((at, p)) = self.next_in(laid, col, after, include) {
                return self.found(k, col, at, p, end);
            }
            // Every later column's prefix is past `end` once this one's is.
            if !end.is_empty() && col.prefix.as_slice() >= end {
                return None;
            }
        }
        None
    }

    /// Answers a GetNext from the OID of `instance`, a present cell of this view, without
    /// searching: instances are numbered in OID order, so the answer is the next instance.
    /// This is what a walk continued on its view asks, once the walk tracker has looked its
    /// start up; a second search of the view for it cost a quarter of a request's work.
    pub(crate) fn next_after(&self, instance: u32, end: &[u32]) -> Option<Found> {
        let n = instance.checked_add(1).filter(|&n| n < self.instances)?;
        // The column holding `n`: the last whose first instance is at or before it. An
        // empty column shares its first instance with the next, which is the one taken.
        let k = self
            .first_instance
            .partition_point(|&f| f <= n)
            .checked_sub(1)?;
        let col = &self.columns.columns[k];
        let at = n - self.first_instance[k];
        let &p = self.laid[col.group].present[col.column].get(at as usize)?;
        self.found(k, col, at, p, end)
    }

    /// The answer at position `at` of served column `k` (`col`), row `p`, unless it is at or
    /// past `end`.
    #[inline]
    fn found(&self, k: usize, col: &ServedColumn, at: u32, p: u32, end: &[u32]) -> Option<Found> {
        let laid = &self.laid[col.group];
        // Absent cells are not in the present lists, so a value is always there.
        let value = laid.value(&self.ctx, col.column, p)?.value();
        let key = laid.keys[p as usize];
        let mut oid = Vec::with_capacity(col.prefix.len() + 2);
        oid.extend_from_slice(&col.prefix);
        // The suffix straight from its key: no tuple of it and the value goes through the
        // stack (unaligned, it stalled the store forwarding).
        if laid.arity == 1 {
            oid.push(key as u32);
        } else {
            oid.extend_from_slice(&[(key >> 32) as u32, key as u32]);
        }
        if !end.is_empty() && oid.as_slice() >= end {
            return None;
        }
        Some(Found {
            oid: Oid(oid),
            value,
            instance: self.first_instance[k] + at,
        })
    }

    /// The first present cell of `col` whose suffix is after `after` (or equal, with
    /// `include`); every cell when `after` is `None`. Returns its position among the
    /// column's present cells and its row.
    #[inline]
    fn next_in(
        &self,
        laid: &Laid<C>,
        col: &ServedColumn,
        after: Option<&[u32]>,
        include: bool,
    ) -> Option<(u32, u32)> {
        let i = match after {
            None => 0,
            Some(s) => laid.first_after(col.column, s, include),
        };
        let &p = laid.present[col.column].get(i)?;
        Some((i as u32, p))
    }
}
