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

use test_apiserver::TestApiServer;

const USAGE: &str = "usage: test-apiserver [--bind 127.0.0.1:PORT] [--kubeconfig PATH] [--nodes N] [--services M]

Runs an in-memory Kubernetes API server over plain HTTP on loopback until
interrupted. Prints its URL on the first line of standard output.

  --bind ADDR        listen on ADDR, a loopback address (default 127.0.0.1:0, an ephemeral port)
  --kubeconfig PATH  write a kubeconfig for the server to PATH (default: a temporary file, removed on exit)
  --nodes N          seed nodes node-1..node-N as fresh kubelet registrations (uninitialized taint)
  --services M       seed LoadBalancer Services lb-1..lb-M in namespace default";

/// The command line, parsed.
#[derive(Debug, Default, PartialEq)]
struct Args {
    bind: Option<SocketAddr>,
    kubeconfig: Option<PathBuf>,
    nodes: usize,
    services: usize,
}

/// Parses the flags; `Ok(None)` asks for help.
fn parse(args: &[String]) -> Result<Option<Args>, String> {
    let mut parsed = Args::default();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_owned())),
            _ => (arg.as_str(), None),
        };
        if matches!(flag, "-h" | "--help") {
            return Ok(None);
        }
        let mut value = || {
            inline
                .clone()
                .or_else(|| rest.next().cloned())
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match flag {
            "--bind" => {
                let text = value()?;
                let addr: SocketAddr = text.parse().map_err(|_| {
                    format!("--bind {text:?} is not an address like 127.0.0.1:8080")
                })?;
                if !addr.ip().is_loopback() {
                    return Err(format!("--bind {addr} is not a loopback address"));
                }
                parsed.bind = Some(addr);
            }
            "--kubeconfig" => parsed.kubeconfig = Some(PathBuf::from(value()?)),
            "--nodes" => parsed.nodes = count(flag, &value()?)?,
            "--services" => parsed.services = count(flag, &value()?)?,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(Some(parsed))
}

fn count(flag: &str, text: &str) -> Result<usize, String> {
    text.parse()
        .map_err(|_| format!("{flag} {text:?} is not a non-negative number"))
}

#[tokio::main]
async fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let args = match parse(&argv) {
        Ok(Some(args)) => args,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("test-apiserver: {message} (see --help)");
            return ExitCode::from(64);
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

    fn args(list: &[&str]) -> Result<Option<Args>, String> {
        parse(&list.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn flags_in_both_forms() {
        let parsed = args(&[
            "--bind",
            "127.0.0.1:8080",
            "--nodes=3",
            "--services",
            "2",
            "--kubeconfig",
            "/tmp/k",
        ])
        .expect("valid")
        .expect("not help");
        assert_eq!(parsed.bind, Some("127.0.0.1:8080".parse().expect("addr")));
        assert_eq!((parsed.nodes, parsed.services), (3, 2));
        assert_eq!(parsed.kubeconfig, Some(PathBuf::from("/tmp/k")));
    }

    #[test]
    fn bad_flags_are_one_line_errors() {
        for bad in [
            &["--nodes", "x"][..],
            &["--bind", "0.0.0.0:1"],
            &["--frobnicate"],
            &["--nodes"],
        ] {
            let message = args(bad).expect_err("bad");
            assert!(!message.contains('\n'), "{message}");
        }
        assert_eq!(args(&["--help"]), Ok(None));
    }
}
