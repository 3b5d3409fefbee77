//! `upstream-bench`: upstream's `aws-cloud-controller-manager` and ours,
//! run in turn on identical setups and measured side by side.
//!
//! Each run gets a fresh real control plane (kube-apiserver with an audit
//! log of every request, etcd), an empty moto with the same seeded estate
//! behind a counting proxy, and the same N nodes registered as kubelets
//! register them under `--cloud-provider=external`. The CCM starts; when
//! every node is initialized one NLB Service is created; when the Service
//! has its load balancer and every pod CIDR its route, a quiet window
//! follows. Cloud calls (by action), API requests (by verb, resource and
//! subresource), Events, peak RSS and CPU seconds are counted per phase,
//! and what the binary left behind (node labels and conditions, the
//! Service's status, the cloud resources' settings and tags) is compared
//! with the other's; a difference that is not known fails the run against
//! a baseline.
//!
//! `cargo xtask bench --against-upstream` builds both binaries and runs
//! this inside a network namespace with only loopback; run by hand, it
//! refuses to start unless told the namespace is private
//! (`--isolated`), since an AWS SDK may reach for a real endpoint.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a command-line tool: the table on stdout, progress on stderr"
)]

mod cluster;
mod differences;
mod measure;
mod outcome;
mod report;
mod run;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Parser;

use crate::report::Figures;

/// The runner's command line.
#[derive(Debug, Parser)]
#[command(name = "upstream-bench")]
struct Args {
    /// A binary to run, as `NAME=PATH` (`upstream=…`, `ours=…`), in order.
    #[arg(long = "binary", value_parser = binary, required = true)]
    binaries: Vec<(String, PathBuf)>,
    /// Nodes (and instances) in the cluster.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u16).range(1..=1000))]
    nodes: u16,
    /// The quiet window after the Service and the routes are done.
    #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u64).range(0..=3600))]
    quiet_seconds: u64,
    /// Where each binary's figures (`NAME.json`), logs and the table go.
    #[arg(long)]
    out: PathBuf,
    /// Another run's figures (a `NAME.json`) to hold the last binary to:
    /// exits 1 naming every count above the baseline's.
    #[arg(long)]
    baseline: Option<PathBuf>,
    /// The process runs in a network namespace with only loopback.
    #[arg(long)]
    isolated: bool,
}

fn binary(value: &str) -> Result<(String, PathBuf), String> {
    let (name, path) = value
        .split_once('=')
        .ok_or_else(|| format!("`{value}` is not NAME=PATH"))?;
    let path = PathBuf::from(path);
    if !path.is_file() {
        return Err(format!("{} is not a file", path.display()));
    }
    Ok((name.to_owned(), path))
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    match bench(&args).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("upstream-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs every binary; whether the last one kept within the baseline.
async fn bench(args: &Args) -> anyhow::Result<bool> {
    if !args.isolated {
        bail!(
            "refusing to run outside a private network namespace (pass --isolated inside one, as `cargo xtask bench --against-upstream` does): an AWS SDK may reach for a real endpoint"
        );
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let setup = run::Setup {
        nodes: usize::from(args.nodes),
        quiet: Duration::from_secs(args.quiet_seconds),
        out: args.out.clone(),
    };
    let mut all = Vec::new();
    for (name, path) in &args.binaries {
        eprintln!("upstream-bench: running {name} ({})", path.display());
        let figures = run::run(&setup, name, path)
            .await
            .with_context(|| format!("the {name} run"))?;
        let file = args.out.join(format!("{name}.json"));
        std::fs::write(&file, serde_json::to_string_pretty(&figures.to_json())?)
            .with_context(|| format!("writing {}", file.display()))?;
        all.push(figures);
    }
    if let Some(path) = &args.baseline {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the baseline {}", path.display()))?;
        let json =
            serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))?;
        let baseline = Figures::from_json(&json)
            .with_context(|| format!("{}: not a run's figures", path.display()))?;
        all.insert(0, baseline);
    }
    let table = report::table(&all);
    let file = args.out.join("table.md");
    std::fs::write(&file, &table).with_context(|| format!("writing {}", file.display()))?;
    print!("{table}");
    if args.baseline.is_some()
        && let [baseline, .., last] = &all[..]
    {
        let regressions = report::regressions(baseline, last);
        for line in &regressions {
            eprintln!("upstream-bench: {line}");
        }
        return Ok(regressions.is_empty());
    }
    Ok(true)
}
