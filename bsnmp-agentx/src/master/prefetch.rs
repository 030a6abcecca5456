//! GetBulk answers kept to serve the GETNEXTs that follow within one SNMP PDU.
//!
//! bsnmpd calls the GETNEXT op once per varbind and per repetition of a GETBULK, with no
//! request identifier, so `forward` asks a subagent for a run of objects at once and keeps the
//! answer here; the next GETNEXTs whose position falls inside a kept run are served from it
//! without a request. `idle` runs between SNMP PDUs and clears everything, so nothing is served
//! across PDUs, and so does any change of who answers for what (a Register, a session gone).
use crate::registry::SessionId;
use agentx_proto::oid::Oid;
use agentx_proto::pdu::VarBind;
use std::collections::VecDeque;

/// At most this many runs are kept (one per repeater of a GETBULK).
const PREFETCH_SLOTS: usize = 8;

/// One subagent's answer to a GetBulk over the search range `start`..`end` of an interval.
pub(super) struct Run {
    pub(super) session: SessionId,
    pub(super) start: Oid,
    pub(super) include: bool,
    pub(super) end: Option<Oid>,
    /// In order, each after the one before, all inside the range.
    pub(super) entries: Vec<VarBind>,
    /// The subagent said endOfMibView after the entries: nothing else is in the range.
    pub(super) exhausted: bool,
}

/// What the kept runs know about the first object after a position.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Cached {
    Found(VarBind),
    /// Nothing follows in the range: the search goes on in the next interval.
    Exhausted,
    /// No kept run covers the position: ask the subagent.
    Miss,
}

/// The runs kept in this pass of bsnmpd's loop, newest first.
#[derive(Default)]
pub(super) struct Prefetched {
    runs: VecDeque<Run>,
}

impl Prefetched {
    pub(super) fn clear(&mut self) {
        self.runs.clear();
    }

    /// Keeps a run, forgetting the oldest when all slots are taken.
    pub(super) fn keep(&mut self, run: Run) {
        if self.runs.len() == PREFETCH_SLOTS {
            self.runs.pop_back();
        }
        self.runs.push_front(run);
    }

    /// The first object of session `sid`'s range ending at `end` after `start` (or at it,
    /// with `include`), if a run covers that position.
    pub(super) fn lookup(
        &self,
        sid: SessionId,
        start: &Oid,
        include: bool,
        end: &Option<Oid>,
    ) -> Cached {
        for p in &self.runs {
            if p.session != sid || p.end != *end {
                continue;
            }
            let covers = *start > p.start || (*start == p.start && (p.include || !include));
            if !covers {
                continue;
            }
            if let Some(vb) = p
                .entries
                .iter()
                .find(|v| v.name > *start || (include && v.name == *start))
            {
                return Cached::Found(vb.clone());
            }
            if p.exhausted {
                return Cached::Exhausted;
            }
        }
        Cached::Miss
    }
}

#[cfg(test)]
#[path = "prefetch_tests.rs"]
mod tests;
