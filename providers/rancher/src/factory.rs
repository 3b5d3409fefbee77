//! [`RancherProviderFactory`]: the provider built from the environment and,
//! when given, upstream's cloud config, with no network I/O.

use std::sync::Arc;

use ccm_cloud_provider::{CloudConfig, CloudProvider, ConfigError, Environment, ProviderFactory};

use crate::{PROVIDER_NAME, RancherProvider, Settings};

/// Builds [`RancherProvider`] for `rancher-cloud-controller-manager`.
#[derive(Debug)]
pub struct RancherProviderFactory;

impl ProviderFactory for RancherProviderFactory {
    const NAME: &'static str = PROVIDER_NAME;

    fn build(
        config: Option<&CloudConfig>,
        env: &Environment,
    ) -> Result<Arc<dyn CloudProvider>, ConfigError> {
        let settings = Settings::read(config, env)?;
        Ok(Arc::new(RancherProvider::new(&settings)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ACCESS_KEY_VARIABLE, SECRET_KEY_VARIABLE, URL_VARIABLE};

    #[test]
    fn the_environment_alone_builds_the_provider() {
        let env = Environment::default()
            .with(URL_VARIABLE, "http://127.0.0.1:1/v2-beta")
            .with(ACCESS_KEY_VARIABLE, "a")
            .with(SECRET_KEY_VARIABLE, "s");
        let provider = RancherProviderFactory::build(None, &env).expect("builds");
        assert_eq!(provider.provider_name(), "rancher");
        assert!(provider.describes_requests());
    }

    #[test]
    fn without_credentials_it_names_the_first_missing_variable() {
        let err =
            RancherProviderFactory::build(None, &Environment::default()).expect_err("nothing set");
        assert!(err.to_string().starts_with(URL_VARIABLE), "{err}");
    }
}
