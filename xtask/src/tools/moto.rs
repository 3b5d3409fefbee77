//! moto, the AWS emulator the AWS provider's tests run against: PyPI
//! `moto[server]` in a virtualenv under `target/tools/moto`, whose
//! `bin/moto_server` the tests start.

use std::path::Path;

use crate::cmd;
use crate::tools;

/// The moto release the tests are written against.
const VERSION: &str = "5.2.5";

pub(crate) fn ensure() -> anyhow::Result<()> {
    let venv = tools::dir("moto");
    let python = venv.join("bin").join("python");
    if installed_version(&python).as_deref() == Some(VERSION)
        && venv.join("bin").join("moto_server").exists()
    {
        return Ok(());
    }
    tools::python_venv(&venv)?;
    tools::pip_install(&python, &format!("moto[server]=={VERSION}"))
}

/// The moto version installed in the virtualenv, if any.
fn installed_version(python: &Path) -> Option<String> {
    let out = cmd::output(
        python,
        &[
            "-c",
            "import importlib.metadata as m; print(m.version('moto'))",
        ],
    )?;
    Some(out.trim().to_owned())
}
