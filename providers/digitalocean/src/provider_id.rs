//! Provider IDs `digitalocean://<droplet-id>`: made and read.

/// The scheme of a DigitalOcean node's `spec.providerID`.
pub const PROVIDER_ID_PREFIX: &str = "digitalocean://";

/// The droplet ID in a provider ID `digitalocean://<droplet-id>`, or `None`
/// when it is not one.
pub fn droplet_id_from_provider_id(provider_id: &str) -> Option<u64> {
    let id = provider_id.strip_prefix(PROVIDER_ID_PREFIX)?;
    // `u64::from_str` accepts a leading `+`; a droplet ID is digits only.
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    id.parse().ok()
}

pub(crate) fn provider_id(droplet_id: u64) -> String {
    format!("{PROVIDER_ID_PREFIX}{droplet_id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_only_digitalocean_droplet_ids() {
        assert_eq!(
            droplet_id_from_provider_id("digitalocean://3164444"),
            Some(3_164_444)
        );
        for bad in [
            "",
            "digitalocean://",
            "digitalocean://+1",
            "digitalocean://abc",
            "aws:///i-1",
            "3164444",
        ] {
            assert_eq!(droplet_id_from_provider_id(bad), None, "{bad:?}");
        }
        assert_eq!(provider_id(7), "digitalocean://7");
    }
}
