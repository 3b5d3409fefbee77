//! Where a webhook is called: exactly one of an `https` URL without user,
//! query or fragment (`ValidateWebhookURL`), or a Service reference with a
//! valid port and path (`ValidateWebhookService`), in kube-apiserver's words.

use serde_json::Value;

use super::{Cause, text};
use crate::validation;

/// What kube-apiserver appends to its refusals of a URL's form.
const FORM: &str = "; desired format: https://host[/path]";

pub(super) fn check(config: &Value, at: &str, causes: &mut Vec<Cause>) {
    let url = config.get("url").and_then(Value::as_str);
    let service = config.get("service").filter(|s| s.is_object());
    match (url, service) {
        (Some(url), None) => check_url(url, &format!("{at}.url"), causes),
        (None, Some(service)) => check_service(service, &format!("{at}.service"), causes),
        _ => causes.push((
            at.to_owned(),
            "Required value: exactly one of url or service is required".into(),
        )),
    }
}

fn check_url(raw: &str, at: &str, causes: &mut Vec<Cause>) {
    let url = match Url::parse(raw) {
        Ok(url) => url,
        Err(why) => {
            causes.push((
                at.to_owned(),
                format!("Required value: url must be a valid URL: parse {raw:?}: {why}{FORM}"),
            ));
            return;
        }
    };
    let mut invalid = |value: &str, why: String| {
        causes.push((at.to_owned(), format!("Invalid value: {value:?}: {why}")));
    };
    if url.scheme != "https" {
        invalid(
            &url.scheme,
            format!("'https' is the only allowed URL scheme{FORM}"),
        );
    }
    if url.host.is_empty() {
        invalid(url.host, format!("host must be specified{FORM}"));
    }
    if let Some(user) = url.user {
        invalid(user, "user information is not permitted in the URL".into());
    }
    if !url.fragment.is_empty() {
        invalid(
            url.fragment,
            "fragments are not permitted in the URL".into(),
        );
    }
    if !url.query.is_empty() {
        invalid(
            url.query,
            "query parameters are not permitted in the URL".into(),
        );
    }
}

fn check_service(service: &Value, at: &str, causes: &mut Vec<Cause>) {
    // kube-apiserver hands the name and namespace to `ValidateWebhookService`
    // in the opposite order to its parameters (kubernetes/kubernetes#141353):
    // a missing namespace is reported at `name`, a missing name at
    // `namespace`.
    if text(service, "namespace").is_empty() {
        causes.push((
            format!("{at}.name"),
            "Required value: service name is required".into(),
        ));
    }
    if text(service, "name").is_empty() {
        causes.push((format!("{at}.namespace"), "Required value".into()));
    }
    if let Some(port) = service.get("port").and_then(Value::as_i64)
        && !(1..=65535).contains(&port)
    {
        causes.push((
            format!("{at}.port"),
            format!(
                "Invalid value: {port}: port is not valid: must be between 1 and 65535, inclusive"
            ),
        ));
    }
    if let Some(path) = service.get("path").and_then(Value::as_str) {
        check_path(path, &format!("{at}.path"), causes);
    }
}

/// A path of DNS-subdomain segments, as Go checks it (its first character
/// is dropped whether or not it is the leading `/`).
fn check_path(path: &str, at: &str, causes: &mut Vec<Cause>) {
    if path.is_empty() || path == "/" {
        return;
    }
    let mut invalid = |why: String| {
        causes.push((at.to_owned(), format!("Invalid value: {path:?}: {why}")));
    };
    if path == "//" {
        invalid("segment[0] may not be empty".into());
        return;
    }
    if !path.starts_with('/') {
        invalid("must start with a '/'".into());
    }
    let mut rest = path.get(1..).unwrap_or("");
    rest = rest.strip_suffix('/').unwrap_or(rest);
    for (n, segment) in rest.split('/').enumerate() {
        if segment.is_empty() {
            invalid(format!("segment[{n}] may not be empty"));
            continue;
        }
        for problem in validation::dns_subdomain_problems(segment) {
            invalid(format!("segment[{n}]: {problem}"));
        }
    }
}

/// The parts of a URL kube-apiserver looks at, split as Go's `url.Parse`
/// splits them (escapes are left as they are).
#[derive(Debug)]
struct Url<'a> {
    /// Lowercased, as Go's parser does.
    scheme: String,
    user: Option<&'a str>,
    host: &'a str,
    query: &'a str,
    fragment: &'a str,
}

impl<'a> Url<'a> {
    /// # Errors
    /// Go's wording for the malformed URLs it refuses outright: a control
    /// character, a colon before any scheme, a port that is not a number.
    fn parse(raw: &'a str) -> Result<Self, String> {
        let (rest, fragment) = raw.split_once('#').unwrap_or((raw, ""));
        if rest.bytes().any(|b| b < 0x20 || b == 0x7f) {
            return Err("net/url: invalid control character in URL".into());
        }
        let (scheme, rest) = split_scheme(rest)?;
        let (rest, query) = match rest.split_once('?') {
            Some((before, "")) if !before.contains('?') => (before, ""),
            Some((before, query)) => (before, query),
            None => (rest, ""),
        };
        let mut url = Url {
            scheme: scheme.to_ascii_lowercase(),
            user: None,
            host: "",
            query,
            fragment,
        };
        if !rest.starts_with('/') {
            // An opaque URL (`https:host`) has no host; a relative one may
            // not have a colon in its first segment.
            if scheme.is_empty() && rest.split('/').next().is_some_and(|s| s.contains(':')) {
                return Err("first path segment in URL cannot contain colon".into());
            }
            return Ok(url);
        }
        let Some(after) = rest.strip_prefix("//") else {
            return Ok(url);
        };
        if scheme.is_empty() && after.starts_with('/') {
            return Ok(url);
        }
        let authority = after.split('/').next().unwrap_or("");
        let host = match authority.rsplit_once('@') {
            Some((user, host)) => {
                url.user = Some(user);
                host
            }
            None => authority,
        };
        let port = match host.rfind(':') {
            Some(i) if !host.starts_with('[') || host[..i].ends_with(']') => &host[i..],
            _ => "",
        };
        if !port.is_empty() && !port[1..].bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("invalid port {port:?} after host"));
        }
        url.host = host;
        Ok(url)
    }
}

/// Go's `getScheme`: the scheme and what follows its colon, or no scheme.
fn split_scheme(raw: &str) -> Result<(&str, &str), String> {
    for (i, c) in raw.bytes().enumerate() {
        match c {
            b'a'..=b'z' | b'A'..=b'Z' => {}
            b'0'..=b'9' | b'+' | b'-' | b'.' if i > 0 => {}
            b':' if i == 0 => return Err("missing protocol scheme".into()),
            b':' => return Ok((&raw[..i], &raw[i + 1..])),
            _ => return Ok(("", raw)),
        }
    }
    Ok(("", raw))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn causes_of(config: &Value) -> Vec<Cause> {
        let mut causes = Vec::new();
        check(config, "c", &mut causes);
        causes
    }

    #[test]
    fn exactly_one_of_url_and_service() {
        let both = json!({"url": "https://a.example", "service": {"name": "s", "namespace": "n"}});
        let required = vec![(
            "c".to_owned(),
            "Required value: exactly one of url or service is required".to_owned(),
        )];
        assert_eq!(causes_of(&both), required);
        assert_eq!(causes_of(&json!({})), required);
        assert!(causes_of(&json!({"url": "https://a.example:8443/check"})).is_empty());
    }

    #[test]
    fn a_url_is_https_with_a_host_and_nothing_else() {
        let causes = causes_of(&json!({"url": "http://user@/p?q=1#frag"}));
        let messages: Vec<&str> = causes.iter().map(|(_, m)| m.as_str()).collect();
        assert_eq!(
            messages,
            [
                "Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]",
                "Invalid value: \"\": host must be specified; desired format: https://host[/path]",
                "Invalid value: \"user\": user information is not permitted in the URL",
                "Invalid value: \"frag\": fragments are not permitted in the URL",
                "Invalid value: \"q=1\": query parameters are not permitted in the URL",
            ]
        );
        assert_eq!(
            causes_of(&json!({"url": "https://a.example:port"}))[0].1,
            "Required value: url must be a valid URL: parse \"https://a.example:port\": invalid port \":port\" after host; desired format: https://host[/path]"
        );
    }

    #[test]
    fn a_service_names_itself_its_namespace_a_port_and_a_path_of_subdomains() {
        let causes = causes_of(
            &json!({"service": {"name": "", "namespace": "n", "port": 0, "path": "/ok//Bad/"}}),
        );
        assert_eq!(
            causes,
            [
                (
                    "c.service.namespace".to_owned(),
                    "Required value".to_owned()
                ),
                (
                    "c.service.port".to_owned(),
                    "Invalid value: 0: port is not valid: must be between 1 and 65535, inclusive"
                        .to_owned()
                ),
                (
                    "c.service.path".to_owned(),
                    "Invalid value: \"/ok//Bad/\": segment[1] may not be empty".to_owned()
                ),
                (
                    "c.service.path".to_owned(),
                    format!(
                        "Invalid value: \"/ok//Bad/\": segment[2]: {}",
                        validation::dns_subdomain_problems("Bad")[0]
                    )
                ),
            ]
        );
        assert!(
            causes_of(&json!({"service": {"name": "s", "namespace": "n", "port": 443, "path": "/validate-service"}}))
                .is_empty()
        );
    }
}
