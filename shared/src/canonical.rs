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
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            // Keys of one object are unique, so an unstable sort gives the one order.
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(k, out);
                out.push(b':');
                write(v, out);
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

/// A scalar as serde_json writes it, straight into `out`.
fn write_scalar(value: &Value, out: &mut Vec<u8>) {
    // Writing a scalar `Value` into a `Vec` cannot fail.
    let _ = serde_json::to_writer(&mut *out, value);
}

/// A string (an object key) exactly as serde_json writes a `Value::String` of it.
pub fn write_str(s: &str, out: &mut Vec<u8>) {
    // Writing a string into a `Vec` cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn keys_and_strings_are_escaped_as_serde_json_escapes_them() {
        // Quotes, backslashes, control characters, DEL and non-ASCII, as keys and as values:
        // a one-key object has one order, so its canonical form is serde_json's compact form.
        for s in ["k\"ey", "\\", "\u{1}\n\t", "\u{7f}", "é ё 😀", ""] {
            let v = json!({ s: [s, null, true, -1.5, 1e300, 7] });
            assert_eq!(
                super::to_vec(&v),
                serde_json::to_vec(&v).expect("serializes"),
                "{s:?}"
            );
        }
    }

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
