//! Name rules Kubernetes enforces on `metadata.name`; the rules for
//! metadata and for repeated fields live in the submodules.

use crate::resources::Kind;
use bad_value::quoted;

pub(crate) mod bad_value;
pub(crate) mod duplicates;
pub(crate) mod metadata;

/// RFC 1123 subdomain: lowercase alphanumerics, `-` and `.`, at most 253.
pub(crate) fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_label_chars)
}

/// RFC 1123 label: lowercase alphanumerics and `-`, at most 63.
pub(crate) fn is_dns_label(s: &str) -> bool {
    s.len() <= 63 && is_label_chars(s)
}

/// RFC 1035 label: an RFC 1123 label that starts with a letter.
pub(crate) fn is_dns1035_label(s: &str) -> bool {
    is_dns_label(s) && s.starts_with(|c: char| c.is_ascii_lowercase())
}

fn is_label_chars(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

/// Checks `metadata.name` for `kind`; the message is Kubernetes' wording.
pub(crate) fn validate_name(kind: Kind, name: &str) -> Result<(), String> {
    match kind {
        Kind::Namespace if !is_dns_label(name) => Err(format!(
            "Invalid value: {}: a lowercase RFC 1123 label must consist of lower case \
             alphanumeric characters or '-', and must start and end with an alphanumeric character",
            quoted(name)
        )),
        Kind::Service if !is_dns1035_label(name) => Err(format!(
            "Invalid value: {}: a DNS-1035 label must consist of lower case alphanumeric \
             characters or '-', start with an alphabetic character, and end with an alphanumeric character",
            quoted(name)
        )),
        // RBAC names only need to be path segments (`system:discovery`).
        Kind::Event
        | Kind::EventV1
        | Kind::Role
        | Kind::ClusterRole
        | Kind::RoleBinding
        | Kind::ClusterRoleBinding => validate_path_segment(name),
        Kind::Namespace | Kind::Service => Ok(()),
        _ if !is_dns_subdomain(name) => Err(format!(
            "Invalid value: {}: a lowercase RFC 1123 subdomain must consist of lower case \
             alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
            quoted(name)
        )),
        _ => Ok(()),
    }
}

/// Go's `IsDNS1123Subdomain`: what is wrong with `s` as a DNS subdomain, in
/// its words (the length, then the characters).
pub(crate) fn dns_subdomain_problems(s: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if s.len() > 253 {
        problems.push("must be no more than 253 characters".to_owned());
    }
    if s.is_empty() || !s.split('.').all(is_label_chars) {
        problems.push(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, \
             '-' or '.', and must start and end with an alphanumeric character (e.g. \
             'example.com', regex used for validation is \
             '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
                .to_owned(),
        );
    }
    problems
}

/// Go's `IsDNS1035Label`, in its words.
pub(crate) fn dns1035_label_problems(s: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if s.len() > 63 {
        problems.push("must be no more than 63 characters".to_owned());
    }
    if !(is_label_chars(s) && s.starts_with(|c: char| c.is_ascii_lowercase())) {
        problems.push(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start \
             with an alphabetic character, and end with an alphanumeric character (e.g. \
             'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
                .to_owned(),
        );
    }
    problems
}

/// `field.NotSupported`'s message.
pub(crate) fn not_supported(value: &str, supported: &[&str]) -> String {
    let listed: Vec<String> = supported.iter().map(|s| quoted(s)).collect();
    format!(
        "Unsupported value: {}: supported values: {}",
        quoted(value),
        listed.join(", ")
    )
}

/// What any name must satisfy to be one URL path segment.
pub(crate) fn validate_path_segment(name: &str) -> Result<(), String> {
    if name == "." || name == ".." {
        return Err(format!(
            "Invalid value: {}: may not be '.' or '..'",
            quoted(name)
        ));
    }
    if name.contains('/') || name.contains('%') {
        return Err(format!(
            "Invalid value: {}: may not contain '/' or '%'",
            quoted(name)
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn services_need_a_leading_letter_nodes_may_have_dots() {
        assert!(validate_name(Kind::Service, "lb-1").is_ok());
        assert!(validate_name(Kind::Service, "1lb").is_err());
        assert!(validate_name(Kind::Node, "ip-10-0-0-1.ec2.internal").is_ok());
        assert!(validate_name(Kind::Node, "Upper").is_err());
        assert!(validate_name(Kind::Namespace, "a.b").is_err());
        assert!(validate_name(Kind::Event, "node-1.17a2b3c4d5e6f").is_ok());
        assert!(validate_name(Kind::Event, "a/b").is_err());
        assert!(validate_name(Kind::ClusterRole, "system:auth-delegator").is_ok());
        assert!(validate_name(Kind::ServiceAccount, "system:x").is_err());
    }
}
