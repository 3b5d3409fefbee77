//! Tool builds on threads of their own at idle CPU priority, for
//! `cargo xtask ci` on a fresh machine: the Go control plane, the Go and
//! cargo tools. They use the CPU the Rust compile and the test runs leave
//! idle (a crate's long single-threaded stretch, a suite waiting on a
//! timer) instead of taking a core from them, and each step that needs a
//! tool joins its build first. A cached tool returns at once.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::thread::JoinHandle;

use anyhow::{Context, bail};

/// A build running in the background; its output, where the build writes
/// one, in `log`.
pub(crate) struct Build<T> {
    what: &'static str,
    handle: JoinHandle<anyhow::Result<T>>,
    log: Option<PathBuf>,
}

/// Starts `build` on a new thread at idle priority (SCHED_IDLE, which the
/// processes it starts inherit).
pub(crate) fn spawn<T: Send + 'static>(
    what: &'static str,
    log: Option<PathBuf>,
    build: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
) -> Build<T> {
    let handle = std::thread::spawn(move || {
        if let Err(err) = idle_priority() {
            println!("xtask: {what} builds at normal priority: {err:#}");
        }
        build()
    });
    Build { what, handle, log }
}

impl<T> Build<T> {
    /// Waits for the build; on failure, says why with the end of its log.
    pub(crate) fn join(self) -> anyhow::Result<T> {
        let built = self
            .handle
            .join()
            .map_err(|_| anyhow::anyhow!("the {} build's thread panicked", self.what))?;
        built.map_err(|err| match &self.log {
            Some(log) => {
                let text = std::fs::read_to_string(log).unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                let tail = lines[lines.len().saturating_sub(40)..].join("\n");
                anyhow::anyhow!("{err:#}\nthe end of {}:\n{tail}", log.display())
            }
            None => err,
        })
    }
}

/// Puts the calling thread in the idle scheduling class (`chrt --idle`
/// on its thread id): it and what it starts run only on CPU no other
/// process wants.
fn idle_priority() -> anyhow::Result<()> {
    let tid = this_thread_id()?;
    let status = Command::new("chrt")
        .args(["--idle", "--pid", "0", &tid])
        .stdout(Stdio::null())
        .status()
        .context("starting chrt (util-linux)")?;
    if !status.success() {
        bail!("chrt --idle --pid 0 {tid} failed ({status})");
    }
    Ok(())
}

/// The calling thread's id, from `/proc/thread-self` (`<pid>/task/<tid>`).
fn this_thread_id() -> anyhow::Result<String> {
    let link = std::fs::read_link("/proc/thread-self").context("reading /proc/thread-self")?;
    link.file_name()
        .and_then(|name| name.to_str())
        .map(str::to_owned)
        .with_context(|| format!("/proc/thread-self points at {}", link.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The thread's policy as `chrt --pid` reports it.
    fn policy_of_this_thread() -> String {
        let tid = this_thread_id().unwrap();
        let out = Command::new("chrt").args(["--pid", &tid]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    #[test]
    fn a_background_build_and_what_it_starts_run_at_idle_priority() {
        let build = spawn("probe", None, || {
            let thread = policy_of_this_thread();
            let child = Command::new("chrt").args(["--pid", "0"]).output()?;
            Ok((thread, String::from_utf8_lossy(&child.stdout).into_owned()))
        });
        let (thread, child) = build.join().unwrap();
        assert!(thread.contains("SCHED_IDLE"), "{thread}");
        assert!(child.contains("SCHED_IDLE"), "{child}");
        assert!(
            !policy_of_this_thread().contains("SCHED_IDLE"),
            "only the build's thread is lowered"
        );
    }

    #[test]
    fn a_failed_build_says_why_with_the_end_of_its_log() {
        let log = std::env::temp_dir().join(format!("xtask-background-{}.log", std::process::id()));
        std::fs::write(&log, "line 1\nthe compiler's complaint\n").unwrap();
        let build = spawn("probe", Some(log.clone()), || -> anyhow::Result<()> {
            bail!("exit status 2")
        });
        let err = format!("{:#}", build.join().unwrap_err());
        std::fs::remove_file(&log).unwrap();
        assert!(err.starts_with("exit status 2"), "{err}");
        assert!(err.ends_with("the compiler's complaint"), "{err}");
    }
}
