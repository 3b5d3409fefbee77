//! The pieces a run is built from: the provider from `--cloud-config`, the
//! clients for delegated authentication and for each controller's
//! ServiceAccount, and the controllers' settings.

use std::sync::Arc;

use ccm_cloud_provider::{CloudConfig, CloudProvider, Environment, ProviderFactory};
use ccm_controllers::ControllerSettings;

use super::Failure;
use crate::client;
use crate::client::service_account::{self, ControllerClients};
use crate::flags::Settings;
use crate::serving::{self, ReviewClients};

/// The clients for TokenReviews and SubjectAccessReviews: from
/// `--authentication-kubeconfig` / `--authorization-kubeconfig`, else with
/// the main client's credentials. Either way with upstream's own budget
/// (200 QPS, bursts of 400), so reviews never wait behind controller
/// traffic nor delay it.
pub(super) async fn review_clients(
    serving: &serving::Config,
    main: &kube::Config,
    user_agent: &str,
) -> Result<ReviewClients, Failure> {
    let build = async |flag: &str, kubeconfig: Option<&std::path::Path>| {
        let config = match kubeconfig {
            Some(path) => client::config(Some(path), None)
                .await
                .map_err(|e| match e {
                    client::ClientError::Kubeconfig { path, error } => Failure::Usage(format!(
                        "{flag} {path}: {}",
                        client::kubeconfig_message(&error)
                    )),
                    other => Failure::Usage(format!("{flag}: {other}")),
                })?,
            None => main.clone(),
        };
        client::build(
            config,
            Some(200.0),
            400,
            &format!("{user_agent}/delegated-auth"),
        )
        .map_err(|e| Failure::Usage(format!("{flag}: {e}")))
    };
    Ok(ReviewClients {
        authentication: build(
            "--authentication-kubeconfig",
            serving.authentication.kubeconfig.as_deref(),
        )
        .await?,
        authorization: build(
            "--authorization-kubeconfig",
            serving.authorization.kubeconfig.as_deref(),
        )
        .await?,
    })
}

pub(crate) fn build_provider<F: ProviderFactory>(
    settings: &Settings,
    env: &Environment,
) -> Result<Arc<dyn CloudProvider>, Failure> {
    let cloud_config = match &settings.cloud_config {
        Some(path) => {
            let contents = std::fs::read_to_string(path).map_err(|e| {
                Failure::Usage(format!(
                    "--cloud-config {}: cannot read it: {e}",
                    path.display()
                ))
            })?;
            Some(CloudConfig::new(path, contents))
        }
        None => None,
    };
    let provider =
        F::build(cloud_config.as_ref(), env).map_err(|e| Failure::Usage(e.to_string()))?;
    // Upstream refuses to start when it would configure routes without
    // knowing the pod network.
    if settings
        .controllers
        .contains(&ccm_controllers::ControllerId::Route)
        && settings.configure_cloud_routes
        && provider.routes().is_some()
        && settings.cluster_cidrs.is_empty()
    {
        return Err(Failure::Usage(format!(
            "--cluster-cidr is required: --configure-cloud-routes is true and the {} provider has routes (or pass --configure-cloud-routes=false)",
            F::NAME
        )));
    }
    let runs_nodeipam = settings
        .provider_controllers
        .enabled
        .iter()
        .any(|c| c.kind == ccm_cloud_provider::ProviderControllerKind::NodeIpam);
    if settings.allocate_node_cidrs && !runs_nodeipam {
        tracing::info!(
            "--allocate-node-cidrs: this CCM runs no node-IPAM controller; pod CIDRs come from kube-controller-manager"
        );
    }
    if !provider.has_cluster_id() {
        if !settings.allow_untagged_cloud {
            return Err(Failure::Usage(format!(
                "the {} provider found no cluster ID, which it needs to tell this cluster's resources apart; set one in the cloud config, or pass --allow-untagged-cloud",
                F::NAME
            )));
        }
        tracing::warn!("running without a cluster ID (--allow-untagged-cloud)");
    }
    Ok(provider)
}

/// One client per controller ServiceAccount, by its name.
pub(super) fn controller_clients(
    settings: &Settings,
    config: &kube::Config,
    main: &kube::Client,
    user_agent: &str,
) -> Result<ControllerClients, Failure> {
    let mut clients = ControllerClients::default();
    for id in &settings.controllers {
        let name = id.service_account();
        if clients.contains(name) {
            continue;
        }
        let source = service_account::TokenSource::new(name, main.clone());
        let client = service_account::client(
            config.clone(),
            source,
            settings.kube_api_qps,
            settings.kube_api_burst,
            &format!("{user_agent}/{name}"),
        )
        .map_err(|e| Failure::Usage(e.to_string()))?;
        clients.insert(name, client);
    }
    tracing::info!(
        service_accounts = ?clients.accounts(),
        namespace = service_account::NAMESPACE,
        "controllers use their own ServiceAccounts' credentials"
    );
    Ok(clients)
}

/// One client per controller, with the main credentials and a rate limit
/// of its own, as upstream's controller client builder gives each
/// controller a clientset (and so a token bucket) of its own: a burst of
/// one controller's writes (a hundred nodes' `NetworkUnavailable`) never
/// holds back another's (a new Service's finalizer, then its load
/// balancer). A dry run's clients plan their writes like the main one.
pub(super) fn controller_budgets(
    settings: &Settings,
    config: &kube::Config,
    user_agent: &str,
    plan: Option<&client::PlanWrites>,
) -> Result<ControllerClients, Failure> {
    let mut clients = ControllerClients::default();
    for id in &settings.controllers {
        let name = id.service_account();
        if clients.contains(name) {
            continue;
        }
        let client = client::build_with(
            config.clone(),
            settings.kube_api_qps,
            settings.kube_api_burst,
            &format!("{user_agent}/{name}"),
            plan,
        )
        .map_err(|e| Failure::Usage(e.to_string()))?;
        clients.insert(name, client);
    }
    Ok(clients)
}

pub(super) fn controller_settings(settings: &Settings) -> ControllerSettings {
    ControllerSettings {
        configure_cloud_routes: settings.configure_cloud_routes,
        cluster_cidrs: settings.cluster_cidrs.clone(),
        concurrent_service_syncs: settings.concurrent_service_syncs,
        load_balancer_target_health: settings.load_balancer_target_health,
        concurrent_node_syncs: settings.concurrent_node_syncs,
        node_status_update_frequency: settings.node_status_update_frequency,
        node_monitor_period: settings.node_monitor_period,
        route_reconciliation_period: settings.route_period,
        node_sync_period: settings.node_sync_period,
        watch_based_routes: settings
            .feature_gates
            .enabled(crate::flags::WATCH_BASED_ROUTES),
        ..ControllerSettings::default()
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use ccm_controllers::ControllerId;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;
    use crate::flags::{Command, parse};

    /// A loopback server that answers every request at once with `{}`.
    async fn answering_server() -> std::net::SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            // Bounded: the test makes three requests.
            for _ in 0..16 {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                tokio::spawn(async move {
                    let mut buf = vec![0; 4096];
                    // Each read is taken for one whole request (they are
                    // small), answered in turn until the client closes.
                    while let Ok(n) = stream.read(&mut buf).await {
                        if n == 0 {
                            return;
                        }
                        let answer = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
                        if stream.write_all(answer.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        addr
    }

    async fn get(client: &kube::Client) {
        let request = http::Request::get("/version").body(Vec::new()).unwrap();
        client.request_text(request).await.expect("answered");
    }

    #[tokio::test]
    async fn a_controller_never_waits_for_another_controllers_tokens() {
        let argv = [
            "fake-cloud-controller-manager",
            "--kube-api-qps=1",
            "--kube-api-burst=1",
        ]
        .map(str::to_owned);
        let Command::Run(mut settings) = parse("fake", argv).expect("parses") else {
            panic!("a run");
        };
        settings.controllers = [ControllerId::Route, ControllerId::Service].into();
        let addr = answering_server().await;
        let config = kube::Config::new(format!("http://{addr}").parse().unwrap());
        let clients = controller_budgets(&settings, &config, "test", None).expect("built");
        let own = |id| clients.client_for(id).expect("a client per controller");
        let (route, service) = (own(ControllerId::Route), own(ControllerId::Service));

        // The route controller spends its one token...
        get(&route).await;
        let start = Instant::now();
        // ...and the service controller's request still goes at once.
        get(&service).await;
        assert!(
            start.elapsed() < Duration::from_millis(500),
            "the service controller waited {:?} for the route controller's bucket",
            start.elapsed()
        );
        // The route controller's next request waits for its own refill.
        get(&route).await;
        assert!(
            start.elapsed() >= Duration::from_millis(800),
            "the route controller is still limited: {:?}",
            start.elapsed()
        );
    }

    #[test]
    fn upstreams_watch_based_routes_gate_reaches_the_route_controller() {
        let settings = |gates: &[&str]| {
            let argv = ["fake-cloud-controller-manager".to_owned()]
                .into_iter()
                .chain(gates.iter().map(|g| format!("--feature-gates={g}")));
            let Command::Run(settings) = parse("fake", argv).expect("parses") else {
                panic!("a run");
            };
            controller_settings(&settings)
        };
        assert!(!settings(&[]).watch_based_routes);
        let gated = settings(&["CloudControllerManagerWatchBasedRoutesReconciliation=true"]);
        assert!(gated.watch_based_routes);
    }
}
