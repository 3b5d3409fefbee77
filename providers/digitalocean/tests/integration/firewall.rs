//! The public-access firewall through the provider's `ServiceObserver`,
//! against the fake API behind Prism: its inbound rules follow the
//! Services, and a steady state costs one GET.

use crate::support;

use std::collections::BTreeSet;
use std::sync::Arc;

use ccm_cloud_provider::k8s_openapi::api::core::v1::Service;
use ccm_cloud_provider::{CloudProvider, ServiceObserver};
use ccm_provider_digitalocean::annotations;
use ccm_provider_digitalocean::test_util::{Account, account};
use serde_json::json;
use support::{annotated, port, service};

const NAME: &str = "k8s-public-access";

fn firewall_env(account: &Account) -> ccm_cloud_provider::Environment {
    account
        .env()
        .with("PUBLIC_ACCESS_FIREWALL_NAME", NAME)
        .with("PUBLIC_ACCESS_FIREWALL_TAGS", "k8s-worker,k8s-pool")
}

/// A Service of `kind` with `ports` (protocol, port, node port).
fn typed(kind: &str, name: &str, ports: &[(&str, i32, i32)]) -> Service {
    let mut svc = service(name, &format!("uid-{name}"), &[]);
    let spec = svc.spec.get_or_insert_default();
    spec.type_ = Some(kind.to_owned());
    spec.ports = Some(
        ports
            .iter()
            .map(|(p, port_, np)| port(p, *port_, *np))
            .collect(),
    );
    svc
}

/// The single firewall's inbound rules as (protocol, ports).
fn inbound(account: &Account) -> BTreeSet<(String, String)> {
    let firewalls = account.firewalls();
    assert_eq!(firewalls.len(), 1, "one firewall: {firewalls:?}");
    firewalls[0]["inbound_rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            assert_eq!(r["sources"]["addresses"], json!(["0.0.0.0/0", "::/0"]));
            (
                r["protocol"].as_str().unwrap().to_owned(),
                r["ports"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn rules(want: &[(&str, &str)]) -> BTreeSet<(String, String)> {
    want.iter()
        .map(|(p, n)| ((*p).to_owned(), (*n).to_owned()))
        .collect()
}

fn observer(provider: &impl CloudProvider) -> &dyn ServiceObserver {
    provider.service_observer().expect("a service observer")
}

/// One table row: Services, `DEFAULT_LB_TYPE`, and the rules wanted.
struct Case {
    name: &'static str,
    default_lb_type: &'static str,
    services: Vec<Service>,
    want: Vec<(&'static str, &'static str)>,
}

#[tokio::test]
async fn inbound_rules_are_the_ports_services_need() {
    let unmanaged = annotated(
        typed("NodePort", "private", &[("TCP", 81, 30081)]),
        &[(annotations::FIREWALL_MANAGED, "false")],
    );
    let cases = [
        Case {
            name: "NodePort Services open their node ports; ClusterIP and unmanaged ones nothing",
            default_lb_type: "REGIONAL",
            services: vec![
                typed("NodePort", "web", &[("TCP", 80, 30080), ("UDP", 53, 30053)]),
                typed("ClusterIP", "internal", &[("TCP", 80, 0)]),
                unmanaged.clone(),
            ],
            want: vec![("tcp", "30080"), ("udp", "30053")],
        },
        Case {
            name: "REGIONAL load balancers reach nodes over the VPC: no rule",
            default_lb_type: "REGIONAL",
            services: vec![typed("LoadBalancer", "lb", &[("TCP", 443, 30443)])],
            want: vec![],
        },
        Case {
            name: "REGIONAL_NETWORK load balancers open their own ports and kube-proxy's health port",
            default_lb_type: "REGIONAL_NETWORK",
            services: vec![
                typed("NodePort", "web", &[("TCP", 80, 30080)]),
                typed("LoadBalancer", "lb", &[("TCP", 443, 30443)]),
                unmanaged,
            ],
            want: vec![("tcp", "30080"), ("tcp", "443"), ("tcp", "10256")],
        },
    ];
    for case in cases {
        let name = case.name;
        let account = account();
        let env = firewall_env(&account).with("DEFAULT_LB_TYPE", case.default_lb_type);
        let provider = account.provider_with(&env).await;
        let services: Vec<Arc<Service>> = case.services.into_iter().map(Arc::new).collect();
        account.clear_requests();

        observer(&provider).sync_services(&services).await.unwrap();

        assert_eq!(inbound(&account), rules(&case.want), "{name}");
        let fw = &account.firewalls()[0];
        assert_eq!(fw["name"], NAME);
        assert_eq!(fw["tags"], json!(["k8s-worker", "k8s-pool"]));
        assert_eq!(fw["outbound_rules"].as_array().unwrap().len(), 3, "{name}");
        assert_eq!(
            account.count("GET", "/v2/firewalls"),
            1,
            "{name}: found by listing"
        );
        assert_eq!(account.count("POST", "/v2/firewalls"), 1, "{name}: created");
    }
}

#[tokio::test]
async fn a_removed_service_closes_its_ports_and_a_steady_state_costs_one_get() {
    let account = account();
    let provider = account
        .provider_with(&firewall_env(&account).with("DEFAULT_LB_TYPE", "REGIONAL"))
        .await;
    let web = Arc::new(typed("NodePort", "web", &[("TCP", 80, 30080)]));
    let api = Arc::new(typed("NodePort", "api", &[("TCP", 80, 30090)]));
    let observer = observer(&provider);
    observer.sync_services(&[web.clone(), api]).await.unwrap();
    assert_eq!(
        inbound(&account),
        rules(&[("tcp", "30080"), ("tcp", "30090")])
    );
    let id = account.firewalls()[0]["id"].as_str().unwrap().to_owned();
    let by_id = format!("/v2/firewalls/{id}");

    account.clear_requests();
    observer
        .sync_services(std::slice::from_ref(&web))
        .await
        .unwrap();
    assert_eq!(inbound(&account), rules(&[("tcp", "30080")]));
    assert_eq!(account.count("GET", &by_id), 1, "read by the remembered ID");
    assert_eq!(account.count("PUT", &by_id), 1);
    assert_eq!(account.requests().len(), 2, "{:?}", account.requests());

    account.clear_requests();
    observer.sync_services(&[web]).await.unwrap();
    let requests = account.requests();
    assert_eq!(requests.len(), 1, "one GET, nothing else: {requests:?}");
    assert_eq!(
        (requests[0].method.as_str(), requests[0].path.as_str()),
        ("GET", by_id.as_str())
    );
    assert_eq!(account.mutations(), 0);
}

#[tokio::test]
async fn an_existing_firewall_is_found_by_name_and_a_deleted_one_recreated() {
    let account = account();
    let env = firewall_env(&account);
    let services = [Arc::new(typed("NodePort", "web", &[("TCP", 80, 30080)]))];
    let first = account.provider_with(&env).await;
    observer(&first).sync_services(&services).await.unwrap();

    // A restarted CCM lists firewalls once and leaves a matching one alone.
    let restarted = account.provider_with(&env).await;
    account.clear_requests();
    observer(&restarted).sync_services(&services).await.unwrap();
    assert_eq!(account.count("GET", "/v2/firewalls"), 1);
    assert_eq!(account.mutations(), 0);

    account.remove_firewalls();
    account.clear_requests();
    observer(&restarted).sync_services(&services).await.unwrap();
    assert_eq!(inbound(&account), rules(&[("tcp", "30080")]));
    assert_eq!(
        account.count("GET", "/v2/firewalls"),
        1,
        "listed after the 404"
    );
    assert_eq!(account.count("POST", "/v2/firewalls"), 1, "created again");
}

#[tokio::test]
async fn a_firewall_changed_by_hand_is_put_back() {
    let account = account();
    let provider = account.provider_with(&firewall_env(&account)).await;
    let services = [Arc::new(typed("NodePort", "web", &[("TCP", 80, 30080)]))];
    observer(&provider).sync_services(&services).await.unwrap();
    account.edit_firewall(|fw| {
        fw["inbound_rules"] = json!([{"protocol": "tcp", "ports": "22", "sources": {"addresses": ["0.0.0.0/0"]}}]);
    });
    account.clear_requests();
    observer(&provider).sync_services(&services).await.unwrap();
    assert_eq!(inbound(&account), rules(&[("tcp", "30080")]));
    assert_eq!(account.mutations(), 1, "{:?}", account.requests());
}

#[tokio::test]
async fn without_the_firewall_variables_no_firewall_is_touched() {
    let account = account();
    let services = [Arc::new(typed("NodePort", "web", &[("TCP", 80, 30080)]))];
    let bare = account.provider().await;
    assert!(bare.service_observer().is_none(), "nothing to observe");

    let tagging = account
        .provider_with(&account.env().with("DO_CLUSTER_ID", "c1"))
        .await;
    account.clear_requests();
    observer(&tagging).sync_services(&services).await.unwrap();
    let firewall_calls: Vec<_> = account
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with("/v2/firewalls"))
        .collect();
    assert!(firewall_calls.is_empty(), "{firewall_calls:?}");
    assert!(account.firewalls().is_empty());
}
