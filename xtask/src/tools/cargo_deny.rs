//! cargo-deny, from crates.io: checks the dependency graph's licenses,
//! banned crates and sources against `deny.toml`.
//!
//! Built with `cargo install --locked` into the machine's cache (see
//! [`crate::tools::machine_cache`]), by version, so only a machine's first
//! run pays the few minutes it takes to compile; its build directory is
//! scratch and removed.

use std::path::PathBuf;
use std::process::Command;

use anyhow::Context;

use crate::cmd::run;

/// The cargo-deny release `deny.toml` is written for.
const VERSION: &str = "0.20.2";

/// The cached binary.
pub(crate) fn binary() -> PathBuf {
    crate::tools::machine_cache()
        .join(format!("cargo-deny-{VERSION}"))
        .join("bin")
        .join("cargo-deny")
}

/// Builds cargo-deny unless the cache has it.
pub(crate) fn ensure() -> anyhow::Result<PathBuf> {
    let binary = binary();
    if binary.exists() {
        return Ok(binary);
    }
    let root = binary
        .parent()
        .and_then(|bin| bin.parent())
        .context("a cache path has a parent")?
        .to_path_buf();
    let scratch = crate::tools::machine_cache().join(format!("cargo-deny-{VERSION}.build"));
    println!(
        "xtask: building cargo-deny {VERSION} from crates.io (cached in {}; a few minutes the first time)",
        root.display()
    );
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let built = run(Command::new(cargo)
        .args([
            "install",
            "--locked",
            "--quiet",
            "cargo-deny",
            "--version",
            VERSION,
        ])
        .arg("--root")
        .arg(&root)
        .env("CARGO_TARGET_DIR", &scratch)
        .env("CARGO_INCREMENTAL", "0"));
    let _ = std::fs::remove_dir_all(&scratch);
    built?;
    Ok(binary)
}
