//! The cloud config: upstream's INI file with its `[Global]` keys and
//! `[ServiceOverride "N"]` endpoint overrides.
//!
//! ```ini
//! [Global]
//! Zone = us-east-1a
//! VPC = vpc-0123456789abcdef0
//! KubernetesClusterID = prod
//! NodeIPFamilies = ipv4
//! NodeIPFamilies = ipv6
//!
//! [ServiceOverride "1"]
//! Service = ec2
//! Region = us-east-1
//! URL = http://127.0.0.1:5000
//! SigningRegion = us-east-1
//! ```
//!
//! Keys are matched as `gcfg` matches them (case-insensitively, ignoring
//! `-` and `_`). A key this provider does not know is an error naming the
//! file, line and key, so a typo never silently falls back to a default.
//! No error quotes a value: it names the key and the form expected.

mod overrides;

use ccm_cloud_provider::gcfg;
use ccm_cloud_provider::{CloudConfig, ConfigError};
use regex_lite::Regex;

pub(crate) use overrides::AwsService;
pub use overrides::ServiceOverride;

/// An IP family whose addresses nodes get (`NodeIPFamilies`), in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpFamily {
    /// `ipv4`: private IPs of the in-use interfaces, the public IP, DNS names.
    Ipv4,
    /// `ipv6`: the first IPv6 address of each in-use interface.
    Ipv6,
}

/// `SupportedTopologyInstanceTypePattern`: which instance types are
/// expected to have a topology. Compared by its text.
#[derive(Debug, Clone)]
pub struct TypePattern {
    text: String,
    regex: Regex,
}

impl TypePattern {
    /// The pattern `text`, in RE2 syntax as upstream's Go `regexp`.
    ///
    /// # Errors
    /// Why `text` is not a regular expression.
    pub fn new(text: &str) -> Result<Self, String> {
        let regex = Regex::new(text).map_err(|e| e.to_string().replace('\n', " "))?;
        Ok(Self {
            text: text.to_owned(),
            regex,
        })
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The compiled pattern.
    pub(crate) fn regex(&self) -> &Regex {
        &self.regex
    }
}

impl PartialEq for TypePattern {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Eq for TypePattern {}

/// The parsed cloud config. Every field is optional in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AwsConfig {
    /// `Zone`: only used to derive the region when `Region` is not set.
    pub zone: Option<String>,
    /// `Region`: the region of every client.
    pub region: Option<String>,
    /// `VPC`: the cluster's VPC; read from instance metadata when unset.
    pub vpc: Option<String>,
    /// `SubnetID`: the subnet for load balancers when none is tagged.
    pub subnet_id: Option<String>,
    /// `RouteTableID`: the route table for pod routes, instead of the
    /// tables tagged for the cluster.
    pub route_table_id: Option<String>,
    /// `RoleARN`: an IAM role to assume for every call.
    pub role_arn: Option<String>,
    /// `SourceARN`: sent as `x-amz-source-arn` when assuming `RoleARN`.
    pub source_arn: Option<String>,
    /// `ClusterServiceLoadBalancerHealthProbeMode = Shared`: load balancers
    /// of Services with `externalTrafficPolicy: Cluster` check kube-proxy's
    /// health endpoint on each node instead of the traffic port.
    pub shared_health_probe: Option<SharedHealthProbe>,
    /// `SupportedTopologyInstanceTypePattern`: instance types expected to
    /// have a network topology; upstream's default when unset.
    pub topology_instance_types: Option<TypePattern>,
    /// `KubernetesClusterTag`: the legacy `KubernetesCluster` tag's value.
    pub kubernetes_cluster_tag: Option<String>,
    /// `KubernetesClusterID`: the `<id>` of the `kubernetes.io/cluster/<id>` tag.
    pub kubernetes_cluster_id: Option<String>,
    /// `DisableSecurityGroupIngress`: leave node security groups alone.
    pub disable_security_group_ingress: bool,
    /// `ElbSecurityGroup`: a security group attached to every load balancer.
    pub elb_security_group: Option<String>,
    /// `NLBSecurityGroupMode = Managed`: a new Network Load Balancer gets a
    /// security group of its own, made and kept by the provider. Unset (as
    /// upstream's default) it gets none, and nodes' security groups let the
    /// clients in.
    pub nlb_security_group_managed: bool,
    /// `NodeIPFamilies`: which addresses nodes get, in order; IPv4 when unset.
    pub node_ip_families: Vec<IpFamily>,
    /// `[ServiceOverride "N"]` sections, in file order.
    pub service_overrides: Vec<ServiceOverride>,
}

impl Default for AwsConfig {
    fn default() -> Self {
        Self {
            zone: None,
            region: None,
            vpc: None,
            subnet_id: None,
            route_table_id: None,
            role_arn: None,
            source_arn: None,
            shared_health_probe: None,
            topology_instance_types: None,
            kubernetes_cluster_tag: None,
            kubernetes_cluster_id: None,
            disable_security_group_ingress: false,
            elb_security_group: None,
            nlb_security_group_managed: false,
            node_ip_families: vec![IpFamily::Ipv4],
            service_overrides: Vec::new(),
        }
    }
}

/// `[Global]` keys that take effect only once the whole file is read.
#[derive(Debug, Default)]
struct Pending {
    /// `NodeIPFamilies`, in order, each once.
    families: Vec<IpFamily>,
    /// `ClusterServiceSharedLoadBalancerHealthProbePort`: only in the
    /// shared mode, which a later line may set.
    probe_port: Option<i32>,
    /// `ClusterServiceSharedLoadBalancerHealthProbePath`, likewise.
    probe_path: Option<String>,
}

/// kube-proxy's health endpoint (upstream's `defaultKubeProxyHealthCheckPort`
/// and `...Path`).
const KUBE_PROXY_HEALTH_PORT: i32 = 10256;
const KUBE_PROXY_HEALTH_PATH: &str = "/healthz";

/// Where load balancers of `externalTrafficPolicy: Cluster` Services send
/// their health checks in the shared mode: HTTP to this port and path on
/// each node (kube-proxy's, unless the config names another).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedHealthProbe {
    /// `ClusterServiceSharedLoadBalancerHealthProbePort`, 10256 when unset.
    pub port: i32,
    /// `ClusterServiceSharedLoadBalancerHealthProbePath`, `/healthz` when
    /// unset.
    pub path: String,
}

impl AwsConfig {
    /// Parses and validates the `--cloud-config` file.
    ///
    /// # Errors
    /// A [`ConfigError`] naming the file, the line and the key at fault.
    pub fn parse(file: &CloudConfig) -> Result<Self, ConfigError> {
        let at = |line: usize, message: String| file.error(message).at_line(line);
        let sections = gcfg::parse(&file.contents).map_err(|e| at(e.line(), e.to_string()))?;
        let mut config = Self::default();
        let mut pending = Pending::default();
        for section in sections {
            if key_is(&section.name, "Global") && section.subsection.is_none() {
                for entry in &section.entries {
                    config
                        .set_global(entry, &mut pending)
                        .map_err(|m| at(entry.line, m))?;
                }
            } else if key_is(&section.name, "ServiceOverride") {
                let parsed =
                    ServiceOverride::from_section(&section).map_err(|(line, m)| at(line, m))?;
                if let Some(dup) = config
                    .service_overrides
                    .iter()
                    .find(|o| o.service == parsed.service && o.region == parsed.region)
                {
                    return Err(at(
                        section.line,
                        format!(
                            "duplicate [ServiceOverride]: its Service and Region are those of [ServiceOverride \"{}\"]",
                            dup.index
                        ),
                    ));
                }
                config.service_overrides.push(parsed);
            } else {
                return Err(at(
                    section.line,
                    format!(
                        "unknown section [{}] (known: [Global], [ServiceOverride \"N\"])",
                        section.name
                    ),
                ));
            }
        }
        if !pending.families.is_empty() {
            config.node_ip_families = pending.families;
        }
        if let Some(probe) = &mut config.shared_health_probe {
            if let Some(port) = pending.probe_port {
                probe.port = port;
            }
            if let Some(path) = pending.probe_path {
                probe.path = path;
            }
        }
        config.check_cluster_ids().map_err(|m| file.error(m))?;
        Ok(config)
    }

    fn set_global(&mut self, entry: &gcfg::Entry, pending: &mut Pending) -> Result<(), String> {
        let key = entry.key.as_str();
        let value = || entry.value.clone().unwrap_or_default();
        let id = |name: &str, prefix: &str| -> Result<Option<String>, String> {
            let v = value();
            if v.is_empty() {
                return Ok(None);
            }
            if !v.starts_with(prefix) || v.len() == prefix.len() {
                return Err(format!("`{name}` must look like {prefix}0123456789abcdef0"));
            }
            Ok(Some(v))
        };
        if key_is(key, "Zone") {
            let zone = non_empty(value());
            if let Some(z) = &zone {
                region_of_zone(z).ok_or_else(|| {
                    "`Zone` must be an availability zone such as us-east-1a".to_owned()
                })?;
            }
            self.zone = zone;
        } else if key_is(key, "Region") {
            self.region = non_empty(value());
        } else if key_is(key, "VPC") {
            self.vpc = id("VPC", "vpc-")?;
        } else if key_is(key, "SubnetID") {
            self.subnet_id = id("SubnetID", "subnet-")?;
        } else if key_is(key, "RouteTableID") {
            self.route_table_id = id("RouteTableID", "rtb-")?;
        } else if key_is(key, "ElbSecurityGroup") {
            self.elb_security_group = id("ElbSecurityGroup", "sg-")?;
        } else if key_is(key, "NLBSecurityGroupMode") {
            // Upstream compares exactly: `managed` is refused there too.
            self.nlb_security_group_managed = match value().as_str() {
                "" => false,
                "Managed" => true,
                _ => {
                    return Err("`NLBSecurityGroupMode` must be Managed or empty".to_owned());
                }
            };
        } else if key_is(key, "RoleARN") {
            let v = value();
            if !v.is_empty() && !v.starts_with("arn:") {
                return Err(
                    "`RoleARN` must be an IAM role ARN such as arn:aws:iam::123456789012:role/ccm"
                        .to_owned(),
                );
            }
            self.role_arn = non_empty(v);
        } else if key_is(key, "SourceARN") {
            let v = value();
            if !v.is_empty() && !v.starts_with("arn:") {
                return Err(
                    "`SourceARN` must be an ARN such as arn:aws:eks:us-east-1:123456789012:cluster/prod"
                        .to_owned(),
                );
            }
            self.source_arn = non_empty(v);
        } else if key_is(key, "ClusterServiceLoadBalancerHealthProbeMode") {
            // Upstream compares exactly, as for `NLBSecurityGroupMode`.
            self.shared_health_probe = match value().as_str() {
                "" | "ServiceNodePort" => None,
                "Shared" => Some(SharedHealthProbe {
                    port: KUBE_PROXY_HEALTH_PORT,
                    path: KUBE_PROXY_HEALTH_PATH.to_owned(),
                }),
                _ => {
                    return Err(
                        "`ClusterServiceLoadBalancerHealthProbeMode` must be Shared, ServiceNodePort or empty"
                            .to_owned(),
                    );
                }
            };
        } else if key_is(key, "ClusterServiceSharedLoadBalancerHealthProbePort") {
            let v = value();
            // 0 is upstream's "unset".
            pending.probe_port = match v.parse::<i32>() {
                Ok(0) => None,
                Ok(port @ 1..=65535) => Some(port),
                _ => {
                    return Err(
                        "`ClusterServiceSharedLoadBalancerHealthProbePort` must be a port from 1 to 65535"
                            .to_owned(),
                    );
                }
            };
        } else if key_is(key, "ClusterServiceSharedLoadBalancerHealthProbePath") {
            let v = value();
            if !v.is_empty() && !v.starts_with('/') {
                return Err(
                    "`ClusterServiceSharedLoadBalancerHealthProbePath` must start with /"
                        .to_owned(),
                );
            }
            pending.probe_path = non_empty(v);
        } else if key_is(key, "KubernetesClusterTag") {
            self.kubernetes_cluster_tag = non_empty(value());
        } else if key_is(key, "KubernetesClusterID") {
            self.kubernetes_cluster_id = non_empty(value());
        } else if key_is(key, "DisableSecurityGroupIngress") {
            self.disable_security_group_ingress = parse_bool(entry.value.as_deref())
                .ok_or_else(|| "`DisableSecurityGroupIngress` must be true or false".to_owned())?;
        } else if key_is(key, "NodeIPFamilies") {
            let family = match value().to_ascii_lowercase().as_str() {
                "ipv4" => IpFamily::Ipv4,
                "ipv6" => IpFamily::Ipv6,
                _ => {
                    return Err("`NodeIPFamilies` must be ipv4 or ipv6".to_owned());
                }
            };
            if !pending.families.contains(&family) {
                pending.families.push(family);
            }
        } else if key_is(key, "SupportedTopologyInstanceTypePattern") {
            let v = value();
            self.topology_instance_types = if v.is_empty() {
                None
            } else {
                Some(TypePattern::new(&v).map_err(|e| {
                    format!(
                        "`SupportedTopologyInstanceTypePattern` is not a regular expression: {e}"
                    )
                })?)
            };
        } else {
            return Err(format!("unknown key {} in [Global]", entry.shown_key()));
        }
        Ok(())
    }

    fn check_cluster_ids(&self) -> Result<(), String> {
        match (&self.kubernetes_cluster_tag, &self.kubernetes_cluster_id) {
            (Some(tag), Some(id)) if tag != id => Err(
                "`KubernetesClusterTag` and `KubernetesClusterID` must match when both are set"
                    .to_owned(),
            ),
            _ => Ok(()),
        }
    }

    /// The region: `Region`, or the region of `Zone`.
    pub fn region(&self) -> Option<String> {
        self.region.clone().or_else(|| {
            self.zone
                .as_deref()
                .and_then(region_of_zone)
                .map(str::to_owned)
        })
    }

    /// The cluster ID from the config (`KubernetesClusterID`, or the legacy
    /// `KubernetesClusterTag`), if set.
    pub fn cluster_id(&self) -> Option<&str> {
        self.kubernetes_cluster_id
            .as_deref()
            .or(self.kubernetes_cluster_tag.as_deref())
    }

    /// The override for `service` in `region`, if one is configured.
    pub(crate) fn service_override(
        &self,
        service: AwsService,
        region: &str,
    ) -> Option<&ServiceOverride> {
        self.service_overrides
            .iter()
            .find(|o| o.applies_to(service) && (service == AwsService::Imds || o.region == region))
    }
}

/// gcfg's name matching: case-insensitive, `-` and `_` ignored.
pub(crate) fn key_is(written: &str, canonical: &str) -> bool {
    let fold = |s: &str| -> String {
        s.chars()
            .filter(|c| !matches!(c, '-' | '_'))
            .map(|c| c.to_ascii_lowercase())
            .collect()
    };
    fold(written) == fold(canonical)
}

/// gcfg's booleans; a bare key is `true`.
fn parse_bool(value: Option<&str>) -> Option<bool> {
    match value.map(str::to_ascii_lowercase).as_deref() {
        None | Some("true" | "yes" | "on" | "1") => Some(true),
        Some("false" | "no" | "off" | "0") => Some(false),
        Some(_) => None,
    }
}

fn non_empty(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

/// `us-east-1a` → `us-east-1`: upstream's `^([a-zA-Z]+-)+\d+` prefix.
pub(crate) fn region_of_zone(zone: &str) -> Option<&str> {
    let mut end = 0;
    let mut rest = zone;
    loop {
        let letters = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        if letters == 0 || rest.as_bytes().get(letters) != Some(&b'-') {
            break;
        }
        end += letters + 1;
        rest = &rest[letters + 1..];
    }
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    (end > 0 && digits > 0).then(|| &zone[..end + digits])
}

#[cfg(test)]
mod tests;
