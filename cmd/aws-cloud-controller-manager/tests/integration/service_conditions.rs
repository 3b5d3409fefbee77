//! Issue 67's acceptance against moto, with the real
//! `aws-cloud-controller-manager` process: a new LoadBalancer Service
//! (Network Load Balancer, then classic ELB) says
//! `LoadBalancerProvisioned=False/Pending` before its load balancer exists
//! and `True/Provisioned` once it does, its `LoadBalancerTargetsHealthy`
//! goes `Unknown/TargetsInitializing` while AWS registers the targets and
//! `True` once they pass, and a node whose instance is stopped makes it
//! `False` naming that node, as soon as the node lifecycle controller
//! taints the node as shut down.
//!
//! The CCM talks to moto through a proxy ([`proxy`]) that holds its
//! `CreateLoadBalancer` until the test has read the Pending Service, and
//! answers health as AWS does while targets register, which moto does not
//! model: it reports a running instance healthy at once.

#[path = "service_conditions/proxy.rs"]
mod proxy;
use crate::support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::Context;
use ccm_provider_aws::test_util::seed::{self, Estate, Seeded};
use ccm_provider_aws::test_util::{CLUSTER, Moto, cloud_config_at, ec2, moto};
use ccm_test_support::conditions::{PROVISIONED, Seen, TARGETS_HEALTHY, condition, states};
use ccm_test_support::{ApiServer, eventually, has_taint, ingress_hostnames};
use k8s_openapi::api::core::v1::Service;
use support::ccm::{self, Ccm};
use support::objects::{
    SHUTDOWN, create_node, create_service, is_initialized, kubelet_node, nlb_service, nodes,
    services, set_ready,
};

use proxy::Proxy;

/// How long the CCM may take to act on a change.
const ACT_WITHIN: Duration = Duration::from_secs(60);
/// How long the health read after a shutdown taint may take: well under the
/// minute a readiness flap waits, so only the taint can bring it in time.
const AFTER_SHUTDOWN_WITHIN: Duration = Duration::from_secs(30);
/// The tests' Service.
const SERVICE: &str = "web";

/// moto with a seeded estate, the proxy in front of it, the API server, and
/// the CCM against both.
struct Cluster {
    /// Declared first so it is dropped first: the process is killed before
    /// the next test resets moto.
    ccm: Ccm,
    proxy: Proxy,
    _api: ApiServer,
    client: kube::Client,
    estate: Estate,
    ec2: aws_sdk_ec2::Client,
    _moto: Moto,
    _dir: tempfile::TempDir,
}

impl Cluster {
    /// Seeds moto with `instances` instances, registers and waits for a
    /// node per instance, and starts the CCM (named `name` in its log
    /// file) with the test cluster's flags, its AWS endpoints at the proxy.
    async fn start(name: &str, instances: usize) -> anyhow::Result<Self> {
        let moto = moto().await;
        let ec2 = ec2(&moto);
        let estate = seed::estate(&ec2, instances)
            .await
            .context("seeding moto")?;
        let proxy = Proxy::start(&moto.endpoint).await?;
        let api = ApiServer::start().await?;
        let dir = tempfile::tempdir()?;
        let config = dir.path().join("cloud.conf");
        let global = format!("VPC = {}", estate.vpc);
        std::fs::write(&config, cloud_config_at(&proxy.endpoint, CLUSTER, &global))?;
        let credentials = api.ccm_credentials("aws").await?;
        let ccm = ccm::launch(name, &support::flags(&config))
            .credentials(&credentials)
            .start()
            .await?;
        let cluster = Self {
            ccm,
            proxy,
            client: api.client(),
            _api: api,
            estate,
            ec2,
            _moto: moto,
            _dir: dir,
        };
        cluster.join().await?;
        Ok(cluster)
    }

    /// Registers a Ready node per instance, as its kubelet does, and waits
    /// until the CCM initialized them all.
    async fn join(&self) -> anyhow::Result<()> {
        for instance in &self.estate.instances {
            create_node(&self.client, &kubelet_node(instance, true, None)).await?;
        }
        eventually("the nodes initialized", ACT_WITHIN, || async {
            let list = nodes(&self.client).list(&Default::default()).await?;
            let done = list.items.iter().filter(|n| is_initialized(n)).count();
            Ok((done == self.estate.instances.len()).then_some(()))
        })
        .await
    }

    /// Reads the Service, recording its conditions in `seen`.
    async fn service(&self, seen: &Seen) -> anyhow::Result<Service> {
        let service = services(&self.client).get(SERVICE).await?;
        seen.record(&service);
        Ok(service)
    }

    /// Polls the Service, recording its conditions in `seen`, until its
    /// condition `type_` has `status` and `reason`; answers its message.
    async fn wait_for(
        &self,
        seen: &Seen,
        type_: &str,
        (status, reason): (&str, &str),
        within: Duration,
    ) -> anyhow::Result<String> {
        let what = format!("{type_}={status}/{reason}");
        eventually(&what, within, || async {
            let service = self.service(seen).await?;
            Ok(condition(&service, type_)
                .filter(|(s, r, _)| (s.as_str(), r.as_str()) == (status, reason))
                .map(|(_, _, message)| message))
        })
        .await
        .with_context(|| {
            format!(
                "conditions seen: {:?}\nthe CCM's log:\n{}",
                seen,
                self.ccm.log_tail()
            )
        })
    }
}

/// The scenario of issue 67 for `service` (an NLB or a classic ELB), on
/// two nodes; `stopped_reason` is what AWS (moto) gives for a target whose
/// instance is stopped. Answers how long after the node went NotReady the
/// Service named it.
async fn conditions_follow_the_load_balancer_and_its_targets(
    name: &str,
    service: Service,
    stopped_reason: &str,
) -> anyhow::Result<Duration> {
    let cluster = Cluster::start(name, 2).await?;
    let stopped: &Seeded = &cluster.estate.instances[1];
    let node_names: BTreeSet<&str> = cluster
        .estate
        .instances
        .iter()
        .map(|i| i.private_dns_name.as_str())
        .collect();
    let seen = Seen::default();
    cluster.proxy.hold_creates();
    cluster.proxy.set_registering(true);
    create_service(&cluster.client, &service).await?;

    // Claimed, and its load balancer not created yet: Pending.
    eventually("the CCM's CreateLoadBalancer held", ACT_WITHIN, || async {
        (cluster.proxy.held() > 0).then_some(())
    })
    .await
    .with_context(|| cluster.ccm.log_tail())?;
    let claimed = cluster.service(&seen).await?;
    assert_eq!(
        condition(&claimed, PROVISIONED),
        Some((
            "False".into(),
            "Pending".into(),
            "waiting for the cloud load balancer".into()
        ))
    );
    assert!(ingress_hostnames(&claimed).is_empty(), "{claimed:?}");
    assert_eq!(
        condition(&claimed, TARGETS_HEALTHY),
        None,
        "no target health before there is a load balancer"
    );
    cluster.proxy.release_creates();

    let ready = cluster
        .wait_for(&seen, PROVISIONED, ("True", "Provisioned"), ACT_WITHIN)
        .await?;
    let hostnames = ingress_hostnames(&cluster.service(&seen).await?);
    assert_eq!(hostnames.len(), 1, "{hostnames:?}");
    assert_eq!(ready, format!("load balancer ready at {}", hostnames[0]));

    // Read at once after the ensure, while AWS still registers the targets.
    let all = node_names.iter().copied().collect::<Vec<_>>().join(", ");
    let initializing = cluster
        .wait_for(
            &seen,
            TARGETS_HEALTHY,
            ("Unknown", "TargetsInitializing"),
            ACT_WITHIN,
        )
        .await?;
    assert_eq!(
        initializing,
        format!("0 of 2 targets healthy; initializing: {all}")
    );
    assert!(cluster.proxy.rewritten() > 0);
    // Registered: the next read, after the first backoff, finds them healthy.
    cluster.proxy.set_registering(false);
    let healthy = cluster
        .wait_for(
            &seen,
            TARGETS_HEALTHY,
            ("True", "AllTargetsHealthy"),
            ACT_WITHIN,
        )
        .await?;
    assert_eq!(healthy, "2 of 2 targets healthy");

    // The instance stops and its kubelet with it: the node turns NotReady,
    // the lifecycle controller taints it as shut down, and the taint makes
    // the CCM read the health at once.
    cluster
        .ec2
        .stop_instances()
        .instance_ids(&stopped.id)
        .send()
        .await?;
    set_ready(&cluster.client, &stopped.private_dns_name, false).await?;
    let started = Instant::now();
    let unhealthy = cluster
        .wait_for(
            &seen,
            TARGETS_HEALTHY,
            ("False", "TargetsUnhealthy"),
            AFTER_SHUTDOWN_WITHIN,
        )
        .await?;
    let took = started.elapsed();
    assert_eq!(
        unhealthy,
        format!(
            "1 of 2 targets healthy; unhealthy: {} ({stopped_reason})",
            stopped.private_dns_name
        )
    );
    let node = nodes(&cluster.client)
        .get(&stopped.private_dns_name)
        .await?;
    assert!(has_taint(&node, SHUTDOWN), "{:?}", node.spec);

    cluster.service(&seen).await?;
    assert_eq!(
        seen.of(PROVISIONED),
        states(&[("False", "Pending"), ("True", "Provisioned")])
    );
    assert_eq!(
        seen.of(TARGETS_HEALTHY),
        states(&[
            ("Unknown", "TargetsInitializing"),
            ("True", "AllTargetsHealthy"),
            ("False", "TargetsUnhealthy"),
        ])
    );
    Ok(took)
}

#[tokio::test]
async fn an_nlb_service_goes_pending_to_provisioned_and_names_the_node_whose_instance_stopped()
-> anyhow::Result<()> {
    let took = conditions_follow_the_load_balancer_and_its_targets(
        "conditions-nlb",
        nlb_service(SERVICE, &[]),
        "Target.InvalidState",
    )
    .await?;
    println!("NLB: the stopped node named {took:?} after it went NotReady");
    Ok(())
}

#[tokio::test]
async fn a_classic_elb_service_goes_pending_to_provisioned_and_names_the_node_whose_instance_stopped()
-> anyhow::Result<()> {
    let mut classic = nlb_service(SERVICE, &[]);
    classic.metadata.annotations = None;
    // moto gives no reason code (`N/A`): the state names the failure.
    let took = conditions_follow_the_load_balancer_and_its_targets(
        "conditions-classic",
        classic,
        "OutOfService",
    )
    .await?;
    println!("classic ELB: the stopped node named {took:?} after it went NotReady");
    Ok(())
}
