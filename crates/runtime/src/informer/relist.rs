//! Watches that start over from a fresh list when resuming cannot work.
//! kube-runtime's watcher relists only on 410 Gone and otherwise resumes
//! from its last resourceVersion forever; client-go's reflector also
//! relists when the server calls that resourceVersion too large (its
//! storage went back: an etcd restore, a restarted API server) and after
//! errors that keep repeating. So do we.

use std::pin::Pin;

use futures::{Stream, StreamExt};
use kube::core::Status;
use kube::runtime::watcher;

/// Errors in a row after which the watch starts over with a list.
pub(super) const MAX_ERRORS_IN_A_ROW: u32 = 5;

/// Whether `err` says the resourceVersion the watch resumes from is one
/// the server will never reach (kube-apiserver's 504 "Too large resource
/// version", cause `ResourceVersionTooLarge`).
pub(super) fn resource_version_too_large(err: &watcher::Error) -> bool {
    let status = match err {
        watcher::Error::WatchError(status) => status.as_ref(),
        watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status)) => status.as_ref(),
        _ => return false,
    };
    is_too_large(status)
}

fn is_too_large(status: &Status) -> bool {
    let by_cause = status.details.as_ref().is_some_and(|details| {
        details
            .causes
            .iter()
            .any(|cause| cause.reason == "ResourceVersionTooLarge")
    });
    by_cause || (status.code == 504 && status.message.contains("Too large resource version"))
}

type EventStream<K> = Pin<Box<dyn Stream<Item = watcher::Result<watcher::Event<K>>> + Send>>;

/// The events of `make()`'s watch, replaced by a fresh watch (which lists
/// again) after a too-large resourceVersion or [`MAX_ERRORS_IN_A_ROW`]
/// errors in a row. Every error is still passed on, for logging; the
/// fresh watch's `Init` … `InitDone` replaces the cache whole.
pub(super) fn restarting<K, F, S>(kind: String, make: F) -> EventStream<K>
where
    K: Send + 'static,
    F: Fn() -> S + Send + 'static,
    S: Stream<Item = watcher::Result<watcher::Event<K>>> + Send + 'static,
{
    let first: EventStream<K> = Box::pin(make());
    let stream = futures::stream::unfold(
        (first, 0_u32, make),
        move |(mut stream, mut errors, make)| {
            let kind = kind.clone();
            async move {
                let item = stream.next().await?;
                match &item {
                    Ok(_) => errors = 0,
                    Err(err) => {
                        errors += 1;
                        let too_large = resource_version_too_large(err);
                        if too_large || errors >= MAX_ERRORS_IN_A_ROW {
                            let why = if too_large {
                                "the server's storage is behind the resourceVersion it resumes from"
                            } else {
                                "it failed too many times in a row"
                            };
                            tracing::warn!(%kind, error = %err, "watch starts over with a fresh list: {why}");
                            let fresh: EventStream<K> = Box::pin(make());
                            return Some((item, (fresh, 0, make)));
                        }
                    }
                }
                Some((item, (stream, errors, make)))
            }
        },
    );
    Box::pin(stream)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use kube::core::response::{StatusCause, StatusDetails};

    use super::*;

    fn too_large() -> Box<Status> {
        Box::new(Status {
            code: 504,
            message: "Too large resource version: 900, current: 12".into(),
            reason: "Timeout".into(),
            details: Some(StatusDetails {
                causes: vec![StatusCause {
                    reason: "ResourceVersionTooLarge".into(),
                    message: "Too large resource version".into(),
                    field: String::new(),
                }],
                name: String::new(),
                group: String::new(),
                kind: String::new(),
                uid: String::new(),
                retry_after_seconds: 1,
            }),
            ..Status::default()
        })
    }

    fn other() -> Box<Status> {
        Box::new(Status {
            code: 500,
            message: "etcdserver: leader changed".into(),
            ..Status::default()
        })
    }

    #[test]
    fn a_too_large_resource_version_is_recognised_however_it_arrives() {
        assert!(resource_version_too_large(&watcher::Error::WatchError(
            too_large()
        )));
        assert!(resource_version_too_large(
            &watcher::Error::WatchStartFailed(kube::Error::Api(too_large()))
        ));
        assert!(!resource_version_too_large(&watcher::Error::WatchError(
            other()
        )));
        assert!(!resource_version_too_large(
            &watcher::Error::NoResourceVersion
        ));
    }

    /// A watch made `made` times, each yielding `errors` then pending.
    fn scripted(
        made: &Arc<AtomicUsize>,
        errors: Vec<fn() -> Box<Status>>,
    ) -> impl Fn() -> futures::stream::BoxStream<'static, watcher::Result<watcher::Event<()>>>
    + Send
    + 'static {
        let made = made.clone();
        move || {
            made.fetch_add(1, Ordering::SeqCst);
            let items: Vec<watcher::Result<watcher::Event<()>>> = errors
                .iter()
                .map(|e| Err(watcher::Error::WatchError(e())))
                .collect();
            futures::stream::iter(items)
                .chain(futures::stream::pending())
                .boxed()
        }
    }

    #[tokio::test]
    async fn a_too_large_resource_version_starts_a_fresh_watch_at_once() {
        let made = Arc::new(AtomicUsize::new(0));
        let mut stream = restarting("Node".into(), scripted(&made, vec![too_large]));
        assert!(stream.next().await.expect("an item").is_err());
        assert_eq!(made.load(Ordering::SeqCst), 2, "a fresh watch, so a relist");
    }

    #[tokio::test]
    async fn errors_that_keep_repeating_start_a_fresh_watch() {
        let made = Arc::new(AtomicUsize::new(0));
        let mut stream = restarting("Node".into(), scripted(&made, vec![other; 7]));
        for _ in 0..MAX_ERRORS_IN_A_ROW - 1 {
            assert!(stream.next().await.expect("an item").is_err());
        }
        assert_eq!(
            made.load(Ordering::SeqCst),
            1,
            "a few errors are retried in place"
        );
        assert!(stream.next().await.expect("an item").is_err());
        assert_eq!(made.load(Ordering::SeqCst), 2, "then the watch starts over");
    }
}
