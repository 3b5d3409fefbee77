//! Bounded waiting for an outcome another process brings about.

use std::future::Future;
use std::time::{Duration, Instant};

/// How often [`eventually`] asks.
const POLL: Duration = Duration::from_millis(50);
/// The most [`eventually`] asks: on a paused tokio clock a poll costs no
/// wall time, so the count bounds the wait too.
const MAX_POLLS: u32 = 50_000;

/// What a check given to [`eventually`] answers: `Some` when the outcome
/// is there, `None` to ask again, or (as `anyhow::Result`) an error that
/// ends the wait at once.
pub trait Outcome<T> {
    /// The answer as one shape.
    ///
    /// # Errors
    /// When the check failed.
    fn into_outcome(self) -> anyhow::Result<Option<T>>;
}

impl<T> Outcome<T> for Option<T> {
    fn into_outcome(self) -> anyhow::Result<Option<T>> {
        Ok(self)
    }
}

impl<T> Outcome<T> for anyhow::Result<Option<T>> {
    fn into_outcome(self) -> anyhow::Result<Option<T>> {
        self
    }
}

/// Polls `check` every 50 ms until it answers `Some`, failing after
/// `timeout` on the wall clock, or after 50,000 polls, with `what`.
/// It serves in-process tests on a paused tokio clock as well as the
/// end-to-end suites.
///
/// # Errors
/// When `check` fails, or on timeout.
pub async fn eventually<T, O, F, Fut>(
    what: &str,
    timeout: Duration,
    mut check: F,
) -> anyhow::Result<T>
where
    O: Outcome<T>,
    F: FnMut() -> Fut,
    Fut: Future<Output = O>,
{
    let start = Instant::now();
    for _ in 0..MAX_POLLS {
        if let Some(value) = check().await.into_outcome()? {
            return Ok(value);
        }
        anyhow::ensure!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(POLL).await;
    }
    anyhow::bail!("gave up after {MAX_POLLS} polls waiting for {what}")
}

#[cfg(test)]
mod tests {
    use super::eventually;
    use std::time::Duration;

    #[tokio::test]
    async fn answers_the_first_outcome_of_either_shape() {
        let mut asked = 0;
        let found = eventually("the third ask", Duration::from_secs(5), || {
            asked += 1;
            let now = asked;
            async move { (now == 3).then_some(now) }
        })
        .await
        .expect("found");
        assert_eq!(found, 3);
        let fallible = eventually("a fallible check", Duration::from_secs(5), || async {
            Ok(Some("ok"))
        })
        .await
        .expect("found");
        assert_eq!(fallible, "ok");
    }

    #[tokio::test]
    async fn stops_at_an_error_or_the_timeout() {
        let failed = eventually::<(), _, _, _>("never", Duration::from_secs(5), || async {
            Err(anyhow::anyhow!("the check broke"))
        })
        .await
        .expect_err("an error ends the wait");
        assert_eq!(failed.to_string(), "the check broke");
        let late =
            eventually::<(), _, _, _>("nothing", Duration::from_millis(250), || async { None })
                .await
                .expect_err("times out");
        assert!(late.to_string().contains("waiting for nothing"), "{late}");
    }
}
