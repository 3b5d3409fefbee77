//! Debian packages, for the tools that come from the distribution.

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::cmd::run;

/// Whether this process has already refreshed the package lists.
static UPDATED: AtomicBool = AtomicBool::new(false);

/// Whether `program` is on `PATH`.
pub(crate) fn has(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|out| out.status.success())
}

/// Installs the Debian `packages`, after one `apt-get update` per run: a
/// fresh machine's package lists may be empty.
pub(crate) fn install(packages: &[&str]) -> anyhow::Result<()> {
    if !UPDATED.swap(true, Ordering::SeqCst) {
        run(Command::new("apt-get").arg("update"))?;
    }
    run(Command::new("apt-get")
        .args(["install", "-y", "--no-install-recommends"])
        .args(packages)
        .env("DEBIAN_FRONTEND", "noninteractive"))
}
