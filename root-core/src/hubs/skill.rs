//! Each managed target's `infra_access_skill` as root governs it (seed "infra_access_skill":
//! install, enable, disable, update, audit, per-target policy gating).
//!
//! - **Root's desired state** ([`Desired`]): installed or not, enabled or not. An operator's
//!   `install`, `enable`, `disable` or `uninstall` takes effect at root at once (the policy
//!   engine refuses the target's tools with `skill_disabled` from the next request, on every
//!   replica), is stored, and is pushed to the hub now if it is connected, else when it
//!   reconnects ([`Hubs::push_skill`](super::Hubs::push_skill)); the hub's own view follows.
//! - **The hub's owner** may switch the skill off on the hub itself (`mcp-hub skill
//!   disable`). The hub reports it (`owner_disabled`); root shows it and cannot override it.
//! - **Updates**: a hub that publishes another version or adapter set of the skill is
//!   recorded in the audit trail (`target.skill.update`), like an owner's switch
//!   (`target.skill.owner_switch`).
//! - The [`Gate`] is what the policy engine reads for every tool a target's skill publishes
//!   (routed, or executed on root with a contract `skill`): open while root's desired state
//!   is installed and enabled and the owner has not switched the skill off.

use mcp_shared::protocol::{SkillCommand, SkillState};
use mcp_shared::time::{format, now};
use serde::{Deserialize, Serialize};

use crate::store::TargetRow;

/// The one skill root governs on its targets.
pub const SKILL: &str = "infra_access_skill";

/// Root's desired state of a target's skill (stored as JSON in `targets.skill_desired`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Desired {
    pub installed: bool,
    pub enabled: bool,
    /// The operator who last changed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed_by: Option<String>,
    /// When (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) changed_at: Option<String>,
}

impl Default for Desired {
    /// A newly enrolled target's skill is installed and enabled (its hub decides what it
    /// serves; root what may be called).
    fn default() -> Self {
        Desired {
            installed: true,
            enabled: true,
            changed_by: None,
            changed_at: None,
        }
    }
}

impl Desired {
    /// The state after `command` (unchanged for `status`).
    pub fn after(&self, command: SkillCommand, by: &str) -> Desired {
        let (installed, enabled) = match command {
            SkillCommand::Install => (true, self.enabled),
            SkillCommand::Uninstall => (false, self.enabled),
            SkillCommand::Enable => (self.installed, true),
            SkillCommand::Disable => (self.installed, false),
            SkillCommand::Status => return self.clone(),
        };
        Desired {
            installed,
            enabled,
            changed_by: Some(by.to_owned()),
            changed_at: Some(format(now())),
        }
    }
}

/// What root knows of a target's skill: its desired state and the hub's last report.
#[derive(Debug, Clone, Default)]
pub struct Gate {
    pub desired: Desired,
    /// The hub's last report (`hello`, `surface_changed`, a command's answer), if it ever
    /// connected.
    pub reported: Option<SkillState>,
}

impl Gate {
    /// The gate of a stored target: its desired state and the skill states last stored.
    pub fn from_row(row: &TargetRow) -> Gate {
        let desired = row
            .skill_desired
            .as_deref()
            .map(|d| match serde_json::from_str(d) {
                Ok(d) => d,
                Err(e) => {
                    // Fail closed: a desired state root cannot read keeps the skill off.
                    tracing::error!(target_id = %row.target_id, error = %e, "stored desired skill state is unreadable; treating the skill as disabled");
                    Desired {
                        enabled: false,
                        ..Desired::default()
                    }
                }
            })
            .unwrap_or_default();
        let reported = row
            .skills
            .as_deref()
            .and_then(|s| serde_json::from_str::<Vec<SkillState>>(s).ok())
            .and_then(|states| states.into_iter().find(|s| s.skill == SKILL));
        Gate { desired, reported }
    }

    /// Whether the hub's owner switched the skill off (as last reported).
    pub fn owner_disabled(&self) -> bool {
        self.reported.as_ref().is_some_and(|r| r.owner_disabled)
    }

    /// Whether the target's skill tools may be called.
    pub fn open(&self) -> bool {
        self.closed_because().is_none()
    }

    /// Why the gate is closed, in an operator's words; `None` while it is open.
    pub fn closed_because(&self) -> Option<String> {
        if !self.desired.installed {
            Some(format!(
                "`{SKILL}` is uninstalled on this target by an operator"
            ))
        } else if !self.desired.enabled {
            Some(format!(
                "`{SKILL}` is disabled on this target by an operator"
            ))
        } else if self.owner_disabled() {
            Some(format!(
                "`{SKILL}` is switched off on the hub by its owner (`mcp-hub skill enable` there switches it on)"
            ))
        } else {
            None
        }
    }

    /// The operator's view: desired, reported, and whether it is open (and why not).
    pub fn view(&self) -> SkillView {
        SkillView {
            skill: SKILL.into(),
            desired: self.desired.clone(),
            hub: self.reported.clone(),
            owner_disabled: self.owner_disabled(),
            open: self.open(),
            closed_because: self.closed_because(),
            hub_push: None,
        }
    }
}

/// A target's skill as operators see it (the REST family, the console, the admin CLI).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillView {
    pub skill: String,
    /// Root's desired state.
    pub desired: Desired,
    /// The hub's last report (`None` if it never connected).
    pub hub: Option<SkillState>,
    pub owner_disabled: bool,
    /// Whether its tools are callable.
    pub open: bool,
    pub closed_because: Option<String>,
    /// What pushing a command to the hub came to (answers to a command only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hub_push: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn the_gate_is_open_only_while_installed_enabled_and_not_switched_off_by_the_owner() {
        let mut g = Gate::default();
        assert!(g.open(), "a new target's skill is installed and enabled");
        g.desired = g.desired.after(SkillCommand::Disable, "operator:ann");
        assert!(!g.open());
        assert!(g.closed_because().unwrap().contains("disabled"));
        assert_eq!(g.desired.changed_by.as_deref(), Some("operator:ann"));
        g.desired = g.desired.after(SkillCommand::Enable, "operator:ann");
        g.desired = g.desired.after(SkillCommand::Uninstall, "operator:ann");
        assert!(!g.open() && g.closed_because().unwrap().contains("uninstalled"));
        g.desired = g.desired.after(SkillCommand::Install, "operator:ann");
        assert!(g.open());
        // The hub's report of what root directed does not open or close the gate; its
        // owner's switch closes it, and root cannot override that.
        g.reported = Some(reported(false, false, false));
        assert!(g.open());
        g.reported = Some(reported(true, true, true));
        assert!(!g.open() && g.closed_because().unwrap().contains("owner"));
        assert_eq!(g.desired.after(SkillCommand::Status, "x"), g.desired);
    }

    #[test]
    fn an_unreadable_desired_state_keeps_the_skill_off() {
        let row = TargetRow {
            target_id: "hub:x".into(),
            environment: "test".into(),
            subnet_id: "s".into(),
            zone: "z".into(),
            token_hash: String::new(),
            signing_key: String::new(),
            enrolled_at_ms: 0,
            last_seen_at_ms: None,
            descriptor: None,
            skills: None,
            skill_desired: Some("{not json".into()),
            labels: None,
            lifecycle: None,
            narrowing: None,
        };
        assert!(!Gate::from_row(&row).open());
    }
}
