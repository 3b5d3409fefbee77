//! `/debug/pprof/`: Go's `net/http/pprof` paths, with the profiles this
//! process can honestly produce — CPU (`profile`, sampled on SIGPROF by
//! pprof-rs) and heap (`heap`, jemalloc's sampling profiler) as gzipped
//! pprof protobufs that `go tool pprof` reads — and the command line.
//!
//! Go's other profiles describe its runtime (goroutines, OS threads it
//! created, blocking and lock contention as its scheduler sees them, the
//! execution tracer); they have no counterpart here and answer 404 with
//! the reason, as the index says.

use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, Query};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use flate2::Compression;
use flate2::write::GzEncoder;

/// Go's default CPU profile length, when `seconds` is absent or not positive.
const DEFAULT_SECONDS: u64 = 30;

/// The longest CPU profile served. Go's only limit is the server's write
/// timeout; an unbounded request would hold the one profiler forever.
pub(crate) const MAX_SECONDS: u64 = 300;

/// Go's CPU sampling rate.
const SAMPLES_PER_SECOND: i32 = 100;

/// The profiles served, with Go's descriptions.
const AVAILABLE: [(&str, &str); 3] = [
    (
        "cmdline",
        "The command line invocation of the current program",
    ),
    (
        "heap",
        "A sampling of memory allocations of live objects (jemalloc's heap profiler, one sample per 512 KiB allocated on average; memory the C libraries allocate is not included).",
    ),
    (
        "profile",
        "CPU profile. You can specify the duration in the seconds GET parameter (default 30, at most 300). After you get the profile file, use the go tool pprof command to investigate the profile.",
    ),
];

/// Go's profiles that have no counterpart in this process, and why.
const UNAVAILABLE: [(&str, &str); 7] = [
    (
        "allocs",
        "jemalloc samples live allocations only; there is no record of past ones (see heap)",
    ),
    (
        "block",
        "blocking as Go's scheduler sees it; there is no Go runtime here (--contention-profiling does nothing)",
    ),
    (
        "goroutine",
        "stack traces of Go's goroutines; async tasks have no equivalent stacks",
    ),
    (
        "mutex",
        "lock contention as Go's runtime records it; there is no Go runtime here",
    ),
    (
        "threadcreate",
        "stack traces of the Go runtime's thread creation; there is no Go runtime here",
    ),
    (
        "symbol",
        "symbol lookup for Go's binary; the profiles served here carry their symbols",
    ),
    (
        "trace",
        "Go's execution tracer; there is no Go runtime here",
    ),
];

/// Said on the index of a static musl build (the images): pprof-rs unwinds
/// from its signal handler, and the unwinder stops at musl's signal
/// trampoline, which has no unwind info. pprof-rs's framehop unwinder,
/// which starts from the interrupted registers, is the candidate fix.
#[cfg(target_env = "musl")]
const CPU_NOTE: &str = "<p>In this static musl build CPU samples are counted but their stacks are empty: the unwinder stops at musl's signal trampoline.</p>\n";
#[cfg(not(target_env = "musl"))]
const CPU_NOTE: &str = "";

/// Why a profile could not be served.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProfileError {
    /// Another CPU profile is being taken: there is one profiler per process.
    #[error("Could not enable CPU profiling: cpu profiling already in use")]
    CpuBusy,
    /// `seconds` asked for more than [`MAX_SECONDS`].
    #[error("profile duration exceeds the limit of {MAX_SECONDS} seconds")]
    TooLong,
    /// The profiler did not start.
    #[error("Could not enable CPU profiling: {0}")]
    CpuStart(#[source] ::pprof::Error),
    /// The samples could not be turned into a profile.
    #[error("could not build the CPU profile: {0}")]
    CpuReport(#[source] ::pprof::Error),
    /// jemalloc was built without its heap profiler switched on.
    #[error(
        "heap profiling is off: jemalloc was built without prof:true (JEMALLOC_SYS_WITH_MALLOC_CONF, set in .cargo/config.toml)"
    )]
    HeapOff,
    /// jemalloc's dump or its conversion failed.
    #[error("could not dump the heap profile: {0}")]
    HeapDump(String),
    /// The profile could not be compressed.
    #[error("could not compress the profile: {0}")]
    Compress(#[source] std::io::Error),
    /// The blocking task building the profile panicked or was cancelled.
    #[error("the profiling task failed: {0}")]
    Task(#[source] tokio::task::JoinError),
    /// `debug=N` (Go's legacy text format) was asked for.
    #[error("debug={0}: only the protobuf format (debug=0) is served")]
    TextFormat(String),
}

impl IntoResponse for ProfileError {
    fn into_response(self) -> Response {
        let status = match self {
            Self::TooLong | Self::TextFormat(_) => StatusCode::BAD_REQUEST,
            Self::HeapOff => StatusCode::NOT_IMPLEMENTED,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        serve_error(status, &self.to_string())
    }
}

/// Go's `serveError`: plain text and the `X-Go-Pprof` marker.
fn serve_error(status: StatusCode, text: &str) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            (header::HeaderName::from_static("x-go-pprof"), "1"),
        ],
        format!("{text}\n"),
    )
        .into_response()
}

pub(super) fn routes() -> Router {
    Router::new()
        .route("/debug/pprof", get(redirect_to_index))
        .route("/debug/pprof/", get(index))
        .route("/debug/pprof/cmdline", get(cmdline))
        .route("/debug/pprof/profile", get(cpu_profile))
        .route("/debug/pprof/{name}", get(named))
}

/// Go's `redirectTo`: 302 Found.
async fn redirect_to_index() -> impl IntoResponse {
    (StatusCode::FOUND, [(header::LOCATION, "/debug/pprof/")])
}

/// Turns jemalloc's allocation sampling off (`--profiling=false`).
pub(super) async fn stop_heap_sampling() {
    jemalloc_pprof::deactivate_jemalloc_profiling().await;
}

async fn index() -> impl IntoResponse {
    let mut html = String::from(
        "<html>\n<head>\n<title>/debug/pprof/</title>\n</head>\n<body>\n/debug/pprof/\n<br>\n<p>Profiles are gzipped pprof protobufs: go tool pprof reads them.</p>\nTypes of profiles available:\n<table>\n<thead><td>Profile</td><td>Description</td></thead>\n",
    );
    for (name, description) in AVAILABLE {
        html.push_str(&format!(
            "<tr><td><a href='{name}'>{name}</a></td><td>{description}</td></tr>\n"
        ));
    }
    html.push_str("</table>\n");
    html.push_str(CPU_NOTE);
    html.push_str("<p>\nNot available in this process (404):\n<ul>\n");
    for (name, reason) in UNAVAILABLE {
        html.push_str(&format!("<li>{name}: {reason}</li>\n"));
    }
    html.push_str("</ul>\n</p>\n</body>\n</html>\n");
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        html,
    )
}

/// Go's `Cmdline`: the process's arguments separated by NUL bytes.
async fn cmdline() -> impl IntoResponse {
    let args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    (
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        args.join("\0"),
    )
}

/// `/debug/pprof/{name}`: the heap, or why Go's other profiles are absent.
async fn named(Path(name): Path<String>, Query(query): Query<HashMap<String, String>>) -> Response {
    if name == "heap" {
        return match heap_profile(&query).await {
            Ok(body) => profile_response(body, "heap"),
            Err(err) => err.into_response(),
        };
    }
    match UNAVAILABLE.iter().find(|(n, _)| *n == name) {
        Some((_, reason)) => serve_error(
            StatusCode::NOT_FOUND,
            &format!("Unknown profile: {name} is not available in this process: {reason}"),
        ),
        None => serve_error(StatusCode::NOT_FOUND, "Unknown profile"),
    }
}

fn profile_response(body: Vec<u8>, name: &str) -> Response {
    (
        [
            (header::CONTENT_TYPE, "application/octet-stream".to_owned()),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff".to_owned()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{name}\""),
            ),
        ],
        body,
    )
        .into_response()
}

/// Go's `Profile`: samples every thread's stack 100 times a second for
/// `seconds` (default 30), one profile at a time.
async fn cpu_profile(Query(query): Query<HashMap<String, String>>) -> Response {
    match take_cpu_profile(profile_seconds(query.get("seconds").map(String::as_str))).await {
        Ok(body) => profile_response(body, "profile"),
        Err(err) => err.into_response(),
    }
}

/// Go's reading of `seconds`: anything but a positive whole number means
/// the default; above [`MAX_SECONDS`] is refused.
pub(crate) fn profile_seconds(text: Option<&str>) -> Result<u64, ProfileError> {
    match text.and_then(|t| t.parse::<i64>().ok()) {
        Some(n) if n > 0 => match u64::try_from(n) {
            Ok(n) if n <= MAX_SECONDS => Ok(n),
            _ => Err(ProfileError::TooLong),
        },
        _ => Ok(DEFAULT_SECONDS),
    }
}

/// Held while a CPU profile is taken; released on drop, also when the
/// client goes away mid-profile and the handler is dropped.
struct CpuClaim;

static CPU_PROFILING: AtomicBool = AtomicBool::new(false);

/// Whether a CPU profile is being taken.
#[cfg(test)]
pub(super) fn cpu_profile_running() -> bool {
    CPU_PROFILING.load(Ordering::Acquire)
}

impl CpuClaim {
    fn take() -> Result<Self, ProfileError> {
        CPU_PROFILING
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| Self)
            .map_err(|_| ProfileError::CpuBusy)
    }
}

impl Drop for CpuClaim {
    fn drop(&mut self) {
        CPU_PROFILING.store(false, Ordering::Release);
    }
}

async fn take_cpu_profile(seconds: Result<u64, ProfileError>) -> Result<Vec<u8>, ProfileError> {
    let seconds = seconds?;
    let claim = CpuClaim::take()?;
    let guard = ::pprof::ProfilerGuardBuilder::default()
        .frequency(SAMPLES_PER_SECOND)
        // Unwinding through these from a signal handler can deadlock
        // (pprof-rs's advice); a static binary has none of them.
        .blocklist(&["libc", "libgcc", "pthread", "vdso"])
        .build()
        .map_err(ProfileError::CpuStart)?;
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    // Symbolizing reads debug info: blocking work, off the async threads.
    tokio::task::spawn_blocking(move || {
        let profile = guard
            .report()
            .build()
            .and_then(|report| report.pprof())
            .map_err(ProfileError::CpuReport)?;
        drop(guard);
        drop(claim);
        gzip(&::pprof::protos::Message::encode_to_vec(&profile))
    })
    .await
    .map_err(ProfileError::Task)?
}

async fn heap_profile(query: &HashMap<String, String>) -> Result<Vec<u8>, ProfileError> {
    if let Some(debug) = query.get("debug").filter(|d| d.as_str() != "0") {
        return Err(ProfileError::TextFormat(debug.clone()));
    }
    let ctl = jemalloc_pprof::PROF_CTL
        .as_ref()
        .ok_or(ProfileError::HeapOff)?
        .clone();
    // jemalloc writes the dump to a file, which is then read and symbolized.
    tokio::task::spawn_blocking(move || {
        ctl.blocking_lock()
            .dump_pprof()
            .map_err(|e| ProfileError::HeapDump(format!("{e:#}")))
    })
    .await
    .map_err(ProfileError::Task)?
}

/// pprof's wire format: a gzipped `Profile` message, as Go serves it.
fn gzip(bytes: &[u8]) -> Result<Vec<u8>, ProfileError> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
    encoder.write_all(bytes).map_err(ProfileError::Compress)?;
    encoder.finish().map_err(ProfileError::Compress)
}
