//! A small time-to-live cache for review answers, keyed by a SHA-256
//! digest, so no token (or review body) is ever kept or logged as a key.

use std::collections::HashMap;

use parking_lot::Mutex;
use sha2::{Digest, Sha256};
use tokio::time::{Duration, Instant};

/// At most this many answers are kept; beyond it, expired ones are dropped,
/// then the soonest to expire.
const MAX_ENTRIES: usize = 4096;

/// The SHA-256 digest of whatever a cache entry stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Key([u8; 32]);

impl Key {
    /// The digest of `material` (a token, a serialized review).
    pub(super) fn of(material: &[u8]) -> Self {
        Self(Sha256::digest(material).into())
    }
}

/// Answers that expire, each after its own time to live, on tokio's clock
/// (so tests on a paused clock drive expiry with `tokio::time::advance`).
#[derive(Debug)]
pub(super) struct TtlCache<V> {
    entries: Mutex<HashMap<Key, (Instant, V)>>,
}

impl<V> Default for TtlCache<V> {
    fn default() -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
        }
    }
}

impl<V: Clone> TtlCache<V> {
    /// The answer for `key` if it has not expired.
    pub(super) fn get(&self, key: &Key) -> Option<V> {
        let mut entries = self.entries.lock();
        match entries.get(key) {
            Some((expires, value)) if Instant::now() < *expires => Some(value.clone()),
            Some(_) => {
                entries.remove(key);
                None
            }
            None => None,
        }
    }

    /// Keeps `value` for `ttl`; a zero `ttl` keeps nothing.
    pub(super) fn insert(&self, key: Key, value: V, ttl: Duration) {
        if ttl.is_zero() {
            return;
        }
        let now = Instant::now();
        let mut entries = self.entries.lock();
        if entries.len() >= MAX_ENTRIES && !entries.contains_key(&key) {
            entries.retain(|_, (expires, _)| now < *expires);
            if entries.len() >= MAX_ENTRIES
                && let Some(soonest) = entries
                    .iter()
                    .min_by_key(|(_, (expires, _))| *expires)
                    .map(|(k, _)| *k)
            {
                entries.remove(&soonest);
            }
        }
        entries.insert(key, (now + ttl, value));
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.entries.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_answer_lives_exactly_its_ttl() {
        let cache = TtlCache::default();
        let key = Key::of(b"token");
        cache.insert(key, "alice", Duration::from_secs(10));
        tokio::time::advance(Duration::from_millis(9_999)).await;
        assert_eq!(cache.get(&key), Some("alice"));
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(cache.get(&key), None);
        assert_eq!(cache.len(), 0, "an expired answer is dropped when read");
    }

    #[tokio::test(start_paused = true)]
    async fn a_zero_ttl_caches_nothing() {
        let cache = TtlCache::default();
        cache.insert(Key::of(b"t"), 1, Duration::ZERO);
        assert_eq!(cache.get(&Key::of(b"t")), None);
    }

    #[test]
    fn keys_are_digests_and_never_show_the_material() {
        let key = Key::of(b"secret-token-value");
        assert_eq!(key, Key::of(b"secret-token-value"));
        assert_ne!(key, Key::of(b"secret-token-valuf"));
        assert!(!format!("{key:?}").contains("secret"));
        // The digest of the bytes, not the bytes.
        assert_ne!(&key.0[..18], b"secret-token-value");
    }

    #[tokio::test(start_paused = true)]
    async fn the_cache_is_bounded() {
        let cache = TtlCache::default();
        for i in 0..(MAX_ENTRIES + 10) {
            cache.insert(
                Key::of(&i.to_le_bytes()),
                i,
                Duration::from_secs(10 + i as u64),
            );
        }
        assert_eq!(cache.len(), MAX_ENTRIES);
        let newest = MAX_ENTRIES + 9;
        assert_eq!(cache.get(&Key::of(&newest.to_le_bytes())), Some(newest));
        assert_eq!(cache.get(&Key::of(&0usize.to_le_bytes())), None);
    }
}
