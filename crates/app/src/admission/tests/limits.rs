//! What one call to the webhook may cost: bodies capped at kube-apiserver's
//! limit as they stream in, slots with load shedding, a read timeout.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{Request, StatusCode, header};
use futures::StreamExt;
use http_body_util::BodyExt;
use tower::ServiceExt;

use super::*;
use crate::admission::handler::{Limits, MAX_BODY, Reviewer, validate};

const CHUNK: usize = 64 * 1024;

/// A router over the fake cloud with `limits`.
fn limited(limits: Limits) -> Router {
    Router::new()
        .route(PATH, axum::routing::post(validate))
        .with_state(Reviewer::with_limits(
            Arc::new(FakeCloud::default()),
            Policy::Upstream,
            limits,
        ))
}

fn post(body: Body) -> Request<Body> {
    Request::post(PATH)
        .header(header::CONTENT_TYPE, "application/json")
        .body(body)
        .unwrap()
}

/// A body of `chunks` chunks of spaces, counting the chunks read.
fn counted(chunks: usize) -> (Body, Arc<AtomicUsize>) {
    let read = Arc::new(AtomicUsize::new(0));
    let counter = read.clone();
    let stream = futures::stream::iter(0..chunks).map(move |_| {
        counter.fetch_add(1, Ordering::SeqCst);
        Ok::<_, std::io::Error>(Bytes::from(vec![b' '; CHUNK]))
    });
    (Body::from_stream(stream), read)
}

/// A body that never arrives.
fn stalled() -> Body {
    Body::from_stream(futures::stream::pending::<Result<Bytes, std::io::Error>>())
}

#[tokio::test]
async fn a_body_over_kube_apiservers_limit_is_refused_as_it_streams() {
    assert_eq!(MAX_BODY, 3 * 1024 * 1024);
    let (body, read) = counted(64); // 4 MiB, no length declared
    let response = limited(Limits::default())
        .oneshot(post(body))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let read = read.load(Ordering::SeqCst);
    assert!(
        read <= MAX_BODY / CHUNK + 1,
        "stopped reading at the limit: {read} of 64 chunks read"
    );
}

#[tokio::test]
async fn a_declared_length_over_the_limit_is_refused_before_reading() {
    let (body, read) = counted(64);
    let mut request = post(body);
    request
        .headers_mut()
        .insert(header::CONTENT_LENGTH, (64 * CHUNK).into());
    let response = limited(Limits::default()).oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(read.load(Ordering::SeqCst), 0, "nothing read");
}

#[tokio::test]
async fn a_review_just_under_the_limit_is_answered() {
    let padding = "a".repeat(MAX_BODY - 2 * 1024);
    let svc = service("LoadBalancer", &[("example.com/padding", padding.as_str())]);
    let body = review("CREATE", &svc, None);
    assert!(body.len() <= MAX_BODY, "{}", body.len());
    let response = limited(Limits::default())
        .oneshot(post(Body::from(body)))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let answer: Value =
        serde_json::from_slice(&response.into_body().collect().await.unwrap().to_bytes()).unwrap();
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
}

#[tokio::test(start_paused = true)]
async fn reviews_beyond_the_slots_are_shed_with_retry_after() {
    let router = limited(Limits {
        concurrent: 2,
        queue_wait: Duration::from_millis(100),
        ..Limits::default()
    });
    let busy: Vec<_> = (0..2)
        .map(|_| tokio::spawn(router.clone().oneshot(post(stalled()))))
        .collect();
    tokio::time::sleep(Duration::from_millis(10)).await;
    let shed = router
        .clone()
        .oneshot(post(Body::from(review(
            "CREATE",
            &service("LoadBalancer", &[]),
            None,
        ))))
        .await
        .unwrap();
    assert_eq!(shed.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(shed.headers()[header::RETRY_AFTER], "1");
    for call in busy {
        call.abort();
    }
    tokio::time::sleep(Duration::from_millis(10)).await;
    let answered = router
        .oneshot(post(Body::from(review(
            "CREATE",
            &service("LoadBalancer", &[]),
            None,
        ))))
        .await
        .unwrap();
    assert_eq!(answered.status(), StatusCode::OK, "slots freed");
}

#[tokio::test(start_paused = true)]
async fn a_body_that_does_not_arrive_in_time_is_refused_408() {
    let started = tokio::time::Instant::now();
    let response = limited(Limits::default())
        .oneshot(post(stalled()))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::REQUEST_TIMEOUT);
    assert_eq!(started.elapsed(), Limits::default().read_timeout);
}
