//! `LeaderMigrationConfiguration` (`controllermanager.config.k8s.io`
//! v1alpha1, v1beta1 and v1): reading, upstream's validation and upstream's
//! default for the cloud-controller-manager.

use std::path::Path;

use serde::Deserialize;

/// The API group of the configuration file.
const GROUP: &str = "controllermanager.config.k8s.io";
/// The kind of the configuration file.
const KIND: &str = "LeaderMigrationConfiguration";
/// The only lock this CCM takes; v1 has no field for it and always means it.
const LEASES: &str = "leases";

/// A validated leader-migration configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MigrationConfig {
    /// The name of the migration Lease.
    pub(crate) leader_name: String,
    /// Which component runs each migrating controller.
    pub(crate) controller_leaders: Vec<ControllerLeader>,
}

/// One `controllerLeaders` entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ControllerLeader {
    /// The controller's name, as the controller managers know it.
    #[serde(default)]
    pub(crate) name: String,
    /// The component that runs it (`kube-controller-manager`,
    /// `cloud-controller-manager`), or `*` for whichever holds the
    /// migration Lease.
    #[serde(default)]
    pub(crate) component: String,
}

/// Why a configuration file was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ConfigError {
    /// The file could not be read.
    #[error("cannot read it: {0}")]
    Unreadable(String),
    /// Not YAML, or not the fields of its version (decoding is strict, as
    /// upstream's).
    #[error("{0}")]
    Malformed(String),
    /// `apiVersion` or `kind` is not a `LeaderMigrationConfiguration` of
    /// `controllermanager.config.k8s.io`.
    #[error(
        "apiVersion `{api_version}`, kind `{kind}`: expected kind {KIND} of {GROUP}/v1 (or v1beta1, v1alpha1)"
    )]
    WrongKind {
        /// The file's `apiVersion`.
        api_version: String,
        /// The file's `kind`.
        kind: String,
    },
    /// Upstream's validation failed: every problem, as upstream lists them.
    #[error("invalid: {}", .0.join("; "))]
    Invalid(Vec<String>),
}

/// The two fields every Kubernetes configuration file starts with.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TypeMeta {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
}

/// v1: the lock is always `leases`, so there is no `resourceLock`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct V1 {
    #[serde(rename = "apiVersion")]
    _api_version: String,
    #[serde(rename = "kind")]
    _kind: String,
    #[serde(default)]
    leader_name: String,
    #[serde(default)]
    controller_leaders: Vec<ControllerLeader>,
}

/// v1alpha1 and v1beta1: `resourceLock` names the lock.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct V1Beta1 {
    #[serde(rename = "apiVersion")]
    _api_version: String,
    #[serde(rename = "kind")]
    _kind: String,
    #[serde(default)]
    leader_name: String,
    #[serde(default)]
    resource_lock: String,
    #[serde(default)]
    controller_leaders: Vec<ControllerLeader>,
}

impl MigrationConfig {
    /// Upstream's default for the cloud-controller-manager
    /// (`DefaultLeaderMigrationConfiguration`): the route, service and
    /// cloud-node-lifecycle controllers move, under the Lease
    /// `cloud-provider-extraction-migration`, to whichever controller
    /// manager holds it.
    pub(crate) fn upstream_default() -> Self {
        let any = |name: &str| ControllerLeader {
            name: name.to_owned(),
            component: "*".to_owned(),
        };
        Self {
            leader_name: "cloud-provider-extraction-migration".to_owned(),
            controller_leaders: vec![
                any("route-controller"),
                any("service-controller"),
                any("cloud-node-lifecycle-controller"),
            ],
        }
    }

    /// Reads and validates the file at `path`.
    ///
    /// # Errors
    /// A [`ConfigError`] when the file cannot be read, is not a
    /// `LeaderMigrationConfiguration`, or fails validation.
    pub(crate) fn read(path: &Path) -> Result<Self, ConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|e| ConfigError::Unreadable(e.to_string()))?;
        Self::parse(&text)
    }

    /// Parses and validates a configuration file's contents.
    ///
    /// # Errors
    /// As [`read`](Self::read), but for reading.
    pub(crate) fn parse(text: &str) -> Result<Self, ConfigError> {
        let meta: TypeMeta = decode(text)?;
        let version = meta
            .api_version
            .strip_prefix(GROUP)
            .and_then(|v| v.strip_prefix('/'))
            .filter(|_| meta.kind == KIND);
        let (leader_name, resource_lock, controller_leaders) = match version {
            Some("v1") => {
                let v1: V1 = decode(text)?;
                (v1.leader_name, LEASES.to_owned(), v1.controller_leaders)
            }
            Some("v1beta1" | "v1alpha1") => {
                let v: V1Beta1 = decode(text)?;
                (v.leader_name, v.resource_lock, v.controller_leaders)
            }
            _ => {
                return Err(ConfigError::WrongKind {
                    api_version: meta.api_version,
                    kind: meta.kind,
                });
            }
        };
        let config = Self {
            leader_name,
            controller_leaders,
        };
        let problems = config.problems(&resource_lock);
        if problems.is_empty() {
            Ok(config)
        } else {
            Err(ConfigError::Invalid(problems))
        }
    }

    /// Upstream's `ValidateLeaderMigrationConfiguration`, its messages
    /// word for word (`field.Error` text; from 1.35 on an entry's missing
    /// `component` or `name` carries no detail), with two
    /// refusals of our own: a `leaderName` that cannot name a Lease, and
    /// `resourceLock: endpoints`, which upstream's validation still accepts
    /// but its client library no longer implements.
    fn problems(&self, resource_lock: &str) -> Vec<String> {
        let mut problems = Vec::new();
        if self.leader_name.is_empty() {
            problems.push(
                "leaderName: Required value: leaderName must be set for LeaderMigrationConfiguration"
                    .to_owned(),
            );
        } else if !is_object_name(&self.leader_name) {
            problems.push(format!(
                "leaderName: `{}` cannot name a Lease (lowercase letters, digits, `-` and `.`)",
                self.leader_name
            ));
        }
        match resource_lock {
            LEASES => {}
            "endpoints" => problems.push(
                "resourceLock: `endpoints` is no longer supported by Kubernetes' leader election; use `leases`"
                    .to_owned(),
            ),
            other => problems.push(format!(
                "resourceLock: `{other}`: resource lock must be `leases`"
            )),
        }
        for (i, leader) in self.controller_leaders.iter().enumerate() {
            if leader.component.is_empty() {
                problems.push(format!("controllerLeaders[{i}].component: Required value"));
            }
            if leader.name.is_empty() {
                problems.push(format!("controllerLeaders[{i}].name: Required value"));
            }
        }
        problems
    }
}

/// Decodes `text` strictly, its error on one line.
fn decode<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, ConfigError> {
    serde_saphyr::from_str(text).map_err(|e| {
        let message = e.without_snippet().to_string();
        ConfigError::Malformed(message.split_whitespace().collect::<Vec<_>>().join(" "))
    })
}

/// An RFC 1123 subdomain, as a Lease's name must be.
fn is_object_name(name: &str) -> bool {
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
