//! The server's HTTP handlers.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use ccm_cloud_provider::k8s_openapi::api::core::v1::Node;
use ccm_cloud_provider::{CloudError, Instances, Inventory, LoadBalancer, Route, Routes, Volumes};
use serde::Deserialize;
use serde_json::{Value, json};

use super::Shared;
use super::faults::{Fault, FaultSettings, THROTTLED_FOR, TIMEOUT_AFTER};
use super::log::{ServerCall, now_us};
use crate::remote::wire::{
    Args, CALLER_HEADER, DRY_RUN_HEADER, Limits, PLANNED, Plain, WireEnsured, WireError,
    WireMaybeHealth, WireMaybeStatus, WireMetadata, WireOwnedList, WireRoutes, answer,
    batch_answer,
};
use crate::{FakeCloud, Operation};

type SharedState = State<Arc<Shared>>;

fn bad_request(message: impl Into<String>) -> Response {
    (StatusCode::BAD_REQUEST, message.into()).into_response()
}

/// `POST /v1/<operation>`: one interface call.
pub(super) async fn call(
    State(shared): SharedState,
    Path(op): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(op) = Operation::parse(&op) else {
        return (StatusCode::NOT_FOUND, format!("no operation {op:?}")).into_response();
    };
    let args: Args = match serde_json::from_slice(&body) {
        Ok(args) => args,
        Err(e) => return bad_request(format!("the arguments of {op}: {e}")),
    };
    let caller = headers
        .get(CALLER_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("unknown")
        .to_owned();
    let dry_run = headers.contains_key(DRY_RUN_HEADER);
    // A tripped trap freezes the cloud for everyone until released.
    shared.trap.hold().await;
    let started_us = now_us();
    let fault = shared.faults.lock().draw();
    let (answer, outcome) = match fault {
        Some(Fault::Throttled) => (
            refuse(&CloudError::Throttled {
                retry_after: THROTTLED_FOR,
            }),
            Err("throttled"),
        ),
        Some(Fault::Unavailable) => (
            refuse(&CloudError::msg(format!(
                "{op}: 503 Service Unavailable (injected by the fake cloud's server)"
            ))),
            Err("error"),
        ),
        Some(Fault::Timeout) | None if dry_run => match plan(&shared.cloud, op, &args).await {
            Ok(result) => result,
            Err(missing) => return bad_request(missing),
        },
        Some(Fault::Timeout) | None => match dispatch(&shared.cloud, op, &args).await {
            Ok(result) => result,
            Err(missing) => return bad_request(missing),
        },
    };
    let applied = op.is_mutation() && !dry_run && outcome.is_ok();
    let finished_us = now_us();
    let answer = if fault == Some(Fault::Timeout) {
        tokio::time::sleep(TIMEOUT_AFTER).await;
        refuse(&CloudError::msg(format!(
            "{op}: timed out (injected by the fake cloud's server)"
        )))
    } else {
        answer
    };
    {
        let mut log = shared.log.lock();
        let seq = log.len() as u64;
        log.push(ServerCall {
            seq,
            caller,
            op: op.as_str(),
            args: summary(op, &args),
            mutation: op.is_mutation() && !dry_run,
            dry_run,
            applied,
            started_us,
            finished_us,
            outcome: match (fault, outcome) {
                (Some(Fault::Timeout), _) => "timeout".to_owned(),
                (_, Ok(())) => "ok".to_owned(),
                (_, Err(kind)) => kind.to_owned(),
            },
        });
    }
    if applied {
        shared.trap.count_mutation();
        shared.trap.hold().await;
    }
    Json(answer).into_response()
}

/// The request fence of a dry-run call: the in-memory cloud describes each
/// change before making it; this refuses and records every one.
#[derive(Debug, Default)]
struct Planner(parking_lot::Mutex<Vec<String>>);

impl ccm_cloud_provider::fence::RequestFence for Planner {
    fn check(&self) -> Result<(), String> {
        Ok(())
    }

    fn check_request(
        &self,
        request: &ccm_cloud_provider::fence::Request<'_>,
    ) -> Result<(), String> {
        if request.mutates {
            self.0.lock().push(request.detail.to_owned());
            return Err("planned".to_owned());
        }
        Ok(())
    }

    fn dry_run(&self) -> bool {
        true
    }
}

/// A call under [`DRY_RUN_HEADER`]: made with every change refused, and
/// answered either as made (nothing to change) or as `planned` with the
/// changes.
async fn plan(cloud: &FakeCloud, op: Operation, args: &Args) -> Result<Dispatched, String> {
    let planner = Arc::new(Planner::default());
    let fence: Arc<dyn ccm_cloud_provider::fence::RequestFence> = planner.clone();
    let dispatched = ccm_cloud_provider::fence::scope(fence, dispatch(cloud, op, args)).await?;
    let planned = std::mem::take(&mut *planner.0.lock());
    if planned.is_empty() {
        return Ok(dispatched);
    }
    let error = WireError {
        kind: PLANNED.to_owned(),
        message: planned.join("\n"),
        after_ms: None,
        field: None,
    };
    Ok((json!({ "Err": error }), Err(PLANNED)))
}

fn refuse(e: &CloudError) -> Value {
    json!({ "Err": WireError::from(e) })
}

/// What a call was for, for the log.
fn summary(op: Operation, args: &Args) -> Vec<String> {
    if let Some(service) = &args.service {
        let m = &service.metadata;
        return vec![format!(
            "{}/{}",
            m.namespace.as_deref().unwrap_or("default"),
            m.name.as_deref().unwrap_or_default()
        )];
    }
    if let Some(route) = &args.route {
        return vec![route.destination_cidr.clone(), route.target_node.clone()];
    }
    if op == Operation::VolumesLabels {
        return args.ids.clone();
    }
    if let Some(resource) = &args.resource {
        let resource = serde_json::to_value(resource).unwrap_or(Value::Null);
        return ["kind", "id"]
            .iter()
            .map(|k| resource[k].as_str().unwrap_or_default().to_owned())
            .collect();
    }
    if let Some(cluster) = args.cluster.as_ref().filter(|_| args.nodes.is_empty()) {
        return vec![cluster.clone()];
    }
    args.nodes
        .iter()
        .map(|n| n.metadata.name.clone().unwrap_or_default())
        .collect()
}

type Dispatched = (Value, Result<(), &'static str>);

fn to_json<T: serde::Serialize>(value: &T, failed: Option<&CloudError>) -> Dispatched {
    let value = serde_json::to_value(value).unwrap_or(Value::Null);
    (value, failed.map_or(Ok(()), |e| Err(e.kind())))
}

fn single<T, W>(result: &Result<T, CloudError>) -> Dispatched
where
    W: for<'a> From<&'a T> + serde::Serialize,
{
    to_json(&answer::<T, W>(result), result.as_ref().err())
}

fn batch<T, W>(result: &ccm_cloud_provider::BatchResult<T>) -> Dispatched
where
    W: for<'a> From<&'a T> + serde::Serialize,
{
    to_json(&batch_answer::<T, W>(result), result.as_ref().err())
}

/// Makes the call on the in-memory cloud. `Err` names a missing argument.
async fn dispatch(cloud: &FakeCloud, op: Operation, args: &Args) -> Result<Dispatched, String> {
    let cluster = || args.cluster.as_deref().ok_or("missing cluster");
    let service = || args.service.as_ref().ok_or("missing service");
    let node = || args.nodes.first().ok_or("missing node");
    let nodes: Vec<Arc<Node>> = args.nodes.iter().cloned().map(Arc::new).collect();
    let route = || -> Result<Route, String> {
        let route = args.route.clone().ok_or("missing route")?;
        Route::try_from(route).map_err(|e| e.to_string())
    };
    Ok(match op {
        Operation::InstanceExists => {
            single::<_, Plain<bool>>(&cloud.instance_exists(node()?).await)
        }
        Operation::InstanceShutdown => {
            single::<_, Plain<bool>>(&cloud.instance_shutdown(node()?).await)
        }
        Operation::InstanceMetadata => {
            single::<_, WireMetadata>(&cloud.instance_metadata(node()?).await)
        }
        Operation::InstancesExist => batch::<_, Plain<bool>>(&cloud.instances_exist(&nodes).await),
        Operation::InstancesShutdown => {
            batch::<_, Plain<bool>>(&cloud.instances_shutdown(&nodes).await)
        }
        Operation::InstancesMetadata => {
            batch::<_, WireMetadata>(&cloud.instances_metadata(&nodes).await)
        }
        Operation::GetLoadBalancer => {
            single::<_, WireMaybeStatus>(&cloud.get_load_balancer(cluster()?, service()?).await)
        }
        Operation::LoadBalancerHealth => single::<_, WireMaybeHealth>(
            &cloud
                .load_balancer_health(cluster()?, service()?, &nodes)
                .await,
        ),
        Operation::EnsureLoadBalancer => single::<_, WireEnsured>(
            &cloud
                .ensure_load_balancer(cluster()?, service()?, &nodes)
                .await,
        ),
        Operation::UpdateLoadBalancer => single::<_, Plain<()>>(
            &cloud
                .update_load_balancer(cluster()?, service()?, &nodes)
                .await,
        ),
        Operation::EnsureLoadBalancerDeleted => single::<_, Plain<()>>(
            &cloud
                .ensure_load_balancer_deleted(cluster()?, service()?)
                .await,
        ),
        Operation::ListRoutes => single::<_, WireRoutes>(&cloud.list_routes(cluster()?).await),
        Operation::CreateRoute => {
            let hint = args.name_hint.as_deref().unwrap_or_default();
            single::<_, Plain<()>>(&cloud.create_route(cluster()?, hint, &route()?).await)
        }
        Operation::DeleteRoute => {
            single::<_, Plain<()>>(&cloud.delete_route(cluster()?, &route()?).await)
        }
        Operation::OwnedResources => {
            single::<_, WireOwnedList>(&cloud.owned_resources(cluster()?).await)
        }
        Operation::DeleteOwned => {
            let resource = args.resource.clone().ok_or("missing resource")?;
            let resource =
                ccm_cloud_provider::OwnedResource::try_from(resource).map_err(|e| e.to_string())?;
            single::<_, Plain<()>>(&cloud.delete_owned(cluster()?, &resource).await)
        }
        Operation::SyncServices
        | Operation::TagInstances
        | Operation::UntagInstances
        | Operation::PodCidrsOf => {
            return Err(format!(
                "{op} is not served: RemoteCloud offers only the interface's main capabilities"
            ));
        }
        Operation::VolumesLabels => batch::<
            _,
            Plain<Option<std::collections::BTreeMap<String, String>>>,
        >(&cloud.volumes_labels(&args.ids).await),
    })
}

/// `GET /state`.
pub(super) async fn state(State(shared): SharedState) -> Json<Value> {
    let cloud = &shared.cloud;
    let instances: Vec<Value> = cloud
        .instances()
        .iter()
        .map(|i| json!({ "name": i.name, "provider_id": i.provider_id, "state": format!("{:?}", i.state).to_lowercase() }))
        .collect();
    let load_balancers: Vec<Value> = cloud
        .load_balancers()
        .iter()
        .map(|lb| {
            json!({
                "name": lb.name,
                "cluster": lb.cluster_name,
                "service": lb.service,
                "nodes": lb.nodes.to_vec(),
                "ip": lb.ip,
                "ports": lb.ports.iter().map(|p| json!({"protocol": p.protocol, "port": p.port, "node_port": p.node_port})).collect::<Vec<_>>(),
            })
        })
        .collect();
    let routes: Vec<Value> = cloud
        .routes()
        .iter()
        .map(|r| {
            json!({
                "cluster": r.cluster_name,
                "name": r.route.name,
                "destination_cidr": r.route.destination_cidr.to_string(),
                "target_node": r.route.target_node,
            })
        })
        .collect();
    Json(json!({ "instances": instances, "load_balancers": load_balancers, "routes": routes }))
}

#[derive(Debug, Deserialize)]
pub(super) struct Since {
    #[serde(default)]
    since: u64,
}

/// `GET /calls?since=N`.
pub(super) async fn calls(
    State(shared): SharedState,
    Query(q): Query<Since>,
) -> Json<Vec<ServerCall>> {
    let log = shared.log.lock();
    let from = usize::try_from(q.since)
        .unwrap_or(usize::MAX)
        .min(log.len());
    Json(log[from..].to_vec())
}

/// `GET /limits`.
pub(super) async fn limits(State(shared): SharedState) -> Json<Limits> {
    Json(Limits {
        batch_size: Instances::max_batch_size(&shared.cloud).get(),
        volume_batch_size: Volumes::max_batch_size(&shared.cloud).get(),
    })
}

/// `PUT /faults`.
pub(super) async fn faults(State(shared): SharedState, body: Bytes) -> Response {
    let settings: FaultSettings = match serde_json::from_slice(&body) {
        Ok(s) => s,
        Err(e) => return bad_request(format!("faults: {e}")),
    };
    if let Some(rate) = settings.error_rate {
        if !(0.0..=1.0).contains(&rate) {
            return bad_request(format!("faults: error_rate {rate} is not between 0 and 1"));
        }
        shared.faults.lock().set_error_rate(rate);
    }
    if let Some(ms) = settings.latency_ms {
        if ms > crate::config::MAX_LATENCY_MS {
            return bad_request(format!("faults: latency_ms {ms} is more than an hour"));
        }
        shared
            .cloud
            .set_latency(std::time::Duration::from_millis(ms));
    }
    if let Some(qps) = settings.rate_limit_qps {
        let limit = (qps != 0.0).then(|| {
            let burst = settings
                .rate_limit_burst
                .unwrap_or(qps.ceil().max(1.0) as u32);
            (qps, burst)
        });
        if let Err(e) = shared.cloud.set_rate_limit(limit) {
            return bad_request(format!("faults: {e}"));
        }
    }
    StatusCode::NO_CONTENT.into_response()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Arm {
    after_mutations: u64,
}

/// `POST /crash`.
pub(super) async fn arm(State(shared): SharedState, body: Bytes) -> Response {
    match serde_json::from_slice::<Arm>(&body) {
        Ok(arm) if arm.after_mutations > 0 => {
            shared.trap.arm(arm.after_mutations);
            Json(shared.trap.status()).into_response()
        }
        Ok(_) => bad_request("crash: after_mutations must be at least 1"),
        Err(e) => bad_request(format!("crash: {e}")),
    }
}

/// `GET /crash`.
pub(super) async fn trap_status(State(shared): SharedState) -> Response {
    Json(shared.trap.status()).into_response()
}

/// `DELETE /crash`.
pub(super) async fn release(State(shared): SharedState) -> Response {
    shared.trap.release();
    Json(shared.trap.status()).into_response()
}
