//! The static binary an image runs: a release build for musl, per platform.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use anyhow::{Context, bail};

use crate::cmd::{cargo, cargo_through, repo_root, run, target_dir};
use crate::image::metadata::Metadata;
use crate::image::platform::Platform;
use crate::timestamp::rfc3339;
use crate::tools::cargo_install::CARGO_AUDITABLE;

/// The provider's binary, also its Cargo package: `<provider>-cloud-controller-manager`.
pub(crate) fn package(provider: &str) -> String {
    format!("{provider}-cloud-controller-manager")
}

/// Where [`build`] leaves the provider's binary for `platform`.
pub(crate) fn path(provider: &str, platform: Platform) -> PathBuf {
    target_dir()
        .join(platform.target())
        .join("release")
        .join(package(provider))
}

/// Builds the provider's binary for `platform` and returns its path and
/// how long cargo took.
///
/// For amd64, every provider's binary is built in the one cargo
/// invocation, so their dependencies are resolved with one feature set and
/// compiled once for all the images (a `-p` of one binary alone would
/// rebuild most of the tree for each: cold, about 9 minutes of the images'
/// 28 on 2 cores). For arm64, only the provider's binary is built: CI
/// builds one provider's arm64 image, and the AWS SDK alone would double
/// the compile.
///
/// The compile goes through cargo-auditable, which embeds the binary's
/// dependency list (crates, versions, sources) in a section of its own:
/// the image's SBOM is read back from it, and scanners read it too.
///
/// C code (aws-lc-sys, under rustls; jemalloc) is compiled with `musl-gcc`
/// for amd64, and for arm64 with Zig through cargo-zigbuild, which also
/// links (see [`crate::tools::zig`]). jemalloc for arm64 assumes pages of
/// up to 64 KiB, so the binary runs on kernels built with 4, 16 or 64 KiB
/// pages (Graviton's Amazon Linux and Ubuntu use 4, some distributions
/// 64). Paths of the checkout and of cargo's registry are remapped, so the
/// binary does not depend on where the repository was cloned. The flags
/// apply to the musl targets only (`CARGO_TARGET_<triple>_RUSTFLAGS`): host
/// builds, and the workspace's debug builds, keep their cache.
///
/// `--version` of the binary names `meta`'s commit and creation time
/// (`CCM_GIT_COMMIT`, `CCM_BUILD_DATE`): the same for every build of one
/// commit, so the binary stays reproducible.
pub(crate) fn build(
    provider: &str,
    meta: &Metadata,
    platform: Platform,
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
    run(&mut compile(meta, platform, provider)?)?;
    let elapsed = started.elapsed();
    Ok((path(provider, platform), elapsed))
}

/// The one compile for `platform` that [`build`] runs.
fn compile(meta: &Metadata, platform: Platform, provider: &str) -> anyhow::Result<Command> {
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
    let target = platform.target();
    let env_target = target.replace('-', "_");
    let mut build = cargo_through(CARGO_AUDITABLE.ensure()?);
    let packages = match platform {
        Platform::Amd64 => {
            build.args(["auditable", "build"]);
            build.env(format!("CC_{env_target}"), "musl-gcc");
            crate::image::providers()
        }
        Platform::Arm64 => {
            let toolchain = crate::tools::zig::ensure()?;
            build.args(["auditable", "zigbuild"]);
            build.env("PATH", toolchain.search_path()).env(
                format!("{}_JEMALLOC_SYS_WITH_LG_PAGE", env_target.to_uppercase()),
                "16",
            );
            vec![provider.to_owned()]
        }
    };
    build.args(["--release", "--locked", "--target", target]);
    for provider in packages {
        let package = package(&provider);
        if root.join("cmd").join(&package).join("Cargo.toml").exists() {
            build.args(["-p", &package]);
        }
    }
    build
        .env(
            format!("CARGO_TARGET_{}_RUSTFLAGS", env_target.to_uppercase()),
            rustflags,
        )
        .env("CCM_GIT_COMMIT", &meta.revision)
        .env("CCM_BUILD_DATE", rfc3339(meta.created));
    Ok(build)
}

/// [`build`]'s compiles, one after another, running in the background at
/// idle CPU priority (SCHED_IDLE): `cargo xtask ci` runs them beside the
/// workspace's debug build and the suites. The scheduler gives them only
/// CPU no one else wants (a crate compiled alone, a link, a suite waiting
/// on processes and timers); the steps beside them still slow a little, as
/// they share caches and memory bandwidth. The images' own steps then find
/// the binaries built, or wait for the rest. Dropped unjoined (a step
/// before the images failed), the compile running is killed and the rest
/// are not started.
pub(crate) struct Background {
    build: Option<crate::tools::background::Build<()>>,
    running: Arc<Mutex<Option<u32>>>,
    cancelled: Arc<AtomicBool>,
}

impl Background {
    /// Starts the compiles of `which` (a platform and the provider whose
    /// binary it needs), their output in `log`.
    pub(crate) fn start(
        meta: &Metadata,
        which: &[(Platform, &str)],
        log: &Path,
    ) -> anyhow::Result<Self> {
        if let Some(dir) = log.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let out =
            std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
        let running = Arc::new(Mutex::new(None));
        let cancelled = Arc::new(AtomicBool::new(false));
        let (meta, which): (Metadata, Vec<(Platform, String)>) = (
            meta.clone(),
            which
                .iter()
                .map(|(p, name)| (*p, (*name).to_owned()))
                .collect(),
        );
        let (pid, stop) = (running.clone(), cancelled.clone());
        println!(
            "xtask: compiling the image binaries at idle priority in the background (log: {})",
            log.display()
        );
        let build = crate::tools::background::spawn("images", None, move || {
            for (platform, provider) in which {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let mut compile = compile(&meta, platform, &provider)?;
                let child = compile
                    .process_group(0)
                    .stdin(Stdio::null())
                    .stdout(out.try_clone()?)
                    .stderr(out.try_clone()?)
                    .spawn();
                let mut child = child.context("starting the images' compile")?;
                *pid.lock().unwrap_or_else(PoisonError::into_inner) = Some(child.id());
                if stop.load(Ordering::SeqCst) {
                    // Dropped while this compile started: Drop found no
                    // process to kill.
                    kill_group(child.id());
                }
                let status = child.wait().context("waiting for the images' compile")?;
                *pid.lock().unwrap_or_else(PoisonError::into_inner) = None;
                if !status.success() && !stop.load(Ordering::SeqCst) {
                    // Only reported: the images' step compiles again in
                    // the foreground, where its errors show.
                    println!(
                        "xtask: the background compile of the {} image binaries failed ({status}); the images step compiles in the foreground",
                        platform.name()
                    );
                }
            }
            Ok(())
        });
        Ok(Self {
            build: Some(build),
            running,
            cancelled,
        })
    }

    /// Waits for the compiles.
    pub(crate) fn join(mut self) -> anyhow::Result<()> {
        match self.build.take() {
            Some(build) => build.join(),
            None => Ok(()),
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if self.build.is_none() {
            return;
        }
        self.cancelled.store(true, Ordering::SeqCst);
        if let Some(pid) = *self.running.lock().unwrap_or_else(PoisonError::into_inner) {
            kill_group(pid);
        }
    }
}

/// Kills the process group `pid` leads: cargo and the rustc processes it
/// started.
fn kill_group(pid: u32) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{pid}")])
        .status();
}

/// Compiles the provider's binary crate a second time, from scratch (its
/// own artifacts removed; dependencies are reused) and relinks it: for
/// `--check` to compare with the first build.
pub(crate) fn rebuild(
    provider: &str,
    meta: &Metadata,
    platform: Platform,
) -> anyhow::Result<(PathBuf, std::time::Duration)> {
    run(cargo().args([
        "clean",
        "--release",
        "--target",
        platform.target(),
        "-p",
        &package(provider),
    ]))?;
    build(provider, meta, platform)
}
