//! Files served again when they change on disk, without a restart, as
//! upstream's dynamic certificate content: a bounded poll compares each
//! file's bytes with what was last loaded.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use tokio_util::sync::CancellationToken;

use super::Error;

/// How often files are read again in production (upstream polls every
/// minute and also watches the files; a short poll is simpler and as quick).
pub(super) const DEFAULT_INTERVAL: Duration = Duration::from_secs(5);

/// One file and the flag that named it, for error messages.
#[derive(Debug, Clone)]
pub(super) struct Source {
    pub(super) flag: &'static str,
    pub(super) path: PathBuf,
}

impl Source {
    pub(super) fn new(flag: &'static str, path: impl Into<PathBuf>) -> Self {
        Self {
            flag,
            path: path.into(),
        }
    }

    /// The file's bytes.
    ///
    /// # Errors
    /// [`Error::Read`] naming the flag and path.
    pub(super) fn read(&self) -> Result<Vec<u8>, Error> {
        std::fs::read(&self.path).map_err(|source| Error::Read {
            flag: self.flag,
            path: self.path.clone(),
            source,
        })
    }

    /// [`Error::Invalid`] for this file.
    pub(super) fn invalid(&self, reason: impl Into<String>) -> Error {
        Error::Invalid {
            flag: self.flag,
            path: self.path.clone(),
            reason: reason.into(),
        }
    }
}

/// How `N` files become a value.
pub(super) type Parse<T, const N: usize> = fn(&[Source; N], &[Vec<u8>; N]) -> Result<T, Error>;

/// Every file's bytes, or the first that cannot be read.
fn read_all<const N: usize>(sources: &[Source; N]) -> Result<[Vec<u8>; N], Error> {
    let mut contents = [(); N].map(|()| Vec::new());
    for (slot, source) in contents.iter_mut().zip(sources) {
        *slot = source.read()?;
    }
    Ok(contents)
}

/// A value built from files, rebuilt when their contents change. A change
/// that does not parse (a key written before its certificate) keeps the
/// last good value and is tried again at the next poll.
pub(super) struct FileBacked<T, const N: usize> {
    sources: [Source; N],
    parse: Parse<T, N>,
    loaded: Mutex<[Vec<u8>; N]>,
    current: RwLock<Arc<T>>,
}

impl<T, const N: usize> std::fmt::Debug for FileBacked<T, N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileBacked")
            .field("sources", &self.sources)
            .finish_non_exhaustive()
    }
}

impl<T: Send + Sync + 'static, const N: usize> FileBacked<T, N> {
    /// Reads and parses `sources` once.
    ///
    /// # Errors
    /// The first file that cannot be read, or why the contents do not parse.
    pub(super) fn load(sources: [Source; N], parse: Parse<T, N>) -> Result<Self, Error> {
        let contents = read_all(&sources)?;
        let value = parse(&sources, &contents)?;
        Ok(Self {
            sources,
            parse,
            loaded: Mutex::new(contents),
            current: RwLock::new(Arc::new(value)),
        })
    }

    /// The value last loaded.
    pub(super) fn current(&self) -> Arc<T> {
        self.current.read().clone()
    }
}

/// Something [`Reloader`] polls.
pub(super) trait Reload: Send + Sync + std::fmt::Debug {
    /// Reads the files again; true when a new value was loaded.
    fn reload(&self) -> bool;
}

impl<T: Send + Sync + 'static, const N: usize> Reload for FileBacked<T, N> {
    fn reload(&self) -> bool {
        let contents = match read_all(&self.sources) {
            Ok(contents) => contents,
            Err(err) => {
                tracing::warn!(error = %err, "keeping the last loaded certificate");
                return false;
            }
        };
        if *self.loaded.lock() == contents {
            return false;
        }
        match (self.parse)(&self.sources, &contents) {
            Ok(value) => {
                *self.current.write() = Arc::new(value);
                *self.loaded.lock() = contents;
                let files: Vec<_> = self
                    .sources
                    .iter()
                    .map(|s| s.path.display().to_string())
                    .collect();
                tracing::info!(files = %files.join(", "), "reloaded");
                true
            }
            Err(err) => {
                tracing::warn!(error = %err, "keeping the last loaded certificate");
                false
            }
        }
    }
}

/// Polls every registered file set until shutdown.
#[derive(Debug, Default)]
pub(super) struct Reloader {
    watched: Vec<Arc<dyn Reload>>,
}

impl Reloader {
    pub(super) fn watch(&mut self, item: Arc<dyn Reload>) {
        self.watched.push(item);
    }

    /// Polls every `interval` until `shutdown`; nothing to watch, no task.
    pub(super) fn spawn(self, interval: Duration, shutdown: CancellationToken) {
        if self.watched.is_empty() {
            return;
        }
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(interval);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticks.tick().await;
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    _ = ticks.tick() => {}
                }
                for item in &self.watched {
                    item.reload();
                }
            }
        });
    }
}
