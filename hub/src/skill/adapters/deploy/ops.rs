//! The git side of one deploy operation ([`Ops`]): the bare mirror (create, fetch), resolving
//! a wanted ref to a [`Position`], the worktree's state and local changes, the commits between
//! two positions, the expected effect, and the checkout.

use std::path::{Path, PathBuf};
use std::time::Duration;

use mcp_shared::error::{ErrorCode, ToolError};
use serde_json::{Value, json};

use super::{MAX_COMMITS, MAX_LOCAL_CHANGES, RECORD_MARGIN, invalid, refused};
use crate::config::DeployConfig;
use crate::context::HubContext;
use crate::machine::git::{Git, GitError};
use crate::machine::refs::Wanted;
use crate::skill::adapters::call::CallInput;

/// A commit and the ref it came from, if known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Position {
    pub(super) ref_name: Option<String>,
    pub(super) resolved_ref: Option<String>,
    pub(super) commit: String,
}

impl Position {
    pub(super) fn brief(&self) -> Value {
        json!({"ref": self.ref_name, "commit": self.commit})
    }

    pub(super) fn full(&self) -> Value {
        json!({"ref": self.ref_name, "resolved_ref": self.resolved_ref, "commit": self.commit})
    }
}

/// What is at the worktree path.
pub(super) enum Worktree {
    /// Nothing (or an empty directory): the first deploy creates it.
    Missing,
    /// A worktree of the mirror at `head`.
    Ours { head: String },
}

/// The git side of one operation.
pub(super) struct Ops<'a> {
    pub(super) ctx: &'a HubContext,
    pub(super) deploy: &'a DeployConfig,
    pub(super) git: Git,
    pub(super) mirror: PathBuf,
    pub(super) worktree: PathBuf,
}

impl<'a> Ops<'a> {
    pub(super) fn new(ctx: &'a HubContext, deploy: &'a DeployConfig, input: &CallInput) -> Ops<'a> {
        let budget = tokio::time::Instant::now() + Duration::from_millis(deploy.timeout_ms);
        let call = input
            .deadline
            .checked_sub(RECORD_MARGIN)
            .unwrap_or(input.deadline);
        Ops {
            ctx,
            deploy,
            git: Git {
                program: deploy.git.clone(),
                deadline: budget.min(call),
            },
            mirror: ctx.config.deploy_mirror(),
            worktree: ctx
                .config
                .deploy_worktree()
                .unwrap_or_else(|| ctx.config.state_dir.join("worktree")),
        }
    }

    pub(super) fn redact(&self, text: &str) -> String {
        crate::skill::adapters::redact::redact_with(text, &self.ctx.logging.redaction).0
    }

    /// A git failure as the caller sees it (git's output redacted).
    pub(super) fn failed(&self, what: &str, e: GitError) -> ToolError {
        match e {
            GitError::Timeout => ToolError::new(
                ErrorCode::Timeout,
                format!(
                    "{what}: git did not finish within deploy.timeout_ms ({} ms) or the call's deadline",
                    self.deploy.timeout_ms
                ),
            ),
            GitError::Spawn(e) => ToolError::new(
                ErrorCode::AdapterFailed,
                format!("{what}: cannot run `{}`: {e}", self.deploy.git),
            ),
            e @ GitError::Failed { .. } => ToolError::new(
                ErrorCode::AdapterFailed,
                format!("{what}: {}", self.redact(&e.to_string())),
            ),
        }
    }

    pub(super) fn mirror_arg(&self) -> String {
        format!("--git-dir={}", self.mirror.display())
    }

    pub(super) async fn in_mirror(&self, what: &str, args: &[&str]) -> Result<String, ToolError> {
        let mut all = vec![self.mirror_arg()];
        all.extend(args.iter().map(|a| (*a).to_owned()));
        self.git
            .run(None, &all)
            .await
            .map_err(|e| self.failed(what, e))
    }

    /// Creates the mirror if needed.
    pub(super) async fn ensure_mirror(&self) -> Result<(), ToolError> {
        if self.mirror.join("HEAD").exists() {
            return Ok(());
        }
        let path = self.mirror.display().to_string();
        self.git
            .run(None, &["init", "--bare", "--quiet", "--", &path])
            .await
            .map_err(|e| self.failed("creating the deploy mirror", e))?;
        Ok(())
    }

    /// Fetches branches and tags of the repository into the mirror.
    pub(super) async fn fetch(&self) -> Result<(), ToolError> {
        self.ensure_mirror().await?;
        self.in_mirror(
            "fetching the repository",
            &[
                "fetch",
                "--quiet",
                "--prune",
                "--force",
                "--no-write-fetch-head",
                "--end-of-options",
                self.deploy.repository.as_str(),
                "+refs/heads/*:refs/heads/*",
                "+refs/tags/*:refs/tags/*",
            ],
        )
        .await
        .map(drop)
    }

    /// The commit `rev` names in the mirror, if it names one.
    pub(super) async fn commit_of(&self, rev: &str) -> Result<Option<String>, ToolError> {
        let spec = format!("{rev}^{{commit}}");
        let args = [
            self.mirror_arg(),
            "rev-parse".into(),
            "--verify".into(),
            "--quiet".into(),
            "--end-of-options".into(),
            spec,
        ];
        match self.git.run_status(None, &args).await {
            Ok((Some(0), out, _)) => Ok(Some(out.trim().to_owned())),
            Ok((Some(1), _, _)) => Ok(None),
            Ok((code, _, stderr)) => {
                Err(self.failed("resolving a ref", GitError::Failed { code, stderr }))
            }
            Err(e) => Err(self.failed("resolving a ref", e)),
        }
    }

    /// Resolves a validated request: a tag, else a branch; or a commit that must exist.
    pub(super) async fn resolve(&self, wanted: &Wanted) -> Result<Position, ToolError> {
        match wanted {
            Wanted::Name(name) => {
                for prefix in ["refs/tags/", "refs/heads/"] {
                    let full = format!("{prefix}{name}");
                    if let Some(commit) = self.commit_of(&full).await? {
                        return Ok(Position {
                            ref_name: Some(name.clone()),
                            resolved_ref: Some(full),
                            commit,
                        });
                    }
                }
                Err(invalid(format!(
                    "ref `{name}` is allowed, but the repository has no tag or branch of that name"
                )))
            }
            Wanted::Commit(sha) => match self.commit_of(sha).await? {
                Some(commit) => Ok(Position {
                    ref_name: Some(sha.clone()),
                    resolved_ref: None,
                    commit,
                }),
                None => Err(invalid(format!(
                    "commit `{sha}` is not in the repository's branches or tags"
                ))),
            },
        }
    }

    /// What is at the worktree path; a directory that is not a worktree of the mirror is
    /// refused (it is never overwritten).
    pub(super) async fn worktree(&self) -> Result<Worktree, ToolError> {
        let empty = match std::fs::read_dir(&self.worktree) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
            Err(e) => {
                return Err(ToolError::new(
                    ErrorCode::Internal,
                    format!("cannot read the worktree {}: {e}", self.worktree.display()),
                ));
            }
            Ok(mut entries) => entries.next().is_none(),
        };
        if empty {
            return Ok(Worktree::Missing);
        }
        let foreign = || {
            refused(format!(
                "{} exists and is not a worktree of this hub's deploy mirror; move it away or configure another deploy.worktree",
                self.worktree.display()
            ))
        };
        if !self.worktree.join(".git").exists() {
            return Err(foreign());
        }
        let out = self
            .git
            .run(
                Some(&self.worktree),
                &[
                    "rev-parse",
                    "--path-format=absolute",
                    "--git-common-dir",
                    "--show-toplevel",
                ],
            )
            .await
            .map_err(|e| self.failed("reading the worktree", e))?;
        let mut lines = out.lines();
        let same = |a: Option<&str>, b: &Path| {
            a.and_then(|a| std::fs::canonicalize(a).ok())
                .zip(std::fs::canonicalize(b).ok())
                .is_some_and(|(a, b)| a == b)
        };
        if !same(lines.next(), &self.mirror) || !same(lines.next(), &self.worktree) {
            return Err(foreign());
        }
        let head = self
            .git
            .run(Some(&self.worktree), &["rev-parse", "--verify", "HEAD"])
            .await
            .map_err(|e| self.failed("reading the worktree's HEAD", e))?;
        Ok(Worktree::Ours {
            head: head.trim().to_owned(),
        })
    }

    /// Tracked files with local changes in the worktree (at most [`MAX_LOCAL_CHANGES`]).
    pub(super) async fn local_changes(&self) -> Result<Vec<String>, ToolError> {
        let out = self
            .git
            .run(
                Some(&self.worktree),
                &["status", "--porcelain=v1", "--untracked-files=no"],
            )
            .await
            .map_err(|e| self.failed("checking the worktree for local changes", e))?;
        Ok(out
            .lines()
            .filter(|l| l.len() > 3)
            .take(MAX_LOCAL_CHANGES)
            .map(|l| l[3..].to_owned())
            .collect())
    }

    /// Commits of `range` (git log arguments), newest first, at most [`MAX_COMMITS`], and
    /// whether there were more.
    pub(super) async fn commits(&self, range: &[&str]) -> Result<(Vec<Value>, bool), ToolError> {
        let max = format!("--max-count={}", MAX_COMMITS + 1);
        let mut args = vec![
            "log",
            "--no-decorate",
            "--no-color",
            "--format=%H%x1f%s%x1f%an%x1e",
            &max,
        ];
        args.extend_from_slice(range);
        args.push("--");
        let out = self.in_mirror("listing commits", &args).await?;
        let mut commits: Vec<Value> = out
            .split('\x1e')
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .map(|r| {
                let mut f = r.split('\x1f');
                let sha = f.next().unwrap_or_default();
                let subject = self.redact(f.next().unwrap_or_default());
                let author = self.redact(f.next().unwrap_or_default());
                json!({"sha": sha, "subject": subject, "author": author})
            })
            .collect();
        let truncated = commits.len() > MAX_COMMITS;
        commits.truncate(MAX_COMMITS);
        Ok((commits, truncated))
    }

    /// Whether `a` is an ancestor of (or equal to) `b`.
    pub(super) async fn is_ancestor(&self, a: &str, b: &str) -> Result<bool, ToolError> {
        let args = [
            self.mirror_arg(),
            "merge-base".into(),
            "--is-ancestor".into(),
            a.to_owned(),
            b.to_owned(),
        ];
        match self.git.run_status(None, &args).await {
            Ok((Some(0), _, _)) => Ok(true),
            Ok((Some(1), _, _)) => Ok(false),
            Ok((code, _, stderr)) => {
                Err(self.failed("comparing commits", GitError::Failed { code, stderr }))
            }
            Err(e) => Err(self.failed("comparing commits", e)),
        }
    }

    /// Where the worktree is now: its HEAD, with the ref of the newest history entry that
    /// checked out that commit (when that entry is the newest).
    pub(super) async fn current(&self, state: &Worktree) -> Result<Option<Position>, ToolError> {
        let Worktree::Ours { head } = state else {
            return Ok(None);
        };
        let last = self.ctx.stores.deploys.last()?;
        let (ref_name, resolved_ref) = match last {
            Some(e) if &e.commit == head => (e.ref_name, e.resolved_ref),
            _ => (None, None),
        };
        Ok(Some(Position {
            ref_name,
            resolved_ref,
            commit: head.clone(),
        }))
    }

    /// The expected effect of moving from `current` to `target`.
    pub(super) async fn effect(
        &self,
        action: &str,
        state: &Worktree,
        current: Option<&Position>,
        target: &Position,
    ) -> Result<serde_json::Map<String, Value>, ToolError> {
        let (arrive, leave, fast_forward) = match current {
            None => (
                self.commits(&[target.commit.as_str()]).await?,
                (vec![], false),
                true,
            ),
            Some(cur) => {
                let arrive = format!("{}..{}", cur.commit, target.commit);
                let leave = format!("{}..{}", target.commit, cur.commit);
                (
                    self.commits(&[arrive.as_str()]).await?,
                    self.commits(&[leave.as_str()]).await?,
                    self.is_ancestor(&cur.commit, &target.commit).await?,
                )
            }
        };
        let local_changes = match state {
            Worktree::Ours { .. } => self.local_changes().await?,
            Worktree::Missing => Vec::new(),
        };
        let mut effect = serde_json::Map::new();
        effect.insert("action".into(), json!(action));
        effect.insert(
            "worktree".into(),
            json!(self.worktree.display().to_string()),
        );
        effect.insert(
            "current".into(),
            current.map_or(Value::Null, Position::brief),
        );
        effect.insert("target".into(), target.full());
        effect.insert(
            "up_to_date".into(),
            json!(current.is_some_and(|c| c.commit == target.commit)),
        );
        effect.insert("fast_forward".into(), json!(fast_forward));
        effect.insert("commits".into(), json!(arrive.0));
        effect.insert("commits_truncated".into(), json!(arrive.1));
        effect.insert("commits_removed".into(), json!(leave.0));
        effect.insert("commits_removed_truncated".into(), json!(leave.1));
        effect.insert("local_changes".into(), json!(local_changes));
        effect.insert(
            "restart_services".into(),
            json!(self.deploy.restart_services),
        );
        Ok(effect)
    }

    /// Checks out `commit` in the worktree (creating it on the first deploy).
    pub(super) async fn checkout(&self, state: &Worktree, commit: &str) -> Result<(), ToolError> {
        match state {
            Worktree::Missing => {
                // A worktree whose directory was removed is still registered: forget it.
                self.in_mirror("pruning stale worktrees", &["worktree", "prune"])
                    .await?;
                if let Some(parent) = self.worktree.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| {
                        ToolError::new(
                            ErrorCode::Internal,
                            format!("cannot create {}: {e}", parent.display()),
                        )
                    })?;
                }
                let path = self.worktree.display().to_string();
                self.in_mirror(
                    "creating the worktree",
                    &[
                        "worktree", "add", "--detach", "--quiet", "--", &path, commit,
                    ],
                )
                .await
                .map(drop)
            }
            Worktree::Ours { .. } => self
                .git
                .run(
                    Some(&self.worktree),
                    &["checkout", "--quiet", "--detach", commit, "--"],
                )
                .await
                .map(drop)
                .map_err(|e| self.failed("checking out", e)),
        }
    }
}
