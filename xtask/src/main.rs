//! Project tasks, run as `cargo xtask <task>`.
//!
//! One module per task; `main` only dispatches. Tasks shell out to cargo and
//! the project's binaries rather than linking them, so xtask itself builds in
//! seconds and never forks the workspace's dependency features.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "xtask talks to a terminal"
)]
#![allow(
    clippy::disallowed_methods,
    reason = "xtask is synchronous: a blocking sleep blocks no async worker"
)]

mod artifacts;
mod bench;
mod chaos;
mod chart;
mod ci;
mod cluster;
mod cmd;
mod dependency_policy;
mod digest;
mod disk;
mod e2e;
mod http;
mod image;
mod monitoring;
mod new_provider;
mod processes;
mod release;
mod sandbox;
mod test_run;
mod timestamp;
mod tools;
mod upstream_flags;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The exit code of a usage error (`EX_USAGE` from sysexits.h).
const USAGE_ERROR: u8 = 64;

/// Project tasks, run as `cargo xtask <task>`.
#[derive(Debug, Parser)]
#[command(
    name = "xtask",
    bin_name = "cargo xtask",
    subcommand_value_name = "TASK",
    subcommand_help_heading = "Tasks",
    arg_required_else_help = true,
    after_help = "`cargo xtask <task> --help` describes a task's options."
)]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

/// A task and its options; each task's module documents it.
#[derive(Debug, Subcommand)]
enum Task {
    Sandbox(sandbox::Options),
    Image(image::Options),
    Chart(chart::Options),
    E2e(e2e::Options),
    Bench(bench::Options),
    Cluster(cluster::Options),
    Monitoring(monitoring::Options),
    Chaos(chaos::Options),
    NewProvider(new_provider::Options),
    Release(release::Options),
    Ci(ci::Options),
    UpstreamFlags(upstream_flags::Options),
}

impl Task {
    /// The name it is run by, for error messages.
    fn name(&self) -> &'static str {
        match self {
            Self::Sandbox(_) => "sandbox",
            Self::Image(_) => "image",
            Self::Chart(_) => "chart",
            Self::E2e(_) => "e2e",
            Self::Bench(_) => "bench",
            Self::Cluster(_) => "cluster",
            Self::Monitoring(_) => "monitoring",
            Self::Chaos(_) => "chaos",
            Self::NewProvider(_) => "new-provider",
            Self::Release(_) => "release",
            Self::Ci(_) => "ci",
            Self::UpstreamFlags(_) => "upstream-flags",
        }
    }

    fn run(self) -> anyhow::Result<()> {
        match self {
            Self::Sandbox(options) => sandbox::main(&options),
            Self::Image(options) => image::main(&options),
            Self::Chart(options) => chart::main(&options),
            Self::E2e(options) => e2e::main(&options),
            Self::Bench(options) => bench::main(&options),
            Self::Cluster(options) => cluster::main(&options),
            Self::Monitoring(options) => monitoring::main(&options),
            Self::Chaos(options) => chaos::main(&options),
            Self::NewProvider(options) => new_provider::main(&options),
            Self::Release(options) => release::main(&options),
            Self::Ci(options) => ci::main(&options),
            Self::UpstreamFlags(options) => upstream_flags::main(&options),
        }
    }
}

/// Parses `args` (the program name first) as `cargo xtask` does, and runs
/// the task they name: how one task runs another, exactly as a user would.
fn run_task<I, T>(args: I) -> anyhow::Result<()>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    Cli::try_parse_from(args)?.task.run()
}

/// The task `cargo xtask <args>` runs, as parsed.
#[cfg(test)]
fn parse_task(args: &[&str]) -> Result<Task, clap::Error> {
    Cli::try_parse_from(std::iter::once("xtask").chain(args.iter().copied())).map(|cli| cli.task)
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            // Help goes to stdout and succeeds; anything else is a usage
            // error (clap's own exit code would be 2).
            let _ = err.print();
            return if err.use_stderr() {
                ExitCode::from(USAGE_ERROR)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    let name = cli.task.name();
    match cli.task.run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) if err.downcast_ref::<new_provider::Refused>().is_some() => {
            eprintln!("xtask {name}: {err}");
            ExitCode::from(USAGE_ERROR)
        }
        Err(err) => {
            eprintln!("xtask {name}: {err:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;
    use clap::error::ErrorKind;

    use super::*;

    #[test]
    fn the_command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn an_unknown_task_or_none_is_a_usage_error() {
        let unknown = Cli::try_parse_from(["xtask", "deploy"]).unwrap_err();
        assert!(unknown.use_stderr());
        assert_eq!(unknown.kind(), ErrorKind::InvalidSubcommand);
        let none = Cli::try_parse_from(["xtask"]).unwrap_err();
        assert!(none.use_stderr(), "{none}");
    }

    #[test]
    fn help_is_not_an_error() {
        for args in [
            &["xtask", "--help"][..],
            &["xtask", "help"],
            &["xtask", "sandbox", "--help"],
        ] {
            let help = Cli::try_parse_from(args).unwrap_err();
            assert!(!help.use_stderr(), "{args:?}");
        }
    }
}
