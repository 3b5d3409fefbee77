//! The machine a run measured: CPU, memory, kernel, and what else was
//! using the CPU meanwhile (other processes' CPU time over the run).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Instant;

use serde_json::{Value, json};

use super::measurements::{clock_ticks_per_second, cpu_ticks, parent_pid};

/// A process's CPU ticks so far, by PID, with its command name.
type Ticks = HashMap<u32, (String, u64)>;

/// The machine, observed at the start of a run.
#[derive(Debug)]
pub(crate) struct Machine {
    pub(crate) cpu: String,
    pub(crate) cores: usize,
    pub(crate) memory_gib: f64,
    pub(crate) kernel: String,
    pub(crate) load_at_start: String,
    started: Instant,
    ticks: Ticks,
}

/// Other processes' share of the CPU over a run.
#[derive(Debug, Clone)]
pub(crate) struct OtherActivity {
    pub(crate) load_at_end: String,
    /// Command name → share of one core over the run, in percent, for
    /// commands using at least 1%.
    pub(crate) busy: Vec<(String, f64)>,
}

impl Machine {
    pub(crate) fn observe() -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name")?.split_once(':'))
            .map_or_else(|| "unknown".to_owned(), |(_, v)| v.trim().to_owned());
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let memory_kib: f64 = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0.0);
        Self {
            cpu,
            cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
            memory_gib: (memory_kib / 1024.0 / 1024.0 * 10.0).round() / 10.0,
            kernel: read_trimmed("/proc/sys/kernel/osrelease"),
            load_at_start: load_average(),
            started: Instant::now(),
            ticks: all_ticks(),
        }
    }

    /// What other processes did since [`Machine::observe`]: this process
    /// and its descendants are left out.
    pub(crate) fn others(&self) -> OtherActivity {
        let now = all_ticks();
        let ours = this_process_tree();
        let seconds = self.started.elapsed().as_secs_f64().max(1.0);
        let hz = clock_ticks_per_second();
        let mut by_name: BTreeMap<String, f64> = BTreeMap::new();
        for (pid, (name, ticks)) in &now {
            if ours.contains(pid) {
                continue;
            }
            // A process that started during the run counts from zero.
            let before = self
                .ticks
                .get(pid)
                .filter(|(n, _)| n == name)
                .map_or(0, |(_, t)| *t);
            *by_name.entry(name.clone()).or_default() += ticks.saturating_sub(before) as f64 / hz;
        }
        let mut busy: Vec<(String, f64)> = by_name
            .into_iter()
            .map(|(name, cpu)| (name, (cpu / seconds * 1000.0).round() / 10.0))
            .filter(|(_, share)| *share >= 1.0)
            .collect();
        busy.sort_by(|a, b| b.1.total_cmp(&a.1));
        OtherActivity {
            load_at_end: load_average(),
            busy,
        }
    }

    pub(crate) fn to_json(&self, others: &OtherActivity) -> Value {
        json!({
            "cpu": self.cpu,
            "cores": self.cores,
            "memory_gib": self.memory_gib,
            "kernel": self.kernel,
            "load_average_at_start": self.load_at_start,
            "load_average_at_end": others.load_at_end,
            "other_processes_cpu_percent_of_one_core": others
                .busy
                .iter()
                .map(|(name, share)| json!({"command": name, "percent": share}))
                .collect::<Vec<_>>(),
        })
    }
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "unknown".to_owned())
}

/// The 1, 5 and 15-minute load averages.
fn load_average() -> String {
    read_trimmed("/proc/loadavg")
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .map(|dir| {
            dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The command name between the parentheses of `/proc/<pid>/stat`.
fn command_name(stat: &str) -> Option<&str> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    stat.get(open + 1..close)
}

fn all_ticks() -> Ticks {
    pids()
        .into_iter()
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let name = command_name(&stat)?.to_owned();
            Some((pid, (name, cpu_ticks(&stat)?)))
        })
        .collect()
}

/// This process, its descendants, and its ancestors (cargo, the shell),
/// which wait for it.
fn this_process_tree() -> HashSet<u32> {
    let parents: HashMap<u32, u32> = pids()
        .into_iter()
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            Some((pid, parent_pid(&stat)?))
        })
        .collect();
    let me = std::process::id();
    let mut ours: HashSet<u32> = HashSet::from([me]);
    // Bounded: each pass adds a generation; no process tree is deeper.
    for _ in 0..64 {
        let before = ours.len();
        for (pid, parent) in &parents {
            if ours.contains(parent) {
                ours.insert(*pid);
            }
        }
        if ours.len() == before {
            break;
        }
    }
    let mut ancestor = parents.get(&me).copied();
    while let Some(pid) = ancestor.filter(|p| *p > 1 && ours.insert(*p)) {
        ancestor = parents.get(&pid).copied();
    }
    ours
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_names_may_hold_parentheses() {
        assert_eq!(command_name("12 (a (b) c) S 1"), Some("a (b) c"));
    }

    #[test]
    fn this_process_counts_as_ours() {
        assert!(this_process_tree().contains(&std::process::id()));
    }
}
