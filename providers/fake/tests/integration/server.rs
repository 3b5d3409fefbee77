//! The fake cloud as its own process: a [`RemoteCloud`] gets the same
//! answers as the in-memory cloud, the server's call log names each caller,
//! `GET /state` shows what the calls made, and the crash trap holds the
//! k-th mutation's answer after applying it.

use crate::support;

use std::time::Duration;

use ccm_cloud_provider::{
    CloudConfig, CloudError, CloudProvider, InitContext, Instances, LoadBalancer, Route, Routes,
};
use ccm_provider_fake::{FakeCloud, FakeConfig, RemoteCloud, server};
use serde_json::{Value, json};
use support::{node, service};

const UID: &str = "11111111-2222-3333-4444-555555555555";

/// A server over an auto-instance cloud, and its URL.
async fn serve() -> (String, FakeCloud) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let cloud = FakeCloud::default();
    cloud.set_auto_instances(true);
    tokio::spawn(server::serve(listener, cloud.clone(), 7));
    (url, cloud)
}

async fn client(url: &str, identity: &str) -> RemoteCloud {
    let remote = RemoteCloud::new(url).unwrap();
    remote
        .initialize(&InitContext::new("c1").with_identity(identity))
        .await
        .unwrap();
    remote
}

/// A route of 10.244.1.0/24 to node n1.
fn route_to_n1() -> Route {
    Route {
        name: String::new(),
        target_node: "n1".into(),
        target_provider_id: None,
        destination_cidr: "10.244.1.0/24".parse().unwrap(),
        blackhole: false,
    }
}

async fn get(url: &str) -> Value {
    reqwest::get(url).await.unwrap().json().await.unwrap()
}

#[tokio::test]
async fn a_remote_client_gets_the_same_answers_and_the_log_names_the_caller() {
    let (url, cloud) = serve().await;
    let a = client(&url, "replica-a").await;
    let b = client(&url, "replica-b").await;

    let svc = service("web", UID, &[]);
    let ensured = a
        .ensure_load_balancer("c1", &svc, &[node("n1"), node("n2")])
        .await
        .unwrap();
    let status = b.get_load_balancer("c1", &svc).await.unwrap();
    assert_eq!(
        status.as_ref(),
        Some(&ensured.status),
        "one cloud behind both clients"
    );
    assert_eq!(cloud.load_balancers().len(), 1);

    let metadata = b
        .instances_metadata(&[node("n1"), node("n2")])
        .await
        .unwrap();
    assert_eq!(metadata.len(), 2);
    assert_eq!(metadata[0].as_ref().unwrap().provider_id, "fake://n1");
    assert_eq!(
        Instances::max_batch_size(&b).get(),
        100,
        "batch size from the server"
    );

    let route = route_to_n1();
    a.create_route("c1", "r1", &route).await.unwrap();
    assert_eq!(b.list_routes("c1").await.unwrap().len(), 1);

    let state = get(&format!("{url}/state")).await;
    assert_eq!(state["load_balancers"][0]["service"], "default/web");
    assert_eq!(state["load_balancers"][0]["nodes"], json!(["n1", "n2"]));
    assert_eq!(state["routes"][0]["destination_cidr"], "10.244.1.0/24");

    let calls = get(&format!("{url}/calls")).await;
    let calls = calls.as_array().unwrap();
    let summary: Vec<(&str, &str, bool)> = calls
        .iter()
        .map(|c| {
            (
                c["caller"].as_str().unwrap(),
                c["op"].as_str().unwrap(),
                c["applied"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("replica-a", "ensure_load_balancer", true),
            ("replica-b", "get_load_balancer", false),
            ("replica-b", "instances_metadata", false),
            ("replica-a", "create_route", true),
            ("replica-b", "list_routes", false),
        ]
    );
    let since = get(&format!("{url}/calls?since=3")).await;
    assert_eq!(since.as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn errors_cross_the_wire_kind_by_kind() {
    let (url, cloud) = serve().await;
    let remote = client(&url, "r").await;
    cloud.set_auto_instances(false);
    let missing = remote.instance_metadata(&node("gone")).await.unwrap_err();
    assert!(
        matches!(missing, CloudError::InstanceNotFound),
        "{missing:?}"
    );
    assert!(!remote.instance_exists(&node("gone")).await.unwrap());

    cloud.set_rate_limit(Some((0.001, 1))).unwrap();
    remote.list_routes("c1").await.unwrap();
    let throttled = remote.list_routes("c1").await.unwrap_err();
    assert!(
        matches!(throttled, CloudError::Throttled { retry_after } if retry_after > Duration::ZERO),
        "{throttled:?}"
    );
}

#[tokio::test]
async fn the_crash_trap_applies_the_kth_mutation_then_holds_every_answer() {
    let (url, cloud) = serve().await;
    let remote = std::sync::Arc::new(client(&url, "r").await);
    let http = reqwest::Client::new();
    let armed: Value = http
        .post(format!("{url}/crash"))
        .json(&json!({ "after_mutations": 2 }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(armed["armed"], true);

    remote
        .ensure_load_balancer("c1", &service("one", UID, &[]), &[node("n1")])
        .await
        .unwrap();
    let second = {
        let remote = remote.clone();
        tokio::spawn(async move {
            let svc = service("two", "22222222-2222-3333-4444-555555555555", &[]);
            remote.ensure_load_balancer("c1", &svc, &[node("n1")]).await
        })
    };
    let mut tripped = false;
    for _ in 0..100 {
        let status = get(&format!("{url}/crash")).await;
        if status["tripped"] == true {
            assert_eq!(status["mutations"], 2);
            tripped = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(tripped, "the second mutation trips the trap");
    assert_eq!(
        cloud.load_balancers().len(),
        2,
        "the trapped mutation was applied"
    );
    assert!(!second.is_finished(), "its answer is held");

    // While tripped, every other call waits too.
    let third = {
        let remote = remote.clone();
        tokio::spawn(async move { remote.list_routes("c1").await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!third.is_finished(), "a frozen cloud answers nobody");

    http.delete(format!("{url}/crash")).send().await.unwrap();
    second.await.unwrap().unwrap();
    third.await.unwrap().unwrap();
}

#[tokio::test]
async fn faults_are_set_over_http_and_bad_ones_refused() {
    let (url, _cloud) = serve().await;
    let remote = client(&url, "r").await;
    let http = reqwest::Client::new();
    let refused = http
        .put(format!("{url}/faults"))
        .json(&json!({ "error_rate": 1.5 }))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    assert!(refused.text().await.unwrap().contains("error_rate"));

    let set = http
        .put(format!("{url}/faults"))
        .json(&json!({ "error_rate": 1.0 }))
        .send()
        .await
        .unwrap();
    assert_eq!(set.status(), 204);
    let mut kinds = std::collections::BTreeSet::new();
    for _ in 0..30 {
        match remote.list_routes("c1").await {
            Err(CloudError::Throttled { .. }) => kinds.insert("throttled"),
            Err(e) if e.to_string().contains("503") => kinds.insert("unavailable"),
            Err(e) if e.to_string().contains("timed out") => kinds.insert("timeout"),
            other => panic!("every call fails at rate 1: {other:?}"),
        };
        if kinds.len() == 3 {
            break;
        }
    }
    assert_eq!(kinds.len(), 3, "throttling, 503s and timeouts: {kinds:?}");
}

#[test]
fn a_server_url_must_be_loopback_http_and_stand_alone() {
    let parse = |text: &str| FakeConfig::parse(&CloudConfig::new("/etc/cloud.toml", text));
    assert!(parse("[server]\nurl = \"http://127.0.0.1:8080\"\n").is_ok());
    for (text, expected) in [
        (
            "[server]\nurl = \"http://10.0.0.1:8080\"\n",
            "must be a loopback address",
        ),
        (
            "[server]\nurl = \"https://127.0.0.1:8080\"\n",
            "must start with http://",
        ),
        (
            "[server]\nurl = \"http://localhost\"\n",
            "must name an IP address and port",
        ),
        (
            "[server]\nurl = \"http://127.0.0.1:1\"\n[settings]\nlatency_ms = 1\n",
            "[settings] belongs in the fake-cloud server's own config",
        ),
    ] {
        let err = parse(text).unwrap_err().to_string();
        assert!(err.contains(expected), "{text:?}: {err}");
        assert!(err.contains("/etc/cloud.toml"), "{err}");
    }
}

#[tokio::test]
async fn a_mutation_whose_lease_lapses_before_its_body_is_written_never_reaches_the_cloud() {
    let (url, cloud) = serve().await;
    let remote = client(&url, "replica-a").await;
    let route = route_to_n1();
    // The check before the send passes; the one when the connection reads
    // the body (a process frozen in between, say) refuses.
    let fence = std::sync::Arc::new(ccm_cloud_provider::fence::Countdown::new(1));
    let refused = ccm_cloud_provider::fence::scope(fence.clone(), async {
        remote.create_route("c1", "r1", &route).await
    })
    .await
    .unwrap_err();
    assert!(
        matches!(refused, CloudError::Retry { .. }),
        "a fenced refusal, retried by a leader: {refused:?}"
    );
    assert_eq!(fence.asked(), 3);
    assert!(cloud.routes().is_empty(), "the cloud never acted on it");
    let calls = get(&format!("{url}/calls")).await;
    assert!(
        calls
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["op"] != "create_route"),
        "{calls}"
    );
}
