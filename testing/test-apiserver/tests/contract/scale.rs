//! The server holds the scale the CCM benchmark needs: 10,000 nodes, 2,000
//! services and 50 open watches, every one of which sees every change.

use crate::support;

use std::time::Duration;

use anyhow::{Context, bail};
use ccm_test_apiserver::TestApiServer;
use ccm_test_support::eventually;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Service};
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, WatchEvent, WatchParams};
use serde::de::DeserializeOwned;
use serde_json::json;
use support::within;

const NODES: usize = 10_000;
const SERVICES: usize = 2_000;
const WATCHES_PER_KIND: usize = 25;
const CHANGES: usize = 20;

/// Opens a watch from `from` and counts MODIFIED events until `expected`.
fn count_modifications<K>(
    api: Api<K>,
    from: String,
    expected: usize,
) -> tokio::task::JoinHandle<anyhow::Result<usize>>
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    tokio::spawn(async move {
        let mut stream = api
            .watch(
                &WatchParams::default().disable_bookmarks().timeout(120),
                &from,
            )
            .await?
            .boxed();
        let mut seen = 0;
        while seen < expected {
            match stream.next().await {
                Some(Ok(WatchEvent::Modified(_))) => seen += 1,
                Some(Ok(other)) => bail!("unexpected event {other:?}"),
                Some(Err(e)) => return Err(e.into()),
                None => bail!("the watch ended after {seen} events"),
            }
        }
        Ok(seen)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holds_ten_thousand_nodes_two_thousand_services_and_fifty_watches() -> anyhow::Result<()> {
    let server = TestApiServer::builder()
        .seed_nodes(NODES)
        .seed_services(SERVICES)
        .start()
        .await?;
    let nodes: Api<Node> = Api::all(server.client());
    let services: Api<Service> = Api::namespaced(server.client(), "default");
    let from = server.resource_version().to_string();
    let mut watchers = Vec::new();
    for _ in 0..WATCHES_PER_KIND {
        watchers.push(count_modifications(nodes.clone(), from.clone(), CHANGES));
        watchers.push(count_modifications(services.clone(), from.clone(), CHANGES));
    }
    eventually("50 open watches", Duration::from_secs(30), || async {
        (server.stats().open_watches >= 2 * WATCHES_PER_KIND).then_some(())
    })
    .await?;
    for i in 1..=CHANGES {
        let label = Patch::Merge(json!({"metadata": {"labels": {"scale": "touched"}}}));
        nodes
            .patch(&format!("node-{i}"), &PatchParams::default(), &label)
            .await?;
        let ingress = Patch::Merge(
            json!({"status": {"loadBalancer": {"ingress": [{"ip": format!("192.0.2.{i}")}]}}}),
        );
        services
            .patch_status(&format!("lb-{i}"), &PatchParams::default(), &ingress)
            .await?;
    }
    for watcher in watchers {
        let seen = within(60, "every watch to see every change", watcher).await???;
        assert_eq!(seen, CHANGES);
    }

    let mut listed = 0;
    let mut pages = 0;
    let mut params = ListParams::default().limit(500);
    loop {
        let page = nodes.list_metadata(&params).await?;
        listed += page.items.len();
        pages += 1;
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => break,
        }
        if pages > 25 {
            bail!("pagination does not end");
        }
    }
    assert_eq!((listed, pages), (NODES, NODES / 500));
    let all_services = services.list(&ListParams::default()).await?;
    let load_balancers = all_services
        .items
        .iter()
        .filter(|s| s.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("LoadBalancer"))
        .count();
    assert_eq!(load_balancers, SERVICES);
    let node_ports: std::collections::BTreeSet<i32> = all_services
        .items
        .iter()
        .filter_map(|s| s.spec.as_ref()?.ports.as_ref()?.first()?.node_port)
        .collect();
    assert_eq!(
        node_ports.len(),
        SERVICES,
        "every LoadBalancer has its own nodePort"
    );
    let status = services
        .get_status("lb-1")
        .await?
        .status
        .context("status")?;
    assert!(status.load_balancer.and_then(|l| l.ingress).is_some());
    Ok(())
}
