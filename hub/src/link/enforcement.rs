//! Final enforcement: the checks the hub makes on every routed call before any adapter runs.
//!
//! Root is the policy point; the hub re-checks only what it can know itself, in this order:
//! 1. the signature verifies with the key derived from this hub's token (`signature_invalid`);
//! 2. on a connection: the hub's clock is within the offset from root's that root accepts
//!    (`clock_skew`); the checks below judge time in root's clock (see [`crate::link::clock`]);
//! 3. the deadline has not passed (`deadline_expired`);
//! 4. the call id was not seen before (`replay_rejected`), from a bounded cache;
//! 5. an installed and enabled skill publishes the tool (`skill_disabled`);
//! 6. a writing adapter runs only with `write_scope = "test-only"` on a `test` environment
//!    (`environment_forbidden`).
//!
//! Invariant: the hub holds no product tool allowlist beyond its own adapters' declarations
//! and no business policy (capabilities, profiles, leases are root's).

use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;

use mcp_shared::error::{ErrorCode, ToolError};
use mcp_shared::protocol::{CallRequest, verify_call};
use mcp_shared::target::WriteScope;

use crate::skill::adapters::decl::AdapterDecl;

/// How long past its deadline a call id is remembered (covers clock skew with root).
pub(crate) const REPLAY_MARGIN_MS: i64 = 60_000;

/// Call ids remembered at most. Retention is by time (each id until its deadline plus
/// [`REPLAY_MARGIN_MS`]); this bounds memory (about 50 bytes an id, so some 50 MiB at most)
/// and is reached only past ~2,000 calls/s held with deadlines of several minutes. When full
/// of unexpired ids, new calls are refused (`busy`) rather than forgetting an id that could
/// still be replayed.
pub(crate) const REPLAY_CAPACITY: usize = 1 << 20;

/// Call ids seen, each kept until its deadline plus [`REPLAY_MARGIN_MS`]: 128 bits an id (a
/// UUID's own bits, the id root sends; any other id by the first half of its SHA-256),
/// grouped by the second their retention ends, so that pruning drops whole seconds.
#[derive(Debug, Default)]
pub(crate) struct ReplayCache {
    seen: HashSet<u128>,
    /// Second (rounded up) each group's retention ends → its ids.
    by_second: BTreeMap<i64, Vec<u128>>,
    capacity: usize,
}

/// The compact key of a call id.
fn id_key(call_id: &str) -> u128 {
    match uuid::Uuid::try_parse(call_id) {
        Ok(u) => u.as_u128(),
        Err(_) => {
            use sha2::Digest;
            let digest = sha2::Sha256::digest(call_id.as_bytes());
            let mut half = [0u8; 16];
            half.copy_from_slice(&digest[..16]);
            u128::from_be_bytes(half)
        }
    }
}

impl ReplayCache {
    pub(crate) fn new(capacity: usize) -> ReplayCache {
        ReplayCache {
            capacity,
            ..Default::default()
        }
    }

    /// Records `call_id`; `Err` if it was already seen (or the cache is full).
    pub(crate) fn insert(
        &mut self,
        call_id: &str,
        expires_at_ms: i64,
        now_ms: i64,
    ) -> Result<(), ToolError> {
        self.prune(now_ms);
        let key = id_key(call_id);
        if self.seen.contains(&key) {
            return Err(ToolError::new(
                ErrorCode::ReplayRejected,
                format!("call id `{call_id}` was already received"),
            ));
        }
        if self.seen.len() >= self.capacity {
            return Err(ToolError::new(
                ErrorCode::Busy,
                "the hub's replay cache is full of unexpired call ids; retry later",
            ));
        }
        let keep_until = expires_at_ms.saturating_add(REPLAY_MARGIN_MS);
        // Rounded up: an id is never forgotten before its retention ends.
        let second = keep_until.div_euclid(1000).saturating_add(1);
        self.seen.insert(key);
        self.by_second.entry(second).or_default().push(key);
        Ok(())
    }

    /// Forgets ids whose retention ended before `now_ms`.
    pub(crate) fn prune(&mut self, now_ms: i64) {
        let now_second = now_ms.div_euclid(1000);
        while let Some(entry) = self.by_second.first_entry()
            && *entry.key() <= now_second
        {
            for key in entry.remove() {
                self.seen.remove(&key);
            }
        }
    }
}

/// What the skill publishes right now, as the gate sees it.
#[derive(Debug, Clone, Copy)]
pub struct Published<'a> {
    pub skill: &'a str,
    /// Installed and enabled.
    pub active: bool,
    /// Every adapter the skill has (published only while `active`).
    pub adapters: &'a [AdapterDecl],
}

/// The hub's final enforcement point; one per hub process, shared by all connections so the
/// replay cache survives reconnects.
#[derive(Debug)]
pub(crate) struct Gate {
    /// The key of the token the current connection said `hello` with (it changes when a
    /// rotated token is picked up).
    key: Mutex<[u8; 32]>,
    environment: String,
    write_scope: WriteScope,
    replay: Mutex<ReplayCache>,
}

impl Gate {
    /// Verifies calls with the key of `hub_token` from now on (the channel calls this with
    /// the token it says `hello` with).
    pub(crate) fn set_token(&self, hub_token: &str) {
        *self.key.lock().unwrap_or_else(|e| e.into_inner()) =
            mcp_shared::protocol::signing_key(hub_token);
    }

    pub(crate) fn new(hub_token: &str, environment: &str, write_scope: WriteScope) -> Gate {
        Gate {
            key: Mutex::new(mcp_shared::protocol::signing_key(hub_token)),
            environment: environment.to_owned(),
            write_scope,
            replay: Mutex::new(ReplayCache::new(REPLAY_CAPACITY)),
        }
    }

    /// Runs every check in order on a connection: after the signature, the hub's clock must be within
    /// the offset root accepts (`clock_skew`), and deadlines are judged in root's time.
    pub(crate) fn check_clocked(
        &self,
        call: &CallRequest,
        clock: &crate::link::clock::HubClock,
        published: Published<'_>,
    ) -> Result<AdapterDecl, ToolError> {
        self.verify_signature(call)?;
        clock.check()?;
        self.after_signature(call, clock.root_now_ms(), published)
    }

    fn verify_signature(&self, call: &CallRequest) -> Result<(), ToolError> {
        let key = *self.key.lock().unwrap_or_else(|e| e.into_inner());
        if !verify_call(call, &key) {
            return Err(ToolError::new(
                ErrorCode::SignatureInvalid,
                "the call's signature does not verify with this hub's key",
            ));
        }
        Ok(())
    }

    fn after_signature(
        &self,
        call: &CallRequest,
        now_ms: i64,
        published: Published<'_>,
    ) -> Result<AdapterDecl, ToolError> {
        if call.expires_at_ms <= now_ms {
            return Err(ToolError::new(
                ErrorCode::DeadlineExpired,
                format!(
                    "the call's deadline passed {} ms ago",
                    now_ms - call.expires_at_ms
                ),
            ));
        }
        self.replay
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(&call.call_id, call.expires_at_ms, now_ms)?;
        let adapter = published
            .adapters
            .iter()
            .find(|a| a.tool_id == call.tool_id)
            .copied();
        let adapter = match adapter {
            Some(a) if published.active => a,
            Some(_) => {
                return Err(ToolError::new(
                    ErrorCode::SkillDisabled,
                    format!(
                        "`{}` is not published: skill `{}` is disabled or not installed",
                        call.tool_id, published.skill
                    ),
                ));
            }
            None => {
                return Err(ToolError::new(
                    ErrorCode::SkillDisabled,
                    format!("no enabled skill on this hub publishes `{}`", call.tool_id),
                ));
            }
        };
        if adapter.writes
            && !(self.write_scope == WriteScope::TestOnly && self.environment == "test")
        {
            return Err(ToolError::new(
                ErrorCode::EnvironmentForbidden,
                format!(
                    "adapter `{}` writes; this hub allows writes only with write_scope \"test-only\" on a test environment",
                    adapter.name
                ),
            ));
        }
        Ok(adapter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcp_shared::protocol::signing_key;

    impl ReplayCache {
        /// Ids remembered now.
        fn len(&self) -> usize {
            self.seen.len()
        }
    }

    /// What the tests look at beyond the product's entry point.
    impl Gate {
        /// Runs every check in order, with `now_ms` as the time deadlines are judged by (no
        /// clock-skew check); returns the adapter that will run the call.
        fn check(
            &self,
            call: &CallRequest,
            now_ms: i64,
            published: Published<'_>,
        ) -> Result<AdapterDecl, ToolError> {
            self.verify_signature(call)?;
            self.after_signature(call, now_ms, published)
        }

        /// Call ids currently remembered.
        fn replay_len(&self) -> usize {
            self.replay
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .len()
        }
    }

    const TOKEN: &str = "mcph_test_token";
    const NOW: i64 = 1_800_000_000_000;

    const READ: AdapterDecl = AdapterDecl {
        tool_id: "hub.get_status",
        name: "infra_access_skill.status",
        writes: false,
    };
    const WRITE: AdapterDecl = AdapterDecl {
        tool_id: "hub.restart_service",
        name: "infra_access_skill.restart_service",
        writes: true,
    };
    const ADAPTERS: [AdapterDecl; 2] = [READ, WRITE];

    fn published(active: bool) -> Published<'static> {
        Published {
            skill: "infra_access_skill",
            active,
            adapters: &ADAPTERS,
        }
    }

    fn call(id: &str, tool: &str) -> CallRequest {
        let mut call = CallRequest {
            call_id: id.into(),
            trace_id: "t".into(),
            session_id: "s".into(),
            tool_id: tool.into(),
            capability: "infra.read.status".into(),
            body: mcp_shared::protocol::CallBody {
                arguments: serde_json::json!({}),
                dry_run: false,
                idempotency_key: None,
                confirmed_effect: None,
            },
            expires_at_ms: NOW + 5_000,
            traceparent: None,
            signature: String::new(),
        };
        call.sign(&signing_key(TOKEN));
        call
    }

    fn code(r: Result<AdapterDecl, ToolError>) -> ErrorCode {
        r.expect_err("must be refused").code
    }

    #[test]
    fn a_good_call_passes() {
        let gate = Gate::new(TOKEN, "test", WriteScope::None);
        let adapter = gate
            .check(&call("c1", "hub.get_status"), NOW, published(true))
            .expect("passes");
        assert_eq!(adapter, READ);
    }

    #[test]
    fn forged_signature_is_refused_first() {
        let gate = Gate::new(TOKEN, "test", WriteScope::None);
        let mut forged = call("c1", "hub.get_status");
        forged.body.arguments = serde_json::json!({"fault": "panic"});
        assert_eq!(
            code(gate.check(&forged, NOW, published(true))),
            ErrorCode::SignatureInvalid
        );
        let other = Gate::new("another hub's token", "test", WriteScope::None);
        assert_eq!(
            code(other.check(&call("c2", "hub.get_status"), NOW, published(true))),
            ErrorCode::SignatureInvalid
        );
        // A refused signature does not burn the id.
        assert_eq!(gate.replay_len(), 0);
    }

    #[test]
    fn expired_deadline_is_refused() {
        let gate = Gate::new(TOKEN, "test", WriteScope::None);
        let c = call("c1", "hub.get_status");
        assert_eq!(
            code(gate.check(&c, c.expires_at_ms, published(true))),
            ErrorCode::DeadlineExpired
        );
    }

    #[test]
    fn replayed_id_is_refused_until_pruned() {
        let gate = Gate::new(TOKEN, "test", WriteScope::None);
        let c = call("c1", "hub.get_status");
        gate.check(&c, NOW, published(true)).expect("first time");
        assert_eq!(
            code(gate.check(&c, NOW + 1, published(true))),
            ErrorCode::ReplayRejected
        );

        let mut cache = ReplayCache::new(2);
        cache.insert("a", NOW, NOW - 10).expect("a");
        cache.insert("b", NOW + 100_000, NOW - 10).expect("b");
        assert_eq!(
            cache.insert("c", NOW, NOW).expect_err("full").code,
            ErrorCode::Busy
        );
        cache.prune(NOW + REPLAY_MARGIN_MS - 1);
        assert_eq!(
            cache.len(),
            2,
            "nothing is forgotten before its expiry plus margin"
        );
        cache.prune(NOW + REPLAY_MARGIN_MS + 1_001);
        assert_eq!(cache.len(), 1, "a is pruned after its expiry plus margin");
        assert_eq!(
            cache.insert("b", NOW, NOW).expect_err("b kept").code,
            ErrorCode::ReplayRejected
        );
    }

    /// 2,000 calls a second for five minutes on one hub, each with a 30 s deadline, in
    /// simulated time: no call is refused `busy` (the old cache held 65,536 ids and refused
    /// past ~900 calls/s), every replay within the window is refused, and what is remembered
    /// stays bounded by the rate times the window.
    #[test]
    fn a_busy_hub_is_bounded_by_time_not_count() {
        const RATE: i64 = 2_000;
        const TIMEOUT_MS: i64 = 30_000;
        let mut cache = ReplayCache::new(REPLAY_CAPACITY);
        let mut peak = 0;
        let mut ids = Vec::new();
        for i in 0..RATE * 300 {
            let now = NOW + i * 1_000 / RATE;
            let id = uuid::Uuid::now_v7().to_string();
            cache
                .insert(&id, now + TIMEOUT_MS, now)
                .expect("no call refused at 2,000/s");
            if i % 10_007 == 0 {
                ids.push((id, now));
            }
            peak = peak.max(cache.len());
        }
        let window = (TIMEOUT_MS + REPLAY_MARGIN_MS) / 1000 + 2;
        assert!(
            peak as i64 <= RATE * window,
            "{peak} ids remembered at most, for a window of {window} s"
        );
        assert!(peak > 65_536, "the old bound by count would have refused");
        let end = NOW + 300_000;
        for (id, at) in ids {
            let replay = cache.insert(&id, at + TIMEOUT_MS, end);
            if end <= at + TIMEOUT_MS + REPLAY_MARGIN_MS {
                assert_eq!(replay.expect_err("replay").code, ErrorCode::ReplayRejected);
            }
        }
    }

    #[test]
    fn ids_that_are_not_uuids_are_remembered_too() {
        let mut cache = ReplayCache::new(8);
        cache.insert("c1", NOW, NOW).expect("c1");
        cache.insert("c2", NOW, NOW).expect("c2");
        assert_eq!(
            cache.insert("c1", NOW, NOW).expect_err("replay").code,
            ErrorCode::ReplayRejected
        );
        let u = uuid::Uuid::now_v7();
        cache.insert(&u.to_string(), NOW, NOW).expect("uuid");
        assert_eq!(
            cache
                .insert(&u.hyphenated().to_string().to_uppercase(), NOW, NOW)
                .expect_err("same uuid")
                .code,
            ErrorCode::ReplayRejected
        );
    }

    #[test]
    fn unpublished_tool_and_disabled_skill_are_refused() {
        let gate = Gate::new(TOKEN, "test", WriteScope::None);
        assert_eq!(
            code(gate.check(&call("c1", "hub.launch_missiles"), NOW, published(true))),
            ErrorCode::SkillDisabled
        );
        assert_eq!(
            code(gate.check(&call("c2", "hub.get_status"), NOW, published(false))),
            ErrorCode::SkillDisabled
        );
    }

    #[test]
    fn writes_need_test_only_scope_on_a_test_environment() {
        for (env, scope, ok) in [
            ("test", WriteScope::None, false),
            ("prod", WriteScope::TestOnly, false),
            ("prod", WriteScope::None, false),
            ("test", WriteScope::TestOnly, true),
        ] {
            let gate = Gate::new(TOKEN, env, scope);
            let r = gate.check(&call("w", "hub.restart_service"), NOW, published(true));
            if ok {
                assert_eq!(r.expect("allowed"), WRITE);
            } else {
                assert_eq!(code(r), ErrorCode::EnvironmentForbidden, "{env} {scope:?}");
            }
            // Reads are never gated by the write scope.
            gate.check(&call("r", "hub.get_status"), NOW, published(true))
                .expect("reads pass");
        }
    }
}
