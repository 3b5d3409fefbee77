//! What static images need: rustup's `x86_64-unknown-linux-musl` standard
//! library, and Debian's `musl-tools` for `musl-gcc`, the C compiler
//! aws-lc-sys builds its C and assembly with.

use std::process::Command;

use crate::cmd::{self, run};
use crate::tools::apt;

/// The target every image's binary is built for.
pub(crate) const TARGET: &str = "x86_64-unknown-linux-musl";

pub(crate) fn ensure() -> anyhow::Result<()> {
    let installed = cmd::output("rustup", &["target", "list", "--installed"]).unwrap_or_default();
    if !installed.lines().any(|l| l.trim() == TARGET) {
        run(Command::new("rustup").args(["target", "add", TARGET]))?;
    }
    if !apt::has("musl-gcc") {
        apt::install(&["musl-tools"])?;
    }
    Ok(())
}
