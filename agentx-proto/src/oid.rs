//! Object identifiers, ordered the way SNMP and RFC 2741 order them.
//!
//! An OID is a sequence of 32-bit sub-identifiers compared lexicographically: the first
//! differing sub-identifier decides, and a proper prefix sorts before its extensions. That is
//! exactly the order `Vec<u32>`/slice comparison gives, so `Oid` derives `Ord` from its vector.

use std::fmt;
use std::str::FromStr;

/// SNMP and AgentX never carry more than 128 sub-identifiers (RFC 2578 §3.5, RFC 2741 §5.1).
pub const MAX_SUBIDS: usize = 128;

/// sysUpTime.0 (SNMPv2-MIB): a Notify PDU may begin with it (RFC 2741 §6.2.10).
pub const SYS_UPTIME_0: &[u32] = &[1, 3, 6, 1, 2, 1, 1, 3, 0];

/// snmpTrapOID.0 (SNMPv2-MIB): the varbind of a Notify PDU that names the notification, first
/// or right after sysUpTime.0 (RFC 2741 §6.2.10). The subagent writes it, the master reads it:
/// one definition for both sides.
pub const SNMP_TRAP_OID_0: &[u32] = &[1, 3, 6, 1, 6, 3, 1, 1, 4, 1, 0];

/// An object identifier.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Oid(pub Vec<u32>);

impl Oid {
    /// The null OID (zero sub-identifiers), which AgentX uses for "no end bound".
    pub fn null() -> Self {
        Oid(Vec::new())
    }

    pub fn from_slice(s: &[u32]) -> Self {
        Oid(s.to_vec())
    }

    pub fn is_null(&self) -> bool {
        self.0.is_empty()
    }

    pub fn as_slice(&self) -> &[u32] {
        &self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// True when `self` lies in the subtree rooted at `prefix` (or equals it).
    pub fn starts_with(&self, prefix: &[u32]) -> bool {
        self.0.starts_with(prefix)
    }

    /// A new OID made of `self` followed by `tail`.
    pub fn child(&self, tail: &[u32]) -> Oid {
        let mut v = Vec::with_capacity(self.0.len() + tail.len());
        v.extend_from_slice(&self.0);
        v.extend_from_slice(tail);
        Oid(v)
    }
}

impl From<Vec<u32>> for Oid {
    fn from(v: Vec<u32>) -> Self {
        Oid(v)
    }
}

impl fmt::Display for Oid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(".")?;
            }
            write!(f, "{s}")?;
        }
        Ok(())
    }
}

/// Error for a textual OID that is not dotted decimal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseOidError(pub String);

impl fmt::Display for ParseOidError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "not a dotted-decimal OID: {:?}", self.0)
    }
}

impl std::error::Error for ParseOidError {}

impl FromStr for Oid {
    type Err = ParseOidError;

    /// Parses `1.3.6.1` or `.1.3.6.1`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.strip_prefix('.').unwrap_or(s);
        if t.is_empty() {
            return Ok(Oid::null());
        }
        let v: Result<Vec<u32>, _> = t.split('.').map(|p| p.parse::<u32>()).collect();
        match v {
            Ok(v) if v.len() <= MAX_SUBIDS => Ok(Oid(v)),
            _ => Err(ParseOidError(s.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_is_lexicographic_with_prefix_first() {
        let a: Oid = "1.3.6.1".parse().unwrap();
        let b: Oid = "1.3.6.1.0".parse().unwrap();
        let c: Oid = "1.3.6.2".parse().unwrap();
        let d: Oid = "1.3.6.10".parse().unwrap();
        assert!(a < b && b < c && c < d);
        assert_eq!(d.to_string(), "1.3.6.10");
        assert_eq!(".1.3".parse::<Oid>().unwrap(), Oid(vec![1, 3]));
        assert!("1.x".parse::<Oid>().is_err());
    }
}
