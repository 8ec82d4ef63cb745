//! The bad-input battery (issue 10): malformed, oversized, forged and replayed input at each of
//! root's doors — the MCP endpoint, the REST family, the operator endpoints, the hub WebSocket
//! — and at the hub's door for root's calls. Every case asserts its precise refusal (HTTP status and JSON-RPC code and
//! message, REST error code, or the hub protocol's `protocol_error` and close code); each test
//! then proves the daemon still serves, and ends by checking that the audit trail holds
//! exactly one event per call that reached policy (counted here, case by case) in a chain that
//! verifies. Refusals before policy (transport, body, bearer) write no event by design.
//!
//! Cases already covered precisely elsewhere, and not repeated here:
//!
//! | class                                              | where                                            |
//! |----------------------------------------------------|--------------------------------------------------|
//! | missing, unknown, expired, revoked bearers (MCP, REST); admin token on `/mcp` | `auth.rs` `missing_unknown_expired_and_revoked_bearers_get_401` |
//! | rotated bearer (REST), lease bearer on operator endpoints | `auth.rs` `leases_are_listed_…`, `leases_survive_a_restart_…` |
//! | forged actor headers                               | `auth.rs` `forged_actor_headers_are_ignored`     |
//! | Host / Origin (DNS rebinding)                      | `protocol.rs` `foreign_host_and_origin_are_refused` |
//! | unknown tool, schema-invalid arguments, denials (MCP tool errors with events) | `tools.rs` `invalid_arguments_and_denials_are_tool_errors_with_events` |
//! | bad `tools/list` cursor                            | `tools.rs` `a_bad_tools_list_cursor_is_invalid_params` |
//! | destructive names                                  | `tools.rs` `destructive_action_names_get_forbidden_destructive_…` |
//! | lease of an offline target / without the capability | `hub.rs` `a_lease_for_another_target_cannot_reach_this_one` |
//! | revoking another target's lease                    | `root_tools.rs` `access_tokens_are_leases_bounded_by_the_caller` |
//! | confirmation token: other lease, other arguments, consumed on use, expired; idempotency conflict | `writes.rs` `preview_confirm_execute_and_replay` |
//! | hub `hello`: right token for another target, wrong environment, unknown token (real hub) | `hub.rs` `a_wrong_token_target_or_environment_is_refused_…` |
//! | hub on a rotated-out token                         | `secrets.rs` `a_hub_on_a_rotated_out_token_works_until_the_grace_ends` |
//! | hub re-checks: forged and tampered signature, expired deadline, replayed call id, unpublished tool, garbage frame | `hub_enforcement.rs` |
//! | hub client certificate (mutual TLS)                | `tls.rs` `mutual_tls_on_the_hub_path`            |
//! | replica channel credentials                        | `replicas.rs`                                    |
//! | property tests and fuzz targets (front, root↔hub decoder, catalog validator) | `root/src/mcp/front.rs`, `shared/tests/protocol_props.rs`, `root-core/src/skill_catalog/mod.rs`, `fuzz/` |
//! | a disabled skill (`skill_disabled`, routed and root-executed tools, hub offline) | `governance.rs` `disabling_the_skill_cuts_the_target_off_everywhere` |
//! | hub upgrade without or with a bad token (401 before the upgrade, bounded, counted) | `governance.rs` `the_hub_door_authenticates_before_the_upgrade`, `hub_websocket_battery` here |
//! | another lease's idempotency key                    | `writes.rs` `another_leases_idempotency_key_is_not_a_replay` |
//! | a run credential past its profile (other tool, issuing tokens or run profiles, parent revoked) | `run_profile.rs` |
//! | a revoked operator, a lease on operator endpoints (console included) | `governance.rs` `every_operator_action_is_one_event_naming_the_operator` |
//! | actors that panic (root's, a router session, the hub's skill, services, ProfileOps) | `actors.rs` |
//! | OAuth: malformed registration, authorization and token requests, forged sealed requests, wrong resource, PKCE, reused and expired codes, inside-pointing client ID URLs | `oauth.rs` |
//! | OAuth redirect URIs with a fragment, userinfo or another spelling; registration floods (429, eviction, full) | `oauth.rs` `redirect_uris_match_…`, `anonymous_registrations_…` |
//! | bearers of ended chains: a minted lease after its parent, an OAuth sign-in's tokens after `/oauth/revoke`, a refresh or its operator's revocation | `delegation.rs` |
//! | a child wider than its parent (profile, deadline); a run credential minting | `root_tools.rs`, `run_profile.rs`, `delegation_battery` here |

use mcp_tests::TestRoot;
use mcp_tests::error_message;
use mcp_tests::items;
use mcp_tests::refusal;
use mcp_tests::runs;
use serde_json::{Value, json};

const ACCEPT: &str = "application/json, text/event-stream";
const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"battery","version":"1"}}}"#;

/// The JSON body of a response: plain JSON, or the JSON-RPC message of a one-event SSE stream.
pub(crate) async fn json_of(res: reqwest::Response) -> (u16, Value) {
    let status = res.status().as_u16();
    let text = res.text().await.unwrap();
    if text.is_empty() {
        return (status, Value::Null);
    }
    if let Ok(v) = serde_json::from_str(&text) {
        return (status, v);
    }
    let v = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v.get("jsonrpc").is_some())
        .unwrap_or_else(|| panic!("{status}: no JSON in {text:?}"));
    (status, v)
}

/// A raw POST to `/mcp`.
struct Mcp<'a> {
    root: &'a TestRoot,
    bearer: Option<&'a str>,
    session: Option<&'a str>,
    content_type: Option<&'a str>,
    accept: Option<&'a str>,
}

impl<'a> Mcp<'a> {
    fn new(root: &'a TestRoot, bearer: &'a str) -> Mcp<'a> {
        Mcp {
            root,
            bearer: Some(bearer),
            session: None,
            content_type: Some("application/json"),
            accept: Some(ACCEPT),
        }
    }

    async fn post(&self, body: impl Into<reqwest::Body>) -> (u16, Value) {
        let mut req = self.root.http.post(self.root.mcp_url()).body(body);
        if let Some(b) = self.bearer {
            req = req.bearer_auth(b);
        }
        if let Some(s) = self.session {
            req = req
                .header("mcp-session-id", s)
                .header("mcp-protocol-version", "2025-11-25");
        }
        if let Some(ct) = self.content_type {
            req = req.header("content-type", ct);
        }
        if let Some(a) = self.accept {
            req = req.header("accept", a);
        }
        json_of(req.send().await.unwrap()).await
    }
}

/// Asserts a JSON-RPC error: HTTP status, code, exact message and id.
#[track_caller]
fn rpc_error(got: &(u16, Value), status: u16, code: i64, message: &str, id: Value) {
    let (s, v) = got;
    assert_eq!(*s, status, "{v}");
    assert_eq!(v["jsonrpc"], "2.0", "{v}");
    assert_eq!(v["error"]["code"], code, "{v}");
    assert_eq!(v["error"]["message"], message, "{v}");
    assert_eq!(v["id"], id, "{v}");
}

/// Asserts a REST error: HTTP status, code and exact message.
#[track_caller]
fn rest_error(got: &(u16, Value), status: u16, code: &str, message: &str) {
    let (s, v) = got;
    assert_eq!(*s, status, "{v}");
    assert_eq!(v["error"]["code"], code, "{v}");
    assert_eq!(v["error"]["message"], message, "{v}");
}

/// The audit trail holds exactly `expected` call events (besides the operator's own actions:
/// leases issued, targets enrolled; and refused credentials, `auth.refuse`, which
/// governance::roles counts) and its chain verifies.
async fn assert_audit_count(root: &TestRoot, expected: u64) {
    let v = root.admin_get("/v1/root/mcp/audit/verify").await;
    assert_eq!(v["ok"], true, "{v}");
    let events = root.admin_get("/v1/root/mcp/audit?limit=1000").await;
    let events = items(&events["events"]);
    let calls = events
        .iter()
        .filter(|e| {
            e["surface"] != "admin" && e["surface"] != "hub" && e["tool_id"] != "auth.refuse"
        })
        .count() as u64;
    assert_eq!(calls, expected, "{events:#?}");
    assert_eq!(v["checked"], events.len() as u64, "{v}");
}

fn deep(levels: usize, inner: &str) -> String {
    format!("{}{inner}{}", "[".repeat(levels), "]".repeat(levels))
}

#[tokio::test]
async fn mcp_endpoint_battery() {
    let root = TestRoot::start().await.unwrap();
    let token = root.bearer("hub:test-alpha", "AdaOSDevRead").await;
    let limit = root.handle().app.config.limits.max_body_bytes;
    let mcp = Mcp::new(&root, &token);
    let mut reached_policy = 0u64;

    // Transport: Accept and Content-Type.
    let no_accept = Mcp {
        accept: None,
        ..Mcp::new(&root, &token)
    };
    let not_acceptable =
        "Not Acceptable: the client must accept both application/json and text/event-stream";
    rpc_error(
        &no_accept.post(INIT).await,
        406,
        -32600,
        not_acceptable,
        Value::Null,
    );
    let json_only = Mcp {
        accept: Some("application/json"),
        ..Mcp::new(&root, &token)
    };
    rpc_error(
        &json_only.post(INIT).await,
        406,
        -32600,
        not_acceptable,
        Value::Null,
    );
    let text_plain = Mcp {
        content_type: Some("text/plain"),
        ..Mcp::new(&root, &token)
    };
    rpc_error(
        &text_plain.post(INIT).await,
        415,
        -32600,
        "Unsupported Media Type: Content-Type must be application/json, not `text/plain`",
        Value::Null,
    );
    let no_type = Mcp {
        content_type: None,
        ..Mcp::new(&root, &token)
    };
    rpc_error(
        &no_type.post(INIT).await,
        415,
        -32600,
        "Unsupported Media Type: Content-Type must be application/json, not none",
        Value::Null,
    );

    // Size: declared too large (the body limit answers before anything reads it) and streamed
    // past the limit without a length.
    let too_large = format!("Payload Too Large: the request body exceeds {limit} bytes");
    rpc_error(
        &mcp.post(vec![b' '; limit + 1]).await,
        413,
        -32600,
        &too_large,
        Value::Null,
    );
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> = (0..=limit / 65_536)
        .map(|_| Ok(vec![b' '; 65_536]))
        .collect();
    rpc_error(
        &mcp.post(reqwest::Body::wrap_stream(futures::stream::iter(chunks)))
            .await,
        413,
        -32600,
        &too_large,
        Value::Null,
    );

    // Parse errors: syntax, empty, invalid UTF-8, nesting (100 000 levels, at the top and
    // inside params: refused by a count, never by recursion).
    rpc_error(
        &mcp.post("{not json").await,
        400,
        -32700,
        "Parse error: key must be a string at line 1 column 2",
        Value::Null,
    );
    rpc_error(
        &mcp.post("").await,
        400,
        -32700,
        "Parse error: the body is empty",
        Value::Null,
    );
    rpc_error(
        &mcp.post(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\xfe\"}".to_vec())
            .await,
        400,
        -32700,
        "Parse error: the body is not valid UTF-8 (invalid byte at offset 34)",
        Value::Null,
    );
    let too_deep = "Parse error: JSON nested deeper than 64 levels";
    rpc_error(
        &mcp.post(deep(100_000, "")).await,
        400,
        -32700,
        too_deep,
        Value::Null,
    );
    let nested_args = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"sdk.get_schema","arguments":{{"name":{}}}}}}}"#,
        deep(100_000, "1")
    );
    rpc_error(
        &mcp.post(nested_args).await,
        400,
        -32700,
        too_deep,
        Value::Null,
    );

    // Not one JSON-RPC 2.0 message: batches (protocol 2025-06-18 and later have none;
    // 2025-03-26 had them, the transport never did), scalars, broken envelopes.
    let batch = "Invalid Request: JSON-RPC batches (arrays) are not supported; MCP removed \
                 batching in revision 2025-06-18, send one message per POST";
    rpc_error(
        &mcp.post(format!("[{INIT}]")).await,
        400,
        -32600,
        batch,
        Value::Null,
    );
    rpc_error(&mcp.post("[]").await, 400, -32600, batch, Value::Null);
    for (body, why) in [
        (
            "42",
            "the body must be one JSON-RPC message object, not a number",
        ),
        (
            r#""ping""#,
            "the body must be one JSON-RPC message object, not a string",
        ),
        (r#"{"id":1,"method":"ping"}"#, "missing `jsonrpc`: \"2.0\""),
        (
            r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#,
            "`jsonrpc` must be \"2.0\"",
        ),
        (
            r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
            "`id` must be a string or an integer",
        ),
        (
            r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#,
            "`id` must be a string or an integer",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
            "`id` must be a string or an integer",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":7}"#,
            "`method` must be a string",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":5}"#,
            "`params` must be an object, not a number",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","result":{}}"#,
            "a request or notification has no `result` or `error`",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}"#,
            "member `id` appears twice",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1}"#,
            "a message needs `method` (a request with `id`, or a notification) or `result`/`error` (a response)",
        ),
    ] {
        rpc_error(
            &mcp.post(body).await,
            400,
            -32600,
            &format!("Invalid Request: {why}"),
            Value::Null,
        );
    }
    // A request before `initialize`, and a session id root never issued.
    rpc_error(
        &mcp.post(r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#)
            .await,
        400,
        -32600,
        "Bad Request: Session ID is required",
        json!(3),
    );
    let ghost = Mcp {
        session: Some("no-such-session"),
        ..Mcp::new(&root, &token)
    };
    rpc_error(
        &ghost
            .post(r#"{"jsonrpc":"2.0","id":4,"method":"tools/list"}"#)
            .await,
        404,
        -32600,
        "Not Found: Session not found",
        json!(4),
    );

    // In a session: methods, params, tools, arguments.
    let sid = crate::mcp::transport::open_session(&root, &token).await;
    let session = Mcp {
        session: Some(&sid),
        ..Mcp::new(&root, &token)
    };
    let call = |id: i64, params: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}).to_string()
    };
    rpc_error(
        &session
            .post(r#"{"jsonrpc":"2.0","id":10,"method":"tools/launch","params":{}}"#)
            .await,
        200,
        -32601,
        "Method not found: `tools/launch`",
        json!(10),
    );
    rpc_error(
        &session.post(call(11, json!({}))).await,
        200,
        -32602,
        "Invalid params for `tools/call`: missing field `name`",
        json!(11),
    );
    rpc_error(
        &session
            .post(call(
                12,
                json!({"name": "sdk.get_schema", "arguments": [1]}),
            ))
            .await,
        200,
        -32602,
        "Invalid params for `tools/call`: invalid type: sequence, expected a map",
        json!(12),
    );
    rpc_error(
        &session
            .post(r#"{"jsonrpc":"2.0","id":13,"method":"prompts/get","params":{"name":"x"}}"#)
            .await,
        200,
        -32602,
        "no prompt `x` (this server offers none)",
        json!(13),
    );
    rpc_error(
        &session.post(format!("[{INIT}]")).await,
        400,
        -32600,
        batch,
        Value::Null,
    );
    // Unknown tool: -32602, and an event (it reached policy).
    let got = session.post(call(14, json!({"name": "sdk.launch"}))).await;
    rpc_error(&got, 200, -32602, "unknown tool `sdk.launch`", json!(14));
    assert!(got.1["error"]["data"]["event_id"].is_string(), "{}", got.1);
    reached_policy += 1;
    // Schema-invalid arguments: a tool error naming the path, with an event.
    let (s, v) = session
        .post(call(
            15,
            json!({"name": "sdk.get_schema", "arguments": {"name": 42}}),
        ))
        .await;
    assert_eq!(s, 200);
    assert_eq!(v["result"]["isError"], true, "{v}");
    let e = &v["result"]["structuredContent"]["error"];
    assert_eq!(e["code"], "invalid_arguments", "{v}");
    assert_eq!(
        e["message"],
        "arguments do not match the input schema of `sdk.get_schema`"
    );
    assert_eq!(
        e["details"]["errors"],
        json!(["/name: 42 is not of type \"string\""])
    );
    reached_policy += 1;
    // Another lease cannot use this session: it is answered as a session root never issued
    // (same status, code, message and id), so a bearer cannot learn which sessions exist.
    let other = root.bearer("hub:test-alpha", "AdaOSDevRead").await;
    let hijack = Mcp {
        session: Some(&sid),
        ..Mcp::new(&root, &other)
    };
    rpc_error(
        &hijack
            .post(call(16, json!({"name": "sdk.get_metadata"})))
            .await,
        404,
        -32600,
        "Not Found: Session not found",
        json!(16),
    );
    // Nor end it: its DELETE is answered alike, and the session goes on.
    let ended = root
        .http
        .delete(root.mcp_url())
        .bearer_auth(&other)
        .header("mcp-session-id", &sid)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    let ended = json_of(ended).await;
    rpc_error(
        &ended,
        404,
        -32600,
        "Not Found: Session not found",
        Value::Null,
    );
    let (s, v) = session
        .post(call(17, json!({"name": "sdk.get_metadata"})))
        .await;
    assert_eq!(
        s, 200,
        "the owner's session survives another lease's DELETE: {v}"
    );
    reached_policy += 1;

    // Bearers the other tests do not cover: a forged one of the right shape, another scheme,
    // one in the query string only, and a rotated one on an open MCP session.
    let forged = format!("mcpl_{}", "A".repeat(43));
    for (bearer, query) in [
        (Some(format!("Bearer {forged}")), ""),
        (Some(format!("Basic {token}")), ""),
        (Some("Bearer".to_string()), ""),
        (None, "?access_token="),
    ] {
        let mut req = root
            .http
            .post(format!(
                "{}{query}{}",
                root.mcp_url(),
                if query.is_empty() { "" } else { &token }
            ))
            .header("accept", ACCEPT)
            .header("content-type", "application/json")
            .body(INIT);
        if let Some(b) = &bearer {
            req = req.header("authorization", b);
        }
        let res = req.send().await.unwrap();
        assert_eq!(
            res.headers()["www-authenticate"],
            "Bearer error=\"invalid_token\"",
            "{bearer:?}"
        );
        rest_error(
            &json_of(res).await,
            401,
            "unauthenticated",
            "missing, unknown, expired or revoked bearer",
        );
    }
    let (rotated_id, rotated) = root.lease("hub:test-alpha", "AdaOSDevRead").await;
    let client = mcp_tests::mcp_client(&root.mcp_url(), &rotated)
        .await
        .unwrap();
    assert!(!client.list_all_tools().await.unwrap().is_empty());
    let new = root.on_lease(&rotated_id, "rotate").await;
    let err = client.list_all_tools().await.unwrap_err();
    assert!(err.to_string().contains("Auth required"), "{err}");
    rest_error(
        &json_of(
            root.http
                .post(root.mcp_url())
                .bearer_auth(&rotated)
                .header("accept", ACCEPT)
                .header("content-type", "application/json")
                .body(INIT)
                .send()
                .await
                .unwrap(),
        )
        .await,
        401,
        "unauthenticated",
        "missing, unknown, expired or revoked bearer",
    );

    // Still serving: a real client with the rotated lease's new bearer lists and calls.
    let client = mcp_tests::mcp_client(&root.mcp_url(), new["token"].as_str().unwrap())
        .await
        .unwrap();
    assert!(!client.list_all_tools().await.unwrap().is_empty());
    let res = client
        .call_tool(rmcp::model::CallToolRequestParams::new("sdk.get_metadata"))
        .await
        .unwrap();
    assert_eq!(res.is_error, Some(false));
    reached_policy += 1;
    assert_audit_count(&root, reached_policy).await;
    root.stop().await;
}

/// Hub TOML with one allowed test that appends a line to `counter` (so "did not run" counts).
fn allowed_test(counter: &std::path::Path) -> String {
    format!(
        "[[skill.allowed_tests]]\nname = \"smoke\"\nargv = [\"sh\", \"-c\", \"echo run >> {}\"]\ntimeout_ms = 10000\n",
        counter.display()
    )
}

#[tokio::test]
async fn rest_family_battery() {
    let root = TestRoot::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (alpha_runs, beta_runs) = (dir.path().join("alpha"), dir.path().join("beta"));
    let alpha = root
        .start_hub("hub:test-alpha", &allowed_test(&alpha_runs))
        .await
        .unwrap();
    let beta = root
        .start_hub("hub:test-beta", &allowed_test(&beta_runs))
        .await
        .unwrap();
    let dev = root.bearer("hub:test-alpha", "AdaOSDevRead").await;
    let limit = root.handle().app.config.limits.max_body_bytes;
    let mut reached_policy = 0u64;
    let call_url = root.url("/v1/root/mcp/call");
    let post = |bearer: &str, ct: Option<&str>, body: reqwest::Body| {
        let mut req = root.http.post(&call_url).bearer_auth(bearer).body(body);
        if let Some(ct) = ct {
            req = req.header("content-type", ct);
        }
        async move { json_of(req.send().await.unwrap()).await }
    };
    let json_ct = Some("application/json");

    // Body: media type, size (declared and streamed), UTF-8, nesting, syntax, shape.
    rest_error(
        &post(
            &dev,
            Some("text/plain"),
            r#"{"tool_id":"sdk.get_metadata"}"#.into(),
        )
        .await,
        415,
        "invalid_arguments",
        "Content-Type must be application/json, not `text/plain`",
    );
    rest_error(
        &post(&dev, None, r#"{"tool_id":"sdk.get_metadata"}"#.into()).await,
        415,
        "invalid_arguments",
        "Content-Type must be application/json, not none",
    );
    let too_large = format!("the request body exceeds {limit} bytes");
    rest_error(
        &post(&dev, json_ct, vec![b' '; limit + 1].into()).await,
        413,
        "invalid_arguments",
        &too_large,
    );
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> = (0..=limit / 65_536)
        .map(|_| Ok(vec![b' '; 65_536]))
        .collect();
    rest_error(
        &post(
            &dev,
            json_ct,
            reqwest::Body::wrap_stream(futures::stream::iter(chunks)),
        )
        .await,
        413,
        "invalid_arguments",
        &too_large,
    );
    rest_error(
        &post(&dev, json_ct, b"{\"tool_id\":\"\xff\xfe\"}".to_vec().into()).await,
        400,
        "invalid_arguments",
        "the body is not valid UTF-8 (invalid byte at offset 12)",
    );
    let too_deep = "JSON nested deeper than 64 levels";
    rest_error(
        &post(&dev, json_ct, deep(100_000, "").into()).await,
        400,
        "invalid_arguments",
        too_deep,
    );
    let nested = format!(
        r#"{{"tool_id":"sdk.get_schema","arguments":{{"name":{}}}}}"#,
        deep(100_000, "1")
    );
    rest_error(
        &post(&dev, json_ct, nested.into()).await,
        400,
        "invalid_arguments",
        too_deep,
    );
    for (body, message) in [
        (
            "{not json",
            "Failed to parse the request body as JSON: key must be a string at line 1 column 2",
        ),
        (
            "",
            "Failed to parse the request body as JSON: EOF while parsing a value at line 1 column 0",
        ),
        (
            "[1]",
            "Failed to deserialize the JSON body into the target type: [0]: invalid type: integer `1`, expected a string at line 1 column 2",
        ),
        (
            r#"{"tool_id":5}"#,
            "Failed to deserialize the JSON body into the target type: tool_id: invalid type: integer `5`, expected a string at line 1 column 12",
        ),
        // A lease names no target: its own is the only one it reaches.
        (
            r#"{"tool_id":"hub.get_status","target_id":"hub:test-beta"}"#,
            "Failed to deserialize the JSON body into the target type: target_id: unknown field `target_id`, expected `tool_id` or `arguments` at line 1 column 39",
        ),
    ] {
        rest_error(
            &post(&dev, json_ct, body.into()).await,
            400,
            "invalid_arguments",
            message,
        );
    }

    // Bearers: forged, the admin token on the call path, a lease on operator endpoints.
    let forged = format!("mcpl_{}", "A".repeat(43));
    rest_error(
        &post(&forged, json_ct, r#"{"tool_id":"sdk.get_metadata"}"#.into()).await,
        401,
        "unauthenticated",
        "missing, unknown, expired or revoked bearer",
    );
    rest_error(
        &post(
            &root.admin_token(),
            json_ct,
            r#"{"tool_id":"sdk.get_metadata"}"#.into(),
        )
        .await,
        403,
        "forbidden",
        "calls need a session lease bearer, not the admin token",
    );
    let beta_read = root.bearer("hub:test-beta", "InfraOpsRead").await;
    for path in [
        "/v1/root/hubs/hub:test-alpha/read",
        "/v1/root/hubs/hub:test-alpha/skills/infra_access_skill/disable",
    ] {
        let res = root
            .post_as(&beta_read, path, &json!({"tool_id": "hub.get_status"}))
            .await;
        rest_error(
            &json_of(res).await,
            403,
            "forbidden",
            "this endpoint needs the admin token",
        );
    }

    // Reached policy: unknown tool, arguments off the schema (one naming another target).
    rest_error(
        &root.call(&dev, "sdk.launch", json!({})).await,
        404,
        "unknown_tool",
        "no tool `sdk.launch`",
    );
    reached_policy += 1;
    for (tool, bearer, args, error) in [
        (
            "sdk.get_schema",
            &dev,
            json!({"name": 42}),
            "/name: 42 is not of type \"string\"",
        ),
        (
            "sdk.get_schema",
            &dev,
            json!([1]),
            "/: [1] is not of type \"object\"",
        ),
        (
            "hub.get_status",
            &beta_read,
            json!({"target_id": "hub:test-alpha"}),
            "/: Additional properties are not allowed ('target_id' was unexpected)",
        ),
    ] {
        let got = root.call(bearer, tool, args).await;
        rest_error(
            &got,
            400,
            "invalid_arguments",
            &format!("arguments do not match the input schema of `{tool}`"),
        );
        assert_eq!(got.1["error"]["details"]["errors"], json!([error]));
        reached_policy += 1;
    }

    // Confirmation tokens: bound to lease, tool and target; single use; never guessable.
    let alpha_ctl = root.bearer("hub:test-alpha", "InfraOpsControl").await;
    let beta_ctl = root.bearer("hub:test-beta", "InfraOpsControl").await;
    let preview = async || {
        let (s, b) = root
            .call(
                &alpha_ctl,
                "hub.run_allowed_tests",
                json!({"name": "smoke"}),
            )
            .await;
        assert_eq!(s, 200, "{b}");
        b["result"]["confirmation_token"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let execute = |bearer: &str, tool: &str, token: &str, key: &str| {
        let mut args = match tool {
            "hub.run_allowed_tests" => json!({"name": "smoke"}),
            _ => json!({"capability_profile": "InfraOpsRead", "ttl_sec": 60}),
        };
        args["phase"] = json!("execute");
        args["confirmation_token"] = json!(token);
        args["idempotency_key"] = json!(key);
        let (bearer, tool) = (bearer.to_string(), tool.to_string());
        let root = &root;
        async move { root.call(&bearer, &tool, args).await }
    };
    let other_binding = "the confirmation token was issued for another lease, tool or target";
    let used = "the confirmation token is unknown or was already used; preview again";
    // Previewed on alpha for X, presented on beta for X: refused, and spent.
    let t1 = preview().await;
    rest_error(
        &execute(&beta_ctl, "hub.run_allowed_tests", &t1, "k1").await,
        428,
        "confirmation_required",
        other_binding,
    );
    rest_error(
        &execute(&alpha_ctl, "hub.run_allowed_tests", &t1, "k1").await,
        428,
        "confirmation_required",
        used,
    );
    // Previewed on alpha for X, presented on alpha for Y.
    let t2 = preview().await;
    rest_error(
        &execute(&alpha_ctl, "hub.issue_access_token", &t2, "k2").await,
        428,
        "confirmation_required",
        other_binding,
    );
    // Forged, then the real thing once, then the same token replayed under a new key.
    rest_error(
        &execute(
            &alpha_ctl,
            "hub.run_allowed_tests",
            &format!("mcpc_{}", "A".repeat(43)),
            "k3",
        )
        .await,
        428,
        "confirmation_required",
        used,
    );
    let t3 = preview().await;
    let (s, b) = execute(&alpha_ctl, "hub.run_allowed_tests", &t3, "k4").await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["result"]["replay"], false);
    rest_error(
        &execute(&alpha_ctl, "hub.run_allowed_tests", &t3, "k5").await,
        428,
        "confirmation_required",
        used,
    );
    // 3 previews, 6 executes; only one ran, on alpha.
    reached_policy += 9;
    assert_eq!((runs(&alpha_runs), runs(&beta_runs)), (1, 0));

    // Still serving, without an Accept header (REST needs none), on both targets.
    let res = root
        .http
        .post(&call_url)
        .bearer_auth(&dev)
        .json(&json!({"tool_id": "sdk.get_metadata"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let (s, b) = root.call(&beta_read, "hub.get_status", json!({})).await;
    assert_eq!(s, 200, "{b}");
    reached_policy += 2;
    assert_audit_count(&root, reached_policy).await;
    alpha.stop().await;
    beta.stop().await;
    root.stop().await;
}

// ---- operator actions ------------------------------------------------------------------------

/// Bad input at the operator endpoints (issue 22): each refusal has its precise status, code
/// and message, and is one audit event naming the operator, whose id the answer carries and
/// whose error is the one answered. A bearer that is no operator's is refused before any
/// action (401, no event, like a lease bearer's). Nothing is lost: the actions that were
/// refused changed nothing, the chain verifies, the daemon serves.
#[tokio::test]
async fn operator_endpoint_battery() {
    let root = TestRoot::start().await.unwrap();
    let hub = root.start_hub("hub:test-alpha", "").await.unwrap();
    let (lease, token) = root.lease("hub:test-alpha", "InfraOpsRead").await;
    let ada = root
        .admin_post("/v1/root/operators", json!({"name": "ada"}))
        .await["token"]
        .as_str()
        .unwrap()
        .to_owned();
    root.admin_post("/v1/root/operators/ada/revoke", json!({}))
        .await;
    let admin_events = async || {
        let v = root.trail("actor=operator:admin&limit=1000").await;
        v.len()
    };
    let before = admin_events().await;
    let name_rule = "name must be 1 to 64 of [a-z0-9._-], starting with a letter or digit";
    let run_profile = format!("/v1/root/mcp/sessions/{lease}/run-profile");
    let cases: Vec<(String, Value, u16, &str, String)> = vec![
        // Skill commands.
        (
            "/v1/root/hubs/hub:test-alpha/skills/infra_access_skill/explode".into(),
            json!({}),
            400,
            "invalid_arguments",
            "command must be install, enable, disable, uninstall or status, not `explode`".into(),
        ),
        (
            "/v1/root/hubs/hub:test-alpha/skills/other_skill/disable".into(),
            json!({}),
            404,
            "not_found",
            "no skill `other_skill`: root governs `infra_access_skill`".into(),
        ),
        (
            "/v1/root/hubs/hub:nope/skills/infra_access_skill/disable".into(),
            json!({}),
            404,
            "not_found",
            "target `hub:nope` is not enrolled".into(),
        ),
        // Operators: names, the bootstrap operator, reuse, unknown.
        (
            "/v1/root/operators".into(),
            json!({"name": ""}),
            400,
            "invalid_arguments",
            name_rule.into(),
        ),
        (
            "/v1/root/operators".into(),
            json!({"name": "a b"}),
            400,
            "invalid_arguments",
            name_rule.into(),
        ),
        (
            "/v1/root/operators".into(),
            json!({"name": "x".repeat(65)}),
            400,
            "invalid_arguments",
            name_rule.into(),
        ),
        (
            "/v1/root/operators".into(),
            json!({"name": "admin"}),
            409,
            "conflict",
            "`admin` is the bootstrap operator (the admin token file)".into(),
        ),
        (
            "/v1/root/operators".into(),
            json!({"name": "ada"}),
            409,
            "conflict",
            "an operator named `ada` exists or existed; names are never reused".into(),
        ),
        (
            "/v1/root/operators/nobody/revoke".into(),
            json!({}),
            404,
            "not_found",
            "no active operator `nobody`".into(),
        ),
        (
            "/v1/root/operators/admin/revoke".into(),
            json!({}),
            409,
            "conflict",
            "`admin` is the bootstrap operator: replace the admin token file to change it".into(),
        ),
        // Leases and run profiles.
        (
            "/v1/root/mcp/sessions".into(),
            json!({"target_id": "hub:test-alpha", "capability_profile": "InfraOpsRead", "ttl_sec": 0}),
            400,
            "invalid_arguments",
            "ttl_sec must be between 1 and 2592000".into(),
        ),
        (
            "/v1/root/mcp/sessions/nope/rotate".into(),
            json!({}),
            404,
            "not_found",
            "no lease `nope`".into(),
        ),
        (
            "/v1/root/mcp/sessions/nope/revoke".into(),
            json!({}),
            404,
            "not_found",
            "no lease `nope`".into(),
        ),
        (
            run_profile.clone(),
            json!({"ttl_sec": 601}),
            400,
            "invalid_arguments",
            "ttl_sec must be between 1 and 600".into(),
        ),
        (
            run_profile.clone(),
            json!({"tools": ["hub.get_status", "hub.deploy_ref"]}),
            400,
            "invalid_arguments",
            "tools must name tools this lease may call now; not: hub.deploy_ref".into(),
        ),
        (
            "/v1/root/mcp/sessions/nope/run-profile".into(),
            json!({}),
            404,
            "not_found",
            "no lease `nope` visible to this bearer".into(),
        ),
        // Targets, approvals, descriptors.
        (
            "/v1/root/hubs".into(),
            json!({"target_id": "hub:test-alpha", "environment": "test", "subnet_id": "subnet-a"}),
            409,
            "conflict",
            "target `hub:test-alpha` is already enrolled".into(),
        ),
        (
            "/v1/root/hubs".into(),
            json!({"target_id": "bad id", "environment": "test"}),
            400,
            "invalid_arguments",
            "target_id and environment must be 1..200 characters of [A-Za-z0-9._:-]".into(),
        ),
        (
            "/v1/root/hubs/hub:nope/rotate-key".into(),
            json!({}),
            404,
            "not_found",
            "target `hub:nope` is not enrolled".into(),
        ),
        (
            "/v1/root/mcp/approvals/nope/maybe".into(),
            json!({}),
            400,
            "invalid_arguments",
            "decision must be approve or reject, not `maybe`".into(),
        ),
        (
            "/v1/root/mcp/approvals/nope/approve".into(),
            json!({}),
            404,
            "not_found",
            "no approval `nope`".into(),
        ),
    ];
    let refused = cases.len();
    for (path, body, status, code, message) in cases {
        let res = root.post_as(root.admin_token(), &path, &body).await;
        let got = json_of(res).await;
        rest_error(&got, status, code, &message);
        let id = got.1["event_id"]
            .as_str()
            .unwrap_or_else(|| panic!("{path}: the refusal names no event: {}", got.1));
        let event = root.audit_event(id).await;
        let event = event.get("event").unwrap_or(&event);
        assert_eq!(event["status"], "error", "{path}: {event}");
        assert_eq!(event["error"]["code"], code, "{path}: {event}");
        assert_eq!(
            event["error"]["message"],
            message.as_str(),
            "{path}: {event}"
        );
        assert_eq!(event["surface"], "admin", "{path}: {event}");
    }
    assert_eq!(
        admin_events().await - before,
        refused,
        "one event per refusal"
    );

    // A revoked operator's credential and a lease bearer are no operator's: refused before
    // any action, no event.
    for bearer in [&ada, &token] {
        let res = root
            .post_as(bearer, "/v1/root/operators", &json!({"name": "eve"}))
            .await;
        let status = res.status().as_u16();
        assert!(status == 401 || status == 403, "{status}");
    }
    assert_eq!(admin_events().await - before, refused);

    // Nothing refused changed anything; the lease and the target serve as before.
    let operators = root.admin_get("/v1/root/operators").await;
    let names: Vec<&str> = items(&operators["operators"])
        .iter()
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    assert!(
        !names.contains(&"eve") && !names.contains(&"x"),
        "{names:?}"
    );
    let (s, b) = root.call(&token, "hub.get_status", json!({})).await;
    assert_eq!(s, 200, "{b}");
    let v = root.admin_get("/v1/root/mcp/audit/verify").await;
    assert_eq!(v["ok"], true, "{v}");
    hub.stop().await;
    root.stop().await;
}

// ---- the hub WebSocket ----------------------------------------------------------------------

pub mod hub_door {
    use std::time::Duration;

    use futures::{SinkExt, StreamExt};
    use mcp_shared::protocol::{self, Envelope, HubToRoot, MAX_FRAME_BYTES, RootToHub};
    use mcp_shared::target::{
        ManagedTargetDescriptor, OperationalSurface, TargetPolicy, TargetStatus, Transport,
        WriteScope,
    };
    use serde_json::Value;
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::protocol::frame::Frame;
    use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};

    pub type Ws = tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >;

    /// A hub door connection opened with `token` (root checks it before the upgrade).
    pub async fn dial(base_url: &str, token: &str) -> Ws {
        mcp_tests::dial_hub_door(base_url, Some(token))
            .await
            .unwrap()
    }

    pub fn descriptor(target: &str, environment: &str) -> ManagedTargetDescriptor {
        ManagedTargetDescriptor {
            target_id: target.into(),
            kind: "hub".into(),
            environment: environment.into(),
            status: TargetStatus::Online,
            transport: Transport {
                channel: "ws".into(),
            },
            operational_surface: OperationalSurface {
                published_by: "infra_access_skill".into(),
                enabled: true,
                capabilities: vec!["hub.get_status".into()],
            },
            policy: TargetPolicy {
                write_scope: WriteScope::TestOnly,
            },
        }
    }

    pub fn text(id: &str, body: &HubToRoot) -> Message {
        let env = Envelope {
            v: protocol::PROTOCOL_VERSION,
            id: id.into(),
            in_reply_to: None,
            body,
        };
        Message::Text(serde_json::to_string(&env).unwrap().into())
    }

    pub fn hello(token: &str, target: &str, environment: &str) -> Message {
        text(
            "hello-1",
            &HubToRoot::Hello {
                protocol_version: protocol::PROTOCOL_VERSION,
                token: token.into(),
                descriptor: descriptor(target, environment),
                skills: vec![],
                features: Vec::new(),
            },
        )
    }

    /// A text frame whose payload is not UTF-8 (tungstenite's `Message::Text` cannot carry one).
    pub fn not_utf8() -> Message {
        Message::Frame(Frame::message(
            vec![b'{', 0xff, 0xfe, b'}'],
            OpCode::Data(Data::Text),
            true,
        ))
    }

    pub fn oversized() -> Message {
        Message::Text("x".repeat(MAX_FRAME_BYTES + 1).into())
    }

    /// The next frame from root that is not a heartbeat, as `(body, in_reply_to)`; a close
    /// frame as `Err((code, reason))`.
    pub async fn next(ws: &mut Ws) -> Result<(RootToHub, Option<String>), (u16, String)> {
        loop {
            let msg = tokio::time::timeout(Duration::from_secs(10), ws.next())
                .await
                .expect("root answers within 10 s");
            match msg {
                Some(Ok(Message::Text(t))) => {
                    let env = protocol::decode::<RootToHub>(t.as_str()).unwrap();
                    if env.body != RootToHub::Heartbeat {
                        return Ok((env.body, env.in_reply_to));
                    }
                }
                Some(Ok(Message::Close(Some(c)))) => {
                    return Err((u16::from(c.code), c.reason.to_string()));
                }
                Some(Ok(Message::Close(None))) => return Err((1005, String::new())),
                Some(Ok(_)) => {}
                Some(Err(e)) => panic!("connection failed instead of closing: {e}"),
                None => panic!("connection dropped without a close frame"),
            }
        }
    }

    /// Root's refusal before `welcome`: a `protocol_error` saying why, then a close frame with
    /// 1008 and the same reason.
    pub async fn refused(ws: &mut Ws, why: &str) {
        match next(ws).await {
            Ok((RootToHub::ProtocolError { message }, _)) => assert_eq!(message, why),
            other => panic!("expected a protocol error, got {other:?}"),
        }
        assert_eq!(next(ws).await.unwrap_err(), (1008, why.to_string()));
    }

    /// The next frame is a `protocol_error` with `message` (and `in_reply_to`, when given).
    pub async fn protocol_error(ws: &mut Ws, message: &str, in_reply_to: Option<&str>) {
        match next(ws).await {
            Ok((RootToHub::ProtocolError { message: m }, reply)) => {
                assert_eq!(m, message);
                if in_reply_to.is_some() {
                    assert_eq!(reply.as_deref(), in_reply_to);
                }
            }
            other => panic!("expected protocol error `{message}`, got {other:?}"),
        }
    }

    pub fn malformed(text: &str) -> String {
        protocol::decode::<HubToRoot>(text).unwrap_err().to_string()
    }

    pub fn raw(v: Value) -> Message {
        Message::Text(v.to_string().into())
    }

    pub fn result_error(call_id: &str, message: &str) -> HubToRoot {
        HubToRoot::Result {
            call_id: call_id.into(),
            outcome: protocol::CallOutcome::Error {
                adapter: Some("stand_in.status".into()),
                error: mcp_shared::ToolError::new(
                    mcp_shared::error::ErrorCode::AdapterFailed,
                    message,
                ),
            },
        }
    }

    pub async fn send(ws: &mut Ws, m: Message) {
        ws.send(m).await.unwrap();
    }
}

#[tokio::test]
async fn hub_websocket_battery() {
    use hub_door::*;
    use mcp_shared::protocol::{HubToRoot, MAX_FRAME_BYTES, RootToHub};
    use tokio_tungstenite::tungstenite::Message;

    let root = TestRoot::start().await.unwrap();
    let base = root.handle().base_url();
    // A real hub keeps working through all of this.
    let alpha = root.start_hub("hub:test-alpha", "").await.unwrap();
    let beta_token = root.enroll("hub:test-beta", "test").await.unwrap();
    let mut reached_policy = 0u64;
    let too_big = format!(
        "Space limit exceeded: Message too long: {} > {MAX_FRAME_BYTES}",
        MAX_FRAME_BYTES + 1
    );

    // Before the upgrade: no hub token, an unknown one, another scheme. 401 on plain HTTP,
    // nothing upgraded (root holds no socket for an anonymous client).
    for (auth, why) in [
        (None, "a hub connects with its token in the upgrade request"),
        (
            Some(format!("Bearer mcph_{}", "B".repeat(43))),
            "unknown hub token",
        ),
        (
            Some(format!("Basic {beta_token}")),
            "a hub connects with its token",
        ),
    ] {
        let mut req =
            mcp_tests::websocket_upgrade(root.http.get(root.url("/v1/root/hubs/connect")));
        if let Some(a) = auth {
            req = req.header("authorization", a);
        }
        let res = req.send().await.unwrap();
        assert_eq!(res.status(), 401);
        assert!(res.headers().contains_key("www-authenticate"));
        let b: Value = res.json().await.unwrap();
        assert_eq!(b["error"]["code"], "unauthenticated", "{b}");
        assert!(error_message(&b).starts_with(why), "{b}");
    }

    // Before `welcome`: every refusal names its reason, in a protocol error and the close.
    for (first, why) in [
        (
            Message::Binary(vec![0u8, 159, 146, 150].into()),
            "the first frame must be a text hello".to_string(),
        ),
        (
            Message::Text("{not a frame".into()),
            malformed("{not a frame"),
        ),
        (
            text("h", &HubToRoot::Heartbeat),
            "the first frame must be hello".to_string(),
        ),
        (
            raw(json!({"v": 2, "id": "h", "body": {"type": "heartbeat"}})),
            "unsupported protocol version 2 (this side speaks 1)".to_string(),
        ),
        (
            text(
                "h",
                &HubToRoot::Hello {
                    protocol_version: 2,
                    token: beta_token.clone(),
                    descriptor: descriptor("hub:test-beta", "test"),
                    skills: vec![],
                    features: Vec::new(),
                },
            ),
            "unsupported protocol version 2".to_string(),
        ),
        (
            hello(&format!("mcph_{}", "A".repeat(43)), "hub:test-beta", "test"),
            "the hello's token is not the one this connection was opened with".to_string(),
        ),
        // Beta's token claiming alpha's identity while alpha is connected.
        (
            hello(&beta_token, "hub:test-alpha", "test"),
            "this token is enrolled for `hub:test-beta`, not `hub:test-alpha`".to_string(),
        ),
        (
            hello(&beta_token, "hub:test-beta", "production"),
            "`hub:test-beta` is enrolled in environment `test`, not `production`".to_string(),
        ),
    ] {
        let mut ws = dial(&base, &beta_token).await;
        send(&mut ws, first).await;
        refused(&mut ws, &why).await;
    }
    // Frames root cannot read at all: closed with their RFC 6455 code and the reason.
    let mut ws = dial(&base, &beta_token).await;
    send(&mut ws, oversized()).await;
    assert_eq!(next(&mut ws).await.unwrap_err(), (1009, too_big.clone()));
    let mut ws = dial(&base, &beta_token).await;
    send(&mut ws, not_utf8()).await;
    let (code, reason) = next(&mut ws).await.unwrap_err();
    assert_eq!(code, 1007, "{reason}");
    assert!(reason.starts_with("UTF-8 encoding error"), "{reason}");
    assert!(alpha.handle().is_connected());

    // After `welcome`: a hub of its own (beta, enrolled) sending junk.
    let mut ws = dial(&base, &beta_token).await;
    send(&mut ws, hello(&beta_token, "hub:test-beta", "test")).await;
    match next(&mut ws).await {
        Ok((RootToHub::Welcome { target_id, .. }, reply)) => {
            assert_eq!(target_id, "hub:test-beta");
            assert_eq!(reply.as_deref(), Some("hello-1"));
        }
        other => panic!("expected welcome, got {other:?}"),
    }
    send(&mut ws, Message::Text("{not a frame".into())).await;
    protocol_error(&mut ws, &malformed("{not a frame"), None).await;
    send(&mut ws, Message::Binary(vec![0xde, 0xad].into())).await;
    protocol_error(&mut ws, "binary frames are not part of the protocol", None).await;
    let unknown = json!({"v": 1, "id": "u", "body": {"type": "launch_missiles"}}).to_string();
    send(&mut ws, Message::Text(unknown.clone().into())).await;
    protocol_error(&mut ws, &malformed(&unknown), None).await;
    send(&mut ws, hello(&beta_token, "hub:test-beta", "test")).await;
    protocol_error(&mut ws, "hello after welcome", None).await;
    // Claims beyond the enrolment: another target's surface, another environment.
    let surface = |target: &str, env: &str| HubToRoot::SurfaceChanged {
        descriptor: descriptor(target, env),
        skills: vec![],
    };
    send(&mut ws, text("s1", &surface("hub:test-alpha", "test"))).await;
    protocol_error(
        &mut ws,
        "surface_changed names `hub:test-alpha`; this connection is `hub:test-beta`",
        Some("s1"),
    )
    .await;
    send(&mut ws, text("s2", &surface("hub:test-beta", "production"))).await;
    protocol_error(
        &mut ws,
        "surface_changed claims environment `production`; `hub:test-beta` is enrolled in `test`",
        Some("s2"),
    )
    .await;
    let targets = root.admin_get("/v1/root/hubs").await;
    for t in items(&targets["targets"]) {
        assert_eq!(t["descriptor"]["target_id"], t["target_id"], "{t}");
        assert_eq!(t["descriptor"]["environment"], "test", "{t}");
        assert_eq!(t["status"], "online", "{t}");
    }

    // Results: one for a call never sent, then the real one twice (a replay). The caller gets
    // the first; the others are dropped and the connection stays up.
    let beta_lease = root.bearer("hub:test-beta", "InfraOpsRead").await;
    for round in 0..2 {
        let pending = {
            let (root_url, lease) = (root.url("/v1/root/mcp/call"), beta_lease.clone());
            let http = root.http.clone();
            tokio::spawn(async move {
                json_of(
                    http.post(root_url)
                        .bearer_auth(lease)
                        .json(&json!({"tool_id": "hub.get_status"}))
                        .send()
                        .await
                        .unwrap(),
                )
                .await
            })
        };
        let call_id = match next(&mut ws).await {
            Ok((RootToHub::Call(c), _)) => {
                assert_eq!(c.tool_id, "hub.get_status");
                c.call_id
            }
            other => panic!("expected a call, got {other:?}"),
        };
        send(&mut ws, text("r0", &result_error("no-such-call", "forged"))).await;
        let answer = format!("stand-in failure {round}");
        send(&mut ws, text("r1", &result_error(&call_id, &answer))).await;
        send(&mut ws, text("r2", &result_error(&call_id, "replayed"))).await;
        rest_error(&pending.await.unwrap(), 502, "adapter_failed", &answer);
        reached_policy += 1;
    }
    // A frame over the limit ends the connection with 1009 and the reason; beta goes offline.
    send(&mut ws, oversized()).await;
    assert_eq!(next(&mut ws).await.unwrap_err(), (1009, too_big));
    let (s, b) = root.call(&beta_lease, "hub.get_status", json!({})).await;
    assert_eq!(refusal(s, &b), (503, "target_offline"), "{b}");
    reached_policy += 1;
    // So does a text frame that is not UTF-8, on a fresh connection.
    let mut ws = dial(&base, &beta_token).await;
    send(&mut ws, hello(&beta_token, "hub:test-beta", "test")).await;
    assert!(matches!(
        next(&mut ws).await,
        Ok((RootToHub::Welcome { .. }, _))
    ));
    send(&mut ws, not_utf8()).await;
    assert_eq!(next(&mut ws).await.unwrap_err().0, 1007);

    // The real hub was never displaced or disturbed.
    assert!(alpha.handle().is_connected());
    let alpha_lease = root.bearer("hub:test-alpha", "InfraOpsRead").await;
    let (s, b) = root.call(&alpha_lease, "hub.get_status", json!({})).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["result"]["target_id"], "hub:test-alpha", "{b}");
    reached_policy += 1;
    assert_audit_count(&root, reached_policy).await;
    alpha.stop().await;
    root.stop().await;
}

// ---- the hub's door for root's calls --------------------------------------------------------

/// What the hub re-checks beyond `hub_enforcement.rs`: signatures that are not hex or empty, a
/// call id replayed under a fresh signature over other arguments, envelopes of another
/// version, binary and malformed frames, a cancel for a call it never got, a command for a
/// skill it does not have, a second welcome; then frames it cannot read at all (over the
/// limit, not UTF-8), after which it drops the connection and dials again. Root here is a
/// stand-in speaking the real protocol over a real WebSocket.
#[tokio::test]
async fn the_hub_rechecks_what_root_sends() {
    use futures::{SinkExt, StreamExt};
    use mcp_shared::protocol::{
        self, CallOutcome, CallRequest, Envelope, HubToRoot, PROTOCOL_VERSION, RootToHub,
        SkillState,
    };
    use std::collections::BTreeMap;
    use std::time::Duration;
    use tokio_tungstenite::tungstenite::Message;

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let token = "mcph_standin-token-for-the-bad-input-battery";
    let key = protocol::signing_key(token);
    let frame = |id: &str, body: RootToHub| {
        let env = Envelope {
            v: PROTOCOL_VERSION,
            id: id.into(),
            in_reply_to: None,
            body,
        };
        Message::Text(serde_json::to_string(&env).unwrap().into())
    };
    // Welcome as JSON: the fields every protocol revision of this build accepts.
    let welcome = |hello_id: &str| {
        hub_door::raw(
            json!({"v": 1, "id": "welcome", "in_reply_to": hello_id, "body": {
            "type": "welcome", "target_id": "hub:test-alpha", "heartbeat_interval_ms": 60_000}}),
        )
    };
    async fn hello_of(ws: &mut hub_door::Ws) -> String {
        let msg = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .expect("hello within 10 s")
            .unwrap()
            .unwrap();
        let Message::Text(t) = msg else {
            panic!("expected hello, got {msg:?}")
        };
        let env = protocol::decode::<HubToRoot>(t.as_str()).unwrap();
        assert!(matches!(env.body, HubToRoot::Hello { .. }), "{env:?}");
        env.id
    }
    let accept = async |listener: &tokio::net::TcpListener| {
        let (tcp, _) = tokio::time::timeout(Duration::from_secs(10), listener.accept())
            .await
            .expect("the hub dials within 10 s")
            .unwrap();
        tokio_tungstenite::accept_async(tokio_tungstenite::MaybeTlsStream::Plain(tcp))
            .await
            .unwrap()
    };

    let hub = tokio::spawn({
        let url = url.clone();
        async move { mcp_tests::TestHub::start(&url, "hub:test-alpha", token, "").await }
    });
    let mut ws = accept(&listener).await;
    let hello_id = hello_of(&mut ws).await;
    ws.send(welcome(&hello_id)).await.unwrap();
    let hub = hub.await.unwrap().unwrap();

    let now = mcp_shared::time::unix_ms(mcp_shared::time::now());
    let call = |id: &str, arguments: Value| CallRequest {
        call_id: id.into(),
        trace_id: "trace".into(),
        session_id: "lease".into(),
        tool_id: "hub.get_status".into(),
        capability: "infra.read.status".into(),
        body: mcp_shared::protocol::CallBody {
            arguments,
            dry_run: false,
            idempotency_key: None,
            confirmed_effect: None,
        },
        expires_at_ms: now + 30_000,
        traceparent: None,
        signature: String::new(),
    };
    let signed = |id: &str, arguments: Value| {
        let mut c = call(id, arguments);
        c.sign(&key);
        c
    };
    let mut not_hex = call("c-1", json!({}));
    not_hex.signature = "zz".into();
    let empty = call("c-2", json!({}));
    let malformed_call = json!({"v": 1, "id": "bad", "body": {"type": "call", "call_id": "c-9"}});
    let malformed_text = malformed_call.to_string();
    for m in [
        frame("f1", RootToHub::Call(not_hex)),
        frame("f2", RootToHub::Call(empty)),
        frame("f3", RootToHub::Call(signed("c-3", json!({})))),
        // The same id, freshly signed over other arguments: still a replay.
        frame("f4", RootToHub::Call(signed("c-3", json!({"other": true})))),
        hub_door::raw(json!({"v": 2, "id": "v2", "body": {"type": "heartbeat"}})),
        Message::Binary(vec![1, 2, 3].into()),
        hub_door::raw(malformed_call),
        frame(
            "cancel",
            RootToHub::Cancel {
                call_id: "never-sent".into(),
            },
        ),
        frame(
            "sc",
            RootToHub::SkillCommand {
                skill: "launcher".into(),
                command: protocol::SkillCommand::Enable,
            },
        ),
        welcome("again"),
        frame("f5", RootToHub::Call(signed("c-4", json!({})))),
    ] {
        ws.send(m).await.unwrap();
    }

    let mut results: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut errors: BTreeMap<Option<String>, String> = BTreeMap::new();
    let mut skill_state = None;
    while results.values().map(Vec::len).sum::<usize>() < 5
        || errors.len() < 3
        || skill_state.is_none()
    {
        let msg = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .expect("the hub answers within 10 s")
            .unwrap()
            .unwrap();
        let Message::Text(t) = msg else { continue };
        let env = protocol::decode::<HubToRoot>(t.as_str()).unwrap();
        match env.body {
            HubToRoot::Result { call_id, outcome } => {
                let code = match outcome {
                    CallOutcome::Ok { .. } => "ok".to_string(),
                    CallOutcome::Error { error, .. } => error.code.as_str().to_string(),
                };
                results.entry(call_id).or_default().push(code);
            }
            HubToRoot::ProtocolError { message } => {
                errors.insert(env.in_reply_to, message);
            }
            HubToRoot::SkillState(s) => skill_state = Some((env.in_reply_to, s)),
            HubToRoot::Heartbeat => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    for c in ["c-1", "c-2"] {
        assert_eq!(results[c], ["signature_invalid"], "{c}");
    }
    let mut c3 = results["c-3"].clone();
    c3.sort();
    assert_eq!(c3, ["ok", "replay_rejected"]);
    assert_eq!(results["c-4"], ["ok"]);
    assert_eq!(
        errors[&Some("v2".to_string())],
        "unsupported protocol version 2 (this side speaks 1)"
    );
    assert_eq!(errors[&None], "binary frames are not part of the protocol");
    assert_eq!(
        errors[&Some("bad".to_string())],
        protocol::decode::<RootToHub>(&malformed_text)
            .unwrap_err()
            .to_string()
    );
    assert_eq!(
        skill_state,
        Some((
            Some("sc".to_string()),
            SkillState {
                skill: "launcher".into(),
                installed: false,
                enabled: false,
                published: vec![],
                owner_disabled: false,
                version: None,
                adapters: vec![],
            }
        ))
    );

    // Frames the hub cannot read end the connection; it dials again, and keeps doing so.
    for unreadable in [hub_door::oversized(), hub_door::not_utf8()] {
        ws.send(unreadable).await.unwrap();
        let mut next = accept(&listener).await;
        let id = hello_of(&mut next).await;
        next.send(welcome(&id)).await.unwrap();
        ws = next;
    }
    let wait = tokio::time::Instant::now() + Duration::from_secs(10);
    while !hub.handle().is_connected() {
        assert!(
            tokio::time::Instant::now() < wait,
            "the hub is welcomed again"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    ws.send(frame("f6", RootToHub::Call(signed("c-5", json!({})))))
        .await
        .unwrap();
    loop {
        let msg = mcp_tests::next_frame(&mut ws, Duration::from_secs(10)).await;
        let Message::Text(t) = msg else { continue };
        if let HubToRoot::Result { call_id, outcome } =
            protocol::decode::<HubToRoot>(t.as_str()).unwrap().body
        {
            assert_eq!(call_id, "c-5");
            assert!(matches!(outcome, CallOutcome::Ok { .. }), "{outcome:?}");
            break;
        }
    }
    hub.stop().await;
}

/// The delegation graph's doors: a chain longer than root keeps, a malformed operator
/// revocation, an unknown lease's chain, a child asked of an ended parent. Each refusal is
/// precise and audited, and nothing is half done.
#[tokio::test]
async fn delegation_battery() {
    let root = TestRoot::start().await.unwrap();
    let hub = root.start_hub("hub:chain", "").await.unwrap();
    let mint = async |bearer: &str, ttl: u64, key: &str| {
        root.write(
            bearer,
            "hub.issue_access_token",
            json!({"capability_profile": "InfraOpsControl", "ttl_sec": ttl}),
            key,
        )
        .await
        .unwrap()
    };
    let mut calls = 0;
    // A chain of eight leases (the top and seven handed on) is as long as root keeps.
    let (_, mut bearer) = root.lease_for("hub:chain", "InfraOpsControl", 3600).await;
    for depth in 1..8u64 {
        let (s, b) = mint(&bearer, 3000 - depth * 100, &format!("m{depth}")).await;
        calls += 2;
        assert_eq!(s, 200, "depth {depth}: {b}");
        bearer = b["result"]["result"]["token"].as_str().unwrap().to_owned();
    }
    let got = mint(&bearer, 60, "m8").await;
    calls += 2;
    let (s, b) = &got;
    assert_eq!(*s, 403, "{b}");
    assert_eq!(b["error"]["code"], "capability_not_granted", "{b}");
    assert!(
        error_message(b)
            .ends_with("ends a chain of 8 leases, as long as handed-on authority may go"),
        "{b}"
    );
    // The deepest lease still works; nothing was issued for the refused ask.
    let (s, _) = root.call(&bearer, "hub.get_status", json!({})).await;
    calls += 1;
    assert_eq!(s, 200);

    // A revocation body that is not `{"cascade": bool}`: 400, audited, nothing revoked.
    root.admin_post("/v1/root/operators", json!({"name": "ops"}))
        .await;
    for body in [
        json!({"cascade": "yes"}),
        json!({"cascade": true, "extra": 1}),
        json!([]),
    ] {
        let res = root
            .post_as(root.admin_token(), "/v1/root/operators/ops/revoke", &body)
            .await;
        let status = res.status().as_u16();
        let v: Value = res.json().await.unwrap();
        assert_eq!(
            refusal(status, &v),
            (400, "invalid_arguments"),
            "{body}: {v}"
        );
        assert!(v["event_id"].is_string(), "the refusal is audited: {v}");
    }
    let ops = root.admin_get("/v1/root/operators").await;
    let status = items(&ops["operators"])
        .iter()
        .find(|o| o["name"] == "ops")
        .map(|o| o["status"].clone());
    assert_eq!(status, Some(json!("active")));
    // Revoking an operator that does not exist, or again.
    let res = root
        .http
        .post(root.url("/v1/root/operators/nobody/revoke"))
        .bearer_auth(root.admin_token())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404);

    // The chain of an unknown lease.
    let res = root
        .get_as(
            root.admin_token(),
            "/v1/root/mcp/sessions/no-such-lease/delegation",
        )
        .await;
    let got = (res.status().as_u16(), res.json::<Value>().await.unwrap());
    rest_error(&got, 404, "not_found", "no lease `no-such-lease`");

    // A lease whose parent ended is no bearer: it mints nothing and leaves no event.
    let (parent_id, parent) = root.lease("hub:chain", "InfraOpsControl").await;
    let (s, b) = mint(&parent, 300, "p1").await;
    calls += 2;
    assert_eq!(s, 200, "{b}");
    let child = b["result"]["result"]["token"].as_str().unwrap().to_owned();
    root.on_lease(&parent_id, "revoke").await;
    let (s, b) = root
        .call(
            &child,
            "hub.issue_access_token",
            json!({"capability_profile": "InfraOpsRead", "ttl_sec": 60}),
        )
        .await;
    assert_eq!(s, 401, "{b}");
    assert!(b.get("event_id").is_none(), "{b}");
    assert_audit_count(&root, calls).await;
    hub.stop().await;
    root.stop().await;
}
