//! Where credentials come from: the standard AWS chain, read from the
//! [`Environment`] snapshot the app hands the provider where it can be.
//!
//! Static keys in the snapshot (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
//! `AWS_SESSION_TOKEN`) are used as they are, which is how tests point a
//! provider at moto without touching the process environment. Otherwise the
//! SDK's default chain runs: web identity (IRSA), profile files, container
//! and instance-profile credentials. With `RoleARN` set, whichever of those
//! answers is used to assume that role through STS, with upstream's source
//! headers ([`assume_role`], `SourceARN`).

pub(crate) mod assume_role;

use aws_config::BehaviorVersion;
use aws_config::default_provider::credentials::DefaultCredentialsChain;
use aws_sdk_ec2::config::{Credentials, Region, SharedCredentialsProvider};
use ccm_cloud_provider::{ConfigError, Environment};

use crate::config::{AwsConfig, AwsService};

/// The STS session name assumed roles show in CloudTrail.
const SESSION_NAME: &str = "aws-cloud-controller-manager";

/// The first link of the credential chain.
#[derive(Clone)]
pub(crate) enum CredentialSource {
    /// Keys found in the environment snapshot.
    Environment(Credentials),
    /// The SDK's default chain, resolved in `initialize`.
    DefaultChain,
}

impl std::fmt::Debug for CredentialSource {
    // Never print keys.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Environment(_) => f.write_str("Environment"),
            Self::DefaultChain => f.write_str("DefaultChain"),
        }
    }
}

impl CredentialSource {
    /// Reads static keys from `env`; half a key pair is a config error.
    pub(crate) fn from_env(env: &Environment) -> Result<Self, ConfigError> {
        match (
            env.get("AWS_ACCESS_KEY_ID"),
            env.get("AWS_SECRET_ACCESS_KEY"),
        ) {
            (Some(id), Some(secret)) => Ok(Self::Environment(Credentials::new(
                id,
                secret,
                env.get("AWS_SESSION_TOKEN").map(str::to_owned),
                None,
                "Environment",
            ))),
            (None, None) => Ok(Self::DefaultChain),
            (Some(_), None) => Err(ConfigError::new(
                "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not",
            )),
            (None, Some(_)) => Err(ConfigError::new(
                "AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not",
            )),
        }
    }

    /// The provider every client signs with. Resolving the default chain or
    /// assuming a role does no I/O here: credentials are fetched on the first
    /// call and cached by the SDK.
    pub(crate) async fn provider(
        &self,
        region: &Region,
        config: &AwsConfig,
    ) -> SharedCredentialsProvider {
        let base = match self {
            Self::Environment(credentials) => SharedCredentialsProvider::new(credentials.clone()),
            Self::DefaultChain => SharedCredentialsProvider::new(
                DefaultCredentialsChain::builder()
                    .region(region.clone())
                    .build()
                    .await,
            ),
        };
        let Some(role_arn) = &config.role_arn else {
            return base;
        };
        let mut sts = aws_config::defaults(BehaviorVersion::latest())
            .region(region.clone())
            .credentials_provider(base);
        if let Some(endpoint) = config.service_override(AwsService::Sts, region.as_ref()) {
            sts = sts.endpoint_url(&endpoint.url);
        }
        let sts = sts.load().await;
        SharedCredentialsProvider::new(assume_role::AssumeRole::new(
            &sts,
            role_arn,
            config.source_arn.as_deref(),
            SESSION_NAME,
        ))
    }
}

/// The region from the environment snapshot (`AWS_REGION`, then
/// `AWS_DEFAULT_REGION`), used when the cloud config names none.
pub(crate) fn region_from_env(env: &Environment) -> Option<String> {
    env.get("AWS_REGION")
        .or_else(|| env.get("AWS_DEFAULT_REGION"))
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use aws_sdk_ec2::config::ProvideCredentials;

    use super::*;

    #[test]
    fn static_keys_come_from_the_snapshot_not_the_process() {
        let env = Environment::default()
            .with("AWS_ACCESS_KEY_ID", "AKIDTEST")
            .with("AWS_SECRET_ACCESS_KEY", "secret")
            .with("AWS_SESSION_TOKEN", "token");
        let CredentialSource::Environment(credentials) =
            CredentialSource::from_env(&env).expect("valid")
        else {
            panic!("expected static credentials");
        };
        assert_eq!(credentials.access_key_id(), "AKIDTEST");
        assert_eq!(credentials.secret_access_key(), "secret");
        assert_eq!(credentials.session_token(), Some("token"));
    }

    #[test]
    fn without_keys_the_default_chain_is_used() {
        let source = CredentialSource::from_env(&Environment::default()).expect("valid");
        assert!(matches!(source, CredentialSource::DefaultChain));
    }

    #[test]
    fn half_a_key_pair_is_a_config_error_that_shows_no_secret() {
        let env = Environment::default().with("AWS_SECRET_ACCESS_KEY", "do-not-print");
        let err = CredentialSource::from_env(&env).unwrap_err();
        assert_eq!(
            err.to_string(),
            "AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not"
        );
        let source = CredentialSource::from_env(
            &Environment::default()
                .with("AWS_ACCESS_KEY_ID", "id")
                .with("AWS_SECRET_ACCESS_KEY", "do-not-print"),
        )
        .expect("valid");
        assert!(!format!("{source:?}").contains("do-not-print"));
    }

    #[tokio::test]
    async fn static_keys_are_served_as_they_are_without_a_role() {
        let env = Environment::default()
            .with("AWS_ACCESS_KEY_ID", "AKIDTEST")
            .with("AWS_SECRET_ACCESS_KEY", "secret");
        let source = CredentialSource::from_env(&env).expect("valid");
        let provider = source
            .provider(&Region::new("us-east-1"), &AwsConfig::default())
            .await;
        let credentials = provider.provide_credentials().await.expect("credentials");
        assert_eq!(credentials.access_key_id(), "AKIDTEST");
    }

    #[test]
    fn region_prefers_aws_region_over_the_default() {
        let env = Environment::default()
            .with("AWS_DEFAULT_REGION", "eu-west-1")
            .with("AWS_REGION", "us-west-2");
        assert_eq!(region_from_env(&env).as_deref(), Some("us-west-2"));
        let env = Environment::default().with("AWS_DEFAULT_REGION", "eu-west-1");
        assert_eq!(region_from_env(&env).as_deref(), Some("eu-west-1"));
    }
}
