//! CertificateSigningRequests (`certificates.k8s.io/v1`), as kube-apiserver's
//! registry strategies treat them: the requester's identity recorded on
//! create, the spec immutable, decisions written only through `/approval`
//! (with their timestamps filled and the rules on conditions), and the
//! rest of the status only through `/status`.

use std::collections::BTreeSet;

use serde_json::{Value, json};
use x509_parser::certification_request::X509CertificationRequest;
use x509_parser::pem::parse_x509_pem;
use x509_parser::prelude::FromDer;

use crate::meta;
use crate::status::ApiError;
use crate::user::UserInfo;
use crate::validation::bad_value;

/// The kind as kube-apiserver names it in errors.
const QUALIFIED_KIND: &str = "CertificateSigningRequest.certificates.k8s.io";
/// The condition types that are decisions: at most one of each, and
/// Approved and Denied never together.
const DECISIONS: [&str; 3] = ["Approved", "Denied", "Failed"];
/// Key usages the API accepts (`certificates.KeyUsage`).
const USAGES: &[&str] = &[
    "signing",
    "digital signature",
    "content commitment",
    "key encipherment",
    "key agreement",
    "data encipherment",
    "cert sign",
    "crl sign",
    "encipher only",
    "decipher only",
    "any",
    "server auth",
    "client auth",
    "code signing",
    "email protection",
    "s/mime",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "timestamping",
    "ocsp signing",
    "microsoft sgc",
    "netscape sgc",
];
/// The shortest certificate lifetime a request may ask for.
const MIN_EXPIRATION_SECONDS: i64 = 600;

type Causes = Vec<(String, String)>;

fn invalid(obj: &Value, causes: &Causes) -> ApiError {
    ApiError::invalid(
        QUALIFIED_KIND,
        "certificates.k8s.io",
        meta::name(obj).unwrap_or(""),
        causes,
    )
}

/// Records who asks (`spec.username`, `uid`, `groups`, `extra`), as
/// kube-apiserver does whatever the body says; `None` when authentication
/// is off (every request an anonymous administrator).
pub(crate) fn set_requester(csr: &mut Value, requester: Option<&UserInfo>) {
    let Some(user) = requester else {
        return;
    };
    let Some(spec) = csr.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    spec.insert("username".into(), json!(user.name));
    if user.uid.is_empty() {
        spec.remove("uid");
    } else {
        spec.insert("uid".into(), json!(user.uid));
    }
    spec.insert("groups".into(), json!(user.groups));
    if user.extra.is_empty() {
        spec.remove("extra");
    } else {
        let extra: serde_json::Map<String, Value> = user
            .extra
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        spec.insert("extra".into(), Value::Object(extra));
    }
}

/// A new request: its spec validated, its status emptied.
///
/// # Errors
/// 422 naming each invalid field.
pub(super) fn prepare_create(csr: &mut Value) -> Result<(), ApiError> {
    let mut causes = Causes::new();
    match csr.pointer("/spec/request").and_then(Value::as_str) {
        None | Some("") => causes.push(("spec.request".into(), "Required value".into())),
        Some(encoded) => {
            // The bytes, shown as JSON shows them: base64, as sent (the body
            // was decoded and encoded again already).
            if let Err(why) = check_request(encoded) {
                causes.push((
                    "spec.request".into(),
                    format!(
                        "Invalid value: {}: {why}",
                        bad_value::json(&Value::from(encoded))
                    ),
                ));
            }
        }
    }
    if csr
        .pointer("/spec/signerName")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        causes.push(("spec.signerName".into(), "Required value".into()));
    }
    let usages: Vec<&str> = csr
        .pointer("/spec/usages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if usages.is_empty() {
        causes.push((
            "spec.usages".into(),
            "Required value: usages must be provided".into(),
        ));
    }
    let mut seen = BTreeSet::new();
    for (n, usage) in usages.iter().enumerate() {
        if !USAGES.contains(usage) {
            causes.push((
                format!("spec.usages[{n}]"),
                // kube-apiserver lists them sorted.
                format!("Unsupported value: {usage:?}: supported values: {}", {
                    let mut listed: Vec<String> = USAGES.iter().map(|u| format!("{u:?}")).collect();
                    listed.sort();
                    listed.join(", ")
                }),
            ));
        } else if !seen.insert(*usage) {
            causes.push((
                format!("spec.usages[{n}]"),
                format!("Duplicate value: {usage:?}"),
            ));
        }
    }
    if let Some(seconds) = csr
        .pointer("/spec/expirationSeconds")
        .and_then(Value::as_i64)
        && seconds < MIN_EXPIRATION_SECONDS
    {
        causes.push((
            "spec.expirationSeconds".into(),
            format!("Invalid value: {seconds}: may not specify a duration less than 600 seconds (10 minutes)"),
        ));
    }
    if !causes.is_empty() {
        return Err(invalid(csr, &causes));
    }
    meta::set_top(csr, "status", json!({}));
    Ok(())
}

/// `spec.request` (base64 in JSON) must hold a PEM certificate request
/// whose signature verifies.
fn check_request(encoded: &str) -> Result<(), String> {
    let pem = decode_base64(encoded).ok_or("not base64")?;
    let (_, block) =
        parse_x509_pem(&pem).map_err(|_| "PEM block type must be CERTIFICATE REQUEST")?;
    if block.label != "CERTIFICATE REQUEST" {
        return Err("PEM block type must be CERTIFICATE REQUEST".into());
    }
    let (_, parsed) =
        X509CertificationRequest::from_der(&block.contents).map_err(|e| format!("asn1: {e}"))?;
    parsed
        .verify_signature()
        .map_err(|e| format!("signature verification failed: {e}"))
}

fn decode_base64(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let mut buffer = 0u32;
    let mut bits = 0;
    for byte in text
        .bytes()
        .filter(|b| !b.is_ascii_whitespace() && *b != b'=')
    {
        let value = match byte {
            b'A'..=b'Z' => byte - b'A',
            b'a'..=b'z' => byte - b'a' + 26,
            b'0'..=b'9' => byte - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        buffer = (buffer << 6) | u32::from(value);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buffer >> bits) as u8);
        }
    }
    Some(out)
}

/// An update of the main resource: the spec never changes.
pub(super) fn prepare_update(new: &mut Value, old: &Value) {
    meta::set_top(new, "spec", meta::top(old, "spec").clone());
}

/// A `/status` write: the spec and the decisions are kept.
pub(super) fn prepare_status_update(new: &mut Value, old: &Value) {
    meta::set_top(new, "spec", meta::top(old, "spec").clone());
    let kept: Vec<Value> = conditions(old)
        .into_iter()
        .filter(is_decision)
        .chain(conditions(new).into_iter().filter(|c| !is_decision(c)))
        .collect();
    super::set_path(new, &["status", "conditions"], conditions_value(kept));
}

/// An `/approval` write: only the conditions may change, by the rules on
/// decisions, and their timestamps are filled.
///
/// # Errors
/// 422 for conditions the API refuses.
pub(crate) fn prepare_approval(new: &mut Value, old: &Value, now: &str) -> Result<(), ApiError> {
    meta::set_top(new, "spec", meta::top(old, "spec").clone());
    let certificate = old
        .pointer("/status/certificate")
        .cloned()
        .unwrap_or(Value::Null);
    super::set_path(new, &["status", "certificate"], certificate);
    let before = conditions(old);
    let mut after = conditions(new);
    let mut causes = Causes::new();
    let mut seen = BTreeSet::new();
    for (n, condition) in after.iter_mut().enumerate() {
        let kind = condition["type"].as_str().unwrap_or_default().to_owned();
        if condition["status"].as_str().is_none_or(str::is_empty) {
            condition["status"] = json!("True");
        }
        let status = condition["status"].as_str().unwrap_or_default().to_owned();
        let at = |field: &str| format!("status.conditions[{n}].{field}");
        if kind.is_empty() {
            causes.push((at("type"), "Required value".into()));
            continue;
        }
        if DECISIONS.contains(&kind.as_str()) {
            if !seen.insert(kind.clone()) {
                causes.push((at("type"), format!("Duplicate value: {kind:?}")));
            }
            if status != "True" {
                causes.push((
                    at("status"),
                    format!("Unsupported value: {status:?}: supported values: \"True\""),
                ));
            }
        } else if !["True", "False", "Unknown"].contains(&status.as_str()) {
            causes.push((
                at("status"),
                format!("Unsupported value: {status:?}: supported values: \"False\", \"True\", \"Unknown\""),
            ));
        }
        if kind == "Denied" && seen.contains("Approved")
            || kind == "Approved" && seen.contains("Denied")
        {
            causes.push((
                at("type"),
                format!(
                    "Invalid value: {kind:?}: Approved and Denied conditions are mutually exclusive"
                ),
            ));
        }
        let earlier = before.iter().find(|c| c["type"] == condition["type"]);
        if condition["lastUpdateTime"]
            .as_str()
            .is_none_or(str::is_empty)
        {
            condition["lastUpdateTime"] = json!(now);
        }
        if condition["lastTransitionTime"]
            .as_str()
            .is_none_or(str::is_empty)
        {
            let kept = earlier
                .filter(|c| c["status"] == condition["status"])
                .and_then(|c| c["lastTransitionTime"].as_str())
                .unwrap_or(now)
                .to_owned();
            condition["lastTransitionTime"] = json!(kept);
        }
    }
    for decision in before
        .iter()
        .filter(|c| c["type"] == "Approved" || c["type"] == "Denied")
    {
        if !after.iter().any(|c| c["type"] == decision["type"]) {
            causes.push((
                "status.conditions".into(),
                format!(
                    "Forbidden: updates may not remove a condition of type {}",
                    decision["type"]
                ),
            ));
        }
    }
    if !causes.is_empty() {
        return Err(invalid(new, &causes));
    }
    super::set_path(new, &["status", "conditions"], conditions_value(after));
    Ok(())
}

fn conditions(obj: &Value) -> Vec<Value> {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn conditions_value(list: Vec<Value>) -> Value {
    if list.is_empty() {
        Value::Null
    } else {
        Value::Array(list)
    }
}

fn is_decision(condition: &Value) -> bool {
    condition["type"]
        .as_str()
        .is_some_and(|t| DECISIONS.contains(&t))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn approved(status: &str) -> Value {
        json!({"type": "Approved", "status": status, "reason": "R"})
    }

    #[test]
    fn approval_fills_timestamps_and_defaults_status() {
        let old = json!({"spec": {"signerName": "s"}, "status": {}});
        let mut new =
            json!({"spec": {"signerName": "changed"}, "status": {"conditions": [approved("")]}});
        prepare_approval(&mut new, &old, "2026-11-25T16:00:00Z").expect("valid");
        assert_eq!(new["spec"]["signerName"], "s");
        let condition = &new["status"]["conditions"][0];
        assert_eq!(condition["status"], "True");
        assert_eq!(condition["lastUpdateTime"], "2026-11-25T16:00:00Z");
        assert_eq!(condition["lastTransitionTime"], "2026-11-25T16:00:00Z");
    }

    #[test]
    fn approved_and_denied_together_or_removed_are_refused() {
        let old = json!({"status": {}});
        let mut both = json!({"status": {"conditions": [approved("True"), {"type": "Denied", "status": "True"}]}});
        let err = prepare_approval(&mut both, &old, "t").expect_err("422");
        assert!(
            err.message.contains("mutually exclusive"),
            "{}",
            err.message
        );
        let old = json!({"status": {"conditions": [approved("True")]}});
        let mut removed = json!({"status": {"conditions": []}});
        let err = prepare_approval(&mut removed, &old, "t").expect_err("422");
        assert!(err.message.contains("may not remove"), "{}", err.message);
        let mut false_approval = json!({"status": {"conditions": [approved("False")]}});
        assert!(prepare_approval(&mut false_approval, &json!({}), "t").is_err());
    }

    #[test]
    fn create_requires_a_request_a_signer_and_known_usages() {
        let mut csr =
            json!({"metadata": {"name": "x"}, "spec": {"usages": ["server auth", "bogus"]}});
        let err = prepare_create(&mut csr).expect_err("422");
        for field in ["spec.request", "spec.signerName", "spec.usages[1]"] {
            assert!(err.message.contains(field), "{field}: {}", err.message);
        }
    }

    #[test]
    fn the_requester_overwrites_what_the_body_claims() {
        let mut csr =
            json!({"spec": {"username": "system:node:forged", "groups": ["system:masters"]}});
        let user = UserInfo {
            name: "system:node:a".into(),
            groups: vec!["system:nodes".into(), "system:authenticated".into()],
            ..UserInfo::default()
        };
        set_requester(&mut csr, Some(&user));
        assert_eq!(csr["spec"]["username"], "system:node:a");
        assert_eq!(
            csr["spec"]["groups"],
            json!(["system:nodes", "system:authenticated"])
        );
    }
}
