//! Object UIDs and `generateName` suffixes.

use std::time::{SystemTime, UNIX_EPOCH};

/// The alphabet Kubernetes draws `generateName` suffixes from: no vowels,
/// no look-alikes, so generated names never spell words.
const SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// A xorshift generator seeded from the clock: ids need to be unique, not
/// unpredictable.
#[derive(Debug)]
pub(crate) struct IdSource {
    state: u64,
}

impl IdSource {
    pub(crate) fn new() -> Self {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0x9e37_79b9_7f4a_7c15);
        Self { state: nanos | 1 }
    }

    fn next(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.state = x;
        x
    }

    /// A random (version 4) UUID, as Kubernetes assigns `metadata.uid`.
    pub(crate) fn uid(&mut self) -> String {
        let hi = self.next();
        let lo = self.next();
        let hi = (hi & !0xf000) | 0x4000;
        let lo = (lo & !(0xc << 60)) | (0x8 << 60);
        format!(
            "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            hi >> 32,
            (hi >> 16) & 0xffff,
            hi & 0xffff,
            lo >> 48,
            lo & 0xffff_ffff_ffff
        )
    }

    /// Five characters appended to a `generateName` prefix.
    pub(crate) fn name_suffix(&mut self) -> String {
        let len = SUFFIX_ALPHABET.len() as u64;
        (0..5)
            .map(|_| char::from(SUFFIX_ALPHABET[(self.next() % len) as usize]))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uids_are_distinct_version_4_uuids() {
        let mut ids = IdSource::new();
        let a = ids.uid();
        let b = ids.uid();
        assert_ne!(a, b);
        let parts: Vec<&str> = a.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(parts[2].starts_with('4'), "{a}");
        assert!(
            matches!(parts[3].chars().next(), Some('8' | '9' | 'a' | 'b')),
            "{a}"
        );
    }

    #[test]
    fn name_suffixes_use_the_kubernetes_alphabet() {
        let mut ids = IdSource::new();
        let suffix = ids.name_suffix();
        assert_eq!(suffix.len(), 5);
        assert!(suffix.bytes().all(|b| SUFFIX_ALPHABET.contains(&b)));
    }
}
