//! Tier-4 harness: the real `aws-cloud-controller-manager` binary, started
//! as a process against the API server the environment asks for (the
//! in-memory test API server, or a real kube-apiserver started for the test
//! with the CCM under the chart's RBAC: [`ccm_test_support::ApiServer`]) and
//! moto, with a cloud
//! config whose `[ServiceOverride]` sections point EC2, ELBv2 and STS at
//! moto and dummy AWS keys in the process's environment.
//!
//! [`E2e::start`] seeds moto ([`ccm_provider_aws::test_util::seed`]), writes
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

use std::path::Path;

use anyhow::Context;
use ccm_provider_aws::test_util::seed::{self, Estate};
use ccm_provider_aws::test_util::{CLUSTER, Moto, cloud_config, ec2, elbv2, moto};
use ccm_test_support::ApiServer;

use ccm::Ccm;

/// `--cluster-cidr`: the pod network the route controller owns.
pub const CLUSTER_CIDR: &str = "10.244.0.0/16";

/// The API server, moto with a seeded estate, and the CCM running against
/// both.
pub struct E2e {
    /// Declared first so it is dropped first: the process is killed before
    /// the next test resets moto.
    pub ccm: Ccm,
    pub api: ApiServer,
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
        let api = ApiServer::start().await?;
        let dir = tempfile::tempdir()?;
        let config = dir.path().join("cloud.conf");
        std::fs::write(
            &config,
            cloud_config(&moto, &format!("VPC = {}", estate.vpc)),
        )?;
        let mut args = flags(&config);
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        let credentials = api.ccm_credentials("aws").await?;
        let ccm = ccm::launch(name, &args)
            .credentials(&credentials)
            .start()
            .await?;
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

#[allow(dead_code, reason = "only some suites crash the CCM")]
impl E2e {
    /// Kills the CCM: SIGKILL, a crash, its Lease left held.
    ///
    /// # Errors
    /// When the process does not die.
    pub async fn crash(&mut self) -> anyhow::Result<()> {
        self.ccm.signal("KILL").await?;
        self.ccm.wait(std::time::Duration::from_secs(10)).await?;
        Ok(())
    }

    /// Starts a new CCM after [`E2e::crash`], named `name` in its log file,
    /// with the test cluster's flags; it leads once the dead one's Lease
    /// expires.
    ///
    /// # Errors
    /// When it does not start.
    pub async fn start_again(&mut self, name: &str) -> anyhow::Result<()> {
        let config = self.dir.path().join("cloud.conf");
        let credentials = self.api.ccm_credentials("aws").await?;
        self.ccm = ccm::launch(name, &flags(&config))
            .credentials(&credentials)
            .start()
            .await?;
        Ok(())
    }
}

/// The flags of a test cluster (but `--kubeconfig`): every controller, pod
/// CIDRs allocated in [`CLUSTER_CIDR`], a one-second node monitor, and a
/// short lease.
pub fn flags(cloud_config: &Path) -> Vec<String> {
    vec![
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
