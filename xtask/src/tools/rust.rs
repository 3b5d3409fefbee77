//! rustfmt and clippy, from rustup.

use std::process::Command;

use crate::cmd::{self, run};

pub(crate) fn ensure() -> anyhow::Result<()> {
    let installed =
        cmd::output("rustup", &["component", "list", "--installed"]).unwrap_or_default();
    for component in ["rustfmt", "clippy"] {
        if !installed.lines().any(|l| l.starts_with(component)) {
            run(Command::new("rustup").args(["component", "add", component]))?;
        }
    }
    Ok(())
}
