//! The oracle: a small model of what operators allowed, and what each step must come to.
//!
//! It reads the tool contracts and capability profiles as data (`schemas/tools/*.json`,
//! `config/profiles.toml`) and decides with its own few rules, written from the seed and the
//! README, never from root's decision code:
//!
//! 1. a lease that was revoked, rotated away or has expired is not a bearer at all (401, no
//!    event), nor is a revoked operator's token;
//! 2. the lease's profile must grant the tool's capability;
//! 3. descriptive tools need nothing more;
//! 4. the target's environment must be one the contract allows, and a write needs a `test`
//!    target whose hub has write scope `test-only`;
//! 5. a tool of `infra_access_skill` (routed, or executed on root for the skill) needs the
//!    skill installed and enabled by root and not switched off by the hub's owner;
//! 6. a routed tool needs the target's hub connected;
//! 7. a write's execute runs only with an unused confirmation from a preview of the same lease
//!    (any attempt uses the confirmation up), once per idempotency key of the lease's lineage
//!    (a rotation keeps the lineage); the key used again is a replay that runs nothing.
//!
//! 8. a call admitted before its lease was revoked finishes; a hub key rotation changes
//!    nothing an agent sees once the hub has reconnected with its new token;
//! 9. operator names are never reused (`conflict`); revoking what is not active is refused
//!    (`not_found` for an operator, `invalid_arguments` for a lease), audited all the same.
//!
//! Every call made with a bearer is one audit event naming the lease, every operator action is
//! one naming the operator, and every switch by a hub's owner is one (recorded for the target).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use proptest::prelude::*;
use proptest::sample::select;
use proptest_state_machine::ReferenceStateMachine;
use serde::{Deserialize, Serialize};

/// A managed target of the model's world: its enrolment and its hub's write scope.
#[derive(Debug)]
pub struct TargetSpec {
    pub id: &'static str,
    pub environment: &'static str,
    pub subnet: &'static str,
    /// Whether its hub runs with `write_scope = "test-only"`.
    pub writes: bool,
}

/// The targets: writes allowed; a `test` target whose hub allows no writes; production.
pub const TARGETS: [TargetSpec; 3] = [
    TargetSpec {
        id: "hub:m-test",
        environment: "test",
        subnet: "subnet-a",
        writes: true,
    },
    TargetSpec {
        id: "hub:m-locked",
        environment: "test",
        subnet: "subnet-b",
        writes: false,
    },
    TargetSpec {
        id: "hub:m-prod",
        environment: "production",
        subnet: "subnet-b",
        writes: false,
    },
];

/// The profiles leases are issued for.
pub const PROFILES: [&str; 5] = [
    "InfraOpsRead",
    "InfraOpsControl",
    "AdaOSDevRead",
    "ProfileOpsRead",
    "NLUTeacherRead",
];

/// Reads agents make, with their arguments (JSON): every read contract that needs no id of
/// something created first. Not yet: `nlu_authoring.*` (a hub without NLU content publishes
/// them and answers `not_found`, which issue "Operators' daily work" changes).
pub const READS: &[(&str, &str)] = &[
    ("hub.get_status", "{}"),
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
    ("sdk.get_metadata", "{}"),
    ("sdk.get_system_model", "{}"),
    ("sdk.list_schemas", "{}"),
    ("sdk.list_templates", "{}"),
    ("sdk.list_capability_classes", "{}"),
    ("sdk.list_public_skills", "{}"),
    ("sdk.list_public_scenarios", "{}"),
];

/// The write the model drives through preview, confirmation and execute.
pub const WRITE: &str = "hub.run_allowed_tests";

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
/// Recorded histories (`model/histories.json`) hold steps in their JSON form.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Step {
    Lease {
        target: usize,
        profile: Profile,
        /// The operator acting (`op<n>`); the bootstrap `admin` when absent.
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
        /// The operator acting (`op<n>`); the bootstrap `admin` when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<u8>,
    },
    Rotate {
        lease: usize,
        /// The operator acting (`op<n>`); the bootstrap `admin` when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<u8>,
    },
    Skill {
        target: usize,
        command: SkillCommand,
        /// The operator acting (`op<n>`); the bootstrap `admin` when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<u8>,
    },
    /// A named operator `op<name>` added (its token shown once).
    AddOperator {
        name: u8,
        /// The operator acting (`op<n>`); the bootstrap `admin` when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<u8>,
    },
    RevokeOperator {
        name: u8,
        /// The operator acting (`op<n>`); the bootstrap `admin` when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<u8>,
    },
    /// A descriptor set that fails validation published (refused, nothing changed, audited;
    /// the descriptive reads go on answering from the set served).
    PublishInvalid {
        /// The operator acting (`op<n>`); the bootstrap `admin` when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<u8>,
    },
    /// Enrolling a target again (every target of the model is enrolled: a conflict).
    Enrol {
        target: usize,
        /// The operator acting (`op<n>`); the bootstrap `admin` when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<u8>,
    },
    /// A new hub token and signing key; the hub's token file gets the new token, which a
    /// running hub picks up and reconnects with (the world waits for that).
    RotateHubKey {
        target: usize,
        /// The operator acting (`op<n>`); the bootstrap `admin` when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<u8>,
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
    Preview {
        lease: usize,
    },
    /// A write in flight when its lease is revoked: the allowed test `slow` (a second long)
    /// previewed and executed by `lease`, and the lease revoked by `admin` while it runs. The
    /// revocation refuses what comes after; the call already admitted finishes and is audited.
    RevokeInFlight {
        lease: usize,
    },
    /// An execute of [`WRITE`] with the confirmation of the model's preview number
    /// `confirmation` (any lease's) and idempotency key `k<key>`.
    Execute {
        lease: usize,
        confirmation: Option<usize>,
        key: u8,
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

/// What the last step must have come to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expect {
    /// A step that answers nothing to compare (a fault, a hub owner's switch).
    Done,
    Ok,
    /// An execute answered from the lineage's stored result; nothing ran.
    Replay,
    /// The bearer is no lease: 401 `unauthenticated`, no event.
    Unauthenticated,
    /// Root's policy refused the call with this code before anything reached a hub.
    Denied(&'static str),
    /// Root refused the call with this code after its policy allowed it (the write flow).
    Refused(&'static str),
    /// An operator action refused with this code (audited all the same).
    OperatorRefused(&'static str),
}

/// A tool as the oracle sees its contract.
#[derive(Debug)]
pub struct Tool {
    pub capability: String,
    pub write: bool,
    pub descriptive: bool,
    pub environments: Vec<String>,
    /// Root executes it from its own records (no hub needed).
    pub on_root: bool,
    /// It belongs to `infra_access_skill` (routed to the skill's adapters, or executed on
    /// root for the skill).
    pub of_skill: bool,
}

/// The contracts and profiles, read as data.
#[derive(Debug)]
pub struct Catalog {
    pub tools: BTreeMap<String, Tool>,
    pub profiles: BTreeMap<String, BTreeSet<String>>,
}

pub static CATALOG: LazyLock<Catalog> = LazyLock::new(load_catalog);

fn load_catalog() -> Catalog {
    let top = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut tools = BTreeMap::new();
    for entry in std::fs::read_dir(top.join("schemas/tools")).expect("schemas/tools") {
        let path = entry.expect("a contract file").path();
        let text = std::fs::read_to_string(&path).expect("a readable contract");
        let c: serde_json::Value = serde_json::from_str(&text).expect("a JSON contract");
        let s = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
        let executor = c["executor"].as_str().is_some();
        tools.insert(
            s("tool_id"),
            Tool {
                capability: s("required_capability"),
                write: s("side_effect") == "write",
                descriptive: s("routing") == "descriptive_cached",
                environments: c["allowed_environments"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|e| e.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default(),
                on_root: executor,
                of_skill: !executor || s("skill") == "infra_access_skill",
            },
        );
    }
    let text = std::fs::read_to_string(top.join("config/profiles.toml")).expect("profiles");
    let doc: toml::Table = toml::from_str(&text).expect("profiles TOML");
    let profiles = doc["profile"]
        .as_array()
        .expect("[[profile]]")
        .iter()
        .map(|p| {
            let caps = p["capabilities"].as_array().expect("capabilities");
            (
                p["name"].as_str().expect("name").to_owned(),
                caps.iter()
                    .map(|c| c.as_str().expect("a capability").to_owned())
                    .collect(),
            )
        })
        .collect();
    Catalog { tools, profiles }
}

/// A target's state: root's desired skill state, the owner's switch, its hub process.
#[derive(Clone, Debug)]
pub struct Target {
    pub installed: bool,
    pub enabled: bool,
    pub owner_on: bool,
    pub hub_running: bool,
}

impl Target {
    /// Whether the skill's tools may be called.
    pub fn open(&self) -> bool {
        self.installed && self.enabled && self.owner_on
    }
}

#[derive(Clone, Debug)]
pub struct Lease {
    pub target: usize,
    pub profile: &'static str,
    pub live: bool,
    /// The first lease of its rotations (idempotency keys belong to it).
    pub lineage: usize,
}

/// A confirmation from a preview.
#[derive(Clone, Debug)]
pub struct Preview {
    pub lease: usize,
    pub used: bool,
}

/// Audit events the world must hold, by kind of actor.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Audit {
    pub calls: usize,
    pub operator: usize,
    pub hub: usize,
}

impl Audit {
    pub fn total(&self) -> usize {
        self.calls + self.operator + self.hub
    }
}

/// A named operator's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operator {
    Never,
    Active,
    Revoked,
}

/// How many named operators histories use (`op0`, `op1`, ...).
pub const OPERATORS: u8 = 3;

#[derive(Clone, Debug)]
pub struct Model {
    pub targets: Vec<Target>,
    pub operators: Vec<Operator>,
    pub leases: Vec<Lease>,
    pub previews: Vec<Preview>,
    /// Executed `(lineage, key)` pairs.
    pub records: BTreeSet<(usize, u8)>,
    /// Writes run, per target.
    pub runs: Vec<usize>,
    pub audit: Audit,
    pub expect: Expect,
    /// Steps applied so far.
    pub steps: usize,
}

impl Default for Model {
    fn default() -> Self {
        Model {
            targets: TARGETS
                .iter()
                .map(|_| Target {
                    installed: true,
                    enabled: true,
                    owner_on: true,
                    hub_running: true,
                })
                .collect(),
            operators: vec![Operator::Never; OPERATORS as usize],
            leases: Vec::new(),
            previews: Vec::new(),
            records: BTreeSet::new(),
            runs: vec![0; TARGETS.len()],
            audit: Audit::default(),
            expect: Expect::Done,
            steps: 0,
        }
    }
}

impl Model {
    /// Whether `lease` may call `tool` now, or the code that refuses it (rules 2 to 6).
    pub fn decide(&self, lease: &Lease, tool: &str) -> Result<(), &'static str> {
        let c = &CATALOG.tools[tool];
        if !CATALOG.profiles[lease.profile].contains(&c.capability) {
            return Err("capability_not_granted");
        }
        if c.descriptive {
            return Ok(());
        }
        let spec = &TARGETS[lease.target];
        let target = &self.targets[lease.target];
        if !c
            .environments
            .iter()
            .any(|e| e == "*" || e == spec.environment)
        {
            return Err("environment_forbidden");
        }
        if c.write && !spec.writes {
            return Err("environment_forbidden");
        }
        if c.of_skill && !target.open() {
            return Err("skill_disabled");
        }
        if !c.on_root && !target.hub_running {
            return Err("target_offline");
        }
        Ok(())
    }

    /// The tools `lease` lists: those it may call now.
    pub fn visible(&self, lease: &Lease) -> BTreeSet<String> {
        CATALOG
            .tools
            .keys()
            .filter(|t| self.decide(lease, t).is_ok())
            .cloned()
            .collect()
    }

    /// A call with the lease's bearer, up to the policy (rules 1 to 6).
    fn call(&mut self, lease: usize, tool: &str) -> Result<(), Expect> {
        let l = &self.leases[lease];
        if !l.live {
            return Err(Expect::Unauthenticated);
        }
        self.audit.calls += 1;
        self.decide(l, tool).map_err(Expect::Denied)
    }

    fn execute(&mut self, lease: usize, confirmation: Option<usize>, key: u8) -> Expect {
        if let Err(e) = self.call(lease, WRITE) {
            return e;
        }
        let l = &self.leases[lease];
        let (lineage, target) = (l.lineage, l.target);
        if self.records.contains(&(lineage, key)) {
            return Expect::Replay;
        }
        let Some(p) = confirmation else {
            return Expect::Refused("confirmation_required");
        };
        let preview = &mut self.previews[p];
        let valid = preview.lease == lease && !preview.used;
        preview.used = true;
        if !valid {
            return Expect::Refused("confirmation_required");
        }
        self.runs[target] += 1;
        self.records.insert((lineage, key));
        Expect::Ok
    }

    /// An operator's request: refused as no bearer at all when `by` is revoked (no event);
    /// otherwise one event naming the operator, whatever follows.
    fn acts(&mut self, by: Option<u8>) -> Result<(), Expect> {
        if by.is_some_and(|n| self.operators[n as usize] != Operator::Active) {
            return Err(Expect::Unauthenticated);
        }
        self.audit.operator += 1;
        Ok(())
    }

    fn operator_on_lease(&mut self, lease: usize, rotate: bool, by: Option<u8>) -> Expect {
        if let Err(e) = self.acts(by) {
            return e;
        }
        let l = self.leases[lease].clone();
        if !l.live {
            return Expect::OperatorRefused("invalid_arguments");
        }
        self.leases[lease].live = false;
        if rotate {
            self.leases.push(Lease { live: true, ..l });
        }
        Expect::Ok
    }

    /// Who acts for an operator step: mostly `admin`, else an operator that was added
    /// (active or revoked).
    fn by(&self) -> BoxedStrategy<Option<u8>> {
        let added: Vec<u8> = (0..OPERATORS)
            .filter(|&n| self.operators[n as usize] != Operator::Never)
            .collect();
        if added.is_empty() {
            return Just(None).boxed();
        }
        prop_oneof![2 => Just(None), 1 => select(added).prop_map(Some)].boxed()
    }

    /// A lease number, most often of a lease that may write now.
    fn writer(&self) -> BoxedStrategy<usize> {
        let writers: Vec<usize> = (0..self.leases.len())
            .filter(|&l| self.leases[l].live && self.decide(&self.leases[l], WRITE).is_ok())
            .collect();
        if writers.is_empty() {
            return self.live_lease();
        }
        prop_oneof![3 => select(writers), 1 => self.live_lease()].boxed()
    }

    /// A lease number, most often of a live lease (a dead bearer now and then).
    fn live_lease(&self) -> BoxedStrategy<usize> {
        let live: Vec<usize> = (0..self.leases.len())
            .filter(|&l| self.leases[l].live)
            .collect();
        let any = 0..self.leases.len();
        if live.is_empty() {
            return any.boxed();
        }
        prop_oneof![5 => select(live), 1 => any].boxed()
    }
}

/// The reference state machine: generates histories and applies the oracle to them.
pub struct Governance;

impl ReferenceStateMachine for Governance {
    type State = Model;
    type Transition = Step;

    fn init_state() -> BoxedStrategy<Model> {
        Just(Model::default()).boxed()
    }

    /// Histories lean towards what reaches deep: leases that can write on the writable target,
    /// calls with live leases, executes with a confirmation of the same lease; the rest (other
    /// profiles and targets, dead bearers, others' confirmations) stays frequent enough to
    /// meet every rule.
    fn transitions(m: &Model) -> BoxedStrategy<Step> {
        let target = || 0..TARGETS.len();
        let command = select(vec![
            SkillCommand::Install,
            SkillCommand::Uninstall,
            SkillCommand::Enable,
            SkillCommand::Disable,
        ]);
        let lease_target = prop_oneof![3 => Just(0usize), 2 => target()];
        let profile = prop_oneof![
            3 => Just("InfraOpsControl"),
            1 => select(PROFILES.to_vec()),
        ];
        let by = m.by();
        let name = 0..OPERATORS;
        let mut arms: Vec<(u32, BoxedStrategy<Step>)> = vec![
            (
                4,
                (lease_target, profile, by.clone())
                    .prop_map(|(target, profile, by)| Step::Lease {
                        target,
                        profile: Profile(profile),
                        by,
                    })
                    .boxed(),
            ),
            (
                2,
                (target(), command, by.clone())
                    .prop_map(|(target, command, by)| Step::Skill {
                        target,
                        command,
                        by,
                    })
                    .boxed(),
            ),
            (
                1,
                (name.clone(), by.clone())
                    .prop_map(|(name, by)| Step::AddOperator { name, by })
                    .boxed(),
            ),
            (
                1,
                (target(), by.clone())
                    .prop_map(|(target, by)| Step::RotateHubKey { target, by })
                    .boxed(),
            ),
            (
                1,
                (target(), by.clone())
                    .prop_map(|(target, by)| Step::Enrol { target, by })
                    .boxed(),
            ),
            (
                1,
                by.clone()
                    .prop_map(|by| Step::PublishInvalid { by })
                    .boxed(),
            ),
            (
                1,
                (name, by.clone())
                    .prop_map(|(name, by)| Step::RevokeOperator { name, by })
                    .boxed(),
            ),
            (
                1,
                (target(), any::<bool>())
                    .prop_map(|(target, on)| Step::Owner { target, on })
                    .boxed(),
            ),
            (
                1,
                target().prop_map(|target| Step::StopHub { target }).boxed(),
            ),
            (
                2,
                target()
                    .prop_map(|target| Step::StartHub { target })
                    .boxed(),
            ),
            (
                1,
                (0..2u8)
                    .prop_map(|replica| Step::RestartRoot { replica })
                    .boxed(),
            ),
            (
                1,
                (
                    target(),
                    select(PROFILES.to_vec()),
                    select(READS.iter().map(|(t, _)| *t).collect::<Vec<_>>()),
                )
                    .prop_map(|(target, profile, tool)| Step::Expired {
                        target,
                        profile: Profile(profile),
                        tool: ReadTool(tool),
                    })
                    .boxed(),
            ),
        ];
        if !m.leases.is_empty() {
            let reads = select(READS.iter().map(|(t, _)| *t).collect::<Vec<_>>());
            let writer = m.writer();
            let previews = m.previews.len();
            let execute = (writer.clone(), any::<bool>(), 0..previews.max(1), 0..2u8).prop_map(
                move |(lease, own, other, key)| Step::Execute {
                    lease,
                    // Most often the newest preview (usually this lease's), else any or none.
                    confirmation: match (previews, own) {
                        (0, _) => None,
                        (n, true) => Some(n - 1),
                        (_, false) if other % 4 == 0 => None,
                        (_, false) => Some(other),
                    },
                    key,
                },
            );
            arms.extend([
                (
                    1,
                    (m.live_lease(), by.clone())
                        .prop_map(|(lease, by)| Step::Revoke { lease, by })
                        .boxed(),
                ),
                (
                    1,
                    (m.live_lease(), by)
                        .prop_map(|(lease, by)| Step::Rotate { lease, by })
                        .boxed(),
                ),
                (
                    6,
                    (m.live_lease(), reads)
                        .prop_map(|(lease, tool)| Step::Read {
                            lease,
                            tool: ReadTool(tool),
                        })
                        .boxed(),
                ),
                (
                    4,
                    writer
                        .clone()
                        .prop_map(|lease| Step::Preview { lease })
                        .boxed(),
                ),
                (6, execute.boxed()),
            ]);
        }
        if !m.leases.is_empty() {
            arms.push((
                1,
                m.writer()
                    .prop_map(|lease| Step::RevokeInFlight { lease })
                    .boxed(),
            ));
        }
        proptest::strategy::Union::new_weighted(arms).boxed()
    }

    /// What a step needs of the state: a shrunk history drops steps, so indices are checked
    /// again; hub steps must change something.
    fn preconditions(m: &Model, step: &Step) -> bool {
        let lease = |l: &usize| *l < m.leases.len();
        // An operator acts with the token it was given: it must have been added.
        let by = |by: &Option<u8>| by.is_none_or(|n| m.operators[n as usize] != Operator::Never);
        match step {
            Step::Expired { .. } | Step::RestartRoot { .. } => true,
            Step::Lease { by: b, .. }
            | Step::RotateHubKey { by: b, .. }
            | Step::PublishInvalid { by: b }
            | Step::Enrol { by: b, .. }
            | Step::Skill { by: b, .. }
            | Step::AddOperator { by: b, .. }
            | Step::RevokeOperator { by: b, .. } => by(b),
            Step::Owner { target, on } => {
                m.targets[*target].hub_running && m.targets[*target].owner_on != *on
            }
            Step::StopHub { target } => m.targets[*target].hub_running,
            Step::StartHub { target } => !m.targets[*target].hub_running,
            Step::Revoke { lease: l, by: b } | Step::Rotate { lease: l, by: b } => {
                lease(l) && by(b)
            }
            Step::Read { lease: l, .. } | Step::Preview { lease: l } => lease(l),
            Step::RevokeInFlight { lease: l } => {
                lease(l) && m.leases[*l].live && m.decide(&m.leases[*l], WRITE).is_ok()
            }
            Step::Execute {
                lease: l,
                confirmation,
                ..
            } => lease(l) && confirmation.is_none_or(|p| p < m.previews.len()),
        }
    }

    fn apply(mut m: Model, step: &Step) -> Model {
        m.steps += 1;
        m.expect = match *step {
            Step::Lease {
                target,
                profile,
                by,
            } => match m.acts(by) {
                Err(e) => e,
                Ok(()) => {
                    let lineage = m.leases.len();
                    m.leases.push(Lease {
                        target,
                        profile: profile.0,
                        live: true,
                        lineage,
                    });
                    Expect::Ok
                }
            },
            Step::Expired {
                target,
                profile,
                tool,
            } => {
                m.audit.operator += 1;
                let lineage = m.leases.len();
                m.leases.push(Lease {
                    target,
                    profile: profile.0,
                    live: false,
                    lineage,
                });
                match m.call(lineage, tool.0) {
                    Ok(()) => Expect::Ok,
                    Err(e) => e,
                }
            }
            Step::Revoke { lease, by } => m.operator_on_lease(lease, false, by),
            Step::Rotate { lease, by } => m.operator_on_lease(lease, true, by),
            Step::AddOperator { name, by } => match m.acts(by) {
                Err(e) => e,
                Ok(()) if m.operators[name as usize] != Operator::Never => {
                    Expect::OperatorRefused("conflict")
                }
                Ok(()) => {
                    m.operators[name as usize] = Operator::Active;
                    Expect::Ok
                }
            },
            Step::RevokeOperator { name, by } => match m.acts(by) {
                Err(e) => e,
                Ok(()) if m.operators[name as usize] != Operator::Active => {
                    Expect::OperatorRefused("not_found")
                }
                Ok(()) => {
                    m.operators[name as usize] = Operator::Revoked;
                    Expect::Ok
                }
            },
            Step::Skill {
                target,
                command,
                by,
            } => match m.acts(by) {
                Err(e) => e,
                Ok(()) => {
                    let t = &mut m.targets[target];
                    match command {
                        SkillCommand::Install => t.installed = true,
                        SkillCommand::Uninstall => t.installed = false,
                        SkillCommand::Enable => t.enabled = true,
                        SkillCommand::Disable => t.enabled = false,
                    }
                    Expect::Ok
                }
            },
            Step::Owner { target, on } => {
                m.audit.hub += 1;
                m.targets[target].owner_on = on;
                Expect::Done
            }
            Step::StopHub { target } => {
                m.targets[target].hub_running = false;
                Expect::Done
            }
            Step::StartHub { target } => {
                m.targets[target].hub_running = true;
                Expect::Done
            }
            Step::PublishInvalid { by } => match m.acts(by) {
                Err(e) => e,
                Ok(()) => Expect::OperatorRefused("invalid_arguments"),
            },
            Step::Enrol { by, .. } => match m.acts(by) {
                Err(e) => e,
                Ok(()) => Expect::OperatorRefused("conflict"),
            },
            Step::RotateHubKey { by, .. } => match m.acts(by) {
                Err(e) => e,
                Ok(()) => Expect::Ok,
            },
            Step::RestartRoot { .. } => Expect::Done,
            Step::Read { lease, tool } => match m.call(lease, tool.0) {
                Ok(()) => Expect::Ok,
                Err(e) => e,
            },
            Step::Preview { lease } => match m.call(lease, WRITE) {
                Ok(()) => {
                    m.previews.push(Preview { lease, used: false });
                    Expect::Ok
                }
                Err(e) => e,
            },
            Step::Execute {
                lease,
                confirmation,
                key,
            } => m.execute(lease, confirmation, key),
            Step::RevokeInFlight { lease } => {
                // The preview and the execute (its key is the step's own), then the revocation.
                m.audit.calls += 2;
                m.audit.operator += 1;
                m.previews.push(Preview { lease, used: true });
                m.runs[m.leases[lease].target] += 1;
                m.leases[lease].live = false;
                Expect::Ok
            }
        };
        m
    }
}
