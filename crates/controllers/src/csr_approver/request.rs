//! What a PEM certificate request asks for: its subject and its subject
//! alternative names, read with x509-parser and its signature checked.

use std::net::IpAddr;

use x509_parser::certification_request::X509CertificationRequest;
use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::pem::parse_x509_pem;
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

/// Reads `pem` (`spec.request`): one `CERTIFICATE REQUEST` block whose
/// signature verifies.
///
/// # Errors
/// What is wrong with it, in a few words.
pub(crate) fn parse(pem: &[u8]) -> Result<Requested, String> {
    let (_, block) = parse_x509_pem(pem).map_err(|e| format!("not PEM: {e}"))?;
    if block.label != "CERTIFICATE REQUEST" {
        return Err(format!(
            "a PEM block of type {:?}, not CERTIFICATE REQUEST",
            block.label
        ));
    }
    let (_, csr) = X509CertificationRequest::from_der(&block.contents)
        .map_err(|e| format!("not a certificate request: {e}"))?;
    csr.verify_signature()
        .map_err(|e| format!("its signature does not verify: {e}"))?;
    let subject = &csr.certification_request_info.subject;
    let text = |attr: &x509_parser::x509::AttributeTypeAndValue<'_>| {
        attr.as_str()
            .map(str::to_owned)
            .map_err(|e| format!("a subject field is not text: {e}"))
    };
    let mut out = Requested {
        common_names: subject
            .iter_common_name()
            .map(text)
            .collect::<Result<_, _>>()?,
        organizations: subject
            .iter_organization()
            .map(text)
            .collect::<Result<_, _>>()?,
        ..Requested::default()
    };
    for extension in csr.requested_extensions().into_iter().flatten() {
        let ParsedExtension::SubjectAlternativeName(san) = extension else {
            continue;
        };
        for name in &san.general_names {
            match name {
                GeneralName::DNSName(dns) => out.dns_names.push((*dns).to_owned()),
                GeneralName::IPAddress(bytes) => out.ip_addresses.push(ip(bytes)?),
                GeneralName::RFC822Name(email) => out.emails.push((*email).to_owned()),
                GeneralName::URI(uri) => out.uris.push((*uri).to_owned()),
                other => out.other_names.push(other.to_string()),
            }
        }
    }
    Ok(out)
}

fn ip(bytes: &[u8]) -> Result<IpAddr, String> {
    match bytes.len() {
        4 => Ok(IpAddr::from(<[u8; 4]>::try_from(bytes).unwrap_or_default())),
        16 => Ok(IpAddr::from(
            <[u8; 16]>::try_from(bytes).unwrap_or_default(),
        )),
        n => Err(format!("an IP address alternative name of {n} bytes")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(cn: &str, sans: Vec<rcgen::SanType>) -> String {
        let key = rcgen::KeyPair::generate().expect("key");
        let mut params = rcgen::CertificateParams::default();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "system:nodes");
        params.subject_alt_names = sans;
        params
            .serialize_request(&key)
            .expect("csr")
            .pem()
            .expect("pem")
    }

    #[test]
    fn subject_and_every_kind_of_alternative_name_are_read() {
        let pem = request(
            "system:node:a",
            vec![
                rcgen::SanType::DnsName("a.example".try_into().expect("dns")),
                rcgen::SanType::IpAddress("10.0.0.1".parse().expect("ip")),
                rcgen::SanType::IpAddress("fd00::1".parse().expect("ip")),
                rcgen::SanType::Rfc822Name("a@example.com".try_into().expect("email")),
                rcgen::SanType::URI("spiffe://x/y".try_into().expect("uri")),
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
                .starts_with("not a certificate request")
        );
    }
}
