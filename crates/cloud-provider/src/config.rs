//! What a provider is built from: the `--cloud-config` file's contents and
//! a snapshot of the process environment.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::CloudProvider;

/// The contents of the `--cloud-config` file, read by the app before the
/// provider sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloudConfig {
    /// Where the file was read from, for error messages.
    pub path: PathBuf,
    /// The file's text.
    pub contents: String,
}

impl CloudConfig {
    /// A config with the given origin and text.
    pub fn new(path: impl Into<PathBuf>, contents: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            contents: contents.into(),
        }
    }

    /// A [`ConfigError`] about this file.
    pub fn error(&self, message: impl Into<String>) -> ConfigError {
        ConfigError::new(message).in_file(&self.path)
    }
}

/// A snapshot of the process environment handed to [`ProviderFactory::build`].
///
/// Providers read variables (such as `DO_ACCESS_TOKEN`) from here rather than
/// from the process, so tests give each provider its own environment.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Environment {
    vars: BTreeMap<String, String>,
}

impl Environment {
    /// The current process environment (variables that are valid UTF-8).
    pub fn from_process() -> Self {
        Self {
            vars: std::env::vars().collect(),
        }
    }

    /// Adds or replaces one variable.
    #[must_use]
    pub fn with(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.vars.insert(name.into(), value.into());
        self
    }

    /// The value of `name`, `None` when unset or empty.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }
}

impl FromIterator<(String, String)> for Environment {
    fn from_iter<I: IntoIterator<Item = (String, String)>>(iter: I) -> Self {
        Self {
            vars: iter.into_iter().collect(),
        }
    }
}

impl fmt::Debug for Environment {
    // Values may be secrets (API tokens): show names only.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Environment")
            .field("names", &self.vars.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// A cloud config or environment the provider cannot work with.
///
/// The app prints it as one line and exits with code 64, so its message
/// names the file, the line when known, and the field at fault, and never
/// contains a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.render())]
pub struct ConfigError {
    file: Option<PathBuf>,
    line: Option<usize>,
    message: String,
}

impl ConfigError {
    /// An error with a message naming what is wrong (include the field).
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            file: None,
            line: None,
            message: message.into(),
        }
    }

    /// Locates the error in `file`.
    #[must_use]
    pub fn in_file(mut self, file: &Path) -> Self {
        self.file = Some(file.to_owned());
        self
    }

    /// Locates the error at 1-based `line`.
    #[must_use]
    pub fn at_line(mut self, line: usize) -> Self {
        self.line = Some(line);
        self
    }

    /// The message without its location.
    pub fn message(&self) -> &str {
        &self.message
    }

    fn render(&self) -> String {
        match (&self.file, self.line) {
            (Some(file), Some(line)) => format!("{}:{line}: {}", file.display(), self.message),
            (Some(file), None) => format!("{}: {}", file.display(), self.message),
            (None, _) => self.message.clone(),
        }
    }
}

/// A serde deserializer's message (TOML's, JSON's) without the value it
/// quotes: `invalid type: string "hunter2", expected a boolean` becomes
/// `invalid type, expected a boolean`, `unknown variant `x`, expected ...`
/// becomes `unknown variant, expected ...`. Messages naming a field
/// (`unknown field`, `missing field`, `duplicate field`) name a key, not a
/// value, and are kept; any other message is kept up to its first line.
pub fn deserialize_message_without_values(message: &str) -> String {
    let first = message.lines().next().unwrap_or_default().trim_end();
    for (prefix, shown) in [
        ("invalid type:", "invalid type"),
        ("invalid value:", "invalid value"),
        ("unknown variant", "unknown variant"),
    ] {
        if first.starts_with(prefix) {
            return match first.rsplit_once(", expected ") {
                Some((_, expected)) => format!("{shown}, expected {expected}"),
                None => shown.to_owned(),
            };
        }
    }
    first.to_owned()
}

/// Builds a provider from its configuration: how a `cmd/` binary hands its
/// cloud to the app (upstream's `RegisterCloudProvider` factory).
///
/// # Guarantees the app relies on
/// `build` does no network I/O and fails fast: anything wrong with the
/// config or environment is a [`ConfigError`] here, not a runtime failure
/// later. Network setup belongs in [`CloudProvider::initialize`].
pub trait ProviderFactory {
    /// The name `--cloud-provider` accepts for this provider.
    const NAME: &'static str;

    /// Controllers this provider adds to the generic ones, each off unless
    /// `--controllers` names it (upstream's `ControllersDisabledByDefault`).
    /// Their names are accepted by `--controllers`, and their flags on the
    /// command line, only in this provider's binary.
    const PROVIDER_CONTROLLERS: &'static [crate::ProviderController] = &[];

    /// Builds the provider from the `--cloud-config` file, if one was given,
    /// and the environment.
    ///
    /// # Errors
    /// A [`ConfigError`] naming the file, line and field at fault.
    fn build(
        config: Option<&CloudConfig>,
        env: &Environment,
    ) -> Result<Arc<dyn CloudProvider>, ConfigError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_error_names_file_and_line() {
        let err = ConfigError::new("unknown key `Zonne` in [Global]")
            .in_file(Path::new("/etc/cloud.conf"))
            .at_line(3);
        assert_eq!(
            err.to_string(),
            "/etc/cloud.conf:3: unknown key `Zonne` in [Global]"
        );
    }

    #[test]
    fn deserialize_messages_lose_their_values() {
        for (message, shown) in [
            (
                "invalid type: string \"hunter2\", expected a boolean",
                "invalid type, expected a boolean",
            ),
            (
                "invalid value: integer `-7`, expected u16",
                "invalid value, expected u16",
            ),
            (
                "unknown variant `hunter2`, expected `Running` or `Stopped`",
                "unknown variant, expected `Running` or `Stopped`",
            ),
            (
                "unknown field `tokenfile`, expected `token_file`",
                "unknown field `tokenfile`, expected `token_file`",
            ),
            ("invalid string\nexpected `\"`", "invalid string"),
        ] {
            assert_eq!(deserialize_message_without_values(message), shown);
        }
    }

    #[test]
    fn environment_debug_hides_values() {
        let env = Environment::default().with("DO_ACCESS_TOKEN", "secret-token");
        let shown = format!("{env:?}");
        assert!(shown.contains("DO_ACCESS_TOKEN"));
        assert!(!shown.contains("secret-token"));
    }

    #[test]
    fn empty_variables_read_as_unset() {
        let env = Environment::default().with("REGION", "");
        assert_eq!(env.get("REGION"), None);
    }
}
