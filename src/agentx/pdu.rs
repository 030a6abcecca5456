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
        let payload = r.payload(h.pdu_type)?;
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
    fn payload(&mut self, t: PduType) -> Result<Payload, DecodeError> {
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
                ranges: self.ranges()?,
            },
            PduType::GET_NEXT => Payload::GetNext {
                ranges: self.ranges()?,
            },
            PduType::GET_BULK => {
                let non_repeaters = self.u16("g.non_repeaters")?;
                let max_repetitions = self.u16("g.max_repetitions")?;
                Payload::GetBulk {
                    non_repeaters,
                    max_repetitions,
                    ranges: self.ranges()?,
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
mod tests {
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
            0x01, 0x03, 0x19,
            0x00, // type Register, flags NBO|NON_DEFAULT_CONTEXT|INSTANCE_REG
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
        let mut w =
            ResponseWriter::begin(&mut out, HeaderIds::new(1, 2, 3), 0, ResError::NO_ERROR, 0);
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
        b.extend(std::iter::repeat(0u8).take(800)); // 200 sub-ids
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
        b.extend(std::iter::repeat(0u8).take(123 * 4));
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
        b.extend(std::iter::repeat(0u8).take(124 * 4));
        assert_eq!(decode_err(&b).kind, DecodeErrorKind::OidTooLong);
        // 128 plain sub-ids: fine.
        let mut b = header_be(PduType::REMOVE_AGENT_CAPS, 0, 4 + 128 * 4);
        b.extend_from_slice(&[128, 0, 0, 0]);
        b.extend(std::iter::repeat(0u8).take(128 * 4));
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
        let admin =
            prop_oneof![
                (any::<u8>(), arb_oid(), arb_bytes())
                    .prop_map(|(timeout, id, descr)| Payload::Open { timeout, id, descr }),
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
                (arb_oid(), arb_bytes())
                    .prop_map(|(id, descr)| Payload::AddAgentCaps { id, descr }),
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
}
