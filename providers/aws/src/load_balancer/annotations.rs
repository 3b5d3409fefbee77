//! The Service annotations the AWS provider reads, with upstream's keys and
//! value formats, the parsers that turn a malformed value into
//! `CloudError::InvalidInput` naming the annotation and the expected form
//! (the target group attributes' in `attributes`), and their [`SCHEMA`],
//! which every read is checked against in tests.

pub(crate) mod attributes;
mod schema;

use std::collections::BTreeMap;

use ccm_cloud_provider::CloudError;
use ccm_cloud_provider::annotations::parse_bool;

pub use schema::SCHEMA;

/// `nlb` for a Network Load Balancer; `external` (or `nlb-ip`) leaves the
/// Service to the AWS Load Balancer Controller. Without it, a classic ELB,
/// as upstream.
pub const TYPE: &str = "service.beta.kubernetes.io/aws-load-balancer-type";
/// `true` for an internal load balancer.
pub const INTERNAL: &str = "service.beta.kubernetes.io/aws-load-balancer-internal";
/// Comma-separated subnet IDs or `Name` tags, one per zone.
pub const SUBNETS: &str = "service.beta.kubernetes.io/aws-load-balancer-subnets";
/// Comma-separated Elastic IP allocation IDs, one per subnet.
pub const EIP_ALLOCATIONS: &str = "service.beta.kubernetes.io/aws-load-balancer-eip-allocations";
/// Comma-separated private IPv4 addresses, one per subnet (internal only).
pub const PRIVATE_IPV4_ADDRESSES: &str =
    "service.beta.kubernetes.io/aws-load-balancer-private-ipv4-addresses";
/// `TCP`, `HTTP` or `HTTPS`.
pub const HEALTHCHECK_PROTOCOL: &str =
    "service.beta.kubernetes.io/aws-load-balancer-healthcheck-protocol";
/// `traffic-port` or a port number.
pub const HEALTHCHECK_PORT: &str = "service.beta.kubernetes.io/aws-load-balancer-healthcheck-port";
/// The HTTP(S) health-check path.
pub const HEALTHCHECK_PATH: &str = "service.beta.kubernetes.io/aws-load-balancer-healthcheck-path";
/// Seconds between health checks (5 to 300).
pub const HEALTHCHECK_INTERVAL: &str =
    "service.beta.kubernetes.io/aws-load-balancer-healthcheck-interval";
/// Seconds before a health check fails (2 to 120).
pub const HEALTHCHECK_TIMEOUT: &str =
    "service.beta.kubernetes.io/aws-load-balancer-healthcheck-timeout";
/// Successes before a target is healthy (2 to 10).
pub const HEALTHCHECK_HEALTHY_THRESHOLD: &str =
    "service.beta.kubernetes.io/aws-load-balancer-healthcheck-healthy-threshold";
/// Failures before a target is unhealthy (2 to 10).
pub const HEALTHCHECK_UNHEALTHY_THRESHOLD: &str =
    "service.beta.kubernetes.io/aws-load-balancer-healthcheck-unhealthy-threshold";
/// `*`: PROXY protocol v2 towards every target.
pub const PROXY_PROTOCOL: &str = "service.beta.kubernetes.io/aws-load-balancer-proxy-protocol";
/// `key=value` target group attributes, such as
/// `preserve_client_ip.enabled=false`.
pub const TARGET_GROUP_ATTRIBUTES: &str =
    "service.beta.kubernetes.io/aws-load-balancer-target-group-attributes";
/// `key=value,key` labels a node needs to be a target.
pub const TARGET_NODE_LABELS: &str =
    "service.beta.kubernetes.io/aws-load-balancer-target-node-labels";
/// `key=value,key` tags added to everything created for the Service.
pub const ADDITIONAL_RESOURCE_TAGS: &str =
    "service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags";
/// `true` to balance across zones.
pub const CROSS_ZONE_LOAD_BALANCING_ENABLED: &str =
    "service.beta.kubernetes.io/aws-load-balancer-cross-zone-load-balancing-enabled";
/// A certificate ARN: the ports in [`SSL_PORTS`] become TLS listeners.
pub const SSL_CERT: &str = "service.beta.kubernetes.io/aws-load-balancer-ssl-cert";
/// `*` or comma-separated port numbers or names that terminate TLS.
pub const SSL_PORTS: &str = "service.beta.kubernetes.io/aws-load-balancer-ssl-ports";
/// What the targets speak: `tcp` (the default) or `ssl` behind TLS
/// listeners; classic ELBs also take `http` and `https`.
pub const BACKEND_PROTOCOL: &str = "service.beta.kubernetes.io/aws-load-balancer-backend-protocol";
/// Comma-separated security group IDs the load balancer gets instead of
/// the provider's choice.
pub const SECURITY_GROUPS: &str = "service.beta.kubernetes.io/aws-load-balancer-security-groups";
/// Comma-separated security group IDs added to the load balancer's.
pub const EXTRA_SECURITY_GROUPS: &str =
    "service.beta.kubernetes.io/aws-load-balancer-extra-security-groups";
/// The TLS listeners' security policy name.
pub const SSL_NEGOTIATION_POLICY: &str =
    "service.beta.kubernetes.io/aws-load-balancer-ssl-negotiation-policy";
/// `ipv4` or `dualstack`.
pub const IP_ADDRESS_TYPE: &str = "service.beta.kubernetes.io/aws-load-balancer-ip-address-type";
/// Classic ELBs: `5` or `60` minutes between access log files.
pub const ACCESS_LOG_EMIT_INTERVAL: &str =
    "service.beta.kubernetes.io/aws-load-balancer-access-log-emit-interval";
/// Classic ELBs: `true` to write access logs.
pub const ACCESS_LOG_ENABLED: &str =
    "service.beta.kubernetes.io/aws-load-balancer-access-log-enabled";
/// Classic ELBs: the S3 bucket of the access logs.
pub const ACCESS_LOG_S3_BUCKET_NAME: &str =
    "service.beta.kubernetes.io/aws-load-balancer-access-log-s3-bucket-name";
/// Classic ELBs: the access logs' key prefix in the bucket.
pub const ACCESS_LOG_S3_BUCKET_PREFIX: &str =
    "service.beta.kubernetes.io/aws-load-balancer-access-log-s3-bucket-prefix";
/// Classic ELBs: `true` to let in-flight requests finish on deregistration.
pub const CONNECTION_DRAINING_ENABLED: &str =
    "service.beta.kubernetes.io/aws-load-balancer-connection-draining-enabled";
/// Classic ELBs: seconds of connection draining.
pub const CONNECTION_DRAINING_TIMEOUT: &str =
    "service.beta.kubernetes.io/aws-load-balancer-connection-draining-timeout";
/// Classic ELBs: seconds an idle connection stays open (60 by default).
pub const CONNECTION_IDLE_TIMEOUT: &str =
    "service.beta.kubernetes.io/aws-load-balancer-connection-idle-timeout";
/// Comma-separated client CIDRs, when `spec.loadBalancerSourceRanges` is empty.
pub const SOURCE_RANGES: &str = "service.beta.kubernetes.io/load-balancer-source-ranges";

/// The annotations of a Service, with typed accessors.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Annotations<'a>(pub(crate) &'a BTreeMap<String, String>);

pub(crate) fn invalid(key: &str, message: impl Into<String>) -> CloudError {
    CloudError::invalid(key, message)
}

impl<'a> Annotations<'a> {
    /// The value, trimmed; `None` when absent. Every read goes through
    /// here, so a key the provider reads must be in [`SCHEMA`].
    pub(crate) fn get(&self, key: &str) -> Option<&'a str> {
        debug_assert!(
            SCHEMA.get(key).is_some(),
            "annotation {key} is read but has no entry in the schema"
        );
        self.0.get(key).map(|v| v.trim())
    }

    /// `strconv.ParseBool`'s spellings.
    pub(crate) fn bool(&self, key: &str) -> Result<Option<bool>, CloudError> {
        self.get(key)
            .map(|v| {
                parse_bool(v)
                    .ok_or_else(|| invalid(key, format!("expected true or false, got `{v}`")))
            })
            .transpose()
    }

    /// An integer in `range`.
    pub(crate) fn int(
        &self,
        key: &str,
        range: std::ops::RangeInclusive<i32>,
    ) -> Result<Option<i32>, CloudError> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        match v.parse::<i32>() {
            Ok(n) if range.contains(&n) => Ok(Some(n)),
            _ => Err(invalid(
                key,
                format!(
                    "expected a whole number from {} to {}, got `{v}`",
                    range.start(),
                    range.end()
                ),
            )),
        }
    }

    /// A comma-separated list, empty items dropped; an empty list is invalid.
    pub(crate) fn list(&self, key: &str) -> Result<Option<Vec<&'a str>>, CloudError> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        let items: Vec<&str> = v
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        if items.is_empty() {
            return Err(invalid(
                key,
                "expected a comma-separated list, got an empty value",
            ));
        }
        Ok(Some(items))
    }

    /// Upstream's `key=value,key2=value2,key3` list; a bare key maps to "".
    pub(crate) fn key_values(&self, key: &str) -> Result<BTreeMap<String, String>, CloudError> {
        let Some(v) = self.get(key) else {
            return Ok(BTreeMap::new());
        };
        let pairs = key_value_pairs(v).map_err(|item| {
            invalid(
                key,
                format!("expected key=value pairs separated by commas, got `{item}` without a key"),
            )
        })?;
        Ok(pairs
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect())
    }
}

/// The trimmed `(key, value)` pairs of `key=value,key2=value2,key3`, blank
/// items dropped; `Err(the item)` for an item without a key.
fn key_value_pairs(v: &str) -> Result<Vec<(&str, &str)>, &str> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|item| {
            let (k, value) = item.split_once('=').unwrap_or((item, ""));
            let k = k.trim();
            if k.is_empty() {
                Err(item)
            } else {
                Ok((k, value.trim()))
            }
        })
        .collect()
}

/// Whether `node_labels` carry every `wanted` label (`""` matches any value).
pub(crate) fn labels_match(
    wanted: &BTreeMap<String, String>,
    node_labels: Option<&BTreeMap<String, String>>,
) -> bool {
    let empty = BTreeMap::new();
    let labels = node_labels.unwrap_or(&empty);
    wanted
        .iter()
        .all(|(k, v)| labels.get(k).is_some_and(|have| v.is_empty() || have == v))
}

/// AWS's limits on user tags: checked before any call so a bad tag is the
/// Service's problem, not a failed create.
pub(crate) fn check_tags(key: &str, tags: &BTreeMap<String, String>) -> Result<(), CloudError> {
    for (k, v) in tags {
        if k.len() > 128 || v.len() > 256 {
            return Err(invalid(
                key,
                format!("tag `{k}` is too long (keys up to 128 characters, values up to 256)"),
            ));
        }
        if k.to_ascii_lowercase().starts_with("aws:") {
            return Err(invalid(
                key,
                format!("tag `{k}` uses the reserved aws: prefix"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn key_values_accept_upstreams_forms() {
        let raw = map(&[(
            ADDITIONAL_RESOURCE_TAGS,
            "Key1=Val1, Key2=Val2,KeyNoVal1=,KeyNoVal2",
        )]);
        let out = Annotations(&raw)
            .key_values(ADDITIONAL_RESOURCE_TAGS)
            .expect("valid");
        assert_eq!(
            out,
            map(&[
                ("Key1", "Val1"),
                ("Key2", "Val2"),
                ("KeyNoVal1", ""),
                ("KeyNoVal2", "")
            ])
        );
    }

    #[test]
    fn key_values_without_a_key_are_invalid_and_name_the_annotation() {
        let raw = map(&[(TARGET_NODE_LABELS, "a=b,=c")]);
        let err = Annotations(&raw)
            .key_values(TARGET_NODE_LABELS)
            .unwrap_err();
        assert!(
            matches!(&err, CloudError::InvalidInput { field, message } if field == TARGET_NODE_LABELS && message.contains("key=value")),
            "{err}"
        );
    }

    #[test]
    fn integers_are_range_checked() {
        let raw = map(&[(HEALTHCHECK_INTERVAL, "3"), (HEALTHCHECK_TIMEOUT, "ten")]);
        let a = Annotations(&raw);
        let err = a.int(HEALTHCHECK_INTERVAL, 5..=300).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "invalid {HEALTHCHECK_INTERVAL}: expected a whole number from 5 to 300, got `3`"
            )
        );
        assert!(a.int(HEALTHCHECK_TIMEOUT, 2..=120).is_err());
        assert_eq!(
            a.int(HEALTHCHECK_PORT, 1..=65535).expect("absent is fine"),
            None
        );
    }

    #[test]
    fn booleans_use_go_spellings() {
        let raw = map(&[
            (CROSS_ZONE_LOAD_BALANCING_ENABLED, "True"),
            (INTERNAL, "yes"),
        ]);
        let a = Annotations(&raw);
        assert_eq!(
            a.bool(CROSS_ZONE_LOAD_BALANCING_ENABLED).expect("valid"),
            Some(true)
        );
        assert!(a.bool(INTERNAL).is_err());
    }

    #[test]
    fn lists_drop_blanks_but_must_not_be_empty() {
        let raw = map(&[(SUBNETS, " subnet-1, ,subnet-2 "), (EIP_ALLOCATIONS, " , ")]);
        let a = Annotations(&raw);
        assert_eq!(
            a.list(SUBNETS).expect("valid"),
            Some(vec!["subnet-1", "subnet-2"])
        );
        assert!(a.list(EIP_ALLOCATIONS).is_err());
    }

    #[test]
    fn target_labels_match_keys_and_optional_values() {
        let wanted = map(&[("pool", "web"), ("lb", "")]);
        assert!(labels_match(
            &wanted,
            Some(&map(&[("pool", "web"), ("lb", "x")]))
        ));
        assert!(!labels_match(
            &wanted,
            Some(&map(&[("pool", "db"), ("lb", "x")]))
        ));
        assert!(!labels_match(&wanted, Some(&map(&[("pool", "web")]))));
        assert!(!labels_match(&wanted, None));
        assert!(labels_match(&BTreeMap::new(), None));
    }

    #[test]
    fn reserved_or_long_tags_are_refused() {
        assert!(check_tags(ADDITIONAL_RESOURCE_TAGS, &map(&[("aws:owner", "x")])).is_err());
        let long = "k".repeat(129);
        assert!(check_tags(ADDITIONAL_RESOURCE_TAGS, &map(&[(long.as_str(), "x")])).is_err());
        assert!(check_tags(ADDITIONAL_RESOURCE_TAGS, &map(&[("team", "web")])).is_ok());
    }
}
