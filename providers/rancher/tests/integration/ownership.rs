//! A load balancer recorded for another cluster is never touched: not
//! ensured, not deleted, not reported.

use std::sync::Arc;

use ccm_cloud_provider::k8s_openapi::api::core::v1::{Node, Service, ServicePort, ServiceSpec};
use ccm_cloud_provider::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use ccm_cloud_provider::{CloudError, Environment, ProviderFactory};
use ccm_provider_rancher::emulator::{ACCESS_KEY, CattleEmulator, SECRET_KEY};
use ccm_provider_rancher::{
    ACCESS_KEY_VARIABLE, CLUSTER_KEY, RancherProviderFactory, SECRET_KEY_VARIABLE, URL_VARIABLE,
};

fn service() -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("default".into()),
            uid: Some("7a1e0f00-0000-4000-8000-00000000beef".into()),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            ports: Some(vec![ServicePort {
                port: 80,
                node_port: Some(30080),
                protocol: Some("TCP".into()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

#[tokio::test]
async fn another_clusters_load_balancer_is_left_alone() {
    let cattle = CattleEmulator::start().await.expect("starts");
    cattle.add_host("worker-1", "10.0.0.1");
    let env = Environment::default()
        .with(URL_VARIABLE, cattle.url())
        .with(ACCESS_KEY_VARIABLE, ACCESS_KEY)
        .with(SECRET_KEY_VARIABLE, SECRET_KEY);
    let provider = RancherProviderFactory::build(None, &env).expect("builds");
    let lb = provider.load_balancer().expect("load balancers");
    let nodes = [Arc::new(Node {
        metadata: ObjectMeta {
            name: Some("worker-1".into()),
            ..ObjectMeta::default()
        },
        ..Node::default()
    })];
    let svc = service();
    let mut made = None;
    for _ in 0..20 {
        match lb.ensure_load_balancer("blue", &svc, &nodes).await {
            Ok(ensured) => {
                made = Some(ensured);
                break;
            }
            Err(CloudError::Retry { .. }) => {}
            Err(e) => panic!("{e}"),
        }
    }
    assert!(
        made.is_some_and(|m| !m.status.ingress.is_empty()),
        "blue's load balancer"
    );
    let before = cattle.snapshot();
    assert_eq!(
        before.load_balancers[0]
            .metadata
            .get(CLUSTER_KEY)
            .and_then(|v| v.as_str()),
        Some("blue")
    );
    let requests = cattle.calls().len();

    let err = lb
        .ensure_load_balancer("green", &svc, &nodes)
        .await
        .expect_err("another cluster's");
    assert!(err.to_string().contains("belongs to cluster blue"), "{err}");
    lb.update_load_balancer("green", &svc, &nodes)
        .await
        .expect_err("another cluster's");
    lb.ensure_load_balancer_deleted("green", &svc)
        .await
        .expect("not ours: nothing to delete");
    assert_eq!(
        lb.get_load_balancer("green", &svc).await.expect("read"),
        None
    );
    assert_eq!(cattle.snapshot(), before, "nothing changed");
    let writes: Vec<_> = cattle.calls()[requests..]
        .iter()
        .filter(|c| c.method != "GET")
        .cloned()
        .collect();
    assert!(writes.is_empty(), "{writes:?}");
}
