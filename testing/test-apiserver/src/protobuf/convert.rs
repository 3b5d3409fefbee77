//! Between k8s-pb's messages and the JSON this server stores.
//!
//! [`Message`] is implemented for each message by the `message!` tables in
//! [`super::tables`]; [`Field`] for what a field can hold: scalars, bytes,
//! lists, maps, messages and the types whose JSON is not an object (`Time`,
//! `MicroTime`, `IntOrString`, `Quantity`, `FieldsV1`, `ExtraValue`).
//!
//! JSON leaves out what Go's `encoding/json` leaves out: a zero scalar in a
//! field tagged `omitempty` that is not a pointer (`keep` in the tables marks
//! the fields whose zero is kept), and empty lists and maps.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::ByteString;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1::{FieldsV1, MicroTime, Time};
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Map, Value};

/// A value whose JSON does not fit its message, with where it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {problem}")]
pub(crate) struct ConvertError {
    pub(crate) path: String,
    pub(crate) problem: String,
}

impl ConvertError {
    pub(crate) fn at(path: &str, problem: impl Into<String>) -> Self {
        Self {
            path: path.to_owned(),
            problem: problem.into(),
        }
    }
}

/// A message whose JSON is an object.
pub(crate) trait Message: Default {
    /// Writes its fields into `out`.
    fn write(&self, out: &mut Map<String, Value>);
    /// Reads its fields from `object`; `path` names the object in errors.
    fn read(object: &Map<String, Value>, path: &str) -> Result<Self, ConvertError>;
}

/// What one field holds.
pub(crate) trait Field: Sized {
    /// Its JSON, or `None` when JSON leaves it out; `keep` keeps a zero scalar.
    fn to_json(&self, keep: bool) -> Option<Value>;
    fn from_json(value: &Value, path: &str) -> Result<Self, ConvertError>;
}

impl<M: Message> Field for M {
    fn to_json(&self, _keep: bool) -> Option<Value> {
        let mut out = Map::new();
        self.write(&mut out);
        Some(Value::Object(out))
    }
    fn from_json(value: &Value, path: &str) -> Result<Self, ConvertError> {
        match value {
            Value::Object(object) => M::read(object, path),
            _ => Err(ConvertError::at(path, "expected an object")),
        }
    }
}

impl<T: Field> Field for Option<T> {
    fn to_json(&self, keep: bool) -> Option<Value> {
        self.as_ref().and_then(|v| v.to_json(keep))
    }
    fn from_json(value: &Value, path: &str) -> Result<Self, ConvertError> {
        T::from_json(value, path).map(Some)
    }
}

impl<T: Field> Field for Vec<T> {
    fn to_json(&self, _keep: bool) -> Option<Value> {
        if self.is_empty() {
            return None;
        }
        Some(Value::Array(
            self.iter()
                .map(|item| item.to_json(true).unwrap_or(Value::Null))
                .collect(),
        ))
    }
    fn from_json(value: &Value, path: &str) -> Result<Self, ConvertError> {
        let Value::Array(items) = value else {
            return Err(ConvertError::at(path, "expected a list"));
        };
        items
            .iter()
            .enumerate()
            .map(|(i, item)| T::from_json(item, &format!("{path}[{i}]")))
            .collect()
    }
}

impl<T: Field> Field for BTreeMap<String, T> {
    fn to_json(&self, _keep: bool) -> Option<Value> {
        if self.is_empty() {
            return None;
        }
        Some(Value::Object(
            self.iter()
                .map(|(k, v)| (k.clone(), v.to_json(true).unwrap_or(Value::Null)))
                .collect(),
        ))
    }
    fn from_json(value: &Value, path: &str) -> Result<Self, ConvertError> {
        let Value::Object(entries) = value else {
            return Err(ConvertError::at(path, "expected a map"));
        };
        entries
            .iter()
            .map(|(k, v)| Ok((k.clone(), T::from_json(v, &format!("{path}[{k}]"))?)))
            .collect()
    }
}

impl Field for String {
    fn to_json(&self, keep: bool) -> Option<Value> {
        (keep || !self.is_empty()).then(|| Value::String(self.clone()))
    }
    fn from_json(value: &Value, path: &str) -> Result<Self, ConvertError> {
        value
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| ConvertError::at(path, "expected a string"))
    }
}

impl Field for bool {
    fn to_json(&self, keep: bool) -> Option<Value> {
        (keep || *self).then_some(Value::Bool(*self))
    }
    fn from_json(value: &Value, path: &str) -> Result<Self, ConvertError> {
        value
            .as_bool()
            .ok_or_else(|| ConvertError::at(path, "expected a boolean"))
    }
}

macro_rules! integer {
    ($($ty:ty),*) => {$(
        impl Field for $ty {
            fn to_json(&self, keep: bool) -> Option<Value> {
                (keep || *self != 0).then(|| Value::from(*self))
            }
            fn from_json(value: &Value, path: &str) -> Result<Self, ConvertError> {
                value
                    .as_i64()
                    .and_then(|n| <$ty>::try_from(n).ok())
                    .ok_or_else(|| ConvertError::at(path, concat!("expected an ", stringify!($ty))))
            }
        }
    )*};
}
integer!(i32, i64);

/// `bytes`: base64 in JSON.
impl Field for Vec<u8> {
    fn to_json(&self, keep: bool) -> Option<Value> {
        (keep || !self.is_empty())
            .then(|| serde_json::to_value(ByteString(self.clone())).unwrap_or(Value::Null))
    }
    fn from_json(value: &Value, path: &str) -> Result<Self, ConvertError> {
        serde_json::from_value::<ByteString>(value.clone())
            .map(|b| b.0)
            .map_err(|_| ConvertError::at(path, "expected base64 data"))
    }
}

/// Seconds of Go's zero `time.Time`, which JSON shows as `null`.
const GO_ZERO_TIME: i64 = -62_135_596_800;

fn timestamp(seconds: Option<i64>, nanos: Option<i32>) -> Option<Timestamp> {
    let seconds = seconds.unwrap_or(0);
    if seconds == GO_ZERO_TIME {
        return None;
    }
    Timestamp::new(seconds, nanos.unwrap_or(0)).ok()
}

fn parse_timestamp(value: &Value, path: &str) -> Result<Timestamp, ConvertError> {
    value
        .as_str()
        .and_then(|s| s.parse::<Timestamp>().ok())
        .ok_or_else(|| ConvertError::at(path, "expected an RFC 3339 time"))
}

/// `metav1.Time`: RFC 3339 in whole seconds.
impl Field for Time {
    fn to_json(&self, _keep: bool) -> Option<Value> {
        let t = timestamp(self.seconds, self.nanos)?;
        Some(Value::String(format!("{t:.0}")))
    }
    fn from_json(value: &Value, path: &str) -> Result<Self, ConvertError> {
        let t = parse_timestamp(value, path)?;
        Ok(Time {
            seconds: Some(t.as_second()),
            nanos: Some(0),
        })
    }
}

/// `metav1.MicroTime`: RFC 3339 with six fractional digits.
impl Field for MicroTime {
    fn to_json(&self, _keep: bool) -> Option<Value> {
        let t = timestamp(self.seconds, self.nanos)?;
        Some(Value::String(format!("{t:.6}")))
    }
    fn from_json(value: &Value, path: &str) -> Result<Self, ConvertError> {
        let t = parse_timestamp(value, path)?;
        Ok(MicroTime {
            seconds: Some(t.as_second()),
            nanos: Some(t.subsec_microsecond() * 1000),
        })
    }
}

/// `intstr.IntOrString`: a number (type 0) or a string (type 1).
impl Field for IntOrString {
    fn to_json(&self, _keep: bool) -> Option<Value> {
        Some(match self.r#type {
            Some(1) => Value::String(self.str_val.clone().unwrap_or_default()),
            _ => Value::from(self.int_val.unwrap_or(0)),
        })
    }
    fn from_json(value: &Value, path: &str) -> Result<Self, ConvertError> {
        match value {
            Value::String(s) => Ok(IntOrString {
                r#type: Some(1),
                int_val: Some(0),
                str_val: Some(s.clone()),
            }),
            _ => Ok(IntOrString {
                r#type: Some(0),
                int_val: Some(i32::from_json(value, path)?),
                str_val: Some(String::new()),
            }),
        }
    }
}

/// `resource.Quantity`: its string.
impl Field for Quantity {
    fn to_json(&self, _keep: bool) -> Option<Value> {
        Some(Value::String(self.string.clone().unwrap_or_default()))
    }
    fn from_json(value: &Value, path: &str) -> Result<Self, ConvertError> {
        match value {
            Value::Number(n) => Ok(Quantity {
                string: Some(n.to_string()),
            }),
            _ => String::from_json(value, path).map(|s| Quantity { string: Some(s) }),
        }
    }
}

/// `metav1.FieldsV1`: the JSON its bytes hold.
impl Field for FieldsV1 {
    fn to_json(&self, _keep: bool) -> Option<Value> {
        serde_json::from_slice(self.raw.as_deref().unwrap_or(b"{}")).ok()
    }
    fn from_json(value: &Value, _path: &str) -> Result<Self, ConvertError> {
        Ok(FieldsV1 {
            raw: Some(serde_json::to_vec(value).unwrap_or_default()),
        })
    }
}

/// `ExtraValue` (certificates, authentication, authorization): a list of
/// strings.
macro_rules! extra_value {
    ($($ty:path),*) => {$(
        impl Field for $ty {
            fn to_json(&self, _keep: bool) -> Option<Value> {
                Some(Value::from(self.items.clone()))
            }
            fn from_json(value: &Value, path: &str) -> Result<Self, ConvertError> {
                Ok(Self {
                    items: Vec::from_json(value, path)?,
                })
            }
        }
    )*};
}
extra_value!(
    k8s_pb::api::certificates::v1::ExtraValue,
    k8s_pb::api::authentication::v1::ExtraValue,
    k8s_pb::api::authorization::v1::ExtraValue
);

/// Implements [`Message`] from a table of fields: `field: "jsonName"` (a zero
/// scalar left out), `field: "jsonName" keep` (kept), `field: inline` (a
/// message whose fields JSON shows in its parent's object).
macro_rules! message {
    ($ty:path { $($field:ident: $spec:tt $($keep:ident)?),* $(,)? }) => {
        impl $crate::protobuf::convert::Message for $ty {
            fn write(&self, out: &mut serde_json::Map<String, serde_json::Value>) {
                $( $crate::protobuf::convert::message!(@write self, out, $field, $spec $($keep)?); )*
            }
            fn read(
                object: &serde_json::Map<String, serde_json::Value>,
                path: &str,
            ) -> Result<Self, $crate::protobuf::convert::ConvertError> {
                let mut message = Self::default();
                $( $crate::protobuf::convert::message!(@read message, object, path, $field, $spec); )*
                Ok(message)
            }
        }
    };
    (@write $self:ident, $out:ident, $field:ident, inline) => {
        if let Some(inner) = &$self.$field {
            $crate::protobuf::convert::Message::write(inner, $out);
        }
    };
    (@write $self:ident, $out:ident, $field:ident, $json:literal keep) => {
        if let Some(v) = $crate::protobuf::convert::Field::to_json(&$self.$field, true) {
            $out.insert($json.to_owned(), v);
        }
    };
    (@write $self:ident, $out:ident, $field:ident, $json:literal) => {
        if let Some(v) = $crate::protobuf::convert::Field::to_json(&$self.$field, false) {
            $out.insert($json.to_owned(), v);
        }
    };
    (@read $message:ident, $object:ident, $path:ident, $field:ident, inline) => {
        $message.$field = Some($crate::protobuf::convert::Message::read($object, $path)?);
    };
    (@read $message:ident, $object:ident, $path:ident, $field:ident, $json:literal) => {
        if let Some(v) = $object.get($json).filter(|v| !v.is_null()) {
            $message.$field =
                $crate::protobuf::convert::Field::from_json(v, &format!("{}.{}", $path, $json))?;
        }
    };
}
pub(crate) use message;
