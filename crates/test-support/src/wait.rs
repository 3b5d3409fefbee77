//! Bounded waiting for an outcome another process brings about.

use std::future::Future;
use std::time::{Duration, Instant};

/// How often [`eventually`] asks.
const POLL: Duration = Duration::from_millis(200);

/// Polls `check` every 200 ms until it answers `Some`, failing after
/// `timeout` with `what`.
///
/// # Errors
/// When `check` fails, or on timeout.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Option<T>>>,
{
    let start = Instant::now();
    loop {
        if let Some(value) = check().await? {
            return Ok(value);
        }
        anyhow::ensure!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(POLL).await;
    }
}
