//! What static images need: rustup's `x86_64-unknown-linux-musl` standard
//! library, and Debian's `musl-tools` for `musl-gcc`, the C compiler
//! aws-lc-sys builds its C and assembly with.

use crate::tools::apt;

/// The target every image's binary is built for.
pub(crate) const TARGET: &str = crate::image::Platform::Amd64.target();

pub(crate) fn ensure() -> anyhow::Result<()> {
    crate::tools::rustup_target(TARGET)?;
    if !apt::has("musl-gcc") {
        apt::install(&["musl-tools"])?;
    }
    Ok(())
}
