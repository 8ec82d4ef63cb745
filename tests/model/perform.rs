//! A step performed on the world, as operators and agents perform it, and its answer put in
//! the oracle's words (checking on the way that each answer's event names who acted).

use serde_json::{Value, json};

use crate::oracle::{Expect, Model};
use crate::steps::{READS, Step, TARGETS, TEMPLATE, Write};
use crate::world::{SignInAnswer, SignedIn, World};

/// Performs `step` on the world; what it came to, for the steps that answer.
pub fn perform(w: &mut World, m: &Model, step: &Step) -> Option<Expect> {
    match *step {
        Step::Lease {
            target,
            profile,
            by,
        } => {
            let (s, v) = w.operator_as(
                by,
                "/v1/root/mcp/sessions",
                json!({"target_id": TARGETS[target].id, "capability_profile": profile.0, "ttl_sec": 3600}),
            );
            Some(lease_created(w, by, s, &v, 0))
        }
        Step::Expired {
            target,
            profile,
            tool,
        } => {
            let (s, v) = w.operator(
                "/v1/root/mcp/sessions",
                json!({"target_id": TARGETS[target].id, "capability_profile": profile.0, "ttl_sec": 1}),
            );
            assert_eq!(
                lease_created(w, None, s, &v, 0),
                Expect::Ok,
                "a one-second lease: {v}"
            );
            std::thread::sleep(std::time::Duration::from_millis(1100));
            let lease = w.leases.len() - 1;
            let (s, v) = w.call(lease, tool.0, read_arguments(tool.0));
            Some(call_outcome(w, lease, s, &v))
        }
        Step::Revoke { lease, by } => {
            let path = format!("/v1/root/mcp/sessions/{}/revoke", w.leases[lease].0);
            let (s, v) = w.operator_as(by, &path, json!({}));
            Some(operator_outcome(w, by, s, &v))
        }
        Step::Rotate { lease, by } => {
            let path = format!("/v1/root/mcp/sessions/{}/rotate", w.leases[lease].0);
            let (s, v) = w.operator_as(by, &path, json!({}));
            if s == 200 {
                let depth = w.depths[lease];
                let seen = lease_created(w, by, s, &v, depth);
                if let Some(id) = v["session_id"].as_str() {
                    w.rotated_into.insert(id.to_owned());
                }
                return Some(seen);
            }
            Some(operator_outcome(w, by, s, &v))
        }
        Step::AddOperator { name, by } => {
            // Every operator of the model holds everything: roles are tested apart
            // (governance::roles); the model's subject is authority over leases.
            let body = json!({"name": format!("op{name}"), "roles": ["admin"], "profiles": ["*"]});
            let (s, v) = w.operator_as(by, "/v1/root/operators", body);
            let seen = operator_outcome(w, by, s, &v);
            if seen == Expect::Ok {
                let token = v["token"].as_str().expect("an operator's token");
                w.operators[name as usize] = Some(token.to_owned());
            }
            Some(seen)
        }
        Step::RevokeOperator { name, by, cascade } => {
            let path = format!("/v1/root/operators/op{name}/revoke");
            let (s, v) = w.operator_as(by, &path, json!({ "cascade": cascade }));
            Some(operator_outcome(w, by, s, &v))
        }
        Step::RunProfile { lease, by } => {
            let path = format!("/v1/root/mcp/sessions/{}/run-profile", w.leases[lease].0);
            let (s, v) = w.operator_as(by, &path, json!({}));
            let depth = w.depths[lease] + 1;
            Some(lease_created(w, by, s, &v, depth))
        }
        Step::SignIn {
            target,
            profile,
            by,
        } => Some(sign_in(w, by, target, profile.0)),
        Step::Refresh { grant } => Some(refresh(w, grant)),
        Step::OAuthRevoke { grant, refresh } => {
            let g = &w.grants[grant];
            let token = if refresh {
                g.refresh.clone()
            } else {
                w.leases[g.lease].1.clone()
            };
            let status = w.oauth_revoke(&g.client_id, &token);
            assert_eq!(status, 200, "RFC 7009: a revocation is answered 200");
            Some(Expect::Ok)
        }
        Step::FanOut { lease } => {
            let args = json!({"source": "subnet_active", "lines": 5});
            let (s, v) = w.call(lease, "hub.get_logs", args);
            let seen = call_outcome(w, lease, s, &v);
            if seen != Expect::Ok {
                return Some(seen);
            }
            Some(reached(&v["result"]))
        }
        Step::Destructive { lease } => {
            let (s, v) = w.call(lease, "hub.delete_deploy", json!({}));
            Some(call_outcome(w, lease, s, &v))
        }
        Step::Skill {
            target,
            command,
            by,
        } => {
            let path = format!(
                "/v1/root/hubs/{}/skills/infra_access_skill/{}",
                TARGETS[target].id,
                command.name()
            );
            let (s, v) = w.operator_as(by, &path, json!({}));
            let seen = operator_outcome(w, by, s, &v);
            w.settle(m);
            Some(seen)
        }
        Step::Cordon { target, on, by } => {
            let path = format!(
                "/v1/root/hubs/{}/lifecycle/{}",
                TARGETS[target].id,
                if on { "cordon" } else { "uncordon" }
            );
            let (s, v) = w.operator_as(by, &path, json!({}));
            let seen = operator_outcome(w, by, s, &v);
            w.settle(m);
            Some(seen)
        }
        Step::FleetRead { tool, by } => {
            let body = json!({
                "selector": "id=*",
                "tool_id": tool.0,
                "arguments": read_arguments(tool.0),
                "plan": { "max_concurrency": 4, "max_errors": "100%" },
            });
            let (s, v) = w.operator_as(by, "/v1/root/fleet/runs", body);
            let seen = operator_outcome(w, by, s, &v);
            if seen != Expect::Ok {
                return Some(seen);
            }
            Some(fleet_parts(
                w,
                v["run_id"].as_str().expect("a run id"),
                tool.0,
            ))
        }
        Step::AgentFleetRead {
            profile,
            tool,
            by,
            leaves,
        } => Some(agent_fleet_read(w, profile.0, tool.0, by, leaves)),
        Step::PublishInvalid { by } => {
            // A descriptor without any of the fields a descriptor needs.
            let body = json!({"descriptors": [{"descriptor_id": "model.invalid"}]});
            let (s, v) = w.operator_as(by, "/v1/root/mcp/descriptors", body);
            Some(operator_outcome(w, by, s, &v))
        }
        Step::Publish { by } => {
            let body = json!({"descriptors": descriptor_set()});
            let (s, v) = w.operator_as(by, "/v1/root/mcp/descriptors", body);
            Some(operator_outcome(w, by, s, &v))
        }
        Step::Enrol { target, by } => {
            let (s, v) = w.enrol_as(by, target);
            let seen = operator_outcome(w, by, s, &v);
            w.settle(m);
            Some(seen)
        }
        Step::RotateHubKey { target, by } => Some(rotate_hub_key(w, m, target, by)),
        Step::Decide {
            approval,
            approve,
            by,
        } => {
            let decision = if approve { "approve" } else { "reject" };
            let path = format!(
                "/v1/root/mcp/approvals/{}/{decision}",
                w.approvals[approval]
            );
            let (s, v) = w.operator_as(by, &path, json!({}));
            Some(operator_outcome(w, by, s, &v))
        }
        Step::Owner { target, on } => {
            w.owner_switch(target, on);
            w.settle(m);
            None
        }
        Step::StopHub { target } => {
            w.stop_hub(target);
            w.settle(m);
            None
        }
        Step::StartHub { target } => {
            w.start_hub(target);
            w.settle(m);
            None
        }
        Step::RestartRoot { replica } => {
            let n = w.replicas.len();
            w.restart(replica as usize % n);
            w.settle(m);
            None
        }
        Step::Read { lease, tool } => {
            let (s, v) = w.call(lease, tool.0, read_arguments(tool.0));
            Some(call_outcome(w, lease, s, &v))
        }
        Step::ReadSession { lease, session } => {
            let args = json!({"session_id": w.sessions[session]});
            let (s, v) = w.call(lease, "hub.memory.get_session", args);
            let seen = call_outcome(w, lease, s, &v);
            if seen != Expect::Ok {
                return Some(seen);
            }
            let args = json!({"artifact_id": w.artifact(session)});
            let (s, v) = w.call(lease, "hub.memory.get_artifact", args);
            Some(call_outcome(w, lease, s, &v))
        }
        Step::Preview { lease, write } => {
            let (s, v) = w.call(lease, write.tool(), w.arguments(write, lease));
            let seen = call_outcome(w, lease, s, &v);
            if seen == Expect::Ok {
                let token = v["result"]["confirmation_token"].as_str();
                w.confirmations
                    .push(token.expect("a preview's confirmation").to_owned());
            }
            Some(seen)
        }
        Step::Propose { lease } => Some(propose(w, lease)),
        Step::RevokeInFlight { lease } => Some(revoke_in_flight(w, m, lease)),
        Step::Execute {
            lease,
            write,
            confirmation,
            key,
        } => {
            let mut args = w.arguments(write, lease);
            args["phase"] = json!("execute");
            args["idempotency_key"] = json!(format!("k{key}"));
            if let Some(p) = confirmation {
                args["confirmation_token"] = json!(w.confirmations[p]);
            }
            let (s, v) = w.call(lease, write.tool(), args);
            Some(executed(w, lease, write, s, &v))
        }
        Step::Elicit {
            lease,
            write,
            key,
            accept,
        } => {
            let mut args = w.arguments(write, lease);
            args["phase"] = json!("execute");
            args["idempotency_key"] = json!(format!("k{key}"));
            let (s, v) = w.elicit_call(lease, write.tool(), args, accept);
            Some(executed(w, lease, write, s, &v))
        }
        Step::Race { lease, other, key } => Some(race(w, lease, other, key)),
    }
}

/// `Step::Race`: each caller's preview, then both executes sent at once.
fn race(w: &mut World, lease: usize, other: usize, key: u8) -> Expect {
    let write = Write::Tests;
    let mut seen = Vec::new();
    let mut calls = Vec::new();
    for l in [lease, other] {
        let (s, v) = w.call(l, write.tool(), w.arguments(write, l));
        let preview = call_outcome(w, l, s, &v);
        let mut args = w.arguments(write, l);
        args["phase"] = json!("execute");
        args["idempotency_key"] = json!(format!("k{key}"));
        // The race's own confirmations, never numbered for later steps (see the oracle).
        if preview == Expect::Ok {
            let token = v["result"]["confirmation_token"].as_str();
            args["confirmation_token"] = json!(token.expect("a preview's confirmation"));
        }
        calls.push((l, args));
        seen.push(preview);
    }
    let answers = w.call_at_once(write.tool(), &calls);
    let mut executes: Vec<Expect> = calls
        .iter()
        .zip(answers)
        .map(|((l, _), (s, v))| executed(w, *l, write, s, &v))
        .collect();
    executes.sort_by_key(|e| format!("{e:?}"));
    seen.extend(executes);
    Expect::Race(seen)
}

/// An execute's outcome; what a write that ran handed out is kept.
fn executed(w: &mut World, lease: usize, write: Write, s: u16, v: &Value) -> Expect {
    let seen = call_outcome(w, lease, s, v);
    if seen == Expect::Ok {
        let id = target_of(w, lease);
        let target = TARGETS.iter().position(|t| t.id == id).unwrap_or(0);
        w.ran(write, lease, target, &v["result"]);
    }
    seen
}

/// The target of the lease numbered `lease`, by root's lease record.
fn target_of(w: &World, lease: usize) -> String {
    let l = w.get(&format!("/v1/root/mcp/sessions/{}", w.leases[lease].0));
    l["target_id"].as_str().unwrap_or_default().to_owned()
}

fn rotate_hub_key(w: &mut World, m: &Model, target: usize, by: Option<u8>) -> Expect {
    let path = format!("/v1/root/hubs/{}/rotate-key", TARGETS[target].id);
    let (s, v) = w.operator_as(by, &path, json!({}));
    let seen = operator_outcome(w, by, s, &v);
    if seen == Expect::Ok {
        let reloads = w.token_reloads(target);
        w.hub_token(target, v["token"].as_str().expect("the new hub token"));
        // A running hub polls its token file and reconnects with the new token: wait for
        // that, so no later step meets the reconnection.
        if m.targets[target].hub_running {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while w.token_reloads(target) == reloads {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the hub of {} never picked up its new token",
                    TARGETS[target].id
                );
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
    }
    w.settle(m);
    seen
}

/// `list_templates`, then a proposal on the fingerprint listed: the model's example phrase
/// added where the template lacks it, else removed (so templates never outgrow their limits).
fn propose(w: &mut World, lease: usize) -> Expect {
    let (s, v) = w.call(lease, "nlu_authoring.list_templates", json!({}));
    let seen = call_outcome(w, lease, s, &v);
    if seen != Expect::Ok {
        return seen;
    }
    let template = v["result"]["templates"]
        .as_array()
        .and_then(|a| a.iter().find(|t| t["template_id"] == TEMPLATE))
        .expect("the template is listed")
        .clone();
    let phrase = "turn on the model lamp";
    let has = template["examples"]
        .as_array()
        .is_some_and(|e| e.iter().any(|x| x == phrase));
    let change = if has {
        "remove_examples"
    } else {
        "add_examples"
    };
    let args = json!({"template_id": TEMPLATE, "base_fingerprint": template["fingerprint"], change: [phrase]});
    let (s, v) = w.call(lease, "nlu_authoring.propose_change", args);
    let seen = call_outcome(w, lease, s, &v);
    if seen == Expect::Ok {
        let token = v["result"]["confirmation_token"].as_str();
        w.confirmations
            .push(token.expect("a proposal's confirmation").to_owned());
        let approval = v["result"]["approval"]["approval_id"].as_str();
        w.approvals
            .push(approval.expect("a proposal's approval").to_owned());
    }
    seen
}

/// Previews and executes the allowed test `slow`, revokes the lease while it runs; the
/// execute's outcome (the preview and the revocation must succeed).
fn revoke_in_flight(w: &mut World, m: &Model, lease: usize) -> Expect {
    let (s, v) = w.call(lease, Write::Tests.tool(), json!({"name": "slow"}));
    assert_eq!(call_outcome(w, lease, s, &v), Expect::Ok, "preview: {v}");
    let token = v["result"]["confirmation_token"]
        .as_str()
        .expect("a confirmation");
    w.confirmations.push(token.to_owned());
    let args = json!({"name": "slow", "phase": "execute", "confirmation_token": token,
        "idempotency_key": format!("in-flight-{}", m.steps)});
    let request = w
        .http
        .post(w.url("/v1/root/mcp/call"))
        .bearer_auth(&w.leases[lease].1)
        .json(&json!({"tool_id": Write::Tests.tool(), "arguments": args}));
    let execute = w.rt.spawn(async move {
        let res = request.send().await.expect("root answers");
        let status = res.status().as_u16();
        (status, res.json::<Value>().await.unwrap_or(Value::Null))
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    let path = format!("/v1/root/mcp/sessions/{}/revoke", w.leases[lease].0);
    let (s, v) = w.operator(&path, json!({}));
    assert_eq!(operator_outcome(w, None, s, &v), Expect::Ok, "revoke: {v}");
    assert!(
        !execute.is_finished(),
        "the slow test finished before the revocation"
    );
    let (s, v) = w.block(execute).expect("the execute's task");
    *w.last.borrow_mut() = v.clone();
    call_outcome(w, lease, s, &v)
}

/// A valid descriptor set built now from the example source tree (fresh from this moment).
fn descriptor_set() -> Value {
    let source =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/descriptor-source");
    let options = mcp_root::descriptors::build::BuildOptions {
        generated_at: Some(time::OffsetDateTime::now_utc()),
    };
    let set = mcp_root::descriptors::build::build(&source, &options).expect("the source builds");
    serde_json::to_value(set).expect("JSON")
}

fn read_arguments(tool: &str) -> Value {
    let args = READS.iter().find(|(t, _)| *t == tool).map(|(_, a)| *a);
    serde_json::from_str(args.unwrap_or("{}")).expect("JSON arguments")
}

/// A lease created (or rotated, or a run credential), `depth` leases below the top of its
/// chain: kept under the model's next number.
fn lease_created(w: &mut World, by: Option<u8>, status: u16, v: &Value, depth: usize) -> Expect {
    let seen = operator_outcome(w, by, status, v);
    if seen == Expect::Ok {
        let id = v["session_id"].as_str().expect("session_id").to_owned();
        let token = v["token"].as_str().expect("token").to_owned();
        w.leases.push((id, token));
        w.depths.push(depth);
    }
    seen
}

/// An OAuth sign-in approved by `by`: its access token kept as the model's next lease.
fn sign_in(w: &mut World, by: Option<u8>, target: usize, profile: &str) -> Expect {
    match w.sign_in(by, TARGETS[target].id, profile) {
        SignInAnswer::Refused(s, v) => operator_outcome(w, by, s, &v),
        SignInAnswer::Approved {
            approval,
            tokens,
            client_id,
        } => {
            let seen = operator_outcome(w, by, approval.0, &approval.1);
            assert_eq!(seen, Expect::Ok, "approved: {approval:?}");
            assert_eq!(tokens.0, 200, "the code exchanged: {}", tokens.1);
            let access = tokens.1["access_token"].as_str().expect("an access token");
            let refresh = tokens.1["refresh_token"].as_str().expect("a refresh token");
            w.leases
                .push((w.oauth_lease(&client_id), access.to_owned()));
            w.depths.push(0);
            w.grants.push(SignedIn {
                client_id,
                refresh: refresh.to_owned(),
                lease: w.leases.len() - 1,
            });
            Expect::Ok
        }
    }
}

/// A sign-in's refresh: its next access token kept as the model's next lease.
fn refresh(w: &mut World, grant: usize) -> Expect {
    let (client_id, presented) = (
        w.grants[grant].client_id.clone(),
        w.grants[grant].refresh.clone(),
    );
    let (s, v) = w.oauth_token(&[
        ("grant_type", "refresh_token"),
        ("client_id", &client_id),
        ("refresh_token", &presented),
    ]);
    if s != 200 {
        let error = match v["error"].as_str() {
            Some("invalid_grant") => "invalid_grant",
            _ => "unexpected",
        };
        return Expect::OAuthRefused(error);
    }
    let access = v["access_token"].as_str().expect("an access token");
    w.leases
        .push((w.oauth_lease(&client_id), access.to_owned()));
    w.depths.push(0);
    let g = &mut w.grants[grant];
    g.refresh = v["refresh_token"]
        .as_str()
        .expect("a refresh token")
        .to_owned();
    g.lease = w.leases.len() - 1;
    Expect::Ok
}

/// A fan-out's answer in the oracle's words: the targets whose lines it holds, and the ones
/// it names missing (each sorted).
fn reached(result: &Value) -> Expect {
    let known = |id: &str| {
        TARGETS
            .iter()
            .find(|t| t.id == id)
            .map(|t| t.id)
            .unwrap_or("unexpected")
    };
    let ids = |v: &Value, field: Option<&str>| -> Vec<&'static str> {
        let mut out: Vec<&'static str> = v
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|e| match field {
                        Some(f) => e[f].as_str(),
                        None => e.as_str(),
                    })
                    .map(known)
                    .collect()
            })
            .unwrap_or_default();
        out.sort_unstable();
        out.dedup();
        out
    };
    Expect::Reached {
        answered: ids(&result["entries"], Some("target_id")),
        missing: ids(&result["missing"], None),
    }
}

/// The event an answer names; `None` for a 401, which must name none (a non-bearer leaves no
/// trace).
fn event_of(w: &World, status: u16, v: &Value) -> Option<Value> {
    if status == 401 {
        assert!(
            v.get("event_id").is_none(),
            "no event for a non-bearer: {v}"
        );
        return None;
    }
    let id = v["event_id"]
        .as_str()
        .unwrap_or_else(|| panic!("an answer without its event: {status} {v}"));
    Some(w.event(id))
}

/// An operator action's outcome; its event must name the operator (a revoked operator's
/// token is no bearer: 401 and no event).
fn operator_outcome(w: &World, by: Option<u8>, status: u16, v: &Value) -> Expect {
    let Some(event) = event_of(w, status, v) else {
        return Expect::Unauthenticated;
    };
    let actor = by.map_or("operator:admin".to_owned(), |n| format!("operator:op{n}"));
    assert_eq!(event["actor"]["id"], actor, "{event}");
    if (200..300).contains(&status) {
        Expect::Ok
    } else {
        Expect::OperatorRefused(code(v))
    }
}

/// An agent's fleet read (`Step::AgentFleetRead`): the fleet lease issued, its fleet call
/// (with a target that `leaves` its selector once the canary finished), and the run's parts;
/// the lease revoked after.
fn agent_fleet_read(
    w: &World,
    profile: &str,
    tool: &str,
    by: Option<u8>,
    leaves: Option<usize>,
) -> Expect {
    let selector = if leaves.is_some() {
        "id=*,!label:out"
    } else {
        "id=*"
    };
    let ask = json!({ "selector": selector, "capability_profile": profile, "ttl_sec": 600 });
    let (s, v) = w.operator_as(by, "/v1/root/mcp/sessions", ask);
    let seen = operator_outcome(w, by, s, &v);
    if seen != Expect::Ok {
        return seen;
    }
    let (id, bearer) = (v["session_id"].as_str(), v["token"].as_str());
    let (id, bearer) = (id.expect("a session id"), bearer.expect("a bearer"));
    let mut plan = json!({ "max_concurrency": 4, "max_errors": "100%" });
    if leaves.is_some() {
        plan["canary"] = json!(1);
        plan["pause_after_canary_ms"] = json!(2000);
    }
    let arguments = json!({ "tool": tool, "arguments": read_arguments(tool), "plan": plan });
    let body = json!({ "tool_id": "root.run_fleet_read", "arguments": arguments });
    let (s, r) = match leaves {
        None => w.post("/v1/root/mcp/call", bearer, body),
        Some(t) => w.fleet_call_while_leaving(bearer, body, id, TARGETS[t].id),
    };
    let revoke = format!("/v1/root/mcp/sessions/{id}/revoke");
    let (rs, rv) = w.operator_as(by, &revoke, json!({}));
    assert_eq!(rs, 200, "the fleet lease is revoked: {rv}");
    let Some(event) = event_of(w, s, &r) else {
        return Expect::Unauthenticated;
    };
    assert_eq!(event["actor"]["id"], format!("lease:{id}"), "{event}");
    if r["ok"] != true {
        return Expect::Refused(code(&r));
    }
    fleet_parts(w, r["result"]["run_id"].as_str().expect("a run id"), tool)
}

/// A fleet run's outcome once it ended: each target's part, and "called N times" for a
/// target whose calls in the run's trace are not exactly one (none for one refused before
/// its call).
fn fleet_parts(w: &World, run_id: &str, tool: &str) -> Expect {
    let path = format!("/v1/root/fleet/runs/{run_id}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let run = loop {
        let r = w.get(&path);
        if !["running", "paused"].contains(&r["state"].as_str().unwrap_or_default()) {
            break r;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the fleet run did not end: {r}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let trail = w.get(&format!(
        "/v1/root/mcp/audit?trace_id={}&tool_id={tool}&limit=100",
        run["trace_id"].as_str().unwrap_or_default()
    ));
    let calls = |target: &str| {
        trail["events"]
            .as_array()
            .map_or(0, |e| e.iter().filter(|e| e["target_id"] == target).count())
    };
    let mut parts: Vec<(String, String)> = run["targets"]
        .as_array()
        .expect("the run's targets")
        .iter()
        .map(|t| {
            let id = t["target_id"].as_str().unwrap_or_default().to_owned();
            // One call event per target, the one its part names; none for a target refused
            // before any call (it left the run's selector), which names no event.
            let once = usize::from(!(t["status"] == "refused" && t["event_id"].is_null()));
            let part = match (t["status"].as_str(), t["code"].as_str()) {
                _ if calls(&id) != once => format!("called {} times", calls(&id)),
                (Some(s), None) => s.to_owned(),
                (Some(s), Some(code)) => format!("{s}: {code}"),
                (None, _) => "no status".to_owned(),
            };
            (id, part)
        })
        .collect();
    parts.sort();
    Expect::Fleet(parts)
}

/// A call's outcome as the oracle words it; its event must name the lease and, for a refusal
/// by root's policy, say so.
fn call_outcome(w: &World, lease: usize, status: u16, v: &Value) -> Expect {
    let Some(event) = event_of(w, status, v) else {
        return Expect::Unauthenticated;
    };
    assert_eq!(
        event["actor"]["id"],
        format!("lease:{}", w.leases[lease].0),
        "{event}"
    );
    if v["ok"] == true {
        assert_eq!(event["status"], "ok", "{event}");
        return if v["result"]["replay"] == true {
            Expect::Replay
        } else {
            Expect::Ok
        };
    }
    if event["policy_decision"]["decision"] == "deny" {
        assert_eq!(event["status"], "denied", "{event}");
        Expect::Denied(code(v))
    } else {
        Expect::Refused(code(v))
    }
}

/// The error code of an answer, as one of the codes the oracle knows (others are kept as
/// `unexpected`, which no oracle outcome equals).
fn code(v: &Value) -> &'static str {
    const KNOWN: [&str; 15] = [
        "forbidden",
        "target_cordoned",
        "forbidden_destructive",
        "not_found",
        "capability_not_granted",
        "environment_forbidden",
        "skill_disabled",
        "target_offline",
        "confirmation_required",
        "invalid_arguments",
        "unauthenticated",
        "conflict",
        "idempotency_conflict",
        "approval_pending",
        "busy",
    ];
    let c = v["error"]["code"].as_str().unwrap_or("");
    KNOWN.iter().find(|k| **k == c).copied().unwrap_or_else(|| {
        eprintln!("an answer with a code the oracle does not know: {v}");
        "unexpected"
    })
}
