//! Response bodies: objects as a resource shows them, in the representation
//! the client accepts (the object, `PartialObjectMetadata`, or a `Table`).

use std::convert::Infallible;

use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use serde_json::Value;

use super::table::{self, Include};
use crate::meta;
use crate::protobuf;
use crate::registry;
use crate::resources::{Kind, ResourceType};
use crate::status::ApiError;
use crate::store::StoredObject;

/// Every response body.
pub(crate) type Body = UnsyncBoxBody<Bytes, Infallible>;

/// What the client asked to receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Representation {
    Object,
    /// `as=PartialObjectMetadata` (`...List` for lists): metadata only.
    Metadata,
    /// `as=Table;g=meta.k8s.io;v=v1`: server-side printing, each row
    /// carrying what `includeObject` asks.
    Table(Include),
}

/// Picks a representation from `Accept` (the first acceptable range wins)
/// and, for a `Table`, what its rows carry from `includeObject`.
///
/// # Errors
///
/// 406 when nothing acceptable is offered; 400 for a bad `includeObject`.
pub(crate) fn negotiate(
    accept: Option<&str>,
    list: bool,
    include: Option<&str>,
) -> Result<Representation, ApiError> {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return Ok(Representation::Object);
    };
    let wanted_partial = if list {
        "PartialObjectMetadataList"
    } else {
        "PartialObjectMetadata"
    };
    for range in accept.split(',') {
        let mut pieces = range.split(';').map(str::trim);
        let media = pieces.next().unwrap_or("").to_ascii_lowercase();
        let params: Vec<(&str, &str)> = pieces.filter_map(|p| p.split_once('=')).collect();
        let param = |name: &str| {
            params
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| *v)
        };
        if media == protobuf::MEDIA_TYPE && param("as").is_none() {
            return Ok(Representation::Object);
        }
        if !matches!(media.as_str(), "application/json" | "application/*" | "*/*") {
            continue;
        }
        match param("as") {
            None => return Ok(Representation::Object),
            Some(as_) if as_ == wanted_partial && param("g") == Some("meta.k8s.io") => {
                return Ok(Representation::Metadata);
            }
            Some("Table") if param("g") == Some("meta.k8s.io") && param("v") == Some("v1") => {
                return Ok(Representation::Table(Include::parse(include)?));
            }
            Some(_) => {}
        }
    }
    Err(ApiError::not_acceptable(format!(
        "only the following media types are accepted: application/json, {}, application/json;as={wanted_partial};g=meta.k8s.io;v=v1, application/json;as=Table;g=meta.k8s.io;v=v1 (got {accept:?})",
        protobuf::MEDIA_TYPE
    )))
}

/// The media ranges of `Accept`, each as its type and whether it has an
/// `as=` parameter.
pub(crate) fn ranges(accept: &str) -> impl Iterator<Item = (String, bool)> + '_ {
    accept.split(',').map(|range| {
        let mut pieces = range.split(';').map(str::trim);
        let media = pieces.next().unwrap_or("").to_ascii_lowercase();
        let has_as = pieces.any(|p| p.to_ascii_lowercase().starts_with("as="));
        (media, has_as)
    })
}

/// Whether `Accept` puts plain protobuf before anything JSON (client-go's
/// `application/vnd.kubernetes.protobuf,application/json`).
pub(crate) fn prefers_protobuf(accept: Option<&str>) -> bool {
    let Some(accept) = accept else { return false };
    ranges(accept)
        .find(|(media, has_as)| {
            (media == protobuf::MEDIA_TYPE && !has_as)
                || matches!(media.as_str(), "application/json" | "application/*" | "*/*")
        })
        .is_some_and(|(media, _)| media == protobuf::MEDIA_TYPE)
}

/// Whether `Accept` takes JSON at all (no header takes anything).
pub(crate) fn accepts_json(accept: Option<&str>) -> bool {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return true;
    };
    ranges(accept)
        .any(|(media, _)| matches!(media.as_str(), "application/json" | "application/*" | "*/*"))
}

/// A response in the encoding the client prefers: protobuf when it ranks it
/// first and the body's kind is written as protobuf, JSON otherwise.
pub(crate) fn response(
    code: u16,
    body: Bytes,
    warnings: &[String],
    accept: Option<&str>,
) -> Response<Body> {
    if prefers_protobuf(accept)
        && let Some(encoded) = protobuf::encode(&body)
    {
        let mut response = json_response(code, encoded, warnings);
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(protobuf::MEDIA_TYPE),
        );
        return response;
    }
    json_response(code, body, warnings)
}

/// Whether stored bytes can be sent as they are.
pub(crate) fn is_verbatim(rt: &ResourceType, repr: Representation) -> bool {
    repr == Representation::Object && rt.kind_id != Kind::EventV1
}

/// A stored object as `rt` shows it in `repr`.
pub(crate) fn stored(rt: &ResourceType, repr: Representation, object: &StoredObject) -> Bytes {
    if is_verbatim(rt, repr) {
        object.json.clone()
    } else {
        value(rt, repr, &object.value)
    }
}

/// A storage-representation value as `rt` shows it in `repr`.
pub(crate) fn value(rt: &ResourceType, repr: Representation, stored: &Value) -> Bytes {
    let shown = match repr {
        Representation::Object => registry::view(rt, stored),
        Representation::Metadata => meta::partial_object_metadata(&registry::view(rt, stored)),
        Representation::Table(include) => table::single(rt, include, stored, true),
    };
    Bytes::from(serde_json::to_vec(&shown).unwrap_or_default())
}

/// A JSON response.
pub(crate) fn json_response(code: u16, body: Bytes, warnings: &[String]) -> Response<Body> {
    let mut response = Response::new(Full::new(body).boxed_unsync());
    *response.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    for warning in warnings {
        let text = format!("299 - {:?}", warning);
        if let Ok(v) = HeaderValue::from_str(&text) {
            headers.append(header::WARNING, v);
        }
    }
    response
}

/// A `Status` response for `err`.
pub(crate) fn error_response(err: &ApiError) -> Response<Body> {
    let body = Bytes::from(serde_json::to_vec(&err.to_status()).unwrap_or_default());
    let mut response = json_response(err.code, body, &[]);
    if let Some(secs) = err.retry_after
        && let Ok(v) = HeaderValue::from_str(&secs.to_string())
    {
        response.headers_mut().insert(header::RETRY_AFTER, v);
    }
    response
}

/// A plain-text response (health checks).
pub(crate) fn text_response(code: u16, text: &'static str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed_unsync());
    *response.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectls_table_requests_get_a_table_and_v1beta1_alone_falls_back_to_json() {
        let accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(
            negotiate(Some(accept), true, None),
            Ok(Representation::Table(Include::Metadata))
        );
        assert_eq!(
            negotiate(Some(accept), false, Some("Object")),
            Ok(Representation::Table(Include::Object))
        );
        assert_eq!(
            negotiate(Some(accept), true, Some("Everything")).map_err(|e| e.code),
            Err(400)
        );
        let old = "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(negotiate(Some(old), true, None), Ok(Representation::Object));
    }

    #[test]
    fn metadata_representation_is_served_for_kube_metadata_clients() {
        let one = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
        let list = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
        assert_eq!(
            negotiate(Some(one), false, None),
            Ok(Representation::Metadata)
        );
        assert_eq!(
            negotiate(Some(list), true, None),
            Ok(Representation::Metadata)
        );
        assert_eq!(
            negotiate(Some(one), true, None).map_err(|e| e.code),
            Err(406)
        );
    }

    #[test]
    fn protobuf_is_chosen_when_ranked_before_json() {
        let client_go = "application/vnd.kubernetes.protobuf,application/json";
        assert_eq!(
            negotiate(Some(client_go), false, None),
            Ok(Representation::Object)
        );
        assert!(prefers_protobuf(Some(client_go)));
        assert!(prefers_protobuf(Some(
            "application/vnd.kubernetes.protobuf"
        )));
        assert!(!prefers_protobuf(Some(
            "application/json, application/vnd.kubernetes.protobuf"
        )));
        assert!(!prefers_protobuf(Some(
            "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1, application/json"
        )));
        assert!(!prefers_protobuf(None));
        assert!(accepts_json(Some(client_go)));
        assert!(!accepts_json(Some("application/vnd.kubernetes.protobuf")));
        assert!(accepts_json(None));
    }

    #[test]
    fn a_protobuf_table_is_not_acceptable() {
        let err = negotiate(
            Some("application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1"),
            true,
            None,
        )
        .expect_err("406");
        assert_eq!(err.code, 406);
    }

    #[test]
    fn a_service_is_answered_in_protobuf_when_preferred() {
        let body = Bytes::from_static(
            br#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"web"}}"#,
        );
        let client_go = Some("application/vnd.kubernetes.protobuf,application/json");
        let answer = response(201, body.clone(), &[], client_go);
        assert_eq!(answer.headers()[header::CONTENT_TYPE], protobuf::MEDIA_TYPE);
        let answer = response(201, body, &[], Some("application/json"));
        assert_eq!(answer.headers()[header::CONTENT_TYPE], "application/json");
    }
}
