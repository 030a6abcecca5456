//! The `memstat-agentx` command: `run` (the subagent), `dump` and `check-config`.

use clap::{Arg, ArgAction, ArgMatches, Args, FromArgMatches, Parser, Subcommand, ValueEnum};
use memstat_agentx::agent::{Agent, AgentSettings, WatchSettings};
use memstat_agentx::agentx::session::SessionConfig;
use memstat_agentx::config::{
    Config, ConfigError, RawSettings, Rule, DEFAULT_CONFIG_PATH, SETTINGS,
};
use memstat_agentx::daemon::{Control, Daemon};
use memstat_agentx::index::StableIndexes;
use memstat_agentx::memstat::{source, Snapshot, SourceChoice, Sources};
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
    /// Exactly what FreeBSD's vmstat -m -z prints to a pipe (UMA and malloc only).
    Vmstat,
}

/// The options of `run` and `check-config`: `--config`, and one option per setting,
/// generated from the settings' one definition (config::SETTINGS).
#[derive(Clone)]
struct SettingArgs {
    config: Option<PathBuf>,
    raw: RawSettings,
}

/// The negative flag of a switch (`--no-agent-caps`). Built once per process, at start-up.
fn negated(key: &str) -> &'static str {
    Box::leak(format!("no-{key}").into_boxed_str())
}

/// "Do not register ..." for "Register ...".
fn negated_help(summary: &str) -> String {
    let mut chars = summary.chars();
    let first = chars
        .next()
        .map(|c| c.to_lowercase().to_string())
        .unwrap_or_default();
    format!("Do not {first}{}", chars.as_str())
}

impl Args for SettingArgs {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        let config = Arg::new("config")
            .long("config")
            .value_name("FILE")
            .value_parser(clap::value_parser!(PathBuf))
            .help("Configuration file (default: the conventional path, if it exists)");
        SETTINGS
            .iter()
            .fold(cmd.arg(config), |cmd, s| match s.rule {
                Rule::Switch => {
                    let no = negated(s.key);
                    cmd.arg(
                        Arg::new(s.key)
                            .long(s.key)
                            .action(ArgAction::SetTrue)
                            .help(s.help)
                            .overrides_with(no),
                    )
                    .arg(
                        Arg::new(no)
                            .long(no)
                            .action(ArgAction::SetTrue)
                            .help(negated_help(s.help))
                            .overrides_with(s.key),
                    )
                }
                Rule::Seconds { .. } | Rule::Whole { .. } | Rule::Text => cmd.arg(
                    Arg::new(s.key)
                        .long(s.key)
                        .value_name(match s.rule {
                            Rule::Seconds { .. } => "SECONDS",
                            Rule::Whole { .. } => "N",
                            _ => "VALUE",
                        })
                        .value_parser(clap::value_parser!(String))
                        // --max-age -1 is a value (refused by the setting), not an unknown flag.
                        .allow_negative_numbers(true)
                        .help(s.help),
                ),
            })
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for SettingArgs {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let mut raw = RawSettings::default();
        for s in SETTINGS {
            match s.rule {
                Rule::Switch if m.get_flag(s.key) => raw.set_arg(s.key, "true".into()),
                Rule::Switch if m.get_flag(&format!("no-{}", s.key)) => {
                    raw.set_arg(s.key, "false".into())
                }
                Rule::Switch => {}
                Rule::Seconds { .. } | Rule::Whole { .. } | Rule::Text => {
                    if let Some(v) = m.get_one::<String>(s.key) {
                        raw.set_arg(s.key, v.clone());
                    }
                }
            }
        }
        let config = m.get_one::<PathBuf>("config").cloned();
        Ok(SettingArgs { config, raw })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl SettingArgs {
    /// The file to read: the one given, else the default path when it exists.
    fn config_path(&self) -> Option<PathBuf> {
        self.config.clone().or_else(|| {
            let p = PathBuf::from(DEFAULT_CONFIG_PATH);
            p.exists().then_some(p)
        })
    }

    /// The file's values, then the options', converted once: what `run`, `check-config`
    /// and a reload all use. The raw settings come along, to show and compare them.
    fn load(&self) -> Result<(Config, RawSettings), ConfigError> {
        let mut raw = match self.config_path() {
            Some(p) => RawSettings::read_file(&p)?,
            None => RawSettings::default(),
        };
        raw.merge(self.raw.clone());
        Ok((raw.convert()?, raw))
    }
}

#[derive(Subcommand)]
enum Command {
    /// Run the AgentX subagent.
    #[command(after_help = source::help_text())]
    Run(SettingArgs),
    /// Print one snapshot of the allocator statistics.
    #[command(after_help = source::help_text())]
    Dump {
        /// auto, or sources separated by commas (see Sources below)
        #[arg(long, default_value = "auto")]
        source: String,
        #[arg(long, value_enum, default_value = "table")]
        format: FormatArg,
    },
    /// Give run's verdict on the settings, without starting anything, and print them.
    #[command(after_help = source::help_text())]
    CheckConfig {
        #[command(flatten)]
        settings: SettingArgs,
        /// Check as the user a supervisor starts the daemon as (rc.subr's
        /// memstat_agentx_user, systemd's User=), not as the user running check-config.
        #[arg(long, value_name = "USER")]
        run_as: Option<String>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Dump { source, format } => dump(&source, format),
        Command::CheckConfig { settings, run_as } => {
            let mut warnings = Vec::new();
            let verdict = check_config(&settings, run_as.as_deref(), &mut warnings);
            for w in &warnings {
                print_err(&format!("warning: {w}"));
            }
            match verdict {
                Ok(effective) => print_out(&effective),
                Err(e) => {
                    print_err(&e);
                    ExitCode::FAILURE
                }
            }
        }
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
        .parse::<SourceChoice>()
        .and_then(|k| Sources::open(&k))
        .and_then(|mut s| {
            let data = s.read().merged()?;
            let mut snap = Snapshot::new(0, SystemTime::now(), s.name(), data.types);
            snap.figures = data.figures;
            Ok(snap)
        });
    match result {
        Ok(snap) => {
            let f = match format {
                FormatArg::Table => Format::Table,
                FormatArg::Json => Format::Json,
                FormatArg::Vmstat => Format::Vmstat,
            };
            match report::render(&snap, f) {
                Ok(text) => print_out(&text),
                Err(e) => {
                    print_err(&e.to_string());
                    ExitCode::FAILURE
                }
            }
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

fn session_config(cfg: &Config) -> (SessionConfig, AgentSettings) {
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
    };
    (session, agent)
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

/// `check-config`: run's start-up, step by step, without starting anything. What `run`
/// refuses is an error; what it tolerates (it waits, creates, or serves error(3) or without
/// persistence) is a warning. `run_as` is the user a supervisor starts the daemon as.
fn check_config(
    args: &SettingArgs,
    run_as: Option<&str>,
    warnings: &mut Vec<String>,
) -> Result<String, String> {
    let (cfg, raw) = args.load().map_err(|e| e.to_string())?;
    let started_as = run_as
        .map(|u| privdrop::lookup_user(u).map_err(|e| format!("--run-as: {e}")))
        .transpose()?;
    // What run does as the user that starts it; a child takes that identity when it is not
    // ours (root may be started as root: nothing to switch).
    let euid = privdrop::effective_uid();
    let found = match &started_as {
        Some(user) if user.uid != euid && user.uid != 0 => {
            privdrop::in_child_as(user, || rehearse_start(&cfg))?
        }
        _ => rehearse_start(&cfg)?,
    };
    warnings.extend(found.lines().map(String::from));
    if let memstat_agentx::agentx::session::MasterAddr::Unix(path) = &cfg.agentx_socket {
        if !path.exists() {
            warnings.push(format!(
                "the AgentX socket {} does not exist (yet): run keeps trying to connect",
                path.display()
            ));
        }
    }
    let mut out = raw.render();
    if cfg.source == SourceChoice::Auto {
        // What auto means depends on the host: say what it is here.
        if let Ok(specs) = cfg.source.resolve() {
            let names: Vec<String> = specs.iter().map(ToString::to_string).collect();
            out.push_str(&format!("# source auto reads {} here\n", names.join(",")));
        }
    }
    Ok(out)
}

/// As the starting user, what run does before it switches: connect to syslog and open the
/// source (an error is run's error). Then, as the user run switches to, what it does after:
/// read the source once and look at the state directory. Returns the warnings, a line each.
fn rehearse_start(cfg: &Config) -> Result<String, String> {
    logging::check_target(cfg.log_target)?;
    let mut source = Sources::open(&cfg.source).map_err(|e| e.to_string())?;
    // Root with a user first gives the directory to that user: only its mode can be wrong,
    // and its files are read here, as they will be the user's.
    let given_away = cfg.user.is_some() && privdrop::is_root();
    let mut found = match given_away {
        true => rehearse_state_dir(cfg, None)?,
        false => Vec::new(),
    };
    let mut after_switch = move || {
        for e in source.read().parts.into_iter().filter_map(Result::err) {
            found.push(format!(
                "{e}: run would serve this source as error(3) until a read of it works"
            ));
        }
        if !given_away {
            found.extend(rehearse_state_dir(cfg, Some(privdrop::effective_uid()))?);
        }
        Ok(found.join("\n"))
    };
    match &cfg.user {
        Some(user) => privdrop::in_child_as(user, after_switch),
        None => after_switch(),
    }
}

/// The state directory as run finds it, for the user `owner` run runs as (`None`: whoever
/// owns it, as run makes it the user's): the warnings of what would keep run from persisting
/// its indexes there (it then serves with indexes in memory). A state file that must not be
/// rebuilt is an error, as run refuses it.
fn rehearse_state_dir(cfg: &Config, owner: Option<u32>) -> Result<Vec<String>, String> {
    let dir = &cfg.state_dir;
    let not_persisted =
        |e: String| format!("{e}: run would serve, but its indexes would not survive a restart");
    let meta = match std::fs::metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(vec![format!(
                "{} does not exist: run creates it",
                dir.display()
            )])
        }
        Err(e) => return Ok(vec![not_persisted(format!("{}: {e}", dir.display()))]),
        Ok(meta) => meta,
    };
    let owner = owner.unwrap_or_else(|| std::os::unix::fs::MetadataExt::uid(&meta));
    if let Err(e) = statedir::check_owner(dir, owner) {
        return Ok(vec![not_persisted(e)]);
    }
    let (_, problems) = StableIndexes::load(dir);
    if let Some(fatal) = problems.iter().find(|p| p.is_fatal()) {
        return Err(fatal.to_string());
    }
    Ok(problems.iter().map(ToString::to_string).collect())
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

fn run(mut args: SettingArgs) -> Result<(), String> {
    // Until the handler is installed, a SIGHUP (a reload sent during a slow start) would
    // end the daemon: it is ignored instead.
    memstat_agentx::process::ignore_hangups();
    // The file is chosen once: if the default file later vanishes, a reload is refused
    // rather than falling back to the defaults.
    args.config = args.config_path();
    let (cfg, _) = args.load().map_err(|e| e.to_string())?;
    logging::init(cfg.log_target, cfg.log_level)?;
    let (session_cfg, agent_settings) = session_config(&cfg);

    // Privileged steps first: the Linux source is root-only, so it is opened (and kept
    // open) before dropping to the configured user. The state directory is made ours.
    let source = Sources::open(&cfg.source).map_err(|e| e.to_string())?;
    if let Some(user) = &cfg.user {
        // A directory that cannot be made the user's is not fatal: open_state below then
        // finds it unusable and the daemon serves without persisting, as check-config says.
        let given = prepare_state_dir(&cfg.state_dir)
            .and_then(|()| privdrop::chown_to_user(&cfg.state_dir, user));
        if let Err(e) = given {
            tracing::warn!("{e}");
        }
        // Before the runtime exists: a set*id call changes only the calling thread.
        privdrop::drop_privileges(user)?;
        tracing::info!("running as user {}", user.name);
    }
    // After the privilege drop: the directory must be safe for the user we now run as.
    let state = open_state(&cfg.state_dir)?;
    let mut agent = Agent::new(
        &source.names(),
        state.indexes,
        agent_settings,
        std::time::Instant::now(),
    );
    agent.set_persistence_problem(state.problem);
    let _state_lock = state._lock;
    // After the privilege drop: the reading thread runs with the daemon's final credentials.
    let reader = SourceReader::spawn(source)
        .map_err(|e| format!("cannot start the source's reading thread: {e}"))?;

    let daemon = Daemon::new(session_cfg, agent, Box::new(reader))
        .map_err(|e| format!("cannot start the alarm thread: {e}"))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(async move {
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        tracing::info!(
            "memstat-agentx {} serving {} to {}",
            env!("CARGO_PKG_VERSION"),
            cfg.source,
            cfg.agentx_socket
        );
        tokio::spawn(signals(args, cfg, tx));
        daemon.run(rx).await;
    });
    tracing::info!("exiting");
    Ok(())
}

/// Turns signals into control messages: SIGTERM and SIGINT shut down; SIGHUP re-reads the
/// configuration and applies what a reload can (config::Reload), or keeps the old one if
/// the new one is refused. The file is read and the user looked up on a thread of their
/// own, so a slow file system or user database never holds up the session or a shutdown.
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
    // What a reload cannot change stays as the daemon started.
    let started = current.clone();
    type Loaded = Result<(Config, RawSettings), ConfigError>;
    let mut loading: Option<tokio::sync::oneshot::Receiver<Loaded>> = None;
    loop {
        let loaded = async {
            match loading.as_mut() {
                Some(rx) => rx.await.ok(),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = hup.recv() => {
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
            result = loaded => {
                loading = None;
                match result {
                    Some(Ok((new, _))) => {
                        let unchanged = started.needs_restart(&new);
                        if !unchanged.is_empty() {
                            tracing::warn!("{} changed: a restart applies that", unchanged.join(", "));
                        }
                        if new.log_level != current.log_level {
                            if let Err(e) = logging::set_level(new.log_level) {
                                tracing::warn!("log level: {e}");
                            }
                        }
                        let (s, a) = session_config(&new);
                        current = new;
                        let _ = tx.send(Control::Reload(s, a)).await;
                    }
                    Some(Err(e)) => tracing::error!("configuration not reloaded, keeping the old one: {e}"),
                    None => tracing::error!("configuration not reloaded: the reading thread failed"),
                }
            }
            _ = term.recv() => break,
            _ = int.recv() => break,
        }
    }
    let _ = tx.send(Control::Shutdown).await;
}
