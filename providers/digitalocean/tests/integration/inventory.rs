//! The provider's inventory (`<binary> audit`) against the fake API behind
//! Prism: two clusters and a cluster-less provider in one account; each
//! cluster lists and deletes only what carries its `DO_CLUSTER_ID` tag.

use crate::support;

use ccm_cloud_provider::{CloudProvider, Inventory, LoadBalancer, OwnedResource, Owner};
use ccm_provider_digitalocean::test_util::{Account, account};
use ccm_provider_digitalocean::{DigitalOceanProvider, FIREWALL_KIND};
use support::service;

const CLUSTER_A: &str = "2c9e4f1a-8b3d-4e6f-a1b2-c3d4e5f6a7b8";
const CLUSTER_B: &str = "7d0a1b2c-3d4e-4f5a-8b6c-7d8e9f0a1b2c";
const FIREWALL: &str = "k8s-public-access-a";

async fn cluster(account: &Account, cluster_id: &str) -> DigitalOceanProvider {
    account
        .provider_with(&account.env().with("DO_CLUSTER_ID", cluster_id))
        .await
}

/// Cluster A with its public-access firewall.
async fn cluster_a(account: &Account) -> DigitalOceanProvider {
    let env = account
        .env()
        .with("DO_CLUSTER_ID", CLUSTER_A)
        .with("PUBLIC_ACCESS_FIREWALL_NAME", FIREWALL)
        .with("PUBLIC_ACCESS_FIREWALL_TAGS", "k8s-worker");
    account.provider_with(&env).await
}

/// The name of each load balancer left in the account, sorted.
fn names(account: &Account) -> Vec<String> {
    let mut names: Vec<String> = account
        .load_balancers()
        .iter()
        .filter_map(|lb| lb["name"].as_str().map(str::to_owned))
        .collect();
    names.sort();
    names
}

fn load_balancer(id: &str, name: &str) -> OwnedResource {
    OwnedResource {
        kind: OwnedResource::LOAD_BALANCER.to_owned(),
        id: id.to_owned(),
        name: name.to_owned(),
        owner: Owner::LoadBalancerName(name.to_owned()),
        cidr: None,
        provider_id: None,
    }
}

/// The ID of the load balancer named `name`.
fn id_of(account: &Account, name: &str) -> String {
    account
        .load_balancers()
        .iter()
        .find(|lb| lb["name"] == name)
        .and_then(|lb| lb["id"].as_str().map(str::to_owned))
        .expect("load balancer")
}

#[tokio::test]
async fn a_cluster_lists_and_deletes_only_its_own_load_balancers_and_firewall() {
    let account = account();
    account.set_activate_after_reads(0);
    let a = cluster_a(&account).await;
    let b = cluster(&account, CLUSTER_B).await;
    let untagged = account.provider().await;
    let ours = service("web", "0a1b2c3d-4e5f-4a6b-8c7d-8e9f0a1b2c3d", &[]);
    let custom = service(
        "named",
        "1b2c3d4e-5f6a-4b7c-8d9e-0f1a2b3c4d5e",
        &[(
            ccm_provider_digitalocean::annotations::NAME,
            "shop-frontend",
        )],
    );
    let theirs = service("api", "2c3d4e5f-6a7b-4c8d-9e0f-1a2b3c4d5e6f", &[]);
    let nobodys = service("old", "3d4e5f6a-7b8c-4d9e-8f0a-2b3c4d5e6f7a", &[]);
    for svc in [&ours, &custom] {
        a.ensure_load_balancer("a", svc, &[]).await.unwrap();
    }
    b.ensure_load_balancer("b", &theirs, &[]).await.unwrap();
    untagged
        .ensure_load_balancer("x", &nobodys, &[])
        .await
        .unwrap();
    a.service_observer()
        .expect("a firewall to keep")
        .sync_services(&[])
        .await
        .unwrap();
    let ours_name = a.load_balancer_name("a", &ours);
    let custom_name = a.load_balancer_name("a", &custom);
    assert_eq!(custom_name, "shop-frontend");
    let firewall_id = account.firewalls()[0]["id"].as_str().unwrap().to_owned();
    let inventory = a.inventory().expect("an inventory with a cluster ID");

    let mut listed = inventory.owned_resources("a").await.unwrap();
    let firewall = listed.pop().expect("the firewall, listed last");
    assert_eq!(
        firewall,
        OwnedResource {
            kind: FIREWALL_KIND.to_owned(),
            id: firewall_id,
            name: FIREWALL.to_owned(),
            owner: Owner::Cluster,
            cidr: None,
            provider_id: None,
        }
    );
    listed.sort();
    let mut want = vec![
        load_balancer(&id_of(&account, &ours_name), &ours_name),
        load_balancer(&id_of(&account, &custom_name), &custom_name),
    ];
    want.sort();
    assert_eq!(listed, want, "A's load balancers only, owned by name");

    for resource in listed.iter().chain([&firewall]) {
        inventory.delete_owned("a", resource).await.unwrap();
    }
    assert!(inventory.owned_resources("a").await.unwrap().is_empty());
    assert!(account.firewalls().is_empty());
    let mut left = vec![
        b.load_balancer_name("b", &theirs),
        untagged.load_balancer_name("x", &nobodys),
    ];
    left.sort();
    assert_eq!(names(&account), left, "B's and the untagged one remain");
    for resource in listed.iter().chain([&firewall]) {
        inventory
            .delete_owned("a", resource)
            .await
            .expect("deleting what is already gone succeeds");
    }
}

#[tokio::test]
async fn delete_owned_refuses_what_is_not_this_clusters_and_deletes_nothing() {
    let account = account();
    account.set_activate_after_reads(0);
    let a = cluster(&account, CLUSTER_A).await;
    let b = cluster(&account, CLUSTER_B).await;
    let theirs = service("api", "4e5f6a7b-8c9d-4e0f-9a1b-3c4d5e6f7a8b", &[]);
    b.ensure_load_balancer("b", &theirs, &[]).await.unwrap();
    let name = b.load_balancer_name("b", &theirs);
    let forged = load_balancer(&id_of(&account, &name), &name);

    let refused = a
        .inventory()
        .expect("an inventory")
        .delete_owned("a", &forged)
        .await
        .expect_err("B's load balancer is not A's to delete");

    assert!(refused.to_string().contains("not deleting"), "{refused}");
    assert_eq!(names(&account), [name]);
    assert_eq!(
        account.count("DELETE", &format!("/v2/load_balancers/{}", forged.id)),
        0
    );
}

#[tokio::test]
async fn without_a_cluster_id_there_is_no_inventory() {
    let account = account();
    account.set_activate_after_reads(0);
    let provider = account.provider().await;
    provider
        .ensure_load_balancer(
            "c",
            &service("web", "5f6a7b8c-9d0e-4f1a-8b2c-4d5e6f7a8b9c", &[]),
            &[],
        )
        .await
        .unwrap();

    assert!(provider.inventory().is_none());
    let refused = Inventory::owned_resources(&provider, "c")
        .await
        .expect_err("nothing tells this cluster's load balancers from another's");
    assert!(refused.to_string().contains("DO_CLUSTER_ID"), "{refused}");
}
