//! What root tells its operators about itself: its log (the tracing subscriber and the ring of
//! recent lines) and its Prometheus metrics.

pub mod logging;
pub mod metrics;
