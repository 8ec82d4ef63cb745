//! Unit tests of the `nlu_authoring.*` adapters over an example NLU content store.

use std::sync::Arc;

use super::*;
use crate::nlu::tests::config_with_nlu;
use crate::skill::adapters::AdapterKind;
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
    input.body.dry_run = dry_run;
    input.body.idempotency_key = key.map(str::to_owned);
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
