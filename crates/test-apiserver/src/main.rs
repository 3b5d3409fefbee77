//! `test-apiserver`: runs the in-memory Kubernetes API server until
//! interrupted, printing its URL and writing a kubeconfig for it.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a command-line tool talks to its terminal"
)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use clap::error::ErrorKind;
use test_apiserver::TestApiServer;

/// The exit code of a usage error (`EX_USAGE` from sysexits.h).
const USAGE_ERROR: u8 = 64;

/// Runs an in-memory Kubernetes API server over plain HTTP on loopback until
/// interrupted.
///
/// Prints its URL on the first line of standard output.
#[derive(Debug, PartialEq, Parser)]
#[command(name = "test-apiserver")]
struct Args {
    /// Listen on ADDR, a loopback address (default 127.0.0.1:0, an ephemeral port).
    #[arg(long, value_name = "ADDR", value_parser = loopback)]
    bind: Option<SocketAddr>,
    /// Write a kubeconfig for the server to PATH (default: a temporary file, removed on exit).
    #[arg(long, value_name = "PATH")]
    kubeconfig: Option<PathBuf>,
    /// Seed nodes node-1..node-N as fresh kubelet registrations (uninitialized taint).
    #[arg(long, value_name = "N", default_value_t = 0)]
    nodes: usize,
    /// Seed LoadBalancer Services lb-1..lb-M in namespace default.
    #[arg(long, value_name = "M", default_value_t = 0)]
    services: usize,
}

/// What the command line asks for.
#[derive(Debug, PartialEq)]
enum Command {
    Run(Args),
    /// `--help`: the text to print.
    Help(String),
}

/// Parses `argv` (the program name first).
///
/// # Errors
/// One line naming the flag and what is wrong with it.
fn parse<I, T>(argv: I) -> Result<Command, String>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    match Args::try_parse_from(argv) {
        Ok(args) => Ok(Command::Run(args)),
        Err(err) if err.kind() == ErrorKind::DisplayHelp => {
            Ok(Command::Help(err.render().to_string()))
        }
        Err(err) => Err(one_line(&err)),
    }
}

/// clap's error as one line: its first line, without the `error: ` prefix.
fn one_line(err: &clap::Error) -> String {
    let rendered = err.render().to_string();
    let first = rendered.lines().next().unwrap_or_default();
    first.strip_prefix("error: ").unwrap_or(first).to_owned()
}

/// `--bind`'s value: a socket address on loopback.
fn loopback(text: &str) -> Result<SocketAddr, String> {
    let addr: SocketAddr = text
        .parse()
        .map_err(|_| "not an address like 127.0.0.1:8080".to_owned())?;
    if !addr.ip().is_loopback() {
        return Err("not a loopback address".to_owned());
    }
    Ok(addr)
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = match parse(std::env::args_os()) {
        Ok(Command::Run(args)) => args,
        Ok(Command::Help(text)) => {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("test-apiserver: {message} (see --help)");
            return ExitCode::from(USAGE_ERROR);
        }
    };
    let mut builder = TestApiServer::builder()
        .seed_nodes(args.nodes)
        .seed_services(args.services);
    if let Some(bind) = args.bind {
        builder = builder.bind(bind);
    }
    if let Some(path) = args.kubeconfig {
        builder = builder.kubeconfig_path(path);
    }
    let server = match builder.start().await {
        Ok(server) => server,
        Err(err) => {
            let mut message = err.to_string();
            let mut source = std::error::Error::source(&err);
            while let Some(cause) = source {
                message.push_str(&format!(": {cause}"));
                source = cause.source();
            }
            eprintln!("test-apiserver: {message}");
            return ExitCode::FAILURE;
        }
    };
    println!("{}", server.url());
    eprintln!(
        "test-apiserver: kubeconfig {}",
        server.kubeconfig_path().display()
    );
    wait_for_termination().await;
    drop(server);
    ExitCode::SUCCESS
}

/// Ctrl-C or SIGTERM.
async fn wait_for_termination() {
    let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
    else {
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Result<Command, String> {
        parse(std::iter::once("test-apiserver").chain(list.iter().copied()))
    }

    #[test]
    fn flags_in_both_forms() {
        let parsed = args(&[
            "--bind",
            "127.0.0.1:8080",
            "--nodes=3",
            "--services",
            "2",
            "--kubeconfig=/tmp/k",
        ])
        .expect("valid");
        let Command::Run(parsed) = parsed else {
            panic!("not a run: {parsed:?}");
        };
        assert_eq!(parsed.bind, Some("127.0.0.1:8080".parse().expect("addr")));
        assert_eq!((parsed.nodes, parsed.services), (3, 2));
        assert_eq!(parsed.kubeconfig, Some(PathBuf::from("/tmp/k")));
    }

    #[test]
    fn nothing_seeded_and_an_ephemeral_port_by_default() {
        let defaults = Args {
            bind: None,
            kubeconfig: None,
            nodes: 0,
            services: 0,
        };
        assert_eq!(args(&[]), Ok(Command::Run(defaults)));
    }

    #[test]
    fn bad_flags_are_one_line_errors_naming_the_flag() {
        for (bad, flag) in [
            (&["--nodes", "x"][..], "--nodes"),
            (&["--services=-1"], "--services"),
            (&["--bind", "0.0.0.0:1"], "--bind"),
            (&["--bind=localhost"], "--bind"),
            (&["--frobnicate"], "--frobnicate"),
            (&["--nodes"], "--nodes"),
        ] {
            let message = args(bad).expect_err("bad");
            assert!(!message.contains('\n'), "{message}");
            assert!(message.contains(flag), "{bad:?}: {message}");
        }
        assert!(
            args(&["--bind", "0.0.0.0:1"])
                .expect_err("bad")
                .contains("not a loopback address")
        );
    }

    #[test]
    fn help_is_not_an_error() {
        let Ok(Command::Help(text)) = args(&["--help"]) else {
            panic!("--help is not help");
        };
        assert!(text.contains("--nodes <N>"), "{text}");
    }
}
