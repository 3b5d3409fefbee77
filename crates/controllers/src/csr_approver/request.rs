//! What a PEM certificate request asks for: its subject and its subject
//! alternative names, read exactly as Go reads them or not at all.
//!
//! kube-apiserver validates a request, and kube-controller-manager's
//! kubelet-serving signer signs it, with Go's `encoding/pem` and
//! `crypto/x509.ParseCertificateRequest`. Wherever those could read
//! something other than what x509-parser reads (a second PEM block, BER
//! framing, a second extensionRequest attribute or value, a second or
//! unparseable subjectAltName), the request is refused with the reason
//! rather than judged on a reading Go does not share. The differential test
//! (`referee_tests`) holds this against Go itself.

mod der;
mod pem;
mod shape;

use std::collections::BTreeSet;
use std::net::IpAddr;

use x509_parser::certification_request::X509CertificationRequest;
use x509_parser::cri_attributes::ParsedCriAttribute;
use x509_parser::extensions::{GeneralName, ParsedExtension, X509Extension};
use x509_parser::oid_registry::{
    OID_KEY_TYPE_EC_PUBLIC_KEY, OID_PKCS1_RSAENCRYPTION, OID_PKCS1_SHA256WITHRSA,
    OID_PKCS1_SHA384WITHRSA, OID_PKCS1_SHA512WITHRSA, OID_SIG_ECDSA_WITH_SHA256,
    OID_SIG_ECDSA_WITH_SHA384, OID_SIG_ED25519, OID_X509_EXT_SUBJECT_ALT_NAME,
};
use x509_parser::prelude::FromDer;

/// The parts of a certificate request the approval rules look at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Requested {
    /// The subject's common names (a well-formed request has one).
    pub(crate) common_names: Vec<String>,
    /// The subject's organizations.
    pub(crate) organizations: Vec<String>,
    /// DNS names among the subject alternative names.
    pub(crate) dns_names: Vec<String>,
    /// IP addresses among the subject alternative names.
    pub(crate) ip_addresses: Vec<IpAddr>,
    /// E-mail addresses among the subject alternative names.
    pub(crate) emails: Vec<String>,
    /// URIs among the subject alternative names.
    pub(crate) uris: Vec<String>,
    /// Any other kind of alternative name, as text.
    pub(crate) other_names: Vec<String>,
}

/// Reads `pem` (`spec.request`): exactly one `CERTIFICATE REQUEST` block
/// of DER whose signature verifies.
///
/// # Guarantees
/// When this answers `Ok`, Go's `pem.Decode` and
/// `x509.ParseCertificateRequest` read the same subject and the same
/// alternative names from `pem`.
///
/// # Errors
/// What is wrong with it, in a few words.
pub(crate) fn parse(pem: &[u8]) -> Result<Requested, String> {
    let der = pem::single_block(pem)?;
    der::check_canonical(&der)
        .and_then(|()| shape::check_request(&der))
        .map_err(|e| format!("not a DER certificate request: {e}"))?;
    let (rest, csr) = X509CertificationRequest::from_der(&der)
        .map_err(|e| format!("not a certificate request: {e}"))?;
    if !rest.is_empty() {
        return Err(format!(
            "{} bytes after the certificate request",
            rest.len()
        ));
    }
    check_algorithms(&csr)?;
    csr.verify_signature()
        .map_err(|e| format!("its signature does not verify: {e}"))?;
    let subject = &csr.certification_request_info.subject;
    let text = |attr: &x509_parser::x509::AttributeTypeAndValue<'_>| {
        attr.as_str()
            .map(str::to_owned)
            .map_err(|e| format!("a subject field is not text: {e}"))
    };
    let common_names: Vec<String> = subject
        .iter_common_name()
        .map(text)
        .collect::<Result<_, _>>()?;
    if common_names.len() > 1 {
        // Go keeps the last; a kubelet's subject has one.
        return Err(format!(
            "a subject with {} common names",
            common_names.len()
        ));
    }
    let mut out = Requested {
        common_names,
        organizations: subject
            .iter_organization()
            .map(text)
            .collect::<Result<_, _>>()?,
        ..Requested::default()
    };
    for extension in requested_extensions(&csr)? {
        if extension.oid == OID_X509_EXT_SUBJECT_ALT_NAME {
            alternative_names(extension, &mut out)?;
        }
    }
    Ok(out)
}

/// Whether the request's key and signature are of a kind a kubelet makes,
/// and of one family: x509-parser verifies with the signature's algorithm
/// whatever the key says it is; Go refuses a key of another kind.
fn check_algorithms(csr: &X509CertificationRequest<'_>) -> Result<(), String> {
    let key = &csr.certification_request_info.subject_pki.algorithm;
    let signature = &csr.signature_algorithm.algorithm;
    let no_parameters = key.parameters.is_none();
    let null_parameters = key
        .parameters
        .as_ref()
        .is_some_and(|p| p.header.tag() == x509_parser::der_parser::asn1_rs::Tag::Null);
    let matches = if [OID_SIG_ECDSA_WITH_SHA256, OID_SIG_ECDSA_WITH_SHA384].contains(signature) {
        key.algorithm == OID_KEY_TYPE_EC_PUBLIC_KEY
    } else if [
        OID_PKCS1_SHA256WITHRSA,
        OID_PKCS1_SHA384WITHRSA,
        OID_PKCS1_SHA512WITHRSA,
    ]
    .contains(signature)
    {
        key.algorithm == OID_PKCS1_RSAENCRYPTION && null_parameters
    } else if *signature == OID_SIG_ED25519 {
        key.algorithm == OID_SIG_ED25519 && no_parameters
    } else {
        return Err(format!(
            "a signature algorithm ({signature}) no kubelet uses: ECDSA with SHA-256 or SHA-384, RSA PKCS #1 with SHA-2, or Ed25519"
        ));
    };
    if matches {
        Ok(())
    } else {
        Err(format!(
            "a key of type {} under a {signature} signature",
            key.algorithm
        ))
    }
}

/// The extensions of the request's one extensionRequest attribute (none
/// without one), each of a different type.
///
/// Go reads every extensionRequest attribute, the first value of each, and
/// fails on a type requested twice; x509-parser reads the first attribute
/// alone. [`shape::check_info`] has made sure there is at most one, of one
/// value; here x509-parser must have read every extension in it.
fn requested_extensions<'a>(
    csr: &'a X509CertificationRequest<'a>,
) -> Result<&'a [X509Extension<'a>], String> {
    let Some(count) = shape::check_info(csr.certification_request_info.raw)? else {
        return Ok(&[]);
    };
    let parsed = csr
        .certification_request_info
        .iter_attributes()
        .find_map(|attr| match attr.parsed_attribute() {
            ParsedCriAttribute::ExtensionRequest(request) => Some(&request.extensions),
            _ => None,
        });
    let extensions = match parsed {
        Some(extensions) if extensions.len() == count => extensions,
        _ => {
            return Err("an extensionRequest attribute that cannot be read completely".to_owned());
        }
    };
    let mut seen = BTreeSet::new();
    for extension in extensions {
        if !seen.insert(extension.oid.to_id_string()) {
            return Err(format!("the extension {} requested twice", extension.oid));
        }
    }
    Ok(extensions)
}

/// The tags of RFC 5280's GeneralName kinds: otherName, rfc822Name,
/// dNSName, x400Address, directoryName, ediPartyName,
/// uniformResourceIdentifier, iPAddress, registeredID.
const GENERAL_NAME_TAGS: [u8; 9] = [0xa0, 0x81, 0x82, 0xa3, 0xa4, 0xa5, 0x86, 0x87, 0x88];

/// Adds the names of a subjectAltName extension to `out`, read whole.
fn alternative_names(extension: &X509Extension<'_>, out: &mut Requested) -> Result<(), String> {
    let unreadable = || "a subjectAltName extension that cannot be read completely".to_owned();
    let (names, rest) = der::read(extension.value)?;
    let raw = der::elements(names.contents)?;
    let ParsedExtension::SubjectAlternativeName(san) = extension.parsed_extension() else {
        return Err(unreadable());
    };
    if names.tag != der::SEQUENCE || !rest.is_empty() || san.general_names.len() != raw.len() {
        return Err(unreadable());
    }
    // Each kind of name with the one tag RFC 5280 gives it: Go tells names
    // apart by tag number alone and skips a primitive kind tagged
    // constructed, which x509-parser reads.
    if let Some(name) = raw
        .iter()
        .find(|name| !GENERAL_NAME_TAGS.contains(&name.tag))
    {
        return Err(format!(
            "an alternative name tagged 0x{:02x}, which is no kind of name",
            name.tag
        ));
    }
    let ia5 = |kind: &str, value: &str| {
        if value.is_ascii() {
            Ok(value.to_owned())
        } else {
            Err(format!("a {kind} alternative name that is not ASCII"))
        }
    };
    for name in &san.general_names {
        match name {
            GeneralName::DNSName(dns) => out.dns_names.push(ia5("DNS", dns)?),
            GeneralName::IPAddress(bytes) => out.ip_addresses.push(ip(bytes)?),
            GeneralName::RFC822Name(email) => out.emails.push(ia5("e-mail", email)?),
            GeneralName::URI(uri) => out.uris.push(ia5("URI", uri)?),
            other => out.other_names.push(other.to_string()),
        }
    }
    Ok(())
}

/// An IP address alternative name; an IPv4-mapped IPv6 address is the IPv4
/// address, as Go reads and signs it (`net.IP.To4`).
fn ip(bytes: &[u8]) -> Result<IpAddr, String> {
    if let Ok(v4) = <[u8; 4]>::try_from(bytes) {
        return Ok(IpAddr::from(v4));
    }
    let v6 = <[u8; 16]>::try_from(bytes)
        .map_err(|_| format!("an IP address alternative name of {} bytes", bytes.len()))?;
    Ok(IpAddr::from(v6).to_canonical())
}

#[cfg(test)]
#[path = "request/referee_tests.rs"]
mod referee_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subject_and_every_kind_of_alternative_name_are_read() {
        let pem = ccm_test_support::kubelet_serving_request(
            "system:node:a",
            &[
                "a.example",
                "10.0.0.1",
                "fd00::1",
                "a@example.com",
                "spiffe://x/y",
            ],
        );
        let parsed = parse(pem.as_bytes()).expect("parses");
        assert_eq!(parsed.common_names, ["system:node:a"]);
        assert_eq!(parsed.organizations, ["system:nodes"]);
        assert_eq!(parsed.dns_names, ["a.example"]);
        assert_eq!(
            parsed.ip_addresses,
            [
                "10.0.0.1".parse::<IpAddr>().expect("ip"),
                "fd00::1".parse().expect("ip")
            ]
        );
        assert_eq!(parsed.emails, ["a@example.com"]);
        assert_eq!(parsed.uris, ["spiffe://x/y"]);
    }

    #[test]
    fn not_a_request_is_said_so() {
        assert!(parse(b"hello").expect_err("not PEM").starts_with("not PEM"));
        let cert = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        assert!(
            parse(cert.as_bytes())
                .expect_err("wrong block")
                .contains("CERTIFICATE REQUEST")
        );
        let garbage =
            "-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n";
        assert!(
            parse(garbage.as_bytes())
                .expect_err("bad DER")
                .starts_with("not a DER certificate request")
        );
    }
}
