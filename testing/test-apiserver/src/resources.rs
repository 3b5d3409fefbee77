//! The resource types this server serves, as discovery describes them.

/// Which kind of object a resource holds; kind-specific rules key on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    Namespace,
    Node,
    Service,
    Endpoints,
    ConfigMap,
    Secret,
    Event,
    Pod,
    PersistentVolume,
    Lease,
    EventV1,
    EndpointSlice,
    ServiceAccount,
    Role,
    ClusterRole,
    RoleBinding,
    ClusterRoleBinding,
    CertificateSigningRequest,
    ValidatingWebhookConfiguration,
}

/// One REST resource: where it lives in the URL space and how it is stored.
#[derive(Debug)]
pub(crate) struct ResourceType {
    pub(crate) kind_id: Kind,
    pub(crate) group: &'static str,
    pub(crate) version: &'static str,
    pub(crate) kind: &'static str,
    pub(crate) plural: &'static str,
    pub(crate) singular: &'static str,
    pub(crate) short_names: &'static [&'static str],
    pub(crate) namespaced: bool,
    /// Subresources besides the main resource (`status`, `finalize`).
    pub(crate) subresources: &'static [&'static str],
    /// The collection holding its objects. Two resources share one when
    /// Kubernetes serves one storage through two API versions
    /// (core/v1 and events.k8s.io/v1 Events).
    pub(crate) storage: usize,
}

impl ResourceType {
    /// `v1` or `group/version`.
    pub(crate) fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_owned()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `nodes` or `leases.coordination.k8s.io`, as Kubernetes names them in messages.
    pub(crate) fn qualified_plural(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_owned()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// Whether `.status` is written only through the `status` subresource.
    pub(crate) fn has_status(&self) -> bool {
        self.subresources.contains(&"status")
    }

    /// The resource whose representation the storage holds.
    pub(crate) fn storage_type(&self) -> &'static ResourceType {
        match self.kind_id {
            Kind::EventV1 => by_kind(Kind::Event),
            _ => by_kind(self.kind_id),
        }
    }
}

/// The verbs every resource supports, as discovery lists them.
pub(crate) const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// How many collections the store keeps.
pub(crate) const STORAGE_COUNT: usize = 18;

#[allow(
    clippy::too_many_arguments,
    reason = "one argument per column of the resource table below"
)]
const fn resource(
    kind_id: Kind,
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    singular: &'static str,
    short_names: &'static [&'static str],
    namespaced: bool,
    subresources: &'static [&'static str],
    storage: usize,
) -> ResourceType {
    ResourceType {
        kind_id,
        group,
        version,
        kind,
        plural,
        singular,
        short_names,
        namespaced,
        subresources,
        storage,
    }
}

/// Every resource served, in discovery order.
#[rustfmt::skip]
pub(crate) static RESOURCES: [ResourceType; 19] = [
    resource(Kind::Namespace, "", "v1", "Namespace", "namespaces", "namespace", &["ns"], false, &["status", "finalize"], 0),
    resource(Kind::Node, "", "v1", "Node", "nodes", "node", &["no"], false, &["status"], 1),
    resource(Kind::Service, "", "v1", "Service", "services", "service", &["svc"], true, &["status"], 2),
    resource(Kind::Endpoints, "", "v1", "Endpoints", "endpoints", "endpoints", &["ep"], true, &[], 3),
    resource(Kind::ConfigMap, "", "v1", "ConfigMap", "configmaps", "configmap", &["cm"], true, &[], 4),
    resource(Kind::Secret, "", "v1", "Secret", "secrets", "secret", &[], true, &[], 5),
    resource(Kind::Event, "", "v1", "Event", "events", "event", &["ev"], true, &[], 6),
    resource(Kind::Pod, "", "v1", "Pod", "pods", "pod", &["po"], true, &["status"], 7),
    resource(Kind::PersistentVolume, "", "v1", "PersistentVolume", "persistentvolumes", "persistentvolume", &["pv"], false, &["status"], 8),
    resource(Kind::Lease, "coordination.k8s.io", "v1", "Lease", "leases", "lease", &[], true, &[], 9),
    resource(Kind::EventV1, "events.k8s.io", "v1", "Event", "events", "event", &["ev"], true, &[], 6),
    resource(Kind::EndpointSlice, "discovery.k8s.io", "v1", "EndpointSlice", "endpointslices", "endpointslice", &[], true, &[], 10),
    resource(Kind::ServiceAccount, "", "v1", "ServiceAccount", "serviceaccounts", "serviceaccount", &["sa"], true, &["token"], 11),
    resource(Kind::ClusterRoleBinding, RBAC_GROUP, "v1", "ClusterRoleBinding", "clusterrolebindings", "clusterrolebinding", &[], false, &[], 12),
    resource(Kind::ClusterRole, RBAC_GROUP, "v1", "ClusterRole", "clusterroles", "clusterrole", &[], false, &[], 13),
    resource(Kind::RoleBinding, RBAC_GROUP, "v1", "RoleBinding", "rolebindings", "rolebinding", &[], true, &[], 14),
    resource(Kind::Role, RBAC_GROUP, "v1", "Role", "roles", "role", &[], true, &[], 15),
    resource(Kind::CertificateSigningRequest, CERTIFICATES_GROUP, "v1", "CertificateSigningRequest", "certificatesigningrequests", "certificatesigningrequest", &["csr"], false, &["status", "approval"], 16),
    resource(Kind::ValidatingWebhookConfiguration, ADMISSION_GROUP, "v1", "ValidatingWebhookConfiguration", "validatingwebhookconfigurations", "validatingwebhookconfiguration", &[], false, &[], 17),
];

/// The RBAC API group.
pub(crate) const RBAC_GROUP: &str = "rbac.authorization.k8s.io";
/// The API group of certificate signing requests.
pub(crate) const CERTIFICATES_GROUP: &str = "certificates.k8s.io";
/// The API group of admission webhook configurations.
pub(crate) const ADMISSION_GROUP: &str = "admissionregistration.k8s.io";

/// A resource that only answers `create` and stores nothing: the reviews
/// of the authentication and authorization groups.
#[derive(Debug)]
pub(crate) struct ReviewType {
    pub(crate) group: &'static str,
    pub(crate) kind: &'static str,
    pub(crate) plural: &'static str,
    pub(crate) singular: &'static str,
}

/// The reviews served (cluster-scoped, version v1), in discovery order.
pub(crate) static REVIEWS: [ReviewType; 3] = [
    ReviewType {
        group: "authentication.k8s.io",
        kind: "TokenReview",
        plural: "tokenreviews",
        singular: "tokenreview",
    },
    ReviewType {
        group: "authorization.k8s.io",
        kind: "SelfSubjectAccessReview",
        plural: "selfsubjectaccessreviews",
        singular: "selfsubjectaccessreview",
    },
    ReviewType {
        group: "authorization.k8s.io",
        kind: "SubjectAccessReview",
        plural: "subjectaccessreviews",
        singular: "subjectaccessreview",
    },
];

/// The review served at `/apis/<group>/<version>/<plural>`.
pub(crate) fn review(group: &str, version: &str, plural: &str) -> Option<&'static ReviewType> {
    REVIEWS
        .iter()
        .find(|r| version == "v1" && r.group == group && r.plural == plural)
}

/// The API groups besides the core group, each with its one version, in
/// the order kube-apiserver lists them: by the group priorities of its
/// aggregator (events 17750, authentication 17700, authorization 17600,
/// certificates 17300, rbac 17000, admissionregistration 16700,
/// coordination 16500, discovery 16200).
pub(crate) const GROUPS: &[&str] = &[
    "events.k8s.io",
    "authentication.k8s.io",
    "authorization.k8s.io",
    CERTIFICATES_GROUP,
    RBAC_GROUP,
    ADMISSION_GROUP,
    "coordination.k8s.io",
    "discovery.k8s.io",
];

/// The resource served at `/api{s}/<group>/<version>/.../<plural>`.
pub(crate) fn lookup(group: &str, version: &str, plural: &str) -> Option<&'static ResourceType> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// The resources of one group version.
pub(crate) fn in_group_version<'a>(
    group: &'a str,
    version: &'a str,
) -> impl Iterator<Item = &'static ResourceType> + 'a {
    RESOURCES
        .iter()
        .filter(move |r| r.group == group && r.version == version)
}

/// The resource for `kind`.
pub(crate) fn by_kind(kind: Kind) -> &'static ResourceType {
    RESOURCES
        .iter()
        .find(|r| r.kind_id == kind)
        .unwrap_or(&RESOURCES[0])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_listed_once_and_storage_indices_fit() {
        for r in &RESOURCES {
            assert_eq!(by_kind(r.kind_id).plural, r.plural);
            assert!(r.storage < STORAGE_COUNT);
        }
        let storages: std::collections::BTreeSet<usize> =
            RESOURCES.iter().map(|r| r.storage).collect();
        assert_eq!(storages.len(), STORAGE_COUNT);
    }

    #[test]
    fn events_in_both_groups_share_core_storage() {
        let core = lookup("", "v1", "events").map(|r| r.storage);
        let v1 = lookup("events.k8s.io", "v1", "events").map(|r| r.storage);
        assert_eq!(core, v1);
        assert_eq!(by_kind(Kind::EventV1).storage_type().kind_id, Kind::Event);
    }
}
