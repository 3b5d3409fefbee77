//! Command-line flags, drop-in compatible with upstream's
//! cloud-controller-manager: same names, same defaults, same syntax
//! (`--flag=false` for booleans, Go durations such as `5m`).

pub(crate) mod debugging;
mod duration;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use ccm_controllers::ControllerId;
use clap::Parser;
use ipnet::IpNet;

/// The raw flags, as clap parses them.
#[derive(Debug, Clone, Parser)]
#[command(
    about = "Runs the cloud-specific control loops of a Kubernetes cluster: node initialization, node lifecycle, load balancers and routes.",
    disable_version_flag = true
)]
pub(crate) struct Flags {
    /// Path to a kubeconfig file with authorization and API server location.
    #[arg(long, value_name = "PATH")]
    kubeconfig: Option<PathBuf>,

    /// The address of the Kubernetes API server (overrides any value in the kubeconfig).
    #[arg(long, value_name = "URL")]
    master: Option<String>,

    /// The provider of cloud services: empty or this binary's provider.
    #[arg(long, value_name = "NAME")]
    cloud_provider: Option<String>,

    /// The path to the cloud provider configuration file; empty for none.
    #[arg(long, value_name = "PATH")]
    cloud_config: Option<PathBuf>,

    /// The instance prefix for the cluster: tags cloud resources as owned by this cluster.
    #[arg(long, value_name = "NAME", default_value = "kubernetes")]
    cluster_name: String,

    /// Controllers to enable: `*` for all, `name` to enable, `-name` to disable.
    /// Names: cloud-node, cloud-node-lifecycle, service, route (or upstream's long names).
    #[arg(long, value_name = "NAMES", value_delimiter = ',', default_value = "*")]
    controllers: Vec<String>,

    /// Configure cloud routes for the pod CIDRs allocated to nodes (needs
    /// --cluster-cidr when the provider has routes).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_value = "true", default_missing_value = "true", value_parser = parse_bool)]
    configure_cloud_routes: bool,

    /// Accepted for compatibility: this CCM runs no node-IPAM controller, so pod
    /// CIDRs come from kube-controller-manager.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = parse_bool)]
    allocate_node_cidrs: bool,

    /// CIDR range for pods in the cluster; routes outside it are never touched.
    #[arg(long, value_name = "CIDR")]
    cluster_cidr: Option<String>,

    /// Services allowed to sync concurrently.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = parse_positive)]
    concurrent_service_syncs: u16,

    /// Concurrent cloud lookups for node initialization (each a batch of nodes).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = parse_positive)]
    concurrent_node_syncs: u16,

    /// How often node addresses and labels are refreshed from the cloud.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = duration::parse)]
    node_status_update_frequency: Duration,

    /// How often not-ready nodes are checked against the cloud.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = duration::parse)]
    node_monitor_period: Duration,

    /// Safety-net period of route reconciliation.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration::parse)]
    route_reconciliation_period: Duration,

    /// Period of the service controller's full resync of load-balancer backends
    /// (0: upstream's 100s).
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = duration::parse)]
    node_sync_period: Duration,

    /// Run leader election, so that only one replica acts.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_value = "true", default_missing_value = "true", value_parser = parse_bool)]
    leader_elect: bool,

    /// How long a leader's lease is valid.
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = duration::parse)]
    leader_elect_lease_duration: Duration,

    /// How long a leader retries renewing before it gives up leading.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration::parse)]
    leader_elect_renew_deadline: Duration,

    /// How long candidates wait between attempts.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = duration::parse)]
    leader_elect_retry_period: Duration,

    /// The kind of lock object; only `leases` is supported.
    #[arg(long, value_name = "KIND", default_value = "leases")]
    leader_elect_resource_lock: String,

    /// The name of the Lease used for leader election.
    #[arg(long, value_name = "NAME", default_value = "cloud-controller-manager")]
    leader_elect_resource_name: String,

    /// The namespace of the Lease used for leader election.
    #[arg(long, value_name = "NAMESPACE", default_value = "kube-system")]
    leader_elect_resource_namespace: String,

    /// Queries per second to the Kubernetes API server, enforced client-side.
    #[arg(long, value_name = "QPS", default_value_t = 20.0, value_parser = parse_qps)]
    kube_api_qps: f64,

    /// Burst of requests to the Kubernetes API server.
    #[arg(long, value_name = "N", default_value_t = 30, value_parser = parse_positive_u32)]
    kube_api_burst: u32,

    /// Address to serve /healthz, /readyz, /livez and /metrics on.
    #[arg(long, value_name = "IP", default_value = "0.0.0.0")]
    bind_address: IpAddr,

    /// Port to serve /healthz, /readyz, /livez and /metrics on; 0 disables serving.
    #[arg(long, value_name = "PORT", default_value_t = 10258)]
    secure_port: u16,

    /// Run even if the cloud cannot tell this cluster's resources apart (deprecated upstream).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = parse_bool)]
    allow_untagged_cloud: bool,

    /// Log verbosity (0: info, 2-4: debug, 5 and up: trace). RUST_LOG overrides it.
    #[arg(short = 'v', long = "v", value_name = "LEVEL", default_value_t = 0)]
    verbosity: u8,

    /// Log format: text or json.
    #[arg(long, alias = "logging-format", value_name = "FORMAT", default_value = "text", value_parser = ["text", "json"])]
    log_format: String,

    /// Print version information and quit.
    #[arg(long)]
    version: bool,

    #[command(flatten, next_help_heading = "Debugging flags")]
    debugging: debugging::Debugging,
}

/// Go's `strconv.ParseBool`.
fn parse_bool(text: &str) -> Result<bool, String> {
    match text {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(format!("`{text}` is not a boolean; expected true or false")),
    }
}

fn parse_positive(text: &str) -> Result<u16, String> {
    match text.parse::<u16>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("`{text}` is not a whole number from 1 to 65535")),
    }
}

fn parse_positive_u32(text: &str) -> Result<u32, String> {
    match text.parse::<u32>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("`{text}` is not a positive whole number")),
    }
}

fn parse_qps(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(q) if q.is_finite() && q > 0.0 => Ok(q),
        _ => Err(format!(
            "`{text}` is not a positive number of queries per second"
        )),
    }
}

/// Leader-election timing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LeaderElection {
    pub(crate) lease_duration: Duration,
    pub(crate) renew_deadline: Duration,
    pub(crate) retry_period: Duration,
    pub(crate) lease_name: String,
    pub(crate) lease_namespace: String,
}

/// Validated settings of one run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Settings {
    pub(crate) kubeconfig: Option<PathBuf>,
    pub(crate) master: Option<String>,
    pub(crate) cloud_config: Option<PathBuf>,
    pub(crate) cluster_name: String,
    pub(crate) controllers: BTreeSet<ControllerId>,
    pub(crate) configure_cloud_routes: bool,
    pub(crate) allocate_node_cidrs: bool,
    pub(crate) cluster_cidrs: Vec<IpNet>,
    pub(crate) concurrent_service_syncs: u16,
    pub(crate) concurrent_node_syncs: u16,
    pub(crate) node_status_update_frequency: Duration,
    pub(crate) node_monitor_period: Duration,
    pub(crate) route_reconciliation_period: Duration,
    pub(crate) node_sync_period: Duration,
    /// `None` when `--leader-elect=false`.
    pub(crate) leader_election: Option<LeaderElection>,
    pub(crate) kube_api_qps: f64,
    pub(crate) kube_api_burst: u32,
    /// `None` when `--secure-port=0`.
    pub(crate) serve: Option<std::net::SocketAddr>,
    pub(crate) allow_untagged_cloud: bool,
    pub(crate) verbosity: u8,
    pub(crate) json_logs: bool,
    pub(crate) debugging: debugging::Debugging,
}

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Command {
    Run(Box<Settings>),
    Help(String),
    Version,
}

/// Parses and validates `args` (the program name first) for a binary whose
/// provider is `provider`.
///
/// # Errors
/// One line naming the flag and what is wrong with it.
pub(crate) fn parse(
    provider: &str,
    args: impl IntoIterator<Item = String>,
) -> Result<Command, String> {
    let flags = match Flags::try_parse_from(args) {
        Ok(flags) => flags,
        Err(err) => {
            return match err.kind() {
                clap::error::ErrorKind::DisplayHelp => Ok(Command::Help(err.render().to_string())),
                _ => Err(one_line(&err)),
            };
        }
    };
    if flags.version {
        return Ok(Command::Version);
    }
    validate(provider, flags).map(|settings| Command::Run(Box::new(settings)))
}

/// clap's error as one line: its first line, without the `error: ` prefix.
fn one_line(err: &clap::Error) -> String {
    let rendered = err.render().to_string();
    let first = rendered.lines().next().unwrap_or_default();
    first
        .strip_prefix("error: ")
        .unwrap_or(first)
        .replace('\'', "`")
}

fn validate(provider: &str, flags: Flags) -> Result<Settings, String> {
    if let Some(name) = flags
        .cloud_provider
        .as_deref()
        .filter(|n| !n.is_empty() && *n != provider)
    {
        return Err(format!(
            "--cloud-provider=`{name}`: this binary runs the `{provider}` provider; leave the flag empty or set it to `{provider}`"
        ));
    }
    if flags.leader_elect_resource_lock != "leases" {
        return Err(format!(
            "--leader-elect-resource-lock=`{}`: only `leases` is supported",
            flags.leader_elect_resource_lock
        ));
    }
    if let Some(master) = flags.master.as_deref().filter(|m| !m.is_empty())
        && !master
            .parse::<http::Uri>()
            .is_ok_and(|uri| uri.scheme().is_some() && uri.host().is_some())
    {
        return Err(format!(
            "--master: `{master}` is not a URL such as https://10.0.0.1:6443"
        ));
    }
    for (flag, value) in [
        ("--cluster-name", &flags.cluster_name),
        (
            "--leader-elect-resource-name",
            &flags.leader_elect_resource_name,
        ),
        (
            "--leader-elect-resource-namespace",
            &flags.leader_elect_resource_namespace,
        ),
    ] {
        if value.is_empty() {
            return Err(format!("{flag} must not be empty"));
        }
    }
    for (flag, value) in [
        (
            "--leader-elect-resource-name",
            &flags.leader_elect_resource_name,
        ),
        (
            "--leader-elect-resource-namespace",
            &flags.leader_elect_resource_namespace,
        ),
    ] {
        if !is_dns_label_like(value) {
            return Err(format!(
                "{flag}: `{value}` is not a valid Kubernetes name (lowercase letters, digits, `-` and `.`)"
            ));
        }
    }
    let controllers = parse_controllers(&flags.controllers)?;
    let cluster_cidrs = parse_cidrs(flags.cluster_cidr.as_deref().unwrap_or_default())?;
    if !cluster_cidrs.is_empty() {
        ccm_controllers::check_cluster_cidrs(&cluster_cidrs)?;
    }
    let leader_election = flags.leader_elect.then(|| LeaderElection {
        lease_duration: flags.leader_elect_lease_duration,
        renew_deadline: flags.leader_elect_renew_deadline,
        retry_period: flags.leader_elect_retry_period,
        lease_name: flags.leader_elect_resource_name.clone(),
        lease_namespace: flags.leader_elect_resource_namespace.clone(),
    });
    if let Some(le) = &leader_election {
        if le.renew_deadline >= le.lease_duration {
            return Err(
                "--leader-elect-renew-deadline must be shorter than --leader-elect-lease-duration"
                    .into(),
            );
        }
        if le.retry_period.is_zero() || le.retry_period >= le.renew_deadline {
            return Err("--leader-elect-retry-period must be above zero and shorter than --leader-elect-renew-deadline".into());
        }
    }
    for (name, period) in [
        (
            "--node-status-update-frequency",
            flags.node_status_update_frequency,
        ),
        ("--node-monitor-period", flags.node_monitor_period),
        (
            "--route-reconciliation-period",
            flags.route_reconciliation_period,
        ),
    ] {
        if period.is_zero() {
            return Err(format!("{name} must be above zero"));
        }
    }
    Ok(Settings {
        kubeconfig: flags.kubeconfig.filter(|p| !p.as_os_str().is_empty()),
        master: flags.master.filter(|m| !m.is_empty()),
        cloud_config: flags.cloud_config.filter(|p| !p.as_os_str().is_empty()),
        cluster_name: flags.cluster_name,
        controllers,
        configure_cloud_routes: flags.configure_cloud_routes,
        allocate_node_cidrs: flags.allocate_node_cidrs,
        cluster_cidrs,
        concurrent_service_syncs: flags.concurrent_service_syncs,
        concurrent_node_syncs: flags.concurrent_node_syncs,
        node_status_update_frequency: flags.node_status_update_frequency,
        node_monitor_period: flags.node_monitor_period,
        route_reconciliation_period: flags.route_reconciliation_period,
        node_sync_period: flags.node_sync_period,
        leader_election,
        kube_api_qps: flags.kube_api_qps,
        kube_api_burst: flags.kube_api_burst,
        serve: (flags.secure_port != 0)
            .then(|| std::net::SocketAddr::new(flags.bind_address, flags.secure_port)),
        allow_untagged_cloud: flags.allow_untagged_cloud,
        verbosity: flags.verbosity,
        json_logs: flags.log_format == "json",
        debugging: flags.debugging,
    })
}

/// Upstream's `--controllers` rules: `*` enables every default controller,
/// `name` enables one, `-name` disables one (and wins).
fn parse_controllers(items: &[String]) -> Result<BTreeSet<ControllerId>, String> {
    let mut enabled = BTreeSet::new();
    let mut disabled = BTreeSet::new();
    let mut all = false;
    for item in items.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        if item == "*" {
            all = true;
            continue;
        }
        let (negated, name) = match item.strip_prefix('-') {
            Some(name) => (true, name),
            None => (false, item),
        };
        let id = ControllerId::parse(name).ok_or_else(|| {
            let known: Vec<_> = ControllerId::ALL.iter().map(|c| c.alias()).collect();
            format!(
                "--controllers: unknown controller `{name}`; known: {}",
                known.join(", ")
            )
        })?;
        if negated {
            disabled.insert(id)
        } else {
            enabled.insert(id)
        };
    }
    if all {
        enabled.extend(ControllerId::ALL);
    }
    Ok(enabled.difference(&disabled).copied().collect())
}

/// An RFC 1123 subdomain, as Kubernetes object names must be.
fn is_dns_label_like(name: &str) -> bool {
    name.len() <= 253
        && name.split('.').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        })
}

fn parse_cidrs(text: &str) -> Result<Vec<IpNet>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|cidr| {
            cidr.parse::<IpNet>().map(|net| net.trunc()).map_err(|_| {
                format!("--cluster-cidr: `{cidr}` is not a CIDR such as 10.244.0.0/16")
            })
        })
        .collect()
}
