//! kubernetes-validate, from PyPI: validates manifests against the strict
//! OpenAPI schemas of a chosen Kubernetes release, in a virtualenv under
//! `target/tools/kubernetes-validate`. Its Python, which has PyYAML, also
//! turns rendered YAML into JSON for the chart's RBAC check.

use std::path::PathBuf;

use crate::cmd;
use crate::tools;

/// The release the checks are written against: strict schemas up to
/// Kubernetes 1.37.
const VERSION: &str = "1.37.0";

/// The virtualenv's Python.
pub(crate) fn python() -> PathBuf {
    tools::dir("kubernetes-validate").join("bin").join("python")
}

/// The `kubernetes-validate` command.
pub(crate) fn binary() -> PathBuf {
    tools::dir("kubernetes-validate")
        .join("bin")
        .join("kubernetes-validate")
}

pub(crate) fn ensure() -> anyhow::Result<()> {
    let python = python();
    let installed = cmd::output(
        &python,
        &[
            "-c",
            "import importlib.metadata as m; print(m.version('kubernetes-validate'))",
        ],
    );
    if installed.as_deref().map(str::trim) == Some(VERSION) && binary().exists() {
        return Ok(());
    }
    tools::python_venv(&tools::dir("kubernetes-validate"))?;
    tools::pip_install(&python, &format!("kubernetes-validate=={VERSION}"))
}
