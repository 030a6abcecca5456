//! What the kept GetBulk answers serve, and what they leave to a request.
use super::*;

fn oid(tail: &[u32]) -> Oid {
    Oid::from_slice(&[1, 3, 6, 1, 4, 1, 32473, 1]).child(tail)
}

fn vb(tail: &[u32]) -> VarBind {
    VarBind {
        name: oid(tail),
        value: agentx_proto::pdu::Value::Integer(1),
    }
}

/// Session 1's answer from `start` (excluded) to `CLAIM.2`: 1.1 and 1.2.
fn run(start: &[u32], exhausted: bool) -> Run {
    Run {
        session: 1,
        start: oid(start),
        include: false,
        end: Some(oid(&[2])),
        entries: vec![vb(&[1, 1]), vb(&[1, 2])],
        exhausted,
    }
}

#[test]
fn a_position_inside_a_run_is_served_from_it() {
    let mut p = Prefetched::default();
    p.keep(run(&[1], false));
    let end = Some(oid(&[2]));
    assert_eq!(
        p.lookup(1, &oid(&[1]), false, &end),
        Cached::Found(vb(&[1, 1]))
    );
    assert_eq!(
        p.lookup(1, &oid(&[1, 1]), false, &end),
        Cached::Found(vb(&[1, 2]))
    );
    // Between entries: the next one.
    assert_eq!(
        p.lookup(1, &oid(&[1, 1, 5]), false, &end),
        Cached::Found(vb(&[1, 2]))
    );
}

#[test]
fn past_the_entries_a_run_serves_only_when_the_subagent_said_end_of_mib_view() {
    let end = Some(oid(&[2]));
    let mut open = Prefetched::default();
    open.keep(run(&[1], false));
    assert_eq!(open.lookup(1, &oid(&[1, 2]), false, &end), Cached::Miss);
    let mut ended = Prefetched::default();
    ended.keep(run(&[1], true));
    assert_eq!(
        ended.lookup(1, &oid(&[1, 2]), false, &end),
        Cached::Exhausted
    );
}

#[test]
fn a_run_serves_neither_another_session_nor_another_range_nor_what_precedes_it() {
    let mut p = Prefetched::default();
    p.keep(run(&[1, 1], true));
    let end = Some(oid(&[2]));
    assert_eq!(p.lookup(2, &oid(&[1, 1]), false, &end), Cached::Miss);
    assert_eq!(
        p.lookup(1, &oid(&[1, 1]), false, &Some(oid(&[3]))),
        Cached::Miss
    );
    // Before its start, and at its start included when the run left the start out.
    assert_eq!(p.lookup(1, &oid(&[1]), false, &end), Cached::Miss);
    assert_eq!(p.lookup(1, &oid(&[1, 1]), true, &end), Cached::Miss);
}

#[test]
fn at_most_eight_runs_are_kept_the_oldest_forgotten_first() {
    let mut p = Prefetched::default();
    let end = Some(oid(&[2]));
    for session in 1..=PREFETCH_SLOTS as u32 + 1 {
        let mut r = run(&[1], false);
        r.session = session;
        p.keep(r);
    }
    assert_eq!(p.lookup(1, &oid(&[1]), false, &end), Cached::Miss);
    assert_eq!(
        p.lookup(2, &oid(&[1]), false, &end),
        Cached::Found(vb(&[1, 1]))
    );
    p.clear();
    assert_eq!(p.lookup(2, &oid(&[1]), false, &end), Cached::Miss);
}
