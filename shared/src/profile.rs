//! Capability profiles: named capability sets (`ProfileOpsRead`, `AdaOSDevRead`, ...).
//!
//! A lease is issued for one profile; sessions never assemble raw capability lists.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapabilityProfile {
    pub name: String,
    pub plane: String,
    pub description: String,
    pub capabilities: Vec<String>,
}

/// The shipped profile file: `[[profile]]` tables.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileRegistry {
    #[serde(rename = "profile")]
    pub profiles: Vec<CapabilityProfile>,
}

impl ProfileRegistry {
    pub fn get(&self, name: &str) -> Option<&CapabilityProfile> {
        self.profiles.iter().find(|p| p.name == name)
    }
}
