//! The configuration file (TOML, kebab-case keys) and command-line overrides.
//!
//! Every problem in a file is reported with the file name, the line, and the key:
//!
//! ```text
//! /etc/memstat-agentx.toml:4: key `max-age`: must be a positive number of seconds
//! ```
//!
//! The file is read as a table of spanned keys and spanned values, so type checks and range
//! checks are done here (not by serde) and can always point at the line they are about.
//! Command-line values are checked by [`Overrides::check`] or [`Config::apply_checked`]; their
//! errors name the option (`--max-age`) instead of a line.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;
use toml::{Spanned, Value};

/// Where the daemon looks for its configuration when `--config` is not given.
pub const DEFAULT_CONFIG_PATH: &str = if cfg!(target_os = "freebsd") {
    "/usr/local/etc/memstat-agentx.toml"
} else {
    "/etc/memstat-agentx.toml"
};

/// The default state directory (hier(7) on FreeBSD, the FHS elsewhere).
pub const DEFAULT_STATE_DIR: &str = if cfg!(target_os = "freebsd") {
    "/var/db/memstat-agentx"
} else {
    "/var/lib/memstat-agentx"
};

/// net-snmp's default AgentX master socket.
pub const DEFAULT_AGENTX_SOCKET: &str = "/var/agentx/master";

/// The largest duration any setting accepts, in seconds (one day). Longer values are certainly
/// typos, and keeping durations small keeps timer arithmetic far from overflow.
pub const MAX_SECONDS: f64 = 86_400.0;

/// The log levels `log-level` accepts.
pub const LOG_LEVELS: [&str; 5] = ["error", "warn", "info", "debug", "trace"];

/// Every key the file may contain, in the order [`Config::render`] writes them.
pub const KEYS: [&str; 12] = [
    "agentx-socket",
    "source",
    "max-age",
    "walk-window",
    "ping-interval",
    "backoff-min",
    "backoff-max",
    "state-dir",
    "log-level",
    "log-target",
    "user",
    "agent-caps",
];

/// The effective settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The master's address: a path, `unix:PATH` or `tcp:HOST:PORT`.
    pub agentx_socket: String,
    /// `auto`, `linux`, `linux:PATH`, `freebsd` or `fixture:PATH`.
    pub source: String,
    /// A snapshot older than this is refreshed before it answers a request.
    pub max_age: Duration,
    /// How long a walk's continuation OIDs stay pinned to the snapshot the walk started on.
    pub walk_window: Duration,
    /// How often to ping the master when idle; zero disables pings.
    pub ping_interval: Duration,
    /// The first reconnection delay after losing the master.
    pub backoff_min: Duration,
    /// The reconnection delay never grows beyond this.
    pub backoff_max: Duration,
    /// Where the daemon keeps its state.
    pub state_dir: PathBuf,
    /// error, warn, info, debug or trace.
    pub log_level: String,
    /// Where log lines go.
    pub log_target: LogTarget,
    /// Switch to this user (and its groups) after opening privileged sources.
    pub user: Option<String>,
    /// Register sysORTable entries with AddAgentCaps.
    pub agent_caps: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            agentx_socket: DEFAULT_AGENTX_SOCKET.to_string(),
            source: "auto".to_string(),
            max_age: Duration::from_secs(5),
            walk_window: Duration::from_secs(30),
            ping_interval: Duration::from_secs(15),
            backoff_min: Duration::from_millis(250),
            backoff_max: Duration::from_secs(2),
            state_dir: PathBuf::from(DEFAULT_STATE_DIR),
            log_level: "info".to_string(),
            log_target: LogTarget::Stderr,
            user: None,
            agent_caps: true,
        }
    }
}

/// Where log lines go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogTarget {
    /// Standard error, for the foreground and for supervisors that capture output.
    Stderr,
    /// The local syslog daemon, facility daemon.
    Syslog,
}

impl LogTarget {
    /// The name used in the file and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            LogTarget::Stderr => "stderr",
            LogTarget::Syslog => "syslog",
        }
    }
}

impl fmt::Display for LogTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for LogTarget {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "stderr" => Ok(LogTarget::Stderr),
            "syslog" => Ok(LogTarget::Syslog),
            _ => Err(format!(
                "unknown log target {s:?}: use \"stderr\" or \"syslog\""
            )),
        }
    }
}

/// A configuration problem, located as precisely as possible.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The file, or `command line` for option values.
    pub path: PathBuf,
    /// 1-based line in the file.
    pub line: Option<usize>,
    /// The key (`max-age`) or the option (`--max-age`) at fault.
    pub key: Option<String>,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        f.write_str(": ")?;
        if let Some(key) = &self.key {
            if key.starts_with("--") {
                write!(f, "option `{key}`: ")?;
            } else {
                write!(f, "key `{key}`: ")?;
            }
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConfigError {}

/// Command-line values; each one that is set replaces the file's value.
#[derive(Default, Clone, Debug)]
pub struct Overrides {
    pub agentx_socket: Option<String>,
    pub source: Option<String>,
    pub max_age: Option<f64>,
    pub walk_window: Option<f64>,
    pub ping_interval: Option<f64>,
    pub backoff_min: Option<f64>,
    pub backoff_max: Option<f64>,
    pub state_dir: Option<PathBuf>,
    pub log_level: Option<String>,
    pub log_target: Option<LogTarget>,
    pub user: Option<String>,
    pub agent_caps: Option<bool>,
}

/// The `path` of errors about command-line values.
const COMMAND_LINE: &str = "command line";

fn cli_error(option: &str, message: String) -> ConfigError {
    ConfigError {
        path: PathBuf::from(COMMAND_LINE),
        line: None,
        key: Some(format!("--{option}")),
        message,
    }
}

impl Overrides {
    /// Checks each value on its own (forms and ranges); errors name the option.
    pub fn check(&self) -> Result<(), ConfigError> {
        if let Some(s) = &self.agentx_socket {
            check_agentx_socket(s).map_err(|m| cli_error("agentx-socket", m))?;
        }
        if let Some(s) = &self.source {
            check_source(s).map_err(|m| cli_error("source", m))?;
        }
        let secs = [
            ("max-age", self.max_age, Zero::Reject),
            ("walk-window", self.walk_window, Zero::Reject),
            ("ping-interval", self.ping_interval, Zero::Allow),
            ("backoff-min", self.backoff_min, Zero::Reject),
            ("backoff-max", self.backoff_max, Zero::Reject),
        ];
        for (key, value, zero) in secs {
            if let Some(v) = value {
                seconds(v, zero).map_err(|m| cli_error(key, m))?;
            }
        }
        if let Some(p) = &self.state_dir {
            check_state_dir(p).map_err(|m| cli_error("state-dir", m))?;
        }
        if let Some(l) = &self.log_level {
            check_log_level(l).map_err(|m| cli_error("log-level", m))?;
        }
        if let Some(u) = &self.user {
            check_user(u).map_err(|m| cli_error("user", m))?;
        }
        Ok(())
    }
}

impl Config {
    /// Parses a configuration file's text. `path` is only used in error messages.
    ///
    /// Keys that are absent keep their defaults.
    pub fn from_toml_str(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let raw: BTreeMap<Spanned<String>, Spanned<Value>> =
            toml::from_str(text).map_err(|e| syntax_error(&e, text, path))?;
        let mut entries: Vec<(&Spanned<String>, &Spanned<Value>)> = raw.iter().collect();
        entries.sort_by_key(|(k, _)| k.span().start);

        let err = |offset: usize, key: &str, message: String| ConfigError {
            path: path.to_path_buf(),
            line: Some(line_of(text, offset)),
            key: Some(key.to_string()),
            message,
        };

        let mut cfg = Config::default();
        // Lines of the two keys checked against each other after the loop.
        let mut backoff_min_at = None;
        let mut backoff_max_at = None;
        for (k, v) in entries {
            let key = k.get_ref().as_str();
            let at = v.span().start;
            let value = v.get_ref();
            let e = |m: String| err(at, key, m);
            match key {
                "agentx-socket" => {
                    let s = string(value).map_err(e)?;
                    check_agentx_socket(s).map_err(e)?;
                    cfg.agentx_socket = s.to_string();
                }
                "source" => {
                    let s = string(value).map_err(e)?;
                    check_source(s).map_err(e)?;
                    cfg.source = s.to_string();
                }
                "max-age" => cfg.max_age = file_seconds(value, Zero::Reject).map_err(e)?,
                "walk-window" => cfg.walk_window = file_seconds(value, Zero::Reject).map_err(e)?,
                "ping-interval" => {
                    cfg.ping_interval = file_seconds(value, Zero::Allow).map_err(e)?
                }
                "backoff-min" => {
                    cfg.backoff_min = file_seconds(value, Zero::Reject).map_err(e)?;
                    backoff_min_at = Some(at);
                }
                "backoff-max" => {
                    cfg.backoff_max = file_seconds(value, Zero::Reject).map_err(e)?;
                    backoff_max_at = Some(at);
                }
                "state-dir" => {
                    let p = PathBuf::from(string(value).map_err(e)?);
                    check_state_dir(&p).map_err(e)?;
                    cfg.state_dir = p;
                }
                "log-level" => {
                    let s = string(value).map_err(e)?;
                    check_log_level(s).map_err(e)?;
                    cfg.log_level = s.to_string();
                }
                "log-target" => cfg.log_target = string(value).map_err(e)?.parse().map_err(e)?,
                "user" => {
                    let s = string(value).map_err(e)?;
                    check_user(s).map_err(e)?;
                    cfg.user = Some(s.to_string());
                }
                "agent-caps" => match value {
                    Value::Boolean(b) => cfg.agent_caps = *b,
                    other => return Err(e(expected("true or false", other))),
                },
                _ => return Err(err(k.span().start, key, unknown_key_message(key))),
            }
        }
        if cfg.backoff_min > cfg.backoff_max {
            let (key, at, message) = match (backoff_min_at, backoff_max_at) {
                (Some(at), _) => (
                    "backoff-min",
                    at,
                    format!(
                        "must not exceed backoff-max ({} s)",
                        secs_str(cfg.backoff_max)
                    ),
                ),
                (None, Some(at)) => (
                    "backoff-max",
                    at,
                    format!(
                        "must be at least backoff-min ({} s)",
                        secs_str(cfg.backoff_min)
                    ),
                ),
                (None, None) => unreachable!("the defaults are consistent"),
            };
            return Err(err(at, key, message));
        }
        Ok(cfg)
    }

    /// Reads and parses a file; a missing or unreadable file is an error naming it.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            path: path.to_path_buf(),
            line: None,
            key: None,
            message: format!("cannot read the configuration file: {e}"),
        })?;
        Config::from_toml_str(&text, path)
    }

    /// Applies command-line values over the file's. Values that [`Overrides::check`] rejects
    /// (NaN or negative durations, for instance) are skipped rather than turned into a panic;
    /// callers that want them reported use [`Config::apply_checked`].
    pub fn apply(&mut self, o: &Overrides) {
        if let Some(s) = &o.agentx_socket {
            self.agentx_socket = s.clone();
        }
        if let Some(s) = &o.source {
            self.source = s.clone();
        }
        let secs = [
            (&mut self.max_age, o.max_age, Zero::Reject),
            (&mut self.walk_window, o.walk_window, Zero::Reject),
            (&mut self.ping_interval, o.ping_interval, Zero::Allow),
            (&mut self.backoff_min, o.backoff_min, Zero::Reject),
            (&mut self.backoff_max, o.backoff_max, Zero::Reject),
        ];
        for (field, value, zero) in secs {
            if let Some(d) = value.and_then(|v| seconds(v, zero).ok()) {
                *field = d;
            }
        }
        if let Some(p) = &o.state_dir {
            self.state_dir = p.clone();
        }
        if let Some(l) = &o.log_level {
            self.log_level = l.clone();
        }
        if let Some(t) = o.log_target {
            self.log_target = t;
        }
        if let Some(u) = &o.user {
            self.user = Some(u.clone());
        }
        if let Some(b) = o.agent_caps {
            self.agent_caps = b;
        }
    }

    /// [`Overrides::check`], then [`Config::apply`], then [`Config::validate`]: what `main`
    /// should call, so that a bad flag is an error rather than silently ignored.
    pub fn apply_checked(&mut self, o: &Overrides) -> Result<(), ConfigError> {
        o.check()?;
        self.apply(o);
        if self.backoff_min > self.backoff_max && o.backoff_min.is_none() {
            // Only --backoff-max was given, and it is below the file's backoff-min.
            return Err(cli_error(
                "backoff-max",
                format!(
                    "{} s must be at least backoff-min ({} s)",
                    secs_str(self.backoff_max),
                    secs_str(self.backoff_min)
                ),
            ));
        }
        self.validate()
    }

    /// Checks the whole configuration, including relations between settings (after
    /// [`Config::apply`], a flag may contradict the file). Errors name the option.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_agentx_socket(&self.agentx_socket).map_err(|m| cli_error("agentx-socket", m))?;
        check_source(&self.source).map_err(|m| cli_error("source", m))?;
        let secs = [
            ("max-age", self.max_age, false),
            ("walk-window", self.walk_window, false),
            ("ping-interval", self.ping_interval, true),
            ("backoff-min", self.backoff_min, false),
            ("backoff-max", self.backoff_max, false),
        ];
        for (key, d, zero_ok) in secs {
            if d.is_zero() && !zero_ok {
                return Err(cli_error(key, POSITIVE.to_string()));
            }
            if d.as_secs_f64() > MAX_SECONDS {
                return Err(cli_error(key, too_long(d.as_secs_f64())));
            }
        }
        if self.backoff_min > self.backoff_max {
            return Err(cli_error(
                "backoff-min",
                format!(
                    "{} s must not exceed backoff-max ({} s)",
                    secs_str(self.backoff_min),
                    secs_str(self.backoff_max)
                ),
            ));
        }
        check_state_dir(&self.state_dir).map_err(|m| cli_error("state-dir", m))?;
        check_log_level(&self.log_level).map_err(|m| cli_error("log-level", m))?;
        if let Some(u) = &self.user {
            check_user(u).map_err(|m| cli_error("user", m))?;
        }
        Ok(())
    }

    /// The effective settings as TOML (for `check-config`); parsing it gives `self` back.
    pub fn render(&self) -> String {
        let q = |s: &str| Value::String(s.to_string()).to_string();
        let mut out = String::from("# memstat-agentx: effective configuration\n");
        let mut line = |key: &str, value: String| {
            out.push_str(key);
            out.push_str(" = ");
            out.push_str(&value);
            out.push('\n');
        };
        line("agentx-socket", q(&self.agentx_socket));
        line("source", q(&self.source));
        line("max-age", secs_str(self.max_age));
        line("walk-window", secs_str(self.walk_window));
        line("ping-interval", secs_str(self.ping_interval));
        line("backoff-min", secs_str(self.backoff_min));
        line("backoff-max", secs_str(self.backoff_max));
        line("state-dir", q(&self.state_dir.to_string_lossy()));
        line("log-level", q(&self.log_level));
        line("log-target", q(self.log_target.as_str()));
        if let Some(u) = &self.user {
            line("user", q(u));
        }
        line("agent-caps", self.agent_caps.to_string());
        if self.user.is_none() {
            out.push_str("# user is not set: the daemon keeps the identity it was started with\n");
        }
        out
    }
}

const POSITIVE: &str = "must be a positive number of seconds";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Zero {
    Allow,
    Reject,
}

/// A duration in decimal seconds, range-checked.
fn seconds(v: f64, zero: Zero) -> Result<Duration, String> {
    let what = match zero {
        Zero::Reject => POSITIVE,
        Zero::Allow => "must be zero (disabled) or a positive number of seconds",
    };
    if v.is_nan() {
        return Err(format!("{what}, not NaN"));
    }
    if v < 0.0 || (v == 0.0 && zero == Zero::Reject) {
        return Err(what.to_string());
    }
    if v > MAX_SECONDS {
        return Err(too_long(v));
    }
    let d = Duration::from_secs_f64(v);
    if d.is_zero() && zero == Zero::Reject {
        return Err(format!("{what} (at least one nanosecond)"));
    }
    Ok(d)
}

fn too_long(v: f64) -> String {
    format!("{v} seconds is too long (at most {MAX_SECONDS} seconds)")
}

fn file_seconds(v: &Value, zero: Zero) -> Result<Duration, String> {
    let secs = match v {
        Value::Integer(i) => *i as f64,
        Value::Float(f) => *f,
        other => return Err(expected("a number of seconds", other)),
    };
    seconds(secs, zero)
}

/// Seconds as a TOML float literal: `5.0`, `0.25`.
fn secs_str(d: Duration) -> String {
    format!("{:?}", d.as_secs_f64())
}

fn string(v: &Value) -> Result<&str, String> {
    match v {
        Value::String(s) => Ok(s),
        other => Err(expected("a string", other)),
    }
}

fn expected(what: &str, found: &Value) -> String {
    format!("expected {what}, found {}", found.type_str())
}

fn unknown_key_message(key: &str) -> String {
    let kebab = key.replace('_', "-").to_ascii_lowercase();
    if kebab != key && KEYS.contains(&kebab.as_str()) {
        return format!("unknown key; did you mean `{kebab}`? (keys are kebab-case)");
    }
    format!("unknown key; known keys are {}", KEYS.join(", "))
}

/// `/path`, `unix:/path` or `tcp:HOST:PORT` (HOST may be `[v6]`).
pub fn check_agentx_socket(s: &str) -> Result<(), String> {
    const FORMS: &str = "use an absolute path, unix:PATH or tcp:HOST:PORT";
    if let Some(p) = s.strip_prefix("unix:") {
        if p.is_empty() {
            return Err(format!("{s:?} has an empty path; {FORMS}"));
        }
        return Ok(());
    }
    if let Some(hp) = s.strip_prefix("tcp:") {
        let (host, port) = hp
            .rsplit_once(':')
            .ok_or_else(|| format!("{s:?} has no port; {FORMS}"))?;
        if host.is_empty() || host == "[]" {
            return Err(format!("{s:?} has an empty host; {FORMS}"));
        }
        match port.parse::<u16>() {
            Ok(p) if p > 0 => return Ok(()),
            _ => {
                return Err(format!(
                    "{s:?}: port {port:?} is not a number from 1 to 65535"
                ))
            }
        }
    }
    if s.starts_with('/') {
        return Ok(());
    }
    Err(format!("{s:?} is not an AgentX address; {FORMS}"))
}

/// `auto`, `linux`, `linux:PATH`, `freebsd` or `fixture:PATH`.
pub fn check_source(s: &str) -> Result<(), String> {
    match s {
        "auto" | "linux" | "freebsd" => return Ok(()),
        _ => {}
    }
    for prefix in ["linux:", "fixture:"] {
        if let Some(p) = s.strip_prefix(prefix) {
            if p.is_empty() {
                return Err(format!("{s:?} has an empty path"));
            }
            return Ok(());
        }
    }
    Err(format!(
        "unknown source {s:?}: use auto, linux, linux:PATH, freebsd or fixture:PATH"
    ))
}

fn check_state_dir(p: &Path) -> Result<(), String> {
    if !p.is_absolute() {
        return Err(format!(
            "{:?} must be an absolute path",
            p.display().to_string()
        ));
    }
    Ok(())
}

fn check_log_level(s: &str) -> Result<(), String> {
    if LOG_LEVELS.contains(&s) {
        return Ok(());
    }
    Err(format!(
        "unknown log level {s:?}: use {}",
        LOG_LEVELS.join(", ")
    ))
}

fn check_user(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("must be a user name (leave the key out to keep the current user)".into());
    }
    if s.chars()
        .any(|c| c == ':' || c == '\0' || c.is_whitespace())
    {
        return Err(format!("{s:?} is not a valid user name"));
    }
    Ok(())
}

/// 1-based line of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// A TOML syntax error (or duplicate key), with the line and, when the line is a
/// `key = value` line, the key.
fn syntax_error(e: &toml::de::Error, text: &str, path: &Path) -> ConfigError {
    let line = e.span().map(|s| line_of(text, s.start));
    let key = line.and_then(|l| text.lines().nth(l - 1)).and_then(|l| {
        let (k, _) = l.split_once('=')?;
        let k = k.trim().trim_matches(|c| c == '"' || c == '\'');
        let plain = !k.is_empty()
            && k.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        plain.then(|| k.to_string())
    });
    ConfigError {
        path: path.to_path_buf(),
        line,
        key,
        message: format!("invalid TOML: {}", e.message().trim_end()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "/etc/memstat-agentx.toml";

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::from_toml_str(text, Path::new(FILE))
    }

    /// Parses `text`, expects an error at `line` about `key`, returns its Display.
    fn bad(text: &str, key: &str, line: usize) -> String {
        let e = parse(text).expect_err(text);
        let shown = e.to_string();
        assert_eq!(e.line, Some(line), "{shown}");
        assert_eq!(e.key.as_deref(), Some(key), "{shown}");
        assert!(
            shown.starts_with(&format!("{FILE}:{line}: key `{key}`: ")),
            "{shown}"
        );
        shown
    }

    #[test]
    fn empty_file_is_the_default() {
        assert_eq!(parse("").unwrap(), Config::default());
        assert_eq!(parse("# nothing\n\n").unwrap(), Config::default());
    }

    #[test]
    fn defaults() {
        let c = Config::default();
        assert_eq!(c.agentx_socket, "/var/agentx/master");
        assert_eq!(c.source, "auto");
        assert_eq!(c.max_age, Duration::from_secs(5));
        assert_eq!(c.walk_window, Duration::from_secs(30));
        assert_eq!(c.ping_interval, Duration::from_secs(15));
        assert_eq!(c.backoff_min, Duration::from_millis(250));
        assert_eq!(c.backoff_max, Duration::from_secs(2));
        assert_eq!(c.log_level, "info");
        assert_eq!(c.log_target, LogTarget::Stderr);
        assert_eq!(c.user, None);
        assert!(c.agent_caps);
        if cfg!(target_os = "freebsd") {
            assert_eq!(c.state_dir, Path::new("/var/db/memstat-agentx"));
            assert_eq!(DEFAULT_CONFIG_PATH, "/usr/local/etc/memstat-agentx.toml");
        } else {
            assert_eq!(c.state_dir, Path::new("/var/lib/memstat-agentx"));
            assert_eq!(DEFAULT_CONFIG_PATH, "/etc/memstat-agentx.toml");
        }
        c.validate().unwrap();
    }

    #[test]
    fn shipped_file_is_the_default() {
        let text = include_str!("../config/memstat-agentx.toml");
        let c = Config::from_toml_str(text, Path::new("config/memstat-agentx.toml")).unwrap();
        assert_eq!(c, Config::default());
        // Every key is documented in it, set or commented out.
        for key in KEYS {
            assert!(
                text.lines().any(|l| {
                    let l = l.trim_start_matches(['#', ' ']);
                    l.starts_with(&format!("{key} ="))
                }),
                "{key} is not in the shipped file"
            );
        }
    }

    #[test]
    fn full_file() {
        let text = r#"
agentx-socket = "tcp:localhost:705"
source = "fixture:/tmp/x.json"
max-age = 0.5
walk-window = 60
ping-interval = 0
backoff-min = 1
backoff-max = 1.0
state-dir = "/tmp/state"
log-level = "debug"
log-target = "syslog"
user = "memstat"
agent-caps = false
"#;
        let c = parse(text).unwrap();
        assert_eq!(c.agentx_socket, "tcp:localhost:705");
        assert_eq!(c.source, "fixture:/tmp/x.json");
        assert_eq!(c.max_age, Duration::from_millis(500));
        assert_eq!(c.walk_window, Duration::from_secs(60));
        assert_eq!(c.ping_interval, Duration::ZERO);
        assert_eq!(c.backoff_min, Duration::from_secs(1));
        assert_eq!(c.backoff_max, Duration::from_secs(1));
        assert_eq!(c.state_dir, Path::new("/tmp/state"));
        assert_eq!(c.log_level, "debug");
        assert_eq!(c.log_target, LogTarget::Syslog);
        assert_eq!(c.user.as_deref(), Some("memstat"));
        assert!(!c.agent_caps);
        c.validate().unwrap();
        // render() gives back the same settings.
        assert_eq!(parse(&c.render()).unwrap(), c);
    }

    #[test]
    fn render_round_trips_the_default() {
        let d = Config::default();
        let r = d.render();
        assert!(r.contains("max-age = 5.0\n"), "{r}");
        assert!(r.contains("backoff-min = 0.25\n"), "{r}");
        assert_eq!(parse(&r).unwrap(), d);
    }

    #[test]
    fn message_format() {
        let shown = bad("# c\n\nmax-age = -1\n", "max-age", 3);
        assert_eq!(
            shown,
            "/etc/memstat-agentx.toml:3: key `max-age`: must be a positive number of seconds"
        );
    }

    #[test]
    fn unknown_key() {
        let m = bad("source = \"auto\"\nmax-size = 3\n", "max-size", 2);
        assert!(m.contains("unknown key") && m.contains("max-age"), "{m}");
        let m = bad("\n\nmax_age = 3\n", "max_age", 3);
        assert!(m.contains("did you mean `max-age`"), "{m}");
        // A table is an unknown key too, reported at its header.
        bad(
            "log-level = \"info\"\n\n[agentx]\nsocket = \"/x\"\n",
            "agentx",
            3,
        );
    }

    #[test]
    fn wrong_types() {
        let m = bad("max-age = \"5\"\n", "max-age", 1);
        assert!(
            m.contains("expected a number of seconds, found string"),
            "{m}"
        );
        let m = bad("\nagent-caps = \"yes\"\n", "agent-caps", 2);
        assert!(m.contains("expected true or false, found string"), "{m}");
        let m = bad("\n\n\nsource = 3\n", "source", 4);
        assert!(m.contains("expected a string, found integer"), "{m}");
        bad("user = [\"a\"]\n", "user", 1);
        bad("state-dir = true\n", "state-dir", 1);
        bad("log-target = 1\n", "log-target", 1);
        bad("ping-interval = true\n", "ping-interval", 1);
    }

    #[test]
    fn impossible_durations() {
        bad("max-age = 0\n", "max-age", 1);
        bad("max-age = 0.0\n", "max-age", 1);
        bad("\nmax-age = -0.5\n", "max-age", 2);
        let m = bad("max-age = nan\n", "max-age", 1);
        assert!(m.contains("NaN"), "{m}");
        let m = bad("walk-window = inf\n", "walk-window", 1);
        assert!(m.contains("too long"), "{m}");
        bad("walk-window = 0\n", "walk-window", 1);
        bad("ping-interval = -1\n", "ping-interval", 1);
        bad("ping-interval = -nan\n", "ping-interval", 1);
        bad("backoff-min = 0\n", "backoff-min", 1);
        bad("backoff-max = 1e9\n", "backoff-max", 1);
        bad("max-age = 1e-12\n", "max-age", 1);
        // Zero disables pings.
        assert_eq!(
            parse("ping-interval = 0").unwrap().ping_interval,
            Duration::ZERO
        );
    }

    #[test]
    fn backoff_order() {
        let m = bad("backoff-max = 1\n\nbackoff-min = 3\n", "backoff-min", 3);
        assert!(m.contains("must not exceed backoff-max (1.0 s)"), "{m}");
        // Only one of them set: the one in the file is named.
        bad("\nbackoff-min = 3\n", "backoff-min", 2);
        let m = bad("\n\nbackoff-max = 0.1\n", "backoff-max", 3);
        assert!(m.contains("at least backoff-min (0.25 s)"), "{m}");
        // Equal is fine.
        parse("backoff-min = 2\nbackoff-max = 2\n").unwrap();
    }

    #[test]
    fn bad_strings() {
        let m = bad("\nlog-level = \"verbose\"\n", "log-level", 2);
        assert!(
            m.contains("verbose") && m.contains("error, warn, info, debug, trace"),
            "{m}"
        );
        bad("log-level = \"INFO\"\n", "log-level", 1);
        let m = bad("log-target = \"journal\"\n", "log-target", 1);
        assert!(m.contains("stderr") && m.contains("syslog"), "{m}");
        let m = bad("\nsource = \"solaris\"\n", "source", 2);
        assert!(
            m.contains("linux:PATH") && m.contains("fixture:PATH"),
            "{m}"
        );
        bad("source = \"fixture:\"\n", "source", 1);
        bad("source = \"linux:\"\n", "source", 1);
        bad("agentx-socket = \"master\"\n", "agentx-socket", 1);
        bad("agentx-socket = \"tcp:localhost\"\n", "agentx-socket", 1);
        bad("agentx-socket = \"tcp:localhost:0\"\n", "agentx-socket", 1);
        bad("agentx-socket = \"tcp::705\"\n", "agentx-socket", 1);
        bad("agentx-socket = \"unix:\"\n", "agentx-socket", 1);
        bad("state-dir = \"relative/dir\"\n", "state-dir", 1);
        bad("user = \"\"\n", "user", 1);
        bad("user = \"a b\"\n", "user", 1);
        for ok in [
            "/var/agentx/master",
            "unix:/tmp/s",
            "tcp:127.0.0.1:705",
            "tcp:[::1]:705",
        ] {
            check_agentx_socket(ok).unwrap();
        }
        for ok in [
            "auto",
            "linux",
            "freebsd",
            "linux:/tmp/slab",
            "fixture:x.json",
        ] {
            check_source(ok).unwrap();
        }
    }

    #[test]
    fn syntax_errors_have_lines() {
        let e = parse("source = \"auto\"\nmax-age = \n").unwrap_err();
        assert_eq!(e.line, Some(2), "{e}");
        assert_eq!(e.key.as_deref(), Some("max-age"), "{e}");
        assert!(
            e.to_string()
                .starts_with(&format!("{FILE}:2: key `max-age`: invalid TOML")),
            "{e}"
        );
        // A duplicate key is a TOML error too.
        let e = parse("max-age = 1\n\nmax-age = 2\n").unwrap_err();
        assert_eq!(e.line, Some(3), "{e}");
        assert!(e.to_string().contains("max-age"), "{e}");
        let e = parse("\n\n[unterminated\n").unwrap_err();
        assert_eq!(e.line, Some(3), "{e}");
    }

    #[test]
    fn load_names_missing_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("nope.toml");
        let e = Config::load(&p).unwrap_err();
        assert_eq!(e.path, p);
        assert!(
            e.to_string().starts_with(&format!("{}: ", p.display())),
            "{e}"
        );
        assert!(e.message.contains("cannot read"), "{e}");

        let good = dir.path().join("good.toml");
        std::fs::write(&good, "max-age = 2.5\n").unwrap();
        assert_eq!(
            Config::load(&good).unwrap().max_age,
            Duration::from_millis(2500)
        );

        let badf = dir.path().join("bad.toml");
        std::fs::write(&badf, "\nmax-age = -2.5\n").unwrap();
        let e = Config::load(&badf).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("{}:2: key `max-age`: {POSITIVE}", badf.display())
        );
    }

    #[test]
    fn overrides_win() {
        let mut c = parse("max-age = 2\nsource = \"linux\"\n").unwrap();
        let o = Overrides {
            agentx_socket: Some("tcp:localhost:705".into()),
            source: Some("fixture:/f.json".into()),
            max_age: Some(0.5),
            walk_window: Some(10.0),
            ping_interval: Some(0.0),
            backoff_min: Some(0.1),
            backoff_max: Some(3.0),
            state_dir: Some("/tmp/s".into()),
            log_level: Some("trace".into()),
            log_target: Some(LogTarget::Syslog),
            user: Some("nobody".into()),
            agent_caps: Some(false),
        };
        c.apply_checked(&o).unwrap();
        assert_eq!(c.agentx_socket, "tcp:localhost:705");
        assert_eq!(c.source, "fixture:/f.json");
        assert_eq!(c.max_age, Duration::from_millis(500));
        assert_eq!(c.walk_window, Duration::from_secs(10));
        assert_eq!(c.ping_interval, Duration::ZERO);
        assert_eq!(c.backoff_min, Duration::from_millis(100));
        assert_eq!(c.backoff_max, Duration::from_secs(3));
        assert_eq!(c.state_dir, Path::new("/tmp/s"));
        assert_eq!(c.log_level, "trace");
        assert_eq!(c.log_target, LogTarget::Syslog);
        assert_eq!(c.user.as_deref(), Some("nobody"));
        assert!(!c.agent_caps);

        // Nothing set changes nothing.
        let before = c.clone();
        c.apply(&Overrides::default());
        assert_eq!(c, before);
    }

    #[test]
    fn bad_overrides_are_errors() {
        let mut c = Config::default();
        let o = Overrides {
            max_age: Some(f64::NAN),
            ..Overrides::default()
        };
        let e = c.apply_checked(&o).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("--max-age"));
        assert!(
            e.to_string()
                .starts_with("command line: option `--max-age`: "),
            "{e}"
        );
        // apply() alone skips it instead of panicking.
        c.apply(&o);
        assert_eq!(c, Config::default());

        let o = Overrides {
            backoff_min: Some(5.0),
            ..Overrides::default()
        };
        let e = c.clone().apply_checked(&o).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("--backoff-min"), "{e}");
        let o = Overrides {
            backoff_max: Some(0.1),
            ..Overrides::default()
        };
        let e = c.clone().apply_checked(&o).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("--backoff-max"), "{e}");
        assert!(e.message.contains("at least backoff-min (0.25 s)"), "{e}");
        let o = Overrides {
            source: Some("nope".into()),
            ..Overrides::default()
        };
        assert_eq!(o.check().unwrap_err().key.as_deref(), Some("--source"));
        let o = Overrides {
            log_level: Some("loud".into()),
            ..Overrides::default()
        };
        assert_eq!(o.check().unwrap_err().key.as_deref(), Some("--log-level"));
        let o = Overrides {
            ping_interval: Some(-1.0),
            ..Overrides::default()
        };
        assert_eq!(
            o.check().unwrap_err().key.as_deref(),
            Some("--ping-interval")
        );
    }

    #[test]
    fn log_target_parses() {
        assert_eq!("stderr".parse::<LogTarget>().unwrap(), LogTarget::Stderr);
        assert_eq!("syslog".parse::<LogTarget>().unwrap(), LogTarget::Syslog);
        assert!("file".parse::<LogTarget>().is_err());
        assert_eq!(LogTarget::Syslog.to_string(), "syslog");
    }
}
