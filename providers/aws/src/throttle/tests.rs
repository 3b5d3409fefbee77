//! The throttle's tests: buckets per action, the pacing bound, the bulk
//! lane, and upstream's backoff.

use super::*;

#[tokio::test(start_paused = true)]
async fn bucket_admits_a_burst_then_asks_to_wait_for_the_next_token() {
    let throttle = Throttle::new(RateLimits::uniform(RateLimit {
        qps: 10.0,
        burst: 3,
    }))
    .unwrap();
    for _ in 0..3 {
        assert_eq!(throttle.admit(), Ok(()));
    }
    let wait = throttle.admit().unwrap_err();
    assert_eq!(wait, Duration::from_millis(100));
    tokio::time::advance(wait).await;
    assert_eq!(throttle.admit(), Ok(()));
}

#[test]
fn describes_gets_and_lists_read_and_every_other_action_mutates() {
    for read in [
        "DescribeInstances",
        "DescribeRouteTables",
        "GetConsoleOutput",
        "ListTags",
    ] {
        assert_eq!(Kind::of(read), Kind::Read, "{read}");
    }
    for mutation in [
        "CreateRoute",
        "ModifyInstanceAttribute",
        "RegisterTargets",
        "AddTags",
    ] {
        assert_eq!(Kind::of(mutation), Kind::Mutation, "{mutation}");
    }
}

#[tokio::test(start_paused = true)]
async fn each_action_has_a_bucket_of_its_own_sized_by_its_kind() {
    let throttle = Throttle::new(RateLimits::default()).unwrap();
    let start = Instant::now();
    // 200 routes: AWS's bucket for a mutating action holds 200, and the
    // instances' ModifyInstanceAttribute calls have their own.
    for action in ["CreateRoute", "ModifyInstanceAttribute"] {
        for _ in 0..200 {
            throttle
                .admit_within(action, MAX_PACING_WAIT)
                .await
                .expect("within the action's burst");
        }
    }
    assert_eq!(start.elapsed(), Duration::ZERO);
    // The describe buckets are untouched: a whole burst each.
    for _ in 0..100 {
        assert_eq!(throttle.admit(), Ok(()));
        throttle
            .admit_within("DescribeRouteTables", Duration::ZERO)
            .await
            .expect("its own bucket");
    }
    assert_eq!(throttle.admit(), Err(Duration::from_millis(50)));
    // The next create waits for its refill, 5 per second.
    assert_eq!(
        throttle
            .admit_within("CreateRoute", Duration::from_millis(100))
            .await,
        Err(Duration::from_millis(200))
    );
}

#[tokio::test(start_paused = true)]
async fn route_work_waits_its_turn_at_the_refill_rate_instead_of_failing() {
    let throttle = Arc::new(Throttle::new(RateLimits::default()).unwrap());
    let start = Instant::now();
    // 260 creates, 16 in flight, as a batch keeps them: 200 from the
    // burst, then 5 a second, each waiting about three seconds.
    let slots = Arc::new(tokio::sync::Semaphore::new(16));
    let mut creates = Vec::new();
    for _ in 0..260 {
        let (throttle, slots) = (Arc::clone(&throttle), Arc::clone(&slots));
        creates.push(tokio::spawn(bulk(async move {
            let _slot = slots.acquire().await;
            throttle.admit_within("CreateRoute", MAX_PACING_WAIT).await
        })));
    }
    for create in creates {
        assert_eq!(create.await.unwrap(), Ok(()), "paced, not failed");
    }
    assert_eq!(
        start.elapsed(),
        Duration::from_secs(12),
        "60 at 5 per second"
    );
    // Outside the bulk lane the caller's bound holds.
    let short = Duration::from_millis(100);
    assert_eq!(
        throttle.admit_within("CreateRoute", short).await,
        Err(Duration::from_millis(200))
    );
    assert_eq!(
        bulk(throttle.admit_within("CreateRoute", short)).await,
        Ok(())
    );
    // Nor does a bulk call wait through upstream's backoff.
    let delay = throttle.throttled();
    assert_eq!(
        bulk(throttle.admit_within("CreateRoute", MAX_PACING_WAIT)).await,
        Err(delay)
    );
}

#[tokio::test(start_paused = true)]
async fn a_call_waits_briefly_for_its_token_but_not_through_a_backoff() {
    let throttle = Throttle::new(RateLimits::uniform(RateLimit {
        qps: 10.0,
        burst: 2,
    }))
    .unwrap();
    let start = Instant::now();
    for _ in 0..5 {
        throttle
            .admit_within("DescribeInstances", MAX_PACING_WAIT)
            .await
            .expect("a token within the bound");
    }
    // Two from the burst, then one every 100 ms.
    assert_eq!(start.elapsed(), Duration::from_millis(300));
    // A wait longer than the bound is not waited for.
    assert_eq!(
        throttle
            .admit_within("DescribeInstances", Duration::from_millis(50))
            .await,
        Err(Duration::from_millis(100))
    );
    assert_eq!(start.elapsed(), Duration::from_millis(300));
    // Nor is upstream's backoff.
    let delay = throttle.throttled();
    assert_eq!(
        throttle
            .admit_within("DescribeInstances", MAX_PACING_WAIT)
            .await,
        Err(delay)
    );
    assert_eq!(start.elapsed(), Duration::from_millis(300));
}

#[tokio::test(start_paused = true)]
async fn a_call_outside_the_bulk_lane_never_queues_behind_route_work() {
    let throttle = Arc::new(
        Throttle::new(RateLimits::uniform(RateLimit {
            qps: 20.0,
            burst: 1,
        }))
        .unwrap(),
    );
    // Route calls arriving every 2 ms for 2 s, as a pass's creates do:
    // each newcomer is as eager for the next token as the calls before.
    let routes = tokio::spawn({
        let throttle = throttle.clone();
        async move {
            let mut calls = Vec::new();
            for _ in 0..1_000 {
                let throttle = throttle.clone();
                calls.push(tokio::spawn(bulk(async move {
                    throttle
                        .admit_within("DescribeInstances", MAX_PACING_WAIT)
                        .await
                })));
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            calls
        }
    });
    tokio::time::sleep(Duration::from_millis(10)).await;
    // A load balancer's ensure: ten calls in a row, each at the next
    // token (50 ms apart), not sharing the tokens with the route calls.
    let start = Instant::now();
    for _ in 0..10 {
        throttle
            .admit_within("DescribeInstances", MAX_PACING_WAIT)
            .await
            .expect("admitted");
    }
    assert!(
        start.elapsed() <= Duration::from_millis(500),
        "ten calls at the next ten tokens: {:?}",
        start.elapsed()
    );
    let mut admitted = 0;
    for call in routes.await.unwrap() {
        admitted += usize::from(call.await.unwrap().is_ok());
    }
    assert!(
        admitted >= 20,
        "the route calls had the other tokens: {admitted}"
    );
}

#[tokio::test(start_paused = true)]
async fn one_throttle_in_a_quiet_process_blocks_every_call_for_upstreams_delay() {
    let throttle = Throttle::new(RateLimits::default()).unwrap();
    assert_eq!(throttle.admit(), Ok(()));
    // 1 throttled of 5 counted calls (4 of bias): 20% of 60 s.
    let delay = throttle.throttled();
    assert_eq!(delay, Duration::from_secs(12));
    assert_eq!(throttle.admit(), Err(Duration::from_secs(12)));
    tokio::time::advance(Duration::from_secs(11)).await;
    assert_eq!(throttle.admit(), Err(Duration::from_secs(1)));
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(throttle.admit(), Ok(()));
}

#[tokio::test(start_paused = true)]
async fn backoff_grows_with_the_recent_throttle_rate_and_is_capped_at_a_minute() {
    let throttle = Throttle::new(RateLimits::default()).unwrap();
    let mut last = Duration::ZERO;
    for _ in 0..20 {
        last = throttle.throttled();
    }
    assert_eq!(last, MAX_DELAY);
}

#[tokio::test(start_paused = true)]
async fn a_rare_throttle_among_many_calls_still_waits_a_second() {
    let throttle = Throttle::new(RateLimits::uniform(RateLimit {
        qps: 1000.0,
        burst: 1000,
    }))
    .unwrap();
    for _ in 0..100 {
        throttle.admit().expect("within the limit");
    }
    assert_eq!(throttle.throttled(), Duration::from_secs(1));
}

#[tokio::test(start_paused = true)]
async fn throttle_counts_decay_so_old_throttles_stop_mattering() {
    let throttle = Throttle::new(RateLimits::default()).unwrap();
    for _ in 0..5 {
        throttle.throttled();
    }
    // Ten minutes later the old throttles weigh almost nothing.
    tokio::time::advance(Duration::from_secs(600)).await;
    for _ in 0..12 {
        throttle.admit().expect("backoff has expired");
    }
    // Without decay this would be 6 of 16 calls: 22 s.
    assert_eq!(throttle.throttled(), Duration::from_secs(1));
}
