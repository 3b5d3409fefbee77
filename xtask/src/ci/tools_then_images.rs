//! The tools the tests and the images need, then the images' release
//! compile, in the background from the run's start: on a fresh machine
//! their downloads and cargo-auditable's compile (2 minutes of the run in
//! the foreground before) go on beside the workspace's build.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::image::Platform;
use crate::image::binary::Background;
use crate::tools;
use crate::tools::background::Build;

/// The background thread that installs the e2e and image tools, then
/// starts [`Background`], the images' compile.
pub(super) struct ToolsThenImages {
    build: Option<Build<Background>>,
    cancelled: Arc<AtomicBool>,
}

impl ToolsThenImages {
    /// Starts the tools' installs at idle priority; once they are in, the
    /// images' compile: every provider for amd64 (with `rebuilt`'s second
    /// compile later, in its image check), and `multi_arch` for arm64.
    pub(super) fn start(rebuilt: &'static str, multi_arch: &'static str) -> anyhow::Result<Self> {
        let meta = crate::image::metadata(rebuilt)?;
        let log = crate::cmd::target_dir().join("ci/images-compile.log");
        let cancelled = Arc::new(AtomicBool::new(false));
        let stop = cancelled.clone();
        let build = tools::background::spawn("e2e and image tools", None, move || {
            tools::ensure_e2e()?;
            tools::ensure_image()?;
            tools::zig::ensure()?;
            tools::zig::ensure_qemu()?;
            anyhow::ensure!(
                !stop.load(Ordering::SeqCst),
                "the run ended before the images' compile started"
            );
            Background::start(
                &meta,
                &[(Platform::Amd64, rebuilt), (Platform::Arm64, multi_arch)],
                &log,
            )
        });
        Ok(Self {
            build: Some(build),
            cancelled,
        })
    }

    /// Waits for the tools; answers the images' compile, running.
    pub(super) fn join(mut self) -> anyhow::Result<Background> {
        match self.build.take() {
            Some(build) => build.join(),
            None => anyhow::bail!("the e2e and image tools were joined twice"),
        }
    }
}

impl Drop for ToolsThenImages {
    /// Unjoined (a step before the tests failed): the images' compile is
    /// not started, or, started already, is killed as [`Background`]'s
    /// drop kills it. Waits for the tool install running to end.
    fn drop(&mut self) {
        self.cancelled.store(true, Ordering::SeqCst);
        if let Some(build) = self.build.take() {
            drop(build.join());
        }
    }
}
