//! bsnmpd's ops through a fake bsnmpd and a subagent on a thread: what each op sends, what it
//! makes of the answers, of a subagent that does not answer in time, and of one that dies
//! while the op waits for it.
use crate::error_status::ErrorStatus;
use crate::master::fake_host::*;
use crate::registry::SessionId;
use agentx_proto::oid::Oid;
use agentx_proto::pdu::{
    CloseReason, Payload, Pdu, PduType, ResError, SearchRange, Value, VarBind,
};
use std::os::unix::io::RawFd;
use std::time::Duration;

/// Further than any session's timeout: a Hang of this much always passes the deadline.
const PAST_ANY_DEADLINE: Duration = Duration::from_secs(60);

fn vb(name: Oid, value: Value) -> VarBind {
    VarBind { name, value }
}

fn ok(varbinds: Vec<VarBind>) -> Reply {
    Reply::Answer(ResError::NO_ERROR, varbinds)
}

/// A script that gives `replies` in order, one per request, and fails on one more.
fn in_order(replies: Vec<Reply>) -> impl FnMut(&Pdu) -> Reply + Send + 'static {
    let mut replies = replies.into_iter();
    move |p| {
        replies
            .next()
            .unwrap_or_else(|| panic!("a request the script did not expect: {p:?}"))
    }
}

/// A subagent with a session that registered `CLAIM.1`, served by `script`.
fn serving(
    rig: &mut Rig,
    script: impl FnMut(&Pdu) -> Reply + Send + 'static,
) -> (SessionId, RawFd, Serving) {
    let (sub, sid) = rig.registered(&oid(&[1]));
    let fd = sub.fd;
    (sid, fd, serve(sub, &rig.clock, script))
}

/// Ends the master's side (a Close to every session left) and what the subagent received.
fn finish(rig: &mut Rig, served: Serving) -> Vec<Pdu> {
    rig.master.shutdown();
    served.received()
}

fn only_range(p: &Pdu) -> &SearchRange {
    match &p.payload {
        Payload::Get { ranges } | Payload::GetNext { ranges } | Payload::GetBulk { ranges, .. } => {
            assert_eq!(ranges.len(), 1, "{p:?}");
            &ranges[0]
        }
        other => panic!("not a search: {other:?}"),
    }
}

fn max_repetitions(p: &Pdu) -> Option<u16> {
    match &p.payload {
        Payload::GetBulk {
            max_repetitions, ..
        } => Some(*max_repetitions),
        _ => None,
    }
}

// ---- GET -----------------------------------------------------------------------------------

#[test]
fn a_get_is_an_agentx_get_of_that_instance_and_returns_its_value() {
    let mut rig = Rig::new();
    let name = oid(&[1, 4, 0]);
    let (sid, _, served) = serving(
        &mut rig,
        in_order(vec![ok(vec![vb(oid(&[1, 4, 0]), Value::Gauge32(7))])]),
    );
    assert_eq!(rig.master.get(&name), Ok(Value::Gauge32(7)));
    let got = finish(&mut rig, served);
    assert_eq!(types(&got), [PduType::GET, PduType::CLOSE]);
    assert_eq!(got[0].ids.session_id, sid);
    let r = only_range(&got[0]);
    assert_eq!((&r.start, r.include, r.end.is_null()), (&name, false, true));
}

#[test]
fn a_get_answered_wrong_is_gen_err_and_an_exception_is_no_such_name() {
    let mut rig = Rig::new();
    let name = oid(&[1, 4, 0]);
    let (_, _, served) = serving(
        &mut rig,
        in_order(vec![
            ok(vec![vb(name.clone(), Value::NoSuchInstance)]),
            Reply::Answer(ResError::GEN_ERR, vec![vb(name.clone(), Value::Integer(1))]),
            // Another instance than the one asked for.
            ok(vec![vb(oid(&[1, 4, 1]), Value::Integer(1))]),
            ok(vec![
                vb(name.clone(), Value::Integer(1)),
                vb(name.clone(), Value::Integer(2)),
            ]),
        ]),
    );
    assert_eq!(rig.master.get(&name), Err(ErrorStatus::NO_SUCH_NAME));
    for _ in 0..3 {
        assert_eq!(rig.master.get(&name), Err(ErrorStatus::GEN_ERR));
    }
    assert_eq!(finish(&mut rig, served).len(), 5);
}

#[test]
fn a_get_nobody_answers_for_is_no_such_name_and_asks_nobody() {
    let mut rig = Rig::new();
    let (_, _, served) = serving(&mut rig, in_order(vec![]));
    // In the claim, outside the registration; and outside the claim.
    assert_eq!(
        rig.master.get(&oid(&[2, 0])),
        Err(ErrorStatus::NO_SUCH_NAME)
    );
    assert_eq!(
        rig.master.get(&"1.3.6.1.2.1.1.1.0".parse().unwrap()),
        Err(ErrorStatus::NO_SUCH_NAME)
    );
    assert_eq!(rig.master.stats.requests, 0);
    assert_eq!(types(&finish(&mut rig, served)), [PduType::CLOSE]);
}

// ---- Timeouts ------------------------------------------------------------------------------

#[test]
fn a_request_unanswered_by_its_deadline_is_gen_err_and_stalls_the_session_for_the_pass() {
    let mut rig = Rig::new();
    let name = oid(&[1, 4, 0]);
    let (sid, _, served) = serving(
        &mut rig,
        in_order(vec![
            Reply::Hang(PAST_ANY_DEADLINE),
            ok(vec![vb(name.clone(), Value::Integer(3))]),
        ]),
    );
    assert_eq!(rig.master.get(&name), Err(ErrorStatus::GEN_ERR));
    assert_eq!(rig.master.stats.timeouts, 1);
    assert!(rig.logged(&format!(
        "session {sid} (unit-test subagent): no Response within 500 ms (1 in a row)"
    )));
    // The same pass (the rest of this SNMP PDU) does not wait for it again.
    assert_eq!(rig.master.get(&name), Err(ErrorStatus::GEN_ERR));
    assert_eq!(rig.master.stats.requests, 1);
    // The next pass asks again.
    rig.master.idle();
    assert_eq!(rig.master.get(&name), Ok(Value::Integer(3)));
    assert_eq!(
        types(&finish(&mut rig, served)),
        [PduType::GET, PduType::GET, PduType::CLOSE]
    );
}

#[test]
fn timeouts_in_a_row_up_to_agentx_max_timeouts_close_the_session_with_reason_timeouts() {
    let mut rig = Rig::with(|s| s.max_timeouts = 2);
    let name = oid(&[1, 4, 0]);
    let (sid, fd, served) = serving(
        &mut rig,
        in_order(vec![
            Reply::Hang(PAST_ANY_DEADLINE),
            Reply::Hang(PAST_ANY_DEADLINE),
        ]),
    );
    assert_eq!(rig.master.get(&name), Err(ErrorStatus::GEN_ERR));
    rig.master.idle();
    assert!(rig.master.sessions.contains_key(&sid));
    assert_eq!(rig.master.get(&name), Err(ErrorStatus::GEN_ERR));
    assert_eq!(rig.master.stats.sessions_closed_for_timeouts, 1);
    assert!(!rig.master.sessions.contains_key(&sid));
    // It was the connection's only session: the connection went with it.
    assert!(!rig.watches(fd));
    // From then on nobody answers for its subtree, at once.
    assert_eq!(rig.master.get(&name), Err(ErrorStatus::NO_SUCH_NAME));
    let got = served.received();
    assert_eq!(types(&got), [PduType::GET, PduType::GET, PduType::CLOSE]);
    assert_eq!(
        got[2].payload,
        Payload::Close {
            reason: CloseReason::TIMEOUTS
        }
    );
}

#[test]
fn an_answer_ends_a_run_of_timeouts() {
    let mut rig = Rig::with(|s| s.max_timeouts = 2);
    let name = oid(&[1, 4, 0]);
    let (sid, _, served) = serving(
        &mut rig,
        in_order(vec![
            Reply::Hang(PAST_ANY_DEADLINE),
            ok(vec![vb(name.clone(), Value::Integer(1))]),
            Reply::Hang(PAST_ANY_DEADLINE),
        ]),
    );
    assert_eq!(rig.master.get(&name), Err(ErrorStatus::GEN_ERR));
    rig.master.idle();
    assert_eq!(rig.master.get(&name), Ok(Value::Integer(1)));
    rig.master.idle();
    assert_eq!(rig.master.get(&name), Err(ErrorStatus::GEN_ERR));
    let line = rig.dumped_session(sid).expect("the session is still open");
    assert!(line.ends_with("1 timeouts in a row"), "{line}");
    assert_eq!(rig.master.stats.sessions_closed_for_timeouts, 0);
    finish(&mut rig, served);
}

#[test]
fn a_response_to_another_packet_is_not_taken_for_the_answer() {
    let mut rig = Rig::new();
    let name = oid(&[1, 4, 0]);
    let mut first_packet = None;
    let (_, _, served) = serving(&mut rig, move |p| {
        let Some(earlier) = first_packet else {
            first_packet = Some(p.ids);
            return ok(vec![vb(oid(&[1, 4, 0]), Value::Integer(1))]);
        };
        // A duplicate of the answer to the first request, then the answer to this one.
        let stale = Pdu::with_ids(
            earlier,
            Payload::Response {
                sys_uptime: 0,
                error: ResError::NO_ERROR,
                index: 0,
                varbinds: vec![vb(oid(&[1, 4, 0]), Value::Integer(1))],
            },
        );
        Reply::SendFirst(
            vec![stale],
            Box::new(ok(vec![vb(oid(&[1, 4, 0]), Value::Integer(2))])),
        )
    });
    assert_eq!(rig.master.get(&name), Ok(Value::Integer(1)));
    assert_eq!(rig.master.get(&name), Ok(Value::Integer(2)));
    finish(&mut rig, served);
}

// ---- A subagent that dies mid-request --------------------------------------------------------

#[test]
fn a_subagent_that_dies_mid_request_is_gen_err_and_its_subtree_is_gone() {
    let mut rig = Rig::new();
    let name = oid(&[1, 4, 0]);
    let (sid, fd, served) = serving(&mut rig, in_order(vec![Reply::Die]));
    assert_eq!(rig.master.get(&name), Err(ErrorStatus::GEN_ERR));
    assert_eq!(types(&served.received()), [PduType::GET]);
    assert!(!rig.watches(fd));
    assert!(!rig.master.sessions.contains_key(&sid));
    assert!(rig.master.registry.registrations().is_empty());
    assert!(rig.logged("connection (unix) closed: the subagent closed the connection"));
    // No timeout was counted: the connection's end is not a slow subagent.
    assert_eq!(rig.master.stats.timeouts, 0);
    // The rest of the SNMP PDU, and the next ones, find nobody there.
    assert_eq!(rig.master.get(&name), Err(ErrorStatus::NO_SUCH_NAME));
    assert_eq!(
        rig.master.get_next(0, &CLAIM.parse().unwrap()),
        Err(ErrorStatus::NO_SUCH_NAME)
    );
    assert_eq!(rig.master.stats.requests, 1);
    assert!(rig.host.borrow().stray_unwatches.is_empty());
}

#[test]
fn a_subagent_that_dies_halfway_through_its_response_is_gen_err() {
    for cut in [10, 30] {
        let mut rig = Rig::new();
        let name = oid(&[1, 4, 0]);
        let (_, fd, served) = serving(&mut rig, move |p| {
            let mut answer = Vec::new();
            Pdu::with_ids(
                p.ids,
                Payload::Response {
                    sys_uptime: 0,
                    error: ResError::NO_ERROR,
                    index: 0,
                    varbinds: vec![vb(oid(&[1, 4, 0]), Value::Integer(1))],
                },
            )
            .encode(&mut answer);
            answer.truncate(cut);
            Reply::DieAfter(answer)
        });
        assert_eq!(
            rig.master.get(&name),
            Err(ErrorStatus::GEN_ERR),
            "cut at {cut}"
        );
        assert!(!rig.watches(fd));
        served.received();
    }
}

#[test]
fn a_subagent_that_dies_between_testset_and_commitset_fails_the_set_with_commit_failed() {
    let mut rig = Rig::new();
    let (_, _, served) = serving(&mut rig, in_order(vec![ok(vec![]), Reply::Die]));
    let set = vb(oid(&[1, 4, 0]), Value::Integer(5));
    assert_eq!(rig.master.set(set), Err(ErrorStatus::COMMIT_FAILED));
    assert_eq!(
        types(&served.received()),
        [PduType::TEST_SET, PduType::COMMIT_SET]
    );
    assert!(rig.master.txns.is_empty());
}

#[test]
fn a_subagent_that_dies_during_a_rollback_is_undo_failed() {
    let mut rig = Rig::new();
    let (_, _, served) = serving(&mut rig, in_order(vec![ok(vec![]), ok(vec![]), Reply::Die]));
    let txn = rig
        .master
        .set(vb(oid(&[1, 4, 0]), Value::Integer(5)))
        .unwrap();
    assert_eq!(rig.master.rollback(txn), Err(ErrorStatus::UNDO_FAILED));
    assert_eq!(
        types(&served.received()),
        [PduType::TEST_SET, PduType::COMMIT_SET, PduType::UNDO_SET]
    );
}

// ---- What a subagent sends while a request waits ------------------------------------------

#[test]
fn pdus_a_subagent_sends_during_a_request_are_handled_at_idle() {
    let mut rig = Rig::new();
    let name = oid(&[1, 4, 0]);
    let (_, _, served) = serving(&mut rig, move |p| {
        let sid = p.ids.session_id;
        Reply::SendFirst(
            vec![
                Pdu::new(sid, 0, 900, register(&oid(&[2]), 127)),
                Pdu::new(sid, 0, 901, Payload::Ping),
            ],
            Box::new(ok(vec![vb(oid(&[1, 4, 0]), Value::Integer(8))])),
        )
    });
    assert_eq!(rig.master.get(&name), Ok(Value::Integer(8)));
    // Not during the op: bsnmpd's tree walk must not see the routing change under it.
    assert_eq!(rig.master.registry.owner_of(&oid(&[2]).0), None);
    rig.master.idle();
    assert!(rig.master.registry.owner_of(&oid(&[2]).0).is_some());
    let got = finish(&mut rig, served);
    let answered: Vec<(u32, ResError)> = got
        .iter()
        .filter(|p| p.pdu_type() == PduType::RESPONSE)
        .map(|p| (p.ids.packet_id, response_error(p)))
        .collect();
    assert_eq!(
        answered,
        [(900, ResError::NO_ERROR), (901, ResError::NO_ERROR)]
    );
}

#[test]
fn more_than_256_pdus_during_one_request_close_the_connection() {
    let mut rig = Rig::new();
    let (_, fd, served) = serving(&mut rig, move |p| {
        let sid = p.ids.session_id;
        let pings = (0..257)
            .map(|i| Pdu::new(sid, 0, 1000 + i, Payload::Ping))
            .collect();
        Reply::SendFirst(pings, Box::new(ok(vec![])))
    });
    assert_eq!(rig.master.get(&oid(&[1, 4, 0])), Err(ErrorStatus::GEN_ERR));
    assert!(!rig.watches(fd));
    let got = served.received();
    assert_eq!(
        got.last().map(|p| &p.payload),
        Some(&Payload::Close {
            reason: CloseReason::PROTOCOL_ERROR
        })
    );
}

// ---- GETNEXT -------------------------------------------------------------------------------

#[test]
fn a_getnext_asks_for_a_run_within_the_interval_and_serves_the_pdus_next_ones_from_it() {
    let mut rig = Rig::new();
    let run: Vec<VarBind> = (1..=3)
        .map(|i| vb(oid(&[1, i]), Value::Integer(i as i32)))
        .collect();
    let (_, _, served) = serving(
        &mut rig,
        in_order(vec![
            ok(run.clone()),
            ok(vec![vb(oid(&[1, 9]), Value::EndOfMibView)]),
        ]),
    );
    let claim: Oid = CLAIM.parse().unwrap();
    assert_eq!(rig.master.get_next(0, &claim), Ok(run[0].clone()));
    assert_eq!(rig.master.get_next(0, &run[0].name), Ok(run[1].clone()));
    assert_eq!(rig.master.get_next(0, &run[1].name), Ok(run[2].clone()));
    assert_eq!(rig.master.stats.prefetch_hits, 2);
    // Past the run: asked again, and the subagent has nothing more in its subtree.
    assert_eq!(
        rig.master.get_next(0, &run[2].name),
        Err(ErrorStatus::NO_SUCH_NAME)
    );
    let got = finish(&mut rig, served);
    assert_eq!(
        types(&got),
        [PduType::GET_BULK, PduType::GET_BULK, PduType::CLOSE]
    );
    let first = only_range(&got[0]);
    // From the start of the registration, included, to its end.
    assert_eq!(
        (&first.start, first.include, &first.end),
        (&oid(&[1]), true, &oid(&[2]))
    );
    assert_eq!(max_repetitions(&got[0]), Some(16));
    let second = only_range(&got[1]);
    assert_eq!((&second.start, second.include), (&run[2].name, false));
}

#[test]
fn the_first_getnext_of_a_pdu_asks_for_as_many_as_the_last_pdu_used() {
    let mut rig = Rig::new();
    let (_, _, served) = serving(&mut rig, |p| {
        // One object per request, whatever was asked: every GETNEXT needs a request.
        let r = only_range(p);
        let next = if r.include {
            r.start.clone()
        } else {
            r.start.child(&[0])
        };
        ok(vec![vb(next, Value::Integer(1))])
    });
    let claim: Oid = CLAIM.parse().unwrap();
    let walk = |rig: &mut Rig, n: usize| {
        let mut at = claim.clone();
        for _ in 0..n {
            at = rig.master.get_next(0, &at).unwrap().name;
        }
        rig.master.idle();
    };
    // A PDU of one GETNEXT, then one of three, then one of one.
    walk(&mut rig, 1);
    walk(&mut rig, 3);
    walk(&mut rig, 1);
    let got = finish(&mut rig, served);
    let sizes: Vec<Option<u16>> = got
        .iter()
        .filter(|p| p.pdu_type() != PduType::CLOSE)
        .map(max_repetitions)
        .collect();
    // The first ever asks for agentxPrefetch; a first after a PDU of one is a GetNext
    // (no repetitions); the rest of a PDU asks for agentxPrefetch; a first after a PDU of
    // three asks for three.
    assert_eq!(
        sizes,
        [Some(16), None, Some(16), Some(16), Some(3)],
        "{:?}",
        types(&got)
    );
}

#[test]
fn a_getnext_answer_outside_the_range_or_out_of_order_is_gen_err() {
    let bad_runs = [
        // Past the registration's end.
        vec![vb(oid(&[2, 1]), Value::Integer(1))],
        // Not after the position asked from.
        vec![
            vb(oid(&[1]), Value::Integer(1)),
            vb(oid(&[1]), Value::Integer(1)),
        ],
        vec![
            vb(oid(&[1, 2]), Value::Integer(1)),
            vb(oid(&[1, 1]), Value::Integer(1)),
        ],
        vec![vb(oid(&[1, 2]), Value::NoSuchObject)],
    ];
    for run in bad_runs {
        let mut rig = Rig::new();
        let (_, _, served) = serving(&mut rig, in_order(vec![ok(run.clone())]));
        assert_eq!(
            rig.master.get_next(0, &CLAIM.parse().unwrap()),
            Err(ErrorStatus::GEN_ERR),
            "{run:?}"
        );
        assert!(rig.logged("outside the range or out of order"), "{run:?}");
        finish(&mut rig, served);
    }
}

#[test]
fn a_getnext_the_subagent_refuses_is_gen_err() {
    let mut rig = Rig::new();
    let (_, _, served) = serving(
        &mut rig,
        in_order(vec![Reply::Answer(ResError::PROCESSING_ERROR, vec![])]),
    );
    assert_eq!(
        rig.master.get_next(0, &CLAIM.parse().unwrap()),
        Err(ErrorStatus::GEN_ERR)
    );
    finish(&mut rig, served);
}

// ---- SET, COMMIT, ROLLBACK ------------------------------------------------------------------

#[test]
fn a_set_is_testset_then_commitset_and_its_commit_is_cleanupset() {
    let mut rig = Rig::new();
    let (_, _, served) = serving(&mut rig, |_| ok(vec![]));
    let set = vb(oid(&[1, 4, 0]), Value::Integer(5));
    let txn = rig.master.set(set.clone()).unwrap();
    rig.master.commit(txn);
    let got = finish(&mut rig, served);
    assert_eq!(
        types(&got),
        [
            PduType::TEST_SET,
            PduType::COMMIT_SET,
            PduType::CLEANUP_SET,
            PduType::CLOSE
        ]
    );
    assert_eq!(
        got[0].payload,
        Payload::TestSet {
            varbinds: vec![set]
        }
    );
    // One AgentX transaction.
    assert!(got[..3]
        .iter()
        .all(|p| p.ids.transaction_id == got[0].ids.transaction_id));
    // A handle is good once.
    rig.master.commit(txn);
    assert_eq!(rig.master.stats.requests, 3);
}

#[test]
fn a_rollback_is_undoset_then_cleanupset_and_an_undo_refused_is_undo_failed() {
    let mut rig = Rig::new();
    let (_, _, served) = serving(
        &mut rig,
        in_order(vec![
            ok(vec![]),
            ok(vec![]),
            ok(vec![]),
            ok(vec![]),
            ok(vec![]),
            ok(vec![]),
            Reply::Answer(ResError::UNDO_FAILED, vec![]),
            ok(vec![]),
        ]),
    );
    let set = vb(oid(&[1, 4, 0]), Value::Integer(5));
    let txn = rig.master.set(set.clone()).unwrap();
    assert_eq!(rig.master.rollback(txn), Ok(()));
    let txn = rig.master.set(set).unwrap();
    assert_eq!(rig.master.rollback(txn), Err(ErrorStatus::UNDO_FAILED));
    let got = finish(&mut rig, served);
    let one = [
        PduType::TEST_SET,
        PduType::COMMIT_SET,
        PduType::UNDO_SET,
        PduType::CLEANUP_SET,
    ];
    assert_eq!(types(&got[..4]), one);
    assert_eq!(types(&got[4..8]), one);
}

#[test]
fn a_testset_refused_is_the_subagents_snmp_error_and_is_cleaned_up() {
    for (refusal, expected) in [
        (ResError::WRONG_VALUE, ErrorStatus::WRONG_VALUE),
        (ResError::NOT_WRITABLE, ErrorStatus::NOT_WRITABLE),
        // An AgentX code is nothing bsnmpd can send.
        (ResError::PROCESSING_ERROR, ErrorStatus::GEN_ERR),
    ] {
        let mut rig = Rig::new();
        let (_, _, served) = serving(
            &mut rig,
            in_order(vec![Reply::Answer(refusal, vec![]), ok(vec![])]),
        );
        let set = vb(oid(&[1, 4, 0]), Value::Integer(5));
        assert_eq!(rig.master.set(set), Err(expected), "{refusal}");
        assert_eq!(
            types(&finish(&mut rig, served)),
            [PduType::TEST_SET, PduType::CLEANUP_SET, PduType::CLOSE]
        );
    }
}

#[test]
fn a_commitset_that_fails_is_undone_and_commit_failed() {
    let mut rig = Rig::new();
    let (_, _, served) = serving(
        &mut rig,
        in_order(vec![
            ok(vec![]),
            Reply::Answer(ResError::COMMIT_FAILED, vec![]),
            ok(vec![]),
            ok(vec![]),
        ]),
    );
    let set = vb(oid(&[1, 4, 0]), Value::Integer(5));
    assert_eq!(rig.master.set(set), Err(ErrorStatus::COMMIT_FAILED));
    assert_eq!(
        types(&finish(&mut rig, served)),
        [
            PduType::TEST_SET,
            PduType::COMMIT_SET,
            PduType::UNDO_SET,
            PduType::CLEANUP_SET,
            PduType::CLOSE
        ]
    );
}

#[test]
fn a_set_nobody_answers_for_is_not_writable_and_an_unknown_handle_does_nothing() {
    let mut rig = Rig::new();
    let (_, _, served) = serving(&mut rig, in_order(vec![]));
    let set = vb(oid(&[2, 1, 0]), Value::Integer(5));
    assert_eq!(rig.master.set(set), Err(ErrorStatus::NOT_WRITABLE));
    assert_eq!(rig.master.rollback(12345), Ok(()));
    rig.master.commit(12345);
    assert_eq!(rig.master.stats.requests, 0);
    assert_eq!(types(&finish(&mut rig, served)), [PduType::CLOSE]);
}
