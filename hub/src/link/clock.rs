//! The hub's clocks: its own wall clock, and root's as measured at each `welcome`.
//!
//! Root stamps `welcome` with its wall clock (`root_time_ms`) and the largest offset it accepts
//! (`max_clock_skew_ms`). The hub keeps the offset between the two (transit time on a live
//! connection is noise next to any skew that matters) and:
//! - judges call deadlines and replay retention in root's time, so a skew within the allowed
//!   window never expires a call early or runs it late;
//! - refuses every call with `clock_skew`, naming the offset, while the offset exceeds the
//!   window (a clock that far off makes the hub's own timestamps, logs and certificate checks
//!   wrong); a reconnect measures again.
//!
//! A `welcome` without a time (an older root) leaves the hub on its own clock, unchecked.
//! `skill.test_clock_offset_ms` (tests only) moves the hub's own clock.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use mcp_shared::error::{ErrorCode, ToolError};

/// The hub's clock and root's offset from it.
#[derive(Debug, Default)]
pub(crate) struct HubClock {
    /// Added to the system clock (tests only).
    test_offset_ms: i64,
    /// Root's clock minus the hub's, as last measured.
    root_offset_ms: AtomicI64,
    /// The largest offset root accepts; `u64::MAX` when root named none.
    max_skew_ms: AtomicU64,
}

impl HubClock {
    pub(crate) fn new(test_offset_ms: i64) -> HubClock {
        HubClock {
            test_offset_ms,
            root_offset_ms: AtomicI64::new(0),
            max_skew_ms: AtomicU64::new(u64::MAX),
        }
    }

    /// The hub's own wall clock, unix milliseconds.
    pub(crate) fn now_ms(&self) -> i64 {
        mcp_shared::time::unix_ms(mcp_shared::time::now()).saturating_add(self.test_offset_ms)
    }

    /// Root's clock, as far as the hub knows: what deadlines are judged by.
    pub(crate) fn root_now_ms(&self) -> i64 {
        self.now_ms()
            .saturating_add(self.root_offset_ms.load(Ordering::Acquire))
    }

    /// Takes root's time and window from a `welcome` received now.
    pub(crate) fn welcomed(&self, root_time_ms: Option<i64>, max_skew_ms: Option<u64>) {
        let offset = root_time_ms.map_or(0, |t| t.saturating_sub(self.now_ms()));
        self.root_offset_ms.store(offset, Ordering::Release);
        self.max_skew_ms.store(
            if root_time_ms.is_some() {
                max_skew_ms.unwrap_or(u64::MAX)
            } else {
                u64::MAX
            },
            Ordering::Release,
        );
        if root_time_ms.is_some() {
            tracing::info!(hub_ahead_ms = -offset, "clock offset from root measured");
        }
    }

    /// How far the hub's clock is ahead of root's (negative: behind), as last measured.
    pub(crate) fn ahead_of_root_ms(&self) -> i64 {
        -self.root_offset_ms.load(Ordering::Acquire)
    }

    /// `clock_skew` while the hub's clock is further from root's than root accepts.
    pub(crate) fn check(&self) -> Result<(), ToolError> {
        let max = self.max_skew_ms.load(Ordering::Acquire);
        let ahead = self.ahead_of_root_ms();
        if ahead.unsigned_abs() <= max {
            return Ok(());
        }
        Err(ToolError::new(
            ErrorCode::ClockSkew,
            format!(
                "this hub's clock is {:.1} s {} root's; root accepts at most {:.1} s: fix the \
                 hub's time source (NTP); calls are refused until it reconnects with a clock \
                 within the window",
                ahead.unsigned_abs() as f64 / 1000.0,
                if ahead > 0 { "ahead of" } else { "behind" },
                max as f64 / 1000.0
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_are_judged_in_roots_time_and_a_large_offset_is_refused() {
        // The hub runs 20 s ahead; root says it is now 20 s earlier.
        let clock = HubClock::new(20_000);
        let root_now = clock.now_ms() - 20_000;
        clock.welcomed(Some(root_now), Some(30_000));
        assert!((clock.root_now_ms() - root_now).abs() < 1_000);
        assert!((clock.ahead_of_root_ms() - 20_000).abs() < 1_000);
        clock.check().expect("within the window");

        clock.welcomed(Some(clock.now_ms() - 300_000), Some(30_000));
        let err = clock.check().expect_err("beyond the window");
        assert_eq!(err.code, ErrorCode::ClockSkew);
        assert!(err.message.contains("300.0 s ahead of root's"), "{err}");

        clock.welcomed(Some(clock.now_ms() + 300_000), Some(30_000));
        let err = clock.check().expect_err("behind");
        assert!(err.message.contains("behind root's"), "{err}");

        // An older root sends no time: the hub keeps its own clock, unchecked.
        clock.welcomed(None, Some(30_000));
        assert_eq!(clock.ahead_of_root_ms(), 0);
        clock.check().expect("nothing to check against");
    }
}
