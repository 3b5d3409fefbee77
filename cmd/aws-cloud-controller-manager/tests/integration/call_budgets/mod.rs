//! AWS API requests per operation, ours against upstream's: the
//! `aws-cloud-controller-manager` process runs against the test API server
//! and moto behind the counting proxy, and each piece of work is counted by
//! API and action from the moment it starts until the CCM has done it and
//! gone quiet. Upstream's figures are derived from cloud-provider-aws
//! v1.33.4's code for the same work ([`upstream`], with the functions named;
//! `docs/benchmarks/upstream-call-budgets.md` gives the whole derivation).
//!
//! The cluster has 100 nodes, which join as kubelets register them (no
//! `spec.providerID`, Ready); the Services have one port. The work, for a
//! Network Load Balancer and then for a classic ELB: the nodes initialized,
//! one Service created, a node joining, the Service's port changed, the
//! Service deleted; then a steady state with 20 Services (10 of each kind),
//! measured over `CALL_BUDGET_STEADY_SECONDS` (default 20) by a fresh
//! process whose `--node-status-update-frequency` is that window, so that
//! the window holds one node-status pass, as upstream's 5 minutes at its
//! default frequency do. `cargo xtask bench --only budgets` runs it with
//! the full 300 s at the default frequency and publishes the table.
//!
//! Routes are off (`--configure-cloud-routes=false`), as in upstream's
//! example manifests, and so are the target-health reads of the Services'
//! conditions (`--load-balancer-target-health=false`), which upstream does
//! not make, so only the work named is counted. The test prints
//! the table and fails when any row of ours is above upstream's.

#![allow(
    clippy::print_stdout,
    reason = "the suite prints its table for the benchmark report"
)]

use crate::support;

mod budget;
mod upstream;

use std::time::Duration;

use anyhow::Context;
use ccm_provider_aws::annotations;
use ccm_provider_aws::test_util::proxy::Proxy;
use ccm_provider_aws::test_util::seed::{self, Estate};
use ccm_provider_aws::test_util::{CLUSTER, cloud_config_at, ec2, elb, elbv2, moto};
use ccm_test_support::{ApiServer, eventually, ingress_hostnames, load_balancer_service};
use k8s_openapi::api::core::v1::Service;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;
use support::ccm::{Ccm, launch};
use support::objects::{
    create_node, create_service, is_initialized, kubelet_node, nodes, services,
};

use budget::{Kind, finish, finish_now, start};
use ccm_test_support::budget::{Table, conclude, quiet, steady_window};

/// The cluster's nodes; one more instance is seeded for the node that joins.
const NODES: usize = 100;
/// Services in the steady state, half of each kind.
const STEADY_SERVICES: usize = 20;
/// How long one piece of work may take.
const WITHIN: Duration = Duration::from_secs(120);

/// The world one run works in.
struct World {
    /// Declared first so it is dropped first.
    ccm: Ccm,
    /// The log of the process the lives ran under, once the steady
    /// state has its own.
    lives_log: String,
    proxy: Proxy,
    api: ApiServer,
    client: kube::Client,
    estate: Estate,
    moto: ccm_provider_aws::test_util::Moto,
    config: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

/// The CCM's flags: defaults but for routes (off), leader election (off:
/// it costs no AWS call, and a restarted process need not wait for the
/// lease) and any `extra`.
fn flags(config: &std::path::Path, extra: &[String]) -> Vec<String> {
    let mut args = vec![
        format!("--cloud-config={}", config.display()),
        "--cloud-provider=aws".to_owned(),
        format!("--cluster-name={CLUSTER}"),
        "--configure-cloud-routes=false".to_owned(),
        "--leader-elect=false".to_owned(),
        // The work upstream does: the target-health reads behind the
        // Services' LoadBalancerTargetsHealthy condition are this CCM's
        // addition, off here (their cost is in docs/service-conditions.md).
        "--load-balancer-target-health=false".to_owned(),
    ];
    args.extend(extra.iter().cloned());
    args
}

impl World {
    async fn start() -> anyhow::Result<Self> {
        let moto = moto().await;
        let estate = seed::estate(&ec2(&moto), NODES + 1)
            .await
            .context("seeding moto")?;
        let proxy = Proxy::start(&moto.endpoint).await?;
        let api = ApiServer::start().await?;
        let dir = tempfile::tempdir()?;
        let config = dir.path().join("cloud.conf");
        std::fs::write(
            &config,
            cloud_config_at(&proxy.endpoint, CLUSTER, &format!("VPC = {}", estate.vpc)),
        )?;
        let ccm = Self::launch(&api, &config, "budgets", &[]).await?;
        Ok(Self {
            ccm,
            lives_log: String::new(),
            proxy,
            client: api.client(),
            api,
            estate,
            moto,
            config,
            _dir: dir,
        })
    }

    async fn launch(
        api: &ApiServer,
        config: &std::path::Path,
        name: &str,
        extra: &[String],
    ) -> anyhow::Result<Ccm> {
        let credentials = api.ccm_credentials("aws").await?;
        launch(name, &flags(config, extra))
            .credentials(&credentials)
            .start()
            .await
    }

    /// The instances behind the one load balancer of `kind`.
    async fn registered(&self, kind: Kind) -> anyhow::Result<Vec<String>> {
        Ok(match kind {
            Kind::Nlb => {
                let elbv2 = elbv2(&self.moto);
                let mut ids = Vec::new();
                for group in support::aws::target_groups(&elbv2).await? {
                    let arn = group.target_group_arn().unwrap_or_default();
                    let targets = support::aws::targets(&elbv2, arn).await?;
                    ids.extend(targets.into_iter().map(|(id, _)| id));
                }
                ids
            }
            Kind::Classic => {
                let out = elb(&self.moto).describe_load_balancers().send().await?;
                out.load_balancer_descriptions()
                    .iter()
                    .flat_map(|lb| lb.instances())
                    .filter_map(|i| i.instance_id().map(str::to_owned))
                    .collect()
            }
        })
    }

    /// The listener ports of the load balancers of `kind`.
    async fn listener_ports(&self, kind: Kind) -> anyhow::Result<Vec<i32>> {
        Ok(match kind {
            Kind::Nlb => {
                let elbv2 = elbv2(&self.moto);
                let mut ports = Vec::new();
                for lb in support::aws::load_balancers(&elbv2).await? {
                    let arn = lb.load_balancer_arn().unwrap_or_default();
                    let listeners = support::aws::listeners(&elbv2, arn).await?;
                    ports.extend(listeners.iter().filter_map(|l| l.port()));
                }
                ports
            }
            Kind::Classic => {
                let out = elb(&self.moto).describe_load_balancers().send().await?;
                out.load_balancer_descriptions()
                    .iter()
                    .flat_map(|lb| lb.listener_descriptions())
                    .filter_map(|d| d.listener().map(|l| l.load_balancer_port()))
                    .collect()
            }
        })
    }

    async fn ingress(&self, name: &str) -> anyhow::Result<Option<Service>> {
        let service = services(&self.client).get(name).await?;
        Ok((!ingress_hostnames(&service).is_empty()).then_some(service))
    }
}

fn service(kind: Kind, name: &str) -> Service {
    match kind {
        Kind::Nlb => load_balancer_service(name, &[(annotations::TYPE, "nlb")]),
        Kind::Classic => load_balancer_service(name, &[]),
    }
}

/// The nodes initialized, then one Service of each kind through its life.
async fn lives(world: &World, table: &mut Table) -> anyhow::Result<()> {
    let counted = start(&world.proxy);
    for instance in &world.estate.instances[..NODES] {
        create_node(&world.client, &kubelet_node(instance, true, None)).await?;
    }
    eventually("every node initialized", WITHIN, || async {
        let all = nodes(&world.client).list(&Default::default()).await?;
        Ok(all.items.iter().all(is_initialized).then_some(()))
    })
    .await?;
    finish(table, counted, upstream::nodes_initialized(NODES)).await;

    let joining = &world.estate.instances[NODES];
    for kind in [Kind::Nlb, Kind::Classic] {
        let name = format!("{}-life", kind.slug());
        // The NLB's life starts with 100 nodes, the classic ELB's with 101.
        let nodes_now = if kind == Kind::Nlb { NODES } else { NODES + 1 };
        let counted = start(&world.proxy);
        create_service(&world.client, &service(kind, &name)).await?;
        eventually("the Service's ingress", WITHIN, || world.ingress(&name)).await?;
        finish(table, counted, upstream::created(kind, nodes_now)).await;

        let first = kind == Kind::Nlb;
        let counted = start(&world.proxy);
        if first {
            create_node(&world.client, &kubelet_node(joining, true, None)).await?;
        } else {
            nodes(&world.client)
                .delete(&joining.private_dns_name, &DeleteParams::default())
                .await?;
        }
        let want = if first { NODES + 1 } else { NODES };
        eventually("the load balancer following the nodes", WITHIN, || async {
            Ok((world.registered(kind).await?.len() == want).then_some(()))
        })
        .await?;
        let row = if first {
            upstream::node_joined()
        } else {
            upstream::node_left()
        };
        finish(table, counted, row).await;

        let counted = start(&world.proxy);
        let patch = json!({"spec": {"ports": [{"name": "http", "port": 8080, "protocol": "TCP",
            "targetPort": 8080, "nodePort": node_port(&world.client, &name).await?}]}});
        services(&world.client)
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        eventually("the listener on 8080", WITHIN, || async {
            Ok((world.listener_ports(kind).await? == vec![8080]).then_some(()))
        })
        .await?;
        finish(table, counted, upstream::port_changed(kind, want)).await;

        let counted = start(&world.proxy);
        services(&world.client)
            .delete(&name, &DeleteParams::default())
            .await?;
        eventually("the Service gone", WITHIN, || async {
            let gone = services(&world.client).get_opt(&name).await?.is_none();
            Ok(gone.then_some(()))
        })
        .await?;
        eventually("its load balancer gone", WITHIN, || async {
            Ok(world.listener_ports(kind).await?.is_empty().then_some(()))
        })
        .await?;
        finish(table, counted, upstream::deleted(kind)).await;
    }
    Ok(())
}

async fn node_port(client: &kube::Client, name: &str) -> anyhow::Result<i32> {
    let service = services(client).get(name).await?;
    support::objects::node_port(&service, 80).context("the Service's node port")
}

/// 20 Services, then a fresh process over the steady window.
async fn steady(world: &mut World, table: &mut Table, window: Duration) -> anyhow::Result<()> {
    let names: Vec<(Kind, String)> = (0..STEADY_SERVICES)
        .map(|n| {
            let kind = if n % 2 == 0 { Kind::Nlb } else { Kind::Classic };
            (kind, format!("{}-{n}", kind.slug()))
        })
        .collect();
    for (kind, name) in &names {
        create_service(&world.client, &service(*kind, name)).await?;
    }
    for (_, name) in &names {
        eventually("every Service's ingress", WITHIN, || world.ingress(name)).await?;
    }
    let frequency = format!("--node-status-update-frequency={}s", window.as_secs());
    world.ccm.terminate().await?;
    world.ccm.wait(Duration::from_secs(30)).await?;
    world.lives_log = world.ccm.log();
    world.ccm = World::launch(&world.api, &world.config, "budgets-steady", &[frequency]).await?;
    quiet(|| world.proxy.calls().len()).await;
    let counted = start(&world.proxy);
    tokio::time::sleep(window).await;
    finish_now(
        table,
        counted,
        upstream::steady(NODES, STEADY_SERVICES, window),
    );
    Ok(())
}

#[tokio::test]
async fn aws_calls_are_at_most_upstreams_for_every_operation() -> anyhow::Result<()> {
    let window = steady_window()?;
    let mut world = World::start().await?;
    let mut table = Table::default();
    let result = async {
        lives(&world, &mut table).await?;
        steady(&mut world, &mut table, window).await
    }
    .await;
    conclude("AWS", &table, result, &world.lives_log, &world.ccm)
}
