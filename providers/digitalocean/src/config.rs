//! The provider's configuration: upstream's environment variables, and a
//! small TOML cloud config that can name a token file.
//!
//! ```toml
//! # --cloud-config (optional): read the API token from a file, such as a
//! # mounted Secret, instead of DO_ACCESS_TOKEN.
//! token_file = "/etc/kubernetes/digitalocean/token"
//! ```
//!
//! No error quotes a value (a variable may hold a URL with credentials, the
//! file a token): errors name the variable, or the file, line and key.

use std::fmt;
use std::path::PathBuf;

use ccm_cloud_provider::{
    CloudConfig, ConfigError, Environment, deserialize_message_without_values,
};
use reqwest::Url;
use serde::Deserialize;

/// The API token (required; or `token_file` in the cloud config).
pub const ENV_ACCESS_TOKEN: &str = "DO_ACCESS_TOKEN";
/// The API base URL, for tests and private endpoints.
pub const ENV_OVERRIDE_URL: &str = "DO_OVERRIDE_URL";
/// Client-side rate limit in requests per second.
pub const ENV_API_RATE_LIMIT_QPS: &str = "DO_API_RATE_LIMIT_QPS";
/// The cluster's ID: load balancers are tagged `k8s:<id>`.
pub const ENV_CLUSTER_ID: &str = "DO_CLUSTER_ID";
/// The VPC load balancers are created in.
pub const ENV_CLUSTER_VPC_ID: &str = "DO_CLUSTER_VPC_ID";
/// The region slug; asked of the droplet metadata service when unset.
pub const ENV_REGION: &str = "REGION";
/// The load-balancer type of a Service that names none: `REGIONAL` or
/// `REGIONAL_NETWORK` (upstream's default).
pub const ENV_DEFAULT_LB_TYPE: &str = "DEFAULT_LB_TYPE";
/// The name of the public-access firewall kept open to the NodePorts.
pub const ENV_PUBLIC_ACCESS_FIREWALL_NAME: &str = "PUBLIC_ACCESS_FIREWALL_NAME";
/// Comma-separated droplet tags the public-access firewall applies to.
pub const ENV_PUBLIC_ACCESS_FIREWALL_TAGS: &str = "PUBLIC_ACCESS_FIREWALL_TAGS";
/// Upstream's metrics listener; ours serves metrics on the secure port.
pub const ENV_METRICS_ADDR: &str = "METRICS_ADDR";
/// Upstream's debug (`/healthz`) listener; ours serves it on the secure port.
pub const ENV_DEBUG_ADDR: &str = "DEBUG_ADDR";
/// Where the droplet metadata service answers the region (not upstream's:
/// for tests and unusual networks).
pub const ENV_METADATA_URL: &str = "DO_METADATA_URL";

/// DigitalOcean's public API.
pub const DEFAULT_API_URL: &str = "https://api.digitalocean.com/";
/// Where a droplet learns its own region when `REGION` is unset.
pub const DEFAULT_METADATA_URL: &str = "http://169.254.169.254/metadata/v1/region";

/// A load balancer's `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadBalancerType {
    /// `REGIONAL`: an HTTP(S)-aware load balancer forwarding to node ports.
    Regional,
    /// `REGIONAL_NETWORK`: a network (TCP/UDP) load balancer.
    RegionalNetwork,
}

impl LoadBalancerType {
    /// The API's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Regional => "REGIONAL",
            Self::RegionalNetwork => "REGIONAL_NETWORK",
        }
    }

    /// The type the API spells `s`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "REGIONAL" => Some(Self::Regional),
            "REGIONAL_NETWORK" => Some(Self::RegionalNetwork),
            _ => None,
        }
    }
}

/// The public-access firewall: its name and the droplet tags it covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicAccessFirewall {
    /// `PUBLIC_ACCESS_FIREWALL_NAME`.
    pub name: String,
    /// `PUBLIC_ACCESS_FIREWALL_TAGS`.
    pub tags: Vec<String>,
}

/// A DigitalOcean API token. Its `Debug` never shows the value, and nothing
/// in this crate formats it into a message.
#[derive(Clone, PartialEq, Eq)]
pub struct AccessToken(String);

impl AccessToken {
    /// Wraps a token.
    pub fn new(token: impl Into<String>) -> Self {
        Self(token.into())
    }

    /// The secret itself, for the `Authorization` header only.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AccessToken(<redacted>)")
    }
}

/// Everything the provider needs to run, read from the environment and the
/// cloud config by [`Settings::from_env`].
#[derive(Debug, Clone)]
pub struct Settings {
    /// The API token.
    pub token: AccessToken,
    /// The API base URL (`DO_OVERRIDE_URL`, or [`DEFAULT_API_URL`]).
    pub api_url: Url,
    /// Client-side requests per second (`DO_API_RATE_LIMIT_QPS`); unlimited
    /// when `None`.
    pub rate_limit_qps: Option<f64>,
    /// `DO_CLUSTER_ID`: load balancers are tagged `k8s:<id>`.
    pub cluster_id: Option<String>,
    /// `DO_CLUSTER_VPC_ID`: the VPC load balancers are created in.
    pub cluster_vpc_id: Option<String>,
    /// `REGION`; when `None`, initialization asks the metadata service.
    pub region: Option<String>,
    /// The droplet metadata endpoint answering the region.
    pub metadata_url: Url,
    /// `DEFAULT_LB_TYPE`: the type of a Service's load balancer when
    /// neither its annotation nor an existing load balancer says.
    pub default_lb_type: LoadBalancerType,
    /// The public-access firewall to keep, when both its variables are set.
    pub firewall: Option<PublicAccessFirewall>,
    /// `METRICS_ADDR` and `DEBUG_ADDR` as given: accepted and checked, but
    /// served on the secure port (logged once at startup).
    pub upstream_listeners: Vec<(&'static str, String)>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    token_file: Option<PathBuf>,
}

impl Settings {
    /// Reads the settings from `env` and, when given, the cloud config.
    ///
    /// # Errors
    /// A [`ConfigError`] naming the variable or file at fault. Messages never
    /// contain the token.
    pub fn from_env(config: Option<&CloudConfig>, env: &Environment) -> Result<Self, ConfigError> {
        let file = config.map(parse_file).transpose()?.unwrap_or_default();
        let token = match (env.get(ENV_ACCESS_TOKEN), &file.token_file) {
            (Some(token), _) => AccessToken::new(token.trim()),
            (None, Some(path)) => read_token_file(path, config)?,
            (None, None) => {
                return Err(ConfigError::new(format!(
                    "environment variable {ENV_ACCESS_TOKEN} is required (or `token_file` in the cloud config)"
                )));
            }
        };
        let api_url = parse_url(
            ENV_OVERRIDE_URL,
            env.get(ENV_OVERRIDE_URL).unwrap_or(DEFAULT_API_URL),
        )?;
        let rate_limit_qps = env
            .get(ENV_API_RATE_LIMIT_QPS)
            .map(|raw| match raw.trim().parse::<f64>() {
                Ok(qps) if qps.is_finite() && qps > 0.0 => Ok(qps),
                _ => Err(ConfigError::new(format!(
                    "environment variable {ENV_API_RATE_LIMIT_QPS} must be a positive number of requests per second"
                ))),
            })
            .transpose()?;
        let cluster_vpc_id = non_empty(env, ENV_CLUSTER_VPC_ID);
        if let Some(vpc) = &cluster_vpc_id
            && !is_uuid(vpc)
        {
            return Err(ConfigError::new(format!(
                "environment variable {ENV_CLUSTER_VPC_ID} must be a VPC UUID (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)"
            )));
        }
        let metadata_url = match env.get(ENV_METADATA_URL) {
            Some(raw) => parse_metadata_url(raw)?,
            None => parse_metadata_url(DEFAULT_METADATA_URL)?,
        };
        Ok(Self {
            token,
            api_url,
            rate_limit_qps,
            cluster_id: non_empty(env, ENV_CLUSTER_ID),
            cluster_vpc_id,
            region: non_empty(env, ENV_REGION),
            metadata_url,
            default_lb_type: default_lb_type(env)?,
            firewall: firewall(env)?,
            upstream_listeners: upstream_listeners(env)?,
        })
    }

    /// The tag marking this cluster's load balancers, `k8s:<DO_CLUSTER_ID>`.
    pub fn cluster_tag(&self) -> Option<String> {
        self.cluster_id.as_ref().map(|id| format!("k8s:{id}"))
    }
}

/// A variable's trimmed value; unset when empty, as upstream's `os.Getenv`
/// checks read it.
fn non_empty(env: &Environment, var: &str) -> Option<String> {
    env.get(var)
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
}

fn default_lb_type(env: &Environment) -> Result<LoadBalancerType, ConfigError> {
    match non_empty(env, ENV_DEFAULT_LB_TYPE) {
        None => Ok(LoadBalancerType::RegionalNetwork),
        Some(raw) => LoadBalancerType::parse(&raw).ok_or_else(|| {
            ConfigError::new(format!(
                "environment variable {ENV_DEFAULT_LB_TYPE} must be REGIONAL or REGIONAL_NETWORK"
            ))
        }),
    }
}

fn firewall(env: &Environment) -> Result<Option<PublicAccessFirewall>, ConfigError> {
    let name = non_empty(env, ENV_PUBLIC_ACCESS_FIREWALL_NAME);
    let tags = non_empty(env, ENV_PUBLIC_ACCESS_FIREWALL_TAGS);
    let (name, tags) = match (name, tags) {
        (None, None) => return Ok(None),
        (Some(name), Some(tags)) => (name, tags),
        (None, Some(_)) | (Some(_), None) => {
            return Err(ConfigError::new(format!(
                "environment variables {ENV_PUBLIC_ACCESS_FIREWALL_NAME} and {ENV_PUBLIC_ACCESS_FIREWALL_TAGS} are set together or not at all"
            )));
        }
    };
    let tags: Vec<String> = tags
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .collect();
    if let Some(position) = tags.iter().position(|t| !is_tag(t)) {
        return Err(ConfigError::new(format!(
            "environment variable {ENV_PUBLIC_ACCESS_FIREWALL_TAGS}: tag {} is not a DigitalOcean tag (letters, digits, `_`, `-`, `:`, at most 255)",
            position + 1
        )));
    }
    if tags.is_empty() {
        return Err(ConfigError::new(format!(
            "environment variable {ENV_PUBLIC_ACCESS_FIREWALL_TAGS}: no tags given"
        )));
    }
    Ok(Some(PublicAccessFirewall { name, tags }))
}

/// `METRICS_ADDR` must be `<host>:<port>`, as upstream checks; `DEBUG_ADDR`
/// any address.
fn upstream_listeners(env: &Environment) -> Result<Vec<(&'static str, String)>, ConfigError> {
    let mut out = Vec::new();
    for var in [ENV_METRICS_ADDR, ENV_DEBUG_ADDR] {
        let Some(addr) = non_empty(env, var) else {
            continue;
        };
        let port_ok = addr
            .rsplit_once(':')
            .is_some_and(|(_, port)| port.parse::<u16>().is_ok());
        if !port_ok {
            return Err(ConfigError::new(format!(
                "environment variable {var} must be <host>:<port>"
            )));
        }
        out.push((var, addr));
    }
    Ok(out)
}

/// Whether DigitalOcean accepts `s` as a tag name.
pub(crate) fn is_tag(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 255
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | ':'))
}

fn parse_metadata_url(raw: &str) -> Result<Url, ConfigError> {
    match Url::parse(raw.trim()) {
        Ok(url) if matches!(url.scheme(), "http" | "https") => Ok(url),
        _ => Err(ConfigError::new(format!(
            "environment variable {ENV_METADATA_URL} must be an http(s) URL"
        ))),
    }
}

fn parse_file(config: &CloudConfig) -> Result<FileConfig, ConfigError> {
    toml::from_str(&config.contents).map_err(|e| {
        let line = e.span().map(|span| {
            config.contents[..span.start.min(config.contents.len())]
                .matches('\n')
                .count()
                + 1
        });
        let message = deserialize_message_without_values(e.message());
        // The only key: a type error is about it, whatever the message says.
        let message = match line.and_then(|l| config.contents.lines().nth(l - 1)) {
            Some(text) if text.trim_start().starts_with("token_file") => {
                format!("`token_file`: {message}")
            }
            _ => message,
        };
        let err = config.error(message);
        match line {
            Some(line) => err.at_line(line),
            None => err,
        }
    })
}

fn read_token_file(
    path: &PathBuf,
    config: Option<&CloudConfig>,
) -> Result<AccessToken, ConfigError> {
    let located = |message: String| match config {
        Some(c) => c.error(message),
        None => ConfigError::new(message),
    };
    // The path is not shown: no error quotes a value.
    let text = std::fs::read_to_string(path)
        .map_err(|e| located(format!("`token_file`: cannot read the file it names: {e}")))?;
    let token = text.trim();
    if token.is_empty() {
        return Err(located(
            "`token_file`: the file it names is empty".to_owned(),
        ));
    }
    Ok(AccessToken::new(token))
}

fn parse_url(what: &str, raw: &str) -> Result<Url, ConfigError> {
    // A base without a trailing slash would lose its last path segment when
    // `v2/...` is joined onto it.
    let with_slash = if raw.ends_with('/') {
        raw.to_owned()
    } else {
        format!("{raw}/")
    };
    match Url::parse(&with_slash) {
        Ok(url) if matches!(url.scheme(), "http" | "https") => Ok(url),
        _ => Err(ConfigError::new(format!(
            "environment variable {what} must be an http(s) URL"
        ))),
    }
}

/// Whether `s` has the 8-4-4-4-12 hex form of the API's UUIDs.
pub(crate) fn is_uuid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, len)| g.len() == len && g.chars().all(|c| c.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> Environment {
        Environment::default().with(ENV_ACCESS_TOKEN, "dop_v1_secret")
    }

    #[test]
    fn missing_token_names_the_variable() {
        let err = Settings::from_env(None, &Environment::default()).unwrap_err();
        assert!(err.to_string().contains("DO_ACCESS_TOKEN"), "{err}");
    }

    #[test]
    fn defaults_point_at_the_public_api() {
        let s = Settings::from_env(None, &env()).unwrap();
        assert_eq!(s.api_url.as_str(), DEFAULT_API_URL);
        assert_eq!(s.rate_limit_qps, None);
        assert_eq!(s.cluster_tag(), None);
    }

    #[test]
    fn override_url_keeps_its_path_prefix() {
        let s = Settings::from_env(
            None,
            &env().with(ENV_OVERRIDE_URL, "http://127.0.0.1:9/api"),
        )
        .unwrap();
        assert_eq!(
            s.api_url.join("v2/droplets").unwrap().as_str(),
            "http://127.0.0.1:9/api/v2/droplets"
        );
    }

    #[test]
    fn bad_values_name_their_variable() {
        for (var, value) in [
            (ENV_OVERRIDE_URL, "ftp://x"),
            (ENV_API_RATE_LIMIT_QPS, "fast"),
            (ENV_API_RATE_LIMIT_QPS, "0"),
            (ENV_CLUSTER_VPC_ID, "vpc-1"),
            (ENV_DEFAULT_LB_TYPE, "GLOBAL"),
            (ENV_METRICS_ADDR, "localhost"),
            (ENV_DEBUG_ADDR, ":http"),
            (ENV_METADATA_URL, "169.254.169.254/metadata"),
            (ENV_PUBLIC_ACCESS_FIREWALL_NAME, "fw"),
            (ENV_PUBLIC_ACCESS_FIREWALL_TAGS, "k8s:worker"),
        ] {
            let err = Settings::from_env(None, &env().with(var, value)).unwrap_err();
            assert!(err.to_string().contains(var), "{var}={value}: {err}");
        }
    }

    #[test]
    fn upstream_variables_read_as_upstream_reads_them() {
        let s = Settings::from_env(None, &env()).unwrap();
        assert_eq!(s.default_lb_type, LoadBalancerType::RegionalNetwork);
        assert_eq!(s.firewall, None);
        assert_eq!(s.metadata_url.as_str(), DEFAULT_METADATA_URL);
        let s = Settings::from_env(
            None,
            &env()
                .with(ENV_DEFAULT_LB_TYPE, "REGIONAL")
                .with(ENV_PUBLIC_ACCESS_FIREWALL_NAME, "k8s-public-access")
                .with(ENV_PUBLIC_ACCESS_FIREWALL_TAGS, "k8s:abc, k8s:worker")
                .with(ENV_METRICS_ADDR, "0.0.0.0:8080")
                .with(ENV_DEBUG_ADDR, ":8081")
                .with(ENV_CLUSTER_ID, "")
                .with(ENV_METADATA_URL, "http://127.0.0.1:9/metadata/v1/region"),
        )
        .unwrap();
        assert_eq!(s.default_lb_type, LoadBalancerType::Regional);
        assert_eq!(
            s.firewall,
            Some(PublicAccessFirewall {
                name: "k8s-public-access".into(),
                tags: vec!["k8s:abc".into(), "k8s:worker".into()],
            })
        );
        assert_eq!(s.upstream_listeners.len(), 2);
        assert_eq!(s.cluster_id, None, "empty is unset, as upstream");
        assert_eq!(s.metadata_url.port(), Some(9));
    }

    #[test]
    fn the_firewall_needs_both_variables() {
        for var in [
            ENV_PUBLIC_ACCESS_FIREWALL_NAME,
            ENV_PUBLIC_ACCESS_FIREWALL_TAGS,
        ] {
            let err = Settings::from_env(None, &env().with(var, "x")).unwrap_err();
            assert!(
                err.to_string().contains(ENV_PUBLIC_ACCESS_FIREWALL_NAME)
                    && err.to_string().contains(ENV_PUBLIC_ACCESS_FIREWALL_TAGS),
                "{err}"
            );
        }
        let err = Settings::from_env(
            None,
            &env()
                .with(ENV_PUBLIC_ACCESS_FIREWALL_NAME, "fw")
                .with(ENV_PUBLIC_ACCESS_FIREWALL_TAGS, "bad tag!"),
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("tag 1 ") && !err.to_string().contains("bad tag!"),
            "{err}"
        );
    }

    #[test]
    fn token_debug_is_redacted() {
        let s = Settings::from_env(None, &env()).unwrap();
        assert!(!format!("{s:?}").contains("dop_v1_secret"));
    }

    #[test]
    fn no_error_quotes_a_value() {
        const MARK: &str = "hunter2";
        for var in [
            ENV_OVERRIDE_URL,
            ENV_API_RATE_LIMIT_QPS,
            ENV_CLUSTER_VPC_ID,
            ENV_DEFAULT_LB_TYPE,
            ENV_METRICS_ADDR,
            ENV_METADATA_URL,
        ] {
            let err = Settings::from_env(None, &env().with(var, MARK))
                .unwrap_err()
                .to_string();
            assert!(err.contains(var) && !err.contains(MARK), "{var}: {err}");
        }
        let err = Settings::from_env(
            None,
            &env().with(ENV_OVERRIDE_URL, "ftp://user:hunter2@127.0.0.1/"),
        )
        .unwrap_err()
        .to_string();
        assert!(!err.contains(MARK), "{err}");
        for (text, line) in [
            ("token_file = 7\ntoken = \"hunter2\"\n", 2),
            ("\ntoken_file = \"hunter2\\q\"\n", 2),
            ("token_file = \"hunter2\n", 1),
            ("token_file = hunter2\n", 1),
            ("token_file = [\"hunter2\"]\n", 1),
            ("token_file = { x = \"hunter2\" }\n", 1),
            ("hunter2\n", 1),
        ] {
            let config = CloudConfig::new("/etc/do.toml", text);
            let err = Settings::from_env(Some(&config), &Environment::default())
                .unwrap_err()
                .to_string();
            assert!(
                err.starts_with(&format!("/etc/do.toml:{line}: ")) && !err.contains(MARK),
                "{text:?}: {err}"
            );
        }
    }

    #[test]
    fn cloud_config_unknown_key_names_file_and_line() {
        let config = CloudConfig::new("/etc/do.toml", "\ntokenfile = \"/x\"\n");
        let err = Settings::from_env(Some(&config), &Environment::default()).unwrap_err();
        let shown = err.to_string();
        assert!(shown.starts_with("/etc/do.toml:2:"), "{shown}");
        assert!(shown.contains("tokenfile"), "{shown}");
    }
}
