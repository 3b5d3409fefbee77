//! [`FakeProviderFactory`]: the fake cloud built from its TOML cloud config.

use std::sync::Arc;

use ccm_cloud_provider::{CloudConfig, CloudProvider, ConfigError, Environment, ProviderFactory};

use crate::{FakeCloud, FakeConfig, PROVIDER_NAME, RemoteCloud};

/// Builds a [`FakeCloud`] from its TOML cloud config ([`FakeConfig`]), or a
/// [`RemoteCloud`] when the config names a server.
#[derive(Debug)]
pub struct FakeProviderFactory;

impl ProviderFactory for FakeProviderFactory {
    const NAME: &'static str = PROVIDER_NAME;

    fn build(
        config: Option<&CloudConfig>,
        _env: &Environment,
    ) -> Result<Arc<dyn CloudProvider>, ConfigError> {
        let config = config
            .map(FakeConfig::parse)
            .transpose()?
            .unwrap_or_default();
        match &config.server {
            Some(server) => {
                let remote = RemoteCloud::new(&server.url)
                    .map_err(|e| ConfigError::new(format!("fake cloud server: {e}")))?;
                Ok(Arc::new(remote))
            }
            None => Ok(Arc::new(FakeCloud::new(config))),
        }
    }
}
