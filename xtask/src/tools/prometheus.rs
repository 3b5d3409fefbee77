//! Prometheus and promtool, from Debian's `prometheus` package (2.42 on
//! bookworm): `cargo xtask monitoring` checks and unit-tests the chart's
//! alert rules with promtool and runs the server against the sandbox's CCM.
//! The package's own service is never started by us; the task runs its own
//! server on a loopback port with a scratch data directory.

use crate::tools::apt;

pub(crate) fn ensure() -> anyhow::Result<()> {
    if !apt::has("prometheus") || !apt::has("promtool") {
        apt::install(&["prometheus"])?;
    }
    Ok(())
}
