//! Go programs from the Go module proxy, built once per machine with
//! `go install <package>@<version>` into the machine's cache (see
//! [`crate::tools::machine_cache`]), by version: actionlint, which lints
//! the GitHub workflows, and oras, which pushes and lists OCI referrers.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;

use crate::cmd::run;
use crate::tools::control_plane::{GoEnv, go};

/// A Go program `go install` builds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GoTool {
    /// The package path of its `main`.
    pub(crate) package: &'static str,
    pub(crate) version: &'static str,
    /// The binary `go install` writes: the package path's last element.
    pub(crate) binary: &'static str,
    /// `-ldflags` beyond `-s -w` (a version stamped as its release does).
    pub(crate) ldflags: &'static str,
    /// The cache directory it lives in, under the machine cache.
    pub(crate) dir: &'static str,
    /// What the first build costs, for the line that announces it.
    pub(crate) cost: &'static str,
}

/// actionlint, the GitHub Actions workflow linter.
pub(crate) const ACTIONLINT: GoTool = GoTool {
    package: "github.com/rhysd/actionlint/cmd/actionlint",
    version: "v1.7.12",
    binary: "actionlint",
    ldflags: "",
    dir: "actionlint-v1.7.12",
    cost: "about a minute",
};

/// oras, which pushes an image's SBOM as its OCI referrer and lists
/// referrers (`oras discover`).
pub(crate) const ORAS: GoTool = GoTool {
    package: "oras.land/oras/cmd/oras",
    version: "v1.3.6",
    binary: "oras",
    ldflags: "",
    dir: "oras-v1.3.6",
    cost: "a minute or two",
};

impl GoTool {
    /// The cached binary.
    pub(crate) fn path(&self) -> PathBuf {
        crate::tools::machine_cache()
            .join(self.dir)
            .join(self.binary)
    }

    /// Builds the program unless the cache has it; returns its path.
    pub(crate) fn ensure(&self) -> anyhow::Result<PathBuf> {
        let binary = self.path();
        if binary.exists() {
            return Ok(binary);
        }
        let go = GoEnv::with_scratch(
            go()?,
            crate::tools::machine_cache().join(format!("{}.scratch", self.dir)),
        );
        println!(
            "xtask: building {}@{} from the Go module proxy (cached in {}; {} the first time)",
            self.package,
            self.version,
            binary.display(),
            self.cost
        );
        let started = Instant::now();
        let dir = binary.parent().context("a cache path has a parent")?;
        let partial = dir.join("partial");
        let built = (|| {
            std::fs::create_dir_all(&partial)
                .with_context(|| format!("creating {}", partial.display()))?;
            run(go
                .command()
                // `go install pkg@version` builds outside any module: no -mod.
                .env("GOFLAGS", "-modcacherw")
                .env("GOBIN", &partial)
                .env("CGO_ENABLED", "0")
                .args([
                    "install",
                    "-trimpath",
                    "-ldflags",
                    format!("-s -w {}", self.ldflags).trim(),
                    &format!("{}@{}", self.package, self.version),
                ]))
            .with_context(|| format!("building {}@{}", self.package, self.version))?;
            std::fs::rename(partial.join(self.binary), &binary)?;
            anyhow::Ok(())
        })();
        go.remove_caches();
        let _ = std::fs::remove_dir_all(&partial);
        built?;
        println!(
            "xtask: built {} in {:.0} s",
            self.binary,
            started.elapsed().as_secs_f64()
        );
        Ok(binary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_is_cached_by_version_under_its_binary_name() {
        let path = ACTIONLINT.path();
        assert!(path.ends_with("actionlint-v1.7.12/actionlint"), "{path:?}");
        assert!(ACTIONLINT.package.ends_with(ACTIONLINT.binary));
        assert!(ACTIONLINT.dir.ends_with(ACTIONLINT.version));
    }
}
