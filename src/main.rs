//! The `memstat-agentx` command: `run` (the subagent), `dump` and `check-config`.

use clap::{Parser, Subcommand, ValueEnum};
use memstat_agentx::memstat::{Snapshot, Source, SourceKind};
use memstat_agentx::report::{self, Format};
use std::process::ExitCode;
use std::time::SystemTime;

#[derive(Parser)]
#[command(name = "memstat-agentx", version, about = "Kernel allocator statistics as MEMSTAT-MIB over AgentX")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum FormatArg {
    Table,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Print one snapshot of the allocator statistics.
    Dump {
        /// auto, linux, linux:PATH, freebsd or fixture:PATH
        #[arg(long, default_value = "auto")]
        source: String,
        #[arg(long, value_enum, default_value = "table")]
        format: FormatArg,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Dump { source, format } => dump(&source, format),
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
            // A closed pipe (`dump | head`) is not an error worth a panic.
            let _ = std::io::Write::write_all(&mut std::io::stdout(), report::render(&snap, f).as_bytes());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("memstat-agentx: {e}");
            ExitCode::FAILURE
        }
    }
}
