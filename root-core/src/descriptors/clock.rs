//! Root's wall clock for descriptor freshness: the system clock plus an offset that tests
//! move (`set`, `advance`) to see a descriptor fresh, stale and expired without waiting.
//! Nothing else reads it; leases, tokens and audit timestamps use the system clock.

use std::sync::atomic::{AtomicI64, Ordering};

use time::OffsetDateTime;

#[derive(Debug, Default)]
pub struct Clock {
    /// Milliseconds added to the system clock.
    offset_ms: AtomicI64,
}

impl Clock {
    /// Now, as root judges descriptor freshness.
    pub fn now(&self) -> OffsetDateTime {
        let offset = time::Duration::milliseconds(self.offset_ms.load(Ordering::Relaxed));
        let now = OffsetDateTime::now_utc();
        now.checked_add(offset).unwrap_or(now)
    }

    /// Makes `now()` return (about) `t` from here on.
    pub fn set(&self, t: OffsetDateTime) {
        let delta = (t - OffsetDateTime::now_utc()).whole_milliseconds();
        let delta = i64::try_from(delta).unwrap_or(if delta < 0 { i64::MIN } else { i64::MAX });
        self.offset_ms.store(delta, Ordering::Relaxed);
    }

    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: std::time::Duration) {
        let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        self.offset_ms
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |o| {
                Some(o.saturating_add(ms))
            })
            .ok();
    }
}
