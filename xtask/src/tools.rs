//! Installs what the checks need when a fresh machine lacks it.
//!
//! CI runs as root on Debian with crates.io, PyPI, Debian packages and npm
//! reachable. Each tool has a module with an `ensure` that checks first and
//! installs only what is missing, so a developer's machine is left alone when
//! it already has the tool. Downloaded tools live under `target/tools/`
//! ([`dir`]), where tests look for them.

pub(crate) mod apt;
pub(crate) mod background;
pub(crate) mod cargo_install;
pub(crate) mod control_plane;
pub(crate) mod go_install;
pub(crate) mod helm;
pub(crate) mod kubectl;
pub(crate) mod kubernetes_validate;
pub(crate) mod moto;
pub(crate) mod musl;
mod prism;
pub(crate) mod prometheus;
mod rust;
pub(crate) mod skopeo;
pub(crate) mod umoci;
pub(crate) mod upstream_aws;
pub(crate) mod zig;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;

/// Installs what the end-to-end suites use, when missing: kubectl, helm
/// (they render the chart's RBAC to run the CCM under), moto (AWS) and
/// Prism (DigitalOcean).
pub(crate) fn ensure_e2e() -> anyhow::Result<()> {
    moto::ensure()?;
    prism::ensure()?;
    helm::ensure()?;
    kubectl::ensure()
}

/// Installs the rustfmt and clippy components, when missing.
pub(crate) fn ensure_rust() -> anyhow::Result<()> {
    rust::ensure()
}

/// Installs what the amd64 image checks use, when missing: the musl
/// target and tools, cargo-auditable, skopeo and umoci (`cargo xtask image`
/// installs the arm64 cross toolchain and qemu itself, when asked for
/// arm64).
pub(crate) fn ensure_image() -> anyhow::Result<()> {
    musl::ensure()?;
    cargo_install::CARGO_AUDITABLE.ensure()?;
    skopeo::ensure()?;
    umoci::ensure()
}

/// `$XDG_CACHE_HOME/rust-ccm` (else `~/.cache/rust-ccm`): tools that take
/// minutes to build are kept here by version, outside the clone, so only a
/// machine's first run pays for them.
pub(crate) fn machine_cache() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| std::env::temp_dir().join("cache"))
        .join("rust-ccm")
}

/// `target/tools/<name>`: where a tool installed by xtask lives.
pub(crate) fn dir(name: &str) -> PathBuf {
    crate::cmd::target_dir().join("tools").join(name)
}

/// Adds rustup's standard library for `target`, when missing.
pub(crate) fn rustup_target(target: &str) -> anyhow::Result<()> {
    let installed =
        crate::cmd::output("rustup", &["target", "list", "--installed"]).unwrap_or_default();
    if !installed.lines().any(|l| l.trim() == target) {
        crate::cmd::run(Command::new("rustup").args(["target", "add", target]))?;
    }
    Ok(())
}

/// `pip install` of `requirement` (`name==version`) into the virtualenv
/// whose interpreter is `python`.
pub(crate) fn pip_install(python: &Path, requirement: &str) -> anyhow::Result<()> {
    crate::cmd::run(Command::new(python).args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        requirement,
    ]))
}

/// Creates the Python virtualenv `venv` unless it exists, installing
/// Debian's venv support first when the system Python lacks it.
pub(crate) fn python_venv(venv: &Path) -> anyhow::Result<()> {
    if venv.join("bin").join("python").exists() {
        return Ok(());
    }
    // Debian splits venv and ensurepip out of python3.
    if crate::cmd::output("python3", &["-c", "import ensurepip, venv"]).is_none() {
        apt::install(&["python3", "python3-venv"])?;
    }
    std::fs::create_dir_all(venv)
        .with_context(|| format!("could not create {}", venv.display()))?;
    crate::cmd::run(Command::new("python3").args(["-m", "venv"]).arg(venv))
}
