//! The IPv6 prefix delegated to each node's network interface, as pod CIDR
//! (upstream's `nodeipam` controller): one `DescribeNetworkInterfaces`
//! filtered on `attachment.instance-id` with up to [`FILTER_VALUES`]
//! instances, where upstream makes one call per node.
//!
//! An instance's primary interface (device index 0, or its only one) must
//! carry exactly one IPv6 prefix, as upstream requires; none or several is
//! an error for that node alone, retried by the controller.

use std::collections::HashMap;
use std::num::NonZeroUsize;

use async_trait::async_trait;
use aws_sdk_ec2::types::NetworkInterface;
use ccm_cloud_provider::ipnet::IpNet;
use ccm_cloud_provider::{BatchResult, CloudError, PodCidr, PodCidrs};

use crate::api::ApiError;
use crate::instances::lookup::{FILTER_VALUES, filter};
use crate::provider::{AwsProvider, Cloud};
use crate::provider_id;

impl Cloud {
    /// The network interfaces attached to `ids`, by instance ID.
    async fn interfaces_by_instance(
        &self,
        ids: &[&str],
    ) -> Result<HashMap<String, Vec<NetworkInterface>>, ApiError> {
        let mut out: HashMap<String, Vec<NetworkInterface>> = HashMap::new();
        for chunk in ids.chunks(FILTER_VALUES) {
            let filters = vec![filter("attachment.instance-id", chunk)];
            let interfaces = self
                .api
                .paged(
                    "DescribeNetworkInterfaces",
                    |token| {
                        self.api
                            .ec2
                            .describe_network_interfaces()
                            .set_filters(Some(filters.clone()))
                            .set_next_token(token)
                            .send()
                    },
                    |page| {
                        (
                            page.network_interfaces().to_vec(),
                            page.next_token().map(str::to_owned),
                        )
                    },
                )
                .await?;
            for interface in interfaces {
                let instance = interface
                    .attachment()
                    .and_then(|a| a.instance_id())
                    .unwrap_or_default()
                    .to_owned();
                out.entry(instance).or_default().push(interface);
            }
        }
        Ok(out)
    }

    async fn pod_cidrs_of(&self, provider_ids: &[String]) -> BatchResult<PodCidr> {
        let ids: Vec<Result<&str, String>> = provider_ids
            .iter()
            .map(|p| provider_id::instance_id(p).map_err(|e| e.to_string()))
            .collect();
        let wanted: Vec<&str> = ids
            .iter()
            .filter_map(|id| id.as_ref().ok().copied())
            .collect();
        let mut found = self.interfaces_by_instance(&wanted).await?;
        Ok(ids
            .into_iter()
            .map(|id| match id {
                Err(reason) => Ok(PodCidr::NotApplicable(reason)),
                Ok(id) => match found.remove(id) {
                    None => Ok(PodCidr::NotFound),
                    Some(interfaces) => prefix_of(id, &interfaces).map(PodCidr::Prefix),
                },
            })
            .collect())
    }
}

/// The one IPv6 prefix on the instance's primary interface.
fn prefix_of(instance: &str, interfaces: &[NetworkInterface]) -> Result<IpNet, CloudError> {
    let primary = interfaces
        .iter()
        .find(|i| i.attachment().and_then(|a| a.device_index()) == Some(0))
        .or(match interfaces {
            [only] => Some(only),
            _ => None,
        })
        .ok_or_else(|| {
            CloudError::msg(format!(
                "instance {instance} has {} network interfaces and none is its primary (device index 0)",
                interfaces.len()
            ))
        })?;
    let id = primary.network_interface_id().unwrap_or_default();
    match primary.ipv6_prefixes() {
        [one] => {
            let text = one.ipv6_prefix().unwrap_or_default();
            text.parse::<IpNet>().map_err(|_| {
                CloudError::msg(format!(
                    "network interface {id} of instance {instance} has IPv6 prefix `{text}`, which is not a CIDR"
                ))
            })
        }
        other => Err(CloudError::msg(format!(
            "unexpected amount of IPv6 prefixes on network interface {id} of instance {instance}: {} (expected 1)",
            other.len()
        ))),
    }
}

#[async_trait]
impl PodCidrs for AwsProvider {
    /// AWS takes 200 values per filter.
    fn max_batch_size(&self) -> NonZeroUsize {
        NonZeroUsize::new(FILTER_VALUES).unwrap_or(NonZeroUsize::MIN)
    }

    async fn pod_cidrs_of(&self, provider_ids: &[String]) -> BatchResult<PodCidr> {
        self.cloud()?.pod_cidrs_of(provider_ids).await
    }
}
