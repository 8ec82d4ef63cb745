//! Operators' skill commands (`install`, `enable`, `disable`, `uninstall`, `status`) and the
//! pushes of root's desired state to a hub; what a connected hub reports of its skill. The
//! state itself is `hubs::skill`.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use mcp_shared::error::{ErrorCode, ToolError};
use mcp_shared::protocol::{SkillCommand, SkillState};
use mcp_shared::time::now;
use serde_json::{Value, json};

use crate::api::bodies::{Audited, SkillAnswer};
use crate::api::error::ApiError;
use crate::api::principal::Operator;
use crate::app::App;
use crate::hubs::skill::SKILL;

/// Takes what a connected hub reports of its skills (`hello`, `surface_changed`): kept in
/// the gate; an update (another version or adapter set) and an owner's switch are recorded
/// in the audit trail. The caller stores the report with the descriptor.
pub fn reported(app: &Arc<App>, target_id: &str, skills: &[SkillState]) {
    let Some(new) = skills.iter().find(|s| s.skill == SKILL).cloned() else {
        return;
    };
    let Some(mut e) = app.hubs.enrolments.get_mut(target_id) else {
        return;
    };
    let was_open = e.skill.open();
    let previous = e.skill.reported.replace(new.clone());
    let now_open = e.skill.open();
    drop(e);
    if was_open != now_open {
        app.hubs.surface_changed(target_id);
    }
    let Some(old) = previous else { return };
    let mut changes = Vec::new();
    if old.version != new.version || old.adapters != new.adapters {
        changes.push(update_event(&old, &new));
    }
    if old.owner_disabled != new.owner_disabled {
        changes.push((
            "target.skill.owner_switch",
            json!({ "owner_disabled": new.owner_disabled }),
            if new.owner_disabled {
                "the hub's owner switched the skill off on the hub".to_owned()
            } else {
                "the hub's owner switched the skill on again".to_owned()
            },
        ));
    }
    for (tool_id, request, summary) in changes {
        let (app, target_id) = (app.clone(), target_id.to_owned());
        tokio::spawn(async move {
            let action = crate::audit::Recorded {
                surface: mcp_shared::event::Surface::Hub,
                actor: format!("target:{target_id}"),
                tool_id: tool_id.into(),
                target_id: Some(&target_id),
                adapter: Some(format!("hub.skill:{SKILL}")),
                started_at: now(),
                request,
            };
            if let Err(e) = crate::api::audited::record(&app, action, Ok(summary)).await {
                tracing::error!(%target_id, error = ?e, "a skill change of the hub was not recorded");
            }
        });
    }
}

/// The audit record of a skill update: what the version and adapter set were and are.
fn update_event(old: &SkillState, new: &SkillState) -> (&'static str, Value, String) {
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
    (
        "target.skill.update",
        json!({
            "from_version": old.version,
            "to_version": new.version,
            "added": added,
            "removed": removed,
        }),
        summary,
    )
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
    fn describe(&self) -> String {
        match self {
            Pushed::Applied => "applied at the hub".into(),
            Pushed::Pending => "the hub is offline; it is applied when the hub connects".into(),
            Pushed::Failed(why) => format!("not applied at the hub ({why}); in force at root"),
        }
    }
}

/// Brings the hub's skill to root's desired state: the commands (install or uninstall,
/// enable or disable) that its last report differs in, through the replica holding it. An
/// operator's own command (`also`) is sent even when the report already matches: an enable
/// also gives adapters that used up their restart budget a new one on the hub.
pub async fn push(app: &App, target_id: &str, also: Option<SkillCommand>) -> Pushed {
    let lock = app.hubs.pushes.of(target_id);
    let _one_at_a_time = lock.lock().await;
    let Some(gate) = app.hubs.enrolments.get(target_id).map(|e| e.skill.clone()) else {
        return Pushed::Failed("not enrolled".into());
    };
    let connected = app.hubs.connected(target_id)
        || match &app.zone {
            Some(z) => z.owner_of(target_id).await.is_some(),
            None => false,
        };
    if !connected {
        return Pushed::Pending;
    }
    // A hub that reports no such skill has nothing to bring in line (only an operator's own
    // command is sent to it, and answered for what it is).
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
    for command in commands {
        match crate::replica::forward::skill_command(app, target_id, SKILL, command).await {
            Ok(state) => {
                if let Some(mut e) = app.hubs.enrolments.get_mut(target_id) {
                    e.skill.reported = Some(state);
                }
            }
            Err(e) if e.code == ErrorCode::TargetOffline => return Pushed::Pending,
            Err(e) => return Pushed::Failed(e.message),
        }
    }
    Pushed::Applied
}

trait AuditId {
    fn audit_id(self) -> &'static str;
}

impl AuditId for SkillCommand {
    /// The operator event of the command.
    fn audit_id(self) -> &'static str {
        match self {
            SkillCommand::Install => "admin.skill.install",
            SkillCommand::Enable => "admin.skill.enable",
            SkillCommand::Disable => "admin.skill.disable",
            SkillCommand::Uninstall => "admin.skill.uninstall",
            SkillCommand::Status => "admin.skill.status",
        }
    }
}

/// A lifecycle command by name.
fn command_of(name: &str) -> Option<SkillCommand> {
    Some(match name {
        "install" => SkillCommand::Install,
        "uninstall" => SkillCommand::Uninstall,
        "enable" => SkillCommand::Enable,
        "disable" => SkillCommand::Disable,
        "status" => SkillCommand::Status,
        _ => return None,
    })
}

/// `POST /v1/root/hubs/{target_id}/skills/{skill}/{command}`: `install`, `enable`,
/// `disable`, `uninstall` (root's desired state: stored, in force at root at once, pushed to
/// the hub) or `status`; each one audited event (`admin.skill.<command>`) naming the
/// operator. A target whose hub is offline is switched all the same.
pub async fn command(
    State(app): State<Arc<App>>,
    op: Operator,
    Path((target_id, skill, name)): Path<(String, String, String)>,
) -> Result<Response, ApiError> {
    let asked = crate::api::audited::Asked {
        tool_id: match command_of(&name) {
            Some(c) => c.audit_id(),
            None => "admin.skill.unknown",
        },
        target_id: Some(target_id.clone()),
        adapter: Some(format!("hub.skill:{SKILL}")),
        request: json!({ "target_id": target_id, "skill": skill, "command": name }),
    };
    let (gate, event_id) = crate::api::audited::audited(&app, &op, asked, async {
        let command = command_of(&name).ok_or_else(|| {
            ApiError::bad_request(format!(
                "command must be install, enable, disable, uninstall or status, not `{name}`"
            ))
        })?;
        if skill != SKILL {
            return Err(ApiError::not_found(format!(
                "no skill `{skill}`: root governs `{SKILL}`"
            )));
        }
        if !app.hubs.enrolments.contains_key(&target_id) {
            return Err(ApiError::not_found(format!(
                "target `{target_id}` is not enrolled"
            )));
        }
        let pushed = match command {
            SkillCommand::Status => status(&app, &target_id).await,
            change => set(&app, &op, &target_id, change).await,
        }
        .map_err(|e| ApiError::of_tool(&e))?;
        let gate = app
            .hubs
            .enrolments
            .get(&target_id)
            .map(|e| e.skill.clone())
            .unwrap_or_default();
        let summary = format!(
            "{SKILL}: desired {}, {}; {}; {}",
            if gate.desired.installed {
                "installed"
            } else {
                "uninstalled"
            },
            if gate.desired.enabled {
                "enabled"
            } else {
                "disabled"
            },
            if gate.open() {
                "callable"
            } else {
                "not callable"
            },
            pushed.describe()
        );
        Ok(((gate, pushed), summary))
    })
    .await?;
    let (gate, pushed) = gate;
    let mut skill = gate.view();
    skill.hub_push = Some(pushed.describe());
    let answer = Audited {
        item: SkillAnswer { target_id, skill },
        event_id,
    };
    Ok(Json(answer).into_response())
}

/// Changes root's desired state: stored, in force here and on every live replica when this
/// returns, then pushed to the hub.
async fn set(
    app: &App,
    op: &Operator,
    target_id: &str,
    command: SkillCommand,
) -> Result<Pushed, ToolError> {
    // Store and memory change together with respect to a replica's enrolment reload (as a
    // key rotation does), which could otherwise put back the state it read before this one.
    let one_writer = match &app.zone {
        Some(z) => Some(z.enrolment_writes.lock().await),
        None => None,
    };
    let current = app
        .hubs
        .enrolments
        .get(target_id)
        .map(|e| e.skill.desired.clone())
        .unwrap_or_default();
    let desired = current.after(command, &op.actor_id());
    let stored = serde_json::to_string(&desired)
        .map_err(|e| ToolError::new(ErrorCode::Internal, e.to_string()))?;
    match app.store.set_skill_desired(target_id, &stored).await {
        Ok(true) => {}
        Ok(false) => {
            return Err(ToolError::new(
                ErrorCode::NotFound,
                format!("target `{target_id}` is not enrolled"),
            ));
        }
        Err(e) => {
            tracing::error!(%target_id, error = %e, "cannot store the desired skill state");
            return Err(ToolError::new(
                ErrorCode::Internal,
                "the desired skill state could not be stored; nothing changed",
            ));
        }
    }
    if let Some(mut e) = app.hubs.enrolments.get_mut(target_id) {
        e.row.skill_desired = Some(stored);
        e.skill.desired = desired;
    }
    drop(one_writer);
    app.hubs.surface_changed(target_id);
    // Every live replica refuses (or allows) from here on.
    crate::replica::target_changed(app, target_id, true).await;
    tracing::info!(%target_id, command = command.as_str(), operator = %op.actor_id(), "skill desired state changed");
    Ok(push(app, target_id, Some(command)).await)
}

/// The hub's live state when it is connected (refreshing the report), else the last one.
async fn status(app: &App, target_id: &str) -> Result<Pushed, ToolError> {
    match crate::replica::forward::skill_command(app, target_id, SKILL, SkillCommand::Status).await
    {
        Ok(state) => {
            if let Some(mut e) = app.hubs.enrolments.get_mut(target_id) {
                e.skill.reported = Some(state);
            }
            Ok(Pushed::Applied)
        }
        Err(e) if e.code == ErrorCode::TargetOffline => Ok(Pushed::Pending),
        Err(e) => Err(e),
    }
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
    fn an_update_names_the_versions_and_the_tools_added_and_removed() {
        let old = reported(true, true, false);
        let mut new = old.clone();
        new.version = Some("2".into());
        new.adapters = vec!["hub.get_logs".into()];
        let (tool, request, summary) = update_event(&old, &new);
        assert_eq!(tool, "target.skill.update");
        assert_eq!(request["added"], json!(["hub.get_logs"]));
        assert_eq!(request["removed"], json!(["hub.get_status"]));
        assert!(summary.contains("2 (was 1)"), "{summary}");
    }
}
