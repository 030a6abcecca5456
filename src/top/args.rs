//! `top`'s command line.

use super::snmp::{credentials_file, CredentialWords, Target};
use super::{Options, TopError};
use clap::ValueEnum;
use std::path::PathBuf;
use std::time::Duration;

/// The options of `memstat-top` (and `memstat-agentx top`).
/// No `Debug`: it holds the passwords and the community as given.
#[derive(clap::Args)]
pub struct TopArgs {
    /// auto, or sources separated by commas (see Sources below)
    #[arg(long, default_value = "auto", conflicts_with = "snmp")]
    pub source: String,
    /// Read MEMSTAT-MIB from HOST's SNMP agent (port 161 unless given) instead of a source
    #[arg(long, value_name = "HOST[:PORT]")]
    pub snmp: Option<String>,
    /// The v2c community (default: public). On the command line `ps` shows it:
    /// --credentials keeps it in a file
    #[arg(long, requires = "snmp")]
    pub community: Option<String>,
    /// The SNMPv3 user
    #[arg(long, requires = "snmp")]
    pub user: Option<String>,
    /// The SNMPv3 authentication protocol: MD5, SHA (default), SHA-224, SHA-256, SHA-384,
    /// SHA-512
    #[arg(long, value_name = "PROTOCOL", requires = "snmp")]
    pub auth_protocol: Option<String>,
    /// The SNMPv3 authentication password (authNoPriv; authPriv with --priv-password)
    #[arg(long, value_name = "PASSWORD", requires = "snmp")]
    pub auth_password: Option<String>,
    /// The SNMPv3 privacy protocol: DES, AES (default), AES-192, AES-256
    #[arg(long, value_name = "PROTOCOL", requires = "snmp")]
    pub priv_protocol: Option<String>,
    /// The SNMPv3 privacy password
    #[arg(long, value_name = "PASSWORD", requires = "snmp")]
    pub priv_password: Option<String>,
    /// A TOML file of the credentials (community, or user, auth-protocol, auth-password,
    /// priv-protocol, priv-password), readable by its owner only; the options above override it
    #[arg(long, value_name = "FILE", requires = "snmp")]
    pub credentials: Option<PathBuf>,
    /// Seconds one SNMP request waits for its answer (0.1 to 60), as net-snmp's -t
    #[arg(long, value_name = "SECONDS", default_value = "1", value_parser = parse_timeout, requires = "snmp")]
    pub timeout: f64,
    /// Times a request without an answer is sent again (0 to 10), as net-snmp's -r
    #[arg(long, value_name = "N", default_value = "3", value_parser = clap::value_parser!(u32).range(0..=10), requires = "snmp")]
    pub retries: u32,
    /// Batch mode: plain text (or JSON) on standard output, one frame per interval, as
    /// `top -b` prints
    #[arg(short = 'b', long)]
    pub batch: bool,
    /// Frames to print, then exit (default: until interrupted)
    #[arg(short = 'n', long, value_name = "COUNT", value_parser = clap::value_parser!(u64).range(1..))]
    pub iterations: Option<u64>,
    /// Seconds between frames (0.1 to 86400)
    #[arg(short = 'd', long, value_name = "SECONDS", default_value = "3", value_parser = parse_delay)]
    pub delay: f64,
    #[arg(long, value_enum, default_value = "text")]
    pub format: TopFormat,
    /// Rows per frame: the first N by the sort (default: every row)
    #[arg(long, value_name = "N")]
    pub top: Option<usize>,
    /// The column to sort by: its name or its header (default: in_use_bytes; bytes with
    /// --sites)
    #[arg(long, value_name = "COLUMN")]
    pub sort: Option<String>,
    /// Rows of allocation call sites (Linux's /proc/allocinfo, or memAllocSiteTable over
    /// SNMP) instead of memory types
    #[arg(long)]
    pub sites: bool,
    /// Reverse the sort
    #[arg(long)]
    pub reverse: bool,
}

/// `--format`.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum TopFormat {
    Text,
    Json,
}

impl TopArgs {
    /// The options, with the SNMP credentials checked (and their file read).
    pub fn options(&self) -> Result<Options, TopError> {
        let snmp = match &self.snmp {
            None => None,
            Some(host) => {
                let base = match &self.credentials {
                    Some(path) => credentials_file(path).map_err(TopError::Credentials)?,
                    None => CredentialWords::default(),
                };
                let words = CredentialWords {
                    community: self.community.clone(),
                    user: self.user.clone(),
                    auth_protocol: self.auth_protocol.clone(),
                    auth_password: self.auth_password.clone(),
                    priv_protocol: self.priv_protocol.clone(),
                    priv_password: self.priv_password.clone(),
                }
                .over(base);
                let credentials = words.credentials().map_err(|e| {
                    TopError::Usage(match &self.credentials {
                        Some(p) => format!("{} with the options: {e}", p.display()),
                        None => e,
                    })
                })?;
                Some(Target {
                    host: host.clone(),
                    credentials,
                    timeout: Duration::from_secs_f64(self.timeout),
                    retries: self.retries,
                })
            }
        };
        Ok(Options {
            source: self.source.clone(),
            snmp,
            iterations: self.iterations,
            delay: Duration::from_secs_f64(self.delay),
            json: matches!(self.format, TopFormat::Json),
            top: self.top,
            sort: self.sort.clone(),
            sites: self.sites,
            reverse: self.reverse,
        })
    }
}

/// `-d`: seconds between frames, from a tenth of a second to a day.
fn parse_delay(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(d) if (0.1..=86_400.0).contains(&d) => Ok(d),
        _ => Err(format!(
            "{s:?}: must be a number of seconds from 0.1 to 86400"
        )),
    }
}

/// `--timeout`: seconds from a tenth of a second to a minute.
fn parse_timeout(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(d) if (0.1..=60.0).contains(&d) => Ok(d),
        _ => Err(format!("{s:?}: must be a number of seconds from 0.1 to 60")),
    }
}
