//! coordination, events, discovery, RBAC, certificates, admission webhook
//! configurations and the reviews (all v1).
//!
//! Generated from k8s-pb's messages and the Go types' `json` and `protobuf`
//! tags of k8s.io/api v0.35 (see `super`); `keep` marks Go pointers and
//! fields without `omitempty`.

use k8s_pb::api::admissionregistration::v1 as admissionregistration;
use k8s_pb::api::authentication::v1 as authentication;
use k8s_pb::api::authorization::v1 as authorization;
use k8s_pb::api::certificates::v1 as certificates;
use k8s_pb::api::coordination::v1 as coordination;
use k8s_pb::api::discovery::v1 as discovery;
use k8s_pb::api::events::v1 as events;
use k8s_pb::api::rbac::v1 as rbac;

use crate::protobuf::convert::message;

message!(coordination::Lease {
    metadata: "metadata",
    spec: "spec",
});

message!(coordination::LeaseList {
    metadata: "metadata",
    items: "items" keep,
});

message!(coordination::LeaseSpec {
    holder_identity: "holderIdentity" keep,
    lease_duration_seconds: "leaseDurationSeconds" keep,
    acquire_time: "acquireTime" keep,
    renew_time: "renewTime" keep,
    lease_transitions: "leaseTransitions" keep,
    strategy: "strategy" keep,
    preferred_holder: "preferredHolder" keep,
});

message!(events::Event {
    metadata: "metadata" keep,
    event_time: "eventTime" keep,
    series: "series" keep,
    reporting_controller: "reportingController",
    reporting_instance: "reportingInstance",
    action: "action",
    reason: "reason",
    regarding: "regarding",
    related: "related" keep,
    note: "note",
    r#type: "type",
    deprecated_source: "deprecatedSource",
    deprecated_first_timestamp: "deprecatedFirstTimestamp",
    deprecated_last_timestamp: "deprecatedLastTimestamp",
    deprecated_count: "deprecatedCount",
});

message!(events::EventList {
    metadata: "metadata",
    items: "items" keep,
});

message!(events::EventSeries {
    count: "count" keep,
    last_observed_time: "lastObservedTime" keep,
});

message!(discovery::EndpointSlice {
    metadata: "metadata",
    address_type: "addressType" keep,
    endpoints: "endpoints" keep,
    ports: "ports" keep,
});

message!(discovery::EndpointSliceList {
    metadata: "metadata",
    items: "items" keep,
});

message!(discovery::Endpoint {
    addresses: "addresses" keep,
    conditions: "conditions",
    hostname: "hostname" keep,
    target_ref: "targetRef" keep,
    deprecated_topology: "deprecatedTopology",
    node_name: "nodeName" keep,
    zone: "zone" keep,
    hints: "hints" keep,
});

message!(discovery::EndpointPort {
    name: "name" keep,
    protocol: "protocol" keep,
    port: "port" keep,
    app_protocol: "appProtocol" keep,
});

message!(discovery::EndpointConditions {
    ready: "ready" keep,
    serving: "serving" keep,
    terminating: "terminating" keep,
});

message!(discovery::EndpointHints {
    for_zones: "forZones",
    for_nodes: "forNodes",
});

message!(discovery::ForZone {
    name: "name" keep,
});

message!(discovery::ForNode {
    name: "name" keep,
});

message!(rbac::Role {
    metadata: "metadata",
    rules: "rules" keep,
});

message!(rbac::ClusterRole {
    metadata: "metadata",
    rules: "rules" keep,
    aggregation_rule: "aggregationRule" keep,
});

message!(rbac::RoleBinding {
    metadata: "metadata",
    subjects: "subjects",
    role_ref: "roleRef" keep,
});

message!(rbac::ClusterRoleBinding {
    metadata: "metadata",
    subjects: "subjects",
    role_ref: "roleRef" keep,
});

message!(rbac::RoleList {
    metadata: "metadata",
    items: "items" keep,
});

message!(rbac::ClusterRoleList {
    metadata: "metadata",
    items: "items" keep,
});

message!(rbac::RoleBindingList {
    metadata: "metadata",
    items: "items" keep,
});

message!(rbac::ClusterRoleBindingList {
    metadata: "metadata",
    items: "items" keep,
});

message!(rbac::PolicyRule {
    verbs: "verbs" keep,
    api_groups: "apiGroups",
    resources: "resources",
    resource_names: "resourceNames",
    non_resource_ur_ls: "nonResourceURLs",
});

message!(rbac::AggregationRule {
    cluster_role_selectors: "clusterRoleSelectors",
});

message!(rbac::Subject {
    kind: "kind" keep,
    api_group: "apiGroup",
    name: "name" keep,
    namespace: "namespace",
});

message!(rbac::RoleRef {
    api_group: "apiGroup" keep,
    kind: "kind" keep,
    name: "name" keep,
});

message!(certificates::CertificateSigningRequest {
    metadata: "metadata",
    spec: "spec" keep,
    status: "status",
});

message!(certificates::CertificateSigningRequestList {
    metadata: "metadata",
    items: "items" keep,
});

message!(certificates::CertificateSigningRequestSpec {
    request: "request" keep,
    signer_name: "signerName" keep,
    expiration_seconds: "expirationSeconds" keep,
    usages: "usages",
    username: "username",
    uid: "uid",
    groups: "groups",
    extra: "extra",
});

message!(certificates::CertificateSigningRequestStatus {
    conditions: "conditions",
    certificate: "certificate",
});

message!(certificates::CertificateSigningRequestCondition {
    r#type: "type" keep,
    status: "status" keep,
    reason: "reason",
    message: "message",
    last_update_time: "lastUpdateTime",
    last_transition_time: "lastTransitionTime",
});

message!(admissionregistration::ValidatingWebhookConfiguration {
    metadata: "metadata",
    webhooks: "webhooks",
});

message!(admissionregistration::ValidatingWebhookConfigurationList {
    metadata: "metadata",
    items: "items" keep,
});

message!(admissionregistration::ValidatingWebhook {
    name: "name" keep,
    client_config: "clientConfig" keep,
    rules: "rules",
    failure_policy: "failurePolicy" keep,
    match_policy: "matchPolicy" keep,
    namespace_selector: "namespaceSelector" keep,
    object_selector: "objectSelector" keep,
    side_effects: "sideEffects" keep,
    timeout_seconds: "timeoutSeconds" keep,
    admission_review_versions: "admissionReviewVersions" keep,
    match_conditions: "matchConditions",
});

message!(admissionregistration::WebhookClientConfig {
    url: "url" keep,
    service: "service" keep,
    ca_bundle: "caBundle",
});

message!(admissionregistration::ServiceReference {
    namespace: "namespace" keep,
    name: "name" keep,
    path: "path" keep,
    port: "port" keep,
});

message!(admissionregistration::RuleWithOperations {
    operations: "operations",
    rule: inline,
});

message!(admissionregistration::Rule {
    api_groups: "apiGroups",
    api_versions: "apiVersions",
    resources: "resources",
    scope: "scope" keep,
});

message!(admissionregistration::MatchCondition {
    name: "name" keep,
    expression: "expression" keep,
});

message!(authentication::TokenReview {
    metadata: "metadata",
    spec: "spec" keep,
    status: "status",
});

message!(authentication::TokenRequest {
    metadata: "metadata",
    spec: "spec" keep,
    status: "status",
});

message!(authentication::TokenReviewSpec {
    token: "token",
    audiences: "audiences",
});

message!(authentication::TokenReviewStatus {
    authenticated: "authenticated",
    user: "user",
    audiences: "audiences",
    error: "error",
});

message!(authentication::TokenRequestSpec {
    audiences: "audiences" keep,
    expiration_seconds: "expirationSeconds" keep,
    bound_object_ref: "boundObjectRef" keep,
});

message!(authentication::TokenRequestStatus {
    token: "token" keep,
    expiration_timestamp: "expirationTimestamp" keep,
});

message!(authentication::UserInfo {
    username: "username",
    uid: "uid",
    groups: "groups",
    extra: "extra",
});

message!(authentication::BoundObjectReference {
    kind: "kind",
    api_version: "apiVersion",
    name: "name",
    u_id: "uid",
});

message!(authorization::SelfSubjectAccessReview {
    metadata: "metadata",
    spec: "spec" keep,
    status: "status",
});

message!(authorization::SubjectAccessReview {
    metadata: "metadata",
    spec: "spec" keep,
    status: "status",
});

message!(authorization::SelfSubjectAccessReviewSpec {
    resource_attributes: "resourceAttributes" keep,
    non_resource_attributes: "nonResourceAttributes" keep,
});

message!(authorization::SubjectAccessReviewStatus {
    allowed: "allowed" keep,
    denied: "denied",
    reason: "reason",
    evaluation_error: "evaluationError",
});

message!(authorization::SubjectAccessReviewSpec {
    resource_attributes: "resourceAttributes" keep,
    non_resource_attributes: "nonResourceAttributes" keep,
    user: "user",
    groups: "groups",
    extra: "extra",
    uid: "uid",
});

message!(authorization::ResourceAttributes {
    namespace: "namespace",
    verb: "verb",
    group: "group",
    version: "version",
    resource: "resource",
    subresource: "subresource",
    name: "name",
    field_selector: "fieldSelector" keep,
    label_selector: "labelSelector" keep,
});

message!(authorization::NonResourceAttributes {
    path: "path",
    verb: "verb",
});

message!(authorization::FieldSelectorAttributes {
    raw_selector: "rawSelector",
    requirements: "requirements",
});

message!(authorization::LabelSelectorAttributes {
    raw_selector: "rawSelector",
    requirements: "requirements",
});
