//! The OpenAPI v2 document in gnostic's protobuf (`openapi_v2.Document` of
//! github.com/google/gnostic-models, what client-go's discovery decodes):
//! the messages for the parts this server's document uses, with gnostic's
//! field numbers. No crate carries them, so they are declared here with
//! prost. Vendor extensions are `NamedAny`s whose `yaml` holds the value as
//! JSON (which is YAML).

use prost::{Message, Oneof};
use serde_json::Value;

#[derive(Clone, PartialEq, Message)]
struct Document {
    #[prost(string, tag = "1")]
    swagger: String,
    #[prost(message, optional, tag = "2")]
    info: Option<Info>,
    #[prost(message, optional, tag = "8")]
    paths: Option<Paths>,
    #[prost(message, optional, tag = "9")]
    definitions: Option<Definitions>,
}

#[derive(Clone, PartialEq, Message)]
struct Info {
    #[prost(string, tag = "1")]
    title: String,
    #[prost(string, tag = "2")]
    version: String,
}

#[derive(Clone, PartialEq, Message)]
struct Paths {
    #[prost(message, repeated, tag = "2")]
    path: Vec<NamedPathItem>,
}

#[derive(Clone, PartialEq, Message)]
struct NamedPathItem {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "2")]
    value: Option<PathItem>,
}

#[derive(Clone, PartialEq, Message)]
struct PathItem {
    #[prost(message, optional, tag = "2")]
    get: Option<Operation>,
    #[prost(message, optional, tag = "3")]
    put: Option<Operation>,
    #[prost(message, optional, tag = "4")]
    post: Option<Operation>,
    #[prost(message, optional, tag = "5")]
    delete: Option<Operation>,
    #[prost(message, optional, tag = "8")]
    patch: Option<Operation>,
}

#[derive(Clone, PartialEq, Message)]
struct Operation {
    #[prost(string, tag = "5")]
    operation_id: String,
    #[prost(string, repeated, tag = "6")]
    produces: Vec<String>,
    #[prost(string, repeated, tag = "7")]
    consumes: Vec<String>,
    #[prost(message, repeated, tag = "8")]
    parameters: Vec<ParametersItem>,
    #[prost(message, optional, tag = "9")]
    responses: Option<Responses>,
    #[prost(string, repeated, tag = "10")]
    schemes: Vec<String>,
    #[prost(message, repeated, tag = "13")]
    vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
struct ParametersItem {
    #[prost(oneof = "ParametersItemOneof", tags = "1")]
    oneof: Option<ParametersItemOneof>,
}

#[derive(Clone, PartialEq, Oneof)]
enum ParametersItemOneof {
    #[prost(message, tag = "1")]
    Parameter(Parameter),
}

#[derive(Clone, PartialEq, Message)]
struct Parameter {
    #[prost(oneof = "ParameterOneof", tags = "1, 2")]
    oneof: Option<ParameterOneof>,
}

#[derive(Clone, PartialEq, Oneof)]
enum ParameterOneof {
    #[prost(message, tag = "1")]
    Body(Box<BodyParameter>),
    #[prost(message, tag = "2")]
    NonBody(NonBodyParameter),
}

#[derive(Clone, PartialEq, Message)]
struct BodyParameter {
    #[prost(string, tag = "1")]
    description: String,
    #[prost(string, tag = "2")]
    name: String,
    #[prost(string, tag = "3")]
    r#in: String,
    #[prost(bool, tag = "4")]
    required: bool,
    #[prost(message, optional, tag = "5")]
    schema: Option<Schema>,
}

#[derive(Clone, PartialEq, Message)]
struct NonBodyParameter {
    #[prost(oneof = "NonBodyOneof", tags = "3")]
    oneof: Option<NonBodyOneof>,
}

#[derive(Clone, PartialEq, Oneof)]
enum NonBodyOneof {
    #[prost(message, tag = "3")]
    Query(QueryParameter),
}

/// gnostic's `QueryParameterSubSchema`.
#[derive(Clone, PartialEq, Message)]
struct QueryParameter {
    #[prost(bool, tag = "1")]
    required: bool,
    #[prost(string, tag = "2")]
    r#in: String,
    #[prost(string, tag = "3")]
    description: String,
    #[prost(string, tag = "4")]
    name: String,
    #[prost(string, tag = "6")]
    r#type: String,
    #[prost(bool, tag = "20")]
    unique_items: bool,
}

#[derive(Clone, PartialEq, Message)]
struct Responses {
    #[prost(message, repeated, tag = "1")]
    response_code: Vec<NamedResponseValue>,
}

#[derive(Clone, PartialEq, Message)]
struct NamedResponseValue {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "2")]
    value: Option<ResponseValue>,
}

#[derive(Clone, PartialEq, Message)]
struct ResponseValue {
    #[prost(oneof = "ResponseValueOneof", tags = "1")]
    oneof: Option<ResponseValueOneof>,
}

#[derive(Clone, PartialEq, Oneof)]
enum ResponseValueOneof {
    #[prost(message, tag = "1")]
    Response(Response),
}

#[derive(Clone, PartialEq, Message)]
struct Response {
    #[prost(string, tag = "1")]
    description: String,
    #[prost(message, optional, tag = "2")]
    schema: Option<SchemaItem>,
}

#[derive(Clone, PartialEq, Message)]
struct SchemaItem {
    #[prost(oneof = "SchemaItemOneof", tags = "1")]
    oneof: Option<SchemaItemOneof>,
}

#[derive(Clone, PartialEq, Oneof)]
enum SchemaItemOneof {
    #[prost(message, tag = "1")]
    Schema(Schema),
}

#[derive(Clone, PartialEq, Message)]
struct Definitions {
    #[prost(message, repeated, tag = "1")]
    additional_properties: Vec<NamedSchema>,
}

#[derive(Clone, PartialEq, Message)]
struct NamedSchema {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "2")]
    value: Option<Schema>,
}

#[derive(Clone, PartialEq, Message)]
struct Schema {
    #[prost(string, tag = "1")]
    r#ref: String,
    #[prost(string, tag = "2")]
    format: String,
    #[prost(string, tag = "4")]
    description: String,
    #[prost(bool, tag = "16")]
    unique_items: bool,
    #[prost(string, repeated, tag = "19")]
    required: Vec<String>,
    #[prost(message, optional, tag = "21")]
    additional_properties: Option<AdditionalPropertiesItem>,
    #[prost(message, optional, tag = "22")]
    r#type: Option<TypeItem>,
    #[prost(message, optional, tag = "23")]
    items: Option<ItemsItem>,
    #[prost(message, repeated, tag = "24")]
    all_of: Vec<Schema>,
    #[prost(message, optional, tag = "25")]
    properties: Option<Properties>,
    #[prost(message, repeated, tag = "31")]
    vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
struct AdditionalPropertiesItem {
    #[prost(oneof = "AdditionalOneof", tags = "1, 2")]
    oneof: Option<AdditionalOneof>,
}

#[derive(Clone, PartialEq, Oneof)]
enum AdditionalOneof {
    #[prost(message, tag = "1")]
    Schema(Box<Schema>),
    #[prost(bool, tag = "2")]
    Boolean(bool),
}

#[derive(Clone, PartialEq, Message)]
struct TypeItem {
    #[prost(string, repeated, tag = "1")]
    value: Vec<String>,
}

#[derive(Clone, PartialEq, Message)]
struct ItemsItem {
    #[prost(message, repeated, tag = "1")]
    schema: Vec<Schema>,
}

#[derive(Clone, PartialEq, Message)]
struct Properties {
    #[prost(message, repeated, tag = "1")]
    additional_properties: Vec<NamedSchema>,
}

#[derive(Clone, PartialEq, Message)]
struct NamedAny {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "2")]
    value: Option<Any>,
}

/// gnostic's `Any`: only its `yaml` text is used.
#[derive(Clone, PartialEq, Message)]
struct Any {
    #[prost(string, tag = "2")]
    yaml: String,
}

fn text(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_owned()
}

fn extensions(object: &Value) -> Vec<NamedAny> {
    object
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.starts_with("x-"))
        .map(|(k, v)| NamedAny {
            name: k.clone(),
            value: Some(Any {
                yaml: format!("{v}\n"),
            }),
        })
        .collect()
}

fn schema(s: &Value) -> Schema {
    let named = |map: &Value| -> Vec<NamedSchema> {
        map.as_object()
            .into_iter()
            .flatten()
            .map(|(name, value)| NamedSchema {
                name: name.clone(),
                value: Some(schema(value)),
            })
            .collect()
    };
    Schema {
        r#ref: text(&s["$ref"]),
        format: text(&s["format"]),
        description: text(&s["description"]),
        unique_items: s["uniqueItems"] == Value::Bool(true),
        required: s["required"]
            .as_array()
            .into_iter()
            .flatten()
            .map(text)
            .collect(),
        additional_properties: match &s["additionalProperties"] {
            Value::Bool(b) => Some(AdditionalPropertiesItem {
                oneof: Some(AdditionalOneof::Boolean(*b)),
            }),
            v @ Value::Object(_) => Some(AdditionalPropertiesItem {
                oneof: Some(AdditionalOneof::Schema(Box::new(schema(v)))),
            }),
            _ => None,
        },
        r#type: s["type"].as_str().map(|t| TypeItem {
            value: vec![t.to_owned()],
        }),
        items: s.get("items").map(|i| ItemsItem {
            schema: vec![schema(i)],
        }),
        all_of: s["allOf"]
            .as_array()
            .into_iter()
            .flatten()
            .map(schema)
            .collect(),
        properties: s.get("properties").map(|p| Properties {
            additional_properties: named(p),
        }),
        vendor_extension: extensions(s),
    }
}

fn parameter(p: &Value) -> ParametersItem {
    let parameter = if p["in"] == "body" {
        ParameterOneof::Body(Box::new(BodyParameter {
            description: text(&p["description"]),
            name: text(&p["name"]),
            r#in: "body".into(),
            required: p["required"] == Value::Bool(true),
            schema: Some(schema(&p["schema"])),
        }))
    } else {
        ParameterOneof::NonBody(NonBodyParameter {
            oneof: Some(NonBodyOneof::Query(QueryParameter {
                required: p["required"] == Value::Bool(true),
                r#in: text(&p["in"]),
                description: text(&p["description"]),
                name: text(&p["name"]),
                r#type: text(&p["type"]),
                unique_items: p["uniqueItems"] == Value::Bool(true),
            })),
        })
    };
    ParametersItem {
        oneof: Some(ParametersItemOneof::Parameter(Parameter {
            oneof: Some(parameter),
        })),
    }
}

fn strings(value: &Value) -> Vec<String> {
    value.as_array().into_iter().flatten().map(text).collect()
}

fn operation(op: &Value) -> Option<Operation> {
    let op = op.as_object().map(|_| op)?;
    Some(Operation {
        operation_id: text(&op["operationId"]),
        produces: strings(&op["produces"]),
        consumes: strings(&op["consumes"]),
        parameters: op["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .map(parameter)
            .collect(),
        responses: Some(Responses {
            response_code: op["responses"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(code, r)| NamedResponseValue {
                    name: code.clone(),
                    value: Some(ResponseValue {
                        oneof: Some(ResponseValueOneof::Response(Response {
                            description: text(&r["description"]),
                            schema: r.get("schema").map(|s| SchemaItem {
                                oneof: Some(SchemaItemOneof::Schema(schema(s))),
                            }),
                        })),
                    }),
                })
                .collect(),
        }),
        schemes: strings(&op["schemes"]),
        vendor_extension: extensions(op),
    })
}

/// The JSON v2 document `doc` in gnostic's protobuf.
pub(super) fn encode(doc: &Value) -> Vec<u8> {
    let paths = doc["paths"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, item)| NamedPathItem {
            name: name.clone(),
            value: Some(PathItem {
                get: operation(&item["get"]),
                put: operation(&item["put"]),
                post: operation(&item["post"]),
                delete: operation(&item["delete"]),
                patch: operation(&item["patch"]),
            }),
        })
        .collect();
    let definitions = doc["definitions"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, s)| NamedSchema {
            name: name.clone(),
            value: Some(schema(s)),
        })
        .collect();
    Document {
        swagger: text(&doc["swagger"]),
        info: Some(Info {
            title: text(&doc["info"]["title"]),
            version: text(&doc["info"]["version"]),
        }),
        paths: Some(Paths { path: paths }),
        definitions: Some(Definitions {
            additional_properties: definitions,
        }),
    }
    .encode_to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_definition_reads_back_with_its_properties_and_extensions() {
        let doc = json!({
            "swagger": "2.0",
            "info": {"title": "Kubernetes", "version": "v1.37.0"},
            "paths": {},
            "definitions": {"io.k8s.api.core.v1.Service": {
                "type": "object",
                "properties": {"spec": {"$ref": "#/definitions/io.k8s.api.core.v1.ServiceSpec"}},
                "x-kubernetes-group-version-kind": [{"group": "", "kind": "Service", "version": "v1"}]
            }}
        });
        let decoded = Document::decode(encode(&doc).as_slice()).expect("decodes");
        let service = decoded
            .definitions
            .expect("definitions")
            .additional_properties;
        let service = service[0].value.as_ref().expect("schema");
        assert_eq!(
            service.r#type.as_ref().map(|t| t.value.clone()),
            Some(vec!["object".to_owned()])
        );
        let spec = &service
            .properties
            .as_ref()
            .expect("properties")
            .additional_properties[0];
        assert_eq!(spec.name, "spec");
        assert_eq!(
            spec.value.as_ref().map(|s| s.r#ref.as_str()),
            Some("#/definitions/io.k8s.api.core.v1.ServiceSpec")
        );
        let gvk = &service.vendor_extension[0];
        assert_eq!(gvk.name, "x-kubernetes-group-version-kind");
        let yaml = &gvk.value.as_ref().expect("value").yaml;
        assert_eq!(
            serde_json::from_str::<Value>(yaml).expect("json"),
            json!([{"group": "", "kind": "Service", "version": "v1"}])
        );
    }
}
