//! Server-side printing: `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`
//! answered with a `meta.k8s.io/v1` `Table`, as kube-apiserver answers
//! `kubectl get`: one row per object, the columns of kube-apiserver's
//! printer for the kind (wide columns included, at priority 1, which kubectl
//! shows with `-o wide`), and each row's object as `includeObject` asks.

mod age;
mod printers;

use serde_json::{Map, Value, json};

use crate::meta;
use crate::registry;
use crate::resources::ResourceType;
use crate::status::ApiError;

/// What a row carries besides its cells (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Include {
    None,
    /// The default: the object's metadata as `PartialObjectMetadata`.
    Metadata,
    Object,
}

impl Include {
    /// `includeObject` as the query gives it (absent: `Metadata`).
    ///
    /// # Errors
    /// 400 for any other value, as kube-apiserver.
    pub(crate) fn parse(value: Option<&str>) -> Result<Self, ApiError> {
        match value {
            None | Some("" | "Metadata") => Ok(Self::Metadata),
            Some("None") => Ok(Self::None),
            Some("Object") => Ok(Self::Object),
            Some(other) => Err(ApiError::bad_request(format!(
                "includeObject: Unsupported value: \"{other}\": supported values: \"None\", \"Metadata\", \"Object\""
            ))),
        }
    }
}

/// One column of a printer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Column {
    pub(crate) name: &'static str,
    /// `string`, `integer` or `date`.
    pub(crate) kind: &'static str,
    /// `name` for the object's name; empty otherwise.
    pub(crate) format: &'static str,
    /// 0: always shown; 1: with `-o wide` only.
    pub(crate) priority: u8,
    pub(crate) description: &'static str,
}

fn column_json(c: &Column) -> Value {
    json!({
        "name": c.name,
        "type": c.kind,
        "format": c.format,
        "description": c.description,
        "priority": c.priority,
    })
}

/// The row of `stored` (the storage representation) as `rt` shows it.
fn row(rt: &ResourceType, include: Include, stored: &Value, now: jiff::Timestamp) -> Value {
    let cells = printers::cells(rt.kind_id, stored, now);
    let mut row = Map::new();
    row.insert("cells".into(), Value::Array(cells));
    match include {
        Include::None => {}
        Include::Metadata => {
            // Both views of an object share its metadata: no need to build
            // the view.
            row.insert("object".into(), meta::partial_object_metadata(stored));
        }
        Include::Object => {
            row.insert("object".into(), registry::view(rt, stored));
        }
    }
    Value::Object(row)
}

/// A `Table` of `objects` (storage representations) with `metadata` (the
/// list's, or the object's resourceVersion); `columns` false leaves the
/// column definitions out, as kube-apiserver does after a watch's first
/// event.
pub(crate) fn table<'a>(
    rt: &ResourceType,
    include: Include,
    objects: impl IntoIterator<Item = &'a Value>,
    metadata: &Value,
    columns: bool,
) -> Value {
    let now = jiff::Timestamp::now();
    let definitions: Vec<Value> = if columns {
        printers::columns(rt.kind_id)
            .iter()
            .map(column_json)
            .collect()
    } else {
        Vec::new()
    };
    let rows: Vec<Value> = objects
        .into_iter()
        .map(|o| row(rt, include, o, now))
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": definitions,
        "rows": rows,
    })
}

/// A `Table` of one object.
pub(crate) fn single(rt: &ResourceType, include: Include, stored: &Value, columns: bool) -> Value {
    let rv = stored
        .pointer("/metadata/resourceVersion")
        .cloned()
        .unwrap_or(Value::Null);
    let metadata = if rv.is_null() {
        json!({})
    } else {
        json!({ "resourceVersion": rv })
    };
    table(rt, include, [stored], &metadata, columns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources;

    #[test]
    fn include_object_takes_kube_apiservers_three_values_and_defaults_to_metadata() {
        assert_eq!(Include::parse(None), Ok(Include::Metadata));
        assert_eq!(Include::parse(Some("Object")), Ok(Include::Object));
        assert_eq!(Include::parse(Some("None")), Ok(Include::None));
        assert_eq!(Include::parse(Some("object")).unwrap_err().code, 400);
    }

    #[test]
    fn a_single_object_table_has_its_columns_one_row_and_the_object_as_asked() {
        let rt = resources::lookup("", "v1", "configmaps").expect("served");
        let cm = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": { "name": "a", "namespace": "default", "resourceVersion": "7",
                          "creationTimestamp": "2020-01-01T00:00:00Z" },
            "data": { "x": "1", "y": "2" },
        });
        let t = single(rt, Include::Metadata, &cm, true);
        assert_eq!(t["kind"], "Table");
        assert_eq!(t["metadata"]["resourceVersion"], "7");
        let names: Vec<&str> = t["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["Name", "Data", "Age"]);
        assert_eq!(t["rows"][0]["cells"][0], "a");
        assert_eq!(t["rows"][0]["cells"][1], 2);
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(t["rows"][0]["object"]["metadata"]["name"], "a");
        let without = single(rt, Include::None, &cm, false);
        assert!(without["rows"][0].get("object").is_none());
        assert_eq!(without["columnDefinitions"], json!([]));
        let whole = single(rt, Include::Object, &cm, true);
        assert_eq!(whole["rows"][0]["object"]["data"]["y"], "2");
    }
}
