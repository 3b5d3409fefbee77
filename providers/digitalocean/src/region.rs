//! Which region this cluster's load balancers go to.

use ccm_cloud_provider::CloudError;
use ccm_rest::Unexpected;

use crate::api::types::Region;
use crate::api::{ApiError, Client};
use crate::{ENV_REGION, Settings};

/// `REGION` when set, checked against `GET /v2/regions`; otherwise the
/// droplet metadata service's answer, as upstream does.
pub(crate) async fn resolve(api: &Client, settings: &Settings) -> Result<String, CloudError> {
    match &settings.region {
        Some(region) => {
            let regions: Vec<Region> = match api.list_all("/v2/regions", &[]).await {
                Ok(regions) => regions,
                // The check is a courtesy: odd paging must not stop startup.
                Err(
                    e @ ApiError::Unexpected(
                        Unexpected::TooManyPages { .. } | Unexpected::Decode { .. },
                    ),
                ) => {
                    tracing::warn!(error = %e, region, "could not read the region list to check {ENV_REGION}; using it unchecked");
                    return Ok(region.clone());
                }
                Err(e) => return Err(e.into()),
            };
            if regions.iter().any(|r| &r.slug == region) {
                Ok(region.clone())
            } else {
                Err(CloudError::msg(format!(
                    "{ENV_REGION}=`{region}` is not a DigitalOcean region (the API lists {})",
                    regions
                        .iter()
                        .map(|r| r.slug.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )))
            }
        }
        None => {
            let region = api
                .get_text_unauthenticated(settings.metadata_url.clone())
                .await
                .map_err(|e| {
                    CloudError::other(
                        format!("{ENV_REGION} is unset and the droplet metadata service did not answer the region"),
                        e,
                    )
                })?;
            if region.is_empty() {
                return Err(CloudError::msg(format!(
                    "{ENV_REGION} is unset and the droplet metadata service answered an empty region"
                )));
            }
            Ok(region)
        }
    }
}
