//! Tier-4 harness: the real `aws-cloud-controller-manager` binary, started
//! as a process against the in-memory test API server and moto, with a cloud
//! config whose `[ServiceOverride]` sections point EC2, ELBv2 and STS at
//! moto and dummy AWS keys in the process's environment.
//!
//! [`E2e::start`] seeds moto ([`provider_aws::test_util::seed`]), writes
//! the cloud config and starts the CCM; the test then plays kubelet and user
//! through the API server and checks both sides. Every wait is bounded
//! ([`eventually`]); the CCM is killed when the test ends, and a failing
//! test prints the end of its log.

#![allow(
    dead_code,
    unreachable_pub,
    reason = "each test binary uses a different part of the harness"
)]

pub mod aws;
pub mod ccm;
pub mod objects;

use std::future::Future;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use provider_aws::test_util::seed::{self, Estate};
use provider_aws::test_util::{CLUSTER, Moto, cloud_config, ec2, elbv2, moto};
use test_apiserver::TestApiServer;

use ccm::Ccm;

/// `--cluster-cidr`: the pod network the route controller owns.
pub const CLUSTER_CIDR: &str = "10.244.0.0/16";

/// The test API server, moto with a seeded estate, and the CCM running
/// against both.
pub struct E2e {
    /// Declared first so it is dropped first: the process is killed before
    /// the next test resets moto.
    pub ccm: Ccm,
    pub api: TestApiServer,
    pub client: kube::Client,
    pub estate: Estate,
    pub ec2: aws_sdk_ec2::Client,
    pub elbv2: aws_sdk_elasticloadbalancingv2::Client,
    pub moto: Moto,
    pub dir: tempfile::TempDir,
}

impl E2e {
    /// Seeds moto with `instances` instances and starts the CCM (named
    /// `name` in its log file) with the flags a test cluster needs, plus
    /// `extra` flags.
    pub async fn start(name: &str, instances: usize, extra: &[&str]) -> anyhow::Result<Self> {
        let moto = moto().await;
        let ec2 = ec2(&moto);
        let elbv2 = elbv2(&moto);
        let estate = seed::estate(&ec2, instances)
            .await
            .context("seeding moto")?;
        let api = TestApiServer::start().await?;
        let dir = tempfile::tempdir()?;
        let config = dir.path().join("cloud.conf");
        std::fs::write(
            &config,
            cloud_config(&moto, &format!("VPC = {}", estate.vpc)),
        )?;
        let mut args = flags(api.kubeconfig_path(), &config);
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        let ccm = Ccm::start(name, args).await?;
        Ok(Self {
            ccm,
            client: api.client(),
            api,
            estate,
            ec2,
            elbv2,
            moto,
            dir,
        })
    }
}

/// The flags of a test cluster: every controller, pod CIDRs allocated in
/// [`CLUSTER_CIDR`], a one-second node monitor, and a short lease.
pub fn flags(kubeconfig: &Path, cloud_config: &Path) -> Vec<String> {
    vec![
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--cloud-config={}", cloud_config.display()),
        "--cloud-provider=aws".into(),
        format!("--cluster-name={CLUSTER}"),
        "--allocate-node-cidrs".into(),
        format!("--cluster-cidr={CLUSTER_CIDR}"),
        "--node-monitor-period=1s".into(),
        "--route-reconciliation-period=2s".into(),
        "--leader-elect-lease-duration=6s".into(),
        "--leader-elect-renew-deadline=4s".into(),
        "--leader-elect-retry-period=1s".into(),
    ]
}

/// Polls `check` every 200 ms until it answers `Some`, failing after
/// `timeout` with `what` and the last thing `check` said was missing.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Option<T>>>,
{
    let start = Instant::now();
    loop {
        if let Some(value) = check().await? {
            return Ok(value);
        }
        anyhow::ensure!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
