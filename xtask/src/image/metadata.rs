//! The image's facts (what it holds, its version and commit, when and
//! where it is published), which its labels, OCI files and SBOM are
//! written from.

use std::collections::BTreeMap;

use jiff::Timestamp;

use crate::timestamp::rfc3339;

/// What the image says about itself.
#[derive(Debug, Clone)]
pub(crate) struct Metadata {
    /// `aws`, `digitalocean` or `fake`.
    pub(crate) provider: String,
    /// `<provider>-cloud-controller-manager`.
    pub(crate) binary_name: String,
    pub(crate) version: String,
    /// The commit the image is built from.
    pub(crate) revision: String,
    /// The repository URL.
    pub(crate) source: String,
    /// `SOURCE_DATE_EPOCH`: the image's creation time.
    pub(crate) created: Timestamp,
    /// Where the image is published, without tag.
    pub(crate) repository: String,
}

impl Metadata {
    /// `repository:version`.
    pub(crate) fn reference(&self) -> String {
        format!("{}:{}", self.repository, self.version)
    }

    pub(crate) fn labels(&self) -> BTreeMap<&'static str, String> {
        BTreeMap::from([
            ("org.opencontainers.image.title", self.binary_name.clone()),
            ("org.opencontainers.image.source", self.source.clone()),
            ("org.opencontainers.image.version", self.version.clone()),
            ("org.opencontainers.image.revision", self.revision.clone()),
            ("org.opencontainers.image.created", rfc3339(self.created)),
            ("org.opencontainers.image.licenses", "Apache-2.0".to_owned()),
            ("io.github.rust-ccm.provider", self.provider.clone()),
        ])
    }
}

#[cfg(test)]
impl Metadata {
    /// The fake provider's image at a fixed commit and time, for tests.
    pub(crate) fn example() -> Self {
        Self {
            provider: "fake".into(),
            binary_name: "fake-cloud-controller-manager".into(),
            version: "0.1.0".into(),
            revision: "0123abc".into(),
            source: "https://example.com/ccm".into(),
            created: Timestamp::from_second(1_700_000_000).unwrap_or(Timestamp::UNIX_EPOCH),
            repository: "registry.example/fake-cloud-controller-manager".into(),
        }
    }
}
