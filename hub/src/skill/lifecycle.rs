//! The skill's lifecycle on disk: `<state_dir>/skills.json` (installed, enabled) and
//! `<state_dir>/skill-owner.json` (the hub owner's switch), read at start and written before a
//! change is published or acknowledged.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::context::{Lifecycle, SKILL};

/// File name of the lifecycle state under `state_dir`.
pub const STATE_FILE: &str = "skills.json";

/// Why the lifecycle file could not be read or written.
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
pub fn load_lifecycle(state_dir: &Path) -> Result<Lifecycle, StateError> {
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
pub const OWNER_FILE: &str = "skill-owner.json";

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
pub fn load_owner_switch(state_dir: &Path) -> Result<bool, StateError> {
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
pub fn save_owner_switch(state_dir: &Path, enabled: bool) -> Result<(), StateError> {
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
pub const OWNER_SWITCH_POLL: Duration = Duration::from_millis(500);

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
pub fn save_lifecycle(state_dir: &Path, lifecycle: Lifecycle) -> Result<(), StateError> {
    let file = StateFile {
        skills: HashMap::from([(SKILL.to_owned(), lifecycle)]),
    };
    write_atomically(state_dir, STATE_FILE, &file)
}
