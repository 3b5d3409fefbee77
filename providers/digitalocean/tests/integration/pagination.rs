//! Lists end: at the last page by `links.pages`, by `meta.total`, on an
//! empty page, or on a page that repeats the one before (Prism answers
//! every page with the spec's one example), and an odd list never stops
//! startup.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::extract::Query;
use axum::routing::get;
use ccm_cloud_provider::{CloudProvider, Environment, InitContext};
use ccm_provider_digitalocean::{DigitalOceanProvider, Settings};
use serde_json::{Value, json};

/// Serves `/v2/regions` with `page(n)` for page `n`; answers the number of
/// requests so far.
async fn serve(page: fn(usize) -> Value) -> (String, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let app = axum::Router::new().route(
        "/v2/regions",
        get(
            move |Query(q): Query<std::collections::HashMap<String, String>>| {
                counter.fetch_add(1, Ordering::SeqCst);
                let n = q.get("page").and_then(|p| p.parse().ok()).unwrap_or(1);
                async move { axum::Json(page(n)) }
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, calls)
}

async fn initialize(url: &str, region: &str) -> Result<(), ccm_cloud_provider::CloudError> {
    let env = Environment::default()
        .with("DO_ACCESS_TOKEN", "dop_v1_x")
        .with("DO_OVERRIDE_URL", url)
        .with("REGION", region);
    let provider = DigitalOceanProvider::new(Settings::from_env(None, &env).unwrap()).unwrap();
    provider.initialize(&InitContext::new("c")).await
}

fn region(slug: &str) -> Value {
    json!({"slug": slug, "name": slug, "available": true, "features": [], "sizes": []})
}

#[tokio::test]
async fn lists_end_however_the_server_pages() {
    type Case = (&'static str, fn(usize) -> Value, &'static str, usize);
    let cases: &[Case] = &[
        (
            "the spec's example on every page (Prism)",
            |_| {
                json!({"regions": [region("nyc3")], "meta": {"total": 13}, "links": {"pages": {
                    "last": "https://api.digitalocean.com/v2/regions?page=13&per_page=1",
                    "next": "https://api.digitalocean.com/v2/regions?page=2&per_page=1"}}})
            },
            "nyc3",
            2,
        ),
        (
            "next forever, but meta.total reached",
            |n| {
                json!({"regions": [region(["nyc3", "sfo3", "ams3"][(n - 1) % 3])], "meta": {"total": 3},
                    "links": {"pages": {"next": format!("https://x/v2/regions?page={}", n + 1)}}})
            },
            "ams3",
            3,
        ),
        (
            "next forever, but the last page named",
            |n| {
                json!({"regions": [region(&format!("r{n}"))], "links": {"pages": {
                    "last": "https://x/v2/regions?per_page=1&page=2",
                    "next": format!("https://x/v2/regions?page={}", n + 1)}}})
            },
            "r2",
            2,
        ),
        (
            "an empty page that claims a next",
            |n| {
                let items = if n == 1 { vec![region("nyc3")] } else { vec![] };
                json!({"regions": items, "links": {"pages": {"next": "https://x/v2/regions?page=9"}}})
            },
            "nyc3",
            2,
        ),
    ];
    for (what, page, slug, want_calls) in cases {
        let (url, calls) = serve(*page).await;
        initialize(&url, slug)
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(calls.load(Ordering::SeqCst), *want_calls, "{what}");
    }
}

#[tokio::test]
async fn a_region_the_list_lacks_is_still_refused() {
    let (url, _) = serve(|_| json!({"regions": [region("nyc3")], "links": {}})).await;
    let err = initialize(&url, "mars1").await.unwrap_err();
    assert!(err.to_string().contains("mars1"), "{err}");
}
