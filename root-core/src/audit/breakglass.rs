//! The bootstrap admin token's uses, counted by address and gathered per window (root's
//! `ops::breakglass` records each window as one audit event and shows the last use).

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use mcp_shared::time::now;

/// Distinct requests named per event (the rest are counted).
const REQUESTS_NAMED: usize = 20;
/// Addresses gathered at once; past it, the new address's uses are counted only.
const ADDRESSES: usize = 1024;

/// Uses of one address within a window.
pub struct Window {
    opened: Instant,
    pub from: time::OffsetDateTime,
    pub uses: u64,
    pub requests: BTreeMap<String, u64>,
}

/// The admin token's last use.
#[derive(Debug, Clone)]
pub struct LastUse {
    pub at: time::OffsetDateTime,
    pub address: Option<IpAddr>,
    pub request: String,
}

/// The admin token's uses (in [`App`]).
#[derive(Default)]
pub struct BreakGlass {
    windows: Mutex<HashMap<Option<IpAddr>, Window>>,
    last: Mutex<Option<LastUse>>,
    /// Requests the admin token authenticated since root started.
    pub uses: AtomicU64,
}

impl BreakGlass {
    /// A request authenticated by the admin token.
    pub fn used(&self, address: Option<IpAddr>, method: &str, path: &str) {
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

    pub fn last(&self) -> Option<LastUse> {
        self.last.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The windows `window` old, taken out.
    pub fn closed(&self, window: Duration) -> Vec<(Option<IpAddr>, Window)> {
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
