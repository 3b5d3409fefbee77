//! Availability zones by name: their IDs (for `topology.k8s.aws/zone-id`)
//! and types (load balancers only go in `availability-zone` zones). Zones
//! never change, so one `DescribeAvailabilityZones` answers for the process,
//! repeated only when a zone it has not seen turns up.

use std::collections::HashMap;

use parking_lot::RwLock;

use crate::api::{Api, ApiError};

/// The node label upstream sets to the zone's ID, such as `use1-az6`.
pub const ZONE_ID_LABEL: &str = "topology.k8s.aws/zone-id";

/// The zone type of regular zones, as opposed to local or wavelength zones.
pub(crate) const REGULAR_ZONE: &str = "availability-zone";

/// What is known of one zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Zone {
    /// The zone ID, such as `use1-az6`.
    pub(crate) id: String,
    /// The zone type, such as `availability-zone` or `local-zone`.
    pub(crate) kind: String,
}

#[derive(Debug, Default)]
pub(crate) struct ZoneCache {
    zones: RwLock<HashMap<String, Zone>>,
}

impl ZoneCache {
    /// The zones named `names` that exist; unknown names are left out.
    pub(crate) async fn lookup(
        &self,
        api: &Api,
        names: &[&str],
    ) -> Result<HashMap<String, Zone>, ApiError> {
        if names.iter().any(|n| !self.read().contains_key(*n)) {
            let out = api
                .call("DescribeAvailabilityZones", || {
                    api.ec2.describe_availability_zones().send()
                })
                .await?;
            let mut zones = self.zones.write();
            for zone in out.availability_zones() {
                if let Some(name) = zone.zone_name() {
                    zones.insert(
                        name.to_owned(),
                        Zone {
                            id: zone.zone_id().unwrap_or_default().to_owned(),
                            kind: zone.zone_type().unwrap_or(REGULAR_ZONE).to_owned(),
                        },
                    );
                }
            }
        }
        let zones = self.read();
        Ok(names
            .iter()
            .filter_map(|n| zones.get(*n).map(|z| ((*n).to_owned(), z.clone())))
            .collect())
    }

    fn read(&self) -> parking_lot::RwLockReadGuard<'_, HashMap<String, Zone>> {
        self.zones.read()
    }
}
