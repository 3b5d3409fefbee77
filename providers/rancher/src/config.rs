//! Where Rancher is and how to sign in: `CATTLE_URL`, `CATTLE_ACCESS_KEY`
//! and `CATTLE_SECRET_KEY`, as upstream's CCM reads them (HTTP basic
//! authentication with an environment API key).
//!
//! Upstream reads nothing from its `--cloud-config` file; this provider
//! accepts the same file, whose `[Global]` section may give the same three
//! values under upstream's gcfg names (`cattle-url`, `cattle-access-key`,
//! `cattle-secret-key`) for what the environment leaves unset.

use std::fmt;

use ccm_cloud_provider::gcfg::{self, Section};
use ccm_cloud_provider::{CloudConfig, ConfigError, Environment};
use reqwest::Url;

/// The environment variable holding the API's URL, such as
/// `http://rancher.example:8080/v2-beta/projects/1a5`.
pub const URL_VARIABLE: &str = "CATTLE_URL";
/// The environment variable holding the API key's access key.
pub const ACCESS_KEY_VARIABLE: &str = "CATTLE_ACCESS_KEY";
/// The environment variable holding the API key's secret.
pub const SECRET_KEY_VARIABLE: &str = "CATTLE_SECRET_KEY";

/// An API key's secret half: never shown.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretKey(String);

impl SecretKey {
    /// Wraps a secret.
    pub fn new(secret: impl Into<String>) -> Self {
        Self(secret.into())
    }

    /// The secret itself, for the `Authorization` header only.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretKey(<redacted>)")
    }
}

/// Where the API is and the key to call it with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The API's base URL: collections are under it (`<url>/hosts`).
    pub url: Url,
    /// The API key's public half.
    pub access_key: String,
    /// The API key's secret half.
    pub secret_key: SecretKey,
}

/// The three values, each from the environment or else the file.
#[derive(Debug, Default)]
struct Found {
    url: Option<String>,
    access_key: Option<String>,
    secret_key: Option<String>,
}

impl Settings {
    /// Reads the environment and, for what it leaves unset, `config`.
    ///
    /// # Errors
    /// A [`ConfigError`] naming the variable or the file, line and key at
    /// fault; never the secret.
    pub fn read(config: Option<&CloudConfig>, env: &Environment) -> Result<Self, ConfigError> {
        let mut found = match config {
            Some(config) => from_file(config)?,
            None => Found::default(),
        };
        let nonempty = |name: &str| env.get(name).filter(|v| !v.is_empty()).map(str::to_owned);
        if let Some(url) = nonempty(URL_VARIABLE) {
            found.url = Some(url);
        }
        if let Some(key) = nonempty(ACCESS_KEY_VARIABLE) {
            found.access_key = Some(key);
        }
        if let Some(secret) = nonempty(SECRET_KEY_VARIABLE) {
            found.secret_key = Some(secret);
        }
        let missing = |variable: &str, what: &str| {
            ConfigError::new(format!(
                "{variable} is not set: it holds {what} (or set it in the cloud config's [Global] section)"
            ))
        };
        let url = found
            .url
            .ok_or_else(|| missing(URL_VARIABLE, "the Rancher API's URL"))?;
        let url = parse_url(&url)?;
        let access_key = found
            .access_key
            .ok_or_else(|| missing(ACCESS_KEY_VARIABLE, "the API key's access key"))?;
        let secret_key = found
            .secret_key
            .ok_or_else(|| missing(SECRET_KEY_VARIABLE, "the API key's secret"))?;
        if access_key.contains(':') || access_key.chars().any(char::is_control) {
            return Err(ConfigError::new(format!(
                "{ACCESS_KEY_VARIABLE} is not a Rancher access key: it holds a ':' or a control character"
            )));
        }
        if secret_key.chars().any(char::is_control) {
            return Err(ConfigError::new(format!(
                "{SECRET_KEY_VARIABLE} holds a control character (its value is not shown)"
            )));
        }
        Ok(Self {
            url,
            access_key,
            secret_key: SecretKey::new(secret_key),
        })
    }
}

/// `CATTLE_URL` as a base URL ending in `/`, so that joining `hosts` keeps
/// its path.
fn parse_url(text: &str) -> Result<Url, ConfigError> {
    let bad = |why: &str| {
        ConfigError::new(format!(
            "{URL_VARIABLE} is not a usable URL ({why}): expected http(s)://host[:port]/v2-beta[/projects/<id>]"
        ))
    };
    let mut url = Url::parse(text).map_err(|e| bad(&e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad("not http or https"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(bad("no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        // Credentials in the URL would be logged with it.
        return Err(bad(
            "it carries credentials; use CATTLE_ACCESS_KEY and CATTLE_SECRET_KEY",
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(bad("it has a query or a fragment"));
    }
    if !url.path().ends_with('/') {
        let path = format!("{}/", url.path());
        url.set_path(&path);
    }
    Ok(url)
}

/// The `[Global]` section of upstream's gcfg file.
fn from_file(config: &CloudConfig) -> Result<Found, ConfigError> {
    let sections =
        gcfg::parse(&config.contents).map_err(|e| config.error(e.to_string()).at_line(e.line()))?;
    let mut found = Found::default();
    for section in &sections {
        if !section.name.eq_ignore_ascii_case("global") || section.subsection.is_some() {
            return Err(config
                .error(format!(
                    "unknown section [{}]: Rancher's cloud config has only [Global]",
                    section.display_name()
                ))
                .at_line(section.line));
        }
        read_global(config, section, &mut found)?;
    }
    Ok(found)
}

fn read_global(
    config: &CloudConfig,
    section: &Section,
    found: &mut Found,
) -> Result<(), ConfigError> {
    for entry in &section.entries {
        let slot = match entry.key.to_ascii_lowercase().as_str() {
            "cattle-url" => &mut found.url,
            "cattle-access-key" => &mut found.access_key,
            "cattle-secret-key" => &mut found.secret_key,
            _ => {
                return Err(config
                    .error(format!(
                        "unknown key {} in [Global]: expected cattle-url, cattle-access-key or cattle-secret-key",
                        entry.shown_key()
                    ))
                    .at_line(entry.line));
            }
        };
        *slot = entry.value.clone().filter(|v| !v.is_empty());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "s3cret-value";

    fn env() -> Environment {
        Environment::default()
            .with(
                URL_VARIABLE,
                "http://rancher.example:8080/v2-beta/projects/1a5",
            )
            .with(ACCESS_KEY_VARIABLE, "AK1")
            .with(SECRET_KEY_VARIABLE, SECRET)
    }

    #[test]
    fn the_environment_gives_url_and_key() {
        let settings = Settings::read(None, &env()).expect("complete");
        assert_eq!(
            settings.url.as_str(),
            "http://rancher.example:8080/v2-beta/projects/1a5/"
        );
        assert_eq!(settings.access_key, "AK1");
        assert_eq!(settings.secret_key.expose(), SECRET);
        assert!(!format!("{settings:?}").contains(SECRET));
    }

    #[test]
    fn each_missing_variable_is_named_in_one_line() {
        for variable in [URL_VARIABLE, ACCESS_KEY_VARIABLE, SECRET_KEY_VARIABLE] {
            let env: Environment = [URL_VARIABLE, ACCESS_KEY_VARIABLE, SECRET_KEY_VARIABLE]
                .into_iter()
                .filter(|v| *v != variable)
                .map(|v| (v.to_owned(), env().get(v).unwrap_or_default().to_owned()))
                .collect();
            let err = Settings::read(None, &env).expect_err("missing").to_string();
            assert!(err.starts_with(variable), "{err}");
            assert!(!err.contains('\n') && !err.contains(SECRET), "{err}");
        }
    }

    #[test]
    fn a_malformed_url_or_key_is_refused_without_the_secret() {
        for url in [
            "rancher.example",
            "ftp://rancher.example/v2-beta",
            "http://user:pw@rancher.example/v2-beta",
            "http://rancher.example/v2-beta?x=1",
        ] {
            let err = Settings::read(None, &env().with(URL_VARIABLE, url))
                .expect_err(url)
                .to_string();
            assert!(err.starts_with(URL_VARIABLE), "{url}: {err}");
            assert!(!err.contains(SECRET) && !err.contains("pw"), "{err}");
        }
        let err = Settings::read(None, &env().with(ACCESS_KEY_VARIABLE, "a:b"))
            .expect_err("colon")
            .to_string();
        assert!(err.starts_with(ACCESS_KEY_VARIABLE), "{err}");
        let err = Settings::read(None, &env().with(SECRET_KEY_VARIABLE, "bad\nsecret"))
            .expect_err("control")
            .to_string();
        assert!(
            err.contains(SECRET_KEY_VARIABLE) && !err.contains("bad"),
            "{err}"
        );
    }

    #[test]
    fn upstreams_global_section_fills_what_the_environment_leaves_unset() {
        let file = CloudConfig::new(
            "/etc/rancher.conf",
            "[Global]\ncattle-url = http://file.example/v2-beta\ncattle-access-key = FILEKEY\ncattle-secret-key = filesecret\n",
        );
        let only_key = Environment::default().with(ACCESS_KEY_VARIABLE, "ENVKEY");
        let settings = Settings::read(Some(&file), &only_key).expect("file and env");
        assert_eq!(settings.url.as_str(), "http://file.example/v2-beta/");
        assert_eq!(settings.access_key, "ENVKEY");
        assert_eq!(settings.secret_key.expose(), "filesecret");
    }

    #[test]
    fn an_unknown_key_or_section_is_named_with_file_and_line() {
        let file = CloudConfig::new(
            "/etc/rancher.conf",
            "[Global]\ncattle-url = http://x/\nzone = a\n",
        );
        let err = Settings::read(Some(&file), &env())
            .expect_err("unknown key")
            .to_string();
        assert!(err.starts_with("/etc/rancher.conf:3: "), "{err}");
        assert!(err.contains("zone"), "{err}");
        let file = CloudConfig::new("/etc/rancher.conf", "[LoadBalancer]\nx = 1\n");
        let err = Settings::read(Some(&file), &env())
            .expect_err("unknown section")
            .to_string();
        assert!(err.starts_with("/etc/rancher.conf:1: "), "{err}");
    }

    /// A typo beside the secret, and the secret's own line malformed or
    /// wrapped: the error names the line (and key), never the secret.
    #[test]
    fn a_bad_line_beside_the_secret_never_shows_it() {
        for (text, line, key) in [
            (
                "[Global]\ncattle-secret-key = hunter2\ncattle-url http://x/\n",
                3,
                None,
            ),
            ("[Global]\ncattle-secret-key: hunter2\n", 2, None),
            (
                "[Global]\ncattle-secret-key = \"hunter2\n",
                2,
                Some("cattle-secret-key"),
            ),
            (
                "[Global]\ncattle-secret-key = hunter2\\x\n",
                2,
                Some("cattle-secret-key"),
            ),
            ("[Global]\ncattle-secret-key =\n  hunter2\n", 3, None),
            (
                "[Global]\ncattle-secret-key = hunter2\ncattle-secret = hunter2\n",
                3,
                Some("cattle-secret"),
            ),
        ] {
            let file = CloudConfig::new("/etc/rancher.conf", text);
            let err = Settings::read(Some(&file), &Environment::default())
                .expect_err(text)
                .to_string();
            assert!(
                err.starts_with(&format!("/etc/rancher.conf:{line}: ")),
                "{text:?}: {err}"
            );
            assert!(!err.contains("hunter2"), "{text:?}: {err}");
            if let Some(key) = key {
                assert!(err.contains(&format!("`{key}`")), "{text:?}: {err}");
            }
        }
    }
}
