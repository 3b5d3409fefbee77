//! `real-cluster`: the real control plane (etcd and kube-apiserver, built
//! by `cargo xtask`) on loopback until SIGINT or SIGTERM. What `cargo xtask
//! cluster` runs.
//!
//! Usage: `real-cluster KUBECONFIG_OUT` — writes the administrator's
//! kubeconfig there once kube-apiserver is ready, and prints its path.

use std::io::Write as _;
use std::process::ExitCode;

use ccm_test_support::ControlPlane;
use tokio::signal::unix::{SignalKind, signal};

#[tokio::main]
async fn main() -> ExitCode {
    let Some(out) = std::env::args_os().nth(1) else {
        #[allow(clippy::print_stderr, reason = "usage error")]
        {
            eprintln!("usage: real-cluster KUBECONFIG_OUT");
        }
        return ExitCode::from(64);
    };
    match run(std::path::PathBuf::from(out)).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            #[allow(clippy::print_stderr, reason = "the reason it stopped")]
            {
                eprintln!("real-cluster: {err:#}");
            }
            ExitCode::FAILURE
        }
    }
}

async fn run(out: std::path::PathBuf) -> anyhow::Result<()> {
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    let started = std::time::Instant::now();
    let plane = ControlPlane::start().await?;
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let partial = out.with_extension("partial");
    std::fs::copy(plane.kubeconfig_path(), &partial)?;
    std::fs::rename(&partial, &out)?;
    // Whoever started us may stop reading: a closed pipe is no reason to
    // fail (or to leave the control plane behind).
    let _ = writeln!(
        std::io::stdout(),
        "real-cluster: kube-apiserver ready at {} in {:.1} s; kubeconfig {}",
        plane.url(),
        started.elapsed().as_secs_f64(),
        out.display()
    );
    tokio::select! {
        _ = interrupt.recv() => {}
        _ = terminate.recv() => {}
    }
    let _ = std::fs::remove_file(&out);
    drop(plane);
    let _ = writeln!(std::io::stdout(), "real-cluster: stopped");
    Ok(())
}
