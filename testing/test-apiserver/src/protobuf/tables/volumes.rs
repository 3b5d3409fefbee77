//! core/v1 volume sources and projections, shared by Pods and PersistentVolumes.
//!
//! Generated from k8s-pb's messages and the Go types' `json` and `protobuf`
//! tags of k8s.io/api v0.35 (see `super`); `keep` marks Go pointers and
//! fields without `omitempty`.

use k8s_pb::api::core::v1 as core;

use crate::protobuf::convert::message;

message!(core::PersistentVolume {
    metadata: "metadata",
    spec: "spec",
    status: "status",
});

message!(core::PersistentVolumeList {
    metadata: "metadata",
    items: "items" keep,
});

message!(core::PersistentVolumeSpec {
    capacity: "capacity",
    persistent_volume_source: inline,
    access_modes: "accessModes",
    claim_ref: "claimRef" keep,
    persistent_volume_reclaim_policy: "persistentVolumeReclaimPolicy",
    storage_class_name: "storageClassName",
    mount_options: "mountOptions",
    volume_mode: "volumeMode" keep,
    node_affinity: "nodeAffinity" keep,
    volume_attributes_class_name: "volumeAttributesClassName" keep,
});

message!(core::PersistentVolumeStatus {
    phase: "phase",
    message: "message",
    reason: "reason",
    last_phase_transition_time: "lastPhaseTransitionTime" keep,
});

message!(core::Volume {
    name: "name" keep,
    volume_source: inline,
});

message!(core::PersistentVolumeSource {
    gce_persistent_disk: "gcePersistentDisk" keep,
    aws_elastic_block_store: "awsElasticBlockStore" keep,
    host_path: "hostPath" keep,
    glusterfs: "glusterfs" keep,
    nfs: "nfs" keep,
    rbd: "rbd" keep,
    iscsi: "iscsi" keep,
    cinder: "cinder" keep,
    cephfs: "cephfs" keep,
    fc: "fc" keep,
    flocker: "flocker" keep,
    flex_volume: "flexVolume" keep,
    azure_file: "azureFile" keep,
    vsphere_volume: "vsphereVolume" keep,
    quobyte: "quobyte" keep,
    azure_disk: "azureDisk" keep,
    photon_persistent_disk: "photonPersistentDisk" keep,
    portworx_volume: "portworxVolume" keep,
    scale_io: "scaleIO" keep,
    local: "local" keep,
    storageos: "storageos" keep,
    csi: "csi" keep,
});

message!(core::VolumeNodeAffinity {
    required: "required" keep,
});

message!(core::VolumeSource {
    host_path: "hostPath" keep,
    empty_dir: "emptyDir" keep,
    gce_persistent_disk: "gcePersistentDisk" keep,
    aws_elastic_block_store: "awsElasticBlockStore" keep,
    git_repo: "gitRepo" keep,
    secret: "secret" keep,
    nfs: "nfs" keep,
    iscsi: "iscsi" keep,
    glusterfs: "glusterfs" keep,
    persistent_volume_claim: "persistentVolumeClaim" keep,
    rbd: "rbd" keep,
    flex_volume: "flexVolume" keep,
    cinder: "cinder" keep,
    cephfs: "cephfs" keep,
    flocker: "flocker" keep,
    downward_api: "downwardAPI" keep,
    fc: "fc" keep,
    azure_file: "azureFile" keep,
    config_map: "configMap" keep,
    vsphere_volume: "vsphereVolume" keep,
    quobyte: "quobyte" keep,
    azure_disk: "azureDisk" keep,
    photon_persistent_disk: "photonPersistentDisk" keep,
    projected: "projected" keep,
    portworx_volume: "portworxVolume" keep,
    scale_io: "scaleIO" keep,
    storageos: "storageos" keep,
    csi: "csi" keep,
    ephemeral: "ephemeral" keep,
    image: "image" keep,
});

message!(core::EnvFromSource {
    prefix: "prefix",
    config_map_ref: "configMapRef" keep,
    secret_ref: "secretRef" keep,
});

message!(core::VolumeMount {
    name: "name" keep,
    read_only: "readOnly",
    recursive_read_only: "recursiveReadOnly" keep,
    mount_path: "mountPath" keep,
    sub_path: "subPath",
    mount_propagation: "mountPropagation" keep,
    sub_path_expr: "subPathExpr",
});

message!(core::VolumeDevice {
    name: "name" keep,
    device_path: "devicePath" keep,
});

message!(core::VolumeMountStatus {
    name: "name" keep,
    mount_path: "mountPath" keep,
    read_only: "readOnly",
    recursive_read_only: "recursiveReadOnly" keep,
});

message!(core::GcePersistentDiskVolumeSource {
    pd_name: "pdName" keep,
    fs_type: "fsType",
    partition: "partition",
    read_only: "readOnly",
});

message!(core::AwsElasticBlockStoreVolumeSource {
    volume_id: "volumeID" keep,
    fs_type: "fsType",
    partition: "partition",
    read_only: "readOnly",
});

message!(core::HostPathVolumeSource {
    path: "path" keep,
    r#type: "type" keep,
});

message!(core::GlusterfsPersistentVolumeSource {
    endpoints: "endpoints" keep,
    path: "path" keep,
    read_only: "readOnly",
    endpoints_namespace: "endpointsNamespace" keep,
});

message!(core::NfsVolumeSource {
    server: "server" keep,
    path: "path" keep,
    read_only: "readOnly",
});

message!(core::RbdPersistentVolumeSource {
    monitors: "monitors" keep,
    image: "image" keep,
    fs_type: "fsType",
    pool: "pool",
    user: "user",
    keyring: "keyring",
    secret_ref: "secretRef" keep,
    read_only: "readOnly",
});

message!(core::IscsiPersistentVolumeSource {
    target_portal: "targetPortal" keep,
    iqn: "iqn" keep,
    lun: "lun" keep,
    iscsi_interface: "iscsiInterface",
    fs_type: "fsType",
    read_only: "readOnly",
    portals: "portals",
    chap_auth_discovery: "chapAuthDiscovery",
    chap_auth_session: "chapAuthSession",
    secret_ref: "secretRef" keep,
    initiator_name: "initiatorName" keep,
});

message!(core::CinderPersistentVolumeSource {
    volume_id: "volumeID" keep,
    fs_type: "fsType",
    read_only: "readOnly",
    secret_ref: "secretRef" keep,
});

message!(core::CephFsPersistentVolumeSource {
    monitors: "monitors" keep,
    path: "path",
    user: "user",
    secret_file: "secretFile",
    secret_ref: "secretRef" keep,
    read_only: "readOnly",
});

message!(core::FcVolumeSource {
    target_ww_ns: "targetWWNs",
    lun: "lun" keep,
    fs_type: "fsType",
    read_only: "readOnly",
    wwids: "wwids",
});

message!(core::FlockerVolumeSource {
    dataset_name: "datasetName",
    dataset_uuid: "datasetUUID",
});

message!(core::FlexPersistentVolumeSource {
    driver: "driver" keep,
    fs_type: "fsType",
    secret_ref: "secretRef" keep,
    read_only: "readOnly",
    options: "options",
});

message!(core::AzureFilePersistentVolumeSource {
    secret_name: "secretName" keep,
    share_name: "shareName" keep,
    read_only: "readOnly",
    secret_namespace: "secretNamespace" keep,
});

message!(core::VsphereVirtualDiskVolumeSource {
    volume_path: "volumePath" keep,
    fs_type: "fsType",
    storage_policy_name: "storagePolicyName",
    storage_policy_id: "storagePolicyID",
});

message!(core::QuobyteVolumeSource {
    registry: "registry" keep,
    volume: "volume" keep,
    read_only: "readOnly",
    user: "user",
    group: "group",
    tenant: "tenant",
});

message!(core::AzureDiskVolumeSource {
    disk_name: "diskName" keep,
    disk_uri: "diskURI" keep,
    caching_mode: "cachingMode" keep,
    fs_type: "fsType" keep,
    read_only: "readOnly" keep,
    kind: "kind" keep,
});

message!(core::PhotonPersistentDiskVolumeSource {
    pd_id: "pdID" keep,
    fs_type: "fsType",
});

message!(core::PortworxVolumeSource {
    volume_id: "volumeID" keep,
    fs_type: "fsType",
    read_only: "readOnly",
});

message!(core::ScaleIoPersistentVolumeSource {
    gateway: "gateway" keep,
    system: "system" keep,
    secret_ref: "secretRef" keep,
    ssl_enabled: "sslEnabled",
    protection_domain: "protectionDomain",
    storage_pool: "storagePool",
    storage_mode: "storageMode",
    volume_name: "volumeName",
    fs_type: "fsType",
    read_only: "readOnly",
});

message!(core::LocalVolumeSource {
    path: "path" keep,
    fs_type: "fsType" keep,
});

message!(core::StorageOsPersistentVolumeSource {
    volume_name: "volumeName",
    volume_namespace: "volumeNamespace",
    fs_type: "fsType",
    read_only: "readOnly",
    secret_ref: "secretRef" keep,
});

message!(core::CSIPersistentVolumeSource {
    driver: "driver" keep,
    volume_handle: "volumeHandle" keep,
    read_only: "readOnly",
    fs_type: "fsType",
    volume_attributes: "volumeAttributes",
    controller_publish_secret_ref: "controllerPublishSecretRef" keep,
    node_stage_secret_ref: "nodeStageSecretRef" keep,
    node_publish_secret_ref: "nodePublishSecretRef" keep,
    controller_expand_secret_ref: "controllerExpandSecretRef" keep,
    node_expand_secret_ref: "nodeExpandSecretRef" keep,
});

message!(core::NodeSelector {
    node_selector_terms: "nodeSelectorTerms" keep,
});

message!(core::EmptyDirVolumeSource {
    medium: "medium",
    size_limit: "sizeLimit" keep,
});

message!(core::GitRepoVolumeSource {
    repository: "repository" keep,
    revision: "revision",
    directory: "directory",
});

message!(core::SecretVolumeSource {
    secret_name: "secretName",
    items: "items",
    default_mode: "defaultMode" keep,
    optional: "optional" keep,
});

message!(core::IscsiVolumeSource {
    target_portal: "targetPortal" keep,
    iqn: "iqn" keep,
    lun: "lun" keep,
    iscsi_interface: "iscsiInterface",
    fs_type: "fsType",
    read_only: "readOnly",
    portals: "portals",
    chap_auth_discovery: "chapAuthDiscovery",
    chap_auth_session: "chapAuthSession",
    secret_ref: "secretRef" keep,
    initiator_name: "initiatorName" keep,
});

message!(core::GlusterfsVolumeSource {
    endpoints: "endpoints" keep,
    path: "path" keep,
    read_only: "readOnly",
});

message!(core::PersistentVolumeClaimVolumeSource {
    claim_name: "claimName" keep,
    read_only: "readOnly",
});

message!(core::RbdVolumeSource {
    monitors: "monitors" keep,
    image: "image" keep,
    fs_type: "fsType",
    pool: "pool",
    user: "user",
    keyring: "keyring",
    secret_ref: "secretRef" keep,
    read_only: "readOnly",
});

message!(core::FlexVolumeSource {
    driver: "driver" keep,
    fs_type: "fsType",
    secret_ref: "secretRef" keep,
    read_only: "readOnly",
    options: "options",
});

message!(core::CinderVolumeSource {
    volume_id: "volumeID" keep,
    fs_type: "fsType",
    read_only: "readOnly",
    secret_ref: "secretRef" keep,
});

message!(core::CephFsVolumeSource {
    monitors: "monitors" keep,
    path: "path",
    user: "user",
    secret_file: "secretFile",
    secret_ref: "secretRef" keep,
    read_only: "readOnly",
});

message!(core::DownwardAPIVolumeSource {
    items: "items",
    default_mode: "defaultMode" keep,
});

message!(core::AzureFileVolumeSource {
    secret_name: "secretName" keep,
    share_name: "shareName" keep,
    read_only: "readOnly",
});

message!(core::ConfigMapVolumeSource {
    local_object_reference: inline,
    items: "items",
    default_mode: "defaultMode" keep,
    optional: "optional" keep,
});

message!(core::ProjectedVolumeSource {
    sources: "sources" keep,
    default_mode: "defaultMode" keep,
});

message!(core::ScaleIoVolumeSource {
    gateway: "gateway" keep,
    system: "system" keep,
    secret_ref: "secretRef" keep,
    ssl_enabled: "sslEnabled",
    protection_domain: "protectionDomain",
    storage_pool: "storagePool",
    storage_mode: "storageMode",
    volume_name: "volumeName",
    fs_type: "fsType",
    read_only: "readOnly",
});

message!(core::StorageOsVolumeSource {
    volume_name: "volumeName",
    volume_namespace: "volumeNamespace",
    fs_type: "fsType",
    read_only: "readOnly",
    secret_ref: "secretRef" keep,
});

message!(core::CSIVolumeSource {
    driver: "driver" keep,
    read_only: "readOnly" keep,
    fs_type: "fsType" keep,
    volume_attributes: "volumeAttributes",
    node_publish_secret_ref: "nodePublishSecretRef" keep,
});

message!(core::EphemeralVolumeSource {
    volume_claim_template: "volumeClaimTemplate" keep,
});

message!(core::ImageVolumeSource {
    reference: "reference",
    pull_policy: "pullPolicy",
});

message!(core::ConfigMapEnvSource {
    local_object_reference: inline,
    optional: "optional" keep,
});

message!(core::SecretEnvSource {
    local_object_reference: inline,
    optional: "optional" keep,
});

message!(core::EnvVarSource {
    field_ref: "fieldRef" keep,
    resource_field_ref: "resourceFieldRef" keep,
    config_map_key_ref: "configMapKeyRef" keep,
    secret_key_ref: "secretKeyRef" keep,
    file_key_ref: "fileKeyRef" keep,
});

message!(core::FileKeySelector {
    volume_name: "volumeName" keep,
    path: "path" keep,
    key: "key" keep,
    optional: "optional" keep,
});

message!(core::DownwardAPIVolumeFile {
    path: "path" keep,
    field_ref: "fieldRef" keep,
    resource_field_ref: "resourceFieldRef" keep,
    mode: "mode" keep,
});

message!(core::VolumeProjection {
    pod_certificate: "podCertificate" keep,
    secret: "secret" keep,
    downward_api: "downwardAPI" keep,
    config_map: "configMap" keep,
    service_account_token: "serviceAccountToken" keep,
    cluster_trust_bundle: "clusterTrustBundle" keep,
});

message!(core::PersistentVolumeClaimTemplate {
    metadata: "metadata",
    spec: "spec" keep,
});

message!(core::ObjectFieldSelector {
    api_version: "apiVersion",
    field_path: "fieldPath" keep,
});

message!(core::ResourceFieldSelector {
    container_name: "containerName",
    resource: "resource" keep,
    divisor: "divisor",
});

message!(core::ConfigMapKeySelector {
    local_object_reference: inline,
    key: "key" keep,
    optional: "optional" keep,
});

message!(core::SecretKeySelector {
    local_object_reference: inline,
    key: "key" keep,
    optional: "optional" keep,
});

message!(core::SecretProjection {
    local_object_reference: inline,
    items: "items",
    optional: "optional" keep,
});

message!(core::DownwardAPIProjection { items: "items" });

message!(core::ConfigMapProjection {
    local_object_reference: inline,
    items: "items",
    optional: "optional" keep,
});

message!(core::ServiceAccountTokenProjection {
    audience: "audience",
    expiration_seconds: "expirationSeconds" keep,
    path: "path" keep,
});

message!(core::ClusterTrustBundleProjection {
    name: "name" keep,
    signer_name: "signerName" keep,
    label_selector: "labelSelector" keep,
    optional: "optional" keep,
    path: "path" keep,
});

message!(core::PersistentVolumeClaimSpec {
    access_modes: "accessModes",
    selector: "selector" keep,
    resources: "resources",
    volume_name: "volumeName",
    storage_class_name: "storageClassName" keep,
    volume_mode: "volumeMode" keep,
    data_source: "dataSource" keep,
    data_source_ref: "dataSourceRef" keep,
    volume_attributes_class_name: "volumeAttributesClassName" keep,
});

message!(core::VolumeResourceRequirements {
    limits: "limits",
    requests: "requests",
});

message!(core::PodCertificateProjection {
    signer_name: "signerName" keep,
    key_type: "keyType" keep,
    max_expiration_seconds: "maxExpirationSeconds" keep,
    credential_bundle_path: "credentialBundlePath" keep,
    key_path: "keyPath" keep,
    certificate_chain_path: "certificateChainPath" keep,
    user_annotations: "userAnnotations",
});
