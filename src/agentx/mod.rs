//! AgentX (RFC 2741): the PDU codec and the subagent session.
//!
//! [`pdu`] is a strict, allocation-bounded codec with no knowledge of the MIB; [`session`]
//! is the protocol state machine that connects it to the snapshot cache.
pub mod pdu;
pub mod session;
