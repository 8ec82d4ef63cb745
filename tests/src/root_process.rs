//! A root as a separate `mcp-root serve` process (the binary as operators run it), on a
//! free loopback port with a data directory of its own: its URL as it announced it, and its
//! admin token once it answers. Roots in-process are [`crate::TestRoot`].

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::process::Proc;

/// A running `mcp-root serve`, ended when dropped (see [`Proc`]).
pub struct RootProcess {
    pub proc: Proc,
    /// `http://127.0.0.1:PORT`, as root announced it.
    pub base: String,
    /// The admin token root wrote into its data directory.
    pub admin: String,
}

impl RootProcess {
    /// Starts `mcp-root serve --listen 127.0.0.1:0 --data-dir <dir>/root` (its log
    /// `<dir>/root.log`) and waits, at most `within`, until it answers `/healthz`.
    pub async fn serve(dir: &Path, within: Duration) -> anyhow::Result<RootProcess> {
        Self::serve_with(dir, None, within).await
    }

    /// [`RootProcess::serve`] with `--config <config>` when given (its log appended to).
    pub async fn serve_with(
        dir: &Path,
        config: Option<&Path>,
        within: Duration,
    ) -> anyhow::Result<RootProcess> {
        let data = dir.join("root");
        let mut cmd = Command::new(crate::workspace_bin("mcp-root")?);
        cmd.args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(&data);
        if let Some(c) = config {
            cmd.arg("--config").arg(c);
        }
        let mut proc = Proc::spawn("mcp-root serve", &mut cmd, dir.join("root.log"));
        let base = crate::ports::announced_root_url(&mut proc, within).await;
        let http = crate::http_client();
        let answers = tokio::time::timeout(within, async {
            while http.get(format!("{base}/healthz")).send().await.is_err() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await;
        anyhow::ensure!(
            answers.is_ok(),
            "root at {base} did not answer /healthz within {within:?}: {}",
            proc.tail(20)
        );
        let admin = std::fs::read_to_string(data.join("admin.token"))?
            .trim()
            .to_owned();
        Ok(RootProcess { proc, base, admin })
    }
}
