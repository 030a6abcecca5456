//! The `memstat-agentx` command: `run` (the subagent), `dump`, `check-config`, and `top`,
//! which runs memstat-top. It parses
//! the command line and calls the library (`start`, `report`), which does the work.

use clap::{Parser, Subcommand, ValueEnum};
use memstat_agentx::memstat::{source, Sizes, Snapshot, SourceChoice, Sources};
use memstat_agentx::report::{self, Format, SortKey, TableOptions};
use memstat_agentx::start::{self, SettingArgs};
use memstat_agentx::top;
use memstat_agentx::vmstat::{self, Release};
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
    /// Exactly what FreeBSD's vmstat -m -z prints to a pipe (UMA and malloc only), in the
    /// layout of --vmstat-release.
    Vmstat,
}

#[derive(Subcommand)]
enum Command {
    /// Run the AgentX subagent.
    #[command(after_help = source::help_text())]
    Run(SettingArgs),
    /// Print one snapshot of the allocator statistics.
    #[command(after_help = source::help_text(), disable_help_flag = true)]
    Dump {
        /// auto, or sources separated by commas (see Sources below)
        #[arg(long, default_value = "auto")]
        source: String,
        #[arg(long, value_enum, default_value = "table")]
        format: FormatArg,
        /// With --format vmstat: the FreeBSD release whose vmstat layout to print, 13, 14 or
        /// 15 (default: this host's release on FreeBSD, else 15)
        #[arg(long, value_name = "RELEASE", value_parser = parse_release)]
        vmstat_release: Option<Release>,
        /// Show the N allocation call sites holding the most bytes (default: 20 in the
        /// table, every site in JSON) and, in the table, the first N types of each allocator
        /// (by --sort, else the most bytes in use)
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        top: Option<u64>,
        /// In the table, each allocator's types in this order, largest first (default: the
        /// kernel's)
        #[arg(long, value_enum, value_name = "KEY")]
        sort: Option<SortKey>,
        /// In the table, only the types whose name contains TEXT
        #[arg(long, value_name = "TEXT")]
        name: Option<String>,
        /// In the table, sizes in bytes as K, M, G (powers of 1024), as ls -h prints them
        #[arg(short = 'h', long)]
        human: bool,
        /// Print help
        #[arg(long, action = clap::ArgAction::Help)]
        help: Option<bool>,
    },
    /// Show the memory types with their rates, live: runs memstat-top, installed beside this
    /// program, with the same arguments (memstat-top --help lists them).
    #[command(disable_help_flag = true)]
    Top {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
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
        /// The capability the supervisor grants the --run-as user (systemd's
        /// AmbientCapabilities=; the shipped unit grants dac-read-search)
        #[arg(long, value_enum, value_name = "CAP")]
        run_as_cap: Option<start::RunAsCap>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Dump {
            source,
            format,
            vmstat_release,
            top,
            sort,
            name,
            human,
            help: _,
        } => {
            let conflict = |message: &str| -> ! {
                use clap::CommandFactory;
                Cli::command()
                    .error(clap::error::ErrorKind::ArgumentConflict, message)
                    .exit()
            };
            // At most every site and type there is: a count past usize is all of them.
            let top = top.map(|n| usize::try_from(n).unwrap_or(usize::MAX));
            let format = match (format, vmstat_release) {
                (FormatArg::Table, None) => Format::Table(TableOptions {
                    top,
                    sort,
                    name,
                    sizes: match human {
                        true => Sizes::Human,
                        false => Sizes::Bytes,
                    },
                }),
                (_, _) if sort.is_some() || name.is_some() || human => conflict(
                    "--sort, --name and -h choose what the table shows; \
                     --format json and vmstat print every type, exactly",
                ),
                (FormatArg::Json, None) => Format::Json { top },
                (FormatArg::Vmstat, _) if top.is_some() => conflict(
                    "--top chooses the call sites of --format table or json; \
                     vmstat prints no call sites",
                ),
                (FormatArg::Vmstat, r) => Format::Vmstat(r.unwrap_or_else(vmstat::host_release)),
                (_, Some(_)) => conflict(
                    "--vmstat-release chooses the layout of --format vmstat; \
                     it does not apply to --format table or json",
                ),
            };
            dump(&source, format)
        }
        Command::Top { args } => top(args),
        Command::CheckConfig {
            settings,
            run_as,
            run_as_cap,
        } => match start::check_config(&settings, run_as.as_deref(), run_as_cap) {
            Ok(checked) => {
                for w in &checked.warnings {
                    print_err(&format!("warning: {w}"));
                }
                print_out(&checked.effective)
            }
            Err(e) => {
                print_err(&e.to_string());
                ExitCode::FAILURE
            }
        },
        Command::Run(args) => match start::run(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                print_err(&e.to_string());
                tracing::error!("{e}");
                ExitCode::FAILURE
            }
        },
    }
}

/// `--vmstat-release`: 13, 14 or 15.
fn parse_release(s: &str) -> Result<Release, String> {
    s.parse()
}

fn dump(source: &str, format: Format) -> ExitCode {
    let result = source
        .parse::<SourceChoice>()
        .and_then(|k| Sources::open(&k))
        .and_then(|mut s| {
            let data = s.read().merged()?;
            let mut snap = Snapshot::new(0, SystemTime::now(), s.name(), data.types);
            snap.figures = data.figures;
            snap.profiling = data.profiling;
            Ok(snap)
        });
    match result {
        Ok(snap) => match report::render(&snap, format) {
            Ok(text) => print_out(&text),
            Err(e) => {
                print_err(&e.to_string());
                ExitCode::FAILURE
            }
        },
        Err(e) => {
            print_err(&e.to_string());
            ExitCode::FAILURE
        }
    }
}

/// `top`: replaced by memstat-top, from the directory of this program, with the same
/// arguments. The terminal library lives in that binary, so that `run` does not load it.
fn top(args: Vec<std::ffi::OsString>) -> ExitCode {
    let err = match top::program() {
        Ok(path) => {
            use std::os::unix::process::CommandExt;
            // exec only returns on failure.
            let e = std::process::Command::new(&path).args(args).exec();
            format!("top: cannot run {}: {e}", path.display())
        }
        Err(e) => format!("top: {e}"),
    };
    print_err(&err);
    ExitCode::FAILURE
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
