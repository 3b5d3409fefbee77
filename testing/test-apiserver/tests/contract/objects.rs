//! Contract: object identity, resourceVersion, generation and conflicts.

use crate::support;

use std::collections::BTreeMap;

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, PodSpec, Secret};
use kube::Api;
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams, ValidationDirective};
use serde_json::json;

/// The API error a call failed with, or a failure of the test.
fn api_error<T: std::fmt::Debug>(
    result: kube::Result<T>,
) -> anyhow::Result<Box<kube::core::Status>> {
    match result {
        Err(kube::Error::Api(status)) => Ok(status),
        other => bail!("expected an API error, got {other:?}"),
    }
}

fn config_map(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        ..Default::default()
    }
}

fn rv(meta: &ObjectMeta) -> anyhow::Result<u64> {
    meta.resource_version
        .as_deref()
        .context("no resourceVersion")?
        .parse()
        .context("resourceVersion is not a number")
}

contract_test!(create_assigns_identity_and_refuses_duplicates, |t| {
    let cms: Api<ConfigMap> = Api::namespaced(t.client(), "default");
    let name = ccm_test_support::unique("identity");
    let created = cms
        .create(&PostParams::default(), &config_map(&name, &[("a", "1")]))
        .await?;
    assert!(
        created
            .metadata
            .uid
            .as_deref()
            .is_some_and(|u| u.len() == 36),
        "{:?}",
        created.metadata.uid
    );
    assert!(created.metadata.creation_timestamp.is_some());
    assert!(rv(&created.metadata)? > 0);
    let again = api_error(
        cms.create(&PostParams::default(), &config_map(&name, &[]))
            .await,
    )?;
    assert_eq!((again.code, again.reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(
        again.message,
        format!("configmaps \"{name}\" already exists")
    );
    cms.delete(&name, &DeleteParams::default()).await?;
    Ok(())
});

contract_test!(resource_versions_increase_across_kinds, |t| {
    let cms: Api<ConfigMap> = Api::namespaced(t.client(), "default");
    let secrets: Api<Secret> = Api::namespaced(t.client(), "default");
    let name = ccm_test_support::unique("global-rv");
    let cm = cms
        .create(&PostParams::default(), &config_map(&name, &[]))
        .await?;
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            ..Default::default()
        },
        ..Default::default()
    };
    let secret = secrets.create(&PostParams::default(), &secret).await?;
    let patched = cms
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"x": "y"}})),
        )
        .await?;
    assert!(rv(&cm.metadata)? < rv(&secret.metadata)?);
    assert!(rv(&secret.metadata)? < rv(&patched.metadata)?);
    cms.delete(&name, &DeleteParams::default()).await?;
    secrets.delete(&name, &DeleteParams::default()).await?;
    Ok(())
});

contract_test!(generate_name_appends_a_random_suffix, |t| {
    let cms: Api<ConfigMap> = Api::namespaced(t.client(), "default");
    let prefix = format!("{}-", ccm_test_support::unique("gen"));
    let mut cm = config_map("", &[]);
    cm.metadata.name = None;
    cm.metadata.generate_name = Some(prefix.clone());
    let a = cms.create(&PostParams::default(), &cm).await?;
    let b = cms.create(&PostParams::default(), &cm).await?;
    let (a, b) = (
        a.metadata.name.context("named")?,
        b.metadata.name.context("named")?,
    );
    assert!(a.starts_with(&prefix) && a.len() == prefix.len() + 5, "{a}");
    assert_ne!(a, b);
    cms.delete(&a, &DeleteParams::default()).await?;
    cms.delete(&b, &DeleteParams::default()).await?;
    Ok(())
});

contract_test!(missing_objects_are_404_with_a_status_body, |t| {
    let cms: Api<ConfigMap> = Api::namespaced(t.client(), "default");
    let name = ccm_test_support::unique("absent");
    let status = api_error(cms.get(&name).await)?;
    assert_eq!((status.code, status.reason.as_str()), (404, "NotFound"));
    assert_eq!(status.message, format!("configmaps \"{name}\" not found"));
    let details = status.details.context("details")?;
    assert_eq!(
        (details.name.as_str(), details.kind.as_str()),
        (name.as_str(), "configmaps")
    );
    let patch = api_error(
        cms.patch(&name, &PatchParams::default(), &Patch::Merge(json!({})))
            .await,
    )?;
    assert_eq!(patch.code, 404);
    Ok(())
});

contract_test!(objects_in_a_missing_namespace_are_refused, |t| {
    let cms: Api<ConfigMap> = Api::namespaced(t.client(), &ccm_test_support::unique("nowhere"));
    let status = api_error(
        cms.create(&PostParams::default(), &config_map("x", &[]))
            .await,
    )?;
    assert_eq!((status.code, status.reason.as_str()), (404, "NotFound"));
    assert!(
        status.message.starts_with("namespaces \""),
        "{}",
        status.message
    );
    Ok(())
});

contract_test!(
    stale_resource_version_is_a_conflict_for_put_and_patch,
    |t| {
        let cms: Api<ConfigMap> = Api::namespaced(t.client(), "default");
        let name = ccm_test_support::unique("stale");
        let original = cms
            .create(&PostParams::default(), &config_map(&name, &[("a", "1")]))
            .await?;
        let mut newer = original.clone();
        newer.data = Some(BTreeMap::from([("a".into(), "2".into())]));
        cms.replace(&name, &PostParams::default(), &newer).await?;
        let mut stale = original.clone();
        stale.data = Some(BTreeMap::from([("a".into(), "3".into())]));
        let put = api_error(cms.replace(&name, &PostParams::default(), &stale).await)?;
        assert_eq!((put.code, put.reason.as_str()), (409, "Conflict"));
        let old_rv = original.metadata.resource_version.clone().context("rv")?;
        let patch = json!({"metadata": {"resourceVersion": old_rv}, "data": {"a": "4"}});
        let patched = api_error(
            cms.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                .await,
        )?;
        assert_eq!((patched.code, patched.reason.as_str()), (409, "Conflict"));
        assert_eq!(cms.get(&name).await?.data, newer.data);
        cms.delete(&name, &DeleteParams::default()).await?;
        Ok(())
    }
);

contract_test!(writes_that_change_nothing_keep_the_resource_version, |t| {
    let cms: Api<ConfigMap> = Api::namespaced(t.client(), "default");
    let name = ccm_test_support::unique("noop");
    let created = cms
        .create(&PostParams::default(), &config_map(&name, &[("a", "1")]))
        .await?;
    let same = cms
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"a": "1"}})),
        )
        .await?;
    assert_eq!(
        same.metadata.resource_version,
        created.metadata.resource_version
    );
    cms.delete(&name, &DeleteParams::default()).await?;
    Ok(())
});

contract_test!(updates_keep_uid_and_creation_timestamp, |t| {
    let cms: Api<ConfigMap> = Api::namespaced(t.client(), "default");
    let name = ccm_test_support::unique("system-fields");
    let created = cms
        .create(&PostParams::default(), &config_map(&name, &[]))
        .await?;
    let mut body = config_map(&name, &[("b", "2")]);
    body.metadata.resource_version = created.metadata.resource_version.clone();
    let updated = cms.replace(&name, &PostParams::default(), &body).await?;
    assert_eq!(updated.metadata.uid, created.metadata.uid);
    assert_eq!(
        updated.metadata.creation_timestamp,
        created.metadata.creation_timestamp
    );
    body.metadata.uid = Some("00000000-0000-4000-8000-000000000000".into());
    body.metadata.resource_version = None;
    let status = api_error(cms.replace(&name, &PostParams::default(), &body).await)?;
    assert_eq!(
        status.code, 409,
        "a different uid is a failed precondition: {}",
        status.message
    );
    cms.delete(&name, &DeleteParams::default()).await?;
    Ok(())
});

contract_test!(pod_generation_counts_spec_changes_only, |t| {
    let pods: Api<Pod> = Api::namespaced(t.client(), "default");
    let name = ccm_test_support::unique("generation");
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "main".into(),
                image: Some("registry.k8s.io/pause:3.9".into()),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    let created = pods.create(&PostParams::default(), &pod).await?;
    assert_eq!(created.metadata.generation, Some(1));
    assert_eq!(
        created.status.and_then(|s| s.phase).as_deref(),
        Some("Pending")
    );
    let labelled = pods
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await?;
    assert_eq!(labelled.metadata.generation, Some(1));
    let image =
        json!({"spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]}});
    let changed = pods
        .patch(&name, &PatchParams::default(), &Patch::Strategic(image))
        .await?;
    assert_eq!(changed.metadata.generation, Some(2));
    pods.delete(&name, &DeleteParams::default().grace_period(0))
        .await?;
    Ok(())
});

contract_test!(unknown_fields_are_dropped_or_refused_when_strict, |t| {
    let cms: Api<ConfigMap> = Api::namespaced(t.client(), "default");
    let name = ccm_test_support::unique("unknown");
    cms.create(&PostParams::default(), &config_map(&name, &[]))
        .await?;
    let patch = Patch::Merge(json!({"data": {"k": "v"}, "bogus": {"x": 1}}));
    let warned = cms.patch(&name, &PatchParams::default(), &patch).await?;
    assert_eq!(
        warned.data.and_then(|d| d.get("k").cloned()).as_deref(),
        Some("v")
    );
    let raw = Api::<kube::api::DynamicObject>::namespaced_with(
        t.client(),
        "default",
        &kube::api::ApiResource::erase::<ConfigMap>(&()),
    );
    let stored = raw.get(&name).await?;
    assert!(
        stored.data.get("bogus").is_none(),
        "unknown field kept: {:?}",
        stored.data
    );
    let strict = PatchParams {
        field_validation: Some(ValidationDirective::Strict),
        ..Default::default()
    };
    // A patch is refused as an invalid value of the field `patch`...
    let refused = api_error(cms.patch(&name, &strict, &patch).await)?;
    assert_eq!((refused.code, refused.reason.as_str()), (422, "Invalid"));
    assert!(
        refused
            .message
            .contains("strict decoding error: unknown field \"bogus\""),
        "{}",
        refused.message
    );
    // ...a body as one that cannot be decoded.
    let body = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": format!("{name}-b")},
        "bogus": {"x": 1}
    });
    let request =
        http::Request::post("/api/v1/namespaces/default/configmaps?fieldValidation=Strict")
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&body)?)?;
    let created = t.client().request::<ConfigMap>(request).await;
    let refused = api_error(created)?;
    assert_eq!((refused.code, refused.reason.as_str()), (400, "BadRequest"));
    assert_eq!(
        refused.message,
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: unknown field \"bogus\""
    );
    cms.delete(&name, &DeleteParams::default()).await?;
    Ok(())
});

contract_test!(
    repeated_fields_are_refused_under_strict_and_warned_about_otherwise,
    |t| {
        let name = ccm_test_support::unique("dup");
        // Built by hand: serde cannot write a repeated key.
        let body = format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","labels":{{"a":"1","a":"2"}}}},"data":{{"x":"1","x":"2"}},"bogus":1}}"#
        );
        let post = |validation: &str| {
            http::Request::post(format!(
                "/api/v1/namespaces/default/configmaps?fieldValidation={validation}"
            ))
            .header("content-type", "application/json")
            .body(body.clone().into_bytes())
        };
        let refused = api_error(t.client().request::<ConfigMap>(post("Strict")?).await)?;
        assert_eq!((refused.code, refused.reason.as_str()), (400, "BadRequest"));
        assert_eq!(
            refused.message,
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: \
         duplicate field \"metadata.labels.a\", duplicate field \"data.x\", unknown field \"bogus\""
        );

        let response = t
            .client()
            .send(post("Warn")?.map(kube::client::Body::from))
            .await?;
        assert_eq!(response.status().as_u16(), 201);
        let warnings: Vec<String> = response
            .headers()
            .get_all(http::header::WARNING)
            .iter()
            .filter_map(|v| v.to_str().ok().map(str::to_owned))
            .collect();
        assert_eq!(
            warnings,
            [
                r#"299 - "duplicate field \"metadata.labels.a\"""#,
                r#"299 - "duplicate field \"data.x\"""#,
                r#"299 - "unknown field \"bogus\"""#,
            ]
        );
        // The last of the repeated values is kept, as Go's decoder keeps it.
        let cms: Api<ConfigMap> = Api::namespaced(t.client(), "default");
        let stored = cms.get(&name).await?;
        assert_eq!(
            stored.data.context("data")?.get("x").map(String::as_str),
            Some("2")
        );
        assert_eq!(
            stored
                .metadata
                .labels
                .context("labels")?
                .get("a")
                .map(String::as_str),
            Some("2")
        );
        cms.delete(&name, &DeleteParams::default()).await?;
        Ok(())
    }
);
