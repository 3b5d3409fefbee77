//! skopeo, from Debian: reads the image archives as a container engine
//! would, both as an oci-archive and as a docker-archive, and pushes images.

use crate::tools::apt;

pub(crate) fn ensure() -> anyhow::Result<()> {
    if !apt::has("skopeo") {
        apt::install(&["skopeo"])?;
    }
    Ok(())
}
