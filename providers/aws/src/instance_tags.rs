//! Tags on the EC2 instances behind nodes (upstream's `tagging`
//! controller): `CreateTags` and `DeleteTags` with up to [`MAX_RESOURCES`]
//! instance IDs a call, where upstream makes one call per node (or, with
//! `--tagging-controller-enable-batching`, one per 50).
//!
//! One unknown instance fails a whole call with `InvalidInstanceID.NotFound`,
//! and one ID AWS does not take as an ID at all (a virtual node's, KWOK's)
//! with `InvalidID`, naming the IDs at fault: those answer
//! [`TagOutcome::NotFound`] and [`TagOutcome::NotTaggable`] (upstream v1.37
//! skips such a node, unlabelled and not requeued), and the call is made
//! again without them, at most [`NAMING_ROUNDS`] times. When the error names
//! none of them, or keeps naming more, the IDs are split in halves and each
//! half is called alone, down to single IDs, the answer upstream gets with a
//! call per node.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::num::NonZeroUsize;

use async_trait::async_trait;
use aws_sdk_ec2::types::Tag;
use ccm_cloud_provider::{BatchResult, InstanceTags, TagOutcome};

use crate::api::ApiError;
use crate::provider::{AwsProvider, Cloud};
use crate::provider_id;

/// The most resource IDs AWS takes in one `CreateTags` or `DeleteTags`.
pub(crate) const MAX_RESOURCES: usize = 1000;
/// Calls made for one batch while AWS keeps naming IDs it refuses, before
/// the batch is split.
const NAMING_ROUNDS: usize = 3;
/// The error code for instances AWS cannot find.
const NOT_FOUND: &str = "InvalidInstanceID.NotFound";
/// The error code for IDs AWS does not take as IDs (upstream's
/// `IsAWSErrorInvalidInstanceID`).
const INVALID_ID: &str = "InvalidID";
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
        let mut refused: HashMap<String, TagOutcome> = HashMap::new();
        for chunk in wanted.chunks(MAX_RESOURCES) {
            self.change_batch(change, chunk.to_vec(), &aws_tags, &mut refused)
                .await?;
        }
        Ok(outcomes
            .into_iter()
            .zip(provider_ids)
            .map(|(outcome, provider_id)| {
                Ok(outcome.unwrap_or_else(|| {
                    provider_id::instance_id(provider_id)
                        .ok()
                        .and_then(|id| refused.get(id).cloned())
                        .unwrap_or(TagOutcome::Done)
                }))
            })
            .collect())
    }

    /// Changes the tags of `ids`, recording in `refused` each ID AWS
    /// refuses and what it answers for it.
    ///
    /// # Errors
    /// Any error that is not about particular IDs: the whole call failed.
    async fn change_batch(
        &self,
        change: Change,
        ids: Vec<String>,
        tags: &[Tag],
        refused: &mut HashMap<String, TagOutcome>,
    ) -> Result<(), ApiError> {
        // (IDs, calls made for them so far)
        let mut pending = vec![(ids, 0)];
        while let Some((mut ids, calls)) = pending.pop() {
            if ids.is_empty() {
                continue;
            }
            let Err(err) = self.send_tags(change, &ids, tags).await else {
                continue;
            };
            let Some((outcome, named)) = refusal(&err, &ids) else {
                return Err(err);
            };
            if let [id] = ids.as_slice() {
                log_refused(change, id, &outcome);
                refused.insert(id.clone(), outcome);
                continue;
            }
            let progressed = !named.is_empty();
            ids.retain(|id| !named.contains(id));
            for id in named {
                log_refused(change, &id, &outcome);
                refused.insert(id, outcome.clone());
            }
            if progressed && calls + 1 < NAMING_ROUNDS {
                pending.push((ids, calls + 1));
            } else {
                // Each half is smaller, so this ends at single IDs.
                let second = ids.split_off(ids.len() / 2);
                pending.push((second, 0));
                pending.push((ids, 0));
            }
        }
        Ok(())
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
                    .change(operation, || {
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
                    .change(operation, || {
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

/// What AWS answers, through `err`, for IDs of the call `ids` made, and
/// which of them its message names (maybe none); `None` when the error is
/// not about particular IDs.
///
/// `InvalidInstanceID.NotFound` ("The instance IDs 'i-1, i-2' do not
/// exist") is [`TagOutcome::NotFound`]; `InvalidID` ("The ID 'i-kwok' is
/// not valid") is [`TagOutcome::NotTaggable`], as upstream's
/// `IsAWSErrorInvalidInstanceID` matches exactly that code (so not
/// `InvalidInstanceID.Malformed`, which fails the call as any other error).
fn refusal(err: &ApiError, ids: &[String]) -> Option<(TagOutcome, HashSet<String>)> {
    let ApiError::Service { code, message, .. } = err else {
        return None;
    };
    let outcome = match code.as_str() {
        NOT_FOUND => TagOutcome::NotFound,
        INVALID_ID => TagOutcome::NotTaggable(format!(
            "AWS does not take the instance ID as valid ({INVALID_ID}: {message})"
        )),
        _ => return None,
    };
    let named = message
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|word| ids.iter().any(|id| id == word))
        .map(str::to_owned)
        .collect();
    Some((outcome, named))
}

fn log_refused(change: Change, id: &str, outcome: &TagOutcome) {
    if let TagOutcome::NotTaggable(reason) = outcome {
        tracing::info!(
            operation = change.operation(),
            instance = id,
            %reason,
            "instance skipped: its ID is not valid for AWS"
        );
    }
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

    fn ids(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|id| (*id).to_owned()).collect()
    }

    fn named(ids: &[&str]) -> HashSet<String> {
        ids.iter().map(|id| (*id).to_owned()).collect()
    }

    #[test]
    fn not_found_names_every_instance_aws_lists() {
        let batch = ids(&["i-0aaa", "i-0bbb", "i-0ccc"]);
        let err = service_error(
            "InvalidInstanceID.NotFound",
            "The instance IDs 'i-0aaa, i-0bbb' do not exist",
        );
        assert_eq!(
            refusal(&err, &batch),
            Some((TagOutcome::NotFound, named(&["i-0aaa", "i-0bbb"])))
        );
        let one = service_error(
            "InvalidInstanceID.NotFound",
            "The instance ID 'i-0ccc' does not exist",
        );
        assert_eq!(
            refusal(&one, &batch),
            Some((TagOutcome::NotFound, named(&["i-0ccc"])))
        );
    }

    #[test]
    fn an_invalid_id_is_not_taggable_and_named_only_when_it_was_sent() {
        let batch = ids(&["i-0aaa", "i-kwok1"]);
        let err = service_error("InvalidID", "The ID 'i-kwok1' is not valid");
        let Some((TagOutcome::NotTaggable(reason), names)) = refusal(&err, &batch) else {
            panic!("not taggable: {:?}", refusal(&err, &batch));
        };
        assert!(reason.contains("The ID 'i-kwok1' is not valid"), "{reason}");
        assert_eq!(names, named(&["i-kwok1"]));
        let unnamed = service_error("InvalidID", "The ID 'fake' is not valid");
        assert!(matches!(
            refusal(&unnamed, &batch),
            Some((TagOutcome::NotTaggable(_), names)) if names.is_empty()
        ));
    }

    #[test]
    fn other_errors_are_not_about_particular_instances() {
        let batch = ids(&["i-0aaa"]);
        for code in ["UnauthorizedOperation", "InvalidInstanceID.Malformed"] {
            let err = service_error(code, "not allowed on i-0aaa");
            assert_eq!(refusal(&err, &batch), None, "{code}");
        }
    }
}
