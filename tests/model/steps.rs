//! The model's vocabulary: the targets of its world, the profiles and tools it uses, and the
//! steps a history is made of (recorded histories, `model/histories.json`, hold steps in their
//! JSON form: a field added later has a default, so old histories keep replaying).

use serde::{Deserialize, Serialize};

/// A managed target of the model's world: its enrolment and its hub's write scope.
#[derive(Debug)]
pub struct TargetSpec {
    pub id: &'static str,
    pub environment: &'static str,
    pub subnet: &'static str,
    /// Whether its hub runs with `write_scope = "test-only"`.
    pub writes: bool,
    /// Enrolled (and its hub started) before the history begins; else an operator enrols it
    /// during the history, and only then can its hub connect.
    pub enrolled: bool,
    /// Tools its hub does not publish, for want of the configuration that serves them (so
    /// hubs' surfaces differ): `[nlu]`'s, or the allowed tests'.
    pub lacks: &'static [&'static str],
}

/// What a hub without `[nlu]` does not publish.
const NO_NLU: &[&str] = &[
    "nlu_authoring.get_context",
    "nlu_authoring.list_templates",
    "nlu_authoring.check_phrase",
    "nlu_authoring.propose_change",
    "nlu_authoring.apply_change",
];

/// What a hub without allowed tests does not publish.
const NO_TESTS: &[&str] = &["hub.run_allowed_tests", "hub.get_test_results"];

/// The targets: writes allowed; a `test` target whose hub allows no writes and serves no NLU;
/// production, in the same subnet, without allowed tests; and a staging target enrolled
/// during the history.
pub const TARGETS: [TargetSpec; 4] = [
    TargetSpec {
        id: "hub:m-test",
        environment: "test",
        subnet: "subnet-a",
        writes: true,
        enrolled: true,
        lacks: &[],
    },
    TargetSpec {
        id: "hub:m-locked",
        environment: "test",
        subnet: "subnet-b",
        writes: false,
        enrolled: true,
        lacks: NO_NLU,
    },
    TargetSpec {
        id: "hub:m-prod",
        environment: "production",
        subnet: "subnet-b",
        writes: false,
        enrolled: true,
        lacks: NO_TESTS,
    },
    TargetSpec {
        id: "hub:m-new",
        environment: "staging",
        subnet: "subnet-c",
        writes: false,
        enrolled: false,
        lacks: &[],
    },
];

/// Every capability profile of `config/profiles.toml` (the oracle checks the list is whole).
pub const PROFILES: [&str; 8] = [
    "InfraOpsRead",
    "InfraOpsControl",
    "AdaOSDevRead",
    "ProfileOpsRead",
    "NLUTeacherRead",
    "ProfileOpsControl",
    "NLUTeacherDryRun",
    "NLUTeacherAuthor",
];

/// Reads agents make, with their arguments (JSON): every read contract but the two that name
/// something a write created (`hub.memory.get_session` and `get_artifact`, which are
/// [`Step::ReadSession`]), and the model's fixture `model.test_status` (a read its contract
/// allows on test targets only, served by a command adapter on every hub).
pub const READS: &[(&str, &str)] = &[
    ("hub.get_status", "{}"),
    ("model.test_status", "{}"),
    ("hub.get_runtime_summary", "{}"),
    ("hub.get_operational_surface", "{}"),
    ("hub.run_healthchecks", "{}"),
    ("hub.get_activity_log", "{}"),
    ("hub.get_capability_usage_summary", "{}"),
    ("hub.get_logs", r#"{"source": "root_local", "lines": 5}"#),
    ("hub.list_access_tokens", "{}"),
    ("hub.get_test_results", "{}"),
    ("hub.memory.get_status", "{}"),
    ("hub.memory.list_sessions", "{}"),
    ("hub.memory.list_incidents", "{}"),
    ("hub.memory.list_artifacts", "{}"),
    ("hub.memory.get_published_summaries", "{}"),
    ("root.get_subnet_analysis_health", "{}"),
    ("root.get_subnet_diagnostics", "{}"),
    ("root.get_subnet_timeline", "{}"),
    ("nlu_authoring.get_context", "{}"),
    ("nlu_authoring.list_templates", "{}"),
    (
        "nlu_authoring.check_phrase",
        r#"{"phrase": "turn on the kitchen lamp"}"#,
    ),
    ("sdk.get_metadata", "{}"),
    ("sdk.get_system_model", "{}"),
    ("sdk.list_schemas", "{}"),
    ("sdk.get_schema", r#"{"name": "tool-contract"}"#),
    ("sdk.list_templates", "{}"),
    ("sdk.get_template", r#"{"name": "hub-adapter"}"#),
    ("sdk.list_capability_classes", "{}"),
    ("sdk.list_public_skills", "{}"),
    ("sdk.get_skill_contract", "{}"),
    ("sdk.list_public_scenarios", "{}"),
    ("sdk.get_scenario_contract", "{}"),
];

/// The reads fleet runs make in histories: a status every target serves, one its contract
/// allows on test targets only, and one of another skill's profile.
pub const FLEET_READS: [&str; 3] = [
    "hub.get_status",
    "model.test_status",
    "hub.memory.list_sessions",
];

/// The NLU template proposals change, and the tool that applies them.
pub const TEMPLATE: &str = "en.device.turn_on";
pub const APPLY: &str = "nlu_authoring.apply_change";

/// A write the model drives through preview, confirmation and execute, with its arguments
/// (a lease or a profiling session by the model's number).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Write {
    /// `hub.run_allowed_tests {"name": "smoke"}`: appends a line to the target's runs file.
    #[default]
    Tests,
    /// `hub.restart_service {"service": "app"}`.
    Restart,
    /// `hub.deploy_ref {"ref": "main"}` (`main: true`, the newer commit) or `"v1"`.
    Deploy {
        main: bool,
    },
    /// `hub.rollback_last_test_deploy {}`.
    Rollback,
    /// `hub.issue_access_token`: an `InfraOpsRead` lease for the caller's target, which the
    /// model numbers like any other (the caller's child).
    IssueToken,
    /// `hub.issue_access_token` of an `InfraOpsControl` lease: a child that can mint in turn.
    IssueControl,
    /// `hub.revoke_access_token {"session_id": …}` of the model's lease `lease`.
    RevokeToken {
        lease: usize,
    },
    /// `hub.memory.start_profile` of the service `app` for one second.
    StartProfile,
    /// `hub.memory.stop_profile` / `retry_profile` / `publish_profile` of the model's
    /// profiling session `session` (sessions run one second; the world waits for each to end).
    StopProfile {
        session: usize,
    },
    RetryProfile {
        session: usize,
    },
    PublishProfile {
        session: usize,
    },
    /// `nlu_authoring.apply_change` with a proposal's confirmation (previewed by
    /// [`Step::Propose`], never by [`Step::Preview`]).
    Apply,
}

impl Write {
    pub fn tool(self) -> &'static str {
        match self {
            Write::Tests => "hub.run_allowed_tests",
            Write::Restart => "hub.restart_service",
            Write::Deploy { .. } => "hub.deploy_ref",
            Write::Rollback => "hub.rollback_last_test_deploy",
            Write::IssueToken | Write::IssueControl => "hub.issue_access_token",
            Write::RevokeToken { .. } => "hub.revoke_access_token",
            Write::StartProfile => "hub.memory.start_profile",
            Write::StopProfile { .. } => "hub.memory.stop_profile",
            Write::RetryProfile { .. } => "hub.memory.retry_profile",
            Write::PublishProfile { .. } => "hub.memory.publish_profile",
            Write::Apply => APPLY,
        }
    }
}

/// Root's commands for `infra_access_skill`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkillCommand {
    Install,
    Uninstall,
    Enable,
    Disable,
}

impl SkillCommand {
    pub fn name(self) -> &'static str {
        match self {
            SkillCommand::Install => "install",
            SkillCommand::Uninstall => "uninstall",
            SkillCommand::Enable => "enable",
            SkillCommand::Disable => "disable",
        }
    }
}

/// One step of a history: an operator's action, a hub owner's, a fault, or an agent's call.
/// `by` names the operator acting (`op<n>`); the bootstrap `admin` when absent.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Step {
    Lease {
        target: usize,
        profile: Profile,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<u8>,
    },
    /// A lease issued for one second, and a call with it once its deadline passed.
    Expired {
        target: usize,
        profile: Profile,
        tool: ReadTool,
    },
    Revoke {
        lease: usize,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<u8>,
    },
    Rotate {
        lease: usize,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<u8>,
    },
    Skill {
        target: usize,
        command: SkillCommand,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<u8>,
    },
    /// A named operator `op<name>` added (its token shown once).
    AddOperator {
        name: u8,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<u8>,
    },
    RevokeOperator {
        name: u8,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<u8>,
        /// Also end every lease the operator issued (`--cascade`).
        #[serde(default)]
        cascade: bool,
    },
    /// A run profile of the model's lease `lease`, issued by an operator: its run credential
    /// is the lease's child, numbered like any lease, bound to the tools the lease may call now.
    RunProfile {
        lease: usize,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<u8>,
    },
    /// An MCP client signs in with OAuth: it registers, its authorization request is approved
    /// by operator `by` for `target` and `profile`, and it exchanges the code; its access token
    /// is a lease the model numbers, and the sign-in a grant.
    SignIn {
        target: usize,
        profile: Profile,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<u8>,
    },
    /// The client of grant `grant` refreshes: a new access token, the one it replaces ended.
    Refresh {
        grant: usize,
    },
    /// The client of grant `grant` revokes its access token or its refresh token (RFC 7009).
    OAuthRevoke {
        grant: usize,
        refresh: bool,
    },
    /// `hub.get_logs` with `subnet_active`: which hubs of the lease's subnet answered and
    /// which are missing.
    FanOut {
        lease: usize,
    },
    /// A destructive action's name called as a tool.
    Destructive {
        lease: usize,
    },
    /// A descriptor set that fails validation published (refused, nothing changed, audited;
    /// the descriptive reads go on answering from the set served).
    PublishInvalid {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<u8>,
    },
    /// A valid descriptor set, built from `config/descriptor-source` at the step's time,
    /// published (served at once by every replica).
    Publish {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<u8>,
    },
    /// Enrolling a target: a new one gets its hub token (its hub can start from then on); an
    /// enrolled one is a conflict.
    Enrol {
        target: usize,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<u8>,
    },
    /// A new hub token and signing key; the hub's token file gets the new token, which a
    /// running hub picks up and reconnects with (the world waits for that).
    RotateHubKey {
        target: usize,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<u8>,
    },
    /// An operator's decision on the model's approval `approval` (opened by a proposal).
    Decide {
        approval: usize,
        approve: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<u8>,
    },
    /// An operator cordons (`on`) or uncordons a target: while cordoned it takes no new call,
    /// fan-outs included.
    Cordon {
        target: usize,
        on: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<u8>,
    },
    /// An operator's fleet read: `tool` on every enrolled target (`id=*`), four at a time,
    /// with a budget it cannot spend; the world waits for its end. Each target is accounted
    /// for as one call under the run's own lease for it would go, and called at most once.
    FleetRead {
        tool: ReadTool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<u8>,
    },
    /// An agent's fleet read: operator `by` issues a fleet lease on every target (`id=*`)
    /// with `profile`, whose bearer runs `tool` with `root.run_fleet_read` (four at a time,
    /// a budget it cannot spend), then revokes it. Each target is accounted for as one call
    /// under a single-target lease of that profile would go, and called at most once.
    ///
    /// With `leaves`: the fleet lease's selector is `id=*,!label:out` and the run pauses after
    /// its canary, while an operator labels that target `out` (it leaves the selector); the
    /// label is removed once the run ended. The run's authority is its selector at each call.
    AgentFleetRead {
        profile: Profile,
        tool: ReadTool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<u8>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        leaves: Option<usize>,
    },
    /// `mcp-hub skill enable|disable` by the hub's owner, on a running hub.
    Owner {
        target: usize,
        on: bool,
    },
    StopHub {
        target: usize,
    },
    StartHub {
        target: usize,
    },
    /// A root replica (number `replica` mod the replicas running) killed with SIGKILL and
    /// started again on its data.
    RestartRoot {
        #[serde(default)]
        replica: u8,
    },
    Read {
        lease: usize,
        tool: ReadTool,
    },
    /// `hub.memory.get_session` of the model's profiling session `session`, then
    /// `hub.memory.get_artifact` of its artifact (two calls).
    ReadSession {
        lease: usize,
        session: usize,
    },
    /// A write's preview; [`Write::Tests`] in histories recorded before other writes.
    Preview {
        lease: usize,
        #[serde(default)]
        write: Write,
    },
    /// `nlu_authoring.list_templates`, then `nlu_authoring.propose_change` on the fingerprint
    /// listed (two calls): a preview of [`Write::Apply`] and an approval for operators.
    Propose {
        lease: usize,
    },
    /// A write in flight when its lease is revoked: the allowed test `slow` (a second long)
    /// previewed and executed by `lease`, and the lease revoked by `admin` while it runs. The
    /// revocation refuses what comes after; the call already admitted finishes and is audited.
    RevokeInFlight {
        lease: usize,
    },
    /// An execute of `write` with the confirmation of the model's preview number
    /// `confirmation` (any lease's, any write's) and idempotency key `k<key>`.
    Execute {
        lease: usize,
        #[serde(default)]
        write: Write,
        confirmation: Option<usize>,
        key: u8,
    },
    /// Two executes of the allowed test sent at once with one idempotency key `k<key>`, by
    /// `lease` and `other`, each confirmed by a preview of its own made just before (the two
    /// previews, then both executes in flight together, through different replicas where
    /// there are two): callers of one owner (a lease, its rotations and what it minted) run
    /// it once and the other is answered that execution; a caller told `busy` (its owner's
    /// slot is held by the other) sends it again. Its two confirmations are not numbered
    /// for later steps (which one a replay left unspent is the race's).
    Race {
        lease: usize,
        other: usize,
        key: u8,
    },
    /// An execute of `write` without a confirmation over an MCP session whose client offers
    /// elicitation: root previews, asks the person at the client, and executes on `accept`.
    Elicit {
        lease: usize,
        write: Write,
        key: u8,
        accept: bool,
    },
}

/// A name the model knows (a profile, a read), written as a plain string in histories.
macro_rules! name {
    ($name:ident, $names:expr, $what:literal) => {
        #[derive(Clone, Copy, PartialEq, Eq, Serialize)]
        #[serde(transparent)]
        pub struct $name(pub &'static str);

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{:?}", self.0)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let name = String::deserialize(d)?;
                $names.find(|n| *n == name).map($name).ok_or_else(|| {
                    serde::de::Error::custom(format!("no {} `{name}` in the model", $what))
                })
            }
        }
    };
}

name!(Profile, PROFILES.into_iter(), "profile");
name!(ReadTool, READS.iter().map(|(t, _)| *t), "read");

/// How many named operators histories use (`op0`, `op1`, ...).
pub const OPERATORS: u8 = 3;
