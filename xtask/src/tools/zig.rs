//! The arm64 cross toolchain, every piece from a registry: rustup's
//! `aarch64-unknown-linux-musl` standard library, cargo-zigbuild from
//! crates.io, Zig from PyPI's `ziglang` wheel (the C compiler for aws-lc-sys
//! and jemalloc, and the linker, with musl's arm64 headers and start files
//! built in), and Debian's `qemu-user-static` to run what it builds.

use std::path::PathBuf;

use anyhow::Context;

use crate::cmd;
use crate::tools::cargo_install::Tool;
use crate::tools::{apt, machine_cache};

/// The cargo-zigbuild release arm64 binaries are built with.
pub(crate) const CARGO_ZIGBUILD: Tool = Tool {
    krate: "cargo-zigbuild",
    version: "0.24.1",
    binary: "cargo-zigbuild",
};

/// The Zig release (PyPI `ziglang`) cargo-zigbuild drives.
const ZIGLANG: &str = "0.15.2";

/// The emulator arm64 binaries run under on an amd64 machine.
pub(crate) const QEMU: &str = "qemu-aarch64-static";

/// What an arm64 build puts first on `PATH`: the directories of
/// `cargo-zigbuild` (so that `cargo zigbuild` finds it) and of `zig`.
#[derive(Debug, Clone)]
pub(crate) struct Toolchain {
    pub(crate) path: Vec<PathBuf>,
}

impl Toolchain {
    /// `PATH` with the toolchain's directories first.
    pub(crate) fn search_path(&self) -> std::ffi::OsString {
        let rest = std::env::var_os("PATH").unwrap_or_default();
        std::env::join_paths(
            self.path
                .iter()
                .cloned()
                .chain(std::env::split_paths(&rest)),
        )
        .unwrap_or(rest)
    }
}

/// Installs what is missing (each cached on the machine by version) and
/// returns where it is.
pub(crate) fn ensure() -> anyhow::Result<Toolchain> {
    crate::tools::rustup_target(crate::image::Platform::Arm64.target())?;
    let zigbuild = CARGO_ZIGBUILD.ensure()?;
    let zig = zig_dir()?;
    Ok(Toolchain {
        path: vec![
            zigbuild
                .parent()
                .context("cargo-zigbuild has no directory")?
                .to_owned(),
            zig,
        ],
    })
}

/// The directory of the `zig` binary PyPI's `ziglang` wheel holds, in a
/// virtualenv in the machine's cache.
fn zig_dir() -> anyhow::Result<PathBuf> {
    let venv = machine_cache().join(format!("ziglang-{ZIGLANG}"));
    let python = venv.join("bin").join("python");
    let locate = || {
        cmd::output(
            &python,
            &[
                "-c",
                "import importlib.metadata as m, os, ziglang; print(m.version('ziglang')); print(os.path.dirname(ziglang.__file__))",
            ],
        )
    };
    let found = locate().filter(|out| out.lines().next() == Some(ZIGLANG));
    let out = match found {
        Some(out) => out,
        None => {
            println!(
                "xtask: installing Zig {ZIGLANG} from PyPI (ziglang) into {}",
                venv.display()
            );
            crate::tools::python_venv(&venv)?;
            crate::tools::pip_install(&python, &format!("ziglang=={ZIGLANG}"))?;
            locate().context("ziglang installed, but python cannot import it")?
        }
    };
    let dir = PathBuf::from(out.lines().nth(1).unwrap_or_default().trim());
    anyhow::ensure!(
        dir.join("zig").is_file(),
        "the ziglang wheel has no zig binary in {}",
        dir.display()
    );
    Ok(dir)
}

/// Debian's qemu-user-static, installed when missing.
pub(crate) fn ensure_qemu() -> anyhow::Result<()> {
    if !apt::has(QEMU) {
        apt::install(&["qemu-user-static"])?;
    }
    Ok(())
}
