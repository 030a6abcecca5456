//! SNMP variable bindings, independent of any protocol's encoding.
//!
//! A MIB produces these and the AgentX codec ([`crate::pdu`]) puts them on the wire;
//! the type codes that identify each kind of value there belong to the codec, not to this
//! module.

use crate::oid::Oid;

/// A VarBind value: one of the SMIv2 base types (RFC 2578) or one of the three exceptions a
/// Get or GetNext may answer with instead of a value (RFC 3416 §3).
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
