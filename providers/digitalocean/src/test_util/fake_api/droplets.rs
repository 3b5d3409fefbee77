//! Droplets as the fake API stores and renders them: every field the spec
//! requires, so responses validate.

use serde_json::{Value, json};

/// A droplet in the fake account.
#[derive(Debug, Clone)]
pub struct FakeDroplet {
    pub id: u64,
    pub name: String,
    /// `new`, `active`, `off` or `archive`.
    pub status: String,
    pub size_slug: String,
    pub region: String,
    pub private_ipv4: Option<String>,
    pub public_ipv4: Option<String>,
    pub public_ipv6: Option<String>,
    pub tags: Vec<String>,
}

impl FakeDroplet {
    /// An active `s-2vcpu-4gb` droplet in nyc3 with private and public IPv4
    /// addresses derived from `id`.
    pub fn new(id: u64, name: &str) -> Self {
        let (a, b) = ((id / 250) % 250, id % 250 + 1);
        Self {
            id,
            name: name.to_owned(),
            status: "active".to_owned(),
            size_slug: "s-2vcpu-4gb".to_owned(),
            region: "nyc3".to_owned(),
            private_ipv4: Some(format!("10.10.{a}.{b}")),
            public_ipv4: Some(format!("203.0.{a}.{b}")),
            public_ipv6: None,
            tags: Vec::new(),
        }
    }

    #[must_use]
    pub fn with_status(mut self, status: &str) -> Self {
        self.status = status.to_owned();
        self
    }

    #[must_use]
    pub fn with_ipv6(mut self, ip: &str) -> Self {
        self.public_ipv6 = Some(ip.to_owned());
        self
    }

    pub fn to_json(&self) -> Value {
        let mut v4 = Vec::new();
        if let Some(ip) = &self.private_ipv4 {
            v4.push(json!({"ip_address": ip, "netmask": "255.255.0.0", "gateway": "nil", "type": "private"}));
        }
        if let Some(ip) = &self.public_ipv4 {
            v4.push(json!({"ip_address": ip, "netmask": "255.255.255.0", "gateway": "203.0.0.1", "type": "public"}));
        }
        let v6: Vec<Value> = self
            .public_ipv6
            .iter()
            .map(|ip| json!({"ip_address": ip, "netmask": 64, "gateway": "2604:a880::1", "type": "public"}))
            .collect();
        json!({
            "id": self.id,
            "name": self.name,
            "memory": 4096,
            "vcpus": 2,
            "disk": 80,
            "locked": false,
            "status": self.status,
            "kernel": null,
            "created_at": "2024-01-15T10:00:00Z",
            "features": ["private_networking"],
            "backup_ids": [],
            "next_backup_window": null,
            "snapshot_ids": [],
            "image": {
                "id": 63663980,
                "name": "24.04 (LTS) x64",
                "distribution": "Ubuntu",
                "slug": "ubuntu-24-04-x64",
                "public": true,
                "regions": ["nyc3"],
                "created_at": "2024-01-01T00:00:00Z",
                "type": "base",
                "min_disk_size": 20,
                "size_gigabytes": 2.36,
                "description": "",
                "tags": [],
                "status": "available",
                "error_message": ""
            },
            "volume_ids": [],
            "size": {
                "slug": self.size_slug,
                "memory": 4096,
                "vcpus": 2,
                "disk": 80,
                "transfer": 4.0,
                "price_monthly": 24.0,
                "price_hourly": 0.03571,
                "regions": ["nyc3"],
                "available": true,
                "description": "Basic"
            },
            "size_slug": self.size_slug,
            "networks": {"v4": v4, "v6": v6},
            "region": region_json(&self.region),
            "tags": self.tags,
            "vpc_uuid": "760e09ef-dc84-11e8-981e-3cfdfeaae000"
        })
    }
}

/// A region object with every field the spec requires.
pub fn region_json(slug: &str) -> Value {
    json!({
        "name": format!("Region {slug}"),
        "slug": slug,
        "features": ["private_networking", "metadata"],
        "available": true,
        "sizes": ["s-1vcpu-1gb", "s-2vcpu-4gb"]
    })
}
