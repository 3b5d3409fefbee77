//! `/configz`: the component configuration as upstream serves it —
//! `{"cloudcontrollermanager.config.k8s.io": {...}}`. Since 1.36
//! k8s.io/cloud-provider's `Run` registers the configuration converted to
//! `config/v1alpha1.CloudControllerManagerConfiguration`, with `kind` and
//! `apiVersion` set; this is 1.37's shape, the newest release supported.
//! Its own fields have no JSON tags, so their keys are Go's field names, in
//! declaration order; the component-base and leader-migration types inside
//! `Generic` carry camelCase tags. Durations are `metav1.Duration`s,
//! written as Go's `Duration.String()`.
//!
//! Built once from the validated [`Settings`]; fields this CCM has no flag
//! for carry upstream's defaults and say so.

use std::time::Duration;

use axum::Router;
use axum::http::header;
use axum::routing::get;
use serde::Serialize;

use crate::flags::Settings;
use crate::migration::LeaderMigration as LeaderMigrationSettings;

/// Upstream's `app.ConfigzName`.
pub(crate) const CONFIGZ_NAME: &str = "cloudcontrollermanager.config.k8s.io";
/// The served document's `kind`.
const KIND: &str = "CloudControllerManagerConfiguration";
/// The served document's `apiVersion`: the version it is converted to.
const API_VERSION: &str = "cloudcontrollermanager.config.k8s.io/v1alpha1";

pub(super) fn routes(settings: &Settings, provider: &str) -> Router {
    let body = body(settings, provider);
    Router::new().route(
        "/configz",
        get(move || {
            let body = body.clone();
            async move {
                (
                    [
                        (header::CONTENT_TYPE, "application/json"),
                        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
                    ],
                    body,
                )
            }
        }),
    )
}

/// The `/configz` body: compact JSON, as Go's `json.Marshal` writes it.
pub(crate) fn body(settings: &Settings, provider: &str) -> String {
    let configs = std::collections::BTreeMap::from([(
        CONFIGZ_NAME,
        CloudControllerManagerConfiguration::new(settings, provider),
    )]);
    // Plain structs of strings, numbers and bools cannot fail to serialize.
    serde_json::to_string(&configs).unwrap_or_default()
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
struct CloudControllerManagerConfiguration {
    /// The embedded `metav1.TypeMeta`'s fields, first.
    #[serde(rename = "kind")]
    kind: &'static str,
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    generic: Generic,
    kube_cloud_shared: KubeCloudShared,
    node_controller: NodeController,
    node_lifecycle_controller: NodeLifecycleController,
    service_controller: ServiceController,
    node_status_update_frequency: String,
    webhook: Webhook,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
struct Generic {
    port: i32,
    address: &'static str,
    min_resync_period: String,
    client_connection: ClientConnection,
    controller_start_interval: String,
    leader_election: LeaderElection,
    controllers: Vec<&'static str>,
    debugging: Debugging,
    leader_migration_enabled: bool,
    leader_migration: LeaderMigration,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ClientConnection {
    kubeconfig: String,
    accept_content_types: &'static str,
    content_type: &'static str,
    qps: serde_json::Number,
    burst: u32,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct LeaderElection {
    leader_elect: bool,
    lease_duration: String,
    renew_deadline: String,
    retry_period: String,
    resource_lock: &'static str,
    resource_name: String,
    resource_namespace: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Debugging {
    enable_profiling: bool,
    enable_contention_profiling: bool,
}

/// Its `TypeMeta` is never set on the converted copy, so it is omitted.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct LeaderMigration {
    leader_name: String,
    resource_lock: &'static str,
    controller_leaders: Option<Vec<ControllerLeader>>,
}

#[derive(Debug, Serialize)]
struct ControllerLeader {
    name: String,
    component: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
struct KubeCloudShared {
    cloud_provider: CloudProvider,
    external_cloud_volume_plugin: &'static str,
    use_service_account_credentials: bool,
    allow_untagged_cloud: bool,
    route_reconciliation_period: String,
    cluster_name: String,
    #[serde(rename = "ClusterCIDR")]
    cluster_cidr: String,
    #[serde(rename = "AllocateNodeCIDRs")]
    allocate_node_cidrs: bool,
    #[serde(rename = "CIDRAllocatorType")]
    cidr_allocator_type: &'static str,
    configure_cloud_routes: bool,
    node_sync_period: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
struct CloudProvider {
    name: String,
    cloud_config_file: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
struct NodeController {
    concurrent_node_syncs: u16,
    concurrent_node_status_updates: i32,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
struct NodeLifecycleController {
    node_monitor_period: String,
    concurrent_node_lifecycle_syncs: i32,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
struct ServiceController {
    concurrent_service_syncs: u16,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
struct Webhook {
    webhooks: Option<Vec<String>>,
}

impl CloudControllerManagerConfiguration {
    fn new(s: &Settings, provider: &str) -> Self {
        let leader_election = match &s.leader_election {
            Some(le) => LeaderElection {
                leader_elect: true,
                lease_duration: go_duration(le.lease_duration),
                renew_deadline: go_duration(le.renew_deadline),
                retry_period: go_duration(le.retry_period),
                resource_lock: "leases",
                resource_name: le.lease_name.clone(),
                resource_namespace: le.lease_namespace.clone(),
            },
            // Settings drop the timing with --leader-elect=false; these are
            // the flags' defaults, whatever was passed.
            None => LeaderElection {
                leader_elect: false,
                lease_duration: "15s".into(),
                renew_deadline: "10s".into(),
                retry_period: "2s".into(),
                resource_lock: "leases",
                resource_name: "cloud-controller-manager".into(),
                resource_namespace: "kube-system".into(),
            },
        };
        Self {
            kind: KIND,
            api_version: API_VERSION,
            generic: Generic {
                // Upstream's defaults: the insecure port is gone, no flag sets these.
                port: 0,
                address: "0.0.0.0",
                // No --min-resync-period flag yet: upstream's default.
                min_resync_period: "12h0m0s".into(),
                client_connection: ClientConnection {
                    kubeconfig: s
                        .kubeconfig
                        .as_ref()
                        .map(|p| p.display().to_string())
                        .unwrap_or_default(),
                    accept_content_types: "",
                    // No --kube-api-content-type flag yet: upstream's default.
                    content_type: "application/vnd.kubernetes.protobuf",
                    qps: go_float32(s.kube_api_qps.unwrap_or(-1.0)),
                    burst: s.kube_api_burst,
                },
                // No --controller-start-interval flag yet: upstream's default.
                controller_start_interval: go_duration(s.controller_start_interval),
                leader_election,
                controllers: controllers(s),
                debugging: Debugging {
                    enable_profiling: s.debugging.profiling,
                    enable_contention_profiling: s.debugging.contention_profiling,
                },
                leader_migration_enabled: matches!(
                    s.leader_migration,
                    LeaderMigrationSettings::On(_)
                ),
                leader_migration: leader_migration(&s.leader_migration),
            },
            kube_cloud_shared: KubeCloudShared {
                // The provider this binary runs: `--cloud-provider` may only
                // name it (or be empty).
                cloud_provider: CloudProvider {
                    name: provider.to_owned(),
                    cloud_config_file: s
                        .cloud_config
                        .as_ref()
                        .map(|p| p.display().to_string())
                        .unwrap_or_default(),
                },
                // No --external-cloud-volume-plugin,
                // --use-service-account-credentials or --cidr-allocator-type
                // flags yet: upstream's defaults.
                external_cloud_volume_plugin: "",
                use_service_account_credentials: s.use_service_account_credentials,
                allow_untagged_cloud: s.allow_untagged_cloud,
                route_reconciliation_period: go_duration(s.route_reconciliation_period),
                cluster_name: s.cluster_name.clone(),
                cluster_cidr: s
                    .cluster_cidrs
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
                allocate_node_cidrs: s.allocate_node_cidrs,
                cidr_allocator_type: "RangeAllocator",
                configure_cloud_routes: s.configure_cloud_routes,
                node_sync_period: go_duration(s.node_sync_period),
            },
            node_controller: NodeController {
                concurrent_node_syncs: s.concurrent_node_syncs,
                concurrent_node_status_updates: s.concurrent_node_status_updates,
            },
            node_lifecycle_controller: NodeLifecycleController {
                node_monitor_period: go_duration(s.node_monitor_period),
                concurrent_node_lifecycle_syncs: s.concurrent_node_lifecycle_syncs,
            },
            service_controller: ServiceController {
                concurrent_service_syncs: s.concurrent_service_syncs,
            },
            node_status_update_frequency: go_duration(s.node_status_update_frequency),
            // Settings keep whether the one webhook is served: upstream
            // echoes the flag's words, nil when unset.
            webhook: Webhook {
                webhooks: s
                    .webhook
                    .as_ref()
                    .map(|_| vec![crate::admission::WEBHOOK_NAME.to_owned()]),
            },
        }
    }
}

/// `Generic.LeaderMigration`: the configuration migration runs with, or
/// upstream's zero value when it is off.
///
/// Upstream also fills it for `--enable-leader-migration` with
/// `--leader-elect=false`, which it then ignores; Settings keep no
/// configuration for that case, so this serves the zero value.
fn leader_migration(migration: &LeaderMigrationSettings) -> LeaderMigration {
    match migration {
        LeaderMigrationSettings::On(config) => LeaderMigration {
            leader_name: config.leader_name.clone(),
            // The only lock a valid configuration names (v1 has no field
            // and means it).
            resource_lock: "leases",
            // No entries: Go's nil slice, as an absent `controllerLeaders`.
            controller_leaders: Some(&config.controller_leaders)
                .filter(|leaders| !leaders.is_empty())
                .map(|leaders| {
                    leaders
                        .iter()
                        .map(|leader| ControllerLeader {
                            name: leader.name.clone(),
                            component: leader.component.clone(),
                        })
                        .collect()
                }),
        },
        LeaderMigrationSettings::Off | LeaderMigrationSettings::Ignored(_) => LeaderMigration {
            leader_name: String::new(),
            resource_lock: "",
            controller_leaders: None,
        },
    }
}

/// `Generic.Controllers`. Upstream echoes the flag's words with aliases made
/// canonical; Settings keep the resolved set, so exactly the default set is
/// `["*"]` (the default) and anything else the enabled controllers' names.
fn controllers(s: &Settings) -> Vec<&'static str> {
    if s.controllers
        .iter()
        .copied()
        .eq(ccm_controllers::ControllerId::DEFAULT)
    {
        vec!["*"]
    } else {
        s.controllers.iter().map(|id| id.name()).collect()
    }
}

/// A float32 as Go's encoding/json writes it: `20`, not `20.0`.
fn go_float32(value: f64) -> serde_json::Number {
    // Upstream's QPS is a float32: round to one first.
    let value = value as f32;
    if value.fract() == 0.0 && value.abs() < 1e15 {
        return serde_json::Number::from(value as i64);
    }
    // f32's shortest form (`5.5`, `0.1`), carried exactly into the f64.
    value
        .to_string()
        .parse::<f64>()
        .ok()
        .and_then(serde_json::Number::from_f64)
        .unwrap_or_else(|| serde_json::Number::from(0))
}

/// Go's `time.Duration.String()`: `0s`, `1.5s`, `5m0s`, `12h0m0s`, `100ms`.
pub(crate) fn go_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".into();
    }
    if nanos < 1_000_000_000 {
        let (unit, per) = match nanos {
            0..1_000 => ("ns", 1),
            1_000..1_000_000 => ("µs", 1_000),
            _ => ("ms", 1_000_000),
        };
        return format!("{}{unit}", decimal(nanos, per));
    }
    let seconds = nanos / 1_000_000_000;
    let (hours, minutes) = (seconds / 3600, seconds / 60 % 60);
    let mut out = String::new();
    if hours > 0 {
        out.push_str(&format!("{hours}h"));
    }
    if hours > 0 || minutes > 0 {
        out.push_str(&format!("{minutes}m"));
    }
    let rest = nanos % 60_000_000_000;
    out.push_str(&format!("{}s", decimal(rest, 1_000_000_000)));
    out
}

/// `value / per` with the fraction's trailing zeros dropped.
fn decimal(value: u128, per: u128) -> String {
    let (whole, fraction) = (value / per, value % per);
    if fraction == 0 {
        return whole.to_string();
    }
    let width = per.ilog10() as usize;
    let digits = format!("{fraction:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}
