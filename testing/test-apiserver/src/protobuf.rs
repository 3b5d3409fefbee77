//! `application/vnd.kubernetes.protobuf` bodies, read and written with the
//! messages of k8s-pb (kube-rs's bindings of Kubernetes' `.proto` files).
//!
//! A body is the four bytes `k8s\0` and a `runtime.Unknown` whose `typeMeta`
//! names the kind and whose `raw` is the kind's message. Requests are turned
//! into the JSON this server stores, then decoded and validated as a JSON body
//! would be; responses are the JSON answer turned back into messages.
//!
//! What JSON each message field has comes from the tables in [`tables`],
//! generated from k8s-pb's messages (Kubernetes 1.35) and the
//! `json`/`protobuf` tags of the Go types in k8s.io/api v0.35 (fields newer
//! than 1.35 are left out, as k8s-pb and k8s-openapi leave them out); a
//! test holds every table to the kinds' OpenAPI schemas, so a field missing
//! from a table fails it. Watch streams stay JSON.

mod convert;
mod tables;

use hyper::body::Bytes;
use prost::Message as _;
use serde_json::{Map, Value};

use convert::{ConvertError, Field, Message};
use k8s_pb::api::{
    admissionregistration, authentication, authorization, certificates, coordination, core,
    discovery, events, rbac,
};
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};

use crate::status::ApiError;

/// The media type.
pub(crate) const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// What starts every body.
const MAGIC: &[u8; 4] = b"k8s\0";

type Decode = fn(&[u8]) -> Result<Map<String, Value>, prost::DecodeError>;
type Encode = fn(&Value) -> Result<Vec<u8>, ConvertError>;

fn decode_as<M: Message + prost::Message>(
    raw: &[u8],
) -> Result<Map<String, Value>, prost::DecodeError> {
    let message = M::decode(raw)?;
    let mut out = Map::new();
    message.write(&mut out);
    Ok(out)
}

fn encode_as<M: Message + prost::Message>(value: &Value) -> Result<Vec<u8>, ConvertError> {
    Ok(M::from_json(value, "")?.encode_to_vec())
}

macro_rules! codecs {
    ($($api_version:literal $kind:literal => $ty:ty,)*) => {
        fn codec(api_version: &str, kind: &str) -> Option<(Decode, Encode)> {
            if kind == "DeleteOptions" {
                return Some((decode_as::<meta::DeleteOptions>, encode_as::<meta::DeleteOptions>));
            }
            match (api_version, kind) {
                $(($api_version, $kind) => Some((decode_as::<$ty>, encode_as::<$ty>)),)*
                _ => None,
            }
        }
    };
}

codecs! {
    "v1" "Namespace" => core::v1::Namespace,
    "v1" "NamespaceList" => core::v1::NamespaceList,
    "v1" "Node" => core::v1::Node,
    "v1" "NodeList" => core::v1::NodeList,
    "v1" "Service" => core::v1::Service,
    "v1" "ServiceList" => core::v1::ServiceList,
    "v1" "Endpoints" => core::v1::Endpoints,
    "v1" "EndpointsList" => core::v1::EndpointsList,
    "v1" "ConfigMap" => core::v1::ConfigMap,
    "v1" "ConfigMapList" => core::v1::ConfigMapList,
    "v1" "Secret" => core::v1::Secret,
    "v1" "SecretList" => core::v1::SecretList,
    "v1" "Event" => core::v1::Event,
    "v1" "EventList" => core::v1::EventList,
    "v1" "Pod" => core::v1::Pod,
    "v1" "PodList" => core::v1::PodList,
    "v1" "PersistentVolume" => core::v1::PersistentVolume,
    "v1" "PersistentVolumeList" => core::v1::PersistentVolumeList,
    "v1" "ServiceAccount" => core::v1::ServiceAccount,
    "v1" "ServiceAccountList" => core::v1::ServiceAccountList,
    "v1" "Status" => meta::Status,
    "coordination.k8s.io/v1" "Lease" => coordination::v1::Lease,
    "coordination.k8s.io/v1" "LeaseList" => coordination::v1::LeaseList,
    "events.k8s.io/v1" "Event" => events::v1::Event,
    "events.k8s.io/v1" "EventList" => events::v1::EventList,
    "discovery.k8s.io/v1" "EndpointSlice" => discovery::v1::EndpointSlice,
    "discovery.k8s.io/v1" "EndpointSliceList" => discovery::v1::EndpointSliceList,
    "rbac.authorization.k8s.io/v1" "Role" => rbac::v1::Role,
    "rbac.authorization.k8s.io/v1" "RoleList" => rbac::v1::RoleList,
    "rbac.authorization.k8s.io/v1" "ClusterRole" => rbac::v1::ClusterRole,
    "rbac.authorization.k8s.io/v1" "ClusterRoleList" => rbac::v1::ClusterRoleList,
    "rbac.authorization.k8s.io/v1" "RoleBinding" => rbac::v1::RoleBinding,
    "rbac.authorization.k8s.io/v1" "RoleBindingList" => rbac::v1::RoleBindingList,
    "rbac.authorization.k8s.io/v1" "ClusterRoleBinding" => rbac::v1::ClusterRoleBinding,
    "rbac.authorization.k8s.io/v1" "ClusterRoleBindingList" => rbac::v1::ClusterRoleBindingList,
    "certificates.k8s.io/v1" "CertificateSigningRequest" => certificates::v1::CertificateSigningRequest,
    "certificates.k8s.io/v1" "CertificateSigningRequestList" => certificates::v1::CertificateSigningRequestList,
    "admissionregistration.k8s.io/v1" "ValidatingWebhookConfiguration" => admissionregistration::v1::ValidatingWebhookConfiguration,
    "admissionregistration.k8s.io/v1" "ValidatingWebhookConfigurationList" => admissionregistration::v1::ValidatingWebhookConfigurationList,
    "authentication.k8s.io/v1" "TokenReview" => authentication::v1::TokenReview,
    "authentication.k8s.io/v1" "TokenRequest" => authentication::v1::TokenRequest,
    "authorization.k8s.io/v1" "SelfSubjectAccessReview" => authorization::v1::SelfSubjectAccessReview,
    "authorization.k8s.io/v1" "SubjectAccessReview" => authorization::v1::SubjectAccessReview,
}

/// A protobuf request body as the JSON object it stands for, `apiVersion`
/// and `kind` taken from its `typeMeta`.
///
/// # Errors
///
/// 400 for a body that is not a Kubernetes protobuf message or does not
/// decode as its kind; 415 for a kind this server does not read as protobuf.
pub(crate) fn decode(body: &[u8]) -> Result<Value, ApiError> {
    let bad = |why: String| {
        ApiError::bad_request(format!("error decoding request body as protobuf: {why}"))
    };
    let envelope = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| bad("it does not start with the k8s\\0 prefix".into()))?;
    let unknown = Unknown::decode(envelope).map_err(|e| bad(e.to_string()))?;
    let type_meta = unknown.type_meta.unwrap_or_default();
    let api_version = type_meta.api_version.unwrap_or_default();
    let kind = type_meta.kind.unwrap_or_default();
    let Some((decode, _)) = codec(&api_version, &kind) else {
        return Err(ApiError::unsupported_media_type(format!(
            "the body of the request was in an unknown format ({MEDIA_TYPE} of kind {kind:?} in {api_version:?}) \
             - test-apiserver reads protobuf for its served kinds only, and JSON for all"
        )));
    };
    let mut object = decode(unknown.raw.as_deref().unwrap_or_default())
        .map_err(|e| bad(format!("{kind}: {e}")))?;
    object.insert("apiVersion".into(), Value::String(api_version));
    object.insert("kind".into(), Value::String(kind));
    Ok(Value::Object(object))
}

/// A JSON response body as protobuf, when its kind is one this server writes
/// as protobuf; `None` otherwise (the caller sends the JSON).
pub(crate) fn encode(json: &[u8]) -> Option<Bytes> {
    let value: Value = serde_json::from_slice(json).ok()?;
    match to_protobuf(&value) {
        Ok(body) => body,
        Err(e) => {
            tracing::warn!(%e, "a response could not be written as protobuf; sending JSON");
            None
        }
    }
}

/// `value` as a protobuf body; `None` for a kind not written as protobuf.
fn to_protobuf(value: &Value) -> Result<Option<Bytes>, ConvertError> {
    let field = |name: &str| value.get(name).and_then(Value::as_str).unwrap_or_default();
    let (api_version, kind) = (field("apiVersion"), field("kind"));
    let Some((_, encode)) = codec(api_version, kind) else {
        return Ok(None);
    };
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.to_owned()),
            kind: Some(kind.to_owned()),
        }),
        raw: Some(encode(value)?),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut out = MAGIC.to_vec();
    out.extend(unknown.encode_to_vec());
    Ok(Some(Bytes::from(out)))
}

#[cfg(test)]
mod tests;
