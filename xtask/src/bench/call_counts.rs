//! `--only rancher`: Rancher API calls per operation, ours against
//! upstream's. The provider's `call_counts` test drives the Cattle emulator
//! and prints the table (the upstream column counted from
//! `rancher/rancher.go`); this runs it and writes the table to
//! `out/rancher.md`, and to docs/benchmarks/ with `publish`.

use std::path::Path;

use anyhow::Context;

use crate::cmd::{cargo, repo_root};
use crate::timestamp;

pub(super) fn run(out: &Path, commit: &str, publish: bool) -> anyhow::Result<()> {
    let output = cargo()
        .args([
            "test",
            "--quiet",
            "-p",
            "ccm-provider-rancher",
            "--test",
            "call_counts",
            "--",
            "--nocapture",
        ])
        .output()
        .context("running the Rancher call counts")?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    anyhow::ensure!(
        output.status.success(),
        "the Rancher call counts failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let table: Vec<&str> = stdout.lines().filter(|l| l.starts_with('|')).collect();
    anyhow::ensure!(
        table.len() > 2,
        "the call counts printed no table:\n{stdout}"
    );
    let text = format!(
        "# Rancher API calls per operation\n\nMeasured by `cargo xtask bench --only rancher` at {} (commit {commit}): the provider against the Cattle emulator over HTTP, each request counted. Upstream's column is what `rancher/rancher.go` sends for the same work, counted from its code with every wait answered at its first poll (the least it can send). The Service has one port; three nodes, then four.\n\n{}\n",
        timestamp::now(),
        table.join("\n")
    );
    std::fs::create_dir_all(out)?;
    let path = out.join("rancher.md");
    std::fs::write(&path, &text)?;
    println!("{text}\nreport: {}", path.display());
    if publish {
        let docs = repo_root().join("docs/benchmarks");
        std::fs::create_dir_all(&docs)?;
        std::fs::copy(&path, docs.join("rancher.md"))?;
        println!("published to {}", docs.join("rancher.md").display());
    }
    Ok(())
}
