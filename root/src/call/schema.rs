//! A value checked against a contract's JSON Schema (arguments, results): the first ten
//! violations, each with its path.

use serde_json::Value;

/// Whether `value` is valid; otherwise its first ten violations.
pub(super) fn validate(
    validator: &jsonschema::Validator,
    value: &Value,
) -> Result<(), Vec<String>> {
    // The fast check first; errors are collected only for invalid values.
    if validator.is_valid(value) {
        return Ok(());
    }
    let errors: Vec<String> = validator
        .iter_errors(value)
        .take(10)
        .map(|e| {
            let path = e.instance_path().to_string();
            format!("{}: {e}", if path.is_empty() { "/" } else { &path })
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}
