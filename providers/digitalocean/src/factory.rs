//! [`DigitalOceanProviderFactory`]: the DigitalOcean provider built from
//! upstream's environment variables and an optional cloud config.

use std::sync::Arc;

use cloud_provider::{CloudConfig, CloudProvider, ConfigError, Environment, ProviderFactory};

use crate::{DigitalOceanProvider, PROVIDER_NAME, Settings};

/// Builds a [`DigitalOceanProvider`] from the environment (`DO_ACCESS_TOKEN`,
/// `DO_OVERRIDE_URL`, `DO_API_RATE_LIMIT_QPS`, `DO_CLUSTER_ID`,
/// `DO_CLUSTER_VPC_ID`, `REGION`) and an optional TOML cloud config naming a
/// `token_file`.
#[derive(Debug)]
pub struct DigitalOceanProviderFactory;

impl ProviderFactory for DigitalOceanProviderFactory {
    const NAME: &'static str = PROVIDER_NAME;

    fn build(
        config: Option<&CloudConfig>,
        env: &Environment,
    ) -> Result<Arc<dyn CloudProvider>, ConfigError> {
        let settings = Settings::from_env(config, env)?;
        Ok(Arc::new(DigitalOceanProvider::new(settings)?))
    }
}
