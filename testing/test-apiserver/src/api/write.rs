//! POST, PUT, PATCH and DELETE.

use std::ops::ControlFlow;
use std::sync::Arc;

use hyper::body::Bytes;
use serde_json::Value;

use super::params::Params;
use super::read::{Selection, list_body};
use super::render::{self, Representation};
use super::route::ResourceRequest;
use crate::kinds;
use crate::patch::{self, PatchType};
use crate::protobuf;
use crate::registry::{
    self, DeleteOptions, FieldValidation, Outcome, Target, UpdateError, WriteOptions, Written,
};
use crate::resources::Kind;
use crate::shared::Shared;
use crate::status::ApiError;
use crate::store::StoredObject;
use crate::user::UserInfo;
use crate::validation;

/// A write's response: status code, body, warnings.
pub(crate) type Reply = (u16, Bytes, Vec<String>);

fn write_options(params: &Params) -> Result<WriteOptions, ApiError> {
    Ok(WriteOptions {
        dry_run: params.dry_run()?,
        validation: FieldValidation::parse(params.get("fieldValidation"))?,
    })
}

/// The body of a POST, PUT or DELETE as JSON: it is JSON, or protobuf for
/// the kinds [`protobuf`] reads; this server reads no YAML or CBOR.
pub(crate) fn body_value(content_type: Option<&str>, body: &[u8]) -> Result<Value, ApiError> {
    let essence = essence(content_type);
    if essence == protobuf::MEDIA_TYPE {
        return protobuf::decode(body);
    }
    if !essence.is_empty() && essence != "application/json" {
        return Err(ApiError::unsupported_media_type(format!(
            "the body of the request was in an unknown format ({essence}) - accepted media types include: application/json, {} \
             (test-apiserver reads no YAML or CBOR)",
            protobuf::MEDIA_TYPE
        )));
    }
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding request body as JSON: {e}")))
}

/// The media type of a `Content-Type`, without parameters, lowercased.
fn essence(content_type: Option<&str>) -> String {
    content_type
        .and_then(|c| c.split(';').next())
        .map(|c| c.trim().to_ascii_lowercase())
        .unwrap_or_default()
}

/// A POST or PUT body as JSON, with the fields a JSON body repeated (looked
/// for unless `fieldValidation=Ignore`; protobuf cannot repeat one).
fn body_and_duplicates(
    content_type: Option<&str>,
    body: &[u8],
    validation: FieldValidation,
) -> Result<(Value, Vec<String>), ApiError> {
    let value = body_value(content_type, body)?;
    let json = essence(content_type) != protobuf::MEDIA_TYPE;
    let duplicates = if json && validation != FieldValidation::Ignore {
        validation::duplicates::find(body)
    } else {
        Vec::new()
    };
    Ok((value, duplicates))
}

fn reply(req: &ResourceRequest, repr: Representation, outcome: Outcome) -> Reply {
    let body = match &outcome.written {
        Written::Stored(object) => render::stored(req.rt, repr, object),
        Written::Value(value) => render::value(req.rt, repr, value),
        Written::Status(status) => Bytes::from(serde_json::to_vec(status).unwrap_or_default()),
    };
    (outcome.code, body, outcome.warnings)
}

/// POST; `requester` is who asks (`None` when authentication is off), which
/// a CertificateSigningRequest records.
pub(crate) fn create(
    shared: &Shared,
    req: &ResourceRequest,
    params: &Params,
    content_type: Option<&str>,
    body: &[u8],
    (repr, requester): (Representation, Option<&UserInfo>),
) -> Result<Reply, ApiError> {
    let opts = write_options(params)?;
    let (value, duplicates) = body_and_duplicates(content_type, body, opts.validation)?;
    let mut decoded =
        registry::decode_with_duplicates(req.rt, value, &duplicates, opts.validation)?;
    if req.rt.kind_id == Kind::CertificateSigningRequest {
        kinds::csr::set_requester(&mut decoded.value, requester);
    }
    let outcome = registry::create(
        &mut shared.store.lock(),
        req.rt,
        req.namespace.as_deref(),
        decoded,
        opts,
    )?;
    Ok(reply(req, repr, outcome))
}

/// How often an update is derived again after losing a race to another
/// write of the same object before it is answered with 409.
const ATTEMPTS: usize = 64;

fn target<'a>(req: &'a ResourceRequest, name: &'a str) -> Target<'a> {
    Target {
        rt: req.rt,
        namespace: req.namespace.as_deref(),
        name,
        sub: req.subresource,
    }
}

fn raced(req: &ResourceRequest, name: &str) -> ApiError {
    ApiError::stale(req.rt, name)
}

pub(crate) fn update(
    shared: &Shared,
    req: &ResourceRequest,
    name: &str,
    params: &Params,
    content_type: Option<&str>,
    body: &[u8],
    repr: Representation,
) -> Result<Reply, ApiError> {
    let opts = write_options(params)?;
    let (value, duplicates) = body_and_duplicates(content_type, body, opts.validation)?;
    let decoded = registry::decode_with_duplicates(req.rt, value, &duplicates, opts.validation)?;
    for _ in 0..ATTEMPTS {
        match registry::update(
            &shared.store,
            target(req, name),
            decoded.clone(),
            None,
            opts,
        ) {
            Ok(outcome) => return Ok(reply(req, repr, outcome)),
            Err(UpdateError::Api(e)) => return Err(e),
            Err(UpdateError::Raced) => {}
        }
    }
    Err(raced(req, name))
}

pub(crate) fn patch(
    shared: &Shared,
    req: &ResourceRequest,
    name: &str,
    params: &Params,
    content_type: Option<&str>,
    body: &[u8],
    repr: Representation,
) -> Result<Reply, ApiError> {
    let patch_type = PatchType::from_content_type(content_type.unwrap_or(""))?;
    let opts = write_options(params)?;
    let key = registry::key(req.rt, req.namespace.as_deref(), name);
    for _ in 0..ATTEMPTS {
        let current = shared
            .store
            .lock()
            .get(req.rt.storage, &key)
            .cloned()
            .ok_or_else(|| ApiError::not_found(req.rt, name))?;
        let patched = patch::apply(
            req.rt.kind_id,
            patch_type,
            registry::view(req.rt, &current.value),
            body,
        )?;
        let decoded = registry::decode_patched(req.rt, patched, opts.validation)?;
        match registry::update(
            &shared.store,
            target(req, name),
            decoded,
            Some(current),
            opts,
        ) {
            Ok(outcome) => return Ok(reply(req, repr, outcome)),
            Err(UpdateError::Api(e)) => return Err(e),
            Err(UpdateError::Raced) => {}
        }
    }
    Err(raced(req, name))
}

/// DeleteOptions from the body (JSON or protobuf, possibly empty) and the query.
fn delete_options(
    params: &Params,
    content_type: Option<&str>,
    body: &[u8],
) -> Result<DeleteOptions, ApiError> {
    let mut opts: DeleteOptions = if body.iter().all(u8::is_ascii_whitespace) {
        DeleteOptions::default()
    } else {
        serde_json::from_value(body_value(content_type, body)?)
            .map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e}")))?
    };
    if let Some(policy) = params.get("propagationPolicy") {
        opts.propagation_policy = Some(policy.to_owned());
    }
    if let Some(grace) = params.get("gracePeriodSeconds") {
        let grace = grace
            .parse()
            .map_err(|_| ApiError::bad_request(format!("invalid gracePeriodSeconds {grace:?}")))?;
        opts.grace_period_seconds = Some(grace);
    }
    if params.dry_run()? {
        opts.dry_run = Some(vec!["All".into()]);
    }
    if let Some(dry) = &opts.dry_run
        && dry.iter().any(|d| d != "All")
    {
        return Err(ApiError::bad_request(format!(
            "dryRun: Unsupported value: {dry:?}: supported values: \"All\""
        )));
    }
    Ok(opts)
}

pub(crate) fn delete(
    shared: &Shared,
    req: &ResourceRequest,
    name: &str,
    params: &Params,
    (content_type, body): (Option<&str>, &[u8]),
    repr: Representation,
) -> Result<Reply, ApiError> {
    let opts = delete_options(params, content_type, body)?;
    let outcome = registry::delete(
        &mut shared.store.lock(),
        req.rt,
        req.namespace.as_deref(),
        name,
        &opts,
    )?;
    Ok(reply(req, repr, outcome))
}

/// Deletes every selected object; answers with the list of what was deleted
/// or marked for deletion.
pub(crate) fn delete_collection(
    shared: &Shared,
    req: &ResourceRequest,
    params: &Params,
    (content_type, body): (Option<&str>, &[u8]),
    repr: Representation,
) -> Result<Reply, ApiError> {
    let opts = delete_options(params, content_type, body)?;
    let selection = Selection::parse(params, req.rt)?;
    let mut store = shared.store.lock();
    let mut names = Vec::new();
    store.scan_at(
        req.rt.storage,
        None,
        req.namespace.as_deref(),
        None,
        |key, object| {
            if selection.matches(&object.value) {
                names.push(key.clone());
            }
            ControlFlow::Continue(())
        },
    )?;
    let mut items: Vec<Arc<StoredObject>> = Vec::new();
    for key in names {
        let before = store.get(req.rt.storage, &key).cloned();
        let namespace = (!key.0.is_empty()).then_some(key.0.as_str());
        let outcome = registry::delete(&mut store, req.rt, namespace, &key.1, &opts)?;
        match outcome.written {
            Written::Stored(object) => items.push(object),
            _ => items.extend(before),
        }
    }
    let metadata = serde_json::json!({"resourceVersion": store.current_rv().to_string()});
    drop(store);
    Ok((200, list_body(req, repr, &items, &metadata), Vec::new()))
}
