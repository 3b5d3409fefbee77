//! Delegated authentication, in upstream's order: request-header (front
//! proxy) client certificates, then client certificates, then bearer tokens
//! by TokenReview (cached by the token's digest). A request with none of
//! these is anonymous.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::http::{HeaderMap, header};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use rustls::DistinguishedName;
use rustls::pki_types::CertificateDer;

use super::cache::{Key, TtlCache};
use super::client_ca::{CaSource, ClusterAuthentication, Lookup, RequestHeader};
use super::reload::Reloader;
use super::review;
use super::{AuthenticationOptions, Error};

const ANONYMOUS: &str = "system:anonymous";
const UNAUTHENTICATED: &str = "system:unauthenticated";
const AUTHENTICATED: &str = "system:authenticated";

/// Who sent a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct User {
    pub(crate) name: String,
    pub(crate) uid: String,
    pub(crate) groups: Vec<String>,
    pub(crate) extra: BTreeMap<String, Vec<String>>,
}

impl User {
    fn anonymous() -> Self {
        Self {
            name: ANONYMOUS.into(),
            uid: String::new(),
            groups: vec![UNAUTHENTICATED.into()],
            extra: BTreeMap::new(),
        }
    }

    pub(crate) fn is_anonymous(&self) -> bool {
        self.name == ANONYMOUS
    }

    /// Upstream's `AuthenticatedGroupAdder`.
    fn with_authenticated_group(mut self) -> Self {
        if !self
            .groups
            .iter()
            .any(|g| g == AUTHENTICATED || g == UNAUTHENTICATED)
        {
            self.groups.push(AUTHENTICATED.into());
        }
        self
    }
}

/// The certificates the client presented in the TLS handshake, leaf first;
/// the listener puts them in every request's extensions.
#[derive(Debug, Clone, Default)]
pub(crate) struct PeerCertificates(pub(crate) Arc<Vec<CertificateDer<'static>>>);

/// Why a request is not authenticated (answered 401). Never holds a token.
#[derive(Debug, thiserror::Error)]
#[error("{}", .0.join("; "))]
pub(crate) struct Unauthenticated(Vec<String>);

/// Every configured way of authenticating a request.
#[derive(Debug)]
pub(super) struct Authenticator {
    /// From `--requestheader-client-ca-file` and its flags.
    request_header: Option<RequestHeader>,
    /// From `--client-ca-file`.
    client_ca: Option<CaSource>,
    /// What the flags leave out, looked up in the cluster.
    cluster: Option<Arc<ClusterAuthentication>>,
    tokens: TokenReviews,
}

impl Authenticator {
    /// Loads the CA files and, unless `--authentication-skip-lookup`, looks
    /// up what the files do not give in the authentication ConfigMap.
    ///
    /// # Errors
    /// An unreadable or invalid CA file; a lookup failure that is not
    /// tolerated.
    pub(super) async fn build(
        options: &AuthenticationOptions,
        client: kube::Client,
        reloader: &mut Reloader,
    ) -> Result<Self, Error> {
        let flags = &options.request_header;
        warn_without_standard_headers(flags);
        let client_ca = match &options.client_ca_file {
            Some(path) => Some(CaSource::file("--client-ca-file", path, reloader)?),
            None => None,
        };
        let request_header = match &flags.client_ca_file {
            Some(path) => Some(RequestHeader {
                ca: CaSource::file("--requestheader-client-ca-file", path, reloader)?,
                allowed_names: flags.allowed_names.clone(),
                username_headers: flags.username_headers.clone(),
                group_headers: flags.group_headers.clone(),
                extra_header_prefixes: flags.extra_header_prefixes.clone(),
                uid_headers: flags.uid_headers.clone(),
            }),
            None => None,
        };
        let needs_lookup = options.client_ca_file.is_none() || flags.client_ca_file.is_none();
        let cluster = if needs_lookup && !options.skip_lookup {
            let cluster =
                ClusterAuthentication::load(client.clone(), options.tolerate_lookup_failure)
                    .await?;
            Some(Arc::new(cluster))
        } else {
            None
        };
        Ok(Self {
            request_header,
            client_ca,
            cluster,
            tokens: TokenReviews::new(client, options.cache_ttl),
        })
    }

    /// The cluster lookup, for [`ClusterAuthentication::spawn_refresh`].
    pub(super) fn cluster(&self) -> Option<Arc<ClusterAuthentication>> {
        self.cluster.clone()
    }

    /// The subjects of every client CA, for the TLS handshake's certificate
    /// request; `None` when no CA can be configured, so no certificate is
    /// asked for. With a cluster lookup, certificates are always asked for:
    /// the ConfigMap may gain a CA later.
    pub(super) fn client_ca_hints(&self) -> Option<Vec<DistinguishedName>> {
        let looked_up = self.cluster.as_ref().map(|c| c.current());
        let (request_header, client_ca) = self.sources(looked_up.as_deref());
        if request_header.is_none() && client_ca.is_none() && self.cluster.is_none() {
            return None;
        }
        Some(
            request_header
                .map(|r| &r.ca)
                .into_iter()
                .chain(client_ca)
                .flat_map(|s| s.current().subjects())
                .collect(),
        )
    }

    /// The request-header and client-certificate settings in force: the
    /// flags' where given, else the cluster's.
    fn sources<'a>(
        &'a self,
        looked_up: Option<&'a Lookup>,
    ) -> (Option<&'a RequestHeader>, Option<&'a CaSource>) {
        (
            self.request_header
                .as_ref()
                .or_else(|| looked_up.and_then(|l| l.request_header.as_ref())),
            self.client_ca
                .as_ref()
                .or_else(|| looked_up.and_then(|l| l.client_ca.as_ref())),
        )
    }

    /// Who sent `request`: the first method that succeeds, else anonymous
    /// when no credentials were presented. Credentials it consumed are
    /// removed from the request, as upstream does.
    ///
    /// # Errors
    /// [`Unauthenticated`] when credentials were presented and none held.
    pub(super) async fn authenticate(
        &self,
        request: &mut Request,
    ) -> Result<User, Unauthenticated> {
        let chain = request
            .extensions()
            .get::<PeerCertificates>()
            .map(|p| p.0.clone())
            .unwrap_or_default();
        let looked_up = self.cluster.as_ref().map(|c| c.current());
        let (request_header, client_ca) = self.sources(looked_up.as_deref());
        let mut errors = Vec::new();
        if let Some(request_header) = request_header
            && !chain.is_empty()
        {
            match request_header.authenticate(&chain, request.headers_mut()) {
                Ok(Some(user)) => return Ok(user.with_authenticated_group()),
                Ok(None) => {}
                Err(err) => errors.push(err),
            }
        }
        if let Some(client_ca) = client_ca
            && !chain.is_empty()
        {
            match client_ca.current().verify(&chain) {
                Ok(()) => {
                    if let Some(user) = chain.first().and_then(certificate_user) {
                        return Ok(user.with_authenticated_group());
                    }
                }
                Err(err) => errors.push(format!("verifying the client certificate: {err}")),
            }
        }
        if let Some(token) = bearer_token(request.headers()) {
            match self.tokens.review(&token).await {
                Ok(Some(user)) => {
                    request.headers_mut().remove(header::AUTHORIZATION);
                    return Ok(user.with_authenticated_group());
                }
                Ok(None) => errors.push("invalid bearer token".into()),
                Err(err) => errors.push(err),
            }
        }
        if errors.is_empty() {
            Ok(User::anonymous())
        } else {
            Err(Unauthenticated(errors))
        }
    }
}

impl RequestHeader {
    /// Upstream's request-header authenticator behind its CA verifier: a
    /// certificate from the front proxy's CA (with an allowed common name),
    /// then the user named in the headers; no user header, no answer.
    fn authenticate(
        &self,
        chain: &[CertificateDer<'static>],
        headers: &mut HeaderMap,
    ) -> Result<Option<User>, String> {
        self.ca
            .current()
            .verify(chain)
            .map_err(|e| format!("verifying the request-header client certificate: {e}"))?;
        if !self.allowed_names.is_empty() {
            let cn = chain
                .first()
                .and_then(certificate_user)
                .map(|u| u.name)
                .unwrap_or_default();
            if !self.allowed_names.contains(&cn) {
                return Err(format!(
                    "request-header client certificate with CN {cn:?} is not in --requestheader-allowed-names"
                ));
            }
        }
        let first = |names: &[String]| {
            names
                .iter()
                .find_map(|n| header_str(headers, n).filter(|v| !v.is_empty()))
                .map(str::to_owned)
        };
        let Some(name) = first(&self.username_headers) else {
            return Ok(None);
        };
        let uid = first(&self.uid_headers).unwrap_or_default();
        let groups = self
            .group_headers
            .iter()
            .flat_map(|n| headers.get_all(n.as_str()).iter())
            .filter_map(|v| v.to_str().ok())
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
            .collect();
        let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut consumed: Vec<String> = Vec::new();
        for prefix in &self.extra_header_prefixes {
            let prefix = prefix.to_ascii_lowercase();
            for (name, value) in headers.iter() {
                if let Some(key) = name.as_str().strip_prefix(&prefix) {
                    if let Ok(value) = value.to_str() {
                        extra
                            .entry(percent_decode(key))
                            .or_default()
                            .push(value.to_owned());
                    }
                    consumed.push(name.as_str().to_owned());
                }
            }
        }
        for name in self
            .username_headers
            .iter()
            .chain(&self.uid_headers)
            .chain(&self.group_headers)
            .chain(&consumed)
        {
            if let Ok(name) = header::HeaderName::from_bytes(name.as_bytes()) {
                headers.remove(name);
            }
        }
        Ok(Some(User {
            name,
            uid,
            groups,
            extra,
        }))
    }
}

/// Upstream's warnings for request-header lists that leave out the
/// standard header API aggregation sends.
fn warn_without_standard_headers(flags: &super::RequestHeaderOptions) {
    for (flag, list, standard) in [
        (
            "--requestheader-username-headers",
            &flags.username_headers,
            "X-Remote-User",
        ),
        (
            "--requestheader-group-headers",
            &flags.group_headers,
            "X-Remote-Group",
        ),
        (
            "--requestheader-extra-headers-prefix",
            &flags.extra_header_prefixes,
            "X-Remote-Extra-",
        ),
    ] {
        if !list.is_empty() && !list.iter().any(|h| h.eq_ignore_ascii_case(standard)) {
            tracing::warn!(
                "{flag} is set without the standard {standard} header; API aggregation will not work"
            );
        }
    }
}

fn header_str<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Upstream's `CommonNameUserConversion`: the common name is the user, the
/// organizations its groups; no common name, no user.
fn certificate_user(leaf: &CertificateDer<'_>) -> Option<User> {
    let (_, cert) = x509_parser::parse_x509_certificate(leaf).ok()?;
    let name = cert
        .subject()
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .filter(|cn| !cn.is_empty())?
        .to_owned();
    let groups = cert
        .subject()
        .iter_organization()
        .filter_map(|o| o.as_str().ok())
        .map(str::to_owned)
        .collect();
    Some(User {
        name,
        uid: String::new(),
        groups,
        extra: BTreeMap::new(),
    })
}

/// The token of `Authorization: Bearer <token>`, as upstream's bearer-token
/// authenticator reads it.
fn bearer_token(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let mut parts = value.splitn(3, ' ');
    let scheme = parts.next()?;
    let token = parts.next()?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then(|| token.to_owned())
}

/// Go's `url.PathUnescape`, falling back to the raw key when malformed.
fn percent_decode(key: &str) -> String {
    let bytes = key.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok());
            match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                Some(b) => {
                    out.push(b);
                    i += 3;
                }
                None => return key.to_owned(),
            }
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap_or_else(|_| key.to_owned())
}

/// TokenReviews through a Kubernetes client, each answer (authenticated or
/// not) cached for the TTL under the token's SHA-256 digest.
struct TokenReviews {
    client: kube::Client,
    ttl: Duration,
    cache: TtlCache<Option<User>>,
}

impl std::fmt::Debug for TokenReviews {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenReviews")
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl TokenReviews {
    fn new(client: kube::Client, ttl: Duration) -> Self {
        Self {
            client,
            ttl,
            cache: TtlCache::default(),
        }
    }

    /// The user `token` stands for, `None` if the API server says it stands
    /// for no one. A failed review is not cached.
    async fn review(&self, token: &str) -> Result<Option<User>, String> {
        let fetch = async {
            let review = TokenReview {
                spec: TokenReviewSpec {
                    token: Some(token.to_owned()),
                    audiences: None,
                },
                ..TokenReview::default()
            };
            let answer = review::create(&self.client, &review)
                .await
                .map_err(|e| format!("TokenReview failed: {e}"))?;
            let status = answer.status.unwrap_or_default();
            let user = match (status.authenticated, status.user) {
                (Some(true), Some(info)) => Some(User {
                    name: info.username.unwrap_or_default(),
                    uid: info.uid.unwrap_or_default(),
                    groups: info.groups.unwrap_or_default(),
                    extra: info.extra.unwrap_or_default(),
                }),
                _ => None,
            };
            Ok((user, self.ttl))
        };
        self.cache
            .get_or_fetch(Key::of(token.as_bytes()), fetch)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_are_read_as_upstream() {
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::AUTHORIZATION, value.parse().unwrap());
            bearer_token(&headers)
        };
        assert_eq!(with("Bearer abc").as_deref(), Some("abc"));
        assert_eq!(with("bearer abc extra").as_deref(), Some("abc"));
        assert_eq!(with("Basic abc"), None);
        assert_eq!(with("Bearer "), None);
        assert_eq!(bearer_token(&HeaderMap::new()), None);
    }

    #[test]
    fn extra_keys_are_percent_decoded() {
        assert_eq!(percent_decode("acme.com%2Fproject"), "acme.com/project");
        assert_eq!(percent_decode("bad%zz"), "bad%zz");
    }

    #[test]
    fn authenticated_users_join_system_authenticated_once() {
        let user = User {
            name: "alice".into(),
            uid: String::new(),
            groups: vec!["dev".into()],
            extra: BTreeMap::new(),
        };
        let user = user.with_authenticated_group().with_authenticated_group();
        assert_eq!(user.groups, ["dev", AUTHENTICATED]);
        assert!(!user.is_anonymous() && User::anonymous().is_anonymous());
    }
}
