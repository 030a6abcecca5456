//! The options of `run` and `check-config`, generated from the settings' one definition
//! (`config::SETTINGS`): `--config`, one option per setting, and `--no-KEY` for a switch.

use super::SettingArgs;
use crate::config::{RawSettings, Rule, Setting, DEFAULT_CONFIG_PATH, SETTINGS};
use clap::{Arg, ArgAction, ArgMatches, Args, FromArgMatches};
use std::path::PathBuf;

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

/// A valued setting's help, with its default as the file and `check-config` write it.
fn with_default(s: &Setting) -> String {
    match s.default {
        Some(d) => format!("{} [default: {d}]", s.help),
        None => s.help.to_string(),
    }
}

impl Args for SettingArgs {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        let config = Arg::new("config")
            .long("config")
            .value_name("FILE")
            .value_parser(clap::value_parser!(PathBuf))
            .help(format!(
                "Configuration file (default: {DEFAULT_CONFIG_PATH}, if it exists)"
            ));
        SETTINGS
            .iter()
            .fold(cmd.arg(config), |cmd, s| match s.rule {
                Rule::Switch => {
                    let no = negated(s.key);
                    // The side that is the default says so.
                    let on = s.default == Some("true");
                    let mark = |is_default: bool, help: String| match is_default {
                        true => format!("{help} [default]"),
                        false => help,
                    };
                    cmd.arg(
                        Arg::new(s.key)
                            .long(s.key)
                            .action(ArgAction::SetTrue)
                            .help(mark(on, s.help.to_string()))
                            .overrides_with(no),
                    )
                    .arg(
                        Arg::new(no)
                            .long(no)
                            .action(ArgAction::SetTrue)
                            .help(mark(!on, negated_help(s.help)))
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
                        .help(with_default(s)),
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
