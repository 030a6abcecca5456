//! AgentX (RFC 2741): the PDU codec and the subagent session.
pub mod pdu;
