//! How busy the machine's CPUs were over a stretch of the run, from
//! `/proc/stat`: the step durations show which steps compute and which
//! wait, and so what the background builds had to share.

/// The machine's CPU time so far, in clock ticks: busy and all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Ticks {
    busy: u64,
    total: u64,
}

impl Ticks {
    /// Now, or nothing where `/proc/stat` cannot be read.
    pub(super) fn now() -> Option<Self> {
        parse(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    /// The share of `since`..`self` the CPUs were busy, 0 to 1.
    fn busy_since(self, since: Self) -> Option<f64> {
        let total = self.total.checked_sub(since.total)?;
        let busy = self.busy.checked_sub(since.busy)?;
        (total > 0).then(|| busy as f64 / total as f64)
    }
}

/// The share of the time since `since` the CPUs were busy, 0 to 1; nothing
/// where `/proc/stat` could not be read then or now.
pub(super) fn busy_since(since: Option<Ticks>) -> Option<f64> {
    Ticks::now()?.busy_since(since?)
}

/// The first line of `/proc/stat` (`cpu user nice system idle iowait irq
/// softirq steal …`): idle and iowait are not busy, the rest is (nice
/// counts, and so do the idle-priority builds).
fn parse(stat: &str) -> Option<Ticks> {
    let line = stat.lines().next()?.strip_prefix("cpu ")?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    // guest and guest_nice (the ninth and tenth) are counted in user and
    // nice already.
    let total: u64 = fields.iter().take(8).sum();
    let idle = fields.get(3)? + fields.get(4).copied().unwrap_or(0);
    Some(Ticks {
        busy: total.checked_sub(idle)?,
        total,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_and_iowait_are_not_busy_and_guests_are_not_counted_twice() {
        let stat = "cpu  100 20 30 800 50 0 0 0 40 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n";
        let ticks = parse(stat).unwrap();
        assert_eq!(
            ticks,
            Ticks {
                busy: 150,
                total: 1000
            }
        );
        let later = Ticks {
            busy: 250,
            total: 1400,
        };
        assert_eq!(later.busy_since(ticks), Some(0.25));
        assert_eq!(ticks.busy_since(ticks), None);
        assert_eq!(parse("intr 1 2 3"), None);
    }
}
