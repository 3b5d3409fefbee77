//! A client-side token bucket, as client-go's `flowcontrol` rate limiter:
//! `qps` tokens a second, up to `burst` saved.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::time::{Instant, Sleep};
use tower::{Layer, Service};

#[derive(Debug)]
struct Bucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl Bucket {
    /// Takes a token, possibly on credit, and says how long to wait before
    /// using it: callers are served in order.
    fn reserve(&mut self, now: Instant) -> Duration {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.qps).min(self.burst);
        self.last = now;
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.qps)
        }
    }
}

/// Wraps a client stack so that requests start at most `qps` per second.
///
/// kube's client serialises calls through a buffer worker, so waiting in
/// `poll_ready` holds every later request back in order.
#[derive(Debug, Clone)]
pub(crate) struct QpsLayer {
    bucket: Arc<Mutex<Bucket>>,
}

impl QpsLayer {
    pub(crate) fn new(qps: f64, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        Self {
            bucket: Arc::new(Mutex::new(Bucket {
                qps,
                burst,
                tokens: burst,
                last: Instant::now(),
            })),
        }
    }
}

impl<S> Layer<S> for QpsLayer {
    type Service = QpsLimited<S>;

    fn layer(&self, inner: S) -> Self::Service {
        QpsLimited {
            inner,
            bucket: self.bucket.clone(),
            wait: None,
            reserved: false,
        }
    }
}

/// The service [`QpsLayer`] produces.
pub(crate) struct QpsLimited<S> {
    inner: S,
    bucket: Arc<Mutex<Bucket>>,
    wait: Option<Pin<Box<Sleep>>>,
    reserved: bool,
}

impl<S> std::fmt::Debug for QpsLimited<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QpsLimited")
            .field("reserved", &self.reserved)
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
        if !self.reserved {
            let delay = self
                .bucket
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .reserve(Instant::now());
            self.reserved = true;
            if !delay.is_zero() {
                self.wait = Some(Box::pin(tokio::time::sleep(delay)));
            }
        }
        if let Some(wait) = &mut self.wait {
            ready!(wait.as_mut().poll(cx));
            self.wait = None;
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        self.reserved = false;
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;
    use tower::ServiceExt;

    #[tokio::test(start_paused = true)]
    async fn requests_beyond_the_burst_wait_for_tokens() {
        let layer = QpsLayer::new(10.0, 3);
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
}
