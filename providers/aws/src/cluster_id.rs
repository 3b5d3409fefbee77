//! Which cluster this CCM serves, decided as upstream decides it
//! (`newAWSCloud2`, `awsTagging.init` and `initFromTags` in
//! cloud-provider-aws): `KubernetesClusterID` or the legacy
//! `KubernetesClusterTag` from `[Global]`; without either, the cluster tag
//! of the instance this process runs on, found through instance metadata
//! and `DescribeInstances`.
//!
//! Never `--cluster-name`: two clusters left on its default `kubernetes` in
//! one account would take each other's subnets, route tables, instances and
//! load balancers for their own. When neither the config nor the instance
//! tells the cluster, initialization fails with [`CloudError::InvalidInput`]
//! for `KubernetesClusterID`, which the app turns into exit 64 with one line
//! saying what to set.

use ccm_cloud_provider::CloudError;

use crate::api::Api;
use crate::config::AwsConfig;
use crate::metadata::Metadata;
use crate::tagging::{CLUSTER_TAG_PREFIX, ClusterTags, LEGACY_CLUSTER_TAG, ec2_tags};

/// The config key an operator sets when the instance cannot tell.
const KEY: &str = "KubernetesClusterID";

/// The cluster's identity: from the config when it names one, else read
/// from this instance's tags.
///
/// # Errors
/// [`CloudError::InvalidInput`] for `KubernetesClusterID` when the config
/// names no cluster and instance metadata does not answer, or the instance
/// carries no cluster tag or disagreeing ones; [`CloudError::Other`] when
/// `DescribeInstances` fails or does not know the instance.
pub(crate) async fn resolve(
    config: &AwsConfig,
    region: &str,
    api: &Api,
) -> Result<ClusterTags, CloudError> {
    if let Some(id) = config.cluster_id() {
        return Ok(ClusterTags::new(
            id,
            config.kubernetes_cluster_tag.is_some(),
        ));
    }
    let instance = Metadata::new(config, region)
        .map_err(|e| unset(&e.to_string()))?
        .instance_id()
        .await
        .map_err(|e| unset(&format!("this instance's cluster tag cannot be read: {e}")))?;
    let tags = instance_tags(api, &instance, region).await?;
    let borrowed = tags.iter().map(|(k, v)| (k.as_str(), v.as_str()));
    from_tags(borrowed).map_err(|why| unset(&format!("instance {instance} {why}")))
}

/// The error naming what to set, with `why` the instance cannot tell.
fn unset(why: &str) -> CloudError {
    CloudError::invalid(
        KEY,
        format!(
            "not set in [Global] of the cloud config, and {why}; set {KEY} (or the legacy \
             KubernetesClusterTag), or tag this instance {CLUSTER_TAG_PREFIX}<cluster ID>"
        ),
    )
}

/// The tags of instance `id`, owned.
async fn instance_tags(
    api: &Api,
    id: &str,
    region: &str,
) -> Result<Vec<(String, String)>, CloudError> {
    let out = api
        .call("DescribeInstances", || {
            api.ec2.describe_instances().instance_ids(id).send()
        })
        .await?;
    let instance = out
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .find(|i| i.instance_id() == Some(id))
        .ok_or_else(|| {
            CloudError::msg(format!(
                "instance {id}, named by instance metadata, is not in region {region}: \
                 set Region in [Global] of the cloud config"
            ))
        })?;
    Ok(ec2_tags(instance.tags())
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect())
}

/// The cluster an instance's `tags` name (upstream's `findClusterIDs` and
/// `awsTagging.init`): `kubernetes.io/cluster/<id>`, or the legacy
/// `KubernetesCluster=<id>`, which then also marks what the cluster
/// creates. Both may be present when they agree.
///
/// # Errors
/// What is wrong with the tags, as the end of a sentence about the
/// instance.
pub(crate) fn from_tags<'a>(
    tags: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Result<ClusterTags, String> {
    let mut current: Option<&str> = None;
    let mut legacy: Option<&str> = None;
    for (key, value) in tags {
        if let Some(id) = key.strip_prefix(CLUSTER_TAG_PREFIX) {
            match current {
                Some(seen) if seen != id => {
                    return Err(format!(
                        "carries two cluster tags, `{CLUSTER_TAG_PREFIX}{seen}` and \
                         `{CLUSTER_TAG_PREFIX}{id}`"
                    ));
                }
                _ => current = Some(id),
            }
        } else if key == LEGACY_CLUSTER_TAG {
            legacy = Some(value);
        }
    }
    let current = current.filter(|id| !id.is_empty());
    let legacy = legacy.filter(|id| !id.is_empty());
    match (legacy, current) {
        (Some(old), Some(new)) if old != new => Err(format!(
            "carries cluster tags that disagree: `{LEGACY_CLUSTER_TAG}={old}` and \
             `{CLUSTER_TAG_PREFIX}{new}`"
        )),
        (Some(old), _) => Ok(ClusterTags::new(old, true)),
        (None, Some(new)) => Ok(ClusterTags::new(new, false)),
        (None, None) => Err(format!(
            "carries no `{CLUSTER_TAG_PREFIX}<cluster ID>` or `{LEGACY_CLUSTER_TAG}` tag"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tags, and the cluster they name (its ID and whether legacy) or the
    /// complaint.
    type Case<'a> = (&'a [(&'a str, &'a str)], Result<(&'a str, bool), &'a str>);

    #[test]
    fn the_instance_tags_name_the_cluster_as_upstream_reads_them() {
        let owned = ("kubernetes.io/cluster/blue", "owned");
        let shared = ("kubernetes.io/cluster/blue", "shared");
        let legacy = ("KubernetesCluster", "blue");
        let name = ("Name", "node-1");
        let cases: &[Case<'_>] = &[
            (&[name, owned], Ok(("blue", false))),
            (&[shared], Ok(("blue", false))),
            (&[legacy, name], Ok(("blue", true))),
            (&[owned, legacy], Ok(("blue", true))),
            (
                &[owned, ("kubernetes.io/cluster/green", "owned")],
                Err(
                    "carries two cluster tags, `kubernetes.io/cluster/blue` and \
                     `kubernetes.io/cluster/green`",
                ),
            ),
            (
                &[("KubernetesCluster", "green"), owned],
                Err(
                    "carries cluster tags that disagree: `KubernetesCluster=green` and \
                     `kubernetes.io/cluster/blue`",
                ),
            ),
            (
                &[name],
                Err("carries no `kubernetes.io/cluster/<cluster ID>` or `KubernetesCluster` tag"),
            ),
            (
                &[
                    ("kubernetes.io/cluster/", "owned"),
                    ("KubernetesCluster", ""),
                ],
                Err("carries no `kubernetes.io/cluster/<cluster ID>` or `KubernetesCluster` tag"),
            ),
        ];
        for (tags, expected) in cases {
            let expected = expected
                .map(|(id, legacy)| ClusterTags::new(id, legacy))
                .map_err(str::to_owned);
            assert_eq!(from_tags(tags.iter().copied()), expected, "tags {tags:?}");
        }
    }
}
