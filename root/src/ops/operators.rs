//! Ending an operator: their credential and console sessions stop at once on every replica,
//! and so does what their authority held (the OAuth sign-ins they approved; with `cascade`,
//! every lease they issued). An operator revoked by another and a person the identity
//! provider no longer knows (`oidc::check`) end the same way.

use mcp_shared::time::{now, unix_ms};

use crate::app::App;
use crate::leases::manager::Ending;
use crate::operators::{ADMIN, OperatorId};
use crate::ops::error::Refusal;
use mcp_shared::error::ErrorCode;

/// What ended with an operator.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Ended {
    /// OAuth grants (sign-ins) the operator approved that were live.
    pub(crate) grants: usize,
    /// Leases that stopped working.
    pub(crate) leases: usize,
    /// Leases those had handed on.
    pub(crate) descendants: usize,
}

/// Revokes active operator `name` (`by`: the actor ending them) and ends what their
/// authority held; returns once every live replica refuses them.
pub(crate) async fn revoke(
    app: &App,
    name: &str,
    by: &str,
    cascade: bool,
) -> Result<Ended, Refusal> {
    if name == ADMIN {
        return Err(Refusal::new(
            ErrorCode::Conflict,
            format!(
                "`{ADMIN}` is the bootstrap operator: replace the admin token file to change it"
            ),
        ));
    }
    let revoked = app
        .store
        .revoke_operator(name, unix_ms(now()), by)
        .await
        .map_err(Refusal::internal)?;
    if !revoked {
        return Err(Refusal::not_found(format!("no active operator `{name}`")));
    }
    changed(app, name).await?;
    app.logins
        .end_operator(app, name)
        .await
        .map_err(Refusal::internal)?;
    end_authority(app, name, cascade).await
}

/// Ends what a revoked operator's authority held: the OAuth grants they approved with their
/// leases, and (`cascade`) every lease they issued; each with its descendants.
async fn end_authority(app: &App, name: &str, cascade: bool) -> Result<Ended, Refusal> {
    let grants = app
        .store
        .end_grants_of_operator(name, unix_ms(now()))
        .await
        .map_err(Refusal::internal)?;
    let mut ended = Ended {
        grants: grants.len(),
        ..Ended::default()
    };
    for g in &grants {
        let e = crate::ops::leases::end_all(app, Ending::Grant(g.grant_id.clone())).await?;
        ended.leases += e.leases.len();
        ended.descendants += e.descendants.len();
    }
    if cascade {
        let actor = OperatorId::named(name).actor_id();
        let e = crate::ops::leases::end_all(app, Ending::IssuedBy(actor)).await?;
        ended.leases += e.leases.len();
        ended.descendants += e.descendants.len();
    }
    Ok(ended)
}

/// The operators changed: reloaded here, and on every live replica before this returns.
pub(crate) async fn changed(app: &App, name: &str) -> Result<(), Refusal> {
    app.operators
        .reload(&app.store)
        .await
        .map_err(Refusal::internal)?;
    if let Some(zone) = &app.zone {
        zone.changed(crate::replica::ChangeKind::Operator, name, true)
            .await;
    }
    Ok(())
}
