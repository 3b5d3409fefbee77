//! Cluster ownership tags, as upstream writes and reads them.
//!
//! Everything the provider creates carries `kubernetes.io/cluster/<id>=owned`
//! (and the legacy `KubernetesCluster=<id>` when the config uses the legacy
//! key); load-balancer resources also carry
//! `kubernetes.io/service-name=<namespace>/<name>`.

use std::collections::BTreeMap;

/// The prefix of the cluster tag key.
pub const CLUSTER_TAG_PREFIX: &str = "kubernetes.io/cluster/";
/// The legacy cluster tag key; its value is the cluster ID.
pub const LEGACY_CLUSTER_TAG: &str = "KubernetesCluster";
/// The tag naming the Service a load-balancer resource belongs to.
pub const SERVICE_NAME_TAG: &str = "kubernetes.io/service-name";
/// Marks a subnet for internet-facing load balancers.
pub const ROLE_ELB_TAG: &str = "kubernetes.io/role/elb";
/// Marks a subnet for internal load balancers.
pub const ROLE_INTERNAL_ELB_TAG: &str = "kubernetes.io/role/internal-elb";
/// The cluster tag value for resources whose life the cluster owns.
pub const OWNED: &str = "owned";

/// The cluster's identity in tags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClusterTags {
    id: String,
    legacy: bool,
}

impl ClusterTags {
    /// Tags for cluster `id`; `legacy` also writes `KubernetesCluster`.
    pub(crate) fn new(id: impl Into<String>, legacy: bool) -> Self {
        Self {
            id: id.into(),
            legacy,
        }
    }

    /// The cluster ID.
    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    /// `kubernetes.io/cluster/<id>`.
    pub(crate) fn key(&self) -> String {
        format!("{CLUSTER_TAG_PREFIX}{}", self.id)
    }

    /// Whether `tags` mark a resource as this cluster's, owned or shared.
    pub(crate) fn is_tagged<'a>(&self, tags: impl IntoIterator<Item = (&'a str, &'a str)>) -> bool {
        let key = self.key();
        tags.into_iter()
            .any(|(k, v)| k == key || (k == LEGACY_CLUSTER_TAG && v == self.id))
    }

    /// Whether `tags` mark a resource as owned by this cluster.
    pub(crate) fn is_owned<'a>(&self, tags: impl IntoIterator<Item = (&'a str, &'a str)>) -> bool {
        let key = self.key();
        tags.into_iter()
            .any(|(k, v)| (k == key && v == OWNED) || (k == LEGACY_CLUSTER_TAG && v == self.id))
    }

    /// Whether `tags` mark a load-balancer resource as owned by this cluster
    /// for `service` (`namespace/name`).
    pub(crate) fn is_owned_for_service<'a>(
        &self,
        tags: impl IntoIterator<Item = (&'a str, &'a str)> + Clone,
        service: &str,
    ) -> bool {
        self.is_owned(tags.clone())
            && tags
                .into_iter()
                .any(|(k, v)| k == SERVICE_NAME_TAG && v == service)
    }

    /// The tags for a resource this cluster creates for `service`, on top of
    /// the user's `additional` tags (which cannot override ownership).
    pub(crate) fn owned_for_service(
        &self,
        service: &str,
        additional: &BTreeMap<String, String>,
    ) -> BTreeMap<String, String> {
        let mut tags = additional.clone();
        tags.insert(SERVICE_NAME_TAG.to_owned(), service.to_owned());
        if self.legacy {
            tags.insert(LEGACY_CLUSTER_TAG.to_owned(), self.id.clone());
        }
        tags.insert(self.key(), OWNED.to_owned());
        tags
    }
}

/// Whether `tags` carry any cluster's tag (upstream's subnet filter keeps
/// subnets tagged for this cluster or for none).
pub(crate) fn has_any_cluster_tag<'a>(tags: impl IntoIterator<Item = (&'a str, &'a str)>) -> bool {
    tags.into_iter()
        .any(|(k, _)| k.starts_with(CLUSTER_TAG_PREFIX))
}

/// `(key, value)` pairs of EC2 tags.
pub(crate) fn ec2_tags(
    tags: &[aws_sdk_ec2::types::Tag],
) -> impl Iterator<Item = (&str, &str)> + Clone {
    tags.iter()
        .map(|t| (t.key().unwrap_or_default(), t.value().unwrap_or_default()))
}

/// `(key, value)` pairs of ELBv2 tags.
pub(crate) fn elbv2_tags(
    tags: &[aws_sdk_elasticloadbalancingv2::types::Tag],
) -> impl Iterator<Item = (&str, &str)> + Clone {
    tags.iter()
        .map(|t| (t.key().unwrap_or_default(), t.value().unwrap_or_default()))
}

/// Classic ELB tags as `(key, value)` pairs.
pub(crate) fn elb_tags(
    tags: &[aws_sdk_elasticloadbalancing::types::Tag],
) -> impl Iterator<Item = (&str, &str)> + Clone {
    tags.iter()
        .map(|t| (t.key(), t.value().unwrap_or_default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owned_tags_carry_cluster_and_service_and_cannot_be_overridden() {
        let tags = ClusterTags::new("c1", false);
        let extra = BTreeMap::from([
            ("team".to_owned(), "web".to_owned()),
            ("kubernetes.io/cluster/c1".to_owned(), "shared".to_owned()),
        ]);
        let out = tags.owned_for_service("default/web", &extra);
        assert_eq!(out["kubernetes.io/cluster/c1"], "owned");
        assert_eq!(out["kubernetes.io/service-name"], "default/web");
        assert_eq!(out["team"], "web");
        assert!(!out.contains_key(LEGACY_CLUSTER_TAG));
    }

    #[test]
    fn legacy_clusters_also_write_the_legacy_tag() {
        let out = ClusterTags::new("c1", true).owned_for_service("ns/a", &BTreeMap::new());
        assert_eq!(out[LEGACY_CLUSTER_TAG], "c1");
    }

    #[test]
    fn ownership_checks_cluster_value_and_service() {
        let tags = ClusterTags::new("c1", false);
        let owned = [
            ("kubernetes.io/cluster/c1", "owned"),
            (SERVICE_NAME_TAG, "ns/a"),
        ];
        assert!(tags.is_owned_for_service(owned, "ns/a"));
        assert!(!tags.is_owned_for_service(owned, "ns/b"));
        let shared = [("kubernetes.io/cluster/c1", "shared")];
        assert!(tags.is_tagged(shared));
        assert!(!tags.is_owned(shared));
        assert!(!tags.is_tagged([("kubernetes.io/cluster/c2", "owned")]));
        assert!(tags.is_owned([(LEGACY_CLUSTER_TAG, "c1")]));
    }
}
