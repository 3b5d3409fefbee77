//! Whether a watch makes progress. kube-runtime's watcher yields nothing
//! when a re-watch succeeds, so on a quiet cluster no event would ever say
//! that a watch recovered; the informer's own requests do, when the API
//! server answers them 2xx.

use std::sync::Arc;

use parking_lot::Mutex;

/// The last watch error, until a response or an event shows progress
/// again. Clones share it.
#[derive(Debug, Clone, Default)]
pub(super) struct Progress {
    last_error: Arc<Mutex<Option<String>>>,
}

impl Progress {
    /// The watch failed with `error`.
    pub(super) fn failed(&self, error: String) {
        *self.last_error.lock() = Some(error);
    }

    /// The watch made progress: an event, or a 2xx answer to a list or
    /// watch request.
    pub(super) fn made(&self) {
        *self.last_error.lock() = None;
    }

    /// The last error, unless progress came after it.
    pub(super) fn error(&self) -> Option<String> {
        self.last_error.lock().clone()
    }

    /// `client`, sending every request through itself and counting each
    /// 2xx answer as progress.
    ///
    /// # Guarantees
    /// A watcher sends one request at a time and yields a request's error
    /// before it sends the next, and a 2xx answer is counted before the
    /// watcher sees it, so a success and an error are counted in the order
    /// they happened: an error counts until a later request succeeds.
    ///
    /// # Assumptions
    /// Called within a tokio runtime (the client spawns its buffer's
    /// worker), and the client is used for this informer's list and watch
    /// requests only.
    pub(super) fn recording(&self, client: kube::Client) -> kube::Client {
        let default_namespace = client.default_namespace().to_owned();
        let progress = self.clone();
        let service = tower::service_fn(move |request| {
            let client = client.clone();
            let progress = progress.clone();
            async move {
                let response = client.send(request).await?;
                if response.status().is_success() {
                    progress.made();
                }
                Ok::<_, kube::Error>(response)
            }
        });
        kube::Client::new(service, default_namespace)
    }
}

#[cfg(test)]
mod tests {
    use http::{Request, Response, StatusCode};
    use kube::client::Body;

    use super::*;

    /// A client whose every request is answered `status`.
    fn answering(status: StatusCode) -> kube::Client {
        let service = tower::service_fn(move |_: Request<Body>| async move {
            Response::builder()
                .status(status)
                .body(Body::from(b"{}".to_vec()))
        });
        kube::Client::new(service, "default")
    }

    async fn send(client: &kube::Client) {
        let request = Request::get("/api/v1/nodes?watch=true")
            .body(Body::empty())
            .unwrap();
        client.send(request).await.unwrap();
    }

    #[tokio::test]
    async fn only_a_successful_answer_clears_the_last_error() {
        let progress = Progress::default();
        progress.failed("connection refused".into());
        send(&progress.recording(answering(StatusCode::SERVICE_UNAVAILABLE))).await;
        assert_eq!(
            progress.error().as_deref(),
            Some("connection refused"),
            "an error answer is no progress"
        );
        send(&progress.recording(answering(StatusCode::OK))).await;
        assert_eq!(progress.error(), None);
    }
}
