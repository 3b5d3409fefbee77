//! The `--cloud-config` file: TOML, every key named here and nothing else.
//!
//! ```toml
//! # Where {{Camel}}'s API answers.
//! endpoint = "https://api.{{name}}.example"
//! # The region this cluster runs in: nodes' topology.kubernetes.io/region.
//! region = "region-1"
//! ```
//!
//! The API token comes from `{{UPPER}}_API_TOKEN`, never from the file.

use ccm_cloud_provider::{CloudConfig, ConfigError, Environment};
use serde::Deserialize;

/// The environment variable holding the API token.
pub const TOKEN_VARIABLE: &str = "{{UPPER}}_API_TOKEN";

/// What the cloud config says.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// The API's base URL.
    pub endpoint: String,
    /// The cluster's region.
    pub region: String,
}

impl Settings {
    /// Reads `config`.
    ///
    /// # Errors
    /// A [`ConfigError`] naming the file, the line and the key at fault.
    pub fn parse(config: &CloudConfig) -> Result<Self, ConfigError> {
        toml::from_str(&config.contents).map_err(|e| {
            let error = config.error(e.message().trim_end());
            match e.span() {
                Some(span) => error.at_line(config.contents[..span.start].matches('\n').count() + 1),
                None => error,
            }
        })
    }
}

/// The API token from `env`.
///
/// # Errors
/// A [`ConfigError`] naming the variable when it is unset.
pub(crate) fn token(env: &Environment) -> Result<String, ConfigError> {
    env.get(TOKEN_VARIABLE)
        .map(str::to_owned)
        .ok_or_else(|| ConfigError::new(format!("{TOKEN_VARIABLE} is not set: it holds the API token")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Settings, String> {
        Settings::parse(&CloudConfig::new("/etc/cloud.toml", text)).map_err(|e| e.to_string())
    }

    #[test]
    fn a_complete_file_is_read() {
        let settings = parse("endpoint = \"https://api.example\"\nregion = \"r1\"\n");
        assert_eq!(
            settings,
            Ok(Settings {
                endpoint: "https://api.example".into(),
                region: "r1".into(),
            })
        );
    }

    #[test]
    fn an_unknown_key_is_named_with_its_file_and_line() {
        let err = parse("endpoint = \"https://api.example\"\nregion = \"r1\"\nzone = \"z\"\n");
        let err = err.expect_err("an unknown key is refused");
        assert!(err.starts_with("/etc/cloud.toml:3: "), "{err}");
        assert!(err.contains("zone"), "{err}");
        assert!(!err.contains('\n'), "one line: {err}");
    }

    #[test]
    fn a_missing_key_is_named() {
        let err = parse("endpoint = \"https://api.example\"\n").expect_err("region is required");
        assert!(err.contains("region"), "{err}");
    }

    #[test]
    fn the_token_comes_from_the_environment_and_is_never_shown() {
        let env = Environment::default().with(TOKEN_VARIABLE, "s3cret");
        assert_eq!(token(&env), Ok("s3cret".to_owned()));
        let err = token(&Environment::default()).expect_err("unset");
        assert!(err.to_string().contains(TOKEN_VARIABLE), "{err}");
    }
}
