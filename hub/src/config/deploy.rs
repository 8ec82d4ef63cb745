//! `[deploy]`: the one deploy target of this hub (repository, worktree, allowed refs,
//! services restarted after a deploy), and where its bare mirror lives.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{ConfigError, HubConfig, absolute};

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
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
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

impl HubConfig {
    /// The bare mirror the deploy adapters fetch into.
    pub fn deploy_mirror(&self) -> PathBuf {
        self.state_dir.join(DEPLOY_MIRROR_DIR)
    }

    /// The deployed working tree, if `[deploy]` is configured.
    pub fn deploy_worktree(&self) -> Option<PathBuf> {
        self.deploy
            .as_ref()
            .map(|d| self.under_state_dir(&d.worktree))
    }

    /// Checks `[deploy]`.
    pub(super) fn validate_deploy(&self) -> Result<(), ConfigError> {
        let Some(deploy) = &self.deploy else {
            return Ok(());
        };
        let bad = |m: String| Err(ConfigError::Invalid(format!("deploy: {m}")));
        let repo = deploy.repository.as_str();
        if repo.trim().is_empty() {
            return bad("repository is empty".into());
        }
        if repo.starts_with('-') || repo.contains("::") || repo.chars().any(char::is_control) {
            return bad(format!(
                "repository `{}` must not start with `-`, name a `<transport>::` helper or contain control characters",
                repo.escape_debug()
            ));
        }
        let url = repo.contains("://")
            || repo
                .split_once(':')
                .is_some_and(|(host, _)| !host.is_empty() && !host.contains('/'));
        if !url && !Path::new(repo).is_absolute() {
            return bad(format!(
                "repository `{repo}` must be an absolute path or a URL"
            ));
        }
        let worktree = self.under_state_dir(&deploy.worktree);
        self.check_confined("deploy: worktree", &worktree)?;
        let state = absolute(&self.state_dir);
        let full = absolute(&worktree);
        let mirror = absolute(&self.deploy_mirror());
        if state.starts_with(&full) || self.allowed_roots.iter().any(|r| r == &full) {
            return bad(format!(
                "worktree `{}` must lie strictly inside the state directory or a declared root, not contain it",
                worktree.display()
            ));
        }
        if full.starts_with(&mirror) {
            return bad(format!(
                "worktree `{}` must not lie inside the deploy mirror `{}`",
                worktree.display(),
                mirror.display()
            ));
        }
        if deploy.allowed_refs.is_empty() && !deploy.allow_commits {
            return bad(
                "allowed_refs is empty (and allow_commits is false): nothing could be deployed"
                    .into(),
            );
        }
        for pattern in &deploy.allowed_refs {
            if let Err(e) = crate::machine::refs::check_pattern(pattern) {
                return bad(format!("allowed_refs: {e}"));
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for name in &deploy.restart_services {
            if !seen.insert(name) {
                return bad(format!("restart_services names `{name}` twice"));
            }
            if !self.services.iter().any(|s| &s.name == name) {
                let known: Vec<String> = self
                    .services
                    .iter()
                    .map(|s| format!("`{}`", s.name))
                    .collect();
                return bad(format!(
                    "restart_services names `{name}`, which is not a [[services]] entry (services: {})",
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    }
                ));
            }
        }
        if deploy.git.trim().is_empty() {
            return bad("git is empty".into());
        }
        if deploy.timeout_ms == 0 {
            return bad("timeout_ms must be at least 1".into());
        }
        Ok(())
    }
}
