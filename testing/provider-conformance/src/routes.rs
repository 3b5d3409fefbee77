//! Routes: create twice creates once, delete of an absent route is `Ok`,
//! another cluster's routes are neither listed nor deleted, and a route to
//! a terminated instance is listed as a blackhole.

use ccm_cloud_provider::k8s_openapi::api::core::v1::Node;
use ccm_cloud_provider::{Route, Routes};

use crate::steps::{expect, node_name, provider_id, settled, unchanged};
use crate::{Outcome, Report, Subject};

pub(crate) async fn run(subject: &Subject, report: &mut Report) {
    let Some(ours) = subject.provider.routes() else {
        report.record(
            "routes",
            Outcome::NotApplicable("the provider has no routes".into()),
        );
        return;
    };
    let e = &subject.emulator;
    let node = e.add_instance("conformance-route-a").await;
    report.result(
        "routes: create twice creates once",
        create_twice(subject, ours, &node).await,
    );
    report.result(
        "routes: another cluster's routes are neither listed nor deleted",
        neighbours_survive(subject, ours, &node).await,
    );
    report.result(
        "routes: deleting an absent route is Ok and changes nothing",
        delete_absent(subject, ours, &node).await,
    );
    let name = "routes: a route whose instance is gone is listed as a blackhole";
    match e.blackhole_gap() {
        Some(why) => report.record(name, Outcome::NotApplicable(why.into())),
        None => report.result(name, blackhole(subject, ours).await),
    }
    e.remove_instance(&node).await;
}

/// A route for `node`'s pod CIDR `cidr`, as the route controller makes it.
pub(crate) fn route_to(node: &Node, cidr: &str) -> Route {
    Route {
        name: String::new(),
        target_node: node_name(node),
        target_provider_id: provider_id(node),
        destination_cidr: cidr.parse().expect("the suite's CIDRs are valid"),
        blackhole: false,
    }
}

/// The routes `cluster` lists for `cidr`.
pub(crate) async fn listed(
    routes: &dyn Routes,
    cluster: &str,
    cidr: &str,
) -> Result<Vec<Route>, String> {
    let all = settled("list_routes", || routes.list_routes(cluster)).await?;
    Ok(all
        .into_iter()
        .filter(|r| r.destination_cidr.to_string() == cidr)
        .collect())
}

/// `create_route`, settled.
pub(crate) async fn create(
    routes: &dyn Routes,
    cluster: &str,
    route: &Route,
) -> Result<(), String> {
    let hint = format!("conformance-{}", route.destination_cidr.addr());
    settled("create_route", || {
        routes.create_route(cluster, &hint, route)
    })
    .await
}

/// `delete_route`, settled.
pub(crate) async fn remove(
    routes: &dyn Routes,
    cluster: &str,
    route: &Route,
) -> Result<(), String> {
    settled("delete_route", || routes.delete_route(cluster, route)).await
}

async fn create_twice(subject: &Subject, routes: &dyn Routes, node: &Node) -> Result<(), String> {
    let e = &subject.emulator;
    let c = &subject.cluster;
    let cidr = "10.250.1.0/24";
    let route = route_to(node, cidr);
    let before = e.resources().await;
    create(routes, c, &route).await?;
    let made = e.resources().await;
    expect(before != made, || {
        "create_route created nothing in the cloud".into()
    })?;
    create(routes, c, &route).await?;
    unchanged("creating the same route again", &made, &e.resources().await)?;
    let found = listed(routes, c, cidr).await?;
    expect(
        found.len() == 1 && found[0].target_node == route.target_node && !found[0].blackhole,
        || format!("after creating the route twice list_routes has {found:?}"),
    )?;
    remove(routes, c, &found[0]).await?;
    unchanged(
        "creating and deleting a route",
        &before,
        &e.resources().await,
    )?;
    let left = listed(routes, c, cidr).await?;
    expect(left.is_empty(), || {
        format!("a deleted route is still listed: {left:?}")
    })
}

async fn neighbours_survive(
    subject: &Subject,
    routes: &dyn Routes,
    node: &Node,
) -> Result<(), String> {
    let e = &subject.emulator;
    let (c, nc) = (&subject.cluster, &subject.neighbour_cluster);
    let theirs = subject
        .neighbour
        .routes()
        .ok_or("the neighbour has no routes")?;
    let their_node = e.add_instance("conformance-route-neighbour").await;
    let (ours_cidr, their_cidr) = ("10.250.2.0/24", "10.251.2.0/24");
    create(theirs, nc, &route_to(&their_node, their_cidr)).await?;
    let before = e.resources().await;
    create(routes, c, &route_to(node, ours_cidr)).await?;
    let result = async {
        let seen = listed(routes, c, their_cidr).await?;
        expect(seen.is_empty(), || {
            format!("list_routes lists another cluster's route: {seen:?}")
        })?;
        let ours = listed(routes, c, ours_cidr).await?;
        for route in &ours {
            remove(routes, c, route).await?;
        }
        unchanged(
            "creating and deleting our route",
            &before,
            &e.resources().await,
        )?;
        let kept = listed(theirs, nc, their_cidr).await?;
        expect(kept.len() == 1, || {
            format!("after we deleted ours, the other cluster lists {kept:?}")
        })
    }
    .await;
    for route in listed(theirs, nc, their_cidr).await? {
        remove(theirs, nc, &route).await?;
    }
    e.remove_instance(&their_node).await;
    result
}

async fn delete_absent(subject: &Subject, routes: &dyn Routes, node: &Node) -> Result<(), String> {
    let e = &subject.emulator;
    let before = e.resources().await;
    remove(routes, &subject.cluster, &route_to(node, "10.250.3.0/24")).await?;
    unchanged("deleting an absent route", &before, &e.resources().await)
}

async fn blackhole(subject: &Subject, routes: &dyn Routes) -> Result<(), String> {
    let e = &subject.emulator;
    let c = &subject.cluster;
    let before = e.resources().await;
    let doomed = e.add_instance("conformance-route-doomed").await;
    let cidr = "10.250.4.0/24";
    create(routes, c, &route_to(&doomed, cidr)).await?;
    e.remove_instance(&doomed).await;
    let found = listed(routes, c, cidr).await?;
    expect(found.len() == 1 && found[0].blackhole, || {
        format!("with its instance terminated, the route is listed as {found:?}")
    })?;
    remove(routes, c, &found[0]).await?;
    unchanged("a blackhole route deleted", &before, &e.resources().await)
}
