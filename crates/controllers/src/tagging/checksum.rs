//! The value of the tagged label: upstream's checksum of the tags (MD5 of
//! the sorted `key=value` pairs joined by commas, in hex), so nodes an
//! upstream CCM tagged are not tagged again after a swap.

use std::collections::BTreeMap;

use md5::{Digest, Md5};

/// Upstream's `getChecksumOfTags`.
pub(super) fn of(tags: &BTreeMap<String, String>) -> String {
    let mut pairs: Vec<String> = tags.iter().map(|(k, v)| format!("{k}={v}")).collect();
    pairs.sort();
    let digest = Md5::digest(pairs.join(",").as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checksum_is_upstreams_md5_of_the_sorted_pairs() {
        let tags = BTreeMap::from([
            ("team".to_owned(), "platform".to_owned()),
            ("cost-center".to_owned(), "42".to_owned()),
        ]);
        // printf 'cost-center=42,team=platform' | md5sum
        assert_eq!(of(&tags), "6f52f4973ed001170dfb8ad1ef0f40dc");
    }
}
