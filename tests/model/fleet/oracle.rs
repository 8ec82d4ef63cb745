//! The fleet oracle: what every target of a run comes to, predicted from the steps alone
//! (its own copy of the plan's arithmetic, written from the README and `fleet::plan`'s
//! documentation, never from the driver's code).
//!
//! Its rules, each checked after every step, and the mutation of root that shows each one
//! matters (each caught by the recorded histories and a 10-history search):
//!
//! | rule | mutation of root |
//! |---|---|
//! | F1 | a target's idempotency key made per attempt (`authority::idempotency_key`) |
//! | F2 | the selector check at each call always passes (`set::within`) |
//! | F3 | non-canaries start while canaries run (`execute::drive`) |
//! | F4 | targets start after the error budget is spent (`execute::drive`) |
//! | F5 | a run's authority is never re-checked (`execute::allowed`) |
//! | F6 | a stopped run leaves its pending targets pending (`execute::finish`) |
//! | F7 | a target's call in a trace of its own (`execute::call_under`) |
//!
//!
//! - **F1 once per confirmation**: each target executes a write at most once for one
//!   confirmation, across restarts and replicas: the hub's own count of executions equals
//!   the oracle's (a target cut off mid-call by a restart is sent again under the same key
//!   and answered by its first execution, never run twice).
//! - **F2 authority at call time**: a target is called only while the run's selector names
//!   it, and never while an operator cordoned, retired or narrowed it: one that left the
//!   selector is `refused` (`capability_not_granted`), one taken out `excluded` with the
//!   code of why, and neither reaches its hub (the hub's count of calls it held); a target
//!   whose hub is gone (moved elsewhere) is `undeliverable`. A write's preview excludes
//!   what could not take part, and percentages count only the others.
//! - **F3 canaries first**: the first `canary` targets taking part run alone; no other
//!   starts before every one of them finished.
//! - **F4 window and budget**: at most `max_concurrency` targets run at once; once more
//!   targets failed (failed, refused, undeliverable) than `max_errors` allows, no new one
//!   starts, the ones running finish and the rest are `skipped` (the run `stopped`).
//! - **F5 authority ends the run**: a run whose operator was revoked, or whose fleet lease
//!   ended, is `cancelled`, and so is one an operator cancelled: what had not started never
//!   starts (`cancelled`), what runs finishes; a call cut off by a restart after its
//!   authority ended is not sent again under it (`failed`, `cancelled`). A paused run starts
//!   nothing until resumed.
//! - **F6 every target reported**: every target of the set appears in the report with its
//!   status at every step, and the run ends once none is pending or running.
//! - **F7 one trace**: a target's call event is in the run's trace (the run's own event
//!   too), and a target settled before any call has no event.

use std::collections::BTreeMap;

use super::steps::{Amount, FleetStep, OPERATORS, Plan, SIMS, Sel, Who, sim_id};

/// A target's standing with operators.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Life {
    #[default]
    Active,
    Cordoned,
    Retired,
}

/// A simulated target as operators left it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Target {
    /// Moved to production (its hub is refused from then on).
    pub moved: bool,
    pub out: bool,
    pub life: Life,
    pub narrowed: bool,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Operator {
    #[default]
    Never,
    Active,
    Revoked,
}

/// A target's part in the open run.
#[derive(Clone, Debug)]
pub struct Part {
    pub target: usize,
    pub status: &'static str,
    pub code: Option<&'static str>,
    pub canary: bool,
    /// A write sent again after a restart, asking (`busy`) until its first execution ends:
    /// each ask is a new call, so none is sent once the run's authority ended.
    pub resent: bool,
}

impl Part {
    fn shown(&self) -> String {
        match self.code {
            Some(code) => format!("{}: {code}", self.status),
            None => self.status.to_owned(),
        }
    }
}

/// The open run.
#[derive(Clone, Debug)]
pub struct Run {
    pub write: bool,
    pub who: Who,
    pub selector: Sel,
    pub parts: Vec<Part>,
    pub state: &'static str,
    pub errors: usize,
    pub canary: usize,
    pub window: usize,
    pub budget: usize,
    /// An agent's fleet lease is live.
    pub lease: bool,
    /// Why the run was cancelled, for the report's tally.
    pub ended_by: Option<&'static str>,
    /// The replica driving it (the one its start was sent to).
    pub driver: usize,
}

/// What a run's report and the hubs must show after a step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// The run's state and each target's part, by target id (`None`: no run was started).
    pub run: Option<(String, BTreeMap<String, String>)>,
    /// Calls each target's hub held (reads, and executions that ran).
    pub held: BTreeMap<String, u32>,
    /// Executions of the write each target's hub ran.
    pub executions: BTreeMap<String, u32>,
}

/// What a step must answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    Ok,
    /// An operator's request refused with this HTTP status.
    Refused(u16),
}

#[derive(Clone, Debug)]
pub struct FleetModel {
    pub targets: [Target; SIMS],
    pub operators: [Operator; OPERATORS as usize],
    pub run: Option<Run>,
    /// The last run, once closed (its report is what the world shows until the next).
    pub last: Option<Run>,
    pub held: [u32; SIMS],
    pub executions: [u32; SIMS],
    pub steps: usize,
    pub answer: Answer,
    /// Rules the last step's snapshot exercised.
    pub rules: Vec<&'static str>,
    /// Root replicas in the world (steps take turns among them; the hubs dial the first).
    pub replicas: usize,
}

impl Default for FleetModel {
    fn default() -> Self {
        FleetModel {
            targets: [Target::default(); SIMS],
            operators: [Operator::Never; OPERATORS as usize],
            run: None,
            last: None,
            held: [0; SIMS],
            executions: [0; SIMS],
            steps: 0,
            answer: Answer::Ok,
            rules: Vec::new(),
            replicas: super::replicas(),
        }
    }
}

/// The count an amount is of `total`: a window's percentage rounded up (at least one), a
/// budget's down.
fn of(amount: Amount, total: usize, window: bool) -> usize {
    let n = match amount {
        Amount::Count(n) => n as usize,
        Amount::Percent(p) if window => (total * p as usize).div_ceil(100),
        Amount::Percent(p) => total * p as usize / 100,
    };
    if window { n.max(1) } else { n }
}

impl FleetModel {
    /// Whether `who` may act now.
    pub fn acts(&self, who: Option<u8>) -> bool {
        who.is_none_or(|n| self.operators[n as usize] == Operator::Active)
    }

    /// Whether the open run's target `t` runs now.
    pub fn running(&self, t: usize) -> bool {
        self.run.as_ref().is_some_and(|r| {
            r.parts
                .iter()
                .any(|p| p.target == t && p.status == "running")
        })
    }

    /// The targets running now, in order.
    pub fn running_targets(&self) -> Vec<usize> {
        self.run.as_ref().map_or_else(Vec::new, |r| {
            r.parts
                .iter()
                .filter(|p| p.status == "running")
                .map(|p| p.target)
                .collect()
        })
    }

    fn names(&self, sel: Sel, t: usize) -> bool {
        let target = &self.targets[t];
        match sel {
            Sel::All => true,
            Sel::Test => !target.moved,
            Sel::NotOut => !target.out,
        }
    }

    /// Why target `t` takes no part when its turn comes (`(status, code)`), before any
    /// call: it left the run's selector, or an operator cordoned, retired or narrowed it.
    fn standing(&self, sel: Sel, t: usize) -> Option<(&'static str, &'static str)> {
        let target = &self.targets[t];
        if !self.names(sel, t) {
            return Some(("refused", "capability_not_granted"));
        }
        match target.life {
            Life::Retired => Some(("excluded", "target_retired")),
            Life::Cordoned => Some(("excluded", "target_cordoned")),
            Life::Active if target.narrowed => Some(("excluded", "target_narrowed")),
            Life::Active => None,
        }
    }

    /// What the call path answers target `t` without reaching its hub: a write outside
    /// `test` (root's placement) is refused, a hub that is gone is undeliverable.
    fn at_call(&self, t: usize, write: bool) -> Option<(&'static str, &'static str)> {
        match (self.targets[t].moved, write) {
            (true, true) => Some(("refused", "environment_forbidden")),
            (true, false) => Some(("undeliverable", "target_offline")),
            (false, _) => None,
        }
    }

    pub fn apply(&mut self, step: &FleetStep) {
        self.steps += 1;
        self.answer = Answer::Ok;
        self.rules.clear();
        match *step {
            FleetStep::Start {
                write,
                who,
                selector,
                plan,
            } => self.start(write, who, selector, plan),
            FleetStep::Settle { nth, fail } => {
                let running = self.running_targets();
                let t = running[nth as usize % running.len()];
                let run = self.run.as_mut().expect("a run");
                for p in run.parts.iter_mut().filter(|p| p.target == t) {
                    if p.status == "running" {
                        if fail {
                            p.status = "failed";
                            p.code = Some("adapter_failed");
                            run.errors += 1;
                        } else {
                            p.status = "succeeded";
                        }
                    }
                }
            }
            FleetStep::Cordon { target, on } => {
                self.targets[target].life = if on { Life::Cordoned } else { Life::Active };
            }
            FleetStep::Retire { target } => self.targets[target].life = Life::Retired,
            FleetStep::Move { target } => self.targets[target].moved = true,
            FleetStep::Label { target, out } => self.targets[target].out = out,
            FleetStep::Narrow { target, on } => self.targets[target].narrowed = on,
            FleetStep::AddOperator { name } => self.operators[name as usize] = Operator::Active,
            FleetStep::RevokeOperator { name, cascade } => {
                self.operators[name as usize] = Operator::Revoked;
                if let Some(run) = &mut self.run
                    && cascade
                    && run.who == (Who::Agent { by: Some(name) })
                {
                    run.lease = false;
                }
            }
            FleetStep::RevokeLease => {
                if let Some(run) = &mut self.run {
                    run.lease = false;
                }
            }
            FleetStep::Pause => self.command("running", "paused"),
            FleetStep::Resume => self.command("paused", "running"),
            FleetStep::Cancel => {
                if let Some(run) = &mut self.run {
                    run.ended_by = Some("cancel");
                }
                self.cancel();
            }
            FleetStep::RestartRoot { replica } => {
                // A read cut off mid-call (its driver killed, or the replica holding the
                // hubs) is sent again: a second call its hub holds. A write is sent again
                // under its key and answered `busy` until its first execution is done.
                // A run whose authority ended sends nothing more: what ran is `failed`
                // (`cancelled`), its answer unknown to root.
                let killed = replica as usize % self.replicas;
                let cut_off = self
                    .run
                    .as_ref()
                    .is_some_and(|r| killed == 0 || killed == r.driver);
                let authority = self.run.as_ref().is_some_and(|r| self.authority(r));
                if cut_off && !authority {
                    let run = self.run.as_mut().expect("the open run");
                    for p in run.parts.iter_mut().filter(|p| p.status == "running") {
                        p.status = "failed";
                        p.code = Some("cancelled");
                    }
                } else if cut_off && self.run.as_ref().is_some_and(|r| !r.write) {
                    for t in self.running_targets() {
                        self.held[t] += 1;
                    }
                } else if cut_off {
                    let run = self.run.as_mut().expect("the open run");
                    for p in run.parts.iter_mut().filter(|p| p.status == "running") {
                        p.resent = true;
                    }
                }
            }
        }
        self.advance();
    }

    fn command(&mut self, from: &str, to: &'static str) {
        if let Some(run) = &mut self.run
            && run.state == from
        {
            run.state = to;
        }
    }

    /// The run is cancelled: what had not started never starts.
    fn cancel(&mut self) {
        if let Some(run) = &mut self.run
            && matches!(run.state, "running" | "paused")
        {
            run.state = "cancelled";
            for p in run.parts.iter_mut().filter(|p| p.status == "pending") {
                p.status = "cancelled";
            }
        }
    }

    fn start(&mut self, write: bool, who: Who, selector: Sel, plan: Plan) {
        let set: Vec<usize> = (0..SIMS).filter(|&t| self.names(selector, t)).collect();
        if set.is_empty() {
            // A selector naming no target is refused; an agent's lease was issued first.
            self.answer = Answer::Refused(400);
            return;
        }
        let mut parts: Vec<Part> = set
            .iter()
            .map(|&t| Part {
                target: t,
                status: "pending",
                code: None,
                canary: false,
                resent: false,
            })
            .collect();
        if write {
            // The preview: a target whose dry run cannot answer does not take part.
            for p in &mut parts {
                let t = &self.targets[p.target];
                let why = match t.life {
                    Life::Retired => Some("target_retired"),
                    Life::Cordoned => Some("target_cordoned"),
                    Life::Active if t.narrowed => Some("target_narrowed"),
                    Life::Active if t.moved => Some("environment_forbidden"),
                    Life::Active => None,
                };
                if let Some(code) = why {
                    p.status = "excluded";
                    p.code = Some(code);
                }
            }
        }
        let taking_part = parts.iter().filter(|p| p.status == "pending").count();
        let canary = (plan.canary as usize).min(taking_part);
        for p in parts
            .iter_mut()
            .filter(|p| p.status == "pending")
            .take(canary)
        {
            p.canary = true;
        }
        self.last = None;
        self.run = Some(Run {
            write,
            who,
            selector,
            parts,
            state: "running",
            errors: 0,
            canary,
            window: of(plan.window, taking_part, true),
            budget: of(plan.budget, taking_part, false),
            lease: matches!(who, Who::Agent { .. }),
            ended_by: None,
            driver: self.steps % self.replicas,
        });
    }

    /// Whether the open run's authority holds: its operator, or its fleet lease.
    fn authority(&self, run: &Run) -> bool {
        match run.who {
            Who::Admin => true,
            Who::Operator(n) => self.operators[n as usize] == Operator::Active,
            Who::Agent { .. } => run.lease,
        }
    }

    /// The run goes as far as it can until a hub holds what runs (the driver's loop).
    fn advance(&mut self) {
        let Some(run) = self.run.clone() else {
            return;
        };
        if !self.authority(&run) {
            if matches!(run.state, "running" | "paused") {
                self.cancel();
                if let Some(r) = &mut self.run {
                    r.ended_by = Some("authority");
                }
            }
            // A write asking again after a restart asks no more: its answer is unknown.
            if let Some(r) = &mut self.run {
                for p in r
                    .parts
                    .iter_mut()
                    .filter(|p| p.resent && p.status == "running")
                {
                    p.status = "failed";
                    p.code = Some("cancelled");
                }
            }
        }
        let mut run = self.run.take().expect("the open run");
        if run.state == "running" && run.errors <= run.budget {
            self.fill(&mut run);
        }
        let open = |s: &str| run.parts.iter().any(|p| p.status == s);
        if !open("running") {
            if run.state == "cancelled" {
                self.close(run);
                return;
            }
            if !open("pending") {
                run.state = "completed";
                self.close(run);
                return;
            }
            if run.errors > run.budget {
                run.state = "stopped";
                for p in run.parts.iter_mut().filter(|p| p.status == "pending") {
                    p.status = "skipped";
                }
                self.close(run);
                return;
            }
        }
        self.run = Some(run);
    }

    /// Starts targets in order while the plan allows. A call the call path answers at once
    /// (see [`FleetModel::at_call`]) runs for a moment: it holds its place in the window
    /// while the targets after it are started, then fails, and the run goes on from there.
    fn fill(&mut self, run: &mut Run) {
        let mut at_once = std::collections::VecDeque::new();
        self.fill_pass(run, &mut at_once);
        while let Some((i, status, code)) = at_once.pop_front() {
            let p: &mut Part = &mut run.parts[i];
            p.status = status;
            p.code = Some(code);
            run.errors += 1;
            if run.state == "running" && run.errors <= run.budget {
                self.fill_pass(run, &mut at_once);
            }
        }
    }

    fn fill_pass(
        &mut self,
        run: &mut Run,
        at_once: &mut std::collections::VecDeque<(usize, &'static str, &'static str)>,
    ) {
        while let Some(i) = run.parts.iter().position(|p| p.status == "pending") {
            let running = run.parts.iter().filter(|p| p.status == "running");
            let canaries_running = running.clone().filter(|p| p.canary).count();
            let canary = run.parts[i].canary;
            if !canary && canaries_running > 0 {
                return;
            }
            let limit = if canary { run.canary } else { run.window };
            if running.count() >= limit {
                return;
            }
            let t = run.parts[i].target;
            if let Some((status, code)) = self.standing(run.selector, t) {
                let p = &mut run.parts[i];
                p.status = status;
                p.code = Some(code);
                if status == "refused" {
                    run.errors += 1;
                }
                if run.errors > run.budget {
                    return;
                }
                continue;
            }
            run.parts[i].status = "running";
            if let Some((status, code)) = self.at_call(t, run.write) {
                at_once.push_back((i, status, code));
                continue;
            }
            self.held[t] += 1;
            if run.write {
                self.executions[t] += 1;
            }
        }
    }

    fn close(&mut self, run: Run) {
        self.last = Some(run);
        self.run = None;
    }

    /// What the world must show now.
    pub fn snapshot(&self) -> Snapshot {
        let run = self.run.as_ref().or(self.last.as_ref()).map(|r| {
            let parts = r
                .parts
                .iter()
                .map(|p| (sim_id(p.target), p.shown()))
                .collect();
            (r.state.to_owned(), parts)
        });
        let by_target = |v: &[u32; SIMS]| {
            (0..SIMS)
                .filter(|&t| v[t] > 0)
                .map(|t| (sim_id(t), v[t]))
                .collect()
        };
        Snapshot {
            run,
            held: by_target(&self.held),
            executions: by_target(&self.executions),
        }
    }

    /// The rules the current snapshot exercises (for the report).
    pub fn exercised(&self) -> Vec<&'static str> {
        let mut rules = vec!["F6 every target reported"];
        let Some(run) = self.run.as_ref().or(self.last.as_ref()) else {
            return Vec::new();
        };
        if run.write && self.executions.iter().any(|&n| n > 0) {
            rules.push("F1 once per confirmation");
        }
        if run
            .parts
            .iter()
            .any(|p| matches!(p.status, "refused" | "excluded" | "undeliverable"))
        {
            rules.push("F2 authority at call time");
        }
        if run.canary > 0 && run.parts.iter().any(|p| p.canary && p.status == "running") {
            rules.push("F3 canaries first");
        }
        if run.state == "stopped" || run.parts.iter().filter(|p| p.status == "running").count() > 1
        {
            rules.push("F4 window and budget");
        }
        if run.state == "cancelled" || run.state == "paused" {
            rules.push("F5 authority ends the run");
        }
        if self.run.is_none() {
            rules.push("F7 one trace");
        }
        rules
    }
}
