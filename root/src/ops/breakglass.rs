//! The bootstrap admin token as break-glass: every request it authenticates is counted, by
//! address, and each address's uses go into the audit trail as one `admin.breakglass.use`
//! event per window (`[audit] breakglass_window_sec`, a minute by default: how many, which
//! requests, from when to when), besides its operator actions, each an event of its own;
//! the console's Overview shows the last use. People sign in with
//! their own identity (named operators, `[operators.oidc]`); the admin token is for when
//! that is not possible.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use mcp_shared::time::{format, now};
use serde_json::json;

use crate::app::App;

/// Distinct requests named per event (the rest are counted).
const REQUESTS_NAMED: usize = 20;
/// Addresses gathered at once; past it, the new address's uses are counted only.
const ADDRESSES: usize = 1024;

/// Uses of one address within a window.
struct Window {
    opened: Instant,
    from: time::OffsetDateTime,
    uses: u64,
    requests: BTreeMap<String, u64>,
}

/// The admin token's last use.
#[derive(Debug, Clone)]
pub(crate) struct LastUse {
    pub(crate) at: time::OffsetDateTime,
    pub(crate) address: Option<IpAddr>,
    pub(crate) request: String,
}

/// The admin token's uses (in [`App`]).
#[derive(Default)]
pub(crate) struct BreakGlass {
    windows: Mutex<HashMap<Option<IpAddr>, Window>>,
    last: Mutex<Option<LastUse>>,
    /// Requests the admin token authenticated since root started.
    pub(crate) uses: AtomicU64,
}

impl BreakGlass {
    /// A request authenticated by the admin token.
    pub(crate) fn used(&self, address: Option<IpAddr>, method: &str, path: &str) {
        let request = format!("{method} {path}");
        self.uses.fetch_add(1, Ordering::Relaxed);
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some(LastUse {
            at: now(),
            address,
            request: request.clone(),
        });
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        if windows.len() >= ADDRESSES && !windows.contains_key(&address) {
            return;
        }
        let w = windows.entry(address).or_insert_with(|| Window {
            opened: Instant::now(),
            from: now(),
            uses: 0,
            requests: BTreeMap::new(),
        });
        w.uses += 1;
        if w.requests.len() < REQUESTS_NAMED || w.requests.contains_key(&request) {
            *w.requests.entry(request).or_default() += 1;
        }
    }

    pub(crate) fn last(&self) -> Option<LastUse> {
        self.last.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The windows `window` old, taken out.
    fn closed(&self, window: Duration) -> Vec<(Option<IpAddr>, Window)> {
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        let done: Vec<Option<IpAddr>> = windows
            .iter()
            .filter(|(_, w)| w.opened.elapsed() >= window)
            .map(|(a, _)| *a)
            .collect();
        done.into_iter()
            .filter_map(|a| windows.remove(&a).map(|w| (a, w)))
            .collect()
    }
}

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

async fn record(app: &App, address: Option<IpAddr>, w: Window) {
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
