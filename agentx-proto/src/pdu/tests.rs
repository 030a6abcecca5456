//! The codec's tests: round trips, every decode error, and properties over random PDUs.

use super::*;
use proptest::prelude::*;

/// A Response frame (default context) written with a [`ResponseWriter`] in one call.
fn encode_response(
    out: &mut Vec<u8>,
    ids: HeaderIds,
    sys_uptime: u32,
    error: ResError,
    index: u16,
    varbinds: &[VarBind],
) {
    let mut w = ResponseWriter::begin(out, ids, sys_uptime, error, index);
    for vb in varbinds {
        w.push(&vb.name, &vb.value);
    }
    w.finish();
}
use std::cmp::Ordering;

fn oid(s: &[u32]) -> Oid {
    Oid::from_slice(s)
}

/// 1.3.6.1.4.1.99999.<tail>
fn ent(tail: &[u32]) -> Oid {
    oid(&[1, 3, 6, 1, 4, 1, 99999]).child(tail)
}

fn vb(name: Oid, value: Value) -> VarBind {
    VarBind { name, value }
}

/// Checks a hand-written network-byte-order frame both ways: it decodes to `pdu`, and
/// encoding `pdu` reproduces it byte for byte.
fn check_exact(bytes: &[u8], pdu: &Pdu) {
    // Sanity check on the hand-written vector itself.
    let declared = u32::from_be_bytes([bytes[16], bytes[17], bytes[18], bytes[19]]);
    assert_eq!(declared as usize, bytes.len() - HEADER_LEN, "vector length");
    assert_eq!(Pdu::decode(bytes).as_ref(), Ok(pdu));
    let mut out = Vec::new();
    pdu.encode(&mut out);
    assert_eq!(out, bytes);
    // Appending must not disturb what is already in the buffer.
    let mut out = vec![0xEE, 0xEE];
    pdu.encode(&mut out);
    assert_eq!(&out[..2], &[0xEE, 0xEE]);
    assert_eq!(&out[2..], bytes);
}

fn decode_err(bytes: &[u8]) -> DecodeError {
    match Pdu::decode(bytes) {
        Err(e) => e,
        Ok(p) => panic!("decoded unexpectedly: {p:?}"),
    }
}

// ---- Hand-written vectors, one per PDU type ---------------------------------------------

const OPEN_BE: [u8; 52] = [
    0x01, 0x01, 0x10, 0x00, // version 1, type Open, flags NETWORK_BYTE_ORDER, reserved
    0x00, 0x00, 0x00, 0x00, // h.sessionID 0
    0x00, 0x00, 0x00, 0x00, // h.transactionID 0
    0x00, 0x00, 0x00, 0x2A, // h.packetID 42
    0x00, 0x00, 0x00, 0x20, // h.payload_length 32
    0x05, 0x00, 0x00, 0x00, // o.timeout 5, 3 reserved
    0x03, 0x04, 0x00, 0x00, // o.id: n_subid 3, prefix 4 (1.3.6.1.4), include 0, reserved
    0x00, 0x00, 0x00, 0x01, //   1
    0x00, 0x01, 0x86, 0x9F, //   99999
    0x00, 0x00, 0x00, 0x01, //   1
    0x00, 0x00, 0x00, 0x07, // o.descr length 7
    b'm', b'e', b'm', b's', //   "mems"
    b't', b'a', b't', 0x00, //   "tat" + 1 pad
];

fn open_pdu() -> Pdu {
    Pdu::new(
        0,
        0,
        42,
        Payload::Open {
            timeout: 5,
            id: ent(&[1]),
            descr: b"memstat".to_vec(),
        },
    )
}

#[test]
fn open() {
    check_exact(&OPEN_BE, &open_pdu());
    assert_eq!(open_pdu().pdu_type(), PduType::OPEN);
}

#[test]
fn open_little_endian_plain_oid() {
    let le: &[u8] = &[
        0x01, 0x01, 0x00, 0x00, // version 1, type Open, flags 0 (little endian), reserved
        0x0D, 0x0C, 0x0B, 0x0A, // h.sessionID 0x0A0B0C0D
        0x04, 0x03, 0x02, 0x01, // h.transactionID 0x01020304
        0x2A, 0x00, 0x00, 0x00, // h.packetID 42
        0x34, 0x00, 0x00, 0x00, // h.payload_length 52
        0x05, 0x00, 0x00, 0x00, // o.timeout 5, reserved
        0x08, 0x00, 0x00, 0x00, // o.id: n_subid 8, prefix 0, include 0, reserved
        0x01, 0x00, 0x00, 0x00, //   1
        0x03, 0x00, 0x00, 0x00, //   3
        0x06, 0x00, 0x00, 0x00, //   6
        0x01, 0x00, 0x00, 0x00, //   1
        0x04, 0x00, 0x00, 0x00, //   4
        0x01, 0x00, 0x00, 0x00, //   1
        0x9F, 0x86, 0x01, 0x00, //   99999
        0x01, 0x00, 0x00, 0x00, //   1
        0x07, 0x00, 0x00, 0x00, // o.descr length 7
        b'm', b'e', b'm', b's', //
        b't', b'a', b't', 0x00, //   + 1 pad
    ];
    let mut want = open_pdu();
    want.ids.session_id = 0x0A0B_0C0D;
    want.ids.transaction_id = 0x0102_0304;
    let h = Header::decode(le).unwrap();
    assert!(!h.network_byte_order());
    assert_eq!(h.payload_length, 52);
    assert_eq!(h.frame_len(), le.len());
    assert_eq!(Pdu::decode(le), Ok(want.clone()));

    // Re-encoding yields network byte order and the prefix form.
    let mut be = OPEN_BE.to_vec();
    be[4..12].copy_from_slice(&[0x0A, 0x0B, 0x0C, 0x0D, 0x01, 0x02, 0x03, 0x04]);
    let mut out = Vec::new();
    want.encode(&mut out);
    assert_eq!(out, be);
}

#[test]
fn close() {
    let bytes: &[u8] = &[
        0x01, 0x02, 0x10, 0x00, // version, type Close, flags NBO, reserved
        0x00, 0x00, 0x00, 0x07, // sessionID 7
        0x00, 0x00, 0x00, 0x00, // transactionID 0
        0x00, 0x00, 0x00, 0x09, // packetID 9
        0x00, 0x00, 0x00, 0x04, // payload_length 4
        0x05, 0x00, 0x00, 0x00, // c.reason 5 (shutdown), 3 reserved
    ];
    let pdu = Pdu::new(
        7,
        0,
        9,
        Payload::Close {
            reason: CloseReason::SHUTDOWN,
        },
    );
    check_exact(bytes, &pdu);
}

#[test]
fn register_with_context_and_range() {
    let bytes: &[u8] = &[
        0x01, 0x03, 0x19, 0x00, // type Register, flags NBO|NON_DEFAULT_CONTEXT|INSTANCE_REG
        0x00, 0x00, 0x00, 0x07, // sessionID 7
        0x00, 0x00, 0x00, 0x00, // transactionID 0
        0x00, 0x00, 0x00, 0x0A, // packetID 10
        0x00, 0x00, 0x00, 0x20, // payload_length 32
        0x00, 0x00, 0x00, 0x04, // context length 4
        b'c', b't', b'x', b'1', //   "ctx1" (no pad)
        0x0A, 0x7F, 0x08, 0x00, // r.timeout 10, r.priority 127, r.range_subid 8, reserved
        0x03, 0x04, 0x00, 0x00, // r.subtree: n_subid 3, prefix 4
        0x00, 0x00, 0x00, 0x01, //   1
        0x00, 0x01, 0x86, 0x9F, //   99999
        0x00, 0x00, 0x00, 0x02, //   2
        0x00, 0x00, 0x00, 0x07, // r.upper_bound 7
    ];
    let pdu = Pdu {
        flags: flags::INSTANCE_REGISTRATION,
        ids: HeaderIds::new(7, 0, 10),
        context: Some(b"ctx1".to_vec()),
        payload: Payload::Register {
            timeout: 10,
            priority: 127,
            range_subid: 8,
            subtree: ent(&[2]),
            upper_bound: Some(7),
        },
    };
    check_exact(bytes, &pdu);
}

#[test]
fn register_plain() {
    let bytes: &[u8] = &[
        0x01, 0x03, 0x10, 0x00, // type Register, flags NBO
        0x00, 0x00, 0x00, 0x07, // sessionID 7
        0x00, 0x00, 0x00, 0x00, // transactionID 0
        0x00, 0x00, 0x00, 0x0B, // packetID 11
        0x00, 0x00, 0x00, 0x10, // payload_length 16
        0x00, 0x7F, 0x00, 0x00, // r.timeout 0, r.priority 127, r.range_subid 0, reserved
        0x02, 0x04, 0x00, 0x00, // r.subtree: n_subid 2, prefix 4
        0x00, 0x00, 0x00, 0x01, //   1
        0x00, 0x01, 0x86, 0x9F, //   99999   (no upper_bound: range_subid is 0)
    ];
    let pdu = Pdu::new(
        7,
        0,
        11,
        Payload::Register {
            timeout: 0,
            priority: 127,
            range_subid: 0,
            subtree: ent(&[]),
            upper_bound: None,
        },
    );
    check_exact(bytes, &pdu);
}

#[test]
fn unregister_with_range() {
    let bytes: &[u8] = &[
        0x01, 0x04, 0x10, 0x00, // type Unregister, flags NBO
        0x00, 0x00, 0x00, 0x07, // sessionID 7
        0x00, 0x00, 0x00, 0x00, // transactionID 0
        0x00, 0x00, 0x00, 0x0C, // packetID 12
        0x00, 0x00, 0x00, 0x14, // payload_length 20
        0x00, 0x7F, 0x07, 0x00, // reserved, u.priority 127, u.range_subid 7, reserved
        0x02, 0x04, 0x00, 0x00, // u.subtree: n_subid 2, prefix 4
        0x00, 0x00, 0x00, 0x01, //   1
        0x00, 0x01, 0x86, 0x9F, //   99999
        0x00, 0x00, 0x00, 0x64, // u.upper_bound 100
    ];
    let pdu = Pdu::new(
        7,
        0,
        12,
        Payload::Unregister {
            priority: 127,
            range_subid: 7,
            subtree: ent(&[]),
            upper_bound: Some(100),
        },
    );
    check_exact(bytes, &pdu);
}

#[test]
fn get() {
    let bytes: &[u8] = &[
        0x01, 0x05, 0x10, 0x00, // type Get, flags NBO
        0x00, 0x00, 0x00, 0x07, // sessionID 7
        0x00, 0x00, 0x01, 0x00, // transactionID 256
        0x00, 0x00, 0x00, 0x0D, // packetID 13
        0x00, 0x00, 0x00, 0x34, // payload_length 52
        // SearchRange 1: start 1.3.6.1.2.1.1.1.0, end null
        0x04, 0x02, 0x00, 0x00, // n_subid 4, prefix 2, include 0
        0x00, 0x00, 0x00, 0x01, //   1
        0x00, 0x00, 0x00, 0x01, //   1
        0x00, 0x00, 0x00, 0x01, //   1
        0x00, 0x00, 0x00, 0x00, //   0
        0x00, 0x00, 0x00, 0x00, // end: null OID
        // SearchRange 2: start 1.3.6.1.4.1.99999.1.2.1, end null
        0x05, 0x04, 0x00, 0x00, // n_subid 5, prefix 4, include 0
        0x00, 0x00, 0x00, 0x01, //   1
        0x00, 0x01, 0x86, 0x9F, //   99999
        0x00, 0x00, 0x00, 0x01, //   1
        0x00, 0x00, 0x00, 0x02, //   2
        0x00, 0x00, 0x00, 0x01, //   1
        0x00, 0x00, 0x00, 0x00, // end: null OID
    ];
    let pdu = Pdu::new(
        7,
        256,
        13,
        Payload::Get {
            ranges: vec![
                SearchRange {
                    start: oid(&[1, 3, 6, 1, 2, 1, 1, 1, 0]),
                    include: false,
                    end: Oid::null(),
                },
                SearchRange {
                    start: ent(&[1, 2, 1]),
                    include: false,
                    end: Oid::null(),
                },
            ],
        },
    );
    check_exact(bytes, &pdu);
}

#[test]
fn get_next_with_context_include_and_plain_oid() {
    let bytes: &[u8] = &[
        0x01, 0x06, 0x18, 0x00, // type GetNext, flags NBO|NON_DEFAULT_CONTEXT
        0x00, 0x00, 0x00, 0x07, // sessionID 7
        0x00, 0x00, 0x01, 0x01, // transactionID 257
        0x00, 0x00, 0x00, 0x0E, // packetID 14
        0x00, 0x00, 0x00, 0x34, // payload_length 52
        0x00, 0x00, 0x00, 0x04, // context length 4
        b'c', b't', b'x', b'1', //   "ctx1"
        // SearchRange 1: start 1.3.6.1.4.1.99999 include=1, end 1.3.6.1.4.1.100000
        0x02, 0x04, 0x01, 0x00, // n_subid 2, prefix 4, include 1
        0x00, 0x00, 0x00, 0x01, //   1
        0x00, 0x01, 0x86, 0x9F, //   99999
        0x02, 0x04, 0x00, 0x00, // end: n_subid 2, prefix 4, include 0
        0x00, 0x00, 0x00, 0x01, //   1
        0x00, 0x01, 0x86, 0xA0, //   100000
        // SearchRange 2: start 1.2.840 (plain form), end null
        0x03, 0x00, 0x00, 0x00, // n_subid 3, prefix 0, include 0
        0x00, 0x00, 0x00, 0x01, //   1
        0x00, 0x00, 0x00, 0x02, //   2
        0x00, 0x00, 0x03, 0x48, //   840
        0x00, 0x00, 0x00, 0x00, // end: null OID
    ];
    let pdu = Pdu {
        flags: 0,
        ids: HeaderIds::new(7, 257, 14),
        context: Some(b"ctx1".to_vec()),
        payload: Payload::GetNext {
            ranges: vec![
                SearchRange {
                    start: ent(&[]),
                    include: true,
                    end: oid(&[1, 3, 6, 1, 4, 1, 100000]),
                },
                SearchRange {
                    start: oid(&[1, 2, 840]),
                    include: false,
                    end: Oid::null(),
                },
            ],
        },
    };
    check_exact(bytes, &pdu);
}

#[test]
fn get_bulk() {
    let bytes: &[u8] = &[
        0x01, 0x07, 0x10, 0x00, // type GetBulk, flags NBO
        0x00, 0x00, 0x00, 0x07, // sessionID 7
        0x00, 0x00, 0x01, 0x02, // transactionID 258
        0x00, 0x00, 0x00, 0x0F, // packetID 15
        0x00, 0x00, 0x00, 0x38, // payload_length 56
        0x00, 0x01, 0x00, 0x0A, // g.non_repeaters 1, g.max_repetitions 10
        // SearchRange 1: start 1.3.6.1.2.1.1.3, end null
        0x03, 0x02, 0x00, 0x00, // n_subid 3, prefix 2
        0x00, 0x00, 0x00, 0x01, //   1
        0x00, 0x00, 0x00, 0x01, //   1
        0x00, 0x00, 0x00, 0x03, //   3
        0x00, 0x00, 0x00, 0x00, // end: null
        // SearchRange 2: start 1.3.6.1.4.1.99999.1, end 1.3.6.1.4.1.99999.2
        0x03, 0x04, 0x00, 0x00, // n_subid 3, prefix 4
        0x00, 0x00, 0x00, 0x01, //   1
        0x00, 0x01, 0x86, 0x9F, //   99999
        0x00, 0x00, 0x00, 0x01, //   1
        0x03, 0x04, 0x00, 0x00, // end: n_subid 3, prefix 4
        0x00, 0x00, 0x00, 0x01, //   1
        0x00, 0x01, 0x86, 0x9F, //   99999
        0x00, 0x00, 0x00, 0x02, //   2
    ];
    let pdu = Pdu::new(
        7,
        258,
        15,
        Payload::GetBulk {
            non_repeaters: 1,
            max_repetitions: 10,
            ranges: vec![
                SearchRange {
                    start: oid(&[1, 3, 6, 1, 2, 1, 1, 3]),
                    include: false,
                    end: Oid::null(),
                },
                SearchRange {
                    start: ent(&[1]),
                    include: false,
                    end: ent(&[2]),
                },
            ],
        },
    );
    check_exact(bytes, &pdu);
}

#[test]
fn test_set() {
    let bytes: &[u8] = &[
        0x01, 0x08, 0x10, 0x00, // type TestSet, flags NBO
        0x00, 0x00, 0x00, 0x07, // sessionID 7
        0x00, 0x00, 0x01, 0x03, // transactionID 259
        0x00, 0x00, 0x00, 0x10, // packetID 16
        0x00, 0x00, 0x00, 0x34, // payload_length 52
        // VarBind 1: 1.3.6.1.4.1.99999.5 = OctetString "x"
        0x00, 0x04, 0x00, 0x00, // v.type 4 (OctetString), reserved
        0x03, 0x04, 0x00, 0x00, // v.name: n_subid 3, prefix 4
        0x00, 0x00, 0x00, 0x01, //   1
        0x00, 0x01, 0x86, 0x9F, //   99999
        0x00, 0x00, 0x00, 0x05, //   5
        0x00, 0x00, 0x00, 0x01, // length 1
        b'x', 0x00, 0x00, 0x00, //   "x" + 3 pad
        // VarBind 2: 1.3.6.1.4.1.99999.6 = Integer 42
        0x00, 0x02, 0x00, 0x00, // v.type 2 (Integer), reserved
        0x03, 0x04, 0x00, 0x00, // v.name: n_subid 3, prefix 4
        0x00, 0x00, 0x00, 0x01, //   1
        0x00, 0x01, 0x86, 0x9F, //   99999
        0x00, 0x00, 0x00, 0x06, //   6
        0x00, 0x00, 0x00, 0x2A, // 42
    ];
    let pdu = Pdu::new(
        7,
        259,
        16,
        Payload::TestSet {
            varbinds: vec![
                vb(ent(&[5]), Value::OctetString(b"x".to_vec())),
                vb(ent(&[6]), Value::Integer(42)),
            ],
        },
    );
    check_exact(bytes, &pdu);
}

#[test]
fn commit_undo_cleanup_set() {
    let commit: &[u8] = &[
        0x01, 0x09, 0x10, 0x00, // type CommitSet, flags NBO
        0x00, 0x00, 0x00, 0x07, // sessionID 7
        0x00, 0x00, 0x01, 0x03, // transactionID 259
        0x00, 0x00, 0x00, 0x11, // packetID 17
        0x00, 0x00, 0x00, 0x00, // payload_length 0
    ];
    check_exact(commit, &Pdu::new(7, 259, 17, Payload::CommitSet));
    let undo: &[u8] = &[
        0x01, 0x0A, 0x10, 0x00, // type UndoSet, flags NBO
        0x00, 0x00, 0x00, 0x07, // sessionID 7
        0x00, 0x00, 0x01, 0x03, // transactionID 259
        0x00, 0x00, 0x00, 0x12, // packetID 18
        0x00, 0x00, 0x00, 0x00, // payload_length 0
    ];
    check_exact(undo, &Pdu::new(7, 259, 18, Payload::UndoSet));
    let cleanup: &[u8] = &[
        0x01, 0x0B, 0x10, 0x00, // type CleanupSet, flags NBO
        0x00, 0x00, 0x00, 0x07, // sessionID 7
        0x00, 0x00, 0x01, 0x03, // transactionID 259
        0x00, 0x00, 0x00, 0x13, // packetID 19
        0x00, 0x00, 0x00, 0x00, // payload_length 0
    ];
    check_exact(cleanup, &Pdu::new(7, 259, 19, Payload::CleanupSet));
}

#[test]
fn notify() {
    let bytes: &[u8] = &[
        0x01, 0x0C, 0x10, 0x00, // type Notify, flags NBO
        0x00, 0x00, 0x00, 0x07, // sessionID 7
        0x00, 0x00, 0x00, 0x00, // transactionID 0
        0x00, 0x00, 0x00, 0x14, // packetID 20
        0x00, 0x00, 0x00, 0x54, // payload_length 84
        // VarBind 1: sysUpTime.0 (1.3.6.1.2.1.1.3.0) = TimeTicks 100
        0x00, 0x43, 0x00, 0x00, // v.type 67 (TimeTicks), reserved
        0x04, 0x02, 0x00, 0x00, // v.name: n_subid 4, prefix 2
        0x00, 0x00, 0x00, 0x01, //   1
        0x00, 0x00, 0x00, 0x01, //   1
        0x00, 0x00, 0x00, 0x03, //   3
        0x00, 0x00, 0x00, 0x00, //   0
        0x00, 0x00, 0x00, 0x64, // 100
        // VarBind 2: snmpTrapOID.0 (1.3.6.1.6.3.1.1.4.1.0) = OID coldStart 1.3.6.1.6.3.1.1.5.1
        0x00, 0x06, 0x00, 0x00, // v.type 6 (ObjectIdentifier), reserved
        0x06, 0x06, 0x00, 0x00, // v.name: n_subid 6, prefix 6
        0x00, 0x00, 0x00, 0x03, //   3
        0x00, 0x00, 0x00, 0x01, //   1
        0x00, 0x00, 0x00, 0x01, //   1
        0x00, 0x00, 0x00, 0x04, //   4
        0x00, 0x00, 0x00, 0x01, //   1
        0x00, 0x00, 0x00, 0x00, //   0
        0x05, 0x06, 0x00, 0x00, // v.data: n_subid 5, prefix 6
        0x00, 0x00, 0x00, 0x03, //   3
        0x00, 0x00, 0x00, 0x01, //   1
        0x00, 0x00, 0x00, 0x01, //   1
        0x00, 0x00, 0x00, 0x05, //   5
        0x00, 0x00, 0x00, 0x01, //   1
    ];
    let pdu = Pdu::new(
        7,
        0,
        20,
        Payload::Notify {
            varbinds: vec![
                vb(oid(&[1, 3, 6, 1, 2, 1, 1, 3, 0]), Value::TimeTicks(100)),
                vb(
                    oid(&[1, 3, 6, 1, 6, 3, 1, 1, 4, 1, 0]),
                    Value::ObjectIdentifier(oid(&[1, 3, 6, 1, 6, 3, 1, 1, 5, 1])),
                ),
            ],
        },
    );
    check_exact(bytes, &pdu);
}

#[test]
fn ping_with_context() {
    let bytes: &[u8] = &[
        0x01, 0x0D, 0x18, 0x00, // type Ping, flags NBO|NON_DEFAULT_CONTEXT
        0x00, 0x00, 0x00, 0x07, // sessionID 7
        0x00, 0x00, 0x00, 0x00, // transactionID 0
        0x00, 0x00, 0x00, 0x15, // packetID 21
        0x00, 0x00, 0x00, 0x0C, // payload_length 12
        0x00, 0x00, 0x00, 0x06, // context length 6
        b'p', b'u', b'b', b'l', //
        b'i', b'c', 0x00, 0x00, //   "public" + 2 pad
    ];
    let mut pdu = Pdu::new(7, 0, 21, Payload::Ping);
    pdu.context = Some(b"public".to_vec());
    check_exact(bytes, &pdu);

    let plain: &[u8] = &[
        0x01, 0x0D, 0x10, 0x00, // type Ping, flags NBO
        0x00, 0x00, 0x00, 0x07, // sessionID 7
        0x00, 0x00, 0x00, 0x00, // transactionID 0
        0x00, 0x00, 0x00, 0x16, // packetID 22
        0x00, 0x00, 0x00, 0x00, // payload_length 0
    ];
    check_exact(plain, &Pdu::new(7, 0, 22, Payload::Ping));
}

#[test]
fn index_allocate_and_deallocate() {
    let alloc: &[u8] = &[
        0x01, 0x0E, 0x12, 0x00, // type IndexAllocate, flags NBO|NEW_INDEX
        0x00, 0x00, 0x00, 0x07, // sessionID 7
        0x00, 0x00, 0x00, 0x00, // transactionID 0
        0x00, 0x00, 0x00, 0x17, // packetID 23
        0x00, 0x00, 0x00, 0x1C, // payload_length 28
        0x00, 0x02, 0x00, 0x00, // v.type 2 (Integer), reserved
        0x04, 0x04, 0x00, 0x00, // v.name: n_subid 4, prefix 4
        0x00, 0x00, 0x00, 0x01, //   1
        0x00, 0x01, 0x86, 0x9F, //   99999
        0x00, 0x00, 0x00, 0x04, //   4
        0x00, 0x00, 0x00, 0x01, //   1
        0x00, 0x00, 0x00, 0x00, // 0
    ];
    let mut pdu = Pdu::new(
        7,
        0,
        23,
        Payload::IndexAllocate {
            varbinds: vec![vb(ent(&[4, 1]), Value::Integer(0))],
        },
    );
    pdu.flags = flags::NEW_INDEX;
    check_exact(alloc, &pdu);

    let dealloc: &[u8] = &[
        0x01, 0x0F, 0x14, 0x00, // type IndexDeallocate, flags NBO|ANY_INDEX
        0x00, 0x00, 0x00, 0x07, // sessionID 7
        0x00, 0x00, 0x00, 0x00, // transactionID 0
        0x00, 0x00, 0x00, 0x18, // packetID 24
        0x00, 0x00, 0x00, 0x1C, // payload_length 28
        0x00, 0x02, 0x00, 0x00, // v.type 2 (Integer), reserved
        0x04, 0x04, 0x00, 0x00, // v.name: n_subid 4, prefix 4
        0x00, 0x00, 0x00, 0x01, //   1
        0x00, 0x01, 0x86, 0x9F, //   99999
        0x00, 0x00, 0x00, 0x04, //   4
        0x00, 0x00, 0x00, 0x01, //   1
        0x00, 0x00, 0x00, 0x05, // 5
    ];
    let mut pdu = Pdu::new(
        7,
        0,
        24,
        Payload::IndexDeallocate {
            varbinds: vec![vb(ent(&[4, 1]), Value::Integer(5))],
        },
    );
    pdu.flags = flags::ANY_INDEX;
    check_exact(dealloc, &pdu);
}

#[test]
fn add_and_remove_agent_caps() {
    let add: &[u8] = &[
        0x01, 0x10, 0x10, 0x00, // type AddAgentCaps, flags NBO
        0x00, 0x00, 0x00, 0x07, // sessionID 7
        0x00, 0x00, 0x00, 0x00, // transactionID 0
        0x00, 0x00, 0x00, 0x19, // packetID 25
        0x00, 0x00, 0x00, 0x18, // payload_length 24
        0x03, 0x04, 0x00, 0x00, // a.id: n_subid 3, prefix 4
        0x00, 0x00, 0x00, 0x01, //   1
        0x00, 0x01, 0x86, 0x9F, //   99999
        0x00, 0x00, 0x00, 0x03, //   3
        0x00, 0x00, 0x00, 0x04, // a.descr length 4
        b'c', b'a', b'p', b's', //   "caps"
    ];
    let pdu = Pdu::new(
        7,
        0,
        25,
        Payload::AddAgentCaps {
            id: ent(&[3]),
            descr: b"caps".to_vec(),
        },
    );
    check_exact(add, &pdu);

    let remove: &[u8] = &[
        0x01, 0x11, 0x10, 0x00, // type RemoveAgentCaps, flags NBO
        0x00, 0x00, 0x00, 0x07, // sessionID 7
        0x00, 0x00, 0x00, 0x00, // transactionID 0
        0x00, 0x00, 0x00, 0x1A, // packetID 26
        0x00, 0x00, 0x00, 0x10, // payload_length 16
        0x03, 0x04, 0x00, 0x00, // a.id: n_subid 3, prefix 4
        0x00, 0x00, 0x00, 0x01, //   1
        0x00, 0x01, 0x86, 0x9F, //   99999
        0x00, 0x00, 0x00, 0x03, //   3
    ];
    check_exact(
        remove,
        &Pdu::new(7, 0, 26, Payload::RemoveAgentCaps { id: ent(&[3]) }),
    );
}

/// A Response carrying every value type, with sys_uptime at its maximum.
const RESPONSE_ALL_VALUES: [u8; 364] = [
    0x01, 0x12, 0x10, 0x00, // type Response, flags NBO
    0x00, 0x00, 0x00, 0x07, // sessionID 7
    0x00, 0x00, 0x01, 0x00, // transactionID 256
    0x00, 0x00, 0x00, 0x1B, // packetID 27
    0x00, 0x00, 0x01, 0x58, // payload_length 344
    0xFF, 0xFF, 0xFF, 0xFF, // res.sysUpTime 0xFFFFFFFF
    0x00, 0x00, 0x00, 0x00, // res.error 0, res.index 0
    // 1: .1 = Integer -2
    0x00, 0x02, 0x00, 0x00, // v.type 2
    0x03, 0x04, 0x00, 0x00, // name: n_subid 3, prefix 4
    0x00, 0x00, 0x00, 0x01, //   1
    0x00, 0x01, 0x86, 0x9F, //   99999
    0x00, 0x00, 0x00, 0x01, //   1
    0xFF, 0xFF, 0xFF, 0xFE, // -2
    // 2: .2 = OctetString "abcde"
    0x00, 0x04, 0x00, 0x00, // v.type 4
    0x03, 0x04, 0x00, 0x00, //
    0x00, 0x00, 0x00, 0x01, //
    0x00, 0x01, 0x86, 0x9F, //
    0x00, 0x00, 0x00, 0x02, //   2
    0x00, 0x00, 0x00, 0x05, // length 5
    b'a', b'b', b'c', b'd', //
    b'e', 0x00, 0x00, 0x00, //   + 3 pad
    // 3: .3 = Null
    0x00, 0x05, 0x00, 0x00, // v.type 5
    0x03, 0x04, 0x00, 0x00, //
    0x00, 0x00, 0x00, 0x01, //
    0x00, 0x01, 0x86, 0x9F, //
    0x00, 0x00, 0x00, 0x03, //   3
    // 4: .4 = ObjectIdentifier 1.3.6.1.6.3.1.1.5.1
    0x00, 0x06, 0x00, 0x00, // v.type 6
    0x03, 0x04, 0x00, 0x00, //
    0x00, 0x00, 0x00, 0x01, //
    0x00, 0x01, 0x86, 0x9F, //
    0x00, 0x00, 0x00, 0x04, //   4
    0x05, 0x06, 0x00, 0x00, // data: n_subid 5, prefix 6
    0x00, 0x00, 0x00, 0x03, //   3
    0x00, 0x00, 0x00, 0x01, //   1
    0x00, 0x00, 0x00, 0x01, //   1
    0x00, 0x00, 0x00, 0x05, //   5
    0x00, 0x00, 0x00, 0x01, //   1
    // 5: .5 = IpAddress 192.0.2.1
    0x00, 0x40, 0x00, 0x00, // v.type 64
    0x03, 0x04, 0x00, 0x00, //
    0x00, 0x00, 0x00, 0x01, //
    0x00, 0x01, 0x86, 0x9F, //
    0x00, 0x00, 0x00, 0x05, //   5
    0x00, 0x00, 0x00, 0x04, // length 4
    0xC0, 0x00, 0x02, 0x01, //   192.0.2.1
    // 6: .6 = Counter32 0xDEADBEEF
    0x00, 0x41, 0x00, 0x00, // v.type 65
    0x03, 0x04, 0x00, 0x00, //
    0x00, 0x00, 0x00, 0x01, //
    0x00, 0x01, 0x86, 0x9F, //
    0x00, 0x00, 0x00, 0x06, //   6
    0xDE, 0xAD, 0xBE, 0xEF, //
    // 7: .7 = Gauge32 1000
    0x00, 0x42, 0x00, 0x00, // v.type 66
    0x03, 0x04, 0x00, 0x00, //
    0x00, 0x00, 0x00, 0x01, //
    0x00, 0x01, 0x86, 0x9F, //
    0x00, 0x00, 0x00, 0x07, //   7
    0x00, 0x00, 0x03, 0xE8, //   1000
    // 8: .8 = TimeTicks 0xFFFFFFFF
    0x00, 0x43, 0x00, 0x00, // v.type 67
    0x03, 0x04, 0x00, 0x00, //
    0x00, 0x00, 0x00, 0x01, //
    0x00, 0x01, 0x86, 0x9F, //
    0x00, 0x00, 0x00, 0x08, //   8
    0xFF, 0xFF, 0xFF, 0xFF, //
    // 9: .9 = Opaque 01 02 03
    0x00, 0x44, 0x00, 0x00, // v.type 68
    0x03, 0x04, 0x00, 0x00, //
    0x00, 0x00, 0x00, 0x01, //
    0x00, 0x01, 0x86, 0x9F, //
    0x00, 0x00, 0x00, 0x09, //   9
    0x00, 0x00, 0x00, 0x03, // length 3
    0x01, 0x02, 0x03, 0x00, //   + 1 pad
    // 10: .10 = Counter64 0x0102030405060708
    0x00, 0x46, 0x00, 0x00, // v.type 70
    0x03, 0x04, 0x00, 0x00, //
    0x00, 0x00, 0x00, 0x01, //
    0x00, 0x01, 0x86, 0x9F, //
    0x00, 0x00, 0x00, 0x0A, //   10
    0x01, 0x02, 0x03, 0x04, // high word
    0x05, 0x06, 0x07, 0x08, // low word
    // 11: .11 = noSuchObject
    0x00, 0x80, 0x00, 0x00, // v.type 128
    0x03, 0x04, 0x00, 0x00, //
    0x00, 0x00, 0x00, 0x01, //
    0x00, 0x01, 0x86, 0x9F, //
    0x00, 0x00, 0x00, 0x0B, //   11
    // 12: .12 = noSuchInstance
    0x00, 0x81, 0x00, 0x00, // v.type 129
    0x03, 0x04, 0x00, 0x00, //
    0x00, 0x00, 0x00, 0x01, //
    0x00, 0x01, 0x86, 0x9F, //
    0x00, 0x00, 0x00, 0x0C, //   12
    // 13: .13 = endOfMibView
    0x00, 0x82, 0x00, 0x00, // v.type 130
    0x03, 0x04, 0x00, 0x00, //
    0x00, 0x00, 0x00, 0x01, //
    0x00, 0x01, 0x86, 0x9F, //
    0x00, 0x00, 0x00, 0x0D, //   13
];

fn all_values() -> Vec<VarBind> {
    vec![
        vb(ent(&[1]), Value::Integer(-2)),
        vb(ent(&[2]), Value::OctetString(b"abcde".to_vec())),
        vb(ent(&[3]), Value::Null),
        vb(
            ent(&[4]),
            Value::ObjectIdentifier(oid(&[1, 3, 6, 1, 6, 3, 1, 1, 5, 1])),
        ),
        vb(ent(&[5]), Value::IpAddress([192, 0, 2, 1])),
        vb(ent(&[6]), Value::Counter32(0xDEAD_BEEF)),
        vb(ent(&[7]), Value::Gauge32(1000)),
        vb(ent(&[8]), Value::TimeTicks(0xFFFF_FFFF)),
        vb(ent(&[9]), Value::Opaque(vec![1, 2, 3])),
        vb(ent(&[10]), Value::Counter64(0x0102_0304_0506_0708)),
        vb(ent(&[11]), Value::NoSuchObject),
        vb(ent(&[12]), Value::NoSuchInstance),
        vb(ent(&[13]), Value::EndOfMibView),
    ]
}

#[test]
fn response_every_value_type_and_max_uptime() {
    let pdu = Pdu::new(
        7,
        256,
        27,
        Payload::Response {
            sys_uptime: 0xFFFF_FFFF,
            error: ResError::NO_ERROR,
            index: 0,
            varbinds: all_values(),
        },
    );
    check_exact(&RESPONSE_ALL_VALUES, &pdu);

    // The hot path produces the same bytes.
    let mut out = Vec::new();
    encode_response(
        &mut out,
        HeaderIds::new(7, 256, 27),
        0xFFFF_FFFF,
        ResError::NO_ERROR,
        0,
        &all_values(),
    );
    assert_eq!(out, RESPONSE_ALL_VALUES);

    let mut out = vec![0xAA; 3];
    let mut w = ResponseWriter::begin(
        &mut out,
        HeaderIds::new(7, 256, 27),
        0xFFFF_FFFF,
        ResError::NO_ERROR,
        0,
    );
    for v in all_values() {
        w.push(&v.name, &v.value);
    }
    assert_eq!(w.count(), 13);
    assert_eq!(w.payload_len(), 344);
    assert_eq!(w.finish(), 364);
    assert_eq!(&out[3..], &RESPONSE_ALL_VALUES[..]);

    let types: Vec<u16> = all_values()
        .iter()
        .map(|v| value_type(&v.value).0)
        .collect();
    assert_eq!(
        types,
        [2, 4, 5, 6, 64, 65, 66, 67, 68, 70, 128, 129, 130],
        "type codes"
    );
}

#[test]
fn response_not_writable_and_gen_err() {
    let bytes: &[u8] = &[
        0x01, 0x12, 0x10, 0x00, // type Response, flags NBO
        0x00, 0x00, 0x00, 0x07, // sessionID 7
        0x00, 0x00, 0x01, 0x03, // transactionID 259
        0x00, 0x00, 0x00, 0x10, // packetID 16 (echoes the TestSet)
        0x00, 0x00, 0x00, 0x20, // payload_length 32
        0x00, 0x00, 0x00, 0x00, // res.sysUpTime 0
        0x00, 0x11, 0x00, 0x01, // res.error 17 (notWritable), res.index 1
        0x00, 0x02, 0x00, 0x00, // v.type 2 (Integer)
        0x03, 0x04, 0x00, 0x00, // v.name: n_subid 3, prefix 4
        0x00, 0x00, 0x00, 0x01, //   1
        0x00, 0x01, 0x86, 0x9F, //   99999
        0x00, 0x00, 0x00, 0x06, //   6
        0x00, 0x00, 0x00, 0x2A, // 42
    ];
    let vbs = vec![vb(ent(&[6]), Value::Integer(42))];
    let pdu = Pdu::new(
        7,
        259,
        16,
        Payload::Response {
            sys_uptime: 0,
            error: ResError::NOT_WRITABLE,
            index: 1,
            varbinds: vbs.clone(),
        },
    );
    check_exact(bytes, &pdu);
    let mut out = Vec::new();
    encode_response(
        &mut out,
        HeaderIds::new(7, 259, 16),
        0,
        ResError(17),
        1,
        &vbs,
    );
    assert_eq!(out, bytes);

    // genErr: written with a ResponseWriter.
    let mut out = Vec::new();
    let mut w = ResponseWriter::begin(
        &mut out,
        HeaderIds::new(7, 259, 16),
        0,
        ResError::GEN_ERR,
        1,
    );
    w.push(&vbs[0].name, &vbs[0].value);
    w.finish();
    let mut want = bytes.to_vec();
    want[25] = 0x05; // res.error low byte: genErr
    assert_eq!(out, want);
    match Pdu::decode(&out).unwrap().payload {
        Payload::Response { error, index, .. } => {
            assert_eq!((error, index), (ResError::GEN_ERR, 1));
        }
        p => panic!("{p:?}"),
    }
    assert_eq!(ResError(17).name(), "notWritable");
    assert_eq!(ResError(5).name(), "genErr");
    assert_eq!(ResError(266).name(), "parseError");
    assert_eq!(ResError(999).name(), "unknown");
}

#[test]
fn response_little_endian_counter64() {
    let le: &[u8] = &[
        0x01, 0x12, 0x00, 0x00, // type Response, flags 0 (little endian)
        0x07, 0x00, 0x00, 0x00, // sessionID 7
        0x00, 0x00, 0x00, 0x00, // transactionID 0
        0x0E, 0x00, 0x00, 0x00, // packetID 14
        0x24, 0x00, 0x00, 0x00, // payload_length 36
        0x04, 0x03, 0x02, 0x01, // res.sysUpTime 0x01020304
        0x11, 0x00, 0x01, 0x00, // res.error 17, res.index 1
        0x46, 0x00, 0x00, 0x00, // v.type 70 (Counter64), reserved
        0x03, 0x04, 0x00, 0x00, // v.name: n_subid 3, prefix 4
        0x01, 0x00, 0x00, 0x00, //   1
        0x9F, 0x86, 0x01, 0x00, //   99999
        0x01, 0x00, 0x00, 0x00, //   1
        0x08, 0x07, 0x06, 0x05, // Counter64 0x0102030405060708, least significant first
        0x04, 0x03, 0x02, 0x01, //
    ];
    let want = Pdu::new(
        7,
        0,
        14,
        Payload::Response {
            sys_uptime: 0x0102_0304,
            error: ResError(17),
            index: 1,
            varbinds: vec![vb(ent(&[1]), Value::Counter64(0x0102_0304_0506_0708))],
        },
    );
    assert_eq!(Pdu::decode(le), Ok(want));
}

#[test]
fn oid_prefix_form_choice() {
    // Encode a RemoveAgentCaps and compare the OID part of the payload.
    fn oid_bytes(o: &[u32]) -> Vec<u8> {
        let mut out = Vec::new();
        Pdu::new(0, 0, 0, Payload::RemoveAgentCaps { id: oid(o) }).encode(&mut out);
        out.split_off(HEADER_LEN)
    }
    // 1.3.6.1 has only 4 sub-ids: plain.
    assert_eq!(
        oid_bytes(&[1, 3, 6, 1]),
        [4, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0, 6, 0, 0, 0, 1]
    );
    // 1.3.6.1.255: prefix 255, no further sub-ids.
    assert_eq!(oid_bytes(&[1, 3, 6, 1, 255]), [0, 255, 0, 0]);
    // 1.3.6.1.0.5: x = 0 cannot be a prefix.
    assert_eq!(
        oid_bytes(&[1, 3, 6, 1, 0, 5]),
        [6, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0, 6, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 5]
    );
    // 1.3.6.1.256: too big for the prefix byte.
    assert_eq!(
        oid_bytes(&[1, 3, 6, 1, 256]),
        [5, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0, 6, 0, 0, 0, 1, 0, 0, 1, 0]
    );
    // 1.3.6.2.1: not under 1.3.6.1.
    assert_eq!(
        oid_bytes(&[1, 3, 6, 2, 1]),
        [5, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0, 6, 0, 0, 0, 2, 0, 0, 0, 1]
    );
    // The null OID.
    assert_eq!(oid_bytes(&[]), [0, 0, 0, 0]);

    // Decoding the prefix form with no sub-ids gives 1.3.6.1.x, not the null OID.
    let bytes: &[u8] = &[
        0x01, 0x11, 0x10, 0x00, // type RemoveAgentCaps, flags NBO
        0x00, 0x00, 0x00, 0x00, // sessionID
        0x00, 0x00, 0x00, 0x00, // transactionID
        0x00, 0x00, 0x00, 0x00, // packetID
        0x00, 0x00, 0x00, 0x04, // payload_length 4
        0x00, 0x02, 0x00, 0x00, // a.id: n_subid 0, prefix 2 -> 1.3.6.1.2
    ];
    assert_eq!(
        Pdu::decode(bytes).unwrap().payload,
        Payload::RemoveAgentCaps {
            id: oid(&[1, 3, 6, 1, 2])
        }
    );
}

#[test]
fn oid_too_long_is_cut_on_encode_not_panicking() {
    let long = Oid((0..300).collect());
    let mut out = Vec::new();
    Pdu::new(0, 0, 0, Payload::RemoveAgentCaps { id: long.clone() }).encode(&mut out);
    match Pdu::decode(&out).unwrap().payload {
        Payload::RemoveAgentCaps { id } => assert_eq!(id.as_slice(), &long.0[..MAX_SUBIDS]),
        p => panic!("{p:?}"),
    }
}

#[test]
fn flags_are_managed_by_the_codec() {
    // Caller-supplied NBO / context bits are ignored; context presence decides.
    let mut pdu = Pdu::new(1, 2, 3, Payload::Ping);
    pdu.flags = flags::NON_DEFAULT_CONTEXT | flags::NETWORK_BYTE_ORDER | 0x01;
    let mut out = Vec::new();
    pdu.encode(&mut out);
    assert_eq!(out[2], 0x11);
    let back = Pdu::decode(&out).unwrap();
    assert_eq!(back.flags, 0x01);
    assert_eq!(back.context, None);
}

#[test]
fn response_writer_rollback() {
    let mut out = Vec::new();
    let mut w = ResponseWriter::begin(&mut out, HeaderIds::new(1, 2, 3), 0, ResError::NO_ERROR, 0);
    w.push(&ent(&[1]), &Value::Integer(1));
    let cp = w.checkpoint();
    w.push(&ent(&[2]), &Value::OctetString(vec![0; 100]));
    w.push(&ent(&[3]), &Value::Null);
    assert_eq!(w.count(), 3);
    w.rollback(cp);
    assert_eq!(w.count(), 1);
    w.push(&ent(&[4]), &Value::Gauge32(9));
    w.finish();
    let mut want = Vec::new();
    encode_response(
        &mut want,
        HeaderIds::new(1, 2, 3),
        0,
        ResError::NO_ERROR,
        0,
        &[
            vb(ent(&[1]), Value::Integer(1)),
            vb(ent(&[4]), Value::Gauge32(9)),
        ],
    );
    assert_eq!(out, want);
}

// ---- Error cases ------------------------------------------------------------------------

/// A valid 20-byte NBO header for `t` with the given payload length.
fn header_be(t: PduType, flags: u8, payload_length: u32) -> Vec<u8> {
    let mut h = vec![0x01, t.0, flags | 0x10, 0x00];
    h.extend_from_slice(&[0, 0, 0, 7]); // sessionID 7
    h.extend_from_slice(&[0, 0, 0, 8]); // transactionID 8
    h.extend_from_slice(&[0, 0, 0, 9]); // packetID 9
    h.extend_from_slice(&payload_length.to_be_bytes());
    h
}

#[test]
fn truncated_header() {
    let e = decode_err(&OPEN_BE[..19]);
    assert_eq!(e.kind, DecodeErrorKind::Truncated);
    assert!(e.fatal());
    assert_eq!(e.header, None);
    assert_eq!(
        Header::decode(&[]).unwrap_err().kind,
        DecodeErrorKind::Truncated
    );
}

#[test]
fn truncated_or_overlong_frame() {
    let e = decode_err(&OPEN_BE[..OPEN_BE.len() - 4]);
    assert_eq!(e.kind, DecodeErrorKind::FrameLength);
    assert!(e.fatal());
    let mut long = OPEN_BE.to_vec();
    long.extend_from_slice(&[0; 4]);
    let e = decode_err(&long);
    assert_eq!(e.kind, DecodeErrorKind::FrameLength);
    assert!(e.fatal());
    // Header::decode alone only needs the 20 header bytes.
    assert_eq!(Header::decode(&OPEN_BE[..20]).unwrap().payload_length, 32);
}

#[test]
fn version_2() {
    let mut b = OPEN_BE.to_vec();
    b[0] = 2;
    let e = decode_err(&b);
    assert_eq!(e.kind, DecodeErrorKind::BadVersion);
    assert!(e.fatal());
}

#[test]
fn payload_length_too_long_or_unaligned() {
    let e = Header::decode(&header_be(PduType::PING, 0, 0x7fff_ffff)).unwrap_err();
    assert_eq!(e.kind, DecodeErrorKind::PayloadTooLong);
    assert!(e.fatal());
    // Same in little endian: 0x7fffffff
    let le = [
        0x01, 0x0D, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0x7F,
    ];
    assert_eq!(
        Header::decode(&le).unwrap_err().kind,
        DecodeErrorKind::PayloadTooLong
    );
    // The cap itself is allowed.
    assert!(Header::decode(&header_be(PduType::PING, 0, 65536)).is_ok());
    assert_eq!(
        Header::decode(&header_be(PduType::PING, 0, 65540))
            .unwrap_err()
            .kind,
        DecodeErrorKind::PayloadTooLong
    );
    let e = Header::decode(&header_be(PduType::PING, 0, 6)).unwrap_err();
    assert_eq!(e.kind, DecodeErrorKind::PayloadNotAligned);
    assert!(e.fatal());
}

#[test]
fn oid_with_200_subids() {
    let mut b = header_be(PduType::GET, 0, 4 + 800 + 4);
    b.extend_from_slice(&[200, 0, 0, 0]); // start: n_subid 200, prefix 0
    b.extend(std::iter::repeat_n(0u8, 800)); // 200 sub-ids
    b.extend_from_slice(&[0, 0, 0, 0]); // end: null
    let e = decode_err(&b);
    assert_eq!(e.kind, DecodeErrorKind::OidTooLong);
    assert_eq!(e.offset, 0);
    assert!(!e.fatal());
    assert_eq!(e.header.unwrap().ids.packet_id, 9);
}

#[test]
fn oid_limit_counts_the_prefix() {
    // 123 sub-ids + prefix = 128: fine.
    let mut b = header_be(PduType::REMOVE_AGENT_CAPS, 0, 4 + 123 * 4);
    b.extend_from_slice(&[123, 4, 0, 0]);
    b.extend(std::iter::repeat_n(0u8, 123 * 4));
    match Pdu::decode(&b).unwrap().payload {
        Payload::RemoveAgentCaps { id } => {
            assert_eq!(id.len(), 128);
            assert!(id.starts_with(&[1, 3, 6, 1, 4, 0]));
        }
        p => panic!("{p:?}"),
    }
    // 124 sub-ids + prefix = 129: too long.
    let mut b = header_be(PduType::REMOVE_AGENT_CAPS, 0, 4 + 124 * 4);
    b.extend_from_slice(&[124, 4, 0, 0]);
    b.extend(std::iter::repeat_n(0u8, 124 * 4));
    assert_eq!(decode_err(&b).kind, DecodeErrorKind::OidTooLong);
    // 128 plain sub-ids: fine.
    let mut b = header_be(PduType::REMOVE_AGENT_CAPS, 0, 4 + 128 * 4);
    b.extend_from_slice(&[128, 0, 0, 0]);
    b.extend(std::iter::repeat_n(0u8, 128 * 4));
    assert!(Pdu::decode(&b).is_ok());
}

#[test]
fn oid_subids_beyond_payload() {
    let mut b = header_be(PduType::REMOVE_AGENT_CAPS, 0, 8);
    b.extend_from_slice(&[3, 0, 0, 0, 0, 0, 0, 1]); // claims 3 sub-ids, has 1
    let e = decode_err(&b);
    assert_eq!(e.kind, DecodeErrorKind::Truncated);
    assert!(!e.fatal());
}

#[test]
fn octet_string_length_beyond_payload() {
    // Open whose o.descr claims 0xFFFFFFFF bytes.
    let mut b = header_be(PduType::OPEN, 0, 12);
    b.extend_from_slice(&[5, 0, 0, 0]); // o.timeout
    b.extend_from_slice(&[0, 0, 0, 0]); // o.id null
    b.extend_from_slice(&[0xFF, 0xFF, 0xFF, 0xFF]); // o.descr length
    let e = decode_err(&b);
    assert_eq!(e.kind, DecodeErrorKind::Truncated);
    assert_eq!(e.what, "o.descr");
    assert_eq!(e.offset, 8);
    assert!(!e.fatal());
    let msg = e.to_string();
    assert!(
        msg.contains("o.descr") && msg.contains("payload byte 8"),
        "{msg}"
    );

    // Length 5 with only 4 data bytes left.
    let mut b = header_be(PduType::OPEN, 0, 16);
    b.extend_from_slice(&[5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5]);
    b.extend_from_slice(b"abcd");
    assert_eq!(decode_err(&b).kind, DecodeErrorKind::Truncated);

    // A context whose length exceeds the payload.
    let mut b = header_be(PduType::PING, flags::NON_DEFAULT_CONTEXT, 8);
    b.extend_from_slice(&[0, 0, 0, 9, b'a', b'b', b'c', b'd']);
    let e = decode_err(&b);
    assert_eq!((e.kind, e.what), (DecodeErrorKind::Truncated, "context"));
}

#[test]
fn unknown_value_type() {
    let mut b = header_be(PduType::RESPONSE, 0, 8 + 8);
    b.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0]); // sysUpTime, error, index
    b.extend_from_slice(&[0x00, 0x03, 0x00, 0x00]); // v.type 3: not an AgentX type
    b.extend_from_slice(&[0, 0, 0, 0]); // v.name null
    let e = decode_err(&b);
    assert_eq!(e.kind, DecodeErrorKind::BadValueType);
    assert_eq!(e.offset, 8);
    assert!(!e.fatal());
}

#[test]
fn ip_address_must_be_four_octets() {
    let mut b = header_be(PduType::TEST_SET, 0, 4 + 4 + 12);
    b.extend_from_slice(&[0x00, 0x40, 0x00, 0x00]); // v.type IpAddress
    b.extend_from_slice(&[0, 0, 0, 0]); // v.name null
    b.extend_from_slice(&[0, 0, 0, 5, 1, 2, 3, 4, 5, 0, 0, 0]); // 5 octets
    let e = decode_err(&b);
    assert_eq!(e.kind, DecodeErrorKind::Malformed);
}

#[test]
fn unknown_codes_are_carried() {
    // Close with a reason RFC 2741 does not define.
    let mut b = header_be(PduType::CLOSE, 0, 4);
    b.extend_from_slice(&[99, 0, 0, 0]);
    let pdu = Pdu::decode(&b).unwrap();
    assert_eq!(
        pdu.payload,
        Payload::Close {
            reason: CloseReason(99)
        }
    );
    let mut out = Vec::new();
    pdu.encode(&mut out);
    assert_eq!(out, b);

    // Response with an error code RFC 2741 does not define.
    let mut b = header_be(PduType::RESPONSE, 0, 8);
    b.extend_from_slice(&[0, 0, 0, 0, 0x03, 0xE7, 0, 0]); // sysUpTime 0, error 999, index 0
    let pdu = Pdu::decode(&b).unwrap();
    match &pdu.payload {
        Payload::Response { error, .. } => assert_eq!(*error, ResError(999)),
        p => panic!("{p:?}"),
    }
    let mut out = Vec::new();
    pdu.encode(&mut out);
    assert_eq!(out, b);
}

#[test]
fn code_names_and_display() {
    assert_eq!(PduType::GET_NEXT.name(), "GetNext");
    assert_eq!(PduType(6), PduType::GET_NEXT);
    assert_eq!(PduType(99).name(), "unknown");
    assert_eq!(PduType::RESPONSE.to_string(), "Response");
    assert_eq!(PduType(0).to_string(), "unknown(0)");
    assert!(PduType::OPEN.is_known() && PduType::RESPONSE.is_known());
    assert!(!PduType(0).is_known() && !PduType(19).is_known());

    assert_eq!(ResError::NOT_WRITABLE.to_string(), "notWritable");
    assert_eq!(ResError(999).to_string(), "unknown(999)");
    assert_eq!(CloseReason::SHUTDOWN.name(), "shutdown");
    assert_eq!(CloseReason(99).to_string(), "unknown(99)");
    assert_eq!(ValueType::COUNTER64, ValueType(70));
    assert_eq!(ValueType::COUNTER64.to_string(), "Counter64");
    assert_eq!(ValueType(3).to_string(), "unknown(3)");
}

#[test]
fn unknown_pdu_type() {
    for t in [0u8, 19, 99, 255] {
        let mut b = header_be(PduType(t), 0, 4);
        b.extend_from_slice(&[0, 0, 0, 0]);
        let e = decode_err(&b);
        assert_eq!(e.kind, DecodeErrorKind::UnknownPduType);
        assert!(!e.fatal());
        let h = e.header.unwrap();
        assert_eq!((h.pdu_type.0, h.ids.session_id, h.ids.packet_id), (t, 7, 9));
    }
}

#[test]
fn trailing_bytes() {
    let mut b = header_be(PduType::CLOSE, 0, 8);
    b.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0]);
    let e = decode_err(&b);
    assert_eq!((e.kind, e.offset), (DecodeErrorKind::TrailingBytes, 4));
    assert!(!e.fatal());

    let mut b = header_be(PduType::PING, 0, 4);
    b.extend_from_slice(&[0, 0, 0, 0]);
    assert_eq!(decode_err(&b).kind, DecodeErrorKind::TrailingBytes);
}

#[test]
fn missing_fields() {
    // Register with a range but no upper_bound.
    let mut b = header_be(PduType::REGISTER, 0, 8);
    b.extend_from_slice(&[0, 127, 1, 0, 0, 0, 0, 0]);
    let e = decode_err(&b);
    assert_eq!(
        (e.kind, e.what),
        (DecodeErrorKind::Truncated, "upper_bound")
    );
    // Response without its fixed fields.
    let mut b = header_be(PduType::RESPONSE, 0, 4);
    b.extend_from_slice(&[0, 0, 0, 0]);
    assert_eq!(decode_err(&b).kind, DecodeErrorKind::Truncated);
    // GetNext with a start OID but no end OID.
    let mut b = header_be(PduType::GET_NEXT, 0, 4);
    b.extend_from_slice(&[0, 0, 0, 0]);
    let e = decode_err(&b);
    assert_eq!(
        (e.kind, e.what),
        (DecodeErrorKind::Truncated, "SearchRange end")
    );
}

// ---- Property tests ---------------------------------------------------------------------

fn arb_subid() -> impl Strategy<Value = u32> {
    prop_oneof![0u32..4, 0u32..300, any::<u32>()]
}

fn arb_oid() -> impl Strategy<Value = Oid> {
    prop_oneof![
        prop::collection::vec(arb_subid(), 0..=MAX_SUBIDS).prop_map(Oid),
        prop::collection::vec(arb_subid(), 0..8).prop_map(Oid),
        (
            arb_subid(),
            prop::collection::vec(arb_subid(), 0..=MAX_SUBIDS - 5)
        )
            .prop_map(|(x, tail)| {
                let mut v = vec![1, 3, 6, 1, x];
                v.extend(tail);
                Oid(v)
            }),
    ]
}

fn arb_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..40)
}

fn arb_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i32>().prop_map(Value::Integer),
        arb_bytes().prop_map(Value::OctetString),
        Just(Value::Null),
        arb_oid().prop_map(Value::ObjectIdentifier),
        any::<[u8; 4]>().prop_map(Value::IpAddress),
        any::<u32>().prop_map(Value::Counter32),
        any::<u32>().prop_map(Value::Gauge32),
        any::<u32>().prop_map(Value::TimeTicks),
        arb_bytes().prop_map(Value::Opaque),
        any::<u64>().prop_map(Value::Counter64),
        Just(Value::NoSuchObject),
        Just(Value::NoSuchInstance),
        Just(Value::EndOfMibView),
    ]
}

fn arb_varbinds() -> impl Strategy<Value = Vec<VarBind>> {
    prop::collection::vec(
        (arb_oid(), arb_value()).prop_map(|(name, value)| VarBind { name, value }),
        0..6,
    )
}

fn arb_ranges() -> impl Strategy<Value = Vec<SearchRange>> {
    prop::collection::vec(
        (arb_oid(), any::<bool>(), arb_oid()).prop_map(|(start, include, end)| SearchRange {
            start,
            include,
            end,
        }),
        0..6,
    )
}

fn arb_range_bound() -> impl Strategy<Value = (u8, Option<u32>)> {
    (any::<u8>(), any::<u32>()).prop_map(|(r, u)| (r, if r != 0 { Some(u) } else { None }))
}

fn arb_payload() -> impl Strategy<Value = Payload> {
    let admin = prop_oneof![
        (any::<u8>(), arb_oid(), arb_bytes()).prop_map(|(timeout, id, descr)| Payload::Open {
            timeout,
            id,
            descr
        }),
        any::<u8>().prop_map(|reason| Payload::Close {
            reason: CloseReason(reason)
        }),
        (any::<u8>(), any::<u8>(), arb_range_bound(), arb_oid()).prop_map(
            |(timeout, priority, (range_subid, upper_bound), subtree)| Payload::Register {
                timeout,
                priority,
                range_subid,
                subtree,
                upper_bound,
            }
        ),
        (any::<u8>(), arb_range_bound(), arb_oid()).prop_map(
            |(priority, (range_subid, upper_bound), subtree)| Payload::Unregister {
                priority,
                range_subid,
                subtree,
                upper_bound,
            }
        ),
        arb_varbinds().prop_map(|varbinds| Payload::Notify { varbinds }),
        Just(Payload::Ping),
        arb_varbinds().prop_map(|varbinds| Payload::IndexAllocate { varbinds }),
        arb_varbinds().prop_map(|varbinds| Payload::IndexDeallocate { varbinds }),
        (arb_oid(), arb_bytes()).prop_map(|(id, descr)| Payload::AddAgentCaps { id, descr }),
        arb_oid().prop_map(|id| Payload::RemoveAgentCaps { id }),
    ];
    let requests = prop_oneof![
        arb_ranges().prop_map(|ranges| Payload::Get { ranges }),
        arb_ranges().prop_map(|ranges| Payload::GetNext { ranges }),
        (any::<u16>(), any::<u16>(), arb_ranges()).prop_map(
            |(non_repeaters, max_repetitions, ranges)| Payload::GetBulk {
                non_repeaters,
                max_repetitions,
                ranges,
            }
        ),
        arb_varbinds().prop_map(|varbinds| Payload::TestSet { varbinds }),
        Just(Payload::CommitSet),
        Just(Payload::UndoSet),
        Just(Payload::CleanupSet),
        (any::<u32>(), any::<u16>(), any::<u16>(), arb_varbinds()).prop_map(
            |(sys_uptime, error, index, varbinds)| Payload::Response {
                sys_uptime,
                error: ResError(error),
                index,
                varbinds,
            }
        ),
    ];
    prop_oneof![admin, requests]
}

fn arb_pdu() -> impl Strategy<Value = Pdu> {
    (
        any::<u8>(),
        any::<(u32, u32, u32)>(),
        prop::option::of(arb_bytes()),
        arb_payload(),
    )
        .prop_map(|(fl, (s, t, p), context, payload)| Pdu {
            flags: fl & !CODEC_FLAGS,
            ids: HeaderIds::new(s, t, p),
            context,
            payload,
        })
}

/// RFC 2741 §5.1 / SNMP lexicographic order, written out sub-id by sub-id.
fn rfc_cmp(a: &[u32], b: &[u32]) -> Ordering {
    let mut i = 0;
    loop {
        match (a.get(i), b.get(i)) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) => {
                if x < y {
                    return Ordering::Less;
                }
                if x > y {
                    return Ordering::Greater;
                }
            }
        }
        i += 1;
    }
}

proptest! {
    #[test]
    fn prop_roundtrip(pdu in arb_pdu()) {
        let mut out = Vec::new();
        pdu.encode(&mut out);
        prop_assert_eq!(out.len() % 4, 0);
        let h = Header::decode(&out).unwrap();
        prop_assert_eq!(h.frame_len(), out.len());
        prop_assert!(h.network_byte_order());
        prop_assert_eq!(h.pdu_type, pdu.pdu_type());
        prop_assert_eq!(Pdu::decode(&out), Ok(pdu));
    }

    /// Decoding into the memory of an earlier PDU, whatever it was, gives what decoding
    /// afresh gives, for a sound frame and for a damaged one.
    #[test]
    fn prop_decoding_into_a_spare_is_decoding(
        pdu in arb_pdu(),
        spare in arb_pdu(),
        flip in any::<prop::sample::Index>(),
    ) {
        let mut out = Vec::new();
        pdu.encode(&mut out);
        prop_assert_eq!(Pdu::decode_reusing(&out, Some(spare.clone())), Ok(pdu));
        let at = flip.index(out.len());
        out[at] ^= 0xa5;
        prop_assert_eq!(Pdu::decode_reusing(&out, Some(spare)), Pdu::decode(&out));
    }

    #[test]
    fn prop_response_writer_matches_encode(
        ids in any::<(u32, u32, u32, u32, u16, u16)>(),
        varbinds in arb_varbinds(),
    ) {
        let (s, t, p, up, err, idx) = ids;
        let mut fast = Vec::new();
        let ids = HeaderIds::new(s, t, p);
        encode_response(&mut fast, ids, up, ResError(err), idx, &varbinds);
        let mut slow = Vec::new();
        Pdu::with_ids(ids, Payload::Response {
            sys_uptime: up, error: ResError(err), index: idx, varbinds,
        }).encode(&mut slow);
        prop_assert_eq!(fast, slow);
    }

    #[test]
    fn prop_oid_order_is_rfc_lexicographic(
        a in prop::collection::vec(0u32..3, 0..6),
        b in prop::collection::vec(0u32..3, 0..6),
    ) {
        prop_assert_eq!(Oid(a.clone()).cmp(&Oid(b.clone())), rfc_cmp(&a, &b));
    }

    #[test]
    fn prop_oid_order_wide(a in arb_oid(), b in arb_oid()) {
        prop_assert_eq!(a.cmp(&b), rfc_cmp(a.as_slice(), b.as_slice()));
    }

    #[test]
    fn prop_decode_arbitrary_bytes_never_panics(
        bytes in prop::collection::vec(any::<u8>(), 0..300),
    ) {
        let _ = Header::decode(&bytes);
        let _ = Pdu::decode(&bytes);
    }

    #[test]
    fn prop_decode_random_payload_never_panics(
        t in 0u8..=20,
        fl in any::<u8>(),
        words in prop::collection::vec(any::<[u8; 4]>(), 0..64),
        small in prop::collection::vec(0u8..4, 0..64),
    ) {
        // Bias towards small numbers so lengths and counts are often plausible.
        let mut payload: Vec<u8> = words.concat();
        for (i, s) in small.iter().enumerate() {
            if let Some(b) = payload.get_mut(i * 3) {
                *b = *s;
            }
        }
        let be = fl & flags::NETWORK_BYTE_ORDER != 0;
        let len = payload.len() as u32;
        let mut frame = vec![1, t, fl, 0];
        for v in [1u32, 2, 3, len] {
            frame.extend_from_slice(&if be { v.to_be_bytes() } else { v.to_le_bytes() });
        }
        frame.extend_from_slice(&payload);
        if let Ok(pdu) = Pdu::decode(&frame) {
            // Whatever decodes must re-encode to something that decodes the same.
            let mut out = Vec::new();
            pdu.encode(&mut out);
            prop_assert_eq!(Pdu::decode(&out), Ok(pdu));
        }
    }

    #[test]
    fn prop_decode_mutated_frames_never_panics(
        pdu in arb_pdu(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let mut out = Vec::new();
        pdu.encode(&mut out);
        for (i, v) in edits {
            let i = i.index(out.len());
            out[i] = v;
        }
        if let Ok(p) = Pdu::decode(&out) {
            let mut again = Vec::new();
            p.encode(&mut again);
            prop_assert_eq!(Pdu::decode(&again), Ok(p));
        }
    }
}
