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

use ccm_test_apiserver::{AuthorizationMode, Error, TestApiServer};
use clap::Parser;
use clap::error::ErrorKind;

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
    /// Authenticate bearer tokens with kube-apiserver's static token file:
    /// CSV records token,user,uid[,"group1,group2"]. Unknown tokens get 401.
    /// The kubeconfig then uses the file's first system:masters token (or a
    /// token minted for system:apiserver when there is none). Without it,
    /// every request is an administrator.
    #[arg(long, value_name = "FILE", verbatim_doc_comment)]
    token_auth_file: Option<PathBuf>,
    /// Whether a request without a bearer token is system:anonymous (true,
    /// as kube-apiserver) or 401 (false). Only with --token-auth-file.
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set, verbatim_doc_comment)]
    anonymous_auth: bool,
    /// AlwaysAllow, or RBAC: kube-apiserver's RBAC authorizer over the
    /// stored Roles, ClusterRoles and bindings (system:masters may do
    /// anything; bootstrap roles such as cluster-admin and
    /// system:auth-delegator exist from the start).
    #[arg(long, value_name = "MODE", default_value_t = AuthorizationMode::AlwaysAllow, value_parser = authorization_mode, verbatim_doc_comment)]
    authorization_mode: AuthorizationMode,
    /// Publish this PEM bundle in ConfigMap
    /// kube-system/extension-apiserver-authentication (key client-ca-file).
    #[arg(long, value_name = "FILE", verbatim_doc_comment)]
    client_ca_file: Option<PathBuf>,
}

/// `--authorization-mode`'s value.
fn authorization_mode(text: &str) -> Result<AuthorizationMode, String> {
    text.parse()
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
        .seed_services(args.services)
        .anonymous_auth(args.anonymous_auth)
        .authorization_mode(args.authorization_mode);
    if let Some(path) = args.token_auth_file {
        builder = builder.token_auth_file(path);
    }
    if let Some(path) = args.client_ca_file {
        builder = builder.client_ca_file(path);
    }
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
            let bad_input = matches!(
                err,
                Error::TokenFile { .. } | Error::TokenFileRead { .. } | Error::ClientCaFile { .. }
            );
            return if bad_input {
                ExitCode::from(USAGE_ERROR)
            } else {
                ExitCode::FAILURE
            };
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
        let Ok(Command::Run(auth)) = args(&[
            "--token-auth-file=/tmp/tokens.csv",
            "--authorization-mode=RBAC",
            "--anonymous-auth=false",
            "--client-ca-file",
            "/tmp/ca.crt",
        ]) else {
            panic!("auth flags refused");
        };
        assert_eq!(auth.token_auth_file, Some(PathBuf::from("/tmp/tokens.csv")));
        assert_eq!(auth.authorization_mode, AuthorizationMode::Rbac);
        assert!(!auth.anonymous_auth);
        assert_eq!(auth.client_ca_file, Some(PathBuf::from("/tmp/ca.crt")));
    }

    #[test]
    fn nothing_seeded_and_an_ephemeral_port_by_default() {
        let defaults = Args {
            bind: None,
            kubeconfig: None,
            nodes: 0,
            services: 0,
            token_auth_file: None,
            anonymous_auth: true,
            authorization_mode: AuthorizationMode::AlwaysAllow,
            client_ca_file: None,
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
            (&["--authorization-mode=Node,RBAC"], "--authorization-mode"),
            (&["--anonymous-auth=maybe"], "--anonymous-auth"),
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
        assert!(text.contains("--token-auth-file <FILE>"), "{text}");
        assert!(text.contains("--authorization-mode <MODE>"), "{text}");
    }
}
