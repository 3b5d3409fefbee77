//! The limiter on tokio's paused clock: rate, burst, order and refusals.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::*;

const BOUND: Duration = Duration::from_secs(60);

#[tokio::test(start_paused = true)]
async fn try_acquire_lets_a_burst_through_then_one_call_per_interval() {
    let limiter = RateLimiter::new(10.0, 3).unwrap();
    for _ in 0..3 {
        assert_eq!(limiter.try_acquire(), Ok(()));
    }
    let wait = limiter.try_acquire().unwrap_err();
    assert_eq!(wait, Duration::from_millis(100), "one call every 1/qps");
    tokio::time::advance(Duration::from_millis(99)).await;
    assert_eq!(limiter.try_acquire(), Err(Duration::from_millis(1)));
    tokio::time::advance(Duration::from_millis(1)).await;
    assert_eq!(limiter.try_acquire(), Ok(()));
    assert!(limiter.try_acquire().is_err(), "the refilled call is spent");
}

#[tokio::test(start_paused = true)]
async fn a_quiet_period_saves_up_at_most_the_burst() {
    let limiter = RateLimiter::new(10.0, 3).unwrap();
    for _ in 0..3 {
        limiter.try_acquire().unwrap();
    }
    tokio::time::advance(Duration::from_secs(3600)).await;
    for _ in 0..3 {
        assert_eq!(limiter.try_acquire(), Ok(()));
    }
    assert_eq!(limiter.try_acquire(), Err(Duration::from_millis(100)));
}

#[tokio::test(start_paused = true)]
async fn acquire_waits_beyond_the_burst_at_the_sustained_rate() {
    let limiter = RateLimiter::new(10.0, 3).unwrap();
    let start = Instant::now();
    for _ in 0..3 {
        limiter.acquire().await;
    }
    assert_eq!(start.elapsed(), Duration::ZERO, "the burst goes at once");
    for _ in 0..5 {
        limiter.acquire().await;
    }
    assert_eq!(
        start.elapsed(),
        Duration::from_millis(500),
        "then 10 a second"
    );
}

#[tokio::test(start_paused = true)]
async fn a_pacer_spaces_calls_and_saves_up_no_burst() {
    let pacer = RateLimiter::pacer(4.0).unwrap();
    let start = Instant::now();
    for _ in 0..5 {
        pacer.acquire().await;
    }
    assert_eq!(
        start.elapsed(),
        Duration::from_secs(1),
        "the first at once, then 4 × 250 ms"
    );
    tokio::time::advance(Duration::from_secs(60)).await;
    let quiet = Instant::now();
    pacer.acquire().await;
    pacer.acquire().await;
    assert_eq!(
        quiet.elapsed(),
        Duration::from_millis(250),
        "a quiet minute saves up one call, not more"
    );
}

#[tokio::test(start_paused = true)]
async fn fractional_rates_are_kept_exactly() {
    let limiter = RateLimiter::new(0.5, 1).unwrap();
    limiter.try_acquire().unwrap();
    assert_eq!(limiter.try_acquire(), Err(Duration::from_secs(2)));
    let limiter = RateLimiter::new(3.0, 1).unwrap();
    limiter.try_acquire().unwrap();
    assert_eq!(
        limiter.try_acquire(),
        Err(Duration::from_nanos(333_333_333))
    );
}

#[tokio::test(start_paused = true)]
async fn acquirers_are_served_in_arrival_order() {
    let pacer = Arc::new(RateLimiter::pacer(10.0).unwrap());
    let start = Instant::now();
    let served = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for id in 0..5_u64 {
        let (pacer, served) = (pacer.clone(), served.clone());
        tasks.push(tokio::spawn(async move {
            pacer.acquire().await;
            served.lock().unwrap().push((id, start.elapsed()));
        }));
        // Each waiter queues before the next arrives.
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    tokio::time::timeout(BOUND, join_every(tasks))
        .await
        .expect("every waiter is served");
    let served = served.lock().unwrap().clone();
    let expected: Vec<_> = (0..5_u64)
        .map(|id| (id, Duration::from_millis(100 * id)))
        .collect();
    assert_eq!(served, expected);
}

#[tokio::test(start_paused = true)]
async fn an_abandoned_acquire_takes_nothing() {
    let pacer = RateLimiter::pacer(1.0).unwrap();
    pacer.acquire().await;
    let gave_up = tokio::time::timeout(Duration::from_millis(500), pacer.acquire()).await;
    assert!(gave_up.is_err(), "the second call waits a full second");
    tokio::time::advance(Duration::from_millis(500)).await;
    assert_eq!(
        pacer.try_acquire(),
        Ok(()),
        "the abandoned call took nothing"
    );
    assert_eq!(pacer.try_acquire(), Err(Duration::from_secs(1)));
}

#[test]
fn rates_that_cannot_be_enforced_are_refused() {
    for qps in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert!(
            matches!(RateLimiter::new(qps, 1), Err(InvalidRateLimit::Qps { .. })),
            "{qps}"
        );
    }
    assert_eq!(
        RateLimiter::new(1.0, 0).unwrap_err(),
        InvalidRateLimit::ZeroBurst
    );
    assert!(matches!(
        RateLimiter::new(1e-12, 1),
        Err(InvalidRateLimit::TooSlow { .. })
    ));
    let limiter = RateLimiter::new(1e12, 7).expect("faster than governor counts is allowed");
    assert_eq!((limiter.qps(), limiter.burst()), (1e12, 7));
}

async fn join_every(tasks: Vec<tokio::task::JoinHandle<()>>) {
    for task in tasks {
        task.await.expect("the waiter does not panic");
    }
}

#[tokio::test(start_paused = true)]
async fn a_caller_arriving_when_a_call_frees_up_queues_behind_the_waiter() {
    let pacer = Arc::new(RateLimiter::pacer(10.0).unwrap());
    let start = Instant::now();
    pacer.acquire().await;
    let waiter = tokio::spawn({
        let pacer = pacer.clone();
        async move {
            pacer.acquire().await;
            start.elapsed()
        }
    });
    tokio::time::sleep(Duration::from_millis(1)).await;
    tokio::time::advance(Duration::from_millis(99)).await;
    tokio::time::timeout(BOUND, pacer.acquire())
        .await
        .expect("the late caller is served");
    let late = start.elapsed();
    let waited = tokio::time::timeout(BOUND, waiter)
        .await
        .expect("the waiter is served")
        .unwrap();
    assert_eq!(waited, Duration::from_millis(100), "the waiter's call");
    assert_eq!(late, Duration::from_millis(200), "the next one");
}
