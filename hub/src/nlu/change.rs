//! A proposed template change (`nlu_authoring.propose_change` / `apply_change` domain
//! arguments): parsing, validation against the current content, and the preview diff.
//!
//! Arguments: `{template_id, base_fingerprint, add_examples?, remove_examples?, text?}`, at
//! least one change; at most [`MAX_CHANGE_ITEMS`] examples added and as many removed, each
//! 1 to 160 characters; a removed example is named as written (or with the same normalized
//! words); `text` follows the template text syntax and keeps exactly the intent's slots.

use mcp_shared::error::{ErrorCode, ToolError};
use serde::Deserialize;
use serde_json::{Value, json};

use super::content::{Content, MAX_TEMPLATES_BYTES, MAX_TEXT_CHARS, Template, valid_id};
use super::normalize;
use crate::skill::adapters::args::{Arguments, parse, present};

/// Examples one change adds (or removes) at most.
pub(crate) const MAX_CHANGE_ITEMS: usize = 20;

/// The domain arguments of a change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChangeRequest {
    pub template_id: String,
    pub base_fingerprint: String,
    pub add_examples: Vec<String>,
    pub remove_examples: Vec<String>,
    pub text: Option<String>,
}

fn bad(message: String) -> ToolError {
    ToolError::new(ErrorCode::InvalidArguments, message)
}

/// Whether `s` is `sha256:` and 64 lower-case hex digits.
pub(crate) fn valid_fingerprint(s: &str) -> bool {
    s.strip_prefix("sha256:")
        .is_some_and(|h| h.len() == 64 && h.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')))
}

/// The arguments of `propose_change` and `apply_change`, as given.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ChangeArgs {
    template_id: String,
    base_fingerprint: String,
    #[serde(default, deserialize_with = "present")]
    add_examples: Option<Vec<String>>,
    #[serde(default, deserialize_with = "present")]
    remove_examples: Option<Vec<String>>,
    #[serde(default, deserialize_with = "present")]
    text: Option<String>,
}

impl Arguments for ChangeArgs {
    fn rule(field: &str) -> String {
        match field {
            "template_id" => {
                "`template_id` (matching [a-z0-9][a-z0-9_.-]{0,63}) is required".into()
            }
            "base_fingerprint" => {
                "`base_fingerprint` (`sha256:` and 64 hex digits, from list_templates) is required"
                    .into()
            }
            "text" => format!("`text` must be a string of 1 to {MAX_TEXT_CHARS} characters"),
            list => format!("`{list}` must be an array of strings"),
        }
    }
}

/// The examples of `list` (`key`): at most [`MAX_CHANGE_ITEMS`], each of 1 to
/// [`MAX_TEXT_CHARS`] characters, none twice.
fn string_list(list: Option<Vec<String>>, key: &str) -> Result<Vec<String>, ToolError> {
    let items = list.unwrap_or_default();
    if items.len() > MAX_CHANGE_ITEMS {
        return Err(bad(format!(
            "`{key}` has {} items; at most {MAX_CHANGE_ITEMS}",
            items.len()
        )));
    }
    for (i, s) in items.iter().enumerate() {
        if !(1..=MAX_TEXT_CHARS).contains(&s.chars().count()) {
            return Err(bad(format!(
                "`{key}` items must be strings of 1 to {MAX_TEXT_CHARS} characters"
            )));
        }
        if items[..i].contains(s) {
            return Err(bad(format!("`{key}` names `{s}` twice")));
        }
    }
    Ok(items)
}

impl ChangeRequest {
    /// Parses the domain arguments (root has stripped its control fields).
    pub(crate) fn parse(arguments: &Value) -> Result<ChangeRequest, ToolError> {
        let args: ChangeArgs = parse(arguments)?;
        if !valid_id(&args.template_id) {
            return Err(bad(ChangeArgs::rule("template_id")));
        }
        if !valid_fingerprint(&args.base_fingerprint) {
            return Err(bad(ChangeArgs::rule("base_fingerprint")));
        }
        let add_examples = string_list(args.add_examples, "add_examples")?;
        let remove_examples = string_list(args.remove_examples, "remove_examples")?;
        let text = match args.text {
            Some(s) if !(1..=MAX_TEXT_CHARS).contains(&s.chars().count()) => {
                return Err(bad(ChangeArgs::rule("text")));
            }
            t => t,
        };
        if add_examples.is_empty() && remove_examples.is_empty() && text.is_none() {
            return Err(bad(
                "no change: give add_examples, remove_examples or text".into()
            ));
        }
        Ok(ChangeRequest {
            template_id: args.template_id,
            base_fingerprint: args.base_fingerprint,
            add_examples,
            remove_examples,
            text,
        })
    }

    /// The template after this change, with a line per change; checked against `content`.
    pub(crate) fn apply_to(
        &self,
        before: &Template,
        content: &Content,
    ) -> Result<(Template, Vec<String>), ToolError> {
        let locale = &before.locale;
        if let Some(both) = self.add_examples.iter().find(|a| {
            let key = normalize::key(a, locale);
            self.remove_examples
                .iter()
                .any(|r| normalize::key(r, locale) == key)
        }) {
            return Err(bad(format!(
                "the change both adds and removes the example `{both}`"
            )));
        }
        let mut after = before.clone();
        let mut changes = Vec::new();
        if let Some(text) = &self.text {
            if text == &before.text {
                return Err(bad(format!(
                    "`text` is the template's current text `{text}`"
                )));
            }
            let intent = content.intents.get(&before.intent).ok_or_else(|| {
                ToolError::new(
                    ErrorCode::Internal,
                    format!("intent `{}` of the template is missing", before.intent),
                )
            })?;
            content
                .check_text(text, locale, intent)
                .map_err(|m| bad(format!("`text`: {m}")))?;
            changes.push(format!("text: `{}` → `{text}`", before.text));
            after.text = text.clone();
        }
        for example in &self.remove_examples {
            let key = normalize::key(example, locale);
            let at = after
                .examples
                .iter()
                .position(|e| e == example)
                .or_else(|| {
                    after
                        .examples
                        .iter()
                        .position(|e| normalize::key(e, locale) == key)
                })
                .ok_or_else(|| {
                    bad(format!(
                        "`remove_examples`: `{example}` is not an example of template `{}`",
                        before.template_id
                    ))
                })?;
            let removed = after.examples.remove(at);
            changes.push(format!("remove example: `{removed}`"));
        }
        for example in &self.add_examples {
            let key = normalize::key(example, locale);
            if key.is_empty() {
                return Err(bad(format!("`add_examples`: `{example}` has no words")));
            }
            if let Some(same) = after
                .examples
                .iter()
                .find(|e| normalize::key(e, locale) == key)
            {
                return Err(bad(format!(
                    "`add_examples`: `{example}` is already an example of template `{}` (as `{same}`)",
                    before.template_id
                )));
            }
            after.examples.push(example.clone());
            changes.push(format!("add example: `{example}`"));
        }
        if after == *before {
            return Err(bad("the change leaves the template as it is".into()));
        }
        content
            .check_template(&after)
            .map_err(|m| bad(format!("the changed template is invalid: {m}")))?;
        let total = content.templates_bytes(Some(&after));
        if total > MAX_TEMPLATES_BYTES {
            return Err(bad(format!(
                "with this change the templates would take {total} bytes as JSON; at most {MAX_TEMPLATES_BYTES}"
            )));
        }
        Ok((after, changes))
    }
}

/// The preview of a change: what `propose_change` answers and `apply_change` applies.
pub(crate) fn preview(before: &Template, after: &Template, changes: &[String]) -> Value {
    json!({
        "template_id": before.template_id,
        "base_fingerprint": before.fingerprint(),
        "new_fingerprint": after.fingerprint(),
        "diff": diff(before, after, changes),
    })
}

/// `{before, after, changes}`.
pub(crate) fn diff(before: &Template, after: &Template, changes: &[String]) -> Value {
    json!({
        "before": before.to_json(),
        "after": after.to_json(),
        "changes": changes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nlu::tests::example_content;

    fn req(extra: Value) -> Value {
        let content = example_content();
        let t = &content.templates["en.device.turn_on"];
        let mut args = json!({"template_id": t.template_id, "base_fingerprint": t.fingerprint()});
        if let (Some(a), Value::Object(e)) = (args.as_object_mut(), extra) {
            a.extend(e);
        }
        args
    }

    #[test]
    fn arguments_are_checked() {
        for (args, expect) in [
            (json!([]), "must be an object"),
            (json!({"template_id": "x"}), "base_fingerprint"),
            (req(json!({})), "no change"),
            (req(json!({"add_examples": []})), "no change"),
            (req(json!({"extra": 1})), "unknown argument `extra`"),
            (req(json!({"add_examples": "x"})), "array of strings"),
            (req(json!({"add_examples": [""]})), "1 to 160"),
            (req(json!({"add_examples": ["a", "a"]})), "twice"),
            (
                req(json!({"add_examples": vec!["x"; MAX_CHANGE_ITEMS + 1]})),
                "at most 20",
            ),
            (req(json!({"text": 5})), "`text` must be a string"),
            (
                json!({"template_id": "Bad Id", "base_fingerprint": format!("sha256:{}", "0".repeat(64)), "text": "x"}),
                "template_id",
            ),
            (
                json!({"template_id": "a", "base_fingerprint": "sha256:XYZ", "text": "x"}),
                "base_fingerprint",
            ),
        ] {
            let err = ChangeRequest::parse(&args).expect_err("refused");
            assert_eq!(err.code, ErrorCode::InvalidArguments);
            assert!(err.message.contains(expect), "{args}: {}", err.message);
        }
    }

    #[test]
    fn changes_are_validated_against_the_content() {
        let content = example_content();
        let before = &content.templates["en.device.turn_on"];
        let apply = |extra: Value| {
            ChangeRequest::parse(&req(extra)).and_then(|r| r.apply_to(before, &content))
        };
        let (after, changes) = apply(json!({
            "add_examples": ["please turn on the telly"],
            "remove_examples": ["TURN ON the kitchen lamp"],
            "text": "please turn on the {device:device}",
        }))
        .expect("valid");
        assert_eq!(after.text, "please turn on the {device:device}");
        assert!(
            after
                .examples
                .contains(&"please turn on the telly".to_owned())
        );
        assert!(
            !after
                .examples
                .contains(&"turn on the kitchen lamp".to_owned())
        );
        assert_eq!(changes.len(), 3, "{changes:?}");
        assert!(changes[0].starts_with("text: `turn on the {device:device}` → "));
        let p = preview(before, &after, &changes);
        assert_eq!(p["base_fingerprint"], before.fingerprint());
        assert_eq!(p["new_fingerprint"], after.fingerprint());
        assert_eq!(p["diff"]["before"]["text"], before.text);
        for (extra, expect) in [
            (
                json!({"text": "turn on the {room:room}"}),
                "not a slot of intent",
            ),
            (
                json!({"text": "turn on the {device:room}"}),
                "has type `device`",
            ),
            (json!({"text": "turn on the lamp"}), "is missing"),
            (
                json!({"text": "turn on the {device:device"}),
                "without a matching",
            ),
            (json!({"text": "{device:device}"}), "at least one word"),
            (json!({"text": before.text}), "current text"),
            (
                json!({"remove_examples": ["not there"]}),
                "is not an example",
            ),
            (
                json!({"add_examples": ["Turn on the kitchen lamp!"]}),
                "already an example",
            ),
            (json!({"add_examples": ["?!"]}), "no words"),
            (
                json!({"add_examples": ["x"], "remove_examples": ["X!"]}),
                "both adds and removes",
            ),
        ] {
            let err = apply(extra.clone()).expect_err("refused");
            assert_eq!(err.code, ErrorCode::InvalidArguments, "{extra}");
            assert!(err.message.contains(expect), "{extra}: {}", err.message);
        }
    }
}
