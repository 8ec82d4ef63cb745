//! `[[skill.commands]]`: command adapters, read tools served by a declared program (see
//! [`crate::skill::adapters::command`]).

use std::path::PathBuf;

use std::collections::BTreeSet;
use std::sync::{LazyLock, Mutex};

use serde::Deserialize;

use crate::skill::adapters::decl::AdapterDecl;

/// Longest time a command adapter may run (ten minutes; tool contracts bound it further).
pub const MAX_COMMAND_TIMEOUT_MS: u64 = 600_000;

fn default_command_timeout_ms() -> u64 {
    10_000
}

/// A command adapter (`[[skill.commands]]`, see [`crate::skill::adapters::command`]): the read tool
/// `tool_id` is served by running `argv` (never through a shell) with the call's arguments as
/// one line of JSON on stdin; its stdout (one JSON object) is the result. The hub gives the
/// tool no meaning: root publishes it only with a contract of that id.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CommandAdapterConfig {
    /// Dotted lowercase tool id, e.g. `acme.inventory.count`.
    pub tool_id: String,
    /// The program and its arguments; a program given as a path must lie under the state
    /// directory or a declared root (a bare name is looked up in `PATH`).
    pub argv: Vec<String>,
    /// Working directory (under the state directory or a declared root); default `state_dir`.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// Longest a call may take, in milliseconds; past it its group is killed.
    #[serde(default = "default_command_timeout_ms")]
    pub timeout_ms: u64,
    /// Variables set for the program on top of the hub's own environment.
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
}

/// Process-wide interned names, so an adapter declaration can be `&'static` (like the
/// compiled-in ones) while each distinct name is allocated once per process, however many
/// hubs a process starts.
static NAMES: LazyLock<Mutex<BTreeSet<&'static str>>> = LazyLock::new(Default::default);

fn intern(s: String) -> &'static str {
    let mut names = NAMES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(&known) = names.get(s.as_str()) {
        return known;
    }
    let leaked: &'static str = Box::leak(s.into_boxed_str());
    names.insert(leaked);
    leaked
}

impl CommandAdapterConfig {
    /// The command adapter's declaration: its tool id, named
    /// `infra_access_skill.command.<tool id>`, never writing.
    pub fn decl(&self) -> AdapterDecl {
        AdapterDecl {
            tool_id: intern(self.tool_id.clone()),
            name: intern(format!("infra_access_skill.command.{}", self.tool_id)),
            writes: false,
        }
    }
}

/// Whether `id` is a dotted lowercase tool id (`[a-z][a-z0-9_]*` segments, at least two).
pub fn valid_tool_id(id: &str) -> bool {
    let segments: Vec<&str> = id.split('.').collect();
    id.len() <= 200
        && segments.len() >= 2
        && segments.iter().all(|s| {
            s.chars().next().is_some_and(|c| c.is_ascii_lowercase())
                && s.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        })
}
