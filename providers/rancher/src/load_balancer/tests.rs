//! Offline checks: names as upstream makes them, and what a Service may ask.

use ccm_cloud_provider::k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use ccm_cloud_provider::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;

fn service(ports: Vec<ServicePort>) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("shop".into()),
            uid: Some("6f1c0e5e-2b7a-4c1e-9d1a-0a1b2c3d4e5f".into()),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            ports: Some(ports),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

fn port(port: i32, node_port: i32, protocol: &str) -> ServicePort {
    ServicePort {
        port,
        node_port: Some(node_port),
        protocol: Some(protocol.into()),
        ..ServicePort::default()
    }
}

#[test]
fn names_are_upstreams() {
    let s = service(vec![port(80, 30080, "TCP")]);
    assert_eq!(
        load_balancer_name(&s),
        "lb-a6f1c0e5e2b7a4c1e9d1a0a1b2c3d4e5"
    );
    assert_eq!(
        external_service_name("node-1.example.com"),
        "node-1-example-com"
    );
    assert_eq!(external_service_name("--a__b--"), "a-b");
    assert_eq!(external_service_name(&"x".repeat(80)).len(), 63);
    assert_eq!(external_service_name("..x..y.."), "x-y");
    assert_eq!(external_service_name("nœud"), "n-ud");
    // Cut after the trim, so it may end in `-`, as upstream's does.
    let long = "a".repeat(62) + ".b";
    assert_eq!(external_service_name(&long), "a".repeat(62) + "-");
}

#[test]
fn a_tcp_service_gives_upstreams_ports() {
    let s = service(vec![port(443, 30443, "TCP"), port(80, 30080, "TCP")]);
    let w = wanted(&s).expect("valid");
    assert_eq!(w.ports, ["443:443/tcp", "80:80/tcp"]);
    assert_eq!(w.forwards, [(443, 30443), (80, 30080)]);
    assert_eq!(w.owner, "shop/web");
}

#[test]
fn what_rancher_cannot_do_is_refused_naming_the_field() {
    let udp = service(vec![port(53, 30053, "UDP")]);
    let err = wanted(&udp).expect_err("udp");
    assert!(err.to_string().contains("spec.ports[0].protocol"), "{err}");
    let mut ip = service(vec![port(80, 30080, "TCP")]);
    if let Some(spec) = ip.spec.as_mut() {
        spec.load_balancer_ip = Some("1.2.3.4".into());
    }
    assert!(
        wanted(&ip)
            .expect_err("ip")
            .to_string()
            .contains("spec.loadBalancerIP")
    );
    let mut sticky = service(vec![port(80, 30080, "TCP")]);
    if let Some(spec) = sticky.spec.as_mut() {
        spec.session_affinity = Some("ClientIP".into());
    }
    assert!(
        wanted(&sticky)
            .expect_err("affinity")
            .to_string()
            .contains("spec.sessionAffinity")
    );
    let none = service(vec![]);
    assert!(matches!(
        wanted(&none),
        Err(CloudError::InvalidInput { .. })
    ));
}
