//! Who answers for which OID: the module's claims (fixed at `init`), the subagents'
//! registrations inside them, and the flat interval table requests are routed with.
//!
//! RFC 2741 §7.1.5.1: among the registrations whose region holds an OID, the one with the
//! longest subtree wins; among equals the better (numerically lower) priority; among equals
//! the earlier registration. The table cuts the claims at every region boundary, so each
//! interval has a single owner, and a GetNext walks the intervals in order.
use agentx_proto::oid::Oid;

/// The largest range a Register may span (`r.upper_bound - subtree[range_subid]`): each
/// element becomes a region of its own.
pub const MAX_RANGE: u32 = 256;

/// At most this many regions in all (a range counts each element): registrations cost
/// memory and make every lookup longer.
pub const MAX_REGISTRATIONS: usize = 4096;

/// A session's identity, as the master numbers it.
pub type SessionId = u32;

/// One registration (a range registration becomes several, one per element).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registration {
    pub session: SessionId,
    pub subtree: Oid,
    pub priority: u8,
    /// The Register PDU this region came from, for Unregister.
    pub range_subid: u8,
    pub upper_bound: Option<u32>,
    /// Order of arrival, for ties.
    pub serial: u64,
}

/// Why a Register was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RegisterError {
    /// A region lies outside every claim (requestDenied).
    OutsideClaims(Oid),
    /// The same subtree at the same priority is registered already (duplicateRegistration).
    Duplicate(Oid),
    /// range_subid or upper_bound do not describe a range (parseError).
    BadRange,
    /// MAX_REGISTRATIONS reached (processingError).
    TooMany,
}

/// The subtrees of a Register: the subtree itself, or one per element of its range.
pub fn expand(
    subtree: &Oid,
    range_subid: u8,
    upper_bound: Option<u32>,
) -> Result<Vec<Oid>, RegisterError> {
    if range_subid == 0 {
        return Ok(vec![subtree.clone()]);
    }
    let i = range_subid as usize - 1;
    let (Some(&low), Some(high)) = (subtree.0.get(i), upper_bound) else {
        return Err(RegisterError::BadRange);
    };
    if high < low || high - low >= MAX_RANGE {
        return Err(RegisterError::BadRange);
    }
    Ok((low..=high)
        .map(|v| {
            let mut o = subtree.clone();
            o.0[i] = v;
            o
        })
        .collect())
}

/// The first OID after the subtree rooted at `p` (exclusive end of its region); `None` when
/// nothing follows (every sub-identifier is 2^32-1).
pub fn subtree_end(p: &[u32]) -> Option<Oid> {
    let mut v = p.to_vec();
    while let Some(last) = v.pop() {
        if last < u32::MAX {
            v.push(last + 1);
            return Some(Oid(v));
        }
    }
    None
}

/// A stretch of one claim with a single owner: `[start, end)`; `end == None` means "to the end
/// of the claim", which only happens for a claim with no end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interval {
    pub start: Oid,
    pub end: Option<Oid>,
    pub owner: Option<SessionId>,
}

/// Claims and registrations.
#[derive(Debug, Default)]
pub struct Registry {
    claims: Vec<Oid>,
    regs: Vec<Registration>,
    serial: u64,
    /// Per claim, its intervals in order (rebuilt on every change).
    table: Vec<Vec<Interval>>,
}

impl Registry {
    pub fn new(claims: Vec<Oid>) -> Registry {
        let mut r = Registry {
            claims,
            ..Registry::default()
        };
        r.rebuild();
        r
    }

    pub fn claims(&self) -> &[Oid] {
        &self.claims
    }

    pub fn registrations(&self) -> &[Registration] {
        &self.regs
    }

    /// The claim holding `oid`, if any.
    pub fn claim_of(&self, oid: &[u32]) -> Option<usize> {
        self.claims.iter().position(|c| oid.starts_with(&c.0))
    }

    /// Adds a Register's regions, all or none.
    pub fn register(
        &mut self,
        session: SessionId,
        subtree: &Oid,
        priority: u8,
        range_subid: u8,
        upper_bound: Option<u32>,
    ) -> Result<(), RegisterError> {
        let subtrees = expand(subtree, range_subid, upper_bound)?;
        if self.regs.len() + subtrees.len() > MAX_REGISTRATIONS {
            return Err(RegisterError::TooMany);
        }
        for s in &subtrees {
            if self.claim_of(&s.0).is_none() {
                return Err(RegisterError::OutsideClaims(s.clone()));
            }
            if self
                .regs
                .iter()
                .any(|r| r.subtree == *s && r.priority == priority)
            {
                return Err(RegisterError::Duplicate(s.clone()));
            }
        }
        for s in subtrees {
            self.serial += 1;
            self.regs.push(Registration {
                session,
                subtree: s,
                priority,
                range_subid,
                upper_bound: if range_subid == 0 { None } else { upper_bound },
                serial: self.serial,
            });
        }
        self.rebuild();
        Ok(())
    }

    /// Removes what one Register added; false when there was no such registration.
    pub fn unregister(
        &mut self,
        session: SessionId,
        subtree: &Oid,
        priority: u8,
        range_subid: u8,
        upper_bound: Option<u32>,
    ) -> bool {
        let Ok(subtrees) = expand(subtree, range_subid, upper_bound) else {
            return false;
        };
        let before = self.regs.len();
        self.regs.retain(|r| {
            !(r.session == session
                && r.priority == priority
                && r.range_subid == range_subid
                && subtrees.contains(&r.subtree))
        });
        let removed = self.regs.len() != before;
        if removed {
            self.rebuild();
        }
        removed
    }

    /// Drops every registration of a session (Close, or the connection went away).
    pub fn drop_session(&mut self, session: SessionId) {
        let before = self.regs.len();
        self.regs.retain(|r| r.session != session);
        if self.regs.len() != before {
            self.rebuild();
        }
    }

    /// The intervals of claim `c`, in order.
    pub fn intervals(&self, c: usize) -> &[Interval] {
        self.table.get(c).map(Vec::as_slice).unwrap_or(&[])
    }

    /// The session answering for exactly `oid` (a Get or a Set).
    pub fn owner_of(&self, oid: &[u32]) -> Option<SessionId> {
        let c = self.claim_of(oid)?;
        self.intervals(c)
            .iter()
            .find(|iv| {
                iv.start.0.as_slice() <= oid && iv.end.as_ref().is_none_or(|e| oid < e.0.as_slice())
            })
            .and_then(|iv| iv.owner)
    }

    fn best_at(&self, point: &[u32]) -> Option<SessionId> {
        self.regs
            .iter()
            .filter(|r| point.starts_with(&r.subtree.0))
            .min_by(|a, b| {
                b.subtree
                    .len()
                    .cmp(&a.subtree.len())
                    .then(a.priority.cmp(&b.priority))
                    .then(a.serial.cmp(&b.serial))
            })
            .map(|r| r.session)
    }

    fn rebuild(&mut self) {
        self.table = self
            .claims
            .iter()
            .map(|claim| {
                let claim_end = subtree_end(&claim.0);
                let mut cuts: Vec<Oid> = vec![claim.clone()];
                for r in &self.regs {
                    if r.subtree.starts_with(&claim.0) {
                        cuts.push(r.subtree.clone());
                        if let Some(e) = subtree_end(&r.subtree.0) {
                            if claim_end.as_ref().is_none_or(|ce| e < *ce) {
                                cuts.push(e);
                            }
                        }
                    }
                }
                cuts.sort();
                cuts.dedup();
                let mut out: Vec<Interval> = Vec::with_capacity(cuts.len());
                for (i, start) in cuts.iter().enumerate() {
                    let end = cuts.get(i + 1).cloned().or_else(|| claim_end.clone());
                    let owner = self.best_at(&start.0);
                    // Merge neighbours with the same owner: fewer, longer ranges per request.
                    if let Some(last) = out.last_mut() {
                        if last.owner == owner {
                            last.end = end;
                            continue;
                        }
                    }
                    out.push(Interval {
                        start: start.clone(),
                        end,
                        owner,
                    });
                }
                out
            })
            .collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o(s: &str) -> Oid {
        s.parse().unwrap()
    }

    #[test]
    fn longest_subtree_then_priority_then_first() {
        let mut r = Registry::new(vec![o("1.3.6.1.4.1.32473")]);
        r.register(1, &o("1.3.6.1.4.1.32473.1"), 127, 0, None)
            .unwrap();
        r.register(2, &o("1.3.6.1.4.1.32473.1.2"), 127, 0, None)
            .unwrap();
        r.register(3, &o("1.3.6.1.4.1.32473.1"), 100, 0, None)
            .unwrap();
        assert_eq!(r.owner_of(&o("1.3.6.1.4.1.32473.1.1.5").0), Some(3));
        assert_eq!(r.owner_of(&o("1.3.6.1.4.1.32473.1.2.5").0), Some(2));
        assert_eq!(r.owner_of(&o("1.3.6.1.4.1.32473.1.3").0), Some(3));
        assert_eq!(r.owner_of(&o("1.3.6.1.4.1.32473.2").0), None);
        // Equal subtree and priority: the same pair twice is a duplicate.
        assert_eq!(
            r.register(4, &o("1.3.6.1.4.1.32473.1"), 100, 0, None),
            Err(RegisterError::Duplicate(o("1.3.6.1.4.1.32473.1")))
        );
        r.drop_session(3);
        assert_eq!(r.owner_of(&o("1.3.6.1.4.1.32473.1.1.5").0), Some(1));
        let iv = r.intervals(0);
        assert_eq!(iv.first().unwrap().owner, None);
        assert!(iv
            .windows(2)
            .all(|w| w[0].end.as_ref() == Some(&w[1].start)));
    }

    #[test]
    fn outside_claims_is_refused() {
        let mut r = Registry::new(vec![o("1.3.6.1.4.1.32473.1")]);
        assert_eq!(
            r.register(1, &o("1.3.6.1.4.1"), 127, 0, None),
            Err(RegisterError::OutsideClaims(o("1.3.6.1.4.1")))
        );
        assert_eq!(
            r.register(1, &o("1.3.6.1.2.1.1"), 127, 0, None),
            Err(RegisterError::OutsideClaims(o("1.3.6.1.2.1.1")))
        );
        assert!(r.registrations().is_empty());
    }

    #[test]
    fn ranges_expand_and_unregister_as_one() {
        let mut r = Registry::new(vec![o("1.3.6.1.4.1.32473.1")]);
        r.register(1, &o("1.3.6.1.4.1.32473.1.2.1.1.7"), 127, 11, Some(9))
            .unwrap();
        // The 11th sub-identifier (1) ranges up to 9: nine regions.
        assert_eq!(r.registrations().len(), 9);
        assert_eq!(r.owner_of(&o("1.3.6.1.4.1.32473.1.2.1.8.7.1").0), Some(1));
        assert_eq!(r.owner_of(&o("1.3.6.1.4.1.32473.1.2.1.8.6").0), None);
        assert!(!r.unregister(1, &o("1.3.6.1.4.1.32473.1.2.1.1.7"), 127, 0, None));
        assert!(r.unregister(1, &o("1.3.6.1.4.1.32473.1.2.1.1.7"), 127, 11, Some(9)));
        assert!(r.registrations().is_empty());
        assert_eq!(
            expand(&o("1.3.6.1"), 2, Some(1)),
            Err(RegisterError::BadRange)
        );
        assert_eq!(
            expand(&o("1.3.6.1"), 9, Some(1)),
            Err(RegisterError::BadRange)
        );
    }

    #[test]
    fn registrations_are_bounded() {
        let mut r = Registry::new(vec![o("1.3.6.1.4.1.32473.1")]);
        for i in 0..MAX_REGISTRATIONS as u32 / 256 {
            r.register(
                1,
                &o(&format!("1.3.6.1.4.1.32473.1.{i}.0")),
                127,
                10,
                Some(255),
            )
            .unwrap();
        }
        assert_eq!(
            r.register(1, &o("1.3.6.1.4.1.32473.1.999"), 127, 0, None),
            Err(RegisterError::TooMany)
        );
    }

    #[test]
    fn subtree_end_carries() {
        assert_eq!(subtree_end(&[1, 3, 6]), Some(o("1.3.7")));
        assert_eq!(subtree_end(&[1, u32::MAX]), Some(o("2")));
        assert_eq!(subtree_end(&[u32::MAX]), None);
    }
}
