//! The bootstrap admin token as break-glass: every request it authenticates is counted, by
//! address, and each address's uses go into the audit trail as one `admin.breakglass.use`
//! event per window (`[audit] breakglass_window_sec`, a minute by default: how many, which
//! requests, from when to when), besides its operator actions, each an event of its own;
//! the console's Overview shows the last use. The counting is `audit::breakglass`. People sign in with
//! their own identity (named operators, `[operators.oidc]`); the admin token is for when
//! that is not possible.

use std::net::IpAddr;
use std::time::Duration;

use mcp_shared::time::format;
use serde_json::json;

use crate::app::App;

/// Records each address's uses once its window (`[audit] breakglass_window_sec`) is over,
/// until root stops.
pub(crate) async fn run(app: std::sync::Arc<App>) {
    let window = app.config.audit.breakglass_window();
    let tick = (window / 4).clamp(Duration::from_millis(250), Duration::from_secs(5));
    loop {
        tokio::select! {
            () = app.shutdown.cancelled() => return,
            () = tokio::time::sleep(tick) => {}
        }
        for (address, w) in app.breakglass.closed(window) {
            record(&app, address, w).await;
        }
    }
}

async fn record(app: &App, address: Option<IpAddr>, w: crate::audit::breakglass::Window) {
    let address = address.map_or_else(|| "unknown".to_owned(), |a| a.to_string());
    let named: u64 = w.requests.values().sum();
    let action = crate::audit::Recorded {
        surface: mcp_shared::event::Surface::Admin,
        actor: crate::operators::OperatorId::admin().actor_id(),
        tool_id: "admin.breakglass.use".into(),
        target_id: None,
        adapter: Some("root.operators".into()),
        started_at: w.from,
        request: json!({
            "address": address,
            "uses": w.uses,
            "from": format(w.from),
            "requests": w.requests,
            "other_requests": w.uses - named,
        }),
        trace_id: None,
    };
    let summary = format!(
        "the bootstrap admin token authenticated {} request{} from {address} since {}",
        w.uses,
        if w.uses == 1 { "" } else { "s" },
        format(w.from)
    );
    if let Err(e) = crate::ops::audited::record(app, action, Ok(summary)).await {
        tracing::error!(error = ?e.tool_error(), "cannot record the admin token's uses");
    }
}
