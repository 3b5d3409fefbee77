//! Fields a JSON body repeats, named as kube-apiserver's strict decoding
//! names them (`metadata.labels.a`, `spec.ports[0].port`). serde_json keeps
//! the last of them, as Go's decoder does; `fieldValidation` decides whether
//! they are refused (`Strict`), warned about (`Warn`) or ignored.

use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// The repeated fields of `body`, in the order they appear; none for a body
/// that is not JSON (decoding reports that).
pub(crate) fn find(body: &[u8]) -> Vec<String> {
    let found = RefCell::new(Vec::new());
    let mut json = serde_json::Deserializer::from_slice(body);
    let walk = Walk {
        path: String::new(),
        found: &found,
    };
    if walk.deserialize(&mut json).is_err() {
        return Vec::new();
    }
    found.into_inner()
}

/// Walks one value at `path`, noting repeated keys in `found`.
struct Walk<'a> {
    path: String,
    found: &'a RefCell<Vec<String>>,
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut index = 0usize;
        loop {
            let item = Walk {
                path: format!("{}[{index}]", self.path),
                found: self.found,
            };
            if seq.next_element_seed(item)?.is_none() {
                return Ok(());
            }
            index += 1;
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = if self.path.is_empty() {
                key.clone()
            } else {
                format!("{}.{key}", self.path)
            };
            if !seen.insert(key) {
                self.found.borrow_mut().push(path.clone());
            }
            map.next_value_seed(Walk {
                path,
                found: self.found,
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::find;

    #[test]
    fn repeated_fields_are_named_by_their_path_in_order() {
        let body = br#"{"metadata":{"name":"a","name":"b","labels":{"x":"1","x":"2"}},
            "spec":{"ports":[{"port":80},{"port":80,"port":81}]},"data":{},"data":{"y":"1"}}"#;
        assert_eq!(
            find(body),
            [
                "metadata.name",
                "metadata.labels.x",
                "spec.ports[1].port",
                "data"
            ]
        );
    }

    #[test]
    fn bodies_without_repeats_or_that_are_not_json_have_none() {
        assert!(find(br#"{"a":{"a":1},"b":[{"a":1},{"a":2}]}"#).is_empty());
        assert!(find(b"{not json").is_empty());
    }
}
