//! One binary's run: a fresh control plane and moto, the estate seeded,
//! the nodes registered, the CCM started, its milestones awaited, a quiet
//! window, and everything counted.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, bail};
use aws_sdk_ec2::types::Filter;
use ccm_provider_aws::test_util::proxy::{ANSWERED_HERE, Proxy};
use ccm_provider_aws::test_util::seed::{self, Estate};
use ccm_provider_aws::test_util::{
    ACCESS_KEY_ID, CLUSTER, REGION, SECRET_ACCESS_KEY, ec2, elbv2, moto,
};
use ccm_test_support::{AUDITED_TOKEN, ControlPlane};
use futures::future::try_join_all;
use k8s_openapi::api::core::v1::{Node, Service};
use kube::Api;
use tokio::process::Command;

use crate::cluster::{self, CLUSTER_CIDR, POLL};
use crate::measure::{self, Counted, Window};
use crate::outcome;
use crate::report::{Figures, Times};

/// What every run shares.
#[derive(Debug, Clone)]
pub(crate) struct Setup {
    pub(crate) nodes: usize,
    pub(crate) quiet: Duration,
    pub(crate) out: PathBuf,
}

/// The longest a run may take to reach its milestones.
const MILESTONES_WITHIN: Duration = Duration::from_secs(900);
/// Nodes registered at once.
const REGISTER_IN_PARALLEL: usize = 8;
/// How often moto's route table is read for the routes milestone (moto
/// directly: not counted).
const ROUTE_POLL: Duration = Duration::from_millis(500);

/// Runs `binary` (called `name` in the figures) on a fresh setup.
pub(crate) async fn run(setup: &Setup, name: &str, binary: &Path) -> anyhow::Result<Figures> {
    let dir = setup.out.join(name);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let version = version(binary).await?;
    let plane = ControlPlane::start_audited().await?;
    let moto = moto().await;
    let ec2 = ec2(&moto);
    let estate = seed::estate(&ec2, setup.nodes)
        .await
        .context("seeding moto")?;
    let proxy = Proxy::start(&moto.endpoint).await?;
    let config = dir.join("cloud.conf");
    std::fs::write(&config, cloud_config(&estate, &proxy.endpoint))?;
    let kubeconfig = plane.kubeconfig_with_token("ccm-under-test", AUDITED_TOKEN)?;

    let client = plane.client();
    let nodes: Api<Node> = Api::all(client.clone());
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    register_all(&nodes, &estate).await?;

    let log = dir.join("ccm.log");
    let log_file =
        std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    let started_wall = SystemTime::now();
    let started = Instant::now();
    let mut child = Command::new(binary)
        .args(flags(&config, &kubeconfig))
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", &dir)
        .env("AWS_ACCESS_KEY_ID", ACCESS_KEY_ID)
        .env("AWS_SECRET_ACCESS_KEY", SECRET_ACCESS_KEY)
        .env("AWS_REGION", REGION)
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .stdin(Stdio::null())
        .stdout(log_file.try_clone()?)
        .stderr(log_file)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    let pid = child.id().context("the CCM exited at once")?;

    let cidrs: Vec<String> = (0..setup.nodes).map(cluster::pod_cidr).collect();
    let mut times = Times::default();
    let mut service_at = None;
    let mut last_route_poll: Option<Instant> = None;
    let deadline = started + MILESTONES_WITHIN;
    while times.nodes_initialized.is_none()
        || times.load_balancer.is_none()
        || times.routes.is_none()
    {
        if let Some(status) = child.try_wait()? {
            bail!(
                "{name} exited ({status}); its log ends:\n{}",
                ccm_test_support::tail(&log)
            );
        }
        if Instant::now() > deadline {
            bail!(
                "{name} did not reach every milestone within {MILESTONES_WITHIN:?} ({times:?}); its log ends:\n{}",
                ccm_test_support::tail(&log)
            );
        }
        if times.nodes_initialized.is_none() && cluster::initialized(&nodes).await? == setup.nodes {
            times.nodes_initialized = Some(started.elapsed());
            cluster::create_service(&services).await?;
            service_at = Some(Instant::now());
        }
        if let Some(at) = service_at
            && times.load_balancer.is_none()
            && cluster::has_ingress(&services).await?
        {
            times.load_balancer = Some(at.elapsed());
        }
        if times.routes.is_none() && last_route_poll.is_none_or(|t| t.elapsed() >= ROUTE_POLL) {
            last_route_poll = Some(Instant::now());
            if routed(&ec2, &estate.route_table, &cidrs).await? == cidrs.len() {
                times.routes = Some(started.elapsed());
            }
        }
        tokio::time::sleep(POLL).await;
    }
    let busy_end = started.elapsed();
    tokio::time::sleep(setup.quiet).await;
    let end = started.elapsed();
    let usage = measure::usage(pid)?;
    let outcome = outcome::collect(&outcome::Sources {
        client,
        ec2: &ec2,
        elbv2: &elbv2(&moto),
        estate: &estate,
    })
    .await
    .context("reading what the CCM left behind")?;
    child.start_kill()?;
    let _ = child.wait().await;

    let audit = plane
        .audit_log()
        .context("the control plane has no audit log")?;
    let api = measure::api_requests(&audit, started_wall)?;
    let calls = proxy.calls();
    let cloud: Vec<Counted> = calls
        .iter()
        .map(|c| Counted {
            what: c.action.clone(),
            at: c.at.saturating_duration_since(started),
        })
        .collect();
    let answered_here: Vec<String> = ANSWERED_HERE
        .iter()
        .filter_map(|a| {
            let n = calls.iter().filter(|c| c.action == *a).count();
            (n > 0).then(|| format!("{a} ({n})"))
        })
        .collect();
    let failed = proxy
        .failures()
        .into_iter()
        .map(|(failure, n)| format!("{failure} ({n})"))
        .collect();
    let nodes_at = times.nodes_initialized.unwrap_or_default();
    Ok(Figures {
        name: name.to_owned(),
        version,
        nodes: setup.nodes,
        quiet_seconds: setup.quiet.as_secs(),
        times,
        windows: vec![
            (
                "nodes".to_owned(),
                Window::of(&cloud, &api, Duration::ZERO, nodes_at),
            ),
            (
                "busy".to_owned(),
                Window::of(&cloud, &api, nodes_at, busy_end),
            ),
            ("quiet".to_owned(), Window::of(&cloud, &api, busy_end, end)),
            (
                "whole".to_owned(),
                Window::of(&cloud, &api, Duration::ZERO, end),
            ),
        ],
        peak_rss_mib: usage.peak_rss_mib,
        cpu_seconds: usage.cpu_seconds,
        answered_here,
        failed,
        outcome,
    })
}

/// The binary's `--version`, first line.
async fn version(binary: &Path) -> anyhow::Result<String> {
    let out = Command::new(binary)
        .arg("--version")
        .env_clear()
        .output()
        .await
        .with_context(|| format!("running {} --version", binary.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(text.lines().next().unwrap_or("?").trim().to_owned())
}

/// Registers a node per seeded instance, named as its private DNS name.
async fn register_all(nodes: &Api<Node>, estate: &Estate) -> anyhow::Result<()> {
    let named: Vec<(usize, &str)> = estate
        .instances
        .iter()
        .map(|i| i.private_dns_name.as_str())
        .enumerate()
        .collect();
    for chunk in named.chunks(REGISTER_IN_PARALLEL) {
        try_join_all(
            chunk
                .iter()
                .map(|(i, name)| cluster::register(nodes, name, cluster::pod_cidr(*i))),
        )
        .await?;
    }
    Ok(())
}

/// How many of `cidrs` the route table routes to an instance.
async fn routed(ec2: &aws_sdk_ec2::Client, table: &str, cidrs: &[String]) -> anyhow::Result<usize> {
    let out = ec2
        .describe_route_tables()
        .filters(
            Filter::builder()
                .name("route-table-id")
                .values(table)
                .build(),
        )
        .send()
        .await
        .context("reading the route table from moto")?;
    let routes: Vec<&str> = out
        .route_tables()
        .iter()
        .flat_map(|t| t.routes())
        .filter(|r| r.instance_id().is_some())
        .filter_map(|r| r.destination_cidr_block())
        .collect();
    Ok(cidrs
        .iter()
        .filter(|c| routes.contains(&c.as_str()))
        .count())
}

/// Upstream's cloud config for both binaries: the region and VPC given,
/// a subnet so that neither needs a metadata service, the cluster's ID,
/// and each service's endpoint overridden by its SDK service ID.
fn cloud_config(estate: &Estate, endpoint: &str) -> String {
    let mut text = format!(
        "[Global]\nRegion = {REGION}\nVPC = {}\nSubnetID = {}\nKubernetesClusterID = {CLUSTER}\n",
        estate.vpc, estate.public_subnets[0]
    );
    for (n, service) in ["EC2", "Elastic Load Balancing", "Elastic Load Balancing v2"]
        .iter()
        .enumerate()
    {
        text.push_str(&format!(
            "\n[ServiceOverride \"{n}\"]\nService = {service}\nRegion = {REGION}\nURL = {endpoint}\nSigningRegion = {REGION}\n"
        ));
    }
    text
}

/// The flags both binaries run with: upstream's names, routes on.
fn flags(config: &Path, kubeconfig: &Path) -> Vec<String> {
    vec![
        "--cloud-provider=aws".to_owned(),
        format!("--cloud-config={}", config.display()),
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--cluster-name={CLUSTER}"),
        "--allocate-node-cidrs=true".to_owned(),
        "--configure-cloud-routes=true".to_owned(),
        format!("--cluster-cidr={CLUSTER_CIDR}"),
        "--secure-port=0".to_owned(),
        "--leader-elect=true".to_owned(),
        "--v=2".to_owned(),
    ]
}
