//! `chaos`: the reliability suites, run by `cargo xtask chaos`.
//!
//! Each suite starts the test API server in this process, the fake cloud's
//! server (`fake-cloud`) and CCM replicas (`fake-cloud-controller-manager`)
//! as child processes on loopback, drives a scenario, judges the outcome,
//! prints its figures and writes them as JSON to `--out`. It exits 1 when
//! a goal is missed.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a command-line tool: its figures on stdout"
)]

mod cloud;
mod env;
mod invariants;
mod lease;
mod scenario;
mod suites;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use env::Binaries;

/// The reliability suites.
#[derive(Debug, Parser)]
#[command(name = "chaos")]
struct Cli {
    /// The suite: crash-points, failover, partition or faults.
    suite: Suite,
    /// The bounded variant `cargo xtask ci` runs.
    #[arg(long)]
    quick: bool,
    /// The CCM binary (`fake-cloud-controller-manager`).
    #[arg(long)]
    ccm: PathBuf,
    /// The fake cloud's server binary (`fake-cloud`).
    #[arg(long)]
    fake_cloud: PathBuf,
    /// Where to write `<suite>.json`.
    #[arg(long)]
    out: PathBuf,
    /// Crash points: only this k (to replay one).
    #[arg(long)]
    only: Option<u64>,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Suite {
    CrashPoints,
    Failover,
    Partition,
    Faults,
}

impl Suite {
    fn name(self) -> &'static str {
        match self {
            Self::CrashPoints => "crash-points",
            Self::Failover => "failover",
            Self::Partition => "partition",
            Self::Faults => "faults",
        }
    }
}

async fn run(cli: &Cli) -> anyhow::Result<serde_json::Value> {
    let binaries = Binaries {
        ccm: cli.ccm.clone(),
        fake_cloud: cli.fake_cloud.clone(),
    };
    match (cli.suite, cli.quick) {
        (Suite::CrashPoints, quick) => {
            let points = if quick { 6 } else { 100 };
            suites::crash_points::run(&binaries, points, quick, cli.only).await
        }
        (Suite::Failover, quick) => {
            suites::failover::run(&binaries, if quick { 6 } else { 100 }).await
        }
        (Suite::Partition, quick) => {
            suites::partition::run(&binaries, if quick { 1 } else { 3 }).await
        }
        (Suite::Faults, quick) => {
            let window = Duration::from_secs(if quick { 20 } else { 60 });
            suites::faults::run(&binaries, window).await
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("chaos: {e}");
            return ExitCode::FAILURE;
        }
    };
    let started = std::time::Instant::now();
    let figures = match runtime.block_on(run(&cli)) {
        Ok(figures) => figures,
        Err(e) => {
            eprintln!("chaos {}: {e:#}", cli.suite.name());
            return ExitCode::FAILURE;
        }
    };
    let mut figures = figures;
    figures["quick"] = serde_json::json!(cli.quick);
    figures["seconds"] = serde_json::json!(started.elapsed().as_secs_f64());
    let path = cli.out.join(format!("{}.json", cli.suite.name()));
    let written = std::fs::create_dir_all(&cli.out).and_then(|()| {
        std::fs::write(
            &path,
            serde_json::to_string_pretty(&figures).unwrap_or_default(),
        )
    });
    if let Err(e) = written {
        eprintln!("chaos: writing {}: {e}", path.display());
        return ExitCode::FAILURE;
    }
    if figures["passed"] == true {
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "chaos {}: a goal was missed (see {})",
            cli.suite.name(),
            path.display()
        );
        ExitCode::FAILURE
    }
}
