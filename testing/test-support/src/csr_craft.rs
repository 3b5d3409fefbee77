//! Hand-built certificate requests for the CSR approver's tests: each part
//! of the DER written out ([`Info`]), then signed with a fresh key, so a
//! test can make the shapes that no certificate library would (two
//! extensionRequest attributes, two subjectAltName extensions, BER framing)
//! and still present a signature that verifies.

use base64::Engine as _;
use rcgen::{PublicKeyData, SigningKey};

/// `contents` under `tag`, its length in DER's minimal form.
#[must_use]
pub fn tlv(tag: u8, contents: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let len = contents.len();
    if len < 0x80 {
        out.push(u8::try_from(len).unwrap_or(0));
    } else {
        let be: Vec<u8> = len
            .to_be_bytes()
            .into_iter()
            .skip_while(|&b| b == 0)
            .collect();
        out.push(0x80 | u8::try_from(be.len()).unwrap_or(0));
        out.extend(be);
    }
    out.extend_from_slice(contents);
    out
}

/// A SEQUENCE of `parts`.
#[must_use]
pub fn sequence(parts: &[Vec<u8>]) -> Vec<u8> {
    tlv(0x30, &parts.concat())
}

/// A SET of `parts`.
#[must_use]
pub fn set(parts: &[Vec<u8>]) -> Vec<u8> {
    tlv(0x31, &parts.concat())
}

/// An OBJECT IDENTIFIER from its DER contents.
#[must_use]
pub fn oid(contents: &[u8]) -> Vec<u8> {
    tlv(0x06, contents)
}

/// id-at-commonName, 2.5.4.3.
pub const COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03];
/// id-at-organizationName, 2.5.4.10.
pub const ORGANIZATION: &[u8] = &[0x55, 0x04, 0x0a];
/// pkcs-9-at-extensionRequest, 1.2.840.113549.1.9.14.
pub const EXTENSION_REQUEST: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x0e];
/// id-ce-subjectAltName, 2.5.29.17.
pub const SUBJECT_ALT_NAME: &[u8] = &[0x55, 0x1d, 0x11];
/// id-ce-basicConstraints, 2.5.29.19.
pub const BASIC_CONSTRAINTS: &[u8] = &[0x55, 0x1d, 0x13];
/// ecdsa-with-SHA256, 1.2.840.10045.4.3.2.
const ECDSA_SHA256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02];

/// One attribute of a subject: a SET of one type-and-UTF8String value.
#[must_use]
pub fn name_attribute(kind: &[u8], value: &str) -> Vec<u8> {
    set(&[sequence(&[oid(kind), tlv(0x0c, value.as_bytes())])])
}

/// A subject of `CN=common_name, O=organization`.
#[must_use]
pub fn subject(common_name: &str, organization: &str) -> Vec<u8> {
    sequence(&[
        name_attribute(COMMON_NAME, common_name),
        name_attribute(ORGANIZATION, organization),
    ])
}

/// A DNS name alternative name.
#[must_use]
pub fn dns(name: &str) -> Vec<u8> {
    tlv(0x82, name.as_bytes())
}

/// An IP address alternative name from its octets.
#[must_use]
pub fn ip(octets: &[u8]) -> Vec<u8> {
    tlv(0x87, octets)
}

/// An extension: its type, and its value in an OCTET STRING.
#[must_use]
pub fn extension(kind: &[u8], value: &[u8]) -> Vec<u8> {
    sequence(&[oid(kind), tlv(0x04, value)])
}

/// A subjectAltName extension of `names`.
#[must_use]
pub fn san(names: &[Vec<u8>]) -> Vec<u8> {
    extension(SUBJECT_ALT_NAME, &sequence(names))
}

/// An extensionRequest attribute whose SET holds one SEQUENCE of
/// `extensions`.
#[must_use]
pub fn extension_request(extensions: &[Vec<u8>]) -> Vec<u8> {
    sequence(&[oid(EXTENSION_REQUEST), set(&[sequence(extensions)])])
}

/// A request's CertificationRequestInfo, short of its key.
#[derive(Debug, Clone)]
pub struct Info {
    /// The subject's DER.
    pub subject: Vec<u8>,
    /// Each attribute's DER, in order.
    pub attributes: Vec<Vec<u8>>,
}

impl Info {
    /// A kubelet's request: `CN=system:node:<node>, O=system:nodes` and a
    /// subjectAltName of `names`.
    #[must_use]
    pub fn kubelet(node: &str, names: &[Vec<u8>]) -> Self {
        Self {
            subject: subject(&format!("system:node:{node}"), "system:nodes"),
            attributes: vec![extension_request(&[san(names)])],
        }
    }

    /// The CertificationRequestInfo's DER with `key`'s public key.
    #[must_use]
    pub fn der(&self, key: &rcgen::KeyPair) -> Vec<u8> {
        sequence(&[
            tlv(0x02, &[0]),
            self.subject.clone(),
            key.subject_public_key_info(),
            tlv(0xa0, &self.attributes.concat()),
        ])
    }

    /// The whole request, signed with a fresh P-256 key.
    #[must_use]
    pub fn signed(&self) -> Vec<u8> {
        let key = rcgen::KeyPair::generate().unwrap_or_else(|e| panic!("a fresh key: {e}"));
        sign(&self.der(&key), &key)
    }
}

/// The request whose CertificationRequestInfo is `info`, signed by `key`
/// with ECDSA and SHA-256 (whatever `info` holds).
#[must_use]
pub fn sign(info: &[u8], key: &rcgen::KeyPair) -> Vec<u8> {
    let signature = key
        .sign(info)
        .unwrap_or_else(|e| panic!("signing a request: {e}"));
    let mut bits = vec![0];
    bits.extend(signature);
    sequence(&[
        info.to_vec(),
        sequence(&[oid(ECDSA_SHA256)]),
        tlv(0x03, &bits),
    ])
}

/// `der` as one PEM block labelled `label`, 64 characters a line.
#[must_use]
pub fn pem_block(label: &str, der: &[u8]) -> String {
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let lines: Vec<&str> = body
        .as_bytes()
        .chunks(64)
        .map(|chunk| std::str::from_utf8(chunk).unwrap_or_default())
        .collect();
    format!(
        "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
        lines.join("\n")
    )
}

/// `der` as a `CERTIFICATE REQUEST` PEM block.
#[must_use]
pub fn pem(der: &[u8]) -> String {
    pem_block("CERTIFICATE REQUEST", der)
}
