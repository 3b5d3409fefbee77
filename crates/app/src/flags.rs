//! Command-line flags, drop-in compatible with upstream's
//! cloud-controller-manager: same names, same defaults, same syntax
//! (`--flag=false` for booleans, Go durations such as `5m`).

#[cfg(test)]
mod concurrency_tests;
mod curves;
pub(crate) mod debugging;
pub(crate) mod duration;
mod feature_gates;
mod generic;
mod global;
mod migration;
pub(crate) mod provider;
#[cfg(test)]
mod provider_tests;
mod route_period;
mod serving;
mod shadow;
#[cfg(test)]
mod tests;
mod upstream;
#[cfg(test)]
mod upstream_tests;
mod webhook;
#[cfg(test)]
mod webhook_tests;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use ccm_controllers::ControllerId;
use clap::Parser;
use ipnet::IpNet;

pub(crate) use feature_gates::FeatureGates;
pub(crate) use route_period::WATCH_BASED_ROUTES;

/// The raw flags, as clap parses them, in upstream's sections and order.
#[derive(Debug, Clone, Parser)]
#[command(
    about = "Runs the cloud-specific control loops of a Kubernetes cluster: node initialization, node lifecycle, load balancers and routes.",
    disable_version_flag = true,
    disable_help_flag = true,
    args_override_self = true
)]
pub(crate) struct Flags {
    #[command(flatten, next_help_heading = "Debugging flags")]
    debugging: debugging::Debugging,

    #[command(flatten, next_help_heading = "Leader-migration flags")]
    leader_migration: migration::LeaderMigrationFlags,

    #[command(flatten, next_help_heading = "Generic flags")]
    generic: generic::Generic,

    #[command(flatten, next_help_heading = "Cloud-node-controller flags")]
    cloud_node_controller: generic::CloudNodeController,

    #[command(flatten, next_help_heading = "Cloud-node-lifecycle-controller flags")]
    cloud_node_lifecycle_controller: generic::CloudNodeLifecycleController,

    #[command(flatten, next_help_heading = "Service-lb-controller flags")]
    service_lb_controller: generic::ServiceLbController,

    #[command(flatten, next_help_heading = "Webhook flags")]
    webhook: webhook::Webhook,

    #[command(flatten, next_help_heading = "Webhook serving flags")]
    webhook_serving: webhook::WebhookServing,

    #[command(flatten, next_help_heading = "Secure serving flags")]
    secure_serving: serving::SecureServing,

    #[command(flatten, next_help_heading = "Authentication flags")]
    authentication: serving::Authentication,

    #[command(flatten, next_help_heading = "Authorization flags")]
    authorization: serving::Authorization,

    #[command(flatten, next_help_heading = "Misc flags")]
    misc: generic::Misc,

    #[command(flatten, next_help_heading = "Shadow-mode flags")]
    shadow: shadow::Shadow,

    #[command(flatten, next_help_heading = "Global flags")]
    global: global::Global,
}

/// A path flag: pflag takes `--flag=` as empty, which upstream reads as unset.
pub(crate) fn parse_path(text: &str) -> Result<PathBuf, String> {
    Ok(PathBuf::from(text))
}

/// A pflag `int32Slice` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Int32List(pub(crate) Vec<i32>);

/// pflag's `int32Slice`: comma-separated, empty for none.
pub(crate) fn parse_int32_list(text: &str) -> Result<Int32List, String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|n| {
            n.parse::<i32>()
                .map_err(|_| format!("`{n}` is not a whole number"))
        })
        .collect::<Result<_, _>>()
        .map(Int32List)
}

/// Go's `strconv.ParseBool`.
pub(crate) fn parse_bool(text: &str) -> Result<bool, String> {
    match text {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(format!("`{text}` is not a boolean; expected true or false")),
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
    pub(crate) controller_start_interval: Duration,
    pub(crate) configure_cloud_routes: bool,
    pub(crate) allocate_node_cidrs: bool,
    pub(crate) cluster_cidrs: Vec<IpNet>,
    pub(crate) concurrent_service_syncs: u16,
    pub(crate) load_balancer_target_health: bool,
    pub(crate) concurrent_node_syncs: u16,
    /// As upstream resolves it: `--concurrent-node-syncs` unless positive.
    pub(crate) concurrent_node_status_updates: i32,
    pub(crate) concurrent_node_lifecycle_syncs: i32,
    pub(crate) node_status_update_frequency: Duration,
    pub(crate) node_monitor_period: Duration,
    pub(crate) route_reconciliation_period: Duration,
    /// The route controller's period without node events: the one above,
    /// or a resync period with upstream's watch-based routes gate
    /// (`route_period.rs`).
    pub(crate) route_period: Duration,
    pub(crate) node_sync_period: Duration,
    /// `None` when `--leader-elect=false`.
    pub(crate) leader_election: Option<LeaderElection>,
    /// `None`: no client-side limit (a negative `--kube-api-qps`).
    pub(crate) kube_api_qps: Option<f64>,
    pub(crate) kube_api_burst: u32,
    pub(crate) use_service_account_credentials: bool,
    /// HTTPS with delegated authentication and authorization; `None` when
    /// `--secure-port=0`.
    pub(crate) serving: Option<crate::serving::Config>,
    /// The admission webhook; `None` unless `--webhooks` enables it and
    /// `--webhook-secure-port` is not 0.
    pub(crate) webhook: Option<crate::admission::Options>,
    pub(crate) allow_untagged_cloud: bool,
    /// `--dry-run`: plan, change nothing, take no Lease.
    pub(crate) dry_run: bool,
    pub(crate) logging: crate::logging::Config,
    pub(crate) feature_gates: FeatureGates,
    pub(crate) leader_migration: crate::migration::LeaderMigration,
    /// `--profiling`, `--contention-profiling`.
    pub(crate) debugging: debugging::Debugging,
    /// The provider's own controllers `--controllers` enables, and their flags.
    pub(crate) provider_controllers: provider::ProviderSettings,
    /// Lines logged once at startup at INFO: flags that mean nothing here
    /// (and why), upstream's deprecation notices.
    pub(crate) notes: Vec<String>,
}

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Command {
    Run(Box<Settings>),
    Help(String),
    /// `--version`; `raw` for `--version=raw`.
    Version {
        raw: bool,
    },
}

/// Parses and validates `args` (the program name first) for a binary whose
/// provider is `provider`.
///
/// # Errors
/// One line naming the flag and what is wrong with it.
#[cfg(test)]
pub(crate) fn parse(
    provider: &str,
    args: impl IntoIterator<Item = String>,
) -> Result<Command, String> {
    provider::parse_for(provider, &[], args)
}

/// `--help`: the flags by upstream's sections.
#[cfg(test)]
pub(crate) fn help() -> String {
    provider::help_for("fake", &[])
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
    let Flags {
        debugging,
        leader_migration,
        generic,
        cloud_node_controller,
        cloud_node_lifecycle_controller,
        service_lb_controller,
        webhook,
        webhook_serving,
        secure_serving,
        authentication,
        authorization,
        misc,
        shadow,
        global,
    } = flags;
    let mut notes = Vec::new();
    if let Some(name) = generic
        .cloud_provider
        .as_deref()
        .filter(|n| !n.is_empty() && *n != provider)
    {
        return Err(format!(
            "--cloud-provider=`{name}`: this binary runs the `{provider}` provider; leave the flag empty or set it to `{provider}`"
        ));
    }
    if generic.leader_elect_resource_lock != "leases" {
        return Err(format!(
            "--leader-elect-resource-lock=`{}`: only `leases` is supported",
            generic.leader_elect_resource_lock
        ));
    }
    if let Some(master) = misc.master.as_deref().filter(|m| !m.is_empty())
        && !master
            .parse::<http::Uri>()
            .is_ok_and(|uri| uri.scheme().is_some() && uri.host().is_some())
    {
        return Err(format!(
            "--master: `{master}` is not a URL such as https://10.0.0.1:6443"
        ));
    }
    for (flag, value) in [
        ("--cluster-name", &generic.cluster_name),
        (
            "--leader-elect-resource-name",
            &generic.leader_elect_resource_name,
        ),
        (
            "--leader-elect-resource-namespace",
            &generic.leader_elect_resource_namespace,
        ),
    ] {
        if value.is_empty() {
            return Err(format!("{flag} must not be empty"));
        }
    }
    for (flag, value) in [
        (
            "--leader-elect-resource-name",
            &generic.leader_elect_resource_name,
        ),
        (
            "--leader-elect-resource-namespace",
            &generic.leader_elect_resource_namespace,
        ),
    ] {
        if !is_dns_label_like(value) {
            return Err(format!(
                "{flag}: `{value}` is not a valid Kubernetes name (lowercase letters, digits, `-` and `.`)"
            ));
        }
    }
    let controllers = parse_controllers(&generic.controllers)?;
    let cluster_cidrs = parse_cidrs(generic.cluster_cidr.as_deref().unwrap_or_default())?;
    if !cluster_cidrs.is_empty() {
        ccm_controllers::check_cluster_cidrs(&cluster_cidrs)?;
    }
    let leader_election = generic.leader_elect.then(|| LeaderElection {
        lease_duration: generic.leader_elect_lease_duration,
        renew_deadline: generic.leader_elect_renew_deadline,
        retry_period: generic.leader_elect_retry_period,
        lease_name: generic.leader_elect_resource_name.clone(),
        lease_namespace: generic.leader_elect_resource_namespace.clone(),
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
            misc.node_status_update_frequency,
        ),
        (
            "--node-monitor-period",
            cloud_node_lifecycle_controller.node_monitor_period,
        ),
        (
            "--route-reconciliation-period",
            generic.route_reconciliation_period,
        ),
    ] {
        if period.is_zero() {
            return Err(format!("{name} must be above zero"));
        }
    }
    for (flag, ids) in [
        (
            "tls-curve-preferences",
            &secure_serving.tls_curve_preferences,
        ),
        (
            "webhook-tls-curve-preferences",
            &webhook_serving.webhook_tls_curve_preferences,
        ),
    ] {
        notes.extend(curves::check(flag, ids.as_ref())?);
    }
    let serving = serving::validate(&secure_serving, authentication, authorization)?;
    let (kube_api_qps, kube_api_burst) =
        generic::api_limits(generic.kube_api_qps, generic.kube_api_burst)?;
    let (feature_gates, gate_notes) =
        feature_gates::parse(generic.feature_gates.as_deref().unwrap_or_default())?;
    notes.extend(gate_notes);
    let (route_period, resync_note) = route_period::route_period(
        feature_gates.enabled(WATCH_BASED_ROUTES),
        generic.route_reconciliation_period,
        generic.min_resync_period,
    );
    notes.extend(resync_note);
    let logging = logging(&global, &feature_gates)?;
    let webhook = webhook_serving.validate(webhook.validate()?, webhook.policy())?;
    for (flag, set) in [
        (
            "allow-untagged-cloud",
            generic.allow_untagged_cloud.is_some(),
        ),
        ("node-sync-period", generic.node_sync_period.is_some()),
    ] {
        if set && let Some(text) = upstream::deprecation(flag) {
            notes.push(format!("Flag --{flag} has been deprecated, {text}"));
        }
    }
    notes.extend(inert_notes(&generic, &global));
    // Upstream's Validate (1.36, 1.37), in its words.
    if let Some(n) = cloud_node_controller
        .concurrent_node_status_updates
        .filter(|n| *n < 0)
    {
        return Err(format!(
            "--concurrent-node-status-updates={n}: concurrent-node-status-updates cannot be a negative number"
        ));
    }
    if let Some(n) = cloud_node_lifecycle_controller
        .concurrent_node_lifecycle_syncs
        .filter(|n| *n < 1)
    {
        return Err(format!(
            "--concurrent-node-lifecycle-syncs={n}: concurrent-node-lifecycle-syncs must be at least 1, but got {n}"
        ));
    }
    if cloud_node_controller
        .concurrent_node_status_updates
        .is_some()
    {
        notes.push("--concurrent-node-status-updates: upstream updates node status with this many workers; here each refresh is one batched pass over all nodes".to_owned());
    }
    if cloud_node_lifecycle_controller
        .concurrent_node_lifecycle_syncs
        .is_some()
    {
        notes.push("--concurrent-node-lifecycle-syncs: upstream checks nodes with this many workers; here one batched pass checks every node".to_owned());
    }
    Ok(Settings {
        kubeconfig: misc.kubeconfig.filter(|p| !p.as_os_str().is_empty()),
        master: misc.master.filter(|m| !m.is_empty()),
        cloud_config: generic.cloud_config.filter(|p| !p.as_os_str().is_empty()),
        cluster_name: generic.cluster_name,
        controllers,
        controller_start_interval: generic.controller_start_interval,
        configure_cloud_routes: generic.configure_cloud_routes,
        allocate_node_cidrs: generic.allocate_node_cidrs,
        cluster_cidrs,
        concurrent_service_syncs: service_lb_controller.concurrent_service_syncs,
        load_balancer_target_health: service_lb_controller.load_balancer_target_health,
        concurrent_node_syncs: cloud_node_controller.concurrent_node_syncs,
        concurrent_node_status_updates: cloud_node_controller
            .concurrent_node_status_updates
            .filter(|n| *n > 0)
            .unwrap_or(i32::from(cloud_node_controller.concurrent_node_syncs)),
        concurrent_node_lifecycle_syncs: cloud_node_lifecycle_controller
            .concurrent_node_lifecycle_syncs
            .unwrap_or(1),
        node_status_update_frequency: misc.node_status_update_frequency,
        node_monitor_period: cloud_node_lifecycle_controller.node_monitor_period,
        route_reconciliation_period: generic.route_reconciliation_period,
        route_period,
        node_sync_period: generic.node_sync_period.unwrap_or_default(),
        leader_election,
        kube_api_qps,
        kube_api_burst,
        use_service_account_credentials: generic.use_service_account_credentials,
        serving,
        webhook,
        allow_untagged_cloud: generic.allow_untagged_cloud.unwrap_or(false),
        dry_run: shadow.dry_run,
        logging,
        feature_gates,
        leader_migration: leader_migration.settings(generic.leader_elect)?,
        debugging,
        provider_controllers: provider::ProviderSettings::default(),
        notes,
    })
}

/// The logging flags, checked against the gates that guard them as
/// component-base's `ValidateAndApply` does.
fn logging(
    global: &global::Global,
    gates: &FeatureGates,
) -> Result<crate::logging::Config, String> {
    let json = global.logging_format == "json";
    if json && !gates.enabled("LoggingBetaOptions") {
        return Err(
            "--logging-format=json: the LoggingBetaOptions feature gate is disabled".into(),
        );
    }
    for (flag, set) in [
        ("--log-json-split-stream", global.log_json_split_stream),
        ("--log-text-split-stream", global.log_text_split_stream),
        (
            "--log-json-info-buffer-size",
            global.log_json_info_buffer_size.is_some_and(|b| b > 0),
        ),
        (
            "--log-text-info-buffer-size",
            global.log_text_info_buffer_size.is_some_and(|b| b > 0),
        ),
    ] {
        if set && !gates.enabled("LoggingAlphaOptions") {
            return Err(format!(
                "{flag}: the LoggingAlphaOptions feature gate is disabled"
            ));
        }
    }
    let vmodule = global::parse_vmodule(global.vmodule.as_deref().unwrap_or_default())?;
    if json && !vmodule.is_empty() {
        return Err("--vmodule works only with --logging-format=text".into());
    }
    Ok(crate::logging::Config {
        verbosity: global.verbosity,
        vmodule,
        json,
        split_stream: if json {
            global.log_json_split_stream
        } else {
            global.log_text_split_stream
        },
    })
}

/// What to say about flags that are accepted but mean nothing here.
fn inert_notes(generic: &generic::Generic, global: &global::Global) -> Vec<String> {
    let mut notes = Vec::new();
    if generic.allocate_node_cidrs {
        notes.push("--allocate-node-cidrs: upstream's node-IPAM controller allocates pod CIDRs; none runs here, so pod CIDRs come from kube-controller-manager".to_owned());
    }
    if generic.cidr_allocator_type != "RangeAllocator" {
        notes.push(format!("--cidr-allocator-type={}: chooses the allocator of upstream's node-IPAM controller, which does not run here", generic.cidr_allocator_type));
    }
    if let Some(plugin) = generic
        .external_cloud_volume_plugin
        .as_deref()
        .filter(|p| !p.is_empty())
    {
        notes.push(format!("--external-cloud-volume-plugin={plugin}: used by kube-controller-manager's volume controllers with an in-tree cloud; this CCM runs no volume controller"));
    }
    if let Some(content_type) = generic.kube_api_content_type.as_deref() {
        notes.push(format!("--kube-api-content-type={content_type}: upstream's clients may speak protobuf; this CCM always speaks JSON"));
    }
    if global.log_flush_frequency.is_some() {
        notes.push("--log-flush-frequency: upstream buffers log lines and flushes them this often; every line is written at once here".to_owned());
    }
    if global.log_json_info_buffer_size.is_some_and(|b| b > 0)
        || global.log_text_info_buffer_size.is_some_and(|b| b > 0)
    {
        notes.push("--log-*-info-buffer-size: upstream may buffer info lines with split streams; every line is written at once here".to_owned());
    }
    if let Some(version) = global.version.as_deref().filter(|v| v.starts_with('v')) {
        notes.push(format!("--version={version}: upstream then reports this as its version; this CCM reports its own"));
    }
    notes
}

/// Upstream's `--controllers` rules: `*` enables every default controller,
/// `name` enables one (also one that is off by default), `-name` disables
/// one (and wins).
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
        enabled.extend(ControllerId::DEFAULT);
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
