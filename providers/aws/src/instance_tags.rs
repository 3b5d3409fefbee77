//! Tags on the EC2 instances behind nodes (upstream's `tagging`
//! controller): `CreateTags` and `DeleteTags` with up to [`MAX_RESOURCES`]
//! instance IDs a call, where upstream makes one call per node (or, with
//! `--tagging-controller-enable-batching`, one per 50).
//!
//! One unknown instance fails a whole call with `InvalidInstanceID.NotFound`,
//! naming the IDs it did not find: those answer [`TagOutcome::NotFound`] and
//! the call is made again without them, at most [`NOT_FOUND_ROUNDS`] times.

use std::collections::{BTreeMap, HashSet};
use std::num::NonZeroUsize;

use async_trait::async_trait;
use aws_sdk_ec2::types::Tag;
use cloud_provider::{BatchResult, InstanceTags, TagOutcome};

use crate::api::ApiError;
use crate::provider::{AwsProvider, Cloud};
use crate::provider_id;

/// The most resource IDs AWS takes in one `CreateTags` or `DeleteTags`.
pub(crate) const MAX_RESOURCES: usize = 1000;
/// Calls made for one batch when AWS keeps naming instances it cannot find.
const NOT_FOUND_ROUNDS: usize = 3;
/// The node label recording which tags an instance carries, as upstream's.
pub const TAGGED_LABEL: &str = "k8s.io/cloud-provider-aws";

/// Which of the two calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Change {
    Tag,
    Untag,
}

impl Change {
    fn operation(self) -> &'static str {
        match self {
            Self::Tag => "CreateTags",
            Self::Untag => "DeleteTags",
        }
    }
}

impl Cloud {
    async fn change_tags(
        &self,
        change: Change,
        provider_ids: &[String],
        tags: &BTreeMap<String, String>,
    ) -> BatchResult<TagOutcome> {
        let mut outcomes: Vec<Option<TagOutcome>> = vec![None; provider_ids.len()];
        let mut wanted: Vec<String> = Vec::new();
        for (outcome, provider_id) in outcomes.iter_mut().zip(provider_ids) {
            match provider_id::instance_id(provider_id) {
                Ok(id) => {
                    if !wanted.iter().any(|w| w == id) {
                        wanted.push(id.to_owned());
                    }
                }
                Err(err) => *outcome = Some(TagOutcome::NotTaggable(err.to_string())),
            }
        }
        let aws_tags: Vec<Tag> = tags
            .iter()
            .map(|(k, v)| Tag::builder().key(k).value(v).build())
            .collect();
        let mut missing: HashSet<String> = HashSet::new();
        for chunk in wanted.chunks(MAX_RESOURCES) {
            let mut ids: Vec<String> = chunk.to_vec();
            for round in 1..=NOT_FOUND_ROUNDS {
                if ids.is_empty() {
                    break;
                }
                let Err(err) = self.send_tags(change, &ids, &aws_tags).await else {
                    break;
                };
                let unknown = not_found_ids(&err);
                if unknown.is_empty() || round == NOT_FOUND_ROUNDS {
                    return Err(err.into());
                }
                ids.retain(|id| !unknown.contains(id));
                missing.extend(unknown);
            }
        }
        Ok(outcomes
            .into_iter()
            .zip(provider_ids)
            .map(|(outcome, provider_id)| {
                Ok(
                    outcome.unwrap_or_else(|| match provider_id::instance_id(provider_id) {
                        Ok(id) if missing.contains(id) => TagOutcome::NotFound,
                        _ => TagOutcome::Done,
                    }),
                )
            })
            .collect())
    }

    async fn send_tags(
        &self,
        change: Change,
        ids: &[String],
        tags: &[Tag],
    ) -> Result<(), ApiError> {
        let operation = change.operation();
        match change {
            Change::Tag => {
                self.api
                    .call(operation, || {
                        self.api
                            .ec2
                            .create_tags()
                            .set_resources(Some(ids.to_vec()))
                            .set_tags(Some(tags.to_vec()))
                            .send()
                    })
                    .await?;
            }
            Change::Untag => {
                self.api
                    .call(operation, || {
                        self.api
                            .ec2
                            .delete_tags()
                            .set_resources(Some(ids.to_vec()))
                            .set_tags(Some(tags.to_vec()))
                            .send()
                    })
                    .await?;
            }
        }
        Ok(())
    }
}

/// The instance IDs an `InvalidInstanceID.NotFound` names ("The instance
/// IDs 'i-1, i-2' do not exist"); empty for any other error.
fn not_found_ids(err: &ApiError) -> HashSet<String> {
    let ApiError::Service { code, message, .. } = err else {
        return HashSet::new();
    };
    if code != "InvalidInstanceID.NotFound" {
        return HashSet::new();
    }
    message
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|word| {
            word.strip_prefix("i-").is_some_and(|rest| {
                !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_alphanumeric())
            })
        })
        .map(str::to_owned)
        .collect()
}

#[async_trait]
impl InstanceTags for AwsProvider {
    /// AWS takes 1,000 resource IDs per `CreateTags` and `DeleteTags`.
    fn max_batch_size(&self) -> NonZeroUsize {
        NonZeroUsize::new(MAX_RESOURCES).unwrap_or(NonZeroUsize::MIN)
    }

    fn tagged_label(&self) -> &'static str {
        TAGGED_LABEL
    }

    async fn tag_instances(
        &self,
        provider_ids: &[String],
        tags: &BTreeMap<String, String>,
    ) -> BatchResult<TagOutcome> {
        self.cloud()?
            .change_tags(Change::Tag, provider_ids, tags)
            .await
    }

    /// AWS deletes a tag given with its value only where the value matches:
    /// a tag someone changed by hand since is kept.
    async fn untag_instances(
        &self,
        provider_ids: &[String],
        tags: &BTreeMap<String, String>,
    ) -> BatchResult<TagOutcome> {
        self.cloud()?
            .change_tags(Change::Untag, provider_ids, tags)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service_error(code: &str, message: &str) -> ApiError {
        ApiError::Service {
            operation: "CreateTags",
            code: code.to_owned(),
            message: message.to_owned(),
            source: "scripted".into(),
        }
    }

    #[test]
    fn not_found_names_every_instance_aws_lists() {
        let err = service_error(
            "InvalidInstanceID.NotFound",
            "The instance IDs 'i-0aaa, i-0bbb' do not exist",
        );
        let ids = not_found_ids(&err);
        assert_eq!(
            ids,
            HashSet::from(["i-0aaa".to_owned(), "i-0bbb".to_owned()])
        );
        let one = service_error(
            "InvalidInstanceID.NotFound",
            "The instance ID 'i-0ccc' does not exist",
        );
        assert_eq!(not_found_ids(&one), HashSet::from(["i-0ccc".to_owned()]));
    }

    #[test]
    fn other_errors_name_no_instance() {
        let err = service_error("UnauthorizedOperation", "not allowed on i-0aaa");
        assert!(not_found_ids(&err).is_empty());
    }
}
