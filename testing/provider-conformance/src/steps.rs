//! The calls the checks make, bounded in time, retried as the controllers
//! retry, and turned into messages a failed check can show.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use ccm_cloud_provider::k8s_openapi::api::core::v1::{Node, Service};
use ccm_cloud_provider::{CloudError, LoadBalancer, LoadBalancerStatus};

use crate::Resources;

/// The longest one provider call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// How often a call answered `Retry` or `Throttled` is tried again.
const ATTEMPTS: u32 = 30;
/// The longest the suite waits between attempts, whatever delay the
/// provider asked for (the controllers wait the whole delay; the suite
/// only needs the next answer).
const MAX_PAUSE: Duration = Duration::from_millis(200);

/// One provider call, bounded by [`CALL_TIMEOUT`].
pub(crate) async fn bounded<T>(
    what: &str,
    call: impl Future<Output = Result<T, CloudError>>,
) -> Result<Result<T, CloudError>, String> {
    tokio::time::timeout(CALL_TIMEOUT, call)
        .await
        .map_err(|_| format!("{what} took longer than {CALL_TIMEOUT:?}"))
}

/// Calls `call` until it answers something other than `Retry` or
/// `Throttled`, as the controllers requeue, at most [`ATTEMPTS`] times.
pub(crate) async fn settled<T, F, Fut>(what: &str, mut call: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, CloudError>>,
{
    let mut last = None;
    for _ in 0..ATTEMPTS {
        match bounded(what, call()).await? {
            Ok(value) => return Ok(value),
            Err(e) => match e.requested_delay() {
                Some(delay) => {
                    tokio::time::sleep(delay.min(MAX_PAUSE)).await;
                    last = Some(e);
                }
                None => return Err(format!("{what}: {e} ({})", e.kind())),
            },
        }
    }
    Err(format!(
        "{what} still asked to retry after {ATTEMPTS} attempts: {}",
        last.map(|e| e.to_string()).unwrap_or_default()
    ))
}

/// `ensure_load_balancer`, settled.
pub(crate) async fn ensure(
    lb: &dyn LoadBalancer,
    cluster: &str,
    service: &Service,
    nodes: &[Arc<Node>],
) -> Result<LoadBalancerStatus, String> {
    let what = format!("ensure_load_balancer({})", name(service));
    settled(&what, || lb.ensure_load_balancer(cluster, service, nodes))
        .await
        .map(|ensured| ensured.status)
}

/// `ensure_load_balancer_deleted`, settled.
pub(crate) async fn delete(
    lb: &dyn LoadBalancer,
    cluster: &str,
    service: &Service,
) -> Result<(), String> {
    let what = format!("ensure_load_balancer_deleted({})", name(service));
    settled(&what, || lb.ensure_load_balancer_deleted(cluster, service)).await
}

/// `get_load_balancer`, settled.
pub(crate) async fn get(
    lb: &dyn LoadBalancer,
    cluster: &str,
    service: &Service,
) -> Result<Option<LoadBalancerStatus>, String> {
    let what = format!("get_load_balancer({})", name(service));
    settled(&what, || lb.get_load_balancer(cluster, service)).await
}

/// A Service UID for the suite's `n`th Service. Providers name load
/// balancers after the UID's first characters (upstream's `a` + 31), so
/// UIDs differ at the front, as random ones do.
pub(crate) fn uid(n: u64) -> String {
    format!("{n:08x}-c0f0-4000-8000-00000000c0f0")
}

/// `namespace/name` of a Service, for messages.
pub(crate) fn name(service: &Service) -> String {
    format!(
        "{}/{}",
        service.metadata.namespace.as_deref().unwrap_or_default(),
        service.metadata.name.as_deref().unwrap_or_default()
    )
}

/// A node's name.
pub(crate) fn node_name(node: &Node) -> String {
    node.metadata.name.clone().unwrap_or_default()
}

/// A node's `spec.providerID`.
pub(crate) fn provider_id(node: &Node) -> Option<String> {
    node.spec.as_ref().and_then(|s| s.provider_id.clone())
}

/// What changed between two counts, kind by kind (`after - before`), with
/// the kinds that did not change left out.
pub(crate) fn delta(before: &Resources, after: &Resources) -> Vec<(String, i64)> {
    let kinds: std::collections::BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    kinds
        .into_iter()
        .filter_map(|kind| {
            let was = before.get(kind).copied().unwrap_or(0) as i64;
            let is = after.get(kind).copied().unwrap_or(0) as i64;
            (was != is).then(|| (kind.clone(), is - was))
        })
        .collect()
}

/// `Err` naming `what` when `before` and `after` differ.
pub(crate) fn unchanged(what: &str, before: &Resources, after: &Resources) -> Result<(), String> {
    let changed = delta(before, after);
    if changed.is_empty() {
        Ok(())
    } else {
        Err(format!("{what} changed the cloud: {changed:?}"))
    }
}

/// `resources` without the `kinds` given (the emulator's
/// [`node_kinds`](crate::Emulator::node_kinds)).
pub(crate) fn without(resources: &Resources, kinds: &[&str]) -> Resources {
    let mut kept = resources.clone();
    kept.retain(|kind, _| !kinds.contains(&kind.as_str()));
    kept
}

/// `Err(message)` unless `ok`.
pub(crate) fn expect(ok: bool, message: impl FnOnce() -> String) -> Result<(), String> {
    if ok { Ok(()) } else { Err(message()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(pairs: &[(&str, usize)]) -> Resources {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
    }

    #[test]
    fn delta_lists_only_changed_kinds_with_absent_as_zero() {
        let before = counts(&[("load-balancers", 1), ("routes", 2)]);
        let after = counts(&[("load-balancers", 1), ("routes", 1), ("target-groups", 2)]);
        assert_eq!(
            delta(&before, &after),
            [("routes".to_owned(), -1), ("target-groups".to_owned(), 2)]
        );
        assert!(unchanged("x", &before, &before).is_ok());
        assert!(unchanged("x", &before, &after).is_err());
        assert_eq!(
            without(&after, &["routes", "absent"]),
            counts(&[("load-balancers", 1), ("target-groups", 2)])
        );
    }

    #[tokio::test(start_paused = true)]
    async fn settled_retries_retry_answers_and_gives_up_after_its_attempts() {
        let mut calls = 0;
        let answer = settled("call", || {
            calls += 1;
            let n = calls;
            async move {
                if n < 3 {
                    Err(CloudError::Retry {
                        after: Duration::from_secs(30),
                        reason: "provisioning".into(),
                    })
                } else {
                    Ok(n)
                }
            }
        })
        .await;
        assert_eq!(answer, Ok(3));
        let never = settled("call", || async {
            Err::<(), _>(CloudError::Throttled {
                retry_after: Duration::from_secs(1),
            })
        })
        .await;
        assert!(never.unwrap_err().contains("after 30 attempts"));
        let fails = settled("call", || async { Err::<(), _>(CloudError::msg("boom")) }).await;
        assert_eq!(fails, Err("call: boom (error)".to_owned()));
    }
}
