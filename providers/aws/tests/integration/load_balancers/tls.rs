//! TLS against moto: the ports `ssl-ports` names get TLS listeners with the
//! certificate and policy, and with `backend-protocol: ssl` their target
//! groups speak TLS to the targets; other ports stay TCP.

use ccm_provider_aws::annotations as key;
use ccm_provider_aws::test_util::{CLUSTER, elbv2};

use super::fixture::{Fixture, service};

#[tokio::test]
async fn tls_listeners_with_backend_protocol_ssl_send_tls_to_their_targets() {
    let f = Fixture::new(1).await;
    let cert = f.moto.certificate("shop.example.com").await;
    let svc = service(
        &[
            (key::SSL_CERT, &cert),
            (key::SSL_PORTS, "443"),
            (key::BACKEND_PROTOCOL, "ssl"),
        ],
        &[(80, 30080), (443, 30443)],
    );
    f.lb()
        .ensure_load_balancer(CLUSTER, &svc, &f.nodes(&[0]))
        .await
        .expect("ensured");

    let mut by_port: Vec<(i32, String)> = f
        .target_groups()
        .await
        .iter()
        .map(|tg| {
            let protocol = tg
                .protocol()
                .map(|p| p.as_str().to_owned())
                .unwrap_or_default();
            (tg.port().unwrap_or_default(), protocol)
        })
        .collect();
    by_port.sort();
    assert_eq!(
        by_port,
        [(30080, "TCP".to_owned()), (30443, "TLS".to_owned())],
        "target groups by node port"
    );

    let arn = f.load_balancers().await[0]
        .load_balancer_arn()
        .expect("an ARN")
        .to_owned();
    let listeners = elbv2(&f.moto)
        .describe_listeners()
        .load_balancer_arn(arn)
        .send()
        .await
        .expect("described");
    let tls = listeners
        .listeners()
        .iter()
        .find(|l| l.port() == Some(443))
        .expect("a listener on 443");
    assert_eq!(tls.protocol().map(|p| p.as_str()), Some("TLS"));
    assert_eq!(
        tls.certificates()
            .iter()
            .filter_map(|c| c.certificate_arn())
            .collect::<Vec<_>>(),
        [cert.as_str()]
    );
}
