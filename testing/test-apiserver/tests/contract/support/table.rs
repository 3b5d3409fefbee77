//! Server-side printing in contract tests: GET as a Table, create objects,
//! and check a one-row Table's columns and cells.

use anyhow::{Context, ensure};
use http_body_util::BodyExt;
use serde_json::Value;

pub(crate) const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
/// Columns whose cells depend on the time of the request.
const TIMED: &[&str] = &["Age", "Last Seen", "First Seen", "Created At"];

/// GET `path` as a Table (with `query`).
pub(crate) async fn table(client: &kube::Client, path: &str) -> anyhow::Result<Value> {
    let request = http::Request::get(path)
        .header(http::header::ACCEPT, TABLE)
        .body(kube::client::Body::empty())?;
    let response = client.send(request).await?;
    let status = response.status().as_u16();
    let bytes = response.into_body().collect().await?.to_bytes();
    let body: Value = serde_json::from_slice(&bytes).context("a JSON answer")?;
    ensure!(status == 200, "GET {path}: {status}: {body}");
    ensure!(body["kind"] == "Table", "GET {path}: not a Table: {body}");
    Ok(body)
}

/// POSTs `object` to `path`, failing on anything but 201.
pub(crate) async fn create(
    client: &kube::Client,
    path: &str,
    object: Value,
) -> anyhow::Result<Value> {
    let (code, body) = super::raw(client, http::Method::POST, path, Some(&object)).await?;
    ensure!(code == 201, "POST {path}: {code}: {body}");
    Ok(body)
}

/// Checks the Table's columns against `(name, type, priority)` and its one
/// row's cells against `cells` (time-dependent ones skipped).
pub(crate) fn check(
    table: &Value,
    columns: &[(&str, &str, u8)],
    cells: &[Value],
) -> anyhow::Result<()> {
    let defs = table["columnDefinitions"]
        .as_array()
        .context("column definitions")?;
    let got: Vec<(String, String, u64)> = defs
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap_or_default().to_owned(),
                c["type"].as_str().unwrap_or_default().to_owned(),
                c["priority"].as_u64().unwrap_or_default(),
            )
        })
        .collect();
    let want: Vec<(String, String, u64)> = columns
        .iter()
        .map(|(n, t, p)| ((*n).to_owned(), (*t).to_owned(), u64::from(*p)))
        .collect();
    ensure!(got == want, "columns {got:?}, want {want:?}");
    for c in defs.iter().filter(|c| c["name"] == "Name") {
        ensure!(c["format"] == "name", "the Name column's format: {c}");
    }
    let rows = table["rows"].as_array().context("rows")?;
    ensure!(rows.len() == 1, "one row: {rows:?}");
    let row = rows[0]["cells"].as_array().context("cells")?;
    ensure!(
        row.len() == columns.len(),
        "as many cells as columns: {row:?}"
    );
    for (i, (name, ..)) in columns.iter().enumerate() {
        if TIMED.contains(name) {
            continue;
        }
        ensure!(row[i] == cells[i], "{name}: {} (want {})", row[i], cells[i]);
    }
    ensure!(
        rows[0]["object"]["kind"] == "PartialObjectMetadata",
        "rows carry metadata by default: {}",
        rows[0]["object"]
    );
    Ok(())
}
