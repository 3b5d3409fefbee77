//! The serving certificates: the default one (files, `--cert-dir` or made in
//! memory, as upstream's `MaybeDefaultWithSelfSignedCerts`) and the SNI
//! ones, chosen per connection by name and reloaded when their files change.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use super::reload::{FileBacked, Reloader, Source};
use super::{CertSource, Error, TlsOptions};

/// The flags a server's certificate comes from, and upstream's `PairName`:
/// the file names in its certificate directory.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CertFlags {
    cert_file: &'static str,
    key_file: &'static str,
    cert_dir: &'static str,
    pair_name: &'static str,
    /// The flag of the CA that client certificates must lead to.
    pub(super) client_ca: &'static str,
}

/// `--secure-port`'s certificate flags.
pub(crate) const SECURE_SERVING: CertFlags = CertFlags {
    cert_file: "--tls-cert-file",
    key_file: "--tls-private-key-file",
    cert_dir: "--cert-dir",
    pair_name: "cloud-controller-manager",
    client_ca: "--client-ca-file",
};

/// `--webhook-secure-port`'s certificate flags.
pub(crate) const WEBHOOK_SERVING: CertFlags = CertFlags {
    cert_file: "--webhook-tls-cert-file",
    key_file: "--webhook-tls-private-key-file",
    cert_dir: "--webhook-cert-dir",
    pair_name: "cloud-controller-manager-webhook",
    client_ca: "--webhook-client-ca-file",
};

/// Where a certificate comes from: fixed, or files reloaded on change.
#[derive(Debug)]
enum Served {
    Fixed(Arc<CertifiedKey>),
    Files(Arc<FileBacked<Arc<CertifiedKey>, 2>>),
}

impl Served {
    fn current(&self) -> Arc<CertifiedKey> {
        match self {
            Self::Fixed(key) => key.clone(),
            Self::Files(files) => (*files.current()).clone(),
        }
    }
}

/// Picks the certificate for each TLS handshake.
#[derive(Debug)]
pub(super) struct Resolver {
    default: Served,
    sni: Vec<SniEntry>,
}

/// One `--tls-sni-cert-key` with its names (explicit, else the
/// certificate's own at load time).
#[derive(Debug)]
struct SniEntry {
    served: Served,
    names: Vec<String>,
    explicit: bool,
}

impl Resolver {
    /// Loads the default and SNI certificates, registering files for reload.
    ///
    /// # Errors
    /// A file that cannot be read or holds no matching certificate and key;
    /// a self-signed certificate that cannot be made or written.
    pub(crate) fn load(
        options: &TlsOptions,
        flags: CertFlags,
        bind: IpAddr,
        reloader: &mut Reloader,
    ) -> Result<Self, Error> {
        let default = match &options.cert {
            CertSource::Files { cert, key } => files(
                Source::new(flags.cert_file, cert),
                Source::new(flags.key_file, key),
                reloader,
            )?,
            CertSource::Dir(dir) => {
                let cert = dir.join(format!("{}.crt", flags.pair_name));
                let key = dir.join(format!("{}.key", flags.pair_name));
                write_self_signed_unless_present(&cert, &key, bind)?;
                files(
                    Source::new(flags.cert_dir, cert),
                    Source::new(flags.cert_dir, key),
                    reloader,
                )?
            }
            CertSource::Generated => {
                let (cert, key) = self_signed(bind)?;
                let generated = Source::new(flags.cert_dir, "(in memory)");
                let key = certified_key(&generated, &generated, cert.as_bytes(), key.as_bytes())?;
                tracing::debug!("a self-signed certificate made in memory");
                Served::Fixed(key)
            }
        };
        let mut sni = Vec::new();
        for pair in &options.sni {
            let served = files(
                Source::new("--tls-sni-cert-key", &pair.cert),
                Source::new("--tls-sni-cert-key", &pair.key),
                reloader,
            )?;
            let explicit = !pair.names.is_empty();
            let names = if explicit {
                pair.names.iter().map(|n| n.to_ascii_lowercase()).collect()
            } else {
                certificate_names(&served.current())
            };
            sni.push(SniEntry {
                served,
                names,
                explicit,
            });
        }
        Ok(Self { default, sni })
    }

    /// Go's name lookup: explicit names before names read from certificates,
    /// earlier flags before later ones, an exact name before a `*.` wildcard
    /// one label deep; else the default certificate.
    fn for_name(&self, server_name: Option<&str>) -> Arc<CertifiedKey> {
        let Some(name) = server_name.map(str::to_ascii_lowercase) else {
            return self.default.current();
        };
        let mut table: HashMap<&str, &SniEntry> = HashMap::new();
        for explicit in [false, true] {
            for entry in self.sni.iter().rev().filter(|e| e.explicit == explicit) {
                for n in &entry.names {
                    table.insert(n, entry);
                }
            }
        }
        let wildcard = name.split_once('.').map(|(_, rest)| format!("*.{rest}"));
        table
            .get(name.as_str())
            .or_else(|| wildcard.as_deref().and_then(|w| table.get(w)))
            .map_or_else(|| self.default.current(), |entry| entry.served.current())
    }
}

impl ResolvesServerCert for Resolver {
    fn resolve(&self, client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.for_name(client_hello.server_name()))
    }
}

fn files(cert: Source, key: Source, reloader: &mut Reloader) -> Result<Served, Error> {
    let backed = Arc::new(FileBacked::load(
        [cert, key],
        |[cert, key], [cert_pem, key_pem]| certified_key(cert, key, cert_pem, key_pem),
    )?);
    reloader.watch(backed.clone());
    Ok(Served::Files(backed))
}

/// A PEM certificate chain and private key held in memory (`what` says
/// where they came from) as a key rustls serves.
///
/// # Errors
/// No certificate, no key, or a key that does not match.
pub(crate) fn certified_key_from_pem(
    what: &'static str,
    cert_pem: &[u8],
    key_pem: &[u8],
) -> Result<Arc<CertifiedKey>, Error> {
    let source = Source::new(what, "(in memory)");
    certified_key(&source, &source, cert_pem, key_pem)
}

/// The PEM certificate chain and private key as a key rustls serves.
/// Each problem names the file it is in; messages never quote the files.
fn certified_key(
    cert: &Source,
    key: &Source,
    cert_pem: &[u8],
    key_pem: &[u8],
) -> Result<Arc<CertifiedKey>, Error> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| cert.invalid("not a PEM certificate file"))?;
    if chain.is_empty() {
        return Err(cert.invalid("no certificate in it"));
    }
    let private_key = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|_| key.invalid("no PEM private key in it"))?;
    let provider: &CryptoProvider = &rustls::crypto::aws_lc_rs::default_provider();
    let certified = CertifiedKey::from_der(chain, private_key, provider).map_err(|err| {
        key.invalid(match err {
            rustls::Error::InconsistentKeys(_) => "the private key does not match the certificate",
            _ => "not a supported RSA, ECDSA or Ed25519 private key",
        })
    })?;
    Ok(Arc::new(certified))
}

/// Names to serve an SNI certificate for when the flag gives none: its
/// common name when that is a DNS name, and its DNS subject alternative names.
fn certificate_names(key: &CertifiedKey) -> Vec<String> {
    let Some(der) = key.cert.first() else {
        return Vec::new();
    };
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(der) else {
        return Vec::new();
    };
    let mut names = Vec::new();
    if let Some(cn) = cert
        .subject()
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .map(str::to_ascii_lowercase)
        && cn.parse::<IpAddr>().is_err()
        && (cn == "*" || is_dns_name(cn.strip_prefix("*.").unwrap_or(&cn)))
    {
        names.push(cn);
    }
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for name in &san.value.general_names {
            if let x509_parser::extensions::GeneralName::DNSName(dns) = name {
                names.push(dns.to_ascii_lowercase());
            }
        }
    }
    names
}

fn is_dns_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// How long a self-signed certificate is valid, as upstream's.
const SELF_SIGNED_VALIDITY: Duration = Duration::from_secs(365 * 24 * 3600);

/// A self-signed certificate (PEM) and its key (PEM) for this host:
/// its name (when a DNS name), `localhost`, the bind address unless
/// unspecified, and the loopback addresses; valid from an hour ago for a
/// year, as upstream's.
pub(super) fn self_signed(bind: IpAddr) -> Result<(String, String), Error> {
    let mut names = vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
    ];
    if let Some(host) = host_name()
        .map(|h| h.to_ascii_lowercase())
        .filter(|h| h != "localhost" && is_dns_name(h))
    {
        names.push(host);
    }
    if !bind.is_unspecified() && !bind.is_loopback() {
        names.push(bind.to_string());
    }
    let mut params =
        rcgen::CertificateParams::new(names).map_err(|e| Error::SelfSigned(e.to_string()))?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let epoch = rcgen::date_time_ymd(1970, 1, 1);
    params.not_before = epoch + Duration::from_secs(now.saturating_sub(3600));
    params.not_after = epoch + Duration::from_secs(now) + SELF_SIGNED_VALIDITY;
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, format!("localhost@{now}"));
    let key = rcgen::KeyPair::generate().map_err(|e| Error::SelfSigned(e.to_string()))?;
    let cert = params
        .self_signed(&key)
        .map_err(|e| Error::SelfSigned(e.to_string()))?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// Upstream's `--cert-dir` rule: both files readable, serve them; neither
/// present, write a self-signed pair (the key readable by the owner only);
/// one without the other is an error.
fn write_self_signed_unless_present(cert: &Path, key: &Path, bind: IpAddr) -> Result<(), Error> {
    match (cert.exists(), key.exists()) {
        (true, true) => return Ok(()),
        (true, false) => {
            return Err(Error::Invalid {
                flag: "--cert-dir",
                path: key.to_owned(),
                reason: "missing; the certificate and key must be supplied as a pair".into(),
            });
        }
        (false, true) => {
            return Err(Error::Invalid {
                flag: "--cert-dir",
                path: cert.to_owned(),
                reason: "missing; the certificate and key must be supplied as a pair".into(),
            });
        }
        (false, false) => {}
    }
    let (cert_pem, key_pem) = self_signed(bind)?;
    let write = |path: &Path, contents: &str, mode: u32| -> Result<(), Error> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let io = |source| Error::Read {
            flag: "--cert-dir",
            path: path.to_owned(),
            source,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(path)
            .and_then(|mut f| f.write_all(contents.as_bytes()))
            .map_err(io)
    };
    write(key, &key_pem, 0o600)?;
    write(cert, &cert_pem, 0o644)?;
    tracing::info!(cert = %cert.display(), key = %key.display(), "generated a self-signed certificate");
    Ok(())
}

fn host_name() -> Option<String> {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
                .filter(|h| !h.is_empty())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolver_with(sni: Vec<(&str, Vec<&str>, bool)>) -> Resolver {
        let key = |_: &str| {
            let (cert, key) = self_signed(IpAddr::from([127, 0, 0, 1])).unwrap();
            let source = Source::new("--t", "t");
            certified_key(&source, &source, cert.as_bytes(), key.as_bytes()).unwrap()
        };
        Resolver {
            default: Served::Fixed(key("default")),
            sni: sni
                .into_iter()
                .map(|(n, names, explicit)| SniEntry {
                    served: Served::Fixed(key(n)),
                    names: names.into_iter().map(str::to_owned).collect(),
                    explicit,
                })
                .collect(),
        }
    }

    #[test]
    fn sni_picks_exact_then_wildcard_then_the_default() {
        let r = resolver_with(vec![
            ("a", vec!["foo.example.com"], true),
            ("b", vec!["*.example.com"], true),
        ]);
        let same = |a: &Arc<CertifiedKey>, b: &Served| Arc::ptr_eq(a, &b.current());
        assert!(same(&r.for_name(Some("FOO.example.com")), &r.sni[0].served));
        assert!(same(&r.for_name(Some("bar.example.com")), &r.sni[1].served));
        assert!(same(&r.for_name(Some("a.b.example.com")), &r.default));
        assert!(same(&r.for_name(None), &r.default));
    }

    #[test]
    fn explicit_names_trump_names_read_from_certificates() {
        let r = resolver_with(vec![
            ("a", vec!["x.example.com"], false),
            ("b", vec!["x.example.com"], true),
        ]);
        assert!(Arc::ptr_eq(
            &r.for_name(Some("x.example.com")),
            &r.sni[1].served.current()
        ));
    }

    #[test]
    fn a_self_signed_certificate_names_localhost_and_loopback() {
        let (cert, key) = self_signed(IpAddr::from([10, 1, 2, 3])).unwrap();
        let source = Source::new("--t", "t");
        let certified = certified_key(&source, &source, cert.as_bytes(), key.as_bytes()).unwrap();
        let names = certificate_names(&certified);
        assert!(names.contains(&"localhost".to_owned()), "{names:?}");
        let (_, parsed) = x509_parser::parse_x509_certificate(&certified.cert[0]).unwrap();
        let san = parsed.subject_alternative_name().unwrap().unwrap();
        let ips: Vec<_> = san
            .value
            .general_names
            .iter()
            .filter_map(|n| match n {
                x509_parser::extensions::GeneralName::IPAddress(ip) => Some(ip.to_vec()),
                _ => None,
            })
            .collect();
        assert!(
            ips.contains(&vec![127, 0, 0, 1]) && ips.contains(&vec![10, 1, 2, 3]),
            "{ips:?}"
        );
        let validity = parsed.validity();
        let days = (validity.not_after.timestamp() - validity.not_before.timestamp()) / 86_400;
        assert_eq!(days, 365, "a year and an hour, in whole days");
    }

    #[test]
    fn a_mismatched_key_is_named_without_quoting_it() {
        let (cert, _) = self_signed(IpAddr::from([127, 0, 0, 1])).unwrap();
        let (_, other_key) = self_signed(IpAddr::from([127, 0, 0, 1])).unwrap();
        let err = certified_key(
            &Source::new("--tls-cert-file", "/c.crt"),
            &Source::new("--tls-private-key-file", "/c.key"),
            cert.as_bytes(),
            other_key.as_bytes(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.starts_with("--tls-private-key-file /c.key: the private key does not match"),
            "{err}"
        );
        let key_body = other_key.lines().nth(1).unwrap();
        assert!(!err.contains(key_body), "{err}");
    }
}
