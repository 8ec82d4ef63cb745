//! Property tests of the root↔hub decoder (`protocol::decode`): any bytes and any JSON decode
//! to a frame or to an error naming what was wrong, never a panic, and root's fast path for
//! result frames (`protocol::decode_from_hub`) answers exactly what `decode` answers; every frame either side
//! sends decodes back to itself; a signed call verifies after the trip and stops verifying
//! when any covered field changes. The same entry point is fuzzed in `fuzz/` (nightly); CI
//! runs these with `PROPTEST_CASES` bounding the cases.

use mcp_shared::error::{ErrorCode, ToolError};
use mcp_shared::protocol::{
    self, CallOutcome, CallRequest, Envelope, HubToRoot, MAX_FRAME_BYTES, PROTOCOL_VERSION,
    RootToHub, SkillCommand, SkillState,
};
use mcp_shared::target::{
    ManagedTargetDescriptor, OperationalSurface, TargetPolicy, TargetStatus, Transport, WriteScope,
};
use proptest::prelude::*;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// What a decode error may say: the three failures `decode` knows.
fn named(e: &protocol::DecodeError) -> bool {
    let text = e.to_string();
    match e {
        protocol::DecodeError::Malformed(why) => {
            !why.is_empty() && text.starts_with("malformed frame: ")
        }
        protocol::DecodeError::Version { .. } => text.starts_with("unsupported protocol version "),
        protocol::DecodeError::TooLarge { .. } => text.starts_with("frame of "),
    }
}

fn roundtrip<B>(body: B) -> Result<(), TestCaseError>
where
    B: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug + Clone,
{
    let env = Envelope {
        v: PROTOCOL_VERSION,
        id: "frame-1".into(),
        in_reply_to: Some("frame-0".into()),
        body,
    };
    let text = serde_json::to_string(&env).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(protocol::decode::<B>(&text), Ok(env));
    Ok(())
}

/// JSON values nested a few levels, with the protocol's own member names and type tags
/// common enough that decoding gets past the first member.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        (-1e9f64..1e9).prop_map(|f| json!(f)),
        prop_oneof![
            Just("hello".to_string()),
            Just("result".to_string()),
            Just("call".to_string()),
            Just("heartbeat".to_string()),
            Just("welcome".to_string()),
            Just("ok".to_string()),
            Just("error".to_string()),
            ".{0,10}",
        ]
        .prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("v".to_string()),
                    Just("id".to_string()),
                    Just("in_reply_to".to_string()),
                    Just("body".to_string()),
                    Just("type".to_string()),
                    Just("call_id".to_string()),
                    Just("outcome".to_string()),
                    Just("status".to_string()),
                    Just("message".to_string()),
                    "[a-z_]{1,8}",
                ],
                inner,
                0..6,
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn tool_error() -> impl Strategy<Value = ToolError> {
    (
        prop_oneof![
            Just(ErrorCode::AdapterFailed),
            Just(ErrorCode::Timeout),
            Just(ErrorCode::SignatureInvalid),
            Just(ErrorCode::ReplayRejected),
            Just(ErrorCode::InvalidArguments),
        ],
        ".{0,40}",
    )
        .prop_map(|(code, message)| ToolError::new(code, message))
}

fn descriptor() -> impl Strategy<Value = ManagedTargetDescriptor> {
    (
        "hub:[a-z-]{1,12}",
        "(test|production|staging)",
        any::<bool>(),
        prop::collection::vec("[a-z._]{1,20}", 0..4),
        any::<bool>(),
    )
        .prop_map(|(target_id, environment, enabled, capabilities, writes)| {
            ManagedTargetDescriptor {
                target_id,
                kind: "hub".into(),
                environment,
                status: TargetStatus::Online,
                transport: Transport {
                    channel: "ws".into(),
                },
                operational_surface: OperationalSurface {
                    published_by: "infra_access_skill".into(),
                    enabled,
                    capabilities,
                },
                policy: TargetPolicy {
                    write_scope: if writes {
                        WriteScope::TestOnly
                    } else {
                        WriteScope::None
                    },
                },
            }
        })
}

fn skill_state() -> impl Strategy<Value = SkillState> {
    (
        "[a-z_]{1,20}",
        any::<bool>(),
        any::<bool>(),
        prop::collection::vec("[a-z._]{1,20}", 0..3),
        any::<bool>(),
        prop::option::of("[0-9.]{1,8}"),
    )
        .prop_map(
            |(skill, installed, enabled, published, owner_disabled, version)| SkillState {
                skill,
                installed,
                enabled,
                adapters: published.clone(),
                published,
                owner_disabled,
                version,
            },
        )
}

fn hub_to_root() -> impl Strategy<Value = HubToRoot> {
    prop_oneof![
        Just(HubToRoot::Heartbeat),
        ".{0,60}".prop_map(|message| HubToRoot::ProtocolError { message }),
        (
            "[a-z0-9-]{1,36}",
            -1e6f64..1e6,
            proptest::option::of(0f64..1e6),
            proptest::option::of(".{0,30}")
        )
            .prop_map(|(call_id, progress, total, message)| HubToRoot::Progress {
                call_id,
                progress,
                total,
                message,
            }),
        ("[a-z0-9-]{1,36}", "[a-z_.]{1,30}", json_value()).prop_map(
            |(call_id, adapter, result)| HubToRoot::Result {
                call_id,
                outcome: CallOutcome::Ok { adapter, result },
            }
        ),
        (
            "[a-z0-9-]{1,36}",
            proptest::option::of("[a-z_.]{1,30}"),
            tool_error()
        )
            .prop_map(|(call_id, adapter, error)| HubToRoot::Result {
                call_id,
                outcome: CallOutcome::Error { adapter, error },
            }),
        (descriptor(), prop::collection::vec(skill_state(), 0..3))
            .prop_map(|(descriptor, skills)| HubToRoot::SurfaceChanged { descriptor, skills }),
        skill_state().prop_map(HubToRoot::SkillState),
        (
            "mcph_[A-Za-z0-9_-]{10,43}",
            descriptor(),
            prop::collection::vec(skill_state(), 0..3)
        )
            .prop_map(|(token, descriptor, skills)| HubToRoot::Hello {
                protocol_version: PROTOCOL_VERSION,
                token,
                descriptor,
                skills,
                features: vec!["progress.total".into()],
            }),
    ]
}

fn call_request() -> impl Strategy<Value = CallRequest> {
    (
        (
            "[a-z0-9-]{1,36}",
            "[a-f0-9]{32}",
            "[a-z0-9-]{1,36}",
            "[a-z_.]{1,30}",
            "[a-z_.]{1,30}",
        ),
        (
            json_value(),
            any::<bool>(),
            any::<i64>(),
            proptest::option::of(".{1,20}"),
        ),
    )
        .prop_map(
            |(
                (call_id, trace_id, session_id, tool_id, capability),
                (arguments, dry_run, expires_at_ms, idempotency_key),
            )| CallRequest {
                call_id,
                trace_id,
                session_id,
                tool_id,
                capability,
                body: mcp_shared::protocol::CallBody {
                    arguments,
                    dry_run,
                    idempotency_key,
                    confirmed_effect: None,
                },
                expires_at_ms,
                traceparent: None,
                signature: String::new(),
            },
        )
}

fn root_to_hub() -> impl Strategy<Value = RootToHub> {
    prop_oneof![
        Just(RootToHub::Heartbeat),
        ".{0,60}".prop_map(|message| RootToHub::ProtocolError { message }),
        "[a-z0-9-]{1,36}".prop_map(|call_id| RootToHub::Cancel { call_id }),
        (
            "[a-z_]{1,20}",
            prop_oneof![
                Just(SkillCommand::Install),
                Just(SkillCommand::Enable),
                Just(SkillCommand::Disable),
                Just(SkillCommand::Uninstall),
                Just(SkillCommand::Status),
            ]
        )
            .prop_map(|(skill, command)| RootToHub::SkillCommand { skill, command }),
        call_request().prop_map(|mut c| {
            c.sign(&protocol::signing_key("mcph_props"));
            RootToHub::Call(c)
        }),
    ]
}

proptest! {
    // Cases: `PROPTEST_CASES` (CI bounds it), else proptest's default of 256.
    #![proptest_config(ProptestConfig::default())]

    #[test]
    fn arbitrary_bytes_decode_or_name_the_error(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        let text = String::from_utf8_lossy(&bytes);
        prop_assert_eq!(protocol::decode_from_hub(&text), protocol::decode::<HubToRoot>(&text));
        for e in [
            protocol::decode::<HubToRoot>(&text).err(),
            protocol::decode::<RootToHub>(&text).err(),
        ].into_iter().flatten() {
            prop_assert!(named(&e), "{e}");
        }
    }

    #[test]
    fn arbitrary_json_decodes_to_what_it_says_or_an_error(v in json_value(), body in json_value(), tag in "[a-z_]{1,16}") {
        // As it comes, and as an envelope around a body with a type tag.
        let mut body = body;
        if let Value::Object(m) = &mut body {
            m.insert("type".into(), json!(tag));
        }
        let env = json!({ "v": PROTOCOL_VERSION, "id": "x", "body": body });
        for text in [v.to_string(), env.to_string()] {
            prop_assert_eq!(protocol::decode_from_hub(&text), protocol::decode::<HubToRoot>(&text));
            match protocol::decode::<HubToRoot>(&text) {
                Ok(frame) => roundtrip(frame.body)?,
                Err(e) => prop_assert!(named(&e), "{e}"),
            }
            match protocol::decode::<RootToHub>(&text) {
                Ok(frame) => roundtrip(frame.body)?,
                Err(e) => prop_assert!(named(&e), "{e}"),
            }
        }
    }

    #[test]
    fn every_hub_frame_roundtrips(body in hub_to_root()) {
        roundtrip(body)?;
    }

    /// Result frames near the wire form, each member present, absent, `null` or of the wrong
    /// kind, with an extra member or another version now and then: the fast path of
    /// `decode_from_hub` answers exactly what the full decoder answers.
    #[test]
    fn result_frames_decode_the_same_on_the_fast_path(
        status in prop_oneof![Just(json!("ok")), Just(json!("error")), Just(json!("okay")), Just(json!(null)), Just(json!({"ok": null}))],
        adapter in prop_oneof![Just(None), Just(Some(json!("hub.status"))), Just(Some(json!(null))), Just(Some(json!(7)))],
        result in prop_oneof![Just(None), Just(Some(json!(null))), json_value().prop_map(Some)],
        error in prop_oneof![
            Just(None),
            Just(Some(json!(null))),
            tool_error().prop_map(|e| Some(serde_json::to_value(e).expect("error serializes"))),
            json_value().prop_map(Some),
        ],
        kind in prop_oneof![Just(json!("result")), Just(json!("progress")), Just(json!({"result": null}))],
        in_reply_to in prop_oneof![Just(None), Just(Some(json!(null))), Just(Some(json!("frame-0")))],
        extra in prop_oneof![Just(None), Just(Some(0usize)), Just(Some(1)), Just(Some(2))],
        v in prop_oneof![Just(PROTOCOL_VERSION), Just(PROTOCOL_VERSION + 1)],
    ) {
        let mut outcome = serde_json::Map::new();
        outcome.insert("status".into(), status);
        for (k, m) in [("adapter", adapter), ("result", result), ("error", error)] {
            if let Some(m) = m {
                outcome.insert(k.into(), m);
            }
        }
        let mut body = json!({ "type": kind, "call_id": "c-1", "outcome": outcome });
        let mut env = json!({ "v": v, "id": "frame-1", "body": null });
        if let Some(r) = in_reply_to {
            env["in_reply_to"] = r;
        }
        match extra {
            Some(0) => env["extra"] = json!(1),
            Some(1) => body["extra"] = json!(1),
            Some(_) => body["outcome"]["extra"] = json!(1),
            None => {}
        }
        env["body"] = body;
        let text = env.to_string();
        prop_assert_eq!(protocol::decode_from_hub(&text), protocol::decode::<HubToRoot>(&text));
    }

    #[test]
    fn every_root_frame_roundtrips(body in root_to_hub()) {
        roundtrip(body)?;
    }

    #[test]
    fn a_signed_call_verifies_after_the_trip_and_not_once_changed(c in call_request(), field in 0usize..9) {
        let key = protocol::signing_key("mcph_props");
        let mut c = c;
        c.sign(&key);
        let text = serde_json::to_string(&Envelope {
            v: PROTOCOL_VERSION,
            id: "f".into(),
            in_reply_to: None,
            body: RootToHub::Call(c.clone()),
        }).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let Ok(Envelope { body: RootToHub::Call(back), .. }) = protocol::decode::<RootToHub>(&text) else {
            return Err(TestCaseError::fail("a call did not decode"));
        };
        prop_assert!(protocol::verify_call(&back, &key));
        prop_assert!(!protocol::verify_call(&back, &protocol::signing_key("mcph_other")));
        let mut forged = back;
        match field {
            0 => forged.call_id.push('x'),
            1 => forged.trace_id.push('x'),
            2 => forged.session_id.push('x'),
            3 => forged.tool_id.push('x'),
            4 => forged.capability.push('x'),
            5 => forged.body.arguments = json!({ "changed": forged.body.arguments }),
            6 => forged.body.dry_run = !forged.body.dry_run,
            7 => forged.expires_at_ms = forged.expires_at_ms.wrapping_add(1),
            _ => forged.body.idempotency_key = Some(format!("{}x", forged.body.idempotency_key.unwrap_or_default())),
        }
        prop_assert!(!protocol::verify_call(&forged, &key), "field {field} is not covered");
    }
}

#[test]
fn limits_are_named_without_recursing() {
    let over = format!("\"{}\"", "x".repeat(MAX_FRAME_BYTES));
    assert_eq!(
        protocol::decode::<HubToRoot>(&over)
            .unwrap_err()
            .to_string(),
        format!(
            "frame of {} bytes exceeds the limit of {MAX_FRAME_BYTES}",
            MAX_FRAME_BYTES + 2
        )
    );
    // 100 000 levels: serde_json's recursion limit answers, the stack is never at risk.
    let deep = format!(
        r#"{{"v":1,"id":"x","body":{{"type":"progress","call_id":"c","progress":1,"message":{}0{}}}}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let e = protocol::decode::<HubToRoot>(&deep)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("malformed frame: recursion limit exceeded"),
        "{e}"
    );
}
