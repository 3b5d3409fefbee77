//! `aws-cloud-controller-manager audit` against moto: a load balancer (with
//! its target group and security group) the provider made for a Service
//! that no longer exists is listed, `--delete --yes` is refused while a CCM
//! holds the Lease, `--force` then removes exactly those, and a second audit
//! lists nothing; a live Service's load balancer is never listed, nor a
//! live route to a node whose name is not its instance's private DNS name.

use crate::support;

use std::collections::BTreeSet;

use ccm_cloud_provider::Route;
use ccm_provider_aws::test_util::seed;
use ccm_provider_aws::test_util::{
    CLUSTER, cloud_config, ec2, elbv2, moto, nlb_service, provider_at,
};
use ccm_test_support::{ApiServer, Credentials};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Node, NodeSpec, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use serde_json::Value;

/// A Service nobody has any more.
const GONE_UID: &str = "0deadbee-0000-4000-8000-00000000dead";
const GONE_LB: &str = "a0deadbee00004000800000000000dea";
/// A pod CIDR inside the test cluster's `--cluster-cidr`.
const POD_CIDR: &str = "10.244.7.0/24";

/// The leader-election Lease, held by `holder` and renewed just now.
fn held_lease(holder: &str) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some("cloud-controller-manager".into()),
            namespace: Some("kube-system".into()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(300),
            renew_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
            ..LeaseSpec::default()
        }),
    }
}

/// Runs `audit` with `extra` flags and the cluster's usual flags.
async fn audit(
    name: &str,
    credentials: &Credentials,
    config: &std::path::Path,
    extra: &[&str],
) -> (i32, String, String) {
    let mut args = vec!["audit".to_owned()];
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    args.extend(support::flags(config));
    let output = support::ccm::launch(name, &args)
        .credentials(credentials)
        .output()
        .await
        .expect("the audit ran");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

async fn load_balancer_names(moto: &ccm_provider_aws::test_util::Moto) -> BTreeSet<String> {
    let described = elbv2(moto)
        .describe_load_balancers()
        .send()
        .await
        .expect("described");
    described
        .load_balancers()
        .iter()
        .filter_map(|lb| lb.load_balancer_name().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn audit_lists_and_deletes_exactly_the_leaked_load_balancer() {
    let moto = moto().await;
    let estate = seed::estate(&ec2(&moto), 1).await.expect("seeded");
    // Managed: each load balancer has a security group to leak too.
    let vpc = format!("VPC = {}\nNLBSecurityGroupMode = Managed", estate.vpc);
    let provider = provider_at(&moto.endpoint, CLUSTER, &vpc).await;
    let lb = provider.load_balancer().expect("AWS has load balancers");
    let api = ApiServer::start().await.expect("an API server");
    let admin = Credentials {
        kubeconfig: api.kubeconfig_path().to_owned(),
        rbac_limited: false,
    };
    // A live Service and its load balancer.
    let services: Api<Service> = Api::namespaced(api.client(), "default");
    let mut live = nlb_service("", &[], &[(80, 30080)]);
    live.metadata.uid = None;
    live.metadata.name = Some("live".into());
    live.metadata.namespace = Some("default".into());
    let live = services
        .create(&PostParams::default(), &live)
        .await
        .expect("created");
    let node = estate.instances[0].node();
    lb.ensure_load_balancer(CLUSTER, &live, std::slice::from_ref(&node))
        .await
        .expect("ensured");
    let live_lb = lb.load_balancer_name(CLUSTER, &live);
    // A load balancer whose Service is gone.
    lb.ensure_load_balancer(
        CLUSTER,
        &nlb_service(GONE_UID, &[], &[(80, 30081)]),
        &[node],
    )
    .await
    .expect("ensured");
    assert_eq!(
        load_balancer_names(&moto).await,
        BTreeSet::from([live_lb.clone(), GONE_LB.to_owned()])
    );

    // A live route to a node whose name is not its instance's private DNS
    // name: matched by provider ID, as the route controller matches it.
    let instance = &estate.instances[0];
    let worker = Node {
        metadata: ObjectMeta {
            name: Some("worker-0".into()),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            pod_cidr: Some(POD_CIDR.into()),
            pod_cidrs: Some(vec![POD_CIDR.into()]),
            provider_id: Some(instance.provider_id()),
            ..NodeSpec::default()
        }),
        ..Node::default()
    };
    Api::<Node>::all(api.client())
        .create(&PostParams::default(), &worker)
        .await
        .expect("created");
    provider
        .routes()
        .expect("AWS has routes")
        .create_route(
            CLUSTER,
            "",
            &Route {
                name: String::new(),
                target_node: "worker-0".into(),
                target_provider_id: Some(instance.provider_id()),
                destination_cidr: POD_CIDR.parse().expect("a CIDR"),
                blackhole: false,
            },
        )
        .await
        .expect("created");

    let dir = tempfile::tempdir().expect("a directory");
    let config = dir.path().join("cloud.conf");
    std::fs::write(&config, cloud_config(&moto, &vpc)).expect("written");

    let (code, stdout, stderr) = audit("audit-list", &admin, &config, &["--output=json"]).await;
    assert_eq!(code, 0, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let leaked = report["leaked"].as_array().expect("a list");
    let kinds: BTreeSet<&str> = leaked.iter().filter_map(|l| l["kind"].as_str()).collect();
    assert_eq!(
        kinds,
        BTreeSet::from(["load-balancer", "target-group", "security-group"]),
        "{report:#}"
    );
    assert!(
        leaked
            .iter()
            .any(|l| l["kind"] == "load-balancer" && l["name"] == GONE_LB),
        "{report:#}"
    );
    assert!(
        !stdout.contains(&live_lb),
        "the live Service's load balancer is not listed: {report:#}"
    );
    assert!(
        !stdout.contains(POD_CIDR),
        "the live route to worker-0 is not listed: {report:#}"
    );
    assert_eq!(report["routes_not_audited"], 0, "{report:#}");
    assert_eq!(
        report["missing"].as_array().map(Vec::len),
        Some(0),
        "{report:#}"
    );

    let (code, stdout, stderr) = audit("audit-refuse", &admin, &config, &["--delete"]).await;
    assert_eq!(code, 64, "--delete needs --yes: {stdout}{stderr}");
    assert_eq!(
        load_balancer_names(&moto).await.len(),
        2,
        "nothing deleted without --yes"
    );

    // A CCM leads: it may adopt what was listed, so --delete is refused.
    let leases: Api<Lease> = Api::namespaced(api.client(), "kube-system");
    leases
        .create(&PostParams::default(), &held_lease("ccm-0"))
        .await
        .expect("created");
    let (code, stdout, stderr) = audit("audit-led", &admin, &config, &["--delete", "--yes"]).await;
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stderr
            .contains("not deleting while ccm-0 leads (Lease kube-system/cloud-controller-manager"),
        "{stderr}"
    );
    assert_eq!(
        load_balancer_names(&moto).await.len(),
        2,
        "nothing deleted while a CCM leads"
    );

    let (code, stdout, stderr) = audit(
        "audit-delete",
        &admin,
        &config,
        &["--delete", "--yes", "--force"],
    )
    .await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stderr.contains("--force: deleting while ccm-0 leads"),
        "--force says so loudly: {stderr}"
    );
    let deleted: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("deleted "))
        .collect();
    assert_eq!(
        deleted.len(),
        leaked.len(),
        "one line per deletion:\n{stdout}"
    );
    assert_eq!(load_balancer_names(&moto).await, BTreeSet::from([live_lb]));

    let (code, stdout, stderr) = audit("audit-again", &admin, &config, &[]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("No leaked cloud resources."), "{stdout}");
}
