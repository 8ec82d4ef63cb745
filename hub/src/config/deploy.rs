//! `[deploy]`: the one deploy target of this hub (repository, worktree, allowed refs,
//! services restarted after a deploy), and where its bare mirror lives.

use std::path::PathBuf;

use serde::Deserialize;

fn default_git() -> String {
    "git".to_owned()
}

fn default_deploy_timeout_ms() -> u64 {
    120_000
}

/// Directory under `state_dir` of the deploy mirror (a bare repository).
pub const DEPLOY_MIRROR_DIR: &str = "deploy-mirror.git";

/// `[deploy]`: the one deploy target of this hub, for `hub.deploy_ref` and
/// `hub.rollback_last_test_deploy`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeployConfig {
    /// Where commits come from: an absolute path of a local git repository, or a URL
    /// (`https://`, `ssh://`, `file://`, `git://`, `user@host:path`). Fetched into a bare
    /// mirror at `<state_dir>/deploy-mirror.git`.
    pub repository: String,
    /// The deployed working tree (a `git worktree` of the mirror, checked out detached);
    /// a relative path is taken under `state_dir`. Must lie under `state_dir` or a declared
    /// root.
    pub worktree: PathBuf,
    /// Refs a caller may deploy: names or patterns where `*` matches any run of characters
    /// (`main`, `release/*`, `v*`); resolved as a tag, else a branch.
    pub allowed_refs: Vec<String>,
    /// Whether a full 40-hex commit id may be deployed.
    #[serde(default)]
    pub allow_commits: bool,
    /// Managed services (`[[services]]`) restarted after a deploy or rollback, in this order.
    #[serde(default)]
    pub restart_services: Vec<String>,
    /// argv0 of git.
    #[serde(default = "default_git")]
    pub git: String,
    /// Budget of one deploy operation's git commands (fetch, resolve, checkout); keep it
    /// under the tools' call timeout.
    #[serde(default = "default_deploy_timeout_ms")]
    pub timeout_ms: u64,
}
