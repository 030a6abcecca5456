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
pub use crate::value::{Value, VarBind};

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

/// Defines an open code type: a newtype over the wire integer, so values this codec has no
/// name for still decode, round-trip and show up in logs with their number.
macro_rules! code_type {
    (
        $(#[$meta:meta])*
        $ty:ident($repr:ty) {
            $($(#[$cmeta:meta])* $konst:ident = $val:literal => $name:literal,)*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub struct $ty(pub $repr);

        impl $ty {
            $($(#[$cmeta])* pub const $konst: $ty = $ty($val);)*

            /// The RFC name, for logs (`"unknown"` for a code without one).
            pub fn name(self) -> &'static str {
                self.known_name().unwrap_or("unknown")
            }

            fn known_name(self) -> Option<&'static str> {
                match self {
                    $($ty::$konst => Some($name),)*
                    _ => None,
                }
            }
        }

        /// The RFC name; a code without one shows its number, e.g. `unknown(99)`.
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.known_name() {
                    Some(name) => f.write_str(name),
                    None => write!(f, "unknown({})", self.0),
                }
            }
        }
    };
}

code_type! {
    /// `h.type`: the PDU type (RFC 2741 §6.1).
    PduType(u8) {
        OPEN = 1 => "Open",
        CLOSE = 2 => "Close",
        REGISTER = 3 => "Register",
        UNREGISTER = 4 => "Unregister",
        GET = 5 => "Get",
        GET_NEXT = 6 => "GetNext",
        GET_BULK = 7 => "GetBulk",
        TEST_SET = 8 => "TestSet",
        COMMIT_SET = 9 => "CommitSet",
        UNDO_SET = 10 => "UndoSet",
        CLEANUP_SET = 11 => "CleanupSet",
        NOTIFY = 12 => "Notify",
        PING = 13 => "Ping",
        INDEX_ALLOCATE = 14 => "IndexAllocate",
        INDEX_DEALLOCATE = 15 => "IndexDeallocate",
        ADD_AGENT_CAPS = 16 => "AddAgentCaps",
        REMOVE_AGENT_CAPS = 17 => "RemoveAgentCaps",
        RESPONSE = 18 => "Response",
    }
}

impl PduType {
    /// True for the 18 types RFC 2741 defines.
    pub fn is_known(self) -> bool {
        (PduType::OPEN.0..=PduType::RESPONSE.0).contains(&self.0)
    }
}

code_type! {
    /// `res.error`: SNMP error-status codes (RFC 3416) and AgentX codes (RFC 2741 §6.2.16).
    ResError(u16) {
        NO_ERROR = 0 => "noError",
        TOO_BIG = 1 => "tooBig",
        NO_SUCH_NAME = 2 => "noSuchName",
        BAD_VALUE = 3 => "badValue",
        READ_ONLY = 4 => "readOnly",
        GEN_ERR = 5 => "genErr",
        NO_ACCESS = 6 => "noAccess",
        WRONG_TYPE = 7 => "wrongType",
        WRONG_LENGTH = 8 => "wrongLength",
        WRONG_ENCODING = 9 => "wrongEncoding",
        WRONG_VALUE = 10 => "wrongValue",
        NO_CREATION = 11 => "noCreation",
        INCONSISTENT_VALUE = 12 => "inconsistentValue",
        RESOURCE_UNAVAILABLE = 13 => "resourceUnavailable",
        COMMIT_FAILED = 14 => "commitFailed",
        UNDO_FAILED = 15 => "undoFailed",
        AUTHORIZATION_ERROR = 16 => "authorizationError",
        NOT_WRITABLE = 17 => "notWritable",
        INCONSISTENT_NAME = 18 => "inconsistentName",
        OPEN_FAILED = 256 => "openFailed",
        NOT_OPEN = 257 => "notOpen",
        INDEX_WRONG_TYPE = 258 => "indexWrongType",
        INDEX_ALREADY_ALLOCATED = 259 => "indexAlreadyAllocated",
        INDEX_NONE_AVAILABLE = 260 => "indexNoneAvailable",
        INDEX_NOT_ALLOCATED = 261 => "indexNotAllocated",
        UNSUPPORTED_CONTEXT = 262 => "unsupportedContext",
        DUPLICATE_REGISTRATION = 263 => "duplicateRegistration",
        UNKNOWN_REGISTRATION = 264 => "unknownRegistration",
        UNKNOWN_AGENT_CAPS = 265 => "unknownAgentCaps",
        PARSE_ERROR = 266 => "parseError",
        REQUEST_DENIED = 267 => "requestDenied",
        PROCESSING_ERROR = 268 => "processingError",
    }
}

code_type! {
    /// `c.reason`: why a session is closed (RFC 2741 §6.2.2).
    CloseReason(u8) {
        OTHER = 1 => "other",
        PARSE_ERROR = 2 => "parseError",
        PROTOCOL_ERROR = 3 => "protocolError",
        TIMEOUTS = 4 => "timeouts",
        SHUTDOWN = 5 => "shutdown",
        BY_MANAGER = 6 => "byManager",
    }
}

code_type! {
    /// `v.type`: the kind of a VarBind's value (RFC 2741 §5.4).
    ValueType(u16) {
        INTEGER = 2 => "Integer",
        OCTET_STRING = 4 => "OctetString",
        NULL = 5 => "Null",
        OBJECT_IDENTIFIER = 6 => "ObjectIdentifier",
        IP_ADDRESS = 64 => "IpAddress",
        COUNTER32 = 65 => "Counter32",
        GAUGE32 = 66 => "Gauge32",
        TIME_TICKS = 67 => "TimeTicks",
        OPAQUE = 68 => "Opaque",
        COUNTER64 = 70 => "Counter64",
        NO_SUCH_OBJECT = 128 => "noSuchObject",
        NO_SUCH_INSTANCE = 129 => "noSuchInstance",
        END_OF_MIB_VIEW = 130 => "endOfMibView",
    }
}

/// The `v.type` code that carries `v` on the wire.
pub fn value_type(v: &Value) -> ValueType {
    match v {
        Value::Integer(_) => ValueType::INTEGER,
        Value::OctetString(_) => ValueType::OCTET_STRING,
        Value::Null => ValueType::NULL,
        Value::ObjectIdentifier(_) => ValueType::OBJECT_IDENTIFIER,
        Value::IpAddress(_) => ValueType::IP_ADDRESS,
        Value::Counter32(_) => ValueType::COUNTER32,
        Value::Gauge32(_) => ValueType::GAUGE32,
        Value::TimeTicks(_) => ValueType::TIME_TICKS,
        Value::Opaque(_) => ValueType::OPAQUE,
        Value::Counter64(_) => ValueType::COUNTER64,
        Value::NoSuchObject => ValueType::NO_SUCH_OBJECT,
        Value::NoSuchInstance => ValueType::NO_SUCH_INSTANCE,
        Value::EndOfMibView => ValueType::END_OF_MIB_VIEW,
    }
}

/// The three header IDs (RFC 2741 §6.1), which a Response echoes from its request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct HeaderIds {
    pub session_id: u32,
    pub transaction_id: u32,
    pub packet_id: u32,
}

impl HeaderIds {
    pub const fn new(session_id: u32, transaction_id: u32, packet_id: u32) -> HeaderIds {
        HeaderIds {
            session_id,
            transaction_id,
            packet_id,
        }
    }
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
                h.pdu_type.name(),
                h.pdu_type.0,
                h.ids.packet_id
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
    pub pdu_type: PduType,
    pub flags: u8,
    pub ids: HeaderIds,
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
            pdu_type: PduType(h[1]),
            flags: h[2],
            ids: HeaderIds {
                session_id: word(4),
                transaction_id: word(8),
                packet_id: word(12),
            },
            payload_length: word(16),
        };
        if header.payload_length as u64 > MAX_PAYLOAD as u64 {
            return Err(err(DecodeErrorKind::PayloadTooLong, 16, "h.payload_length"));
        }
        if !header.payload_length.is_multiple_of(4) {
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
        reason: CloseReason,
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
        error: ResError,
        index: u16,
        varbinds: Vec<VarBind>,
    },
}

impl Payload {
    /// The `h.type` code for this payload.
    pub fn pdu_type(&self) -> PduType {
        match self {
            Payload::Open { .. } => PduType::OPEN,
            Payload::Close { .. } => PduType::CLOSE,
            Payload::Register { .. } => PduType::REGISTER,
            Payload::Unregister { .. } => PduType::UNREGISTER,
            Payload::Get { .. } => PduType::GET,
            Payload::GetNext { .. } => PduType::GET_NEXT,
            Payload::GetBulk { .. } => PduType::GET_BULK,
            Payload::TestSet { .. } => PduType::TEST_SET,
            Payload::CommitSet => PduType::COMMIT_SET,
            Payload::UndoSet => PduType::UNDO_SET,
            Payload::CleanupSet => PduType::CLEANUP_SET,
            Payload::Notify { .. } => PduType::NOTIFY,
            Payload::Ping => PduType::PING,
            Payload::IndexAllocate { .. } => PduType::INDEX_ALLOCATE,
            Payload::IndexDeallocate { .. } => PduType::INDEX_DEALLOCATE,
            Payload::AddAgentCaps { .. } => PduType::ADD_AGENT_CAPS,
            Payload::RemoveAgentCaps { .. } => PduType::REMOVE_AGENT_CAPS,
            Payload::Response { .. } => PduType::RESPONSE,
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
    pub ids: HeaderIds,
    pub context: Option<Vec<u8>>,
    pub payload: Payload,
}

const CODEC_FLAGS: u8 = flags::NETWORK_BYTE_ORDER | flags::NON_DEFAULT_CONTEXT;

impl Pdu {
    /// A PDU with no extra flags and the default context.
    pub fn new(session_id: u32, transaction_id: u32, packet_id: u32, payload: Payload) -> Pdu {
        Pdu::with_ids(
            HeaderIds::new(session_id, transaction_id, packet_id),
            payload,
        )
    }

    /// [`Pdu::new`] for IDs already grouped, e.g. echoed from a request.
    pub fn with_ids(ids: HeaderIds, payload: Payload) -> Pdu {
        Pdu {
            flags: 0,
            ids,
            context: None,
            payload,
        }
    }

    /// The `h.type` code for this PDU.
    pub fn pdu_type(&self) -> PduType {
        self.payload.pdu_type()
    }

    /// Decodes one frame: the 20-byte header followed by exactly `payload_length` bytes.
    pub fn decode(frame: &[u8]) -> Result<Pdu, DecodeError> {
        Pdu::decode_reusing(frame, None)
    }

    /// [`decode`](Self::decode), taking the buffers of `spare` (a PDU decoded before and
    /// done with) where they fit: a request's SearchRanges and their OIDs are then decoded
    /// into memory already allocated. A subagent decodes one request per varbind of a
    /// walk, and this saves it three allocations each time.
    pub fn decode_reusing(frame: &[u8], spare: Option<Pdu>) -> Result<Pdu, DecodeError> {
        Pdu::decode_into_ranges(frame, spare.map_or_else(Vec::new, Pdu::into_ranges))
    }

    /// A request's SearchRanges, to decode another request into (see
    /// [`decode_reusing`](Self::decode_reusing)); empty for any other PDU.
    pub(crate) fn into_ranges(self) -> Vec<SearchRange> {
        match self.payload {
            Payload::Get { ranges }
            | Payload::GetNext { ranges }
            | Payload::GetBulk { ranges, .. } => ranges,
            _ => Vec::new(),
        }
    }

    /// [`decode`](Self::decode), with a request's ranges decoded into `ranges`' memory.
    pub(crate) fn decode_into_ranges(
        frame: &[u8],
        ranges: Vec<SearchRange>,
    ) -> Result<Pdu, DecodeError> {
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
        if !h.pdu_type.is_known() {
            return Err(r.err(DecodeErrorKind::UnknownPduType, 0, "h.type"));
        }
        let context = if h.flags & flags::NON_DEFAULT_CONTEXT != 0 {
            Some(r.octets("context")?)
        } else {
            None
        };
        let payload = r.payload(h.pdu_type, ranges)?;
        if r.remaining() != 0 {
            return Err(r.err(DecodeErrorKind::TrailingBytes, r.pos, "payload"));
        }
        Ok(Pdu {
            flags: h.flags & !CODEC_FLAGS,
            ids: h.ids,
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
        put_header(out, self.pdu_type(), fl, self.ids);
        if let Some(c) = &self.context {
            put_octets(out, c);
        }
        match &self.payload {
            Payload::Open { timeout, id, descr } => {
                out.extend_from_slice(&[*timeout, 0, 0, 0]);
                put_oid(out, id, false);
                put_octets(out, descr);
            }
            Payload::Close { reason } => out.extend_from_slice(&[reason.0, 0, 0, 0]),
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
                put_u16(out, error.0);
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

/// Builds a Response frame in place, one VarBind at a time.
///
/// The header's `payload_length` is kept up to date after every call, so the bytes in `out`
/// always form a complete frame; [`finish`](Self::finish) only reports the frame length.
#[derive(Debug)]
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
        ids: HeaderIds,
        sys_uptime: u32,
        error: ResError,
        index: u16,
    ) -> ResponseWriter<'a> {
        let start = out.len();
        put_header(out, PduType::RESPONSE, flags::NETWORK_BYTE_ORDER, ids);
        put_u32(out, sys_uptime);
        put_u16(out, error.0);
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

fn put_header(out: &mut Vec<u8>, t: PduType, fl: u8, ids: HeaderIds) {
    out.extend_from_slice(&[VERSION, t.0, fl, 0]);
    put_u32(out, ids.session_id);
    put_u32(out, ids.transaction_id);
    put_u32(out, ids.packet_id);
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
    put_u16(out, value_type(value).0);
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
        let mut v = Vec::new();
        let include = self.oid_into(&mut v, what)?;
        Ok((Oid(v), include))
    }

    /// An OID into `v` (cleared first, its memory kept); whether its include flag is set.
    fn oid_into(&mut self, v: &mut Vec<u32>, what: &'static str) -> Result<bool, DecodeError> {
        let at = self.pos;
        let [n_subid, prefix, include, _reserved] = self.array::<4>(what)?;
        let n = n_subid as usize;
        let total = n + if prefix != 0 { 5 } else { 0 };
        if total > MAX_SUBIDS {
            return Err(self.err(DecodeErrorKind::OidTooLong, at, what));
        }
        v.clear();
        v.reserve(total);
        if prefix != 0 {
            v.extend_from_slice(&[1, 3, 6, 1, u32::from(prefix)]);
        }
        // All the sub-identifiers at once, their length checked once: read one by one,
        // each with its own bounds check and byte-order branch, they were a tenth of a
        // request's decoding.
        let subids = self.take(n * 4, what)?.chunks_exact(4);
        let word = |c: &[u8]| [c[0], c[1], c[2], c[3]];
        if self.be {
            v.extend(subids.map(|c| u32::from_be_bytes(word(c))));
        } else {
            v.extend(subids.map(|c| u32::from_le_bytes(word(c))));
        }
        Ok(include != 0)
    }

    /// SearchRanges to the end of the payload, into `ranges`: the ranges already there keep
    /// their OIDs' memory, and are overwritten or cut off.
    fn ranges(&mut self, mut ranges: Vec<SearchRange>) -> Result<Vec<SearchRange>, DecodeError> {
        let mut n = 0;
        while self.remaining() > 0 {
            if n == ranges.len() {
                ranges.push(SearchRange {
                    start: Oid::null(),
                    include: false,
                    end: Oid::null(),
                });
            }
            let r = &mut ranges[n];
            r.include = self.oid_into(&mut r.start.0, "SearchRange start")?;
            self.oid_into(&mut r.end.0, "SearchRange end")?;
            n += 1;
        }
        ranges.truncate(n);
        Ok(ranges)
    }

    fn varbind(&mut self) -> Result<VarBind, DecodeError> {
        let at = self.pos;
        let t = ValueType(self.u16("v.type")?);
        self.take(2, "v.type")?; // reserved
        let (name, _) = self.oid("v.name")?;
        let value = match t {
            ValueType::INTEGER => Value::Integer(self.u32("v.data Integer")? as i32),
            ValueType::OCTET_STRING => Value::OctetString(self.octets("v.data OctetString")?),
            ValueType::NULL => Value::Null,
            ValueType::OBJECT_IDENTIFIER => {
                Value::ObjectIdentifier(self.oid("v.data ObjectIdentifier")?.0)
            }
            ValueType::IP_ADDRESS => {
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
            ValueType::COUNTER32 => Value::Counter32(self.u32("v.data Counter32")?),
            ValueType::GAUGE32 => Value::Gauge32(self.u32("v.data Gauge32")?),
            ValueType::TIME_TICKS => Value::TimeTicks(self.u32("v.data TimeTicks")?),
            ValueType::OPAQUE => Value::Opaque(self.octets("v.data Opaque")?),
            ValueType::COUNTER64 => Value::Counter64(self.u64("v.data Counter64")?),
            ValueType::NO_SUCH_OBJECT => Value::NoSuchObject,
            ValueType::NO_SUCH_INSTANCE => Value::NoSuchInstance,
            ValueType::END_OF_MIB_VIEW => Value::EndOfMibView,
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
    /// The payload of a PDU of type `t`; a request's ranges go into `ranges`' memory.
    fn payload(&mut self, t: PduType, ranges: Vec<SearchRange>) -> Result<Payload, DecodeError> {
        Ok(match t {
            PduType::OPEN => {
                let [timeout, _, _, _] = self.array::<4>("o.timeout")?;
                let (id, _) = self.oid("o.id")?;
                let descr = self.octets("o.descr")?;
                Payload::Open { timeout, id, descr }
            }
            PduType::CLOSE => {
                let [reason, _, _, _] = self.array::<4>("c.reason")?;
                Payload::Close {
                    reason: CloseReason(reason),
                }
            }
            PduType::REGISTER => {
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
            PduType::UNREGISTER => {
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
            PduType::GET => Payload::Get {
                ranges: self.ranges(ranges)?,
            },
            PduType::GET_NEXT => Payload::GetNext {
                ranges: self.ranges(ranges)?,
            },
            PduType::GET_BULK => {
                let non_repeaters = self.u16("g.non_repeaters")?;
                let max_repetitions = self.u16("g.max_repetitions")?;
                Payload::GetBulk {
                    non_repeaters,
                    max_repetitions,
                    ranges: self.ranges(ranges)?,
                }
            }
            PduType::TEST_SET => Payload::TestSet {
                varbinds: self.varbinds()?,
            },
            PduType::COMMIT_SET => Payload::CommitSet,
            PduType::UNDO_SET => Payload::UndoSet,
            PduType::CLEANUP_SET => Payload::CleanupSet,
            PduType::NOTIFY => Payload::Notify {
                varbinds: self.varbinds()?,
            },
            PduType::PING => Payload::Ping,
            PduType::INDEX_ALLOCATE => Payload::IndexAllocate {
                varbinds: self.varbinds()?,
            },
            PduType::INDEX_DEALLOCATE => Payload::IndexDeallocate {
                varbinds: self.varbinds()?,
            },
            PduType::ADD_AGENT_CAPS => {
                let (id, _) = self.oid("a.id")?;
                let descr = self.octets("a.descr")?;
                Payload::AddAgentCaps { id, descr }
            }
            PduType::REMOVE_AGENT_CAPS => {
                let (id, _) = self.oid("a.id")?;
                Payload::RemoveAgentCaps { id }
            }
            PduType::RESPONSE => {
                let sys_uptime = self.u32("res.sysUpTime")?;
                let error = ResError(self.u16("res.error")?);
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

#[cfg(test)]
mod tests;
