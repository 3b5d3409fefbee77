//! Errors: rate limiting is `Throttled` with a delay, and a call cancelled
//! after any of its cloud requests leaves nothing the next call cannot
//! finish.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use ccm_cloud_provider::{CloudError, LoadBalancer, Routes};

use crate::routes::{create, listed, remove, route_to};
use crate::steps::{bounded, delete, ensure, expect, settled, uid, unchanged};
use crate::{Emulator, Outcome, Report, Subject};

/// The most cancellation points tried per operation.
const MAX_POINTS: u64 = 12;
/// How long a cancelled call's in-flight request has to be answered before
/// the next call (a real cloud finishes it too).
const SETTLE: Duration = Duration::from_millis(200);

pub(crate) async fn run(subject: &Subject, report: &mut Report) {
    let name = "errors: rate limiting is Throttled with a delay";
    match subject.emulator.throttle_gap() {
        Some(why) => report.record(name, Outcome::NotApplicable(why.into())),
        None => report.result(name, throttled(subject).await),
    }
    let name = "errors: an ensure cancelled after each of its requests is finished by the next";
    match subject.provider.load_balancer() {
        Some(lb) => report.result(name, cancelled_ensures(subject, lb).await),
        None => report.record(name, Outcome::NotApplicable("no load balancers".into())),
    }
    let name =
        "errors: a route create cancelled after each of its requests is finished by the next";
    match subject.provider.routes() {
        Some(r) => report.result(name, cancelled_routes(subject, r).await),
        None => report.record(name, Outcome::NotApplicable("no routes".into())),
    }
}

async fn throttled(subject: &Subject) -> Result<(), String> {
    let e = &subject.emulator;
    let node = Arc::new(e.add_instance("conformance-throttled").await);
    let service = e.service("conformance-throttled", &uid(0x0a));
    let c = &subject.cluster;
    let p = &subject.provider;
    // The cheapest read the provider has, asked while the cloud refuses all.
    let ask = || async {
        if let Some(instances) = p.instances() {
            match instances
                .instances_metadata(std::slice::from_ref(&node))
                .await
            {
                Ok(mut answers) if answers.len() == 1 => answers.remove(0).map(drop),
                Ok(answers) => Err(CloudError::msg(format!("{} answers", answers.len()))),
                Err(e) => Err(e),
            }
        } else if let Some(lb) = p.load_balancer() {
            lb.get_load_balancer(c, &service).await.map(drop)
        } else if let Some(r) = p.routes() {
            r.list_routes(c).await.map(drop)
        } else {
            Err(CloudError::NotImplemented)
        }
    };
    e.set_throttled(true).await;
    let refused = bounded("a read while throttled", ask()).await;
    e.set_throttled(false).await;
    let result = async {
        match refused? {
            Err(CloudError::Throttled { retry_after }) if retry_after > Duration::ZERO => {}
            other => {
                return Err(format!(
                    "while the cloud rate-limits every request, a read answered {other:?}, not Throttled with a delay"
                ));
            }
        }
        settled("the same read once the limit lifts", ask).await
    }
    .await;
    e.remove_instance(&node).await;
    result
}

/// Runs `call` until it ends or the cloud has seen `k` more requests,
/// whichever is first, then drops it.
async fn cancel_after(e: &dyn Emulator, k: u64, call: impl Future<Output = ()>) {
    let base = e.requests();
    let watch = async {
        while e.requests() < base + k {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    };
    tokio::select! {
        () = call => {}
        _ = tokio::time::timeout(Duration::from_secs(60), watch) => {}
    }
    tokio::time::sleep(SETTLE).await;
}

async fn cancelled_ensures(subject: &Subject, lb: &dyn LoadBalancer) -> Result<(), String> {
    let e = &subject.emulator;
    let c = &subject.cluster;
    let nodes = [Arc::new(e.add_instance("conformance-cancel").await)];
    let start = e.resources().await;
    // How many requests a whole first ensure takes.
    let whole = e.service("conformance-cancel-0", &uid(0x100));
    let before = e.requests();
    ensure(lb, c, &whole, &nodes).await?;
    let requests = e.requests() - before;
    delete(lb, c, &whole).await?;
    unchanged("an ensure and a delete", &start, &e.resources().await)?;
    for k in 1..requests.min(MAX_POINTS + 1) {
        let service = e.service(&format!("conformance-cancel-{k}"), &uid(0x100 + k));
        let cut = async {
            let _ = lb.ensure_load_balancer(c, &service, &nodes).await;
        };
        // Whether or not it ended by itself, the next call must finish it.
        cancel_after(e.as_ref(), k, cut).await;
        let at = || format!("cancelled after request {k} of {requests}");
        let status = ensure(lb, c, &service, &nodes)
            .await
            .map_err(|why| format!("{}: {why}", at()))?;
        let made = e.resources().await;
        let again = ensure(lb, c, &service, &nodes).await?;
        unchanged(
            &format!("{}: a second ensure", at()),
            &made,
            &e.resources().await,
        )?;
        expect(again == status, || {
            format!("{}: two ensures gave {status:?} and {again:?}", at())
        })?;
        delete(lb, c, &service).await?;
        unchanged(
            &format!("{}: ensure then delete", at()),
            &start,
            &e.resources().await,
        )?;
    }
    e.remove_instance(&nodes[0]).await;
    Ok(())
}

async fn cancelled_routes(subject: &Subject, routes: &dyn Routes) -> Result<(), String> {
    let e = &subject.emulator;
    let c = &subject.cluster;
    let node = e.add_instance("conformance-cancel-route").await;
    let start = e.resources().await;
    let cidr = |k: u64| format!("10.250.{}.0/24", 100 + k);
    let before = e.requests();
    create(routes, c, &route_to(&node, &cidr(0))).await?;
    let requests = e.requests() - before;
    for route in listed(routes, c, &cidr(0)).await? {
        remove(routes, c, &route).await?;
    }
    for k in 1..requests.min(MAX_POINTS + 1) {
        let route = route_to(&node, &cidr(k));
        let cut = async {
            let _ = routes.create_route(c, "conformance-cancel", &route).await;
        };
        cancel_after(e.as_ref(), k, cut).await;
        create(routes, c, &route)
            .await
            .map_err(|why| format!("cancelled after request {k} of {requests}: {why}"))?;
        let found = listed(routes, c, &cidr(k)).await?;
        expect(found.len() == 1, || {
            format!("cancelled after request {k} of {requests}, then created: listed {found:?}")
        })?;
        remove(routes, c, &found[0]).await?;
    }
    unchanged(
        "cancelled route creates, finished and deleted",
        &start,
        &e.resources().await,
    )?;
    e.remove_instance(&node).await;
    Ok(())
}
