//! kube-apiserver's `CertificateApproval` admission plugin: a write to a
//! CertificateSigningRequest's `approval` subresource needs the `approve`
//! verb on `signers` (group `certificates.k8s.io`) named by the request's
//! `spec.signerName`, or by its domain with `/*`.

use serde_json::Value;

use parking_lot::Mutex;

use super::{Attributes, Auth, decide};
use crate::api::route::ResourceRequest;
use crate::registry;
use crate::resources::CERTIFICATES_GROUP;
use crate::status::ApiError;
use crate::store::Store;
use crate::user::UserInfo;

/// Whether `user` may decide the request `req` addresses.
///
/// # Errors
/// 403, in kube-apiserver's words, when it may not.
pub(crate) fn check(
    auth: &Auth,
    store: &Mutex<Store>,
    req: &ResourceRequest,
    user: Option<&UserInfo>,
) -> Result<(), ApiError> {
    let Some(user) = user else {
        // Authentication off: every request is an administrator.
        return Ok(());
    };
    let name = req.name.as_deref().unwrap_or_default();
    let key = registry::key(req.rt, None, name);
    let signer = {
        let store = store.lock();
        match store.get(req.rt.storage, &key) {
            // A missing object is the update's 404 to give.
            None => return Ok(()),
            Some(stored) => stored
                .value
                .pointer("/spec/signerName")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        }
    };
    let may = |resource_name: &str| {
        let attrs = Attributes {
            verb: "approve".to_owned(),
            resource_request: true,
            group: CERTIFICATES_GROUP.to_owned(),
            version: "*".to_owned(),
            resource: "signers".to_owned(),
            name: resource_name.to_owned(),
            ..Attributes::default()
        };
        decide(auth, store, user, &attrs).allowed
    };
    let domain_wildcard = signer
        .split_once('/')
        .map(|(domain, _)| format!("{domain}/*"));
    if may(&signer) || domain_wildcard.as_deref().is_some_and(may) {
        return Ok(());
    }
    Err(ApiError::forbidden(
        req.rt,
        name,
        &format!("user not permitted to approve requests with signerName {signer:?}"),
    ))
}
