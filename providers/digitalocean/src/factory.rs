//! [`DigitalOceanProviderFactory`]: the DigitalOcean provider built from
//! upstream's environment variables and an optional cloud config.

use std::sync::Arc;

use ccm_cloud_provider::{CloudConfig, CloudProvider, ConfigError, Environment, ProviderFactory};

use crate::{DigitalOceanProvider, PROVIDER_NAME, Settings};

/// Builds a [`DigitalOceanProvider`] from upstream's environment variables
/// (see [`Settings::from_env`]) and an optional TOML cloud config naming a
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
        for (var, addr) in &settings.upstream_listeners {
            tracing::info!(
                "{var}={addr}: not opened; this binary serves /metrics and /healthz on its secure port (--secure-port)"
            );
        }
        Ok(Arc::new(DigitalOceanProvider::new(settings)?))
    }
}
