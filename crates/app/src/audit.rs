//! `<binary> audit`: the cloud resources that carry this cluster's
//! ownership marks but belong to no Service or Node any more (leaked), and
//! the Services whose recorded load balancer is gone. It changes nothing
//! unless asked: `--delete --yes` removes what it listed, one line per
//! deletion.
//!
//! The cloud is read first and the cluster second, so a resource made for a
//! Service created meanwhile is never taken for a leak: its Service existed
//! before the resource, hence before the cluster was read. Deletions go
//! through `MeteredCloud` (counted, paced, each request fenced) with no
//! Lease: the audit is an operator's explicit act, and the CCM that leads
//! deletes only what belongs to a Service, never what the audit lists.

mod classify;
pub(crate) mod options;
mod report;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use ccm_runtime::{AlwaysLeader, MeteredCloud, Metrics};
use cloud_provider::{CloudProvider, Environment, InitContext, Inventory, ProviderFactory};
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Api, ListParams};

use crate::client;
use crate::start::{Failure, build_provider, initialize_failure};
use options::Options;

/// Runs the audit for provider `F`.
pub(crate) async fn run<F: ProviderFactory>(
    options: Options,
    env: Environment,
) -> Result<(), Failure> {
    let settings = &options.settings;
    let provider = build_provider::<F>(settings, &env)?;
    if provider.inventory().is_none() {
        return Err(Failure::Usage(format!(
            "audit: the {} provider cannot list what it made for a cluster",
            F::NAME
        )));
    }
    let config = client::config(settings.kubeconfig.as_deref(), settings.master.as_deref())
        .await
        .map_err(|e| Failure::Usage(e.to_string()))?;
    let user_agent = format!(
        "{}-cloud-controller-manager/{}/audit",
        F::NAME,
        env!("CARGO_PKG_VERSION")
    );
    let kube = client::build(
        config,
        settings.kube_api_qps,
        settings.kube_api_burst,
        &user_agent,
    )
    .map_err(|e| Failure::Usage(e.to_string()))?;
    let cloud = MeteredCloud::new(provider, Metrics::new(), Arc::new(AlwaysLeader));
    let cluster = &settings.cluster_name;
    cloud
        .initialize(&InitContext::new(cluster.clone()))
        .await
        .map_err(|e| initialize_failure(F::NAME, &e))?;
    // The cloud first, then the cluster (see the module's docs).
    let owned = cloud.owned_resources(cluster).await.map_err(|e| {
        Failure::Runtime(format!("listing what the cloud holds for {cluster}: {e}"))
    })?;
    let services = Api::<Service>::all(kube.clone())
        .list(&ListParams::default())
        .await
        .map_err(|e| Failure::Runtime(format!("listing Services: {e}")))?
        .items;
    let nodes = Api::<Node>::all(kube)
        .list(&ListParams::default())
        .await
        .map_err(|e| Failure::Runtime(format!("listing Nodes: {e}")))?
        .items;
    let findings = classify::classify(
        &cloud,
        cluster,
        &settings.cluster_cidrs,
        owned,
        &services,
        &nodes,
    );
    report::print(&findings, options.output);
    if !options.delete {
        return Ok(());
    }
    let mut failed = 0_usize;
    for leak in &findings.leaked {
        let resource = &leak.resource;
        match cloud.delete_owned(cluster, resource).await {
            Ok(()) => report::line(&format!(
                "deleted {} {} ({})",
                resource.kind, resource.id, resource.name
            )),
            Err(e) => {
                failed += 1;
                report::line(&format!(
                    "could not delete {} {}: {e}",
                    resource.kind, resource.id
                ));
            }
        }
    }
    if failed > 0 {
        return Err(Failure::Runtime(format!(
            "audit: {failed} of {} deletions failed",
            findings.leaked.len()
        )));
    }
    Ok(())
}
