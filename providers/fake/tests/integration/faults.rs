//! Latency, fault and rate-limit injection, and the call log.

use crate::support;

use std::num::NonZeroUsize;
use std::time::Duration;

use ccm_cloud_provider::{CloudError, Instances};
use ccm_provider_fake::{FakeCloud, InjectedError, Operation};
use support::node;
use tokio::time::Instant;

fn auto_cloud() -> FakeCloud {
    let cloud = FakeCloud::default();
    cloud.set_auto_instances(true);
    cloud
}

#[tokio::test(start_paused = true)]
async fn latency_is_added_to_every_call() {
    let cloud = auto_cloud();
    cloud.set_latency(Duration::from_millis(50));
    let start = Instant::now();
    cloud.instance_exists(&node("a")).await.unwrap();
    cloud
        .instances_metadata(&[node("a"), node("b")])
        .await
        .unwrap();
    assert_eq!(start.elapsed(), Duration::from_millis(100));
}

#[tokio::test]
async fn injected_errors_hit_the_next_matching_calls_only() {
    let cloud = auto_cloud();
    cloud.fail_next(
        Some(Operation::InstanceMetadata),
        InjectedError::NotFound,
        2,
    );
    // Another operation is not affected.
    assert!(cloud.instance_exists(&node("a")).await.unwrap());
    for _ in 0..2 {
        let err = cloud.instance_metadata(&node("a")).await.unwrap_err();
        assert!(matches!(err, CloudError::InstanceNotFound), "{err:?}");
    }
    assert!(cloud.instance_metadata(&node("a")).await.is_ok());

    cloud.fail_next(
        None,
        InjectedError::Throttled {
            retry_after: Duration::from_secs(7),
        },
        1,
    );
    let err = cloud.instance_shutdown(&node("a")).await.unwrap_err();
    assert_eq!(err.requested_delay(), Some(Duration::from_secs(7)));
}

#[tokio::test]
async fn error_rate_fails_that_fraction_of_calls() {
    let cloud = auto_cloud();
    cloud.set_error_rate(0.25);
    let mut failures = 0;
    for _ in 0..2000 {
        if cloud.instance_exists(&node("a")).await.is_err() {
            failures += 1;
        }
    }
    assert!(
        (400..600).contains(&failures),
        "{failures} of 2000 failed at rate 0.25"
    );

    cloud.set_error_rate(1.0);
    assert!(matches!(
        cloud.instance_exists(&node("a")).await,
        Err(CloudError::Other { .. })
    ));
    cloud.set_error_rate(0.0);
    assert!(cloud.instance_exists(&node("a")).await.is_ok());
}

#[tokio::test(start_paused = true)]
async fn rate_limit_answers_throttled_beyond_the_bucket_and_refills() {
    let cloud = auto_cloud();
    cloud.set_rate_limit(Some((10.0, 2))).unwrap();
    assert!(cloud.instance_exists(&node("a")).await.is_ok());
    assert!(cloud.instance_exists(&node("a")).await.is_ok());
    let err = cloud.instance_exists(&node("a")).await.unwrap_err();
    let CloudError::Throttled { retry_after } = err else {
        panic!("expected Throttled, got {err:?}")
    };
    assert_eq!(
        retry_after,
        Duration::from_millis(100),
        "one token arrives every 1/qps seconds"
    );

    tokio::time::advance(retry_after).await;
    assert!(cloud.instance_exists(&node("a")).await.is_ok());
    assert!(
        cloud.instance_exists(&node("a")).await.is_err(),
        "the refilled token is spent"
    );

    cloud.set_rate_limit(None).unwrap();
    for _ in 0..100 {
        assert!(cloud.instance_exists(&node("a")).await.is_ok());
    }
}

#[tokio::test]
async fn call_log_records_operation_arguments_and_batch_size() {
    let cloud = auto_cloud();
    cloud.set_batch_size(NonZeroUsize::new(3).unwrap());
    cloud.instance_metadata(&node("solo")).await.unwrap();
    cloud
        .instances_exist(&[node("a"), node("b"), node("c")])
        .await
        .unwrap();

    let calls = cloud.calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].op, Operation::InstanceMetadata);
    assert_eq!(calls[0].args, ["solo"]);
    assert_eq!(calls[0].batch_size, None);
    assert_eq!(calls[1].op, Operation::InstancesExist);
    assert_eq!(calls[1].args, ["a", "b", "c"]);
    assert_eq!(calls[1].batch_size, Some(3));
    assert_eq!(cloud.count(Operation::InstancesExist), 1);

    cloud.clear_calls();
    assert!(cloud.calls().is_empty());
}

#[tokio::test]
async fn batches_larger_than_the_declared_size_are_refused() {
    let cloud = auto_cloud();
    cloud.set_batch_size(NonZeroUsize::new(2).unwrap());
    assert_eq!(cloud.max_batch_size().get(), 2);
    let err = cloud
        .instances_metadata(&[node("a"), node("b"), node("c")])
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("exceeds the maximum of 2"),
        "{err}"
    );
}

#[tokio::test(start_paused = true)]
async fn an_invalid_rate_limit_is_refused_and_the_one_in_force_kept() {
    let cloud = auto_cloud();
    cloud.set_rate_limit(Some((10.0, 1))).unwrap();
    assert!(cloud.set_rate_limit(Some((0.0, 1))).is_err());
    assert!(cloud.set_rate_limit(Some((10.0, 0))).is_err());
    assert!(cloud.instance_exists(&node("a")).await.is_ok());
    assert!(
        matches!(
            cloud.instance_exists(&node("a")).await,
            Err(CloudError::Throttled { .. })
        ),
        "the 10-a-second limit still holds"
    );
}
