//! `cargo xtask upstream-flags`: regenerates `crates/app/upstream-flags.json`,
//! the flags and feature gates upstream's `cloud-controller-manager` accepts,
//! from upstream's own Go source (`upstream_flags/main.go`, built in a
//! throw-away module against each named `k8s.io/cloud-provider` release).
//! ccm-app's tests then fail if any of those flags is refused.

use std::path::PathBuf;
use std::process::Command;

use anyhow::Context;
use clap::Args;
use serde_json::{Value, json};

use crate::cmd::{repo_root, run};

/// The generator, one Go file.
const MAIN_GO: &str = include_str!("upstream_flags/main.go");

/// Regenerates crates/app/upstream-flags.json from upstream's Go source (needs Go).
#[derive(Debug, Args)]
pub(crate) struct Options {
    /// `k8s.io/cloud-provider` releases to cover, oldest first (each takes a
    /// few minutes to build the first time).
    #[arg(long, value_delimiter = ',', default_value = "v0.33.13,v0.37.2")]
    versions: Vec<String>,
}

pub(crate) fn main(options: &Options) -> anyhow::Result<()> {
    let go = crate::tools::control_plane::go()?;
    let mut releases = Vec::new();
    for version in &options.versions {
        releases.push(generate(&go, version)?);
    }
    let document = json!({
        "generated_by": "cargo xtask upstream-flags: options.NewCloudControllerManagerOptions().Flags(...) plus the global section (verflag, component-base logs with the JSON format registered, globalflag) and utilfeature.DefaultMutableFeatureGate, as k8s.io/cloud-provider's NewCloudControllerManagerCommand assembles them",
        "releases": releases,
    });
    let out = repo_root().join("crates/app/upstream-flags.json");
    std::fs::write(&out, serde_json::to_string_pretty(&document)? + "\n")
        .with_context(|| format!("writing {}", out.display()))?;
    println!("xtask: wrote {}", out.display());
    Ok(())
}

/// One release's flags and gates, gates sorted by name.
fn generate(go: &std::path::Path, version: &str) -> anyhow::Result<Value> {
    let scratch: PathBuf = std::env::temp_dir().join(format!("rust-ccm-upstream-flags-{version}"));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch)?;
    std::fs::write(
        scratch.join("go.mod"),
        "module ccm.local/upstreamflags\n\ngo 1.24\n",
    )?;
    std::fs::write(scratch.join("main.go"), MAIN_GO)?;
    let go_cmd = || {
        let mut cmd = Command::new(go);
        cmd.current_dir(&scratch).env("GOFLAGS", "-mod=mod");
        cmd
    };
    run(go_cmd().args(["get"]).args(
        [
            "k8s.io/cloud-provider/app",
            "k8s.io/component-base",
            "k8s.io/apiserver",
        ]
        .map(|m| format!("{m}@{version}")),
    ))
    .with_context(|| format!("fetching k8s.io/cloud-provider {version}"))?;
    run(go_cmd().args(["mod", "tidy"]))?;
    let source = format!("k8s.io/cloud-provider {version}");
    let output = go_cmd()
        .args(["run", ".", &source])
        .output()
        .context("running the generator")?;
    anyhow::ensure!(
        output.status.success(),
        "the generator failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut release: Value = serde_json::from_slice(&output.stdout)?;
    if let Some(gates) = release["feature_gates"].as_array_mut() {
        gates.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    }
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(release)
}
