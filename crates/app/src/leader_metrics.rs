//! Leader election's metrics, read off the elector's handle at scrape
//! time: upstream's `leader_election_master_status` (1 while this process
//! leads) and `ccm_leader_election_renew_failures_total`. Served by every
//! candidate, so the sum over replicas counts the leaders.

use ccm_leader_election::LeaderHandle;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// One Lease's election, named as upstream labels it (the Lease's name).
#[derive(Debug)]
pub(crate) struct LeaderMetrics {
    pub(crate) handle: LeaderHandle,
    pub(crate) name: String,
}

impl Collector for LeaderMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let labels = [("name", self.name.as_str())];
        let leading = i64::from(self.handle.is_leading());
        let mut status = encoder.encode_descriptor(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease. Please make sure to group by name.",
            None,
            MetricType::Gauge,
        )?;
        ConstGauge::new(leading).encode(status.encode_family(&labels)?)?;
        let mut failures = encoder.encode_descriptor(
            "ccm_leader_election_renew_failures",
            "Renewals of the Lease that failed while this process led it (an API error, or the renew deadline passing)",
            None,
            MetricType::Counter,
        )?;
        ConstCounter::new(self.handle.renew_failures()).encode(failures.encode_family(&labels)?)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;
    use prometheus_client::registry::Registry;

    use super::*;

    #[test]
    fn a_handle_that_leads_reports_status_one_and_its_failures() {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(LeaderMetrics {
            handle: LeaderHandle::always_leader(),
            name: "cloud-controller-manager".into(),
        }));
        let mut text = String::new();
        encode(&mut text, &registry).expect("encodes");
        assert!(
            text.contains("leader_election_master_status{name=\"cloud-controller-manager\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "ccm_leader_election_renew_failures_total{name=\"cloud-controller-manager\"} 0\n"
            ),
            "{text}"
        );
    }
}
