//! The oracle: a small model of what operators allowed, and what each step must come to.
//!
//! It reads the tool contracts and capability profiles as data (`schemas/tools/*.json` and
//! the model's fixture `model/fixture/*.json`, `config/profiles.toml`) and decides with its own few rules, written from the seed, the
//! README and the contracts, never from root's decision code:
//!
//! 1. a lease that was revoked (by an operator, or by an agent with `hub.revoke_access_token`),
//!    rotated away or has expired is not a bearer at all (401, no event), nor is a revoked
//!    operator's token, nor any lease minted below one of those (a credential works iff
//!    every ancestor does);
//! 2. the lease's profile must grant the tool's capability, and a run credential's run profile
//!    must hold the tool (the tools its lease could call when it was issued); a fleet tool
//!    needs a fleet lease (`capability_not_granted` for every other);
//! 3. descriptive tools need nothing more;
//! 4. any other tool needs an enrolled target (`target_offline` otherwise, as for a target
//!    whose hub is not connected: a lease may be issued before its target is enrolled, and
//!    works once it is); the target's environment must be one the contract allows, and a
//!    write needs a `test` target whose hub has write scope `test-only`;
//! 5. a tool of `infra_access_skill` (routed, or executed on root for the skill) needs the
//!    skill installed and enabled by root and not switched off by the hub's owner;
//! 6. a routed tool needs the target's hub connected, except a read root answers from the
//!    evidence the hub published (a contract `offline`) for a tool the hub published when it
//!    was last connected (`skill_disabled` otherwise), and the hub must publish it: a hub
//!    whose configuration does not serve a tool does not (`skill_disabled`);
//! 7. a write's execute runs only with an unused confirmation from a preview of the same lease,
//!    tool and arguments, once per idempotency key of the lease's owner and tool (the owner is
//!    the lineage at the top of its chain: a rotation keeps it, a minted lease takes its
//!    parent's; the key used again with the same arguments is a replay that runs nothing,
//!    with others `idempotency_conflict`). Any attempt uses the confirmation up, except
//!    at a tool that needs an operator's approval, which asks for the approval first and keeps
//!    the token while it is pending (`approval_pending`); a rejected or used one, or a token that
//!    opened no approval, is `confirmation_required`;
//! 8. what the confirmed preview showed is what runs: a deploy or rollback whose worktree moved
//!    since its preview, or a proposal whose template changed since, is a `conflict` that runs
//!    nothing; a rollback with no earlier deploy to return to is `not_found`; an agent revokes
//!    only leases of its own target (`not_found`) that are active (`invalid_arguments`);
//! 9. a call admitted before its lease was revoked finishes; a hub key rotation changes
//!    nothing an agent sees once the hub has reconnected with its new token;
//! 10. operator names are never reused (`conflict`); revoking what is not active is refused
//!     (`not_found` for an operator, `invalid_arguments` for a lease), and so is deciding an
//!     approval already decided (`conflict`), audited all the same;
//! 11. delegation: a lease minted by another, a run credential and an OAuth sign-in's access
//!     token work while every credential above them does. Ending a lease (revoked by an
//!     operator or an agent, rotated, its sign-in revoked or refreshed) ends its descendants;
//!     revoking a sign-in's current token ends the sign-in; revoking an operator ends the
//!     sign-ins they approved and, with `cascade`, every lease they issued. A chain holds at
//!     most 8 leases (`capability_not_granted` past it); a run credential issues nothing
//!     (`forbidden`), and an operator's access token is not rotated by an operator
//!     (`conflict`); a sign-in's refresh after it ended is `invalid_grant`;
//! 12. a fan-out (`hub.get_logs` from the subnet) reaches the enrolled targets of the lease's
//!     subnet in its target's environment, and of those answers what is connected with its
//!     skill open; every other target of the subnet is named missing;
//! 13. a destructive action's name is refused `forbidden_destructive` by root's policy;
//! 14. an operator's fleet read reaches every enrolled target once, each as one call under a
//!     lease of the run's own (the narrowest read-only profile granting the tool) would go:
//!     `succeeded`, or `undeliverable` (offline), `excluded` (cordoned: an operator's state,
//!     not an error), `refused` (skill off, environment, capability) or `failed`, with the
//!     code; the run, each lease and each call are one event.
//! 15. an agent's fleet read under a fleet lease (issued on `id=*` when some target is
//!     enrolled and its profile grants `infra.fleet.read`) reaches every enrolled target as
//!     one call under a lease of that profile for it would go (rule 14's parts), when the
//!     profile grants the tool (`capability_not_granted` otherwise); the lease's issue, the
//!     fleet call, each target's call and the revocation are one event each.
//! 16. two executes of one idempotency key sent at once come to what one after the other
//!     would, whichever goes first: of one owner's callers one runs and the other is its
//!     replay; every caller's outcome is a serial one (root claims the key before anything
//!     runs). A call refused `busy` on the way (the owner's concurrency slot) is sent again.
//! 17. a fleet run's authority is its selector at the time of each call: a target that left
//!     it after the run froze its set (relabelled while the run paused after its canary) is
//!     `refused` (`capability_not_granted`) and never called (no event); the others go as
//!     rule 15 says.
//!
//! Every call made with a bearer is one audit event naming the lease (a confirmation asked
//! through elicitation is two: the preview and the execute), every operator action is one
//! naming the operator, and every switch by a hub's owner is one (recorded for the target).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use crate::steps::{OPERATORS, PROFILES, SkillCommand, Step, TARGETS, Write};

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
    /// The call was refused with this code after root's policy allowed it (the write flow,
    /// or what the target found).
    Refused(&'static str),
    /// An operator action refused with this code (audited all the same).
    OperatorRefused(&'static str),
    /// An OAuth client's request refused with this `error` (no event).
    OAuthRefused(&'static str),
    /// A fan-out's targets (sorted): those whose lines it read, and those it named missing.
    Reached {
        answered: Vec<&'static str>,
        missing: Vec<&'static str>,
    },
    /// A fleet run's targets (sorted) and each one's part: `succeeded`, or `<status>:
    /// <code>`.
    Fleet(Vec<(String, String)>),
    /// Two previews (in order), then two executes sent at once (their outcomes sorted: which
    /// one ran first is the race's).
    Race(Vec<Expect>),
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
    /// A routed read root answers from the hub's published evidence while the hub is offline
    /// (a contract `offline`).
    pub offline_answer: bool,
    /// A fleet tool: only a fleet lease calls it.
    pub fleet: bool,
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
    let shipped = std::fs::read_dir(top.join("schemas/tools")).expect("schemas/tools");
    let fixture = std::fs::read_dir(top.join("tests/model/fixture")).expect("model/fixture");
    for entry in shipped.chain(fixture) {
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
                offline_answer: c["offline"].as_str().is_some(),
                of_skill: !executor || s("skill") == "infra_access_skill",
                fleet: c["fleet"] == true,
            },
        );
    }
    let text = std::fs::read_to_string(top.join("config/profiles.toml")).expect("profiles");
    let doc: toml::Table = toml::from_str(&text).expect("profiles TOML");
    let profiles: BTreeMap<String, BTreeSet<String>> = doc["profile"]
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
    let known: BTreeSet<&str> = PROFILES.into_iter().collect();
    let shipped: BTreeSet<&str> = profiles.keys().map(String::as_str).collect();
    assert_eq!(known, shipped, "the model uses every shipped profile");
    Catalog { tools, profiles }
}

/// Where a target's deploy worktree stands: `Some(true)` at `main`, `Some(false)` at `v1`.
pub type Commit = Option<bool>;

/// A target's state: its enrolment, root's desired skill state, the owner's switch, its hub
/// process and what its writes left behind.
#[derive(Clone, Debug)]
pub struct Target {
    pub enrolled: bool,
    pub installed: bool,
    pub enabled: bool,
    pub owner_on: bool,
    pub hub_running: bool,
    /// Whether the hub published the skill's tools when it last stopped (root answers an
    /// offline read only for a tool the hub published when it was last connected).
    pub published_at_stop: bool,
    /// Cordoned by an operator: no new calls.
    pub cordoned: bool,
    pub current: Commit,
    /// Deploys not rolled back, oldest first: `(commit before, commit deployed)`.
    pub deploys: Vec<(Commit, bool)>,
    /// Applied changes to [`crate::steps::TEMPLATE`] (a proposal made before is stale).
    pub template: usize,
}

impl Target {
    /// Whether the skill's tools may be called.
    pub fn open(&self) -> bool {
        self.installed && self.enabled && self.owner_on
    }

    /// The worktree position a rollback returns to, when there is one.
    fn rollback_to(&self) -> Option<Commit> {
        match self.deploys.last() {
            Some((before, _)) if before.is_some() => Some(*before),
            _ => None,
        }
    }
}

/// What writes did on a target, as the world can count it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Effects {
    pub tests: usize,
    pub restarts: usize,
    pub deploys: usize,
    pub rollbacks: usize,
    pub issued: usize,
    pub profiles: usize,
    pub applied: usize,
}

/// How a lease came to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// By an operator (`Lease`, `Expired`), or an OAuth sign-in's access token.
    Issued,
    /// By another lease (`hub.issue_access_token`).
    Minted,
    /// A run credential.
    Run,
}

/// An OAuth sign-in.
#[derive(Clone, Debug)]
pub struct Grant {
    /// The operator who approved it (`None`: `admin`).
    pub by: Option<u8>,
    pub live: bool,
    /// Its current access token.
    pub lease: usize,
}

/// How many leases a chain of handed-on authority holds at most.
pub const MAX_CHAIN: usize = 8;

#[derive(Clone, Debug)]
pub struct Lease {
    pub target: usize,
    pub profile: &'static str,
    /// It is a bearer: not revoked, rotated away or expired, and neither is any lease it came
    /// from (a lease that ends takes what it minted with it).
    pub live: bool,
    pub kind: Kind,
    /// Who issued an issued lease (`None`: `admin`).
    pub issued_by: Option<u8>,
    /// The sign-in it is an access token of.
    pub grant: Option<usize>,
    /// A run credential's tools.
    pub scope: Option<BTreeSet<String>>,
    /// Leases above it.
    pub depth: usize,
    /// Its target was enrolled when the lease was issued (else its subnet is `default`).
    pub subnet_known: bool,
    /// The lease that minted it (`hub.issue_access_token`).
    pub parent: Option<usize>,
    /// The lineage at the top of its chain: idempotency keys belong to it.
    pub owner: usize,
}

/// A confirmation from a preview (or a proposal, for [`Write::Apply`]).
#[derive(Clone, Debug)]
pub struct Preview {
    pub lease: usize,
    pub write: Write,
    pub used: bool,
    /// What a deploy or rollback preview showed: the worktree then and where it would go.
    pub moves: (Commit, Commit),
    /// A proposal's approval and the template's version it was made on.
    pub approval: Option<usize>,
    pub template: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Approval {
    Pending,
    Approved,
    Rejected,
    /// An execute ran under it (applied or failed).
    Used,
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

#[derive(Clone, Debug)]
pub struct Model {
    pub targets: Vec<Target>,
    pub operators: Vec<Operator>,
    pub leases: Vec<Lease>,
    pub previews: Vec<Preview>,
    pub approvals: Vec<Approval>,
    pub grants: Vec<Grant>,
    /// Profiling sessions, by the target that ran them.
    pub sessions: Vec<usize>,
    /// Executed `(owner, tool, key)` and the arguments they ran with.
    pub records: BTreeMap<(usize, &'static str, u8), Arguments>,
    pub effects: Vec<Effects>,
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
                .map(|spec| Target {
                    enrolled: spec.enrolled,
                    installed: true,
                    enabled: true,
                    owner_on: true,
                    hub_running: spec.enrolled,
                    published_at_stop: false,
                    cordoned: false,
                    current: None,
                    deploys: Vec::new(),
                    template: 0,
                })
                .collect(),
            operators: vec![Operator::Never; OPERATORS as usize],
            leases: Vec::new(),
            previews: Vec::new(),
            approvals: Vec::new(),
            grants: Vec::new(),
            sessions: Vec::new(),
            records: BTreeMap::new(),
            effects: vec![Effects::default(); TARGETS.len()],
            audit: Audit::default(),
            expect: Expect::Done,
            steps: 0,
        }
    }
}

/// A write's arguments as the world sends them: the write and, for a lease it mints, how long
/// that lease may live (less at each step down a chain: `World::arguments`), so the same key
/// sent by a parent and its child carries other arguments.
pub type Arguments = (Write, Option<u64>);

/// A result of the oracle's rules: what the step came to, as an error to stop at.
type Rule = Result<(), Expect>;

impl Model {
    /// Whether `lease` may call `tool` now, or the code that refuses it (rules 2 to 6).
    pub fn decide(&self, lease: &Lease, tool: &str) -> Result<(), &'static str> {
        let c = &CATALOG.tools[tool];
        if !CATALOG.profiles[lease.profile].contains(&c.capability) {
            return Err("capability_not_granted");
        }
        if lease.scope.as_ref().is_some_and(|s| !s.contains(tool)) {
            return Err("capability_not_granted");
        }
        // A fleet tool needs a fleet lease (only `AgentFleetRead` issues one).
        if c.fleet {
            return Err("capability_not_granted");
        }
        if c.descriptive {
            return Ok(());
        }
        let spec = &TARGETS[lease.target];
        let target = &self.targets[lease.target];
        if !target.enrolled {
            return Err("target_offline");
        }
        if target.cordoned {
            return Err("target_cordoned");
        }
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
            // Root answers a read with an `offline` adapter from the evidence the hub
            // published, for a tool the hub published when it was last connected.
            if !c.offline_answer {
                return Err("target_offline");
            }
            if !target.published_at_stop {
                return Err("skill_disabled");
            }
        }
        if !c.on_root && spec.lacks.contains(&tool) {
            return Err("skill_disabled");
        }
        Ok(())
    }

    /// What `write` by `lease` sends (see [`Arguments`]).
    fn arguments(&self, lease: usize, write: Write) -> Arguments {
        let ttl = 3000 - 400 * self.leases[lease].depth.min(7) as u64;
        let ttl = match write {
            Write::IssueControl => Some(ttl),
            Write::IssueToken => Some(ttl.min(600)),
            _ => None,
        };
        (write, ttl)
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
    fn call(&mut self, lease: usize, tool: &str) -> Rule {
        let l = &self.leases[lease];
        if !l.live {
            return Err(Expect::Unauthenticated);
        }
        self.audit.calls += 1;
        self.decide(l, tool).map_err(Expect::Denied)
    }

    /// A read call: rules 1 to 6.
    pub fn read(&mut self, lease: usize, tool: &str) -> Expect {
        outcome(self.call(lease, tool))
    }

    /// A preview of `write` (the call, then what the target finds); records its confirmation.
    pub fn preview(&mut self, lease: usize, write: Write) -> Expect {
        outcome(self.previewed(lease, write).map(|p| self.previews.push(p)))
    }

    fn previewed(&mut self, lease: usize, write: Write) -> Result<Preview, Expect> {
        self.call(lease, write.tool())?;
        let t = self.leases[lease].target;
        let target = &self.targets[t];
        let moves = match write {
            Write::Deploy { main } => (target.current, Some(main)),
            Write::Rollback => {
                let back = target.rollback_to().ok_or(Expect::Refused("not_found"))?;
                (target.current, back)
            }
            Write::RevokeToken { lease: other } if self.leases[other].target != t => {
                return Err(Expect::Refused("not_found"));
            }
            Write::IssueToken | Write::IssueControl if self.leases[lease].kind == Kind::Run => {
                return Err(Expect::Refused("forbidden"));
            }
            _ => (None, None),
        };
        Ok(Preview {
            lease,
            write,
            used: false,
            moves,
            approval: None,
            template: target.template,
        })
    }

    /// `list_templates` then `propose_change`: a preview of [`Write::Apply`] with an approval.
    pub fn propose(&mut self, lease: usize) -> Expect {
        if let Err(e) = self.call(lease, "nlu_authoring.list_templates") {
            return e;
        }
        let proposed = self.previewed(lease, Write::Apply).map(|mut p| {
            p.approval = Some(self.approvals.len());
            self.approvals.push(Approval::Pending);
            self.previews.push(p);
        });
        outcome(proposed)
    }

    /// An execute of `write` with the confirmation of preview `confirmation` (rule 7), then
    /// what the target does (rule 8).
    pub fn execute(
        &mut self,
        lease: usize,
        write: Write,
        confirmation: Option<usize>,
        key: u8,
    ) -> Expect {
        let run = self
            .confirmed(lease, write, confirmation, key)
            .and_then(|p| {
                let ran = self.run(lease, write, p);
                if let Some(a) = p.and_then(|p| self.previews[p].approval) {
                    self.approvals[a] = Approval::Used;
                }
                ran
            });
        if run.is_ok() {
            let owner = self.leases[lease].owner;
            let args = self.arguments(lease, write);
            self.records.insert((owner, write.tool(), key), args);
        }
        outcome(run)
    }

    /// Rule 16: two executes of one key at once come to what one after the other would,
    /// whichever goes first (the key is claimed before anything runs).
    fn race(&mut self, lease: usize, other: usize, key: u8) -> Expect {
        let numbered = self.previews.len();
        let mut seen = Vec::new();
        let mut confirmations = Vec::new();
        for l in [lease, other] {
            let p = self.preview(l, Write::Tests);
            confirmations.push((p == Expect::Ok).then(|| self.previews.len() - 1));
            seen.push(p);
        }
        let mut executed: Vec<Expect> = [lease, other]
            .into_iter()
            .zip(confirmations)
            .map(|(l, p)| self.execute(l, Write::Tests, p, key))
            .collect();
        executed.sort_by_key(|e| format!("{e:?}"));
        seen.extend(executed);
        // The race's confirmations stay its own: which one a replay left unspent is the
        // race's to decide, so no later step may name them (the world numbers none either).
        self.previews.truncate(numbered);
        Expect::Race(seen)
    }

    /// Rule 7: the call, the key's record, the confirmation; the preview confirmed.
    fn confirmed(
        &mut self,
        lease: usize,
        write: Write,
        confirmation: Option<usize>,
        key: u8,
    ) -> Result<Option<usize>, Expect> {
        self.call(lease, write.tool())?;
        let owner = self.leases[lease].owner;
        match self.records.get(&(owner, write.tool(), key)) {
            Some(first) if *first == self.arguments(lease, write) => return Err(Expect::Replay),
            Some(_) => return Err(Expect::Refused("idempotency_conflict")),
            None => {}
        }
        let refused = Expect::Refused("confirmation_required");
        let p = confirmation.ok_or(refused.clone())?;
        if write == Write::Apply {
            let approval = self.previews[p].approval.ok_or(refused.clone())?;
            match self.approvals[approval] {
                Approval::Approved => {}
                Approval::Pending => return Err(Expect::Refused("approval_pending")),
                Approval::Rejected | Approval::Used => return Err(refused),
            }
        }
        let preview = &mut self.previews[p];
        let valid = preview.lease == lease && preview.write == write && !preview.used;
        preview.used = true;
        if !valid {
            return Err(refused);
        }
        Ok(Some(p))
    }

    /// Rule 8: what the target does with a confirmed execute of `write` (its preview `p`).
    fn run(&mut self, lease: usize, write: Write, p: Option<usize>) -> Rule {
        let t = self.leases[lease].target;
        let preview = p.map(|p| self.previews[p].clone());
        let moved = |target: &Target, now: Commit| {
            preview
                .as_ref()
                .is_some_and(|p| p.moves != (target.current, now))
        };
        match write {
            Write::IssueToken | Write::IssueControl => {
                let caller = &self.leases[lease];
                if caller.kind == Kind::Run {
                    return Err(Expect::Refused("forbidden"));
                }
                if caller.depth + 1 >= MAX_CHAIN {
                    return Err(Expect::Refused("capability_not_granted"));
                }
                self.effects[t].issued += 1;
                let profile = if write == Write::IssueToken {
                    "InfraOpsRead"
                } else {
                    "InfraOpsControl"
                };
                self.child(lease, Kind::Minted, profile, None);
                return Ok(());
            }
            Write::RevokeToken { lease: other } => {
                let subject = &mut self.leases[other];
                if subject.target != t {
                    return Err(Expect::Refused("not_found"));
                }
                if !subject.live {
                    return Err(Expect::Refused("invalid_arguments"));
                }
                self.revoke(other);
                return Ok(());
            }
            _ => {}
        }
        let target = &mut self.targets[t];
        let effects = &mut self.effects[t];
        match write {
            Write::Tests => effects.tests += 1,
            Write::Restart => effects.restarts += 1,
            Write::Deploy { main } => {
                if moved(target, Some(main)) {
                    return Err(Expect::Refused("conflict"));
                }
                target.deploys.push((target.current, main));
                target.current = Some(main);
                effects.deploys += 1;
            }
            Write::Rollback => {
                let back = target.rollback_to().ok_or(Expect::Refused("not_found"))?;
                if moved(target, back) {
                    return Err(Expect::Refused("conflict"));
                }
                target.deploys.pop();
                target.current = back;
                effects.rollbacks += 1;
            }
            Write::IssueToken | Write::IssueControl | Write::RevokeToken { .. } => {}
            Write::StartProfile | Write::RetryProfile { .. } => {
                effects.profiles += 1;
                self.sessions.push(t);
            }
            Write::StopProfile { .. } | Write::PublishProfile { .. } => {}
            Write::Apply => {
                if preview.is_some_and(|p| p.template != target.template) {
                    return Err(Expect::Refused("conflict"));
                }
                target.template += 1;
                effects.applied += 1;
            }
        }
        Ok(())
    }

    /// An execute without a confirmation from a client that offers elicitation: a key already
    /// used is answered as usual; else root previews (one event), asks, and on "yes" executes
    /// with the preview's confirmation (a second event).
    pub fn elicit(&mut self, lease: usize, write: Write, key: u8, accept: bool) -> Expect {
        let l = &self.leases[lease];
        if l.live && self.records.contains_key(&(l.owner, write.tool(), key)) {
            return self.execute(lease, write, None, key);
        }
        if let Err(e) = self.previewed(lease, write) {
            return e;
        }
        if !accept {
            return Expect::Refused("confirmation_required");
        }
        self.audit.calls += 1;
        let run = self.run(lease, write, None);
        if run.is_ok() {
            let owner = self.leases[lease].owner;
            let args = self.arguments(lease, write);
            self.records.insert((owner, write.tool(), key), args);
        }
        outcome(run)
    }

    /// An operator's request: refused as no bearer at all when `by` is revoked (no event);
    /// otherwise one event naming the operator, whatever follows.
    pub fn acts(&mut self, by: Option<u8>) -> Rule {
        if by.is_some_and(|n| self.operators[n as usize] != Operator::Active) {
            return Err(Expect::Unauthenticated);
        }
        self.audit.operator += 1;
        Ok(())
    }

    pub fn operator_on_lease(&mut self, lease: usize, rotate: bool, by: Option<u8>) -> Expect {
        if let Err(e) = self.acts(by) {
            return e;
        }
        let l = self.leases[lease].clone();
        if !l.live {
            return Expect::OperatorRefused("invalid_arguments");
        }
        if rotate && l.grant.is_some() {
            return Expect::OperatorRefused("conflict");
        }
        self.revoke(lease);
        if rotate {
            self.leases.push(Lease { live: true, ..l });
        }
        Expect::Ok
    }

    pub fn decide_approval(&mut self, approval: usize, approve: bool, by: Option<u8>) -> Expect {
        if let Err(e) = self.acts(by) {
            return e;
        }
        if self.approvals[approval] != Approval::Pending {
            return Expect::OperatorRefused("conflict");
        }
        self.approvals[approval] = if approve {
            Approval::Approved
        } else {
            Approval::Rejected
        };
        Expect::Ok
    }

    pub fn enrol(&mut self, target: usize, by: Option<u8>) -> Expect {
        if let Err(e) = self.acts(by) {
            return e;
        }
        if self.targets[target].enrolled {
            return Expect::OperatorRefused("conflict");
        }
        self.targets[target].enrolled = true;
        Expect::Ok
    }

    /// The oracle applied to one step: its outcome in `expect`.
    pub fn step(&mut self, step: &Step) {
        self.steps += 1;
        self.expect = self.outcome_of(step);
    }

    fn outcome_of(&mut self, step: &Step) -> Expect {
        match *step {
            Step::Lease {
                target,
                profile,
                by,
            } => match self.acts(by) {
                Err(e) => e,
                Ok(()) => {
                    self.issue(target, profile.0, true, by);
                    Expect::Ok
                }
            },
            Step::Expired {
                target,
                profile,
                tool,
            } => {
                self.audit.operator += 1;
                let lease = self.issue(target, profile.0, false, None);
                self.read(lease, tool.0)
            }
            Step::Revoke { lease, by } => self.operator_on_lease(lease, false, by),
            Step::Rotate { lease, by } => self.operator_on_lease(lease, true, by),
            Step::AddOperator { name, by } => self.operator_named(name, true, by, false),
            Step::RevokeOperator { name, by, cascade } => {
                self.operator_named(name, false, by, cascade)
            }
            Step::RunProfile { lease, by } => self.run_profile(lease, by),
            Step::SignIn {
                target,
                profile,
                by,
            } => self.sign_in(target, profile.0, by),
            Step::Refresh { grant } => self.refresh(grant),
            Step::OAuthRevoke { grant, .. } => {
                self.sign_out(grant);
                Expect::Ok
            }
            Step::FanOut { lease } => self.fan_out(lease),
            Step::Destructive { lease } => {
                if !self.leases[lease].live {
                    return Expect::Unauthenticated;
                }
                self.audit.calls += 1;
                Expect::Denied("forbidden_destructive")
            }
            Step::Skill {
                target,
                command,
                by,
            } => match self.acts(by) {
                Err(e) => e,
                Ok(()) if !self.targets[target].enrolled => Expect::OperatorRefused("not_found"),
                Ok(()) => {
                    let t = &mut self.targets[target];
                    match command {
                        SkillCommand::Install => t.installed = true,
                        SkillCommand::Uninstall => t.installed = false,
                        SkillCommand::Enable => t.enabled = true,
                        SkillCommand::Disable => t.enabled = false,
                    }
                    Expect::Ok
                }
            },
            Step::Cordon { target, on, by } => match self.acts(by) {
                Err(e) => e,
                Ok(()) if !self.targets[target].enrolled => Expect::OperatorRefused("not_found"),
                Ok(()) if self.targets[target].cordoned == on => {
                    Expect::OperatorRefused("conflict")
                }
                Ok(()) => {
                    self.targets[target].cordoned = on;
                    Expect::Ok
                }
            },
            Step::FleetRead { tool, by } => self.fleet_read(tool.0, by),
            Step::AgentFleetRead {
                profile,
                tool,
                by,
                leaves,
            } => self.agent_fleet_read(profile.0, tool.0, by, leaves),
            Step::Owner { target, on } => {
                self.audit.hub += 1;
                self.targets[target].owner_on = on;
                Expect::Done
            }
            Step::StopHub { target } | Step::StartHub { target } => {
                let t = &mut self.targets[target];
                if t.hub_running {
                    t.published_at_stop = t.open();
                }
                t.hub_running = !t.hub_running;
                Expect::Done
            }
            Step::RestartRoot { .. } => Expect::Done,
            Step::PublishInvalid { by } => match self.acts(by) {
                Err(e) => e,
                Ok(()) => Expect::OperatorRefused("invalid_arguments"),
            },
            Step::Publish { by } => outcome(self.acts(by)),
            Step::RotateHubKey { target, by } => match self.acts(by) {
                Err(e) => e,
                Ok(()) if !self.targets[target].enrolled => Expect::OperatorRefused("not_found"),
                Ok(()) => Expect::Ok,
            },
            Step::Enrol { target, by } => self.enrol(target, by),
            Step::Decide {
                approval,
                approve,
                by,
            } => self.decide_approval(approval, approve, by),
            Step::Read { lease, tool } => self.read(lease, tool.0),
            Step::ReadSession { lease, .. } => match self.call(lease, "hub.memory.get_session") {
                Err(e) => e,
                Ok(()) => self.read(lease, "hub.memory.get_artifact"),
            },
            Step::Preview { lease, write } => self.preview(lease, write),
            Step::Propose { lease } => self.propose(lease),
            Step::Execute {
                lease,
                write,
                confirmation,
                key,
            } => self.execute(lease, write, confirmation, key),
            Step::Elicit {
                lease,
                write,
                key,
                accept,
            } => self.elicit(lease, write, key, accept),
            Step::Race { lease, other, key } => self.race(lease, other, key),
            Step::RevokeInFlight { lease } => {
                // The preview and the execute (its key is the step's own), then the revocation.
                self.audit.calls += 2;
                self.audit.operator += 1;
                let t = self.leases[lease].target;
                self.previews.push(Preview {
                    lease,
                    write: Write::Tests,
                    used: true,
                    moves: (None, None),
                    approval: None,
                    template: self.targets[t].template,
                });
                self.effects[t].tests += 1;
                self.revoke(lease);
                Expect::Ok
            }
        }
    }

    /// A lease an operator (`by`, `None`: `admin`) issues for `target` (live, or one whose
    /// deadline passed); its number.
    fn issue(&mut self, target: usize, profile: &'static str, live: bool, by: Option<u8>) -> usize {
        let number = self.leases.len();
        self.leases.push(Lease {
            target,
            profile,
            live,
            kind: Kind::Issued,
            issued_by: by,
            grant: None,
            scope: None,
            depth: 0,
            subnet_known: self.targets[target].enrolled,
            parent: None,
            owner: number,
        });
        number
    }

    /// A lease `parent` hands on (minted, or a run credential bound to `scope`); its number.
    fn child(
        &mut self,
        parent: usize,
        kind: Kind,
        profile: &'static str,
        scope: Option<BTreeSet<String>>,
    ) -> usize {
        let number = self.leases.len();
        let p = &self.leases[parent];
        let lease = Lease {
            target: p.target,
            profile,
            live: true,
            kind,
            issued_by: None,
            grant: None,
            scope,
            depth: p.depth + 1,
            subnet_known: p.subnet_known,
            parent: Some(parent),
            owner: p.owner,
        };
        self.leases.push(lease);
        number
    }

    /// Lease `lease` revoked (by an operator or an agent): it ends with its descendants, and
    /// so does the sign-in whose current token it is.
    fn revoke(&mut self, lease: usize) {
        self.end(lease);
        for g in self
            .grants
            .iter_mut()
            .filter(|g| g.live && g.lease == lease)
        {
            g.live = false;
        }
    }

    /// A sign-in ends: its current token with its descendants; one event when that ended
    /// anything.
    fn sign_out(&mut self, grant: usize) {
        let g = &mut self.grants[grant];
        if !g.live {
            return;
        }
        g.live = false;
        let lease = g.lease;
        if self.leases[lease].live {
            self.audit.operator += 1;
            self.end(lease);
        }
    }

    /// An operator issues a run profile of `lease`: a run credential bound to the tools the
    /// lease may call now.
    fn run_profile(&mut self, lease: usize, by: Option<u8>) -> Expect {
        if let Err(e) = self.acts(by) {
            return e;
        }
        let l = &self.leases[lease];
        if !l.live {
            return Expect::OperatorRefused("conflict");
        }
        if l.kind == Kind::Run {
            return Expect::OperatorRefused("forbidden");
        }
        let scope = self.visible(l);
        let profile = l.profile;
        self.child(lease, Kind::Run, profile, Some(scope));
        Expect::Ok
    }

    /// An OAuth sign-in approved by `by` (two events: the approval, the token's lease).
    fn sign_in(&mut self, target: usize, profile: &'static str, by: Option<u8>) -> Expect {
        if let Err(e) = self.acts(by) {
            return e;
        }
        self.audit.operator += 1;
        let lease = self.issue(target, profile, true, by);
        self.leases[lease].grant = Some(self.grants.len());
        self.grants.push(Grant {
            by,
            live: true,
            lease,
        });
        Expect::Ok
    }

    /// A refresh: the sign-in's next token (one event), the one it replaces ended.
    fn refresh(&mut self, grant: usize) -> Expect {
        let g = self.grants[grant].clone();
        if !g.live || !self.leases[g.lease].live {
            self.grants[grant].live = false;
            return Expect::OAuthRefused("invalid_grant");
        }
        self.audit.operator += 1;
        let current = self.leases[g.lease].clone();
        let next = self.leases.len();
        self.leases.push(Lease {
            subnet_known: self.targets[current.target].enrolled,
            ..current
        });
        self.end(g.lease);
        self.grants[grant].lease = next;
        Expect::Ok
    }

    /// `hub.get_logs` from the subnet: which targets of its reach answer, which are missing.
    fn fan_out(&mut self, lease: usize) -> Expect {
        if let Err(e) = self.call(lease, "hub.get_logs") {
            return e;
        }
        let l = &self.leases[lease];
        let own = &TARGETS[l.target];
        let mut answered = Vec::new();
        let mut missing = Vec::new();
        for (t, spec) in TARGETS.iter().enumerate() {
            let target = &self.targets[t];
            if !l.subnet_known || !target.enrolled || spec.subnet != own.subnet {
                continue;
            }
            let reached = spec.environment == own.environment;
            if reached && target.hub_running && target.open() && !target.cordoned {
                answered.push(spec.id);
            } else {
                missing.push(spec.id);
            }
        }
        Expect::Reached { answered, missing }
    }

    /// An operator's fleet read of `tool` (rule 14).
    fn fleet_read(&mut self, tool: &'static str, by: Option<u8>) -> Expect {
        if let Err(e) = self.acts(by) {
            return e;
        }
        // Each target's lease is an operator's action.
        let leases = self.targets.iter().filter(|t| t.enrolled).count();
        self.audit.operator += leases;
        self.fleet_parts(read_profile(tool), tool, by)
    }

    /// An agent's fleet read of `tool` under a fleet lease with `profile` (rule 15), with a
    /// target that `leaves` its selector after the canary (rule 17).
    fn agent_fleet_read(
        &mut self,
        profile: &'static str,
        tool: &'static str,
        by: Option<u8>,
        leaves: Option<usize>,
    ) -> Expect {
        if let Err(e) = self.acts(by) {
            return e;
        }
        let grants = |capability: &str| CATALOG.profiles[profile].iter().any(|c| c == capability);
        if !self.targets.iter().any(|t| t.enrolled) {
            return Expect::OperatorRefused("invalid_arguments");
        }
        if !grants("infra.fleet.read") {
            return Expect::OperatorRefused("capability_not_granted");
        }
        // The fleet tool's call, then the lease's revocation; with a target leaving, the
        // label set (once the canary finished, or the call was refused) and removed: two
        // operator actions (refused, and audited, for a target not enrolled).
        self.audit.calls += 1;
        self.audit.operator += 1;
        if leaves.is_some() {
            self.audit.operator += 2;
        }
        if !grants(&CATALOG.tools[tool].capability) {
            return Expect::Refused("capability_not_granted");
        }
        let parts = self.fleet_parts(profile, tool, by);
        let Some(left) = leaves else {
            return parts;
        };
        let canary = TARGETS
            .iter()
            .enumerate()
            .filter(|(t, _)| self.targets[*t].enrolled)
            .map(|(_, spec)| spec.id)
            .min();
        let Expect::Fleet(mut parts) = parts else {
            return parts;
        };
        for (id, part) in parts.iter_mut() {
            if id == TARGETS[left].id && Some(id.as_str()) != canary {
                // Refused before any call: no event of its own.
                self.audit.calls -= 1;
                *part = "refused: capability_not_granted".to_owned();
            }
        }
        Expect::Fleet(parts)
    }

    /// Each enrolled target's part in a fleet read of `tool`: one call under a lease of
    /// `profile` for it.
    fn fleet_parts(&mut self, profile: &'static str, tool: &'static str, by: Option<u8>) -> Expect {
        let mut parts = Vec::new();
        for (t, spec) in TARGETS.iter().enumerate() {
            if !self.targets[t].enrolled {
                continue;
            }
            self.audit.calls += 1;
            let lease = Lease {
                target: t,
                profile,
                live: true,
                kind: Kind::Issued,
                issued_by: by,
                grant: None,
                scope: None,
                depth: 0,
                subnet_known: true,
                parent: None,
                owner: usize::MAX,
            };
            let part = match self.decide(&lease, tool) {
                Ok(()) => "succeeded".to_owned(),
                Err(code @ "target_offline") => format!("undeliverable: {code}"),
                // An operator's cordon is no error: the target does not take part.
                Err(code @ "target_cordoned") => format!("excluded: {code}"),
                Err(
                    code @ ("skill_disabled" | "environment_forbidden" | "capability_not_granted"),
                ) => format!("refused: {code}"),
                Err(code) => format!("failed: {code}"),
            };
            parts.push((spec.id.to_owned(), part));
        }
        parts.sort();
        Expect::Fleet(parts)
    }

    /// Lease `lease` stops being a bearer, and so does every lease below it.
    fn end(&mut self, lease: usize) {
        self.leases[lease].live = false;
        // Children are numbered after their parents: one pass reaches every descendant.
        for i in lease + 1..self.leases.len() {
            if let Some(p) = self.leases[i].parent
                && !self.leases[p].live
            {
                self.leases[i].live = false;
            }
        }
    }

    fn operator_named(&mut self, name: u8, add: bool, by: Option<u8>, cascade: bool) -> Expect {
        if let Err(e) = self.acts(by) {
            return e;
        }
        let state = &mut self.operators[name as usize];
        match (add, *state) {
            (true, Operator::Never) => *state = Operator::Active,
            (true, _) => return Expect::OperatorRefused("conflict"),
            (false, Operator::Active) => *state = Operator::Revoked,
            (false, _) => return Expect::OperatorRefused("not_found"),
        }
        if !add {
            // The sign-ins they approved end; with `cascade`, every lease they issued too.
            for g in 0..self.grants.len() {
                let grant = &mut self.grants[g];
                if grant.live && grant.by == Some(name) {
                    grant.live = false;
                    let lease = grant.lease;
                    self.end(lease);
                }
            }
            if cascade {
                for l in 0..self.leases.len() {
                    let lease = &self.leases[l];
                    if lease.live && lease.kind == Kind::Issued && lease.issued_by == Some(name) {
                        self.end(l);
                    }
                }
            }
        }
        Expect::Ok
    }
}

/// The narrowest profile granting `tool` whose tools are all reads (what root gives an
/// operator's read).
fn read_profile(tool: &str) -> &'static str {
    let capability = &CATALOG.tools[tool].capability;
    PROFILES
        .into_iter()
        .filter(|p| CATALOG.profiles[*p].contains(capability))
        .filter(|p| {
            CATALOG
                .tools
                .values()
                .filter(|t| CATALOG.profiles[*p].contains(&t.capability))
                .all(|t| !t.write)
        })
        .min_by_key(|p| CATALOG.profiles[*p].len())
        .expect("a read-only profile grants every fleet read")
}

fn outcome(rule: Rule) -> Expect {
    match rule {
        Ok(()) => Expect::Ok,
        Err(e) => e,
    }
}
