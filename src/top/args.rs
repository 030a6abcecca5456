//! `top`'s command line.

use super::Options;
use clap::ValueEnum;
use std::time::Duration;

/// The options of `memstat-agentx top`.
#[derive(clap::Args, Debug)]
pub struct TopArgs {
    /// auto, or sources separated by commas (see Sources below)
    #[arg(long, default_value = "auto")]
    pub source: String,
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
    /// The column to sort by: its name or its header (default: in_use_bytes)
    #[arg(long, value_name = "COLUMN", default_value = "in_use_bytes")]
    pub sort: String,
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
    pub fn options(&self) -> Options {
        Options {
            source: self.source.clone(),
            iterations: self.iterations,
            delay: Duration::from_secs_f64(self.delay),
            json: matches!(self.format, TopFormat::Json),
            top: self.top,
            sort: self.sort.clone(),
            reverse: self.reverse,
        }
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
