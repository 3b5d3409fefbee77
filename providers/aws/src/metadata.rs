//! The instance metadata service (IMDS) of the instance this process runs
//! on: its instance ID and its VPC, asked only when the cloud config leaves
//! them out.
//!
//! The endpoint is the SDK's (`169.254.169.254`, or
//! `AWS_EC2_METADATA_SERVICE_ENDPOINT`) unless a `[ServiceOverride]` names
//! `imds`; tests point that at a loopback stand-in.

use aws_config::imds;

use crate::config::{AwsConfig, AwsService};

/// Why instance metadata could not answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum MetadataError {
    /// The `[ServiceOverride]` URL for `imds` is not a valid endpoint.
    #[error("invalid IMDS URL `{url}` in [ServiceOverride]: {reason}")]
    Endpoint { url: String, reason: String },
    /// The service did not answer `path`.
    #[error("instance metadata did not answer {path}: {reason}")]
    Unanswered { path: String, reason: String },
}

/// A client of this instance's metadata service.
#[derive(Debug)]
pub(crate) struct Metadata {
    client: imds::Client,
}

impl Metadata {
    /// The client for `region`'s `[ServiceOverride]` of `imds`, if any.
    pub(crate) fn new(config: &AwsConfig, region: &str) -> Result<Self, MetadataError> {
        let mut builder = imds::Client::builder();
        if let Some(o) = config.service_override(AwsService::Imds, region) {
            builder = builder
                .endpoint(&o.url)
                .map_err(|e| MetadataError::Endpoint {
                    url: o.url.clone(),
                    reason: e.to_string(),
                })?;
        }
        Ok(Self {
            client: builder.build(),
        })
    }

    /// The ID of the instance this process runs on.
    pub(crate) async fn instance_id(&self) -> Result<String, MetadataError> {
        self.get("/latest/meta-data/instance-id").await
    }

    /// The VPC of this instance's primary network interface.
    pub(crate) async fn vpc_id(&self) -> Result<String, MetadataError> {
        let mac = self.get("/latest/meta-data/mac").await?;
        self.get(&format!(
            "/latest/meta-data/network/interfaces/macs/{mac}/vpc-id"
        ))
        .await
    }

    async fn get(&self, path: &str) -> Result<String, MetadataError> {
        let answer =
            self.client
                .get(path.to_owned())
                .await
                .map_err(|e| MetadataError::Unanswered {
                    path: path.to_owned(),
                    // One line: the SDK's error may carry its cause's lines.
                    reason: e.to_string().lines().collect::<Vec<_>>().join(" "),
                })?;
        Ok(answer.as_ref().trim().to_owned())
    }
}
