//! core/v1 Pod: its spec and status.
//!
//! Generated from k8s-pb's messages and the Go types' `json` and `protobuf`
//! tags of k8s.io/api v0.35 (see `super`); `keep` marks Go pointers and
//! fields without `omitempty`.

use k8s_pb::api::core::v1 as core;

use crate::protobuf::convert::message;

message!(core::Pod {
    metadata: "metadata",
    spec: "spec",
    status: "status",
});

message!(core::PodList {
    metadata: "metadata",
    items: "items" keep,
});

message!(core::PodSpec {
    volumes: "volumes",
    init_containers: "initContainers",
    containers: "containers" keep,
    ephemeral_containers: "ephemeralContainers",
    restart_policy: "restartPolicy",
    termination_grace_period_seconds: "terminationGracePeriodSeconds" keep,
    active_deadline_seconds: "activeDeadlineSeconds" keep,
    dns_policy: "dnsPolicy",
    node_selector: "nodeSelector",
    service_account_name: "serviceAccountName",
    service_account: "serviceAccount",
    automount_service_account_token: "automountServiceAccountToken" keep,
    node_name: "nodeName",
    host_network: "hostNetwork",
    host_pid: "hostPID",
    host_ipc: "hostIPC",
    share_process_namespace: "shareProcessNamespace" keep,
    security_context: "securityContext" keep,
    image_pull_secrets: "imagePullSecrets",
    hostname: "hostname",
    subdomain: "subdomain",
    affinity: "affinity" keep,
    scheduler_name: "schedulerName",
    tolerations: "tolerations",
    host_aliases: "hostAliases",
    priority_class_name: "priorityClassName",
    priority: "priority" keep,
    dns_config: "dnsConfig" keep,
    readiness_gates: "readinessGates",
    runtime_class_name: "runtimeClassName" keep,
    enable_service_links: "enableServiceLinks" keep,
    preemption_policy: "preemptionPolicy" keep,
    overhead: "overhead",
    topology_spread_constraints: "topologySpreadConstraints",
    set_hostname_as_fqdn: "setHostnameAsFQDN" keep,
    os: "os" keep,
    host_users: "hostUsers" keep,
    scheduling_gates: "schedulingGates",
    resource_claims: "resourceClaims",
    resources: "resources" keep,
    hostname_override: "hostnameOverride" keep,
    workload_ref: "workloadRef" keep,
});

message!(core::PodStatus {
    observed_generation: "observedGeneration",
    phase: "phase",
    conditions: "conditions",
    message: "message",
    reason: "reason",
    nominated_node_name: "nominatedNodeName",
    host_ip: "hostIP",
    host_ips: "hostIPs",
    pod_ip: "podIP",
    pod_ips: "podIPs",
    start_time: "startTime" keep,
    init_container_statuses: "initContainerStatuses",
    container_statuses: "containerStatuses",
    qos_class: "qosClass",
    ephemeral_container_statuses: "ephemeralContainerStatuses",
    resize: "resize",
    resource_claim_statuses: "resourceClaimStatuses",
    extended_resource_claim_status: "extendedResourceClaimStatus" keep,
    allocated_resources: "allocatedResources",
    resources: "resources" keep,
});

message!(core::Container {
    name: "name" keep,
    image: "image",
    command: "command",
    args: "args",
    working_dir: "workingDir",
    ports: "ports",
    env_from: "envFrom",
    env: "env",
    resources: "resources",
    resize_policy: "resizePolicy",
    restart_policy: "restartPolicy" keep,
    restart_policy_rules: "restartPolicyRules",
    volume_mounts: "volumeMounts",
    volume_devices: "volumeDevices",
    liveness_probe: "livenessProbe" keep,
    readiness_probe: "readinessProbe" keep,
    startup_probe: "startupProbe" keep,
    lifecycle: "lifecycle" keep,
    termination_message_path: "terminationMessagePath",
    termination_message_policy: "terminationMessagePolicy",
    image_pull_policy: "imagePullPolicy",
    security_context: "securityContext" keep,
    stdin: "stdin",
    stdin_once: "stdinOnce",
    tty: "tty",
});

message!(core::EphemeralContainer {
    ephemeral_container_common: inline,
    target_container_name: "targetContainerName",
});

message!(core::PodSecurityContext {
    se_linux_options: "seLinuxOptions" keep,
    windows_options: "windowsOptions" keep,
    run_as_user: "runAsUser" keep,
    run_as_group: "runAsGroup" keep,
    run_as_non_root: "runAsNonRoot" keep,
    supplemental_groups: "supplementalGroups",
    supplemental_groups_policy: "supplementalGroupsPolicy" keep,
    fs_group: "fsGroup" keep,
    sysctls: "sysctls",
    fs_group_change_policy: "fsGroupChangePolicy" keep,
    seccomp_profile: "seccompProfile" keep,
    app_armor_profile: "appArmorProfile" keep,
    se_linux_change_policy: "seLinuxChangePolicy" keep,
});

message!(core::Affinity {
    node_affinity: "nodeAffinity" keep,
    pod_affinity: "podAffinity" keep,
    pod_anti_affinity: "podAntiAffinity" keep,
});

message!(core::Toleration {
    key: "key",
    operator: "operator",
    value: "value",
    effect: "effect",
    toleration_seconds: "tolerationSeconds" keep,
});

message!(core::HostAlias {
    ip: "ip" keep,
    hostnames: "hostnames",
});

message!(core::PodDnsConfig {
    nameservers: "nameservers",
    searches: "searches",
    options: "options",
});

message!(core::PodReadinessGate {
    condition_type: "conditionType" keep,
});

message!(core::TopologySpreadConstraint {
    max_skew: "maxSkew" keep,
    topology_key: "topologyKey" keep,
    when_unsatisfiable: "whenUnsatisfiable" keep,
    label_selector: "labelSelector" keep,
    min_domains: "minDomains" keep,
    node_affinity_policy: "nodeAffinityPolicy" keep,
    node_taints_policy: "nodeTaintsPolicy" keep,
    match_label_keys: "matchLabelKeys",
});

message!(core::PodOs {
    name: "name" keep,
});

message!(core::PodSchedulingGate {
    name: "name" keep,
});

message!(core::PodResourceClaim {
    name: "name" keep,
    resource_claim_name: "resourceClaimName" keep,
    resource_claim_template_name: "resourceClaimTemplateName" keep,
});

message!(core::ResourceRequirements {
    limits: "limits",
    requests: "requests",
    claims: "claims",
});

message!(core::PodCondition {
    r#type: "type" keep,
    observed_generation: "observedGeneration",
    status: "status" keep,
    last_probe_time: "lastProbeTime",
    last_transition_time: "lastTransitionTime",
    reason: "reason",
    message: "message",
});

message!(core::HostIp {
    ip: "ip" keep,
});

message!(core::PodIp {
    ip: "ip" keep,
});

message!(core::ContainerStatus {
    name: "name" keep,
    state: "state",
    last_state: "lastState",
    ready: "ready" keep,
    restart_count: "restartCount" keep,
    image: "image" keep,
    image_id: "imageID" keep,
    container_id: "containerID",
    started: "started" keep,
    allocated_resources: "allocatedResources",
    resources: "resources" keep,
    volume_mounts: "volumeMounts",
    user: "user" keep,
    allocated_resources_status: "allocatedResourcesStatus",
    stop_signal: "stopSignal" keep,
});

message!(core::PodResourceClaimStatus {
    name: "name" keep,
    resource_claim_name: "resourceClaimName" keep,
});

message!(core::ContainerPort {
    name: "name",
    host_port: "hostPort",
    container_port: "containerPort" keep,
    protocol: "protocol",
    host_ip: "hostIP",
});

message!(core::EnvVar {
    name: "name" keep,
    value: "value",
    value_from: "valueFrom" keep,
});

message!(core::ContainerResizePolicy {
    resource_name: "resourceName" keep,
    restart_policy: "restartPolicy" keep,
});

message!(core::Probe {
    handler: inline,
    initial_delay_seconds: "initialDelaySeconds",
    timeout_seconds: "timeoutSeconds",
    period_seconds: "periodSeconds",
    success_threshold: "successThreshold",
    failure_threshold: "failureThreshold",
    termination_grace_period_seconds: "terminationGracePeriodSeconds" keep,
});

message!(core::Lifecycle {
    post_start: "postStart" keep,
    pre_stop: "preStop" keep,
    stop_signal: "stopSignal" keep,
});

message!(core::SecurityContext {
    capabilities: "capabilities" keep,
    privileged: "privileged" keep,
    se_linux_options: "seLinuxOptions" keep,
    windows_options: "windowsOptions" keep,
    run_as_user: "runAsUser" keep,
    run_as_group: "runAsGroup" keep,
    run_as_non_root: "runAsNonRoot" keep,
    read_only_root_filesystem: "readOnlyRootFilesystem" keep,
    allow_privilege_escalation: "allowPrivilegeEscalation" keep,
    proc_mount: "procMount" keep,
    seccomp_profile: "seccompProfile" keep,
    app_armor_profile: "appArmorProfile" keep,
});

message!(core::EphemeralContainerCommon {
    name: "name" keep,
    image: "image",
    command: "command",
    args: "args",
    working_dir: "workingDir",
    ports: "ports",
    env_from: "envFrom",
    env: "env",
    resources: "resources",
    resize_policy: "resizePolicy",
    restart_policy: "restartPolicy" keep,
    restart_policy_rules: "restartPolicyRules",
    volume_mounts: "volumeMounts",
    volume_devices: "volumeDevices",
    liveness_probe: "livenessProbe" keep,
    readiness_probe: "readinessProbe" keep,
    startup_probe: "startupProbe" keep,
    lifecycle: "lifecycle" keep,
    termination_message_path: "terminationMessagePath",
    termination_message_policy: "terminationMessagePolicy",
    image_pull_policy: "imagePullPolicy",
    security_context: "securityContext" keep,
    stdin: "stdin",
    stdin_once: "stdinOnce",
    tty: "tty",
});

message!(core::SeLinuxOptions {
    user: "user",
    role: "role",
    r#type: "type",
    level: "level",
});

message!(core::WindowsSecurityContextOptions {
    gmsa_credential_spec_name: "gmsaCredentialSpecName" keep,
    gmsa_credential_spec: "gmsaCredentialSpec" keep,
    run_as_user_name: "runAsUserName" keep,
    host_process: "hostProcess" keep,
});

message!(core::Sysctl {
    name: "name" keep,
    value: "value" keep,
});

message!(core::SeccompProfile {
    r#type: "type" keep,
    localhost_profile: "localhostProfile" keep,
});

message!(core::AppArmorProfile {
    r#type: "type" keep,
    localhost_profile: "localhostProfile" keep,
});

message!(core::NodeAffinity {
    required_during_scheduling_ignored_during_execution: "requiredDuringSchedulingIgnoredDuringExecution" keep,
    preferred_during_scheduling_ignored_during_execution: "preferredDuringSchedulingIgnoredDuringExecution",
});

message!(core::PodAffinity {
    required_during_scheduling_ignored_during_execution: "requiredDuringSchedulingIgnoredDuringExecution",
    preferred_during_scheduling_ignored_during_execution: "preferredDuringSchedulingIgnoredDuringExecution",
});

message!(core::PodAntiAffinity {
    required_during_scheduling_ignored_during_execution: "requiredDuringSchedulingIgnoredDuringExecution",
    preferred_during_scheduling_ignored_during_execution: "preferredDuringSchedulingIgnoredDuringExecution",
});

message!(core::PodDnsConfigOption {
    name: "name",
    value: "value" keep,
});

message!(core::ResourceClaim {
    name: "name" keep,
    request: "request",
});

message!(core::ContainerState {
    waiting: "waiting" keep,
    running: "running" keep,
    terminated: "terminated" keep,
});

message!(core::ContainerUser {
    linux: "linux" keep,
});

message!(core::ResourceStatus {
    name: "name" keep,
    resources: "resources",
});

message!(core::ProbeHandler {
    exec: "exec" keep,
    http_get: "httpGet" keep,
    tcp_socket: "tcpSocket" keep,
    grpc: "grpc" keep,
});

message!(core::LifecycleHandler {
    exec: "exec" keep,
    http_get: "httpGet" keep,
    tcp_socket: "tcpSocket" keep,
    sleep: "sleep" keep,
});

message!(core::Capabilities {
    add: "add",
    drop: "drop",
});

message!(core::PreferredSchedulingTerm {
    weight: "weight" keep,
    preference: "preference" keep,
});

message!(core::PodAffinityTerm {
    label_selector: "labelSelector" keep,
    namespaces: "namespaces",
    topology_key: "topologyKey" keep,
    namespace_selector: "namespaceSelector" keep,
    match_label_keys: "matchLabelKeys",
    mismatch_label_keys: "mismatchLabelKeys",
});

message!(core::WeightedPodAffinityTerm {
    weight: "weight" keep,
    pod_affinity_term: "podAffinityTerm" keep,
});

message!(core::ContainerStateWaiting {
    reason: "reason",
    message: "message",
});

message!(core::ContainerStateRunning {
    started_at: "startedAt",
});

message!(core::ContainerStateTerminated {
    exit_code: "exitCode" keep,
    signal: "signal",
    reason: "reason",
    message: "message",
    started_at: "startedAt",
    finished_at: "finishedAt",
    container_id: "containerID",
});

message!(core::LinuxContainerUser {
    uid: "uid" keep,
    gid: "gid" keep,
    supplemental_groups: "supplementalGroups",
});

message!(core::ResourceHealth {
    resource_id: "resourceID" keep,
    health: "health",
});

message!(core::SecretReference {
    name: "name",
    namespace: "namespace",
});

message!(core::NodeSelectorTerm {
    match_expressions: "matchExpressions",
    match_fields: "matchFields",
});

message!(core::KeyToPath {
    key: "key" keep,
    path: "path" keep,
    mode: "mode" keep,
});

message!(core::ExecAction { command: "command" });

message!(core::HttpGetAction {
    path: "path",
    port: "port" keep,
    host: "host",
    scheme: "scheme",
    http_headers: "httpHeaders",
});

message!(core::TcpSocketAction {
    port: "port" keep,
    host: "host",
});

message!(core::GrpcAction {
    port: "port" keep,
    service: "service" keep,
});

message!(core::SleepAction {
    seconds: "seconds" keep,
});

message!(core::NodeSelectorRequirement {
    key: "key" keep,
    operator: "operator" keep,
    values: "values",
});

message!(core::HttpHeader {
    name: "name" keep,
    value: "value" keep,
});

message!(core::TypedLocalObjectReference {
    api_group: "apiGroup" keep,
    kind: "kind" keep,
    name: "name" keep,
});

message!(core::TypedObjectReference {
    api_group: "apiGroup" keep,
    kind: "kind" keep,
    name: "name" keep,
    namespace: "namespace" keep,
});

message!(core::ContainerRestartRule {
    action: "action" keep,
    exit_codes: "exitCodes" keep,
});

message!(core::ContainerRestartRuleOnExitCodes {
    operator: "operator" keep,
    values: "values",
});

message!(core::WorkloadReference {
    name: "name" keep,
    pod_group: "podGroup" keep,
    pod_group_replica_key: "podGroupReplicaKey" keep,
});

message!(core::PodExtendedResourceClaimStatus {
    request_mappings: "requestMappings",
    resource_claim_name: "resourceClaimName" keep,
});

message!(core::ContainerExtendedResourceRequest {
    container_name: "containerName" keep,
    resource_name: "resourceName" keep,
    request_name: "requestName" keep,
});
