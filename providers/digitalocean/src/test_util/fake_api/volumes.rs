//! Block storage volumes as the fake API stores and renders them
//! (`GET /v2/volumes/{volume_id}`), with the fields of the spec's
//! `volume_full`.

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::{AccountState, droplets::region_json, not_found};

/// A block storage volume in the fake account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeVolume {
    /// Its ID, a UUID.
    pub id: String,
    /// Its name.
    pub name: String,
    /// The slug of its region.
    pub region: String,
    /// Its size in GiB.
    pub size_gigabytes: u32,
}

impl FakeVolume {
    /// A 10 GiB volume `id` named `pvc-<first group of id>` in `region`.
    pub fn new(id: &str, region: &str) -> Self {
        Self {
            id: id.to_owned(),
            name: format!("pvc-{}", id.split('-').next().unwrap_or_default()),
            region: region.to_owned(),
            size_gigabytes: 10,
        }
    }

    /// The volume as the API renders it.
    pub fn to_json(&self) -> Value {
        json!({
            "id": self.id,
            "droplet_ids": [],
            "name": self.name,
            "description": "",
            "size_gigabytes": self.size_gigabytes,
            "created_at": "2024-01-15T10:00:00Z",
            "tags": [],
            "region": region_json(&self.region),
            "filesystem_type": "ext4",
            "filesystem_label": ""
        })
    }
}

/// `GET /v2/volumes/{volume_id}`.
pub(super) fn get(account: &AccountState, id: &str) -> (StatusCode, Value) {
    match account.volumes.get(id) {
        Some(v) => (StatusCode::OK, json!({"volume": v.to_json()})),
        None => not_found(),
    }
}
