//! A configuration reference page from a configuration file's JSON Schema (as `schemars`
//! derives it from the configuration types and their doc comments): the top-level keys, then
//! every table in declaration order, each key with its type, default and meaning. Root's and
//! the hub's reference pages are rendered with it.

use serde_json::Value;

/// The reference page of `schema`, titled `title`, after `intro`.
pub fn render(schema: &Value, title: &str, intro: &str) -> String {
    let mut out = format!("# {title}\n\n{intro}\n");
    let defs = &schema["$defs"];
    section(&mut out, "Top level", schema, defs, None);
    tables(&mut out, schema, defs, "");
    out
}

/// How a key's value is written: a leaf, or a table of its own.
enum Shape<'a> {
    Leaf,
    Table(&'a Value),
    Tables(&'a Value),
    Named(&'a Value),
}

/// What `prop` holds, following `$ref`s into `defs`.
fn shape<'a>(prop: &'a Value, defs: &'a Value) -> Shape<'a> {
    let target = |v: &'a Value| -> Option<&'a Value> {
        let name = v["$ref"].as_str()?.strip_prefix("#/$defs/")?;
        let def = &defs[name];
        def.get("properties").is_some().then_some(def)
    };
    if let Some(def) = target(prop) {
        return Shape::Table(def);
    }
    if let Some(def) = prop["anyOf"]
        .as_array()
        .and_then(|a| a.iter().find_map(target))
    {
        return Shape::Table(def);
    }
    if let Some(def) = target(&prop["items"]) {
        return Shape::Tables(def);
    }
    if let Some(def) = target(&prop["additionalProperties"]) {
        return Shape::Named(def);
    }
    Shape::Leaf
}

/// The leaf keys of `object` as a table titled `title`, after `intro` (else the object's
/// own description).
fn section(out: &mut String, title: &str, object: &Value, defs: &Value, intro: Option<&str>) {
    let Some(props) = object["properties"].as_object() else {
        return;
    };
    let rows: Vec<String> = props
        .iter()
        .filter(|(_, p)| matches!(shape(p, defs), Shape::Leaf))
        .map(|(key, p)| {
            format!(
                "| `{key}` | {} | {} | {} |",
                kind(p, defs),
                default(p),
                cell(p["description"].as_str().unwrap_or_default())
            )
        })
        .collect();
    out.push_str(&format!("\n## {title}\n\n"));
    if let Some(d) = intro.or(object["description"].as_str()) {
        out.push_str(&format!("{}\n\n", one_line(d)));
    }
    if rows.is_empty() {
        return;
    }
    out.push_str("| key | type | default | meaning |\n|---|---|---|---|\n");
    for r in rows {
        out.push_str(&r);
        out.push('\n');
    }
}

/// Every table below `object` (at `path`), depth first.
fn tables(out: &mut String, object: &Value, defs: &Value, path: &str) {
    let Some(props) = object["properties"].as_object() else {
        return;
    };
    for (key, p) in props {
        let at = if path.is_empty() {
            key.clone()
        } else {
            format!("{path}.{key}")
        };
        let (title, def, below) = match shape(p, defs) {
            Shape::Leaf => continue,
            Shape::Table(def) => (format!("`[{at}]`"), def, at.clone()),
            Shape::Tables(def) => (format!("`[[{at}]]`"), def, at.clone()),
            Shape::Named(def) => (format!("`[{at}.<name>]`"), def, format!("{at}.<name>")),
        };
        section(out, &title, def, defs, p["description"].as_str());
        tables(out, def, defs, &below);
    }
}

/// A value's type in words: `string`, `integer`, one of its names, an array of a kind, or a
/// type's own title.
fn kind(p: &Value, defs: &Value) -> String {
    if let Some(title) = p["title"].as_str() {
        return title.to_owned();
    }
    if let Some(name) = p["$ref"].as_str().and_then(|r| r.strip_prefix("#/$defs/")) {
        return kind(&defs[name], defs);
    }
    if let Some(names) = p["oneOf"].as_array().or(p["anyOf"].as_array()) {
        let parts: Vec<String> = names
            .iter()
            .filter(|v| v["type"] != "null")
            .map(|v| match v.get("const") {
                Some(c) => format!("`{c}`"),
                None => kind(v, defs),
            })
            .collect();
        return parts.join(" or ");
    }
    if let Some(values) = p["enum"].as_array() {
        let parts: Vec<String> = values.iter().map(|v| format!("`{v}`")).collect();
        return parts.join(" or ");
    }
    match &p["type"] {
        Value::String(t) if t == "array" => format!("array of {}", kind(&p["items"], defs)),
        Value::String(t) if t == "object" => match p.get("additionalProperties") {
            Some(v) if v.is_object() => format!("table of {}", kind(v, defs)),
            _ => "table".into(),
        },
        Value::String(t) => t.clone(),
        Value::Array(ts) => ts
            .iter()
            .filter_map(|t| t.as_str().filter(|t| *t != "null"))
            .collect::<Vec<_>>()
            .join(" or "),
        _ => "any".into(),
    }
}

/// A key's default, as TOML would write it (none for a key that has no default).
fn default(p: &Value) -> String {
    match p.get("default") {
        None | Some(Value::Null) => "—".into(),
        Some(Value::Array(a)) if a.is_empty() => "`[]`".into(),
        Some(Value::Object(o)) if o.is_empty() => "—".into(),
        Some(v) => cell(&format!("`{v}`")),
    }
}

/// A doc comment on one line.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Text fit for a table cell.
fn cell(text: &str) -> String {
    one_line(text).replace('|', "\\|")
}
