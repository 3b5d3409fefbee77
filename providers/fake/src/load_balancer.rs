//! The fake's `LoadBalancer`: load balancers held in memory, with an
//! address each from 100.64.0.0/10.

use std::sync::Arc;

use async_trait::async_trait;
use ccm_cloud_provider::annotations::{
    Annotation, AnnotationSchema, Value, unknown_annotation_warnings,
};
use ccm_cloud_provider::k8s_openapi::api::core::v1::{Node, Service};
use ccm_cloud_provider::{
    CloudError, EnsuredLoadBalancer, LoadBalancer, LoadBalancerHealth, LoadBalancerIngress,
    LoadBalancerStatus, LoadBalancerWarning,
};

use crate::state::{FakeLoadBalancer, ForwardedPort};
use crate::{Capability, FakeCloud, Operation};

/// `external` hands the Service to another controller (ImplementedElsewhere),
/// as `aws-load-balancer-type: external` does on AWS.
pub const ANNOTATION_TYPE: &str = "service.beta.kubernetes.io/fake-load-balancer-type";
/// Seconds between health checks, an integer from 5 to 300.
pub const ANNOTATION_HEALTHCHECK_INTERVAL: &str =
    "service.beta.kubernetes.io/fake-load-balancer-healthcheck-interval";
/// The old spelling of [`ANNOTATION_HEALTHCHECK_INTERVAL`], still honoured
/// when the new one is absent: the fake's deprecated annotation, so the
/// suites can show how a deprecated key is reported.
pub const ANNOTATION_HEALTH_CHECK_INTERVAL_DEPRECATED: &str =
    "service.beta.kubernetes.io/fake-load-balancer-health-check-interval";
/// The fake's name for a Service's load balancer, recorded on the Service
/// (as DigitalOcean records its load-balancer ID).
pub const ANNOTATION_LOAD_BALANCER_ID: &str = "service.beta.kubernetes.io/fake-load-balancer-id";
/// Every load-balancer call for the Service fails with this message: an
/// outage of one load balancer that a test switches off by removing it
/// (`cargo xtask monitoring` fires its alert this way).
pub const ANNOTATION_FAIL: &str = "service.beta.kubernetes.io/fake-load-balancer-fail";
/// The fake provider panics on any load-balancer call for the Service: a
/// provider bug, for the tests that prove a panicking controller stops the
/// process instead of leaving it half alive.
pub const ANNOTATION_PANIC: &str = "service.beta.kubernetes.io/fake-load-balancer-panic";
/// Report this hostname as the ingress instead of an IP.
pub const ANNOTATION_HOSTNAME: &str = "service.beta.kubernetes.io/fake-load-balancer-hostname";

/// Every annotation the fake cloud reads: what the service controller warns
/// from and the admission webhook refuses from. The fake has no upstream of
/// its own: each entry says what the cloud it stands for does, so the
/// suites see both a key admission denies and one it warns about.
pub static SCHEMA: AnnotationSchema = AnnotationSchema {
    prefixes: &["service.beta.kubernetes.io/fake-load-balancer-"],
    annotations: &[
        Annotation::new(ANNOTATION_TYPE, Value::OneOf(&["", "nlb", "external"]))
            .upstream_fails("the fake fails the Service on a type it cannot make")
            .immutable(
                "the fake cloud cannot change a load balancer's type: delete the Service and create it again",
            )
            .upstream_fails_change(
                "the fake fails the ensure when the type changes, as AWS's upstream CCM does since v1.36",
            ),
        Annotation::new(
            ANNOTATION_HEALTHCHECK_INTERVAL,
            Value::Int { min: 5, max: 300 },
        )
        .upstream_fails(HEALTHCHECK_INTERVAL_REFUSED),
        Annotation::new(
            ANNOTATION_HEALTH_CHECK_INTERVAL_DEPRECATED,
            Value::Int { min: 5, max: 300 },
        )
        .deprecated("use service.beta.kubernetes.io/fake-load-balancer-healthcheck-interval instead")
        .conflicts(&[ANNOTATION_HEALTHCHECK_INTERVAL])
        .upstream_fails(HEALTHCHECK_INTERVAL_REFUSED),
        Annotation::new(ANNOTATION_LOAD_BALANCER_ID, Value::Text),
        Annotation::new(ANNOTATION_FAIL, Value::Text),
        Annotation::new(ANNOTATION_PANIC, Value::Text),
        Annotation::new(ANNOTATION_HOSTNAME, Value::Text),
    ],
};

/// Where a bad health-check interval fails, as AWS refuses one.
const HEALTHCHECK_INTERVAL_REFUSED: &str =
    "the fake fails the Service on an interval outside 5 to 300 seconds, as AWS refuses one";

pub(crate) fn service_key(service: &Service) -> String {
    let m = &service.metadata;
    format!(
        "{}/{}",
        m.namespace.as_deref().unwrap_or("default"),
        m.name.as_deref().unwrap_or_default()
    )
}

fn annotation<'a>(service: &'a Service, key: &str) -> Option<&'a str> {
    debug_assert!(
        SCHEMA.get(key).is_some(),
        "annotation {key} is read but has no entry in the schema"
    );
    service
        .metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// Checks the Service's annotations, as a real provider must, before any
/// change.
/// Panics when the Service asks for it with [`ANNOTATION_PANIC`]: how the
/// supervision tests make a controller panic.
pub(crate) fn panic_if_asked(service: &Service) {
    if let Some(message) = annotation(service, ANNOTATION_PANIC) {
        panic!("the fake cloud panics on this load balancer: {message}");
    }
}

pub(crate) fn validate(service: &Service) -> Result<(), CloudError> {
    // A deliberate provider bug, asked for by the Service.
    panic_if_asked(service);
    if let Some(message) = annotation(service, ANNOTATION_FAIL) {
        return Err(CloudError::msg(format!(
            "the fake cloud fails this load balancer's calls: {message}"
        )));
    }
    match annotation(service, ANNOTATION_TYPE) {
        None | Some("" | "nlb") => {}
        Some("external") => return Err(CloudError::ImplementedElsewhere),
        Some(other) => {
            return Err(CloudError::invalid(
                ANNOTATION_TYPE,
                format!("`{other}` is not a load-balancer type; expected `nlb` or `external`"),
            ));
        }
    }
    for key in [
        ANNOTATION_HEALTHCHECK_INTERVAL,
        ANNOTATION_HEALTH_CHECK_INTERVAL_DEPRECATED,
    ] {
        if let Some(v) = annotation(service, key)
            && !v.parse::<u32>().is_ok_and(|n| (5..=300).contains(&n))
        {
            return Err(CloudError::invalid(
                key,
                format!("`{v}` is not an integer number of seconds from 5 to 300"),
            ));
        }
    }
    Ok(())
}

fn node_names(nodes: &[Arc<Node>]) -> Vec<String> {
    let mut names: Vec<String> = nodes
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    names.sort();
    names
}

fn forwarded_ports(service: &Service) -> Vec<ForwardedPort> {
    let Some(spec) = &service.spec else {
        return Vec::new();
    };
    spec.ports
        .iter()
        .flatten()
        .map(|p| ForwardedPort {
            protocol: p.protocol.clone().unwrap_or_else(|| "TCP".into()),
            port: p.port,
            node_port: p.node_port.unwrap_or_default(),
        })
        .collect()
}

/// Describes a change to the request fence before it is made (see
/// `ccm_cloud_provider::fence::check_request`): in a dry run, a change is
/// refused and planned, and no change at all goes through.
pub(crate) fn describe(op: Operation, detail: Option<&str>) -> Result<(), CloudError> {
    ccm_cloud_provider::fence::check_request(ccm_cloud_provider::fence::Request {
        operation: op.as_str(),
        mutates: detail.is_some(),
        detail: detail.unwrap_or_default(),
    })
}

fn ports_text(ports: &[ForwardedPort]) -> String {
    let each: Vec<String> = ports
        .iter()
        .map(|p| format!("{}/{}->{}", p.port, p.protocol, p.node_port))
        .collect();
    format!("[{}]", each.join(", "))
}

/// What changes from `old` to `new`, field by field; `None` when nothing
/// does (the address is the cloud's own and never compared).
fn difference(old: Option<&FakeLoadBalancer>, new: &FakeLoadBalancer) -> Option<String> {
    let Some(old) = old else {
        return Some(format!(
            "create {} ports {} nodes {}",
            new.name,
            ports_text(&new.ports),
            new.nodes.len()
        ));
    };
    let mut changes = Vec::new();
    if old.ports != new.ports {
        changes.push(format!(
            "ports {} -> {}",
            ports_text(&old.ports),
            ports_text(&new.ports)
        ));
    }
    if old.nodes != new.nodes {
        changes.push(format!(
            "nodes [{}] -> [{}]",
            old.nodes.join(","),
            new.nodes.join(",")
        ));
    }
    if old.source_ranges != new.source_ranges {
        changes.push(format!(
            "source ranges {:?} -> {:?}",
            old.source_ranges, new.source_ranges
        ));
    }
    if old.external_traffic_policy != new.external_traffic_policy
        || old.health_check_node_port != new.health_check_node_port
    {
        changes.push(format!(
            "traffic policy {:?}/{:?} -> {:?}/{:?}",
            old.external_traffic_policy,
            old.health_check_node_port,
            new.external_traffic_policy,
            new.health_check_node_port
        ));
    }
    if old.hostname != new.hostname
        || old.service != new.service
        || old.cluster_name != new.cluster_name
    {
        changes.push(format!(
            "owner or hostname {}/{}/{:?} -> {}/{}/{:?}",
            old.cluster_name,
            old.service,
            old.hostname,
            new.cluster_name,
            new.service,
            new.hostname
        ));
    }
    (!changes.is_empty()).then(|| format!("{}: {}", new.name, changes.join("; ")))
}

fn status_of(lb: &FakeLoadBalancer) -> LoadBalancerStatus {
    let ingress = match &lb.hostname {
        Some(hostname) => LoadBalancerIngress {
            hostname: Some(hostname.clone()),
            ..Default::default()
        },
        None => LoadBalancerIngress {
            ip: Some(lb.ip.clone()),
            ..Default::default()
        },
    };
    LoadBalancerStatus {
        ingress: vec![ingress],
    }
}

impl FakeCloud {
    /// Without its schema ([`Capability::AnnotationSchema`]), the fake warns
    /// of an unknown annotation in the ensure's answer, as a provider
    /// without one does.
    fn warnings(&self, service: &Service) -> Vec<LoadBalancerWarning> {
        if self.offers(Capability::AnnotationSchema) {
            return Vec::new();
        }
        let known: Vec<&str> = SCHEMA.annotations.iter().map(|a| a.key).collect();
        unknown_annotation_warnings(
            service.metadata.annotations.as_ref(),
            SCHEMA.prefixes,
            &known,
        )
    }
}

#[async_trait]
impl LoadBalancer for FakeCloud {
    async fn get_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>, CloudError> {
        self.enter(Operation::GetLoadBalancer, vec![service_key(service)], None)
            .await?;
        validate(service)?;
        let name = self.load_balancer_name(cluster_name, service);
        Ok(self.state().load_balancers.get(&name).map(status_of))
    }

    /// The annotations decide ownership and validity: no call needed.
    fn check_service(&self, service: &Service) -> Option<Result<(), CloudError>> {
        self.offers(Capability::ServiceCheck)
            .then(|| validate(service))
    }

    fn annotation_schema(&self) -> Option<&'static AnnotationSchema> {
        self.offers(Capability::AnnotationSchema).then_some(&SCHEMA)
    }

    async fn load_balancer_health(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<Option<LoadBalancerHealth>, CloudError> {
        if !self.offers(Capability::Health) {
            return Ok(None);
        }
        self.health_of(cluster_name, service, nodes).await
    }

    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<EnsuredLoadBalancer, CloudError> {
        self.enter(
            Operation::EnsureLoadBalancer,
            vec![service_key(service)],
            None,
        )
        .await?;
        validate(service)?;
        let name = self.load_balancer_name(cluster_name, service);
        let spec = service.spec.clone().unwrap_or_default();
        let mut state = self.state();
        let nodes = state.shared_node_list(node_names(nodes));
        let mut lb = FakeLoadBalancer {
            name: name.clone(),
            cluster_name: cluster_name.to_owned(),
            service: service_key(service),
            ports: forwarded_ports(service),
            nodes,
            source_ranges: spec.load_balancer_source_ranges.unwrap_or_default(),
            external_traffic_policy: spec.external_traffic_policy,
            health_check_node_port: spec.health_check_node_port,
            ip: String::new(),
            hostname: annotation(service, ANNOTATION_HOSTNAME).map(str::to_owned),
        };
        let existing = state.load_balancers.get(&name);
        if let Some(existing) = existing {
            lb.ip.clone_from(&existing.ip);
        }
        describe(
            Operation::EnsureLoadBalancer,
            difference(existing, &lb).as_deref(),
        )?;
        if lb.ip.is_empty() {
            lb.ip = state.allocate_ip();
        }
        let status = status_of(&lb);
        state.load_balancers.insert(name.clone(), lb);
        let service_annotations = [(ANNOTATION_LOAD_BALANCER_ID.to_owned(), name)].into();
        drop(state);
        Ok(EnsuredLoadBalancer {
            status,
            service_annotations,
            warnings: self.warnings(service),
        })
    }

    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<(), CloudError> {
        self.enter(
            Operation::UpdateLoadBalancer,
            vec![service_key(service)],
            None,
        )
        .await?;
        validate(service)?;
        let name = self.load_balancer_name(cluster_name, service);
        let mut state = self.state();
        let nodes = state.shared_node_list(node_names(nodes));
        match state.load_balancers.get_mut(&name) {
            Some(lb) => {
                let change = (lb.nodes != nodes).then(|| {
                    format!(
                        "{name}: nodes [{}] -> [{}]",
                        lb.nodes.join(","),
                        nodes.join(",")
                    )
                });
                describe(Operation::UpdateLoadBalancer, change.as_deref())?;
                lb.nodes = nodes;
                Ok(())
            }
            None => Err(CloudError::msg(format!(
                "load balancer {name} does not exist"
            ))),
        }
    }

    async fn ensure_load_balancer_deleted(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<(), CloudError> {
        self.enter(
            Operation::EnsureLoadBalancerDeleted,
            vec![service_key(service)],
            None,
        )
        .await?;
        if annotation(service, ANNOTATION_TYPE) == Some("external") {
            return Err(CloudError::ImplementedElsewhere);
        }
        let name = self.load_balancer_name(cluster_name, service);
        let mut state = self.state();
        let change = state
            .load_balancers
            .contains_key(&name)
            .then(|| format!("delete {name}"));
        describe(Operation::EnsureLoadBalancerDeleted, change.as_deref())?;
        state.load_balancers.remove(&name);
        Ok(())
    }
}
