//! GET of one object, and lists: selectors, `limit` + `continue`, and the
//! resourceVersion semantics of the API concepts page.

use std::ops::ControlFlow;
use std::sync::Arc;

use hyper::body::Bytes;

use super::continue_token::ContinueToken;
use super::params::Params;
use super::render::{self, Representation};
use super::route::ResourceRequest;
use super::table;
use crate::resources::ResourceType;
use crate::selector::{FieldSelector, LabelSelector};
use crate::shared::Shared;
use crate::status::ApiError;
use crate::store::{ObjectKey, StoredObject};

/// GET of one object.
pub(crate) fn get(
    shared: &Shared,
    req: &ResourceRequest,
    name: &str,
    repr: Representation,
) -> Result<Bytes, ApiError> {
    let key = crate::registry::key(req.rt, req.namespace.as_deref(), name);
    let store = shared.store.lock();
    let object = store
        .get(req.rt.storage, &key)
        .ok_or_else(|| ApiError::not_found(req.rt, name))?;
    Ok(render::stored(req.rt, repr, object))
}

/// Which state a list reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReadAt {
    /// The newest state.
    Latest,
    /// Exactly this resourceVersion.
    Exact(u64),
}

/// The selectors of a list or watch.
#[derive(Debug, Clone, Default)]
pub(crate) struct Selection {
    pub(crate) labels: LabelSelector,
    pub(crate) fields: FieldSelector,
}

impl Selection {
    /// The selectors of a request on `rt`.
    pub(crate) fn parse(params: &Params, rt: &ResourceType) -> Result<Self, ApiError> {
        Ok(Self {
            labels: LabelSelector::parse(params.get("labelSelector").unwrap_or(""))?,
            fields: FieldSelector::parse(params.get("fieldSelector").unwrap_or(""), rt.kind_id)?,
        })
    }

    pub(crate) fn is_everything(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty()
    }

    pub(crate) fn matches(&self, obj: &serde_json::Value) -> bool {
        self.labels.matches(crate::meta::labels(obj)) && self.fields.matches(obj)
    }
}

fn list_options_invalid(field: &str, why: &str) -> ApiError {
    ApiError::invalid(
        "ListOptions",
        "meta.k8s.io",
        "",
        &[(field.into(), why.into())],
    )
}

/// A resourceVersion parameter as a number.
pub(crate) fn parse_rv(text: &str) -> Result<u64, ApiError> {
    text.parse().map_err(|_| {
        ApiError::bad_request(format!("invalid resource version {text:?}: not a number"))
    })
}

/// Decides what a list reads, following the table in the Kubernetes API
/// concepts page (resourceVersion × resourceVersionMatch × limit/continue).
fn read_at(
    params: &Params,
    current: u64,
    token: Option<&ContinueToken>,
) -> Result<ReadAt, ApiError> {
    let rv = params.get("resourceVersion").unwrap_or("");
    let matching = params.get("resourceVersionMatch").unwrap_or("");
    let limited = params.number("limit")?.is_some_and(|l| l > 0);
    if params.get("sendInitialEvents").is_some() {
        return Err(list_options_invalid(
            "sendInitialEvents",
            "Forbidden: sendInitialEvents is forbidden for list",
        ));
    }
    if let Some(token) = token {
        if !matching.is_empty() {
            return Err(list_options_invalid(
                "resourceVersionMatch",
                "Forbidden: resourceVersionMatch is forbidden when continue is provided",
            ));
        }
        if !rv.is_empty() && rv != "0" {
            return Err(ApiError::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        return Ok(ReadAt::Exact(token.rv));
    }
    let not_older_than = |n: u64| {
        if n > current {
            Err(ApiError::too_large_resource_version(n, current))
        } else {
            Ok(ReadAt::Latest)
        }
    };
    match (matching, rv) {
        ("", "" | "0") => Ok(ReadAt::Latest),
        ("", n) => {
            let n = parse_rv(n)?;
            if limited {
                exact(n, current)
            } else {
                not_older_than(n)
            }
        }
        ("Exact", "" | "0") => Err(list_options_invalid(
            "resourceVersionMatch",
            "Forbidden: resourceVersionMatch \"Exact\" is forbidden for resourceVersion \"\" and \"0\"",
        )),
        ("Exact", n) => exact(parse_rv(n)?, current),
        ("NotOlderThan", "") => Err(list_options_invalid(
            "resourceVersionMatch",
            "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
        )),
        ("NotOlderThan", "0") => Ok(ReadAt::Latest),
        ("NotOlderThan", n) => not_older_than(parse_rv(n)?),
        (other, _) => Err(list_options_invalid(
            "resourceVersionMatch",
            &format!("Unsupported value: {other:?}: supported values: \"Exact\", \"NotOlderThan\""),
        )),
    }
}

fn exact(n: u64, current: u64) -> Result<ReadAt, ApiError> {
    if n > current {
        Err(ApiError::too_large_resource_version(n, current))
    } else {
        Ok(ReadAt::Exact(n))
    }
}

/// A list response body.
pub(crate) fn list(
    shared: &Shared,
    req: &ResourceRequest,
    params: &Params,
    repr: Representation,
) -> Result<Bytes, ApiError> {
    let selection = Selection::parse(params, req.rt)?;
    let token = params
        .get("continue")
        .filter(|c| !c.is_empty())
        .map(ContinueToken::decode)
        .transpose()?;
    let limit = params
        .number("limit")?
        .filter(|l| *l > 0)
        .map(|l| l as usize);
    let mut items: Vec<Arc<StoredObject>> = Vec::new();
    let mut last_key: Option<ObjectKey> = None;
    let mut more = false;
    let mut remaining: u64 = 0;
    let list_rv;
    {
        let store = shared.store.lock();
        let current = store.current_rv();
        let at = read_at(params, current, token.as_ref())?;
        list_rv = match at {
            ReadAt::Latest => current,
            ReadAt::Exact(n) => n,
        };
        let start_after = token.as_ref().map(|t| t.start_after.clone());
        let count_remaining = selection.is_everything();
        store
            .scan_at(
                req.rt.storage,
                Some(list_rv),
                req.namespace.as_deref(),
                start_after.as_ref(),
                |key, object| {
                    if !selection.matches(&object.value) {
                        return ControlFlow::Continue(());
                    }
                    if limit.is_some_and(|l| items.len() >= l) {
                        more = true;
                        remaining += 1;
                        return if count_remaining {
                            ControlFlow::Continue(())
                        } else {
                            ControlFlow::Break(())
                        };
                    }
                    items.push(object.clone());
                    last_key = Some(key.clone());
                    ControlFlow::Continue(())
                },
            )
            .map_err(|e| {
                if token.is_some() {
                    expired_continue()
                } else {
                    e
                }
            })?;
    }
    let mut metadata = serde_json::Map::new();
    metadata.insert("resourceVersion".into(), list_rv.to_string().into());
    if more && let Some(key) = last_key {
        metadata.insert(
            "continue".into(),
            ContinueToken {
                rv: list_rv,
                start_after: key,
            }
            .encode()
            .into(),
        );
        if selection.is_everything() {
            metadata.insert("remainingItemCount".into(), remaining.into());
        }
    }
    Ok(list_body(
        req,
        repr,
        &items,
        &serde_json::Value::Object(metadata),
    ))
}

fn expired_continue() -> ApiError {
    ApiError::expired(
        "The provided continue parameter is too old to display a consistent list result. \
         You can start a new list without the continue parameter.",
    )
}

/// `{"apiVersion":..,"items":[..],"kind":"<Kind>List","metadata":{..}}`,
/// with each item's stored bytes copied in as they are.
pub(crate) fn list_body(
    req: &ResourceRequest,
    repr: Representation,
    items: &[Arc<StoredObject>],
    metadata: &serde_json::Value,
) -> Bytes {
    let rt = req.rt;
    let (api_version, kind) = match repr {
        Representation::Object => (rt.api_version(), format!("{}List", rt.kind)),
        Representation::Metadata => (
            "meta.k8s.io/v1".to_owned(),
            "PartialObjectMetadataList".to_owned(),
        ),
        Representation::Table(include) => {
            let table = table::table(rt, include, items.iter().map(|o| &o.value), metadata, true);
            return Bytes::from(serde_json::to_vec(&table).unwrap_or_default());
        }
    };
    let rendered: Vec<Bytes> = items.iter().map(|o| render::stored(rt, repr, o)).collect();
    let size: usize = rendered.iter().map(|b| b.len() + 1).sum();
    let mut out = Vec::with_capacity(size + 256);
    out.extend_from_slice(b"{\"apiVersion\":");
    out.extend_from_slice(
        serde_json::to_string(&api_version)
            .unwrap_or_default()
            .as_bytes(),
    );
    out.extend_from_slice(b",\"items\":[");
    for (i, item) in rendered.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(item);
    }
    out.extend_from_slice(b"],\"kind\":");
    out.extend_from_slice(serde_json::to_string(&kind).unwrap_or_default().as_bytes());
    out.extend_from_slice(b",\"metadata\":");
    out.extend_from_slice(
        serde_json::to_string(metadata)
            .unwrap_or_default()
            .as_bytes(),
    );
    out.push(b'}');
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(query: &str, current: u64) -> Result<ReadAt, u16> {
        read_at(&Params::parse(query), current, None).map_err(|e| e.code)
    }

    #[test]
    fn resource_version_semantics_follow_the_api_concepts_table() {
        assert_eq!(at("", 10), Ok(ReadAt::Latest));
        assert_eq!(at("resourceVersion=0", 10), Ok(ReadAt::Latest));
        assert_eq!(at("resourceVersion=5", 10), Ok(ReadAt::Latest));
        assert_eq!(at("resourceVersion=5&limit=2", 10), Ok(ReadAt::Exact(5)));
        assert_eq!(
            at("resourceVersion=5&resourceVersionMatch=Exact", 10),
            Ok(ReadAt::Exact(5))
        );
        assert_eq!(
            at(
                "resourceVersion=0&resourceVersionMatch=NotOlderThan&limit=500",
                10
            ),
            Ok(ReadAt::Latest)
        );
        assert_eq!(at("resourceVersionMatch=NotOlderThan", 10), Err(422));
        assert_eq!(
            at("resourceVersion=0&resourceVersionMatch=Exact", 10),
            Err(422)
        );
        assert_eq!(
            at("resourceVersion=11&resourceVersionMatch=NotOlderThan", 10),
            Err(504)
        );
        assert_eq!(at("resourceVersion=x", 10), Err(400));
        assert_eq!(at("sendInitialEvents=true", 10), Err(422));
    }
}
