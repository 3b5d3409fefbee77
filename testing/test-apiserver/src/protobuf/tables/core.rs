//! core/v1 kinds other than Pod and PersistentVolume, and what they hold.
//!
//! Generated from k8s-pb's messages and the Go types' `json` and `protobuf`
//! tags of k8s.io/api v0.35 (see `super`); `keep` marks Go pointers and
//! fields without `omitempty`.

use k8s_pb::api::core::v1 as core;

use crate::protobuf::convert::message;

message!(core::Namespace {
    metadata: "metadata",
    spec: "spec",
    status: "status",
});

message!(core::Node {
    metadata: "metadata",
    spec: "spec",
    status: "status",
});

message!(core::Service {
    metadata: "metadata",
    spec: "spec",
    status: "status",
});

message!(core::Endpoints {
    metadata: "metadata",
    subsets: "subsets",
});

message!(core::ConfigMap {
    metadata: "metadata",
    immutable: "immutable" keep,
    data: "data",
    binary_data: "binaryData",
});

message!(core::Secret {
    metadata: "metadata",
    immutable: "immutable" keep,
    data: "data",
    string_data: "stringData",
    r#type: "type",
});

message!(core::Event {
    metadata: "metadata" keep,
    involved_object: "involvedObject" keep,
    reason: "reason",
    message: "message",
    source: "source",
    first_timestamp: "firstTimestamp",
    last_timestamp: "lastTimestamp",
    count: "count",
    r#type: "type",
    event_time: "eventTime",
    series: "series" keep,
    action: "action",
    related: "related" keep,
    reporting_component: "reportingComponent" keep,
    reporting_instance: "reportingInstance" keep,
});

message!(core::ServiceAccount {
    metadata: "metadata",
    secrets: "secrets",
    image_pull_secrets: "imagePullSecrets",
    automount_service_account_token: "automountServiceAccountToken" keep,
});

message!(core::NamespaceList {
    metadata: "metadata",
    items: "items" keep,
});

message!(core::NodeList {
    metadata: "metadata",
    items: "items" keep,
});

message!(core::ServiceList {
    metadata: "metadata",
    items: "items" keep,
});

message!(core::EndpointsList {
    metadata: "metadata",
    items: "items" keep,
});

message!(core::ConfigMapList {
    metadata: "metadata",
    items: "items" keep,
});

message!(core::SecretList {
    metadata: "metadata",
    items: "items" keep,
});

message!(core::EventList {
    metadata: "metadata",
    items: "items" keep,
});

message!(core::ServiceAccountList {
    metadata: "metadata",
    items: "items" keep,
});

message!(core::NamespaceSpec {
    finalizers: "finalizers",
});

message!(core::NamespaceStatus {
    phase: "phase",
    conditions: "conditions",
});

message!(core::NodeSpec {
    pod_cidr: "podCIDR",
    pod_cid_rs: "podCIDRs",
    provider_id: "providerID",
    unschedulable: "unschedulable",
    taints: "taints",
    config_source: "configSource" keep,
    external_id: "externalID",
});

message!(core::NodeStatus {
    capacity: "capacity",
    allocatable: "allocatable",
    phase: "phase",
    conditions: "conditions",
    addresses: "addresses",
    daemon_endpoints: "daemonEndpoints",
    node_info: "nodeInfo",
    images: "images",
    volumes_in_use: "volumesInUse",
    volumes_attached: "volumesAttached",
    config: "config" keep,
    runtime_handlers: "runtimeHandlers",
    features: "features" keep,
    declared_features: "declaredFeatures",
});

message!(core::ServiceSpec {
    ports: "ports",
    selector: "selector",
    cluster_ip: "clusterIP",
    cluster_ips: "clusterIPs",
    r#type: "type",
    external_ips: "externalIPs",
    session_affinity: "sessionAffinity",
    load_balancer_ip: "loadBalancerIP",
    load_balancer_source_ranges: "loadBalancerSourceRanges",
    external_name: "externalName",
    external_traffic_policy: "externalTrafficPolicy",
    health_check_node_port: "healthCheckNodePort",
    publish_not_ready_addresses: "publishNotReadyAddresses",
    session_affinity_config: "sessionAffinityConfig" keep,
    ip_families: "ipFamilies",
    ip_family_policy: "ipFamilyPolicy" keep,
    allocate_load_balancer_node_ports: "allocateLoadBalancerNodePorts" keep,
    load_balancer_class: "loadBalancerClass" keep,
    internal_traffic_policy: "internalTrafficPolicy" keep,
    traffic_distribution: "trafficDistribution" keep,
});

message!(core::ServiceStatus {
    load_balancer: "loadBalancer",
    conditions: "conditions",
});

message!(core::EndpointSubset {
    addresses: "addresses",
    not_ready_addresses: "notReadyAddresses",
    ports: "ports",
});

message!(core::ObjectReference {
    kind: "kind",
    namespace: "namespace",
    name: "name",
    uid: "uid",
    api_version: "apiVersion",
    resource_version: "resourceVersion",
    field_path: "fieldPath",
});

message!(core::EventSource {
    component: "component",
    host: "host",
});

message!(core::EventSeries {
    count: "count",
    last_observed_time: "lastObservedTime",
});

message!(core::LocalObjectReference { name: "name" });

message!(core::NamespaceCondition {
    r#type: "type" keep,
    status: "status" keep,
    last_transition_time: "lastTransitionTime",
    reason: "reason",
    message: "message",
});

message!(core::Taint {
    key: "key" keep,
    value: "value",
    effect: "effect" keep,
    time_added: "timeAdded" keep,
});

message!(core::NodeConfigSource {
    config_map: "configMap" keep,
});

message!(core::NodeCondition {
    r#type: "type" keep,
    status: "status" keep,
    last_heartbeat_time: "lastHeartbeatTime",
    last_transition_time: "lastTransitionTime",
    reason: "reason",
    message: "message",
});

message!(core::NodeAddress {
    r#type: "type" keep,
    address: "address" keep,
});

message!(core::NodeDaemonEndpoints {
    kubelet_endpoint: "kubeletEndpoint",
});

message!(core::NodeSystemInfo {
    machine_id: "machineID" keep,
    system_uuid: "systemUUID" keep,
    boot_id: "bootID" keep,
    kernel_version: "kernelVersion" keep,
    os_image: "osImage" keep,
    container_runtime_version: "containerRuntimeVersion" keep,
    kubelet_version: "kubeletVersion" keep,
    kube_proxy_version: "kubeProxyVersion" keep,
    operating_system: "operatingSystem" keep,
    architecture: "architecture" keep,
    swap: "swap" keep,
});

message!(core::ContainerImage {
    names: "names" keep,
    size_bytes: "sizeBytes",
});

message!(core::AttachedVolume {
    name: "name" keep,
    device_path: "devicePath" keep,
});

message!(core::NodeConfigStatus {
    assigned: "assigned" keep,
    active: "active" keep,
    last_known_good: "lastKnownGood" keep,
    error: "error",
});

message!(core::NodeRuntimeHandler {
    name: "name" keep,
    features: "features" keep,
});

message!(core::NodeFeatures {
    supplemental_groups_policy: "supplementalGroupsPolicy" keep,
});

message!(core::ServicePort {
    name: "name",
    protocol: "protocol",
    app_protocol: "appProtocol" keep,
    port: "port" keep,
    target_port: "targetPort",
    node_port: "nodePort",
});

message!(core::SessionAffinityConfig {
    client_ip: "clientIP" keep,
});

message!(core::LoadBalancerStatus { ingress: "ingress" });

message!(core::EndpointAddress {
    ip: "ip" keep,
    hostname: "hostname",
    node_name: "nodeName" keep,
    target_ref: "targetRef" keep,
});

message!(core::EndpointPort {
    name: "name",
    port: "port" keep,
    protocol: "protocol",
    app_protocol: "appProtocol" keep,
});

message!(core::ConfigMapNodeConfigSource {
    namespace: "namespace" keep,
    name: "name" keep,
    uid: "uid",
    resource_version: "resourceVersion",
    kubelet_config_key: "kubeletConfigKey" keep,
});

message!(core::DaemonEndpoint {
    port: "Port" keep,
});

message!(core::NodeSwapStatus {
    capacity: "capacity" keep,
});

message!(core::NodeRuntimeHandlerFeatures {
    recursive_read_only_mounts: "recursiveReadOnlyMounts" keep,
    user_namespaces: "userNamespaces" keep,
});

message!(core::ClientIpConfig {
    timeout_seconds: "timeoutSeconds" keep,
});

message!(core::LoadBalancerIngress {
    ip: "ip",
    hostname: "hostname",
    ip_mode: "ipMode" keep,
    ports: "ports",
});

message!(core::PortStatus {
    port: "port" keep,
    protocol: "protocol" keep,
    error: "error" keep,
});
