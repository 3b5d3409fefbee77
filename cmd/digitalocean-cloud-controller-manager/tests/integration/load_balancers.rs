//! LoadBalancer Services, end to end: the real binary provisions a
//! DigitalOcean load balancer through the fake API (behind Prism), keeps its
//! droplets in step with the nodes, and deletes it with the Service.

use crate::support;

use ccm_provider_digitalocean::test_util::{FakeDroplet, account};
use ccm_test_support::{eventually, ingress_ips};
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;
use support::{CLUSTER_ID, Cluster, FINALIZER, WAIT, provisioned};

const SIZE_UNIT: &str = "service.beta.kubernetes.io/do-loadbalancer-size-unit";
const IDLE_TIMEOUT: &str = "service.beta.kubernetes.io/do-loadbalancer-http-idle-timeout-seconds";

/// Upstream's default load-balancer name: `a` and the UID without dashes,
/// 32 characters in all.
fn default_name(uid: &str) -> String {
    let mut name = format!("a{}", uid.replace('-', ""));
    name.truncate(32);
    name
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_balancer_service_is_provisioned_polled_to_active_and_deleted() {
    let account = account();
    // Created `new`; active from the first read after that.
    account.set_activate_after_reads(1);
    account.add_droplet(FakeDroplet::new(4001, "node-1"));
    account.add_droplet(FakeDroplet::new(4002, "node-2"));
    let cluster = Cluster::start(account, 2).await;

    let created = cluster.create_service("web", &[]).await;
    let uid = created.metadata.uid.clone().expect("a uid");
    let node_port = created.spec.as_ref().unwrap().ports.as_ref().unwrap()[0]
        .node_port
        .expect("a node port");
    let (service, id) = provisioned(&cluster, "web").await;

    let lb = cluster
        .load_balancer(&id)
        .expect("the load balancer is in the cloud");
    assert_eq!(lb["status"], "active");
    assert_eq!(ingress_ips(&service), vec![lb["ip"].as_str().unwrap()]);
    assert_eq!(lb["name"], default_name(&uid));
    assert_eq!(lb["region"]["slug"], "nyc3");
    let rules = lb["forwarding_rules"].as_array().expect("forwarding rules");
    assert_eq!(rules.len(), 1, "{rules:?}");
    assert_eq!(
        (
            &rules[0]["entry_protocol"],
            &rules[0]["entry_port"],
            &rules[0]["target_protocol"],
            &rules[0]["target_port"],
        ),
        (&json!("tcp"), &json!(80), &json!("tcp"), &json!(node_port)),
        "port 80 forwarded to the node port"
    );
    assert_eq!(
        (&lb["health_check"]["port"], &lb["health_check"]["path"]),
        (&json!(10256), &json!("/healthz")),
        "externalTrafficPolicy Cluster: kube-proxy's health check"
    );
    assert_eq!(cluster.load_balancer_droplets(&id), Some(vec![4001, 4002]));
    assert!(
        lb["tags"]
            .as_array()
            .is_some_and(|t| t.contains(&json!(format!("k8s:{CLUSTER_ID}")))),
        "tagged as this cluster's: {}",
        lb["tags"]
    );
    let lb_path = format!("/v2/load_balancers/{id}");
    assert_eq!(cluster.account.count("POST", "/v2/load_balancers"), 1);
    assert!(
        cluster.account.count("GET", &lb_path) >= 1,
        "created `new`, so it was polled until active"
    );
    assert_eq!(
        cluster.account.count("PUT", &lb_path),
        0,
        "an unchanged load balancer is not rewritten"
    );
    assert!(
        service
            .metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == FINALIZER)
    );

    cluster
        .services()
        .delete("web", &DeleteParams::default())
        .await
        .expect("service deleted");
    eventually("web is gone (its finalizer removed)", WAIT, || async {
        cluster
            .services()
            .get_opt("web")
            .await
            .ok()
            .and_then(|s| s.is_none().then_some(()))
    })
    .await
    .expect("a bounded wait");
    assert_eq!(
        cluster.load_balancer(&id),
        None,
        "the load balancer is deleted first"
    );
    assert_eq!(cluster.account.count("DELETE", &lb_path), 1);
    cluster.assert_contract_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_balancer_droplets_follow_nodes_added_and_removed() {
    let account = account();
    account.set_activate_after_reads(0);
    for (id, name) in [(4101, "node-1"), (4102, "node-2"), (4103, "node-3")] {
        account.add_droplet(FakeDroplet::new(id, name));
    }
    let cluster = Cluster::start(account, 2).await;
    cluster.create_service("web", &[]).await;
    let (_, id) = provisioned(&cluster, "web").await;
    assert_eq!(cluster.load_balancer_droplets(&id), Some(vec![4101, 4102]));

    cluster.create_node("node-3").await;
    eventually(
        "node-3's droplet is behind the load balancer",
        WAIT,
        || async {
            (cluster.load_balancer_droplets(&id) == Some(vec![4101, 4102, 4103])).then_some(())
        },
    )
    .await
    .expect("a bounded wait");

    cluster
        .nodes()
        .delete("node-1", &DeleteParams::default())
        .await
        .expect("node-1 deleted");
    eventually(
        "node-1's droplet has left the load balancer",
        WAIT,
        || async { (cluster.load_balancer_droplets(&id) == Some(vec![4102, 4103])).then_some(()) },
    )
    .await
    .expect("a bounded wait");

    let droplets_path = format!("/v2/load_balancers/{id}/droplets");
    assert_eq!(cluster.account.count("POST", &droplets_path), 1);
    assert_eq!(cluster.account.count("DELETE", &droplets_path), 1);
    assert_eq!(
        cluster
            .account
            .count("PUT", &format!("/v2/load_balancers/{id}")),
        0,
        "node changes move droplets, they do not rewrite the load balancer"
    );
    assert_eq!(cluster.account.count("POST", "/v2/load_balancers"), 1);
    cluster.assert_contract_clean();
}

/// Waits for a Warning event about `service` whose message names `key`;
/// on timeout, shows the Warnings there are.
async fn warning_naming(cluster: &Cluster, service: &str, key: &str) -> String {
    let found = eventually(
        &format!("a Warning about {service} naming {key}"),
        WAIT,
        || async {
            cluster
                .warnings_about(service)
                .await
                .iter()
                .filter_map(|e| e.message.as_deref())
                .find(|m| m.contains(key))
                .map(str::to_owned)
        },
    )
    .await;
    match found {
        Ok(message) => message,
        Err(err) => {
            let seen: Vec<_> = cluster
                .warnings_about(service)
                .await
                .iter()
                .map(|e| {
                    let series = e.series.as_ref().and_then(|s| s.count);
                    (e.reason.clone(), e.count.or(series), e.message.clone())
                })
                .collect();
            panic!("{err}; Warnings (reason, count, message): {seen:#?}")
        }
    }
}

async fn annotate(cluster: &Cluster, service: &str, key: &str, value: &str) {
    let patch = json!({"metadata": {"annotations": {key: value}}});
    cluster
        .services()
        .patch(service, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("service annotated");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_annotation_is_a_warning_naming_it_and_creates_nothing_until_corrected() {
    let account = account();
    account.set_activate_after_reads(0);
    account.add_droplet(FakeDroplet::new(4201, "node-1"));
    let cluster = Cluster::start(account, 1).await;

    cluster.create_service("web", &[(SIZE_UNIT, "lots")]).await;
    let message = warning_naming(&cluster, "web", SIZE_UNIT).await;
    assert!(message.contains("lots"), "{message}");
    assert_eq!(
        cluster.account.mutations(),
        0,
        "{:?}",
        cluster.account.requests()
    );
    assert!(cluster.account.load_balancers().is_empty());
    let service = cluster.services().get("web").await.unwrap();
    assert!(ingress_ips(&service).is_empty());

    annotate(&cluster, "web", SIZE_UNIT, "2").await;
    let (_, id) = provisioned(&cluster, "web").await;
    let lb = cluster.load_balancer(&id).unwrap();
    assert_eq!(lb["size_unit"], json!(2), "the corrected value is used");
    cluster.assert_contract_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_annotation_on_a_provisioned_service_leaves_its_load_balancer_as_it_was() {
    let account = account();
    account.set_activate_after_reads(0);
    account.add_droplet(FakeDroplet::new(4301, "node-1"));
    let cluster = Cluster::start(account, 1).await;
    cluster.create_service("web", &[]).await;
    let (_, id) = provisioned(&cluster, "web").await;
    let before = cluster.load_balancer(&id).unwrap();
    cluster.account.clear_requests();

    annotate(&cluster, "web", IDLE_TIMEOUT, "soon").await;
    let message = warning_naming(&cluster, "web", IDLE_TIMEOUT).await;

    assert!(message.contains("soon"), "{message}");
    assert_eq!(
        cluster.load_balancer(&id),
        Some(before),
        "the load balancer is unchanged"
    );
    assert_eq!(
        cluster.account.mutations(),
        0,
        "{:?}",
        cluster.account.requests()
    );
    cluster.assert_contract_clean();
}
