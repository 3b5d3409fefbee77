//! A Service whose `aws-load-balancer-type` changed after its load balancer
//! was made.
//!
//! AWS cannot turn a classic ELB into a Network Load Balancer or back, and
//! making the new kind beside the old one leaks the old one (its name is
//! the new one's too, so nothing finds it again). Upstream refuses the
//! change from v1.36 (cloud-provider-aws#1325) by reading the ingress
//! hostname; moto names both kinds alike, so here the cloud says which
//! kind exists, asked only when the kind the Service asks for is not there
//! and the Service had a load balancer: a steady Service costs nothing
//! more.
//!
//! The load balancer that exists is kept and still reconciled as what it
//! is (the keys only the asked-for kind reads are left out), with a
//! Warning naming both kinds and what to do instead. Deletion removes
//! whichever kind exists.

use std::collections::BTreeMap;

use ccm_cloud_provider::k8s_openapi::api::core::v1::Service;
use ccm_cloud_provider::{CloudError, LoadBalancerWarning};

use super::annotations as key;
use super::classic::NETWORK_ONLY;
use super::spec::{CLASSIC_ONLY, Kind, ServiceRef};
use crate::provider::Cloud;
use crate::tagging::{elb_tags, elbv2_tags};

/// The event reason of [`warning`].
pub(crate) const REASON: &str = "LoadBalancerTypeUnchanged";

/// Whether the Service's status names a load balancer: one was made for it.
pub(crate) fn had_load_balancer(service: &Service) -> bool {
    service
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .is_some_and(|ingress| !ingress.is_empty())
}

/// The other kind.
pub(crate) fn other(kind: Kind) -> Kind {
    match kind {
        Kind::Network => Kind::Classic,
        Kind::Classic => Kind::Network,
    }
}

fn words(kind: Kind) -> &'static str {
    match kind {
        Kind::Network => "a Network Load Balancer",
        Kind::Classic => "a classic ELB",
    }
}

/// The keys only `kind` reads.
fn only(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::Network => NETWORK_ONLY,
        Kind::Classic => CLASSIC_ONLY,
    }
}

/// `service` as its existing load balancer of kind `built` reads it: the
/// type annotation says `built`, and the keys only the asked-for kind reads
/// are gone. Returns the keys left out.
pub(crate) fn as_built(service: &Service, built: Kind) -> (Service, Vec<String>) {
    let mut out = service.clone();
    let annotations = out.metadata.annotations.get_or_insert_with(BTreeMap::new);
    match built {
        Kind::Network => annotations.insert(key::TYPE.to_owned(), "nlb".to_owned()),
        Kind::Classic => annotations.remove(key::TYPE),
    };
    let dropped: Vec<String> = only(other(built))
        .iter()
        .filter(|k| annotations.remove(**k).is_some())
        .map(|k| (*k).to_owned())
        .collect();
    (out, dropped)
}

/// The Warning for a Service asking for `asked` whose load balancer `name`
/// is of the other kind: both kinds, what happens, and what to do.
pub(crate) fn warning(asked: Kind, name: &str, dropped: &[String]) -> LoadBalancerWarning {
    let built = other(asked);
    let ignored = if dropped.is_empty() {
        String::new()
    } else {
        format!(
            " (annotations only {} reads are ignored: {})",
            words(asked),
            dropped.join(", ")
        )
    };
    LoadBalancerWarning::new(
        REASON,
        format!(
            "annotation {}: the Service asks for {}, but its load balancer {name} is {}, and a \
             load balancer cannot become another kind in place; {} is kept and still \
             reconciled{ignored}. To get {}, create a new Service with the annotation and move \
             traffic to it, or delete and recreate this Service; to silence this, set the \
             annotation back",
            key::TYPE,
            words(asked),
            words(built),
            words(built).replacen("a ", "the ", 1),
            words(asked),
        ),
    )
}

impl Cloud {
    /// Whether this cluster's load balancer of `kind` for `svc` exists.
    pub(crate) async fn holds(&self, svc: &ServiceRef, kind: Kind) -> Result<bool, CloudError> {
        let name = &svc.load_balancer_name;
        Ok(match kind {
            Kind::Network => self
                .find_load_balancer(name)
                .await?
                .is_some_and(|(_, tags)| {
                    self.tags.is_owned_for_service(elbv2_tags(&tags), &svc.key)
                }),
            Kind::Classic => self
                .find_classic(name)
                .await?
                .is_some_and(|(_, tags)| self.tags.is_owned_for_service(elb_tags(&tags), &svc.key)),
        })
    }

    /// The kind of load balancer `service` (asking for `asked`) has: `asked`
    /// unless `asked_exists` is false, the Service had a load balancer,
    /// and one of the other kind exists.
    pub(crate) async fn built_kind(
        &self,
        service: &Service,
        asked: Kind,
        asked_exists: bool,
    ) -> Result<Kind, CloudError> {
        if asked_exists || !had_load_balancer(service) {
            return Ok(asked);
        }
        let held = self.holds(&ServiceRef::of(service), other(asked)).await?;
        Ok(if held { other(asked) } else { asked })
    }
}

#[cfg(test)]
mod tests {
    use ccm_cloud_provider::k8s_openapi::api::core::v1::{
        LoadBalancerIngress, LoadBalancerStatus, ServiceStatus,
    };

    use super::*;

    fn service(annotations: &[(&str, &str)], ingress: bool) -> Service {
        let mut svc = crate::test_util::classic_service("u-1", annotations, &[(80, 30080)]);
        if ingress {
            svc.status = Some(ServiceStatus {
                load_balancer: Some(LoadBalancerStatus {
                    ingress: Some(vec![LoadBalancerIngress {
                        hostname: Some("a1.us-east-1.elb.amazonaws.com".into()),
                        ..LoadBalancerIngress::default()
                    }]),
                }),
                ..ServiceStatus::default()
            });
        }
        svc
    }

    #[test]
    fn a_service_had_a_load_balancer_once_its_status_names_one() {
        assert!(!had_load_balancer(&service(&[], false)));
        assert!(had_load_balancer(&service(&[], true)));
    }

    #[test]
    fn a_classic_service_read_as_its_network_load_balancer_loses_classic_only_keys() {
        let svc = service(
            &[
                (key::CONNECTION_IDLE_TIMEOUT, "120"),
                (key::ADDITIONAL_RESOURCE_TAGS, "team=shop"),
            ],
            true,
        );
        let (built, dropped) = as_built(&svc, Kind::Network);
        let a = built.metadata.annotations.unwrap();
        assert_eq!(a.get(key::TYPE).map(String::as_str), Some("nlb"));
        assert_eq!(dropped, [key::CONNECTION_IDLE_TIMEOUT]);
        assert!(!a.contains_key(key::CONNECTION_IDLE_TIMEOUT));
        assert!(
            a.contains_key(key::ADDITIONAL_RESOURCE_TAGS),
            "shared keys stay"
        );
    }

    #[test]
    fn a_network_service_read_as_its_classic_elb_loses_the_type_and_network_only_keys() {
        let svc = service(
            &[(key::TYPE, "nlb"), (key::TARGET_GROUP_ATTRIBUTES, "x=y")],
            true,
        );
        let (built, dropped) = as_built(&svc, Kind::Classic);
        let a = built.metadata.annotations.unwrap();
        assert!(!a.contains_key(key::TYPE));
        assert_eq!(dropped, [key::TARGET_GROUP_ATTRIBUTES]);
    }

    #[test]
    fn the_warning_names_both_kinds_what_is_ignored_and_what_to_do() {
        let w = warning(
            Kind::Network,
            "a1",
            &[key::TARGET_GROUP_ATTRIBUTES.to_owned()],
        );
        assert_eq!(w.reason, REASON);
        assert_eq!(
            w.message,
            format!(
                "annotation {}: the Service asks for a Network Load Balancer, but its load \
                 balancer a1 is a classic ELB, and a load balancer cannot become another kind in \
                 place; the classic ELB is kept and still reconciled (annotations only a Network \
                 Load Balancer reads are ignored: {}). To get a Network Load Balancer, create a \
                 new Service with the annotation and move traffic to it, or delete and recreate \
                 this Service; to silence this, set the annotation back",
                key::TYPE,
                key::TARGET_GROUP_ATTRIBUTES
            )
        );
    }
}
