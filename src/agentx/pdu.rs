//! AgentX PDU codec (being written).
