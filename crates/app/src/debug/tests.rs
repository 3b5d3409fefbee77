//! `/debug/pprof/` and `/configz`: served profiles decode as pprof and `go
//! tool pprof` reads them; `/configz` is byte for byte what upstream's Go
//! code (v0.37.2) writes for the same flags (`testdata/configz-golden.go`).

use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use pprof::protos::Message as _;
use tower::ServiceExt as _;

use super::configz::go_duration;
use super::pprof::{MAX_SECONDS, cpu_profile_running, profile_seconds};
use crate::flags::{Command, Settings, parse};

fn settings(args: &[&str]) -> Settings {
    let argv = std::iter::once("fake-cloud-controller-manager")
        .chain(args.iter().copied())
        .map(str::to_owned);
    match parse("fake", argv) {
        Ok(Command::Run(settings)) => *settings,
        other => panic!("{args:?} should parse: {other:?}"),
    }
}

/// The status, `Content-Type` and body of a GET on `router`.
async fn get(router: &Router, uri: &str) -> anyhow::Result<(StatusCode, String, Vec<u8>)> {
    let response = router
        .clone()
        .oneshot(Request::get(uri).body(Body::empty())?)
        .await?;
    let status = response.status();
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap_or_default().to_owned())
        .unwrap_or_default();
    let body = axum::body::to_bytes(response.into_body(), 64 << 20).await?;
    Ok((status, content_type, body.to_vec()))
}

fn decode_profile(gzipped: &[u8]) -> anyhow::Result<pprof::protos::Profile> {
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(gzipped)
        .read_to_end(&mut bytes)
        .context("a pprof profile is gzipped")?;
    Ok(pprof::protos::Profile::decode(bytes.as_slice())?)
}

/// The profile's sample types as (type, unit).
fn sample_types(profile: &pprof::protos::Profile) -> Vec<(String, String)> {
    let text = |i: i64| {
        usize::try_from(i)
            .ok()
            .and_then(|i| profile.string_table.get(i))
            .cloned()
            .unwrap_or_default()
    };
    profile
        .sample_type
        .iter()
        .map(|t| (text(t.ty), text(t.unit)))
        .collect()
}

fn function_names(profile: &pprof::protos::Profile) -> Vec<String> {
    profile
        .function
        .iter()
        .filter_map(|f| usize::try_from(f.name).ok())
        .filter_map(|i| profile.string_table.get(i).cloned())
        .collect()
}

/// `go tool pprof -top` on `profile`. Go is required, not optional: CI has
/// it, and a check that skips itself proves nothing.
fn go_tool_pprof_top(profile: &[u8]) -> anyhow::Result<String> {
    let go = ["/usr/local/go/bin/go", "go"]
        .into_iter()
        .find(|go| {
            std::process::Command::new(go)
                .arg("version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .context("this test needs Go (`go tool pprof`), at /usr/local/go/bin/go or on PATH")?;
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("profile.pb.gz");
    std::fs::write(&file, profile)?;
    let output = std::process::Command::new(go)
        .args(["tool", "pprof", "-top"])
        .arg(&file)
        .env("PPROF_TMPDIR", dir.path())
        .output()?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    anyhow::ensure!(
        output.status.success(),
        "go tool pprof -top failed: {}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(stdout)
}

#[test]
fn configz_is_upstreams_json_for_the_default_flags() {
    let expected = include_str!("testdata/configz-defaults.json").trim_end();
    assert_eq!(super::configz::body(&settings(&[]), "fake"), expected);
}

#[test]
fn configz_carries_the_flags_as_upstream_does() {
    let s = settings(&[
        "--kubeconfig=/etc/kubernetes/ccm.conf",
        "--cloud-provider=fake",
        "--cloud-config=/etc/cloud.toml",
        "--cluster-name=c1",
        "--cluster-cidr=10.244.0.0/16,fd00::/48",
        "--controllers=cloud-node,service",
        "--kube-api-qps=5.5",
        "--kube-api-burst=7",
        "--leader-elect-lease-duration=30s",
        "--leader-elect-renew-deadline=20s",
        "--leader-elect-retry-period=3s",
        "--leader-elect-resource-name=ccm",
        "--leader-elect-resource-namespace=ops",
        "--node-sync-period=90s",
        "--route-reconciliation-period=1m30s",
        "--node-monitor-period=1500ms",
        "--node-status-update-frequency=1h",
        "--concurrent-service-syncs=3",
        "--concurrent-node-syncs=4",
        "--concurrent-node-lifecycle-syncs=2",
        "--enable-leader-migration",
        "--configure-cloud-routes=false",
        "--allocate-node-cidrs=true",
        "--allow-untagged-cloud=true",
        "--profiling=false",
        "--contention-profiling=true",
    ]);
    let expected = include_str!("testdata/configz-flags.json").trim_end();
    assert_eq!(super::configz::body(&s, "fake"), expected);
}

#[tokio::test]
async fn configz_serves_the_v1alpha1_kind_with_a_node_lifecycle_block() -> anyhow::Result<()> {
    let s = settings(&[
        "--node-monitor-period=7s",
        "--concurrent-node-lifecycle-syncs=3",
    ]);
    let (status, _, body) = get(&super::routes(&s, "fake", None), "/configz").await?;
    assert_eq!(status, StatusCode::OK);
    let text = String::from_utf8(body)?;
    let json: serde_json::Value = serde_json::from_str(&text)?;
    let config = &json["cloudcontrollermanager.config.k8s.io"];
    assert_eq!(config["kind"], "CloudControllerManagerConfiguration");
    assert_eq!(
        config["apiVersion"],
        "cloudcontrollermanager.config.k8s.io/v1alpha1"
    );
    assert_eq!(
        config["NodeLifecycleController"],
        serde_json::json!({"NodeMonitorPeriod": "7s", "ConcurrentNodeLifecycleSyncs": 3})
    );
    assert!(
        config["KubeCloudShared"].get("NodeMonitorPeriod").is_none(),
        "1.37 moved NodeMonitorPeriod out of KubeCloudShared"
    );
    // Go writes fields in declaration order: the new block sits between
    // NodeController and ServiceController, kind and apiVersion lead.
    let at = |key: &str| text.find(&format!("\"{key}\":")).unwrap_or(usize::MAX);
    assert!(at("kind") < at("apiVersion") && at("apiVersion") < at("Generic"));
    assert!(at("NodeController") < at("NodeLifecycleController"));
    assert!(at("NodeLifecycleController") < at("ServiceController"));
    Ok(())
}

#[test]
fn configz_node_status_updates_follow_node_syncs_unless_positive() -> anyhow::Result<()> {
    for (status_updates, expected) in [(None, 4), (Some("0"), 4), (Some("6"), 6)] {
        let flag = status_updates.map(|n| format!("--concurrent-node-status-updates={n}"));
        let mut args = vec!["--concurrent-node-syncs=4"];
        args.extend(flag.as_deref());
        let json: serde_json::Value =
            serde_json::from_str(&super::configz::body(&settings(&args), "fake"))?;
        let node_controller = &json["cloudcontrollermanager.config.k8s.io"]["NodeController"];
        assert_eq!(
            node_controller["ConcurrentNodeStatusUpdates"], expected,
            "{args:?}"
        );
    }
    Ok(())
}

#[test]
fn configz_serves_the_leader_migration_configuration_in_use() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("migration.yaml");
    std::fs::write(
        &file,
        "\
kind: LeaderMigrationConfiguration
apiVersion: controllermanager.config.k8s.io/v1
leaderName: cloud-migration
controllerLeaders:
  - name: route-controller
    component: cloud-controller-manager
",
    )?;
    let config_flag = format!("--leader-migration-config={}", file.display());
    let served = |args: &[&str]| -> anyhow::Result<serde_json::Value> {
        let json: serde_json::Value =
            serde_json::from_str(&super::configz::body(&settings(args), "fake"))?;
        Ok(json["cloudcontrollermanager.config.k8s.io"]["Generic"].clone())
    };
    let generic = served(&["--enable-leader-migration", &config_flag])?;
    assert_eq!(generic["LeaderMigrationEnabled"], true);
    assert_eq!(
        generic["LeaderMigration"],
        serde_json::json!({
            "leaderName": "cloud-migration",
            "resourceLock": "leases",
            "controllerLeaders": [
                {"name": "route-controller", "component": "cloud-controller-manager"}
            ]
        })
    );
    // Without --enable-leader-migration upstream never reads the file.
    let generic = served(&[&config_flag])?;
    assert_eq!(generic["LeaderMigrationEnabled"], false);
    assert_eq!(
        generic["LeaderMigration"],
        serde_json::json!({"leaderName": "", "resourceLock": "", "controllerLeaders": null})
    );
    Ok(())
}

#[test]
fn durations_are_written_as_go_writes_them() {
    for (duration, go) in [
        (Duration::ZERO, "0s"),
        (Duration::from_nanos(1), "1ns"),
        (Duration::from_micros(1500), "1.5ms"),
        (Duration::from_millis(100), "100ms"),
        (Duration::from_secs(2), "2s"),
        (Duration::from_millis(1500), "1.5s"),
        (Duration::from_secs(90), "1m30s"),
        (Duration::from_secs(300), "5m0s"),
        (Duration::from_secs(12 * 3600), "12h0m0s"),
        (Duration::from_millis(3_723_250), "1h2m3.25s"),
    ] {
        assert_eq!(go_duration(duration), go, "{duration:?}");
    }
}

#[test]
fn debugging_flags_default_as_upstream_and_refuse_non_booleans() {
    let s = settings(&[]);
    assert!(s.debugging.profiling);
    assert!(!s.debugging.contention_profiling);
    let s = settings(&["--profiling=false", "--contention-profiling"]);
    assert!(!s.debugging.profiling);
    assert!(s.debugging.contention_profiling);
    for flag in ["--profiling", "--contention-profiling"] {
        let argv = [
            "fake-cloud-controller-manager".to_owned(),
            format!("{flag}=maybe"),
        ];
        let err = parse("fake", argv).expect_err("not a boolean");
        assert!(err.contains(flag), "`{err}` names {flag}");
        assert!(err.contains("not a boolean"), "{err}");
    }
}

#[test]
fn cpu_profile_seconds_default_to_30_and_are_bounded() {
    assert_eq!(profile_seconds(None).ok(), Some(30));
    assert_eq!(profile_seconds(Some("0")).ok(), Some(30));
    assert_eq!(profile_seconds(Some("-5")).ok(), Some(30));
    assert_eq!(profile_seconds(Some("x")).ok(), Some(30));
    assert_eq!(profile_seconds(Some("1")).ok(), Some(1));
    assert_eq!(profile_seconds(Some("300")).ok(), Some(MAX_SECONDS));
    assert!(profile_seconds(Some("301")).is_err());
}

#[tokio::test]
async fn configz_is_served_as_json_with_profiling_on_or_off() -> anyhow::Result<()> {
    for profiling in ["--profiling=true", "--profiling=false"] {
        let s = settings(&[profiling]);
        let (status, content_type, body) =
            get(&super::routes(&s, "fake", None), "/configz").await?;
        assert_eq!(status, StatusCode::OK, "{profiling}");
        assert_eq!(content_type, "application/json");
        let json: serde_json::Value = serde_json::from_slice(&body)?;
        let config = &json["cloudcontrollermanager.config.k8s.io"];
        assert_eq!(
            config["Generic"]["Debugging"]["enableProfiling"],
            serde_json::json!(profiling.ends_with("true"))
        );
        assert_eq!(config["KubeCloudShared"]["CloudProvider"]["Name"], "fake");
    }
    Ok(())
}

#[tokio::test]
async fn profiling_false_answers_404_on_every_pprof_path() -> anyhow::Result<()> {
    let router = super::routes(&settings(&["--profiling=false"]), "fake", None);
    for path in [
        "/debug/pprof",
        "/debug/pprof/",
        "/debug/pprof/cmdline",
        "/debug/pprof/profile?seconds=1",
        "/debug/pprof/heap",
    ] {
        assert_eq!(get(&router, path).await?.0, StatusCode::NOT_FOUND, "{path}");
    }
    Ok(())
}

#[tokio::test]
async fn index_lists_served_and_unavailable_profiles() -> anyhow::Result<()> {
    let router = super::routes(&settings(&[]), "fake", None);
    let (status, content_type, body) = get(&router, "/debug/pprof/").await?;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(content_type, "text/html; charset=utf-8");
    let html = String::from_utf8(body)?;
    for served in ["href='profile'", "href='heap'", "href='cmdline'"] {
        assert!(html.contains(served), "{served} in {html}");
    }
    for absent in [
        "goroutine",
        "threadcreate",
        "block",
        "mutex",
        "allocs",
        "trace",
    ] {
        assert!(
            html.contains(&format!("<li>{absent}: ")),
            "{absent} in {html}"
        );
        let (status, _, body) = get(&router, &format!("/debug/pprof/{absent}")).await?;
        assert_eq!(status, StatusCode::NOT_FOUND, "{absent}");
        assert!(
            String::from_utf8(body)?.contains("not available"),
            "{absent}"
        );
    }
    assert_eq!(
        get(&router, "/debug/pprof/nonsense").await?.0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(get(&router, "/debug/pprof").await?.0, StatusCode::FOUND);
    let (status, _, cmdline) = get(&router, "/debug/pprof/cmdline").await?;
    assert_eq!(status, StatusCode::OK);
    assert!(!cmdline.is_empty());
    Ok(())
}

/// Keeps a thread busy until `done` (or 30 s) so the CPU profile has samples.
fn spin_until(done: &AtomicBool) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut x = 0u64;
    // Checking rarely: samples in the vDSO's clock are dropped.
    while !done.load(Ordering::Relaxed) && Instant::now() < deadline {
        for _ in 0..1_000_000 {
            x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1));
        }
    }
    x
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpu_profile_is_a_pprof_one_at_a_time_that_go_reads() -> anyhow::Result<()> {
    let router = super::routes(&settings(&[]), "fake", None);
    let first = tokio::spawn({
        let router = router.clone();
        async move { get(&router, "/debug/pprof/profile?seconds=1").await }
    });
    let done = Arc::new(AtomicBool::new(false));
    let spinner = std::thread::spawn({
        let done = done.clone();
        move || spin_until(&done)
    });
    let waited = Instant::now();
    while !cpu_profile_running() {
        anyhow::ensure!(
            waited.elapsed() < Duration::from_secs(5),
            "the first profile never started"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // A second profile while the first runs is refused, as Go refuses it.
    let (status, _, busy) = get(&router, "/debug/pprof/profile?seconds=1").await?;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    let busy = String::from_utf8(busy)?;
    assert!(busy.contains("cpu profiling already in use"), "{busy}");
    let first = first.await;
    done.store(true, Ordering::Relaxed);
    let _ = spinner.join();
    let (status, content_type, body) = first??;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    assert_eq!(content_type, "application/octet-stream");
    let profile = decode_profile(&body)?;
    assert!(
        sample_types(&profile).contains(&("cpu".into(), "nanoseconds".into())),
        "{:?}",
        sample_types(&profile)
    );
    assert!(!profile.sample.is_empty(), "a busy second has samples");
    assert!(
        function_names(&profile)
            .iter()
            .any(|f| f.contains("spin_until")),
        "the spinning function is named"
    );
    let top = go_tool_pprof_top(&body)?;
    assert!(top.contains("spin_until"), "{top}");
    // The profiler is free again.
    let (status, _, _) = get(&router, "/debug/pprof/profile?seconds=1").await?;
    assert_eq!(status, StatusCode::OK);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heap_profile_is_a_pprof_of_live_allocations_that_go_reads() -> anyhow::Result<()> {
    let router = super::routes(&settings(&[]), "fake", None);
    // 64 MiB live: well above the 512 KiB sampling interval.
    let live = held_allocation();
    let (status, content_type, body) = get(&router, "/debug/pprof/heap").await?;
    drop(std::hint::black_box(live));
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    assert_eq!(content_type, "application/octet-stream");
    let profile = decode_profile(&body)?;
    assert!(
        sample_types(&profile).contains(&("inuse_space".into(), "bytes".into())),
        "{:?}",
        sample_types(&profile)
    );
    assert!(
        function_names(&profile)
            .iter()
            .any(|f| f.contains("held_allocation")),
        "the allocating function is named: {:?}",
        function_names(&profile)
    );
    let top = go_tool_pprof_top(&body)?;
    assert!(top.contains("held_allocation"), "{top}");
    let (status, _, _) = get(&router, "/debug/pprof/heap?debug=1").await?;
    assert_eq!(status, StatusCode::BAD_REQUEST, "no legacy text format");
    Ok(())
}

#[inline(never)]
fn held_allocation() -> Vec<u8> {
    std::hint::black_box(vec![1u8; 64 << 20])
}
