//! Runs git for the deploy adapters: always an argv vector (never a shell string), in its own
//! process group that is killed at the deadline, with stdin closed and no way to prompt.
//!
//! Every run gets `GIT_TERMINAL_PROMPT=0`, `GCM_INTERACTIVE=never`, `LC_ALL=C`, no inherited
//! `GIT_DIR`-style variables, hooks switched off (`core.hooksPath=/dev/null`) and the `ext::`
//! transport refused. Arguments that come from a caller have been validated by
//! [`crate::machine::refs`] and are still placed after `--end-of-options` or `--` where git takes them.

use super::group::GroupGuard;
use std::ffi::OsStr;
use std::path::Path;
use std::process::Stdio;

use tokio::time::Instant;

/// Bytes of stderr kept for an error message (the tail).
const STDERR_TAIL: usize = 2048;

/// Variables that would point git at another repository than the one named.
const SCRUBBED: [&str; 8] = [
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_CONFIG_PARAMETERS",
];

/// Why a git run did not succeed.
#[derive(Debug)]
pub(crate) enum GitError {
    /// git could not be started.
    Spawn(std::io::Error),
    /// The deadline passed; the process group was killed.
    Timeout,
    /// git exited unsuccessfully (code `None`: killed by a signal).
    Failed { code: Option<i32>, stderr: String },
}

impl std::fmt::Display for GitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GitError::Spawn(e) => write!(f, "cannot run git: {e}"),
            GitError::Timeout => f.write_str("git did not finish before the deadline"),
            GitError::Failed { code, stderr } => {
                let code = code.map_or_else(|| "a signal".to_owned(), |c| format!("status {c}"));
                write!(f, "git exited with {code}: {}", stderr.trim())
            }
        }
    }
}

/// How git runs: its argv0 and the deadline shared by all runs of one operation.
#[derive(Debug, Clone)]
pub(crate) struct Git {
    pub program: String,
    pub deadline: Instant,
}

impl Git {
    /// Runs `git <args>` (in `dir` if given); stdout on success.
    pub(crate) async fn run<S: AsRef<OsStr>>(
        &self,
        dir: Option<&Path>,
        args: &[S],
    ) -> Result<String, GitError> {
        self.run_status(dir, args)
            .await
            .and_then(|(code, out, err)| {
                if code == Some(0) {
                    Ok(out)
                } else {
                    Err(GitError::Failed { code, stderr: err })
                }
            })
    }

    /// Runs `git <args>`; the exit code (`None`: a signal), stdout and the tail of stderr.
    pub(crate) async fn run_status<S: AsRef<OsStr>>(
        &self,
        dir: Option<&Path>,
        args: &[S],
    ) -> Result<(Option<i32>, String, String), GitError> {
        let mut cmd = tokio::process::Command::new(&self.program);
        cmd.args([
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "protocol.ext.allow=never",
            "-c",
            "advice.detachedHead=false",
            "-c",
            "color.ui=false",
        ])
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GCM_INTERACTIVE", "never")
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
        for var in SCRUBBED {
            cmd.env_remove(var);
        }
        if let Some(dir) = dir {
            cmd.current_dir(dir);
        }
        let child = cmd.spawn().map_err(GitError::Spawn)?;
        let mut guard = GroupGuard::new(child.id());
        let outcome = tokio::time::timeout_at(self.deadline, child.wait_with_output()).await;
        let output = match outcome {
            Ok(Ok(output)) => {
                guard.disarm();
                output
            }
            Ok(Err(e)) => return Err(GitError::Spawn(e)),
            // The guard kills the group (the future's drop killed the leader).
            Err(_) => return Err(GitError::Timeout),
        };
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let mut stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        if stderr.len() > STDERR_TAIL {
            let mut start = stderr.len() - STDERR_TAIL;
            while !stderr.is_char_boundary(start) {
                start += 1;
            }
            stderr = stderr[start..].to_owned();
        }
        Ok((output.status.code(), stdout, stderr))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn git(ms: u64) -> Git {
        Git {
            program: "git".into(),
            deadline: Instant::now() + Duration::from_millis(ms),
        }
    }

    #[tokio::test]
    async fn runs_git_as_argv_and_reports_failures() {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = git(10_000)
            .run(None, &["--version"])
            .await
            .expect("git runs");
        assert!(out.starts_with("git version"), "{out}");
        let err = git(10_000)
            .run(Some(dir.path()), &["rev-parse", "--verify", "HEAD"])
            .await
            .expect_err("not a repository");
        match err {
            GitError::Failed { code, stderr } => {
                assert_eq!(code, Some(128));
                assert!(stderr.contains("not a git repository"), "{stderr}");
            }
            other => panic!("{other}"),
        }
        let missing = Git {
            program: "/nonexistent/git".into(),
            deadline: Instant::now() + Duration::from_secs(5),
        };
        assert!(matches!(
            missing.run(None, &["--version"]).await,
            Err(GitError::Spawn(_))
        ));
    }

    #[tokio::test]
    async fn the_deadline_kills_the_process_group() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let pidfile = dir.path().join("pid");
        let fake = dir.path().join("fake-git");
        std::fs::write(
            &fake,
            format!(
                "#!/bin/sh\nsleep 30 &\necho $! > '{}'\nwait\n",
                pidfile.display()
            ),
        )
        .expect("write");
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let slow = Git {
            program: fake.display().to_string(),
            deadline: Instant::now() + Duration::from_millis(500),
        };
        let err = slow.run(None, &["fetch"]).await.expect_err("killed");
        assert!(matches!(err, GitError::Timeout), "{err}");
        let pid = std::fs::read_to_string(&pidfile).expect("pid written");
        let proc = std::path::PathBuf::from(format!("/proc/{}", pid.trim()));
        // The grandchild went with the group (give the kernel a moment to reap it).
        for _ in 0..100 {
            let alive =
                std::fs::read_to_string(proc.join("stat")).is_ok_and(|s| !s.contains(") Z "));
            if !alive {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("`sleep 30` (pid {pid}) survived the deadline");
    }
}
