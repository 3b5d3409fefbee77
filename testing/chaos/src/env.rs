//! One suite's world: the test API server (in this process), the fake
//! cloud's server (a child process) and CCM replicas (child processes),
//! each replica with a user of its own so a partition can single it out.

use std::path::PathBuf;
use std::time::Duration;

use ccm_test_apiserver::TestApiServer;
use ccm_test_support::{Ccm, Launch, kubeconfig_yaml};

use crate::cloud::CloudProcess;

/// The cluster name replicas run with: the cloud tags routes and load
/// balancers with it.
pub(crate) const CLUSTER: &str = "chaos";
/// The pod network nodes get their CIDRs from.
pub(crate) const CLUSTER_CIDR: &str = "10.244.0.0/16";
/// How many replica slots an environment has users for.
const SLOTS: usize = 3;

/// The binaries a suite runs.
#[derive(Debug, Clone)]
pub(crate) struct Binaries {
    pub(crate) ccm: PathBuf,
    pub(crate) fake_cloud: PathBuf,
}

/// Leader-election timing for the replicas.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    pub(crate) lease: Duration,
    pub(crate) renew: Duration,
    pub(crate) retry: Duration,
}

impl Timing {
    /// Short terms, so a suite sees many failovers: 2 s leases renewed
    /// within 1.5 s, retried every 250 ms.
    pub(crate) const SHORT: Self = Self {
        lease: Duration::from_secs(2),
        renew: Duration::from_millis(1500),
        retry: Duration::from_millis(250),
    };
}

/// The user of replica slot `slot`, and its identity's prefix (its
/// `HOSTNAME`).
pub(crate) fn replica_user(slot: usize) -> String {
    format!("chaos-replica-{slot}")
}

/// A running environment; everything stops when it is dropped.
pub(crate) struct Env {
    pub(crate) api: TestApiServer,
    pub(crate) client: kube::Client,
    pub(crate) cloud: CloudProcess,
    binaries: Binaries,
    dir: tempfile::TempDir,
    timing: Timing,
    started: usize,
}

impl Env {
    /// Starts the API server and the fake cloud.
    pub(crate) async fn start(
        binaries: &Binaries,
        timing: Timing,
        seed: u64,
    ) -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new().prefix("ccm-chaos-").tempdir()?;
        let tokens = dir.path().join("tokens.csv");
        let mut lines =
            String::from("chaos-admin-token,chaos-admin,chaos-admin,\"system:masters\"\n");
        for slot in 0..SLOTS {
            let user = replica_user(slot);
            lines.push_str(&format!("{user}-token,{user},{user},\"system:masters\"\n"));
        }
        std::fs::write(&tokens, lines)?;
        let api = TestApiServer::builder()
            .token_auth_file(&tokens)
            .anonymous_auth(false)
            .start()
            .await?;
        let client = api.client_with_token("chaos-admin-token")?;
        let cloud = CloudProcess::start(&binaries.fake_cloud, dir.path(), seed).await?;
        for slot in 0..SLOTS {
            let user = replica_user(slot);
            std::fs::write(
                dir.path().join(format!("kubeconfig-{slot}")),
                kubeconfig_yaml(api.url(), None, &user, &format!("{user}-token")),
            )?;
        }
        std::fs::write(
            dir.path().join("cloud-client.toml"),
            format!("[server]\nurl = \"{}\"\n", cloud.url()),
        )?;
        Ok(Self {
            api,
            client,
            cloud,
            binaries: binaries.clone(),
            dir,
            timing,
            started: 0,
        })
    }

    /// Starts a replica in `slot` without waiting for it to lead.
    pub(crate) fn spawn_replica(&mut self, slot: usize) -> anyhow::Result<Ccm> {
        self.started += 1;
        let dir = self.dir.path();
        let t = self.timing;
        let log = dir.join(format!("replica-{slot}-{}.log", self.started));
        Launch::new(&self.binaries.ccm, log)
            .env("HOSTNAME", replica_user(slot))
            .env(
                "RUST_LOG",
                std::env::var("CHAOS_CCM_LOG").unwrap_or_else(|_| "info".to_owned()),
            )
            .args([
                format!(
                    "--kubeconfig={}",
                    dir.join(format!("kubeconfig-{slot}")).display()
                ),
                format!("--cloud-config={}", dir.join("cloud-client.toml").display()),
                format!("--cluster-name={CLUSTER}"),
                "--allocate-node-cidrs=true".to_owned(),
                "--configure-cloud-routes=true".to_owned(),
                format!("--cluster-cidr={CLUSTER_CIDR}"),
                "--route-reconciliation-period=2s".to_owned(),
                "--node-monitor-period=1s".to_owned(),
                "--leader-elect=true".to_owned(),
                format!("--leader-elect-lease-duration={}ms", t.lease.as_millis()),
                format!("--leader-elect-renew-deadline={}ms", t.renew.as_millis()),
                format!("--leader-elect-retry-period={}ms", t.retry.as_millis()),
            ])
            .spawn()
    }

    /// Copies every log so far (replicas', the fake cloud's) to
    /// `target/chaos/logs/<why>-<n>/`, to read after the run; where they went.
    pub(crate) async fn keep_logs(&self, why: &str) -> anyhow::Result<PathBuf> {
        let root = PathBuf::from("target/chaos/logs");
        std::fs::create_dir_all(&root)?;
        let n = std::fs::read_dir(&root)?.count();
        let dest = root.join(format!("{why}-{n}"));
        std::fs::create_dir_all(&dest)?;
        for entry in std::fs::read_dir(self.dir.path())? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "log")
                && let Some(name) = path.file_name()
            {
                std::fs::copy(&path, dest.join(name))?;
            }
        }
        std::fs::write(dest.join("calls.json"), self.cloud.raw("/calls").await?)?;
        let services: kube::Api<k8s_openapi::api::core::v1::Service> =
            kube::Api::all(self.client.clone());
        let services = services.list(&kube::api::ListParams::default()).await?;
        std::fs::write(
            dest.join("services.json"),
            serde_json::to_string_pretty(&services.items)?,
        )?;
        std::fs::write(dest.join("state.json"), self.cloud.raw("/state").await?)?;
        println!("         logs kept in {}", dest.display());
        Ok(dest)
    }

    /// How many replicas were started so far.
    pub(crate) fn replicas_started(&self) -> usize {
        self.started
    }
}
