//! Free disk space where CI builds: said up front when short, and its low
//! point through the run printed at the end. A full disk otherwise fails a
//! build halfway, naming only a file the compiler could not write.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

const GIB: u64 = 1 << 30;

/// What one `cargo xtask ci` on a fresh machine takes at its peak, with a
/// margin: the target directory, the e2e and image tools, and the Go build
/// of the real control plane (17.5 GiB by the run's own low-water mark on
/// 2026-12-06, once `target/debug` was pruned of what runs left behind).
pub(crate) const NEEDED_GIB: u64 = 22;

/// How often the low-water mark is sampled, and for how long at most.
const SAMPLE_EVERY: Duration = Duration::from_secs(5);
const SAMPLE_FOR: Duration = Duration::from_secs(4 * 3600);

/// Bytes free for an unprivileged writer on `path`'s filesystem, from
/// `df -Pk` (POSIX output: the fourth column of the second line, in KiB).
pub(crate) fn free_bytes(path: &Path) -> Option<u64> {
    let out = crate::cmd::output("df", &["-Pk", path.to_str()?])?;
    parse_df(&out)
}

fn parse_df(out: &str) -> Option<u64> {
    let kib: u64 = out
        .lines()
        .nth(1)?
        .split_whitespace()
        .nth(3)?
        .parse()
        .ok()?;
    Some(kib * 1024)
}

pub(crate) fn gib(bytes: u64) -> f64 {
    bytes as f64 / GIB as f64
}

/// The lowest free space seen on one filesystem since [`LowWater::start`].
#[derive(Debug)]
pub(crate) struct LowWater {
    path: PathBuf,
    at_start: Option<u64>,
    lowest: Arc<AtomicU64>,
}

impl LowWater {
    /// Samples `path`'s filesystem in the background; says at once when
    /// less than [`NEEDED_GIB`] is free.
    pub(crate) fn start(path: &Path) -> Self {
        let at_start = free_bytes(path);
        match at_start {
            Some(free) if free < NEEDED_GIB * GIB => println!(
                "xtask ci: WARNING: {:.1} GiB free on {}, and a run on a fresh machine needs \
                 about {NEEDED_GIB} GiB: it may stop with `No space left on device`",
                gib(free),
                path.display()
            ),
            Some(_) => {}
            None => println!("xtask ci: could not read free disk space (`df -Pk`)"),
        }
        let lowest = Arc::new(AtomicU64::new(at_start.unwrap_or(u64::MAX)));
        let sampled = Arc::clone(&lowest);
        let sampled_path = path.to_owned();
        std::thread::spawn(move || {
            let samples = SAMPLE_FOR.as_secs() / SAMPLE_EVERY.as_secs();
            for _ in 0..samples {
                std::thread::sleep(SAMPLE_EVERY);
                if let Some(free) = free_bytes(&sampled_path) {
                    sampled.fetch_min(free, Ordering::Relaxed);
                }
            }
        });
        Self {
            path: path.to_owned(),
            at_start,
            lowest,
        }
    }

    /// One line: free space at the start and at its lowest, and the most
    /// the run took.
    pub(crate) fn summary(&self) -> String {
        let lowest = self.lowest.load(Ordering::Relaxed);
        match self.at_start {
            Some(start) => format!(
                "disk on {}: {:.1} GiB free at the start, {:.1} GiB at the lowest \
                 (the run took up to {:.1} GiB)",
                self.path.display(),
                gib(start),
                gib(lowest),
                gib(start.saturating_sub(lowest))
            ),
            None => format!("disk on {}: free space unknown", self.path.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn df_posix_output_gives_the_available_column_in_bytes() {
        let out = "Filesystem     1024-blocks      Used Available Capacity Mounted on\n\
                   /dev/vda         263174212  88080384   7733248      92% /\n";
        assert_eq!(parse_df(out), Some(7_733_248 * 1024));
        assert_eq!(parse_df("Filesystem 1024-blocks\n"), None);
    }

    #[test]
    fn the_repository_filesystem_reports_free_space() {
        assert!(free_bytes(&crate::cmd::repo_root()).is_some());
    }
}
