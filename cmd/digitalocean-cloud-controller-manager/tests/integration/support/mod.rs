//! End-to-end fixtures: the real `digitalocean-cloud-controller-manager`
//! binary as a child process, the API server the environment asks for
//! ([`ccm_test_support::ApiServer`]: in memory, or a real kube-apiserver
//! with the CCM under the chart's RBAC), and the fake
//! DigitalOcean API behind Stoplight Prism (`ccm_provider_digitalocean::test_util`),
//! so every request the binary sends, and every response it reads, is
//! checked against DigitalOcean's OpenAPI spec.
//!
//! Every wait is bounded; a failing test kills the CCM and prints its log.
#![allow(dead_code, reason = "each test file uses a different subset")]

pub(crate) mod ccm;

use std::time::Duration;

use ccm_provider_digitalocean::test_util::Account;
use ccm_test_support::{ApiServer, load_balancer_service, uninitialized_node};
use k8s_openapi::api::core::v1::{Event, Node, Service};
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde_json::Value;

use ccm::Ccm;

/// `DO_CLUSTER_ID` of the tests' clusters.
pub(crate) const CLUSTER_ID: &str = "e2e-cluster";
/// `REGION` of the tests' clusters (the fake's droplets are in nyc3 too).
pub(crate) const REGION: &str = "nyc3";
/// How long any one outcome may take. A new load balancer is polled every
/// 15 s until it is active, so this leaves room for a few polls.
pub(crate) const WAIT: Duration = Duration::from_secs(60);
/// Where the provider records the load balancer's ID on the Service.
pub(crate) const LOAD_BALANCER_ID: &str = "kubernetes.digitalocean.com/load-balancer-id";
/// The service controller's finalizer.
pub(crate) const FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";

/// Upstream's environment variables for `account`: its token, Prism as the
/// API, the cluster ID, the region, and `DEFAULT_LB_TYPE=REGIONAL` (these
/// suites check HTTP-aware load balancers forwarding to node ports; the
/// manifest and drop-in suites keep upstream's `REGIONAL_NETWORK`).
pub(crate) fn do_env(account: &Account) -> Vec<(&'static str, String)> {
    vec![
        ("DO_ACCESS_TOKEN", account.token.clone()),
        ("DO_OVERRIDE_URL", account.harness.prism_url.clone()),
        ("DO_CLUSTER_ID", CLUSTER_ID.to_owned()),
        ("REGION", REGION.to_owned()),
        ("DEFAULT_LB_TYPE", "REGIONAL".to_owned()),
    ]
}

/// Flags for a test CCM (but `--kubeconfig`): a one-second node monitor
/// and short leader-election durations.
pub(crate) fn ccm_args() -> Vec<String> {
    vec![
        "--cluster-name=e2e".to_owned(),
        "--node-monitor-period=1s".to_owned(),
        "--leader-elect-lease-duration=4s".to_owned(),
        "--leader-elect-renew-deadline=3s".to_owned(),
        "--leader-elect-retry-period=1s".to_owned(),
    ]
}

/// Waits until Service `name` has an ingress IP; answers it and its
/// load-balancer ID.
pub(crate) async fn provisioned(cluster: &Cluster, name: &str) -> (Service, String) {
    let service =
        ccm_test_support::eventually(&format!("{name} has an ingress IP"), WAIT, || async {
            cluster
                .services()
                .get(name)
                .await
                .ok()
                .filter(|s| !ccm_test_support::ingress_ips(s).is_empty())
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", cluster.ccm.log_tail()));
    let id = ccm_test_support::annotation(&service, LOAD_BALANCER_ID)
        .unwrap_or_else(|| panic!("{name} has no {LOAD_BALANCER_ID} annotation"))
        .to_owned();
    (service, id)
}

/// The CCM against an API server and an account on the fake.
///
/// Fields drop in order: the CCM is killed before the API server stops.
#[derive(Debug)]
pub(crate) struct Cluster {
    pub(crate) ccm: Ccm,
    pub(crate) server: ApiServer,
    pub(crate) account: Account,
}

impl Cluster {
    /// An API server with nodes `node-1` to `node-<nodes>` as kubelet
    /// registers them, and a ready CCM for `account`.
    pub(crate) async fn start(account: Account, nodes: usize) -> Self {
        let env = do_env(&account);
        Self::start_with(account, nodes, &env).await
    }

    /// As [`Cluster::start`], with `env` as the CCM's whole environment.
    pub(crate) async fn start_with(
        account: Account,
        nodes: usize,
        env: &[(&'static str, String)],
    ) -> Self {
        let server = ApiServer::with_nodes(nodes)
            .await
            .expect("the API server starts");
        let ccm = ccm::start(&server, env, &ccm_args())
            .await
            .expect("the CCM starts");
        Self {
            ccm,
            server,
            account,
        }
    }

    pub(crate) fn nodes(&self) -> Api<Node> {
        Api::all(self.server.client())
    }

    pub(crate) fn services(&self) -> Api<Service> {
        Api::namespaced(self.server.client(), "default")
    }

    /// Registers node `name` as kubelet does with `--cloud-provider=external`.
    pub(crate) async fn create_node(&self, name: &str) {
        self.nodes()
            .create(&PostParams::default(), &uninitialized_node(name))
            .await
            .expect("node created");
    }

    /// Creates the LoadBalancer Service `default/<name>`: TCP port 80 to
    /// 8080, a node port allocated by the server, and `annotations`.
    pub(crate) async fn create_service(&self, name: &str, annotations: &[(&str, &str)]) -> Service {
        self.services()
            .create(
                &PostParams::default(),
                &load_balancer_service(name, annotations),
            )
            .await
            .expect("service created")
    }

    /// The Warning events about Service `name`.
    pub(crate) async fn warnings_about(&self, name: &str) -> Vec<Event> {
        let events: Api<Event> = Api::namespaced(self.server.client(), "default");
        events
            .list(&ListParams::default())
            .await
            .expect("events listed")
            .items
            .into_iter()
            .filter(|e| e.involved_object.name.as_deref() == Some(name))
            .filter(|e| e.type_.as_deref() == Some("Warning"))
            .collect()
    }

    /// The load balancer `id` as the fake holds it.
    pub(crate) fn load_balancer(&self, id: &str) -> Option<Value> {
        self.account
            .load_balancers()
            .into_iter()
            .find(|lb| lb["id"] == id)
    }

    /// The droplet IDs behind load balancer `id`, sorted.
    pub(crate) fn load_balancer_droplets(&self, id: &str) -> Option<Vec<u64>> {
        let lb = self.load_balancer(id)?;
        let mut ids: Vec<u64> = lb["droplet_ids"]
            .as_array()?
            .iter()
            .filter_map(Value::as_u64)
            .collect();
        ids.sort_unstable();
        Some(ids)
    }

    /// Fails when Prism's log reports a request or response that breaks
    /// DigitalOcean's spec. Prism marks those `✖ error` (404s and other
    /// answers the spec allows are not marked). The log is shared by every
    /// test in this binary, and all of them should be clean.
    pub(crate) fn assert_contract_clean(&self) {
        let path = &self.account.harness.prism.log;
        let log = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("Prism's log {}: {e}", path.display()));
        let violations: Vec<&str> = log.lines().filter(|line| line.contains('✖')).collect();
        assert!(
            violations.is_empty(),
            "Prism saw requests or responses that break DigitalOcean's spec:\n{}",
            violations.join("\n")
        );
    }
}
