//! Assuming `RoleARN` through STS as upstream does (`services.NewStsClient`
//! in cloud-provider-aws): every STS request carries `x-amz-source-account`
//! (the role's account) and, when `SourceARN` is set, `x-amz-source-arn`,
//! the confused-deputy protection a role's trust policy may require
//! (`aws:SourceAccount`, `aws:SourceArn`).
//!
//! The credentials are cached by each client's identity cache, as the SDK's
//! own `AssumeRoleProvider`'s are, and assumed again before they expire.

use std::time::SystemTime;

use aws_config::SdkConfig;
use aws_credential_types::provider::error::CredentialsError;
use aws_credential_types::provider::{self, ProvideCredentials, future};
use aws_sdk_ec2::config::Credentials;
use aws_sdk_sts::config::interceptors::BeforeTransmitInterceptorContextMut;
use aws_sdk_sts::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_sts::error::BoxError;

/// The header naming the account of the role being assumed.
pub(crate) const SOURCE_ACCOUNT: &str = "x-amz-source-account";
/// The header naming `SourceARN`.
pub(crate) const SOURCE_ARN: &str = "x-amz-source-arn";

/// A credentials provider that assumes one role.
#[derive(Debug)]
pub(crate) struct AssumeRole {
    client: aws_sdk_sts::Client,
    role_arn: String,
    session_name: &'static str,
}

impl AssumeRole {
    /// Assumes `role_arn` with the credentials, region and endpoint of
    /// `sts`, sending upstream's source headers.
    pub(crate) fn new(
        sts: &SdkConfig,
        role_arn: &str,
        source_arn: Option<&str>,
        session_name: &'static str,
    ) -> Self {
        let mut headers = Vec::new();
        if let Some(account) = account_of(role_arn) {
            headers.push((SOURCE_ACCOUNT, account.to_owned()));
        }
        if let Some(source) = source_arn {
            headers.push((SOURCE_ARN, source.to_owned()));
        }
        let config = aws_sdk_sts::config::Builder::from(sts)
            .interceptor(SourceHeaders(headers))
            .build();
        Self {
            client: aws_sdk_sts::Client::from_conf(config),
            role_arn: role_arn.to_owned(),
            session_name,
        }
    }

    async fn assume(&self) -> provider::Result {
        let out = self
            .client
            .assume_role()
            .role_arn(&self.role_arn)
            .role_session_name(self.session_name)
            .send()
            .await
            .map_err(CredentialsError::provider_error)?;
        let assumed = out.credentials().ok_or_else(|| {
            CredentialsError::unhandled("STS answered AssumeRole without credentials")
        })?;
        let expiry = SystemTime::try_from(*assumed.expiration()).map_err(|_| {
            CredentialsError::unhandled("STS answered an expiry a system clock cannot hold")
        })?;
        Ok(Credentials::new(
            assumed.access_key_id(),
            assumed.secret_access_key(),
            Some(assumed.session_token().to_owned()),
            Some(expiry),
            "AssumeRole",
        ))
    }
}

impl ProvideCredentials for AssumeRole {
    fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        future::ProvideCredentials::new(self.assume())
    }
}

/// The account ID of an ARN (`arn:partition:service:region:account:...`).
pub(crate) fn account_of(arn: &str) -> Option<&str> {
    let mut parts = arn.splitn(6, ':');
    (parts.next() == Some("arn"))
        .then(|| parts.nth(3))
        .flatten()
        .filter(|account| !account.is_empty())
}

/// Adds the source headers to each STS request before it is signed, so the
/// signature covers them.
#[derive(Debug)]
struct SourceHeaders(Vec<(&'static str, String)>);

impl Intercept for SourceHeaders {
    fn name(&self) -> &'static str {
        "SourceHeaders"
    }

    fn modify_before_signing(
        &self,
        context: &mut BeforeTransmitInterceptorContextMut<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let headers = context.request_mut().headers_mut();
        for (name, value) in &self.0 {
            headers.insert(*name, value.clone());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_account_is_the_fifth_field_of_the_arn() {
        assert_eq!(
            account_of("arn:aws:iam::123456789012:role/ccm"),
            Some("123456789012")
        );
        assert_eq!(
            account_of("arn:aws-cn:iam::210987654321:role/a:b"),
            Some("210987654321")
        );
        assert_eq!(account_of("arn:aws:iam:::role/ccm"), None);
        assert_eq!(account_of("arn:aws:iam"), None);
        assert_eq!(account_of("not-an-arn"), None);
    }
}
