//! The hub's link to root: the channel (hello, welcome, frames, heartbeats, reconnects), the
//! final checks on every call before it reaches the skill, the clock those checks judge
//! deadlines by, and how `wss://` verifies root.

pub(crate) mod channel;
pub(crate) mod clock;
pub(crate) mod enforcement;
pub(crate) mod tls;
