//! AgentX (RFC 2741) PDU codec.
//!
//! Wire layout (RFC 2741 §5, §6):
//!
//! * A 20-octet header: `version`, `type`, `flags`, reserved, `sessionID`, `transactionID`,
//!   `packetID`, `payload_length`. Every integer in the PDU (header included) uses the byte order
//!   given by that PDU's `NETWORK_BYTE_ORDER` flag.
//! * When `NON_DEFAULT_CONTEXT` is set, an octet-string context comes right after the header,
//!   before the type-specific fields (this codec accepts it on every PDU type).
//! * Then the type-specific payload, which must be consumed exactly.
//!
//! Decoding accepts both byte orders and never panics; encoding always uses network byte order
//! and sets the `NETWORK_BYTE_ORDER` flag.

use std::fmt;

use crate::oid::{Oid, MAX_SUBIDS};

/// Size of the fixed AgentX header.
pub const HEADER_LEN: usize = 20;
/// Largest payload accepted (net-snmp's cap in `agentx_parse`).
pub const MAX_PAYLOAD: usize = 65536;
/// The only AgentX protocol version.
pub const VERSION: u8 = 1;

/// Header flag masks (RFC 2741 §6.1).
pub mod flags {
    pub const INSTANCE_REGISTRATION: u8 = 0x01;
    pub const NEW_INDEX: u8 = 0x02;
    pub const ANY_INDEX: u8 = 0x04;
    pub const NON_DEFAULT_CONTEXT: u8 = 0x08;
    pub const NETWORK_BYTE_ORDER: u8 = 0x10;
}

/// PDU type codes (RFC 2741 §6.1).
pub mod pdu_type {
    pub const OPEN: u8 = 1;
    pub const CLOSE: u8 = 2;
    pub const REGISTER: u8 = 3;
    pub const UNREGISTER: u8 = 4;
    pub const GET: u8 = 5;
    pub const GET_NEXT: u8 = 6;
    pub const GET_BULK: u8 = 7;
    pub const TEST_SET: u8 = 8;
    pub const COMMIT_SET: u8 = 9;
    pub const UNDO_SET: u8 = 10;
    pub const CLEANUP_SET: u8 = 11;
    pub const NOTIFY: u8 = 12;
    pub const PING: u8 = 13;
    pub const INDEX_ALLOCATE: u8 = 14;
    pub const INDEX_DEALLOCATE: u8 = 15;
    pub const ADD_AGENT_CAPS: u8 = 16;
    pub const REMOVE_AGENT_CAPS: u8 = 17;
    pub const RESPONSE: u8 = 18;

    /// Human-readable name of a PDU type, for logs.
    pub fn name(t: u8) -> &'static str {
        match t {
            OPEN => "Open",
            CLOSE => "Close",
            REGISTER => "Register",
            UNREGISTER => "Unregister",
            GET => "Get",
            GET_NEXT => "GetNext",
            GET_BULK => "GetBulk",
            TEST_SET => "TestSet",
            COMMIT_SET => "CommitSet",
            UNDO_SET => "UndoSet",
            CLEANUP_SET => "CleanupSet",
            NOTIFY => "Notify",
            PING => "Ping",
            INDEX_ALLOCATE => "IndexAllocate",
            INDEX_DEALLOCATE => "IndexDeallocate",
            ADD_AGENT_CAPS => "AddAgentCaps",
            REMOVE_AGENT_CAPS => "RemoveAgentCaps",
            RESPONSE => "Response",
            _ => "unknown",
        }
    }

    /// True for the 18 types RFC 2741 defines.
    pub fn is_known(t: u8) -> bool {
        (OPEN..=RESPONSE).contains(&t)
    }
}

/// `res.error` values: SNMP error-status codes (RFC 3416) and AgentX codes (RFC 2741 §6.2.16).
pub mod res_error {
    pub const NO_ERROR: u16 = 0;
    pub const TOO_BIG: u16 = 1;
    pub const NO_SUCH_NAME: u16 = 2;
    pub const BAD_VALUE: u16 = 3;
    pub const READ_ONLY: u16 = 4;
    pub const GEN_ERR: u16 = 5;
    pub const NO_ACCESS: u16 = 6;
    pub const WRONG_TYPE: u16 = 7;
    pub const WRONG_LENGTH: u16 = 8;
    pub const WRONG_ENCODING: u16 = 9;
    pub const WRONG_VALUE: u16 = 10;
    pub const NO_CREATION: u16 = 11;
    pub const INCONSISTENT_VALUE: u16 = 12;
    pub const RESOURCE_UNAVAILABLE: u16 = 13;
    pub const COMMIT_FAILED: u16 = 14;
    pub const UNDO_FAILED: u16 = 15;
    pub const AUTHORIZATION_ERROR: u16 = 16;
    pub const NOT_WRITABLE: u16 = 17;
    pub const INCONSISTENT_NAME: u16 = 18;
    pub const OPEN_FAILED: u16 = 256;
    pub const NOT_OPEN: u16 = 257;
    pub const INDEX_WRONG_TYPE: u16 = 258;
    pub const INDEX_ALREADY_ALLOCATED: u16 = 259;
    pub const INDEX_NONE_AVAILABLE: u16 = 260;
    pub const INDEX_NOT_ALLOCATED: u16 = 261;
    pub const UNSUPPORTED_CONTEXT: u16 = 262;
    pub const DUPLICATE_REGISTRATION: u16 = 263;
    pub const UNKNOWN_REGISTRATION: u16 = 264;
    pub const UNKNOWN_AGENT_CAPS: u16 = 265;
    pub const PARSE_ERROR: u16 = 266;
    pub const REQUEST_DENIED: u16 = 267;
    pub const PROCESSING_ERROR: u16 = 268;

    /// The MIB/RFC name of an error code, for logs (`"unknown"` for anything else).
    pub fn name(code: u16) -> &'static str {
        match code {
            NO_ERROR => "noError",
            TOO_BIG => "tooBig",
            NO_SUCH_NAME => "noSuchName",
            BAD_VALUE => "badValue",
            READ_ONLY => "readOnly",
            GEN_ERR => "genErr",
            NO_ACCESS => "noAccess",
            WRONG_TYPE => "wrongType",
            WRONG_LENGTH => "wrongLength",
            WRONG_ENCODING => "wrongEncoding",
            WRONG_VALUE => "wrongValue",
            NO_CREATION => "noCreation",
            INCONSISTENT_VALUE => "inconsistentValue",
            RESOURCE_UNAVAILABLE => "resourceUnavailable",
            COMMIT_FAILED => "commitFailed",
            UNDO_FAILED => "undoFailed",
            AUTHORIZATION_ERROR => "authorizationError",
            NOT_WRITABLE => "notWritable",
            INCONSISTENT_NAME => "inconsistentName",
            OPEN_FAILED => "openFailed",
            NOT_OPEN => "notOpen",
            INDEX_WRONG_TYPE => "indexWrongType",
            INDEX_ALREADY_ALLOCATED => "indexAlreadyAllocated",
            INDEX_NONE_AVAILABLE => "indexNoneAvailable",
            INDEX_NOT_ALLOCATED => "indexNotAllocated",
            UNSUPPORTED_CONTEXT => "unsupportedContext",
            DUPLICATE_REGISTRATION => "duplicateRegistration",
            UNKNOWN_REGISTRATION => "unknownRegistration",
            UNKNOWN_AGENT_CAPS => "unknownAgentCaps",
            PARSE_ERROR => "parseError",
            REQUEST_DENIED => "requestDenied",
            PROCESSING_ERROR => "processingError",
            _ => "unknown",
        }
    }
}

/// Close PDU reasons (RFC 2741 §6.2.2).
pub mod close_reason {
    pub const OTHER: u8 = 1;
    pub const PARSE_ERROR: u8 = 2;
    pub const PROTOCOL_ERROR: u8 = 3;
    pub const TIMEOUTS: u8 = 4;
    pub const SHUTDOWN: u8 = 5;
    pub const BY_MANAGER: u8 = 6;

    /// Name of a close reason, for logs.
    pub fn name(r: u8) -> &'static str {
        match r {
            OTHER => "other",
            PARSE_ERROR => "parseError",
            PROTOCOL_ERROR => "protocolError",
            TIMEOUTS => "timeouts",
            SHUTDOWN => "shutdown",
            BY_MANAGER => "byManager",
            _ => "unknown",
        }
    }
}

/// VarBind `v.type` codes (RFC 2741 §5.4).
pub mod value_type {
    pub const INTEGER: u16 = 2;
    pub const OCTET_STRING: u16 = 4;
    pub const NULL: u16 = 5;
    pub const OBJECT_IDENTIFIER: u16 = 6;
    pub const IP_ADDRESS: u16 = 64;
    pub const COUNTER32: u16 = 65;
    pub const GAUGE32: u16 = 66;
    pub const TIME_TICKS: u16 = 67;
    pub const OPAQUE: u16 = 68;
    pub const COUNTER64: u16 = 70;
    pub const NO_SUCH_OBJECT: u16 = 128;
    pub const NO_SUCH_INSTANCE: u16 = 129;
    pub const END_OF_MIB_VIEW: u16 = 130;
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/// What went wrong while decoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeErrorKind {
    /// A field runs past the end of the header or payload.
    Truncated,
    /// `h.version` is not 1 (fatal).
    BadVersion,
    /// `h.payload_length` exceeds [`MAX_PAYLOAD`] (fatal).
    PayloadTooLong,
    /// `h.payload_length` is not a multiple of 4 (fatal).
    PayloadNotAligned,
    /// The frame handed to [`Pdu::decode`] is not exactly header + `payload_length` bytes
    /// (fatal: the caller's framing is off).
    FrameLength,
    /// The header is valid but `h.type` is not a PDU type this codec knows (not fatal).
    UnknownPduType,
    /// An OID has more than [`MAX_SUBIDS`] sub-identifiers after prefix expansion.
    OidTooLong,
    /// A VarBind has a `v.type` this codec does not know.
    BadValueType,
    /// The payload has bytes left over after the last field.
    TrailingBytes,
    /// A field has an impossible value (e.g. an IpAddress that is not 4 octets).
    Malformed,
}

impl DecodeErrorKind {
    fn as_str(self) -> &'static str {
        match self {
            DecodeErrorKind::Truncated => "truncated",
            DecodeErrorKind::BadVersion => "unsupported version",
            DecodeErrorKind::PayloadTooLong => "payload too long",
            DecodeErrorKind::PayloadNotAligned => "payload length not a multiple of 4",
            DecodeErrorKind::FrameLength => "frame length does not match payload_length",
            DecodeErrorKind::UnknownPduType => "unknown PDU type",
            DecodeErrorKind::OidTooLong => "OID has more than 128 sub-identifiers",
            DecodeErrorKind::BadValueType => "unknown value type",
            DecodeErrorKind::TrailingBytes => "trailing bytes",
            DecodeErrorKind::Malformed => "malformed",
        }
    }
}

/// A decode failure.
///
/// `header` is `Some` whenever the header itself was valid, so the caller can answer with a
/// parseError Response that echoes its IDs. `offset` is the byte offset within the payload
/// (i.e. after the 20-byte header) where the offending field starts; when `header` is `None`
/// it is an offset within the header instead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError {
    pub kind: DecodeErrorKind,
    pub header: Option<Header>,
    pub offset: usize,
    pub what: &'static str,
}

impl DecodeError {
    /// True when framing is lost (or was never established): the connection must be dropped
    /// rather than answered with parseError.
    pub fn fatal(&self) -> bool {
        self.header.is_none()
            || matches!(
                self.kind,
                DecodeErrorKind::BadVersion
                    | DecodeErrorKind::PayloadTooLong
                    | DecodeErrorKind::PayloadNotAligned
                    | DecodeErrorKind::FrameLength
            )
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.header {
            None => write!(
                f,
                "AgentX decode error: {} in {} at header byte {}",
                self.kind.as_str(),
                self.what,
                self.offset
            ),
            Some(h) => write!(
                f,
                "AgentX decode error: {} in {} at payload byte {} ({} PDU type {}, packetID {})",
                self.kind.as_str(),
                self.what,
                self.offset,
                pdu_type::name(h.pdu_type),
                h.pdu_type,
                h.packet_id
            ),
        }
    }
}

impl std::error::Error for DecodeError {}

// ---------------------------------------------------------------------------------------------
// Header
// ---------------------------------------------------------------------------------------------

/// The 20-octet AgentX header, as received (all flags, byte order as flagged).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub version: u8,
    pub pdu_type: u8,
    pub flags: u8,
    pub session_id: u32,
    pub transaction_id: u32,
    pub packet_id: u32,
    pub payload_length: u32,
}

impl Header {
    /// Decodes the first 20 bytes of `b` (extra bytes are ignored).
    ///
    /// Fails (fatally) when fewer than 20 bytes are given, when the version is not 1, or when
    /// `payload_length` exceeds [`MAX_PAYLOAD`] or is not a multiple of 4. Unknown PDU types are
    /// accepted here; [`Pdu::decode`] reports them.
    pub fn decode(b: &[u8]) -> Result<Header, DecodeError> {
        let err = |kind, offset, what| DecodeError {
            kind,
            header: None,
            offset,
            what,
        };
        let h: [u8; HEADER_LEN] = match b.get(..HEADER_LEN) {
            Some(s) => {
                let mut a = [0u8; HEADER_LEN];
                a.copy_from_slice(s);
                a
            }
            None => return Err(err(DecodeErrorKind::Truncated, b.len(), "header")),
        };
        if h[0] != VERSION {
            return Err(err(DecodeErrorKind::BadVersion, 0, "h.version"));
        }
        let be = h[2] & flags::NETWORK_BYTE_ORDER != 0;
        let word = |i: usize| {
            let a = [h[i], h[i + 1], h[i + 2], h[i + 3]];
            if be {
                u32::from_be_bytes(a)
            } else {
                u32::from_le_bytes(a)
            }
        };
        let header = Header {
            version: h[0],
            pdu_type: h[1],
            flags: h[2],
            session_id: word(4),
            transaction_id: word(8),
            packet_id: word(12),
            payload_length: word(16),
        };
        if header.payload_length as u64 > MAX_PAYLOAD as u64 {
            return Err(err(
                DecodeErrorKind::PayloadTooLong,
                16,
                "h.payload_length",
            ));
        }
        if header.payload_length % 4 != 0 {
            return Err(err(
                DecodeErrorKind::PayloadNotAligned,
                16,
                "h.payload_length",
            ));
        }
        Ok(header)
    }

    /// True when the PDU's integers are big-endian.
    pub fn network_byte_order(&self) -> bool {
        self.flags & flags::NETWORK_BYTE_ORDER != 0
    }

    /// Total frame length: header plus payload.
    pub fn frame_len(&self) -> usize {
        HEADER_LEN + self.payload_length as usize
    }
}

// ---------------------------------------------------------------------------------------------
// Data model
// ---------------------------------------------------------------------------------------------

/// A VarBind value (RFC 2741 §5.4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    Integer(i32),
    OctetString(Vec<u8>),
    Null,
    ObjectIdentifier(Oid),
    IpAddress([u8; 4]),
    Counter32(u32),
    Gauge32(u32),
    TimeTicks(u32),
    Opaque(Vec<u8>),
    Counter64(u64),
    NoSuchObject,
    NoSuchInstance,
    EndOfMibView,
}

impl Value {
    /// The `v.type` code of this value.
    pub fn type_code(&self) -> u16 {
        match self {
            Value::Integer(_) => value_type::INTEGER,
            Value::OctetString(_) => value_type::OCTET_STRING,
            Value::Null => value_type::NULL,
            Value::ObjectIdentifier(_) => value_type::OBJECT_IDENTIFIER,
            Value::IpAddress(_) => value_type::IP_ADDRESS,
            Value::Counter32(_) => value_type::COUNTER32,
            Value::Gauge32(_) => value_type::GAUGE32,
            Value::TimeTicks(_) => value_type::TIME_TICKS,
            Value::Opaque(_) => value_type::OPAQUE,
            Value::Counter64(_) => value_type::COUNTER64,
            Value::NoSuchObject => value_type::NO_SUCH_OBJECT,
            Value::NoSuchInstance => value_type::NO_SUCH_INSTANCE,
            Value::EndOfMibView => value_type::END_OF_MIB_VIEW,
        }
    }

    /// True for noSuchObject, noSuchInstance and endOfMibView.
    pub fn is_exception(&self) -> bool {
        matches!(
            self,
            Value::NoSuchObject | Value::NoSuchInstance | Value::EndOfMibView
        )
    }
}

/// A VarBind: name and value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VarBind {
    pub name: Oid,
    pub value: Value,
}

/// A SearchRange (RFC 2741 §5.2). A null `end` means "no upper bound"; the end is exclusive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchRange {
    pub start: Oid,
    pub include: bool,
    pub end: Oid,
}

/// The type-specific part of a PDU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Payload {
    Open {
        timeout: u8,
        id: Oid,
        descr: Vec<u8>,
    },
    Close {
        reason: u8,
    },
    /// `upper_bound` is encoded iff `range_subid != 0` (and then `None` encodes as 0).
    Register {
        timeout: u8,
        priority: u8,
        range_subid: u8,
        subtree: Oid,
        upper_bound: Option<u32>,
    },
    /// `upper_bound` is encoded iff `range_subid != 0` (and then `None` encodes as 0).
    Unregister {
        priority: u8,
        range_subid: u8,
        subtree: Oid,
        upper_bound: Option<u32>,
    },
    Get {
        ranges: Vec<SearchRange>,
    },
    GetNext {
        ranges: Vec<SearchRange>,
    },
    GetBulk {
        non_repeaters: u16,
        max_repetitions: u16,
        ranges: Vec<SearchRange>,
    },
    TestSet {
        varbinds: Vec<VarBind>,
    },
    CommitSet,
    UndoSet,
    CleanupSet,
    Notify {
        varbinds: Vec<VarBind>,
    },
    Ping,
    IndexAllocate {
        varbinds: Vec<VarBind>,
    },
    IndexDeallocate {
        varbinds: Vec<VarBind>,
    },
    AddAgentCaps {
        id: Oid,
        descr: Vec<u8>,
    },
    RemoveAgentCaps {
        id: Oid,
    },
    /// `sys_uptime` is in hundredths of a second, kept as the raw u32.
    Response {
        sys_uptime: u32,
        error: u16,
        index: u16,
        varbinds: Vec<VarBind>,
    },
}

impl Payload {
    /// The `h.type` code for this payload.
    pub fn pdu_type(&self) -> u8 {
        match self {
            Payload::Open { .. } => pdu_type::OPEN,
            Payload::Close { .. } => pdu_type::CLOSE,
            Payload::Register { .. } => pdu_type::REGISTER,
            Payload::Unregister { .. } => pdu_type::UNREGISTER,
            Payload::Get { .. } => pdu_type::GET,
            Payload::GetNext { .. } => pdu_type::GET_NEXT,
            Payload::GetBulk { .. } => pdu_type::GET_BULK,
            Payload::TestSet { .. } => pdu_type::TEST_SET,
            Payload::CommitSet => pdu_type::COMMIT_SET,
            Payload::UndoSet => pdu_type::UNDO_SET,
            Payload::CleanupSet => pdu_type::CLEANUP_SET,
            Payload::Notify { .. } => pdu_type::NOTIFY,
            Payload::Ping => pdu_type::PING,
            Payload::IndexAllocate { .. } => pdu_type::INDEX_ALLOCATE,
            Payload::IndexDeallocate { .. } => pdu_type::INDEX_DEALLOCATE,
            Payload::AddAgentCaps { .. } => pdu_type::ADD_AGENT_CAPS,
            Payload::RemoveAgentCaps { .. } => pdu_type::REMOVE_AGENT_CAPS,
            Payload::Response { .. } => pdu_type::RESPONSE,
        }
    }
}

/// A complete AgentX PDU.
///
/// `flags` holds the header flags *other than* `NETWORK_BYTE_ORDER` and `NON_DEFAULT_CONTEXT`:
/// decode clears those two, encode derives them (NBO always set, context flag iff `context` is
/// `Some`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pdu {
    pub flags: u8,
    pub session_id: u32,
    pub transaction_id: u32,
    pub packet_id: u32,
    pub context: Option<Vec<u8>>,
    pub payload: Payload,
}

const CODEC_FLAGS: u8 = flags::NETWORK_BYTE_ORDER | flags::NON_DEFAULT_CONTEXT;

impl Pdu {
    /// A PDU with no extra flags and the default context.
    pub fn new(session_id: u32, transaction_id: u32, packet_id: u32, payload: Payload) -> Pdu {
        Pdu {
            flags: 0,
            session_id,
            transaction_id,
            packet_id,
            context: None,
            payload,
        }
    }

    /// The `h.type` code for this PDU.
    pub fn pdu_type(&self) -> u8 {
        self.payload.pdu_type()
    }

    /// Decodes one frame: the 20-byte header followed by exactly `payload_length` bytes.
    pub fn decode(frame: &[u8]) -> Result<Pdu, DecodeError> {
        let h = Header::decode(frame)?;
        let payload = frame.get(HEADER_LEN..).unwrap_or(&[]);
        if payload.len() != h.payload_length as usize {
            return Err(DecodeError {
                kind: DecodeErrorKind::FrameLength,
                header: Some(h),
                offset: payload.len(),
                what: "frame",
            });
        }
        let mut r = Reader {
            buf: payload,
            pos: 0,
            be: h.network_byte_order(),
            header: h,
        };
        if !pdu_type::is_known(h.pdu_type) {
            return Err(r.err(DecodeErrorKind::UnknownPduType, 0, "h.type"));
        }
        let context = if h.flags & flags::NON_DEFAULT_CONTEXT != 0 {
            Some(r.octets("context")?)
        } else {
            None
        };
        let payload = r.payload(h.pdu_type)?;
        if r.remaining() != 0 {
            return Err(r.err(DecodeErrorKind::TrailingBytes, r.pos, "payload"));
        }
        Ok(Pdu {
            flags: h.flags & !CODEC_FLAGS,
            session_id: h.session_id,
            transaction_id: h.transaction_id,
            packet_id: h.packet_id,
            context,
            payload,
        })
    }

    /// Appends the encoded frame to `out` (network byte order, NBO flag set, payload_length
    /// filled in). The payload is not checked against [`MAX_PAYLOAD`]; callers that may build
    /// large PDUs should compare the appended length with `HEADER_LEN + MAX_PAYLOAD`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut fl = (self.flags & !CODEC_FLAGS) | flags::NETWORK_BYTE_ORDER;
        if self.context.is_some() {
            fl |= flags::NON_DEFAULT_CONTEXT;
        }
        let start = out.len();
        put_header(
            out,
            self.pdu_type(),
            fl,
            self.session_id,
            self.transaction_id,
            self.packet_id,
        );
        if let Some(c) = &self.context {
            put_octets(out, c);
        }
        match &self.payload {
            Payload::Open { timeout, id, descr } => {
                out.extend_from_slice(&[*timeout, 0, 0, 0]);
                put_oid(out, id, false);
                put_octets(out, descr);
            }
            Payload::Close { reason } => out.extend_from_slice(&[*reason, 0, 0, 0]),
            Payload::Register {
                timeout,
                priority,
                range_subid,
                subtree,
                upper_bound,
            } => {
                out.extend_from_slice(&[*timeout, *priority, *range_subid, 0]);
                put_oid(out, subtree, false);
                if *range_subid != 0 {
                    put_u32(out, upper_bound.unwrap_or(0));
                }
            }
            Payload::Unregister {
                priority,
                range_subid,
                subtree,
                upper_bound,
            } => {
                out.extend_from_slice(&[0, *priority, *range_subid, 0]);
                put_oid(out, subtree, false);
                if *range_subid != 0 {
                    put_u32(out, upper_bound.unwrap_or(0));
                }
            }
            Payload::Get { ranges } | Payload::GetNext { ranges } => put_ranges(out, ranges),
            Payload::GetBulk {
                non_repeaters,
                max_repetitions,
                ranges,
            } => {
                put_u16(out, *non_repeaters);
                put_u16(out, *max_repetitions);
                put_ranges(out, ranges);
            }
            Payload::TestSet { varbinds }
            | Payload::Notify { varbinds }
            | Payload::IndexAllocate { varbinds }
            | Payload::IndexDeallocate { varbinds } => {
                for vb in varbinds {
                    put_varbind(out, &vb.name, &vb.value);
                }
            }
            Payload::CommitSet | Payload::UndoSet | Payload::CleanupSet | Payload::Ping => {}
            Payload::AddAgentCaps { id, descr } => {
                put_oid(out, id, false);
                put_octets(out, descr);
            }
            Payload::RemoveAgentCaps { id } => put_oid(out, id, false),
            Payload::Response {
                sys_uptime,
                error,
                index,
                varbinds,
            } => {
                put_u32(out, *sys_uptime);
                put_u16(out, *error);
                put_u16(out, *index);
                for vb in varbinds {
                    put_varbind(out, &vb.name, &vb.value);
                }
            }
        }
        patch_payload_length(out, start);
    }
}

// ---------------------------------------------------------------------------------------------
// Response fast path
// ---------------------------------------------------------------------------------------------

/// Appends a Response frame (default context) without building a [`Pdu`].
#[allow(clippy::too_many_arguments)]
pub fn encode_response(
    out: &mut Vec<u8>,
    session_id: u32,
    transaction_id: u32,
    packet_id: u32,
    sys_uptime: u32,
    error: u16,
    index: u16,
    varbinds: &[VarBind],
) {
    let mut w = ResponseWriter::begin(
        out,
        session_id,
        transaction_id,
        packet_id,
        sys_uptime,
        error,
        index,
    );
    for vb in varbinds {
        w.push(&vb.name, &vb.value);
    }
    w.finish();
}

/// Builds a Response frame in place, one VarBind at a time.
///
/// The header's `payload_length` is kept up to date after every call, so the bytes in `out`
/// always form a complete frame; [`finish`](Self::finish) only reports the frame length.
pub struct ResponseWriter<'a> {
    out: &'a mut Vec<u8>,
    start: usize,
    count: usize,
}

/// A position in a [`ResponseWriter`] to roll back to (e.g. when a GetBulk answer would exceed
/// the size limit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    len: usize,
    count: usize,
}

impl<'a> ResponseWriter<'a> {
    /// Starts a Response frame at the end of `out`.
    pub fn begin(
        out: &'a mut Vec<u8>,
        session_id: u32,
        transaction_id: u32,
        packet_id: u32,
        sys_uptime: u32,
        error: u16,
        index: u16,
    ) -> ResponseWriter<'a> {
        let start = out.len();
        put_header(
            out,
            pdu_type::RESPONSE,
            flags::NETWORK_BYTE_ORDER,
            session_id,
            transaction_id,
            packet_id,
        );
        put_u32(out, sys_uptime);
        put_u16(out, error);
        put_u16(out, index);
        patch_payload_length(out, start);
        ResponseWriter {
            out,
            start,
            count: 0,
        }
    }

    /// Appends one VarBind.
    pub fn push(&mut self, name: &Oid, value: &Value) {
        put_varbind(self.out, name, value);
        self.count += 1;
        patch_payload_length(self.out, self.start);
    }

    /// Appends one VarBind.
    pub fn push_varbind(&mut self, vb: &VarBind) {
        self.push(&vb.name, &vb.value);
    }

    /// Overwrites `res.error` and `res.index`.
    pub fn set_error(&mut self, error: u16, index: u16) {
        let at = self.start + HEADER_LEN + 4;
        if let Some(s) = self.out.get_mut(at..at + 4) {
            s[..2].copy_from_slice(&error.to_be_bytes());
            s[2..].copy_from_slice(&index.to_be_bytes());
        }
    }

    /// Number of VarBinds pushed so far.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Current payload length (excluding the header).
    pub fn payload_len(&self) -> usize {
        self.out.len() - self.start - HEADER_LEN
    }

    /// Remembers the current position.
    pub fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            len: self.out.len(),
            count: self.count,
        }
    }

    /// Drops every VarBind pushed after `cp`. A checkpoint from another writer, or one that
    /// lies beyond the current position, is ignored.
    pub fn rollback(&mut self, cp: Checkpoint) {
        if cp.len >= self.start + HEADER_LEN + 8 && cp.len <= self.out.len() {
            self.out.truncate(cp.len);
            self.count = cp.count;
            patch_payload_length(self.out, self.start);
        }
    }

    /// Ends the frame and returns its total length (header + payload).
    pub fn finish(self) -> usize {
        patch_payload_length(self.out, self.start);
        self.out.len() - self.start
    }
}

// ---------------------------------------------------------------------------------------------
// Encoding helpers (always network byte order)
// ---------------------------------------------------------------------------------------------

fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_be_bytes());
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_be_bytes());
}

fn put_header(out: &mut Vec<u8>, t: u8, fl: u8, session: u32, transaction: u32, packet: u32) {
    out.extend_from_slice(&[VERSION, t, fl, 0]);
    put_u32(out, session);
    put_u32(out, transaction);
    put_u32(out, packet);
    put_u32(out, 0); // payload_length, patched later
}

fn patch_payload_length(out: &mut [u8], start: usize) {
    let len = out.len().saturating_sub(start + HEADER_LEN);
    let len = u32::try_from(len).unwrap_or(u32::MAX);
    if let Some(s) = out.get_mut(start + 16..start + HEADER_LEN) {
        s.copy_from_slice(&len.to_be_bytes());
    }
}

/// Encodes an OID, in the prefix form when it starts with 1.3.6.1.x (0 < x < 256).
///
/// OIDs longer than [`MAX_SUBIDS`] cannot be valid on the wire; they are cut to
/// [`MAX_SUBIDS`] sub-identifiers rather than panicking.
fn put_oid(out: &mut Vec<u8>, oid: &Oid, include: bool) {
    let s = oid.as_slice();
    let s = &s[..s.len().min(MAX_SUBIDS)];
    let (prefix, rest) = match s {
        [1, 3, 6, 1, x, rest @ ..] if (1..256).contains(x) => (*x as u8, rest),
        _ => (0u8, s),
    };
    out.extend_from_slice(&[rest.len() as u8, prefix, u8::from(include), 0]);
    out.reserve(rest.len() * 4);
    for id in rest {
        put_u32(out, *id);
    }
}

fn put_octets(out: &mut Vec<u8>, data: &[u8]) {
    let n = data.len().min(u32::MAX as usize);
    put_u32(out, n as u32);
    out.extend_from_slice(&data[..n]);
    let pad = (4 - n % 4) % 4;
    out.extend_from_slice(&[0u8; 3][..pad]);
}

fn put_ranges(out: &mut Vec<u8>, ranges: &[SearchRange]) {
    for r in ranges {
        put_oid(out, &r.start, r.include);
        put_oid(out, &r.end, false);
    }
}

fn put_varbind(out: &mut Vec<u8>, name: &Oid, value: &Value) {
    put_u16(out, value.type_code());
    put_u16(out, 0);
    put_oid(out, name, false);
    match value {
        Value::Integer(i) => out.extend_from_slice(&i.to_be_bytes()),
        Value::OctetString(d) | Value::Opaque(d) => put_octets(out, d),
        Value::Null | Value::NoSuchObject | Value::NoSuchInstance | Value::EndOfMibView => {}
        Value::ObjectIdentifier(o) => put_oid(out, o, false),
        Value::IpAddress(a) => put_octets(out, a),
        Value::Counter32(v) | Value::Gauge32(v) | Value::TimeTicks(v) => put_u32(out, *v),
        Value::Counter64(v) => out.extend_from_slice(&v.to_be_bytes()),
    }
}

// ---------------------------------------------------------------------------------------------
// Decoding
// ---------------------------------------------------------------------------------------------

/// Bounds-checked cursor over a payload, in the PDU's byte order.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    be: bool,
    header: Header,
}

impl<'a> Reader<'a> {
    fn err(&self, kind: DecodeErrorKind, offset: usize, what: &'static str) -> DecodeError {
        DecodeError {
            kind,
            header: Some(self.header),
            offset,
            what,
        }
    }

    fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], DecodeError> {
        let s = self
            .pos
            .checked_add(n)
            .and_then(|end| self.buf.get(self.pos..end))
            .ok_or_else(|| self.err(DecodeErrorKind::Truncated, self.pos, what))?;
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], DecodeError> {
        let s = self.take(N, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    fn u16(&mut self, what: &'static str) -> Result<u16, DecodeError> {
        let a = self.array::<2>(what)?;
        Ok(if self.be {
            u16::from_be_bytes(a)
        } else {
            u16::from_le_bytes(a)
        })
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        let a = self.array::<4>(what)?;
        Ok(if self.be {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        })
    }

    fn u64(&mut self, what: &'static str) -> Result<u64, DecodeError> {
        let a = self.array::<8>(what)?;
        Ok(if self.be {
            u64::from_be_bytes(a)
        } else {
            u64::from_le_bytes(a)
        })
    }

    /// Octet string: 4-byte length, data, zero to three pad bytes. The length is checked
    /// against what is left before anything is allocated.
    fn octets(&mut self, what: &'static str) -> Result<Vec<u8>, DecodeError> {
        let at = self.pos;
        let len = self.u32(what)? as usize;
        let padded = len.checked_add((4 - len % 4) % 4);
        match padded {
            Some(p) if p <= self.remaining() => {}
            _ => return Err(self.err(DecodeErrorKind::Truncated, at, what)),
        }
        let data = self.take(len, what)?.to_vec();
        self.take((4 - len % 4) % 4, what)?;
        Ok(data)
    }

    /// OID (RFC 2741 §5.1); returns the OID and its `include` byte.
    fn oid(&mut self, what: &'static str) -> Result<(Oid, bool), DecodeError> {
        let at = self.pos;
        let [n_subid, prefix, include, _reserved] = self.array::<4>(what)?;
        let n = n_subid as usize;
        let total = n + if prefix != 0 { 5 } else { 0 };
        if total > MAX_SUBIDS {
            return Err(self.err(DecodeErrorKind::OidTooLong, at, what));
        }
        if self.remaining() < n * 4 {
            return Err(self.err(DecodeErrorKind::Truncated, self.pos, what));
        }
        let mut v = Vec::with_capacity(total);
        if prefix != 0 {
            v.extend_from_slice(&[1, 3, 6, 1, u32::from(prefix)]);
        }
        for _ in 0..n {
            v.push(self.u32(what)?);
        }
        Ok((Oid(v), include != 0))
    }

    fn ranges(&mut self) -> Result<Vec<SearchRange>, DecodeError> {
        let mut ranges = Vec::new();
        while self.remaining() > 0 {
            let (start, include) = self.oid("SearchRange start")?;
            let (end, _) = self.oid("SearchRange end")?;
            ranges.push(SearchRange {
                start,
                include,
                end,
            });
        }
        Ok(ranges)
    }

    fn varbind(&mut self) -> Result<VarBind, DecodeError> {
        let at = self.pos;
        let t = self.u16("v.type")?;
        self.take(2, "v.type")?; // reserved
        let (name, _) = self.oid("v.name")?;
        let value = match t {
            value_type::INTEGER => Value::Integer(self.u32("v.data Integer")? as i32),
            value_type::OCTET_STRING => Value::OctetString(self.octets("v.data OctetString")?),
            value_type::NULL => Value::Null,
            value_type::OBJECT_IDENTIFIER => {
                Value::ObjectIdentifier(self.oid("v.data ObjectIdentifier")?.0)
            }
            value_type::IP_ADDRESS => {
                let data_at = self.pos;
                let d = self.octets("v.data IpAddress")?;
                match <[u8; 4]>::try_from(d.as_slice()) {
                    Ok(a) => Value::IpAddress(a),
                    Err(_) => {
                        return Err(self.err(
                            DecodeErrorKind::Malformed,
                            data_at,
                            "v.data IpAddress",
                        ))
                    }
                }
            }
            value_type::COUNTER32 => Value::Counter32(self.u32("v.data Counter32")?),
            value_type::GAUGE32 => Value::Gauge32(self.u32("v.data Gauge32")?),
            value_type::TIME_TICKS => Value::TimeTicks(self.u32("v.data TimeTicks")?),
            value_type::OPAQUE => Value::Opaque(self.octets("v.data Opaque")?),
            value_type::COUNTER64 => Value::Counter64(self.u64("v.data Counter64")?),
            value_type::NO_SUCH_OBJECT => Value::NoSuchObject,
            value_type::NO_SUCH_INSTANCE => Value::NoSuchInstance,
            value_type::END_OF_MIB_VIEW => Value::EndOfMibView,
            _ => return Err(self.err(DecodeErrorKind::BadValueType, at, "v.type")),
        };
        Ok(VarBind { name, value })
    }

    fn varbinds(&mut self) -> Result<Vec<VarBind>, DecodeError> {
        let mut v = Vec::new();
        while self.remaining() > 0 {
            v.push(self.varbind()?);
        }
        Ok(v)
    }

    fn upper_bound(&mut self, range_subid: u8) -> Result<Option<u32>, DecodeError> {
        if range_subid != 0 {
            Ok(Some(self.u32("upper_bound")?))
        } else {
            Ok(None)
        }
    }

    /// The type-specific fields (after any context).
    fn payload(&mut self, t: u8) -> Result<Payload, DecodeError> {
        Ok(match t {
            pdu_type::OPEN => {
                let [timeout, _, _, _] = self.array::<4>("o.timeout")?;
                let (id, _) = self.oid("o.id")?;
                let descr = self.octets("o.descr")?;
                Payload::Open { timeout, id, descr }
            }
            pdu_type::CLOSE => {
                let [reason, _, _, _] = self.array::<4>("c.reason")?;
                Payload::Close { reason }
            }
            pdu_type::REGISTER => {
                let [timeout, priority, range_subid, _] = self.array::<4>("r.timeout")?;
                let (subtree, _) = self.oid("r.subtree")?;
                let upper_bound = self.upper_bound(range_subid)?;
                Payload::Register {
                    timeout,
                    priority,
                    range_subid,
                    subtree,
                    upper_bound,
                }
            }
            pdu_type::UNREGISTER => {
                let [_, priority, range_subid, _] = self.array::<4>("u.priority")?;
                let (subtree, _) = self.oid("u.subtree")?;
                let upper_bound = self.upper_bound(range_subid)?;
                Payload::Unregister {
                    priority,
                    range_subid,
                    subtree,
                    upper_bound,
                }
            }
            pdu_type::GET => Payload::Get {
                ranges: self.ranges()?,
            },
            pdu_type::GET_NEXT => Payload::GetNext {
                ranges: self.ranges()?,
            },
            pdu_type::GET_BULK => {
                let non_repeaters = self.u16("g.non_repeaters")?;
                let max_repetitions = self.u16("g.max_repetitions")?;
                Payload::GetBulk {
                    non_repeaters,
                    max_repetitions,
                    ranges: self.ranges()?,
                }
            }
            pdu_type::TEST_SET => Payload::TestSet {
                varbinds: self.varbinds()?,
            },
            pdu_type::COMMIT_SET => Payload::CommitSet,
            pdu_type::UNDO_SET => Payload::UndoSet,
            pdu_type::CLEANUP_SET => Payload::CleanupSet,
            pdu_type::NOTIFY => Payload::Notify {
                varbinds: self.varbinds()?,
            },
            pdu_type::PING => Payload::Ping,
            pdu_type::INDEX_ALLOCATE => Payload::IndexAllocate {
                varbinds: self.varbinds()?,
            },
            pdu_type::INDEX_DEALLOCATE => Payload::IndexDeallocate {
                varbinds: self.varbinds()?,
            },
            pdu_type::ADD_AGENT_CAPS => {
                let (id, _) = self.oid("a.id")?;
                let descr = self.octets("a.descr")?;
                Payload::AddAgentCaps { id, descr }
            }
            pdu_type::REMOVE_AGENT_CAPS => {
                let (id, _) = self.oid("a.id")?;
                Payload::RemoveAgentCaps { id }
            }
            pdu_type::RESPONSE => {
                let sys_uptime = self.u32("res.sysUpTime")?;
                let error = self.u16("res.error")?;
                let index = self.u16("res.index")?;
                Payload::Response {
                    sys_uptime,
                    error,
                    index,
                    varbinds: self.varbinds()?,
                }
            }
            _ => return Err(self.err(DecodeErrorKind::UnknownPduType, 0, "h.type")),
        })
    }
}
