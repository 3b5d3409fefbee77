//! Network topology labels as upstream gives them (`topology.go`'s
//! `instanceTopologyManager`, `instances_v2.go`'s `getAdditionalLabels`):
//! `topology.k8s.aws/network-node-layer-<N>` for each network node above an
//! instance, from `DescribeInstanceTopology`.
//!
//! Upstream asks once per node. This asks once per batch of up to 100
//! instances (AWS's limit on instance IDs a call), and remembers for a day
//! what has no topology, as upstream does: a region where the call is
//! unsupported or not permitted, an instance type that answered nothing,
//! or an instance that answered nothing although its type is expected to
//! (`SupportedTopologyInstanceTypePattern`). A node that already carries
//! `...-layer-1` is not asked about.
//!
//! When the call fails, a node whose instance type is expected to answer
//! fails (the node controller retries it); the others go on without the
//! labels, as upstream.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use ccm_cloud_provider::CloudError;
use parking_lot::Mutex;
use regex_lite::Regex;

use crate::api::{Api, ApiError};
use crate::config::TypePattern;

/// The labels' prefix; the layer number (from 1) follows.
pub const NETWORK_NODE_LABEL: &str = "topology.k8s.aws/network-node-layer-";

/// Upstream's `defaultSupportedTopologyInstanceTypePattern`: the instance
/// types AWS documents as having a topology.
const DEFAULT_PATTERN: &str = r"^(hpc|trn|p)[0-9]+[a-z]*(-[a-z0-9]+)?(\.[0-9a-z]*)$";

/// How long a region, type or instance without a topology is not asked
/// about again (upstream's `instanceTopologyManagerCacheTimeout`).
const FORGET_AFTER: Duration = Duration::from_secs(24 * 3600);

/// AWS's limit on instance IDs in one `DescribeInstanceTopology`.
const IDS_PER_CALL: usize = 100;

/// One instance to label.
#[derive(Debug)]
pub(crate) struct Wanted<'a> {
    pub(crate) id: &'a str,
    pub(crate) instance_type: &'a str,
}

/// The labels each asked-about instance gets, by instance ID; an instance
/// absent from the map gets none.
pub(crate) type Labels = HashMap<String, Result<BTreeMap<String, String>, CloudError>>;

/// Upstream's topology manager: the pattern, and what is known to have no
/// topology.
#[derive(Debug)]
pub(crate) struct Topology {
    expected: Regex,
    unsupported: Mutex<HashMap<String, Instant>>,
}

impl Topology {
    /// With `pattern`, or upstream's default when `None`.
    pub(crate) fn new(pattern: Option<&TypePattern>) -> Self {
        let expected = match pattern {
            Some(p) => p.regex().clone(),
            None => Regex::new(DEFAULT_PATTERN)
                .unwrap_or_else(|_| unreachable!("the default pattern is valid")),
        };
        Self {
            expected,
            unsupported: Mutex::new(HashMap::new()),
        }
    }

    fn expects_answer(&self, instance_type: &str) -> bool {
        self.expected.is_match(instance_type)
    }

    fn mark(&self, key: &str) {
        self.unsupported
            .lock()
            .insert(key.to_owned(), Instant::now() + FORGET_AFTER);
    }

    fn is_marked(&self, key: &str) -> bool {
        let mut unsupported = self.unsupported.lock();
        match unsupported.get(key) {
            Some(until) if *until > Instant::now() => true,
            Some(_) => {
                unsupported.remove(key);
                false
            }
            None => false,
        }
    }

    fn might_have_one(&self, region: &str, wanted: &Wanted<'_>) -> bool {
        // Fargate and other variants have no instance type.
        !wanted.instance_type.is_empty()
            && !self.is_marked(region)
            && !self.is_marked(wanted.id)
            && !self.is_marked(wanted.instance_type)
    }

    /// The labels of each of `wanted` in `region`.
    pub(crate) async fn labels(&self, api: &Api, region: &str, wanted: &[Wanted<'_>]) -> Labels {
        let asked: Vec<&Wanted<'_>> = wanted
            .iter()
            .filter(|w| self.might_have_one(region, w))
            .collect();
        let mut out = Labels::new();
        for chunk in asked.chunks(IDS_PER_CALL) {
            let ids = chunk.iter().map(|w| w.id.to_owned()).collect();
            match describe(api, ids).await {
                Ok(found) => {
                    for w in chunk {
                        match found.get(w.id) {
                            Some(nodes) => {
                                out.insert(w.id.to_owned(), Ok(layer_labels(nodes)));
                            }
                            None if self.expects_answer(w.instance_type) => self.mark(w.id),
                            None => self.mark(w.instance_type),
                        }
                    }
                }
                Err(e) if e.is("UnsupportedOperation") || e.is("UnauthorizedOperation") => {
                    tracing::warn!(region, error = %e, "no network topology labels in this region for a day");
                    self.mark(region);
                    break;
                }
                Err(e) => {
                    let err = CloudError::from(e);
                    tracing::warn!(error = %err, "network topology unknown for {} instances", chunk.len());
                    for w in chunk
                        .iter()
                        .filter(|w| self.expects_answer(w.instance_type))
                    {
                        out.insert(w.id.to_owned(), Err(err.clone()));
                    }
                }
            }
        }
        out
    }
}

/// The network nodes above each of `ids` that AWS knows a topology for.
async fn describe(api: &Api, ids: Vec<String>) -> Result<HashMap<String, Vec<String>>, ApiError> {
    let topologies = api
        .paged(
            "DescribeInstanceTopology",
            |token| {
                api.ec2
                    .describe_instance_topology()
                    .set_instance_ids(Some(ids.clone()))
                    .set_next_token(token)
                    .send()
            },
            |page| {
                (
                    page.instances().to_vec(),
                    page.next_token().map(str::to_owned),
                )
            },
        )
        .await?;
    Ok(topologies
        .into_iter()
        .filter_map(|t| Some((t.instance_id()?.to_owned(), t.network_nodes().to_vec())))
        .collect())
}

/// `...-layer-1` for the first network node, and so on.
fn layer_labels(nodes: &[String]) -> BTreeMap<String, String> {
    nodes
        .iter()
        .enumerate()
        .map(|(i, node)| (format!("{NETWORK_NODE_LABEL}{}", i + 1), node.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstreams_default_pattern_expects_the_documented_types() {
        let topology = Topology::new(None);
        for t in [
            "p4d.24xlarge",
            "p5.48xlarge",
            "trn1.32xlarge",
            "hpc7g.16xlarge",
            "p5e.48xlarge",
        ] {
            assert!(topology.expects_answer(t), "{t}");
        }
        for t in ["m5.large", "c7g.xlarge", "", "p4d"] {
            assert!(!topology.expects_answer(t), "{t}");
        }
        let own = TypePattern::new("^m5\\.").expect("valid");
        assert!(Topology::new(Some(&own)).expects_answer("m5.large"));
        assert!(TypePattern::new("^(p").is_err());
    }

    #[test]
    fn layers_are_numbered_from_one_in_order() {
        let labels = layer_labels(&["nn-a".into(), "nn-b".into(), "nn-c".into()]);
        assert_eq!(
            labels,
            BTreeMap::from([
                (
                    "topology.k8s.aws/network-node-layer-1".to_owned(),
                    "nn-a".to_owned()
                ),
                (
                    "topology.k8s.aws/network-node-layer-2".to_owned(),
                    "nn-b".to_owned()
                ),
                (
                    "topology.k8s.aws/network-node-layer-3".to_owned(),
                    "nn-c".to_owned()
                ),
            ])
        );
    }
}
