//! meta.k8s.io/v1: object and list metadata, `Status`.
//!
//! Generated from k8s-pb's messages and the Go types' `json` and `protobuf`
//! tags of k8s.io/api v0.35 (see `super`); `keep` marks Go pointers and
//! fields without `omitempty`.

use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;

use crate::protobuf::convert::message;

message!(meta::Status {
    metadata: "metadata",
    status: "status",
    message: "message",
    reason: "reason",
    details: "details" keep,
    code: "code",
});

message!(meta::ListMeta {
    self_link: "selfLink",
    resource_version: "resourceVersion",
    r#continue: "continue",
    remaining_item_count: "remainingItemCount" keep,
});

message!(meta::DeleteOptions {
    grace_period_seconds: "gracePeriodSeconds" keep,
    preconditions: "preconditions" keep,
    orphan_dependents: "orphanDependents" keep,
    propagation_policy: "propagationPolicy" keep,
    dry_run: "dryRun",
    ignore_store_read_error_with_cluster_breaking_potential: "ignoreStoreReadErrorWithClusterBreakingPotential" keep,
});

message!(meta::ObjectMeta {
    name: "name",
    generate_name: "generateName",
    namespace: "namespace",
    self_link: "selfLink",
    uid: "uid",
    resource_version: "resourceVersion",
    generation: "generation",
    creation_timestamp: "creationTimestamp",
    deletion_timestamp: "deletionTimestamp" keep,
    deletion_grace_period_seconds: "deletionGracePeriodSeconds" keep,
    labels: "labels",
    annotations: "annotations",
    owner_references: "ownerReferences",
    finalizers: "finalizers",
    managed_fields: "managedFields",
});

message!(meta::StatusDetails {
    name: "name",
    group: "group",
    kind: "kind",
    uid: "uid",
    causes: "causes",
    retry_after_seconds: "retryAfterSeconds",
});

message!(meta::Preconditions {
    uid: "uid" keep,
    resource_version: "resourceVersion" keep,
});

message!(meta::OwnerReference {
    api_version: "apiVersion" keep,
    kind: "kind" keep,
    name: "name" keep,
    uid: "uid" keep,
    controller: "controller" keep,
    block_owner_deletion: "blockOwnerDeletion" keep,
});

message!(meta::ManagedFieldsEntry {
    manager: "manager",
    operation: "operation",
    api_version: "apiVersion",
    time: "time" keep,
    fields_type: "fieldsType",
    fields_v1: "fieldsV1" keep,
    subresource: "subresource",
});

message!(meta::Condition {
    r#type: "type" keep,
    status: "status" keep,
    observed_generation: "observedGeneration",
    last_transition_time: "lastTransitionTime" keep,
    reason: "reason" keep,
    message: "message" keep,
});

message!(meta::LabelSelector {
    match_labels: "matchLabels",
    match_expressions: "matchExpressions",
});

message!(meta::StatusCause {
    reason: "reason",
    message: "message",
    field: "field",
});

message!(meta::LabelSelectorRequirement {
    key: "key" keep,
    operator: "operator" keep,
    values: "values",
});

message!(meta::FieldSelectorRequirement {
    key: "key" keep,
    operator: "operator" keep,
    values: "values",
});
