//! AgentX (RFC 2741) for the subagent: the socket to the master and the session.
//!
//! The codec, OIDs, values and framing are the `agentx_proto` crate, shared with the bsnmpd
//! module; [`transport`] is the socket to the master; [`session`] is the protocol state
//! machine that connects them to the snapshot cache.
pub mod session;
pub(crate) mod transport;
