//! The static binary an image runs: a release build for musl.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::bail;

use crate::cmd::{cargo, repo_root, run, target_dir};
use crate::image::oci::Metadata;
use crate::timestamp::rfc3339;
use crate::tools::musl::TARGET;

/// The provider's binary, also its Cargo package: `<provider>-cloud-controller-manager`.
pub(crate) fn package(provider: &str) -> String {
    format!("{provider}-cloud-controller-manager")
}

/// Builds the provider's binary and returns its path and how long cargo took.
///
/// Every provider's binary is built in the one cargo invocation, so their
/// dependencies are resolved with one feature set and compiled once for all
/// three images (a `-p` of one binary alone would rebuild most of the tree
/// for each: cold, about 9 minutes of the images' 28 on 2 cores).
///
/// C code (aws-lc-sys, under rustls) is compiled with `musl-gcc`. Paths of
/// the checkout and of cargo's registry are remapped, so the binary does not
/// depend on where the repository was cloned. The flags apply to the musl
/// target only (`CARGO_TARGET_<triple>_RUSTFLAGS`): host builds, and the
/// workspace's debug builds, keep their cache.
///
/// `--version` of the binary names `meta`'s commit and creation time
/// (`CCM_GIT_COMMIT`, `CCM_BUILD_DATE`): the same for every build of one
/// commit, so the binary stays reproducible.
pub(crate) fn build(
    provider: &str,
    meta: &Metadata,
) -> anyhow::Result<(PathBuf, std::time::Duration)> {
    let root = repo_root();
    let package = package(provider);
    if !root.join("cmd").join(&package).join("Cargo.toml").exists() {
        bail!(
            "there is no `{package}` package yet (cmd/{package}/Cargo.toml): the {provider} provider's binary has not landed in this workspace"
        );
    }
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cargo")))
        .unwrap_or_else(|| PathBuf::from("/root/.cargo"));
    let rustflags = format!(
        "--remap-path-prefix={}=/src --remap-path-prefix={}=/cargo",
        root.display(),
        cargo_home.display()
    );
    let env_target = TARGET.replace('-', "_");
    let started = Instant::now();
    let mut build = cargo();
    build.args(["build", "--release", "--locked", "--target", TARGET]);
    for other in crate::image::providers() {
        let other = self::package(&other);
        if root.join("cmd").join(&other).join("Cargo.toml").exists() {
            build.args(["-p", &other]);
        }
    }
    run(build
        .env(format!("CC_{env_target}"), "musl-gcc")
        .env(
            format!("CARGO_TARGET_{}_RUSTFLAGS", env_target.to_uppercase()),
            rustflags,
        )
        .env("CCM_GIT_COMMIT", &meta.revision)
        .env("CCM_BUILD_DATE", rfc3339(meta.created)))?;
    let elapsed = started.elapsed();
    Ok((
        target_dir().join(TARGET).join("release").join(&package),
        elapsed,
    ))
}

/// Compiles the provider's binary crate a second time, from scratch (its
/// own artifacts removed; dependencies are reused), relinking it with LTO
/// over every crate: for `--check` to compare with the first build.
pub(crate) fn rebuild(
    provider: &str,
    meta: &Metadata,
) -> anyhow::Result<(PathBuf, std::time::Duration)> {
    run(cargo().args([
        "clean",
        "--release",
        "--target",
        TARGET,
        "-p",
        &package(provider),
    ]))?;
    build(provider, meta)
}
