//! `<binary> audit`: the cloud resources that carry this cluster's
//! ownership marks but belong to no Service or Node any more (leaked), and
//! the Services whose recorded load balancer is gone. It changes nothing
//! unless asked: `--delete --yes` removes what it listed, one line per
//! deletion.
//!
//! The cloud is read first and the cluster second, so a resource made for a
//! Service created meanwhile is never taken for a leak: its Service existed
//! before the resource, hence before the cluster was read. Ownership is
//! decided as the controllers decide it (a route is a node's by name or by
//! provider ID, `ccm_controllers::route_goes_to_node`).
//!
//! Deletions go through `MeteredCloud` (counted, paced, each request
//! fenced) without the Lease, so `--delete` is refused while a CCM holds it
//! and renews it ([`lease`]; `--force` goes on anyway, saying so on stderr),
//! and each resource is classified again against a fresh read of the
//! cluster just before its delete: one a Service or Node claimed since the
//! listing is kept.

mod classify;
mod lease;
pub(crate) mod options;
mod report;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use ccm_cloud_provider::{CloudProvider, Environment, InitContext, Inventory, ProviderFactory};
use ccm_runtime::{AlwaysLeader, MeteredCloud, Metrics};
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
    let (services, nodes) = read_cluster(&kube).await?;
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
    refuse_while_led(&kube, &options).await?;
    let failed = delete_leaks(
        &cloud,
        cluster,
        &settings.cluster_cidrs,
        &findings.leaked,
        || read_cluster(&kube),
        report::line,
    )
    .await?;
    if failed > 0 {
        return Err(Failure::Runtime(format!(
            "audit: {failed} of {} deletions failed",
            findings.leaked.len()
        )));
    }
    Ok(())
}

/// Deletes each of `leaks` that the cluster, as `cluster_now` reads it just
/// before that delete, still leaves unclaimed, telling `say` one line per
/// resource; returns how many deletions failed.
///
/// # Errors
/// When the cluster cannot be read.
async fn delete_leaks<F, Fut>(
    cloud: &dyn CloudProvider,
    cluster: &str,
    cluster_cidrs: &[ipnet::IpNet],
    leaks: &[classify::Leak],
    mut cluster_now: F,
    mut say: impl FnMut(&str),
) -> Result<usize, Failure>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(Vec<Service>, Vec<Node>), Failure>>,
{
    let Some(inventory) = cloud.inventory() else {
        return Ok(0);
    };
    let mut failed = 0_usize;
    for leak in leaks {
        let resource = &leak.resource;
        let (services, nodes) = cluster_now().await?;
        let again = classify::classify(
            cloud,
            cluster,
            cluster_cidrs,
            vec![resource.clone()],
            &services,
            &nodes,
        );
        if again.leaked.is_empty() {
            say(&format!(
                "kept {} {}: the cluster claims it since it was listed",
                resource.kind, resource.id
            ));
            continue;
        }
        match inventory.delete_owned(cluster, resource).await {
            Ok(()) => say(&format!(
                "deleted {} {} ({})",
                resource.kind, resource.id, resource.name
            )),
            Err(e) => {
                failed += 1;
                say(&format!(
                    "could not delete {} {}: {e}",
                    resource.kind, resource.id
                ));
            }
        }
    }
    Ok(failed)
}

/// The cluster's Services and Nodes, read now.
async fn read_cluster(kube: &kube::Client) -> Result<(Vec<Service>, Vec<Node>), Failure> {
    let services = Api::<Service>::all(kube.clone())
        .list(&ListParams::default())
        .await
        .map_err(|e| Failure::Runtime(format!("listing Services: {e}")))?
        .items;
    let nodes = Api::<Node>::all(kube.clone())
        .list(&ListParams::default())
        .await
        .map_err(|e| Failure::Runtime(format!("listing Nodes: {e}")))?
        .items;
    Ok((services, nodes))
}

/// Refuses `--delete` while a CCM holds and renews the leader-election
/// Lease, unless `--force`; then says on stderr who leads.
async fn refuse_while_led(kube: &kube::Client, options: &Options) -> Result<(), Failure> {
    let Some(election) = &options.settings.leader_election else {
        return Ok(());
    };
    let (namespace, name) = (&election.lease_namespace, &election.lease_name);
    let leader = lease::leader(kube.clone(), namespace, name)
        .await
        .map_err(|e| Failure::Runtime(format!("audit: reading Lease {namespace}/{name}: {e}")))?;
    let Some(leader) = leader else {
        return Ok(());
    };
    let who = format!(
        "{} leads (Lease {namespace}/{name}, renewed {}s ago)",
        leader.holder,
        leader.renewed_ago.as_secs()
    );
    if options.force {
        #[expect(
            clippy::print_stderr,
            reason = "the audit's loud warning, for the operator"
        )]
        {
            eprintln!(
                "audit: --force: deleting while {who}; a Service it adopts meanwhile may lose its load balancer"
            );
        }
        return Ok(());
    }
    Err(Failure::Runtime(format!(
        "audit: not deleting while {who}: it may adopt what was listed; stop it (scale it to zero) \
         and run again, or add --force"
    )))
}
