//! Every long-running task of the process, owned and joined: the health
//! server, the controllers, the informers. None of them may end before
//! shutdown, so the first that does (returning, failing or panicking)
//! names itself and why, and the process stops with a non-zero exit
//! instead of answering `/healthz` while doing nothing; Kubernetes
//! restarts it and a standby takes over.

use std::collections::HashMap;
use std::future::Future;

use tokio::task::{Id, JoinError, JoinSet};
use tokio_util::sync::CancellationToken;

/// The tasks, by name.
#[derive(Debug, Default)]
pub(crate) struct Supervisor {
    tasks: JoinSet<Result<(), String>>,
    names: HashMap<Id, String>,
}

impl Supervisor {
    /// Runs `task` as `name`: `Ok` when it ends on shutdown, or why it
    /// failed.
    pub(crate) fn spawn<F>(&mut self, name: impl Into<String>, task: F)
    where
        F: Future<Output = Result<(), String>> + Send + 'static,
    {
        let handle = self.tasks.spawn(task);
        self.names.insert(handle.id(), name.into());
    }

    /// Runs `task`, which has nothing to report, as `name`.
    pub(crate) fn spawn_unit<F>(&mut self, name: impl Into<String>, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.spawn(name, async move {
            task.await;
            Ok(())
        });
    }

    /// Waits for the first task to end and says which and why, in one
    /// line; never resolves when there is none.
    pub(crate) async fn first_ended(&mut self) -> String {
        match self.tasks.join_next_with_id().await {
            Some(Ok((id, result))) => {
                let name = self.name(id);
                match result {
                    Ok(()) => format!("{name} stopped unexpectedly"),
                    Err(why) => format!("{name} failed: {why}"),
                }
            }
            Some(Err(err)) => {
                let name = self.name(err.id());
                format!("{name} {}", describe(err))
            }
            None => std::future::pending().await,
        }
    }

    /// [`Supervisor::first_ended`], counting only what ends before
    /// `shutdown` was asked for: a task that ends because of it is no
    /// failure, and then this never resolves (the caller's own shutdown
    /// branch takes over).
    pub(crate) async fn first_failure(&mut self, shutdown: &CancellationToken) -> String {
        let why = self.first_ended().await;
        if shutdown.is_cancelled() {
            return std::future::pending().await;
        }
        why
    }

    /// Waits for every task to end (after shutdown was asked for),
    /// logging any that failed on the way down.
    pub(crate) async fn join_all(mut self) {
        while let Some(joined) = self.tasks.join_next_with_id().await {
            match joined {
                Ok((_, Ok(()))) => {}
                Ok((id, Err(why))) => {
                    tracing::warn!(task = %self.name(id), "failed while stopping: {why}");
                }
                Err(err) => {
                    let name = self.name(err.id());
                    tracing::warn!(task = %name, "{}", describe(err));
                }
            }
        }
    }

    fn name(&self, id: Id) -> String {
        self.names
            .get(&id)
            .cloned()
            .unwrap_or_else(|| "a task".to_owned())
    }
}

/// "panicked: <message>" or "was cancelled".
fn describe(err: JoinError) -> String {
    if !err.is_panic() {
        return "was cancelled".to_owned();
    }
    let payload = err.into_panic();
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned());
    // One line: a multi-line panic message is joined.
    format!(
        "panicked: {}",
        message.lines().collect::<Vec<_>>().join(" ")
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_panicking_task_is_named_with_its_message() {
        let mut supervisor = Supervisor::default();
        supervisor.spawn_unit("controller route", std::future::pending());
        supervisor.spawn_unit("controller service", async {
            tokio::time::sleep(Duration::from_millis(10)).await;
            panic!("overflow when adding\nduration to instant");
        });
        let why = tokio::time::timeout(Duration::from_secs(5), supervisor.first_ended())
            .await
            .expect("the panic is seen");
        assert_eq!(
            why,
            "controller service panicked: overflow when adding duration to instant"
        );
    }

    #[tokio::test]
    async fn a_task_that_returns_or_fails_early_is_named() {
        let mut supervisor = Supervisor::default();
        supervisor.spawn_unit("informers", async {});
        assert_eq!(
            supervisor.first_ended().await,
            "informers stopped unexpectedly"
        );
        supervisor.spawn("the health and metrics server", async {
            Err("address in use".to_owned())
        });
        assert_eq!(
            supervisor.first_ended().await,
            "the health and metrics server failed: address in use"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_task_ending_after_shutdown_is_no_failure() {
        let shutdown = CancellationToken::new();
        let mut supervisor = Supervisor::default();
        supervisor.spawn_unit("informers", async {});
        shutdown.cancel();
        let waited = tokio::time::timeout(
            Duration::from_secs(3600),
            supervisor.first_failure(&shutdown),
        )
        .await;
        assert!(waited.is_err(), "counted as a failure: {waited:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn with_no_task_nothing_ends() {
        let mut supervisor = Supervisor::default();
        let waited =
            tokio::time::timeout(Duration::from_secs(3600), supervisor.first_ended()).await;
        assert!(waited.is_err(), "an empty supervisor resolved: {waited:?}");
    }
}
