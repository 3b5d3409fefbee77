//! Upstream's `aws-cloud-controller-manager`, which `cargo xtask bench
//! --against-upstream` measures ours against, built from
//! `k8s.io/cloud-provider-aws` on the Go module proxy and cached by version
//! outside the clone like the control plane.
//!
//! v1.37.1 cannot be `go install`ed: its `go.mod` replaces
//! `github.com/google/cel-go` with a fork the proxy does not serve. It is
//! built inside a copy of its module with that `replace` line (and the
//! fork's `go.sum` lines) dropped, which resolves cel-go's own release of
//! the same version.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;

use crate::cmd::run;
use crate::tools::control_plane::{GoEnv, go};

/// The release: cloud-provider-aws's for the newest supported Kubernetes.
pub(crate) const UPSTREAM_AWS: &str = "v1.37.1";

const MODULE: &str = "k8s.io/cloud-provider-aws";
const PACKAGE: &str = "./cmd/aws-cloud-controller-manager";
const BINARY: &str = "aws-cloud-controller-manager";

/// The cached binary's path.
pub(crate) fn path() -> PathBuf {
    crate::tools::machine_cache()
        .join("control-plane")
        .join(format!("{BINARY}-{UPSTREAM_AWS}"))
        .join(BINARY)
}

/// Builds the binary unless the cache has it (about 6 CPU-minutes the
/// first time); returns its path.
pub(crate) fn ensure() -> anyhow::Result<PathBuf> {
    let binary = path();
    if binary.exists() {
        return Ok(binary);
    }
    let go = GoEnv::with_scratch(
        go()?,
        crate::tools::machine_cache().join("control-plane/upstream-aws.scratch"),
    );
    println!(
        "xtask: building {MODULE}@{UPSTREAM_AWS}'s {BINARY} from the Go module proxy (cached in \
         {}; about 6 CPU-minutes the first time)",
        binary.display()
    );
    let started = Instant::now();
    let built = build(&go, &binary);
    go.remove_caches();
    built?;
    println!(
        "xtask: built {BINARY} in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(binary)
}

fn build(go: &GoEnv, binary: &Path) -> anyhow::Result<()> {
    let info = go.download(&format!("{MODULE}@{UPSTREAM_AWS}"))?;
    let source = info["Dir"]
        .as_str()
        .context("`go mod download -json` named no directory")?;
    let scratch = std::env::temp_dir().join("rust-ccm-go-upstream-aws");
    let _ = std::fs::remove_dir_all(&scratch);
    run(std::process::Command::new("cp")
        .arg("-r")
        .arg(source)
        .arg(&scratch))?;
    run(std::process::Command::new("chmod")
        .args(["-R", "u+w"])
        .arg(&scratch))?;
    for (file, drop) in [
        ("go.mod", "github.com/google/cel-go =>"),
        ("go.sum", "github.com/cel-expr/cel-go "),
    ] {
        let path = scratch.join(file);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        std::fs::write(&path, without_lines(&text, drop))?;
    }
    let dir = binary.parent().context("a cache path has a parent")?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let partial = binary.with_extension("partial");
    run(go
        .command()
        .env("CGO_ENABLED", "0")
        .args([
            "build",
            "-trimpath",
            "-ldflags",
            &format!("-s -w -X k8s.io/component-base/version.gitVersion={UPSTREAM_AWS}"),
            "-o",
        ])
        .arg(&partial)
        .arg(PACKAGE)
        .current_dir(&scratch))
    .with_context(|| format!("building {MODULE}@{UPSTREAM_AWS}"))?;
    std::fs::rename(&partial, binary)?;
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(())
}

/// `text` without the lines containing `drop`.
fn without_lines(text: &str, drop: &str) -> String {
    text.lines()
        .filter(|line| !line.contains(drop))
        .map(|line| format!("{line}\n"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstreams_ccm_is_cached_by_its_release() {
        assert!(path().ends_with(format!(
            "control-plane/aws-cloud-controller-manager-{UPSTREAM_AWS}/aws-cloud-controller-manager"
        )));
    }

    #[test]
    fn only_the_unserved_cel_go_fork_is_dropped() {
        let go_mod = "module k8s.io/cloud-provider-aws\n\nrequire github.com/google/cel-go v0.31.0\n\n\
                      replace github.com/google/cel-go => github.com/cel-expr/cel-go v0.31.0\n";
        assert_eq!(
            without_lines(go_mod, "github.com/google/cel-go =>"),
            "module k8s.io/cloud-provider-aws\n\nrequire github.com/google/cel-go v0.31.0\n\n"
        );
    }
}
