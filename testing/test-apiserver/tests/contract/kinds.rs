//! The kinds a CCM reads but never writes in the other suites: EndpointSlice,
//! Endpoints and PersistentVolume (and the one PersistentVolume write a CCM
//! makes), through the real `kube` client.

use crate::support;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    EndpointAddress, EndpointSubset, Endpoints, HostPathVolumeSource, PersistentVolume,
    PersistentVolumeSpec,
};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

fn endpoint_slice(name: &str, address: &str) -> EndpointSlice {
    EndpointSlice {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(BTreeMap::from([(
                "kubernetes.io/service-name".to_owned(),
                name.to_owned(),
            )])),
            ..Default::default()
        },
        address_type: "IPv4".into(),
        endpoints: vec![Endpoint {
            addresses: vec![address.to_owned()],
            ..Default::default()
        }],
        ports: Some(vec![EndpointPort {
            name: Some("http".into()),
            port: Some(8080),
            protocol: Some("TCP".into()),
            ..Default::default()
        }]),
    }
}

contract_test!(
    endpoint_slice_generation_counts_changes_outside_metadata,
    |t| {
        let slices: Api<EndpointSlice> = Api::namespaced(t.client(), "default");
        let name = ccm_test_support::unique("slice");
        let created = slices
            .create(&PostParams::default(), &endpoint_slice(&name, "10.0.0.1"))
            .await?;
        assert_eq!(created.metadata.generation, Some(1));

        let labelled = slices
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"extra": "yes"}}})),
            )
            .await?;
        assert_eq!(
            labelled.metadata.generation,
            Some(2),
            "labels count, as kube-apiserver's EndpointSlice strategy has it"
        );

        let finalized = slices
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"finalizers": ["example.com/keep"]}})),
            )
            .await?;
        assert_eq!(
            finalized.metadata.generation,
            Some(2),
            "other metadata does not"
        );

        let moved = slices
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"endpoints": [{"addresses": ["10.0.0.2"]}]})),
            )
            .await?;
        assert_eq!(moved.metadata.generation, Some(3), "the endpoints changed");
        assert_eq!(moved.endpoints[0].addresses, ["10.0.0.2"]);

        let selected = slices
            .list(&ListParams::default().labels(&format!("kubernetes.io/service-name={name}")))
            .await?;
        let names: Vec<_> = selected
            .items
            .iter()
            .map(|s| s.metadata.name.clone())
            .collect();
        assert_eq!(names, [Some(name.clone())]);
        slices
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"finalizers": null}})),
            )
            .await?;
        slices.delete(&name, &DeleteParams::default()).await?;
        assert!(slices.get_opt(&name).await?.is_none());
        Ok(())
    }
);

contract_test!(endpoints_are_created_by_an_update_of_a_missing_name, |t| {
    let endpoints: Api<Endpoints> = Api::namespaced(t.client(), "default");
    let name = ccm_test_support::unique("endpoints");
    let body = Endpoints {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            ..Default::default()
        },
        subsets: Some(vec![EndpointSubset {
            addresses: Some(vec![EndpointAddress {
                ip: "10.0.0.7".into(),
                ..Default::default()
            }]),
            ..Default::default()
        }]),
    };
    let created = endpoints
        .replace(&name, &PostParams::default(), &body)
        .await?;
    assert!(created.metadata.uid.is_some(), "PUT created it");
    let read = endpoints.get(&name).await?;
    let ip = read
        .subsets
        .and_then(|s| s.into_iter().next())
        .and_then(|s| s.addresses)
        .and_then(|a| a.into_iter().next())
        .map(|a| a.ip);
    assert_eq!(ip.as_deref(), Some("10.0.0.7"));
    endpoints.delete(&name, &DeleteParams::default()).await?;
    Ok(())
});

contract_test!(
    persistent_volumes_are_cluster_scoped_and_start_pending,
    |t| {
        let volumes: Api<PersistentVolume> = Api::all(t.client());
        let name = ccm_test_support::unique("pv");
        let volume = PersistentVolume {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeSpec {
                capacity: Some(BTreeMap::from([(
                    "storage".to_owned(),
                    Quantity("1Gi".into()),
                )])),
                access_modes: Some(vec!["ReadWriteOnce".into()]),
                host_path: Some(HostPathVolumeSource {
                    path: "/tmp/contract".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let created = volumes.create(&PostParams::default(), &volume).await?;
        assert_eq!(created.metadata.namespace, None, "cluster-scoped");
        assert_eq!(
            created.status.and_then(|s| s.phase).as_deref(),
            Some("Pending")
        );
        let listed = volumes
            .list(&ListParams::default().fields(&format!("metadata.name={name}")))
            .await?;
        assert_eq!(listed.items.len(), 1);
        volumes.delete(&name, &DeleteParams::default()).await?;
        Ok(())
    }
);

contract_test!(
    persistent_volumes_take_a_merge_patch_of_labels_and_a_first_node_affinity,
    |t| {
        let volumes: Api<PersistentVolume> = Api::all(t.client());
        let name = ccm_test_support::unique("pv");
        let volume = PersistentVolume {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeSpec {
                capacity: Some(BTreeMap::from([(
                    "storage".to_owned(),
                    Quantity("1Gi".into()),
                )])),
                access_modes: Some(vec!["ReadWriteOnce".into()]),
                host_path: Some(HostPathVolumeSource {
                    path: "/tmp/contract".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let created = volumes.create(&PostParams::default(), &volume).await?;
        let zone = "topology.kubernetes.io/zone";
        // What the persistentvolume-label controller sends: the labels, a
        // node affinity where there was none, and the resourceVersion read.
        let patch = json!({
            "metadata": {
                "resourceVersion": created.metadata.resource_version,
                "labels": { zone: "zone-b" },
            },
            "spec": { "nodeAffinity": { "required": { "nodeSelectorTerms": [
                { "matchExpressions": [{ "key": zone, "operator": "In", "values": ["zone-b"] }] }
            ] } } },
        });
        let patched = volumes
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        assert_eq!(
            patched.labels().get(zone).map(String::as_str),
            Some("zone-b")
        );
        let terms = patched
            .spec
            .and_then(|s| s.node_affinity)
            .and_then(|a| a.required)
            .map(|r| r.node_selector_terms)
            .unwrap_or_default();
        assert_eq!(terms.len(), 1);
        // The same patch again carries a stale resourceVersion: refused.
        let stale = volumes
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await;
        assert!(
            matches!(&stale, Err(kube::Error::Api(s)) if s.code == 409),
            "{stale:?}"
        );
        volumes.delete(&name, &DeleteParams::default()).await?;
        Ok(())
    }
);
