//! Drift test: the JSON Schemas in `schemas/` against the Rust boundary types.
//!
//! For every schema file: fully populated instances built in Rust (every enum variant, every
//! protocol message) validate; the schema's `properties` are exactly the fields Rust
//! serializes; its `enum` lists are exactly the Rust variants; and instances with an unknown
//! field, a wrong enum value, a missing required field or a malformed timestamp are rejected
//! by the schema and by serde alike. Adding a Rust field or variant without touching the schema
//! fails here.

use std::collections::BTreeSet;
use std::path::PathBuf;

use mcp_shared::contract::{
    ConcurrencyHint, DescriptorProjection, RedactionRules, Retention, RetryPolicy, RoutingClass,
    Selector, SideEffectClass, Stability, TaskSupport, ToolContract,
};
use mcp_shared::descriptor::{Descriptor, Freshness, content_hash};
use mcp_shared::error::{ErrorCode, ToolError, ToolResponse};
use mcp_shared::event::{
    Actor, Decision, EventStatus, OperationalEvent, PolicyDecision, Redaction, RedactionSummary,
    RetriedAttempt, Surface,
};
use mcp_shared::lease::{LeaseKind, LeaseStatus, SessionLease};
use mcp_shared::profile::{CapabilityProfile, ProfileRegistry};
use mcp_shared::protocol::{
    CallOutcome, CallRequest, Envelope, HubToRoot, PROTOCOL_VERSION, RootToHub, SkillCommand,
    SkillState,
};
use mcp_shared::replica::{REPLICA_PROTOCOL_VERSION, ReplicaAnswer, ReplicaCall, ReplicaEnvelope};
use mcp_shared::target::{
    ManagedTargetDescriptor, OperationalSurface, TargetPolicy, TargetStatus, Transport, WriteScope,
};
use mcp_shared::time::{OffsetDateTime, parse};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

// ------------------------------------------------------------------------------------ harness

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

struct Schema {
    file: &'static str,
    json: Value,
    validator: jsonschema::Validator,
}

impl Schema {
    fn load(file: &'static str) -> Schema {
        let path = repo().join("schemas").join(file);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{file}: cannot read {}: {e}", path.display()));
        let json: Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{file}: not JSON: {e}"));
        if let Err(e) = jsonschema::meta::validate(&json) {
            panic!("{file}: not a valid JSON Schema: {e}");
        }
        assert_eq!(
            json["$schema"], "https://json-schema.org/draft/2020-12/schema",
            "{file}: $schema must be draft 2020-12"
        );
        assert_eq!(
            json["$id"],
            format!("https://root-mcp.local/schemas/{file}"),
            "{file}: $id must name the file"
        );
        for key in ["title", "description"] {
            assert!(
                json[key].as_str().is_some_and(|s| !s.is_empty()),
                "{file}: missing {key}"
            );
        }
        let validator = jsonschema::draft202012::options()
            .should_validate_formats(true)
            .build(&json)
            .unwrap_or_else(|e| panic!("{file}: does not compile: {e}"));
        Schema {
            file,
            json,
            validator,
        }
    }

    fn valid(&self, what: &str, instance: &Value) {
        let errors: Vec<String> = self
            .validator
            .iter_errors(instance)
            .map(|e| format!("  at `{}`: {e}", e.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "{}: {what} does not validate:\n{}\ninstance: {instance:#}",
            self.file,
            errors.join("\n")
        );
    }

    fn invalid(&self, what: &str, instance: &Value) {
        assert!(
            !self.validator.is_valid(instance),
            "{}: {what} validates but must be rejected\ninstance: {instance:#}",
            self.file
        );
    }

    /// The subschema at `pointer`, following local `$ref`s.
    fn at(&self, pointer: &str) -> &Value {
        let mut node = self
            .json
            .pointer(pointer)
            .unwrap_or_else(|| panic!("{}: no subschema at `{pointer}`", self.file));
        while let Some(r) = node.get("$ref").and_then(Value::as_str) {
            let target = r
                .strip_prefix('#')
                .unwrap_or_else(|| panic!("{}: non-local $ref `{r}` at `{pointer}`", self.file));
            node = self
                .json
                .pointer(target)
                .unwrap_or_else(|| panic!("{}: dangling $ref `{r}` at `{pointer}`", self.file));
        }
        node
    }

    /// The object schema at `pointer` lists exactly the fields the instances serialize, and
    /// its `required` list names only listed fields.
    fn same_fields(&self, pointer: &str, instances: &[&Value]) {
        let schema = self.at(pointer);
        let listed: BTreeSet<String> = schema["properties"]
            .as_object()
            .unwrap_or_else(|| panic!("{}: `{pointer}` has no properties", self.file))
            .keys()
            .cloned()
            .collect();
        let mut serialized = BTreeSet::new();
        for instance in instances {
            let object = instance.as_object().unwrap_or_else(|| {
                panic!("{}: instance for `{pointer}` is not an object", self.file)
            });
            serialized.extend(object.keys().cloned());
        }
        let unlisted: Vec<&String> = serialized.difference(&listed).collect();
        assert!(
            unlisted.is_empty(),
            "{}: fields {unlisted:?} are serialized by Rust but missing from `{pointer}/properties`",
            self.file
        );
        let unserialized: Vec<&String> = listed.difference(&serialized).collect();
        assert!(
            unserialized.is_empty(),
            "{}: `{pointer}/properties` lists {unserialized:?}, which the fully populated Rust value does not serialize",
            self.file
        );
        assert_eq!(
            schema["additionalProperties"],
            Value::Bool(false),
            "{}: `{pointer}` must set additionalProperties false",
            self.file
        );
        for field in schema["required"].as_array().into_iter().flatten() {
            let field = field.as_str().unwrap_or_default();
            assert!(
                listed.contains(field),
                "{}: `{pointer}/required` names unknown field `{field}`",
                self.file
            );
        }
    }

    /// The `required` list at `pointer` is exactly `fields`.
    fn required(&self, pointer: &str, fields: &[&str]) {
        let got: BTreeSet<&str> = self.at(pointer)["required"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let want: BTreeSet<&str> = fields.iter().copied().collect();
        assert_eq!(
            got, want,
            "{}: `{pointer}/required` differs from the Rust non-optional fields",
            self.file
        );
    }

    /// The `enum` at `pointer` lists exactly the serialized names of `variants`.
    fn same_enum<T: Serialize>(&self, pointer: &str, variants: &[T]) {
        let listed: Vec<String> = self.at(pointer)["enum"]
            .as_array()
            .unwrap_or_else(|| panic!("{}: `{pointer}` has no enum", self.file))
            .iter()
            .map(|v| v.as_str().unwrap_or_default().to_owned())
            .collect();
        let rust: Vec<String> = variants.iter().map(|v| name_of(v)).collect();
        let (l, r): (BTreeSet<_>, BTreeSet<_>) = (listed.iter().collect(), rust.iter().collect());
        assert_eq!(
            l.len(),
            listed.len(),
            "{}: `{pointer}` lists a value twice",
            self.file
        );
        let missing: Vec<&&String> = r.difference(&l).collect();
        assert!(
            missing.is_empty(),
            "{}: `{pointer}` misses the Rust variants {missing:?}",
            self.file
        );
        let extra: Vec<&&String> = l.difference(&r).collect();
        assert!(
            extra.is_empty(),
            "{}: `{pointer}` lists {extra:?}, which no Rust variant serializes to",
            self.file
        );
    }

    /// The `const` values of `tag` in the branches of the `oneOf` at `pointer`.
    fn tags(&self, pointer: &str, tag: &str) -> BTreeSet<String> {
        let branches = self.at(pointer)["oneOf"]
            .as_array()
            .unwrap_or_else(|| panic!("{}: `{pointer}` has no oneOf", self.file));
        (0..branches.len())
            .map(|i| {
                let branch = self.at(&format!("{pointer}/oneOf/{i}"));
                branch["properties"][tag]["const"]
                    .as_str()
                    .unwrap_or_else(|| {
                        panic!("{}: `{pointer}/oneOf/{i}` has no {tag} const", self.file)
                    })
                    .to_owned()
            })
            .collect()
    }

    /// The object schema at `pointer` has the same shape as `other`'s at `other_pointer`
    /// (for the copies every self-contained schema keeps in its `$defs`).
    fn same_shape(&self, pointer: &str, other: &Schema, other_pointer: &str) {
        let (a, b) = (self.at(pointer), other.at(other_pointer));
        for key in [
            "type",
            "properties",
            "required",
            "additionalProperties",
            "enum",
        ] {
            assert_eq!(
                a.get(key),
                b.get(key),
                "{}: `{pointer}` has a different `{key}` than {} `{other_pointer}`",
                self.file,
                other.file
            );
        }
    }
}

fn name_of<T: Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(Value::String(s)) => s,
        other => panic!("enum variant does not serialize to a string: {other:?}"),
    }
}

fn to_json<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).expect("boundary types serialize")
}

fn mutated(v: &Value, f: impl FnOnce(&mut Value)) -> Value {
    let mut v = v.clone();
    f(&mut v);
    v
}

fn with_surplus(v: &Value) -> Value {
    mutated(v, |v| {
        v["surplus"] = json!(true);
    })
}

/// serde reads the instance and drops the fields it does not know: the protocol's readers
/// are tolerant (a newer peer may add optional fields), while the schema says exactly what
/// this version sends. `without` is the instance as this version would send it.
fn rust_ignores<T: DeserializeOwned + Serialize>(
    file: &str,
    what: &str,
    v: &Value,
    without: &Value,
) {
    let read: T = serde_json::from_value(v.clone()).unwrap_or_else(|e| {
        panic!("{file}: {what} must be read (the unknown part ignored), not refused: {e}")
    });
    assert_eq!(
        &to_json(&read),
        without,
        "{file}: {what}: the unknown part is not dropped"
    );
}

/// serde rejects the instance too, so schema and type agree on strictness.
fn rust_rejects<T: DeserializeOwned>(file: &str, what: &str, v: &Value) {
    assert!(
        serde_json::from_value::<T>(v.clone()).is_err(),
        "{file}: {what} is rejected by the schema but accepted by serde"
    );
}

fn rust_round_trips<T: DeserializeOwned + Serialize>(file: &str, v: &Value) {
    let back: T = serde_json::from_value(v.clone())
        .unwrap_or_else(|e| panic!("{file}: serialized value does not deserialize: {e}"));
    assert_eq!(
        &to_json(&back),
        v,
        "{file}: serialization does not round-trip"
    );
}

fn at(s: &str) -> OffsetDateTime {
    parse(s).expect("test timestamps are RFC 3339")
}

// ------------------------------------------------------------------------ every Rust variant
//
// Each list is paired with an exhaustive `match`: a new variant fails to compile until it is
// added to the list, and then fails the enum checks until it is added to the schema.

fn error_codes() -> Vec<ErrorCode> {
    use ErrorCode::*;
    let all = vec![
        Unauthenticated,
        Forbidden,
        RoleRequired,
        UnknownTool,
        CapabilityNotGranted,
        EnvironmentForbidden,
        InvalidArguments,
        TargetOffline,
        Timeout,
        Busy,
        SkillDisabled,
        ConfirmationRequired,
        ForbiddenDestructive,
        DescriptorUnavailable,
        SignatureInvalid,
        DeadlineExpired,
        ReplayRejected,
        AdapterFailed,
        Cancelled,
        IdempotencyConflict,
        IdempotencyInProgress,
        NotFound,
        Conflict,
        ApprovalPending,
        AuditUnavailable,
        ClockSkew,
        TargetCordoned,
        TargetRetired,
        TargetNarrowed,
        RateLimited,
        Internal,
    ];
    assert_eq!(
        all,
        ErrorCode::ALL,
        "ErrorCode::ALL holds every variant, in order"
    );
    for c in &all {
        match c {
            Unauthenticated
            | Forbidden
            | RoleRequired
            | UnknownTool
            | CapabilityNotGranted
            | EnvironmentForbidden
            | InvalidArguments
            | TargetOffline
            | Timeout
            | Busy
            | SkillDisabled
            | ConfirmationRequired
            | ForbiddenDestructive
            | DescriptorUnavailable
            | SignatureInvalid
            | DeadlineExpired
            | ReplayRejected
            | AdapterFailed
            | Cancelled
            | IdempotencyConflict
            | IdempotencyInProgress
            | NotFound
            | Conflict
            | ApprovalPending
            | AuditUnavailable
            | ClockSkew
            | TargetCordoned
            | TargetRetired
            | TargetNarrowed
            | RateLimited
            | Internal => {}
        }
    }
    all
}

fn side_effects() -> Vec<SideEffectClass> {
    let all = vec![
        SideEffectClass::Read,
        SideEffectClass::Write,
        SideEffectClass::Destructive,
    ];
    for c in &all {
        match c {
            SideEffectClass::Read | SideEffectClass::Write | SideEffectClass::Destructive => {}
        }
    }
    all
}

fn routings() -> Vec<RoutingClass> {
    let all = vec![
        RoutingClass::DescriptiveCached,
        RoutingClass::OperationalRead,
        RoutingClass::OperationalWrite,
    ];
    for c in &all {
        match c {
            RoutingClass::DescriptiveCached
            | RoutingClass::OperationalRead
            | RoutingClass::OperationalWrite => {}
        }
    }
    all
}

fn stabilities() -> Vec<Stability> {
    let all = vec![
        Stability::Stable,
        Stability::Experimental,
        Stability::Internal,
    ];
    for c in &all {
        match c {
            Stability::Stable | Stability::Experimental | Stability::Internal => {}
        }
    }
    all
}

fn lease_statuses() -> Vec<LeaseStatus> {
    let all = vec![
        LeaseStatus::Active,
        LeaseStatus::Expired,
        LeaseStatus::Revoked,
    ];
    for c in &all {
        match c {
            LeaseStatus::Active | LeaseStatus::Expired | LeaseStatus::Revoked => {}
        }
    }
    all
}

fn target_statuses() -> Vec<TargetStatus> {
    let all = vec![
        TargetStatus::Online,
        TargetStatus::Offline,
        TargetStatus::Degraded,
    ];
    for c in &all {
        match c {
            TargetStatus::Online | TargetStatus::Offline | TargetStatus::Degraded => {}
        }
    }
    all
}

fn write_scopes() -> Vec<WriteScope> {
    let all = vec![WriteScope::None, WriteScope::TestOnly];
    for c in &all {
        match c {
            WriteScope::None | WriteScope::TestOnly => {}
        }
    }
    all
}

fn surfaces() -> Vec<Surface> {
    let all = vec![Surface::Mcp, Surface::Rest, Surface::Admin, Surface::Hub];
    for c in &all {
        match c {
            Surface::Mcp | Surface::Rest | Surface::Admin | Surface::Hub => {}
        }
    }
    all
}

fn event_statuses() -> Vec<EventStatus> {
    let all = vec![EventStatus::Ok, EventStatus::Error, EventStatus::Denied];
    for c in &all {
        match c {
            EventStatus::Ok | EventStatus::Error | EventStatus::Denied => {}
        }
    }
    all
}

fn decisions() -> Vec<Decision> {
    let all = vec![Decision::Allow, Decision::Deny];
    for c in &all {
        match c {
            Decision::Allow | Decision::Deny => {}
        }
    }
    all
}

fn skill_commands() -> Vec<SkillCommand> {
    let all = vec![
        SkillCommand::Install,
        SkillCommand::Enable,
        SkillCommand::Disable,
        SkillCommand::Uninstall,
        SkillCommand::Status,
    ];
    for c in &all {
        match c {
            SkillCommand::Install
            | SkillCommand::Enable
            | SkillCommand::Disable
            | SkillCommand::Uninstall
            | SkillCommand::Status => {}
        }
    }
    all
}

// ------------------------------------------------------------------- fully populated values

fn tool_error(code: ErrorCode) -> ToolError {
    ToolError::new(code, format!("{code} happened")).with_details(json!({"hint": "retry", "n": 2}))
}

fn contract(
    side_effect: SideEffectClass,
    routing: RoutingClass,
    stability: Stability,
) -> ToolContract {
    ToolContract {
        tool_id: "sdk.get_schema".into(),
        title: "Get one JSON Schema".into(),
        summary: "Returns one boundary schema by name".into(),
        input_schema: json!({"type": "object", "additionalProperties": false}),
        output_schema: json!({"type": "object"}),
        side_effect,
        routing,
        required_capability: "sdk.read.schemas".into(),
        allowed_environments: vec!["*".into(), "test".into()],
        timeout_ms: 2000,
        concurrency: ConcurrencyHint {
            per_lease: 8,
            per_target: 64,
        },
        redaction: RedactionRules {
            fields: vec!["token".into()],
            patterns: vec!["(?i)bearer [a-z0-9._-]+".into()],
            issued: vec!["token".into()],
        },
        stability,
        plane: "AdaOSDevPlane".into(),
        descriptor: Some(DescriptorProjection {
            descriptor_id: "sdk.schemas".into(),
            pointer: "/schemas".into(),
            select: Some(Selector {
                argument: "name".into(),
                key: "name".into(),
            }),
        }),
        executor: Some("root.access_tokens.list".into()),
        offline: Some("root.evidence.list_sessions".into()),
        skill: Some("infra_access_skill".into()),
        retain: Some(Retention {
            collection: "memory_profiles".into(),
            pointer: "/result/published_summary".into(),
            key: "session_id".into(),
        }),
        proposes: Some("nlu_authoring.apply_change".into()),
        retry: Some(RetryPolicy {
            attempts: 3,
            backoff_ms: 250,
            on: vec![ErrorCode::TargetOffline, ErrorCode::Busy],
        }),
        requires_approval: true,
        task_support: TaskSupport::Optional,
        fleet: true,
    }
}

fn lease(status: LeaseStatus) -> SessionLease {
    SessionLease {
        session_id: "lease-01".into(),
        audience: "codex".into(),
        target_id: "hub:test-alpha".into(),
        subnet_id: "subnet-lab".into(),
        zone: "zone-a".into(),
        capability_profile: "AdaOSDevRead".into(),
        effective_tools: vec!["sdk.get_metadata".into(), "sdk.get_schema".into()],
        created_at: at("2026-11-29T10:00:00Z"),
        deadline_at: at("2026-11-29T11:00:00Z"),
        last_used_at: Some(at("2026-11-29T10:05:30.250Z")),
        use_count: 3,
        status,
        parent_session_id: Some("lease-00".into()),
        kind: LeaseKind::Minted,
        issued_by: None,
        grant_id: None,
        rate: None,
        dpop_jkt: None,
    }
}

/// A lease an OAuth sign-in issued: the top of its chain, with its issuer and grant.
fn oauth_lease() -> SessionLease {
    SessionLease {
        parent_session_id: None,
        kind: LeaseKind::Issued,
        issued_by: Some("operator:bob".into()),
        grant_id: Some("grant-01".into()),
        rate: Some("20/s".into()),
        dpop_jkt: Some("0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I".into()),
        audience: "oauth:client-01".into(),
        ..lease(LeaseStatus::Active)
    }
}

fn target(status: TargetStatus, write_scope: WriteScope) -> ManagedTargetDescriptor {
    ManagedTargetDescriptor {
        target_id: "hub:test-alpha".into(),
        kind: "hub".into(),
        environment: "test".into(),
        status,
        transport: Transport {
            channel: "hub_root_protocol".into(),
        },
        operational_surface: OperationalSurface {
            published_by: "skill:infra_access_skill".into(),
            enabled: true,
            capabilities: vec!["hub.get_status".into(), "hub.run_healthchecks".into()],
        },
        policy: TargetPolicy { write_scope },
    }
}

fn event(
    surface: Surface,
    status: EventStatus,
    decision: Decision,
    reason: ErrorCode,
) -> OperationalEvent {
    OperationalEvent {
        event_id: "evt-01".into(),
        trace_id: "trace-01".into(),
        request_id: "req-01".into(),
        surface,
        actor: Actor {
            id: "lease:lease-01".into(),
            session_id: Some("lease-01".into()),
            audience: Some("codex".into()),
            capability_profile: Some("InfraOpsRead".into()),
        },
        target_id: Some("hub:test-alpha".into()),
        tool_id: "hub.get_status".into(),
        capability: Some("hub.get_status".into()),
        policy_decision: PolicyDecision {
            decision,
            reason: Some(reason),
            checks: vec!["capability_grant".into(), "environment_guard".into()],
        },
        execution_adapter: Some("infra_access.status".into()),
        dry_run: false,
        status,
        started_at: at("2026-11-29T10:00:00Z"),
        finished_at: at("2026-11-29T10:00:00.120Z"),
        request: json!({"tool_id": "hub.get_status", "arguments": {"token": "[redacted]"}}),
        result_summary: Some("hub online".into()),
        error: Some(tool_error(reason)),
        redactions: vec![Redaction {
            path: "request.arguments.token".into(),
            rule: "field:token".into(),
        }],
        retried: vec![RetriedAttempt {
            attempt: 1,
            code: ErrorCode::TargetOffline,
            message: "target `hub:test-alpha` disconnected during the call".into(),
        }],
    }
}

fn descriptor(stability: Stability) -> Descriptor {
    let content = json!({"index": [{"name": "tool-contract"}], "n": 1});
    Descriptor {
        freshness: Freshness {
            descriptor_id: "sdk.schemas".into(),
            source_kind: "repository".into(),
            source_ref: "schemas".into(),
            generated_at: at("2026-11-29T00:00:00Z"),
            fresh_until: at("2027-02-27T00:00:00Z"),
            cache_ttl_sec: 7_776_000,
            stability,
            content_hash: content_hash(&content),
        },
        class: "schema_registry".into(),
        title: "JSON Schemas".into(),
        content,
    }
}

fn skill_state() -> SkillState {
    SkillState {
        skill: "infra_access_skill".into(),
        installed: true,
        enabled: true,
        published: vec!["hub.get_status".into()],
        owner_disabled: true,
        version: Some("0.1.0".into()),
        adapters: vec!["hub.get_status".into()],
    }
}

fn call_request() -> CallRequest {
    CallRequest {
        call_id: "call-01".into(),
        trace_id: "trace-01".into(),
        tool_id: "hub.get_status".into(),
        capability: "hub.get_status".into(),
        body: mcp_shared::protocol::CallBody {
            arguments: json!({"verbose": true}),
            dry_run: true,
            idempotency_key: Some("idem-01".into()),
            confirmed_effect: Some(json!({"target": {"commit": "c0ffee"}})),
        },
        session_id: "lease-01".into(),
        expires_at_ms: 1_795_000_000_000,
        traceparent: Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into()),
        signature: "ab".repeat(32),
    }
}

/// One batch with a record of every kind.
fn evidence_batch() -> mcp_shared::protocol::Evidence {
    use mcp_shared::profiling::{
        ArtifactKind, ArtifactMeta, EvidenceRecord, Growth, Incident, Mode, Session, SessionState,
    };
    let (session, artifact, incident) = (
        "0199a1b2-0000-7000-8000-00000000000a",
        "0199a1b2-0000-7000-8000-00000000000b",
        "0199a1b2-0000-7000-8000-00000000000c",
    );
    let at = "2026-12-04T08:00:00Z";
    let content = r#"{"format":"mcp-hub.memory-profile/v1"}"#;
    mcp_shared::protocol::Evidence {
        epoch: "0199a1b2-0000-7000-8000-000000000001".into(),
        after: 12,
        upto: 15,
        records: vec![
            EvidenceRecord::Session(Session {
                session_id: session.into(),
                service: "demo-app".into(),
                mode: Mode::Profiling,
                interval_ms: 200,
                duration_sec: 2,
                state: SessionState::Completed,
                started_at: at.into(),
                ended_at: Some(at.into()),
                pid: Some(4242),
                samples: 11,
                retry_of: None,
                artifact_id: Some(artifact.into()),
                incident_ids: vec![incident.into()],
                growth: Some(Growth {
                    start_rss_bytes: 1000,
                    end_rss_bytes: 3000,
                    peak_rss_bytes: 3000,
                    growth_bytes: 2000,
                    growth_percent: Some(200.0),
                    slope_bytes_per_sec: Some(1000.0),
                }),
                published_at: None,
                error: None,
                heap: Some(Box::new(mcp_shared::profiling::HeapSummary {
                    format: "pprof".into(),
                    from_snapshot: Some("heap.4242.1.pb.gz".into()),
                    to_snapshot: "heap.4242.9.pb.gz".into(),
                    from_taken_at: Some(at.into()),
                    to_taken_at: at.into(),
                    from_artifact_id: Some("0199a1b2-0000-7000-8000-00000000000d".into()),
                    to_artifact_id: Some("0199a1b2-0000-7000-8000-00000000000e".into()),
                    snapshots_kept: 9,
                    skipped: vec![
                        "heap.7.1.pb.gz: written by process 7, not the session's 4242".into(),
                    ],
                    heap_bytes: 9_000_000,
                    growth_bytes: 8_000_000,
                    growth_objects: None,
                    symbolized: true,
                    top_sites: vec![mcp_shared::profiling::HeapSite {
                        function: "demo::leak_cache".into(),
                        frames: vec!["demo::leak_cache".into(), "demo::tick".into()],
                        growth_bytes: 7_900_000,
                        growth_objects: None,
                        bytes: 8_900_000,
                    }],
                    rss_from_bytes: Some(1000),
                    rss_to_bytes: Some(3000),
                })),
                heap_error: None,
            }),
            EvidenceRecord::Incident(Incident {
                incident_id: incident.into(),
                session_id: session.into(),
                service: "demo-app".into(),
                kind: "memory_growth".into(),
                raised_at: at.into(),
                window_started_at: at.into(),
                window_ended_at: at.into(),
                growth_bytes: 2000,
                growth_percent: Some(200.0),
                threshold_bytes: 1024,
                threshold_percent: 10.0,
                detail: "RSS grew by 2000 bytes".into(),
                top_site: Some("demo::leak_cache".into()),
            }),
            EvidenceRecord::Artifact {
                meta: ArtifactMeta {
                    artifact_id: artifact.into(),
                    session_id: session.into(),
                    service: "demo-app".into(),
                    created_at: at.into(),
                    size_bytes: content.len() as u64,
                    sha256: "ab".repeat(32),
                    kind: ArtifactKind::Samples,
                    format: None,
                    snapshot: None,
                },
                content: Some(content.into()),
            },
        ],
    }
}

fn root_to_hub_bodies() -> Vec<RootToHub> {
    let mut all = vec![
        RootToHub::Welcome {
            target_id: "hub:test-alpha".into(),
            heartbeat_interval_ms: 15_000,
            root_time_ms: Some(1_790_000_000_000),
            max_clock_skew_ms: Some(30_000),
            features: vec!["progress.total".into(), "evidence".into()],
            evidence: Some(mcp_shared::profiling::EvidenceCursor {
                epoch: "0199a1b2-0000-7000-8000-000000000001".into(),
                seq: 12,
            }),
        },
        RootToHub::Call(call_request()),
        RootToHub::Cancel {
            call_id: "call-01".into(),
        },
        RootToHub::Heartbeat,
        RootToHub::ProtocolError {
            message: "malformed frame".into(),
        },
    ];
    for command in skill_commands() {
        all.push(RootToHub::SkillCommand {
            skill: "infra_access_skill".into(),
            command,
        });
    }
    for body in &all {
        match body {
            RootToHub::Welcome { .. }
            | RootToHub::Call(_)
            | RootToHub::Cancel { .. }
            | RootToHub::SkillCommand { .. }
            | RootToHub::Heartbeat
            | RootToHub::ProtocolError { .. } => {}
        }
    }
    all
}

fn hub_to_root_bodies() -> Vec<HubToRoot> {
    let all = vec![
        HubToRoot::Hello {
            protocol_version: PROTOCOL_VERSION,
            token: "enrol-token".into(),
            descriptor: target(TargetStatus::Online, WriteScope::TestOnly),
            skills: vec![skill_state()],
            features: vec!["progress.total".into()],
        },
        HubToRoot::Progress {
            call_id: "call-01".into(),
            progress: 2.0,
            total: Some(4.0),
            message: Some("step 2 of 4: checkout".into()),
        },
        HubToRoot::Result {
            call_id: "call-01".into(),
            outcome: CallOutcome::Ok {
                adapter: "infra_access.status".into(),
                result: json!({"status": "online"}),
            },
        },
        HubToRoot::Result {
            call_id: "call-02".into(),
            outcome: CallOutcome::Error {
                adapter: Some("infra_access.status".into()),
                error: tool_error(ErrorCode::Timeout),
            },
        },
        HubToRoot::SurfaceChanged {
            descriptor: target(TargetStatus::Degraded, WriteScope::None),
            skills: vec![skill_state()],
        },
        HubToRoot::SkillState(skill_state()),
        HubToRoot::Evidence(evidence_batch()),
        HubToRoot::Heartbeat,
        HubToRoot::ProtocolError {
            message: "unsupported protocol version 9".into(),
        },
    ];
    for body in &all {
        match body {
            HubToRoot::Hello { .. }
            | HubToRoot::Progress { .. }
            | HubToRoot::Result { .. }
            | HubToRoot::SurfaceChanged { .. }
            | HubToRoot::SkillState(_)
            | HubToRoot::Evidence(_)
            | HubToRoot::Heartbeat
            | HubToRoot::ProtocolError { .. } => {}
        }
    }
    all
}

fn envelope<B: Serialize>(body: B) -> Value {
    to_json(&Envelope {
        v: PROTOCOL_VERSION,
        id: "msg-02".into(),
        in_reply_to: Some("msg-01".into()),
        body,
    })
}

fn type_of(body: &Value) -> String {
    body["type"]
        .as_str()
        .expect("bodies are tagged by type")
        .to_owned()
}

// ---------------------------------------------------------------------------------- tests

#[test]
fn tool_contract_schema_matches_the_type() {
    let s = Schema::load("tool-contract.schema.json");
    for side_effect in side_effects() {
        for routing in routings() {
            for stability in stabilities() {
                let v = to_json(&contract(side_effect, routing, stability));
                s.valid(
                    &format!("contract {side_effect:?}/{routing:?}/{stability:?}"),
                    &v,
                );
            }
        }
    }
    let full = to_json(&contract(
        SideEffectClass::Read,
        RoutingClass::DescriptiveCached,
        Stability::Stable,
    ));
    rust_round_trips::<ToolContract>(s.file, &full);
    s.same_fields("", &[&full]);
    s.same_fields("/$defs/concurrency_hint", &[&full["concurrency"]]);
    s.same_fields("/$defs/redaction_rules", &[&full["redaction"]]);
    s.same_fields("/$defs/descriptor_projection", &[&full["descriptor"]]);
    s.same_fields("/$defs/selector", &[&full["descriptor"]["select"]]);
    s.same_fields("/$defs/retention", &[&full["retain"]]);
    s.required("/$defs/retention", &["collection", "pointer", "key"]);
    s.required(
        "",
        &[
            "tool_id",
            "title",
            "summary",
            "input_schema",
            "output_schema",
            "side_effect",
            "routing",
            "required_capability",
            "allowed_environments",
            "timeout_ms",
            "concurrency",
            "stability",
            "plane",
        ],
    );
    s.required("/$defs/redaction_rules", &[]);
    s.required("/$defs/descriptor_projection", &["descriptor_id"]);
    s.same_enum("/properties/side_effect", &side_effects());
    s.same_enum("/properties/routing", &routings());
    s.same_enum("/properties/stability", &stabilities());

    let minimal = mutated(&full, |v| {
        let o = v.as_object_mut().expect("object");
        o.remove("redaction");
        o["routing"] = json!("operational_read");
        o.remove("descriptor");
        o.remove("executor");
        o.remove("retain");
        o.remove("proposes");
        o.remove("requires_approval");
    });
    s.valid("contract without optional fields", &minimal);
    serde_json::from_value::<ToolContract>(minimal).expect("serde accepts the minimal contract");

    let cases = [
        ("an unknown field", with_surplus(&full)),
        (
            "an unknown concurrency field",
            mutated(&full, |v| v["concurrency"]["per_call"] = json!(1)),
        ),
        (
            "an unknown selector field",
            mutated(&full, |v| v["descriptor"]["select"]["index"] = json!(0)),
        ),
        (
            "side_effect `explosive`",
            mutated(&full, |v| v["side_effect"] = json!("explosive")),
        ),
        (
            "routing `operational_guess`",
            mutated(&full, |v| v["routing"] = json!("operational_guess")),
        ),
        (
            "a missing required_capability",
            mutated(&full, |v| {
                v.as_object_mut().map(|o| o.remove("required_capability"));
            }),
        ),
        (
            "a negative timeout_ms",
            mutated(&full, |v| v["timeout_ms"] = json!(-1)),
        ),
    ];
    for (what, v) in &cases {
        s.invalid(&format!("contract with {what}"), v);
        rust_rejects::<ToolContract>(s.file, what, v);
    }
    s.invalid(
        "a descriptive_cached contract without a descriptor projection",
        &mutated(&full, |v| {
            v.as_object_mut().map(|o| o.remove("descriptor"));
        }),
    );
}

#[test]
fn session_lease_schema_matches_the_type() {
    let s = Schema::load("session-lease.schema.json");
    for status in lease_statuses() {
        s.valid(&format!("lease {status:?}"), &to_json(&lease(status)));
    }
    let full = to_json(&lease(LeaseStatus::Active));
    let oauth = to_json(&oauth_lease());
    s.valid("a lease of an OAuth sign-in", &oauth);
    rust_round_trips::<SessionLease>(s.file, &full);
    rust_round_trips::<SessionLease>(s.file, &oauth);
    s.same_fields("", &[&full, &oauth]);
    s.required(
        "",
        &[
            "session_id",
            "audience",
            "target_id",
            "subnet_id",
            "zone",
            "capability_profile",
            "effective_tools",
            "created_at",
            "deadline_at",
            "use_count",
            "status",
        ],
    );
    s.same_enum("/properties/status", &lease_statuses());
    s.same_enum(
        "/properties/kind",
        &[
            LeaseKind::Issued,
            LeaseKind::Minted,
            LeaseKind::Run,
            LeaseKind::Fleet,
        ],
    );

    let never_used = to_json(&SessionLease {
        last_used_at: None,
        ..lease(LeaseStatus::Active)
    });
    s.valid("a lease never used", &never_used);
    let absent = mutated(&never_used, |v| {
        v.as_object_mut().map(|o| o.remove("last_used_at"));
    });
    s.valid("a lease without last_used_at", &absent);
    serde_json::from_value::<SessionLease>(absent).expect("serde accepts a missing last_used_at");

    let cases = [
        ("an unknown field", with_surplus(&full)),
        (
            "status `paused`",
            mutated(&full, |v| v["status"] = json!("paused")),
        ),
        (
            "a created_at that is not RFC 3339",
            mutated(&full, |v| v["created_at"] = json!("yesterday")),
        ),
        (
            "a missing deadline_at",
            mutated(&full, |v| {
                v.as_object_mut().map(|o| o.remove("deadline_at"));
            }),
        ),
    ];
    for (what, v) in &cases {
        s.invalid(&format!("lease with {what}"), v);
        rust_rejects::<SessionLease>(s.file, what, v);
    }
}

#[test]
fn managed_target_schema_matches_the_type() {
    let s = Schema::load("managed-target.schema.json");
    for status in target_statuses() {
        for scope in write_scopes() {
            s.valid(
                &format!("target {status:?}/{scope:?}"),
                &to_json(&target(status, scope)),
            );
        }
    }
    let full = to_json(&target(TargetStatus::Online, WriteScope::TestOnly));
    rust_round_trips::<ManagedTargetDescriptor>(s.file, &full);
    s.same_fields("", &[&full]);
    s.same_fields("/$defs/transport", &[&full["transport"]]);
    s.same_fields(
        "/$defs/operational_surface",
        &[&full["operational_surface"]],
    );
    s.same_fields("/$defs/target_policy", &[&full["policy"]]);
    s.same_enum("/properties/status", &target_statuses());
    s.same_enum(
        "/$defs/target_policy/properties/write_scope",
        &write_scopes(),
    );

    // It travels in `hello`: a newer hub's fields are read and ignored.
    for (what, v) in [
        ("an unknown field", with_surplus(&full)),
        (
            "an unknown surface field",
            mutated(&full, |v| v["operational_surface"]["shell"] = json!(true)),
        ),
    ] {
        s.invalid(&format!("target with {what}"), &v);
        rust_ignores::<ManagedTargetDescriptor>(s.file, what, &v, &full);
    }
    let cases = [
        (
            "write_scope `test_only`",
            mutated(&full, |v| v["policy"]["write_scope"] = json!("test_only")),
        ),
        ("status `up`", mutated(&full, |v| v["status"] = json!("up"))),
    ];
    for (what, v) in &cases {
        s.invalid(&format!("target with {what}"), v);
        rust_rejects::<ManagedTargetDescriptor>(s.file, what, v);
    }
}

#[test]
fn operational_event_schema_matches_the_type() {
    let s = Schema::load("operational-event.schema.json");
    for surface in surfaces() {
        for status in event_statuses() {
            for decision in decisions() {
                for code in error_codes() {
                    let v = to_json(&event(surface, status, decision, code));
                    s.valid(
                        &format!("event {surface:?}/{status:?}/{decision:?}/{code}"),
                        &v,
                    );
                }
            }
        }
    }
    let full = to_json(&event(
        Surface::Mcp,
        EventStatus::Denied,
        Decision::Deny,
        ErrorCode::CapabilityNotGranted,
    ));
    rust_round_trips::<OperationalEvent>(s.file, &full);
    s.same_fields("", &[&full]);
    s.same_fields("/$defs/actor", &[&full["actor"]]);
    s.same_fields("/$defs/policy_decision", &[&full["policy_decision"]]);
    s.same_fields("/$defs/redaction", &[&full["redactions"][0]]);
    s.same_fields("/$defs/tool_error", &[&full["error"]]);
    s.required(
        "",
        &[
            "event_id",
            "trace_id",
            "request_id",
            "surface",
            "actor",
            "tool_id",
            "policy_decision",
            "dry_run",
            "status",
            "started_at",
            "finished_at",
            "request",
            "redactions",
        ],
    );
    s.required("/$defs/actor", &["id"]);
    s.required("/$defs/policy_decision", &["decision", "checks"]);
    s.same_enum("/properties/surface", &surfaces());
    s.same_enum("/properties/status", &event_statuses());
    s.same_enum("/$defs/policy_decision/properties/decision", &decisions());
    s.same_enum("/$defs/policy_decision/properties/reason", &error_codes());
    s.same_enum("/$defs/tool_error/properties/code", &error_codes());

    let sparse = to_json(&OperationalEvent {
        actor: Actor {
            id: "anonymous".into(),
            session_id: None,
            audience: None,
            capability_profile: None,
        },
        target_id: None,
        capability: None,
        policy_decision: PolicyDecision {
            decision: Decision::Allow,
            reason: None,
            checks: vec![],
        },
        execution_adapter: None,
        result_summary: None,
        error: None,
        redactions: vec![],
        ..event(
            Surface::Rest,
            EventStatus::Ok,
            Decision::Allow,
            ErrorCode::Internal,
        )
    });
    s.valid("an event with every optional field empty", &sparse);

    let cases = [
        ("an unknown field", with_surplus(&full)),
        (
            "an unknown actor field",
            mutated(&full, |v| v["actor"]["ip"] = json!("10.0.0.1")),
        ),
        (
            "surface `grpc`",
            mutated(&full, |v| v["surface"] = json!("grpc")),
        ),
        (
            "reason `nope`",
            mutated(&full, |v| v["policy_decision"]["reason"] = json!("nope")),
        ),
        (
            "error code `oops`",
            mutated(&full, |v| v["error"]["code"] = json!("oops")),
        ),
        (
            "a finished_at that is not RFC 3339",
            mutated(&full, |v| v["finished_at"] = json!("2026-11-29 10:00")),
        ),
    ];
    for (what, v) in &cases {
        s.invalid(&format!("event with {what}"), v);
        rust_rejects::<OperationalEvent>(s.file, what, v);
    }
}

#[test]
fn tool_error_schema_matches_the_type() {
    let s = Schema::load("tool-error.schema.json");
    for code in error_codes() {
        let v = to_json(&tool_error(code));
        s.valid(&format!("error {code}"), &v);
        s.valid(
            &format!("error {code} without details"),
            &to_json(&ToolError::new(code, "no details")),
        );
        rust_round_trips::<ToolError>(s.file, &v);
    }
    let full = to_json(&tool_error(ErrorCode::Busy));
    s.same_fields("", &[&full]);
    s.required("", &["code", "message", "retryable"]);
    s.same_enum("/properties/code", &error_codes());

    // It travels in `result` frames: a newer hub's fields are read and ignored.
    let surplus = with_surplus(&full);
    s.invalid("error with an unknown field", &surplus);
    rust_ignores::<ToolError>(s.file, "an unknown field", &surplus, &full);
    let cases = [
        (
            "code `teapot`",
            mutated(&full, |v| v["code"] = json!("teapot")),
        ),
        (
            "a missing message",
            mutated(&full, |v| {
                v.as_object_mut().map(|o| o.remove("message"));
            }),
        ),
    ];
    for (what, v) in &cases {
        s.invalid(&format!("error with {what}"), v);
        rust_rejects::<ToolError>(s.file, what, v);
    }
}

#[test]
fn tool_response_schema_matches_the_type() {
    let s = Schema::load("tool-response.schema.json");
    let ok = to_json(&ToolResponse {
        ok: true,
        tool_id: "sdk.get_metadata".into(),
        result: Some(json!({"data": {}, "stale": false})),
        error: None,
        event_id: "evt-01".into(),
        trace_id: "trace-01".into(),
        redactions: RedactionSummary {
            count: 3,
            paths: vec!["result.entries[0].lines[2]".into(), "result.token".into()],
        },
    });
    s.valid("an ok response", &ok);
    rust_round_trips::<ToolResponse>(s.file, &ok);
    let mut failures = Vec::new();
    for code in error_codes() {
        let v = to_json(&ToolResponse {
            ok: false,
            tool_id: "hub.get_status".into(),
            result: None,
            error: Some(tool_error(code)),
            event_id: "evt-02".into(),
            trace_id: "trace-02".into(),
            redactions: RedactionSummary::default(),
        });
        s.valid(&format!("a failed response ({code})"), &v);
        rust_round_trips::<ToolResponse>(s.file, &v);
        failures.push(v);
    }
    s.same_fields("", &[&ok, &failures[0]]);
    s.same_fields("/$defs/tool_error", &[&failures[0]["error"]]);
    s.same_fields("/$defs/redaction_summary", &[&ok["redactions"]]);
    s.required("", &["ok", "tool_id", "event_id", "trace_id", "redactions"]);
    s.same_enum("/$defs/error_code", &error_codes());

    let cases = [
        ("an unknown field", with_surplus(&ok)),
        (
            "error code `gone`",
            mutated(&failures[0], |v| v["error"]["code"] = json!("gone")),
        ),
        (
            "a missing event_id",
            mutated(&ok, |v| {
                v.as_object_mut().map(|o| o.remove("event_id"));
            }),
        ),
        (
            "a redaction summary with a value",
            mutated(&ok, |v| v["redactions"]["value"] = json!("s3cr3t")),
        ),
    ];
    for (what, v) in &cases {
        s.invalid(&format!("response with {what}"), v);
        rust_rejects::<ToolResponse>(s.file, what, v);
    }
    s.invalid(
        "a redaction path outside the answer",
        &mutated(&ok, |v| {
            v["redactions"]["paths"][0] = json!("request.arguments.token")
        }),
    );
    s.invalid(
        "ok false without an error",
        &mutated(&failures[0], |v| {
            v.as_object_mut().map(|o| o.remove("error"));
        }),
    );
    s.invalid(
        "ok true with an error",
        &mutated(&failures[0], |v| v["ok"] = json!(true)),
    );
}

#[test]
fn descriptor_schema_matches_the_type() {
    let s = Schema::load("descriptor.schema.json");
    for stability in stabilities() {
        s.valid(
            &format!("descriptor {stability:?}"),
            &to_json(&descriptor(stability)),
        );
    }
    let full = to_json(&descriptor(Stability::Stable));
    rust_round_trips::<Descriptor>(s.file, &full);
    s.same_fields("", &[&full]);
    s.required(
        "",
        &[
            "descriptor_id",
            "source_kind",
            "source_ref",
            "generated_at",
            "fresh_until",
            "cache_ttl_sec",
            "stability",
            "content_hash",
            "class",
            "title",
            "content",
        ],
    );
    s.same_enum("/properties/stability", &stabilities());

    let cases = [
        ("an unknown field", with_surplus(&full)),
        (
            "stability `beta`",
            mutated(&full, |v| v["stability"] = json!("beta")),
        ),
        (
            "a fresh_until that is not RFC 3339",
            mutated(&full, |v| v["fresh_until"] = json!("next year")),
        ),
        (
            "a missing content_hash",
            mutated(&full, |v| {
                v.as_object_mut().map(|o| o.remove("content_hash"));
            }),
        ),
    ];
    for (what, v) in &cases {
        s.invalid(&format!("descriptor with {what}"), v);
        rust_rejects::<Descriptor>(s.file, what, v);
    }
    s.invalid(
        "a content_hash without the sha256: prefix",
        &mutated(&full, |v| v["content_hash"] = json!("deadbeef")),
    );
}

#[test]
fn capability_profiles_schema_matches_the_type() {
    let s = Schema::load("capability-profiles.schema.json");
    let full = to_json(&ProfileRegistry {
        profiles: vec![CapabilityProfile {
            name: "AdaOSDevRead".into(),
            plane: "AdaOSDevPlane".into(),
            description: "Read the development descriptors".into(),
            capabilities: vec!["sdk.read.metadata".into(), "sdk.read.schemas".into()],
        }],
    });
    s.valid("a profile registry", &full);
    rust_round_trips::<ProfileRegistry>(s.file, &full);
    s.same_fields("", &[&full]);
    s.same_fields("/$defs/capability_profile", &[&full["profile"][0]]);

    let cases = [
        ("an unknown field", with_surplus(&full)),
        (
            "an unknown profile field",
            mutated(&full, |v| v["profile"][0]["tools"] = json!([])),
        ),
        (
            "a profile without capabilities",
            mutated(&full, |v| {
                v["profile"][0]
                    .as_object_mut()
                    .map(|o| o.remove("capabilities"));
            }),
        ),
    ];
    for (what, v) in &cases {
        s.invalid(&format!("registry with {what}"), v);
        rust_rejects::<ProfileRegistry>(s.file, what, v);
    }
}

#[test]
fn protocol_envelope_schema_matches_the_types() {
    let s = Schema::load("protocol-envelope.schema.json");
    assert_eq!(
        s.at("/properties/v")["const"],
        json!(PROTOCOL_VERSION),
        "{}: /properties/v must be the const PROTOCOL_VERSION",
        s.file
    );

    let root_bodies: Vec<Value> = root_to_hub_bodies().iter().map(to_json).collect();
    let hub_bodies: Vec<Value> = hub_to_root_bodies().iter().map(to_json).collect();
    for body in root_to_hub_bodies() {
        let v = envelope(&body);
        s.valid(&format!("root→hub {}", type_of(&v["body"])), &v);
        rust_round_trips::<Envelope<RootToHub>>(s.file, &v);
    }
    for body in hub_to_root_bodies() {
        let v = envelope(&body);
        s.valid(&format!("hub→root {}", type_of(&v["body"])), &v);
        rust_round_trips::<Envelope<HubToRoot>>(s.file, &v);
    }
    let no_reply = to_json(&Envelope {
        v: PROTOCOL_VERSION,
        id: "msg-01".into(),
        in_reply_to: None,
        body: HubToRoot::Heartbeat,
    });
    s.valid("an envelope without in_reply_to", &no_reply);

    // Message types: each direction's oneOf lists exactly its Rust variants, and the body's
    // oneOf is their union.
    let root_types: BTreeSet<String> = root_bodies.iter().map(type_of).collect();
    let hub_types: BTreeSet<String> = hub_bodies.iter().map(type_of).collect();
    assert_eq!(
        s.tags("/$defs/root_to_hub_body", "type"),
        root_types,
        "{}: /$defs/root_to_hub_body differs from the RootToHub variants",
        s.file
    );
    assert_eq!(
        s.tags("/$defs/hub_to_root_body", "type"),
        hub_types,
        "{}: /$defs/hub_to_root_body differs from the HubToRoot variants",
        s.file
    );
    assert_eq!(
        s.tags("/properties/body", "type"),
        root_types.union(&hub_types).cloned().collect(),
        "{}: /properties/body must list every message type once",
        s.file
    );
    assert_eq!(
        s.tags("/$defs/call_outcome", "status"),
        ["ok", "error"].into_iter().map(String::from).collect(),
        "{}: /$defs/call_outcome differs from the CallOutcome variants",
        s.file
    );

    // Fields of every message, the outcomes and the embedded target descriptor.
    for body in root_bodies.iter().chain(&hub_bodies) {
        s.same_fields(&format!("/$defs/{}", type_of(body)), &[body]);
    }
    let outcomes: Vec<&Value> = hub_bodies
        .iter()
        .filter(|b| b["type"] == "result")
        .map(|b| &b["outcome"])
        .collect();
    for outcome in &outcomes {
        let status = outcome["status"].as_str().unwrap_or_default();
        s.same_fields(&format!("/$defs/call_outcome_{status}"), &[outcome]);
    }
    let hello = &hub_bodies[0];
    s.same_fields("/$defs/managed_target", &[&hello["descriptor"]]);
    s.same_fields("/$defs/transport", &[&hello["descriptor"]["transport"]]);
    s.same_fields(
        "/$defs/operational_surface",
        &[&hello["descriptor"]["operational_surface"]],
    );
    s.same_fields("/$defs/target_policy", &[&hello["descriptor"]["policy"]]);
    s.same_fields("/$defs/tool_error", &[&hub_bodies[3]["outcome"]["error"]]);
    s.same_fields("", &[&envelope(HubToRoot::Heartbeat)]);
    s.required("", &["v", "id", "body"]);
    s.required(
        "/$defs/call",
        &[
            "type",
            "call_id",
            "trace_id",
            "tool_id",
            "capability",
            "arguments",
            "session_id",
            "dry_run",
            "expires_at_ms",
            "signature",
        ],
    );
    s.required("/$defs/progress", &["type", "call_id", "progress"]);
    s.required("/$defs/call_outcome_error", &["status", "error"]);
    s.same_enum("/$defs/skill_command/properties/command", &skill_commands());
    s.same_enum(
        "/$defs/managed_target/properties/status",
        &target_statuses(),
    );
    s.same_enum(
        "/$defs/target_policy/properties/write_scope",
        &write_scopes(),
    );
    s.same_enum("/$defs/error_code", &error_codes());

    let call = envelope(RootToHub::Call(call_request()));
    let hello = envelope(&hub_bodies[0]);
    // A newer peer's fields are ignored (never obeyed: the hub acts on the signed fields it
    // knows); the schema still says they are not part of this version.
    let unknown = [
        ("an unknown envelope field", with_surplus(&call)),
        (
            "an unknown call field",
            mutated(&call, |v| v["body"]["shell"] = json!("rm -rf /")),
        ),
    ];
    for (what, v) in &unknown {
        s.invalid(&format!("envelope with {what}"), v);
        rust_ignores::<Envelope<RootToHub>>(s.file, what, v, &call);
    }
    let unknown_hello = mutated(&hello, |v| v["body"]["secret"] = json!("x"));
    s.invalid("envelope with an unknown hello field", &unknown_hello);
    rust_ignores::<Envelope<HubToRoot>>(s.file, "an unknown hello field", &unknown_hello, &hello);
    let root_cases = [
        (
            "type `launch_missiles`",
            mutated(&call, |v| v["body"]["type"] = json!("launch_missiles")),
        ),
        (
            "skill command `purge`",
            envelope(json!({"type": "skill_command", "skill": "s", "command": "purge"})),
        ),
        (
            "a call without signature",
            mutated(&call, |v| {
                v["body"].as_object_mut().map(|o| o.remove("signature"));
            }),
        ),
    ];
    for (what, v) in &root_cases {
        s.invalid(&format!("envelope with {what}"), v);
        rust_rejects::<Envelope<RootToHub>>(s.file, what, v);
    }
    let hub_cases = [
        (
            "a descriptor with status `up`",
            mutated(&hello, |v| v["body"]["descriptor"]["status"] = json!("up")),
        ),
        (
            "an outcome with status `maybe`",
            envelope(
                json!({"type": "result", "call_id": "c", "outcome": {"status": "maybe", "adapter": "a", "result": null}}),
            ),
        ),
    ];
    for (what, v) in &hub_cases {
        s.invalid(&format!("envelope with {what}"), v);
        rust_rejects::<Envelope<HubToRoot>>(s.file, what, v);
    }
    // serde ignores extra fields next to the tag of a unit variant even with
    // deny_unknown_fields, so only the schema refuses this one.
    s.invalid(
        "a heartbeat with a payload",
        &envelope(json!({"type": "heartbeat", "payload": 1})),
    );
    s.invalid(
        "a root→hub message type sent by a hub",
        &envelope(json!({"type": "welcome", "target_id": "t"})),
    );
    s.invalid("protocol version 2", &mutated(&call, |v| v["v"] = json!(2)));
}

/// Each schema is self-contained, so shared shapes are copied into `$defs`; the copies must
/// stay identical to their source schema.
#[test]
fn copied_definitions_match_their_source_schemas() {
    let error = Schema::load("tool-error.schema.json");
    let target = Schema::load("managed-target.schema.json");
    let event = Schema::load("operational-event.schema.json");
    let response = Schema::load("tool-response.schema.json");
    let protocol = Schema::load("protocol-envelope.schema.json");
    for s in [&event, &response, &protocol] {
        s.same_shape("/$defs/tool_error", &error, "");
        s.same_shape("/$defs/error_code", &error, "/$defs/error_code");
    }
    let replica = Schema::load("replica-channel.schema.json");
    replica.same_shape("/$defs/tool_error", &error, "");
    replica.same_shape("/$defs/error_code", &error, "/$defs/error_code");
    for def in [
        "call_outcome",
        "call_outcome_ok",
        "call_outcome_error",
        "skill_state_fields",
    ] {
        let pointer = format!("/$defs/{def}");
        replica.same_shape(&pointer, &protocol, &pointer);
    }
    protocol.same_shape("/$defs/managed_target", &target, "");
    for def in ["transport", "operational_surface", "target_policy"] {
        let pointer = format!("/$defs/{def}");
        protocol.same_shape(&pointer, &target, &pointer);
    }
}

#[test]
fn every_schema_file_is_checked() {
    let checked: BTreeSet<&str> = [
        "tool-contract.schema.json",
        "session-lease.schema.json",
        "managed-target.schema.json",
        "operational-event.schema.json",
        "tool-error.schema.json",
        "tool-response.schema.json",
        "descriptor.schema.json",
        "capability-profiles.schema.json",
        "protocol-envelope.schema.json",
        "skill-catalog.schema.json",
        "replica-channel.schema.json",
        "run-profile.schema.json",
        "tool-profile.schema.json",
    ]
    .into_iter()
    .collect();
    let dir = repo().join("schemas");
    for entry in std::fs::read_dir(&dir).expect("schemas/ exists") {
        let name = entry.expect("readable entry").file_name();
        let name = name.to_string_lossy();
        if name.ends_with(".schema.json") {
            assert!(
                checked.contains(name.as_ref()),
                "schemas/{name} has no drift test in shared/tests/schemas.rs"
            );
        }
    }
}

#[test]
fn skill_catalog_schema_matches_the_types() {
    use mcp_shared::skill_catalog::{
        CatalogContent, MANIFEST_VERSION, OWNER_APPLICATION, Ontology, ResourceMeta, SkillEntry,
        SkillRef,
    };
    let s = Schema::load("skill-catalog.schema.json");
    let sha = "a".repeat(64);
    let text = "---\nname: root-descriptors\ndescription: d\n---\n# body\n";
    let entry = SkillEntry {
        name: "root_descriptors".into(),
        id: "root-descriptors".into(),
        path: "skills/ops/root_descriptors/SKILL.md".into(),
        description: "d".into(),
        mime_type: "text/markdown".into(),
        size: text.len() as u64,
        content_sha256: sha.clone(),
        text: text.into(),
    };
    let content = to_json(&CatalogContent {
        manifest_version: MANIFEST_VERSION,
        owner_application: OWNER_APPLICATION.into(),
        manifest_sha256: sha.clone(),
        skills: vec![entry],
    });
    s.valid("a catalog", &content);
    rust_round_trips::<CatalogContent>(s.file, &content);
    s.same_fields("", &[&content]);
    s.same_fields("/$defs/skill_entry", &[&content["skills"][0]]);
    for (what, v) in [
        ("an unknown field", with_surplus(&content)),
        (
            "a traversing path",
            mutated(&content, |v| {
                v["skills"][0]["path"] = json!("skills/../x/SKILL.md")
            }),
        ),
        (
            "a kebab resource name",
            mutated(&content, |v| {
                v["skills"][0]["name"] = json!("root-descriptors")
            }),
        ),
        (
            "another MIME type",
            mutated(&content, |v| {
                v["skills"][0]["mime_type"] = json!("text/plain")
            }),
        ),
    ] {
        s.invalid(&format!("a catalog with {what}"), &v);
    }
    rust_rejects::<CatalogContent>(s.file, "an unknown field", &with_surplus(&content));

    let meta = to_json(&ResourceMeta {
        owner_application: OWNER_APPLICATION.into(),
        manifest_version: MANIFEST_VERSION,
        manifest_sha256: sha.clone(),
        path: "skills/ops/root_descriptors/SKILL.md".into(),
        content_sha256: sha.clone(),
        mime_type: "text/markdown".into(),
        size: 10,
    });
    s.same_fields("/$defs/resource_meta", &[&meta]);
    rust_round_trips::<ResourceMeta>(s.file, &meta);
    rust_rejects::<ResourceMeta>(s.file, "an unknown field", &with_surplus(&meta));

    let ontology = to_json(&Ontology {
        manifest_version: MANIFEST_VERSION,
        manifest_sha256: sha,
        owner_application: OWNER_APPLICATION.into(),
        skill_resources: vec![SkillRef {
            name: "root_descriptors".into(),
            uri: "mcp-root://platform/skills/root-descriptors".into(),
            path: "skills/ops/root_descriptors/SKILL.md".into(),
            description: "d".into(),
        }],
    });
    s.same_fields("/$defs/ontology", &[&ontology]);
    s.same_fields("/$defs/skill_ref", &[&ontology["skill_resources"][0]]);
    rust_round_trips::<Ontology>(s.file, &ontology);
    rust_rejects::<Ontology>(s.file, "an unknown field", &with_surplus(&ontology));
}

fn replica_calls() -> Vec<ReplicaCall> {
    let mut all = vec![
        ReplicaCall::Route {
            target_id: "hub:test-alpha".into(),
            call_id: "call-01".into(),
            trace_id: "trace-01".into(),
            session_id: "lease-01".into(),
            tool_id: "hub.get_status".into(),
            capability: "hub.get_status".into(),
            body: mcp_shared::protocol::CallBody {
                arguments: json!({"verbose": true}),
                dry_run: false,
                idempotency_key: Some("idem-01".into()),
                confirmed_effect: Some(json!({"target": {"commit": "c0ffee"}})),
            },
            remaining_ms: 4_500,
        },
        ReplicaCall::Cancel {
            target_id: "hub:test-alpha".into(),
            call_id: "call-01".into(),
        },
    ];
    for command in skill_commands() {
        all.push(ReplicaCall::Skill {
            target_id: "hub:test-alpha".into(),
            skill: "infra_access_skill".into(),
            command,
        });
    }
    for body in &all {
        match body {
            ReplicaCall::Route { .. } | ReplicaCall::Cancel { .. } | ReplicaCall::Skill { .. } => {}
        }
    }
    all
}

fn replica_answers() -> Vec<ReplicaAnswer> {
    let all = vec![
        ReplicaAnswer::Routed {
            outcome: CallOutcome::Ok {
                adapter: "infra_access.status".into(),
                result: json!({"status": "online"}),
            },
        },
        ReplicaAnswer::Routed {
            outcome: CallOutcome::Error {
                adapter: Some("infra_access.status".into()),
                error: tool_error(ErrorCode::Timeout),
            },
        },
        ReplicaAnswer::Cancelled,
        ReplicaAnswer::SkillState {
            state: skill_state(),
        },
        ReplicaAnswer::Refused {
            error: tool_error(ErrorCode::TargetOffline),
        },
    ];
    for body in &all {
        match body {
            ReplicaAnswer::Routed { .. }
            | ReplicaAnswer::Cancelled
            | ReplicaAnswer::SkillState { .. }
            | ReplicaAnswer::Refused { .. } => {}
        }
    }
    all
}

fn replica_envelope<B: Serialize>(body: B) -> Value {
    to_json(&ReplicaEnvelope {
        v: REPLICA_PROTOCOL_VERSION,
        body,
    })
}

#[test]
fn replica_channel_schema_matches_the_types() {
    let s = Schema::load("replica-channel.schema.json");
    assert_eq!(
        s.at("/properties/v")["const"],
        json!(REPLICA_PROTOCOL_VERSION),
        "{}: /properties/v must be the const REPLICA_PROTOCOL_VERSION",
        s.file
    );
    let calls: Vec<Value> = replica_calls().iter().map(to_json).collect();
    let answers: Vec<Value> = replica_answers().iter().map(to_json).collect();
    for body in replica_calls() {
        let v = replica_envelope(&body);
        s.valid(&format!("request {}", type_of(&v["body"])), &v);
        rust_round_trips::<ReplicaEnvelope<ReplicaCall>>(s.file, &v);
    }
    for body in replica_answers() {
        let v = replica_envelope(&body);
        s.valid(&format!("answer {}", type_of(&v["body"])), &v);
        rust_round_trips::<ReplicaEnvelope<ReplicaAnswer>>(s.file, &v);
    }
    let call_types: BTreeSet<String> = calls.iter().map(type_of).collect();
    let answer_types: BTreeSet<String> = answers.iter().map(type_of).collect();
    assert_eq!(
        s.tags("/$defs/replica_call", "type"),
        call_types,
        "{}: /$defs/replica_call differs from the ReplicaCall variants",
        s.file
    );
    assert_eq!(
        s.tags("/$defs/replica_answer", "type"),
        answer_types,
        "{}: /$defs/replica_answer differs from the ReplicaAnswer variants",
        s.file
    );
    assert_eq!(
        s.tags("/properties/body", "type"),
        call_types.union(&answer_types).cloned().collect(),
        "{}: /properties/body must list every message type once",
        s.file
    );
    for body in &calls {
        s.same_fields(&format!("/$defs/{}", type_of(body)), &[body]);
    }
    // One instance per answer type; both routed outcomes for the outcome fields.
    for t in &answer_types {
        let of_type: Vec<&Value> = answers.iter().filter(|a| &type_of(a) == t).collect();
        s.same_fields(&format!("/$defs/{t}"), &of_type);
    }
    s.same_fields("/$defs/skill_state_fields", &[&answers[3]["state"]]);
    s.same_fields("/$defs/tool_error", &[&answers[4]["error"]]);
    s.same_fields("", &[&replica_envelope(ReplicaAnswer::Cancelled)]);
    s.required("", &["v", "body"]);
    s.required(
        "/$defs/route",
        &[
            "type",
            "target_id",
            "call_id",
            "trace_id",
            "session_id",
            "tool_id",
            "capability",
            "arguments",
            "dry_run",
            "remaining_ms",
        ],
    );
    s.same_enum("/$defs/skill/properties/command", &skill_commands());
    s.same_enum("/$defs/error_code", &error_codes());

    let route = replica_envelope(&replica_calls()[0]);
    let call_cases = [
        ("an unknown envelope field", with_surplus(&route)),
        (
            "an unknown route field",
            mutated(&route, |v| v["body"]["expires_at_ms"] = json!(1)),
        ),
        (
            "type `shell`",
            mutated(&route, |v| v["body"]["type"] = json!("shell")),
        ),
        (
            "a negative remaining_ms",
            mutated(&route, |v| v["body"]["remaining_ms"] = json!(-1)),
        ),
        (
            "a route without target_id",
            mutated(&route, |v| {
                v["body"].as_object_mut().map(|o| o.remove("target_id"));
            }),
        ),
        (
            "skill command `purge`",
            replica_envelope(
                json!({"type": "skill", "target_id": "t", "skill": "s", "command": "purge"}),
            ),
        ),
    ];
    for (what, v) in &call_cases {
        s.invalid(&format!("request with {what}"), v);
        rust_rejects::<ReplicaEnvelope<ReplicaCall>>(s.file, what, v);
    }
    let answer_cases = [(
        "an outcome with status `maybe`",
        replica_envelope(
            json!({"type": "routed", "outcome": {"status": "maybe", "adapter": "a", "result": null}}),
        ),
    )];
    for (what, v) in &answer_cases {
        s.invalid(&format!("answer with {what}"), v);
        rust_rejects::<ReplicaEnvelope<ReplicaAnswer>>(s.file, what, v);
    }
    s.invalid(
        "replica channel version 2",
        &mutated(&route, |v| v["v"] = json!(2)),
    );
}

fn phases() -> Vec<mcp_shared::run_profile::Phase> {
    use mcp_shared::run_profile::Phase;
    let all = vec![Phase::Preview, Phase::Execute];
    for c in &all {
        match c {
            Phase::Preview | Phase::Execute => {}
        }
    }
    all
}

/// A signed run profile with every optional field present and one action per side effect.
fn run_profile() -> mcp_shared::run_profile::RunProfile {
    use mcp_shared::run_profile::*;
    let token_ref = "lease:lease-01".to_string();
    let mut p = RunProfile {
        schema_version: RUN_PROFILE_VERSION.into(),
        run_id: "lease-01".into(),
        created_at: at("2026-06-19T00:00:00Z"),
        expires_at: at("2026-06-19T00:10:00Z"),
        audience: "mcp-client".into(),
        request_id: "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b".into(),
        owner: Owner {
            owner_key: "lease:lease-01".into(),
            session_id: "lease-01".into(),
            role: "InfraOpsControl".into(),
            groups: vec![
                "zone:zone-local".into(),
                "subnet:subnet-a".into(),
                "target:hub:test-alpha".into(),
            ],
            requested_by: "operator".into(),
        },
        source_surface: Surface::Admin,
        active_context: ActiveContext {
            target_id: "hub:test-alpha".into(),
            subnet_id: "subnet-a".into(),
            zone: "zone-local".into(),
            environment: Some("test".into()),
            lease_deadline_at: at("2026-06-19T01:00:00Z"),
        },
        tool_profile: ToolProfile {
            schema_version: TOOL_PROFILE_VERSION.into(),
            enabled_tool_packs: vec!["InfraOpsPlane".into()],
            mcp_servers: vec![McpServer {
                name: "root".into(),
                transport: "streamable-http".into(),
                endpoint: "/mcp".into(),
                token_ref: token_ref.clone(),
            }],
            assistant_actions: AssistantActions {
                schema_version: ASSISTANT_ACTIONS_VERSION.into(),
                endpoint: "/v1/root/mcp/call".into(),
                action_ids: vec!["hub.get_status".into(), "hub.run_allowed_tests".into()],
                phases: phases(),
                actions: vec![
                    ActionGrant {
                        action_id: "hub.get_status".into(),
                        side_effect: SideEffectClass::Read,
                        phases: vec![Phase::Execute],
                    },
                    ActionGrant {
                        action_id: "hub.run_allowed_tests".into(),
                        side_effect: SideEffectClass::Write,
                        phases: phases(),
                    },
                ],
                token_ref,
            },
        },
        policy_prompt: "Call only the listed actions.".into(),
        integrity: None,
    };
    p.seal(&[9u8; 32]);
    p
}

#[test]
fn run_profile_schemas_match_the_types() {
    use mcp_shared::run_profile::{Integrity, RunProfile, ToolProfile};
    let s = Schema::load("run-profile.schema.json");
    let tools = Schema::load("tool-profile.schema.json");
    let full = to_json(&run_profile());
    s.valid("a signed run profile", &full);
    rust_round_trips::<RunProfile>(s.file, &full);
    s.same_fields("", &[&full]);
    s.required(
        "",
        &[
            "schemaVersion",
            "runId",
            "createdAt",
            "expiresAt",
            "audience",
            "requestId",
            "owner",
            "sourceSurface",
            "activeContext",
            "toolProfile",
            "policyPrompt",
        ],
    );
    s.same_fields("/$defs/owner", &[&full["owner"]]);
    s.same_fields("/$defs/active_context", &[&full["activeContext"]]);
    s.same_fields("/$defs/integrity", &[&full["integrity"]]);
    s.same_enum("/properties/sourceSurface", &surfaces());
    let tp = &full["toolProfile"];
    tools.valid("the tool profile", tp);
    rust_round_trips::<ToolProfile>(tools.file, tp);
    tools.same_fields("", &[tp]);
    tools.same_fields("/$defs/mcp_server", &[&tp["mcpServers"][0]]);
    tools.same_fields("/$defs/assistant_actions", &[&tp["assistantActions"]]);
    let actions = &tp["assistantActions"]["actions"];
    tools.same_fields("/$defs/action_grant", &[&actions[0], &actions[1]]);
    tools.same_enum("/$defs/phase", &phases());
    tools.same_enum("/$defs/action_grant/properties/sideEffect", &side_effects());
    for def in ["mcp_server", "assistant_actions", "action_grant", "phase"] {
        let pointer = format!("/$defs/{def}");
        s.same_shape(&pointer, &tools, &pointer);
    }
    s.same_shape("/$defs/tool_profile", &tools, "");
    for (what, value) in [
        (
            "schemaVersion",
            json!(mcp_shared::run_profile::RUN_PROFILE_VERSION),
        ),
        (
            "toolProfile/schemaVersion",
            json!(mcp_shared::run_profile::TOOL_PROFILE_VERSION),
        ),
        (
            "toolProfile/assistantActions/schemaVersion",
            json!(mcp_shared::run_profile::ASSISTANT_ACTIONS_VERSION),
        ),
        (
            "integrity/algorithm",
            json!(mcp_shared::run_profile::INTEGRITY_ALGORITHM),
        ),
        (
            "integrity/canonicalization",
            json!(mcp_shared::run_profile::CANONICALIZATION),
        ),
    ] {
        assert_eq!(full.pointer(&format!("/{what}")), Some(&value), "{what}");
    }
    assert_eq!(
        s.at("/properties/schemaVersion")["const"],
        full["schemaVersion"]
    );

    let unsigned = mutated(&full, |v| {
        v.as_object_mut().map(|o| o.remove("integrity"));
    });
    s.valid("a profile being signed (no integrity)", &unsigned);
    serde_json::from_value::<RunProfile>(unsigned).expect("serde accepts a missing integrity");
    let no_env = mutated(&full, |v| {
        v["activeContext"]
            .as_object_mut()
            .map(|o| o.remove("environment"));
    });
    s.valid("a profile of a target not enrolled", &no_env);

    let cases = [
        ("an unknown field", with_surplus(&full)),
        (
            "an unknown owner field",
            mutated(&full, |v| {
                v["owner"]["email"] = json!("someone@example.org")
            }),
        ),
        (
            "sourceSurface `engine`",
            mutated(&full, |v| v["sourceSurface"] = json!("engine")),
        ),
        (
            "phase `delete`",
            mutated(&full, |v| {
                v["toolProfile"]["assistantActions"]["phases"][0] = json!("delete")
            }),
        ),
        (
            "an expiresAt that is not RFC 3339",
            mutated(&full, |v| v["expiresAt"] = json!("in ten minutes")),
        ),
        (
            "a missing runId",
            mutated(&full, |v| {
                v.as_object_mut().map(|o| o.remove("runId"));
            }),
        ),
    ];
    for (what, v) in &cases {
        s.invalid(&format!("run profile with {what}"), v);
        rust_rejects::<RunProfile>(s.file, what, v);
    }
    for (what, v) in [
        (
            "a bearer in tokenRef",
            mutated(&full, |v| {
                v["toolProfile"]["assistantActions"]["tokenRef"] = json!("Bearer mcpl_x")
            }),
        ),
        (
            "an absolute endpoint",
            mutated(&full, |v| {
                v["toolProfile"]["mcpServers"][0]["endpoint"] = json!("http://10.0.0.5:8700/mcp")
            }),
        ),
        (
            "another schemaVersion",
            mutated(&full, |v| {
                v["schemaVersion"] = json!("ai-workspace.run-profile.v2")
            }),
        ),
    ] {
        s.invalid(&format!("run profile with {what}"), &v);
    }
    rust_rejects::<Integrity>(
        s.file,
        "an unknown field",
        &with_surplus(&full["integrity"]),
    );
}
