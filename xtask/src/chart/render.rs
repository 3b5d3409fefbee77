//! Helm, run on the chart: lint, template, and the rendered manifests as
//! JSON for the checks that read them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use anyhow::{Context, bail};
use serde_json::Value;

use crate::cmd::repo_root;
use crate::tools::{helm, kubernetes_validate};

/// The release namespace every check renders into.
pub(crate) const NAMESPACE: &str = "kube-system";
/// The release name every check renders as.
const RELEASE: &str = "ccm";

/// `charts/cloud-controller-manager`.
pub(crate) fn chart_dir() -> PathBuf {
    repo_root().join("charts").join("cloud-controller-manager")
}

/// The example values under `ci/`, sorted: one per provider and variant.
pub(crate) fn ci_values() -> anyhow::Result<Vec<PathBuf>> {
    let dir = chart_dir().join("ci");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    files.retain(|p| p.extension().is_some_and(|e| e == "yaml"));
    files.sort();
    if files.is_empty() {
        bail!("no example values in {}", dir.display());
    }
    Ok(files)
}

/// helm, or an error saying how to get it.
fn helm_command() -> anyhow::Result<Command> {
    let binary = helm::binary();
    if !binary.exists() {
        bail!(
            "helm is not installed at {}: run `cargo xtask ci` (or `cargo xtask chart`), which installs it",
            binary.display()
        );
    }
    Ok(Command::new(binary))
}

fn run(cmd: &mut Command) -> anyhow::Result<Output> {
    let shown = format!("{cmd:?}");
    cmd.output()
        .with_context(|| format!("could not start {shown}"))
}

/// `helm lint --strict` with `values`.
pub(crate) fn lint(values: &Path) -> anyhow::Result<()> {
    let out = run(helm_command()?
        .arg("lint")
        .arg("--strict")
        .arg(chart_dir())
        .arg("-f")
        .arg(values))?;
    if !out.status.success() {
        bail!(
            "helm lint --strict -f {} failed:\n{}{}",
            values.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// `helm template` for Kubernetes `kube_version`, with `values` and `sets`
/// (`--set` arguments); the manifests as YAML, or helm's error.
pub(crate) fn template(
    values: Option<&Path>,
    sets: &[&str],
    kube_version: &str,
) -> anyhow::Result<Result<String, String>> {
    template_all(values.as_slice(), sets, kube_version)
}

/// [`template`] with several values files, later ones winning.
pub(crate) fn template_all(
    values: &[&Path],
    sets: &[&str],
    kube_version: &str,
) -> anyhow::Result<Result<String, String>> {
    let mut cmd = helm_command()?;
    cmd.args(["template", RELEASE]).arg(chart_dir()).args([
        "--namespace",
        NAMESPACE,
        "--kube-version",
        kube_version,
    ]);
    for values in values {
        cmd.arg("-f").arg(values);
    }
    for set in sets {
        cmd.args(["--set", set]);
    }
    let out = run(&mut cmd)?;
    Ok(if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    })
}

/// The documents of a YAML stream, as JSON values (empty documents dropped).
/// PyYAML, in kubernetes-validate's virtualenv, does the parsing: xtask keeps
/// no YAML parser of its own.
pub(crate) fn documents(yaml: &str) -> anyhow::Result<Vec<Value>> {
    let python = kubernetes_validate::python();
    if !python.exists() {
        bail!(
            "kubernetes-validate is not installed at {}: run `cargo xtask ci`, which installs it",
            python.display()
        );
    }
    let out = crate::cmd::output_with_stdin(
        Command::new(python).args([
            "-c",
            "import json, sys, yaml; json.dump([d for d in yaml.safe_load_all(sys.stdin) if d is not None], sys.stdout)",
        ]),
        yaml.as_bytes(),
    )?;
    if !out.status.success() {
        bail!(
            "rendered YAML does not parse: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    serde_json::from_slice(&out.stdout).context("python printed no JSON")
}

/// The one object of `kind` among `docs`.
pub(crate) fn find<'a>(docs: &'a [Value], kind: &str) -> anyhow::Result<&'a Value> {
    let mut found = docs.iter().filter(|d| d["kind"] == kind);
    match (found.next(), found.next()) {
        (Some(doc), None) => Ok(doc),
        (None, _) => bail!("the chart rendered no {kind}"),
        (Some(_), Some(_)) => bail!("the chart rendered more than one {kind}"),
    }
}
