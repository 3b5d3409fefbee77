//! Query parameters.

use crate::status::ApiError;

/// The decoded query string.
#[derive(Debug, Default)]
pub(crate) struct Params {
    pairs: Vec<(String, String)>,
}

impl Params {
    pub(crate) fn parse(query: &str) -> Self {
        Self {
            pairs: form_urlencoded::parse(query.as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        }
    }

    /// The first value of `key`.
    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// `key` as Go's `strconv.ParseBool` reads it.
    pub(crate) fn flag(&self, key: &str) -> Result<Option<bool>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some("1" | "t" | "T" | "true" | "TRUE" | "True") => Ok(Some(true)),
            Some("" | "0" | "f" | "F" | "false" | "FALSE" | "False") => Ok(Some(false)),
            Some(other) => Err(ApiError::bad_request(format!(
                "invalid value for {key}: {other:?} is not a boolean"
            ))),
        }
    }

    /// `key` as a non-negative integer.
    pub(crate) fn number(&self, key: &str) -> Result<Option<u64>, ApiError> {
        match self.get(key) {
            None | Some("") => Ok(None),
            Some(text) => text.parse().map(Some).map_err(|_| {
                ApiError::bad_request(format!(
                    "invalid value for {key}: {text:?} is not a non-negative integer"
                ))
            }),
        }
    }

    /// `dryRun`: absent, or `All`.
    pub(crate) fn dry_run(&self) -> Result<bool, ApiError> {
        match self.get("dryRun") {
            None | Some("") => Ok(false),
            Some("All") => Ok(true),
            Some(other) => Err(ApiError::bad_request(format!(
                "dryRun: Unsupported value: {other:?}: supported values: \"All\""
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_escapes_and_reads_go_booleans() {
        let params = Params::parse("labelSelector=app%3Dweb%2Ctier+in+%28a%29&watch=1&limit=5");
        assert_eq!(params.get("labelSelector"), Some("app=web,tier in (a)"));
        assert_eq!(params.flag("watch"), Ok(Some(true)));
        assert_eq!(params.number("limit"), Ok(Some(5)));
        assert!(Params::parse("watch=yes").flag("watch").is_err());
        assert!(Params::parse("limit=-1").number("limit").is_err());
    }
}
