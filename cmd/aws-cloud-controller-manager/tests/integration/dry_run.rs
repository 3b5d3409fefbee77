//! `--dry-run` end to end: a shadow started beside the NLB this CCM made,
//! once the Service's port moved, plans the whole change on `/debug/plan`
//! (each create, change and delete with its arguments) and sends none.

use crate::support;

use std::time::Duration;

use ccm_provider_aws::test_util::seed::Seeded;
use ccm_test_support::{eventually, ingress_hostnames};
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};
use support::objects::{create_service, nlb_service, services};
use support::{E2e, aws, ccm, flags};

/// How long a CCM may take to act on a change.
const ACT_WITHIN: Duration = Duration::from_secs(60);

/// The ports of the load balancer's listeners.
async fn listener_ports(e2e: &E2e) -> anyhow::Result<Vec<i32>> {
    let lbs = aws::load_balancers(&e2e.elbv2).await?;
    let arn = lbs
        .first()
        .and_then(|lb| lb.load_balancer_arn())
        .unwrap_or_default();
    let mut ports: Vec<i32> = aws::listeners(&e2e.elbv2, arn)
        .await?
        .iter()
        .filter_map(|l| l.port())
        .collect();
    ports.sort_unstable();
    Ok(ports)
}

/// The shadow's entry for the Service's ensure once it would change
/// something.
async fn planned_ensure(shadow: &ccm::Ccm) -> anyhow::Result<Value> {
    eventually("the shadow's plan for default/web", ACT_WITHIN, || async {
        let (status, body) = shadow.get("/debug/plan").await?;
        anyhow::ensure!(status == 200, "/debug/plan answered {status}: {body}");
        let plan: Value = serde_json::from_str(&body)?;
        let entries = plan["entries"].as_array().cloned().unwrap_or_default();
        Ok(entries.into_iter().find(|e| {
            e["object"] == "default/web"
                && e["operation"] == "ensure_load_balancer"
                && e["verdict"] == "would-change"
        }))
    })
    .await
}

#[tokio::test]
async fn a_shadow_plans_every_request_of_a_moved_port_and_sends_none() -> anyhow::Result<()> {
    let mut e2e = E2e::start("dry-run-leader", 2, &[]).await?;
    let instances: Vec<&Seeded> = e2e.estate.instances.iter().collect();
    crate::load_balancers::join(&e2e, &instances).await?;
    create_service(&e2e.client, &nlb_service("web", &[])).await?;
    eventually("the Service's ingress hostname", ACT_WITHIN, || async {
        let service = services(&e2e.client).get("web").await?;
        Ok((!ingress_hostnames(&service).is_empty()).then_some(()))
    })
    .await?;
    assert_eq!(listener_ports(&e2e).await?, [80, 443]);

    // The leader is gone; the Service's port 80 becomes 8080.
    e2e.crash().await?;
    let service = services(&e2e.client).get("web").await?;
    let mut ports = service.spec.and_then(|s| s.ports).unwrap_or_default();
    for port in &mut ports {
        if port.port == 80 {
            port.port = 8080;
        }
    }
    services(&e2e.client)
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "ports": ports } })),
        )
        .await?;

    let config = e2e.dir.path().join("cloud.conf");
    let mut args = flags(&config);
    args.extend([
        "--dry-run".to_owned(),
        "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics,/debug/plan"
            .to_owned(),
    ]);
    let credentials = e2e.api.ccm_credentials("aws").await?;
    let shadow = ccm::launch("dry-run-shadow", &args)
        .credentials(&credentials)
        .metrics_behind_authorization()
        .start()
        .await?;
    let entry = planned_ensure(&shadow).await?;
    let requests: Vec<&str> = entry["difference"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let operations: Vec<&str> = requests
        .iter()
        .filter_map(|r| r.split(' ').next())
        .collect();
    assert_eq!(
        operations,
        [
            "CreateTargetGroup",
            "RegisterTargets",
            "CreateListener",
            "DeleteListener",
            "DeleteTargetGroup",
        ],
        "the whole plan: {requests:#?}"
    );
    let says = |at: usize, word: &str| requests[at].split(' ').any(|w| w == word);
    assert!(says(2, "Port=8080"), "{requests:#?}");
    assert!(
        requests[2].contains("TargetGroupArn=planned:target-group/"),
        "the listener forwards to the group planned before it: {requests:#?}"
    );
    assert_eq!(
        listener_ports(&e2e).await?,
        [80, 443],
        "the shadow sent nothing"
    );
    Ok(())
}
