//! Run profiles for generic workers (seed 003 applied to leases): the signed
//! `ai-workspace.run-profile.v1` root derives from a lease, who may read it, what it holds (and
//! never holds), and its verification with `mcp-root admin lease verify-profile`.

use mcp_tests::error_message;
use mcp_tests::items;
use mcp_tests::refusal;
use std::collections::BTreeSet;

use mcp_tests::{TestRoot, mcp_client};
use serde_json::{Value, json};

use crate::ops::admin_cli::admin;

fn schema(file: &str) -> jsonschema::Validator {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../schemas")
        .join(file);
    let v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(&v)
        .unwrap()
}

fn assert_valid(file: &str, doc: &Value) {
    let v = schema(file);
    let errors: Vec<String> = v.iter_errors(doc).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{file}: {errors:?}\n{doc:#}");
}

/// `POST .../run-profile` with `bearer`, `ask` as the body (`Null`: none) and extra headers:
/// `(status, body)`; a 201's body carries `run_profile`, the run credential's `token`,
/// `session_id` and `token_ref`.
pub async fn fetch(
    root: &TestRoot,
    id: &str,
    bearer: Option<&str>,
    ask: Value,
    headers: &[(&str, &str)],
) -> (u16, Value) {
    let mut req = root
        .http
        .post(root.url(&format!("/v1/root/mcp/sessions/{id}/run-profile")));
    if !ask.is_null() {
        req = req.json(&ask);
    }
    if let Some(b) = bearer {
        req = req.bearer_auth(b);
    }
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let res = req.send().await.unwrap();
    (
        res.status().as_u16(),
        res.json().await.unwrap_or(Value::Null),
    )
}

/// The run profile of a lease, issued by the operator.
pub async fn operator_profile(root: &TestRoot, id: &str) -> Value {
    let v = root.on_lease(id, "run-profile").await;
    v["run_profile"].clone()
}

fn ids(profile: &Value) -> BTreeSet<String> {
    items(&profile["toolProfile"]["assistantActions"]["actionIds"])
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

fn rfc3339(v: &Value) -> time::OffsetDateTime {
    mcp_shared::time::parse(v.as_str().unwrap()).unwrap()
}

/// Every secret and internal address of the scenario; none may appear in a run profile.
pub fn assert_no_secret(doc: &Value, secrets: &[&str], root: &TestRoot) {
    let text = doc.to_string();
    let app = &root.handle().app;
    let derived = hex::encode(mcp_root::api::run_profile::signing_key(app));
    let internal = root.handle().base_url();
    let host_port = internal
        .trim_start_matches("http://")
        .trim_start_matches("https://")
        .to_string();
    for (what, s) in secrets
        .iter()
        .map(|s| ("an issued secret", *s))
        .chain([
            ("the admin token", root.admin_token().as_str()),
            ("the master key", app.master_key.expose_hex()),
            ("the run-profile key", derived.as_str()),
            ("root's URL", internal.as_str()),
            ("root's address", host_port.as_str()),
        ])
        .collect::<Vec<_>>()
    {
        assert!(!s.is_empty(), "{what} is empty");
        assert!(
            !text.contains(s),
            "the run profile contains {what}: {doc:#}"
        );
    }
    for marker in [
        "Bearer ", "mcpl_", "mcph_", "http://", "https://", "ws://", "wss://",
    ] {
        assert!(
            !text.contains(marker),
            "the run profile contains `{marker}`: {doc:#}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_profile_is_derived_from_the_lease_signed_and_never_holds_a_secret() {
    let root = TestRoot::start().await.unwrap();
    let hub = root.start_hub("hub:test-alpha", "").await.unwrap();
    let (id, token) = root.lease_for("hub:test-alpha", "InfraOpsRead", 3600).await;
    let (other_id, other) = root.lease_for("hub:test-alpha", "InfraOpsRead", 3600).await;

    // The lease's own bearer: a run credential and the signed document naming it.
    let (s, b) = fetch(&root, &id, Some(&token), Value::Null, &[]).await;
    assert_eq!(s, 201, "{b}");
    let p = b["run_profile"].clone();
    let run = b["session_id"].as_str().unwrap().to_owned();
    let credential = b["token"].as_str().unwrap().to_owned();
    assert_ne!(run, id, "the run has a credential of its own");
    assert_eq!(b["token_ref"], format!("lease:{run}"));
    assert_valid("run-profile.schema.json", &p);
    assert_valid("tool-profile.schema.json", &p["toolProfile"]);
    assert_eq!(p["schemaVersion"], "ai-workspace.run-profile.v1");
    assert_eq!(p["runId"], run);
    assert_eq!(p["audience"], "mcp-client");
    assert_eq!(p["sourceSurface"], "rest");
    assert_eq!(p["owner"]["ownerKey"], format!("lease:{id}"));
    assert_eq!(p["owner"]["requestedBy"], format!("lease:{id}"));
    assert_eq!(p["owner"]["role"], "InfraOpsRead");
    assert_eq!(p["activeContext"]["targetId"], "hub:test-alpha");
    assert_eq!(p["activeContext"]["environment"], "test");
    let lifetime = rfc3339(&p["expiresAt"]) - rfc3339(&p["createdAt"]);
    assert!(
        lifetime > time::Duration::ZERO && lifetime <= time::Duration::minutes(10),
        "{lifetime}"
    );
    let actions = &p["toolProfile"]["assistantActions"];
    assert_eq!(
        actions["endpoint"],
        "/api/ai-workspace/assistant/v1/actions"
    );
    assert_eq!(actions["tokenRef"], format!("lease:{run}"));
    assert_eq!(
        p["toolProfile"]["mcpServers"][0]["tokenRef"],
        format!("lease:{run}")
    );
    assert_eq!(p["toolProfile"]["mcpServers"][0]["endpoint"], "/mcp");
    // Exactly the tools the lease sees over MCP: its profile and the target's surface; the
    // run credential sees the same.
    let list = |bearer: String| {
        let url = root.mcp_url();
        async move {
            let client = mcp_client(&url, &bearer).await.unwrap();
            let names: BTreeSet<String> =
                mcp_tests::listed_tools(&client).await.into_iter().collect();
            client.cancel().await.ok();
            names
        }
    };
    let listed = list(token.clone()).await;
    assert!(listed.contains("hub.get_status"), "{listed:?}");
    assert_eq!(ids(&p), listed);
    assert_eq!(list(credential.clone()).await, listed);
    for a in items(&actions["actions"]) {
        assert_eq!(a["sideEffect"], "read", "{a}");
        assert_eq!(a["phases"], json!(["execute"]), "{a}");
    }
    let (s, r) = root.call(&credential, "hub.get_status", json!({})).await;
    assert_eq!(
        s, 200,
        "the run credential calls what its profile grants: {r}"
    );

    // A narrowed run: its credential reaches nothing beyond its profile.
    let (s, narrow) = fetch(
        &root,
        &id,
        Some(&token),
        json!({"tools": ["hub.get_status"], "ttl_sec": 60}),
        &[],
    )
    .await;
    assert_eq!(s, 201, "{narrow}");
    assert_eq!(
        ids(&narrow["run_profile"]),
        BTreeSet::from(["hub.get_status".to_owned()])
    );
    let scoped = narrow["token"].as_str().unwrap().to_owned();
    assert_eq!(
        list(scoped.clone()).await,
        BTreeSet::from(["hub.get_status".to_owned()])
    );
    let (s, r) = root
        .call(&scoped, "hub.get_runtime_summary", json!({}))
        .await;
    assert_eq!(refusal(s, &r), (403, "capability_not_granted"), "{r}");
    assert!(error_message(&r).contains("run credential"), "{r}");
    // A run credential issues no run profile of its own.
    let (s, r) = fetch(
        &root,
        narrow["session_id"].as_str().unwrap(),
        Some(&scoped),
        json!({}),
        &[],
    )
    .await;
    assert_eq!(refusal(s, &r), (403, "forbidden"), "{r}");
    // Tools the lease cannot call are refused, as is an empty list.
    for ask in [json!({"tools": ["hub.deploy_ref"]}), json!({"tools": []})] {
        let (s, r) = fetch(&root, &id, Some(&token), ask.clone(), &[]).await;
        assert_eq!(s, 400, "{ask}: {r}");
        assert!(r["event_id"].is_string(), "refusals are events too: {r}");
    }

    // Every document is fresh: a new request id.
    let (_, again) = fetch(&root, &id, Some(&token), Value::Null, &[]).await;
    assert_ne!(again["run_profile"]["requestId"], p["requestId"]);

    // The operator may issue any lease's profile; it says so.
    let (s, op) = fetch(&root, &id, Some(&root.admin_token()), Value::Null, &[]).await;
    assert_eq!(s, 201, "{op}");
    let op = op["run_profile"].clone();
    assert_eq!(
        (
            op["sourceSurface"].as_str(),
            op["owner"]["requestedBy"].as_str()
        ),
        (Some("admin"), Some("operator:admin"))
    );
    assert_eq!(op["owner"]["ownerKey"], format!("lease:{id}"));
    // Each issue is an audit event naming who asked.
    for (tool, actor) in [
        ("run_profile.issue", format!("lease:{id}")),
        ("admin.run_profile.issue", "operator:admin".to_owned()),
    ] {
        let v = root
            .admin_get(&format!("/v1/root/mcp/audit?tool_id={tool}"))
            .await;
        assert_eq!(v["events"][0]["actor"]["id"], actor, "{v}");
    }

    // Another lease's bearer learns nothing: the same 404 as an id that does not exist.
    let (s1, b1) = fetch(&root, &id, Some(&other), Value::Null, &[]).await;
    let (s2, b2) = fetch(&root, "no-such-lease", Some(&other), Value::Null, &[]).await;
    assert_eq!((s1, s2), (404, 404), "{b1} {b2}");
    assert_eq!(
        error_message(&b1).replace(&id, "ID"),
        error_message(&b2).replace("no-such-lease", "ID")
    );
    assert_eq!(fetch(&root, &id, None, Value::Null, &[]).await.0, 401);
    assert_eq!(
        fetch(&root, &id, Some("mcpl_forged"), Value::Null, &[])
            .await
            .0,
        401
    );

    // Forged actor headers change nothing: the owner is the lease root resolved.
    let forged = [
        ("x-actor", "root-admin"),
        ("x-owner-key", "email:mallory@example.org"),
        ("x-user-id", "platform-user-mallory"),
        ("x-forwarded-user", "mallory"),
        ("x-forwarded-email", "mallory@example.org"),
        ("x-actor-role", "root-admin"),
    ];
    let (s, f) = fetch(&root, &id, Some(&token), Value::Null, &forged).await;
    assert_eq!(s, 201);
    let f = f["run_profile"].clone();
    assert_eq!(f["owner"], p["owner"]);
    assert!(!f.to_string().contains("mallory") && !f.to_string().contains("root-admin"));

    // Short lifetimes on request, the credential's too; never longer than ten minutes.
    let (s, short) = fetch(&root, &id, Some(&token), json!({"ttl_sec": 1}), &[]).await;
    assert_eq!(s, 201);
    let short_doc = short["run_profile"].clone();
    assert!(
        rfc3339(&short_doc["expiresAt"]) - rfc3339(&short_doc["createdAt"])
            <= time::Duration::seconds(1)
    );
    for bad in [
        json!({"ttl_sec": 0}),
        json!({"ttl_sec": 601}),
        json!({"ttl_sec": "x"}),
        json!({"other": 1}),
    ] {
        assert_eq!(
            fetch(&root, &id, Some(&token), bad.clone(), &[]).await.0,
            400,
            "{bad}"
        );
    }
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let expired = short["token"].as_str().unwrap();
    assert_eq!(
        root.call(expired, "hub.get_status", json!({})).await.0,
        401,
        "a run credential ends with its run profile"
    );

    // No bearer (the lease's, the run credential's, the hub's), admin token, key or internal
    // URL, in any of them.
    for doc in [&p, &op, &f, &short_doc, &narrow["run_profile"]] {
        assert_no_secret(
            doc,
            &[&token, &other, &hub.token, &credential, &scoped],
            &root,
        );
    }

    // The target's current surface: with the skill disabled its tools leave the profile.
    root.admin_post(
        "/v1/root/hubs/hub:test-alpha/skills/infra_access_skill/disable",
        json!({}),
    )
    .await;
    let (_, disabled) = fetch(&root, &id, Some(&token), Value::Null, &[]).await;
    assert!(
        !ids(&disabled["run_profile"]).contains("hub.get_status"),
        "{disabled}"
    );
    assert!(ids(&disabled["run_profile"]).len() < ids(&p).len());

    // Revoking the lease revokes its run credentials; a revoked lease has no run profile.
    root.on_lease(&id, "revoke").await;
    for cred in [&credential, &scoped] {
        assert_eq!(
            root.call(cred, "root.get_subnet_timeline", json!({}))
                .await
                .0,
            401,
            "revoked with its lease"
        );
    }
    let lease = root
        .admin_get(&format!("/v1/root/mcp/sessions/{run}"))
        .await;
    assert_eq!(
        (
            lease["status"].as_str(),
            lease["parent_session_id"].as_str()
        ),
        (Some("revoked"), Some(id.as_str())),
        "{lease}"
    );
    root.on_lease(&other_id, "revoke").await;
    let (s, b) = fetch(
        &root,
        &other_id,
        Some(&root.admin_token()),
        Value::Null,
        &[],
    )
    .await;
    assert_eq!(s, 409, "{b}");
    assert!(error_message(&b).contains("revoked"), "{b}");
    assert_eq!(
        fetch(&root, &other_id, Some(&other), Value::Null, &[])
            .await
            .0,
        401
    );
    hub.stop().await;
    root.stop().await;
}

/// Writes `doc` to a file and runs `admin lease verify-profile` on it.
fn verify_cli(root: &TestRoot, dir: &std::path::Path, name: &str, doc: &str) -> (i32, String) {
    let path = dir.join(name);
    std::fs::write(&path, doc).unwrap();
    let (code, out, err) = admin(root, &["lease", "verify-profile", path.to_str().unwrap()]);
    (code, format!("{out}{err}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_profile_names_valid_tampered_unsigned_expired_and_unknown_key() {
    let root = TestRoot::start().await.unwrap();
    let other_root = TestRoot::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (id, _) = root.lease_for("hub:test-alpha", "AdaOSDevRead", 3600).await;
    let profile = operator_profile(&root, &id).await;
    assert!(!ids(&profile).is_empty());

    // As root served it (pretty-printed: whitespace and key order do not matter).
    let text = serde_json::to_string_pretty(&profile).unwrap();
    let (code, out) = verify_cli(&root, dir.path(), "valid.json", &text);
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("valid: run "), "{out}");
    assert!(out.contains(&format!("lease:{id}")), "the owner: {out}");
    let (code, out, err) = admin(
        &root,
        &[
            "lease",
            "verify-profile",
            dir.path().join("valid.json").to_str().unwrap(),
            "--json",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["valid"], true);

    // One field changed: the role, an action added, the expiry moved.
    for (name, change) in [
        (
            "role",
            Box::new(|p: &mut Value| p["owner"]["role"] = json!("InfraOpsControl"))
                as Box<dyn Fn(&mut Value)>,
        ),
        (
            "action",
            Box::new(|p: &mut Value| {
                p["toolProfile"]["assistantActions"]["actionIds"]
                    .as_array_mut()
                    .unwrap()
                    .push(json!("hub.deploy_ref"))
            }),
        ),
        (
            "expiry",
            Box::new(|p: &mut Value| p["expiresAt"] = json!("2099-01-01T00:00:00Z")),
        ),
    ] {
        let mut changed = profile.clone();
        change(&mut changed);
        let (code, out) = verify_cli(&root, dir.path(), "changed.json", &changed.to_string());
        assert_eq!(code, 4, "{name}: {out}");
        assert!(out.starts_with("invalid (tampered): "), "{name}: {out}");
        assert!(out.contains("changed after root signed it"), "{out}");
    }

    // Signature removed.
    let mut unsigned = profile.clone();
    unsigned.as_object_mut().unwrap().remove("integrity");
    let (code, out) = verify_cli(&root, dir.path(), "unsigned.json", &unsigned.to_string());
    assert_eq!(code, 4, "{out}");
    assert!(out.starts_with("invalid (unsigned): "), "{out}");
    let mut blank = profile.clone();
    blank["integrity"]["signature"] = json!("");
    let (code, out) = verify_cli(&root, dir.path(), "blank.json", &blank.to_string());
    assert_eq!(
        (code, out.starts_with("invalid (tampered)")),
        (4, true),
        "{out}"
    );

    // Expired: an authentic profile whose time is up (signed by this root's own key, so
    // only the expiry can be wrong with it).
    let mut expired: mcp_shared::run_profile::RunProfile =
        serde_json::from_value(profile.clone()).unwrap();
    expired.created_at -= time::Duration::minutes(30);
    expired.expires_at = expired.created_at + time::Duration::minutes(10);
    expired.seal(&mcp_root::api::run_profile::signing_key(&root.handle().app));
    let (code, out) = verify_cli(
        &root,
        dir.path(),
        "expired.json",
        &serde_json::to_string(&expired).unwrap(),
    );
    assert_eq!(code, 4, "{out}");
    assert!(out.starts_with("invalid (expired): "), "{out}");
    assert!(
        out.contains(&mcp_shared::time::format(expired.expires_at)),
        "{out}"
    );

    // Signed by another root (another master key): an unknown key, not a tampered document.
    let (other_id, _) = other_root
        .lease_for("hub:test-alpha", "AdaOSDevRead", 3600)
        .await;
    let foreign = operator_profile(&other_root, &other_id).await;
    let (code, out) = verify_cli(&root, dir.path(), "foreign.json", &foreign.to_string());
    assert_eq!(code, 4, "{out}");
    assert!(out.starts_with("invalid (unknown_key): "), "{out}");
    assert!(
        out.contains(foreign["integrity"]["keyId"].as_str().unwrap()),
        "{out}"
    );

    // Not JSON at all.
    let (code, out) = verify_cli(&root, dir.path(), "garbage.json", "{not json");
    assert_eq!(code, 4, "{out}");
    assert!(out.starts_with("invalid (malformed): "), "{out}");

    // Verification is the operator's: a lease bearer cannot use root as a signing oracle.
    let token = root.bearer("hub:test-alpha", "AdaOSDevRead").await;
    let res = root
        .post_as(&token, "/v1/root/mcp/run-profiles/verify", &profile)
        .await;
    assert_eq!(res.status(), 403);
    other_root.stop().await;
    root.stop().await;
}

#[tokio::test]
async fn every_root_holding_the_zones_master_key_verifies_the_profile() {
    let a = TestRoot::start_with(TestRoot::on_sqlite).await.unwrap();
    let key_file = a.data_dir().join("secrets.key");
    let b = TestRoot::start_with(|c| {
        TestRoot::on_sqlite(c);
        c.master_key_file = Some(key_file.clone());
    })
    .await
    .unwrap();
    let c = TestRoot::start_with(TestRoot::on_sqlite).await.unwrap();
    let (id, _) = a.lease("hub:test-alpha", "AdaOSDevRead").await;
    let profile = operator_profile(&a, &id).await;
    let on_b = b
        .admin_post("/v1/root/mcp/run-profiles/verify", profile.clone())
        .await;
    assert_eq!(on_b["valid"], true, "{on_b}");
    assert_eq!(on_b["key_id"], profile["integrity"]["keyId"]);
    let on_c = c
        .admin_post("/v1/root/mcp/run-profiles/verify", profile)
        .await;
    assert_eq!(
        (on_c["valid"].as_bool(), on_c["reason"].as_str()),
        (Some(false), Some("unknown_key")),
        "{on_c}"
    );
    for r in [a, b, c] {
        r.stop().await;
    }
}
