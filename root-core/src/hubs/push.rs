//! Pushes of root's desired skill state to a hub, and what a hub reports of its skill.
//!
//! Root's desired state ([`skill::Desired`]) is in force at root the moment an operator sets
//! it; a push brings the hub's own view in line: the commands (install or uninstall, enable
//! or disable) its last report differs in, one push per target at a time ([`PushLocks`]).
//! How a command reaches the hub (this replica's link, or the replica holding it) is the
//! caller's, handed in as `send`. A hub's report (`hello`, `surface_changed`) updates the
//! gate; an update of the skill or an owner's switch comes back as a [`SkillChange`] for the
//! caller to record in the audit trail.

use std::sync::Arc;

use mcp_shared::error::{ErrorCode, ToolError};
use mcp_shared::protocol::{SkillCommand, SkillState};
use serde_json::{Value, json};

use super::Hubs;
use super::skill::{Gate, SKILL};

/// Serializes pushes of the desired state to one target's hub, so the last one sent is the
/// newest (an operator's command and a reconnect's push never overtake each other).
#[derive(Default)]
pub struct PushLocks(dashmap::DashMap<String, Arc<tokio::sync::Mutex<()>>>);

impl PushLocks {
    fn of(&self, target_id: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.0.entry(target_id.to_owned()).or_default().clone()
    }
}

/// What a push of the desired state came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pushed {
    /// The hub applied it (or had it already).
    Applied,
    /// The hub is not connected to any replica: it gets the desired state when it connects.
    Pending,
    /// The hub did not apply it: why. Root enforces the desired state regardless.
    Failed(String),
}

impl Pushed {
    /// The push in words, for an operator's answer.
    pub fn describe(&self) -> String {
        match self {
            Pushed::Applied => "applied at the hub".into(),
            Pushed::Pending => "the hub is offline; it is applied when the hub connects".into(),
            Pushed::Failed(why) => format!("not applied at the hub ({why}); in force at root"),
        }
    }

    /// What sending one command came to, when it did not come to the hub's state.
    pub(crate) fn of_error(e: ToolError) -> Pushed {
        if e.code == ErrorCode::TargetOffline {
            Pushed::Pending
        } else {
            Pushed::Failed(e.message)
        }
    }
}

/// A change of a hub's skill that goes into the audit trail: its event id, request and
/// summary.
#[derive(Debug, Clone, PartialEq)]
pub struct SkillChange {
    pub tool_id: &'static str,
    pub request: Value,
    pub summary: String,
}

/// The commands that bring a hub's reported skill to root's desired state, then an
/// operator's own command (`also`) if not among them. A hub that reports no such skill has
/// nothing to bring in line.
fn commands(gate: &Gate, also: Option<SkillCommand>) -> Vec<SkillCommand> {
    let mut commands = Vec::new();
    if let Some(r) = &gate.reported {
        if r.installed != gate.desired.installed {
            commands.push(if gate.desired.installed {
                SkillCommand::Install
            } else {
                SkillCommand::Uninstall
            });
        }
        if r.enabled != gate.desired.enabled {
            commands.push(if gate.desired.enabled {
                SkillCommand::Enable
            } else {
                SkillCommand::Disable
            });
        }
    }
    if let Some(c) = also
        && !commands.contains(&c)
    {
        commands.push(c);
    }
    commands
}

impl Hubs {
    /// Brings the hub's skill to root's desired state, sending each command with `send` and
    /// keeping the state the hub answers. `reachable` says whether some replica holds the
    /// hub (else the push is [`Pushed::Pending`]); it is awaited under the target's lock. An operator's own command (`also`) is sent
    /// even when the report already matches: an enable also gives adapters that used up
    /// their restart budget a new one on the hub.
    pub async fn push_skill<Sent>(
        &self,
        target_id: &str,
        also: Option<SkillCommand>,
        reachable: impl Future<Output = bool>,
        send: impl Fn(SkillCommand) -> Sent,
    ) -> Pushed
    where
        Sent: Future<Output = Result<SkillState, ToolError>>,
    {
        let lock = self.pushes.of(target_id);
        let _one_at_a_time = lock.lock().await;
        let Some(gate) = self.enrolments.get(target_id).map(|e| e.skill.clone()) else {
            return Pushed::Failed("not enrolled".into());
        };
        if !reachable.await {
            return Pushed::Pending;
        }
        for command in commands(&gate, also) {
            match send(command).await {
                Ok(state) => self.skill_answered(target_id, state),
                Err(e) => return Pushed::of_error(e),
            }
        }
        Pushed::Applied
    }

    /// Keeps the skill state a hub answered a command with.
    pub fn skill_answered(&self, target_id: &str, state: SkillState) {
        if let Some(mut e) = self.enrolments.get_mut(target_id) {
            e.skill.reported = Some(state);
        }
    }

    /// Takes what a connected hub reports of its skills (`hello`, `surface_changed`): kept in
    /// the gate (a gate that opened or closed announces a surface change); an update (another
    /// version or adapter set) and an owner's switch come back for the audit trail.
    pub fn skill_reported(&self, target_id: &str, skills: &[SkillState]) -> Vec<SkillChange> {
        let Some(new) = skills.iter().find(|s| s.skill == SKILL).cloned() else {
            return Vec::new();
        };
        let Some(mut e) = self.enrolments.get_mut(target_id) else {
            return Vec::new();
        };
        let was_open = e.skill.open();
        let previous = e.skill.reported.replace(new.clone());
        let now_open = e.skill.open();
        drop(e);
        if was_open != now_open {
            self.surface_changed(target_id);
        }
        let Some(old) = previous else {
            return Vec::new();
        };
        let mut changes = Vec::new();
        if old.version != new.version || old.adapters != new.adapters {
            changes.push(update(&old, &new));
        }
        if old.owner_disabled != new.owner_disabled {
            changes.push(SkillChange {
                tool_id: "target.skill.owner_switch",
                request: json!({ "owner_disabled": new.owner_disabled }),
                summary: if new.owner_disabled {
                    "the hub's owner switched the skill off on the hub".to_owned()
                } else {
                    "the hub's owner switched the skill on again".to_owned()
                },
            });
        }
        changes
    }
}

/// The audit record of a skill update: what the version and adapter set were and are.
fn update(old: &SkillState, new: &SkillState) -> SkillChange {
    let added: Vec<&String> = new
        .adapters
        .iter()
        .filter(|t| !old.adapters.contains(t))
        .collect();
    let removed: Vec<&String> = old
        .adapters
        .iter()
        .filter(|t| !new.adapters.contains(t))
        .collect();
    let summary = format!(
        "the hub published {SKILL} {} (was {}): {} tools added, {} removed",
        new.version.as_deref().unwrap_or("?"),
        old.version.as_deref().unwrap_or("?"),
        added.len(),
        removed.len()
    );
    SkillChange {
        tool_id: "target.skill.update",
        request: json!({
            "from_version": old.version,
            "to_version": new.version,
            "added": added,
            "removed": removed,
        }),
        summary,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hubs::skill::Desired;

    fn reported(installed: bool, enabled: bool, owner_disabled: bool) -> SkillState {
        SkillState {
            skill: SKILL.into(),
            installed,
            enabled,
            published: Vec::new(),
            owner_disabled,
            version: Some("1".into()),
            adapters: vec!["hub.get_status".into()],
        }
    }

    #[test]
    fn an_update_names_the_versions_and_the_tools_added_and_removed() {
        let old = reported(true, true, false);
        let mut new = old.clone();
        new.version = Some("2".into());
        new.adapters = vec!["hub.get_logs".into()];
        let change = update(&old, &new);
        assert_eq!(change.tool_id, "target.skill.update");
        assert_eq!(change.request["added"], json!(["hub.get_logs"]));
        assert_eq!(change.request["removed"], json!(["hub.get_status"]));
        assert!(change.summary.contains("2 (was 1)"), "{}", change.summary);
    }

    #[test]
    fn a_push_sends_what_the_report_differs_in_then_the_operators_own_command() {
        let gate = |installed, enabled, reported_state: Option<SkillState>| Gate {
            desired: Desired {
                installed,
                enabled,
                ..Desired::default()
            },
            reported: reported_state,
        };
        let off = gate(true, false, Some(reported(true, true, false)));
        assert_eq!(commands(&off, None), vec![SkillCommand::Disable]);
        assert_eq!(
            commands(&off, Some(SkillCommand::Disable)),
            vec![SkillCommand::Disable],
            "the operator's command is not sent twice"
        );
        let gone = gate(false, false, Some(reported(true, true, false)));
        assert_eq!(
            commands(&gone, None),
            vec![SkillCommand::Uninstall, SkillCommand::Disable]
        );
        let unknown = gate(true, true, None);
        assert_eq!(commands(&unknown, None), Vec::<SkillCommand>::new());
        assert_eq!(
            commands(&unknown, Some(SkillCommand::Enable)),
            vec![SkillCommand::Enable],
            "a re-enable renews the hub's restart budgets even when nothing differs"
        );
    }
}
