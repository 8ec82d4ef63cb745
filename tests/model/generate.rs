//! Histories: which step may come next (proptest strategies over the model's state) and
//! whether a step still applies once shrinking dropped some before it.

use std::collections::BTreeMap;

use proptest::prelude::*;
use proptest::sample::{Index, select};
use proptest_state_machine::ReferenceStateMachine;

use crate::oracle::{Model, Operator};
use crate::steps::{
    FLEET_READS, OPERATORS, PROFILES, Profile, READS, ReadTool, SkillCommand, Step, TARGETS, Write,
};

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
        let mut arms = operator_steps(m);
        arms.extend(fault_steps());
        if !m.leases.is_empty() {
            arms.extend(agent_steps(m));
        }
        proptest::strategy::Union::new_weighted(arms).boxed()
    }

    fn preconditions(m: &Model, step: &Step) -> bool {
        allows(m, step)
    }

    fn apply(mut m: Model, step: &Step) -> Model {
        m.step(step);
        m
    }
}

type Arms = Vec<(u32, BoxedStrategy<Step>)>;

fn target() -> std::ops::Range<usize> {
    0..TARGETS.len()
}

fn operator_steps(m: &Model) -> Arms {
    let command = select(vec![
        SkillCommand::Install,
        SkillCommand::Uninstall,
        SkillCommand::Enable,
        SkillCommand::Disable,
    ]);
    let lease_target = prop_oneof![3 => Just(0usize), 2 => target()];
    let profile = prop_oneof![
        4 => Just("InfraOpsControl"),
        1 => Just("ProfileOpsControl"),
        1 => Just("NLUTeacherAuthor"),
        2 => select(PROFILES.to_vec()),
    ];
    let by = by(m);
    let name = 0..OPERATORS;
    let mut arms: Arms = vec![
        (
            5,
            (lease_target, profile.clone(), by.clone())
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
            (target(), any::<bool>(), by.clone())
                .prop_map(|(target, on, by)| Step::Cordon { target, on, by })
                .boxed(),
        ),
        (
            1,
            (select(FLEET_READS.to_vec()), by.clone())
                .prop_map(|(tool, by)| Step::FleetRead {
                    tool: ReadTool(tool),
                    by,
                })
                .boxed(),
        ),
        (
            1,
            (
                profile.clone(),
                select(FLEET_READS.to_vec()),
                by.clone(),
                prop::option::weighted(0.5, target()),
            )
                .prop_map(|(profile, tool, by, leaves)| Step::AgentFleetRead {
                    profile: Profile(profile),
                    tool: ReadTool(tool),
                    by,
                    leaves,
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
            (name, by.clone(), any::<bool>())
                .prop_map(|(name, by, cascade)| Step::RevokeOperator { name, by, cascade })
                .boxed(),
        ),
        (
            2,
            (
                prop_oneof![3 => Just(0usize), 1 => target()],
                prop_oneof![3 => Just("InfraOpsControl"), 1 => Just("InfraOpsRead")],
                by.clone(),
            )
                .prop_map(|(target, profile, by)| Step::SignIn {
                    target,
                    profile: Profile(profile),
                    by,
                })
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
        (1, by.clone().prop_map(|by| Step::Publish { by }).boxed()),
    ];
    if !m.leases.is_empty() {
        let chooser = Chooser::of(m);
        arms.push((
            2,
            (chooser.live(), by.clone())
                .prop_map(|(lease, by)| Step::RunProfile { lease, by })
                .boxed(),
        ));
    }
    if !m.grants.is_empty() {
        let grants = 0..m.grants.len();
        arms.push((
            2,
            grants
                .clone()
                .prop_map(|grant| Step::Refresh { grant })
                .boxed(),
        ));
        arms.push((
            1,
            (grants, any::<bool>())
                .prop_map(|(grant, refresh)| Step::OAuthRevoke { grant, refresh })
                .boxed(),
        ));
    }
    if !m.approvals.is_empty() {
        arms.push((
            3,
            (0..m.approvals.len(), prop::bool::weighted(0.7), by)
                .prop_map(|(approval, approve, by)| Step::Decide {
                    approval,
                    approve,
                    by,
                })
                .boxed(),
        ));
    }
    arms
}

fn fault_steps() -> Arms {
    vec![
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
    ]
}

fn agent_steps(m: &Model) -> Arms {
    let reads = select(READS.iter().map(|(t, _)| *t).collect::<Vec<_>>());
    let chooser = Chooser::of(m);
    let previews = chooser.clone();
    let preview = (writes(m), any::<Pick>()).prop_map(move |(write, pick)| Step::Preview {
        lease: previews.writer(write.tool(), pick),
        write,
    });
    let executes = chooser.clone();
    let execute = (writes(m), 0..4u8, any::<Index>(), any::<Pick>(), 0..2u8).prop_map(
        move |(write, mode, index, pick, key)| {
            let of = &executes.previews;
            let lease = executes.writer(write.tool(), pick);
            let p = (!of.is_empty()).then(|| match mode {
                0 => of.len() - 1,
                _ => index.index(of.len()),
            });
            match (mode, p) {
                // The owner of a preview executes it (newest, or any).
                (0 | 1, Some(p)) => Step::Execute {
                    lease: of[p].0,
                    write: of[p].1,
                    confirmation: Some(p),
                    key,
                },
                // Someone else's confirmation, for its own write.
                (2, Some(p)) => Step::Execute {
                    lease,
                    write: of[p].1,
                    confirmation: Some(p),
                    key,
                },
                // Any write, with any confirmation or none.
                (_, p) => Step::Execute {
                    lease,
                    write,
                    confirmation: p.filter(|_| key == 0),
                    key,
                },
            }
        },
    );
    let elicits = chooser.clone();
    let elicit = (writes(m), 0..2u8, prop::bool::weighted(0.7), any::<Pick>()).prop_map(
        move |(write, key, accept, pick)| Step::Elicit {
            lease: elicits.writer(write.tool(), pick),
            write,
            key,
            accept,
        },
    );
    let proposers = chooser.clone();
    let propose = any::<Pick>().prop_map(move |pick| Step::Propose {
        lease: proposers.writer("nlu_authoring.propose_change", pick),
    });
    let testers = chooser.clone();
    let in_flight = any::<Pick>().prop_map(move |pick| Step::RevokeInFlight {
        lease: testers.writer(Write::Tests.tool(), pick),
    });
    let racers = chooser.clone();
    // Half the races are one lease against itself (one owner for sure).
    let race = (any::<Pick>(), any::<Pick>(), 0..2u8, any::<bool>()).prop_map(
        move |(a, b, key, alone)| {
            let lease = racers.writer(Write::Tests.tool(), a);
            let other = if alone {
                lease
            } else {
                racers.writer(Write::Tests.tool(), b)
            };
            Step::Race { lease, other, key }
        },
    );
    let mut arms: Arms = vec![
        (
            1,
            (chooser.live(), by(m))
                .prop_map(|(lease, by)| Step::Revoke { lease, by })
                .boxed(),
        ),
        (
            1,
            (chooser.live(), by(m))
                .prop_map(|(lease, by)| Step::Rotate { lease, by })
                .boxed(),
        ),
        (
            6,
            (chooser.live(), reads)
                .prop_map(|(lease, tool)| Step::Read {
                    lease,
                    tool: ReadTool(tool),
                })
                .boxed(),
        ),
        (
            2,
            chooser
                .live()
                .prop_map(|lease| Step::FanOut { lease })
                .boxed(),
        ),
        (
            1,
            chooser
                .live()
                .prop_map(|lease| Step::Destructive { lease })
                .boxed(),
        ),
        (6, preview.boxed()),
        (8, execute.boxed()),
        (2, elicit.boxed()),
        (2, propose.boxed()),
        (1, in_flight.boxed()),
        (2, race.boxed()),
    ];
    if !m.sessions.is_empty() {
        arms.push((
            1,
            (chooser.live(), 0..m.sessions.len())
                .prop_map(|(lease, session)| Step::ReadSession { lease, session })
                .boxed(),
        ));
    }
    arms
}

/// The writes a preview or execute may name in this state (never [`Write::Apply`], which
/// only proposals preview; an execute of it comes from its preview's write).
fn writes(m: &Model) -> BoxedStrategy<Write> {
    let leases = m.leases.len().max(1);
    let mut arms: Vec<(u32, BoxedStrategy<Write>)> = vec![
        (3, Just(Write::Tests).boxed()),
        (1, Just(Write::Restart).boxed()),
        (
            2,
            any::<bool>()
                .prop_map(|main| Write::Deploy { main })
                .boxed(),
        ),
        (1, Just(Write::Rollback).boxed()),
        (1, Just(Write::IssueToken).boxed()),
        (2, Just(Write::IssueControl).boxed()),
        (
            1,
            (0..leases)
                .prop_map(|lease| Write::RevokeToken { lease })
                .boxed(),
        ),
        (1, Just(Write::StartProfile).boxed()),
    ];
    if !m.sessions.is_empty() {
        let sessions = 0..m.sessions.len();
        arms.extend([
            (
                1,
                sessions
                    .clone()
                    .prop_map(|session| Write::StopProfile { session })
                    .boxed(),
            ),
            (
                1,
                sessions
                    .clone()
                    .prop_map(|session| Write::RetryProfile { session })
                    .boxed(),
            ),
            (
                1,
                sessions
                    .prop_map(|session| Write::PublishProfile { session })
                    .boxed(),
            ),
        ]);
    }
    proptest::strategy::Union::new_weighted(arms).boxed()
}

/// Who acts for an operator step: mostly `admin`, else an operator that was added (active
/// or revoked).
fn by(m: &Model) -> BoxedStrategy<Option<u8>> {
    let added: Vec<u8> = (0..OPERATORS)
        .filter(|&n| m.operators[n as usize] != Operator::Never)
        .collect();
    if added.is_empty() {
        return Just(None).boxed();
    }
    prop_oneof![2 => Just(None), 1 => select(added).prop_map(Some)].boxed()
}

/// Lease numbers by what they may do now, taken out of the state so strategies can own them.
#[derive(Clone)]
struct Chooser {
    leases: usize,
    live: Vec<usize>,
    /// Live leases that may call each write tool now.
    writers: BTreeMap<&'static str, Vec<usize>>,
    /// `(lease, write)` of each preview, by the model's number.
    previews: Vec<(usize, Write)>,
}

impl Chooser {
    fn of(m: &Model) -> Chooser {
        let live: Vec<usize> = (0..m.leases.len()).filter(|&l| m.leases[l].live).collect();
        let tools = [
            Write::Tests,
            Write::Restart,
            Write::Deploy { main: true },
            Write::Rollback,
            Write::IssueToken,
            Write::IssueControl,
            Write::RevokeToken { lease: 0 },
            Write::StartProfile,
            Write::StopProfile { session: 0 },
            Write::RetryProfile { session: 0 },
            Write::PublishProfile { session: 0 },
            Write::Apply,
        ]
        .map(Write::tool);
        let writers = tools
            .into_iter()
            .chain(["nlu_authoring.propose_change"])
            .map(|tool| {
                let can = live
                    .iter()
                    .copied()
                    .filter(|&l| m.decide(&m.leases[l], tool).is_ok())
                    .collect();
                (tool, can)
            })
            .collect();
        Chooser {
            leases: m.leases.len(),
            live,
            writers,
            previews: m.previews.iter().map(|p| (p.lease, p.write)).collect(),
        }
    }

    /// A lease number, most often of a live lease (a dead bearer now and then).
    fn live(&self) -> BoxedStrategy<usize> {
        let any = 0..self.leases;
        if self.live.is_empty() {
            return any.boxed();
        }
        prop_oneof![5 => select(self.live.clone()), 1 => any].boxed()
    }

    /// A lease number, most often of a lease that may call `tool` now (else a live one, or
    /// any), chosen without a strategy of its own so that shrinking stays exact.
    fn writer(&self, tool: &str, pick: Pick) -> usize {
        let can = self.writers.get(tool).filter(|can| !can.is_empty());
        match (pick.mode, can) {
            (0..=2, Some(can)) => can[pick.index.index(can.len())],
            (0..=4, _) if !self.live.is_empty() => self.live[pick.index.index(self.live.len())],
            _ => pick.index.index(self.leases),
        }
    }
}

/// The choice of a lease among those [`Chooser::writer`] prefers.
#[derive(Clone, Copy, Debug)]
struct Pick {
    mode: u8,
    index: Index,
}

impl Arbitrary for Pick {
    type Parameters = ();
    type Strategy = BoxedStrategy<Pick>;

    fn arbitrary_with((): ()) -> Self::Strategy {
        (0..6u8, any::<Index>())
            .prop_map(|(mode, index)| Pick { mode, index })
            .boxed()
    }
}

/// What a step needs of the state: a shrunk history drops steps, so every number a step holds
/// is checked again; hub steps must change something.
pub fn allows(m: &Model, step: &Step) -> bool {
    let lease = |l: &usize| *l < m.leases.len();
    // An operator acts with the token it was given: it must have been added.
    let by = |by: &Option<u8>| by.is_none_or(|n| m.operators[n as usize] != Operator::Never);
    let names = |write: &Write| match *write {
        Write::RevokeToken { lease } => lease < m.leases.len(),
        Write::StopProfile { session }
        | Write::RetryProfile { session }
        | Write::PublishProfile { session } => session < m.sessions.len(),
        _ => true,
    };
    match step {
        Step::Expired { .. } | Step::RestartRoot { .. } => true,
        Step::Lease { by: b, .. }
        | Step::RotateHubKey { by: b, .. }
        | Step::PublishInvalid { by: b }
        | Step::Publish { by: b }
        | Step::Enrol { by: b, .. }
        | Step::Skill { by: b, .. }
        | Step::Cordon { by: b, .. }
        | Step::FleetRead { by: b, .. }
        | Step::AgentFleetRead { by: b, .. }
        | Step::AddOperator { by: b, .. }
        | Step::SignIn { by: b, .. }
        | Step::RevokeOperator { by: b, .. } => by(b),
        Step::RunProfile { lease: l, by: b } => lease(l) && by(b),
        Step::Refresh { grant } | Step::OAuthRevoke { grant, .. } => *grant < m.grants.len(),
        Step::FanOut { lease: l } | Step::Destructive { lease: l } => lease(l),
        Step::Decide {
            approval, by: b, ..
        } => *approval < m.approvals.len() && by(b),
        Step::Owner { target, on } => {
            m.targets[*target].hub_running && m.targets[*target].owner_on != *on
        }
        Step::StopHub { target } => m.targets[*target].hub_running,
        Step::StartHub { target } => !m.targets[*target].hub_running && m.targets[*target].enrolled,
        Step::Revoke { lease: l, by: b } | Step::Rotate { lease: l, by: b } => lease(l) && by(b),
        Step::Read { lease: l, .. } | Step::Propose { lease: l } => lease(l),
        Step::ReadSession { lease: l, session } => lease(l) && *session < m.sessions.len(),
        Step::Preview { lease: l, write }
        | Step::Elicit {
            lease: l, write, ..
        } => lease(l) && names(write) && *write != Write::Apply,
        Step::RevokeInFlight { lease: l } => {
            lease(l) && m.leases[*l].live && m.decide(&m.leases[*l], Write::Tests.tool()).is_ok()
        }
        Step::Execute {
            lease: l,
            write,
            confirmation,
            ..
        } => lease(l) && names(write) && confirmation.is_none_or(|p| p < m.previews.len()),
        Step::Race {
            lease: l, other, ..
        } => lease(l) && lease(other),
    }
}
