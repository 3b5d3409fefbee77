//! umoci, from Debian: unpacks an OCI layout into a root filesystem, as a
//! runtime would, so the image's binary can be run from it.

use crate::tools::apt;

pub(crate) fn ensure() -> anyhow::Result<()> {
    if !apt::has("umoci") {
        apt::install(&["umoci"])?;
    }
    Ok(())
}
