//! Stoplight Prism, the OpenAPI validating proxy the DigitalOcean provider's
//! contract tests run in front of their fake API: npm `@stoplight/prism-cli`
//! under `target/tools/prism`, whose `node_modules/.bin/prism` the tests
//! start. Node.js and npm come from Debian when the machine lacks them.

use std::process::Command;

use anyhow::Context;

use crate::cmd::run;
use crate::tools::{self, apt};

/// The release the tests are written against; 5.14 is the last that runs
/// on Node 20 (later ones need Node 24).
const VERSION: &str = "5.14.2";
const PACKAGE: &str = "@stoplight/prism-cli";

pub(crate) fn ensure() -> anyhow::Result<()> {
    let dir = tools::dir("prism");
    let bin = dir.join("node_modules").join(".bin").join("prism");
    let manifest = dir
        .join("node_modules")
        .join("@stoplight")
        .join("prism-cli")
        .join("package.json");
    let installed = std::fs::read_to_string(&manifest).unwrap_or_default();
    if bin.exists() && installed.contains(&format!("\"version\": \"{VERSION}\"")) {
        return Ok(());
    }
    if !apt::has("npm") {
        apt::install(&["nodejs", "npm"])?;
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("could not create {}", dir.display()))?;
    run(Command::new("npm")
        .args([
            "install",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            "--prefix",
        ])
        .arg(&dir)
        .arg(format!("{PACKAGE}@{VERSION}")))
}
