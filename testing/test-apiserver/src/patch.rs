//! The three patch types Kubernetes serves for built-in kinds: JSON patch
//! (RFC 6902), JSON merge patch (RFC 7386) and strategic merge patch.
//! Server-side apply is refused with 415.

mod schema;
mod strategic;

use json_patch::{PatchOperation, TestOperation};
use serde_json::Value;

use crate::resources::Kind;
use crate::status::ApiError;

/// A patch body's type, from its Content-Type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PatchType {
    Json,
    Merge,
    Strategic,
}

impl PatchType {
    /// The patch type a Content-Type names.
    ///
    /// # Errors
    ///
    /// 415 for server-side apply and for anything that is not a patch type.
    pub(crate) fn from_content_type(content_type: &str) -> Result<Self, ApiError> {
        let essence = content_type
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        match essence.as_str() {
            "application/json-patch+json" => Ok(Self::Json),
            "application/merge-patch+json" => Ok(Self::Merge),
            "application/strategic-merge-patch+json" => Ok(Self::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => {
                Err(ApiError::unsupported_media_type(
                    "server-side apply (application/apply-patch+yaml) is not implemented by test-apiserver: \
                     it tracks no managedFields, so it cannot detect field-manager conflicts; \
                     send a merge, JSON or strategic merge patch instead",
                ))
            }
            _ => Err(ApiError::unsupported_media_type(format!(
                "the body of the request was in an unknown format ({content_type:?}) - accepted media types include: \
                 application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json"
            ))),
        }
    }
}

/// Applies `body`, a patch of type `patch_type`, to `current`, an object of `kind`.
///
/// # Errors
///
/// 400 for a body that is not a patch; 422 for a patch that does not apply
/// (a failed JSON patch `test`, a missing path, a list item without its merge key).
pub(crate) fn apply(
    kind: Kind,
    patch_type: PatchType,
    current: Value,
    body: &[u8],
) -> Result<Value, ApiError> {
    let mut doc = current;
    match patch_type {
        PatchType::Json => {
            let patch: json_patch::Patch = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
            // kube-apiserver says no more than this (`NewGenericServerResponse`
            // with no server message): the failed operation is not named.
            apply_json_patch(&mut doc, &patch.0).map_err(|_| {
                ApiError::new(422, "Invalid", JSON_PATCH_REFUSED)
                    .with_details(serde_json::json!({}))
            })?;
        }
        PatchType::Merge => {
            let patch = parse_object(body)?;
            json_patch::merge(&mut doc, &patch);
        }
        PatchType::Strategic => {
            let patch = parse_object(body)?;
            strategic::apply(kind, &mut doc, &patch)
                .map_err(|e| ApiError::new(422, "Invalid", e))?;
        }
    }
    Ok(doc)
}

fn parse_object(body: &[u8]) -> Result<Value, ApiError> {
    let patch: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
    if !patch.is_object() {
        return Err(ApiError::bad_request(
            "error decoding patch: the patch must be a JSON object",
        ));
    }
    Ok(patch)
}

/// kube-apiserver's whole message for a JSON patch that does not apply.
const JSON_PATCH_REFUSED: &str = "the server rejected our request due to an error in our request";

/// RFC 6902, with one rule of the Go implementation Kubernetes uses, which
/// clients rely on: `test` of a missing member against `null` succeeds
/// (kube-runtime's finalizer helper tests `/metadata/finalizers` == null).
fn apply_json_patch(doc: &mut Value, ops: &[PatchOperation]) -> Result<(), String> {
    for op in ops {
        match op {
            PatchOperation::Test(test) => go_test(doc, test)?,
            other => {
                json_patch::patch(doc, std::slice::from_ref(other)).map_err(|e| e.to_string())?;
            }
        }
    }
    Ok(())
}

fn go_test(doc: &Value, test: &TestOperation) -> Result<(), String> {
    let path = test.path.as_str();
    let failed = || format!("testing value {path} failed");
    if path.is_empty() {
        return if *doc == test.value {
            Ok(())
        } else {
            Err(failed())
        };
    }
    let (parent_path, last) = path.rsplit_once('/').unwrap_or(("", path));
    let parent = doc
        .pointer(parent_path)
        .ok_or_else(|| format!("test operation does not apply: is missing path: {path}"))?;
    let key = last.replace("~1", "/").replace("~0", "~");
    let found = match parent {
        Value::Object(map) => map.get(&key),
        Value::Array(items) => key.parse::<usize>().ok().and_then(|i| items.get(i)),
        _ => None,
    };
    match found {
        None if test.value.is_null() => Ok(()),
        Some(v) if *v == test.value => Ok(()),
        _ => Err(failed()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn patch(kind: Kind, pt: PatchType, current: Value, body: &Value) -> Result<Value, ApiError> {
        apply(kind, pt, current, &serde_json::to_vec(body).expect("json"))
    }

    #[test]
    fn json_patch_test_of_missing_member_against_null_passes_as_in_go() {
        let body = json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": ["f"]}
        ]);
        let out = patch(
            Kind::ConfigMap,
            PatchType::Json,
            json!({"metadata": {}}),
            &body,
        )
        .expect("applies");
        assert_eq!(out["metadata"]["finalizers"], json!(["f"]));
    }

    #[test]
    fn json_patch_failed_test_is_unprocessable() {
        let body = json!([{"op": "test", "path": "/metadata/name", "value": "b"}]);
        let err = patch(
            Kind::ConfigMap,
            PatchType::Json,
            json!({"metadata": {"name": "a"}}),
            &body,
        )
        .expect_err("test fails");
        assert_eq!(err.code, 422);
        assert_eq!(err.message, JSON_PATCH_REFUSED, "kube-apiserver's words");
    }

    #[test]
    fn merge_patch_replaces_lists_and_null_deletes() {
        let current = json!({"metadata": {"labels": {"a": "1", "b": "2"}, "finalizers": ["x"]}});
        let body = json!({"metadata": {"labels": {"a": null}, "finalizers": ["y"]}});
        let out = patch(Kind::ConfigMap, PatchType::Merge, current, &body).expect("applies");
        assert_eq!(
            out["metadata"],
            json!({"labels": {"b": "2"}, "finalizers": ["y"]})
        );
    }

    #[test]
    fn apply_patches_are_refused_with_415() {
        let err =
            PatchType::from_content_type("application/apply-patch+yaml").expect_err("refused");
        assert_eq!((err.code, err.reason), (415, "UnsupportedMediaType"));
        assert_eq!(
            PatchType::from_content_type("application/merge-patch+json; charset=utf-8"),
            Ok(PatchType::Merge)
        );
    }

    #[test]
    fn non_object_merge_patches_are_bad_requests() {
        let err =
            patch(Kind::ConfigMap, PatchType::Merge, json!({}), &json!([1])).expect_err("bad");
        assert_eq!(err.code, 400);
    }
}
