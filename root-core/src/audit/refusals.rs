//! Refused credentials in the trail, bounded: each address gets at most
//! [`PER_ADDRESS`] events per window for its 401s, and the zone's root at most [`OVERALL`], so a
//! flood of guesses cannot fill the trail; what is not recorded is counted, and the address's
//! next event carries the count (so does `/metrics`).

use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use dashmap::DashMap;

/// Events per address per window.
pub const PER_ADDRESS: u32 = 10;
/// Events from all addresses per window.
pub const OVERALL: u32 = 600;
/// The window.
pub const WINDOW: Duration = Duration::from_secs(60);
/// Addresses remembered at once; past it, windows that ended are forgotten first.
const ADDRESSES: usize = 10_000;

/// Whether a refusal is recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Record it, with the refusals of this address not recorded since its last event.
    Record { unrecorded: u64 },
    /// Count it only.
    Count,
}

#[derive(Debug, Clone, Copy)]
struct Window {
    started: Instant,
    recorded: u32,
    unrecorded: u64,
}

/// The per-address and overall windows.
pub struct Limiter {
    addresses: DashMap<IpAddr, Window>,
    overall: Mutex<(Instant, u32)>,
}

impl Default for Limiter {
    fn default() -> Limiter {
        Limiter {
            addresses: DashMap::new(),
            overall: Mutex::new((Instant::now(), 0)),
        }
    }
}

impl Limiter {
    /// Whether the refusal of a request from `address` at `now` is recorded.
    pub fn admit(&self, address: IpAddr, now: Instant) -> Admit {
        if self.addresses.len() >= ADDRESSES && !self.addresses.contains_key(&address) {
            self.addresses
                .retain(|_, w| now.duration_since(w.started) < WINDOW);
        }
        let overall_open = {
            let mut o = self.overall.lock().unwrap_or_else(|e| e.into_inner());
            if now.duration_since(o.0) >= WINDOW {
                *o = (now, 0);
            }
            o.1 < OVERALL
        };
        if self.addresses.len() >= ADDRESSES && !self.addresses.contains_key(&address) {
            return Admit::Count;
        }
        let mut w = self.addresses.entry(address).or_insert(Window {
            started: now,
            recorded: 0,
            unrecorded: 0,
        });
        if now.duration_since(w.started) >= WINDOW {
            w.started = now;
            w.recorded = 0;
        }
        if w.recorded >= PER_ADDRESS || !overall_open {
            w.unrecorded += 1;
            return Admit::Count;
        }
        w.recorded += 1;
        self.overall.lock().unwrap_or_else(|e| e.into_inner()).1 += 1;
        Admit::Record {
            unrecorded: std::mem::take(&mut w.unrecorded),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_past_its_limit_is_counted_and_its_next_event_says_how_often() {
        let l = Limiter::default();
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let t0 = Instant::now();
        for _ in 0..PER_ADDRESS {
            assert!(matches!(l.admit(a, t0), Admit::Record { unrecorded: 0 }));
        }
        for _ in 0..5 {
            assert_eq!(l.admit(a, t0), Admit::Count);
        }
        // Another address is not held back by the first.
        assert_eq!(l.admit(b, t0), Admit::Record { unrecorded: 0 });
        // The next window records again, with the count.
        assert_eq!(l.admit(a, t0 + WINDOW), Admit::Record { unrecorded: 5 });
        assert_eq!(l.admit(a, t0 + WINDOW), Admit::Record { unrecorded: 0 });
    }

    #[test]
    fn many_addresses_share_one_overall_limit() {
        let l = Limiter::default();
        let t0 = Instant::now();
        let recorded = (0..2000u32)
            .map(|i| IpAddr::from([10, (i >> 16) as u8, (i >> 8) as u8, i as u8]))
            .filter(|ip| matches!(l.admit(*ip, t0), Admit::Record { .. }))
            .count();
        assert_eq!(recorded, OVERALL as usize);
    }
}
