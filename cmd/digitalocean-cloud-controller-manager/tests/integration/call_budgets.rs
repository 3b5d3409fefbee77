//! DigitalOcean API requests per operation, ours against upstream's: the
//! `digitalocean-cloud-controller-manager` process runs against the test
//! API server and the fake DigitalOcean API (behind Prism), and each piece
//! of work's requests are counted by method and path from the moment it
//! starts until the CCM has done it and gone quiet. Upstream's figures are
//! derived from digitalocean-cloud-controller-manager v0.1.63's code for
//! the same work (the functions named in each row;
//! `docs/benchmarks/upstream-call-budgets.md` section B gives the whole
//! derivation), taking the least upstream can send where it depends on
//! how events coalesce.
//!
//! The work: 100 nodes initialized as kubelets register them (no
//! `spec.providerID`, Ready), one Service created (the fake answers `new` until
//! the first read after the create, as DigitalOcean answers while it
//! provisions), a node joining, the port changed, the Service deleted;
//! then a steady state with 20 Services over `CALL_BUDGET_STEADY_SECONDS`
//! (default 20), measured by a fresh process whose
//! `--node-status-update-frequency` is that window, so that the window
//! holds one node-status pass as upstream's 5 minutes do. `cargo xtask
//! bench --only budgets` runs it with the full 300 s and publishes the
//! table. The test prints the table and fails when any row of ours is
//! above upstream's.

#![allow(
    clippy::print_stdout,
    reason = "the suite prints its table for the benchmark report"
)]

use crate::support;

use std::time::Duration;

use anyhow::Context;
use ccm_provider_digitalocean::test_util::{Account, account};
use ccm_test_support::budget::{Table, Upstream, conclude, quiet, steady_window};
use ccm_test_support::{ApiServer, eventually, ingress_ips, ready_condition, uninitialized_node};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use support::ccm::{Ccm, start};
use support::{LOAD_BALANCER_ID, do_env};

/// The cluster's nodes; one more droplet is added for the node that joins.
const NODES: u64 = 100;
/// Services in the steady state.
const STEADY_SERVICES: usize = 20;
/// How long one piece of work may take: a new load balancer is polled
/// every 15 s.
const WITHIN: Duration = Duration::from_secs(90);

struct World {
    /// Declared first so it is dropped first.
    ccm: Ccm,
    /// The log of the process the lives ran under, once the steady
    /// state has its own.
    lives_log: String,
    api: ApiServer,
    client: kube::Client,
    account: Account,
}

/// Flags: defaults, but leader election off (it costs no cloud call, and
/// a restarted process need not wait for the lease), and `extra`.
fn args(extra: &[String]) -> Vec<String> {
    let mut args = vec![
        "--cluster-name=budgets".to_owned(),
        "--leader-elect=false".to_owned(),
    ];
    args.extend(extra.iter().cloned());
    args
}

/// `METHOD /path` with every ID in the path written `{id}`, the query left
/// out.
fn action(method: &str, path: &str) -> String {
    let segments: Vec<&str> = path
        .split('/')
        .map(|s| {
            let id = !s.is_empty()
                && (s.bytes().all(|b| b.is_ascii_digit())
                    || (s.len() == 36 && s.bytes().filter(|b| *b == b'-').count() == 4));
            if id { "{id}" } else { s }
        })
        .collect();
    format!("{method} {}", segments.join("/"))
}

impl World {
    async fn start() -> anyhow::Result<Self> {
        let account = account();
        account.add_droplets(NODES + 1);
        let api = ApiServer::start().await?;
        let ccm = start(&api, &do_env(&account), &args(&[])).await?;
        Ok(Self {
            ccm,
            lives_log: String::new(),
            client: api.client(),
            api,
            account,
        })
    }

    fn requests(&self) -> usize {
        self.account.request_count()
    }

    /// Counts the requests from `from` on, once the CCM has gone quiet.
    async fn finish(&self, table: &mut Table, from: usize, upstream: Upstream) {
        quiet(|| self.requests()).await;
        self.finish_now(table, from, upstream);
    }

    fn finish_now(&self, table: &mut Table, from: usize, upstream: Upstream) {
        let order = self.account.requests()[from..]
            .iter()
            .map(|request| action(&request.method, &request.path))
            .collect();
        table.push(order, upstream);
    }

    fn services(&self) -> kube::Api<k8s_openapi::api::core::v1::Service> {
        kube::Api::namespaced(self.client.clone(), "default")
    }

    fn nodes(&self) -> kube::Api<k8s_openapi::api::core::v1::Node> {
        kube::Api::all(self.client.clone())
    }

    async fn create_node(&self, i: u64) -> anyhow::Result<()> {
        let mut node = uninitialized_node(&format!("node-{i}"));
        node.status.get_or_insert_default().conditions = Some(vec![ready_condition(true)]);
        self.nodes().create(&PostParams::default(), &node).await?;
        Ok(())
    }

    async fn create_service(&self, name: &str) -> anyhow::Result<()> {
        let service = ccm_test_support::load_balancer_service(name, &[]);
        self.services()
            .create(&PostParams::default(), &service)
            .await?;
        Ok(())
    }

    async fn provisioned(&self, name: &str) -> anyhow::Result<String> {
        eventually("the Service's ingress IP", WITHIN, || async {
            let service = self.services().get(name).await?;
            let id = ccm_test_support::annotation(&service, LOAD_BALANCER_ID).map(str::to_owned);
            Ok(id.filter(|_| !ingress_ips(&service).is_empty()))
        })
        .await
    }

    /// The load balancer `id`'s droplets and entry ports, as the fake
    /// holds them.
    fn load_balancer(&self, id: &str) -> Option<(usize, Vec<u64>)> {
        let lb = self
            .account
            .load_balancers()
            .into_iter()
            .find(|lb| lb["id"] == id)?;
        let droplets = lb["droplet_ids"].as_array().map_or(0, Vec::len);
        let ports = lb["forwarding_rules"]
            .as_array()
            .map(|rules| {
                rules
                    .iter()
                    .filter_map(|r| r["entry_port"].as_u64())
                    .collect()
            })
            .unwrap_or_default();
        Some((droplets, ports))
    }
}

async fn lives(world: &World, table: &mut Table) -> anyhow::Result<()> {
    let from = world.requests();
    for i in 0..NODES {
        world.create_node(i).await?;
    }
    eventually("every node initialized", WITHIN, || async {
        let all = world.nodes().list(&Default::default()).await?;
        let done = all.items.iter().all(|n| {
            !ccm_test_support::has_taint(n, ccm_test_support::UNINITIALIZED)
                && n.spec
                    .as_ref()
                    .and_then(|s| s.provider_id.as_ref())
                    .is_some()
        });
        Ok(done.then_some(()))
    })
    .await?;
    world
        .finish(table, from, upstream::nodes_initialized(NODES))
        .await;

    let from = world.requests();
    world.create_service("web").await?;
    let id = world.provisioned("web").await?;
    world.finish(table, from, upstream::created()).await;

    let from = world.requests();
    world.create_node(NODES).await?;
    eventually(
        "the new node's droplet behind the load balancer",
        WITHIN,
        || async {
            let droplets = world.load_balancer(&id).map(|(d, _)| d);
            (droplets == Some(NODES as usize + 1)).then_some(())
        },
    )
    .await?;
    world.finish(table, from, upstream::node_joined()).await;

    let from = world.requests();
    let service = world.services().get("web").await?;
    let node_port = service
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .and_then(|p| p.first())
        .and_then(|p| p.node_port)
        .context("the Service's node port")?;
    let patch = json!({"spec": {"ports": [{"name": "http", "port": 8080, "protocol": "TCP",
        "targetPort": 8080, "nodePort": node_port}]}});
    world
        .services()
        .patch("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    eventually("the load balancer's entry port 8080", WITHIN, || async {
        let ports = world.load_balancer(&id).map(|(_, p)| p);
        (ports == Some(vec![8080])).then_some(())
    })
    .await?;
    world.finish(table, from, upstream::port_changed()).await;

    let from = world.requests();
    world
        .services()
        .delete("web", &DeleteParams::default())
        .await?;
    eventually("the Service and its load balancer gone", WITHIN, || async {
        let gone =
            world.services().get_opt("web").await?.is_none() && world.load_balancer(&id).is_none();
        Ok(gone.then_some(()))
    })
    .await?;
    world.finish(table, from, upstream::deleted()).await;
    Ok(())
}

async fn steady(world: &mut World, table: &mut Table, window: Duration) -> anyhow::Result<()> {
    let names: Vec<String> = (0..STEADY_SERVICES).map(|n| format!("web-{n}")).collect();
    for name in &names {
        world.create_service(name).await?;
    }
    for name in &names {
        world.provisioned(name).await?;
    }
    world.ccm.terminate().await?;
    world.ccm.wait(Duration::from_secs(30)).await?;
    let frequency = format!("--node-status-update-frequency={}s", window.as_secs());
    world.lives_log = world.ccm.log();
    world.ccm = start(&world.api, &do_env(&world.account), &args(&[frequency])).await?;
    quiet(|| world.requests()).await;
    let from = world.requests();
    tokio::time::sleep(window).await;
    world.finish_now(
        table,
        from,
        upstream::steady(NODES, STEADY_SERVICES, window),
    );
    Ok(())
}

#[tokio::test]
async fn digitalocean_calls_are_at_most_upstreams_for_every_operation() -> anyhow::Result<()> {
    let window = steady_window()?;
    let mut world = World::start().await?;
    let mut table = Table::default();
    let result = async {
        lives(&world, &mut table).await?;
        steady(&mut world, &mut table, window).await
    }
    .await;
    conclude("DigitalOcean", &table, result, &world.lives_log, &world.ccm)
}

/// What upstream's digitalocean-cloud-controller-manager v0.1.63 sends.
mod upstream {
    use std::time::Duration;

    use ccm_test_support::budget::Upstream;

    pub(crate) fn nodes_initialized(n: u64) -> Upstream {
        Upstream::new(
            format!("{n} nodes initialized"),
            &[("GET /v2/droplets", n)],
            "per node without `spec.providerID`: `InstanceMetadata` → `dropletByName` → \
             `Droplets.ListByName` (one page)",
        )
    }

    pub(crate) fn created() -> Upstream {
        Upstream::new(
            "one Service created",
            &[
                ("GET /v2/load_balancers", 1),
                ("POST /v2/load_balancers", 1),
                ("GET /v2/load_balancers/{id}", 1),
                ("PUT /v2/load_balancers/{id}", 1),
            ],
            "`EnsureLoadBalancer`: `retrieveLoadBalancer` lists (no ID annotation yet), \
             creates, answers a `RetryError` while `new`; the retry 15 s later: \
             `findLoadBalancerByID`, `updateLoadBalancer` (a full PUT), now `active`",
        )
    }

    pub(crate) fn node_joined() -> Upstream {
        Upstream::new(
            "a node joins, one Service",
            &[
                ("GET /v2/droplets", 1),
                ("GET /v2/load_balancers/{id}", 1),
                ("PUT /v2/load_balancers/{id}", 1),
            ],
            "the node's initialization (`dropletByName`), then one `UpdateLoadBalancer` (the \
             least: the node's Add, before its `spec.providerID`, makes a second with two \
             droplet lists): `findLoadBalancerByID`, `updateLoadBalancer`",
        )
    }

    pub(crate) fn port_changed() -> Upstream {
        Upstream::new(
            "its port changed, 80 → 8080",
            &[
                ("GET /v2/load_balancers/{id}", 1),
                ("PUT /v2/load_balancers/{id}", 1),
            ],
            "`EnsureLoadBalancer` on an active load balancer: `findLoadBalancerByID`, \
             `updateLoadBalancer`",
        )
    }

    pub(crate) fn deleted() -> Upstream {
        Upstream::new(
            "the Service deleted",
            &[
                ("GET /v2/load_balancers/{id}", 2),
                ("DELETE /v2/load_balancers/{id}", 1),
            ],
            "`GetLoadBalancer` and `EnsureLoadBalancerDeleted`, a `retrieveLoadBalancer` \
             each (by the ID annotation), then the delete",
        )
    }

    pub(crate) fn steady(nodes: u64, services: usize, window: Duration) -> Upstream {
        Upstream::new(
            format!(
                "steady state, {nodes} nodes and {services} Services, {} s (one node-status pass)",
                window.as_secs()
            ),
            &[("GET /v2/droplets/{id}", nodes)],
            "cloud-node `UpdateNodeStatus`: `InstanceMetadata` → `dropletByID` per node; the \
             service controller and the lifecycle controller (all Ready): 0; no route \
             controller; the tags syncer's next run is 15 minutes after its first",
        )
    }
}

#[test]
fn ids_in_paths_are_written_id() {
    assert_eq!(
        action(
            "GET",
            "/v2/load_balancers/4de7ac8b-495b-4884-9a69-1050c6793cd6"
        ),
        "GET /v2/load_balancers/{id}"
    );
    assert_eq!(action("GET", "/v2/droplets/1000"), "GET /v2/droplets/{id}");
    assert_eq!(
        action("POST", "/v2/load_balancers"),
        "POST /v2/load_balancers"
    );
}
