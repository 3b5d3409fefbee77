//! `aws-load-balancer-target-group-attributes`: attributes every target
//! group of the Service's Network Load Balancer gets
//! (`key=value,key2=value2`), as upstream's
//! `reconcileTargetGroupsAttributes` sets them.
//!
//! Each key must be a target group attribute of a Network Load Balancer,
//! and each value of its form, or the Service is refused with nothing sent
//! (upstream skips keys AWS does not list for the group; a key nobody
//! honours must not pass silently here). As upstream, an attribute the
//! annotation names wins over `aws-load-balancer-proxy-protocol`, and an
//! attribute the annotation stops naming keeps its last value.

use std::collections::BTreeMap;

use ccm_cloud_provider::CloudError;

use super::{self as key, Annotations, invalid};

/// PROXY protocol v2 towards the targets.
pub(crate) const PROXY_PROTOCOL_V2: &str = "proxy_protocol_v2.enabled";

/// The form of one attribute's value.
#[derive(Debug, Clone, Copy)]
enum Form {
    Bool,
    /// A whole number in the range.
    Int(u32, u32),
    OneOf(&'static [&'static str]),
    /// `off`, or a whole number in the range.
    OffOr(u32, u32),
}

/// The target group attributes of a Network Load Balancer (ELBv2's
/// `ModifyTargetGroupAttributes`), with their forms.
const KNOWN: &[(&str, Form)] = &[
    ("deregistration_delay.timeout_seconds", Form::Int(0, 3600)),
    (
        "deregistration_delay.connection_termination.enabled",
        Form::Bool,
    ),
    ("preserve_client_ip.enabled", Form::Bool),
    (PROXY_PROTOCOL_V2, Form::Bool),
    ("stickiness.enabled", Form::Bool),
    ("stickiness.type", Form::OneOf(&["source_ip"])),
    (
        "load_balancing.cross_zone.enabled",
        Form::OneOf(&["true", "false", "use_load_balancer_configuration"]),
    ),
    (
        "target_health_state.unhealthy.connection_termination.enabled",
        Form::Bool,
    ),
    (
        "target_health_state.unhealthy.draining_interval_seconds",
        Form::Int(0, 360_000),
    ),
    (
        "target_group_health.dns_failover.minimum_healthy_targets.count",
        Form::OffOr(1, 1_000_000),
    ),
    (
        "target_group_health.dns_failover.minimum_healthy_targets.percentage",
        Form::OffOr(1, 100),
    ),
    (
        "target_group_health.unhealthy_state_routing.minimum_healthy_targets.count",
        Form::Int(1, 1_000_000),
    ),
    (
        "target_group_health.unhealthy_state_routing.minimum_healthy_targets.percentage",
        Form::OffOr(1, 100),
    ),
];

impl Form {
    fn accepts(self, value: &str) -> bool {
        let in_range =
            |lo: u32, hi: u32| value.parse::<u32>().is_ok_and(|n| (lo..=hi).contains(&n));
        match self {
            Self::Bool => matches!(value, "true" | "false"),
            Self::Int(lo, hi) => in_range(lo, hi),
            Self::OneOf(values) => values.contains(&value),
            Self::OffOr(lo, hi) => value == "off" || in_range(lo, hi),
        }
    }

    fn expected(self) -> String {
        match self {
            Self::Bool => "true or false".to_owned(),
            Self::Int(lo, hi) => format!("a whole number from {lo} to {hi}"),
            Self::OneOf(values) => values.join(" or "),
            Self::OffOr(lo, hi) => format!("off or a whole number from {lo} to {hi}"),
        }
    }
}

/// The attributes the annotation asks for, checked.
///
/// # Errors
/// [`CloudError::InvalidInput`] for the annotation, naming the first key
/// that is not an attribute or value not of its form.
pub(crate) fn from_annotation(a: &Annotations<'_>) -> Result<BTreeMap<String, String>, CloudError> {
    let asked = a.key_values(key::TARGET_GROUP_ATTRIBUTES)?;
    for (name, value) in &asked {
        let Some((_, form)) = KNOWN.iter().find(|(known, _)| known == name) else {
            let names: Vec<&str> = KNOWN.iter().map(|(n, _)| *n).collect();
            return Err(invalid(
                key::TARGET_GROUP_ATTRIBUTES,
                format!(
                    "`{name}` is not a target group attribute of a Network Load Balancer \
                     (known: {})",
                    names.join(", ")
                ),
            ));
        };
        if !form.accepts(value) {
            return Err(invalid(
                key::TARGET_GROUP_ATTRIBUTES,
                format!("`{name}` must be {}, not `{value}`", form.expected()),
            ));
        }
    }
    Ok(asked)
}

/// What every target group of the Service should have: PROXY protocol as
/// `proxy_protocol` says, then the annotation's attributes over it.
pub(crate) fn desired(
    proxy_protocol: bool,
    annotated: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut want = BTreeMap::from([(PROXY_PROTOCOL_V2.to_owned(), proxy_protocol.to_string())]);
    want.extend(annotated.iter().map(|(k, v)| (k.clone(), v.clone())));
    want
}

/// Whether `value` is of a known attribute's form: for the annotation
/// schema's check, which sees the whole value.
pub(crate) fn is_valid_annotation(value: &str) -> bool {
    let raw = BTreeMap::from([(key::TARGET_GROUP_ATTRIBUTES.to_owned(), value.to_owned())]);
    from_annotation(&Annotations(&raw)).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(value: &str) -> Result<BTreeMap<String, String>, String> {
        let raw = BTreeMap::from([(key::TARGET_GROUP_ATTRIBUTES.to_owned(), value.to_owned())]);
        from_annotation(&Annotations(&raw)).map_err(|e| e.to_string())
    }

    #[test]
    fn known_attributes_of_their_form_are_accepted() {
        let asked = parse(
            "preserve_client_ip.enabled=false, deregistration_delay.timeout_seconds=30,\
             target_group_health.dns_failover.minimum_healthy_targets.percentage=off",
        )
        .expect("valid");
        assert_eq!(asked.len(), 3);
        assert_eq!(asked["deregistration_delay.timeout_seconds"], "30");
        assert_eq!(parse("").expect("valid"), BTreeMap::new());
    }

    #[test]
    fn an_unknown_attribute_or_a_value_of_the_wrong_form_is_refused() {
        let prefix = format!("invalid {}: ", key::TARGET_GROUP_ATTRIBUTES);
        let cases = [
            (
                "preserve_client_ip.enabled=yes",
                "`preserve_client_ip.enabled` must be true or false, not `yes`",
            ),
            (
                "deregistration_delay.timeout_seconds=3601",
                "`deregistration_delay.timeout_seconds` must be a whole number from 0 to 3600, not `3601`",
            ),
            (
                "stickiness.type=lb_cookie",
                "`stickiness.type` must be source_ip, not `lb_cookie`",
            ),
        ];
        for (value, message) in cases {
            assert_eq!(parse(value), Err(format!("{prefix}{message}")), "{value}");
        }
        let unknown = parse("slow_start.duration_seconds=30").unwrap_err();
        assert!(
            unknown.starts_with(&format!(
                "{prefix}`slow_start.duration_seconds` is not a target group attribute of a \
                 Network Load Balancer (known: deregistration_delay.timeout_seconds, "
            )),
            "{unknown}"
        );
        assert!(!is_valid_annotation("proxy_protocol_v2.enabled=1"));
        assert!(is_valid_annotation("proxy_protocol_v2.enabled=true"));
    }

    #[test]
    fn the_annotation_wins_over_the_proxy_protocol_annotation() {
        let annotated = BTreeMap::from([
            (PROXY_PROTOCOL_V2.to_owned(), "false".to_owned()),
            ("preserve_client_ip.enabled".to_owned(), "false".to_owned()),
        ]);
        let want = desired(true, &annotated);
        assert_eq!(want[PROXY_PROTOCOL_V2], "false");
        assert_eq!(want.len(), 2);
        assert_eq!(desired(true, &BTreeMap::new())[PROXY_PROTOCOL_V2], "true");
    }
}
