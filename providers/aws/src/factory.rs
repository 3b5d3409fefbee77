//! [`AwsProviderFactory`]: the AWS provider built from its INI cloud config
//! and the environment.

use std::sync::Arc;

use ccm_cloud_provider::{
    CloudConfig, CloudProvider, ConfigError, Environment, ProviderController,
    ProviderControllerKind, ProviderFactory,
};

use crate::{AwsConfig, AwsProvider, PROVIDER_NAME};

/// Builds an [`AwsProvider`] from upstream's INI cloud config
/// ([`AwsConfig`]) and the environment, without I/O.
#[derive(Debug)]
pub struct AwsProviderFactory;

impl ProviderFactory for AwsProviderFactory {
    const NAME: &'static str = PROVIDER_NAME;

    /// Upstream's two AWS-only controllers, off unless `--controllers`
    /// names them (`--controllers=*,tagging`).
    const PROVIDER_CONTROLLERS: &'static [ProviderController] = &[
        ProviderController {
            name: "tagging",
            kind: ProviderControllerKind::InstanceTagging,
            metrics_prefix: "cloudprovider_aws",
        },
        ProviderController {
            name: "nodeipam",
            kind: ProviderControllerKind::NodeIpam,
            metrics_prefix: "cloudprovider_aws",
        },
    ];

    fn build(
        config: Option<&CloudConfig>,
        env: &Environment,
    ) -> Result<Arc<dyn CloudProvider>, ConfigError> {
        let config = config
            .map(AwsConfig::parse)
            .transpose()?
            .unwrap_or_default();
        Ok(Arc::new(AwsProvider::new(config, env)?))
    }
}

#[cfg(test)]
mod tests {
    use ccm_cloud_provider::k8s_openapi::api::core::v1::Node;
    use ccm_cloud_provider::{CloudError, ProviderFactory};

    use super::*;

    #[test]
    fn an_unknown_key_is_a_config_error_naming_file_line_and_key() {
        let config = CloudConfig::new("/etc/kubernetes/cloud.conf", "[Global]\nVPCC = vpc-1\n");
        let err = AwsProviderFactory::build(Some(&config), &Environment::default())
            .map(|_| ())
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "/etc/kubernetes/cloud.conf:2: unknown key `VPCC` in [Global]"
        );
    }

    #[tokio::test]
    async fn a_provider_without_config_builds_and_refuses_calls_until_initialized() {
        let provider = AwsProviderFactory::build(None, &Environment::default()).expect("builds");
        assert_eq!(provider.provider_name(), AwsProviderFactory::NAME);
        assert_eq!(AwsProviderFactory::NAME, "aws");
        let instances = provider.instances().expect("AWS has instances");
        let err = instances
            .instance_exists(&Node::default())
            .await
            .unwrap_err();
        assert!(
            matches!(&err, CloudError::Other { message, .. } if message.contains("before initialize")),
            "{err:?}"
        );
        assert!(provider.load_balancer().is_some() && provider.routes().is_some());
    }
}
