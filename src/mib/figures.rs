//! The groups of scalars that sources' kernel-wide figures fill: each source's definition
//! lists its groups (`FigureGroup`), and this one implementation serves all of them from a
//! snapshot's figures, so that a new source of figures needs no code here.

use super::group::{Cell, CellValues, Group, Laid, Suffix};
use super::types::SnapshotRows;
use super::{root, Access, ObjectDef, Syntax, OBJECTS};
use crate::memstat::source::FigureGroup;

/// A source's figure group, as a group of the MIB.
pub(crate) struct FigureScalars(pub(crate) &'static FigureGroup);

impl FigureScalars {
    fn object_oid(&self, sub: u32) -> Vec<u32> {
        let mut v = vec![OBJECTS];
        v.extend_from_slice(self.0.node);
        v.push(sub);
        root(&v)
    }
}

impl Group<SnapshotRows> for FigureScalars {
    fn objects(&self, out: &mut Vec<ObjectDef>) {
        for o in self.0.objects {
            out.push(ObjectDef {
                name: o.name,
                oid: self.object_oid(o.sub),
                syntax: Syntax::Counter64,
                access: Access::ReadOnly,
            });
        }
    }

    fn column_prefixes(&self) -> Vec<Vec<u32>> {
        self.0
            .objects
            .iter()
            .map(|o| self.object_oid(o.sub))
            .collect()
    }

    fn lay_out(&self, ctx: &SnapshotRows) -> Laid<SnapshotRows> {
        // One row, instance 0; an object is present when a source gave its figure.
        let present = self
            .0
            .objects
            .iter()
            .map(|o| match ctx.snapshot.figures.contains_key(o.figure) {
                true => vec![0],
                false => Vec::new(),
            })
            .collect();
        Laid::new(vec![Suffix::one(0)], present, Box::new(Figures(self.0)))
    }
}

struct Figures(&'static FigureGroup);

impl CellValues<SnapshotRows> for Figures {
    fn value<'c>(&self, ctx: &'c SnapshotRows, column: usize, _: u32) -> Option<Cell<'c>> {
        let figure = self.0.objects.get(column)?.figure;
        ctx.snapshot
            .figures
            .get(figure)
            .copied()
            .map(Cell::Counter64)
    }
}
