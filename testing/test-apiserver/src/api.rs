//! Serving one HTTP request: routing, accounting, fault injection, then
//! the verb's handler.

mod continue_token;
mod discovery;
mod openapi;
mod params;
mod read;
mod render;
pub(crate) mod route;
mod table;
mod testapi;
mod watch;
mod write;

use std::sync::Arc;

use http::{Request, Response, header};
use http_body_util::{BodyExt, Limited};
use hyper::body::{Bytes, Incoming};

use crate::auth;
use crate::registry::Subresource;
use crate::resources::ReviewType;
use crate::shared::Shared;
use crate::stats::{RequestKey, RequestRecord, Verb};
use crate::status::ApiError;
use crate::user::UserInfo;
pub(crate) use params::Params;
use render::Body;
use route::{Discovery, ResourceRequest, Route};

/// kube-apiserver's request body limit.
const MAX_BODY: usize = 3 * 1024 * 1024;

/// Serves one request.
pub(crate) async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Response<Body> {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_owned();
    let query = parts.uri.query().unwrap_or("").to_owned();
    if let Some(rest) = path.strip_prefix("/testapi/") {
        return testapi::handle(&shared, &parts.method, rest);
    }
    let latency = shared.faults.lock().latency;
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    let params = Params::parse(&query);
    let header = |name: header::HeaderName| {
        parts
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let user_agent = header(header::USER_AGENT).unwrap_or_default();
    let (user, admitted) = auth::admit(
        &shared.auth,
        &shared.store,
        &parts.method,
        &path,
        &params,
        &parts.headers,
    );
    let mut record = RequestRecord {
        verb: parts.method.as_str().to_ascii_lowercase(),
        method: parts.method.as_str().to_owned(),
        path: path.clone(),
        query,
        group: String::new(),
        resource: String::new(),
        subresource: String::new(),
        namespace: String::new(),
        name: String::new(),
        user_agent,
        status: 0,
        user: user.as_ref().map(|u| u.name.clone()),
    };
    let content_type = header(header::CONTENT_TYPE);
    let response = match (route::parse(&parts.method, &path, &params), admitted) {
        (Ok(Route::Resource(request)), admitted) => {
            record.verb = request.verb.as_str().to_owned();
            record.group = request.rt.group.to_owned();
            record.resource = request.rt.plural.to_owned();
            record.subresource = request.subresource.as_str().to_owned();
            record.namespace = request.namespace.clone().unwrap_or_default();
            // As kube-apiserver's request info (and so its audit log and
            // authorization) names a list or watch of exactly one object by
            // its field selector.
            record.name = request.name.clone().unwrap_or_else(|| {
                if matches!(request.verb, Verb::List | Verb::Watch) {
                    params
                        .get("fieldSelector")
                        .and_then(auth::exact_name)
                        .unwrap_or_default()
                } else {
                    String::new()
                }
            });
            let key = request.key();
            shared.accounting.lock().count(key.clone());
            let failure = match admitted {
                Err(e) => Err(e),
                Ok(()) => Ok(shared
                    .faults
                    .lock()
                    .take(&key, user.as_ref().map(|u| u.name.as_str()))),
            };
            match failure {
                Err(e) => render::error_response(&e),
                Ok(Some(f)) if f.code == 410 && request.verb == Verb::Watch => {
                    render::json_response(200, watch::error_event(&f.to_api_error()), &[])
                }
                Ok(Some(f)) => render::error_response(&f.to_api_error()),
                Ok(None) => {
                    let accept = header(header::ACCEPT);
                    serve_resource(
                        &shared,
                        &request,
                        &params,
                        (accept.as_deref(), content_type.as_deref()),
                        user.as_ref(),
                        body,
                    )
                    .await
                    .unwrap_or_else(|e| render::error_response(&e))
                }
            }
        }
        (Ok(Route::Review(review)), admitted) => {
            record.verb = Verb::Create.as_str().to_owned();
            record.group = review.group.to_owned();
            record.resource = review.plural.to_owned();
            let key = RequestKey {
                verb: Verb::Create,
                group: review.group.to_owned(),
                resource: review.plural.to_owned(),
                subresource: String::new(),
            };
            shared.accounting.lock().count(key.clone());
            let failure = shared
                .faults
                .lock()
                .take(&key, user.as_ref().map(|u| u.name.as_str()));
            let served = match (admitted, failure) {
                (Err(e), _) => Err(e),
                (Ok(()), Some(f)) => Err(f.to_api_error()),
                (Ok(()), None) => {
                    let accept = header(header::ACCEPT);
                    serve_review(
                        &shared,
                        review,
                        user.as_ref(),
                        (accept.as_deref(), content_type.as_deref()),
                        body,
                    )
                    .await
                }
            };
            served.unwrap_or_else(|e| render::error_response(&e))
        }
        (_, Err(e)) => {
            shared.accounting.lock().count_non_resource(&path);
            render::error_response(&e)
        }
        (Ok(Route::Discovery(Discovery::Health)), Ok(())) => {
            shared.accounting.lock().count_non_resource(&path);
            render::text_response(200, "ok")
        }
        (Ok(Route::Discovery(Discovery::OpenApiV2)), Ok(())) => {
            shared.accounting.lock().count_non_resource(&path);
            match openapi::v2::body(header(header::ACCEPT).as_deref()) {
                Ok((body, media_type)) => {
                    let mut response = render::json_response(200, body, &[]);
                    response.headers_mut().insert(
                        header::CONTENT_TYPE,
                        http::HeaderValue::from_static(media_type),
                    );
                    response
                }
                Err(e) => render::error_response(&e),
            }
        }
        (Ok(Route::Discovery(path_kind)), Ok(())) => {
            shared.accounting.lock().count_non_resource(&path);
            match discovery::body(&path_kind, &shared.address) {
                Ok(doc) => render::json_response(
                    200,
                    Bytes::from(serde_json::to_vec(&doc).unwrap_or_default()),
                    &[],
                ),
                Err(e) => render::error_response(&e),
            }
        }
        (Err(e), Ok(())) => {
            shared.accounting.lock().count_non_resource(&path);
            render::error_response(&e)
        }
    };
    record.status = response.status().as_u16();
    shared.accounting.lock().log(record);
    response
}

/// A POST of a review.
async fn serve_review(
    shared: &Shared,
    review: &'static ReviewType,
    user: Option<&UserInfo>,
    (accept, content_type): (Option<&str>, Option<&str>),
    body: Incoming,
) -> Result<Response<Body>, ApiError> {
    let body = write::body_value(content_type, &read_body(body).await?)?;
    let (code, answer) = auth::reviews::serve(&shared.auth, &shared.store, review, user, body)?;
    Ok(value_response(code, &answer, accept))
}

fn value_response(code: u16, value: &serde_json::Value, accept: Option<&str>) -> Response<Body> {
    render::response(
        code,
        Bytes::from(serde_json::to_vec(value).unwrap_or_default()),
        &[],
        accept,
    )
}

async fn read_body(body: Incoming) -> Result<Bytes, ApiError> {
    Limited::new(body, MAX_BODY)
        .collect()
        .await
        .map(|collected| collected.to_bytes())
        .map_err(|e| {
            ApiError::new(
                413,
                "RequestEntityTooLarge",
                format!("request body rejected: {e}"),
            )
        })
}

async fn serve_resource(
    shared: &Arc<Shared>,
    req: &ResourceRequest,
    params: &Params,
    (accept, content_type): (Option<&str>, Option<&str>),
    user: Option<&UserInfo>,
    body: Incoming,
) -> Result<Response<Body>, ApiError> {
    if req.subresource == Subresource::Token {
        let body = write::body_value(content_type, &read_body(body).await?)?;
        let (code, answer) = auth::reviews::token_request(
            &shared.auth,
            &shared.store,
            req.namespace.as_deref().unwrap_or(""),
            req.name.as_deref().unwrap_or(""),
            body,
        )?;
        return Ok(value_response(code, &answer, accept));
    }
    if req.subresource == Subresource::Approval && matches!(req.verb, Verb::Update | Verb::Patch) {
        auth::approval::check(&shared.auth, &shared.store, req, user)?;
    }
    let list = matches!(req.verb, Verb::List | Verb::DeleteCollection);
    let repr = render::negotiate(accept, list, params.get("includeObject"))?;
    if req.verb == Verb::Watch && !render::accepts_json(accept) {
        return Err(ApiError::not_acceptable(
            "watch streams are served as application/json only (test-apiserver)",
        ));
    }
    let name = req.name.as_deref().unwrap_or("");
    let (code, bytes, warnings) = match req.verb {
        Verb::Get => (200, read::get(shared, req, name, repr)?, Vec::new()),
        Verb::List => (200, read::list(shared, req, params, repr)?, Vec::new()),
        Verb::Watch => return watch::start(shared.clone(), req, params, repr),
        Verb::Create => write::create(
            shared,
            req,
            params,
            content_type,
            &read_body(body).await?,
            (repr, user),
        )?,
        Verb::Update => write::update(
            shared,
            req,
            name,
            params,
            content_type,
            &read_body(body).await?,
            repr,
        )?,
        Verb::Patch => write::patch(
            shared,
            req,
            name,
            params,
            content_type,
            &read_body(body).await?,
            repr,
        )?,
        Verb::Delete => write::delete(
            shared,
            req,
            name,
            params,
            (content_type, &read_body(body).await?),
            repr,
        )?,
        Verb::DeleteCollection => write::delete_collection(
            shared,
            req,
            params,
            (content_type, &read_body(body).await?),
            repr,
        )?,
    };
    Ok(render::response(code, bytes, &warnings, accept))
}
