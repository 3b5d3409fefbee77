//! [`{{Camel}}ProviderFactory`]: the provider built from its cloud config and
//! environment, with no network I/O.

use std::sync::Arc;

use ccm_cloud_provider::{CloudConfig, CloudProvider, ConfigError, Environment, ProviderFactory};

use crate::api::HttpApi;
use crate::{PROVIDER_NAME, Settings, {{Camel}}Provider, config};

/// Builds [`{{Camel}}Provider`] for `{{name}}-cloud-controller-manager`.
#[derive(Debug)]
pub struct {{Camel}}ProviderFactory;

impl ProviderFactory for {{Camel}}ProviderFactory {
    const NAME: &'static str = PROVIDER_NAME;

    fn build(
        config: Option<&CloudConfig>,
        env: &Environment,
    ) -> Result<Arc<dyn CloudProvider>, ConfigError> {
        let config = config.ok_or_else(|| {
            ConfigError::new("--cloud-config is required: it names the endpoint and the region")
        })?;
        let settings = Settings::parse(config)?;
        let token = config::token(env)?;
        let api = HttpApi::new(&settings.endpoint, token)
            .map_err(|e| ConfigError::new(format!("{}: {e}", config::TOKEN_VARIABLE)))?;
        Ok(Arc::new({{Camel}}Provider::new(Arc::new(api), settings)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TOKEN_VARIABLE;

    const FILE: &str = "endpoint = \"https://api.example\"\nregion = \"r1\"\n";

    #[test]
    fn a_config_and_a_token_build_the_provider() {
        let config = CloudConfig::new("/etc/cloud.toml", FILE);
        let env = Environment::default().with(TOKEN_VARIABLE, "t");
        let provider = {{Camel}}ProviderFactory::build(Some(&config), &env).expect("builds");
        assert_eq!(provider.provider_name(), "{{name}}");
    }

    #[test]
    fn without_a_config_or_a_token_it_says_what_is_missing() {
        let env = Environment::default().with(TOKEN_VARIABLE, "t");
        let err = {{Camel}}ProviderFactory::build(None, &env).expect_err("no config");
        assert!(err.to_string().contains("--cloud-config"), "{err}");
        let config = CloudConfig::new("/etc/cloud.toml", FILE);
        let err = {{Camel}}ProviderFactory::build(Some(&config), &Environment::default())
            .expect_err("no token");
        assert!(err.to_string().contains(TOKEN_VARIABLE), "{err}");
    }
}
