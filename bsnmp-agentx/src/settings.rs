//! The module's settings, the bsnmpd way: the claims come from module arguments (bsnmpd
//! passes `agentx:ARG` command-line words to `init`), because the tree is fixed once `init`
//! returns; everything else is a variable of the config section (`%agentx`), each a leaf of
//! the module's own tree that bsnmpd's config reader sets.
use crate::abi::{
    snmp_syntax, SNMP_SYNTAX_COUNTER, SNMP_SYNTAX_COUNTER64, SNMP_SYNTAX_GAUGE,
    SNMP_SYNTAX_INTEGER, SNMP_SYNTAX_IPADDRESS, SNMP_SYNTAX_OCTETSTRING, SNMP_SYNTAX_OID,
    SNMP_SYNTAX_TIMETICKS,
};
use agentx_proto::oid::Oid;
use std::fmt;

/// bsnmpd's `MAX_MOD_ARGS`: at most this many arguments reach `init`.
pub const MAX_CLAIMS: usize = 16;

/// One claimed subtree: a COLUMN node of the module's tree. `syntax` is the node's syntax,
/// which bsnmpd requires of every SET value under it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    pub oid: Oid,
    pub syntax: snmp_syntax,
}

/// A module argument that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgError {
    pub arg: String,
    pub why: String,
}

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "module argument {:?}: {}", self.arg, self.why)
    }
}

fn syntax_named(s: &str) -> Option<snmp_syntax> {
    Some(match s {
        "integer" => SNMP_SYNTAX_INTEGER,
        "octetstring" => SNMP_SYNTAX_OCTETSTRING,
        "oid" => SNMP_SYNTAX_OID,
        "ipaddress" => SNMP_SYNTAX_IPADDRESS,
        "counter" => SNMP_SYNTAX_COUNTER,
        "gauge" => SNMP_SYNTAX_GAUGE,
        "timeticks" => SNMP_SYNTAX_TIMETICKS,
        "counter64" => SNMP_SYNTAX_COUNTER64,
        _ => return None,
    })
}

/// Parses the module arguments: each is `claim=OID` or `claim=OID/SYNTAX` (SYNTAX one of
/// integer, octetstring, oid, ipaddress, counter, gauge, timeticks, counter64; integer when
/// left out). At least one claim is required; claims may not overlap.
pub fn parse_args<'a>(args: impl IntoIterator<Item = &'a str>) -> Result<Vec<Claim>, ArgError> {
    let mut claims: Vec<Claim> = Vec::new();
    for arg in args {
        let err = |why: &str| ArgError {
            arg: arg.to_string(),
            why: why.to_string(),
        };
        let Some(spec) = arg.strip_prefix("claim=") else {
            return Err(err("expected claim=OID or claim=OID/SYNTAX"));
        };
        let (oid, syntax) = match spec.split_once('/') {
            Some((o, s)) => (
                o,
                syntax_named(s).ok_or_else(|| {
                    err("unknown syntax: use integer, octetstring, oid, ipaddress, counter, gauge, timeticks or counter64")
                })?,
            ),
            None => (spec, SNMP_SYNTAX_INTEGER),
        };
        let oid: Oid = oid.parse().map_err(|_| err("not a dotted-decimal OID"))?;
        if oid.len() < 2 {
            return Err(err("a claim needs at least two sub-identifiers"));
        }
        // The node's OID plus an instance must fit bsnmpd's 128 sub-identifiers.
        if oid.len() > 100 {
            return Err(err("OID longer than 100 sub-identifiers"));
        }
        if let Some(c) = claims
            .iter()
            .find(|c| c.oid.starts_with(&oid.0) || oid.starts_with(&c.oid.0))
        {
            return Err(err(&format!("overlaps the claim {}", c.oid)));
        }
        if claims.len() == MAX_CLAIMS {
            return Err(err("too many claims"));
        }
        claims.push(Claim { oid, syntax });
    }
    if claims.is_empty() {
        return Err(ArgError {
            arg: String::new(),
            why: "no claim: start bsnmpd with SECTION:claim=OID (e.g. agentx:claim=1.3.6.1.4.1.32473.1)".into(),
        });
    }
    Ok(claims)
}

/// The config-section variables and their defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// agentxSocket: the Unix socket path; empty for none.
    pub socket: String,
    /// agentxSocketMode: the socket's permission bits.
    pub socket_mode: u32,
    /// agentxSocketGroup: the socket's group (name or number); empty to leave it.
    pub socket_group: String,
    /// agentxTcpPort: a port on 127.0.0.1 to listen on too (705 is AgentX's); 0 for none.
    pub tcp_port: u16,
    /// agentxTimeout: how long one request to a subagent may take, in 1/100 s.
    pub timeout_ticks: u32,
    /// agentxMaxTimeouts: timeouts in a row after which a session is closed.
    pub max_timeouts: u32,
    /// agentxPrefetch: max-repetitions of the GetBulk a GETNEXT sends (1 disables prefetch).
    pub prefetch: u16,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            socket: "/var/agentx/master".into(),
            socket_mode: 0o660,
            socket_group: String::new(),
            tcp_port: 0,
            timeout_ticks: 50,
            max_timeouts: 3,
            prefetch: 16,
        }
    }
}

/// One config-section variable: its leaf name and sub-identifier under the module's config
/// subtree, and the syntax bsnmpd parses its value with.
pub struct Var {
    pub name: &'static std::ffi::CStr,
    pub subid: u32,
    pub syntax: snmp_syntax,
}

/// The variables, in OID order.
pub const VARS: [Var; 7] = [
    Var {
        name: c"agentxSocket",
        subid: 1,
        syntax: SNMP_SYNTAX_OCTETSTRING,
    },
    Var {
        name: c"agentxSocketMode",
        subid: 2,
        syntax: SNMP_SYNTAX_INTEGER,
    },
    Var {
        name: c"agentxSocketGroup",
        subid: 3,
        syntax: SNMP_SYNTAX_OCTETSTRING,
    },
    Var {
        name: c"agentxTcpPort",
        subid: 4,
        syntax: SNMP_SYNTAX_INTEGER,
    },
    Var {
        name: c"agentxTimeout",
        subid: 5,
        syntax: SNMP_SYNTAX_INTEGER,
    },
    Var {
        name: c"agentxMaxTimeouts",
        subid: 6,
        syntax: SNMP_SYNTAX_INTEGER,
    },
    Var {
        name: c"agentxPrefetch",
        subid: 7,
        syntax: SNMP_SYNTAX_INTEGER,
    },
];

/// A value for a variable, as bsnmpd's config reader hands it over.
pub enum VarValue<'a> {
    Int(i32),
    Octets(&'a [u8]),
}

/// Why a value was refused; the op answers `wrongValue`.
#[derive(Debug, PartialEq, Eq)]
pub struct BadValue(pub String);

impl Settings {
    /// Applies one variable (by sub-identifier), checking its range.
    pub fn set(&mut self, subid: u32, v: VarValue<'_>) -> Result<(), BadValue> {
        let int = |lo: i32, hi: i32| match v {
            VarValue::Int(i) if (lo..=hi).contains(&i) => Ok(i),
            VarValue::Int(i) => Err(BadValue(format!("{i} is outside {lo}..{hi}"))),
            VarValue::Octets(_) => Err(BadValue("a number is expected".into())),
        };
        let text = || match v {
            VarValue::Octets(b) if b.len() <= 255 && !b.contains(&0) => {
                String::from_utf8(b.to_vec()).map_err(|_| BadValue("not UTF-8".into()))
            }
            VarValue::Octets(_) => Err(BadValue("at most 255 bytes, without NUL".into())),
            VarValue::Int(_) => Err(BadValue("a string is expected".into())),
        };
        match subid {
            1 => self.socket = text()?,
            2 => self.socket_mode = int(0, 0o777)? as u32,
            3 => self.socket_group = text()?,
            4 => self.tcp_port = int(0, 65535)? as u16,
            // 1/100 s to 30 s: a longer stall would outlast every manager's timeout.
            5 => self.timeout_ticks = int(1, 3000)? as u32,
            6 => self.max_timeouts = int(1, 100)? as u32,
            // net-snmp caps a subagent's Response at 64 KiB; 256 small varbinds fit.
            7 => self.prefetch = int(1, 256)? as u16,
            _ => return Err(BadValue(format!("no variable {subid}"))),
        }
        Ok(())
    }

    /// The value of one variable, for a GET.
    pub fn get(&self, subid: u32) -> Option<Result<i32, Vec<u8>>> {
        Some(match subid {
            1 => Err(self.socket.clone().into_bytes()),
            2 => Ok(self.socket_mode as i32),
            3 => Err(self.socket_group.clone().into_bytes()),
            4 => Ok(self.tcp_port as i32),
            5 => Ok(self.timeout_ticks as i32),
            6 => Ok(self.max_timeouts as i32),
            7 => Ok(self.prefetch as i32),
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_parse_and_refuse_clearly() {
        let c = parse_args([
            "claim=1.3.6.1.4.1.32473.1",
            "claim=.1.3.6.1.4.1.99/octetstring",
        ])
        .unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].syntax, SNMP_SYNTAX_INTEGER);
        assert_eq!(c[1].syntax, SNMP_SYNTAX_OCTETSTRING);
        let e =
            parse_args(["claim=1.3.6.1.4.1.32473.1", "claim=1.3.6.1.4.1.32473.1.2"]).unwrap_err();
        assert!(e.why.contains("overlaps"), "{e}");
        assert!(parse_args(["1.3.6.1"])
            .unwrap_err()
            .why
            .contains("claim=OID"));
        assert!(parse_args(["claim=1.x"])
            .unwrap_err()
            .why
            .contains("dotted"));
        assert!(parse_args(["claim=1.3/float"])
            .unwrap_err()
            .why
            .contains("syntax"));
        assert!(parse_args([]).unwrap_err().why.contains("no claim"));
    }

    #[test]
    fn variables_check_ranges() {
        let mut s = Settings::default();
        s.set(5, VarValue::Int(200)).unwrap();
        assert_eq!(s.timeout_ticks, 200);
        assert!(s.set(5, VarValue::Int(0)).is_err());
        assert!(s.set(2, VarValue::Int(0o1000)).is_err());
        assert!(s.set(1, VarValue::Int(1)).is_err());
        s.set(1, VarValue::Octets(b"/tmp/x")).unwrap();
        assert_eq!(s.get(1), Some(Err(b"/tmp/x".to_vec())));
        assert!(s.set(3, VarValue::Octets(b"a\0b")).is_err());
        assert!(s.set(9, VarValue::Int(1)).is_err());
    }
}
