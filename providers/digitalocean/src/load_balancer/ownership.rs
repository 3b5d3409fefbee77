//! Whose a load balancer is, from its tags: this Service's, another
//! Service's, another cluster's, or nobody's yet (one the Go CCM built, to
//! adopt).
//!
//! Every load balancer this provider creates carries `k8s-service:<uid>`
//! naming its Service, and `k8s:<DO_CLUSTER_ID>` when a cluster ID is set.
//! Annotations can point a Service at any load balancer; the tags decide
//! whether it may be changed.

use crate::api::types::LoadBalancer;

/// The prefix of the tag naming a load balancer's Service.
pub(crate) const SERVICE_TAG_PREFIX: &str = "k8s-service:";
/// The prefix of upstream's cluster tag, `k8s:<DO_CLUSTER_ID>`.
const CLUSTER_TAG_PREFIX: &str = "k8s:";

/// The tag naming the Service with `uid` (UIDs are letters, digits and `-`,
/// which DigitalOcean's tag names accept).
pub(crate) fn service_tag(uid: &str) -> String {
    format!("{SERVICE_TAG_PREFIX}{uid}")
}

/// Whose a load balancer is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Owner {
    /// Tagged for this Service (and not for another cluster).
    Ours,
    /// Tagged for no Service, and for no cluster but this one: a load
    /// balancer the Go CCM built, adopted by tagging it.
    Unclaimed,
    /// Tagged for another Service (its UID).
    OtherService(String),
    /// Tagged for another cluster (the tag).
    OtherCluster(String),
}

impl Owner {
    /// Whether this Service may change the load balancer.
    pub(crate) fn is_ours(&self) -> bool {
        matches!(self, Self::Ours | Self::Unclaimed)
    }

    /// Who owns it, for a message.
    pub(crate) fn describe(&self) -> String {
        match self {
            Self::Ours => "this Service".to_owned(),
            Self::Unclaimed => "no Service yet".to_owned(),
            Self::OtherService(uid) => format!("the Service with UID {uid}"),
            Self::OtherCluster(tag) => format!("another cluster (tag {tag})"),
        }
    }
}

/// Whose `lb` is, for the Service with `uid` in the cluster tagged
/// `cluster_tag` (none without `DO_CLUSTER_ID`).
pub(crate) fn owner(lb: &LoadBalancer, uid: &str, cluster_tag: Option<&str>) -> Owner {
    let foreign_cluster = lb
        .tags
        .iter()
        .find(|t| t.starts_with(CLUSTER_TAG_PREFIX) && Some(t.as_str()) != cluster_tag);
    let service = lb
        .tags
        .iter()
        .find_map(|t| t.strip_prefix(SERVICE_TAG_PREFIX));
    match (service, foreign_cluster) {
        (Some(other), _) if other != uid => Owner::OtherService(other.to_owned()),
        (_, Some(cluster)) => Owner::OtherCluster(cluster.clone()),
        (Some(_), None) => Owner::Ours,
        (None, None) => Owner::Unclaimed,
    }
}

/// Whether `lb` is the cluster's tagged `cluster_tag`: it carries that tag
/// and no other cluster's. Whether a Service's tag is there too does not
/// matter: upstream tags what it creates with the cluster tag alone.
pub(crate) fn is_clusters(lb: &LoadBalancer, cluster_tag: &str) -> bool {
    lb.tags.iter().any(|t| t == cluster_tag)
        && !lb
            .tags
            .iter()
            .any(|t| t.starts_with(CLUSTER_TAG_PREFIX) && t != cluster_tag)
}

/// The tags `lb` should carry and lacks.
pub(crate) fn missing_tags(lb: &LoadBalancer, uid: &str, cluster_tag: Option<&str>) -> Vec<String> {
    [Some(service_tag(uid)), cluster_tag.map(str::to_owned)]
        .into_iter()
        .flatten()
        .filter(|t| !lb.tags.contains(t))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lb(tags: &[&str]) -> LoadBalancer {
        serde_json::from_value(serde_json::json!({
            "id": "4de7ac8b-495b-4884-9a69-1050c6793cd6",
            "name": "a1",
            "tags": tags,
        }))
        .unwrap()
    }

    #[test]
    fn tags_decide_the_owner() {
        let ours = "k8s-service:u1";
        for (tags, cluster, want) in [
            (vec![ours], None, Owner::Ours),
            (vec![ours, "k8s:c1"], Some("k8s:c1"), Owner::Ours),
            (vec![], None, Owner::Unclaimed),
            (vec!["k8s:c1"], Some("k8s:c1"), Owner::Unclaimed),
            (vec!["web", "env:prod"], Some("k8s:c1"), Owner::Unclaimed),
            (
                vec!["k8s-service:u2"],
                None,
                Owner::OtherService("u2".into()),
            ),
            (
                vec!["k8s-service:u2", "k8s:c1"],
                Some("k8s:c1"),
                Owner::OtherService("u2".into()),
            ),
            (
                vec!["k8s:c2"],
                Some("k8s:c1"),
                Owner::OtherCluster("k8s:c2".into()),
            ),
            (vec!["k8s:c2"], None, Owner::OtherCluster("k8s:c2".into())),
            (
                vec![ours, "k8s:c2"],
                Some("k8s:c1"),
                Owner::OtherCluster("k8s:c2".into()),
            ),
        ] {
            assert_eq!(
                owner(&lb(&tags), "u1", cluster),
                want,
                "{tags:?} {cluster:?}"
            );
        }
    }

    #[test]
    fn a_load_balancer_is_the_clusters_when_tagged_for_it_and_no_other() {
        for (tags, want) in [
            (vec!["k8s-service:u1", "k8s:c1"], true),
            (vec!["k8s:c1"], true),
            (vec!["k8s-service:u1"], false),
            (vec![], false),
            (vec!["k8s:c2"], false),
            (vec!["k8s:c1", "k8s:c2"], false),
            (vec!["k8s:c10"], false),
        ] {
            assert_eq!(is_clusters(&lb(&tags), "k8s:c1"), want, "{tags:?}");
        }
    }

    #[test]
    fn missing_tags_are_the_service_and_cluster_tags_it_lacks() {
        assert_eq!(
            missing_tags(&lb(&["k8s:c1"]), "u1", Some("k8s:c1")),
            vec!["k8s-service:u1".to_owned()]
        );
        assert!(missing_tags(&lb(&["k8s-service:u1"]), "u1", None).is_empty());
        assert_eq!(missing_tags(&lb(&[]), "u1", Some("k8s:c1")).len(), 2);
    }
}
