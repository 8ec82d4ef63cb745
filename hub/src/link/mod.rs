//! The hub's link to root: the channel (hello, welcome, frames, heartbeats, reconnects), the
//! final checks on every call before it reaches the skill, the clock those checks judge
//! deadlines by, and how `wss://` verifies root.

pub mod channel;
pub mod clock;
pub mod enforcement;
pub mod tls;
