//! The fake cloud's `--cloud-config` file, in TOML.
//!
//! ```toml
//! [settings]
//! latency_ms = 50          # added to every call
//! error_rate = 0.0         # fraction of calls that fail at random
//! rate_limit_qps = 20.0    # token bucket; beyond it calls answer Throttled
//! rate_limit_burst = 20
//! batch_size = 100         # most nodes one batch call answers for
//! volume_batch_size = 50   # most volumes one volumes_labels call answers for
//! auto_instances = true    # any node name has a running instance
//!
//! [[instances]]
//! name = "node-1"
//! provider_id = "fake://node-1"
//! instance_type = "fake.large"
//! zone = "fake-1a"
//! region = "fake-1"
//! addresses = [{ type = "InternalIP", address = "10.0.0.1" }]
//! state = "running"        # or "stopped", "terminated"
//!
//! [[volumes]]               # PersistentVolumes name them by CSI volume
//! id = "vol-1"              # handle, driver `fake.csi.ccm.dev`
//! zone = "fake-1a"          # defaults to the first of settings.zones
//! region = "fake-1"         # defaults to settings.region
//! ```

use std::collections::{BTreeMap, HashSet};

use ccm_cloud_provider::{
    CloudConfig, ConfigError, NodeAddress, NodeAddressType, RateLimiter,
    deserialize_message_without_values,
};
use serde::Deserialize;

use crate::instance::{Instance, InstanceState, default_provider_id};
use crate::volumes::FakeVolume;

/// The longest latency the fake adds to a call: an hour, far beyond any
/// test's wait, short enough that no call hangs for good.
pub(crate) const MAX_LATENCY_MS: u64 = 3_600_000;

/// The parsed cloud config.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FakeConfig {
    /// Behaviour settings.
    pub settings: Settings,
    /// Instances that exist from the start.
    pub instances: Vec<InstanceSpec>,
    /// Volumes that exist from the start.
    pub volumes: Vec<VolumeSpec>,
    /// The fake cloud served by another process (the `fake-cloud`
    /// binary): when set, the provider is its client, and the settings,
    /// instances and volumes belong in the server's own config.
    pub server: Option<ServerSpec>,
}

/// Where the fake cloud's server listens.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSpec {
    /// Its URL, such as `http://127.0.0.1:8080`: plain HTTP on loopback.
    pub url: String,
}

/// How the fake cloud behaves.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// Milliseconds added to every call.
    pub latency_ms: u64,
    /// Fraction of calls, in [0, 1], that fail with a general error.
    pub error_rate: f64,
    /// Seed of the generator behind `error_rate`.
    pub seed: u64,
    /// Calls per second allowed; beyond it calls answer Throttled. Unlimited when unset.
    pub rate_limit_qps: Option<f64>,
    /// Calls that may be made at once after a quiet period. Defaults to the qps, rounded up.
    pub rate_limit_burst: Option<u32>,
    /// The most nodes one batch call answers for.
    pub batch_size: usize,
    /// The most volume IDs one `volumes_labels` call answers for.
    pub volume_batch_size: usize,
    /// Answer for any node name with a synthesized running instance.
    pub auto_instances: bool,
    /// Region of synthesized instances.
    pub region: String,
    /// Zones synthesized instances are spread over.
    pub zones: Vec<String>,
    /// Instance type of synthesized instances.
    pub instance_type: String,
}

impl Settings {
    /// The rate limit as `(qps, burst)`, the burst defaulting to the qps
    /// rounded up; `None` when unlimited.
    pub(crate) fn rate_limit(&self) -> Option<(f64, u32)> {
        self.rate_limit_qps.map(|qps| {
            let burst = self.rate_limit_burst.unwrap_or(qps.ceil() as u32);
            (qps, burst)
        })
    }
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            latency_ms: 0,
            error_rate: 0.0,
            seed: 0x5eed,
            rate_limit_qps: None,
            rate_limit_burst: None,
            batch_size: 100,
            volume_batch_size: 50,
            auto_instances: false,
            region: "fake-region-1".into(),
            zones: vec![
                "fake-region-1a".into(),
                "fake-region-1b".into(),
                "fake-region-1c".into(),
            ],
            instance_type: "fake.standard".into(),
        }
    }
}

/// One seeded instance.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstanceSpec {
    /// The node name this instance answers to.
    pub name: String,
    /// Defaults to `fake://<name>`.
    pub provider_id: Option<String>,
    /// Defaults to `settings.instance_type`.
    pub instance_type: Option<String>,
    /// Defaults to the first of `settings.zones`.
    pub zone: Option<String>,
    /// Defaults to `settings.region`.
    pub region: Option<String>,
    /// Addresses, in order.
    #[serde(default)]
    pub addresses: Vec<AddressSpec>,
    /// Defaults to running.
    #[serde(default)]
    pub state: InstanceState,
    /// Additional labels the node gets.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

/// One seeded volume.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VolumeSpec {
    /// Its ID: the `volumeHandle` of a CSI PersistentVolume of driver
    /// `fake.csi.ccm.dev`.
    pub id: String,
    /// Defaults to the first of `settings.zones`.
    pub zone: Option<String>,
    /// Defaults to `settings.region`.
    pub region: Option<String>,
    /// Further labels its PersistentVolumes get.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

/// One address of a seeded instance.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddressSpec {
    /// `InternalIP`, `ExternalIP`, `InternalDNS`, `ExternalDNS` or `Hostname`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The address.
    pub address: String,
}

impl FakeConfig {
    /// Parses and validates a cloud config.
    ///
    /// # Errors
    /// A [`ConfigError`] naming the file, the line when TOML reports one,
    /// and the field at fault.
    pub fn parse(file: &CloudConfig) -> Result<Self, ConfigError> {
        let config: Self = toml::from_str(&file.contents).map_err(|e| {
            let line = e.span().map(|span| line_of(&file.contents, span.start));
            let field = line.and_then(|l| field_at(&file.contents, l));
            // No error quotes a value: it names the field and the line.
            let message = deserialize_message_without_values(e.message());
            let message = match field {
                Some(field) if !message.contains(&field) => format!("{field}: {message}"),
                _ => message,
            };
            let err = file.error(message.trim_end().replace('\n', "; "));
            match line {
                Some(line) => err.at_line(line),
                None => err,
            }
        })?;
        config.validate().map_err(|message| file.error(message))?;
        if config.server.is_some()
            && let Some(section) = ["settings", "instances", "volumes"]
                .into_iter()
                .find(|section| has_section(&file.contents, section))
        {
            return Err(file.error(format!(
                "server: [{section}] belongs in the fake-cloud server's own config, not with [server]"
            )));
        }
        Ok(config)
    }

    fn validate(&self) -> Result<(), String> {
        if let Some(server) = &self.server {
            validate_server_url(&server.url)?;
        }
        let s = &self.settings;
        if s.latency_ms > MAX_LATENCY_MS {
            return Err(format!(
                "settings.latency_ms: must be at most an hour ({MAX_LATENCY_MS})"
            ));
        }
        if !(0.0..=1.0).contains(&s.error_rate) {
            return Err("settings.error_rate: must be between 0 and 1".into());
        }
        if let Some(qps) = s.rate_limit_qps
            && !(qps.is_finite() && qps > 0.0)
        {
            return Err("settings.rate_limit_qps: must be a positive number".into());
        }
        if s.rate_limit_burst == Some(0) {
            return Err("settings.rate_limit_burst: must be at least 1".into());
        }
        if let Some((qps, burst)) = s.rate_limit()
            && RateLimiter::new(qps, burst).is_err()
        {
            return Err(
                "settings.rate_limit_qps: with this burst a full burst would take over a century to refill"
                    .into(),
            );
        }
        if s.batch_size == 0 {
            return Err("settings.batch_size: must be at least 1".into());
        }
        if s.volume_batch_size == 0 {
            return Err("settings.volume_batch_size: must be at least 1".into());
        }
        let mut volume_ids = HashSet::new();
        for (i, spec) in self.volumes.iter().enumerate() {
            if spec.id.is_empty() {
                return Err(format!("volumes[{i}].id: must not be empty"));
            }
            if !volume_ids.insert(spec.id.as_str()) {
                return Err(format!("volumes[{i}].id: is used twice"));
            }
        }
        if s.zones.is_empty() {
            return Err("settings.zones: must name at least one zone".into());
        }
        let (mut names, mut ids) = (HashSet::new(), HashSet::new());
        for (i, spec) in self.instances.iter().enumerate() {
            if spec.name.is_empty() {
                return Err(format!("instances[{i}].name: must not be empty"));
            }
            if !names.insert(spec.name.as_str()) {
                return Err(format!("instances[{i}].name: is used twice"));
            }
            let id = spec
                .provider_id
                .clone()
                .unwrap_or_else(|| default_provider_id(&spec.name));
            if !ids.insert(id.clone()) {
                return Err(format!("instances[{i}].provider_id: is used twice"));
            }
            for (j, a) in spec.addresses.iter().enumerate() {
                if NodeAddressType::parse(&a.kind).is_none() {
                    return Err(format!(
                        "instances[{i}].addresses[{j}].type: must be one of InternalIP, ExternalIP, InternalDNS, ExternalDNS, Hostname"
                    ));
                }
            }
        }
        Ok(())
    }

    /// The seeded instances, with defaults filled in.
    pub(crate) fn seeded_instances(&self) -> Vec<Instance> {
        let s = &self.settings;
        self.instances
            .iter()
            .map(|spec| Instance {
                name: spec.name.clone(),
                provider_id: spec
                    .provider_id
                    .clone()
                    .unwrap_or_else(|| default_provider_id(&spec.name)),
                instance_type: spec
                    .instance_type
                    .clone()
                    .unwrap_or_else(|| s.instance_type.clone()),
                zone: spec.zone.clone().unwrap_or_else(|| s.zones[0].clone()),
                region: spec.region.clone().unwrap_or_else(|| s.region.clone()),
                addresses: spec
                    .addresses
                    .iter()
                    .filter_map(|a| {
                        Some(NodeAddress::new(
                            NodeAddressType::parse(&a.kind)?,
                            &a.address,
                        ))
                    })
                    .collect(),
                state: spec.state,
                labels: spec.labels.clone(),
            })
            .collect()
    }
}

impl FakeConfig {
    /// The seeded volumes, with defaults filled in.
    pub(crate) fn seeded_volumes(&self) -> Vec<FakeVolume> {
        let s = &self.settings;
        self.volumes
            .iter()
            .map(|spec| FakeVolume {
                id: spec.id.clone(),
                zone: spec.zone.clone().unwrap_or_else(|| s.zones[0].clone()),
                region: spec.region.clone().unwrap_or_else(|| s.region.clone()),
                labels: spec.labels.clone(),
            })
            .collect()
    }
}

impl Settings {
    /// A running instance named `name` with addresses derived from the name,
    /// as `auto_instances` creates them.
    pub(crate) fn synthesized_instance(&self, name: &str) -> Instance {
        let h = fnv1a(name.as_bytes());
        let ip = format!(
            "10.{}.{}.{}",
            (h >> 16) & 0xff,
            (h >> 8) & 0xff,
            (h & 0xfe) + 1
        );
        Instance {
            name: name.to_owned(),
            provider_id: default_provider_id(name),
            instance_type: self.instance_type.clone(),
            zone: self.zones[(h as usize) % self.zones.len()].clone(),
            region: self.region.clone(),
            addresses: vec![
                NodeAddress::new(NodeAddressType::InternalIp, ip),
                NodeAddress::new(NodeAddressType::Hostname, name),
            ],
            state: InstanceState::Running,
            labels: BTreeMap::new(),
        }
    }
}

fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    })
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// `section.key` for the `key = value` on 1-based `line`, so errors about a
/// value (a wrong type) name the field as well as the line.
fn field_at(text: &str, line: usize) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let here = lines.get(line - 1)?.trim();
    if here.starts_with('[') {
        // An error about a whole table (a missing field) names the table.
        return Some(here.trim_matches(|c| c == '[' || c == ']').to_owned());
    }
    let key = here.split_once('=')?.0.trim();
    if key.is_empty() {
        return None;
    }
    let section = lines[..line - 1]
        .iter()
        .rev()
        .map(|l| l.trim())
        .find(|l| l.starts_with('['))
        .map(|l| l.trim_matches(|c| c == '[' || c == ']').to_owned());
    Some(match section {
        Some(section) => format!("{section}.{key}"),
        None => key.to_owned(),
    })
}

/// Whether the TOML text has a top-level table or array of tables `name`.
fn has_section(contents: &str, name: &str) -> bool {
    toml::from_str::<toml::Table>(contents).is_ok_and(|t| t.contains_key(name))
}

/// A server URL must be `http://` to a loopback address: the fake cloud
/// never leaves the machine.
fn validate_server_url(url: &str) -> Result<(), String> {
    let rest = url.strip_prefix("http://").ok_or_else(|| {
        "server.url: must start with http:// (the fake cloud serves plain HTTP on loopback)"
            .to_owned()
    })?;
    let authority = rest.split('/').next().unwrap_or_default();
    let addr: std::net::SocketAddr = authority.parse().map_err(|_| {
        "server.url: must name an IP address and port, such as http://127.0.0.1:8080".to_owned()
    })?;
    if !addr.ip().is_loopback() {
        return Err("server.url: must be a loopback address".to_owned());
    }
    Ok(())
}
