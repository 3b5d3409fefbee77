//! Instances: not found is an answer, batches keep order and length,
//! provider IDs round-trip, a batch costs no more than one node.

use std::sync::Arc;

use ccm_cloud_provider::k8s_openapi::api::core::v1::{Node, NodeSpec};
use ccm_cloud_provider::{CloudError, Instances};

use crate::steps::{expect, node_name, provider_id, settled};
use crate::{Outcome, Report, Subject};

/// The most instances the full-batch check starts.
const FULL_BATCH: usize = 10;

pub(crate) async fn run(subject: &Subject, report: &mut Report) {
    let Some(instances) = subject.provider.instances() else {
        report.record(
            "instances",
            Outcome::NotApplicable("the provider has no instances".into()),
        );
        return;
    };
    let e = &subject.emulator;
    let a = Arc::new(e.add_instance("conformance-a").await);
    let b = Arc::new(e.add_instance("conformance-b").await);
    let missing = Arc::new(e.missing_node("conformance-missing"));
    report.result(
        "instances: a missing instance is not found, never an error",
        missing_is_not_found(instances, &missing).await,
    );
    report.result(
        "instances: provider IDs round-trip",
        provider_ids_round_trip(instances, &a).await,
    );
    let max = instances.max_batch_size().get();
    if max >= 3 {
        report.result(
            "instances: a batch answers in order and length, with per-node errors",
            batch_in_order(instances, &[b.clone(), missing.clone(), a.clone()]).await,
        );
        let mut nodes = vec![a.clone()];
        for i in 1..max.min(FULL_BATCH) {
            nodes.push(Arc::new(
                e.add_instance(&format!("conformance-batch-{i}")).await,
            ));
        }
        report.result(
            "instances: a full batch is answered whole and costs no more than one node",
            full_batch(subject, instances, &nodes).await,
        );
        for node in &nodes[1..] {
            e.remove_instance(node).await;
        }
    } else {
        for check in [
            "instances: a batch answers in order and length, with per-node errors",
            "instances: a full batch is answered whole and costs no more than one node",
        ] {
            report.record(
                check,
                Outcome::NotApplicable(format!("max_batch_size is {max}")),
            );
        }
    }
    report.result(
        "instances: a stopped instance is shut down, a terminated one does not exist",
        stop_and_terminate(subject, instances, &b).await,
    );
    e.remove_instance(&a).await;
}

async fn missing_is_not_found(instances: &dyn Instances, missing: &Node) -> Result<(), String> {
    let exists = settled("instance_exists(missing)", || {
        instances.instance_exists(missing)
    })
    .await?;
    expect(!exists, || {
        "instance_exists said true for a node whose instance does not exist".into()
    })?;
    match instances.instance_metadata(missing).await {
        Err(CloudError::InstanceNotFound) => {}
        other => {
            return Err(format!(
                "instance_metadata of a missing instance answered {other:?}, not InstanceNotFound"
            ));
        }
    }
    match instances.instance_shutdown(missing).await {
        Err(CloudError::InstanceNotFound) | Ok(false) => Ok(()),
        other => Err(format!(
            "instance_shutdown of a missing instance answered {other:?}, not InstanceNotFound"
        )),
    }
}

async fn provider_ids_round_trip(instances: &dyn Instances, node: &Node) -> Result<(), String> {
    let meta = settled("instance_metadata", || instances.instance_metadata(node)).await?;
    expect(!meta.provider_id.is_empty(), || {
        "instance_metadata gave no provider ID".into()
    })?;
    if let Some(id) = provider_id(node) {
        expect(meta.provider_id == id, || {
            format!(
                "the node's provider ID is {id:?} but its metadata says {:?}",
                meta.provider_id
            )
        })?;
    }
    // The node as it is once initialized: found by the ID the provider gave.
    let mut known = node.clone();
    known.spec.get_or_insert_with(NodeSpec::default).provider_id = Some(meta.provider_id.clone());
    let again = settled("instance_metadata", || instances.instance_metadata(&known)).await?;
    expect(again == meta, || {
        format!("looked up by its provider ID the instance is {again:?}, by its node {meta:?}")
    })?;
    let exists = settled("instance_exists", || instances.instance_exists(&known)).await?;
    expect(exists, || {
        "instance_exists said false for a running instance's provider ID".into()
    })
}

async fn batch_in_order(instances: &dyn Instances, nodes: &[Arc<Node>]) -> Result<(), String> {
    // nodes: [present, missing, present]
    let exist = settled("instances_exist", || instances.instances_exist(nodes)).await?;
    let exist: Vec<_> = exist.into_iter().map(|r| r.map_err(|e| e.kind())).collect();
    expect(exist == [Ok(true), Ok(false), Ok(true)], || {
        format!("instances_exist([present, missing, present]) answered {exist:?}")
    })?;
    let metas = settled("instances_metadata", || instances.instances_metadata(nodes)).await?;
    expect(metas.len() == nodes.len(), || {
        format!(
            "instances_metadata of {} nodes gave {} answers",
            nodes.len(),
            metas.len()
        )
    })?;
    expect(
        matches!(metas[1], Err(CloudError::InstanceNotFound)),
        || {
            format!(
                "the missing node's metadata is {:?}, not InstanceNotFound",
                metas[1]
            )
        },
    )?;
    for (node, meta) in [(&nodes[0], &metas[0]), (&nodes[2], &metas[2])] {
        let single = settled("instance_metadata", || instances.instance_metadata(node)).await?;
        expect(meta.as_ref().ok() == Some(&single), || {
            format!(
                "in a batch node {} got {meta:?}, alone {single:?}: answers out of order?",
                node_name(node)
            )
        })?;
    }
    let shut = settled("instances_shutdown", || instances.instances_shutdown(nodes)).await?;
    let shut: Vec<_> = shut.into_iter().map(|r| r.map_err(|e| e.kind())).collect();
    let missing_ok = matches!(shut.get(1), Some(Err("not_found") | Ok(false)));
    expect(
        shut.len() == 3 && shut[0] == Ok(false) && shut[2] == Ok(false) && missing_ok,
        || format!("instances_shutdown([running, missing, running]) answered {shut:?}"),
    )
}

async fn full_batch(
    subject: &Subject,
    instances: &dyn Instances,
    nodes: &[Arc<Node>],
) -> Result<(), String> {
    let e = &subject.emulator;
    let start = e.requests();
    settled("instances_metadata", || {
        instances.instances_metadata(&nodes[..1])
    })
    .await?;
    let one = e.requests() - start;
    let start = e.requests();
    let metas = settled("instances_metadata", || instances.instances_metadata(nodes)).await?;
    let all = e.requests() - start;
    let failed: Vec<_> = metas.iter().filter(|m| m.is_err()).collect();
    expect(metas.len() == nodes.len() && failed.is_empty(), || {
        format!(
            "a batch of {} running instances gave {} answers, failures {failed:?}",
            nodes.len(),
            metas.len()
        )
    })?;
    expect(all <= one, || {
        format!(
            "a batch of {} nodes cost {all} cloud requests, one node {one}",
            nodes.len()
        )
    })
}

async fn stop_and_terminate(
    subject: &Subject,
    instances: &dyn Instances,
    node: &Node,
) -> Result<(), String> {
    let e = &subject.emulator;
    e.stop_instance(node).await;
    let down = settled("instance_shutdown", || instances.instance_shutdown(node)).await?;
    expect(down, || "a stopped instance is not shut down".into())?;
    let exists = settled("instance_exists", || instances.instance_exists(node)).await?;
    expect(exists, || "a stopped instance does not exist".into())?;
    e.remove_instance(node).await;
    let exists = settled("instance_exists", || instances.instance_exists(node)).await?;
    expect(!exists, || "a terminated instance still exists".into())
}
