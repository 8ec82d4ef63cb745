//! The dispatch of the skill's adapters: [`AdapterKind`], which implementation an adapter
//! actor runs (a built-in adapter of the table in [`super::table`], a configured command
//! adapter, or an [`EmbeddedAdapter`] of the program embedding the hub), and
//! [`AdapterKind::run`], generated from the same table as the declarations in [`super::decl`].

use std::sync::Arc;

use futures::future::BoxFuture;
use mcp_shared::error::ToolError;
use serde_json::Value;

use super::args::no_arguments;
use super::call::{AdapterReply, CallInput};
use super::decl::{AdapterDecl, Builtin, Provided};
use super::{
    activity_log, capability_usage, command, deploy, health, logs, memory, nlu_authoring,
    restart_service, runtime, status, surface, test_results, test_runs,
};
use crate::context::HubContext;

/// The work of an [`EmbeddedAdapter`]: one call, on a task of its own.
pub type EmbeddedRun = fn(Arc<HubContext>, CallInput) -> BoxFuture<'static, AdapterReply>;

/// An adapter compiled into the program that embeds the hub library, not into the hub: the
/// extension point for in-process adapters (`HubConfig::embedded`). The `mcp-hub` binary has
/// none; the test suite's fault fixture (an adapter that panics or hangs on request) is one,
/// so fault injection is in no contract and no release build.
pub struct EmbeddedAdapter {
    pub decl: AdapterDecl,
    pub run: EmbeddedRun,
}

impl std::fmt::Debug for EmbeddedAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedAdapter")
            .field("decl", &self.decl)
            .finish_non_exhaustive()
    }
}

impl PartialEq for EmbeddedAdapter {
    fn eq(&self, other: &Self) -> bool {
        self.decl == other.decl
    }
}

impl Eq for EmbeddedAdapter {}

/// Generates from the table [`AdapterKind`] (a variant per built-in adapter, plus command and
/// embedded adapters), its conversion from [`Builtin`] and its arm of [`AdapterKind::run`]
/// (`ctx: Arc<HubContext>`, `input: CallInput`; the work evaluates to an [`AdapterReply`]).
macro_rules! dispatch_builtins {
    ($(
        $kind:ident {
            tool_id: $tool_id:literal,
            name: $name:literal,
            writes: $writes:literal,
            serves: |$cfg:pat_param| $serves:expr,
            run: |$ctx:ident, $input:ident| $run:expr $(,)?
        }
    )*) => {
        /// Which implementation an adapter actor runs.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum AdapterKind {
            /// A configured command adapter ([`command`]); it carries its declaration (tool id
            /// and name from the configuration), so it is not in `KINDS`.
            Command(AdapterDecl),
            /// An adapter of the embedding program ([`EmbeddedAdapter`]).
            Embedded(&'static EmbeddedAdapter),
            $($kind,)*
        }

        /// Every built-in adapter kind, in the order of [`super::decl::ADAPTERS`] (configured
        /// command adapters come from `[[skill.commands]]`, embedded ones from the embedding
        /// program).
        #[cfg(test)]
        pub(crate) const KINDS: [AdapterKind; [$(stringify!($kind)),*].len()] = [$(AdapterKind::$kind),*];

        impl From<Builtin> for AdapterKind {
            fn from(builtin: Builtin) -> AdapterKind {
                match builtin {
                    $(Builtin::$kind => AdapterKind::$kind,)*
                }
            }
        }

        impl AdapterKind {
            pub const fn decl(self) -> AdapterDecl {
                match self {
                    AdapterKind::Command(decl) => decl,
                    AdapterKind::Embedded(e) => e.decl,
                    $(AdapterKind::$kind => Builtin::$kind.decl(),)*
                }
            }

            /// Whether this hub's configuration gives the adapter something to serve (see
            /// [`Builtin::serves`]). Command and embedded adapters always do.
            pub fn serves(self, config: Provided) -> bool {
                match self {
                    AdapterKind::Command(_) | AdapterKind::Embedded(_) => true,
                    $(AdapterKind::$kind => Builtin::$kind.serves(config),)*
                }
            }

            /// Runs the adapter's work (in a task of its own).
            pub async fn run(
                self,
                ctx: Arc<HubContext>,
                input: CallInput,
            ) -> Result<Value, ToolError> {
                match self {
                    AdapterKind::Command(decl) => command::run(&ctx, decl.tool_id, input).await,
                    AdapterKind::Embedded(e) => (e.run)(ctx, input).await,
                    $(AdapterKind::$kind => {
                        let $ctx = ctx;
                        let $input = input;
                        $run
                    })*
                }
            }
        }
    };
}

super::table::builtin_adapters!(dispatch_builtins);

/// The built-in adapters `config` gives something to serve, in table order (see
/// [`super::decl::served`]).
pub fn served(config: Provided) -> impl Iterator<Item = AdapterKind> {
    super::decl::served(config).map(AdapterKind::from)
}

impl AdapterKind {
    /// The built-in adapter serving `tool_id`.
    pub fn for_tool(tool_id: &str) -> Option<AdapterKind> {
        Builtin::for_tool(tool_id).map(AdapterKind::from)
    }

    /// The adapter that serves `decl` on a hub embedding `embedded`: built-in, embedded, or a
    /// configured command (the context checked that no two of them serve one tool).
    pub fn of(decl: AdapterDecl, embedded: &[&'static EmbeddedAdapter]) -> AdapterKind {
        if let Some(kind) = AdapterKind::for_tool(decl.tool_id) {
            return kind;
        }
        match embedded.iter().find(|e| e.decl.tool_id == decl.tool_id) {
            Some(e) => AdapterKind::Embedded(e),
            None => AdapterKind::Command(decl),
        }
    }
}

/// Gives every built-in adapter of `config` something to serve (see [`AdapterKind::serves`]):
/// a health check, a managed service that is not started, a deploy repository that is never
/// fetched and the shipped NLU content. For tests that exercise the whole surface.
#[cfg(test)]
pub(crate) fn serve_everything(config: &mut crate::config::HubConfig) {
    use crate::config::{DeployConfig, HealthcheckConfig, ServiceConfig};
    config.skill.healthchecks.push(HealthcheckConfig::Command {
        name: "alive".into(),
        argv: vec!["true".into()],
        cwd: None,
        timeout_ms: 2_000,
    });
    let mut idle = ServiceConfig::new("idle", vec!["sleep".into(), "3600".into()]);
    idle.autostart = false;
    config.services.push(idle);
    config.deploy = Some(DeployConfig {
        repository: "https://deploy.invalid/app.git".into(),
        worktree: "deploy/app".into(),
        allowed_refs: vec!["main".into()],
        allow_commits: false,
        restart_services: Vec::new(),
        git: "git".into(),
        timeout_ms: 10_000,
    });
    if config.skill.allowed_tests.is_empty() {
        let test = crate::config::AllowedTestConfig::new("smoke", vec!["true".into()]);
        config.skill.allowed_tests.push(test);
    }
    let nlu = crate::nlu::tests::example_nlu_config();
    config
        .allowed_roots
        .push(nlu.entities.parent().expect("a directory").to_owned());
    config.nlu = Some(nlu);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_hub_serves_its_own_reads_and_a_provided_one_everything() {
        let mut config = crate::config::HubConfig::new("hub:t", "test", "ws://x", "t", "/tmp/s");
        let bare: Vec<&str> = served(config.provided())
            .map(|k| k.decl().tool_id)
            .collect();
        assert_eq!(
            bare,
            [
                "hub.get_status",
                "hub.get_runtime_summary",
                "hub.get_operational_surface",
                "hub.get_activity_log",
                "hub.get_capability_usage_summary",
                "hub.get_logs",
            ]
        );
        serve_everything(&mut config);
        assert_eq!(served(config.provided()).count(), KINDS.len());
    }
}
