//! The managed target descriptor, in the seed's JSON shape.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetStatus {
    Online,
    Offline,
    Degraded,
}

impl TargetStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TargetStatus::Online => "online",
            TargetStatus::Offline => "offline",
            TargetStatus::Degraded => "degraded",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transport {
    pub channel: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperationalSurface {
    pub published_by: String,
    pub enabled: bool,
    pub capabilities: Vec<String>,
}

/// Where writes may happen on a target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum WriteScope {
    /// No writes at all.
    None,
    /// Bounded writes, only because the target is a test environment.
    TestOnly,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetPolicy {
    pub write_scope: WriteScope,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
// Read tolerantly: it travels in `hello` (see `protocol`), where a newer hub may add fields.
pub struct ManagedTargetDescriptor {
    pub target_id: String,
    pub kind: String,
    pub environment: String,
    pub status: TargetStatus,
    pub transport: Transport,
    pub operational_surface: OperationalSurface,
    pub policy: TargetPolicy,
}
