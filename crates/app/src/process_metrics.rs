//! The process's own metrics, read at scrape time: the `process_*` family
//! Prometheus' Go client exports for every upstream CCM (CPU seconds,
//! resident and virtual memory, file descriptors, start time), and the heap
//! as jemalloc counts it, the counterpart of Go's `go_memstats_heap_*`:
//! `ccm_heap_allocated_bytes` (live allocations) and
//! `ccm_heap_resident_bytes` (the allocator's resident pages). RSS also
//! counts the binary's own pages and pages the allocator keeps for reuse;
//! the live heap is what grows when state leaks.
//!
//! Linux only, as upstream's collector: on a system without `/proc` the
//! `process_*` metrics are left out rather than reported as zero.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// `/proc`'s clock ticks per second: `USER_HZ`, 100 on every Linux
/// architecture's ABI (Go's procfs assumes the same).
const USER_HZ: f64 = 100.0;

/// What `/proc/self` says of this process.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Process {
    cpu_seconds: f64,
    resident_bytes: i64,
    virtual_bytes: i64,
    start_time_seconds: f64,
}

impl Process {
    /// Reads `/proc/self/stat`, `/proc/self/status` and `/proc/stat` (boot
    /// time); `None` where one is missing or malformed.
    fn read() -> Option<Self> {
        let read = |path| std::fs::read_to_string(path).ok();
        Self::parse(
            &read("/proc/self/stat")?,
            &read("/proc/self/status")?,
            boot_time(&read("/proc/stat")?)?,
        )
    }

    /// Parses `/proc/<pid>/stat`, whose fields are counted after the
    /// command name (which may hold spaces and parentheses, proc(5)), and
    /// the memory sizes of `/proc/<pid>/status`, in KiB.
    fn parse(stat: &str, status: &str, boot_time: u64) -> Option<Self> {
        let (_, rest) = stat.rsplit_once(") ")?;
        let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
        // `rest` starts at field 3 (state); proc(5) numbers from 1.
        let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
        let ticks = field(14)? + field(15)?;
        let started = field(22)?;
        let kib = |key: &str| -> Option<i64> {
            let line = status.lines().find_map(|l| l.strip_prefix(key))?;
            let kib: i64 = line
                .trim_start_matches(':')
                .split_whitespace()
                .next()?
                .parse()
                .ok()?;
            kib.checked_mul(1024)
        };
        Some(Self {
            cpu_seconds: ticks as f64 / USER_HZ,
            resident_bytes: kib("VmRSS")?,
            virtual_bytes: kib("VmSize")?,
            start_time_seconds: boot_time as f64 + started as f64 / USER_HZ,
        })
    }
}

/// `btime` of `/proc/stat`: when the system booted, in seconds since the
/// epoch.
fn boot_time(stat: &str) -> Option<u64> {
    stat.lines()
        .find_map(|line| line.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()
}

/// The soft limit on open files, from `/proc/self/limits`.
fn max_fds(limits: &str) -> Option<i64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    let soft = line
        .strip_prefix("Max open files")?
        .split_whitespace()
        .next()?;
    // "unlimited" is what Go's collector reports as its largest value.
    Some(soft.parse().unwrap_or(i64::MAX))
}

fn open_fds() -> Option<i64> {
    let count = std::fs::read_dir("/proc/self/fd").ok()?.count();
    // The directory handle being read is one of them.
    i64::try_from(count.saturating_sub(1)).ok()
}

/// jemalloc's counts of the heap, refreshed (`epoch`) before each read:
/// bytes in live allocations and bytes of the allocator's resident pages.
fn heap() -> Option<(i64, i64)> {
    tikv_jemalloc_ctl::epoch::advance().ok()?;
    let allocated = tikv_jemalloc_ctl::stats::allocated::read().ok()?;
    let resident = tikv_jemalloc_ctl::stats::resident::read().ok()?;
    Some((
        i64::try_from(allocated).ok()?,
        i64::try_from(resident).ok()?,
    ))
}

/// Registered once at start-up; everything is read at scrape time.
#[derive(Debug, Default)]
pub(crate) struct ProcessMetrics;

impl Collector for ProcessMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let mut gauge = |name: &str, help: &str, value: i64| {
            ConstGauge::new(value).encode(encoder.encode_descriptor(
                name,
                help,
                None,
                MetricType::Gauge,
            )?)
        };
        if let Some((allocated, resident)) = heap() {
            gauge(
                "ccm_heap_allocated_bytes",
                "Bytes in live heap allocations (jemalloc's stats.allocated): what grows when state leaks",
                allocated,
            )?;
            gauge(
                "ccm_heap_resident_bytes",
                "Bytes of physically resident pages the heap allocator holds, its metadata and pages kept for reuse included (jemalloc's stats.resident)",
                resident,
            )?;
        }
        if let Some(fds) = open_fds() {
            gauge("process_open_fds", "Number of open file descriptors.", fds)?;
        }
        if let Some(max) = std::fs::read_to_string("/proc/self/limits")
            .ok()
            .as_deref()
            .and_then(max_fds)
        {
            gauge(
                "process_max_fds",
                "Maximum number of open file descriptors.",
                max,
            )?;
        }
        let Some(process) = Process::read() else {
            return Ok(());
        };
        gauge(
            "process_resident_memory_bytes",
            "Resident memory size in bytes.",
            process.resident_bytes,
        )?;
        gauge(
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes.",
            process.virtual_bytes,
        )?;
        ConstGauge::new(process.start_time_seconds).encode(encoder.encode_descriptor(
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds.",
            None,
            MetricType::Gauge,
        )?)?;
        ConstCounter::new(process.cpu_seconds).encode(encoder.encode_descriptor(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds.",
            None,
            MetricType::Counter,
        )?)
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;
    use prometheus_client::registry::Registry;

    use std::time::{SystemTime, UNIX_EPOCH};

    use super::*;

    /// The value of the one sample of `name` in `text`.
    fn sample(text: &str, name: &str) -> f64 {
        let line = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no {name} in:\n{text}"));
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    fn scrape() -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(ProcessMetrics));
        let mut text = String::new();
        encode(&mut text, &registry).expect("encodes");
        text
    }

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        // A command name with a space and parentheses in it.
        let stat = "4242 (ccm (x) y) S 1 4242 4242 0 -1 4194560 500 0 0 0 \
                    250 50 0 0 20 0 8 0 1234 104857600 2048 18446744073709551615";
        let status = "Name:\tccm\nVmPeak:\t  204800 kB\nVmSize:\t  102400 kB\nVmHWM:\t   9000 kB\nVmRSS:\t    8192 kB\n";
        let process = Process::parse(stat, status, 1_700_000_000).expect("parses");
        assert!((process.cpu_seconds - 3.0).abs() < 1e-9, "{process:?}");
        assert_eq!(process.resident_bytes, 8192 * 1024);
        assert_eq!(process.virtual_bytes, 102_400 * 1024);
        assert!(
            (process.start_time_seconds - 1_700_000_012.34).abs() < 1e-3,
            "{process:?}"
        );
        assert_eq!(Process::parse("4242 (ccm) S 1 2", status, 0), None);
        assert_eq!(Process::parse(stat, "Name:\tccm\n", 0), None);
    }

    #[test]
    fn boot_time_and_the_open_files_limit_are_read() {
        assert_eq!(
            boot_time("cpu  1 2 3\nbtime 1700000000\nprocesses 9\n"),
            Some(1_700_000_000)
        );
        assert_eq!(boot_time("cpu  1 2 3\n"), None);
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max open files            1024                 524288               files     \n";
        assert_eq!(max_fds(limits), Some(1024));
        let unlimited =
            "Max open files            unlimited            unlimited            files\n";
        assert_eq!(max_fds(unlimited), Some(i64::MAX));
    }

    #[test]
    fn this_process_reports_its_memory_cpu_and_start() {
        let text = scrape();
        let resident = sample(&text, "process_resident_memory_bytes");
        let virtual_bytes = sample(&text, "process_virtual_memory_bytes");
        assert!(resident > 1e6 && virtual_bytes >= resident, "{text}");
        let started = sample(&text, "process_start_time_seconds");
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!(started > 1.5e9 && started <= now + 1.0, "{text}");
        assert!(sample(&text, "process_cpu_seconds_total") >= 0.0, "{text}");
        assert!(sample(&text, "process_open_fds") >= 3.0, "{text}");
        assert!(sample(&text, "process_max_fds") >= sample(&text, "process_open_fds"));
        assert!(
            text.contains("# TYPE process_cpu_seconds counter"),
            "{text}"
        );
    }

    /// One try: the live heap before, while holding and after dropping
    /// 256 MiB written so the pages are really used, and the resident
    /// bytes while holding it.
    fn heap_around_256_mib() -> [f64; 4] {
        let before = sample(&scrape(), "ccm_heap_allocated_bytes");
        let held = vec![1u8; 256 << 20];
        let during = sample(&scrape(), "ccm_heap_allocated_bytes");
        let resident = sample(&scrape(), "ccm_heap_resident_bytes");
        assert_eq!(held.iter().map(|&b| u64::from(b)).sum::<u64>(), 256 << 20);
        drop(held);
        let after = sample(&scrape(), "ccm_heap_allocated_bytes");
        [before, during, resident, after]
    }

    #[test]
    fn the_live_heap_follows_what_is_allocated_and_freed() {
        // The heap is the process's: another test of this binary freeing or
        // allocating tens of MiB (the debug endpoints' 64 MiB profiles) at
        // the same moment moves it too. So up to five tries, each of which
        // must see the whole 256 MiB come and go within 56 MiB.
        const MIB: f64 = 1024.0 * 1024.0;
        let mut tries = Vec::new();
        for _ in 0..5 {
            let [before, during, resident, after] = heap_around_256_mib();
            if during - before > 200.0 * MIB
                && resident >= 250.0 * MIB
                && during - after > 200.0 * MIB
            {
                return;
            }
            tries.push(format!(
                "before {before}, holding {during} (resident {resident}), after {after}"
            ));
        }
        panic!("the heap never followed 256 MiB: {tries:#?}");
    }
}
