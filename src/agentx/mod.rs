//! AgentX (RFC 2741): the PDU codec and the subagent session.
//!
//! [`pdu`] is a strict, allocation-bounded codec with no knowledge of the MIB; [`transport`]
//! is the socket to the master; [`session`] is the protocol state machine that connects
//! them to the snapshot cache.
pub mod pdu;
pub mod session;
pub(crate) mod transport;
