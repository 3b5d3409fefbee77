//! Running commands with their output streamed and their failure explained.

use std::ffi::OsStr;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, bail};

/// The repository root (xtask lives one level below it).
pub(crate) fn repo_root() -> PathBuf {
    let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .map(PathBuf::from)
        .unwrap_or(manifest_dir)
}

/// Cargo's target directory: `CARGO_TARGET_DIR`, or `target/` at the root.
pub(crate) fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target"))
}

/// Set by `cargo xtask ci`: every cargo it starts builds once and keeps
/// the target directory small (see [`ONE_SHOT_ENV`]).
static ONE_SHOT: AtomicBool = AtomicBool::new(false);

/// How a one-shot build differs from a developer's: no incremental caches
/// (several GB, and nothing rebuilds in one CI run), and no debug info,
/// neither generated for the workspace's crates nor kept from the standard
/// library (about a third of each of the hundred test binaries; a panic
/// still names its file and line, a backtrace its functions).
pub(crate) const ONE_SHOT_ENV: [(&str, &str); 3] = [
    ("CARGO_INCREMENTAL", "0"),
    ("CARGO_PROFILE_DEV_DEBUG", "0"),
    ("CARGO_PROFILE_DEV_STRIP", "debuginfo"),
];

/// Makes every later [`cargo`] a one-shot build.
pub(crate) fn build_once() {
    ONE_SHOT.store(true, Ordering::Relaxed);
}

/// Set by `cargo xtask ci` once it has built the binaries and tests of the
/// whole workspace: the tasks it runs next start those binaries rather than
/// building their few packages again (see [`build_bins`]).
static WORKSPACE_BUILT: AtomicBool = AtomicBool::new(false);

/// Says that every binary of the workspace is built, with the features
/// `cargo test --workspace` resolves: [`build_bins`] builds nothing more.
pub(crate) fn workspace_built() {
    WORKSPACE_BUILT.store(true, Ordering::Relaxed);
}

/// Builds the debug binaries of `packages`, unless [`workspace_built`] was
/// called. A build of a few packages resolves their dependencies' features
/// for those alone: after the workspace's build it would compile much of
/// the tree again (minutes in CI), and overwrite binaries in `target/debug`
/// that the workspace's tests start.
pub(crate) fn build_bins(packages: &[&str]) -> anyhow::Result<()> {
    if WORKSPACE_BUILT.load(Ordering::Relaxed) {
        return Ok(());
    }
    let mut build = cargo();
    build.args(["build", "--locked", "--bins"]);
    for package in packages {
        build.args(["-p", package]);
    }
    run(&mut build)
}

/// Set by `cargo xtask ci`: clippy-driver, which every later [`cargo`]
/// compiles the workspace's own crates with (see [`lint_while_building`]).
static LINTER: OnceLock<PathBuf> = OnceLock::new();

/// The lints `cargo clippy -- -D warnings` applies, in the form
/// clippy-driver reads them from `CLIPPY_ARGS` (each argument followed by
/// the separator `cargo clippy` uses).
const CLIPPY_ARGS: &str = "-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__";

/// Makes every later [`cargo`] compile the workspace's crates with
/// clippy-driver as `RUSTC_WORKSPACE_WRAPPER`, warnings denied, as `cargo
/// clippy` does: a build then lints what it compiles, and CI compiles the
/// dependency tree once instead of twice (clippy's check, then the tests'
/// build: about 10 minutes on 2 cores). Dependencies still compile with
/// rustc alone. Every cargo of the run must carry it: cargo rebuilds a
/// crate whose wrapper changed.
pub(crate) fn lint_while_building() -> anyhow::Result<()> {
    let cargo = cargo_program();
    let driver = cargo.with_file_name("clippy-driver");
    if !driver.is_file() {
        bail!(
            "no clippy-driver beside {} (rustup component add clippy)",
            cargo.display()
        );
    }
    let _ = LINTER.set(driver);
    Ok(())
}

/// Whether every [`cargo`] lints the workspace's crates as it compiles
/// them ([`lint_while_building`] was called).
pub(crate) fn linting() -> bool {
    LINTER.get().is_some()
}

/// The cargo binary that runs us (`CARGO`, set by the `cargo run` that
/// started xtask), else `cargo` from `PATH`.
pub(crate) fn cargo_program() -> PathBuf {
    std::env::var_os("CARGO").map_or_else(|| PathBuf::from("cargo"), PathBuf::from)
}

/// The cargo that runs us, so rustup's toolchain choice carries through.
pub(crate) fn cargo() -> Command {
    let mut cmd = cargo_through(cargo_program());
    if let Some(driver) = LINTER.get() {
        cmd.env("RUSTC_WORKSPACE_WRAPPER", driver)
            .env("CLIPPY_ARGS", CLIPPY_ARGS);
    }
    cmd
}

/// What `cargo run` sets for the program it runs (and every `CARGO_PKG_`
/// variable), left out of the cargo commands xtask starts (see
/// [`cargo_through`]).
const CARGO_RUN_VARS: [&str; 5] = [
    "CARGO_MANIFEST_DIR",
    "CARGO_MANIFEST_PATH",
    "CARGO_CRATE_NAME",
    "CARGO_BIN_NAME",
    "CARGO_PRIMARY_PACKAGE",
];

/// Removes from `cmd`'s environment what `cargo run` set for xtask.
fn without_cargo_run_vars(cmd: &mut Command) {
    for var in CARGO_RUN_VARS {
        cmd.env_remove(var);
    }
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("CARGO_PKG_") {
            cmd.env_remove(name);
        }
    }
}

/// Cargo as a developer's shell runs it: no one-shot settings, no linter;
/// as `cargo xtask` builds xtask itself.
pub(crate) fn plain_cargo() -> Command {
    let mut cmd = Command::new(cargo_program());
    cmd.current_dir(repo_root());
    without_cargo_run_vars(&mut cmd);
    cmd
}

/// `program` run as [`cargo`] is, from the repository root and one-shot in
/// CI: for a cargo subcommand's binary that runs cargo itself (it reads
/// `CARGO`, set for xtask by the `cargo run` that started it).
pub(crate) fn cargo_through(program: impl AsRef<OsStr>) -> Command {
    let mut cmd = Command::new(program);
    // `cargo run` (which started xtask) set these for xtask; build scripts
    // that read one (ring reads CARGO_MANIFEST_DIR and CARGO_PKG_VERSION_*:
    // cargo tracks the value it inherited) would be rerun, and
    // everything above them rebuilt, whenever a cargo from a shell and
    // one from xtask take turns on the same target directory.
    cmd.current_dir(repo_root());
    without_cargo_run_vars(&mut cmd);
    if ONE_SHOT.load(Ordering::Relaxed) {
        cmd.envs(ONE_SHOT_ENV);
    }
    cmd
}

/// Runs `cmd` to completion with inherited output; fails on a non-zero exit.
pub(crate) fn run(cmd: &mut Command) -> anyhow::Result<()> {
    let shown = display(cmd);
    println!("\n$ {shown}");
    let status = cmd
        .status()
        .with_context(|| format!("could not start `{shown}`"))?;
    if !status.success() {
        bail!("`{shown}` failed ({status})");
    }
    Ok(())
}

/// Runs `cmd` and returns its standard output, or `None` if it fails.
pub(crate) fn output(program: impl AsRef<OsStr>, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs `cmd` to completion and returns its standard output; fails with
/// its standard error on a non-zero exit.
pub(crate) fn stdout(cmd: &mut Command) -> anyhow::Result<String> {
    let shown = display(cmd);
    let out = cmd
        .output()
        .with_context(|| format!("could not start `{shown}`"))?;
    if !out.status.success() {
        bail!(
            "`{shown}` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs `cmd` with `input` on its standard input and collects its output,
/// whatever its exit status.
pub(crate) fn output_with_stdin(cmd: &mut Command, input: &[u8]) -> anyhow::Result<Output> {
    let shown = display(cmd);
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("could not start `{shown}`"))?;
    child
        .stdin
        .take()
        .with_context(|| format!("`{shown}` has no standard input"))?
        .write_all(input)
        .with_context(|| format!("writing to `{shown}`"))?;
    child
        .wait_with_output()
        .with_context(|| format!("waiting for `{shown}`"))
}

/// Runs `cmd` with its stdout read line by line into `on_line` (stderr
/// inherited), `shown` first; fails on a non-zero exit.
pub(crate) fn run_lines(
    cmd: &mut Command,
    shown: &str,
    mut on_line: impl FnMut(&str),
) -> anyhow::Result<()> {
    println!("\n$ {shown}");
    let mut child = cmd
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("could not start `{shown}`"))?;
    let stdout = child.stdout.take().context("no stdout")?;
    for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)) {
        on_line(&line?);
    }
    let status = child.wait()?;
    if !status.success() {
        bail!("`{shown}` failed ({status})");
    }
    Ok(())
}

pub(crate) fn display(cmd: &Command) -> String {
    let mut parts = vec![cmd.get_program().to_string_lossy().into_owned()];
    parts.extend(cmd.get_args().map(|a| a.to_string_lossy().into_owned()));
    parts.join(" ")
}
