//! A small time-to-live cache for review answers, keyed by a SHA-256
//! digest, so no token (or review body) is ever kept or logged as a key.
//! Concurrent misses for one key make one review, as upstream's
//! single-flight token cache.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

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
    /// One lock per key being fetched, so its concurrent misses wait for
    /// the first instead of each asking.
    in_flight: Arc<Mutex<HashMap<Key, Arc<tokio::sync::Mutex<()>>>>>,
}

impl<V> Default for TtlCache<V> {
    fn default() -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
            in_flight: Arc::default(),
        }
    }
}

/// Forgets a key's in-flight lock when its fetch ends, however it ends.
struct InFlight {
    key: Key,
    map: Arc<Mutex<HashMap<Key, Arc<tokio::sync::Mutex<()>>>>>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.map.lock().remove(&self.key);
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

    /// The cached answer for `key`, else `fetch`'s, kept for the TTL it
    /// returns. While one caller fetches, others asking for the same key
    /// wait and take its answer; a failed fetch is not kept.
    ///
    /// # Errors
    /// `fetch`'s error.
    pub(super) async fn get_or_fetch<E>(
        &self,
        key: Key,
        fetch: impl Future<Output = Result<(V, Duration), E>>,
    ) -> Result<V, E> {
        if let Some(value) = self.get(&key) {
            return Ok(value);
        }
        let lock = self.in_flight.lock().entry(key).or_default().clone();
        let _turn = lock.lock().await;
        if let Some(value) = self.get(&key) {
            return Ok(value);
        }
        let _forget = InFlight {
            key,
            map: self.in_flight.clone(),
        };
        let (value, ttl) = fetch.await?;
        self.insert(key, value.clone(), ttl);
        Ok(value)
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
    async fn concurrent_misses_for_one_key_fetch_once() {
        let cache = Arc::new(TtlCache::default());
        let fetches = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let callers: Vec<_> = (0..10)
            .map(|_| {
                let (cache, fetches) = (cache.clone(), fetches.clone());
                tokio::spawn(async move {
                    cache
                        .get_or_fetch(Key::of(b"token"), async {
                            fetches.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            Ok::<_, ()>(("alice", Duration::from_secs(10)))
                        })
                        .await
                })
            })
            .collect();
        for caller in callers {
            assert_eq!(caller.await.unwrap(), Ok("alice"));
        }
        assert_eq!(fetches.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert!(
            cache.in_flight.lock().is_empty(),
            "no lock outlives its fetch"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_fetch_is_not_kept() {
        let cache = TtlCache::<&str>::default();
        let failed = cache
            .get_or_fetch(Key::of(b"t"), async { Err::<(&str, Duration), _>("down") })
            .await;
        assert_eq!(failed, Err("down"));
        assert_eq!(cache.len(), 0);
        let answered = cache
            .get_or_fetch(Key::of(b"t"), async {
                Ok::<_, ()>(("bob", Duration::from_secs(1)))
            })
            .await;
        assert_eq!(answered, Ok("bob"));
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
