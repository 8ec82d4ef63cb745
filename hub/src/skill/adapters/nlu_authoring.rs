//! The NLUAuthoringPlane tools over the hub's NLU content store ([`crate::nlu`]).
//!
//! Reads: `nlu_authoring.get_context` (the compact entity registry, intents, locale hints and
//! canonicalization rules), `nlu_authoring.list_templates` (every template with its
//! `template_id` and fingerprint), `nlu_authoring.check_phrase` (the matcher's trace, ranking,
//! entities and action preview; executes nothing).
//!
//! Writes (declared so; both take `{template_id, base_fingerprint, add_examples?,
//! remove_examples?, text?}`):
//! - `nlu_authoring.propose_change` never changes anything: dry run or not, it answers the
//!   preview `{template_id, base_fingerprint, new_fingerprint, diff: {before, after,
//!   changes}}`.
//! - `nlu_authoring.apply_change`: a dry run answers the same preview; otherwise the
//!   fingerprint is checked again and the change applied and persisted, answering
//!   `{template_id, previous_fingerprint, fingerprint, diff}`. An idempotency key already in
//!   the hub's write ledger answers the first result and applies nothing; the same key with
//!   other arguments is `idempotency_conflict`.
//!
//! Errors: a `base_fingerprint` that is not the template's current one is `conflict` (the
//! message and `details.current_fingerprint` name the current one); an unknown template is
//! `not_found`; a hub without `[nlu]` answers `not_found` to every tool.

use mcp_shared::error::{ErrorCode, ToolError};
use serde_json::{Map, Value, json};

use crate::context::HubContext;
use crate::nlu::change::ChangeRequest;
use crate::nlu::content::{MAX_TEXT_CHARS, valid_id, valid_locale};
use crate::nlu::matcher::{MAX_PHRASE_WORDS, MIN_SCORE};
use crate::nlu::normalize::{RU_ENDINGS, RU_MIN_STEM, language};
use crate::skill::adapters::{AdapterKind, CallInput};
use crate::store::ledger::Begin;

/// Characters of a phrase `check_phrase` takes at most.
pub const MAX_PHRASE_CHARS: usize = 500;

fn bad(message: String) -> ToolError {
    ToolError::new(ErrorCode::InvalidArguments, message)
}

/// The arguments object, refusing keys not in `allowed`.
fn args<'a>(arguments: &'a Value, allowed: &[&str]) -> Result<&'a Map<String, Value>, ToolError> {
    static EMPTY: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(Map::new);
    let map = match arguments {
        Value::Object(m) => m,
        Value::Null => &EMPTY,
        _ => return Err(bad("arguments must be an object".into())),
    };
    if let Some(k) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
        let list: Vec<String> = allowed.iter().map(|a| format!("`{a}`")).collect();
        return Err(bad(format!(
            "unknown argument `{k}`; this tool takes {}",
            if list.is_empty() {
                "none".to_owned()
            } else {
                list.join(", ")
            }
        )));
    }
    Ok(map)
}

fn locale_arg(map: &Map<String, Value>) -> Result<Option<&str>, ToolError> {
    match map.get("locale") {
        None => Ok(None),
        Some(Value::String(l)) if valid_locale(l) => Ok(Some(l)),
        Some(_) => Err(bad(
            "`locale` must be `xx` or `xx-XX` (ISO 639-1, ISO 3166-1)".into(),
        )),
    }
}

/// What the normalizer does in `locale`, for agents writing content.
fn locale_hint(locale: &str, templates: usize) -> Value {
    let mut folding = vec!["lower case"];
    let stemming = match language(locale) {
        "ru" => {
            folding.push("ё → е");
            format!(
                "the longest ending of canonicalization.ru_endings is removed when at least {RU_MIN_STEM} characters remain (лампа, лампу, лампы → ламп)"
            )
        }
        "en" => "plural endings of words of 4+ letters: -ies → -y, -sses → -ss, -ches/-shes/-xes/-zes lose -es, a final -s is dropped unless -ss/-us/-is (lamps → lamp)".to_owned(),
        _ => "none".to_owned(),
    };
    folding.push("apostrophes dropped");
    folding.push("other punctuation and symbols → space");
    json!({
        "locale": locale,
        "templates": templates,
        "folding": folding,
        "stemming": stemming,
    })
}

/// `nlu_authoring.get_context`.
pub fn get_context(ctx: &HubContext, arguments: &Value) -> Result<Value, ToolError> {
    args(arguments, &[])?;
    let snap = ctx.stores.nlu.snapshot()?;
    let content = &snap.content;
    let locales: Vec<Value> = content
        .locales()
        .iter()
        .map(|l| {
            locale_hint(
                l,
                content
                    .templates
                    .values()
                    .filter(|t| &t.locale == l)
                    .count(),
            )
        })
        .collect();
    let kinds: std::collections::BTreeSet<&str> =
        content.entities.values().map(|e| e.kind()).collect();
    let entities: Vec<Value> = content
        .entities
        .values()
        .map(|e| {
            json!({
                "ref": e.reference,
                "type": e.kind(),
                "labels": e.labels,
                "aliases": e.aliases,
            })
        })
        .collect();
    let intents: Vec<Value> = content
        .intents
        .values()
        .map(|i| {
            json!({
                "intent": i.intent,
                "skill": i.skill,
                "tool": i.tool,
                "action": i.action,
                "description": i.description,
                "slots": i.slots.iter().map(|s| json!({"name": s.name, "type": s.kind})).collect::<Vec<_>>(),
                "arguments": i.arguments,
            })
        })
        .collect();
    Ok(json!({
        "content_fingerprint": snap.content_fingerprint(),
        "locales": locales,
        "entity_types": kinds,
        "entities": entities,
        "intents": intents,
        "canonicalization": {
            "ref_format": "<type>:<id>, type [a-z][a-z0-9_]{0,31}, id [a-z0-9][a-z0-9_.-]{0,63}",
            "slot_syntax": "{name:type}: name [a-z][a-z0-9_]{0,31}, type an entity type; separated from words by spaces",
            "rules": [
                "Dispatch arguments and proposed changes reference canonical refs, never labels or aliases",
                "Labels and aliases are recognition metadata of their locale",
                "A phrase and every label, alias, template word and example are normalized and stemmed with the same rules of their locale before they are compared",
                "A template's slots are exactly its intent's slots, each once",
                "A change names template_id and the base_fingerprint it was made on; a stale base_fingerprint is a conflict",
                "Examples generalize: an entity named in an example stands for any entity of its slot's type",
            ],
            "min_score": MIN_SCORE,
            "max_phrase_words": MAX_PHRASE_WORDS,
            "max_text_chars": MAX_TEXT_CHARS,
            "ru_endings": RU_ENDINGS,
            "ru_min_stem": RU_MIN_STEM,
        },
    }))
}

/// `nlu_authoring.list_templates`.
pub fn list_templates(ctx: &HubContext, arguments: &Value) -> Result<Value, ToolError> {
    let map = args(arguments, &["locale", "intent"])?;
    let locale = locale_arg(map)?;
    let intent = match map.get("intent") {
        None => None,
        Some(Value::String(i)) if valid_id(i) => Some(i.as_str()),
        Some(_) => {
            return Err(bad("`intent` must match [a-z0-9][a-z0-9_.-]{0,63}".into()));
        }
    };
    let snap = ctx.stores.nlu.snapshot()?;
    let templates: Vec<Value> = snap
        .content
        .templates
        .values()
        .filter(|t| locale.is_none_or(|l| t.locale == l))
        .filter(|t| intent.is_none_or(|i| t.intent == i))
        .map(|t| {
            let slots = crate::nlu::content::parse_text(&t.text)
                .map(|p| crate::nlu::content::slots(&p))
                .unwrap_or_default();
            json!({
                "template_id": t.template_id,
                "locale": t.locale,
                "intent": t.intent,
                "text": t.text,
                "slots": slots.iter().map(|s| json!({"name": s.name, "type": s.kind})).collect::<Vec<_>>(),
                "examples": t.examples,
                "fingerprint": t.fingerprint(),
                "origin": snap.origins.get(&t.template_id).copied().unwrap_or(crate::nlu::Origin::Config),
            })
        })
        .collect();
    Ok(json!({"count": templates.len(), "templates": templates}))
}

/// `nlu_authoring.check_phrase`.
pub fn check_phrase(ctx: &HubContext, arguments: &Value) -> Result<Value, ToolError> {
    let map = args(arguments, &["phrase", "locale"])?;
    let phrase = match map.get("phrase") {
        Some(Value::String(p)) if (1..=MAX_PHRASE_CHARS).contains(&p.chars().count()) => p,
        _ => {
            return Err(bad(format!(
                "`phrase` (a string of 1 to {MAX_PHRASE_CHARS} characters) is required"
            )));
        }
    };
    let locale = locale_arg(map)?;
    let snap = ctx.stores.nlu.snapshot()?;
    snap.index.check(&snap.content, phrase, locale).map_err(bad)
}

/// `nlu_authoring.propose_change`: the preview, whatever `dry_run` says.
pub fn propose_change(ctx: &HubContext, input: &CallInput) -> Result<Value, ToolError> {
    let req = ChangeRequest::parse(&input.arguments)?;
    ctx.stores.nlu.snapshot()?.preview(&req)
}

/// `nlu_authoring.apply_change`.
pub fn apply_change(ctx: &HubContext, input: &CallInput) -> Result<Value, ToolError> {
    let req = ChangeRequest::parse(&input.arguments)?;
    if input.dry_run {
        return ctx.stores.nlu.snapshot()?.preview(&req);
    }
    let tool = AdapterKind::NluApplyChange.decl().tool_id;
    let Some(key) = &input.idempotency_key else {
        return ctx.stores.nlu.apply(&req, None);
    };
    let _claim = match ctx.stores.ledger.begin(tool, key)? {
        Begin::Replay(first) => {
            if first["arguments"] != input.arguments {
                return Err(ToolError::new(
                    ErrorCode::IdempotencyConflict,
                    format!(
                        "idempotency key `{key}` was already used with other arguments ({})",
                        first["arguments"]
                    ),
                ));
            }
            return Ok(first["result"].clone());
        }
        Begin::Run(claim) => claim,
    };
    let result = ctx.stores.nlu.apply(&req, Some(key))?;
    ctx.stores.ledger
        .record(
            tool,
            key,
            &json!({"arguments": input.arguments, "result": result}),
        )
        .map_err(|e| {
            ToolError::new(
                ErrorCode::Internal,
                format!(
                    "template `{}` was changed (fingerprint {}) but the idempotency key was not recorded: {}",
                    req.template_id, result["fingerprint"], e.message
                ),
            )
        })?;
    Ok(result)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::nlu::tests::config_with_nlu;
    use crate::skill::adapters::contract_tests::{assert_valid, contract, validator};

    fn soon() -> tokio::time::Instant {
        tokio::time::Instant::now() + std::time::Duration::from_secs(10)
    }

    async fn run(
        ctx: &Arc<HubContext>,
        kind: AdapterKind,
        arguments: Value,
        dry_run: bool,
        key: Option<&str>,
    ) -> Result<Value, ToolError> {
        let mut input = CallInput::new("c", arguments, soon());
        input.dry_run = dry_run;
        input.idempotency_key = key.map(str::to_owned);
        kind.run(ctx.clone(), input).await
    }

    fn check_effect(tool: &str, effect: &Value) {
        let c = contract(tool);
        assert_valid(
            &format!("{tool} preview"),
            &c.output_schema,
            &json!({"phase": "preview", "expected_effect": effect, "confirmation_token": "t",
                    "confirmation_expires_at": "2026-01-01T00:00:00Z"}),
        );
        assert_valid(
            &format!("{tool} dry run"),
            &c.output_schema,
            &json!({"phase": "dry_run", "expected_effect": effect, "summary": "dry run: nothing was changed"}),
        );
    }

    fn check_result(tool: &str, result: &Value) {
        assert_valid(
            &format!("{tool} execute"),
            &contract(tool).output_schema,
            &json!({"phase": "execute", "result": result, "replay": false, "idempotency_key": "k"}),
        );
    }

    /// A fresh hub with the test's `[nlu]` content, in `dir`.
    fn nlu_ctx(dir: &std::path::Path) -> Arc<HubContext> {
        Arc::new(HubContext::new(config_with_nlu(dir)).expect("context"))
    }

    /// The template the write tests change, its listed fingerprint, and the domain arguments
    /// of the change (one example added).
    async fn domain_change(ctx: &Arc<HubContext>) -> (&'static str, String, Value) {
        let id = "en.device.turn_on";
        let base = listed_fingerprint(ctx, id).await;
        let domain = json!({"template_id": id, "base_fingerprint": base, "add_examples": ["power up the telly"]});
        (id, base, domain)
    }

    /// Every NLU read tool's real answers fit its contract; bad read arguments are refused by
    /// the contract and by the hub.
    #[tokio::test]
    async fn nlu_read_answers_match_their_contracts() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ctx = nlu_ctx(dir.path());

        // Reads.
        for (kind, args) in [
            (AdapterKind::NluGetContext, json!({})),
            (AdapterKind::NluListTemplates, json!({})),
            (AdapterKind::NluListTemplates, json!({"locale": "ru"})),
            (
                AdapterKind::NluListTemplates,
                json!({"intent": "device.turn_on", "locale": "en"}),
            ),
            (
                AdapterKind::NluCheckPhrase,
                json!({"phrase": "Включи лампу на кухне"}),
            ),
            (
                AdapterKind::NluCheckPhrase,
                json!({"phrase": "turn on the lamp", "locale": "en"}),
            ),
            (
                AdapterKind::NluCheckPhrase,
                json!({"phrase": "turn on the fridge"}),
            ),
            (
                AdapterKind::NluCheckPhrase,
                json!({"phrase": "what is the weather"}),
            ),
            (AdapterKind::NluCheckPhrase, json!({"phrase": "?!"})),
        ] {
            let tool = kind.decl().tool_id;
            let c = contract(tool);
            assert_valid(&format!("{tool} input"), &c.input_schema, &args);
            let answer = run(&ctx, kind, args.clone(), false, None)
                .await
                .unwrap_or_else(|e| panic!("{tool} {args}: {e}"));
            assert_valid(
                &format!("{tool} output for {args}"),
                &c.output_schema,
                &answer,
            );
        }
        let listed = run(
            &ctx,
            AdapterKind::NluListTemplates,
            json!({"locale": "ru"}),
            false,
            None,
        )
        .await
        .expect("list");
        assert!(
            listed["templates"]
                .as_array()
                .expect("templates")
                .iter()
                .all(|t| t["locale"] == "ru")
        );
        let context = run(&ctx, AdapterKind::NluGetContext, json!({}), false, None)
            .await
            .expect("context");
        assert!(
            context["entities"]
                .as_array()
                .expect("entities")
                .iter()
                .any(|e| e["ref"] == "device:lamp.kitchen"
                    && e["aliases"]["ru"].as_array().is_some_and(|a| !a.is_empty()))
        );

        // Bad read arguments: the contract and the hub both refuse.
        for (kind, bad) in [
            (AdapterKind::NluGetContext, json!({"x": 1})),
            (AdapterKind::NluListTemplates, json!({"locale": "RU"})),
            (AdapterKind::NluCheckPhrase, json!({})),
            (AdapterKind::NluCheckPhrase, json!({"phrase": ""})),
            (
                AdapterKind::NluCheckPhrase,
                json!({"phrase": "x".repeat(MAX_PHRASE_CHARS + 1)}),
            ),
            (
                AdapterKind::NluCheckPhrase,
                json!({"phrase": "x", "locale": "english"}),
            ),
        ] {
            let tool = kind.decl().tool_id;
            assert!(
                !validator(&contract(tool).input_schema).is_valid(&bad),
                "{tool} {bad}"
            );
            let err = run(&ctx, kind, bad.clone(), false, None)
                .await
                .expect_err("refused");
            assert_eq!(err.code, ErrorCode::InvalidArguments, "{tool} {bad}");
        }
    }

    /// The write tools' inputs are the domain arguments plus root's control fields;
    /// incomplete or malformed arguments are refused by the hub too.
    #[tokio::test]
    async fn nlu_write_inputs_are_domain_arguments_plus_control_fields() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ctx = nlu_ctx(dir.path());

        // Write inputs: domain arguments plus root's control fields.
        let (id, base, domain) = domain_change(&ctx).await;
        for tool in ["nlu_authoring.propose_change", "nlu_authoring.apply_change"] {
            let input = validator(&contract(tool).input_schema);
            let mut full = domain.clone();
            full["phase"] = json!("execute");
            full["confirmation_token"] = json!("c");
            full["idempotency_key"] = json!("k");
            full["dry_run"] = json!(false);
            for ok in [
                domain.clone(),
                full,
                json!({"template_id": id, "base_fingerprint": base, "text": "x {device:device}", "remove_examples": ["a"]}),
            ] {
                assert!(input.is_valid(&ok), "{tool} {ok}");
            }
            // (arguments, whether only something required is missing): root's execute of
            // apply_change may leave the arguments to the proposal's confirmation token, so
            // its schema requires nothing; the hub refuses incomplete arguments itself.
            for (bad, missing) in [
                (json!({"template_id": id, "base_fingerprint": base}), true),
                (json!({"template_id": id, "add_examples": ["x"]}), true),
                (
                    json!({"template_id": id, "base_fingerprint": "sha256:x", "add_examples": ["x"]}),
                    false,
                ),
                (
                    json!({"template_id": id, "base_fingerprint": base, "add_examples": []}),
                    false,
                ),
                (
                    json!({"template_id": id, "base_fingerprint": base, "add_examples": [""]}),
                    false,
                ),
                (
                    json!({"template_id": id, "base_fingerprint": base, "text": "x", "other": 1}),
                    false,
                ),
            ] {
                if tool == "nlu_authoring.propose_change" || !missing {
                    assert!(!input.is_valid(&bad), "{tool} {bad}");
                }
                let err = run(
                    &ctx,
                    AdapterKind::for_tool(tool).expect("kind"),
                    bad.clone(),
                    true,
                    None,
                )
                .await
                .expect_err("refused by the hub too");
                assert_eq!(err.code, ErrorCode::InvalidArguments, "{tool} {bad}");
            }
        }
    }

    /// Propose and dry runs change nothing; apply changes the template once (a replayed key
    /// applies nothing), stale bases conflict, unknown templates are not found, and the
    /// applied template serves phrases.
    #[tokio::test]
    async fn nlu_changes_preview_apply_replay_and_conflict() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ctx = nlu_ctx(dir.path());
        let (id, base, domain) = domain_change(&ctx).await;

        // Propose: a preview, never a change (dry run or not).
        for dry_run in [true, false] {
            let effect = run(
                &ctx,
                AdapterKind::NluProposeChange,
                domain.clone(),
                dry_run,
                Some("p"),
            )
            .await
            .expect("propose");
            check_effect("nlu_authoring.propose_change", &effect);
            check_result("nlu_authoring.propose_change", &effect);
            assert_eq!(effect["base_fingerprint"], base);
            assert_eq!(listed_fingerprint(&ctx, id).await, base, "nothing changed");
        }
        let effect = run(
            &ctx,
            AdapterKind::NluApplyChange,
            domain.clone(),
            true,
            None,
        )
        .await
        .expect("dry run");
        check_effect("nlu_authoring.apply_change", &effect);
        assert_eq!(
            listed_fingerprint(&ctx, id).await,
            base,
            "a dry run changes nothing"
        );

        // Apply, replay, conflict.
        let applied = run(
            &ctx,
            AdapterKind::NluApplyChange,
            domain.clone(),
            false,
            Some("a1"),
        )
        .await
        .expect("apply");
        check_result("nlu_authoring.apply_change", &applied);
        assert_eq!(applied["previous_fingerprint"], base);
        assert_eq!(applied["fingerprint"], effect["new_fingerprint"]);
        let now = listed_fingerprint(&ctx, id).await;
        assert_eq!(applied["fingerprint"], now);
        let replay = run(
            &ctx,
            AdapterKind::NluApplyChange,
            domain.clone(),
            false,
            Some("a1"),
        )
        .await
        .expect("replay");
        assert_eq!(replay, applied, "a replayed key applies nothing");
        assert_eq!(listed_fingerprint(&ctx, id).await, now);
        let err = run(
            &ctx,
            AdapterKind::NluApplyChange,
            json!({"template_id": id, "base_fingerprint": now, "add_examples": ["other"]}),
            false,
            Some("a1"),
        )
        .await
        .expect_err("same key, other arguments");
        assert_eq!(err.code, ErrorCode::IdempotencyConflict);
        for kind in [AdapterKind::NluProposeChange, AdapterKind::NluApplyChange] {
            for dry_run in [true, false] {
                let err = run(&ctx, kind, domain.clone(), dry_run, Some("a2"))
                    .await
                    .expect_err("stale base");
                assert_eq!(err.code, ErrorCode::Conflict, "{kind:?}");
                assert!(err.message.contains(&now), "{err}");
            }
        }
        let err = run(
            &ctx,
            AdapterKind::NluProposeChange,
            json!({"template_id": "en.nope", "base_fingerprint": now, "add_examples": ["x"]}),
            true,
            None,
        )
        .await
        .expect_err("unknown");
        assert_eq!(err.code, ErrorCode::NotFound);
        assert_applied_template_serves(&ctx, id).await;
    }

    /// After the change to `id`: a phrase only its new example matches ranks it first, and
    /// the listing shows it applied next to the configured template.
    async fn assert_applied_template_serves(ctx: &Arc<HubContext>, id: &str) {
        let checked = run(
            ctx,
            AdapterKind::NluCheckPhrase,
            json!({"phrase": "power up the kettle"}),
            false,
            None,
        )
        .await
        .expect("check");
        assert_eq!(checked["ranking"][0]["template_id"], id, "{checked}");
        assert_eq!(
            checked["action_preview"]["arguments"]["device"],
            "device:kettle.kitchen"
        );
        let listed = run(
            ctx,
            AdapterKind::NluListTemplates,
            json!({"intent": "device.turn_on", "locale": "en"}),
            false,
            None,
        )
        .await
        .expect("list");
        let origin: Vec<(&str, &str)> = listed["templates"]
            .as_array()
            .expect("templates")
            .iter()
            .map(|t| {
                (
                    t["template_id"].as_str().unwrap_or(""),
                    t["origin"].as_str().unwrap_or(""),
                )
            })
            .collect();
        assert_eq!(origin, [("en.device.switch_on", "config"), (id, "applied")]);
    }

    /// Without `[nlu]`, every NLU tool answers not_found.
    #[tokio::test]
    async fn without_nlu_every_tool_answers_not_found() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (_, _, domain) = domain_change(&nlu_ctx(dir.path())).await;
        // Without [nlu], every tool answers not_found.
        let plain = Arc::new(
            HubContext::new(crate::config::HubConfig::new(
                "hub:x",
                "test",
                "ws://x",
                "t",
                dir.path().join("plain"),
            ))
            .expect("context"),
        );
        for (kind, args) in [
            (AdapterKind::NluGetContext, json!({})),
            (AdapterKind::NluListTemplates, json!({})),
            (AdapterKind::NluCheckPhrase, json!({"phrase": "x"})),
            (AdapterKind::NluProposeChange, domain.clone()),
            (AdapterKind::NluApplyChange, domain.clone()),
        ] {
            let err = run(&plain, kind, args, false, None)
                .await
                .expect_err("not configured");
            assert_eq!(err.code, ErrorCode::NotFound, "{kind:?}");
            assert!(err.message.contains("[nlu]"), "{err}");
        }
    }

    async fn listed_fingerprint(ctx: &Arc<HubContext>, id: &str) -> String {
        let listed = run(ctx, AdapterKind::NluListTemplates, json!({}), false, None)
            .await
            .expect("list");
        listed["templates"]
            .as_array()
            .expect("templates")
            .iter()
            .find(|t| t["template_id"] == id)
            .and_then(|t| t["fingerprint"].as_str())
            .expect("listed")
            .to_owned()
    }
}
