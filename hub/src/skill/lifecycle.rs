//! The skill's lifecycle ([`Lifecycle`]: installed, enabled, the owner's switch) and its
//! protocol view, and that lifecycle on disk: `<state_dir>/skills.json` (installed, enabled) and
//! `<state_dir>/skill-owner.json` (the hub owner's switch), read at start and written before a
//! change is published or acknowledged.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use mcp_shared::protocol::SkillState;
use serde::{Deserialize, Serialize};

use crate::skill::adapters::decl::{ADAPTERS, AdapterDecl};

/// The one skill this hub hosts.
pub(crate) const SKILL: &str = "infra_access_skill";
/// The skill's version: the hub's build.
pub(crate) const SKILL_VERSION: &str = env!("CARGO_PKG_VERSION");
/// A skill's lifecycle on this hub: `installed` and `enabled` as root last directed
/// (persisted in `<state_dir>/skills.json`), and the hub owner's own switch (persisted in
/// `<state_dir>/skill-owner.json`, set with `mcp-hub skill enable|disable`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lifecycle {
    pub installed: bool,
    pub enabled: bool,
    /// The hub owner's switch; off publishes nothing, whatever root directs.
    #[serde(skip, default = "switched_on")]
    pub owner_enabled: bool,
}

fn switched_on() -> bool {
    true
}

impl Default for Lifecycle {
    fn default() -> Self {
        Lifecycle {
            installed: true,
            enabled: true,
            owner_enabled: true,
        }
    }
}

impl Lifecycle {
    /// Whether the skill publishes its tools: installed and enabled as root directs, and
    /// not switched off by the hub's owner.
    pub fn active(self) -> bool {
        self.installed && self.enabled && self.owner_enabled
    }

    /// The protocol view of `infra_access_skill` in this lifecycle state, with the built-in
    /// adapters only (a hub's own view, with its command adapters, is
    /// `HubContext::skill_states`).
    pub fn skill_state(self) -> SkillState {
        self.skill_state_with(&ADAPTERS)
    }

    /// The protocol view of `infra_access_skill` serving `adapters`.
    pub fn skill_state_with(self, adapters: &[AdapterDecl]) -> SkillState {
        let tools: Vec<String> = adapters.iter().map(|a| a.tool_id.to_owned()).collect();
        SkillState {
            skill: SKILL.to_owned(),
            installed: self.installed,
            enabled: self.enabled,
            published: if self.active() {
                tools.clone()
            } else {
                Vec::new()
            },
            owner_disabled: !self.owner_enabled,
            version: Some(SKILL_VERSION.to_owned()),
            adapters: tools,
        }
    }
}

/// File name of the lifecycle state under `state_dir`.
pub(crate) const STATE_FILE: &str = "skills.json";

/// Why the lifecycle file could not be read or written (`pub`, as
/// [`super::actor::SkillCommandError`] that carries it).
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
}

/// `skills.json`: lifecycle by skill name.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StateFile {
    skills: HashMap<String, Lifecycle>,
}

/// Reads the lifecycle of `infra_access_skill` (installed and enabled when there is no file).
pub(crate) fn load_lifecycle(state_dir: &Path) -> Result<Lifecycle, StateError> {
    let path = state_dir.join(STATE_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Lifecycle::default()),
        Err(source) => return Err(StateError::Io { path, source }),
    };
    let file: StateFile =
        serde_json::from_str(&text).map_err(|source| StateError::Parse { path, source })?;
    Ok(file.skills.get(SKILL).copied().unwrap_or_default())
}

/// File name of the hub owner's switch under `state_dir`.
pub(crate) const OWNER_FILE: &str = "skill-owner.json";

/// `skill-owner.json`: the hub owner's switch by skill name.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct OwnerFile {
    skills: HashMap<String, OwnerSwitch>,
}

/// The hub owner's switch of a skill.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct OwnerSwitch {
    enabled: bool,
    /// When the owner last set it (RFC 3339).
    changed_at: String,
}

/// Whether the hub's owner has `infra_access_skill` switched on (on when there is no file).
pub(crate) fn load_owner_switch(state_dir: &Path) -> Result<bool, StateError> {
    let path = state_dir.join(OWNER_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(true),
        Err(source) => return Err(StateError::Io { path, source }),
    };
    let file: OwnerFile =
        serde_json::from_str(&text).map_err(|source| StateError::Parse { path, source })?;
    Ok(file.skills.get(SKILL).is_none_or(|s| s.enabled))
}

/// Sets the hub owner's switch of `infra_access_skill` (temporary file, then rename); a
/// running hub picks it up within [`OWNER_SWITCH_POLL`].
pub(crate) fn save_owner_switch(state_dir: &Path, enabled: bool) -> Result<(), StateError> {
    let file = OwnerFile {
        skills: HashMap::from([(
            SKILL.to_owned(),
            OwnerSwitch {
                enabled,
                changed_at: mcp_shared::time::format(mcp_shared::time::now()),
            },
        )]),
    };
    write_atomically(state_dir, OWNER_FILE, &file)
}

/// How often a running hub reads the owner's switch.
pub(crate) const OWNER_SWITCH_POLL: Duration = Duration::from_millis(500);

/// Writes `value` as JSON to `state_dir/name` through [`crate::store::state::write_atomic`].
fn write_atomically(
    state_dir: &Path,
    name: &str,
    value: &impl Serialize,
) -> Result<(), StateError> {
    let path = state_dir.join(name);
    let text = serde_json::to_vec_pretty(value).map_err(|source| StateError::Parse {
        path: path.clone(),
        source,
    })?;
    crate::store::state::write_atomic(&path, &text)
        .map_err(|crate::store::state::WriteError { path, source }| StateError::Io { path, source })
}

/// Writes the lifecycle of `infra_access_skill` (temporary file, then rename).
pub(crate) fn save_lifecycle(state_dir: &Path, lifecycle: Lifecycle) -> Result<(), StateError> {
    let file = StateFile {
        skills: HashMap::from([(SKILL.to_owned(), lifecycle)]),
    };
    write_atomically(state_dir, STATE_FILE, &file)
}
