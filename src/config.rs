//! The settings: each one defined once, in [`settings!`] below, with its key, type, rule,
//! default, documentation and whether a SIGHUP applies it.
//!
//! Values are read raw from the file ([`RawSettings::read_file`]) and the command line
//! ([`RawSettings::set_arg`]), merged, and converted once into a typed [`Config`] by
//! [`RawSettings::convert`], which `run`, `check-config` and a SIGHUP reload all call. A value
//! written as text (an option, a default) is first read as the TOML value it stands for, so one
//! conversion serves all three. Every error names where the bad value came from:
//!
//! ```text
//! /etc/memstat-agentx.toml:4: key `max-age`: -1: must be a number of seconds from 1e-9 to 86400
//! command line: option `--user`: no such user: "nobdy"
//! ```

use crate::boundedfile::{self, FileError};
pub use crate::logging::{LogLevel, LogTarget};
use crate::master_addr::MasterAddr;
use crate::memstat::SourceChoice;
use crate::privdrop::{self, Account};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;
use toml::{Spanned, Value};
use Rule::{Seconds, Switch, Text, Whole};

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
/// name), the rule its value must meet, the default (as an option would give it; `None` for
/// unset), whether a reload applies it, and its documentation (the first line is `--help`).
macro_rules! settings {
    ($( #[doc = $help:literal] $(#[doc = $more:literal])*
        $field:ident: $ty:ty = $key:literal, $rule:expr, default $default:expr, $reload:ident; )+) => {
        /// The effective settings, converted and checked.
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub struct Config { $( #[doc = $help] $(#[doc = $more])* pub $field: $ty, )+ }

        /// Every setting, in the order `check-config` prints them.
        pub const SETTINGS: &[Setting] = &[$( Setting {
            key: $key,
            help: $help.trim_ascii(),
            rule: $rule,
            default: $default,
            reload: Reload::$reload,
        }, )+];

        impl Config {
            fn convert_each(raw: &RawSettings) -> Result<Config, ConfigError> {
                Ok(Config { $( $field: raw.convert_one($key, $rule, $default)?, )+ })
            }

            /// The settings whose change to `new` a reload cannot apply.
            pub fn needs_restart(&self, new: &Config) -> Vec<&'static str> {
                let changed = [$( (Reload::$reload, $key, self.$field != new.$field), )+];
                changed.iter().filter(|c| c.0 == Reload::Restart && c.2).map(|c| c.1).collect()
            }
        }
    };
}

const POSITIVE: Rule = Seconds { zero_ok: false };
const OR_OFF: Rule = Seconds { zero_ok: true };
/// The largest whole number a TOML file can write (its integers are signed 64-bit).
const MAX_WHOLE: u64 = i64::MAX as u64;

settings! {
    /// The AgentX master: an absolute socket path, unix:PATH or tcp:HOST:PORT.
    agentx_socket: MasterAddr = "agentx-socket", Text, default Some("/var/agentx/master"), Applied;
    /// Where the statistics come from: auto, or sources separated by commas (see SOURCES).
    source: SourceChoice = "source", Text, default Some("auto"), Restart;
    /// Maximum snapshot age for a new walk or a Get, in seconds (greater than zero).
    max_age: Duration = "max-age", POSITIVE, default Some("5"), Applied;
    /// How long a walk stays on its snapshot, in seconds (greater than zero).
    walk_window: Duration = "walk-window", POSITIVE, default Some("30"), Applied;
    /// Seconds between Pings to the master on an idle session; 0 disables them.
    ping_interval: Duration = "ping-interval", OR_OFF, default Some("15"), Applied;
    /// First delay before reconnecting to the master, in seconds.
    backoff_min: Duration = "backoff-min", POSITIVE, default Some("0.25"), Applied;
    /// Longest delay before reconnecting to the master, in seconds.
    backoff_max: Duration = "backoff-max", POSITIVE, default Some("2"), Applied;
    /// Directory for the persistent index assignments (an absolute path).
    state_dir: PathBuf = "state-dir", Text, default Some(DEFAULT_STATE_DIR), Restart;
    /// Least severe messages logged: error, warn, info, debug or trace.
    log_level: LogLevel = "log-level", Text, default Some("info"), Applied;
    /// Where log lines go: stderr or syslog.
    log_target: LogTarget = "log-target", Text, default Some("stderr"), Restart;
    /// When started as root, switch to this user after opening the source.
    user: Option<Account> = "user", Text, default None, Restart;
    /// Register the MIB in the master's sysORTable (AgentX AddAgentCaps).
    agent_caps: bool = "agent-caps", Switch, default Some("true"), Applied;
    /// Seconds between samples that compare each row for notifications; 0 disables them.
    /// With 0 nothing is read while nobody asks; otherwise the source is read at this interval
    /// (unless the snapshot is younger than max-age) and compared with the previous sample.
    watch_interval: Duration = "watch-interval", OR_OFF, default Some("0"), Applied;
    /// Seconds between two notifications of one type for one row; 0 sends every one.
    notify_holdoff: Duration = "notify-holdoff", OR_OFF, default Some("300"), Applied;
    /// Share of a type's count limit, in percent (1-100), that sends memTypeLimitNearing.
    notify_limit_percent: u32 = "notify-limit-percent", Whole { min: 1, max: 100 }, default Some("90"), Applied;
    /// Percentage points below notify-limit-percent (0-99) at which memTypeLimitCleared is sent.
    notify_limit_hysteresis: u32 = "notify-limit-hysteresis", Whole { min: 0, max: 99 }, default Some("5"), Applied;
    /// Most notifications per sample (1-10000); past it, one memNotificationsSuppressed.
    notify_max_per_sample: u32 = "notify-max-per-sample", Whole { min: 1, max: 10_000 }, default Some("20"), Applied;
    /// Send memTypeAllocFailure when a type's failure counter increases.
    notify_alloc_failure: bool = "notify-alloc-failure", Switch, default Some("true"), Applied;
    /// Send memTypeLimitNearing and memTypeLimitCleared.
    notify_limit: bool = "notify-limit", Switch, default Some("true"), Applied;
    /// Send memSourceStale and memSourceRecovered when memSourceStatus changes.
    notify_source: bool = "notify-source", Switch, default Some("true"), Applied;
    /// Bytes a call site of /proc/allocinfo must hold to be served in memAllocSiteTable; 0 serves every site.
    /// A real kernel has thousands of sites, most holding a few KiB; those holding 1 MiB or
    /// more are the tens to hundreds that say where memory goes.
    allocinfo_min_bytes: u64 = "allocinfo-min-bytes", Whole { min: 0, max: MAX_WHOLE }, default Some("1048576"), Applied;
    /// Seconds a served call site stays served after falling under allocinfo-min-bytes; 0 drops it at once.
    /// Pollers poll every few minutes: an hour keeps rows from flapping in and out of their graphs.
    allocinfo_hold: Duration = "allocinfo-hold", OR_OFF, default Some("3600"), Applied;
}

/// One setting's definition (see [`settings!`]).
#[derive(Debug)]
pub struct Setting {
    pub key: &'static str,
    /// The first line of its documentation: the `--help` text.
    pub help: &'static str,
    pub rule: Rule,
    pub default: Option<&'static str>,
    pub reload: Reload,
}

/// What a value must be: decimal seconds, a whole number in a range, true or false (the
/// flags `--key` and `--no-key`), or a string, which the setting's type checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    Seconds { zero_ok: bool },
    Whole { min: u64, max: u64 },
    Switch,
    Text,
}

/// Whether a SIGHUP applies a changed value, or the old one stays until a restart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reload {
    Applied,
    Restart,
}

/// Where a raw value came from. The order is precedence: the command line outranks the file,
/// the file the defaults, and a later line of the file an earlier one.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Origin {
    Default,
    /// A file; the line (1-based) is known for everything but a file that cannot be read.
    File {
        path: PathBuf,
        line: Option<usize>,
    },
    CommandLine,
}

/// A configuration problem: where, which setting (when one is at fault), and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub origin: Origin,
    pub key: Option<String>,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.origin {
            Origin::Default => f.write_str("built-in default")?,
            Origin::File { path, .. } => write!(f, "{}", path.display())?,
            Origin::CommandLine => f.write_str("command line")?,
        }
        if let Origin::File { line: Some(n), .. } = self.origin {
            write!(f, ":{n}")?;
        }
        match (&self.key, &self.origin) {
            (Some(k), Origin::CommandLine) => write!(f, ": option `--{k}`")?,
            (Some(k), _) => write!(f, ": key `{k}`")?,
            (None, _) => {}
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigError {}

impl Origin {
    fn file(path: &Path, line: Option<usize>) -> Origin {
        Origin::File {
            path: path.to_path_buf(),
            line,
        }
    }

    /// An error about the value of `key` from here (`None`: about the file as a whole).
    pub(crate) fn error(&self, key: Option<&str>, message: String) -> ConfigError {
        let (origin, key) = (self.clone(), key.map(String::from));
        ConfigError {
            origin,
            key,
            message,
        }
    }
}

/// Settings as written, keyed by setting; the later of two sources wins (see [`Self::merge`]).
#[derive(Clone, Debug, Default)]
pub struct RawSettings {
    values: BTreeMap<&'static str, (Value, Origin)>,
}

impl RawSettings {
    /// Reads a configuration file: a regular file of at most [`MAX_CONFIG_BYTES`], opened
    /// without blocking (see [`boundedfile`]). `/dev/null` is taken as an empty file: the
    /// usual way to say "no file, the defaults".
    pub fn read_file(path: &Path) -> Result<RawSettings, ConfigError> {
        if path == Path::new("/dev/null") {
            return Ok(RawSettings::default());
        }
        let unread = |e| Origin::file(path, None).error(None, e);
        let bytes = boundedfile::read(path, 0, MAX_CONFIG_BYTES).map_err(|e| {
            unread(match e {
                FileError::Io(e) => format!("cannot read the file: {e}"),
                refused => refused.to_string(),
            })
        })?;
        let text = String::from_utf8(bytes).map_err(|e| {
            let line = line_of(e.as_bytes(), e.utf8_error().valid_up_to());
            Origin::file(path, Some(line)).error(None, "not UTF-8 text".into())
        })?;
        RawSettings::from_toml_str(&text, path)
    }

    /// Parses a file's text; `path` is for messages. Unknown keys and TOML errors are
    /// refused here; values are checked by [`Self::convert`].
    pub fn from_toml_str(text: &str, path: &Path) -> Result<RawSettings, ConfigError> {
        let table: BTreeMap<Spanned<String>, Spanned<Value>> =
            toml::from_str(text).map_err(|e| syntax_error(&e, text, path))?;
        let mut raw = RawSettings::default();
        for (key, value) in table {
            let origin = |at| Origin::file(path, Some(line_of(text.as_bytes(), at)));
            let Some(s) = SETTINGS.iter().find(|s| s.key == key.get_ref()) else {
                let (at, key) = (origin(key.span().start), key.into_inner());
                return Err(at.error(Some(&key), unknown_key(&key)));
            };
            let at = origin(value.span().start);
            raw.values.insert(s.key, (value.into_inner(), at));
        }
        Ok(raw)
    }

    /// A value from the command line. Panics on a key that is not a setting (a programming
    /// error: the options are generated from [`SETTINGS`]).
    pub fn set_arg(&mut self, key: &str, value: String) {
        let s = SETTINGS.iter().find(|s| s.key == key).expect("a setting");
        let value = (as_toml(s.rule, value), Origin::CommandLine);
        self.values.insert(s.key, value);
    }

    /// Takes every value `over` has, in place of this one's.
    pub fn merge(&mut self, over: RawSettings) {
        self.values.extend(over.values);
    }

    /// The one conversion into a [`Config`]: each value by its setting's rule and type, then
    /// the rules between settings. The user is looked up here.
    pub fn convert(&self) -> Result<Config, ConfigError> {
        let c = Config::convert_each(self)?;
        let (min, max) = (c.backoff_min, c.backoff_max);
        if min > max {
            let why = format!("backoff-min ({min:?}) must not exceed backoff-max ({max:?})");
            return Err(self.blame(["backoff-min", "backoff-max"], why));
        }
        let (p, h) = (c.notify_limit_percent, c.notify_limit_hysteresis);
        if h >= p {
            let why =
                format!("notify-limit-hysteresis ({h}) must be below notify-limit-percent ({p})");
            return Err(self.blame(["notify-limit-hysteresis", "notify-limit-percent"], why));
        }
        Ok(c)
    }

    /// The error for two settings that disagree: it names the one given last (see
    /// [`Origin`]), the first on a tie.
    fn blame(&self, keys: [&str; 2], why: String) -> ConfigError {
        let [a, b] = keys.map(|k| (self.values.get(k).map_or(&Origin::Default, |v| &v.1), k));
        let (origin, key) = if b.0 > a.0 { b } else { a };
        origin.error(Some(key), why)
    }

    /// Where `key` was set: a file's line or the command line; `None` for its default.
    pub(crate) fn set_at(&self, key: &str) -> Option<&Origin> {
        self.values.get(key).map(|(_, origin)| origin)
    }

    /// A setting's value, the one given or its default, with where it came from.
    fn value(&self, key: &str, rule: Rule, default: Option<&str>) -> (Option<Value>, Origin) {
        match self.values.get(key) {
            Some((value, origin)) => (Some(value.clone()), origin.clone()),
            None => (default.map(|d| as_toml(rule, d.into())), Origin::Default),
        }
    }

    fn convert_one<T: Typed>(
        &self,
        key: &str,
        rule: Rule,
        default: Option<&str>,
    ) -> Result<T, ConfigError> {
        let (value, origin) = self.value(key, rule, default);
        T::convert(value.as_ref(), rule).map_err(|m| origin.error(Some(key), m))
    }

    /// The effective settings as TOML (for `check-config`), each marked with what a reload
    /// does with it. For settings that [convert](Self::convert), parsing the text gives the
    /// same configuration back.
    pub fn render(&self) -> String {
        let mut out = String::from("# memstat-agentx: effective configuration\n");
        for s in SETTINGS {
            let when = match s.reload {
                Reload::Applied => "a reload (SIGHUP) applies a change",
                Reload::Restart => "a change needs a restart",
            };
            out += &match self.value(s.key, s.rule, s.default).0 {
                Some(v) => format!("{} = {v}  # {when}\n", s.key),
                None => format!("# {} is not set  ({when})\n", s.key),
            };
        }
        out
    }
}

/// A value written as text, an option's or a default, as the TOML value it stands for: a
/// number (a whole one for a whole-number rule) when it reads as one, true or false for a
/// switch; otherwise the string, which the conversion then refuses with the text as written.
fn as_toml(rule: Rule, text: String) -> Value {
    let t = text.trim();
    let parsed = match rule {
        Seconds { .. } => t
            .parse()
            .map(Value::Integer)
            .or_else(|_| t.parse().map(Value::Float))
            .ok(),
        Whole { .. } => t.parse().map(Value::Integer).ok(),
        Switch => t.parse().map(Value::Boolean).ok(),
        Text => None,
    };
    parsed.unwrap_or(Value::String(text))
}

/// A setting's type: how a raw value (`None`: unset) becomes one, by the setting's rule.
trait Typed: Sized {
    fn convert(v: Option<&Value>, rule: Rule) -> Result<Self, String>;
}

impl Typed for Duration {
    /// From a nanosecond to [`MAX_SECONDS`]; zero too, for a rule that allows it.
    fn convert(v: Option<&Value>, rule: Rule) -> Result<Duration, String> {
        let zero_ok = rule == OR_OFF;
        let n = match v {
            Some(Value::Integer(i)) => *i as f64,
            Some(Value::Float(f)) => *f,
            other => return Err(expected("a number of seconds", other)),
        };
        let d = Duration::try_from_secs_f64(n).ok();
        match d.filter(|d| n <= MAX_SECONDS && (zero_ok || !d.is_zero())) {
            Some(d) if !d.is_zero() || n == 0.0 => Ok(d),
            _ => Err(format!(
                "{}: must be {}a number of seconds from 1e-9 to {MAX_SECONDS}",
                readable(n),
                if zero_ok { "0 (off) or " } else { "" }
            )),
        }
    }
}

impl Typed for u64 {
    fn convert(v: Option<&Value>, rule: Rule) -> Result<u64, String> {
        let Whole { min, max } = rule else {
            return Err("not a whole-number setting".into());
        };
        let what = format!("a whole number from {min} to {max}");
        match v {
            Some(Value::Integer(n)) => u64::try_from(*n)
                .ok()
                .filter(|n| (min..=max).contains(n))
                .ok_or(format!("{n}: must be {what}")),
            other => Err(expected(&what, other)),
        }
    }
}

impl Typed for u32 {
    /// A whole number whose rule keeps it within `u32`.
    fn convert(v: Option<&Value>, rule: Rule) -> Result<u32, String> {
        let n = u64::convert(v, rule)?;
        u32::try_from(n).map_err(|_| format!("{n}: must be at most {}", u32::MAX))
    }
}

impl Typed for bool {
    fn convert(v: Option<&Value>, _: Rule) -> Result<bool, String> {
        match v {
            Some(Value::Boolean(b)) => Ok(*b),
            other => Err(expected("true or false", other)),
        }
    }
}

impl Typed for PathBuf {
    fn convert(v: Option<&Value>, _: Rule) -> Result<PathBuf, String> {
        match text(v)? {
            p if p.starts_with('/') => Ok(PathBuf::from(p)),
            p => Err(format!("{p:?} must be an absolute path")),
        }
    }
}

impl Typed for Option<Account> {
    /// Unset keeps the starting user; root is refused, since leaving the user unset says that.
    fn convert(v: Option<&Value>, _: Rule) -> Result<Option<Account>, String> {
        let Some(name) = v.map(|v| text(Some(v))).transpose()? else {
            return Ok(None);
        };
        if name.is_empty() {
            return Err("must be a user name (leave it out to keep the starting user)".into());
        }
        match privdrop::lookup_user(name)? {
            a if a.uid == 0 => Err(format!(
                "{name:?} has uid 0: leave the user unset to run as root"
            )),
            a => Ok(Some(a)),
        }
    }
}

/// The string settings whose type has its own parser, the one its other users call too.
macro_rules! parsed_from_text {
    ($($t:ty),+) => {$(
        impl Typed for $t {
            fn convert(v: Option<&Value>, _: Rule) -> Result<$t, String> {
                text(v)?.parse().map_err(|e: <$t as std::str::FromStr>::Err| e.to_string())
            }
        }
    )+};
}
parsed_from_text!(MasterAddr, SourceChoice, LogLevel, LogTarget);

/// A string value. No setting takes a NUL byte: each is a path, a name or a word, and a NUL
/// would only reach the log raw, or be cut short by a system call.
fn text(v: Option<&Value>) -> Result<&str, String> {
    match v {
        Some(Value::String(s)) if s.contains('\0') => Err(format!("{s:?} contains a NUL byte")),
        Some(Value::String(s)) => Ok(s),
        other => Err(expected("a string", other)),
    }
}

/// "expected a number of seconds, found the string \"soon\"". Strings are shown escaped
/// (`{:?}`), so no control byte reaches a log.
fn expected(what: &str, found: Option<&Value>) -> String {
    match found {
        None => format!("must be set to {what}"),
        Some(Value::String(s)) => format!("expected {what}, found the string {s:?}"),
        Some(Value::Datetime(d)) => format!("expected {what}, found the date-time {d}"),
        Some(v @ (Value::Array(_) | Value::Table(_))) => {
            format!("expected {what}, found {}", v.type_str())
        }
        Some(v) => format!("expected {what}, found {v}"),
    }
}

/// A number for a message: `1e308`, not 309 digits.
fn readable(n: f64) -> String {
    match n.abs() >= 1e9 || (n != 0.0 && n.abs() < 1e-6) {
        true => format!("{n:e}"),
        false => format!("{n}"),
    }
}

fn unknown_key(key: &str) -> String {
    let kebab = key.replace('_', "-").to_ascii_lowercase();
    if kebab != key && SETTINGS.iter().any(|s| s.key == kebab) {
        return format!("unknown key; did you mean `{kebab}`? (keys are kebab-case)");
    }
    if let Some(near) = SETTINGS
        .iter()
        .find(|s| strsim::levenshtein(&kebab, s.key) <= 2)
    {
        return format!("unknown key; did you mean `{}`?", near.key);
    }
    let keys: Vec<&str> = SETTINGS.iter().map(|s| s.key).collect();
    format!("unknown key; known keys are {}", keys.join(", "))
}

/// 1-based line of a byte offset.
pub(crate) fn line_of(text: &[u8], offset: usize) -> usize {
    1 + text[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
}

/// A TOML syntax error (or duplicate key), with the line and, when that line sets a known
/// setting, its key.
fn syntax_error(e: &toml::de::Error, text: &str, path: &Path) -> ConfigError {
    let line = e.span().map(|s| line_of(text.as_bytes(), s.start));
    let key = line
        .and_then(|l| text.lines().nth(l - 1)?.split_once('='))
        .map(|(k, _)| k.trim().trim_matches(['"', '\'']))
        .and_then(|k| SETTINGS.iter().find(|s| s.key == k))
        .map(|s| s.key);
    let message = format!("invalid TOML: {}", e.message().trim_end());
    Origin::file(path, line).error(key, message)
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

    fn raw_with_args(text: &str, args: &[(&str, &str)]) -> RawSettings {
        let mut raw = RawSettings::from_toml_str(text, Path::new(FILE)).unwrap();
        let mut cli = RawSettings::default();
        for (k, v) in args {
            cli.set_arg(k, v.to_string());
        }
        raw.merge(cli);
        raw
    }

    fn with_args(text: &str, args: &[(&str, &str)]) -> Result<Config, ConfigError> {
        raw_with_args(text, args).convert()
    }

    fn line(e: &ConfigError) -> Option<usize> {
        match e.origin {
            Origin::File { line, .. } => line,
            _ => None,
        }
    }

    /// Parses `text`, expects an error at `line` about `key`, returns its Display.
    fn bad(text: &str, key: &str, line: usize) -> String {
        let e = parse(text).expect_err(text);
        let shown = e.to_string();
        assert_eq!(self::line(&e), Some(line), "{shown}");
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
        assert_eq!(
            (&e.origin, e.key.as_deref()),
            (&Origin::CommandLine, Some(key)),
            "{e}"
        );
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
        assert_eq!(c.source, SourceChoice::Auto);
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
            assert!(
                !s.help.is_empty() && s.help.trim() == s.help,
                "{}: help",
                s.key
            );
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
        let raw = RawSettings::from_toml_str(text, Path::new(FILE)).unwrap();
        let c = raw.convert().unwrap();
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
        assert_eq!(c.source.to_string(), "fixture:/tmp/x.json");
        assert_eq!(c.max_age, Duration::from_millis(500));
        assert_eq!(c.walk_window, Duration::from_secs(60));
        assert_eq!(c.ping_interval, Duration::ZERO);
        assert_eq!(c.backoff_min, Duration::from_secs(1));
        assert_eq!(c.state_dir, Path::new("/tmp/state"));
        assert_eq!(c.log_level, LogLevel::Debug);
        assert_eq!(c.log_target, LogTarget::Syslog);
        assert_eq!(c.user.as_ref().map(|u| u.name.as_str()), Some("nobody"));
        assert!(!c.agent_caps);
        let shown = raw.render();
        assert_eq!(parse(&shown).unwrap(), c, "{shown}");
        assert!(
            shown.contains("source = \"fixture:/tmp/x.json\"  # a change needs a restart"),
            "{shown}"
        );
        assert!(
            shown.contains("max-age = 0.5  # a reload (SIGHUP) applies a change"),
            "{shown}"
        );
        let d = RawSettings::default().render();
        assert!(d.contains("# user is not set"), "{d}");
        assert!(d.contains("max-age = 5  #"), "{d}");
        assert_eq!(parse(&d).unwrap(), defaults());
    }

    #[test]
    fn message_format_and_unknown_keys() {
        let shown = bad("# c\n\nmax-age = -1\n", "max-age", 3);
        assert_eq!(
            shown,
            "/etc/memstat-agentx.toml:3: key `max-age`: -1: must be a number of seconds from 1e-9 to 86400"
        );
        let m = bad("source = \"auto\"\nmax-size = 3\n", "max-size", 2);
        assert!(m.contains("unknown key") && m.contains("max-age"), "{m}");
        let m = bad("\n\nmax_age = 3\n", "max_age", 3);
        assert!(m.contains("did you mean `max-age`"), "{m}");
        for typo in ["max-agee", "maxage", "wlak-window", "Max-Age"] {
            let m = bad(&format!("{typo} = 3\n"), typo, 1);
            assert!(m.contains("did you mean `"), "{m}");
        }
        // A transposition is two edits (Levenshtein, not Damerau), and three are too far for
        // a guess: the known keys are listed instead.
        let m = bad("mxa-age = 3\n", "mxa-age", 1);
        assert!(m.contains("did you mean `max-age`"), "{m}");
        let m = bad("mxa-agee = 3\n", "mxa-agee", 1);
        assert!(m.contains("known keys are"), "{m}");
        bad(
            "log-level = \"info\"\n\n[agentx]\nsocket = \"/x\"\n",
            "agentx",
            3,
        );
    }

    #[test]
    fn wrong_types() {
        let m = bad("max-age = 1979-05-27\n", "max-age", 1);
        assert!(m.ends_with("expected a number of seconds, found the date-time 1979-05-27"));
        let m = bad_arg("notify-limit-percent", "1e1");
        assert!(m.ends_with("found the string \"1e1\""), "{m}");
        let m = bad("max-age = \"5\"\n", "max-age", 1);
        assert!(
            m.contains("expected a number of seconds, found the string \"5\""),
            "{m}"
        );
        let m = bad("\nagent-caps = \"yes\"\n", "agent-caps", 2);
        assert!(
            m.contains("expected true or false, found the string \"yes\""),
            "{m}"
        );
        let m = bad("\n\n\nsource = 3\n", "source", 4);
        assert!(m.contains("expected a string, found 3"), "{m}");
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
        assert!(
            m.ends_with("inf: must be a number of seconds from 1e-9 to 86400"),
            "{m}"
        );
        let m = bad("ping-interval = 1e-12\n", "ping-interval", 1);
        assert!(
            m.ends_with("1e-12: must be 0 (off) or a number of seconds from 1e-9 to 86400"),
            "{m}"
        );
        // Numbers are printed readably, not as 309 digits.
        let m = bad("max-age = 1e308\n", "max-age", 1);
        assert!(
            m.ends_with("1e308: must be a number of seconds from 1e-9 to 86400"),
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
            m.contains("backoff-min (3s) must not exceed backoff-max (1s)"),
            "{m}"
        );
        bad("\nbackoff-min = 3\n", "backoff-min", 2);
        let m = bad("\n\nbackoff-max = 0.1\n", "backoff-max", 3);
        assert!(
            m.contains("backoff-min (250ms) must not exceed backoff-max (100ms)"),
            "{m}"
        );
        parse("backoff-min = 2\nbackoff-max = 2\n").unwrap();
        // A flag over the file's value is the one named.
        let e = with_args("backoff-min = 1\n", &[("backoff-max", "0.5")]).unwrap_err();
        assert_eq!(
            (&e.origin, e.key.as_deref()),
            (&Origin::CommandLine, Some("backoff-max"))
        );
        assert!(
            e.to_string()
                .starts_with("command line: option `--backoff-max`: "),
            "{e}"
        );
        assert!(bad_arg("backoff-min", "5").contains("(5s) must not exceed backoff-max (2s)"));
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
            m.contains("linux[:PATH]") && m.contains("fixture:PATH"),
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
            assert!(m.contains("NUL") && m.contains("a\\0b"), "{m}");
            assert!(!m.contains('\0'), "{m:?}");
        }
    }

    #[test]
    fn syntax_errors_have_lines() {
        let e = parse("source = \"auto\"\nmax-age = \n").unwrap_err();
        assert_eq!(
            (line(&e), e.key.as_deref()),
            (Some(2), Some("max-age")),
            "{e}"
        );
        assert!(
            e.to_string()
                .starts_with(&format!("{FILE}:2: key `max-age`: invalid TOML")),
            "{e}"
        );
        let e = parse("max-age = 1\n\nmax-age = 2\n").unwrap_err();
        assert_eq!(line(&e), Some(3), "{e}");
        let e = parse("\n\n[unterminated\n").unwrap_err();
        assert_eq!(line(&e), Some(3), "{e}");
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
                "{}:2: key `max-age`: -2.5: must be a number of seconds from 1e-9 to 86400",
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
            (line(&e), e.message.as_str()),
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
        assert_eq!(c.source.to_string(), "fixture:/f.json");
        assert_eq!(c.max_age, Duration::from_millis(500));
        assert_eq!(c.ping_interval, Duration::ZERO);
        assert_eq!(c.log_level, LogLevel::Trace);
        assert!(!c.agent_caps);
        assert_eq!(
            bad_arg("max-age", "-1"),
            "-1: must be a number of seconds from 1e-9 to 86400"
        );
        assert!(bad_arg("max-age", "soon").ends_with("found the string \"soon\""));
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
            let m = m.split_once(", found").unwrap();
            assert_eq!(m.1, " 1.5", "{m:?}");
            assert!(m
                .0
                .ends_with(&format!("expected a whole number from {lo} to {hi}")));
            bad(&format!("{key} = \"20\"\n"), key, 1);
            assert!(bad_arg(key, "many").ends_with("found the string \"many\""));
            assert!(bad_arg(key, "2.5").ends_with("found the string \"2.5\""));
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
        assert!(bad_arg("watch-interval", "soon").contains("expected a number of seconds"));
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
            m.contains("notify-limit-hysteresis (10) must be below notify-limit-percent (10)"),
            "{m}"
        );
        let m = bad("\nnotify-limit-percent = 4\n", "notify-limit-percent", 2);
        assert!(
            m.contains("notify-limit-hysteresis (5) must be below notify-limit-percent (4)"),
            "{m}"
        );
        let e = with_args(
            "notify-limit-percent = 50\n",
            &[("notify-limit-hysteresis", "60")],
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("command line: option `--notify-limit-hysteresis`"),
            "{e}"
        );
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
        );
        assert_eq!(old.needs_restart(&new.unwrap()), ["source", "log-target"]);
        assert!(old.needs_restart(&old).is_empty());
        // Two spellings of one value are no change.
        let linux = |s: &str| parse(&format!("source = \"{s}\"")).unwrap();
        let same = linux("linux").needs_restart(&linux("linux:/proc/slabinfo"));
        assert!(same.is_empty(), "{same:?}");
    }
}
