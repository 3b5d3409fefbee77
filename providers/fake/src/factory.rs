//! [`FakeProviderFactory`]: the fake cloud built from its TOML cloud config.

use std::sync::Arc;

use cloud_provider::{CloudConfig, CloudProvider, ConfigError, Environment, ProviderFactory};

use crate::{FakeCloud, FakeConfig, PROVIDER_NAME};

/// Builds a [`FakeCloud`] from its TOML cloud config ([`FakeConfig`]).
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
        Ok(Arc::new(FakeCloud::new(config)))
    }
}
