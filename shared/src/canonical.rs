//! Canonical JSON: object keys sorted, no insignificant whitespace. Hashes and signatures
//! (descriptor `content_hash`, the audit hash chain) are computed over this form, so they do
//! not depend on how a map happened to be ordered.

use serde_json::Value;

/// Serializes `value` canonically.
pub fn to_vec(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    write(value, &mut out);
    out
}

fn write(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push(b'{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_scalar(&Value::String(k.clone()), out);
                out.push(b':');
                if let Some(v) = map.get(k) {
                    write(v, out);
                }
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(v, out);
            }
            out.push(b']');
        }
        scalar => write_scalar(scalar, out),
    }
}

fn write_scalar(value: &Value, out: &mut Vec<u8>) {
    // Serializing a scalar `Value` cannot fail.
    if let Ok(bytes) = serde_json::to_vec(value) {
        out.extend_from_slice(&bytes);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn key_order_does_not_change_the_bytes() {
        let a = json!({"b": 1, "a": {"d": [1, {"z": 1, "y": 2}], "c": "x"}});
        let b: serde_json::Value =
            serde_json::from_str(r#"{"a":{"c":"x","d":[1,{"y":2,"z":1}]},"b":1}"#)
                .expect("valid JSON");
        assert_eq!(super::to_vec(&a), super::to_vec(&b));
        assert_eq!(
            String::from_utf8(super::to_vec(&a)).expect("canonical JSON is UTF-8"),
            r#"{"a":{"c":"x","d":[1,{"y":2,"z":1}]},"b":1}"#
        );
    }
}
