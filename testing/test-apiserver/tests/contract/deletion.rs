//! Contract: finalizer-aware deletion, preconditions, propagation policies.

use crate::support;

use std::time::Duration;

use anyhow::{Context, bail};
use ccm_test_support::eventually;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{
    DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions, PropagationPolicy,
};
use serde_json::json;

async fn create(
    cms: &Api<ConfigMap>,
    name: &str,
    extra: serde_json::Value,
) -> anyhow::Result<ConfigMap> {
    let mut body = json!({"metadata": {"name": name}});
    json_patch::merge(&mut body, &extra);
    Ok(cms
        .create(&PostParams::default(), &serde_json::from_value(body)?)
        .await?)
}

/// Waits, bounded, until `name` is gone.
async fn gone(cms: &Api<ConfigMap>, name: &str) -> anyhow::Result<()> {
    eventually(&format!("{name} gone"), Duration::from_secs(10), || async {
        Ok(cms.get_opt(name).await?.is_none().then_some(()))
    })
    .await
}

contract_test!(finalizers_hold_an_object_until_the_last_is_removed, |t| {
    let cms: Api<ConfigMap> = Api::namespaced(t.client(), "default");
    let name = ccm_test_support::unique("finalized");
    create(
        &cms,
        &name,
        json!({"metadata": {"finalizers": ["example.com/a", "example.com/b"]}}),
    )
    .await?;
    cms.delete(&name, &DeleteParams::default()).await?;
    let held = cms.get(&name).await?;
    assert!(held.metadata.deletion_timestamp.is_some());
    let add =
        json!({"metadata": {"finalizers": ["example.com/a", "example.com/b", "example.com/c"]}});
    match cms
        .patch(&name, &PatchParams::default(), &Patch::Merge(add))
        .await
    {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 422, "{}", s.message),
        other => bail!("adding a finalizer while deleting must be refused, got {other:?}"),
    }
    let one_left = json!({"metadata": {"finalizers": ["example.com/b"]}});
    let still = cms
        .patch(&name, &PatchParams::default(), &Patch::Merge(one_left))
        .await?;
    assert!(still.metadata.deletion_timestamp.is_some());
    cms.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await?;
    assert!(cms.get_opt(&name).await?.is_none());
    Ok(())
});

contract_test!(delete_preconditions_are_honoured, |t| {
    let cms: Api<ConfigMap> = Api::namespaced(t.client(), "default");
    let name = ccm_test_support::unique("preconditions");
    let created = create(&cms, &name, json!({})).await?;
    let wrong_uid = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some("00000000-0000-4000-8000-000000000000".into()),
            resource_version: None,
        }),
        ..Default::default()
    };
    match cms.delete(&name, &wrong_uid).await {
        Err(kube::Error::Api(s)) => assert_eq!((s.code, s.reason.as_str()), (409, "Conflict")),
        other => bail!("wrong uid must conflict, got {other:?}"),
    }
    cms.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"x": "1"}})),
    )
    .await?;
    let stale_rv = DeleteParams {
        preconditions: Some(Preconditions {
            uid: None,
            resource_version: created.metadata.resource_version.clone(),
        }),
        ..Default::default()
    };
    match cms.delete(&name, &stale_rv).await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 409),
        other => bail!("stale resourceVersion must conflict, got {other:?}"),
    }
    let right = DeleteParams {
        preconditions: Some(Preconditions {
            uid: created.metadata.uid.clone(),
            resource_version: None,
        }),
        ..Default::default()
    };
    cms.delete(&name, &right).await?;
    gone(&cms, &name).await
});

contract_test!(
    every_propagation_policy_deletes_an_object_without_dependents,
    |t| {
        let cms: Api<ConfigMap> = Api::namespaced(t.client(), "default");
        for policy in [
            PropagationPolicy::Background,
            PropagationPolicy::Foreground,
            PropagationPolicy::Orphan,
        ] {
            let name = ccm_test_support::unique("propagation");
            create(&cms, &name, json!({})).await?;
            let params = DeleteParams {
                propagation_policy: Some(policy.clone()),
                ..Default::default()
            };
            cms.delete(&name, &params).await?;
            // Background deletes at once. Foreground and Orphan leave the
            // object marked for deletion with the policy's finalizer, which
            // the garbage collector (kube-controller-manager) removes; the
            // in-memory server plays both parts and deletes at once.
            let finalizer = match policy {
                PropagationPolicy::Background => None,
                PropagationPolicy::Foreground => Some("foregroundDeletion"),
                PropagationPolicy::Orphan => Some("orphan"),
            };
            match (cms.get_opt(&name).await?, finalizer) {
                (None, _) => {}
                (Some(held), Some(finalizer)) if t.server().is_none() => {
                    assert!(held.metadata.deletion_timestamp.is_some(), "{policy:?}");
                    assert_eq!(
                        held.metadata.finalizers,
                        Some(vec![finalizer.to_owned()]),
                        "{policy:?}"
                    );
                    let release = json!({"metadata": {"finalizers": null}});
                    cms.patch(&name, &PatchParams::default(), &Patch::Merge(release))
                        .await?;
                    gone(&cms, &name)
                        .await
                        .with_context(|| format!("{policy:?}"))?;
                }
                (Some(held), _) => bail!("{policy:?} left {held:?}"),
            }
        }
        Ok(())
    }
);

contract_test!(delete_collection_deletes_only_selected_objects, |t| {
    let cms: Api<ConfigMap> = Api::namespaced(t.client(), "default");
    let run = ccm_test_support::unique("collection");
    for (name, doomed) in [("a", "yes"), ("b", "yes"), ("c", "no")] {
        create(
            &cms,
            &format!("{run}-{name}"),
            json!({"metadata": {"labels": {"run": run, "doomed": doomed}}}),
        )
        .await?;
    }
    let selected = ListParams::default().labels(&format!("run={run},doomed=yes"));
    cms.delete_collection(&DeleteParams::default(), &selected)
        .await?;
    gone(&cms, &format!("{run}-a")).await?;
    gone(&cms, &format!("{run}-b")).await?;
    assert!(cms.get_opt(&format!("{run}-c")).await?.is_some());
    cms.delete(&format!("{run}-c"), &DeleteParams::default())
        .await?;
    Ok(())
});
