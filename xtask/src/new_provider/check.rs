//! The generator's own check, run by `cargo xtask ci`: providers generated
//! into a copy of the workspace must build, be clippy- and rustfmt-clean,
//! keep the repository tidy, pass their tests (the conformance suite
//! against their in-memory cloud), and start as a binary.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail, ensure};

use super::render::Capability;
use crate::cmd::{cargo, repo_root, run, target_dir};

/// The providers generated: every capability, and the two smallest sets.
const GENERATED: [(&str, &[Capability]); 3] = [
    (
        "acme",
        &[
            Capability::Instances,
            Capability::LoadBalancers,
            Capability::Routes,
        ],
    ),
    ("acme-lb", &[Capability::LoadBalancers]),
    ("acme-nodes", &[Capability::Instances]),
];

pub(crate) fn check() -> anyhow::Result<()> {
    let copy = target_dir().join("tmp").join("new-provider");
    copy_workspace(&repo_root(), &copy)?;
    for (name, capabilities) in GENERATED {
        let written = super::generate(&copy, name, capabilities)?;
        println!(
            "generated `{name}` in {}: {} files",
            copy.display(),
            written.len()
        );
        super::format(&copy, name);
    }
    own_artifacts(&copy)?;
    match super::generate(&copy, "acme", GENERATED[0].1) {
        Err(e) if e.downcast_ref::<super::Refused>().is_some() => {
            println!("generating `acme` again is refused: {e}");
        }
        other => bail!("generating an existing provider again was not refused: {other:?}"),
    }
    let packages = |prefix: &str, suffix: &str| -> Vec<String> {
        GENERATED
            .iter()
            .flat_map(|(name, _)| ["-p".to_owned(), format!("{prefix}{name}{suffix}")])
            .collect()
    };
    let libs = packages("ccm-provider-", "");
    let bins = packages("", "-cloud-controller-manager");
    let in_copy = |args: &[&str]| {
        let mut cmd = cargo();
        cmd.current_dir(&copy)
            .env("CARGO_TARGET_DIR", target_dir())
            .args(args);
        cmd
    };
    run(&mut in_copy(&["fmt", "--all", "--check"]))?;
    // Under `ci` every cargo compiles the workspace's crates with
    // clippy-driver (`cmd::lint_while_building`): one build both lints and
    // compiles, where `cargo clippy` first would check every dependency
    // once more (about a minute on 2 cores).
    if !crate::cmd::linting() {
        run(in_copy(&["clippy", "--all-targets"])
            .args(&libs)
            .args(&bins)
            .args(["--", "-D", "warnings"]))?;
    }
    // Built and recorded first, so `ci` keeps these artifacts for its next
    // run (`artifacts.rs`). The binaries themselves too: a test build of a
    // binary crate without integration tests compiles only its unit tests.
    crate::artifacts::run(in_copy(&["build"]).args(&bins))?;
    crate::artifacts::run(
        in_copy(&["test", "--no-run", "--all-targets"])
            .args(&libs)
            .args(&bins),
    )?;
    run(in_copy(&["test", "--all-targets"]).args(&libs).args(&bins))?;
    crate::artifacts::run(&mut in_copy(&[
        "test", "--no-run", "-p", "xtask", "--test", "tidy",
    ]))?;
    run(&mut in_copy(&["test", "-p", "xtask", "--test", "tidy"]))?;
    for (name, _) in GENERATED {
        let binary = target_dir()
            .join("debug")
            .join(format!("{name}-cloud-controller-manager"));
        let out = Command::new(&binary)
            .arg("--help")
            .output()
            .with_context(|| format!("running {} --help", binary.display()))?;
        let help = String::from_utf8_lossy(&out.stdout);
        ensure!(
            out.status.success() && help.contains("--cloud-config"),
            "{} --help failed ({}): {help}",
            binary.display(),
            out.status
        );
    }
    println!(
        "new-provider: {} generated providers build, pass clippy, rustfmt, tidy and their tests",
        GENERATED.len()
    );
    std::fs::remove_dir_all(&copy).with_context(|| format!("removing {}", copy.display()))
}

/// Gives the copy's workspace crates artifacts of their own in the shared
/// target directory.
///
/// Cargo hashes a workspace crate by its path relative to the workspace's
/// root: the copy's `crates/app` and the repository's would be the same
/// unit with different sources (each build overwrites the other's
/// artifacts, and `ci`'s next build of the repository recompiled ccm-app
/// and everything above it: about two minutes). A profile setting of no
/// effect (one codegen unit fewer than the default 256) changes the copy's
/// units' hashes alone; its dependencies from crates.io stay shared.
fn own_artifacts(copy: &Path) -> anyhow::Result<()> {
    let out = crate::cmd::plain_cargo()
        .args([
            "metadata",
            "--no-deps",
            "--offline",
            "--format-version",
            "1",
        ])
        .output()
        .context("running cargo metadata")?;
    ensure!(
        out.status.success(),
        "cargo metadata failed: {}",
        out.status
    );
    let metadata: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let mut overrides = String::from(
        "\n# new-provider's check: artifacts apart from the repository's (check.rs).\n",
    );
    for name in metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["name"].as_str())
    {
        overrides.push_str(&format!(
            "[profile.dev.package.{name}]\ncodegen-units = 255\n"
        ));
    }
    let manifest = copy.join("Cargo.toml");
    let mut text = std::fs::read_to_string(&manifest)
        .with_context(|| format!("reading {}", manifest.display()))?;
    text.push_str(&overrides);
    std::fs::write(&manifest, text).with_context(|| format!("writing {}", manifest.display()))
}

/// Copies the files git knows of (tracked, and untracked but not ignored)
/// from `root` to a fresh `to`.
fn copy_workspace(root: &Path, to: &Path) -> anyhow::Result<()> {
    if to.exists() {
        std::fs::remove_dir_all(to).with_context(|| format!("removing {}", to.display()))?;
    }
    let out = Command::new("git")
        .current_dir(root)
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .output()
        .context("running git ls-files")?;
    ensure!(out.status.success(), "git ls-files failed: {}", out.status);
    let files: Vec<PathBuf> = out
        .stdout
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| PathBuf::from(String::from_utf8_lossy(p).into_owned()))
        .collect();
    for file in &files {
        let from = root.join(file);
        // Deleted but not yet committed: nothing to copy.
        if !from.is_file() {
            continue;
        }
        let dest = to.join(file);
        if let Some(dir) = dest.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        std::fs::copy(&from, &dest).with_context(|| format!("copying {}", from.display()))?;
        // The source's time, so cargo finds the copy's crates unchanged
        // since the previous run's check built them.
        let modified = std::fs::metadata(&from)?.modified()?;
        std::fs::File::options()
            .write(true)
            .open(&dest)?
            .set_modified(modified)
            .with_context(|| format!("setting the time of {}", dest.display()))?;
    }
    Ok(())
}
