//! kubectl, from Debian's `kubernetes-client` package (v1.20 on bookworm):
//! test-apiserver's kubectl test drives it as an independent client. A
//! kubectl already on `PATH`, of any version, is left alone.

use crate::tools::apt;

pub(crate) fn ensure() -> anyhow::Result<()> {
    if !apt::has("kubectl") {
        apt::install(&["kubernetes-client"])?;
    }
    Ok(())
}
