//! Reading a Service into a classic ELB spec: upstream's defaults, each
//! annotation, and the errors a bad one gives.

use ccm_cloud_provider::k8s_openapi::api::core::v1::ServicePort;
use ccm_cloud_provider::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;

const UID: &str = "3f2a9c1e-5b7d-4e8f-9a0b-1c2d3e4f5a6b";
const CERT: &str = "arn:aws:acm:us-east-1:123456789012:certificate/0123abcd";

fn service(annotations: &[(&str, &str)]) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("shop".into()),
            uid: Some(UID.into()),
            annotations: Some(
                annotations
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            ports: Some(vec![port("http", 80, 30080), port("https", 443, 30443)]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

fn port(name: &str, port: i32, node_port: i32) -> ServicePort {
    ServicePort {
        name: Some(name.into()),
        port,
        node_port: Some(node_port),
        protocol: Some("TCP".into()),
        ..ServicePort::default()
    }
}

fn spec_of(service: &Service) -> ClassicSpec {
    ClassicSpec::under(service, None).expect("valid Service")
}

fn assert_invalid(service: &Service, field: &str, words: &str) {
    match ClassicSpec::under(service, None) {
        Err(CloudError::InvalidInput { field: f, message }) => {
            assert_eq!(f, field, "{message}");
            assert!(message.contains(words), "`{message}` lacks `{words}`");
        }
        other => panic!("expected InvalidInput for {field}, got {other:?}"),
    }
}

fn protocols(spec: &ClassicSpec) -> Vec<(i32, &'static str, &'static str, bool)> {
    spec.listeners
        .iter()
        .map(|l| {
            (
                l.port,
                l.protocol,
                l.instance_protocol,
                l.certificate.is_some(),
            )
        })
        .collect()
}

#[test]
fn a_plain_service_gets_upstreams_classic_defaults() {
    let spec = spec_of(&service(&[]));
    assert_eq!(
        spec.svc.load_balancer_name,
        "a3f2a9c1e5b7d4e8f9a0b1c2d3e4f5a6"
    );
    assert!(!spec.internal && !spec.proxy_protocol);
    assert_eq!(
        protocols(&spec),
        vec![(80, "TCP", "TCP", false), (443, "TCP", "TCP", false)]
    );
    assert_eq!(
        spec.health_check,
        ClassicHealthCheck {
            target: "TCP:30080".into(),
            interval: 10,
            timeout: 5,
            healthy_threshold: 2,
            unhealthy_threshold: 6,
        }
    );
    assert_eq!(
        spec.attributes,
        ClassicAttributes {
            access_log_enabled: false,
            access_log_interval: None,
            access_log_bucket: None,
            access_log_prefix: None,
            draining_enabled: false,
            draining_timeout: None,
            idle_timeout: 60,
            cross_zone: false,
        }
    );
    assert_eq!(spec.source_ranges, vec!["0.0.0.0/0".parse().unwrap()]);
}

#[test]
fn a_certificate_makes_tls_listeners_as_build_listener_does() {
    let all = spec_of(&service(&[(key::SSL_CERT, CERT)]));
    assert_eq!(
        protocols(&all),
        vec![(80, "SSL", "TCP", true), (443, "SSL", "TCP", true)]
    );
    let named = spec_of(&service(&[
        (key::SSL_CERT, CERT),
        (key::SSL_PORTS, "https"),
    ]));
    assert_eq!(
        protocols(&named),
        vec![(80, "TCP", "TCP", false), (443, "SSL", "TCP", true)]
    );
    let http = spec_of(&service(&[
        (key::SSL_CERT, CERT),
        (key::SSL_PORTS, "443"),
        (key::BACKEND_PROTOCOL, "http"),
    ]));
    assert_eq!(
        protocols(&http),
        vec![(80, "HTTP", "HTTP", false), (443, "HTTPS", "HTTP", true)]
    );
    let https = spec_of(&service(&[
        (key::SSL_CERT, CERT),
        (key::BACKEND_PROTOCOL, "https"),
    ]));
    assert_eq!(https.listeners[0].protocol, "HTTPS");
    assert_eq!(https.listeners[0].instance_protocol, "HTTPS");
    // TLS to the backend: upstream's SSL health check.
    assert_eq!(https.health_check.target, "SSL:30080");
    assert_invalid(
        &service(&[(key::BACKEND_PROTOCOL, "grpc")]),
        key::BACKEND_PROTOCOL,
        "expected tcp, ssl, http or https",
    );
    assert_invalid(
        &service(&[(key::SSL_CERT, "my-cert")]),
        key::SSL_CERT,
        "certificate ARN",
    );
}

#[test]
fn health_check_follows_traffic_policy_probe_and_annotations() {
    let mut local = service(&[]);
    if let Some(spec) = local.spec.as_mut() {
        spec.external_traffic_policy = Some("Local".into());
        spec.health_check_node_port = Some(32000);
    }
    assert_eq!(spec_of(&local).health_check.target, "HTTP:32000/healthz");
    let probe = SharedHealthProbe {
        port: 10256,
        path: "/healthz".into(),
    };
    let shared = ClassicSpec::under(&service(&[]), Some(&probe)).unwrap();
    assert_eq!(shared.health_check.target, "HTTP:10256/healthz");
    let asked = spec_of(&service(&[
        (key::HEALTHCHECK_PROTOCOL, "http"),
        (key::HEALTHCHECK_PORT, "8080"),
        (key::HEALTHCHECK_PATH, "/ready"),
        (key::HEALTHCHECK_INTERVAL, "30"),
        (key::HEALTHCHECK_TIMEOUT, "7"),
        (key::HEALTHCHECK_HEALTHY_THRESHOLD, "3"),
        (key::HEALTHCHECK_UNHEALTHY_THRESHOLD, "4"),
    ]));
    assert_eq!(
        asked.health_check,
        ClassicHealthCheck {
            target: "HTTP:8080/ready".into(),
            interval: 30,
            timeout: 7,
            healthy_threshold: 3,
            unhealthy_threshold: 4,
        }
    );
    assert_invalid(
        &service(&[(key::HEALTHCHECK_TIMEOUT, "10")]),
        key::HEALTHCHECK_TIMEOUT,
        "below the interval",
    );
    assert_invalid(
        &service(&[(key::HEALTHCHECK_PROTOCOL, "UDP")]),
        key::HEALTHCHECK_PROTOCOL,
        "expected TCP, SSL, HTTP or HTTPS",
    );
}

#[test]
fn attributes_come_from_their_annotations() {
    let spec = spec_of(&service(&[
        (key::ACCESS_LOG_ENABLED, "true"),
        (key::ACCESS_LOG_EMIT_INTERVAL, "5"),
        (key::ACCESS_LOG_S3_BUCKET_NAME, "logs"),
        (key::ACCESS_LOG_S3_BUCKET_PREFIX, "elb/"),
        (key::CONNECTION_DRAINING_ENABLED, "true"),
        (key::CONNECTION_DRAINING_TIMEOUT, "120"),
        (key::CONNECTION_IDLE_TIMEOUT, "300"),
        (key::CROSS_ZONE_LOAD_BALANCING_ENABLED, "true"),
    ]));
    assert_eq!(
        spec.attributes,
        ClassicAttributes {
            access_log_enabled: true,
            access_log_interval: Some(5),
            access_log_bucket: Some("logs".into()),
            access_log_prefix: Some("elb/".into()),
            draining_enabled: true,
            draining_timeout: Some(120),
            idle_timeout: 300,
            cross_zone: true,
        }
    );
    assert_invalid(
        &service(&[(key::ACCESS_LOG_EMIT_INTERVAL, "10")]),
        key::ACCESS_LOG_EMIT_INTERVAL,
        "expected 5 or 60",
    );
    assert_invalid(
        &service(&[(key::ACCESS_LOG_ENABLED, "true")]),
        key::ACCESS_LOG_ENABLED,
        "need a bucket",
    );
    assert_invalid(
        &service(&[(key::CONNECTION_IDLE_TIMEOUT, "0")]),
        key::CONNECTION_IDLE_TIMEOUT,
        "from 1 to 4000",
    );
}

#[test]
fn what_a_classic_elb_cannot_do_is_refused() {
    assert_invalid(
        &service(&[(key::EIP_ALLOCATIONS, "eipalloc-1")]),
        key::EIP_ALLOCATIONS,
        "Network Load Balancers only",
    );
    assert_invalid(
        &service(&[(
            key::TARGET_GROUP_ATTRIBUTES,
            "preserve_client_ip.enabled=true",
        )]),
        key::TARGET_GROUP_ATTRIBUTES,
        "Network Load Balancers only",
    );
    let mut udp = service(&[]);
    if let Some(spec) = udp.spec.as_mut() {
        spec.ports = Some(vec![ServicePort {
            protocol: Some("UDP".into()),
            ..port("dns", 53, 30053)
        }]);
    }
    assert_invalid(&udp, "spec.ports", "not supported by classic ELBs");
    assert_invalid(
        &service(&[(key::PROXY_PROTOCOL, "true")]),
        key::PROXY_PROTOCOL,
        "only supported value is `*`",
    );
    assert!(spec_of(&service(&[(key::PROXY_PROTOCOL, "*")])).proxy_protocol);
    assert!(spec_of(&service(&[(key::INTERNAL, "true")])).internal);
}
