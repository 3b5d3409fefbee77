//! The CCM's arguments in the scenario: the chart's, with the endpoints
//! moved to loopback.

/// Whether `args` enable an admission webhook (upstream's `--webhooks`).
pub(super) fn serves_webhook(args: &[String]) -> bool {
    args.iter()
        .filter_map(|a| a.strip_prefix("--webhooks="))
        .any(|names| {
            names
                .split(',')
                .any(|n| !n.trim().is_empty() && !n.starts_with('-'))
        })
}

/// The CCM's arguments as the chart renders them, less those that say where
/// it listens, where its cloud config is and where its mounted serving
/// certificate is: the scenario supplies those (the health and metrics port
/// through `Processes::start_ccm_with`, which serves a self-signed
/// certificate). A CCM that serves a webhook listens for it on loopback at
/// `webhook_port`.
pub(super) fn local_args(rendered: &[String], webhook_port: u16) -> Vec<String> {
    let mut args: Vec<String> = rendered
        .iter()
        .filter(|a| {
            ![
                "--cloud-config=",
                "--bind-address=",
                "--secure-port=",
                "--webhook-bind-address=",
                "--webhook-secure-port=",
                "--tls-cert-file=",
                "--tls-private-key-file=",
            ]
            .iter()
            .any(|p| a.starts_with(p))
        })
        .cloned()
        .collect();
    if serves_webhook(&args) {
        args.push("--webhook-bind-address=127.0.0.1".to_owned());
        args.push(format!("--webhook-secure-port={webhook_port}"));
    }
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn endpoint_and_config_flags_are_replaced_and_the_rest_kept() {
        let rendered = strings(&[
            "--cloud-provider=fake",
            "--cloud-config=/etc/x",
            "--leader-elect=true",
            "--bind-address=0.0.0.0",
            "--secure-port=10258",
            "--tls-cert-file=/etc/kubernetes/pki/cloud-controller-manager/tls.crt",
            "--tls-private-key-file=/etc/kubernetes/pki/cloud-controller-manager/tls.key",
        ]);
        assert_eq!(
            local_args(&rendered, 40000),
            ["--cloud-provider=fake", "--leader-elect=true"]
        );
    }

    #[test]
    fn a_served_webhook_moves_to_loopback_on_the_given_port() {
        let rendered = strings(&[
            "--cloud-provider=fake",
            "--secure-port=10258",
            "--webhooks=service-annotations",
            "--webhook-bind-address=0.0.0.0",
            "--webhook-secure-port=10260",
            "--webhook-cert-secret=kube-system/ccm-webhook-cert",
        ]);
        assert_eq!(
            local_args(&rendered, 40000),
            [
                "--cloud-provider=fake",
                "--webhooks=service-annotations",
                "--webhook-cert-secret=kube-system/ccm-webhook-cert",
                "--webhook-bind-address=127.0.0.1",
                "--webhook-secure-port=40000",
            ]
        );
    }

    #[test]
    fn without_a_webhook_its_endpoint_flags_are_dropped_and_none_added() {
        for webhooks in [
            None,
            Some("--webhooks="),
            Some("--webhooks=-service-annotations"),
        ] {
            let mut rendered = strings(&["--cloud-provider=fake", "--webhook-secure-port=0"]);
            rendered.extend(webhooks.map(str::to_owned));
            let local = local_args(&rendered, 40000);
            assert!(
                !local.iter().any(|a| a.starts_with("--webhook-")),
                "{webhooks:?}: {local:?}"
            );
        }
    }
}
