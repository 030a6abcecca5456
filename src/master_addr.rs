//! Where the AgentX master listens: what the `agentx-socket` setting names and the session
//! connects to. A module of its own, so that the configuration does not depend on the
//! session that uses it.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// What to set when this user may not open the master's Unix socket: net-snmp makes it, and
/// its directory, reachable by snmpd's user alone unless `agentXPerms` says otherwise. Said by
/// the daemon when a connection is refused and by `check-config --run-as`.
pub(crate) const AGENTX_PERMS_ADVICE: &str =
    "give snmpd.conf `agentXPerms 0660 0755 root GROUP` with this user in GROUP";

/// Where the master listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MasterAddr {
    Unix(PathBuf),
    Tcp(String),
}

impl FromStr for MasterAddr {
    type Err = String;

    /// An absolute path, `unix:PATH` or `tcp:HOST:PORT` (HOST may be `[v6]`; PORT 1 to 65535).
    /// The one parser of master addresses: the configuration calls it too.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        const FORMS: &str = "use an absolute path, unix:PATH or tcp:HOST:PORT";
        if let Some(hp) = s.strip_prefix("tcp:") {
            let Some((host, port)) = hp.rsplit_once(':') else {
                return Err(format!("{s:?} has no port; {FORMS}"));
            };
            if host.is_empty() || host == "[]" {
                return Err(format!("{s:?} has an empty host; {FORMS}"));
            }
            return match port.parse::<u16>() {
                Ok(p) if p > 0 => Ok(MasterAddr::Tcp(hp.to_string())),
                _ => Err(format!(
                    "{s:?}: port {port:?} is not a number from 1 to 65535"
                )),
            };
        }
        let path = s.strip_prefix("unix:").unwrap_or(s);
        if path.starts_with('/') {
            Ok(MasterAddr::Unix(path.into()))
        } else if path.is_empty() {
            Err(format!("{s:?} has an empty path; {FORMS}"))
        } else {
            Err(format!("{s:?} is not an absolute path; {FORMS}"))
        }
    }
}

impl fmt::Display for MasterAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MasterAddr::Unix(p) => write!(f, "unix:{}", p.display()),
            MasterAddr::Tcp(hp) => write!(f, "tcp:{hp}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn master_addresses() {
        assert_eq!(
            "/var/agentx/master".parse::<MasterAddr>().unwrap(),
            MasterAddr::Unix("/var/agentx/master".into())
        );
        assert_eq!(
            "unix:/x".parse::<MasterAddr>().unwrap(),
            MasterAddr::Unix("/x".into())
        );
        assert_eq!(
            "tcp:127.0.0.1:705".parse::<MasterAddr>().unwrap(),
            MasterAddr::Tcp("127.0.0.1:705".into())
        );
        assert!("tcp:127.0.0.1".parse::<MasterAddr>().is_err());
        assert!("tcp:host:99999".parse::<MasterAddr>().is_err());
    }
}
