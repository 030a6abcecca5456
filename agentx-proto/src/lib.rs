//! AgentX (RFC 2741) as data: object identifiers, values, the PDU codec and framing, with no
//! I/O and no runtime.
//!
//! Both sides of the protocol use it: the memstat-agentx daemon, a subagent, and the bsnmpd
//! module `snmp_agentx.so`, a master. What is on the wire and nothing else lives here:
//! - [`oid`]: object identifiers, ordered as SNMP orders them;
//! - [`value`]: the SMIv2 values a VarBind carries;
//! - [`pdu`]: the strict, allocation-bounded codec, with the protocol's codes (PDU types,
//!   error codes, close reasons, value types) as open newtypes, so that a code this codec has
//!   no name for still decodes and shows its number;
//! - [`frame`]: a byte-level splitter from a stream into whole PDUs.
//!
//! A transport (a socket, a runtime) is the user's: this crate depends on nothing but `std`.
#![warn(missing_debug_implementations, unreachable_pub)]

pub mod frame;
pub mod oid;
pub mod pdu;
pub mod value;
