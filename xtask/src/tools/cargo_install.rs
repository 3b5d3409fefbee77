//! Cargo tools from crates.io that take minutes to compile: cargo-auditable
//! (embeds each image binary's dependency list, which its SBOM is made
//! from).
//!
//! Each is built with `cargo install --locked` into the machine's cache (see
//! [`crate::tools::machine_cache`]), by version, so only a machine's first
//! run pays for the compile; the build directory is scratch and removed.

use std::path::PathBuf;
use std::process::Command;

use anyhow::Context;

use crate::cmd::run;

/// A tool `cargo install` builds: its crate, pinned version and binary.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tool {
    pub(crate) krate: &'static str,
    pub(crate) version: &'static str,
    pub(crate) binary: &'static str,
}

/// The cargo-auditable release image binaries are built with; its data
/// format is the one `auditable-info` (in xtask) reads.
pub(crate) const CARGO_AUDITABLE: Tool = Tool {
    krate: "cargo-auditable",
    version: "0.7.7",
    binary: "cargo-auditable",
};

impl Tool {
    /// `<cache>/<crate>-<version>`: `cargo install`'s root.
    fn root(self) -> PathBuf {
        crate::tools::machine_cache().join(format!("{}-{}", self.krate, self.version))
    }

    /// The cached binary.
    pub(crate) fn path(self) -> PathBuf {
        self.root().join("bin").join(self.binary)
    }

    /// Builds the tool unless the cache has it; returns its path.
    pub(crate) fn ensure(self) -> anyhow::Result<PathBuf> {
        let binary = self.path();
        if binary.exists() {
            return Ok(binary);
        }
        let root = self.root();
        let scratch =
            crate::tools::machine_cache().join(format!("{}-{}.build", self.krate, self.version));
        println!(
            "xtask: building {} {} from crates.io (cached in {}; minutes the first time)",
            self.krate,
            self.version,
            root.display()
        );
        std::fs::create_dir_all(&root).with_context(|| format!("creating {}", root.display()))?;
        let built = run(Command::new(crate::cmd::cargo_program())
            .args(["install", "--locked", "--quiet", self.krate, "--version"])
            .arg(self.version)
            .arg("--root")
            .arg(&root)
            .env("CARGO_TARGET_DIR", &scratch)
            .env("CARGO_INCREMENTAL", "0"));
        let _ = std::fs::remove_dir_all(&scratch);
        built?;
        Ok(binary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_tool_has_its_own_versioned_place_in_the_machine_cache() {
        let auditable = CARGO_AUDITABLE.path();
        assert!(
            auditable.ends_with("cargo-auditable-0.7.7/bin/cargo-auditable"),
            "{auditable:?}"
        );
        assert!(auditable.starts_with(crate::tools::machine_cache()));
    }
}
