//! Flags, configuration and wiring of a cloud-controller-manager binary.
//!
//! Start with [`run`]: a `cmd/` binary calls it with its provider's
//! [`ProviderFactory`] and nothing else. It parses upstream-compatible flags,
//! builds the provider from `--cloud-config`, the Kubernetes client, the
//! health and metrics server (HTTPS with delegated authentication and
//! authorization, as upstream's secure serving), runs leader election and,
//! while this process leads, the enabled controllers.
//!
//! # Exit codes
//! - 0: stopped by SIGTERM or SIGINT (the lease is released first), or
//!   `--help` / `--version`.
//! - 64: bad input — an unknown flag, a malformed value, an unreadable or
//!   invalid cloud config, leader-migration config, certificate, key or CA
//!   file — with one line saying what and where.
//! - 1: a runtime failure, such as losing leadership of the main or the
//!   migration Lease (as upstream, the process exits and is restarted), a
//!   provider that cannot initialize, or a failed lookup of the cluster's
//!   authentication ConfigMap.

mod admission;
mod audit;
mod client;
mod debug;
mod flags;
mod leader_metrics;
mod logging;
mod migration;
mod process_metrics;
mod server;
mod serving;
mod start;
mod supervisor;
mod version;

use std::process::ExitCode;

use ccm_cloud_provider::{Environment, ProviderFactory};

/// The flag parsers and the admission webhook's answers, for the fuzz
/// targets (`testing/fuzz-targets`) and the binaries' tests: not an API.
#[doc(hidden)]
pub mod fuzzing {
    use std::time::Duration;

    use ccm_cloud_provider::ProviderFactory;

    /// Parses and validates `args` (program name first) as provider `F`'s
    /// binary does, without starting anything; the one line a bad flag
    /// exits 64 with.
    pub fn check_flags<F: ProviderFactory>(args: Vec<String>) -> Result<(), String> {
        crate::flags::provider::parse_for(F::NAME, F::PROVIDER_CONTROLLERS, args).map(drop)
    }

    /// Go's `time.ParseDuration`, as the duration flags read it.
    pub fn parse_go_duration(text: &str) -> Result<Duration, String> {
        crate::flags::duration::parse(text)
    }

    /// The admission webhook's answer to `body` (an AdmissionReview, as the
    /// API server posts it) for `cloud`, under the default policy: the
    /// review to send back as JSON, or why the body is answered 400.
    pub fn admission_review(
        cloud: &dyn ccm_cloud_provider::CloudProvider,
        body: &[u8],
    ) -> Result<String, String> {
        let review = crate::admission::respond(cloud, body, crate::admission::Policy::default())?;
        serde_json::to_string(&review).map_err(|e| e.to_string())
    }

    /// The admission webhook's verdict on `service` (and `old`, the stored
    /// Service on an update) for `cloud`, as `--webhook-strict` decides when
    /// `strict`: the refusal, if any, and the warnings. For the binaries'
    /// tests of their provider's keys.
    pub fn admission_verdict(
        cloud: &dyn ccm_cloud_provider::CloudProvider,
        old: Option<&k8s_openapi::api::core::v1::Service>,
        service: &k8s_openapi::api::core::v1::Service,
        strict: bool,
    ) -> (Option<String>, Vec<String>) {
        let policy = if strict {
            crate::admission::Policy::Strict
        } else {
            crate::admission::Policy::Upstream
        };
        let verdict = crate::admission::decide(cloud.load_balancer(), old, service, policy);
        (verdict.refusal, verdict.warnings)
    }

    /// Go's `time.Duration.String()`, as `/configz` writes durations.
    pub fn format_go_duration(d: Duration) -> String {
        crate::debug::configz::go_duration(d)
    }
}

/// Exit code for bad input (BSD's `EX_USAGE`).
pub const EXIT_USAGE: u8 = 64;

/// Runs the cloud-controller-manager for provider `F` with the process's
/// arguments and environment.
pub fn run<F: ProviderFactory>() -> ExitCode {
    run_with::<F>(std::env::args().collect(), Environment::from_process())
}

/// [`run`] with explicit arguments (program name first) and environment.
pub fn run_with<F: ProviderFactory>(args: Vec<String>, env: Environment) -> ExitCode {
    let program = args
        .first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .map_or_else(
            || format!("{}-cloud-controller-manager", F::NAME),
            |n| n.to_string_lossy().into_owned(),
        );
    if args.get(1).map(String::as_str) == Some("audit") {
        let args = std::iter::once(program.clone())
            .chain(args.into_iter().skip(2))
            .collect();
        return run_audit::<F>(&program, args, env);
    }
    let misplaced_audit = args.iter().skip(1).any(|a| a == "audit");
    #[allow(
        clippy::print_stdout,
        clippy::print_stderr,
        reason = "the entry point reports to the terminal"
    )]
    let settings = match flags::provider::parse_for(F::NAME, F::PROVIDER_CONTROLLERS, args) {
        Ok(flags::Command::Run(settings)) => settings,
        Ok(flags::Command::Help(text)) => {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
        Ok(flags::Command::Version { raw }) => {
            let build = &version::BUILD;
            if raw {
                println!("{}", build.raw(&program, F::NAME));
            } else {
                println!("{}", build.line(&program, F::NAME));
            }
            return ExitCode::SUCCESS;
        }
        Err(message) if misplaced_audit => {
            eprintln!(
                "{program}: {message} (`audit` is a subcommand: put it first, before any flag)"
            );
            return ExitCode::from(EXIT_USAGE);
        }
        Err(message) => {
            eprintln!("{program}: {message}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    logging::init(&settings.logging);
    for note in &settings.notes {
        tracing::info!("{note}");
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            tracing::error!(error = %err, "could not start the async runtime");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(start::run::<F>(*settings, env));
    exit_code(&program, result)
}

/// `<binary> audit ...`: see [`audit`].
fn run_audit<F: ProviderFactory>(program: &str, args: Vec<String>, env: Environment) -> ExitCode {
    #[allow(
        clippy::print_stdout,
        clippy::print_stderr,
        reason = "the entry point reports to the terminal"
    )]
    let options = match audit::options::parse(F::NAME, F::PROVIDER_CONTROLLERS, program, args) {
        Ok(audit::options::Parsed::Run(options)) => *options,
        Ok(audit::options::Parsed::Help(text)) => {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("{program}: {message}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    logging::init(&options.settings.logging);
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            tracing::error!(error = %err, "could not start the async runtime");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(audit::run::<F>(options, env));
    exit_code(program, result)
}

/// The exit code for how a run ended, with its one line on standard error.
fn exit_code(program: &str, result: Result<(), start::Failure>) -> ExitCode {
    #[allow(
        clippy::print_stderr,
        reason = "the entry point reports to the terminal"
    )]
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(start::Failure::Usage(message)) => {
            eprintln!("{program}: {message}");
            ExitCode::from(EXIT_USAGE)
        }
        Err(start::Failure::Runtime(message)) => {
            tracing::error!("{message}");
            eprintln!("{program}: {message}");
            ExitCode::FAILURE
        }
    }
}
