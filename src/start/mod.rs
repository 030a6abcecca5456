//! Start-up, in the library: the settings as `run`, `check-config` and a reload load them;
//! the state directory opened; `check-config`'s rehearsal of run's start-up; `run` itself;
//! and the signals turned into the daemon's controls. main.rs parses the command line and
//! calls [`run`] or [`check_config`]; everything here returns a [`StartError`], whose text is
//! what the command prints.

mod args;

use crate::agent::{Agent, AgentSettings, SiteSettings, WatchSettings};
use crate::agentx::session::SessionConfig;
use crate::config::{Config, ConfigError, RawSettings, DEFAULT_CONFIG_PATH};
use crate::daemon::{Control, ControlSender, Daemon};
use crate::index::{IndexError, SiteIndexes, TypeIndexes};
use crate::master_addr::{MasterAddr, AGENTX_PERMS_ADVICE};
use crate::memstat::{SourceChoice, SourceError, Sources};
use crate::reader::SourceReader;
use crate::statedir::{self, LockError, StateDirProblem, StateLock};
use crate::{logging, privdrop};
use std::fmt;
use std::path::{Path, PathBuf};

/// The settings' sources for `run` and `check-config`: `--config` and one option per
/// setting (see `args.rs`, where they are generated from `config::SETTINGS`).
#[derive(Clone, Debug, Default)]
pub struct SettingArgs {
    pub config: Option<PathBuf>,
    pub raw: RawSettings,
}

impl SettingArgs {
    /// The file to read: the one given, else the default path when it exists.
    pub fn config_path(&self) -> Option<PathBuf> {
        self.config.clone().or_else(|| {
            let p = PathBuf::from(DEFAULT_CONFIG_PATH);
            p.exists().then_some(p)
        })
    }

    /// The file's values, then the options', converted once: what `run`, `check-config`
    /// and a reload all use. The raw settings come along, to show and compare them.
    pub fn load(&self) -> Result<(Config, RawSettings), ConfigError> {
        let mut raw = match self.config_path() {
            Some(p) => RawSettings::read_file(&p)?,
            None => RawSettings::default(),
        };
        raw.merge(self.raw.clone());
        Ok((raw.convert()?, raw))
    }
}

/// Why `run` or `check-config` cannot go on.
#[derive(Debug)]
pub enum StartError {
    Config(ConfigError),
    /// `--run-as` names no user.
    RunAs(String),
    /// The log target cannot be used.
    Logging(String),
    Source(SourceError),
    /// Switching to the configured user failed.
    Privileges(String),
    /// Another daemon holds the state directory: starting would lose its assignments.
    StateBusy(String),
    /// A state file that must not be rebuilt (over the cap, or not a regular file).
    StateFile(IndexError),
    /// A step of `check-config`'s rehearsal that ran as another user, in a child: its
    /// error comes back as text.
    Rehearsal(String),
    /// A thread or the runtime could not be started.
    Start {
        what: &'static str,
        error: std::io::Error,
    },
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::Config(e) => e.fmt(f),
            StartError::RunAs(e) => write!(f, "--run-as: {e}"),
            StartError::Logging(e)
            | StartError::Privileges(e)
            | StartError::StateBusy(e)
            | StartError::Rehearsal(e) => f.write_str(e),
            StartError::Source(e) => e.fmt(f),
            StartError::StateFile(e) => e.fmt(f),
            StartError::Start { what, error } => write!(f, "cannot start {what}: {error}"),
        }
    }
}

impl std::error::Error for StartError {}

impl fmt::Debug for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("State")
            .field("lock", &self.lock)
            .field("problem", &self.problem)
            .finish_non_exhaustive()
    }
}

impl From<ConfigError> for StartError {
    fn from(e: ConfigError) -> StartError {
        StartError::Config(e)
    }
}

impl From<SourceError> for StartError {
    fn from(e: SourceError) -> StartError {
        StartError::Source(e)
    }
}

/// The session's and the agent's settings from a configuration: at start-up and at every
/// reload.
pub fn daemon_settings(cfg: &Config) -> (SessionConfig, AgentSettings) {
    let session = SessionConfig {
        master: cfg.agentx_socket.clone(),
        ping_interval: cfg.ping_interval,
        backoff_min: cfg.backoff_min,
        backoff_max: cfg.backoff_max,
        agent_caps: cfg.agent_caps,
    };
    let agent = AgentSettings {
        max_age: cfg.max_age,
        walk_window: cfg.walk_window,
        notify: WatchSettings::from(cfg),
        sites: SiteSettings {
            min_bytes: cfg.allocinfo_min_bytes,
            hold: cfg.allocinfo_hold,
        },
    };
    (session, agent)
}

/// Creates the state directory (mode 0750) when it is missing.
fn prepare_state_dir(dir: &Path) -> Result<(), StateDirProblem> {
    use std::os::unix::fs::DirBuilderExt;
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o750)
        .create(dir)
        .map_err(|e| {
            StateDirProblem::CannotCreate(format!(
                "cannot create state directory {}: {e}",
                dir.display()
            ))
        })
}

/// What `check-config` found: the effective settings, to print, and the warnings (what
/// `run` tolerates: it waits, creates, or serves error(3) or without persistence).
#[derive(Debug)]
pub struct Checked {
    pub effective: String,
    pub warnings: Vec<String>,
}

/// A capability a supervisor grants the daemon as an ambient one (systemd's
/// `AmbientCapabilities=`), which `check-config --run-as` rehearses with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RunAsCap {
    // CAP_DAC_READ_SEARCH, which the shipped unit grants: the user may open any file for
    // reading, /proc/slabinfo included. (No doc comment: clap would print every option's
    // help in its long form to show it.)
    DacReadSearch,
}

/// `check-config`: run's start-up, step by step, without starting anything. What `run`
/// refuses is an error; what it tolerates is a warning. `run_as` is the user a supervisor
/// starts the daemon as, and `cap` the capability it grants it.
pub fn check_config(
    args: &SettingArgs,
    run_as: Option<&str>,
    cap: Option<RunAsCap>,
) -> Result<Checked, StartError> {
    let (cfg, raw) = args.load()?;
    let started_as = run_as
        .map(|u| privdrop::lookup_user(u).map_err(StartError::RunAs))
        .transpose()?;
    if cap.is_some() && started_as.is_none() {
        return Err(StartError::RunAs(
            "--run-as-cap is a capability of the --run-as user: give --run-as too".into(),
        ));
    }
    // What run does as the user that starts it; a child takes that identity when it is not
    // ours (root may be started as root: nothing to switch).
    let euid = privdrop::effective_uid();
    let found = match &started_as {
        Some(user) if cap.is_some() => {
            // CAP_DAC_READ_SEARCH lets the user open for reading what root may: the source is
            // opened here, as root, and all that follows in a child as the user, who must
            // itself be able to use the state directory and reach the master.
            let refuse = |why: &str| Err(StartError::RunAs(format!("--run-as-cap: {why}")));
            if !cfg!(target_os = "linux") {
                return refuse("capabilities are Linux's; this system has none to grant");
            }
            if !privdrop::is_root() {
                return refuse("check-config must run as root to rehearse a capability");
            }
            if user.uid == euid || user.uid == 0 {
                return refuse(
                    "the --run-as user is this one, or root: there is no other user to grant it to",
                );
            }
            if cfg.user.as_ref().is_some_and(|u| u.uid != user.uid) {
                return refuse(
                    "the daemon is started as the --run-as user and `user` names another, \
                     which only root may switch to",
                );
            }
            rehearse_start(&cfg, &raw, Some(user))?
        }
        Some(user) if user.uid != euid && user.uid != 0 => privdrop::in_child_as(user, || {
            rehearse_start(&cfg, &raw, None).map_err(|e| e.to_string())
        })
        .map_err(StartError::Rehearsal)?,
        _ => rehearse_start(&cfg, &raw, None)?,
    };
    let mut warnings: Vec<String> = found.lines().map(String::from).collect();
    if let MasterAddr::Unix(path) = &cfg.agentx_socket {
        if !path.exists() {
            warnings.push(format!(
                "the AgentX socket {} does not exist (yet): run keeps trying to connect",
                path.display()
            ));
        }
    }
    // Which file the settings came from, under the header: a user who edited another one
    // sees it at once.
    let rendered = raw.render();
    let (header, settings) = rendered.split_once('\n').unwrap_or((&rendered, ""));
    let read = read_from(args.config_path().as_deref());
    let mut effective = format!("{header}\n{read}\n{settings}");
    if cfg.source == SourceChoice::Auto {
        // What auto means depends on the host: say what it is here.
        if let Ok(specs) = cfg.source.resolve() {
            let names: Vec<String> = specs.iter().map(ToString::to_string).collect();
            effective.push_str(&format!("# source auto reads {} here\n", names.join(",")));
        }
    }
    Ok(Checked {
        effective,
        warnings,
    })
}

/// check-config's line that says which configuration file it read, if any.
fn read_from(file: Option<&Path>) -> String {
    match file {
        Some(p) => format!("# read from {}", p.display()),
        None => format!(
            "# no configuration file ({DEFAULT_CONFIG_PATH} does not exist, and no --config): \
             the defaults and the command line"
        ),
    }
}

/// Opens the configured sources. When `source` was set in a file or on the command line, an
/// error names where (file and line, or the option), as a wrong value of any setting does.
fn open_sources(cfg: &Config, raw: &RawSettings) -> Result<Sources, StartError> {
    Sources::open(&cfg.source).map_err(|e| match raw.set_at("source") {
        Some(origin) => StartError::Config(origin.error(Some("source"), e.to_string())),
        None => StartError::Source(e),
    })
}

/// As the starting user, what run does before it switches: connect to syslog and open the
/// source (an error is run's error). Then, as the user run switches to, what it does after:
/// read the source once and look at the state directory. Returns the warnings, a line each.
/// `granted`: the user a supervisor starts the daemon as with CAP_DAC_READ_SEARCH, whose
/// opening of the source this process (root) stands for; the rest is that user's.
fn rehearse_start(
    cfg: &Config,
    raw: &RawSettings,
    granted: Option<&privdrop::Account>,
) -> Result<String, StartError> {
    logging::check_target(cfg.log_target).map_err(StartError::Logging)?;
    let mut source = open_sources(cfg, raw)?;
    // Root with a user first gives the directory to that user: only its mode can be wrong,
    // and its files are read here, as they will be the user's. A user started with the
    // capability is not root, and gives nothing away.
    let switch_to = granted.or(cfg.user.as_ref());
    let given_away = granted.is_none() && cfg.user.is_some() && privdrop::is_root();
    let mut found = match given_away {
        true => rehearse_state_dir(cfg, None)?,
        false => Vec::new(),
    };
    let mut after_switch = move || -> Result<String, StartError> {
        for e in source.read().parts.into_iter().filter_map(Result::err) {
            found.push(format!(
                "{e}: run would serve this source as error(3) until a read of it works"
            ));
        }
        if !given_away {
            found.extend(rehearse_state_dir(cfg, Some(privdrop::effective_uid()))?);
        }
        found.extend(rehearse_connect(&cfg.agentx_socket));
        Ok(found.join("\n"))
    };
    match switch_to {
        Some(user) => privdrop::in_child_as(user, || after_switch().map_err(|e| e.to_string()))
            .map_err(StartError::Rehearsal),
        None => after_switch(),
    }
}

/// As the user run runs as: whether it may connect to the master's socket, when there is one
/// to try. run tolerates a refusal (it keeps retrying), so it is a warning that says what to
/// set. The connection is closed at once; the master sees a subagent that never opened.
fn rehearse_connect(master: &MasterAddr) -> Option<String> {
    let MasterAddr::Unix(path) = master else {
        return None;
    };
    match std::os::unix::net::UnixStream::connect(path) {
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => Some(format!(
            "{}: {e}: run would keep retrying; {AGENTX_PERMS_ADVICE}",
            path.display()
        )),
        // Missing, or refused because snmpd is not running: said elsewhere, or run waits.
        _ => None,
    }
}

/// Whether this user may create `dir` as run does, with its missing parents: write and search
/// the nearest directory above it that exists.
fn may_create(dir: &Path) -> Result<(), String> {
    let existing = dir
        .ancestors()
        .skip(1)
        .find(|a| a.exists())
        .unwrap_or(Path::new("/"));
    privdrop::may_write_in(existing).map_err(|e| format!("{}: {e}", existing.display()))
}

/// The state directory as run finds it, for the user `owner` run runs as (`None`: whoever
/// owns it, as run makes it the user's): the warnings of what would keep run from persisting
/// its indexes there (it then serves with indexes in memory). A state file that must not be
/// rebuilt is an error, as run refuses it.
fn rehearse_state_dir(cfg: &Config, owner: Option<u32>) -> Result<Vec<String>, StartError> {
    let dir = &cfg.state_dir;
    let not_persisted =
        |e: String| format!("{e}: run would serve, but its indexes would not survive a restart");
    let meta = match std::fs::metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // Root creates it and gives it to the user (`owner` None); a user must be able to.
            let created = match owner {
                None => Ok(()),
                Some(_) => may_create(dir),
            };
            return Ok(vec![match created {
                Ok(()) => format!("{} does not exist: run creates it", dir.display()),
                Err(why) => not_persisted(format!(
                    "{} does not exist, and this user cannot create it ({why}; a supervisor \
                     may create it first, as systemd's StateDirectory= does)",
                    dir.display()
                )),
            }]);
        }
        Err(e) => return Ok(vec![not_persisted(format!("{}: {e}", dir.display()))]),
        Ok(meta) => meta,
    };
    let owner = owner.unwrap_or_else(|| std::os::unix::fs::MetadataExt::uid(&meta));
    if let Err(e) = statedir::check_owner(dir, owner) {
        return Ok(vec![not_persisted(e)]);
    }
    let (_, mut problems) = TypeIndexes::load(dir);
    problems.extend(SiteIndexes::load(dir).1);
    let mut warnings = Vec::new();
    for p in problems {
        if p.is_fatal() {
            return Err(StartError::StateFile(p));
        }
        warnings.push(p.to_string());
    }
    Ok(warnings)
}

/// The index state, and what keeps the state directory in use by this daemon.
pub struct State {
    pub indexes: TypeIndexes,
    /// The allocation call sites' indexes.
    pub sites: SiteIndexes,
    /// Held for the life of the daemon: one daemon per state directory.
    pub lock: Option<StateLock>,
    /// Why nothing is persisted, if it is not.
    pub problem: Option<StateDirProblem>,
}

/// Loads the index state, creating the state directory when it is missing. A directory
/// that is not safe to write to (see statedir), cannot be created or cannot be locked is
/// not used: the daemon serves with indexes in memory. Errors are fatal: another daemon
/// uses the directory, or the state file must not be rebuilt (see index).
pub fn open_state(dir: &Path) -> Result<State, StartError> {
    let not_persisted = |problem: StateDirProblem| {
        tracing::error!("{problem}; indexes will not survive a restart");
        State {
            indexes: TypeIndexes::in_memory(),
            sites: SiteIndexes::in_memory(),
            lock: None,
            problem: Some(problem),
        }
    };
    if let Err(e) = prepare_state_dir(dir) {
        return Ok(not_persisted(e));
    }
    if let Err(e) = statedir::check_owner(dir, privdrop::effective_uid()) {
        return Ok(not_persisted(StateDirProblem::Unsafe(e)));
    }
    let lock = match statedir::lock(dir) {
        Ok(lock) => lock,
        Err(LockError::Busy(e)) => return Err(StartError::StateBusy(e)),
        Err(LockError::Unusable(e)) => return Ok(not_persisted(StateDirProblem::CannotLock(e))),
    };
    // Ours alone now: what a crash mid-save left behind can go.
    let stale = crate::index::remove_stale_temporaries(dir);
    if stale > 0 {
        tracing::info!("removed {stale} temporary file(s) left by an interrupted save");
    }
    let (indexes, mut problems) = TypeIndexes::load(dir);
    let (sites, site_problems) = SiteIndexes::load(dir);
    problems.extend(site_problems);
    for problem in problems {
        if problem.is_fatal() {
            return Err(StartError::StateFile(problem));
        }
        tracing::warn!("{problem}");
    }
    Ok(State {
        indexes,
        sites,
        lock: Some(lock),
        problem: None,
    })
}

/// `run`: the daemon, until SIGTERM or SIGINT.
pub fn run(mut args: SettingArgs) -> Result<(), StartError> {
    // Until the handler is installed, a SIGHUP (a reload sent during a slow start) would
    // end the daemon: it is ignored instead.
    crate::process::ignore_hangups();
    // The file is chosen once: if the default file later vanishes, a reload is refused
    // rather than falling back to the defaults.
    args.config = args.config_path();
    let (cfg, raw) = args.load()?;
    logging::init(cfg.log_target, cfg.log_level).map_err(StartError::Logging)?;
    let (session_cfg, agent_settings) = daemon_settings(&cfg);

    // Privileged steps first: the Linux source is root-only, so it is opened (and kept
    // open) before dropping to the configured user. The state directory is made ours.
    let source = open_sources(&cfg, &raw)?;
    // What the start-up line names: the sources as opened (`auto` resolved), as
    // memSourceName shows them.
    let serving = source.name();
    if let Some(user) = &cfg.user {
        // A directory that cannot be made the user's is not fatal: open_state below then
        // finds it unusable and the daemon serves without persisting, as check-config says.
        let given = prepare_state_dir(&cfg.state_dir)
            .map_err(|e| e.to_string())
            .and_then(|()| privdrop::chown_to_user(&cfg.state_dir, user));
        if let Err(e) = given {
            tracing::warn!("{e}");
        }
        // Before the runtime exists: a set*id call changes only the calling thread.
        privdrop::drop_privileges(user).map_err(StartError::Privileges)?;
        tracing::info!("running as user {}", user.name);
    }
    // After the privilege drop: the directory must be safe for the user we now run as.
    let state = open_state(&cfg.state_dir)?;
    let mut agent = Agent::new(
        &source.names(),
        state.indexes,
        agent_settings,
        std::time::Instant::now(),
    )
    .with_site_indexes(state.sites);
    agent.set_persistence_off(state.problem);
    let _state_lock = state.lock;
    // After the privilege drop: the reading thread runs with the daemon's final credentials.
    let reader = SourceReader::spawn(source).map_err(|error| StartError::Start {
        what: "the source's reading thread",
        error,
    })?;
    let daemon =
        Daemon::new(session_cfg, agent, Box::new(reader)).map_err(|error| StartError::Start {
            what: "the alarm thread",
            error,
        })?;
    // Without the time driver, which would cost every wake-up a clock read: the few
    // sleeps run on the timers' thread (timers.rs).
    crate::timers::start().map_err(|error| StartError::Start {
        what: "the timers' thread",
        error,
    })?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .map_err(|error| StartError::Start {
            what: "the runtime",
            error,
        })?;
    let (tx, rx) = daemon.control_channel();
    runtime.block_on(async move {
        tracing::info!(
            "memstat-agentx {} serving {} to {}",
            env!("CARGO_PKG_VERSION"),
            serving,
            cfg.agentx_socket
        );
        let (signals_tx, signals_rx) = tokio::sync::mpsc::channel(4);
        tokio::spawn(os_signals(signals_tx));
        tokio::spawn(controls(signals_rx, args, cfg, tx));
        daemon.run(rx).await;
    });
    tracing::info!("exiting");
    Ok(())
}

/// The signals the daemon acts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// SIGHUP: reload the configuration.
    Hangup,
    /// SIGTERM or SIGINT: shut down.
    Terminate,
}

/// Forwards the process's SIGHUP, SIGTERM and SIGINT as [`Signal`]s.
async fn os_signals(tx: tokio::sync::mpsc::Sender<Signal>) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut hup), Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::hangup()),
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::error!("cannot install signal handlers");
        return;
    };
    loop {
        let s = tokio::select! {
            _ = hup.recv() => Signal::Hangup,
            _ = term.recv() => Signal::Terminate,
            _ = int.recv() => Signal::Terminate,
        };
        if tx.send(s).await.is_err() {
            return;
        }
    }
}

type Loaded = Result<(Config, RawSettings), ConfigError>;

/// What a reload that loaded `loaded` does, the daemon having started with `started` and
/// running with `current`: the new configuration and the control that applies it, or
/// nothing when the file is refused (the old settings stay). What a reload cannot change is
/// warned of; a new log level is applied here, where the logging is.
fn reloaded(started: &Config, current: &Config, loaded: Loaded) -> Option<(Config, Control)> {
    let new = match loaded {
        Ok((new, _)) => new,
        Err(e) => {
            tracing::error!("configuration not reloaded, keeping the old one: {e}");
            return None;
        }
    };
    let unchanged = started.needs_restart(&new);
    if !unchanged.is_empty() {
        tracing::warn!("{} changed: a restart applies that", unchanged.join(", "));
    }
    if new.log_level != current.log_level {
        if let Err(e) = logging::set_level(new.log_level) {
            tracing::warn!("log level: {e}");
        }
    }
    let (s, a) = daemon_settings(&new);
    Some((new, Control::Reload(s, a)))
}

/// Turns signals into control messages: Terminate shuts down; Hangup re-reads the
/// configuration and applies what a reload can (config::Reload), or keeps the old one if
/// the new one is refused. The file is read and the user looked up on a thread of their
/// own, so a slow file system or user database never holds up the daemon or a shutdown.
pub async fn controls(
    mut signals: tokio::sync::mpsc::Receiver<Signal>,
    args: SettingArgs,
    mut current: Config,
    tx: ControlSender,
) {
    // What a reload cannot change stays as the daemon started.
    let started = current.clone();
    let mut loading: Option<tokio::sync::oneshot::Receiver<Loaded>> = None;
    loop {
        let loaded = async {
            match loading.as_mut() {
                Some(rx) => rx.await.ok(),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            s = signals.recv() => match s {
                Some(Signal::Hangup) => {
                    if loading.is_some() {
                        tracing::warn!("SIGHUP ignored: the previous reload is still reading the configuration");
                        continue;
                    }
                    let (done, rx) = tokio::sync::oneshot::channel();
                    let args = args.clone();
                    let spawned = std::thread::Builder::new()
                        .name("config-reload".into())
                        .spawn(move || { let _ = done.send(args.load()); });
                    match spawned {
                        Ok(_) => loading = Some(rx),
                        Err(e) => tracing::error!("configuration not reloaded: cannot start a thread: {e}"),
                    }
                }
                Some(Signal::Terminate) | None => break,
            },
            result = loaded => {
                loading = None;
                let Some(result) = result else {
                    tracing::error!("configuration not reloaded: the reading thread failed");
                    continue;
                };
                if let Some((new, control)) = reloaded(&started, &current, result) {
                    current = new;
                    let _ = tx.send(control).await;
                }
            }
        }
    }
    let _ = tx.send(Control::Shutdown).await;
}

#[cfg(test)]
mod tests;
