//! What a Service asks of the service controller, read from its spec and
//! metadata.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use k8s_openapi::api::core::v1::Service;
use serde_json::json;

/// The finalizer that keeps a Service until its load balancer is deleted
/// (upstream's `servicehelper.LoadBalancerCleanupFinalizer`).
pub(crate) const CLEANUP_FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";

/// Whether the Service wants a load balancer from this controller: type
/// LoadBalancer without `spec.loadBalancerClass` (a class hands it to
/// another implementation).
pub fn wants_load_balancer(service: &Service) -> bool {
    service.spec.as_ref().is_some_and(|s| {
        s.type_.as_deref() == Some("LoadBalancer") && s.load_balancer_class.is_none()
    })
}

/// Whether the Service carries [`CLEANUP_FINALIZER`].
pub fn has_finalizer(service: &Service) -> bool {
    service
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == CLEANUP_FINALIZER)
}

/// Whether the Service is being deleted.
pub(crate) fn is_deleting(service: &Service) -> bool {
    service.metadata.deletion_timestamp.is_some()
}

/// Whether the Service holds our finalizer but no longer needs a load
/// balancer: it is being deleted, its type changed, or a class was set.
pub(crate) fn needs_cleanup(service: &Service) -> bool {
    has_finalizer(service) && (is_deleting(service) || !wants_load_balancer(service))
}

/// Whether the controller has business with the Service at all: it wants a
/// load balancer, or it carries our finalizer. Every other Service is left
/// alone without further work.
pub(crate) fn is_ours(service: &Service) -> bool {
    has_finalizer(service) || (wants_load_balancer(service) && !is_deleting(service))
}

/// A digest of everything a provider reads to build the Service's load
/// balancer: its UID, ports, protocols, annotations, traffic policy, health
/// check node port, IP families, source ranges, and upstream's other
/// triggers (session affinity, `loadBalancerIP`, external IPs).
///
/// `recorded` are annotations about to be written to the Service (those the
/// provider asked to record), so the digest matches the Service as it will be
/// once they are stored, and recording them does not count as a change.
///
/// Labels, status, finalizers and resource versions are not part of it: a
/// change to them never costs a provider call.
pub(crate) fn fingerprint(service: &Service, recorded: &BTreeMap<String, String>) -> u64 {
    let mut annotations = service.metadata.annotations.clone().unwrap_or_default();
    annotations.extend(recorded.iter().map(|(k, v)| (k.clone(), v.clone())));
    let spec = service.spec.clone().unwrap_or_default();
    let view = json!({
        "uid": service.metadata.uid,
        "annotations": annotations,
        "ports": spec.ports,
        "externalTrafficPolicy": spec.external_traffic_policy,
        "healthCheckNodePort": spec.health_check_node_port,
        "ipFamilies": spec.ip_families,
        "loadBalancerSourceRanges": spec.load_balancer_source_ranges,
        "sessionAffinity": spec.session_affinity,
        "sessionAffinityConfig": spec.session_affinity_config,
        "loadBalancerIP": spec.load_balancer_ip,
        "externalIPs": spec.external_ips,
    });
    let mut hasher = DefaultHasher::new();
    view.to_string().hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ServicePort, ServiceSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    use super::*;

    fn lb_service() -> Service {
        Service {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("default".into()),
                uid: Some("u1".into()),
                ..ObjectMeta::default()
            },
            spec: Some(ServiceSpec {
                type_: Some("LoadBalancer".into()),
                ports: Some(vec![ServicePort {
                    port: 80,
                    protocol: Some("TCP".into()),
                    node_port: Some(30080),
                    ..ServicePort::default()
                }]),
                ..ServiceSpec::default()
            }),
            status: None,
        }
    }

    fn none() -> BTreeMap<String, String> {
        BTreeMap::new()
    }

    #[test]
    fn only_load_balancer_type_without_class_is_wanted() {
        let svc = lb_service();
        assert!(wants_load_balancer(&svc));
        let mut classed = svc.clone();
        classed.spec.as_mut().unwrap().load_balancer_class = Some("example.com/lb".into());
        assert!(!wants_load_balancer(&classed));
        let mut cluster_ip = svc;
        cluster_ip.spec.as_mut().unwrap().type_ = Some("ClusterIP".into());
        assert!(!wants_load_balancer(&cluster_ip));
        assert!(!wants_load_balancer(&Service::default()));
    }

    #[test]
    fn cleanup_is_needed_only_with_our_finalizer() {
        let mut svc = lb_service();
        svc.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        assert!(!needs_cleanup(&svc), "no finalizer: not ours to clean up");
        svc.metadata.finalizers = Some(vec!["other".into(), CLEANUP_FINALIZER.into()]);
        assert!(needs_cleanup(&svc), "being deleted");
        svc.metadata.deletion_timestamp = None;
        assert!(!needs_cleanup(&svc), "still wants its load balancer");
        svc.spec.as_mut().unwrap().type_ = Some("NodePort".into());
        assert!(needs_cleanup(&svc), "type changed");
        assert!(is_ours(&svc), "until its finalizer is gone");
        svc.metadata.finalizers = None;
        assert!(!is_ours(&svc));
    }

    #[test]
    fn every_field_a_provider_reads_changes_the_fingerprint() {
        let base = lb_service();
        let before = fingerprint(&base, &none());
        type Edit = fn(&mut Service);
        let edits: Vec<(&str, Edit)> = vec![
            ("port", |s| {
                s.spec.as_mut().unwrap().ports.as_mut().unwrap()[0].port = 443;
            }),
            ("protocol", |s| {
                s.spec.as_mut().unwrap().ports.as_mut().unwrap()[0].protocol = Some("UDP".into());
            }),
            ("node port", |s| {
                s.spec.as_mut().unwrap().ports.as_mut().unwrap()[0].node_port = Some(30081);
            }),
            ("annotation", |s| {
                s.metadata.annotations = Some([("a".to_owned(), "b".to_owned())].into());
            }),
            ("traffic policy", |s| {
                s.spec.as_mut().unwrap().external_traffic_policy = Some("Local".into());
            }),
            ("health check port", |s| {
                s.spec.as_mut().unwrap().health_check_node_port = Some(32000);
            }),
            ("IP families", |s| {
                s.spec.as_mut().unwrap().ip_families = Some(vec!["IPv4".into(), "IPv6".into()]);
            }),
            ("source ranges", |s| {
                s.spec.as_mut().unwrap().load_balancer_source_ranges =
                    Some(vec!["10.0.0.0/8".into()]);
            }),
            ("uid", |s| s.metadata.uid = Some("u2".into())),
        ];
        for (what, edit) in edits {
            let mut changed = base.clone();
            edit(&mut changed);
            assert_ne!(
                fingerprint(&changed, &none()),
                before,
                "{what} must count as a change"
            );
        }
    }

    #[test]
    fn labels_status_and_finalizers_do_not_change_the_fingerprint() {
        let base = lb_service();
        let mut changed = base.clone();
        changed.metadata.labels = Some([("team".to_owned(), "web".to_owned())].into());
        changed.metadata.finalizers = Some(vec![CLEANUP_FINALIZER.into()]);
        changed.metadata.resource_version = Some("42".into());
        changed.status = Some(Default::default());
        assert_eq!(fingerprint(&changed, &none()), fingerprint(&base, &none()));
    }

    #[test]
    fn recording_the_providers_annotations_is_not_a_change() {
        let base = lb_service();
        let recorded: BTreeMap<String, String> = [("lb-id".to_owned(), "x1".to_owned())].into();
        let mut stored = base.clone();
        stored.metadata.annotations = Some(recorded.clone());
        assert_eq!(fingerprint(&base, &recorded), fingerprint(&stored, &none()));
        assert_ne!(fingerprint(&base, &none()), fingerprint(&stored, &none()));
    }
}
