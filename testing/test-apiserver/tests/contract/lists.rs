//! Contract: label and field selectors, pagination, list resourceVersion.

use crate::support;

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, VersionMatch};
use serde_json::json;

/// Creates `<run>-<suffix>` with labels `run=<run>` plus `labels`.
async fn create(
    cms: &Api<ConfigMap>,
    run: &str,
    suffix: &str,
    labels: serde_json::Value,
) -> anyhow::Result<ConfigMap> {
    let mut all = json!({"run": run});
    json_patch::merge(&mut all, &labels);
    let cm = serde_json::from_value(
        json!({"metadata": {"name": format!("{run}-{suffix}"), "labels": all}}),
    )?;
    Ok(cms.create(&PostParams::default(), &cm).await?)
}

async fn names(cms: &Api<ConfigMap>, params: &ListParams) -> anyhow::Result<Vec<String>> {
    Ok(cms
        .list(params)
        .await?
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect())
}

async fn cleanup(cms: &Api<ConfigMap>, run: &str) -> anyhow::Result<()> {
    cms.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels(&format!("run={run}")),
    )
    .await?;
    Ok(())
}

contract_test!(label_selectors_support_every_operator, |t| {
    let cms: Api<ConfigMap> = Api::namespaced(t.client(), "default");
    let run = ccm_test_support::unique("labels");
    create(&cms, &run, "a", json!({"tier": "front", "env": "prod"})).await?;
    create(&cms, &run, "b", json!({"tier": "back", "env": "prod"})).await?;
    create(&cms, &run, "c", json!({"tier": "back"})).await?;
    let select = |s: &str| ListParams::default().labels(&format!("run={run},{s}"));
    let suffixes = |names: Vec<String>| {
        names
            .into_iter()
            .map(|n| n[run.len() + 1..].to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(suffixes(names(&cms, &select("tier=front")).await?), ["a"]);
    assert_eq!(
        suffixes(names(&cms, &select("tier==back")).await?),
        ["b", "c"]
    );
    assert_eq!(
        suffixes(names(&cms, &select("tier!=front")).await?),
        ["b", "c"]
    );
    assert_eq!(
        suffixes(names(&cms, &select("tier in (front, back),env")).await?),
        ["a", "b"]
    );
    assert_eq!(
        suffixes(names(&cms, &select("tier notin (front)")).await?),
        ["b", "c"]
    );
    assert_eq!(suffixes(names(&cms, &select("!env")).await?), ["c"]);
    match cms.list(&select("tier in front")).await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 400, "{}", s.message),
        other => bail!("a malformed selector must be refused, got {other:?}"),
    }
    cleanup(&cms, &run).await
});

contract_test!(field_selectors_on_name_and_namespace, |t| {
    let cms: Api<ConfigMap> = Api::namespaced(t.client(), "default");
    let all: Api<ConfigMap> = Api::all(t.client());
    let run = ccm_test_support::unique("fields");
    create(&cms, &run, "a", json!({})).await?;
    create(&cms, &run, "b", json!({})).await?;
    let by_name = ListParams::default().fields(&format!("metadata.name={run}-a"));
    assert_eq!(names(&cms, &by_name).await?, [format!("{run}-a")]);
    let not_a = ListParams::default()
        .labels(&format!("run={run}"))
        .fields(&format!("metadata.name!={run}-a"));
    assert_eq!(names(&cms, &not_a).await?, [format!("{run}-b")]);
    let everywhere = ListParams::default()
        .labels(&format!("run={run}"))
        .fields("metadata.namespace=default");
    assert_eq!(names(&all, &everywhere).await?.len(), 2);
    // ConfigMaps have no field-label conversions of their own; Services do,
    // and kube-apiserver words the two refusals differently.
    match cms
        .list(&ListParams::default().fields("spec.bogus=x"))
        .await
    {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 400);
            assert!(
                s.message.contains(
                    "\"spec.bogus\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
                ),
                "{}",
                s.message
            );
        }
        other => bail!("an unsupported field must be refused, got {other:?}"),
    }
    let services: Api<Service> = Api::namespaced(t.client(), "default");
    match services
        .list(&ListParams::default().fields("spec.bogus=x"))
        .await
    {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 400);
            assert!(
                s.message.contains("field label not supported: spec.bogus"),
                "{}",
                s.message
            );
        }
        other => bail!("an unsupported field must be refused, got {other:?}"),
    }
    services
        .list(&ListParams::default().fields("spec.type=LoadBalancer"))
        .await
        .context("Services select on spec.type")?;
    cleanup(&cms, &run).await
});

contract_test!(pages_are_read_at_the_first_page_resource_version, |t| {
    let cms: Api<ConfigMap> = Api::namespaced(t.client(), "default");
    let run = ccm_test_support::unique("pages");
    for i in 0..5 {
        create(&cms, &run, &format!("{i}"), json!({})).await?;
    }
    let params = ListParams::default().labels(&format!("run={run}")).limit(2);
    let first = cms.list(&params).await?;
    assert_eq!(first.items.len(), 2);
    let list_rv = first.metadata.resource_version.clone();
    create(&cms, &run, "9", json!({})).await?;
    let mut seen: Vec<String> = first
        .items
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    let mut token = first.metadata.continue_.clone().filter(|c| !c.is_empty());
    let mut pages = 1;
    while let Some(next) = token {
        let page = cms.list(&params.clone().continue_token(&next)).await?;
        assert_eq!(
            page.metadata.resource_version, list_rv,
            "every page is read at one resourceVersion"
        );
        seen.extend(page.items.iter().filter_map(|c| c.metadata.name.clone()));
        token = page.metadata.continue_.filter(|c| !c.is_empty());
        pages += 1;
        if pages > 5 {
            bail!("pagination does not end");
        }
    }
    let expected: Vec<String> = (0..5).map(|i| format!("{run}-{i}")).collect();
    assert_eq!(
        seen, expected,
        "the object created after the first page is not in this list"
    );
    assert_eq!(pages, 3);
    cleanup(&cms, &run).await
});

contract_test!(
    exact_lists_show_a_past_state_and_lists_report_their_version,
    |t| {
        let cms: Api<ConfigMap> = Api::namespaced(t.client(), "default");
        let run = ccm_test_support::unique("exact");
        let created = create(&cms, &run, "a", json!({})).await?;
        let list = cms
            .list(&ListParams::default().labels(&format!("run={run}")))
            .await?;
        let at: u64 = list
            .metadata
            .resource_version
            .clone()
            .context("list rv")?
            .parse()?;
        let created_rv: u64 = created
            .metadata
            .resource_version
            .clone()
            .context("rv")?
            .parse()?;
        assert!(at >= created_rv);
        cms.patch(
            &format!("{run}-a"),
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"v": "2"}})),
        )
        .await?;
        create(&cms, &run, "b", json!({})).await?;
        let past = ListParams::default()
            .labels(&format!("run={run}"))
            .at(&at.to_string())
            .matching(VersionMatch::Exact);
        let then = cms.list(&past).await?;
        assert_eq!(
            then.metadata.resource_version.as_deref(),
            Some(at.to_string().as_str())
        );
        assert_eq!(then.items.len(), 1);
        assert_eq!(then.items[0].data, None, "the patch came after {at}");
        let now = cms
            .list(&ListParams::default().labels(&format!("run={run}")))
            .await?;
        assert_eq!(now.items.len(), 2);
        cleanup(&cms, &run).await
    }
);
