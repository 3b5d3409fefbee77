//! The emulator over real HTTP, as a client sees it: authentication,
//! filters, pagination, includes, the service lifecycle, links, deletion,
//! upstream's leftovers and injected faults.

use std::time::Duration;

use serde_json::{Value, json};

use super::{ACCESS_KEY, CattleEmulator, Faults, LB_IMAGE, SECRET_KEY};

/// How often and how many times a test polls before giving up (2 s).
const POLL_EVERY: Duration = Duration::from_millis(10);
const POLL_TIMES: usize = 200;

/// A client with the emulator's credentials.
struct Client {
    http: reqwest::Client,
    base: String,
}

/// A status and a JSON body (`null` if the body is not JSON).
struct Reply {
    status: u16,
    retry_after: Option<String>,
    body: Value,
}

impl Client {
    fn new(emulator: &CattleEmulator) -> Self {
        Self {
            http: reqwest::Client::new(),
            base: emulator.url(),
        }
    }

    fn url(&self, path: &str) -> String {
        if path.starts_with("http") {
            path.to_owned()
        } else {
            format!("{}{path}", self.base)
        }
    }

    async fn send(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Reply {
        let mut request = self
            .http
            .request(method, self.url(path))
            .basic_auth(ACCESS_KEY, Some(SECRET_KEY));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("the emulator answers");
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = response.json().await.unwrap_or(Value::Null);
        Reply {
            status,
            retry_after,
            body,
        }
    }

    async fn get(&self, path: &str) -> Reply {
        self.send(reqwest::Method::GET, path, None).await
    }

    async fn post(&self, path: &str, body: Value) -> Reply {
        self.send(reqwest::Method::POST, path, Some(body)).await
    }

    /// Polls `path` until `done` holds of its body; panics after 2 s.
    async fn until(&self, path: &str, done: impl Fn(&Value) -> bool) -> Value {
        for _ in 0..POLL_TIMES {
            let reply = self.get(path).await;
            if done(&reply.body) {
                return reply.body;
            }
            tokio::time::sleep(POLL_EVERY).await;
        }
        panic!("{path} never got there");
    }

    async fn stack(&self, name: &str) -> String {
        let reply = self.post("/stacks", json!({"name": name})).await;
        assert_eq!(reply.status, 201, "{}", reply.body);
        id(&reply.body)
    }

    async fn external(&self, stack: &str, name: &str, ip: &str) -> String {
        let body = json!({"name": name, "stackId": stack, "externalIpAddresses": [ip]});
        let reply = self.post("/externalservices", body).await;
        assert_eq!(reply.status, 201, "{}", reply.body);
        id(&reply.body)
    }

    /// A load balancer on port 80, waited for until `inactive`.
    async fn inactive_balancer(&self, stack: &str, name: &str) -> String {
        let body = json!({
            "name": name, "stackId": stack,
            "launchConfig": {"ports": ["80:80/tcp"], "imageUuid": format!("docker:{LB_IMAGE}")},
            "lbConfig": {},
        });
        let reply = self.post("/loadbalancerservices", body).await;
        assert_eq!(reply.status, 201, "{}", reply.body);
        let lb = id(&reply.body);
        self.until(&format!("/loadbalancerservices/{lb}"), |b| {
            b["state"] == "inactive"
        })
        .await;
        lb
    }
}

fn id(resource: &Value) -> String {
    resource["id"].as_str().expect("an id").to_owned()
}

fn ids(collection: &Value) -> Vec<String> {
    collection["data"]
        .as_array()
        .expect("a collection")
        .iter()
        .map(id)
        .collect()
}

async fn fast_emulator() -> (CattleEmulator, Client) {
    let emulator = CattleEmulator::start().await.expect("the emulator starts");
    emulator.set_transition_delay(Duration::from_millis(5));
    emulator.set_endpoint_delay(Duration::from_millis(5));
    let client = Client::new(&emulator);
    (emulator, client)
}

#[tokio::test]
async fn wrong_credentials_get_the_401_envelope() {
    let (emulator, client) = fast_emulator().await;
    let response = client
        .http
        .get(client.url("/hosts"))
        .basic_auth(ACCESS_KEY, Some("wrong"))
        .send()
        .await
        .expect("the emulator answers");
    assert_eq!(response.status().as_u16(), 401);
    let body: Value = response.json().await.expect("a JSON body");
    assert_eq!(
        body,
        json!({"type": "error", "status": 401, "code": "Unauthorized", "message": "Unauthorized"})
    );
    let anonymous = client.http.get(client.url("/hosts")).send().await;
    assert_eq!(anonymous.expect("an answer").status().as_u16(), 401);
    assert_eq!(emulator.requests(), 2);
    assert!(
        emulator
            .calls()
            .iter()
            .all(|c| c.status == 401 && c.path == "/hosts")
    );
}

#[tokio::test]
async fn filters_match_exactly_and_removed_null_hides_removed_hosts() {
    let (emulator, client) = fast_emulator().await;
    emulator.add_host("node-a", "10.0.0.1");
    let b = emulator.add_host("node-b", "10.0.0.2");
    emulator.add_host("node-ab", "10.0.0.3");
    emulator.remove_host(&b.uuid);

    assert_eq!(ids(&client.get("/hosts").await.body).len(), 3);
    assert_eq!(
        ids(&client.get("/hosts?hostname=node-a").await.body).len(),
        1
    );
    let live = client.get("/hosts?removed_null=1").await.body;
    assert!(!ids(&live).contains(&b.id));
    assert_eq!(ids(&live).len(), 2);
    let by_uuid = client.get(&format!("/hosts?uuid={}", b.uuid)).await.body;
    assert_eq!(ids(&by_uuid), [b.id.as_str()]);
    assert_eq!(by_uuid["data"][0]["state"], "removed");
    // Cattle ignores filters it does not know.
    assert_eq!(ids(&client.get("/hosts?colour=blue").await.body).len(), 3);

    let body =
        json!({"name": "kubernetes-loadbalancers", "externalId": "kubernetes-loadbalancers://"});
    assert_eq!(client.post("/stacks", body).await.status, 201);
    client.stack("other").await;
    let upstream = "/stacks?name=kubernetes-loadbalancers&removed_null=1\
        &external_id=kubernetes-loadbalancers%3A%2F%2F";
    assert_eq!(ids(&client.get(upstream).await.body).len(), 1);
    let by_field = "/stacks?externalId=kubernetes-loadbalancers%3A%2F%2F";
    assert_eq!(ids(&client.get(by_field).await.body).len(), 1);
}

#[tokio::test]
async fn pagination_follows_next_to_every_host_once() {
    let (emulator, client) = fast_emulator().await;
    let mut expected: Vec<String> = (1..=5)
        .map(|i| {
            emulator
                .add_host(&format!("node-{i}"), &format!("10.0.0.{i}"))
                .id
        })
        .collect();
    let mut seen = Vec::new();
    let mut next = Some("/hosts?limit=2&removed_null=1".to_owned());
    let mut pages = 0;
    while let Some(url) = next.take() {
        pages += 1;
        assert!(pages <= 5, "pagination does not end");
        let page = client.get(&url).await.body;
        assert_eq!(page["type"], "collection");
        assert_eq!(page["resourceType"], "host");
        seen.extend(ids(&page));
        let partial = page["pagination"]["partial"] == json!(true);
        next = page["pagination"]["next"].as_str().map(str::to_owned);
        assert_eq!(partial, next.is_some());
        if let Some(url) = &next {
            assert!(url.contains("removed_null=1"), "{url} keeps the filters");
        }
    }
    assert_eq!(pages, 3);
    seen.sort();
    expected.sort();
    assert_eq!(seen, expected);
}

#[tokio::test]
async fn include_ip_addresses_inlines_each_hosts_addresses() {
    let (emulator, client) = fast_emulator().await;
    let host = emulator.add_host("node-a", "10.0.0.7");
    let plain = client.get("/hosts").await.body;
    assert!(plain["data"][0].get("ipAddresses").is_none());
    let hosts = client.get("/hosts?include=ipAddresses").await.body;
    let ips = &hosts["data"][0]["ipAddresses"];
    assert_eq!(ips[0]["address"], "10.0.0.7");
    assert_eq!(ips[0]["type"], "ipAddress");

    let one = client.get(&format!("/hosts/{}", host.id)).await.body;
    assert_eq!(one["uuid"], host.uuid);
    assert_eq!(one["agentState"], "active");
    let link = one["links"]["ipAddresses"]
        .as_str()
        .expect("an ipAddresses link");
    let linked = client.get(link).await.body;
    assert_eq!(linked["data"][0]["address"], "10.0.0.7");
}

#[tokio::test]
async fn load_balancer_goes_registering_inactive_active_then_gets_endpoints() {
    let (emulator, client) = fast_emulator().await;
    let host = emulator.add_host("node-a", "10.0.0.9");
    let stack = client.stack("lbs").await;
    let body = json!({
        "name": "lb-a1", "stackId": stack,
        "launchConfig": {"ports": ["80:80/tcp", "443:443/tcp"]},
    });
    let created = client.post("/loadbalancerservices", body).await;
    assert_eq!(created.status, 201);
    assert_eq!(created.body["state"], "registering");
    assert_eq!(created.body["transitioning"], "yes");
    assert!(created.body["actions"].get("activate").is_none());
    let lb = id(&created.body);
    let path = format!("/loadbalancerservices/{lb}");

    let inactive = client.until(&path, |b| b["state"] == "inactive").await;
    assert_eq!(inactive["transitioning"], "no");
    let activate = inactive["actions"]["activate"]
        .as_str()
        .expect("activate offered");
    assert!(activate.ends_with("?action=activate"));
    let activating = client.post(activate, json!({})).await;
    assert_eq!(activating.status, 200);
    assert_eq!(activating.body["state"], "activating");

    let active = client.until(&path, |b| b["state"] == "active").await;
    assert!(active["actions"].get("deactivate").is_some());
    let shown = client
        .until(&path, |b| {
            b["publicEndpoints"]
                .as_array()
                .is_some_and(|e| e.len() == 2)
        })
        .await;
    let endpoint = &shown["publicEndpoints"][0];
    assert_eq!(endpoint["ipAddress"], "10.0.0.9");
    assert_eq!(endpoint["port"], 80);
    assert_eq!(endpoint["hostId"], json!(host.id));
    let snapshot = emulator.snapshot();
    assert_eq!(
        snapshot.load_balancers[0].public_endpoints,
        ["10.0.0.9:80", "10.0.0.9:443"]
    );
}

#[tokio::test]
async fn actions_invalid_in_the_current_state_are_conflicts() {
    let (_emulator, client) = fast_emulator().await;
    let stack = client.stack("lbs").await;
    let lb = client.inactive_balancer(&stack, "lb-x").await;
    let path = format!("/loadbalancerservices/{lb}");
    let refused = client
        .post(&format!("{path}?action=deactivate"), json!({}))
        .await;
    assert_eq!(refused.status, 409);
    assert_eq!(refused.body["code"], "InvalidState");
    let unknown = client
        .post(&format!("{path}?action=explode"), json!({}))
        .await;
    assert_eq!(unknown.status, 422);
    assert_eq!(unknown.body["code"], "InvalidAction");
    let no_action = client.post(&path, json!({})).await;
    assert_eq!(no_action.status, 405);
}

#[tokio::test]
async fn put_replaces_lb_config_and_metadata_but_refuses_launch_config() {
    let (emulator, client) = fast_emulator().await;
    let stack = client.stack("lbs").await;
    let lb = client.inactive_balancer(&stack, "lb-x").await;
    let path = format!("/loadbalancerservices/{lb}");
    let ports = json!({"launchConfig": {"ports": ["81:81/tcp"]}});
    let refused = client.send(reqwest::Method::PUT, &path, Some(ports)).await;
    assert_eq!(refused.status, 422);
    assert_eq!(refused.body["code"], "InvalidOption");

    let update =
        json!({"metadata": {"cluster": "c1"}, "lbConfig": {"portRules": []}, "name": "ignored"});
    let updated = client.send(reqwest::Method::PUT, &path, Some(update)).await;
    assert_eq!(updated.status, 200, "{}", updated.body);
    assert_eq!(updated.body["metadata"]["cluster"], "c1");
    assert_eq!(updated.body["name"], "lb-x");
    let view = &emulator.snapshot().load_balancers[0];
    assert_eq!(view.metadata.get("cluster"), Some(&json!("c1")));
    assert_eq!(view.ports, ["80:80/tcp"]);
}

#[tokio::test]
async fn service_links_show_as_consumed_and_consumed_by_services() {
    let (emulator, client) = fast_emulator().await;
    let stack = client.stack("lbs").await;
    let ext = client.external(&stack, "node-a", "10.0.0.1").await;
    let lb = client.inactive_balancer(&stack, "lb-x").await;
    let path = format!("/loadbalancerservices/{lb}");

    let bad = json!({"serviceLinks": [{"serviceId": "1s999"}]});
    let refused = client
        .post(&format!("{path}?action=setservicelinks"), bad)
        .await;
    assert_eq!(refused.status, 422);
    let links = json!({"serviceLinks": [{"serviceId": ext}]});
    let set = client
        .post(&format!("{path}?action=setservicelinks"), links)
        .await;
    assert_eq!(set.status, 200, "{}", set.body);

    let consumed_url = set.body["links"]["consumedservices"]
        .as_str()
        .expect("a link");
    let consumed = client.get(consumed_url).await.body;
    assert_eq!(ids(&consumed), [ext.as_str()]);
    assert_eq!(consumed["data"][0]["type"], "externalService");
    let ext_body = client.get(&format!("/externalservices/{ext}")).await.body;
    let by_url = ext_body["links"]["consumedbyservices"]
        .as_str()
        .expect("a link");
    assert_eq!(ids(&client.get(by_url).await.body), [lb.as_str()]);
    assert_eq!(emulator.snapshot().load_balancers[0].linked, [ext.as_str()]);

    // Upstream deletes consumed services through the generic type.
    let generic = client.get(&format!("/services/{ext}")).await;
    assert_eq!(generic.body["type"], "externalService");
    let deleted = client
        .send(reqwest::Method::DELETE, &format!("/services/{ext}"), None)
        .await;
    assert_eq!(deleted.status, 200);
    assert_eq!(
        ids(&client.get(consumed_url).await.body),
        Vec::<String>::new()
    );
}

#[tokio::test]
async fn deleted_load_balancer_is_removing_then_hidden_by_removed_null() {
    let (emulator, client) = fast_emulator().await;
    let stack = client.stack("lbs").await;
    let lb = client.inactive_balancer(&stack, "lb-x").await;
    let path = format!("/loadbalancerservices/{lb}");
    let deleted = client.send(reqwest::Method::DELETE, &path, None).await;
    assert_eq!(deleted.status, 200);
    assert_eq!(deleted.body["state"], "removing");
    assert!(emulator.snapshot().load_balancers.is_empty());
    assert_eq!(emulator.snapshot().counts()["load-balancers"], 0);

    client
        .until("/loadbalancerservices?name=lb-x&removed_null=1", |b| {
            ids(b).is_empty()
        })
        .await;
    let gone = client.get(&path).await.body;
    assert_eq!(gone["state"], "removed");
    assert!(gone["removed"].is_string());
    let again = client.send(reqwest::Method::DELETE, &path, None).await;
    assert_eq!(again.status, 404);
    assert_eq!(again.body["code"], "NotFound");
    // The name is free again.
    client.inactive_balancer(&stack, "lb-x").await;
}

#[tokio::test]
async fn creation_is_validated_like_cattle() {
    let (_emulator, client) = fast_emulator().await;
    let stack = client.stack("lbs").await;
    client.external(&stack, "node-a", "10.0.0.1").await;
    let cases = [
        (
            json!({"name": "node-a", "stackId": stack, "externalIpAddresses": ["10.0.0.2"]}),
            "NotUnique",
        ),
        (
            json!({"name": "node-b", "externalIpAddresses": ["10.0.0.2"]}),
            "MissingRequired",
        ),
        (
            json!({"name": "node-b", "stackId": "1st99", "externalIpAddresses": ["10.0.0.2"]}),
            "InvalidReference",
        ),
        (
            json!({"name": "node-b", "stackId": stack, "externalIpAddresses": ["ten"]}),
            "InvalidOption",
        ),
        (
            json!({"name": "node-b", "stackId": stack, "externalIpAddresses": []}),
            "MissingRequired",
        ),
    ];
    for (body, code) in cases {
        let reply = client.post("/externalservices", body.clone()).await;
        assert_eq!(
            (reply.status, reply.body["code"].as_str()),
            (422, Some(code)),
            "{body}"
        );
    }
    assert_eq!(
        client.post("/stacks", json!({"name": "lbs"})).await.body["code"],
        "NotUnique"
    );
}

#[tokio::test]
async fn seed_upstream_leaves_an_active_linked_load_balancer() {
    let (emulator, client) = fast_emulator().await;
    emulator.add_host("node-a.example.com", "10.0.0.1");
    emulator.add_host("node-b", "10.0.0.2");
    let requests = emulator.requests();
    let lb = emulator.seed_upstream("lb-a1b2", &[(80, 30080)], &["node-a.example.com", "node-b"]);
    assert_eq!(emulator.requests(), requests);

    let snapshot = emulator.snapshot();
    assert_eq!(
        snapshot.stacks[0].external_id.as_deref(),
        Some("kubernetes-loadbalancers://")
    );
    let view = &snapshot.load_balancers[0];
    assert_eq!(
        (view.id.as_str(), view.state.as_str()),
        (lb.as_str(), "active")
    );
    assert_eq!(view.ports, ["80:80/tcp"]);
    assert_eq!(view.public_endpoints, ["10.0.0.1:80"]);
    assert_eq!(view.port_rules.len(), 2);
    assert!(view.port_rules.iter().all(|r| r.target_port == 30080));
    let names: Vec<&str> = snapshot
        .external_services
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    assert_eq!(names, ["node-a-example-com", "node-b"]);
    let mut ext_ids: Vec<String> = snapshot
        .external_services
        .iter()
        .map(|e| e.id.clone())
        .collect();
    ext_ids.sort();
    assert_eq!(view.linked, ext_ids);
    assert_eq!(snapshot.counts()["external-services"], 2);

    let over_http = client
        .get(&format!("/loadbalancerservices/{lb}"))
        .await
        .body;
    assert_eq!(
        over_http["launchConfig"]["imageUuid"],
        format!("docker:{LB_IMAGE}")
    );
    assert_eq!(over_http["publicEndpoints"][0]["ipAddress"], "10.0.0.1");
    let setting = client.get("/settings?name=lb.instance.image").await.body;
    assert_eq!(setting["data"][0]["value"], LB_IMAGE);
}

#[tokio::test]
async fn faults_throttle_fail_and_conflict() {
    let (emulator, client) = fast_emulator().await;
    emulator.set_faults(Faults {
        throttled: true,
        ..Faults::default()
    });
    let throttled = client.get("/hosts").await;
    assert_eq!(throttled.status, 429);
    assert_eq!(throttled.retry_after.as_deref(), Some("1"));
    assert_eq!(throttled.body["code"], "TooManyRequests");

    emulator.set_faults(Faults {
        server_error_rate: 1.0,
        ..Faults::default()
    });
    let failed = client.get("/hosts").await;
    assert_eq!(failed.status, 503);
    assert_eq!(failed.body["type"], "error");

    emulator.set_faults(Faults {
        conflict_rate: 1.0,
        ..Faults::default()
    });
    assert_eq!(client.get("/stacks").await.status, 200);
    assert_eq!(
        client.post("/stacks", json!({"name": "s"})).await.status,
        409
    );
    assert!(emulator.snapshot().stacks.is_empty());

    emulator.set_faults(Faults::default());
    let statuses: Vec<u16> = emulator.calls().iter().map(|c| c.status).collect();
    assert_eq!(statuses, [429, 503, 200, 409]);
    assert_eq!(emulator.requests(), 4);
}

#[tokio::test]
async fn calls_record_path_action_and_query() {
    let (emulator, client) = fast_emulator().await;
    let stack = client.stack("lbs").await;
    let lb = client.inactive_balancer(&stack, "lb-x").await;
    client
        .post(
            &format!("/loadbalancerservices/{lb}?action=activate"),
            json!({}),
        )
        .await;
    let last = emulator.calls().pop().expect("a call");
    assert_eq!(last.method, "POST");
    assert_eq!(last.path, format!("/loadbalancerservices/{lb}"));
    assert_eq!(last.action.as_deref(), Some("activate"));
    assert_eq!(last.query, "action=activate");
    assert_eq!(last.status, 200);
}
