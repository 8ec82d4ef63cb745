//! The cap both daemons put on log targets that print message payloads at their most verbose
//! levels: tungstenite traces every WebSocket frame (a hub's `hello` carries its token) and
//! rmcp debug-logs every JSON-RPC request and result (confirmation tokens, issued bearers).
//!
//! The cap only removes: a capped target logs what the configured filter (`RUST_LOG` or the
//! daemon's default) allows, and never anything more verbose than its cap. (As `EnvFilter`
//! directives the caps also *enabled* their level, so a daemon at `info` printed
//! tungstenite's debug lines.) Secrets never reach a log, at any level.

use tracing::{Level, Metadata};

/// Each capped target (with its modules) and the most verbose level it may log at.
pub const PAYLOAD_LOGGING_CAPS: &[(&str, Level)] = &[
    ("tungstenite", Level::DEBUG),
    ("tokio_tungstenite", Level::DEBUG),
    ("rmcp", Level::INFO),
];

/// Whether an event or span at `level` from `target` passes the caps.
pub fn within_payload_caps(target: &str, level: &Level) -> bool {
    PAYLOAD_LOGGING_CAPS
        .iter()
        .all(|(capped, max)| !is_within(target, capped) || level <= max)
}

/// [`within_payload_caps`] for a callsite (the form `tracing_subscriber::filter::filter_fn`
/// takes; as a layer it disables what does not pass, for every other layer too).
pub fn metadata_within_payload_caps(meta: &Metadata<'_>) -> bool {
    within_payload_caps(meta.target(), meta.level())
}

/// `target` is `module` or one of its modules.
fn is_within(target: &str, module: &str) -> bool {
    target
        .strip_prefix(module)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capped_targets_lose_their_verbose_levels_only() {
        for target in ["tungstenite", "tungstenite::protocol", "tokio_tungstenite"] {
            assert!(!within_payload_caps(target, &Level::TRACE), "{target}");
            assert!(within_payload_caps(target, &Level::DEBUG), "{target}");
            assert!(within_payload_caps(target, &Level::WARN), "{target}");
        }
        for target in ["rmcp", "rmcp::transport::streamable_http_server"] {
            assert!(!within_payload_caps(target, &Level::TRACE), "{target}");
            assert!(!within_payload_caps(target, &Level::DEBUG), "{target}");
            assert!(within_payload_caps(target, &Level::INFO), "{target}");
        }
        // Other targets, including ones that merely start with a capped name, are untouched.
        for target in ["mcp_root::hubs", "rmcp_extra", "tungstenite_ws", "hyper"] {
            assert!(within_payload_caps(target, &Level::TRACE), "{target}");
        }
    }
}
