//! The ServiceMonitor verifies the CCM before it sends Prometheus's token:
//! by default it names the CA of the Secret the metrics port's certificate
//! comes from, and the name that certificate holds; `insecureSkipVerify`
//! only when `serviceMonitor.insecureSkipVerify` asks. The chart's own CA
//! is checked as Prometheus would: its certificate, verified against its
//! `ca.crt` for the ServiceMonitor's `serverName`, with a key rustls loads.

use std::sync::Arc;

use anyhow::{Context, bail, ensure};
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier;
use rustls::crypto::aws_lc_rs;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use serde_json::Value;

use super::{render, strings};

/// Where the certificate files are mounted, by the chart's `--tls-cert-file`.
const CERT_DIR: &str = "/etc/kubernetes/pki/cloud-controller-manager";

/// Renders the ServiceMonitor with the default values, cert-manager, a
/// Secret of the user's and `insecureSkipVerify`, and checks each. Returns
/// how many renders were checked.
pub(crate) fn check(version: &str) -> anyhow::Result<usize> {
    let on = ["provider=fake", "serviceMonitor.enabled=true"];
    let with = |extra: &[&'static str]| on.iter().copied().chain(extra.iter().copied()).collect();
    let renders: [(&str, Vec<&str>, Mode); 4] = [
        ("the default values", with(&[]), Mode::ChartCa),
        (
            "webhook.certManager.enabled",
            with(&["webhook.certManager.enabled=true"]),
            Mode::CertManager,
        ),
        (
            "tls.secretName",
            with(&["tls.secretName=my-serving-cert"]),
            Mode::Users("my-serving-cert"),
        ),
        (
            "serviceMonitor.insecureSkipVerify",
            with(&["serviceMonitor.insecureSkipVerify=true"]),
            Mode::Insecure,
        ),
    ];
    let mut chart_cas = Vec::new();
    for (what, sets, mode) in &renders {
        let docs = rendered(sets, version).with_context(|| format!("with {what}"))?;
        verifies(&docs, *mode).with_context(|| format!("the ServiceMonitor with {what}"))?;
        if let Mode::ChartCa = mode {
            chart_cas.push(docs);
        }
    }
    // The verification is no formality: another name, or another render's
    // CA (each `helm template` makes a new one), is refused.
    chart_cas.push(rendered(&with(&[]), version)?);
    let data = |docs: &[Value]| -> anyhow::Result<Value> {
        let secret = docs
            .iter()
            .find(|d| d["kind"] == "Secret" && d["type"] == "kubernetes.io/tls")
            .context("no kubernetes.io/tls Secret")?;
        Ok(secret["stringData"].clone())
    };
    let (first, second) = (data(&chart_cas[0])?, data(&chart_cas[1])?);
    ensure!(
        chart_ca_verifies(&first, "elsewhere.kube-system.svc").is_err(),
        "the chart's certificate verified for a name it does not hold"
    );
    let mut crossed = second;
    crossed["tls.crt"] = first["tls.crt"].clone();
    crossed["tls.key"] = first["tls.key"].clone();
    let monitor = render::find(&chart_cas[0], "ServiceMonitor")?;
    let server_name = monitor["spec"]["endpoints"][0]["tlsConfig"]["serverName"]
        .as_str()
        .context("no serverName")?;
    ensure!(
        chart_ca_verifies(&crossed, server_name).is_err(),
        "the chart's certificate verified against another render's CA"
    );
    Ok(renders.len())
}

/// The documents `helm template --set sets` renders.
fn rendered(sets: &[&str], version: &str) -> anyhow::Result<Vec<Value>> {
    let yaml = render::template(None, sets, version)?
        .map_err(|message| anyhow::anyhow!("helm template failed:\n{message}"))?;
    render::documents(&yaml)
}

/// Where the ServiceMonitor's CA should come from.
#[derive(Debug, Clone, Copy)]
enum Mode {
    /// The Secret the chart renders, with a CA of its own.
    ChartCa,
    /// cert-manager's Certificate for the metrics Service.
    CertManager,
    /// `tls.secretName`.
    Users(&'static str),
    /// `serviceMonitor.insecureSkipVerify`.
    Insecure,
}

fn verifies(docs: &[Value], mode: Mode) -> anyhow::Result<()> {
    let monitor = render::find(docs, "ServiceMonitor")?;
    let tls = &monitor["spec"]["endpoints"][0]["tlsConfig"];
    let skips = tls["insecureSkipVerify"].as_bool().unwrap_or(false);
    if let Mode::Insecure = mode {
        ensure!(
            skips && tls.get("ca").is_none(),
            "asked to skip verification, it has {tls}"
        );
        return Ok(());
    }
    ensure!(!skips, "it skips verifying the CCM's certificate: {tls}");
    ensure!(
        tls["ca"]["secret"]["key"] == "ca.crt",
        "it names no CA: {tls}"
    );
    let secret = tls["ca"]["secret"]["name"]
        .as_str()
        .context("its CA names no Secret")?;
    let server_name = tls["serverName"]
        .as_str()
        .context("it names no serverName")?;
    ensure!(
        mounted(docs)? == secret,
        "the CCM serves the certificate of another Secret than {secret}"
    );
    match mode {
        Mode::ChartCa => {
            let rendered = docs
                .iter()
                .find(|d| d["kind"] == "Secret" && d["metadata"]["name"] == secret)
                .with_context(|| format!("the chart rendered no Secret {secret}"))?;
            chart_ca_verifies(&rendered["stringData"], server_name)
        }
        Mode::CertManager => {
            let issued = docs
                .iter()
                .find(|d| d["kind"] == "Certificate" && d["spec"]["secretName"] == secret)
                .with_context(|| format!("no Certificate issues {secret}"))?;
            ensure!(
                strings(&issued["spec"]["dnsNames"]).contains(&server_name.to_owned()),
                "the Certificate for {secret} does not name {server_name}"
            );
            Ok(())
        }
        Mode::Users(name) => {
            ensure!(secret == name, "it names {secret}, not tls.secretName");
            Ok(())
        }
        Mode::Insecure => unreachable!("returned above"),
    }
}

/// The Secret whose tls.crt and tls.key the CCM serves on its HTTPS port.
fn mounted(docs: &[Value]) -> anyhow::Result<String> {
    let workload = render::find(docs, "Deployment")?;
    let pod = &workload["spec"]["template"]["spec"];
    let args = strings(&pod["containers"][0]["args"]);
    ensure!(
        args.contains(&format!("--tls-cert-file={CERT_DIR}/tls.crt"))
            && args.contains(&format!("--tls-private-key-file={CERT_DIR}/tls.key")),
        "the CCM is not given the mounted certificate: {args:?}"
    );
    let mount = pod["containers"][0]["volumeMounts"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["mountPath"] == CERT_DIR)
        .context("nothing is mounted at the certificate's path")?;
    pod["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["name"] == mount["name"])
        .and_then(|v| v["secret"]["secretName"].as_str())
        .map(str::to_owned)
        .context("the certificate's volume is no Secret")
}

/// `data`'s tls.crt verifies against its ca.crt for `server_name`, as
/// Prometheus checks it, and rustls serves it with tls.key as the CCM does.
fn chart_ca_verifies(data: &Value, server_name: &str) -> anyhow::Result<()> {
    let pem = |key: &str| {
        data[key]
            .as_str()
            .with_context(|| format!("the Secret has no {key}"))
    };
    let ca = CertificateDer::from_pem_slice(pem("ca.crt")?.as_bytes()).context("ca.crt")?;
    let leaf = CertificateDer::from_pem_slice(pem("tls.crt")?.as_bytes()).context("tls.crt")?;
    let key = PrivateKeyDer::from_pem_slice(pem("tls.key")?.as_bytes()).context("tls.key")?;
    let provider = Arc::new(aws_lc_rs::default_provider());
    rustls::sign::CertifiedKey::from_der(vec![leaf.clone()], key, &provider)
        .context("rustls cannot serve tls.key with tls.crt")?;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca).context("ca.crt is no CA")?;
    let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .context("a verifier for ca.crt")?;
    let name = ServerName::try_from(server_name.to_owned())?;
    if let Err(err) = verifier.verify_server_cert(&leaf, &[], &name, &[], UnixTime::now()) {
        bail!("tls.crt does not verify against ca.crt for {server_name}: {err}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A render's Deployment serving `secret` and its ServiceMonitor with
    /// `tls_config`.
    fn render(secret: &str, tls_config: &Value) -> Vec<Value> {
        vec![
            json!({"kind": "Deployment", "spec": {"template": {"spec": {
                "containers": [{
                    "args": [
                        format!("--tls-cert-file={CERT_DIR}/tls.crt"),
                        format!("--tls-private-key-file={CERT_DIR}/tls.key"),
                    ],
                    "volumeMounts": [{"name": "serving-cert", "mountPath": CERT_DIR}],
                }],
                "volumes": [{"name": "serving-cert", "secret": {"secretName": secret}}],
            }}}}),
            json!({"kind": "ServiceMonitor", "spec": {"endpoints": [{"tlsConfig": tls_config}]}}),
        ]
    }

    #[test]
    fn skipping_verification_fails_the_check_unless_asked_for() {
        let skips = render("mine", &json!({"insecureSkipVerify": true}));
        let err = verifies(&skips, Mode::Users("mine")).unwrap_err();
        assert!(err.to_string().contains("skips verifying"), "{err}");
        verifies(&skips, Mode::Insecure).unwrap();
        let verifies_mine = json!({
            "ca": {"secret": {"name": "mine", "key": "ca.crt"}},
            "serverName": "ccm-metrics.kube-system.svc",
        });
        verifies(&render("mine", &verifies_mine), Mode::Users("mine")).unwrap();
        assert!(verifies(&render("mine", &verifies_mine), Mode::Insecure).is_err());
    }

    #[test]
    fn a_ca_from_another_secret_than_the_served_one_fails_the_check() {
        let other = json!({
            "ca": {"secret": {"name": "other", "key": "ca.crt"}},
            "serverName": "ccm-metrics.kube-system.svc",
        });
        let err = verifies(&render("mine", &other), Mode::Users("other")).unwrap_err();
        assert!(err.to_string().contains("another Secret"), "{err}");
        let no_ca = json!({"serverName": "ccm-metrics.kube-system.svc"});
        assert!(verifies(&render("mine", &no_ca), Mode::Users("mine")).is_err());
    }
}
