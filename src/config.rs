//! The settings: each one defined once, in [`settings!`] below, with its key, type, default,
//! documentation, validation and whether a SIGHUP applies it.
//!
//! Values are read raw, as written, from the file ([`RawSettings::read_file`]) and from the
//! command line ([`RawSettings::set_arg`]); the two are merged, and then converted once into
//! a typed [`Config`] by [`RawSettings::convert`], which `run`, `check-config` and a SIGHUP
//! reload all call. Every error names where the bad value came from:
//!
//! ```text
//! /etc/memstat-agentx.toml:4: key `max-age`: must be a positive number of seconds
//! command line: option `--max-age`: must be a positive number of seconds
//! ```

use crate::agentx::session::MasterAddr;
pub use crate::logging::{LogLevel, LogTarget};
use crate::memstat::source::not_regular;
use crate::memstat::SourceKind;
use crate::privdrop::{self, Account};
use std::collections::BTreeMap;
use std::fmt;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
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

/// The largest duration any setting accepts, in seconds (one day). Longer values are certainly
/// typos, and keeping durations small keeps timer arithmetic far from overflow.
pub const MAX_SECONDS: f64 = 86_400.0;

/// The most the configuration file may hold. The shipped file is 3 KiB; anything near this is
/// not a configuration, and reading it must not cost the daemon its memory.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// Defines every setting once: the [`Config`] field with its type, the key (also the option
/// name), the conversion that checks it, the default (in command-line syntax; `None` for
/// unset), whether a reload applies it, and its documentation (the first line is `--help`).
macro_rules! settings {
    ($( $(#[doc = $doc:literal])+
        $field:ident: $ty:ty = $key:literal via $conv:ident, default $default:expr, $reload:ident; )+) => {
        /// The effective settings, converted and checked.
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub struct Config { $( $(#[doc = $doc])+ pub $field: $ty, )+ }

        /// Every setting, in the order `check-config` prints them.
        pub const SETTINGS: &[Setting] = &[$( Setting {
            key: $key,
            doc: concat!($($doc, "\n"),+),
            default: $default,
            kind: $conv.kind,
            reload: Reload::$reload,
        }, )+];

        impl Config {
            fn convert_each(raw: &RawSettings) -> Result<Config, ConfigError> {
                Ok(Config { $( $field: raw.convert_one($key, $default, &$conv)?, )+ })
            }

            /// Each setting's key and value as a TOML literal (`None`: unset).
            fn values(&self) -> Vec<(&'static str, Option<String>)> {
                vec![$( ($key, ($conv.show)(&self.$field)), )+]
            }
        }
    };
}

settings! {
    /// The AgentX master: an absolute socket path, unix:PATH or tcp:HOST:PORT.
    agentx_socket: MasterAddr = "agentx-socket" via MASTER, default Some("/var/agentx/master"), Applied;
    /// Where the statistics come from: auto, linux, linux:PATH, freebsd or fixture:PATH.
    source: SourceKind = "source" via SOURCE, default Some("auto"), Restart;
    /// Maximum snapshot age for a new walk or a Get, in seconds (greater than zero).
    max_age: Duration = "max-age" via POSITIVE_SECONDS, default Some("5"), Applied;
    /// How long a walk stays on its snapshot, in seconds (greater than zero).
    walk_window: Duration = "walk-window" via POSITIVE_SECONDS, default Some("30"), Applied;
    /// Seconds between Pings to the master on an idle session; 0 disables them.
    ping_interval: Duration = "ping-interval" via SECONDS_OR_OFF, default Some("15"), Applied;
    /// First delay before reconnecting to the master, in seconds.
    backoff_min: Duration = "backoff-min" via POSITIVE_SECONDS, default Some("0.25"), Applied;
    /// Longest delay before reconnecting to the master, in seconds.
    backoff_max: Duration = "backoff-max" via POSITIVE_SECONDS, default Some("2"), Applied;
    /// Directory for the persistent index assignments (an absolute path).
    state_dir: PathBuf = "state-dir" via ABSOLUTE_PATH, default Some(DEFAULT_STATE_DIR), Restart;
    /// Least severe messages logged: error, warn, info, debug or trace.
    log_level: LogLevel = "log-level" via LOG_LEVEL, default Some("info"), Applied;
    /// Where log lines go: stderr or syslog.
    log_target: LogTarget = "log-target" via LOG_TARGET, default Some("stderr"), Restart;
    /// When started as root, switch to this user after opening the source.
    user: Option<Account> = "user" via USER, default None, Restart;
    /// Register the MIB in the master's sysORTable (AgentX AddAgentCaps).
    agent_caps: bool = "agent-caps" via SWITCH, default Some("true"), Applied;
    /// Seconds between samples that compare each row for notifications; 0 disables them.
    /// With 0 nothing is read while nobody asks; otherwise the source is read at this interval
    /// (unless the snapshot is younger than max-age) and compared with the previous sample.
    watch_interval: Duration = "watch-interval" via SECONDS_OR_OFF, default Some("0"), Applied;
    /// Seconds between two notifications of one type for one row; 0 sends every one.
    notify_holdoff: Duration = "notify-holdoff" via SECONDS_OR_OFF, default Some("300"), Applied;
    /// Share of a type's count limit, in percent (1-100), that sends memTypeLimitNearing.
    notify_limit_percent: u32 = "notify-limit-percent" via PERCENT, default Some("90"), Applied;
    /// Percentage points below notify-limit-percent (0-99) at which memTypeLimitCleared is sent.
    notify_limit_hysteresis: u32 = "notify-limit-hysteresis" via POINTS, default Some("5"), Applied;
    /// Most notifications per sample (1-10000); past it, one memNotificationsSuppressed.
    notify_max_per_sample: u32 = "notify-max-per-sample" via CAP, default Some("20"), Applied;
    /// Send memTypeAllocFailure when a type's failure counter increases.
    notify_alloc_failure: bool = "notify-alloc-failure" via SWITCH, default Some("true"), Applied;
    /// Send memTypeLimitNearing and memTypeLimitCleared.
    notify_limit: bool = "notify-limit" via SWITCH, default Some("true"), Applied;
    /// Send memSourceStale and memSourceRecovered when memSourceStatus changes.
    notify_source: bool = "notify-source" via SWITCH, default Some("true"), Applied;
}

/// One setting's definition (see [`settings!`]).
#[derive(Debug)]
pub struct Setting {
    pub key: &'static str,
    pub doc: &'static str,
    pub default: Option<&'static str>,
    pub kind: Kind,
    pub reload: Reload,
}

/// How a setting is written: decimal seconds (`--key SECONDS`), a whole number (`--key N`),
/// a string (`--key VALUE`), or a boolean (the flags `--key` and `--no-key`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Seconds,
    Number,
    Text,
    Switch,
}

/// Whether a SIGHUP applies a changed value, or the old one stays until a restart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reload {
    Applied,
    Restart,
}

impl Setting {
    /// The first line of the documentation: the `--help` text.
    pub fn summary(&self) -> &'static str {
        self.doc.lines().next().unwrap_or("").trim()
    }
}

/// A value as written, before conversion.
#[derive(Clone, Debug, PartialEq)]
pub enum RawValue {
    /// From the file, with its TOML type.
    Toml(Value),
    /// From the command line or a default: text, converted by the setting's own rules.
    Arg(String),
    /// A setting with no default, not given.
    Unset,
}

/// Where a raw value came from, for error messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    Default,
    File { path: PathBuf, line: usize },
    CommandLine,
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
        match &self.key {
            Some(k) if k.starts_with("--") => write!(f, ": option `{k}`")?,
            Some(k) => write!(f, ": key `{k}`")?,
            None => {}
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigError {}

impl ConfigError {
    fn at(origin: &Origin, key: &str, message: String) -> ConfigError {
        let (path, line, key) = match origin {
            Origin::Default => ("built-in default".into(), None, key.to_string()),
            Origin::File { path, line } => (path.clone(), Some(*line), key.to_string()),
            Origin::CommandLine => ("command line".into(), None, format!("--{key}")),
        };
        ConfigError {
            path,
            line,
            key: Some(key),
            message,
        }
    }

    fn file(path: &Path, message: String) -> ConfigError {
        ConfigError {
            path: path.to_path_buf(),
            line: None,
            key: None,
            message,
        }
    }
}

/// Settings as written, keyed by setting; the later of two sources wins (see [`Self::merge`]).
#[derive(Clone, Debug, Default)]
pub struct RawSettings {
    values: BTreeMap<&'static str, (RawValue, Origin)>,
}

impl RawSettings {
    /// Reads a configuration file: a regular file of at most [`MAX_CONFIG_BYTES`]. The open
    /// does not block (a FIFO would otherwise wait for a writer), and the type is checked
    /// on the open descriptor.
    /// `/dev/null` is taken as an empty file: the usual way to say "no file, the defaults".
    pub fn read_file(path: &Path) -> Result<RawSettings, ConfigError> {
        if path == Path::new("/dev/null") {
            return Ok(RawSettings::default());
        }
        let cannot = |e: std::io::Error| {
            ConfigError::file(path, format!("cannot read the configuration file: {e}"))
        };
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .map_err(cannot)?;
        if let Some(kind) = not_regular(&file.metadata().map_err(cannot)?) {
            let message = format!("is {kind}, not a regular file; refused");
            return Err(ConfigError::file(path, message));
        }
        let mut bytes = Vec::new();
        file.take(MAX_CONFIG_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(cannot)?;
        if bytes.len() as u64 > MAX_CONFIG_BYTES {
            let msg =
                format!("larger than {MAX_CONFIG_BYTES} bytes (1 MiB), the most read; refused");
            return Err(ConfigError::file(path, msg));
        }
        let text = String::from_utf8(bytes).map_err(|e| {
            let line = line_of(&e.as_bytes()[..e.utf8_error().valid_up_to()], usize::MAX);
            ConfigError {
                line: Some(line),
                ..ConfigError::file(path, "not UTF-8 text".into())
            }
        })?;
        RawSettings::from_toml_str(&text, path)
    }

    /// Parses a file's text; `path` is for messages. Unknown keys and TOML errors are
    /// refused here; values are checked by [`Self::convert`].
    pub fn from_toml_str(text: &str, path: &Path) -> Result<RawSettings, ConfigError> {
        let table: BTreeMap<Spanned<String>, Spanned<Value>> =
            toml::from_str(text).map_err(|e| syntax_error(&e, text, path))?;
        let mut raw = RawSettings::default();
        for (k, v) in table {
            let origin = |at| Origin::File {
                path: path.to_path_buf(),
                line: line_of(text.as_bytes(), at),
            };
            let Some(setting) = SETTINGS.iter().find(|s| s.key == k.get_ref()) else {
                let key = k.get_ref();
                return Err(ConfigError::at(
                    &origin(k.span().start),
                    key,
                    unknown_key(key),
                ));
            };
            let at = v.span().start;
            raw.values
                .insert(setting.key, (RawValue::Toml(v.into_inner()), origin(at)));
        }
        Ok(raw)
    }

    /// A value from the command line. Panics on a key that is not a setting (a programming
    /// error: the options are generated from [`SETTINGS`]).
    pub fn set_arg(&mut self, key: &str, value: String) {
        let setting = SETTINGS
            .iter()
            .find(|s| s.key == key)
            .expect("a known setting");
        self.values
            .insert(setting.key, (RawValue::Arg(value), Origin::CommandLine));
    }

    /// Takes every value `over` has, in place of this one's.
    pub fn merge(&mut self, over: RawSettings) {
        self.values.extend(over.values);
    }

    /// The one conversion into a [`Config`]: each value by its setting's rules, then the
    /// rules between settings. The user is looked up here.
    pub fn convert(&self) -> Result<Config, ConfigError> {
        let cfg = Config::convert_each(self)?;
        let (min, max) = (secs(cfg.backoff_min), secs(cfg.backoff_max));
        self.in_order(
            cfg.backoff_min <= cfg.backoff_max,
            (
                "backoff-min",
                format!("{min} s must not exceed backoff-max ({max} s)"),
            ),
            (
                "backoff-max",
                format!("{max} s must be at least backoff-min ({min} s)"),
            ),
        )?;
        let (p, h) = (cfg.notify_limit_percent, cfg.notify_limit_hysteresis);
        self.in_order(
            h < p,
            (
                "notify-limit-hysteresis",
                format!("{h} points must be below notify-limit-percent ({p})"),
            ),
            (
                "notify-limit-percent",
                format!("{p} must be above notify-limit-hysteresis ({h} points)"),
            ),
        )?;
        Ok(cfg)
    }

    /// Two settings that must agree: unless `ok`, the error names the one given last (the
    /// command line outranks the file, the file the defaults), the first on a tie.
    fn in_order(
        &self,
        ok: bool,
        first: (&str, String),
        second: (&str, String),
    ) -> Result<(), ConfigError> {
        let (a, b) = (self.origin(first.0), self.origin(second.0));
        let (origin, (key, message)) = if rank(&b) > rank(&a) {
            (b, second)
        } else {
            (a, first)
        };
        match ok {
            true => Ok(()),
            false => Err(ConfigError::at(&origin, key, message)),
        }
    }

    fn origin(&self, key: &str) -> Origin {
        self.values
            .get(key)
            .map_or(Origin::Default, |(_, o)| o.clone())
    }

    fn convert_one<T>(
        &self,
        key: &str,
        default: Option<&str>,
        conv: &Conv<T>,
    ) -> Result<T, ConfigError> {
        let default = || {
            (
                default.map_or(RawValue::Unset, |d| RawValue::Arg(d.into())),
                Origin::Default,
            )
        };
        let (value, origin) = self.values.get(key).cloned().unwrap_or_else(default);
        (conv.parse)(&value).map_err(|m| ConfigError::at(&origin, key, m))
    }
}

/// The command line outranks the file, which outranks the defaults.
fn rank(o: &Origin) -> u8 {
    match o {
        Origin::Default => 0,
        Origin::File { .. } => 1,
        Origin::CommandLine => 2,
    }
}

impl Config {
    /// The effective settings as TOML (for `check-config`), each marked with what a reload
    /// does with it; parsing the text gives the same configuration back.
    pub fn render(&self) -> String {
        let mut out = String::from("# memstat-agentx: effective configuration\n");
        for ((key, value), setting) in self.values().into_iter().zip(SETTINGS) {
            let when = match setting.reload {
                Reload::Applied => "a reload (SIGHUP) applies a change",
                Reload::Restart => "a change needs a restart",
            };
            match value {
                Some(v) => out.push_str(&format!("{key} = {v}  # {when}\n")),
                None => out.push_str(&format!("# {key} is not set  ({when})\n")),
            }
        }
        out
    }

    /// The settings whose change a reload to `new` cannot apply.
    pub fn needs_restart(&self, new: &Config) -> Vec<&'static str> {
        let (old, new) = (self.values(), new.values());
        SETTINGS
            .iter()
            .zip(old.iter().zip(&new))
            .filter(|(s, (a, b))| s.reload == Reload::Restart && a != b)
            .map(|(s, _)| s.key)
            .collect()
    }
}

/// How one setting's raw value becomes its typed value, and how that value is shown.
struct Conv<T> {
    kind: Kind,
    parse: fn(&RawValue) -> Result<T, String>,
    show: fn(&T) -> Option<String>,
}

impl<T: FromStr<Err: fmt::Display> + fmt::Display> Conv<T> {
    /// A string setting whose type has its own parser, the one its other users call too.
    const fn parsed(kind: Kind) -> Conv<T> {
        Conv {
            kind,
            parse: |v| text(v)?.parse().map_err(|e: T::Err| e.to_string()),
            show: |t| Some(quote(&t.to_string())),
        }
    }
}

const MASTER: Conv<MasterAddr> = Conv::parsed(Kind::Text);
const SOURCE: Conv<SourceKind> = Conv::parsed(Kind::Text);
const LOG_LEVEL: Conv<LogLevel> = Conv::parsed(Kind::Text);
const LOG_TARGET: Conv<LogTarget> = Conv::parsed(Kind::Text);
const POSITIVE_SECONDS: Conv<Duration> = Conv {
    kind: Kind::Seconds,
    parse: |v| seconds(v, false),
    show: |d| Some(secs(*d)),
};
const SECONDS_OR_OFF: Conv<Duration> = Conv {
    kind: Kind::Seconds,
    parse: |v| seconds(v, true),
    show: |d| Some(secs(*d)),
};
const PERCENT: Conv<u32> = Conv {
    kind: Kind::Number,
    parse: |v| whole(v, 1, 100),
    show: |n| Some(n.to_string()),
};
const POINTS: Conv<u32> = Conv {
    kind: Kind::Number,
    parse: |v| whole(v, 0, 99),
    show: |n| Some(n.to_string()),
};
const CAP: Conv<u32> = Conv {
    kind: Kind::Number,
    parse: |v| whole(v, 1, 10_000),
    show: |n| Some(n.to_string()),
};
const ABSOLUTE_PATH: Conv<PathBuf> = Conv {
    kind: Kind::Text,
    parse: |v| match text(v)? {
        p if p.starts_with('/') => Ok(PathBuf::from(p)),
        p => Err(format!("{p:?} must be an absolute path")),
    },
    show: |p| Some(quote(&p.to_string_lossy())),
};
const USER: Conv<Option<Account>> = Conv {
    kind: Kind::Text,
    parse: |v| {
        if *v == RawValue::Unset {
            return Ok(None);
        }
        let name = text(v)?;
        if name.is_empty() {
            return Err("must be a user name (leave it out to keep the starting user)".into());
        }
        let account = privdrop::lookup_user(name)?;
        if account.uid == 0 {
            return Err(format!(
                "{name:?} has uid 0: leave the user unset to run as root"
            ));
        }
        Ok(Some(account))
    },
    show: |u| u.as_ref().map(|a| quote(&a.name)),
};
const SWITCH: Conv<bool> = Conv {
    kind: Kind::Switch,
    parse: |v| match v {
        RawValue::Toml(Value::Boolean(b)) => Ok(*b),
        RawValue::Arg(s) if s == "true" || s == "false" => Ok(s == "true"),
        RawValue::Toml(other) => Err(expected("true or false", other)),
        _ => Err("expected true or false".into()),
    },
    show: |b| Some(b.to_string()),
};

/// A string value. No setting takes a NUL byte: each is a path, a name or a word, and a NUL
/// would only reach the log raw, or be cut short by a system call.
fn text(v: &RawValue) -> Result<&str, String> {
    match v {
        RawValue::Toml(Value::String(s)) | RawValue::Arg(s) if s.contains('\0') => {
            Err(format!("{:?} contains a NUL byte", s.replace('\0', "\\0")))
        }
        RawValue::Toml(Value::String(s)) | RawValue::Arg(s) => Ok(s),
        RawValue::Toml(other) => Err(expected("a string", other)),
        RawValue::Unset => Err("must be set".into()),
    }
}

fn seconds(v: &RawValue, zero_ok: bool) -> Result<Duration, String> {
    let what = match zero_ok {
        false => "must be a positive number of seconds",
        true => "must be zero (disabled) or a positive number of seconds",
    };
    let n = match v {
        RawValue::Toml(Value::Integer(i)) => *i as f64,
        RawValue::Toml(Value::Float(f)) => *f,
        RawValue::Toml(other) => return Err(expected("a number of seconds", other)),
        RawValue::Arg(s) => s
            .trim()
            .parse()
            .map_err(|_| format!("{s:?} is not a number; {what}"))?,
        RawValue::Unset => f64::NAN,
    };
    match Duration::try_from_secs_f64(n) {
        _ if n.is_nan() => Err(format!("{what}, not NaN")),
        _ if n > MAX_SECONDS => Err(format!(
            "{} seconds is too long (at most {MAX_SECONDS} seconds)",
            readable(n)
        )),
        Ok(d) if !d.is_zero() || zero_ok => Ok(d),
        Ok(_) if n > 0.0 => Err(format!(
            "{} seconds is less than a nanosecond; {what}",
            readable(n)
        )),
        _ => Err(what.into()),
    }
}

/// A whole number from `min` to `max`.
fn whole(v: &RawValue, min: u32, max: u32) -> Result<u32, String> {
    let what = format!("must be a whole number from {min} to {max}");
    let n: i64 = match v {
        RawValue::Toml(Value::Integer(i)) => *i,
        RawValue::Toml(other) => return Err(expected("a whole number", other)),
        RawValue::Arg(s) => s
            .trim()
            .parse()
            .map_err(|_| format!("{s:?} is not a whole number; {what}"))?,
        RawValue::Unset => return Err(what),
    };
    match u32::try_from(n) {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(format!("{n}: {what}")),
    }
}

/// A number for a message: `1e308`, not 309 digits.
fn readable(n: f64) -> String {
    match n.abs() >= 1e9 || (n != 0.0 && n.abs() < 1e-6) {
        true => format!("{n:e}"),
        false => format!("{n}"),
    }
}

/// Seconds as a TOML float literal: `5.0`, `0.25`.
fn secs(d: Duration) -> String {
    format!("{:?}", d.as_secs_f64())
}

fn quote(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

fn expected(what: &str, found: &Value) -> String {
    format!("expected {what}, found {}", found.type_str())
}

fn unknown_key(key: &str) -> String {
    let kebab = key.replace('_', "-").to_ascii_lowercase();
    if kebab != key && SETTINGS.iter().any(|s| s.key == kebab) {
        return format!("unknown key; did you mean `{kebab}`? (keys are kebab-case)");
    }
    if let Some(near) = SETTINGS.iter().find(|s| edits(&kebab, s.key) <= 2) {
        return format!("unknown key; did you mean `{}`?", near.key);
    }
    let keys: Vec<&str> = SETTINGS.iter().map(|s| s.key).collect();
    format!("unknown key; known keys are {}", keys.join(", "))
}

/// The edit distance between two keys (Levenshtein), for "did you mean".
fn edits(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = std::mem::replace(&mut row[0], i + 1);
        for (j, cb) in b.iter().enumerate() {
            let next = (diagonal + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            diagonal = std::mem::replace(&mut row[j + 1], next);
        }
    }
    row[b.len()]
}

/// 1-based line of a byte offset.
fn line_of(text: &[u8], offset: usize) -> usize {
    text[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// A TOML syntax error (or duplicate key), with the line and, when the line is a
/// `key = value` line, the key.
fn syntax_error(e: &toml::de::Error, text: &str, path: &Path) -> ConfigError {
    let line = e.span().map(|s| line_of(text.as_bytes(), s.start));
    let key = line.and_then(|l| text.lines().nth(l - 1)).and_then(|l| {
        let k = l
            .split_once('=')?
            .0
            .trim()
            .trim_matches(|c| c == '"' || c == '\'');
        let plain = !k.is_empty()
            && k.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        plain.then(|| k.to_string())
    });
    let message = format!("invalid TOML: {}", e.message().trim_end());
    ConfigError {
        line,
        key,
        ..ConfigError::file(path, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "/etc/memstat-agentx.toml";

    fn parse(text: &str) -> Result<Config, ConfigError> {
        RawSettings::from_toml_str(text, Path::new(FILE))?.convert()
    }

    fn defaults() -> Config {
        RawSettings::default().convert().unwrap()
    }

    fn with_args(text: &str, args: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let mut raw = RawSettings::from_toml_str(text, Path::new(FILE))?;
        let mut cli = RawSettings::default();
        for (k, v) in args {
            cli.set_arg(k, v.to_string());
        }
        raw.merge(cli);
        raw.convert()
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

    /// Expects the command-line value to be refused, naming the option; returns the message.
    fn bad_arg(key: &str, value: &str) -> String {
        let e = with_args("", &[(key, value)]).expect_err(value);
        assert_eq!(e.key.as_deref(), Some(format!("--{key}").as_str()), "{e}");
        assert!(
            e.to_string()
                .starts_with(&format!("command line: option `--{key}`: ")),
            "{e}"
        );
        e.message
    }

    #[test]
    fn every_default_passes_its_own_conversion() {
        let c = defaults();
        assert_eq!(parse("").unwrap(), c);
        assert_eq!(parse("# nothing\n\n").unwrap(), c);
        assert_eq!(
            c.agentx_socket,
            MasterAddr::Unix("/var/agentx/master".into())
        );
        assert_eq!(c.source, SourceKind::Auto);
        assert_eq!(c.max_age, Duration::from_secs(5));
        assert_eq!(c.walk_window, Duration::from_secs(30));
        assert_eq!(c.ping_interval, Duration::from_secs(15));
        assert_eq!(c.backoff_min, Duration::from_millis(250));
        assert_eq!(c.backoff_max, Duration::from_secs(2));
        assert_eq!(c.state_dir, Path::new(DEFAULT_STATE_DIR));
        assert_eq!(c.log_level, LogLevel::Info);
        assert_eq!(c.log_target, LogTarget::Stderr);
        assert_eq!(c.user, None);
        assert!(c.agent_caps);
        assert_eq!(
            c.watch_interval,
            Duration::ZERO,
            "sampling is off by default"
        );
        assert_eq!(c.notify_holdoff, Duration::from_secs(300));
        assert_eq!(c.notify_limit_percent, 90);
        assert_eq!(c.notify_limit_hysteresis, 5);
        assert_eq!(c.notify_max_per_sample, 20);
        assert!(c.notify_alloc_failure && c.notify_limit && c.notify_source);
        // Every setting but the user has a default; the keys are unique.
        for s in SETTINGS {
            assert_eq!(s.default.is_none(), s.key == "user", "{}", s.key);
            assert_eq!(SETTINGS.iter().filter(|t| t.key == s.key).count(), 1);
            assert!(!s.summary().is_empty(), "{} has no documentation", s.key);
        }
    }

    #[test]
    fn shipped_file_is_the_default() {
        let text = include_str!("../config/memstat-agentx.toml");
        let raw = RawSettings::from_toml_str(text, Path::new("config/memstat-agentx.toml"));
        assert_eq!(raw.unwrap().convert().unwrap(), defaults());
    }

    #[test]
    fn full_file_and_render_round_trip() {
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
user = "nobody"
agent-caps = false
watch-interval = 2.5
notify-holdoff = 0
notify-limit-percent = 80
notify-limit-hysteresis = 10
notify-max-per-sample = 1000
notify-alloc-failure = false
notify-limit = false
notify-source = false
"#;
        let c = parse(text).unwrap();
        assert_eq!(c.watch_interval, Duration::from_millis(2500));
        assert_eq!(c.notify_holdoff, Duration::ZERO);
        assert_eq!(
            (
                c.notify_limit_percent,
                c.notify_limit_hysteresis,
                c.notify_max_per_sample
            ),
            (80, 10, 1000)
        );
        assert!(!c.notify_alloc_failure && !c.notify_limit && !c.notify_source);
        assert_eq!(c.agentx_socket, MasterAddr::Tcp("localhost:705".into()));
        assert_eq!(c.source, SourceKind::Fixture("/tmp/x.json".into()));
        assert_eq!(c.max_age, Duration::from_millis(500));
        assert_eq!(c.walk_window, Duration::from_secs(60));
        assert_eq!(c.ping_interval, Duration::ZERO);
        assert_eq!(c.backoff_min, Duration::from_secs(1));
        assert_eq!(c.state_dir, Path::new("/tmp/state"));
        assert_eq!(c.log_level, LogLevel::Debug);
        assert_eq!(c.log_target, LogTarget::Syslog);
        assert_eq!(c.user.as_ref().map(|u| u.name.as_str()), Some("nobody"));
        assert!(!c.agent_caps);
        let shown = c.render();
        assert_eq!(parse(&shown).unwrap(), c, "{shown}");
        assert!(
            shown.contains("source = \"fixture:/tmp/x.json\"  # a change needs a restart"),
            "{shown}"
        );
        assert!(
            shown.contains("max-age = 0.5  # a reload (SIGHUP) applies a change"),
            "{shown}"
        );
        let d = defaults();
        assert!(d.render().contains("# user is not set"));
        assert_eq!(parse(&d.render()).unwrap(), d);
    }

    #[test]
    fn message_format_and_unknown_keys() {
        let shown = bad("# c\n\nmax-age = -1\n", "max-age", 3);
        assert_eq!(
            shown,
            "/etc/memstat-agentx.toml:3: key `max-age`: must be a positive number of seconds"
        );
        let m = bad("source = \"auto\"\nmax-size = 3\n", "max-size", 2);
        assert!(m.contains("unknown key") && m.contains("max-age"), "{m}");
        let m = bad("\n\nmax_age = 3\n", "max_age", 3);
        assert!(m.contains("did you mean `max-age`"), "{m}");
        for typo in ["max-agee", "maxage", "wlak-window", "Max-Age"] {
            let m = bad(&format!("{typo} = 3\n"), typo, 1);
            assert!(m.contains("did you mean `"), "{m}");
        }
        assert_eq!(edits("max-age", "max-age"), 0);
        assert!(edits("agent-caps", "max-age") > 2);
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
        for text in [
            "max-age = 0",
            "max-age = 0.0",
            "max-age = -0.5",
            "max-age = 1e-12",
        ] {
            bad(text, "max-age", 1);
        }
        assert!(bad("max-age = nan\n", "max-age", 1).contains("NaN"));
        let m = bad("walk-window = inf\n", "walk-window", 1);
        assert!(m.contains("inf seconds is too long"), "{m}");
        // Numbers are printed readably, not as 309 digits.
        let m = bad("max-age = 1e308\n", "max-age", 1);
        assert!(
            m.contains("1e308 seconds is too long (at most 86400 seconds)"),
            "{m}"
        );
        bad("walk-window = 0\n", "walk-window", 1);
        bad("ping-interval = -1\n", "ping-interval", 1);
        bad("ping-interval = -nan\n", "ping-interval", 1);
        bad("backoff-min = 0\n", "backoff-min", 1);
        bad("backoff-max = 1e9\n", "backoff-max", 1);
        assert_eq!(
            parse("ping-interval = 0").unwrap().ping_interval,
            Duration::ZERO
        );
    }

    #[test]
    fn backoff_order_blames_the_value_given_last() {
        let m = bad("backoff-max = 1\n\nbackoff-min = 3\n", "backoff-min", 3);
        assert!(
            m.contains("3.0 s must not exceed backoff-max (1.0 s)"),
            "{m}"
        );
        bad("\nbackoff-min = 3\n", "backoff-min", 2);
        let m = bad("\n\nbackoff-max = 0.1\n", "backoff-max", 3);
        assert!(m.contains("at least backoff-min (0.25 s)"), "{m}");
        parse("backoff-min = 2\nbackoff-max = 2\n").unwrap();
        // A flag over the file's value is the one named.
        let e = with_args("backoff-min = 1\n", &[("backoff-max", "0.5")]).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("--backoff-max"), "{e}");
        assert!(e.message.contains("at least backoff-min (1.0 s)"), "{e}");
        assert!(bad_arg("backoff-min", "5").contains("must not exceed backoff-max (2.0 s)"));
    }

    #[test]
    fn bad_strings() {
        let m = bad("\nlog-level = \"verbose\"\n", "log-level", 2);
        assert!(
            m.contains("verbose") && m.contains("error, warn, info, debug or trace"),
            "{m}"
        );
        bad("log-level = \"INFO\"\n", "log-level", 1);
        // EnvFilter directives are not levels.
        bad(
            "log-level = \"memstat_agentx=debug,info\"\n",
            "log-level",
            1,
        );
        let m = bad("log-target = \"journal\"\n", "log-target", 1);
        assert!(m.contains("stderr") && m.contains("syslog"), "{m}");
        let m = bad("\nsource = \"solaris\"\n", "source", 2);
        assert!(
            m.contains("linux:PATH") && m.contains("fixture:PATH"),
            "{m}"
        );
        for text in ["source = \"fixture:\"", "source = \"linux:\""] {
            bad(text, "source", 1);
        }
        for addr in [
            "master",
            "tcp:localhost",
            "tcp:localhost:0",
            "tcp::705",
            "tcp:[]:705",
            "unix:",
            "unix:rel",
            "",
        ] {
            bad(&format!("agentx-socket = \"{addr}\"\n"), "agentx-socket", 1);
        }
        bad("state-dir = \"relative/dir\"\n", "state-dir", 1);
        bad("user = \"\"\n", "user", 1);
        bad("user = \"a b\"\n", "user", 1);
        assert!(bad("user = \"no-such-user-here\"\n", "user", 1).contains("no such user"));
        assert!(bad("user = \"root\"\n", "user", 1).contains("uid 0"));
        for ok in [
            "/var/agentx/master",
            "unix:/tmp/s",
            "tcp:127.0.0.1:705",
            "tcp:[::1]:705",
        ] {
            parse(&format!("agentx-socket = \"{ok}\"")).unwrap();
        }
        for ok in [
            "auto",
            "linux",
            "freebsd",
            "linux:/tmp/slab",
            "fixture:x.json",
        ] {
            parse(&format!("source = \"{ok}\"")).unwrap();
        }
    }

    #[test]
    fn nul_bytes_are_refused() {
        for key in ["source", "state-dir", "agentx-socket", "user", "log-level"] {
            let prefix = if key == "source" { "fixture:" } else { "" };
            let m = bad(&format!("{key} = \"{prefix}/tmp/a\\u0000b\"\n"), key, 1);
            assert!(m.contains("NUL") && m.contains("a\\\\0b"), "{m}");
            assert!(!m.contains('\0'), "{m:?}");
        }
    }

    #[test]
    fn syntax_errors_have_lines() {
        let e = parse("source = \"auto\"\nmax-age = \n").unwrap_err();
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(2), Some("max-age")),
            "{e}"
        );
        assert!(
            e.to_string()
                .starts_with(&format!("{FILE}:2: key `max-age`: invalid TOML")),
            "{e}"
        );
        let e = parse("max-age = 1\n\nmax-age = 2\n").unwrap_err();
        assert_eq!(e.line, Some(3), "{e}");
        let e = parse("\n\n[unterminated\n").unwrap_err();
        assert_eq!(e.line, Some(3), "{e}");
    }

    #[test]
    fn the_file_read_is_bounded_and_regular_only() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.toml");
        let e = RawSettings::read_file(&missing).unwrap_err();
        assert!(
            e.to_string()
                .starts_with(&format!("{}: cannot read", missing.display())),
            "{e}"
        );
        let good = dir.path().join("good.toml");
        std::fs::write(&good, "max-age = 2.5\n").unwrap();
        let c = RawSettings::read_file(&good).unwrap().convert().unwrap();
        assert_eq!(c.max_age, Duration::from_millis(2500));
        let badf = dir.path().join("bad.toml");
        std::fs::write(&badf, "\nmax-age = -2.5\n").unwrap();
        let e = RawSettings::read_file(&badf)
            .unwrap()
            .convert()
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{}:2: key `max-age`: must be a positive number of seconds",
                badf.display()
            )
        );
        // Sparse and huge: refused after reading the cap, not the file.
        let big = dir.path().join("big.toml");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(3 << 30)
            .unwrap();
        let e = RawSettings::read_file(&big).unwrap_err();
        assert!(e.message.contains("larger than 1048576 bytes"), "{e}");
        let e = RawSettings::read_file(Path::new("/dev/zero")).unwrap_err();
        assert!(e.message.contains("device, not a regular file"), "{e}");
        let e = RawSettings::read_file(dir.path()).unwrap_err();
        assert!(e.message.contains("a directory"), "{e}");
        let fifo = dir.path().join("fifo.toml");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path that lives across the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = RawSettings::read_file(&fifo).unwrap_err();
        assert!(e.message.contains("a FIFO"), "{e}");
        std::fs::write(&badf, b"max-age = 1\n\xff\n").unwrap();
        let e = RawSettings::read_file(&badf).unwrap_err();
        assert_eq!(
            (e.line, e.message.as_str()),
            (Some(2), "not UTF-8 text"),
            "{e}"
        );
        assert!(RawSettings::read_file(Path::new("/dev/null"))
            .unwrap()
            .convert()
            .is_ok());
    }

    #[test]
    fn command_line_wins_and_is_checked() {
        let c = with_args(
            "max-age = 2\nsource = \"linux\"\n",
            &[
                ("agentx-socket", "tcp:localhost:705"),
                ("source", "fixture:/f.json"),
                ("max-age", "0.5"),
                ("ping-interval", "0"),
                ("log-level", "trace"),
                ("user", "nobody"),
                ("agent-caps", "false"),
            ],
        )
        .unwrap();
        assert_eq!(c.agentx_socket, MasterAddr::Tcp("localhost:705".into()));
        assert_eq!(c.source, SourceKind::Fixture("/f.json".into()));
        assert_eq!(c.max_age, Duration::from_millis(500));
        assert_eq!(c.ping_interval, Duration::ZERO);
        assert_eq!(c.log_level, LogLevel::Trace);
        assert!(!c.agent_caps);
        assert_eq!(
            bad_arg("max-age", "-1"),
            "must be a positive number of seconds"
        );
        assert!(bad_arg("max-age", "soon").contains("\"soon\" is not a number"));
        assert!(bad_arg("max-age", "NaN").contains("NaN"));
        assert!(bad_arg("source", "nope").contains("unknown source"));
        assert!(bad_arg("log-level", "loud").contains("unknown log level"));
        bad_arg("ping-interval", "-1");
        bad_arg("user", "root");
    }

    #[test]
    fn notification_numbers_are_whole_and_in_range() {
        for (key, lo, hi) in [
            ("notify-limit-percent", 1, 100),
            ("notify-limit-hysteresis", 0, 99),
            ("notify-max-per-sample", 1, 10_000),
        ] {
            for bad_value in [lo as i64 - 1, hi as i64 + 1, -5, 1 << 40] {
                let m = bad(&format!("{key} = {bad_value}\n"), key, 1);
                assert!(
                    m.ends_with(&format!(
                        "{bad_value}: must be a whole number from {lo} to {hi}"
                    )),
                    "{m}"
                );
            }
            let m = bad(&format!("\n{key} = 1.5\n"), key, 2);
            assert!(m.contains("expected a whole number, found float"), "{m}");
            bad(&format!("{key} = \"20\"\n"), key, 1);
            assert!(bad_arg(key, "many").contains("\"many\" is not a whole number"));
            assert!(bad_arg(key, "2.5").contains("is not a whole number"));
        }
        let c = with_args(
            "",
            &[
                ("notify-max-per-sample", " 7 "),
                ("notify-limit-percent", "100"),
            ],
        )
        .unwrap();
        assert_eq!((c.notify_max_per_sample, c.notify_limit_percent), (7, 100));
        // Zero hysteresis is allowed: nearing and cleared at the same share.
        assert_eq!(
            parse("notify-limit-hysteresis = 0")
                .unwrap()
                .notify_limit_hysteresis,
            0
        );
    }

    #[test]
    fn notification_durations_and_switches() {
        bad("watch-interval = -1\n", "watch-interval", 1);
        bad("watch-interval = 1e9\n", "watch-interval", 1);
        bad("notify-holdoff = \"5m\"\n", "notify-holdoff", 1);
        assert!(bad_arg("watch-interval", "soon").contains("not a number"));
        let c = with_args(
            "",
            &[
                ("watch-interval", "0.5"),
                ("notify-holdoff", "0"),
                ("notify-source", "false"),
            ],
        )
        .unwrap();
        assert_eq!(c.watch_interval, Duration::from_millis(500));
        assert_eq!(c.notify_holdoff, Duration::ZERO);
        assert!(!c.notify_source && c.notify_limit);
        bad("notify-limit = 1\n", "notify-limit", 1);
    }

    #[test]
    fn hysteresis_stays_below_the_share_and_the_later_value_is_blamed() {
        let m = bad(
            "notify-limit-percent = 10\n\nnotify-limit-hysteresis = 10\n",
            "notify-limit-hysteresis",
            3,
        );
        assert!(
            m.contains("10 points must be below notify-limit-percent (10)"),
            "{m}"
        );
        let m = bad("\nnotify-limit-percent = 4\n", "notify-limit-percent", 2);
        assert!(
            m.contains("4 must be above notify-limit-hysteresis (5 points)"),
            "{m}"
        );
        let e = with_args(
            "notify-limit-percent = 50\n",
            &[("notify-limit-hysteresis", "60")],
        )
        .unwrap_err();
        assert_eq!(e.key.as_deref(), Some("--notify-limit-hysteresis"), "{e}");
        parse("notify-limit-percent = 6\nnotify-limit-hysteresis = 5\n").unwrap();
    }

    #[test]
    fn restart_only_settings_are_named() {
        let old = defaults();
        let new = with_args(
            "",
            &[
                ("max-age", "1"),
                ("source", "freebsd"),
                ("log-target", "syslog"),
            ],
        )
        .unwrap();
        assert_eq!(old.needs_restart(&new), ["source", "log-target"]);
        assert!(old.needs_restart(&old).is_empty());
    }
}
