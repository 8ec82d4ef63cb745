//! The one starter for `mcp-hub run` as a separate process (the binary as operators run it,
//! killed and started again by the fault, replica and model tests). The in-process hub,
//! started on a [`crate::TestRoot`] with [`crate::TestRoot::start_hub`], is the other
//! mechanism: a [`crate::TestHub`] in the test's own runtime.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::process::Proc;

/// An `mcp-hub run` process to start for one target: its config, token file, state directory
/// and log all under `dir`, named after the target (`hub:a` → `hub_a.toml`, `hub_a.token`,
/// `hub_a-state`, `hub_a.log`). Started again with the same values it is the same hub (same
/// state directory and token).
pub struct HubProcess<'a> {
    dir: &'a Path,
    target: &'a str,
    token: &'a str,
    root_urls: Vec<String>,
    bin: &'a str,
    extra: &'a str,
    write_scope: Option<&'a str>,
}

impl<'a> HubProcess<'a> {
    /// A hub for `target` with `token` (environment `test`, subnet `subnet-a`) dialing
    /// `root_urls` in order.
    pub fn new(dir: &'a Path, target: &'a str, token: &'a str, root_urls: &[&str]) -> Self {
        HubProcess {
            dir,
            target,
            token,
            root_urls: root_urls.iter().map(|u| (*u).to_owned()).collect(),
            bin: "mcp-hub",
            extra: "",
            write_scope: None,
        }
    }

    /// Runs workspace binary `bin` instead of `mcp-hub` (`mcp-hub-faults`: the hub with the
    /// fault fixture embedded).
    pub fn bin(mut self, bin: &'a str) -> Self {
        self.bin = bin;
        self
    }

    /// TOML placed at the top level of the config, before `[reconnect]` (so it may set
    /// top-level keys before its own tables).
    pub fn extra(mut self, extra: &'a str) -> Self {
        self.extra = extra;
        self
    }

    /// The hub's `write_scope` (the hub's default when not set).
    pub fn write_scope(mut self, scope: &'a str) -> Self {
        self.write_scope = Some(scope);
        self
    }

    /// Writes the token file (private) and the config, and spawns the hub with `RUST_LOG=info`,
    /// its stderr appended to its log.
    pub fn spawn(self) -> Proc {
        let name = self.target.replace(':', "_");
        let token_file = self.dir.join(format!("{name}.token"));
        std::fs::write(&token_file, self.token).expect("the hub's token file");
        crate::private_file(&token_file).expect("the hub's token file is private");
        let roots = match self.root_urls.as_slice() {
            [one] => format!("root_url = \"{one}\""),
            many => format!(
                "root_urls = [{}]",
                many.iter()
                    .map(|u| format!("\"{u}\""))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let scope = self
            .write_scope
            .map(|s| format!("write_scope = \"{s}\"\n"))
            .unwrap_or_default();
        let config = self.dir.join(format!("{name}.toml"));
        std::fs::write(
            &config,
            format!(
                "target_id = \"{}\"\nenvironment = \"test\"\nsubnet = \"subnet-a\"\n{roots}\n\
                 token_file = \"{}\"\nstate_dir = \"{}\"\n{scope}{}\n\
                 [reconnect]\ninitial_ms = 50\nmax_ms = 500\n",
                self.target,
                token_file.display(),
                self.dir.join(format!("{name}-state")).display(),
                self.extra,
            ),
        )
        .expect("the hub's config");
        spawn_hub(
            self.bin,
            &config,
            self.dir.join(format!("{name}.log")),
            self.target,
        )
    }
}

/// Spawns workspace binary `bin` (`mcp-hub` or `mcp-hub-faults`) as `run --config <config>`
/// with `RUST_LOG=info`, its stderr appended to `log`; `target` names it in failure messages.
pub fn spawn_hub(bin: &str, config: &Path, log: PathBuf, target: &str) -> Proc {
    Proc::spawn(
        &format!("{bin} for {target}"),
        Command::new(crate::workspace_bin(bin).expect("the hub binary"))
            .args(["run", "--config"])
            .arg(config)
            .env("RUST_LOG", "info"),
        log,
    )
}
