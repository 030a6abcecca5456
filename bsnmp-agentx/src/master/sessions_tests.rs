//! Session administration through a fake bsnmpd: every kind of PDU a subagent sends, and
//! every answer `handle` gives it; what ends a connection that opens no session.
use super::{MAX_SESSIONS_PER_CONNECTION, MAX_TRAP_VARBINDS, OPEN_GRACE};
use crate::error_status::ErrorStatus;
use crate::master::fake_host::*;
use agentx_proto::oid::{Oid, SNMP_TRAP_OID_0, SYS_UPTIME_0};
use agentx_proto::pdu::{CloseReason, Payload, Pdu, PduType, ResError, Value, VarBind};

fn vb(name: Oid, value: Value) -> VarBind {
    VarBind { name, value }
}

fn trap_oid_is(trap: &Oid) -> VarBind {
    vb(
        Oid::from_slice(SNMP_TRAP_OID_0),
        Value::ObjectIdentifier(trap.clone()),
    )
}

#[test]
fn open_gives_each_session_its_own_id_in_the_response_header() {
    let mut rig = Rig::new();
    let mut sub = rig.connect();
    let a = rig.open(&mut sub);
    let b = rig.open(&mut sub);
    assert_ne!(a, b);
    let r = rig.ask(&mut sub, b, Payload::Ping);
    assert_eq!(response_error(&r), ResError::NO_ERROR);
    assert_eq!(r.ids.session_id, b);
    assert_eq!(sys_uptime(&r), UPTIME);
    assert!(rig.logged(&format!("session {a} opened by")));
}

/// The session's timeout is the subagent's when it asks for one no longer than agentxTimeout.
#[test]
fn open_timeout_is_the_subagents_capped_by_agentx_timeout() {
    // agentxTimeout 3 s.
    let mut rig = Rig::with(|s| s.timeout_ticks = 300);
    let mut sub = rig.connect();
    let default = rig.open_with_timeout(&mut sub, 0);
    let shorter = rig.open_with_timeout(&mut sub, 1);
    let longer = rig.open_with_timeout(&mut sub, 5);
    let timeout_of = |sid| rig.dumped_session(sid).unwrap();
    assert!(
        timeout_of(default).contains("timeout 3000 ms"),
        "{}",
        timeout_of(default)
    );
    assert!(
        timeout_of(shorter).contains("timeout 1000 ms"),
        "{}",
        timeout_of(shorter)
    );
    assert!(
        timeout_of(longer).contains("timeout 3000 ms"),
        "{}",
        timeout_of(longer)
    );
}

#[test]
fn an_open_beyond_the_sessions_one_connection_may_have_is_open_failed() {
    let mut rig = Rig::new();
    let mut sub = rig.connect();
    for _ in 0..MAX_SESSIONS_PER_CONNECTION {
        rig.open(&mut sub);
    }
    let open = Payload::Open {
        timeout: 0,
        id: Oid::null(),
        descr: Vec::new(),
    };
    assert_eq!(
        rig.ask_error(&mut sub, 0, open.clone()),
        ResError::OPEN_FAILED
    );
    // The limit is per connection: another one still opens.
    let mut other = rig.connect();
    assert_eq!(rig.ask_error(&mut other, 0, open), ResError::NO_ERROR);
}

#[test]
fn a_pdu_for_a_session_not_open_on_its_connection_is_not_open() {
    let mut rig = Rig::new();
    let mut sub = rig.connect();
    let mut other = rig.connect();
    let theirs = rig.open(&mut other);
    assert_eq!(
        rig.ask_error(&mut sub, 99, Payload::Ping),
        ResError::NOT_OPEN
    );
    // Another connection's session may not be used from this one.
    assert_eq!(
        rig.ask_error(&mut sub, theirs, Payload::Ping),
        ResError::NOT_OPEN
    );
    assert_eq!(
        rig.ask_error(&mut sub, theirs, register(&oid(&[1]), 127)),
        ResError::NOT_OPEN
    );
    assert!(rig.master.registry.registrations().is_empty());
}

#[test]
fn a_pdu_with_a_non_default_context_is_unsupported_context() {
    let mut rig = Rig::new();
    let mut sub = rig.connect();
    let sid = rig.open(&mut sub);
    let mut p = Pdu::new(sid, 0, 77, register(&oid(&[1]), 127));
    p.context = Some(b"other".to_vec());
    sub.send(&p);
    rig.master.readable(sub.fd);
    let r = sub.recv();
    assert_eq!(r.ids.packet_id, 77);
    assert_eq!(response_error(&r), ResError::UNSUPPORTED_CONTEXT);
    assert!(rig.master.registry.registrations().is_empty());
}

#[test]
fn a_response_no_request_waits_for_is_dropped_unanswered() {
    let mut rig = Rig::new();
    let mut sub = rig.connect();
    let sid = rig.open(&mut sub);
    sub.send_for(
        sid,
        Payload::Response {
            sys_uptime: 0,
            error: ResError::NO_ERROR,
            index: 0,
            varbinds: Vec::new(),
        },
    );
    rig.master.readable(sub.fd);
    assert!(sub.nothing_sent());
    // The connection is fine: the next PDU is answered.
    assert_eq!(
        rig.ask_error(&mut sub, sid, Payload::Ping),
        ResError::NO_ERROR
    );
}

#[test]
fn close_ends_the_session_and_its_registrations_and_keeps_the_connection() {
    let mut rig = Rig::new();
    let (mut sub, sid) = rig.registered(&oid(&[1]));
    let other = rig.open(&mut sub);
    let close = Payload::Close {
        reason: CloseReason::SHUTDOWN,
    };
    assert_eq!(rig.ask_error(&mut sub, sid, close), ResError::NO_ERROR);
    assert!(rig.logged(&format!("session {sid} closed by the subagent (shutdown)")));
    assert_eq!(
        rig.ask_error(&mut sub, sid, Payload::Ping),
        ResError::NOT_OPEN
    );
    assert!(rig.master.registry.registrations().is_empty());
    // Nobody answers for the subtree now, so nothing is asked.
    assert_eq!(
        rig.master.get(&oid(&[1, 1, 0])),
        Err(ErrorStatus::NO_SUCH_NAME)
    );
    assert_eq!(rig.master.stats.requests, 0);
    assert!(rig.watches(sub.fd));
    assert_eq!(
        rig.ask_error(&mut sub, other, Payload::Ping),
        ResError::NO_ERROR
    );
}

#[test]
fn a_register_inside_the_claims_routes_the_subtree_to_the_session() {
    let mut rig = Rig::new();
    let (_sub, sid) = rig.registered(&oid(&[2]));
    assert_eq!(rig.master.registry.owner_of(&oid(&[2, 5]).0), Some(sid));
    assert_eq!(rig.master.registry.owner_of(&oid(&[3]).0), None);
}

#[test]
fn a_register_outside_the_claims_is_request_denied_and_logged_with_the_remedy() {
    let mut rig = Rig::new();
    let mut sub = rig.connect();
    let sid = rig.open(&mut sub);
    let outside: Oid = "1.3.6.1.4.1.99".parse().unwrap();
    assert_eq!(
        rig.register(&mut sub, sid, &outside),
        ResError::REQUEST_DENIED
    );
    assert!(
        rig.logged("add claim=1.3.6.1.4.1.99 to the module arguments"),
        "{:?}",
        rig.host.borrow().logs
    );
}

#[test]
fn the_same_subtree_at_the_same_priority_twice_is_duplicate_registration() {
    let mut rig = Rig::new();
    let (mut sub, sid) = rig.registered(&oid(&[1]));
    assert_eq!(
        rig.register(&mut sub, sid, &oid(&[1])),
        ResError::DUPLICATE_REGISTRATION
    );
    // Another priority is another registration.
    assert_eq!(
        rig.ask_error(&mut sub, sid, register(&oid(&[1]), 1)),
        ResError::NO_ERROR
    );
}

#[test]
fn a_range_that_is_no_range_is_parse_error() {
    let mut rig = Rig::new();
    let mut sub = rig.connect();
    let sid = rig.open(&mut sub);
    // The range runs from the 10th sub-identifier, 5, up to 2.
    let backwards = Payload::Register {
        timeout: 0,
        priority: 127,
        range_subid: 10,
        subtree: oid(&[1, 5]),
        upper_bound: Some(2),
    };
    assert_eq!(
        rig.ask_error(&mut sub, sid, backwards),
        ResError::PARSE_ERROR
    );
    assert!(rig.master.registry.registrations().is_empty());
    // The same, the right way round, is a range.
    let range = Payload::Register {
        timeout: 0,
        priority: 127,
        range_subid: 10,
        subtree: oid(&[1, 2]),
        upper_bound: Some(5),
    };
    assert_eq!(rig.ask_error(&mut sub, sid, range), ResError::NO_ERROR);
    assert_eq!(rig.master.registry.registrations().len(), 4);
}

#[test]
fn registrations_beyond_the_limit_are_processing_error() {
    let mut rig = Rig::new();
    let mut sub = rig.connect();
    let sid = rig.open(&mut sub);
    let range = |priority| Payload::Register {
        timeout: 0,
        priority,
        range_subid: 10,
        subtree: oid(&[0, 0]),
        upper_bound: Some(255),
    };
    // 16 ranges of 256 regions fill MAX_REGISTRATIONS (4096).
    for priority in 1..=16 {
        assert_eq!(
            rig.ask_error(&mut sub, sid, range(priority)),
            ResError::NO_ERROR
        );
    }
    assert_eq!(
        rig.register(&mut sub, sid, &oid(&[1000])),
        ResError::PROCESSING_ERROR
    );
}

#[test]
fn unregister_undoes_a_register_and_twice_is_unknown_registration() {
    let mut rig = Rig::new();
    let (mut sub, sid) = rig.registered(&oid(&[1]));
    let unregister = Payload::Unregister {
        priority: 127,
        range_subid: 0,
        subtree: oid(&[1]),
        upper_bound: None,
    };
    assert_eq!(
        rig.ask_error(&mut sub, sid, unregister.clone()),
        ResError::NO_ERROR
    );
    assert_eq!(rig.master.registry.owner_of(&oid(&[1, 1]).0), None);
    assert_eq!(
        rig.ask_error(&mut sub, sid, unregister),
        ResError::UNKNOWN_REGISTRATION
    );
}

#[test]
fn ping_is_answered_no_error() {
    let mut rig = Rig::new();
    let mut sub = rig.connect();
    let sid = rig.open(&mut sub);
    assert_eq!(
        rig.ask_error(&mut sub, sid, Payload::Ping),
        ResError::NO_ERROR
    );
}

#[test]
fn agent_caps_become_sysortable_rows_until_removed() {
    let mut rig = Rig::new();
    let mut sub = rig.connect();
    let sid = rig.open(&mut sub);
    let caps: Oid = "1.3.6.1.4.1.32473.3.1".parse().unwrap();
    let add = Payload::AddAgentCaps {
        id: caps.clone(),
        descr: b"memstat caps".to_vec(),
    };
    assert_eq!(rig.ask_error(&mut sub, sid, add), ResError::NO_ERROR);
    let rows: Vec<_> = rig.host.borrow().rows.values().cloned().collect();
    assert_eq!(rows, vec![(caps.clone(), b"memstat caps".to_vec())]);
    let remove = Payload::RemoveAgentCaps { id: caps };
    assert_eq!(
        rig.ask_error(&mut sub, sid, remove.clone()),
        ResError::NO_ERROR
    );
    assert!(rig.host.borrow().rows.is_empty());
    assert_eq!(
        rig.ask_error(&mut sub, sid, remove),
        ResError::UNKNOWN_AGENT_CAPS
    );
}

#[test]
fn agent_caps_bsnmpd_refuses_are_processing_error() {
    let mut rig = Rig::new();
    let mut sub = rig.connect();
    let sid = rig.open(&mut sub);
    rig.host.borrow_mut().refuse_rows = true;
    let add = Payload::AddAgentCaps {
        id: oid(&[3]),
        descr: Vec::new(),
    };
    assert_eq!(
        rig.ask_error(&mut sub, sid, add),
        ResError::PROCESSING_ERROR
    );
    // Nothing was recorded to remove.
    let remove = Payload::RemoveAgentCaps { id: oid(&[3]) };
    assert_eq!(
        rig.ask_error(&mut sub, sid, remove),
        ResError::UNKNOWN_AGENT_CAPS
    );
}

#[test]
fn a_notify_becomes_a_trap_with_or_without_sys_uptime_first() {
    let mut rig = Rig::new();
    let mut sub = rig.connect();
    let sid = rig.open(&mut sub);
    let trap = oid(&[0, 1]);
    let object = vb(oid(&[1, 1, 3, 7]), Value::Counter64(9));
    let bare = vec![trap_oid_is(&trap), object.clone()];
    let mut timed = vec![vb(Oid::from_slice(SYS_UPTIME_0), Value::TimeTicks(5))];
    timed.extend(bare.clone());
    for varbinds in [bare, timed] {
        let notify = Payload::Notify { varbinds };
        assert_eq!(rig.ask_error(&mut sub, sid, notify), ResError::NO_ERROR);
    }
    let traps = rig.host.borrow().traps.clone();
    let expected = (trap, vec![object]);
    assert_eq!(traps, vec![expected.clone(), expected]);
}

#[test]
fn a_notify_bsnmpd_cannot_send_is_processing_error_and_sends_nothing() {
    let mut rig = Rig::new();
    let mut sub = rig.connect();
    let sid = rig.open(&mut sub);
    let trap = oid(&[0, 1]);
    let too_many: Vec<VarBind> = std::iter::once(trap_oid_is(&trap))
        .chain((0..=MAX_TRAP_VARBINDS as u32).map(|i| vb(oid(&[1, i]), Value::Integer(1))))
        .collect();
    let refused = [
        // No snmpTrapOID.0 first.
        vec![vb(oid(&[1, 1]), Value::Integer(1))],
        // snmpTrapOID.0 that is no OID.
        vec![vb(Oid::from_slice(SNMP_TRAP_OID_0), Value::Integer(1))],
        vec![],
        too_many,
        // An exception is no value to send.
        vec![trap_oid_is(&trap), vb(oid(&[1, 1]), Value::NoSuchInstance)],
    ];
    for varbinds in refused {
        let notify = Payload::Notify {
            varbinds: varbinds.clone(),
        };
        assert_eq!(
            rig.ask_error(&mut sub, sid, notify),
            ResError::PROCESSING_ERROR,
            "{varbinds:?}"
        );
    }
    assert!(rig.host.borrow().traps.is_empty());
}

#[test]
fn requests_a_subagent_has_no_business_sending_are_processing_error() {
    let mut rig = Rig::new();
    let mut sub = rig.connect();
    let sid = rig.open(&mut sub);
    for payload in [
        Payload::IndexAllocate {
            varbinds: vec![vb(oid(&[1, 1]), Value::Integer(1))],
        },
        Payload::IndexDeallocate {
            varbinds: vec![vb(oid(&[1, 1]), Value::Integer(1))],
        },
        Payload::Get { ranges: vec![] },
        Payload::CommitSet,
    ] {
        let kind = payload.pdu_type();
        assert_eq!(
            rig.ask_error(&mut sub, sid, payload),
            ResError::PROCESSING_ERROR,
            "{kind}"
        );
    }
}

#[test]
fn a_frame_whose_payload_does_not_decode_is_parse_error_and_the_connection_stays() {
    let mut rig = Rig::new();
    let mut sub = rig.connect();
    let sid = rig.open(&mut sub);
    // A header with a PDU type no RFC defines: framed, but not understood.
    let mut unknown = Vec::new();
    Pdu::new(sid, 3, 41, Payload::Ping).encode(&mut unknown);
    unknown[1] = 99;
    std::io::Write::write_all(&mut sub.s, &unknown).unwrap();
    rig.master.readable(sub.fd);
    let r = sub.recv();
    assert_eq!(r.ids.packet_id, 41);
    assert_eq!(response_error(&r), ResError::PARSE_ERROR);
    assert_eq!(
        rig.ask_error(&mut sub, sid, Payload::Ping),
        ResError::NO_ERROR
    );
}

#[test]
fn a_header_that_loses_the_framing_closes_the_connection_with_parse_error() {
    let mut rig = Rig::new();
    let (mut sub, _sid) = rig.registered(&oid(&[1]));
    let mut bad = Vec::new();
    Pdu::new(1, 0, 1, Payload::Ping).encode(&mut bad);
    bad[0] = 2;
    std::io::Write::write_all(&mut sub.s, &bad).unwrap();
    rig.master.readable(sub.fd);
    let close = sub.recv();
    assert_eq!(
        close.payload,
        Payload::Close {
            reason: CloseReason::PARSE_ERROR
        }
    );
    assert!(sub.closed_by_master());
    assert!(!rig.watches(sub.fd));
    assert!(rig.master.registry.registrations().is_empty());
}

#[test]
fn a_subagent_that_disconnects_takes_its_sessions_rows_and_registrations_along() {
    let mut rig = Rig::new();
    let (mut sub, sid) = rig.registered(&oid(&[1]));
    let add = Payload::AddAgentCaps {
        id: oid(&[3]),
        descr: Vec::new(),
    };
    assert_eq!(rig.ask_error(&mut sub, sid, add), ResError::NO_ERROR);
    let fd = sub.fd;
    drop(sub);
    rig.master.readable(fd);
    assert!(!rig.watches(fd));
    assert!(rig.host.borrow().rows.is_empty());
    assert!(rig.master.registry.registrations().is_empty());
    assert!(rig.master.sessions.is_empty());
    assert!(rig.logged("connection (unix) closed: the subagent closed the connection"));
    assert!(rig.host.borrow().stray_unwatches.is_empty());
}

#[test]
fn a_connection_that_opens_no_session_is_closed_after_the_grace_and_not_before() {
    let mut rig = Rig::new();
    let mut idle = rig.connect();
    let mut opened = rig.connect();
    rig.open(&mut opened);
    rig.clock.advance(OPEN_GRACE / 2);
    rig.master.tick();
    assert!(rig.watches(idle.fd));
    rig.clock
        .advance(OPEN_GRACE / 2 + std::time::Duration::from_millis(1));
    rig.master.tick();
    assert!(!rig.watches(idle.fd));
    assert!(idle.closed_by_master());
    assert!(rig.logged("no Open within 10 s"));
    // Having opened a session, a connection stays however long it lives.
    assert!(rig.watches(opened.fd));
    assert_eq!(rig.master.sessions.len(), 1);
    assert!(opened.nothing_sent());
}

#[test]
fn shutdown_closes_every_session_and_leaves_nothing_watched() {
    let mut rig = Rig::new();
    let (mut a, _) = rig.registered(&oid(&[1]));
    let (mut b, _) = rig.registered(&oid(&[2]));
    let add = Payload::AddAgentCaps {
        id: oid(&[3]),
        descr: Vec::new(),
    };
    let sid_b = rig.master.registry.owner_of(&oid(&[2]).0).unwrap();
    assert_eq!(rig.ask_error(&mut b, sid_b, add), ResError::NO_ERROR);
    rig.master.shutdown();
    for sub in [&mut a, &mut b] {
        let close = sub.recv();
        assert_eq!(close.pdu_type(), PduType::CLOSE);
        assert_eq!(
            close.payload,
            Payload::Close {
                reason: CloseReason::SHUTDOWN
            }
        );
        assert!(sub.closed_by_master());
    }
    let host = rig.host.borrow();
    assert!(host.watched.is_empty(), "{:?}", host.watched);
    assert!(host.rows.is_empty());
    assert!(host.stray_unwatches.is_empty());
}

fn sys_uptime(p: &Pdu) -> u32 {
    match &p.payload {
        Payload::Response { sys_uptime, .. } => *sys_uptime,
        other => panic!("not a Response: {other:?}"),
    }
}
