//! The static binary an image runs: a release build for musl.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, bail};

use crate::cmd::{cargo, cargo_through, repo_root, run, target_dir};
use crate::image::oci::Metadata;
use crate::timestamp::rfc3339;
use crate::tools::cargo_install::CARGO_AUDITABLE;
use crate::tools::musl::TARGET;

/// The provider's binary, also its Cargo package: `<provider>-cloud-controller-manager`.
pub(crate) fn package(provider: &str) -> String {
    format!("{provider}-cloud-controller-manager")
}

/// Builds the provider's binary and returns its path and how long cargo took.
///
/// Every provider's binary is built in the one cargo invocation, so their
/// dependencies are resolved with one feature set and compiled once for all
/// the images (a `-p` of one binary alone would rebuild most of the tree
/// for each: cold, about 9 minutes of the images' 28 on 2 cores).
///
/// The compile goes through cargo-auditable, which embeds the binary's
/// dependency list (crates, versions, sources) in a section of its own:
/// the image's SBOM is read back from it, and scanners read it too.
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
    let package = package(provider);
    if !repo_root()
        .join("cmd")
        .join(&package)
        .join("Cargo.toml")
        .exists()
    {
        bail!(
            "there is no `{package}` package yet (cmd/{package}/Cargo.toml): the {provider} provider's binary has not landed in this workspace"
        );
    }
    let started = Instant::now();
    run(&mut compile(meta)?)?;
    let elapsed = started.elapsed();
    Ok((
        target_dir().join(TARGET).join("release").join(&package),
        elapsed,
    ))
}

/// The one compile of every provider's image binary that [`build`] runs.
fn compile(meta: &Metadata) -> anyhow::Result<Command> {
    let root = repo_root();
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
    let mut build = cargo_through(CARGO_AUDITABLE.ensure()?);
    build.args([
        "auditable",
        "build",
        "--release",
        "--locked",
        "--target",
        TARGET,
    ]);
    for provider in crate::image::providers() {
        let package = package(&provider);
        if root.join("cmd").join(&package).join("Cargo.toml").exists() {
            build.args(["-p", &package]);
        }
    }
    build
        .env(format!("CC_{env_target}"), "musl-gcc")
        .env(
            format!("CARGO_TARGET_{}_RUSTFLAGS", env_target.to_uppercase()),
            rustflags,
        )
        .env("CCM_GIT_COMMIT", &meta.revision)
        .env("CCM_BUILD_DATE", rfc3339(meta.created));
    Ok(build)
}

/// [`build`]'s compile running in the background at idle CPU priority
/// (`chrt --idle`): `cargo xtask ci` runs it beside the workspace's debug
/// build and the suites. The scheduler gives it only CPU no one else wants
/// (a crate compiled alone, a link, a suite waiting on processes and
/// timers); the steps beside it still slow a little, as they share caches
/// and memory bandwidth. The images' own step then finds the
/// binaries built, or waits for the rest. Dropped unjoined (a step before
/// the images failed), it is killed.
pub(crate) struct Background {
    child: Option<std::process::Child>,
    log: PathBuf,
}

impl Background {
    /// Starts the compile, its output in `log`.
    pub(crate) fn start(meta: &Metadata, log: &Path) -> anyhow::Result<Self> {
        let compile = compile(meta)?;
        if let Some(dir) = log.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let out =
            std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
        let mut idle = Command::new("chrt");
        idle.args(["--idle", "0"])
            .arg(compile.get_program())
            .args(compile.get_args())
            .current_dir(repo_root())
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out);
        for (key, value) in compile.get_envs() {
            match value {
                Some(value) => idle.env(key, value),
                None => idle.env_remove(key),
            };
        }
        println!(
            "xtask: compiling the image binaries at idle priority in the background (log: {})",
            log.display()
        );
        let child = idle.spawn().context("starting chrt (util-linux)")?;
        Ok(Self {
            child: Some(child),
            log: log.to_owned(),
        })
    }

    /// Waits for the compile. A failed one is only reported: the images'
    /// step compiles again in the foreground, where its errors show.
    pub(crate) fn join(mut self) -> anyhow::Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        let status = child.wait().context("waiting for the background compile")?;
        if !status.success() {
            println!(
                "xtask: the background compile of the image binaries failed ({status}; log: {}); the images step compiles in the foreground",
                self.log.display()
            );
        }
        Ok(())
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // The whole group: cargo and the rustc processes it started.
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .status();
            let _ = child.wait();
        }
    }
}

/// Compiles the provider's binary crate a second time, from scratch (its
/// own artifacts removed; dependencies are reused) and relinks it: for
/// `--check` to compare with the first build.
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
