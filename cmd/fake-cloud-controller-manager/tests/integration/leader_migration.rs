//! Leader migration end to end: the real binary with
//! `--enable-leader-migration`, beside a stand-in for the old owner
//! (kube-controller-manager with its in-tree cloud provider), which holds
//! the migration Lease by writing and renewing it as client-go does.
//!
//! The API server is the one the environment asks for
//! ([`ApiServer::start`]). The CCM runs with the administrator's
//! credentials: the chart grants only its own Lease, not a migration Lease.

use std::path::Path;
use std::time::Duration;

use ccm_test_support::{
    ApiServer, Ccm, Credentials, Launch, eventually, load_balancer_service, uninitialized_node,
    unique,
};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, PostParams};

const BINARY: &str = env!("CARGO_BIN_EXE_fake-cloud-controller-manager");
/// How long any one outcome may take.
const WAIT: Duration = Duration::from_secs(60);
/// The old owner's identity in the migration Lease.
const OLD_OWNER: &str = "kube-controller-manager-old";
/// The old owner's `leaseDurationSeconds`: once it stops renewing, the CCM
/// takes over this long after it last saw the Lease change.
const OLD_LEASE_SECONDS: i32 = 2;
/// How long the migrated controllers are watched for doing nothing: twice
/// the CCM's lease duration, ample for a controller that ignored the Lease
/// to add its finalizer.
const HELD_FOR: Duration = Duration::from_secs(6);

/// The migration Lease as its holder writes it.
fn lease(name: &str, holder: &str, seconds: i32) -> Lease {
    let now = MicroTime(Timestamp::now());
    Lease {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some("kube-system".to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(holder.to_owned()),
            lease_duration_seconds: Some(seconds),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            lease_transitions: Some(0),
            ..LeaseSpec::default()
        }),
    }
}

/// The old owner: creates the Lease `name` held by [`OLD_OWNER`] and renews
/// it every 300 ms (for at most five minutes) until the task is aborted —
/// the old owner stopping without releasing it.
async fn old_owner(leases: Api<Lease>, name: String) -> tokio::task::JoinHandle<()> {
    leases
        .create(
            &PostParams::default(),
            &lease(&name, OLD_OWNER, OLD_LEASE_SECONDS),
        )
        .await
        .expect("the old owner creates the migration Lease");
    tokio::spawn(async move {
        for _ in 0..1_000 {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let Ok(mut current) = leases.get(&name).await else {
                continue;
            };
            let spec = current.spec.get_or_insert_default();
            spec.renew_time = Some(MicroTime(Timestamp::now()));
            // A conflict is retried at the next tick, as client-go would.
            let _ = leases
                .replace(&name, &PostParams::default(), &current)
                .await;
        }
    })
}

async fn holder(leases: &Api<Lease>, name: &str) -> Option<String> {
    leases
        .get_opt(name)
        .await
        .ok()??
        .spec?
        .holder_identity
        .filter(|h| !h.is_empty())
}

/// The migration configuration both controller managers share: the three
/// controllers upstream migrates go to whichever holds `leader_name`; a
/// kube-controller-manager controller the CCM does not know is listed too.
fn write_config(dir: &Path, leader_name: &str) -> String {
    let path = dir.join("migration.yaml");
    std::fs::write(
        &path,
        format!(
            "kind: LeaderMigrationConfiguration\n\
             apiVersion: controllermanager.config.k8s.io/v1\n\
             leaderName: {leader_name}\n\
             controllerLeaders:\n\
             - name: route\n  component: '*'\n\
             - name: service\n  component: '*'\n\
             - name: cloud-node-lifecycle\n  component: '*'\n\
             - name: nodeipam\n  component: kube-controller-manager\n"
        ),
    )
    .unwrap();
    format!("--leader-migration-config={}", path.display())
}

/// The CCM with leader migration on, its own main Lease and short timings.
async fn start_ccm(server: &ApiServer, cluster: &str, dir: &Path, config_flag: String) -> Ccm {
    let cloud_config = dir.join("cloud.toml");
    std::fs::write(&cloud_config, "[settings]\nauto_instances = true\n").unwrap();
    let admin = Credentials {
        kubeconfig: server.kubeconfig_path().to_owned(),
        rbac_limited: false,
    };
    Launch::new(BINARY, dir.join("ccm.log"))
        .credentials(&admin)
        .args([
            format!("--cloud-config={}", cloud_config.display()),
            format!("--cluster-name={cluster}"),
            format!("--leader-elect-resource-name={cluster}"),
            "--configure-cloud-routes=false".to_owned(),
            "--leader-elect-lease-duration=3s".to_owned(),
            "--leader-elect-renew-deadline=2s".to_owned(),
            "--leader-elect-retry-period=500ms".to_owned(),
            "--enable-leader-migration".to_owned(),
            config_flag,
        ])
        .start()
        .await
        .expect("the CCM leads on its main Lease and is ready")
}

/// Whether the Service has been touched by a service controller: its
/// cleanup finalizer or an ingress.
fn touched(service: &Service) -> bool {
    let finalizers = service.metadata.finalizers.iter().flatten();
    let ingress = service
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .is_some_and(|i| !i.is_empty());
    ingress || finalizers.count() > 0
}

#[tokio::test]
async fn a_bad_migration_config_exits_64_with_one_line_naming_the_flag_and_file() {
    let dir = tempfile::tempdir().unwrap();
    let wrong_kind = dir.path().join("wrong-kind.yaml");
    std::fs::write(
        &wrong_kind,
        "kind: LeaderMigrationConfiguration\napiVersion: v1\nleaderName: m\n",
    )
    .unwrap();
    let invalid = dir.path().join("invalid.yaml");
    std::fs::write(
        &invalid,
        "kind: LeaderMigrationConfiguration\napiVersion: controllermanager.config.k8s.io/v1beta1\nleaderName: m\nresourceLock: configmaps\n",
    )
    .unwrap();
    let missing = dir.path().join("missing.yaml");
    for (path, expected) in [
        (&wrong_kind, "expected kind LeaderMigrationConfiguration"),
        (&invalid, "resourceLock: `configmaps`"),
        (&missing, "cannot read it"),
    ] {
        let out = Launch::new(BINARY, dir.path().join("ccm.log"))
            .args([
                "--enable-leader-migration".to_owned(),
                format!("--leader-migration-config={}", path.display()),
            ])
            .output()
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
        assert!(
            stderr.contains(&format!("--leader-migration-config {}: ", path.display()))
                && stderr.contains(expected),
            "{stderr}"
        );
    }
}

#[tokio::test]
async fn migrated_controllers_wait_until_the_old_owner_lets_the_migration_lease_go() {
    let server = ApiServer::start().await.unwrap();
    let client = server.client();
    let cluster = unique("migration");
    let migration_lease = format!("{cluster}-extraction");
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    let renewing = old_owner(leases.clone(), migration_lease.clone()).await;

    let nodes: Api<Node> = Api::all(client.clone());
    let node = format!("{cluster}-node");
    nodes
        .create(&PostParams::default(), &uninitialized_node(&node))
        .await
        .unwrap();
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let service = format!("{cluster}-web");
    services
        .create(
            &PostParams::default(),
            &load_balancer_service(&service, &[]),
        )
        .await
        .unwrap();

    let dir = tempfile::tempdir().unwrap();
    let flag = write_config(dir.path(), &migration_lease);
    let mut ccm = start_ccm(&server, &cluster, dir.path(), flag).await;

    // cloud-node is not migrated: it works under the main Lease alone.
    eventually("the node initialized by cloud-node", WAIT, || async {
        let node = nodes.get(&node).await.ok()?;
        let taints = node.spec?.taints.unwrap_or_default();
        taints
            .iter()
            .all(|t| !t.key.contains("uninitialized"))
            .then_some(())
    })
    .await
    .expect("a bounded wait");
    let metrics = ccm.metrics().await.unwrap();
    for (controller, running) in [
        ("cloud-node", 1),
        ("service", 0),
        ("cloud-node-lifecycle", 0),
    ] {
        assert!(
            metrics.contains(&format!(
                "ccm_controller_running{{controller=\"{controller}\"}} {running}"
            )),
            "{controller}: {metrics}"
        );
    }
    assert!(
        ccm.log()
            .contains("waiting for the migration lease before starting the migrated controllers"),
        "{}",
        ccm.log_tail()
    );
    // The migrated service controller does nothing while the old owner
    // holds the migration Lease.
    let watched_until = tokio::time::Instant::now() + HELD_FOR;
    while tokio::time::Instant::now() < watched_until {
        let current = services.get(&service).await.unwrap();
        assert!(
            !touched(&current),
            "the Service was handled while the old owner held the migration Lease: {current:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        holder(&leases, &migration_lease).await.as_deref(),
        Some(OLD_OWNER)
    );
    let metrics = ccm.metrics().await.unwrap();
    assert!(
        !metrics.contains("operation=\"ensure_load_balancer\""),
        "no load balancer was asked of the cloud: {metrics}"
    );

    // The old owner stops: the CCM takes the migration Lease over and the
    // migrated controllers start.
    renewing.abort();
    let new_holder = eventually("the CCM holding the migration Lease", WAIT, || async {
        holder(&leases, &migration_lease)
            .await
            .filter(|h| h != OLD_OWNER)
    })
    .await
    .expect("a bounded wait");
    assert_eq!(
        holder(&leases, &cluster).await,
        Some(new_holder),
        "one identity holds both Leases"
    );
    let ingress = eventually(
        "an ingress from the migrated service controller",
        WAIT,
        || async {
            let svc = services.get(&service).await.ok()?;
            svc.status?.load_balancer?.ingress?.into_iter().next()?.ip
        },
    )
    .await
    .expect("a bounded wait");
    assert!(ingress.starts_with("100."), "{ingress}");
    assert!(
        ccm.log().contains("acquired the migration lease"),
        "{}",
        ccm.log_tail()
    );

    ccm.terminate().await.unwrap();
    let status = ccm.wait(WAIT).await.unwrap();
    assert_eq!(status.code(), Some(0), "SIGTERM is a clean stop");
    assert_eq!(
        holder(&leases, &migration_lease).await,
        None,
        "the migration Lease was released"
    );
    assert_eq!(holder(&leases, &cluster).await, None, "the main Lease too");

    let _ = services.delete(&service, &DeleteParams::default()).await;
    let _ = nodes.delete(&node, &DeleteParams::default()).await;
}

#[tokio::test]
async fn losing_the_migration_lease_exits_non_zero() {
    let server = ApiServer::start().await.unwrap();
    let cluster = unique("migration-lost");
    let migration_lease = format!("{cluster}-extraction");
    let leases: Api<Lease> = Api::namespaced(server.client(), "kube-system");
    let dir = tempfile::tempdir().unwrap();
    let flag = write_config(dir.path(), &migration_lease);
    let mut ccm = start_ccm(&server, &cluster, dir.path(), flag).await;
    // Nobody else holds it: the CCM takes it at once.
    let ours = eventually("the CCM holding the migration Lease", WAIT, || async {
        holder(&leases, &migration_lease).await
    })
    .await
    .expect("a bounded wait");

    // Another controller manager overwrites it, as after a long pause.
    eventually("the Lease taken over", WAIT, || async {
        let mut current = leases.get(&migration_lease).await.ok()?;
        let taken = lease(&migration_lease, "kube-controller-manager-new", 60);
        current.spec = taken.spec;
        leases
            .replace(&migration_lease, &PostParams::default(), &current)
            .await
            .ok()
            .map(drop)
    })
    .await
    .expect("a bounded wait");
    let status = ccm.wait(WAIT).await.unwrap();
    assert_eq!(
        status.code(),
        Some(1),
        "losing the migration Lease is a failure, as upstream; the CCM was {ours}"
    );
    assert!(
        ccm.log().contains(&migration_lease),
        "the reason names the Lease: {}",
        ccm.log_tail()
    );
}
