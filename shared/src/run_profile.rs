//! Run profiles for generic workers: seed 003 ("AI Workspace Protocol v1") mapped onto root's
//! leases. `ai-workspace.run-profile.v1` is everything a generic worker needs besides root's
//! URL to run under one lease; its `toolProfile` (`ai-workspace.tool-profile.v1`) lists the
//! tools and phases the lease may use, with endpoints relative to root and a `tokenRef` naming
//! the lease instead of any bearer. Root derives both from a lease and signs the run profile;
//! only root can verify it (the key never leaves root).
//!
//! Integrity: `integrity.signature` is the hex HMAC-SHA256, under a key derived from root's
//! master key, of the canonical JSON of the whole document with its `integrity` member
//! removed. Canonical JSON (`mcp-root/canonical-json/v1`, [`crate::canonical`]): object keys
//! sorted by their UTF-8 bytes, no whitespace anywhere, arrays in their order, strings with
//! serde_json's minimal escapes (`\"`, `\\`, `\n`, `\r`, `\t`, `\b`, `\f`, other control
//! characters as `\u00xx`; everything else, `/` and non-ASCII included, as UTF-8), numbers as
//! serde_json writes them. `integrity.keyId` names the key (an HMAC of a fixed label under it),
//! so a profile from another root is "signed with an unknown key", not "tampered".
//!
//! Invariant: a run profile never holds a bearer, a hub token, the admin token, a key or an
//! internal URL: endpoints are paths relative to root's public URL and tokens are references.

use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::Sha256;
use time::OffsetDateTime;

use crate::contract::SideEffectClass;
use crate::event::Surface;

/// `schemaVersion` of a run profile.
pub const RUN_PROFILE_VERSION: &str = "ai-workspace.run-profile.v1";
/// `schemaVersion` of a tool profile.
pub const TOOL_PROFILE_VERSION: &str = "ai-workspace.tool-profile.v1";
/// `schemaVersion` of a tool profile's `assistantActions`.
pub const ASSISTANT_ACTIONS_VERSION: &str = "ai-workspace.assistant-actions.v1";
/// `integrity.algorithm`: the only one root signs with or accepts.
pub const INTEGRITY_ALGORITHM: &str = "HMAC-SHA256";
/// `integrity.canonicalization`: the byte form the signature covers (see the module doc).
pub const CANONICALIZATION: &str = "mcp-root/canonical-json/v1";
/// Derivation label of the run-profile signing key (input to root's `MasterKey::derive_key`).
pub const KEY_PURPOSE: &str = "mcp-root/run-profile/v1";

type HmacSha256 = Hmac<Sha256>;

/// `ai-workspace.run-profile.v1`: one lease as a signed, short-lived run description.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RunProfile {
    pub schema_version: String,
    /// The lease's session id: the run is the lease.
    pub run_id: String,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    /// Short: at most ten minutes after `created_at`, never after the lease's deadline.
    #[serde(with = "time::serde::rfc3339")]
    pub expires_at: OffsetDateTime,
    /// The recipient class, the lease's audience (e.g. `mcp-client`).
    pub audience: String,
    /// Fresh for every document root issues (a UUID v7), for replay protection.
    pub request_id: String,
    pub owner: Owner,
    /// The surface the document was requested on (`rest`, or `admin` for the operator).
    pub source_surface: Surface,
    pub active_context: ActiveContext,
    pub tool_profile: ToolProfile,
    /// Guidance derived from the structured contracts (phases, confirmation, no destructive
    /// actions); safety never depends on it, root enforces all of it.
    pub policy_prompt: String,
    /// Root's signature; absent only on the document as it is being signed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integrity: Option<Integrity>,
}

/// Actor claims, resolved by root from the lease (never from client headers).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Owner {
    /// `lease:<session id>`: the actor every call under this run is audited as.
    pub owner_key: String,
    pub session_id: String,
    /// The lease's capability profile.
    pub role: String,
    /// The scopes the lease binds: `zone:<zone>`, `subnet:<subnet>`, `target:<target>`.
    pub groups: Vec<String>,
    /// Who asked root for this document: `operator` or `lease:<session id>`.
    pub requested_by: String,
}

/// Where the run acts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ActiveContext {
    pub target_id: String,
    pub subnet_id: String,
    pub zone: String,
    /// The target's enrolled environment; absent while the target is not enrolled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
    #[serde(with = "time::serde::rfc3339")]
    pub lease_deadline_at: OffsetDateTime,
}

/// `ai-workspace.tool-profile.v1`: what the run may call, and where.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ToolProfile {
    pub schema_version: String,
    /// The planes of the enabled actions, sorted (e.g. `InfraOpsPlane`).
    pub enabled_tool_packs: Vec<String>,
    pub mcp_servers: Vec<McpServer>,
    pub assistant_actions: AssistantActions,
}

/// An MCP server the worker may connect to with the referenced token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct McpServer {
    pub name: String,
    /// `streamable-http`.
    pub transport: String,
    /// Relative to root's URL (`/mcp`).
    pub endpoint: String,
    pub token_ref: String,
}

/// The actions (tool ids) of the run, callable at `endpoint` with the referenced token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AssistantActions {
    pub schema_version: String,
    /// Relative to root's URL (`/api/ai-workspace/assistant/v1/actions`).
    pub endpoint: String,
    /// Every action id, sorted; the same set as `actions`.
    pub action_ids: Vec<String>,
    /// The phases any action allows, in flow order.
    pub phases: Vec<Phase>,
    pub actions: Vec<ActionGrant>,
    /// `lease:<session id>`: present that lease's bearer (which the worker was handed when
    /// the lease was issued); root never writes a bearer into this document.
    pub token_ref: String,
}

/// One action the run may use, with its phases.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ActionGrant {
    pub action_id: String,
    pub side_effect: SideEffectClass,
    /// Reads: `execute`. Writes: `preview`, then `execute` with the preview's confirmation
    /// token and an idempotency key. A write that only proposes another: `preview`.
    pub phases: Vec<Phase>,
}

/// A step of the call flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Preview,
    Execute,
}

/// Root's signature over the document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Integrity {
    /// [`INTEGRITY_ALGORITHM`].
    pub algorithm: String,
    /// Names the signing key ([`key_id`]).
    pub key_id: String,
    /// [`CANONICALIZATION`].
    pub canonicalization: String,
    /// Hex HMAC-SHA256 over [`signing_input`].
    pub signature: String,
}

/// Why a document is not a valid run profile of this root. The messages name the problem
/// precisely; [`IntegrityError::code`] is the stable, machine-readable reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IntegrityError {
    #[error("not a run profile: {0}")]
    Malformed(String),
    #[error("schemaVersion is `{0}`, not `{RUN_PROFILE_VERSION}`")]
    WrongVersion(String),
    #[error("the document has no `integrity`: it is unsigned or its signature was removed")]
    Unsigned,
    #[error("integrity.{field} is `{value}`; root signs with `{expected}` only")]
    Unsupported {
        field: &'static str,
        value: String,
        expected: &'static str,
    },
    #[error("signed with key `{0}`, which is not this root's run-profile key")]
    UnknownKey(String),
    #[error("the signature does not match the document: a field was changed after root signed it")]
    Tampered,
    #[error("the run profile expired at {0}")]
    Expired(String),
}

impl IntegrityError {
    /// `malformed`, `wrong_version`, `unsigned`, `unsupported`, `unknown_key`, `tampered`,
    /// `expired`.
    pub fn code(&self) -> &'static str {
        match self {
            IntegrityError::Malformed(_) => "malformed",
            IntegrityError::WrongVersion(_) => "wrong_version",
            IntegrityError::Unsigned => "unsigned",
            IntegrityError::Unsupported { .. } => "unsupported",
            IntegrityError::UnknownKey(_) => "unknown_key",
            IntegrityError::Tampered => "tampered",
            IntegrityError::Expired(_) => "expired",
        }
    }
}

fn mac(key: &[u8; 32]) -> HmacSha256 {
    <HmacSha256 as KeyInit>::new_from_slice(key).expect("HMAC takes keys of any length")
}

/// The public name of a signing key: `rp1-` and 16 hex digits of an HMAC of a fixed label
/// under the key (says which key, reveals nothing of it).
pub fn key_id(key: &[u8; 32]) -> String {
    let mut m = mac(key);
    m.update(b"mcp-root/run-profile-key-id/v1");
    format!("rp1-{}", &hex::encode(m.finalize().into_bytes())[..16])
}

/// The bytes the signature covers: the canonical JSON of `document` without its
/// `integrity` member.
pub fn signing_input(document: &Value) -> Vec<u8> {
    match document {
        Value::Object(map) => {
            let mut map = map.clone();
            map.remove("integrity");
            crate::canonical::to_vec(&Value::Object(map))
        }
        other => crate::canonical::to_vec(other),
    }
}

impl RunProfile {
    /// Signs the profile with `key`, replacing any previous `integrity`.
    pub fn seal(&mut self, key: &[u8; 32]) {
        self.integrity = None;
        let value = serde_json::to_value(&*self).unwrap_or(Value::Null);
        let mut m = mac(key);
        m.update(&signing_input(&value));
        self.integrity = Some(Integrity {
            algorithm: INTEGRITY_ALGORITHM.into(),
            key_id: key_id(key),
            canonicalization: CANONICALIZATION.into(),
            signature: hex::encode(m.finalize().into_bytes()),
        });
    }
}

/// Verifies a document as received (its JSON, not a re-serialization) against `key` as of
/// `now`: signature first (so any change to a signed field reads as `tampered`), then shape,
/// version and expiry. Returns the profile when it is valid.
pub fn verify(
    document: &Value,
    key: &[u8; 32],
    now: OffsetDateTime,
) -> Result<RunProfile, IntegrityError> {
    let Value::Object(map) = document else {
        return Err(IntegrityError::Malformed("not a JSON object".into()));
    };
    let integrity = match map.get("integrity") {
        None | Some(Value::Null) => return Err(IntegrityError::Unsigned),
        Some(v) => serde_json::from_value::<Integrity>(v.clone())
            .map_err(|e| IntegrityError::Malformed(format!("integrity: {e}")))?,
    };
    if integrity.algorithm != INTEGRITY_ALGORITHM {
        return Err(IntegrityError::Unsupported {
            field: "algorithm",
            value: integrity.algorithm,
            expected: INTEGRITY_ALGORITHM,
        });
    }
    if integrity.canonicalization != CANONICALIZATION {
        return Err(IntegrityError::Unsupported {
            field: "canonicalization",
            value: integrity.canonicalization,
            expected: CANONICALIZATION,
        });
    }
    if integrity.key_id != key_id(key) {
        return Err(IntegrityError::UnknownKey(integrity.key_id));
    }
    let signature = hex::decode(&integrity.signature).map_err(|_| IntegrityError::Tampered)?;
    let mut m = mac(key);
    m.update(&signing_input(document));
    m.verify_slice(&signature)
        .map_err(|_| IntegrityError::Tampered)?;
    let profile: RunProfile = serde_json::from_value(document.clone())
        .map_err(|e| IntegrityError::Malformed(e.to_string()))?;
    if profile.schema_version != RUN_PROFILE_VERSION {
        return Err(IntegrityError::WrongVersion(profile.schema_version));
    }
    if now >= profile.expires_at {
        return Err(IntegrityError::Expired(crate::time::format(
            profile.expires_at,
        )));
    }
    Ok(profile)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn profile() -> RunProfile {
        let at = crate::time::parse("2026-06-19T00:00:00Z").expect("time");
        let token_ref = "lease:s1".to_string();
        RunProfile {
            schema_version: RUN_PROFILE_VERSION.into(),
            run_id: "s1".into(),
            created_at: at,
            expires_at: at + time::Duration::minutes(10),
            audience: "mcp-client".into(),
            request_id: "r1".into(),
            owner: Owner {
                owner_key: "lease:s1".into(),
                session_id: "s1".into(),
                role: "InfraOpsRead".into(),
                groups: vec!["zone:z".into()],
                requested_by: "operator".into(),
            },
            source_surface: Surface::Admin,
            active_context: ActiveContext {
                target_id: "hub:a".into(),
                subnet_id: "s".into(),
                zone: "z".into(),
                environment: Some("test".into()),
                lease_deadline_at: at + time::Duration::hours(1),
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
                    endpoint: "/api/ai-workspace/assistant/v1/actions".into(),
                    action_ids: vec!["hub.get_status".into()],
                    phases: vec![Phase::Execute],
                    actions: vec![ActionGrant {
                        action_id: "hub.get_status".into(),
                        side_effect: SideEffectClass::Read,
                        phases: vec![Phase::Execute],
                    }],
                    token_ref,
                },
            },
            policy_prompt: "p".into(),
            integrity: None,
        }
    }

    #[test]
    fn a_sealed_profile_verifies_and_every_change_is_caught() {
        let key = [7u8; 32];
        let mut p = profile();
        p.seal(&key);
        let v = serde_json::to_value(&p).expect("json");
        let before = p.created_at + time::Duration::minutes(1);
        assert_eq!(verify(&v, &key, before), Ok(p.clone()));
        // Key order and whitespace do not matter; values do.
        let text = serde_json::to_string_pretty(&v).expect("text");
        let reparsed: Value = serde_json::from_str(&text).expect("json");
        assert!(verify(&reparsed, &key, before).is_ok());
        let mut changed = v.clone();
        changed["toolProfile"]["assistantActions"]["actionIds"][0] = json!("hub.deploy_ref");
        assert_eq!(
            verify(&changed, &key, before),
            Err(IntegrityError::Tampered)
        );
        let mut added = v.clone();
        added["owner"]["role"] = json!("root-admin");
        assert_eq!(verify(&added, &key, before), Err(IntegrityError::Tampered));
        let mut unsigned = v.clone();
        unsigned.as_object_mut().map(|o| o.remove("integrity"));
        assert_eq!(
            verify(&unsigned, &key, before),
            Err(IntegrityError::Unsigned)
        );
        assert_eq!(
            verify(&v, &[8u8; 32], before).map_err(|e| e.code()),
            Err("unknown_key")
        );
        assert_eq!(
            verify(&v, &key, p.expires_at).map_err(|e| e.code()),
            Err("expired")
        );
        let mut alg = v.clone();
        alg["integrity"]["algorithm"] = json!("none");
        assert_eq!(
            verify(&alg, &key, before).map_err(|e| e.code()),
            Err("unsupported")
        );
        assert_eq!(
            verify(&json!([1]), &key, before).map_err(|e| e.code()),
            Err("malformed")
        );
        assert!(!key_id(&key).contains(&hex::encode(key)));
    }
}
