//! Reading a Service and its annotations into a load-balancer spec, and
//! the errors a bad annotation gives.

use ccm_cloud_provider::k8s_openapi::api::core::v1::ServicePort;
use ccm_cloud_provider::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;

const UID: &str = "3f2a9c1e-5b7d-4e8f-9a0b-1c2d3e4f5a6b";

fn service(annotations: &[(&str, &str)]) -> Service {
    let mut all: BTreeMap<String, String> =
        BTreeMap::from([(key::TYPE.to_owned(), "nlb".to_owned())]);
    for (k, v) in annotations {
        all.insert((*k).to_owned(), (*v).to_owned());
    }
    Service {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("shop".into()),
            uid: Some(UID.into()),
            annotations: Some(all),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            ports: Some(vec![port("http", 80, 30080, "TCP")]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

fn port(name: &str, port: i32, node_port: i32, protocol: &str) -> ServicePort {
    ServicePort {
        name: Some(name.into()),
        port,
        node_port: Some(node_port),
        protocol: Some(protocol.into()),
        ..ServicePort::default()
    }
}

fn spec_of(service: &Service) -> LoadBalancerSpec {
    LoadBalancerSpec::from_service(service).expect("valid Service")
}

/// Asserts the Service is refused for `field` with a message containing `words`.
fn assert_invalid(service: &Service, field: &str, words: &str) {
    match LoadBalancerSpec::from_service(service) {
        Err(CloudError::InvalidInput { field: f, message }) => {
            assert_eq!(f, field, "{message}");
            assert!(message.contains(words), "`{message}` lacks `{words}`");
        }
        other => panic!("expected InvalidInput for {field}, got {other:?}"),
    }
}

#[test]
fn a_plain_nlb_service_gets_upstreams_defaults() {
    let spec = spec_of(&service(&[]));
    assert_eq!(spec.svc.key, "shop/web");
    assert_eq!(
        spec.svc.load_balancer_name,
        "a3f2a9c1e5b7d4e8f9a0b1c2d3e4f5a6"
    );
    assert!(!spec.internal);
    assert_eq!(spec.ip_address_type, IpAddressType::Ipv4);
    assert_eq!(
        spec.health_check,
        HealthCheck {
            protocol: ProtocolEnum::Tcp,
            port: HealthCheckPort::TrafficPort,
            path: None,
            interval: 30,
            timeout: None,
            healthy_threshold: 3,
            unhealthy_threshold: 3,
        }
    );
    assert_eq!(spec.ports.len(), 1);
    assert_eq!(spec.ports[0].listener_protocol, ProtocolEnum::Tcp);
    assert_eq!((spec.ports[0].port, spec.ports[0].node_port), (80, 30080));
    assert!(spec.source_ranges.is_empty());
}

#[test]
fn the_type_annotation_chooses_the_kind_and_an_unknown_one_is_refused() {
    let mut svc = service(&[]);
    svc.metadata
        .annotations
        .as_mut()
        .expect("annotations")
        .remove(key::TYPE);
    assert_eq!(kind(&svc).unwrap(), Kind::Classic, "upstream's default");
    assert_eq!(kind(&service(&[])).unwrap(), Kind::Network);
    assert_eq!(kind(&service(&[(key::TYPE, "")])).unwrap(), Kind::Classic);
    assert!(matches!(
        kind(&service(&[(key::TYPE, "external")])),
        Err(CloudError::ImplementedElsewhere)
    ));
    assert_invalid(&svc, key::TYPE, "asks for a classic ELB");
    assert_invalid(
        &service(&[(key::TYPE, "alb")]),
        key::TYPE,
        "expected `nlb`, `external`, or no value",
    );
    // A misspelt `nlb` would be a classic ELB upstream: refused here.
    assert!(matches!(
        kind(&service(&[(key::TYPE, "NLB")])),
        Err(CloudError::InvalidInput { .. })
    ));
}

#[test]
fn classic_only_keys_are_refused_on_a_network_load_balancer() {
    assert_invalid(
        &service(&[(key::CONNECTION_IDLE_TIMEOUT, "120")]),
        key::CONNECTION_IDLE_TIMEOUT,
        "classic ELBs only",
    );
    assert_invalid(
        &service(&[(key::ACCESS_LOG_ENABLED, "true")]),
        key::ACCESS_LOG_ENABLED,
        "classic ELBs only",
    );
}

#[test]
fn external_load_balancers_belong_to_another_controller() {
    for kind in ["external", "nlb-ip"] {
        let svc = service(&[(key::TYPE, kind)]);
        assert!(is_external(&svc));
        assert!(matches!(
            LoadBalancerSpec::from_service(&svc),
            Err(CloudError::ImplementedElsewhere)
        ));
    }
    assert!(!is_external(&service(&[])));
}

#[test]
fn local_traffic_policy_checks_http_healthz_on_the_health_check_node_port() {
    let mut svc = service(&[]);
    let spec = svc.spec.as_mut().expect("spec");
    spec.external_traffic_policy = Some("Local".into());
    spec.health_check_node_port = Some(32000);
    let hc = spec_of(&svc).health_check;
    assert_eq!(hc.protocol, ProtocolEnum::Http);
    assert_eq!(hc.port, HealthCheckPort::Port(32000));
    assert_eq!(hc.path.as_deref(), Some("/healthz"));
    assert_eq!(
        (hc.interval, hc.healthy_threshold, hc.unhealthy_threshold),
        (10, 2, 2)
    );
}

#[test]
fn health_check_annotations_override_the_defaults() {
    let spec = spec_of(&service(&[
        (key::HEALTHCHECK_PROTOCOL, "http"),
        (key::HEALTHCHECK_PORT, "8080"),
        (key::HEALTHCHECK_PATH, "/ready"),
        (key::HEALTHCHECK_INTERVAL, "10"),
        (key::HEALTHCHECK_TIMEOUT, "6"),
        (key::HEALTHCHECK_HEALTHY_THRESHOLD, "2"),
        (key::HEALTHCHECK_UNHEALTHY_THRESHOLD, "4"),
    ]));
    let hc = spec.health_check;
    assert_eq!(hc.protocol, ProtocolEnum::Http);
    assert_eq!(hc.port.as_aws(), "8080");
    assert_eq!(hc.path.as_deref(), Some("/ready"));
    assert_eq!(
        (
            hc.interval,
            hc.timeout,
            hc.healthy_threshold,
            hc.unhealthy_threshold
        ),
        (10, Some(6), 2, 4)
    );
}

#[test]
fn an_http_health_check_defaults_to_the_root_path_and_tcp_has_none() {
    assert_eq!(
        spec_of(&service(&[(key::HEALTHCHECK_PROTOCOL, "HTTPS")]))
            .health_check
            .path
            .as_deref(),
        Some("/")
    );
    assert_eq!(
        spec_of(&service(&[(key::HEALTHCHECK_PATH, "/ignored")]))
            .health_check
            .path,
        None
    );
}

#[test]
fn malformed_health_check_annotations_name_the_annotation_and_form() {
    assert_invalid(
        &service(&[(key::HEALTHCHECK_PROTOCOL, "UDP")]),
        key::HEALTHCHECK_PROTOCOL,
        "TCP, HTTP or HTTPS",
    );
    assert_invalid(
        &service(&[(key::HEALTHCHECK_PORT, "http")]),
        key::HEALTHCHECK_PORT,
        "traffic-port or a port number",
    );
    assert_invalid(
        &service(&[(key::HEALTHCHECK_PORT, "70000")]),
        key::HEALTHCHECK_PORT,
        "1 to 65535",
    );
    assert_invalid(
        &service(&[
            (key::HEALTHCHECK_PROTOCOL, "HTTP"),
            (key::HEALTHCHECK_PATH, "healthz"),
        ]),
        key::HEALTHCHECK_PATH,
        "starting with /",
    );
    assert_invalid(
        &service(&[(key::HEALTHCHECK_INTERVAL, "1")]),
        key::HEALTHCHECK_INTERVAL,
        "5 to 300",
    );
    assert_invalid(
        &service(&[(key::HEALTHCHECK_TIMEOUT, "x")]),
        key::HEALTHCHECK_TIMEOUT,
        "2 to 120",
    );
    assert_invalid(
        &service(&[(key::HEALTHCHECK_HEALTHY_THRESHOLD, "11")]),
        key::HEALTHCHECK_HEALTHY_THRESHOLD,
        "2 to 10",
    );
    assert_invalid(
        &service(&[(key::HEALTHCHECK_UNHEALTHY_THRESHOLD, "1")]),
        key::HEALTHCHECK_UNHEALTHY_THRESHOLD,
        "2 to 10",
    );
}

#[test]
fn internal_accepts_booleans_and_upstreams_old_cidr_value() {
    assert!(spec_of(&service(&[(key::INTERNAL, "true")])).internal);
    assert!(spec_of(&service(&[(key::INTERNAL, "0.0.0.0/0")])).internal);
    assert!(!spec_of(&service(&[(key::INTERNAL, "false")])).internal);
    assert_invalid(
        &service(&[(key::INTERNAL, "yes")]),
        key::INTERNAL,
        "true or false",
    );
}

#[test]
fn elastic_ips_are_for_internet_facing_and_private_addresses_for_internal() {
    let spec = spec_of(&service(&[(
        key::EIP_ALLOCATIONS,
        "eipalloc-1, eipalloc-2",
    )]));
    assert_eq!(
        spec.eip_allocations,
        Some(vec!["eipalloc-1".to_owned(), "eipalloc-2".to_owned()])
    );
    assert_invalid(
        &service(&[
            (key::EIP_ALLOCATIONS, "eipalloc-1"),
            (key::INTERNAL, "true"),
        ]),
        key::EIP_ALLOCATIONS,
        "internet-facing",
    );
    assert_invalid(
        &service(&[(key::EIP_ALLOCATIONS, "10.0.0.1")]),
        key::EIP_ALLOCATIONS,
        "eipalloc-",
    );

    let spec = spec_of(&service(&[
        (key::INTERNAL, "true"),
        (key::PRIVATE_IPV4_ADDRESSES, "10.0.1.10,10.0.2.10"),
    ]));
    assert_eq!(spec.private_ipv4_addresses.map(|a| a.len()), Some(2));
    assert_invalid(
        &service(&[(key::PRIVATE_IPV4_ADDRESSES, "10.0.1.10")]),
        key::PRIVATE_IPV4_ADDRESSES,
        "internal",
    );
    assert_invalid(
        &service(&[
            (key::INTERNAL, "true"),
            (key::PRIVATE_IPV4_ADDRESSES, "10.0.1.300"),
        ]),
        key::PRIVATE_IPV4_ADDRESSES,
        "IPv4 addresses",
    );
}

#[test]
fn tls_listeners_follow_the_certificate_and_ssl_ports() {
    let mut svc = service(&[
        (
            key::SSL_CERT,
            "arn:aws:acm:us-east-1:123456789012:certificate/abc",
        ),
        (key::SSL_PORTS, "443, admin"),
        (
            key::SSL_NEGOTIATION_POLICY,
            "ELBSecurityPolicy-TLS13-1-2-2021-06",
        ),
    ]);
    svc.spec.as_mut().expect("spec").ports = Some(vec![
        port("http", 80, 30080, "TCP"),
        port("https", 443, 30443, "TCP"),
        port("admin", 8443, 30843, "TCP"),
    ]);
    let ports = spec_of(&svc).ports;
    let protocols: Vec<&str> = ports.iter().map(|p| p.listener_protocol.as_str()).collect();
    assert_eq!(protocols, ["TCP", "TLS", "TLS"]);
    assert_eq!(
        ports[1].certificate_arn.as_deref(),
        Some("arn:aws:acm:us-east-1:123456789012:certificate/abc")
    );
    assert_eq!(
        ports[1].ssl_policy.as_deref(),
        Some("ELBSecurityPolicy-TLS13-1-2-2021-06")
    );
    assert_eq!(ports[1].target_protocol, ProtocolEnum::Tcp);
    assert_eq!(ports[0].certificate_arn, None);
    assert_invalid(
        &service(&[(key::SSL_CERT, "my-cert")]),
        key::SSL_CERT,
        "certificate ARN",
    );
}

#[test]
fn backend_protocol_ssl_makes_the_tls_listeners_targets_tls_only() {
    let cert = (
        key::SSL_CERT,
        "arn:aws:acm:us-east-1:123456789012:certificate/abc",
    );
    for (asked, tls_targets) in [("ssl", true), ("SSL", true), ("tcp", false), ("", false)] {
        let mut svc = service(&[
            cert,
            (key::SSL_PORTS, "443"),
            (key::BACKEND_PROTOCOL, asked),
        ]);
        svc.spec.as_mut().expect("spec").ports = Some(vec![
            port("http", 80, 30080, "TCP"),
            port("https", 443, 30443, "TCP"),
        ]);
        let ports = spec_of(&svc).ports;
        let targets: Vec<&str> = ports.iter().map(|p| p.target_protocol.as_str()).collect();
        let want = if tls_targets {
            ["TCP", "TLS"]
        } else {
            ["TCP", "TCP"]
        };
        assert_eq!(targets, want, "backend-protocol `{asked}`");
    }
    assert_invalid(
        &service(&[(key::BACKEND_PROTOCOL, "ssl")]),
        key::BACKEND_PROTOCOL,
        "there are none: set service.beta.kubernetes.io/aws-load-balancer-ssl-cert too",
    );
    for classic in ["http", "https", "udp"] {
        assert_invalid(
            &service(&[cert, (key::BACKEND_PROTOCOL, classic)]),
            key::BACKEND_PROTOCOL,
            "sends its targets TCP (`tcp`) or TLS (`ssl`)",
        );
    }
}

#[test]
fn without_ssl_ports_every_tcp_port_terminates_tls() {
    let spec = spec_of(&service(&[
        (key::SSL_CERT, "arn:aws:acm:r:1:certificate/c"),
        (key::SSL_PORTS, "*"),
    ]));
    assert_eq!(spec.ports[0].listener_protocol, ProtocolEnum::Tls);
}

#[test]
fn ports_must_be_tcp_or_udp_not_mixed_and_have_node_ports() {
    let mut udp = service(&[]);
    udp.spec.as_mut().expect("spec").ports = Some(vec![port("dns", 53, 30053, "UDP")]);
    assert_eq!(spec_of(&udp).ports[0].listener_protocol, ProtocolEnum::Udp);

    let mut mixed = service(&[]);
    mixed.spec.as_mut().expect("spec").ports = Some(vec![
        port("a", 53, 30053, "UDP"),
        port("b", 53, 30054, "TCP"),
    ]);
    assert_invalid(&mixed, "spec.ports", "mixed protocols");

    let mut sctp = service(&[]);
    sctp.spec.as_mut().expect("spec").ports = Some(vec![port("a", 9, 30009, "SCTP")]);
    assert_invalid(&sctp, "spec.ports", "SCTP");

    let mut none = service(&[]);
    none.spec.as_mut().expect("spec").ports = Some(Vec::new());
    assert_invalid(&none, "spec.ports", "at least one port");

    let mut no_node_port = service(&[]);
    no_node_port.spec.as_mut().expect("spec").ports = Some(vec![ServicePort {
        port: 80,
        ..ServicePort::default()
    }]);
    assert_invalid(
        &no_node_port,
        "spec.allocateLoadBalancerNodePorts",
        "node port",
    );
}

#[test]
fn source_ranges_come_from_the_spec_or_the_annotation() {
    let mut svc = service(&[(key::SOURCE_RANGES, "192.0.2.0/24")]);
    svc.spec.as_mut().expect("spec").load_balancer_source_ranges =
        Some(vec!["203.0.113.7/24".into()]);
    // The spec wins, and a CIDR is normalized to its network.
    assert_eq!(
        spec_of(&svc).source_ranges,
        ["203.0.113.0/24".parse::<IpNet>().expect("cidr")]
    );
    let from_annotation = spec_of(&service(&[(
        key::SOURCE_RANGES,
        "192.0.2.0/24, 198.51.100.0/24",
    )]));
    assert_eq!(from_annotation.source_ranges.len(), 2);

    let mut bad = service(&[]);
    bad.spec.as_mut().expect("spec").load_balancer_source_ranges = Some(vec!["10.0.0.0/33".into()]);
    assert_invalid(&bad, "spec.loadBalancerSourceRanges", "CIDRs");
    assert_invalid(
        &service(&[(key::SOURCE_RANGES, "anywhere")]),
        key::SOURCE_RANGES,
        "CIDRs",
    );
}

#[test]
fn other_annotations_parse_with_their_forms() {
    let spec = spec_of(&service(&[
        (key::PROXY_PROTOCOL, "*"),
        (key::CROSS_ZONE_LOAD_BALANCING_ENABLED, "true"),
        (key::IP_ADDRESS_TYPE, "dualstack"),
        (key::ADDITIONAL_RESOURCE_TAGS, "team=web,cost-center=42"),
        (key::TARGET_NODE_LABELS, "pool=web"),
        (key::SUBNETS, "subnet-1,public-b"),
    ]));
    assert!(spec.proxy_protocol && spec.cross_zone);
    assert_eq!(spec.ip_address_type, IpAddressType::Dualstack);
    assert_eq!(spec.additional_tags["cost-center"], "42");
    assert_eq!(spec.target_node_labels["pool"], "web");
    assert_eq!(
        spec.subnets,
        Some(vec!["subnet-1".to_owned(), "public-b".to_owned()])
    );

    assert_invalid(
        &service(&[(key::PROXY_PROTOCOL, "v2")]),
        key::PROXY_PROTOCOL,
        "`*`",
    );
    assert_invalid(
        &service(&[(key::CROSS_ZONE_LOAD_BALANCING_ENABLED, "on")]),
        key::CROSS_ZONE_LOAD_BALANCING_ENABLED,
        "true or false",
    );
    assert_invalid(
        &service(&[(key::IP_ADDRESS_TYPE, "ipv6")]),
        key::IP_ADDRESS_TYPE,
        "ipv4 or dualstack",
    );
    assert_invalid(
        &service(&[(
            key::ADDITIONAL_RESOURCE_TAGS,
            "kubernetes.io/cluster/x=owned",
        )]),
        key::ADDITIONAL_RESOURCE_TAGS,
        "reserved",
    );
    assert_invalid(
        &service(&[(key::SUBNETS, ",")]),
        key::SUBNETS,
        "comma-separated",
    );
}

#[test]
fn spec_fields_aws_cannot_honour_are_refused() {
    let mut affinity = service(&[]);
    affinity.spec.as_mut().expect("spec").session_affinity = Some("ClientIP".into());
    assert_invalid(&affinity, "spec.sessionAffinity", "ClientIP");
    let mut ip = service(&[]);
    ip.spec.as_mut().expect("spec").load_balancer_ip = Some("203.0.113.9".into());
    assert_invalid(&ip, "spec.loadBalancerIP", key::EIP_ALLOCATIONS);
}

#[test]
fn a_service_ref_reads_only_names() {
    let mut svc = service(&[(key::HEALTHCHECK_PORT, "not-a-port")]);
    svc.metadata.namespace = None;
    let r = ServiceRef::of(&svc);
    assert_eq!(r.key, "default/web");
    assert_eq!(r.uid, UID);
}

#[test]
fn the_shared_probe_replaces_where_cluster_services_are_checked_but_not_how_often() {
    let probe = SharedHealthProbe {
        port: 10256,
        path: "/healthz".to_owned(),
    };
    let asked = service(&[
        (key::HEALTHCHECK_PROTOCOL, "TCP"),
        (key::HEALTHCHECK_PORT, "8080"),
        (key::HEALTHCHECK_INTERVAL, "10"),
        (key::HEALTHCHECK_HEALTHY_THRESHOLD, "5"),
    ]);
    let shared = LoadBalancerSpec::under(&asked, Some(&probe)).expect("valid");
    let hc = &shared.health_check;
    assert_eq!(hc.protocol, ProtocolEnum::Http);
    assert_eq!(hc.port, HealthCheckPort::Port(10256));
    assert_eq!(hc.path.as_deref(), Some("/healthz"));
    assert_eq!((hc.interval, hc.healthy_threshold), (10, 5));

    // Without the shared mode, the annotations stand.
    let own = LoadBalancerSpec::under(&asked, None).expect("valid");
    assert_eq!(own, spec_of(&asked));
    assert_eq!(own.health_check.port, HealthCheckPort::Port(8080));

    // A Local Service keeps its own health check node port.
    let mut local = service(&[]);
    let spec = local.spec.as_mut().expect("spec");
    spec.external_traffic_policy = Some("Local".into());
    spec.health_check_node_port = Some(31999);
    let kept = LoadBalancerSpec::under(&local, Some(&probe)).expect("valid");
    assert_eq!(kept.health_check.port, HealthCheckPort::Port(31999));
}
