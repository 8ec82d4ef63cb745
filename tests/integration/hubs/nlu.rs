//! The NLUAuthoringPlane reads through a real root and a real hub serving the shipped example
//! content (`config/nlu/`, English and Russian), with the rmcp client and an
//! `NLUTeacherDryRun` lease: `nlu_authoring.get_context` (entity registry, locale hints,
//! canonicalization rules), `nlu_authoring.list_templates` (ids and fingerprints) and
//! `nlu_authoring.check_phrase` in both locales (inflected forms and aliases resolve to the
//! same canonical ref, an unknown phrase is an empty ranking with a trace). The lease's
//! profile decides what is visible and callable: the dry-run lease sees no authoring tool, a
//! read lease cannot check phrases. The approval flow is tested with root's writes.

use mcp_tests::error_message;
use mcp_tests::items;
use mcp_tests::{TestRoot, mcp_client, nlu_hub_toml};
use serde_json::{Value, json};

use crate::hubs::services::call;

fn refs(answer: &Value) -> Vec<String> {
    answer["entities"]
        .as_array()
        .unwrap_or_else(|| panic!("no entities: {answer}"))
        .iter()
        .map(|e| e["canonical_ref"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn nlu_reads_and_phrase_checks_through_mcp() {
    let root = TestRoot::start().await.unwrap();
    let hub = root
        .start_hub("hub:test-alpha", &nlu_hub_toml().unwrap())
        .await
        .unwrap();
    let token = root.bearer("hub:test-alpha", "NLUTeacherDryRun").await;
    let client = mcp_client(&root.mcp_url(), &token).await.unwrap();

    let mut tools: Vec<String> = mcp_tests::listed_tools(&client).await;
    tools.sort();
    assert_eq!(
        tools,
        [
            "nlu_authoring.check_phrase",
            "nlu_authoring.get_context",
            "nlu_authoring.list_templates"
        ],
        "the dry-run profile's tools"
    );

    // The authoring context: the registry with localized aliases, hints, rules.
    let context = call(&client, "nlu_authoring.get_context", json!({})).await;
    assert!(context.get("is_error").is_none(), "{context}");
    let lamp = items(&context["entities"])
        .iter()
        .find(|e| e["ref"] == "device:lamp.kitchen")
        .unwrap_or_else(|| panic!("no kitchen lamp: {context}"));
    assert_eq!(lamp["type"], "device");
    assert_eq!(lamp["labels"]["ru"], "лампа на кухне");
    assert!(items(&lamp["aliases"]["en"]).len() >= 2);
    let locales: Vec<&str> = items(&context["locales"])
        .iter()
        .map(|l| l["locale"].as_str().unwrap())
        .collect();
    assert_eq!(locales, ["en", "ru"]);
    assert!(
        items(&context["canonicalization"]["rules"])
            .iter()
            .any(|r| r.as_str().unwrap().contains("canonical refs, never labels")),
        "{context}"
    );
    assert!(
        context["content_fingerprint"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );

    // Templates with stable ids and fingerprints, in both locales.
    let listed = call(&client, "nlu_authoring.list_templates", json!({})).await;
    let templates = listed["templates"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(listed["count"], templates.len());
    for locale in ["en", "ru"] {
        assert!(templates.iter().any(|t| t["locale"] == locale), "{locale}");
    }
    for t in templates {
        assert!(t["fingerprint"].as_str().unwrap().starts_with("sha256:"));
        assert_eq!(t["origin"], "config");
    }
    let ru = call(
        &client,
        "nlu_authoring.list_templates",
        json!({"locale": "ru", "intent": "device.turn_on"}),
    )
    .await;
    assert_eq!(ru["count"], 1, "{ru}");
    assert_eq!(ru["templates"][0]["text"], "включи {device:device}");

    // Phrase checks: Russian inflections and English aliases meet at one canonical ref.
    for (phrase, locale) in [
        ("Включи лампу на кухне", None),
        ("включи кухонную лампу!", Some("ru")),
        ("Turn on the kitchen light", None),
        ("turn on the lamp in the kitchen", Some("en")),
    ] {
        let mut args = json!({"phrase": phrase});
        if let Some(l) = locale {
            args["locale"] = json!(l);
        }
        let a = call(&client, "nlu_authoring.check_phrase", args).await;
        assert!(a.get("is_error").is_none(), "{phrase}: {a}");
        assert_eq!(a["ranking"][0]["intent"], "device.turn_on", "{phrase}: {a}");
        assert_eq!(refs(&a), ["device:lamp.kitchen"], "{phrase}");
        let preview = &a["action_preview"];
        assert_eq!(preview["executes"], false);
        assert_eq!(
            (
                preview["skill"].as_str(),
                preview["tool"].as_str(),
                preview["action"].as_str()
            ),
            (Some("home_skill"), Some("home.set_power"), Some("turn_on"))
        );
        assert_eq!(
            preview["arguments"],
            json!({"device": "device:lamp.kitchen", "power": "on"})
        );
    }
    // An ambiguous phrase ranks the same way every time.
    let first = call(
        &client,
        "nlu_authoring.check_phrase",
        json!({"phrase": "включи свет на кухне"}),
    )
    .await;
    let ids: Vec<&str> = items(&first["ranking"])
        .iter()
        .map(|r| r["template_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        &ids[..2],
        ["ru.device.turn_on", "ru.room.lights_on"],
        "{first}"
    );
    let again = call(
        &client,
        "nlu_authoring.check_phrase",
        json!({"phrase": "включи свет на кухне"}),
    )
    .await;
    assert_eq!(again["ranking"], first["ranking"]);
    // An unknown phrase: an empty ranking with the trace, not an error.
    let unknown = call(
        &client,
        "nlu_authoring.check_phrase",
        json!({"phrase": "what's the weather tomorrow?"}),
    )
    .await;
    assert!(unknown.get("is_error").is_none(), "{unknown}");
    assert_eq!(unknown["ranking"], json!([]));
    assert_eq!(unknown["action_preview"], Value::Null);
    assert!(items(&unknown["trace"]).len() >= 4, "{unknown}");
    // A locale without templates is refused by the hub, a malformed one by the contract.
    for (locale, code) in [
        ("de", "invalid_arguments"),
        ("english", "invalid_arguments"),
    ] {
        let err = call(
            &client,
            "nlu_authoring.check_phrase",
            json!({"phrase": "hallo", "locale": locale}),
        )
        .await;
        assert_eq!(err["error"]["code"], code, "{locale}: {err}");
    }

    // The profile decides: no authoring with a dry-run lease, no phrase checks with a read one.
    let template = &templates[0];
    let (status, body) = root
        .call(
            &token,
            "nlu_authoring.propose_change",
            json!({"template_id": template["template_id"], "base_fingerprint": template["fingerprint"], "add_examples": ["x"]}),
        ).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], "capability_not_granted");
    let read = root.bearer("hub:test-alpha", "NLUTeacherRead").await;
    let (status, body) = root
        .call(&read, "nlu_authoring.list_templates", json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["count"], listed["count"]);
    let (status, body) = root
        .call(
            &read,
            "nlu_authoring.check_phrase",
            json!({"phrase": "turn on the tv"}),
        )
        .await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], "capability_not_granted");

    // An author's proposal previews a diff on the current fingerprint; a stale one conflicts
    // and names the current fingerprint (the approval flow itself is tested with root's writes).
    let author = root.bearer("hub:test-alpha", "NLUTeacherAuthor").await;
    let author = mcp_client(&root.mcp_url(), &author).await.unwrap();
    let turn_on = templates
        .iter()
        .find(|t| t["template_id"] == "en.device.turn_on")
        .unwrap();
    let current = turn_on["fingerprint"].as_str().unwrap();
    let preview = call(
        &author,
        "nlu_authoring.propose_change",
        json!({"template_id": "en.device.turn_on", "base_fingerprint": current, "add_examples": ["power up the telly"]}),
    )
    .await;
    let effect = &preview["expected_effect"];
    assert_eq!(effect["base_fingerprint"], current, "{preview}");
    assert_ne!(effect["new_fingerprint"], current);
    assert_eq!(
        effect["diff"]["changes"],
        json!(["add example: `power up the telly`"])
    );
    let stale = format!("sha256:{}", "0".repeat(64));
    let err = call(
        &author,
        "nlu_authoring.propose_change",
        json!({"template_id": "en.device.turn_on", "base_fingerprint": stale, "add_examples": ["power up the telly"]}),
    )
    .await;
    assert_eq!(err["error"]["code"], "conflict", "{err}");
    assert!(error_message(&err).contains(current), "{err}");
    let listed_again = call(&client, "nlu_authoring.list_templates", json!({})).await;
    assert_eq!(listed_again, listed, "a proposal changes nothing");

    author.cancel().await.unwrap();
    client.cancel().await.unwrap();
    hub.stop().await;
    root.stop().await;
}
