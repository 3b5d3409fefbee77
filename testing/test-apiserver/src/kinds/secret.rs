//! Secrets: `stringData` is write-only and lands base64-encoded in `data`.

use serde_json::{Map, Value};

pub(super) fn prepare(secret: &mut Value) {
    let Some(map) = secret.as_object_mut() else {
        return;
    };
    if !map.contains_key("type") {
        map.insert("type".into(), Value::String("Opaque".into()));
    }
    let Some(Value::Object(string_data)) = map.remove("stringData") else {
        return;
    };
    let data = map
        .entry("data")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(data) = data.as_object_mut() {
        for (key, value) in string_data {
            let text = value.as_str().unwrap_or_default();
            data.insert(key, Value::String(base64(text.as_bytes())));
        }
    }
}

/// Standard base64 with padding, as `[]byte` fields are written.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn string_data_is_encoded_into_data_and_removed() {
        let mut secret = json!({"stringData": {"a": "hello"}, "data": {"b": "eA=="}});
        prepare(&mut secret);
        assert_eq!(
            secret,
            json!({"type": "Opaque", "data": {"a": "aGVsbG8=", "b": "eA=="}})
        );
    }

    #[test]
    fn base64_pads_like_go() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
    }
}
