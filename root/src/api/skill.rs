//! Operators' skill commands (`install`, `enable`, `disable`, `uninstall`, `status`): root's
//! desired state stored and in force on every replica, then pushed to the hub
//! ([`crate::replica::forward::push_skill`]). The state is `hubs::skill`, the push `hubs::push`.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use mcp_shared::error::{ErrorCode, ToolError};
use mcp_shared::protocol::SkillCommand;
use serde_json::json;

use crate::api::bodies::{Audited, SkillAnswer};
use crate::api::error::ApiError;
use crate::api::principal::Operator;
use crate::app::App;
use crate::hubs::push::Pushed;
use crate::hubs::skill::SKILL;

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
pub(crate) async fn command(
    State(app): State<Arc<App>>,
    op: Operator,
    Path((target_id, skill, name)): Path<(String, String, String)>,
) -> Result<Response, ApiError> {
    let asked = crate::ops::audited::Asked {
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
    let one_writer = crate::replica::enrolment_write(app).await;
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
    Ok(crate::replica::forward::push_skill(app, target_id, Some(command)).await)
}

/// The hub's live state when it is connected (refreshing the report), else the last one.
async fn status(app: &App, target_id: &str) -> Result<Pushed, ToolError> {
    match crate::replica::forward::skill_command(app, target_id, SKILL, SkillCommand::Status).await
    {
        Ok(state) => {
            app.hubs.skill_answered(target_id, state);
            Ok(Pushed::Applied)
        }
        Err(e) if e.code == ErrorCode::TargetOffline => Ok(Pushed::Pending),
        Err(e) => Err(e),
    }
}
