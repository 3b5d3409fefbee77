//! Kubelet serving certificate requests as a kubelet makes them: a fresh
//! key, the subject `CN=<common name>, O=system:nodes`, and the names it
//! wants to serve as.

use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The signer of kubelet serving certificates.
pub const KUBELET_SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";

/// The usages a kubelet asks for with an RSA key.
pub const SERVING_USAGES: &[&str] = &["digital signature", "key encipherment", "server auth"];

/// A PEM certificate request for `common_name` (such as
/// `system:node:n1`) in `system:nodes`, signed by a fresh key, whose
/// alternative names are `names`: an IP address where one parses, an
/// e-mail address where there is an `@`, a URI where there is `://`, else
/// a DNS name.
///
/// # Panics
/// On a name rcgen refuses: fixtures are the test's own.
pub fn kubelet_serving_request(common_name: &str, names: &[&str]) -> String {
    let key = rcgen::KeyPair::generate().expect("a fresh key");
    let mut params = rcgen::CertificateParams::default();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, common_name);
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, "system:nodes");
    params.subject_alt_names = names
        .iter()
        .map(|name| {
            if let Ok(ip) = name.parse() {
                rcgen::SanType::IpAddress(ip)
            } else if name.contains('@') {
                rcgen::SanType::Rfc822Name((*name).try_into().expect("an e-mail address"))
            } else if name.contains("://") {
                rcgen::SanType::URI((*name).try_into().expect("a URI"))
            } else {
                rcgen::SanType::DnsName((*name).try_into().expect("a DNS name"))
            }
        })
        .collect();
    params
        .serialize_request(&key)
        .expect("a certificate request")
        .pem()
        .expect("PEM")
}

/// The request object `name` for `pem` with `usages`, of the kubelet
/// serving signer; the API server fills in who made it.
pub fn kubelet_serving_csr(name: &str, pem: &str, usages: &[&str]) -> CertificateSigningRequest {
    CertificateSigningRequest {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        spec: CertificateSigningRequestSpec {
            request: ByteString(pem.as_bytes().to_vec()),
            signer_name: KUBELET_SERVING_SIGNER.to_owned(),
            usages: Some(usages.iter().map(|u| (*u).to_owned()).collect()),
            ..CertificateSigningRequestSpec::default()
        },
        status: None,
    }
}
