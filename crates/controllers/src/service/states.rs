//! The service controller's gauges, read off the Service informer's store
//! at scrape time: `ccm_service_load_balancers{state}` (this controller's
//! Services by state: provisioned, pending, failing) and
//! `ccm_service_load_balancer_failing{namespace,service}` (1 for each
//! Service whose last sync failed). A Service that is deleted drops out of
//! both with no bookkeeping; the failing set only remembers keys.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;
use kube::runtime::reflector::Store;
use parking_lot::Mutex;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;

use super::records::key_of;
use super::spec;

/// The keys (`namespace/name`) of Services whose last sync failed.
#[derive(Debug, Clone, Default)]
pub(super) struct Failing(Arc<Mutex<BTreeSet<String>>>);

impl Failing {
    /// Records the outcome of one sync of `service`.
    pub(super) fn record(&self, service: &Service, ok: bool) {
        let key = key_of(service);
        let mut failing = self.0.lock();
        if ok {
            failing.remove(&key);
        } else {
            failing.insert(key);
        }
    }

    /// Forgets a Service that is no longer this controller's.
    pub(super) fn forget(&self, service: &Service) {
        self.0.lock().remove(&key_of(service));
    }

    fn contains(&self, key: &str) -> bool {
        self.0.lock().contains(key)
    }
}

/// A load balancer's state, as the gauge labels it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Provisioned,
    Pending,
    Failing,
}

impl State {
    const ALL: [Self; 3] = [Self::Provisioned, Self::Pending, Self::Failing];

    fn label(self) -> &'static str {
        match self {
            Self::Provisioned => "provisioned",
            Self::Pending => "pending",
            Self::Failing => "failing",
        }
    }

    /// Failing wins over the status: a provisioned load balancer whose
    /// update fails is failing.
    fn of(service: &Service, failing: bool) -> Self {
        let has_ingress = service
            .status
            .as_ref()
            .and_then(|s| s.load_balancer.as_ref())
            .and_then(|lb| lb.ingress.as_ref())
            .is_some_and(|ingress| !ingress.is_empty());
        if failing {
            Self::Failing
        } else if has_ingress {
            Self::Provisioned
        } else {
            Self::Pending
        }
    }
}

/// Encodes both gauges from the store and the failing set.
pub(super) struct States {
    pub(super) services: Store<Service>,
    pub(super) failing: Failing,
}

impl std::fmt::Debug for States {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("States")
            .field("failing", &self.failing)
            .finish_non_exhaustive()
    }
}

impl Collector for States {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let mut counts = [0_i64; 3];
        let mut failing = Vec::new();
        for service in self.services.state() {
            if !spec::is_ours(&service) {
                continue;
            }
            let key = key_of(&service);
            let is_failing = self.failing.contains(&key);
            let state = State::of(&service, is_failing);
            if let Some(i) = State::ALL.iter().position(|s| *s == state) {
                counts[i] += 1;
            }
            if is_failing {
                failing.push(key);
            }
        }
        failing.sort_unstable();

        let mut family = encoder.encode_descriptor(
            "ccm_service_load_balancers",
            "LoadBalancer Services this controller manages, by state: provisioned (has an ingress), pending (none yet), failing (its last sync failed)",
            None,
            MetricType::Gauge,
        )?;
        for (state, count) in State::ALL.iter().zip(counts) {
            let labels = [("state", state.label())];
            ConstGauge::new(count).encode(family.encode_family(&labels)?)?;
        }
        let mut family = encoder.encode_descriptor(
            "ccm_service_load_balancer_failing",
            "1 for each Service whose last load-balancer sync failed; gone once one succeeds or the Service is gone",
            None,
            MetricType::Gauge,
        )?;
        for key in &failing {
            let (namespace, service) = key.split_once('/').unwrap_or(("", key));
            let labels = [("namespace", namespace), ("service", service)];
            ConstGauge::new(1_i64).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{
        LoadBalancerIngress, LoadBalancerStatus, ServiceSpec, ServiceStatus,
    };
    use kube::api::ObjectMeta;
    use kube::runtime::reflector::store;
    use kube::runtime::watcher;
    use prometheus_client::encoding::text::encode;
    use prometheus_client::registry::Registry;

    use super::*;

    fn service(name: &str, kind: &str, ingress: bool) -> Service {
        Service {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                ..ObjectMeta::default()
            },
            spec: Some(ServiceSpec {
                type_: Some(kind.into()),
                ..ServiceSpec::default()
            }),
            status: Some(ServiceStatus {
                load_balancer: Some(LoadBalancerStatus {
                    ingress: ingress.then(|| {
                        vec![LoadBalancerIngress {
                            ip: Some("192.0.2.1".into()),
                            ..LoadBalancerIngress::default()
                        }]
                    }),
                }),
                ..ServiceStatus::default()
            }),
        }
    }

    fn scrape(services: Vec<Service>, failing: &Failing) -> String {
        let (reader, mut writer) = store::<Service>();
        writer.apply_watcher_event(&watcher::Event::Init);
        for service in services {
            writer.apply_watcher_event(&watcher::Event::InitApply(service));
        }
        writer.apply_watcher_event(&watcher::Event::InitDone);
        let mut registry = Registry::default();
        registry.register_collector(Box::new(States {
            services: reader,
            failing: failing.clone(),
        }));
        let mut text = String::new();
        encode(&mut text, &registry).expect("encodes");
        text
    }

    #[test]
    fn services_are_counted_by_state_and_failing_ones_named() {
        let failing = Failing::default();
        let broken = service("broken", "LoadBalancer", true);
        failing.record(&broken, false);
        let text = scrape(
            vec![
                service("up", "LoadBalancer", true),
                service("new", "LoadBalancer", false),
                service("plain", "ClusterIP", false),
                broken,
            ],
            &failing,
        );
        for line in [
            "ccm_service_load_balancers{state=\"provisioned\"} 1\n",
            "ccm_service_load_balancers{state=\"pending\"} 1\n",
            "ccm_service_load_balancers{state=\"failing\"} 1\n",
            "ccm_service_load_balancer_failing{namespace=\"default\",service=\"broken\"} 1\n",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
    }

    #[test]
    fn a_failing_service_drops_out_when_it_succeeds_or_is_gone() {
        let failing = Failing::default();
        let broken = service("broken", "LoadBalancer", false);
        failing.record(&broken, false);
        let gone = scrape(vec![], &failing);
        assert!(!gone.contains("service=\"broken\""), "{gone}");
        failing.record(&broken, true);
        let healed = scrape(vec![broken], &failing);
        assert!(!healed.contains("service=\"broken\""), "{healed}");
        assert!(
            healed.contains("ccm_service_load_balancers{state=\"pending\"} 1\n"),
            "{healed}"
        );
    }
}
