//! `cargo xtask e2e`: the end-to-end suites — the real binaries against the
//! test API server and each cloud's emulator — and, when `KUBECONFIG` is set,
//! the same suites against that real cluster.

use crate::cmd::{cargo, repo_root, run};

/// The end-to-end suites; with KUBECONFIG set, also against that real cluster.
///
/// Runs every end-to-end suite (the integration tests of each cmd/ binary: the
/// fake cloud in process, AWS against moto, DigitalOcean against its fake API
/// behind Prism) against the embedded test API server. When KUBECONFIG is set,
/// also runs the variants that need a real cluster (ignored by default)
/// against it, and the test API server's contract suite against it, so its
/// expectations stay honest. `cargo xtask cluster --suites` runs them against
/// a real kube-apiserver and etcd started on loopback instead, with each CCM
/// under the chart's RBAC.
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub(crate) struct Options {}

/// The binaries' packages with end-to-end suites in this checkout.
fn binaries() -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(repo_root().join("cmd")) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter(|e| e.path().join("tests").is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

pub(crate) fn main(Options {}: &Options) -> anyhow::Result<()> {
    crate::tools::ensure_e2e()?;
    let real_cluster = std::env::var_os("KUBECONFIG").is_some_and(|k| !k.is_empty());
    let mut test = cargo();
    test.args(["test", "--locked"]);
    for package in binaries() {
        test.args(["-p", &package]);
    }
    test.arg("--tests");
    if real_cluster {
        test.args(["--", "--include-ignored"]);
    }
    run(&mut test)?;
    if real_cluster {
        run(cargo().args([
            "test",
            "--locked",
            "-p",
            "ccm-test-apiserver",
            "--",
            "--ignored",
        ]))?;
    }
    Ok(())
}
