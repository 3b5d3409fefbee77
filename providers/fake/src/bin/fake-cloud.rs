//! `fake-cloud`: the fake cloud as its own process, shared by CCM replicas
//! whose cloud-config says `[server] url = "http://127.0.0.1:PORT"`.
//!
//! ```text
//! fake-cloud [--listen 127.0.0.1:0] [--cloud-config FILE] [--seed N]
//! ```
//!
//! Prints `listening on http://ADDR` once it accepts connections. A bad
//! flag or config exits 64 with one line.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a command-line tool: its address on stdout, its one-line errors on stderr"
)]

use std::net::SocketAddr;
use std::process::ExitCode;

use ccm_cloud_provider::CloudConfig;
use ccm_provider_fake::{FakeCloud, FakeConfig, server};
use clap::Parser;

/// The fake cloud as its own process.
#[derive(Debug, Parser)]
#[command(name = "fake-cloud", version)]
struct Cli {
    /// Where to listen: a loopback address and port (0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// The fake cloud's TOML config (settings, instances, volumes).
    #[arg(long)]
    cloud_config: Option<std::path::PathBuf>,
    /// Seed of the server's injected faults.
    #[arg(long, default_value_t = 0x5eed)]
    seed: u64,
}

const EX_USAGE: u8 = 64;

fn usage(message: &str) -> ExitCode {
    eprintln!("fake-cloud: {message}");
    ExitCode::from(EX_USAGE)
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            let text = e.to_string();
            let line = text.lines().next().unwrap_or("invalid arguments");
            return usage(line.trim_start_matches("error: "));
        }
    };
    if !server::is_loopback(&cli.listen) {
        return usage(&format!(
            "--listen: {} is not a loopback address",
            cli.listen
        ));
    }
    let config = match &cli.cloud_config {
        None => FakeConfig::default(),
        Some(path) => {
            let contents = match std::fs::read_to_string(path) {
                Ok(contents) => contents,
                Err(e) => {
                    return usage(&format!("--cloud-config: reading {}: {e}", path.display()));
                }
            };
            match FakeConfig::parse(&CloudConfig::new(path, contents)) {
                Ok(config) if config.server.is_some() => {
                    return usage(&format!(
                        "--cloud-config: {}: [server] configures a client; the server's config holds settings, instances and volumes",
                        path.display()
                    ));
                }
                Ok(config) => config,
                Err(e) => return usage(&format!("--cloud-config: {e}")),
            }
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("fake-cloud: starting the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let listener = match tokio::net::TcpListener::bind(cli.listen).await {
            Ok(listener) => listener,
            Err(e) => return usage(&format!("--listen: binding {}: {e}", cli.listen)),
        };
        match listener.local_addr() {
            Ok(addr) => println!("listening on http://{addr}"),
            Err(e) => {
                eprintln!("fake-cloud: {e}");
                return ExitCode::FAILURE;
            }
        }
        tokio::select! {
            served = server::serve(listener, FakeCloud::new(config), cli.seed) => match served {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("fake-cloud: serving: {e}");
                    ExitCode::FAILURE
                }
            },
            _ = tokio::signal::ctrl_c() => ExitCode::SUCCESS,
        }
    })
}
