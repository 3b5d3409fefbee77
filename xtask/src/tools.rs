//! Installs what the checks need when a fresh machine lacks it.
//!
//! CI runs as root on Debian with crates.io, PyPI, Debian packages and npm
//! reachable. Each tool has a module with an `ensure` that checks first and
//! installs only what is missing, so a developer's machine is left alone when
//! it already has the tool. Downloaded tools live under `target/tools/`
//! ([`dir`]), where tests look for them.

pub(crate) mod apt;
pub(crate) mod helm;
mod kubectl;
pub(crate) mod kubernetes_validate;
mod moto;
pub(crate) mod musl;
mod prism;
mod rust;
pub(crate) mod skopeo;
pub(crate) mod umoci;

use std::path::PathBuf;

/// Installs every tool the checks use, when missing.
pub(crate) fn ensure_all() -> anyhow::Result<()> {
    rust::ensure()?;
    moto::ensure()?;
    prism::ensure()?;
    musl::ensure()?;
    skopeo::ensure()?;
    umoci::ensure()?;
    helm::ensure()?;
    kubernetes_validate::ensure()?;
    kubectl::ensure()?;
    Ok(())
}

/// `target/tools/<name>`: where a tool installed by xtask lives.
#[allow(dead_code, reason = "used by the tool modules as they are added")]
pub(crate) fn dir(name: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::cmd::repo_root().join("target"));
    target.join("tools").join(name)
}
