//! `memstat-top`: the live view of kernel memory (`memstat-agentx top` runs it). A binary of
//! its own so that the daemon, `memstat-agentx run`, does not carry the terminal library:
//! linked into one binary it cost `run` some 0.4 MiB of resident memory (BENCHMARKS.md, "`top`
//! at a 1 s interval, and what `run` pays for it").

use clap::Parser;
use memstat_agentx::memstat::source;
use memstat_agentx::top::{self, Ended, TopArgs};
use std::io::{IsTerminal, Write};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "memstat-top",
    version,
    about = "A top-like view of kernel memory: the overview, each allocator's totals, and each type's rates",
    after_help = source::help_text()
)]
struct Cli {
    #[command(flatten)]
    args: TopArgs,
}

fn main() -> ExitCode {
    let Cli { args } = Cli::parse();
    // On a terminal, the full-screen view; with -b, or into a pipe, batch frames: a pipe
    // never gets escape codes.
    let ended =
        args.options().and_then(
            |options| match args.batch || !std::io::stdout().is_terminal() {
                true => top::batch(&options, &mut std::io::stdout().lock()).map(|()| Ended::Quit),
                false => top::interactive(&options),
            },
        );
    match ended {
        Ok(Ended::Quit) => ExitCode::SUCCESS,
        // Ended by a signal, with the terminal restored: the shell's status for it.
        Ok(Ended::Signal(n)) => ExitCode::from(128u8.saturating_add(n as u8)),
        Err(e) => {
            // Never eprintln!: it panics when stderr is broken.
            let _ = writeln!(std::io::stderr().lock(), "memstat-top: {e}");
            ExitCode::from(e.exit_status())
        }
    }
}
