//! Which list fields strategic merge patch merges, and by which key: the
//! `patchStrategy`/`patchMergeKey` tags of the Kubernetes API types for
//! every kind served, as kube-apiserver v1.35's and v1.37's OpenAPI show
//! them (1.37 adds tags only to Pod fields newer than 1.35, which this
//! server does not keep, such as `spec.evictionResponders`). A list field
//! not listed here is atomic in Kubernetes too (`spec.taints`,
//! `status.loadBalancer.ingress`, Endpoints `subsets`): a patch replaces it
//! whole.

use crate::resources::Kind;

/// How strategic merge patch combines a list field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListStrategy {
    /// Items are maps merged by this key; new items are appended.
    MergeByKey(&'static str),
    /// Items are scalars; the result is the union, original order first.
    MergeScalars,
}

use ListStrategy::{MergeByKey, MergeScalars};

/// Paths use `.` between fields and `[]` for "any item of the list".
const METADATA: &[(&str, ListStrategy)] = &[
    ("metadata.finalizers", MergeScalars),
    ("metadata.ownerReferences", MergeByKey("uid")),
];

const NODE: &[(&str, ListStrategy)] = &[
    ("spec.podCIDRs", MergeScalars),
    ("status.conditions", MergeByKey("type")),
    ("status.addresses", MergeByKey("type")),
];

const SERVICE: &[(&str, ListStrategy)] = &[
    ("spec.ports", MergeByKey("port")),
    ("status.conditions", MergeByKey("type")),
];

const NAMESPACE: &[(&str, ListStrategy)] = &[("status.conditions", MergeByKey("type"))];

const SERVICE_ACCOUNT: &[(&str, ListStrategy)] = &[("secrets", MergeByKey("name"))];

const WEBHOOK_CONFIGURATION: &[(&str, ListStrategy)] = &[
    ("webhooks", MergeByKey("name")),
    ("webhooks[].matchConditions", MergeByKey("name")),
];

const POD: &[(&str, ListStrategy)] = &[
    ("spec.volumes", MergeByKey("name")),
    ("spec.initContainers", MergeByKey("name")),
    ("spec.containers", MergeByKey("name")),
    ("spec.ephemeralContainers", MergeByKey("name")),
    ("spec.imagePullSecrets", MergeByKey("name")),
    ("spec.hostAliases", MergeByKey("ip")),
    ("spec.topologySpreadConstraints", MergeByKey("topologyKey")),
    ("spec.schedulingGates", MergeByKey("name")),
    ("spec.resourceClaims", MergeByKey("name")),
    ("status.conditions", MergeByKey("type")),
    ("status.podIPs", MergeByKey("ip")),
    ("status.hostIPs", MergeByKey("ip")),
    ("status.resourceClaimStatuses", MergeByKey("name")),
];

/// Lists inside every container of a Pod.
const CONTAINER: &[(&str, ListStrategy)] = &[
    ("ports", MergeByKey("containerPort")),
    ("env", MergeByKey("name")),
    ("volumeMounts", MergeByKey("mountPath")),
    ("volumeDevices", MergeByKey("devicePath")),
];

/// Lists inside every container status of a Pod.
const CONTAINER_STATUS: &[(&str, ListStrategy)] = &[
    ("volumeMounts", MergeByKey("mountPath")),
    ("allocatedResourcesStatus", MergeByKey("name")),
];

const CONTAINER_LISTS: &[&str] = &[
    "spec.initContainers[].",
    "spec.containers[].",
    "spec.ephemeralContainers[].",
];
const CONTAINER_STATUS_LISTS: &[&str] = &[
    "status.initContainerStatuses[].",
    "status.containerStatuses[].",
    "status.ephemeralContainerStatuses[].",
];

/// The strategy of the list at `path` in an object of `kind`; `None` for atomic lists.
pub(crate) fn list_strategy(kind: Kind, path: &str) -> Option<ListStrategy> {
    let own: &[(&str, ListStrategy)] = match kind {
        Kind::Node => NODE,
        Kind::Service => SERVICE,
        Kind::Namespace => NAMESPACE,
        Kind::Pod => POD,
        Kind::ServiceAccount => SERVICE_ACCOUNT,
        Kind::ValidatingWebhookConfiguration => WEBHOOK_CONFIGURATION,
        _ => &[],
    };
    if let Some(found) = METADATA.iter().chain(own).find(|(p, _)| *p == path) {
        return Some(found.1);
    }
    if kind == Kind::Pod {
        let nested = |prefixes: &[&str], fields: &[(&str, ListStrategy)]| {
            prefixes.iter().find_map(|prefix| {
                let rest = path.strip_prefix(prefix)?;
                fields.iter().find(|(p, _)| *p == rest).map(|f| f.1)
            })
        };
        return nested(CONTAINER_LISTS, CONTAINER)
            .or_else(|| nested(CONTAINER_STATUS_LISTS, CONTAINER_STATUS));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ccm_fields_follow_the_kubernetes_tags() {
        assert_eq!(
            list_strategy(Kind::ServiceAccount, "secrets"),
            Some(MergeByKey("name"))
        );
        assert_eq!(list_strategy(Kind::ClusterRole, "rules"), None);
        assert_eq!(
            list_strategy(Kind::Node, "status.conditions"),
            Some(MergeByKey("type"))
        );
        assert_eq!(
            list_strategy(Kind::Node, "status.addresses"),
            Some(MergeByKey("type"))
        );
        assert_eq!(
            list_strategy(Kind::Node, "metadata.finalizers"),
            Some(MergeScalars)
        );
        assert_eq!(
            list_strategy(Kind::Node, "spec.taints"),
            None,
            "taints are atomic in k8s.io/api"
        );
        assert_eq!(
            list_strategy(Kind::Service, "status.loadBalancer.ingress"),
            None
        );
        assert_eq!(
            list_strategy(Kind::Service, "spec.ports"),
            Some(MergeByKey("port"))
        );
        assert_eq!(
            list_strategy(Kind::ValidatingWebhookConfiguration, "webhooks"),
            Some(MergeByKey("name"))
        );
        assert_eq!(
            list_strategy(
                Kind::ValidatingWebhookConfiguration,
                "webhooks[].matchConditions"
            ),
            Some(MergeByKey("name"))
        );
        assert_eq!(
            list_strategy(Kind::ValidatingWebhookConfiguration, "webhooks[].rules"),
            None
        );
    }

    #[test]
    fn container_lists_merge_inside_every_container_list() {
        assert_eq!(
            list_strategy(Kind::Pod, "spec.initContainers[].env"),
            Some(MergeByKey("name"))
        );
        assert_eq!(
            list_strategy(Kind::Pod, "status.containerStatuses[].volumeMounts"),
            Some(MergeByKey("mountPath"))
        );
        assert_eq!(
            list_strategy(Kind::ConfigMap, "spec.containers[].env"),
            None
        );
    }
}
