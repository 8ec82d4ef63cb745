//! Roles with least privilege (issue 52): every route root serves, tried by an operator of
//! each role, by a lease and by the bootstrap admin, against a real root. A route an operator
//! of a lesser role can use, or one whose role the table does not declare, fails here.

use mcp_root::api::{Access, Endpoint, endpoints};
use mcp_root::roles::Role;
use mcp_tests::TestRoot;
use serde_json::{Value, json};

/// `path` with each `{parameter}` filled in (ids that name nothing: an allowed request is
/// refused by its handler, never carried out).
fn concrete(path: &str) -> String {
    path.split('/')
        .map(|seg| match seg {
            "{target_id}" => "hub:roles-nobody",
            "{skill}" => "infra_access_skill",
            "{command}" => "cordon",
            "{decision}" => "approve",
            s if s.starts_with('{') => "no-such-id",
            s => s,
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// `method path` with `bearer`: status and JSON body (`null` when the body is not JSON).
async fn send(root: &TestRoot, e: &Endpoint, bearer: &str) -> (u16, Value) {
    let url = root.url(&concrete(e.path));
    let req = match e.method {
        "GET" => root.http.get(url),
        _ => root.http.post(url).json(&json!({})),
    };
    let res = req.bearer_auth(bearer).send().await.unwrap();
    let status = res.status().as_u16();
    // An allowed audit stream stays open: its status is the answer.
    if e.path.ends_with("/stream") && status == 200 {
        return (status, Value::Null);
    }
    (status, res.json().await.unwrap_or(Value::Null))
}

/// Whether `(status, body)` is the refusal for a role not held.
fn role_refused(status: u16, body: &Value) -> bool {
    status == 403 && body["error"]["code"] == "role_required"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_is_refused_to_every_role_that_does_not_hold_it() {
    let root = TestRoot::start_with(|c| c.oauth.discovery = true)
        .await
        .unwrap();
    let mut holders = Vec::new();
    for role in Role::ALL {
        let name = format!("role-{role}");
        let token = root.add_operator(&name, &[role.as_str()], &["*"]).await;
        holders.push((role, name, token));
    }
    let (_, lease) = root.lease("hub:roles-nobody", "InfraOpsRead").await;
    let routes: Vec<Endpoint> = endpoints()
        .into_iter()
        // Hubs and replicas have doors and credentials of their own (governance::no_holes,
        // zone::); health is public.
        .filter(|e| !matches!(e.access, Access::Hub | Access::Replica | Access::Public))
        // The console's routes take its cookie, not a bearer (every operator's: ops::console).
        .filter(|e| !e.path.starts_with("/ui/"))
        .collect();
    assert!(routes.len() >= 50, "{}", routes.len());
    let mut refusals = 0;
    for e in &routes {
        let needed = e.access.role();
        for (role, name, token) in &holders {
            let (status, body) = send(&root, e, token).await;
            let holds =
                needed.is_some_and(|n| *role == Role::Admin || *role == n || n == Role::Viewer);
            let what = format!("{} {} as {role} answered {status} {body}", e.method, e.path);
            if holds {
                assert!(!role_refused(status, &body), "refused: {what}");
                assert_ne!(status, 401, "{what}");
                continue;
            }
            refusals += 1;
            if needed.is_none() {
                // A lease's route: an operator's bearer never opens it.
                assert!(matches!(status, 401 | 403), "an operator opened {what}");
                continue;
            }
            assert!(role_refused(status, &body), "not refused: {what}");
            let message = body["error"]["message"].as_str().unwrap();
            assert!(
                message.contains(&format!("`{}`", needed.unwrap())),
                "{what}"
            );
            // An operator action refused is one event naming the operator.
            if e.access.audited() {
                let event = root.audit_event(body["event_id"].as_str().unwrap()).await;
                assert_eq!(event["tool_id"], "admin.role.refuse", "{what}");
                assert_eq!(event["actor"]["id"], format!("operator:{name}"));
                assert_eq!(event["error"]["code"], "role_required", "{event}");
                assert_eq!(event["request"]["route"], e.path, "{event}");
            }
        }
        // The agents' plane: a lease opens its own routes, never an operator's.
        let (status, body) = send(&root, e, &lease).await;
        match e.access {
            Access::Lease => assert_ne!(status, 401, "{} {}: {body}", e.method, e.path),
            // Each caller sees what it may (a lease: its own session's profile).
            Access::Any | Access::AnyAction => {}
            _ => assert!(
                matches!(status, 401 | 403),
                "a lease opened {} {}: {status} {body}",
                e.method,
                e.path
            ),
        }
    }
    assert!(refusals > 100, "{refusals}");
    let verified = root.admin_get("/v1/root/mcp/audit/verify").await;
    assert_eq!(verified["ok"], true, "{verified}");
    root.stop().await;
}

/// An operator hands out no more than they hold: leases of their profiles only, operators
/// with their roles and profiles only; retirement is admin's though cordoning is not.
#[tokio::test]
async fn an_operator_cannot_hand_out_more_than_they_hold() {
    let root = TestRoot::start().await.unwrap();
    root.enroll("hub:roles-a", "test").await.unwrap();
    let ops = root
        .add_operator("ops", &["operator"], &["InfraOpsRead"])
        .await;
    let lease = |profile: &str| json!({"target_id": "hub:roles-a", "capability_profile": profile, "ttl_sec": 60});
    let res = root
        .post_as(&ops, "/v1/root/mcp/sessions", &lease("InfraOpsRead"))
        .await;
    assert_eq!(res.status(), 201);
    let res = root
        .post_as(&ops, "/v1/root/mcp/sessions", &lease("InfraOpsControl"))
        .await;
    assert_eq!(res.status(), 403);
    let b: Value = res.json().await.unwrap();
    assert_eq!(b["error"]["code"], "role_required", "{b}");
    assert!(
        b["error"]["message"]
            .as_str()
            .unwrap()
            .contains("may not issue `InfraOpsControl`"),
        "{b}"
    );
    let ev = root.audit_event(b["event_id"].as_str().unwrap()).await;
    assert_eq!(ev["tool_id"], "admin.lease.create");
    assert_eq!(ev["actor"]["id"], "operator:ops");

    // An admin whose profiles are few gives no one more.
    let lesser = root
        .add_operator("lesser-admin", &["admin"], &["InfraOpsRead"])
        .await;
    for (body, ok) in [
        (
            json!({"name": "x1", "roles": ["operator"], "profiles": ["InfraOpsRead"]}),
            true,
        ),
        (
            json!({"name": "x2", "roles": ["operator"], "profiles": ["*"]}),
            false,
        ),
        (
            json!({"name": "x3", "roles": ["auditor"], "profiles": ["InfraOpsControl"]}),
            false,
        ),
        (json!({"name": "x4", "roles": ["root"]}), false),
        (json!({"name": "x5", "roles": []}), false),
    ] {
        let res = root.post_as(&lesser, "/v1/root/operators", &body).await;
        let status = res.status().as_u16();
        let b: Value = res.json().await.unwrap();
        assert_eq!(status == 201, ok, "{body}: {status} {b}");
        if ok {
            assert_eq!(b["roles"], json!(["operator"]), "{b}");
        } else {
            assert!(matches!(status, 400 | 403), "{body}: {status} {b}");
            assert!(b["event_id"].is_string(), "refusals are audited: {b}");
        }
    }
    // Without roles asked, a new operator is a viewer who may issue nothing.
    let viewer = root
        .admin_post("/v1/root/operators", json!({"name": "just-looking"}))
        .await["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let listed = root.admin_get("/v1/root/operators").await;
    let row = listed["operators"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "just-looking")
        .unwrap()
        .clone();
    assert_eq!(row["roles"], json!(["viewer"]), "{row}");
    assert_eq!(row["profiles"], json!([]), "{row}");
    assert_eq!(root.get_as(&viewer, "/v1/root/hubs").await.status(), 200);

    // Cordoning is an operator's; retiring the target, admin's.
    let cordon = root
        .post_as(
            &ops,
            "/v1/root/hubs/hub:roles-a/lifecycle/cordon",
            &json!({}),
        )
        .await;
    assert_eq!(cordon.status(), 200);
    let retire = root
        .post_as(
            &ops,
            "/v1/root/hubs/hub:roles-a/lifecycle/retire",
            &json!({}),
        )
        .await;
    assert_eq!(retire.status(), 403);
    let retire = root
        .post_as(
            &root.admin_token(),
            "/v1/root/hubs/hub:roles-a/lifecycle/retire",
            &json!({}),
        )
        .await;
    assert_eq!(retire.status(), 200);
    root.stop().await;
}

/// A refused credential is a `denied` audit event naming the address and what kind of
/// credential it looked like (never the credential); past ten a minute from one address they
/// are counted, in `/metrics` and in that address's next event, not recorded one by one.
#[tokio::test]
async fn refused_credentials_are_audited_and_a_flood_is_counted() {
    let root = TestRoot::start().await.unwrap();
    let guessed = "mcpo_guessed-0123456789abcdefghijklmnopqrstuvwxyz";
    for _ in 0..15 {
        let res = root.get_as(guessed, "/v1/root/mcp/sessions").await;
        assert_eq!(res.status(), 401);
    }
    let refused = root.trail("tool_id=auth.refuse&limit=50").await;
    assert_eq!(refused.len(), 10, "{refused:#?}");
    let e = &refused[0];
    assert_eq!(e["status"], "denied", "{e}");
    assert_eq!(e["actor"]["id"], "address:127.0.0.1", "{e}");
    assert_eq!(e["request"]["credential"], "operator bearer", "{e}");
    assert_eq!(e["request"]["path"], "/v1/root/mcp/sessions", "{e}");
    assert_eq!(e["error"]["code"], "unauthenticated", "{e}");
    assert_eq!(e["policy_decision"]["decision"], "deny", "{e}");
    assert!(!serde_json::to_string(&refused).unwrap().contains(guessed));
    let unrecorded = root
        .metric("mcp_root_unauthenticated_unrecorded_total")
        .await
        .unwrap();
    assert_eq!(unrecorded, Some(5));
    // MCP without a bearer is refused and counted the same way (the address is past ten).
    let res = root
        .http
        .post(root.url("/mcp"))
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    let unrecorded = root
        .metric("mcp_root_unauthenticated_unrecorded_total")
        .await
        .unwrap();
    assert_eq!(unrecorded, Some(6));
    let verified = root.admin_get("/v1/root/mcp/audit/verify").await;
    assert_eq!(verified["ok"], true, "{verified}");
    root.stop().await;
}

/// Separation of duties: an approver never approves a write asked under a lease they issued;
/// another approver does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approver_never_approves_their_own_request() {
    let root = TestRoot::start().await.unwrap();
    let hub = root
        .start_hub("hub:sod", &mcp_tests::nlu_hub_toml().unwrap())
        .await
        .unwrap();
    let pat = root
        .add_operator("pat", &["operator", "approver"], &["NLUTeacherAuthor"])
        .await;
    let quinn = root.add_operator("quinn", &["approver"], &[]).await;
    let res = root
        .post_as(
            &pat,
            "/v1/root/mcp/sessions",
            &json!({"target_id": "hub:sod", "capability_profile": "NLUTeacherAuthor", "ttl_sec": 600}),
        )
        .await;
    assert_eq!(res.status(), 201);
    let lease: Value = res.json().await.unwrap();
    let token = lease["token"].as_str().unwrap();
    let (s, list) = root
        .call(token, "nlu_authoring.list_templates", json!({}))
        .await;
    assert_eq!(s, 200, "{list}");
    let template = &list["result"]["templates"][0];
    let change = json!({
        "template_id": template["template_id"],
        "base_fingerprint": template["fingerprint"],
        "add_examples": ["brighten the hallway lamp"],
    });
    let (s, proposal) = root
        .call(token, "nlu_authoring.propose_change", change)
        .await;
    assert_eq!(s, 200, "{proposal}");
    let approval = proposal["result"]["approval"]["approval_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{proposal}"));
    let path = format!("/v1/root/mcp/approvals/{approval}/approve");
    let res = root.post_as(&pat, &path, &json!({})).await;
    assert_eq!(res.status(), 403);
    let b: Value = res.json().await.unwrap();
    assert!(
        b["error"]["message"]
            .as_str()
            .unwrap()
            .contains("never approves their own request"),
        "{b}"
    );
    let ev = root.audit_event(b["event_id"].as_str().unwrap()).await;
    assert_eq!(ev["actor"]["id"], "operator:pat");
    assert_eq!(ev["tool_id"], "admin.approval.approve");
    let res = root.post_as(&quinn, &path, &json!({})).await;
    assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
    hub.stop().await;
    root.stop().await;
}

/// The bootstrap admin token is break-glass: each request it authenticates is counted, its
/// uses reach the trail per address and window, and the Overview's read shows the last one;
/// a named operator's requests are not its uses.
#[tokio::test]
async fn the_break_glass_token_is_counted_shown_and_audited() {
    let root = TestRoot::start_with(|c| c.audit.breakglass_window_sec = Some(1))
        .await
        .unwrap();
    let viewer = root.add_operator("glass-viewer", &["viewer"], &[]).await;
    root.admin_get("/v1/root/hubs").await;
    root.admin_get("/v1/root/hubs").await;
    let read = async || -> Value {
        root.get_as(&viewer, "/v1/root/operators/breakglass")
            .await
            .json()
            .await
            .unwrap()
    };
    let before = read().await;
    assert_eq!(before["last_address"], "127.0.0.1", "{before}");
    assert_eq!(before["last_request"], "GET /v1/root/hubs", "{before}");
    let uses = before["uses_since_start"].as_u64().unwrap();
    assert!(uses >= 3, "the operator added and two reads: {before}");
    // The viewer's own requests are not the admin token's.
    root.get_as(&viewer, "/v1/root/hubs").await;
    assert_eq!(read().await["uses_since_start"], uses);
    let event = mcp_tests::eventually("the admin token's uses in the trail", async || {
        root.trail("tool_id=admin.breakglass.use")
            .await
            .into_iter()
            .find(|e| e["request"]["requests"]["GET /v1/root/hubs"] == 2)
    })
    .await;
    assert_eq!(event["actor"]["id"], "operator:admin", "{event}");
    assert_eq!(event["request"]["address"], "127.0.0.1", "{event}");
    assert!(event["request"]["uses"].as_u64().unwrap() >= 3, "{event}");
    let verified = root.admin_get("/v1/root/mcp/audit/verify").await;
    assert_eq!(verified["ok"], true, "{verified}");
}
