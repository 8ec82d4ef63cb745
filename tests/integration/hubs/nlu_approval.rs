//! The NLU authoring correction flow end to end, through MCP with the rmcp client against a
//! real root and hub: read the context and templates, check a phrase, propose a change (a
//! preview diff, a confirmation token and an approval request), see `approval_pending`,
//! approve with `mcp-root admin approvals approve`, apply, and check the phrase again with the
//! new ranking. A proposal on an old fingerprint conflicts; a rejected approval never applies;
//! a read lease cannot propose; every decision is in the audit trail.

use mcp_tests::error_message;
use mcp_tests::items;
use mcp_tests::refusal;
use mcp_tests::{TestRoot, mcp_client, nlu_hub_toml};
use serde_json::{Value, json};

use crate::hubs::services::call;
use crate::ops::admin_cli::admin;

const TEMPLATE: &str = "en.device.turn_on";

async fn fingerprint(client: &rmcp::service::RunningService<rmcp::RoleClient, ()>) -> String {
    let list = call(client, "nlu_authoring.list_templates", json!({})).await;
    list["templates"]
        .as_array()
        .unwrap_or_else(|| panic!("{list}"))
        .iter()
        .find(|t| t["template_id"] == TEMPLATE)
        .unwrap()["fingerprint"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn top(answer: &Value) -> Option<&str> {
    answer["ranking"][0]["template_id"].as_str()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn propose_approve_apply_and_the_ranking_changes() {
    let root = TestRoot::start().await.unwrap();
    let hub = root
        .start_hub("hub:nlu", &nlu_hub_toml().unwrap())
        .await
        .unwrap();
    let author = root.bearer("hub:nlu", "NLUTeacherAuthor").await;
    let client = mcp_client(&root.mcp_url(), &author).await.unwrap();

    let context = call(&client, "nlu_authoring.get_context", json!({})).await;
    assert!(context["entities"].is_array(), "{context}");
    let base = fingerprint(&client).await;
    let phrase = json!({"phrase": "illuminate the bedroom lamp", "locale": "en"});
    let before = call(&client, "nlu_authoring.check_phrase", phrase.clone()).await;
    assert_ne!(top(&before), Some(TEMPLATE), "{before}");

    // Propose: the diff, a token for apply_change, and an approval request.
    let change = json!({
        "template_id": TEMPLATE,
        "base_fingerprint": base,
        "add_examples": ["illuminate the kitchen lamp"],
    });
    let proposal = call(&client, "nlu_authoring.propose_change", change.clone()).await;
    assert_eq!(proposal["phase"], "preview", "{proposal}");
    let diff = &proposal["expected_effect"]["diff"];
    assert!(
        diff.to_string().contains("illuminate the kitchen lamp"),
        "{proposal}"
    );
    let token = proposal["confirmation_token"].as_str().unwrap().to_owned();
    let approval_id = proposal["approval"]["approval_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(proposal["approval"]["status"], "pending");
    // propose_change never executes.
    let refused = call(
        &client,
        "nlu_authoring.propose_change",
        json!({"template_id": TEMPLATE, "base_fingerprint": base, "add_examples": ["x y"], "phase": "execute", "idempotency_key": "p"}),
    )
    .await;
    assert_eq!(refused["error"]["code"], "invalid_arguments", "{refused}");

    // Apply before the operator decided: approval_pending, and the token still works later.
    let apply =
        json!({"phase": "execute", "confirmation_token": token, "idempotency_key": "apply-1"});
    let pending = call(&client, "nlu_authoring.apply_change", apply.clone()).await;
    assert_eq!(pending["error"]["code"], "approval_pending", "{pending}");
    assert_eq!(
        pending["error"]["details"]["approval_id"],
        approval_id.as_str()
    );
    assert_eq!(fingerprint(&client).await, base, "nothing applied yet");

    // The operator sees it with its diff and approves it.
    let (code, out, err) = admin(&root, &["approvals", "list"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&approval_id) && out.contains("pending"),
        "{out}"
    );
    let (code, out, err) = admin(&root, &["approvals", "show", &approval_id, "--json"]);
    assert_eq!(code, 0, "{err}");
    let shown: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(shown["effect"]["diff"], *diff);
    let (code, out, err) = admin(
        &root,
        &[
            "approvals",
            "approve",
            &approval_id,
            "--reason",
            "good example",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("approved"), "{out}");
    let (code, _, err) = admin(&root, &["approvals", "reject", &approval_id]);
    assert_ne!(code, 0, "a decided approval cannot be decided again");
    assert!(err.contains("can no longer be decided"), "{err}");

    // Apply: the change lands, the fingerprint moves, the phrase now ranks the template first.
    let applied = call(&client, "nlu_authoring.apply_change", apply.clone()).await;
    assert_eq!(applied["phase"], "execute", "{applied}");
    assert_eq!(applied["approval_id"], approval_id.as_str());
    let new_fp = applied["result"]["fingerprint"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(new_fp, base);
    assert_eq!(fingerprint(&client).await, new_fp);
    let after = call(&client, "nlu_authoring.check_phrase", phrase.clone()).await;
    assert_eq!(top(&after), Some(TEMPLATE), "{after}");
    // A replay applies nothing again.
    let replay = call(&client, "nlu_authoring.apply_change", apply).await;
    assert_eq!(replay["replay"], true, "{replay}");
    assert_eq!(fingerprint(&client).await, new_fp);
    let (_, out, _) = admin(&root, &["approvals", "show", &approval_id, "--json"]);
    let shown: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(shown["status"], "applied");
    assert!(shown["applied_event_id"].is_string());

    // A proposal on the old fingerprint is a conflict.
    let stale = call(&client, "nlu_authoring.propose_change", change).await;
    assert_eq!(stale["error"]["code"], "conflict", "{stale}");
    assert!(error_message(&stale).contains(&new_fp), "{stale}");

    // A rejected approval never applies.
    let second = call(
        &client,
        "nlu_authoring.propose_change",
        json!({"template_id": TEMPLATE, "base_fingerprint": new_fp, "remove_examples": ["illuminate the kitchen lamp"]}),
    )
    .await;
    let second_id = second["approval"]["approval_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (code, _, err) = admin(
        &root,
        &["approvals", "reject", &second_id, "--reason", "keep it"],
    );
    assert_eq!(code, 0, "{err}");
    let rejected = call(
        &client,
        "nlu_authoring.apply_change",
        json!({"phase": "execute", "confirmation_token": second["confirmation_token"], "idempotency_key": "apply-2"}),
    )
    .await;
    assert_eq!(
        rejected["error"]["code"], "confirmation_required",
        "{rejected}"
    );
    assert!(
        error_message(&rejected).contains("rejected: keep it"),
        "{rejected}"
    );
    assert_eq!(fingerprint(&client).await, new_fp);

    // A read lease cannot propose.
    let reader = root.bearer("hub:nlu", "NLUTeacherRead").await;
    let (status, body) = root
        .call(
            &reader,
            "nlu_authoring.propose_change",
            json!({"template_id": TEMPLATE, "base_fingerprint": new_fp, "add_examples": ["a b"]}),
        )
        .await;
    assert_eq!(
        refusal(status, &body),
        (403, "capability_not_granted"),
        "{body}"
    );

    // The decisions and the apply are in the audit trail, with the diff.
    let audit = root
        .admin_get("/v1/root/mcp/audit?tool_id=admin.approval.approve")
        .await;
    let event = &audit["events"][0];
    assert_eq!(event["request"]["approval_id"], approval_id.as_str());
    assert_eq!(event["request"]["effect"]["diff"], *diff);
    assert_eq!(event["request"]["reason"], "good example");
    let audit = root
        .admin_get("/v1/root/mcp/audit?tool_id=admin.approval.reject")
        .await;
    assert_eq!(
        items(&audit["events"]).len(),
        2,
        "one refused, one recorded: {audit}"
    );
    hub.stop().await;
    root.stop().await;
}
