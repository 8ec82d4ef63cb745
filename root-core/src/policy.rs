//! Policy engine: the root's policy decision point.
//!
//! Rules, in order; the first that fails is the denial's reason code:
//! 1. `destructive_refusal`: destructive tools are never callable (`forbidden_destructive`).
//! 2. `capability_grant`: the lease's profile grants the tool's capability
//!    (`capability_not_granted`); a run credential also needs the tool among the actions
//!    of its run profile (`run_scope`, `capability_not_granted`).
//! 3. `fleet_scope`: a fleet lease (bound to a selector) calls only fleet tools, and only a
//!    fleet lease calls them (`capability_not_granted`); a fleet tool's targets are judged
//!    one by one, each call under a lease of its own, so no further rule applies here.
//!    Descriptive tools are answered on root: no target rule applies.
//! 4. `target_resolution`: the lease's target is enrolled (`target_offline`); an enrolled target
//!    whose hub is not connected is in the directory as `offline` with its last descriptor.
//! 5. `target_lifecycle`: the target is neither cordoned (`target_cordoned`) nor retired
//!    (`target_retired`), and its operator's narrowing does not deny the tool (read-only, or
//!    the tool denied by id: `target_narrowed`). See `hubs::lifecycle`.
//! 6. `environment_guard`: the tool allows the target's environment, and writes need a
//!    `test-only` write scope on a `test` target (`environment_forbidden`).
//! 7. `skill_enabled`: every tool of the target's skill (routed, or executed on root with a
//!    contract `skill`) needs the skill installed and enabled by root's desired state and not
//!    switched off by the hub's owner (`skill_disabled`; see `hubs::skill`), connected or not.
//! 8. `target_online`: the target is connected (`target_offline`), unless the tool is a read
//!    root answers from the hub's published evidence while it is offline (a contract
//!    `offline`, e.g. `hub.memory.list_sessions`).
//! 9. `skill_published`: the hub publishes the tool through its enabled skill, or published
//!    it when it was last connected (`skill_disabled`).
//!
//! Operational tools that root executes itself (a contract `executor`, e.g. the access-token
//! tools over root's leases) stop after rule 7: they need no hub to publish or run them.
//!
//! A decision is a pure function ([`decide`]) of the contract, the profile and the target
//! directory, all shared read-only (`Arc`, `DashMap`). The governed call path evaluates it on
//! its own task (no mailbox hop per call); the actor answers the list and self-description
//! list question (`Visible`).

use std::sync::Arc;

use mcp_shared::contract::{RoutingClass, SideEffectClass};
use mcp_shared::error::ErrorCode;
use mcp_shared::event::{Decision, PolicyDecision};
use mcp_shared::lease::FLEET_TARGET_PREFIX;
use mcp_shared::profile::{CapabilityProfile, ProfileRegistry};
use mcp_shared::target::{TargetStatus, WriteScope};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

use crate::catalog::{ContractEntry, ContractRegistry};
use crate::hubs::router::TargetDirectory;

pub enum Msg {
    /// The contracts a lease may call right now, in stable order.
    Visible {
        profile: String,
        target_id: String,
        /// A run credential's tools (`None` for any other lease).
        scope: Option<Vec<String>>,
        reply: RpcReplyPort<Vec<Arc<ContractEntry>>>,
    },
    /// Test builds only: panic, so tests can prove the supervisor contains it.
    #[cfg(any(test, feature = "fault-injection"))]
    Panic,
}

pub struct Args {
    pub contracts: Arc<ContractRegistry>,
    pub profiles: Arc<ProfileRegistry>,
    pub targets: Arc<TargetDirectory>,
    /// Enrolments, for each target's skill gate (see `hubs::skill`).
    pub enrolments: Arc<crate::hubs::Enrolments>,
}

pub(crate) struct PolicyEngine;

impl Actor for PolicyEngine {
    type Msg = Msg;
    type State = Arc<Args>;
    type Arguments = Arc<Args>;

    async fn pre_start(
        &self,
        _myself: ActorRef<Msg>,
        args: Arc<Args>,
    ) -> Result<Arc<Args>, ActorProcessingErr> {
        Ok(args)
    }

    async fn handle(
        &self,
        _myself: ActorRef<Msg>,
        msg: Msg,
        state: &mut Arc<Args>,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            #[cfg(any(test, feature = "fault-injection"))]
            Msg::Panic => panic!("fault injected into the policy"),
            Msg::Visible {
                profile,
                target_id,
                scope,
                reply,
            } => {
                let p = state.profiles.get(&profile);
                let visible = state
                    .contracts
                    .all()
                    .iter()
                    .filter(|c| listable(state, p, scope.as_deref(), &target_id, c))
                    .cloned()
                    .collect();
                let _ = reply.send(visible);
            }
        }
        Ok(())
    }
}

/// Whether a tool belongs in the lease's tool list: only when the call would be allowed now.
/// Operational tools appear while their target is online and publishes them through an
/// enabled skill, and disappear otherwise (clients are sent `tools/list_changed`).
fn listable(
    state: &Args,
    profile: Option<&CapabilityProfile>,
    scope: Option<&[String]>,
    target_id: &str,
    c: &ContractEntry,
) -> bool {
    let grant = Grant {
        profile,
        scope,
        admitted: false,
    };
    decide(&state.targets, &state.enrolments, grant, target_id, c).decision == Decision::Allow
}

/// What a lease is granted: its capability profile and, for a run credential, the tools of
/// its run profile.
#[derive(Clone, Copy)]
pub struct Grant<'a> {
    pub profile: Option<&'a CapabilityProfile>,
    pub scope: Option<&'a [String]>,
    /// A call root admitted before it restarted, sent again to finish it (a fleet target's
    /// turn, recorded `running`): the target's lifecycle and narrowing, which apply to new
    /// calls, do not refuse it; every other rule does.
    pub admitted: bool,
}

/// Pure decision over the current configuration and target directory.
pub fn decide(
    targets: &TargetDirectory,
    enrolments: &crate::hubs::Enrolments,
    grant: Grant<'_>,
    target_id: &str,
    entry: &ContractEntry,
) -> PolicyDecision {
    let c = &entry.contract;
    let mut checks = Vec::with_capacity(10);
    let deny = |checks: Vec<String>, reason| PolicyDecision {
        decision: Decision::Deny,
        reason: Some(reason),
        checks,
    };
    checks.push("destructive_refusal".to_string());
    if c.side_effect == SideEffectClass::Destructive {
        return deny(checks, ErrorCode::ForbiddenDestructive);
    }
    checks.push("capability_grant".to_string());
    let granted = grant.profile.is_some_and(|p| {
        p.capabilities
            .iter()
            .any(|cap| cap == &c.required_capability)
    });
    if !granted {
        return deny(checks, ErrorCode::CapabilityNotGranted);
    }
    if let Some(scope) = grant.scope {
        checks.push("run_scope".to_string());
        if !scope.iter().any(|t| t == &c.tool_id) {
            return deny(checks, ErrorCode::CapabilityNotGranted);
        }
    }
    // A fleet lease calls only fleet tools, and only a fleet lease calls them; each target
    // of a fleet run is judged by these rules under a lease of its own.
    checks.push("fleet_scope".to_string());
    if c.fleet != target_id.starts_with(FLEET_TARGET_PREFIX) {
        return deny(checks, ErrorCode::CapabilityNotGranted);
    }
    if c.fleet {
        return PolicyDecision {
            decision: Decision::Allow,
            reason: None,
            checks,
        };
    }
    if c.routing != RoutingClass::DescriptiveCached {
        checks.push("target_resolution".to_string());
        let Some(target) = targets.get(target_id) else {
            return deny(checks, ErrorCode::TargetOffline);
        };
        let enrolment = enrolments.get(target_id);
        checks.push("target_lifecycle".to_string());
        if let Some(e) = &enrolment
            && !grant.admitted
            && let Some(reason) = crate::hubs::lifecycle::objection(
                &e.lifecycle,
                &e.narrowing,
                &c.tool_id,
                c.side_effect,
            )
        {
            return deny(checks, reason);
        }
        checks.push("environment_guard".to_string());
        if !c.allows_environment(&target.environment) {
            return deny(checks, ErrorCode::EnvironmentForbidden);
        }
        if c.side_effect == SideEffectClass::Write
            && !(target.policy.write_scope == WriteScope::TestOnly && target.environment == "test")
        {
            return deny(checks, ErrorCode::EnvironmentForbidden);
        }
        // One rule for the skill: its tools, wherever they run, only while it is on.
        if c.executor.is_none() || c.skill.is_some() {
            checks.push("skill_enabled".to_string());
            if !enrolment.as_ref().is_some_and(|e| e.skill.open()) {
                return deny(checks, ErrorCode::SkillDisabled);
            }
        }
        // Root executes these itself (its own records): no hub needs to publish or run them.
        if c.executor.is_some() {
            return PolicyDecision {
                decision: Decision::Allow,
                reason: None,
                checks,
            };
        }
        checks.push("target_online".to_string());
        // A read with an `offline` adapter is answered on root from the hub's evidence; it
        // must still be one the hub published when it was last connected.
        if target.status == TargetStatus::Offline && c.offline.is_none() {
            return deny(checks, ErrorCode::TargetOffline);
        }
        checks.push("skill_published".to_string());
        let surface = &target.operational_surface;
        if !surface.enabled || !surface.capabilities.iter().any(|t| t == &c.tool_id) {
            return deny(checks, ErrorCode::SkillDisabled);
        }
    }
    PolicyDecision {
        decision: Decision::Allow,
        reason: None,
        checks,
    }
}
