//! The `digitalocean-cloud-controller-manager` binary as a child process,
//! through the shared harness: exactly the environment the test gives it.

use std::path::PathBuf;
use std::process::Output;

pub(crate) use ccm_test_support::Ccm;
use ccm_test_support::{ApiServer, Launch, unique};

/// The binary under test.
pub(crate) const BINARY: &str = env!("CARGO_BIN_EXE_digitalocean-cloud-controller-manager");

/// A log file no other process of this test run writes.
fn log_path() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{}.log", unique("do-ccm")))
}

/// The binary with `env` as its whole environment and `--v=2` plus `args`.
fn launch(env: &[(&str, String)], args: &[String]) -> Launch {
    let mut launch = Launch::new(BINARY, log_path()).args(["--v=2".to_owned()]);
    for (key, value) in env {
        launch = launch.env(key, value.clone());
    }
    launch.args(args.iter().cloned())
}

/// Runs the binary to its exit (within 30 s) and answers its output.
pub(crate) async fn run_to_exit(env: &[(&str, String)], args: &[&str]) -> anyhow::Result<Output> {
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    launch(env, &args).output().await
}

/// Starts the binary against `api` (with the chart's RBAC on a real
/// kube-apiserver) and waits until it is ready.
pub(crate) async fn start(
    api: &ApiServer,
    env: &[(&str, String)],
    args: &[String],
) -> anyhow::Result<Ccm> {
    let credentials = api.ccm_credentials("digitalocean").await?;
    launch(env, args).credentials(&credentials).start().await
}
