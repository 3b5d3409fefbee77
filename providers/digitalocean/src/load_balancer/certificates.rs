//! Which certificate terminates TLS: the `certificate-id` annotation, or
//! the certificate named by `certificate-name`; and, as upstream, a Let's
//! Encrypt certificate the load balancer renewed is followed rather than
//! replaced by the expired one still named on the Service.

use ccm_cloud_provider::CloudError;
use serde::Deserialize;

use super::annotations as ann;
use super::options::Options;
use crate::api::Client;
use crate::api::types::{LoadBalancer, Page};

#[derive(Debug, Deserialize)]
struct Certificate {
    id: String,
    #[serde(default)]
    name: String,
    #[serde(rename = "type", default)]
    kind: String,
}

#[derive(Debug, Deserialize)]
struct CertificateEnvelope {
    certificate: Certificate,
}

/// The certificate to use, and whether the Service's `certificate-id`
/// annotation should be rewritten to it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Chosen {
    pub(crate) id: Option<String>,
    pub(crate) record: bool,
}

/// The certificate the Service asks for, by ID or by name; `None` when it
/// names none.
///
/// # Errors
/// When a named certificate does not exist, or the API fails.
pub(crate) async fn wanted(api: &Client, options: &Options) -> Result<Option<String>, CloudError> {
    if let Some(id) = &options.certificate_id {
        return Ok(Some(id.clone()));
    }
    let Some(name) = &options.certificate_name else {
        return Ok(None);
    };
    let page: Page<Certificate> = api
        .get(
            "/v2/certificates",
            &[
                ("name", name.clone()),
                ("page", "1".to_owned()),
                ("per_page", "1".to_owned()),
            ],
        )
        .await?;
    page.items
        .into_iter()
        .next()
        .map(|c| Some(c.id))
        .ok_or_else(|| {
            CloudError::msg(format!(
                "{}: no certificate is named `{name}`",
                ann::CERTIFICATE_NAME
            ))
        })
}

/// The certificate to put on the load balancer: `wanted`, unless the load
/// balancer carries a Let's Encrypt certificate that replaced it (same name,
/// or the wanted one is gone), as upstream's `recordUpdatedLetsEncryptCert`.
/// Costs two GETs, only when the two differ.
///
/// # Errors
/// When the API fails (a missing certificate is not a failure).
pub(crate) async fn choose(
    api: &Client,
    lb: Option<&LoadBalancer>,
    wanted: Option<String>,
) -> Result<Chosen, CloudError> {
    let current = lb.and_then(|lb| {
        lb.forwarding_rules
            .iter()
            .find_map(|r| r.certificate_id.clone().filter(|c| !c.is_empty()))
    });
    let keep = Chosen {
        id: wanted.clone(),
        record: false,
    };
    let (Some(current), Some(want)) = (current, wanted) else {
        return Ok(keep);
    };
    if current == want {
        return Ok(keep);
    }
    let on_lb = match get(api, &current).await? {
        Some(c) if c.kind == "lets_encrypt" => c,
        _ => return Ok(keep),
    };
    let follow = match get(api, &want).await? {
        None => true,
        Some(asked) => asked.name == on_lb.name,
    };
    if !follow {
        return Ok(keep);
    }
    tracing::info!(old = %want, new = %on_lb.id, "following the load balancer's renewed Let's Encrypt certificate");
    Ok(Chosen {
        id: Some(on_lb.id),
        record: true,
    })
}

async fn get(api: &Client, id: &str) -> Result<Option<Certificate>, CloudError> {
    match api
        .get::<CertificateEnvelope>(&format!("/v2/certificates/{id}"), &[])
        .await
    {
        Ok(found) => Ok(Some(found.certificate)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e.into()),
    }
}
