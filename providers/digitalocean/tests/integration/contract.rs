//! The contract with DigitalOcean's published OpenAPI spec.
//!
//! Every other test in this suite talks to the fake through Prism with
//! `--errors`, so any request the provider sends or any response it parses
//! that breaks the spec fails that test. These tests prove the check bites:
//! a malformed request is refused (and never reaches the fake), a malformed
//! response is reported, and the fake refuses what the spec refuses.

use crate::support;

use ccm_cloud_provider::Instances;
use ccm_provider_digitalocean::test_util::account;
use serde_json::{Value, json};
use support::node;

fn valid_create() -> Value {
    json!({
        "name": "lb-1",
        "region": "nyc3",
        "droplet_ids": [1000],
        "forwarding_rules": [{"entry_protocol": "tcp", "entry_port": 80, "target_protocol": "tcp", "target_port": 30080}],
        "health_check": {"protocol": "http", "port": 10256, "path": "/healthz", "check_interval_seconds": 3,
            "response_timeout_seconds": 5, "unhealthy_threshold": 3, "healthy_threshold": 5},
        "sticky_sessions": {"type": "none"}
    })
}

/// Ways to break a create request, each of which the spec forbids.
fn malformed_creates() -> Vec<(&'static str, Value)> {
    let with = |f: &dyn Fn(&mut Value)| {
        let mut v = valid_create();
        f(&mut v);
        v
    };
    vec![
        (
            "unknown entry protocol",
            with(&|v| v["forwarding_rules"][0]["entry_protocol"] = json!("tcpx")),
        ),
        (
            "no forwarding rules",
            with(&|v| v["forwarding_rules"] = json!([])),
        ),
        (
            "no region",
            with(&|v| drop(v.as_object_mut().unwrap().remove("region"))),
        ),
        ("unknown region", with(&|v| v["region"] = json!("mars1"))),
        ("null name", with(&|v| v["name"] = Value::Null)),
        ("size_unit 0", with(&|v| v["size_unit"] = json!(0))),
        (
            "idle timeout 5 s",
            with(&|v| v["http_idle_timeout_seconds"] = json!(5)),
        ),
        (
            "port as a string",
            with(&|v| v["forwarding_rules"][0]["entry_port"] = json!("80")),
        ),
        (
            "both droplet_ids and tag",
            with(&|v| v["tag"] = json!("web")),
        ),
        (
            "vpc_uuid not a UUID",
            with(&|v| v["vpc_uuid"] = json!("vpc-1")),
        ),
        (
            "unknown sticky type",
            with(&|v| v["sticky_sessions"]["type"] = json!("ip")),
        ),
    ]
}

async fn post(base: &str, token: &str, body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{base}/v2/load_balancers"))
        .bearer_auth(token)
        .json(body)
        .send()
        .await
        .expect("send")
}

/// Prism's list of violations: the `sl-violations` header, or for a refused
/// request (which it answers itself) the problem body's `validation`.
async fn violations(resp: reqwest::Response) -> Option<String> {
    if let Some(header) = resp.headers().get("sl-violations") {
        return Some(header.to_str().unwrap_or_default().to_owned());
    }
    let body: Value = resp.json().await.ok()?;
    body.get("validation").map(Value::to_string)
}

#[tokio::test]
async fn prism_refuses_a_malformed_request_naming_the_field_and_the_fake_never_sees_it() {
    let account = account();
    let mut bad = valid_create();
    bad["forwarding_rules"][0]["entry_protocol"] = json!("tcpx");

    let resp = post(&account.harness.prism_url, &account.token, &bad).await;

    assert_eq!(resp.status(), 422);
    let violations = violations(resp).await.expect("Prism lists the violations");
    assert!(
        violations.contains("forwarding_rules.0.entry_protocol"),
        "{violations}"
    );
    assert!(
        account.requests().is_empty(),
        "Prism forwarded an invalid request"
    );
}

#[tokio::test]
async fn the_fake_refuses_whatever_the_spec_refuses() {
    let account = account();
    for (what, body) in malformed_creates() {
        let through_prism = post(&account.harness.prism_url, &account.token, &body).await;
        let status = through_prism.status();
        let found = violations(through_prism).await;
        assert!(
            status == 422 && found.is_some(),
            "{what}: the spec should refuse it; Prism answered {status} with violations {found:?}"
        );
        let direct = post(&account.harness.fake_url, &account.token, &body).await;
        assert_eq!(
            direct.status(),
            422,
            "{what}: the fake accepted what the spec refuses"
        );
    }
    assert!(account.load_balancers().is_empty());

    let ok = post(&account.harness.prism_url, &account.token, &valid_create()).await;
    assert_eq!(ok.status(), 202, "the valid request passes both");
    assert_eq!(violations(ok).await, None);
    assert_eq!(account.load_balancers().len(), 1);
}

#[tokio::test]
async fn prism_reports_a_response_that_breaks_the_spec() {
    let account = account();
    account.add_droplets(2);
    let provider = account.provider().await;
    account.corrupt_droplets(true);

    let err = provider
        .instances_exist(&[node("node-0", None), node("node-1", None)])
        .await
        .expect_err("a response that breaks the spec is not accepted");
    assert!(err.to_string().contains("500"), "{err}");

    let resp = reqwest::Client::new()
        .get(format!("{}/v2/droplets", account.harness.prism_url))
        .bearer_auth(&account.token)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 500);
    let violations = violations(resp).await.expect("Prism lists the violations");
    assert!(
        violations.contains(r#""response","body","droplets","0","id""#),
        "{violations}"
    );
}

#[tokio::test]
async fn a_request_without_a_token_is_unauthorized_by_spec_and_fake() {
    let account = account();
    for base in [&account.harness.prism_url, &account.harness.fake_url] {
        let resp = reqwest::get(format!("{base}/v2/droplets")).await.unwrap();
        assert_eq!(resp.status(), 401, "{base}");
    }
}
