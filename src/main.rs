//! The `memstat-agentx` command: `run` (the subagent), `dump` and `check-config`.

use clap::{Args, Parser, Subcommand, ValueEnum};
use memstat_agentx::agent::{Agent, AgentSettings};
use memstat_agentx::agentx::session::{Control, MasterAddr, SessionConfig, Subagent};
use memstat_agentx::config::{Config, LogTarget, Overrides, DEFAULT_CONFIG_PATH};
use memstat_agentx::index::StableIndexes;
use memstat_agentx::memstat::{Snapshot, Source, SourceKind};
use memstat_agentx::reader::SourceReader;
use memstat_agentx::report::{self, Format};
use memstat_agentx::statedir::{self, LockError, StateLock};
use memstat_agentx::{logging, privdrop};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::SystemTime;

#[derive(Parser)]
#[command(
    name = "memstat-agentx",
    version,
    about = "Kernel allocator statistics (FreeBSD UMA and malloc, Linux slab) as MEMSTAT-MIB over AgentX"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum FormatArg {
    Table,
    Json,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogTargetArg {
    Stderr,
    Syslog,
}

/// Settings shared by `run` and `check-config`; each one given overrides the file.
#[derive(Args, Default)]
struct SettingArgs {
    /// Configuration file (default: the conventional path, if it exists).
    #[arg(long)]
    config: Option<PathBuf>,
    /// The master: a socket path, unix:PATH or tcp:HOST:PORT.
    #[arg(long)]
    agentx_socket: Option<String>,
    /// auto, linux, linux:PATH, freebsd or fixture:PATH.
    #[arg(long)]
    source: Option<String>,
    /// Maximum snapshot age for a new walk or a Get, in seconds (decimal).
    #[arg(long)]
    max_age: Option<f64>,
    /// How long a walk stays pinned to its snapshot, in seconds.
    #[arg(long)]
    walk_window: Option<f64>,
    /// Seconds between Pings to the master; 0 disables them.
    #[arg(long)]
    ping_interval: Option<f64>,
    /// First reconnection delay, in seconds.
    #[arg(long)]
    backoff_min: Option<f64>,
    /// Largest reconnection delay, in seconds.
    #[arg(long)]
    backoff_max: Option<f64>,
    /// Directory for the persistent index assignments.
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// error, warn, info, debug or trace.
    #[arg(long)]
    log_level: Option<String>,
    #[arg(long, value_enum)]
    log_target: Option<LogTargetArg>,
    /// Drop privileges to this user after opening the source.
    #[arg(long)]
    user: Option<String>,
    /// Do not send AddAgentCaps (for masters that refuse it).
    #[arg(long)]
    no_agent_caps: bool,
}

impl SettingArgs {
    fn overrides(&self) -> Overrides {
        Overrides {
            agentx_socket: self.agentx_socket.clone(),
            source: self.source.clone(),
            max_age: self.max_age,
            walk_window: self.walk_window,
            ping_interval: self.ping_interval,
            backoff_min: self.backoff_min,
            backoff_max: self.backoff_max,
            state_dir: self.state_dir.clone(),
            log_level: self.log_level.clone(),
            log_target: self.log_target.map(|t| match t {
                LogTargetArg::Stderr => LogTarget::Stderr,
                LogTargetArg::Syslog => LogTarget::Syslog,
            }),
            user: self.user.clone(),
            agent_caps: self.no_agent_caps.then_some(false),
        }
    }

    /// The file to read: the one given, else the default path when it exists.
    fn config_path(&self) -> Option<PathBuf> {
        self.config.clone().or_else(|| {
            let p = PathBuf::from(DEFAULT_CONFIG_PATH);
            p.exists().then_some(p)
        })
    }

    fn load(&self) -> Result<Config, String> {
        let mut cfg = match self.config_path() {
            Some(p) => Config::load(&p).map_err(|e| e.to_string())?,
            None => Config::default(),
        };
        cfg.apply_checked(&self.overrides())
            .map_err(|e| e.to_string())?;
        Ok(cfg)
    }
}

#[derive(Subcommand)]
enum Command {
    /// Run the AgentX subagent.
    Run(SettingArgs),
    /// Print one snapshot of the allocator statistics.
    Dump {
        /// auto, linux, linux:PATH, freebsd or fixture:PATH
        #[arg(long, default_value = "auto")]
        source: String,
        #[arg(long, value_enum, default_value = "table")]
        format: FormatArg,
    },
    /// Validate a configuration file and print the effective settings.
    CheckConfig(SettingArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Dump { source, format } => dump(&source, format),
        Command::CheckConfig(args) => match args.load().and_then(|cfg| {
            check_state_dir(&cfg)?;
            Ok(cfg)
        }) {
            Ok(cfg) => print_out(&cfg.render()),
            Err(e) => {
                print_err(&e);
                ExitCode::FAILURE
            }
        },
        Command::Run(args) => match run(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                print_err(&e);
                tracing::error!("{e}");
                ExitCode::FAILURE
            }
        },
    }
}

fn dump(source: &str, format: FormatArg) -> ExitCode {
    let result = source
        .parse::<SourceKind>()
        .and_then(|k| Source::open(&k))
        .and_then(|mut s| {
            let types = s.read()?;
            Ok(Snapshot::new(0, SystemTime::now(), s.name(), types))
        });
    match result {
        Ok(snap) => {
            let f = match format {
                FormatArg::Table => Format::Table,
                FormatArg::Json => Format::Json,
            };
            print_out(&report::render(&snap, f))
        }
        Err(e) => {
            print_err(&e.to_string());
            ExitCode::FAILURE
        }
    }
}

/// Writes `text` to standard output. Never print!: it panics (exit 101) when stdout is
/// broken. A reader that went away (`dump | head`) chose to stop reading: exit 0. Any other
/// failure (a full disk, EIO) means the output is lost: say so and exit 1.
fn print_out(text: &str) -> ExitCode {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            print_err(&format!("cannot write to standard output: {e}"));
            ExitCode::FAILURE
        }
    }
}

/// An error message on standard error, if it can be written: never eprintln!, which panics
/// when stderr is broken. The exit status carries the failure either way.
fn print_err(message: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "memstat-agentx: {message}");
}

fn session_config(cfg: &Config) -> Result<(SessionConfig, AgentSettings), String> {
    let master: MasterAddr = cfg
        .agentx_socket
        .parse()
        .map_err(|e| format!("agentx-socket: {e}"))?;
    Ok((
        SessionConfig {
            master,
            ping_interval: cfg.ping_interval,
            backoff_min: cfg.backoff_min,
            backoff_max: cfg.backoff_max,
            agent_caps: cfg.agent_caps,
        },
        AgentSettings {
            max_age: cfg.max_age,
            walk_window: cfg.walk_window,
        },
    ))
}

/// Creates the state directory (mode 0750) when it is missing.
fn prepare_state_dir(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt;
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o750)
        .create(dir)
        .map_err(|e| format!("cannot create state directory {}: {e}", dir.display()))
}

/// `check-config`: the state directory rule of `run`, for the user `run` would run as (the
/// configured user, else the current one). A missing directory is fine: `run` creates it.
fn check_state_dir(cfg: &Config) -> Result<(), String> {
    let dir = &cfg.state_dir;
    let Ok(meta) = std::fs::metadata(dir) else {
        return Ok(());
    };
    let uid = match &cfg.user {
        // Started as root with a user, `run` gives the directory to that user first
        // (privdrop::chown_to_user), so only its mode can be wrong.
        Some(_) if privdrop::is_root() => std::os::unix::fs::MetadataExt::uid(&meta),
        Some(user) => privdrop::uid_of(user)?,
        None => privdrop::effective_uid(),
    };
    statedir::check_owner(dir, uid)
        .map_err(|e| format!("{e}: run would not persist its indexes there"))
}

/// The index state, and what keeps the state directory in use by this daemon.
struct State {
    indexes: StableIndexes,
    /// Held for the life of the daemon: one daemon per state directory.
    _lock: Option<StateLock>,
    /// Why nothing is persisted, if it is not.
    problem: Option<String>,
}

/// Loads the index state, creating the state directory when it is missing. A directory
/// that is not safe to write to (see statedir), cannot be created or cannot be locked is
/// not used: the daemon serves with indexes in memory. Errors are fatal: another daemon
/// uses the directory, or the state file must not be rebuilt (see index).
fn open_state(dir: &Path) -> Result<State, String> {
    let not_persisted = |problem: String| {
        tracing::error!("{problem}; indexes will not survive a restart");
        State {
            indexes: StableIndexes::in_memory(),
            _lock: None,
            problem: Some(problem),
        }
    };
    if let Err(e) = prepare_state_dir(dir) {
        return Ok(not_persisted(e));
    }
    if let Err(e) = statedir::check_owner(dir, privdrop::effective_uid()) {
        return Ok(not_persisted(e));
    }
    let lock = match statedir::lock(dir) {
        Ok(lock) => lock,
        Err(LockError::Busy(e)) => return Err(e),
        Err(LockError::Unusable(e)) => return Ok(not_persisted(e)),
    };
    // Ours alone now: what a crash mid-save left behind can go.
    let stale = memstat_agentx::index::remove_stale_temporaries(dir);
    if stale > 0 {
        tracing::info!("removed {stale} temporary file(s) left by an interrupted save");
    }
    let (indexes, problems) = StableIndexes::load(dir);
    for problem in &problems {
        if problem.is_fatal() {
            return Err(problem.to_string());
        }
        tracing::warn!("{problem}");
    }
    Ok(State {
        indexes,
        _lock: Some(lock),
        problem: None,
    })
}

fn run(args: SettingArgs) -> Result<(), String> {
    let cfg = args.load()?;
    logging::init(cfg.log_target, &cfg.log_level)?;
    let (session_cfg, agent_settings) = session_config(&cfg)?;
    let kind: SourceKind = cfg.source.parse().map_err(|e| format!("source: {e}"))?;

    // Privileged steps first: the Linux source is root-only, so it is opened (and kept
    // open) before dropping to the configured user. The state directory is made ours.
    let source = Source::open(&kind).map_err(|e| e.to_string())?;
    if let Some(user) = &cfg.user {
        prepare_state_dir(&cfg.state_dir)?;
        privdrop::chown_to_user(&cfg.state_dir, user)?;
        // Before the runtime exists: a set*id call changes only the calling thread.
        privdrop::drop_privileges(user)?;
        tracing::info!("running as user {user}");
    }
    // After the privilege drop: the directory must be safe for the user we now run as.
    let state = open_state(&cfg.state_dir)?;
    let mut agent = Agent::new(
        source.name(),
        state.indexes,
        agent_settings,
        std::time::Instant::now(),
    );
    agent.set_persistence_problem(state.problem);
    let _state_lock = state._lock;
    // After the privilege drop: the reading thread runs with the daemon's final credentials.
    let reader = SourceReader::spawn(source)
        .map_err(|e| format!("cannot start the source's reading thread: {e}"))?;

    let master = session_cfg.master.clone();
    let subagent = Subagent::new(session_cfg, agent, reader)
        .map_err(|e| format!("cannot start the alarm thread: {e}"))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(async move {
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        tokio::spawn(signals(args, cfg, tx));
        tracing::info!(
            "memstat-agentx {} serving {} to {}",
            env!("CARGO_PKG_VERSION"),
            kind,
            master
        );
        subagent.run(rx).await;
    });
    tracing::info!("exiting");
    Ok(())
}

/// Turns signals into control messages: SIGHUP re-reads the configuration (a bad one is
/// rejected and the old one stays in force), SIGTERM and SIGINT shut down.
async fn signals(args: SettingArgs, mut current: Config, tx: tokio::sync::mpsc::Sender<Control>) {
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
        tokio::select! {
            _ = hup.recv() => {
                match args.load().and_then(|c| session_config(&c).map(|s| (c, s))) {
                    Ok((new, (s, c))) => {
                        if new.source != current.source || new.user != current.user || new.state_dir != current.state_dir {
                            tracing::warn!("source, user and state-dir changes take effect at the next restart");
                        }
                        if new.log_level != current.log_level {
                            if let Err(e) = logging::set_level(&new.log_level) {
                                tracing::warn!("log level: {e}");
                            }
                        }
                        current = new;
                        let _ = tx.send(Control::Reload(s, c)).await;
                    }
                    Err(e) => tracing::error!("configuration not reloaded, keeping the old one: {e}"),
                }
            }
            _ = term.recv() => break,
            _ = int.recv() => break,
        }
    }
    let _ = tx.send(Control::Shutdown).await;
}
