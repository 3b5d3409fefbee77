//! The labels a node gets from its instance.

use std::collections::BTreeMap;

use ccm_cloud_provider::InstanceMetadata;
use k8s_openapi::api::core::v1::Node;

const INSTANCE_TYPE: [&str; 2] = [
    "node.kubernetes.io/instance-type",
    "beta.kubernetes.io/instance-type",
];
const ZONE: [&str; 2] = [
    "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/zone",
];
const REGION: [&str; 2] = [
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/region",
];

/// Whether `key` is in a Kubernetes-reserved namespace (`kubernetes.io/`,
/// `k8s.io/` or a subdomain of them), which providers may not set.
fn is_kubernetes_namespace(key: &str) -> bool {
    let Some((prefix, _)) = key.split_once('/') else {
        return false;
    };
    ["kubernetes.io", "k8s.io"]
        .iter()
        .any(|ns| prefix == *ns || prefix.ends_with(&format!(".{ns}")))
}

/// The labels to set on `node` so that it carries the instance's type, zone,
/// region and additional labels: only those missing or different.
///
/// As upstream: the well-known labels are always brought up to date; the
/// provider's additional labels never use a Kubernetes namespace and never
/// replace a label that is already there.
pub(crate) fn changes(node: &Node, metadata: &InstanceMetadata) -> BTreeMap<String, String> {
    let current = node.metadata.labels.as_ref();
    let value_of = |key: &str| current.and_then(|labels| labels.get(key));
    let mut changes = BTreeMap::new();
    for (keys, value) in [
        (INSTANCE_TYPE, &metadata.instance_type),
        (ZONE, &metadata.zone),
        (REGION, &metadata.region),
    ] {
        if value.is_empty() {
            continue;
        }
        for key in keys {
            if value_of(key) != Some(value) {
                changes.insert(key.to_owned(), value.clone());
            }
        }
    }
    for (key, value) in &metadata.additional_labels {
        if is_kubernetes_namespace(key) {
            tracing::warn!(label = %key, "discarding a provider label in a Kubernetes namespace");
            continue;
        }
        match value_of(key) {
            None => {
                changes.insert(key.clone(), value.clone());
            }
            Some(existing) if existing != value => {
                tracing::warn!(label = %key, "discarding a provider label that is already set differently");
            }
            Some(_) => {}
        }
    }
    changes
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn node(labels: &[(&str, &str)]) -> Node {
        let labels = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Node {
            metadata: ObjectMeta {
                labels: Some(labels),
                ..ObjectMeta::default()
            },
            ..Node::default()
        }
    }

    fn metadata() -> InstanceMetadata {
        InstanceMetadata {
            provider_id: "fake://n1".into(),
            instance_type: "m5.large".into(),
            zone: "eu-west-1a".into(),
            region: "eu-west-1".into(),
            node_addresses: Vec::new(),
            additional_labels: BTreeMap::from([
                ("topology.k8s.aws/zone-id".to_owned(), "euw1-az1".to_owned()),
                ("node.kubernetes.io/sneaky".to_owned(), "x".to_owned()),
                ("team".to_owned(), "cloud".to_owned()),
            ]),
            node_names: vec!["n1".into()],
        }
    }

    #[test]
    fn sets_ga_and_beta_labels_and_allowed_provider_labels() {
        let changes = changes(&node(&[]), &metadata());
        let keys: Vec<_> = changes.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "beta.kubernetes.io/instance-type",
                "failure-domain.beta.kubernetes.io/region",
                "failure-domain.beta.kubernetes.io/zone",
                "node.kubernetes.io/instance-type",
                "team",
                "topology.k8s.aws/zone-id",
                "topology.kubernetes.io/region",
                "topology.kubernetes.io/zone",
            ]
        );
        assert_eq!(changes["node.kubernetes.io/instance-type"], "m5.large");
    }

    #[test]
    fn only_missing_or_changed_labels_are_written() {
        let current = node(&[
            ("node.kubernetes.io/instance-type", "m5.large"),
            ("beta.kubernetes.io/instance-type", "m5.large"),
            ("topology.kubernetes.io/zone", "eu-west-1b"),
            ("failure-domain.beta.kubernetes.io/zone", "eu-west-1a"),
            ("topology.kubernetes.io/region", "eu-west-1"),
            ("failure-domain.beta.kubernetes.io/region", "eu-west-1"),
            ("team", "platform"),
            ("topology.k8s.aws/zone-id", "euw1-az1"),
        ]);
        let changes = changes(&current, &metadata());
        assert_eq!(
            changes,
            BTreeMap::from([(
                "topology.kubernetes.io/zone".to_owned(),
                "eu-west-1a".to_owned()
            )])
        );
    }

    #[test]
    fn kubernetes_namespaces_are_recognised() {
        assert!(is_kubernetes_namespace("kubernetes.io/hostname"));
        assert!(is_kubernetes_namespace("node.kubernetes.io/x"));
        assert!(is_kubernetes_namespace("foo.k8s.io/x"));
        assert!(!is_kubernetes_namespace("topology.k8s.aws/zone-id"));
        assert!(!is_kubernetes_namespace("team"));
    }
}
