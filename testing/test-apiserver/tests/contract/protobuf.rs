//! Contract: `application/vnd.kubernetes.protobuf` bodies, as client-go's
//! typed clients (and so `kubectl create service|secret|...`) send and read
//! them: objects written as protobuf read back the same as JSON, lists and
//! created objects come back as protobuf to a client ranking it first, and
//! `DeleteOptions` may be protobuf too.

use crate::support;

use anyhow::{Context, bail};
use http_body_util::BodyExt;
use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use kube::Client;
use prost::Message;
use serde_json::{Value, json};

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
/// What client-go's typed clients accept.
const CLIENT_GO_ACCEPT: &str = "application/vnd.kubernetes.protobuf,application/json";

/// `message` as a Kubernetes protobuf body: `k8s\0` and a `runtime.Unknown`.
fn envelope(api_version: &str, kind: &str, message: &impl Message) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(message.encode_to_vec()),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut body = b"k8s\0".to_vec();
    body.extend(unknown.encode_to_vec());
    body
}

/// The message a protobuf response body holds, with its kind.
fn open<M: Message + Default>(body: &[u8]) -> anyhow::Result<(String, M)> {
    let envelope = body
        .strip_prefix(b"k8s\0")
        .with_context(|| format!("not protobuf: {}", String::from_utf8_lossy(body)))?;
    let unknown = Unknown::decode(envelope)?;
    let kind = unknown.type_meta.and_then(|t| t.kind).unwrap_or_default();
    Ok((kind, M::decode(unknown.raw.unwrap_or_default().as_slice())?))
}

/// Sends a protobuf (or empty) body the way client-go does; answers the
/// status code, the response's content type and its body.
async fn send(
    client: &Client,
    method: http::Method,
    path: &str,
    body: Vec<u8>,
) -> anyhow::Result<(u16, String, Vec<u8>)> {
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::CONTENT_TYPE, PROTOBUF)
        .header(http::header::ACCEPT, CLIENT_GO_ACCEPT)
        .body(kube::client::Body::from(body))?;
    let response = client.send(request).await?;
    let code = response.status().as_u16();
    let content_type = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let bytes = response.into_body().collect().await?.to_bytes().to_vec();
    Ok((code, content_type, bytes))
}

fn metadata(name: &str) -> Option<meta::ObjectMeta> {
    Some(meta::ObjectMeta {
        name: Some(name.into()),
        labels: [("app".to_owned(), name.to_owned())].into(),
        ..Default::default()
    })
}

/// What `kubectl create service loadbalancer NAME --tcp=80:8080` sends.
fn load_balancer(name: &str) -> core::Service {
    core::Service {
        metadata: metadata(name),
        spec: Some(core::ServiceSpec {
            ports: vec![core::ServicePort {
                name: Some("80-8080".into()),
                protocol: Some("TCP".into()),
                port: Some(80),
                target_port: Some(IntOrString {
                    r#type: Some(0),
                    int_val: Some(8080),
                    str_val: Some(String::new()),
                }),
                node_port: Some(0),
                ..Default::default()
            }],
            selector: [("app".to_owned(), name.to_owned())].into(),
            r#type: Some("LoadBalancer".into()),
            cluster_ip: Some(String::new()),
            ..Default::default()
        }),
        status: Some(core::ServiceStatus::default()),
    }
}

contract_test!(
    a_service_created_as_protobuf_reads_back_as_json_and_protobuf,
    |t| {
        let client = t.client();
        let name = ccm_test_support::unique("pb-svc");
        let body = envelope("v1", "Service", &load_balancer(&name));
        let (code, content_type, answer) = send(
            &client,
            http::Method::POST,
            "/api/v1/namespaces/default/services",
            body,
        )
        .await?;
        if code != 201 {
            bail!(
                "create answered {code}: {}",
                String::from_utf8_lossy(&answer)
            );
        }
        assert_eq!(content_type, PROTOBUF);
        let (kind, created) = open::<core::Service>(&answer)?;
        assert_eq!(kind, "Service");
        let spec = created.spec.context("spec")?;
        assert!(
            spec.cluster_ip.is_some_and(|ip| !ip.is_empty()),
            "a cluster IP is allocated"
        );
        assert!(
            spec.ports[0].node_port.is_some_and(|p| p > 0),
            "a node port is allocated"
        );

        let (code, json) = support::raw(
            &client,
            http::Method::GET,
            &format!("/api/v1/namespaces/default/services/{name}"),
            None,
        )
        .await?;
        assert_eq!(code, 200);
        assert_eq!(json["spec"]["type"], "LoadBalancer");
        assert_eq!(json["spec"]["selector"], json!({ "app": name }));
        assert_eq!(json["spec"]["ports"][0]["targetPort"], 8080);
        assert_eq!(json["spec"]["ports"][0]["name"], "80-8080");
        assert_eq!(json["metadata"]["labels"], json!({ "app": name }));

        let (code, content_type, answer) = send(
            &client,
            http::Method::GET,
            &format!("/api/v1/namespaces/default/services?labelSelector=app%3D{name}"),
            Vec::new(),
        )
        .await?;
        assert_eq!((code, content_type.as_str()), (200, PROTOBUF));
        let (kind, list) = open::<core::ServiceList>(&answer)?;
        assert_eq!(kind, "ServiceList");
        assert_eq!(list.items.len(), 1);
        assert!(list.metadata.and_then(|m| m.resource_version).is_some());

        // A DeleteOptions in protobuf whose precondition does not hold.
        let options = meta::DeleteOptions {
            preconditions: Some(meta::Preconditions {
                uid: Some("not-its-uid".into()),
                resource_version: None,
            }),
            ..Default::default()
        };
        let path = format!("/api/v1/namespaces/default/services/{name}");
        let body = envelope("v1", "DeleteOptions", &options);
        let (code, _, answer) = send(&client, http::Method::DELETE, &path, body).await?;
        assert_eq!(code, 409, "{}", String::from_utf8_lossy(&answer));
        let (code, _, _) = send(&client, http::Method::DELETE, &path, Vec::new()).await?;
        assert_eq!(code, 200);
        Ok(())
    }
);

contract_test!(secret_bytes_and_empty_values_survive_protobuf, |t| {
    let client = t.client();
    let name = ccm_test_support::unique("pb-secret");
    let secret = core::Secret {
        metadata: metadata(&name),
        data: [
            ("bin".to_owned(), vec![0, 159, 146, 150]),
            ("empty".to_owned(), Vec::new()),
        ]
        .into(),
        r#type: Some("Opaque".into()),
        ..Default::default()
    };
    let (code, _, answer) = send(
        &client,
        http::Method::POST,
        "/api/v1/namespaces/default/secrets",
        envelope("v1", "Secret", &secret),
    )
    .await?;
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&answer));
    let (code, json) = support::raw(
        &client,
        http::Method::GET,
        &format!("/api/v1/namespaces/default/secrets/{name}"),
        None,
    )
    .await?;
    assert_eq!(code, 200);
    assert_eq!(json["data"], json!({ "bin": "AJ+Slg==", "empty": "" }));
    assert_eq!(json["type"], "Opaque");
    support::raw(
        &client,
        http::Method::DELETE,
        &format!("/api/v1/namespaces/default/secrets/{name}"),
        None,
    )
    .await?;
    Ok(())
});

contract_test!(a_body_that_is_not_protobuf_is_a_bad_request, |t| {
    let (code, _, answer) = send(
        &t.client(),
        http::Method::POST,
        "/api/v1/namespaces/default/configmaps",
        br#"{"apiVersion":"v1","kind":"ConfigMap"}"#.to_vec(),
    )
    .await?;
    assert_eq!(code, 400, "{}", String::from_utf8_lossy(&answer));
    let status: Value = serde_json::from_slice(&answer).unwrap_or_else(|_| {
        // kube-apiserver answers a protobuf client's error in protobuf.
        open::<meta::Status>(&answer)
            .map(|(_, s)| json!({ "reason": s.reason }))
            .unwrap_or(Value::Null)
    });
    assert_eq!(status["reason"], "BadRequest");
    Ok(())
});

contract_test!(openapi_v2_is_served_as_json_and_as_gnostic_protobuf, |t| {
    let client = t.client();
    let (code, doc) = support::raw(&client, http::Method::GET, "/openapi/v2", None).await?;
    assert_eq!(code, 200);
    assert_eq!(doc["swagger"], "2.0");
    let service = &doc["definitions"]["io.k8s.api.core.v1.Service"];
    assert_eq!(
        service["properties"]["spec"]["$ref"],
        "#/definitions/io.k8s.api.core.v1.ServiceSpec"
    );
    assert_eq!(
        service["x-kubernetes-group-version-kind"],
        json!([{ "group": "", "kind": "Service", "version": "v1" }])
    );

    // What client-go's discovery asks for, and what kube-apiserver answers.
    let request = http::Request::get("/openapi/v2")
        .header(
            http::header::ACCEPT,
            "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
        )
        .body(kube::client::Body::empty())?;
    let response = client.send(request).await?;
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(
        response.headers()[http::header::CONTENT_TYPE],
        "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    );
    let body = response.into_body().collect().await?.to_bytes();
    let needle = b"io.k8s.api.core.v1.ServiceSpec";
    assert!(
        body.windows(needle.len()).any(|w| w == needle),
        "no Service schema"
    );
    Ok(())
});
