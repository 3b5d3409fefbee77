//! The Kubernetes client's client-side limit, as client-go's `flowcontrol`
//! token bucket: `--kube-api-qps` requests a second, up to
//! `--kube-api-burst` at once, enforced by the workspace's one
//! [`RateLimiter`] as a tower layer.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use ccm_cloud_provider::{InvalidRateLimit, RateLimiter};
use tokio::time::Sleep;
use tower::{Layer, Service};

/// Wraps a client stack so that requests start at most `qps` per second.
///
/// kube's client serialises calls through a buffer worker, so waiting in
/// `poll_ready` holds every later request back in order.
#[derive(Debug, Clone)]
pub(crate) struct QpsLayer {
    limiter: Arc<RateLimiter>,
}

impl QpsLayer {
    pub(crate) fn new(qps: f64, burst: u32) -> Result<Self, InvalidRateLimit> {
        Ok(Self {
            limiter: Arc::new(RateLimiter::new(qps, burst)?),
        })
    }
}

impl<S> Layer<S> for QpsLayer {
    type Service = QpsLimited<S>;

    fn layer(&self, inner: S) -> Self::Service {
        QpsLimited {
            inner,
            limiter: self.limiter.clone(),
            wait: None,
            admitted: false,
        }
    }
}

/// The service [`QpsLayer`] produces.
pub(crate) struct QpsLimited<S> {
    inner: S,
    limiter: Arc<RateLimiter>,
    wait: Option<Pin<Box<Sleep>>>,
    /// The next request's token is taken; the inner service may not be
    /// ready yet.
    admitted: bool,
}

impl<S> std::fmt::Debug for QpsLimited<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QpsLimited")
            .field("limiter", &self.limiter)
            .field("admitted", &self.admitted)
            .finish_non_exhaustive()
    }
}

impl<S, R> Service<R> for QpsLimited<S>
where
    S: Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        while !self.admitted {
            if let Some(wait) = &mut self.wait {
                ready!(wait.as_mut().poll(cx));
                self.wait = None;
            }
            match self.limiter.try_acquire() {
                Ok(()) => self.admitted = true,
                Err(delay) => self.wait = Some(Box::pin(tokio::time::sleep(delay))),
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        self.admitted = false;
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;
    use std::time::Duration;
    use tokio::time::Instant;
    use tower::ServiceExt;

    #[tokio::test(start_paused = true)]
    async fn requests_beyond_the_burst_wait_for_tokens() {
        let layer = QpsLayer::new(10.0, 3).unwrap();
        let mut service = layer.layer(tower::service_fn(|()| async { Ok::<_, Infallible>(()) }));
        let start = Instant::now();
        for _ in 0..3 {
            service.ready().await.unwrap().call(()).await.unwrap();
        }
        assert_eq!(start.elapsed(), Duration::ZERO, "the burst goes at once");
        for _ in 0..5 {
            service.ready().await.unwrap().call(()).await.unwrap();
        }
        assert_eq!(
            start.elapsed(),
            Duration::from_millis(500),
            "then 10 per second"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn clones_of_the_layer_share_one_limit() {
        let layer = QpsLayer::new(10.0, 1).unwrap();
        let echo = || tower::service_fn(|()| async { Ok::<_, Infallible>(()) });
        let (mut a, mut b) = (layer.layer(echo()), layer.clone().layer(echo()));
        let start = Instant::now();
        a.ready().await.unwrap().call(()).await.unwrap();
        b.ready().await.unwrap().call(()).await.unwrap();
        assert_eq!(start.elapsed(), Duration::from_millis(100));
    }
}
