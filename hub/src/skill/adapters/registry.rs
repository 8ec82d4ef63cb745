//! The registry of built-in adapters: one table (`builtin_adapters!`) names each built-in
//! adapter once, with the tool it serves, its name, whether it writes, what configuration it
//! needs and the work it runs; [`AdapterKind`], [`KINDS`], [`ADAPTERS`], [`AdapterKind::decl`],
//! [`AdapterKind::serves`] and [`AdapterKind::run`] are all derived from it, so a new built-in
//! tool is one entry here (plus its module). A hub publishes only the adapters its
//! configuration serves ([`served`]). Configured command adapters and embedded adapters carry
//! their own declaration.

use std::sync::Arc;

use futures::future::BoxFuture;
use mcp_shared::error::{ErrorCode, ToolError};
use serde_json::Value;

use super::{
    AdapterReply, CallInput, activity_log, capability_usage, command, deploy, health, logs, memory,
    nlu_authoring, restart_service, runtime, status, surface, test_results, test_runs,
};
use crate::config::Provided;
use crate::context::HubContext;

/// What an adapter declares about itself: the tool it serves, its name, whether it writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdapterDecl {
    pub tool_id: &'static str,
    pub name: &'static str,
    pub writes: bool,
}

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

/// Declares the built-in adapters: `Kind { tool_id, name, writes, serves: |config| bool,
/// run: |ctx, input| work }` becomes a variant of [`AdapterKind`], an entry of [`KINDS`] (in
/// table order), its [`AdapterDecl`], its arm of [`AdapterKind::serves`] (`config:
/// Provided`) and of [`AdapterKind::run`] (`ctx: Arc<HubContext>`, `input: CallInput`; the
/// work evaluates to an [`AdapterReply`]).
macro_rules! builtin_adapters {
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
            /// and name from the configuration), so it is not in [`KINDS`].
            Command(AdapterDecl),
            /// An adapter of the embedding program ([`EmbeddedAdapter`]).
            Embedded(&'static EmbeddedAdapter),
            $($kind,)*
        }

        /// Every built-in adapter kind, in the order of [`ADAPTERS`] (configured command
        /// adapters come from `[[skill.commands]]`:
        /// [`crate::context::HubContext::adapter_kinds`]).
        pub const KINDS: [AdapterKind; [$(stringify!($kind)),*].len()] = [$(AdapterKind::$kind),*];

        impl AdapterKind {
            pub const fn decl(self) -> AdapterDecl {
                match self {
                    AdapterKind::Command(decl) => decl,
                    AdapterKind::Embedded(e) => e.decl,
                    $(AdapterKind::$kind => AdapterDecl {
                        tool_id: $tool_id,
                        name: $name,
                        writes: $writes,
                    },)*
                }
            }

            /// Whether this hub's configuration gives the adapter something to serve (a hub
            /// publishes only those): health checks, allowed tests, a deploy repository,
            /// managed services, NLU content. Command and embedded adapters always do.
            pub fn serves(self, config: Provided<'_>) -> bool {
                match self {
                    AdapterKind::Command(_) | AdapterKind::Embedded(_) => true,
                    $(AdapterKind::$kind => {
                        let $cfg = config;
                        $serves
                    })*
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

// The registry. A new built-in tool is one entry (in the order `ADAPTERS` publishes), its
// module above, and its contract in schemas/tools/.
builtin_adapters! {
    Status {
        tool_id: "hub.get_status",
        name: "infra_access_skill.status",
        writes: false,
        serves: |_| true,
        run: |ctx, input| status::run(&ctx, &input.arguments).await,
    }
    RuntimeSummary {
        tool_id: "hub.get_runtime_summary",
        name: "infra_access_skill.runtime_summary",
        writes: false,
        serves: |_| true,
        run: |ctx, input| { no_arguments(&input.arguments)?; runtime::run(&ctx).await },
    }
    OperationalSurface {
        tool_id: "hub.get_operational_surface",
        name: "infra_access_skill.operational_surface",
        writes: false,
        serves: |_| true,
        run: |ctx, input| { no_arguments(&input.arguments)?; Ok(surface::run(&ctx)) },
    }
    Healthchecks {
        tool_id: "hub.run_healthchecks",
        name: "infra_access_skill.healthchecks",
        writes: false,
        serves: |c| !c.skill.healthchecks.is_empty() || c.services.iter().any(|s| s.health.is_some()),
        run: |ctx, input| { no_arguments(&input.arguments)?; Ok(health::run(&ctx).await) },
    }
    AllowedTests {
        tool_id: "hub.run_allowed_tests",
        name: "infra_access_skill.allowed_tests",
        writes: true,
        serves: |c| !c.skill.allowed_tests.is_empty(),
        run: |ctx, input| test_runs::run(&ctx, input).await,
    }
    TestResults {
        tool_id: "hub.get_test_results",
        name: "infra_access_skill.test_results",
        writes: false,
        serves: |c| !c.skill.allowed_tests.is_empty(),
        run: |ctx, input| test_results::run(&ctx, &input.arguments),
    }
    ActivityLog {
        tool_id: "hub.get_activity_log",
        name: "infra_access_skill.activity_log",
        writes: false,
        serves: |_| true,
        run: |ctx, input| activity_log::run(&ctx, &input.arguments),
    }
    CapabilityUsage {
        tool_id: "hub.get_capability_usage_summary",
        name: "infra_access_skill.capability_usage",
        writes: false,
        serves: |_| true,
        run: |ctx, input| { no_arguments(&input.arguments)?; Ok(capability_usage::run(&ctx)) },
    }
    DeployRef {
        tool_id: "hub.deploy_ref",
        name: "infra_access_skill.deploy_ref",
        writes: true,
        serves: |c| c.deploy,
        run: |ctx, input| deploy::deploy_ref(&ctx, input).await,
    }
    RollbackLastTestDeploy {
        tool_id: "hub.rollback_last_test_deploy",
        name: "infra_access_skill.rollback",
        writes: true,
        serves: |c| c.deploy,
        run: |ctx, input| deploy::rollback(&ctx, input).await,
    }
    GetLogs {
        tool_id: "hub.get_logs",
        name: "infra_access_skill.logs",
        writes: false,
        serves: |_| true,
        run: |ctx, input| logs::run(&ctx, &input.arguments).await,
    }
    RestartService {
        tool_id: "hub.restart_service",
        name: "infra_access_skill.restart_service",
        writes: true,
        serves: |c| !c.services.is_empty(),
        run: |ctx, input| restart_service::run(&ctx, input).await,
    }
    MemoryStatus {
        tool_id: "hub.memory.get_status",
        name: "infra_access_skill.memory.status",
        writes: false,
        serves: |c| !c.services.is_empty(),
        run: |ctx, input| memory::status(&ctx, &input.arguments),
    }
    MemoryListSessions {
        tool_id: "hub.memory.list_sessions",
        name: "infra_access_skill.memory.list_sessions",
        writes: false,
        serves: |c| !c.services.is_empty(),
        run: |ctx, input| memory::list_sessions(&ctx, &input.arguments),
    }
    MemoryGetSession {
        tool_id: "hub.memory.get_session",
        name: "infra_access_skill.memory.get_session",
        writes: false,
        serves: |c| !c.services.is_empty(),
        run: |ctx, input| memory::get_session(&ctx, &input.arguments),
    }
    MemoryListIncidents {
        tool_id: "hub.memory.list_incidents",
        name: "infra_access_skill.memory.list_incidents",
        writes: false,
        serves: |c| !c.services.is_empty(),
        run: |ctx, input| memory::list_incidents(&ctx, &input.arguments),
    }
    MemoryListArtifacts {
        tool_id: "hub.memory.list_artifacts",
        name: "infra_access_skill.memory.list_artifacts",
        writes: false,
        serves: |c| !c.services.is_empty(),
        run: |ctx, input| memory::list_artifacts(&ctx, &input.arguments),
    }
    MemoryGetArtifact {
        tool_id: "hub.memory.get_artifact",
        name: "infra_access_skill.memory.get_artifact",
        writes: false,
        serves: |c| !c.services.is_empty(),
        run: |ctx, input| memory::get_artifact(&ctx, &input.arguments),
    }
    MemoryStartProfile {
        tool_id: "hub.memory.start_profile",
        name: "infra_access_skill.memory.start_profile",
        writes: true,
        serves: |c| !c.services.is_empty(),
        run: |ctx, input| memory::start(&ctx, input).await,
    }
    MemoryStopProfile {
        tool_id: "hub.memory.stop_profile",
        name: "infra_access_skill.memory.stop_profile",
        writes: true,
        serves: |c| !c.services.is_empty(),
        run: |ctx, input| memory::stop(&ctx, input).await,
    }
    MemoryRetryProfile {
        tool_id: "hub.memory.retry_profile",
        name: "infra_access_skill.memory.retry_profile",
        writes: true,
        serves: |c| !c.services.is_empty(),
        run: |ctx, input| memory::retry(&ctx, input).await,
    }
    MemoryPublishProfile {
        tool_id: "hub.memory.publish_profile",
        name: "infra_access_skill.memory.publish_profile",
        writes: true,
        serves: |c| !c.services.is_empty(),
        run: |ctx, input| memory::publish(&ctx, input).await,
    }
    NluGetContext {
        tool_id: "nlu_authoring.get_context",
        name: "infra_access_skill.nlu_authoring.get_context",
        writes: false,
        serves: |c| c.nlu,
        run: |ctx, input| nlu_authoring::get_context(&ctx, &input.arguments),
    }
    NluListTemplates {
        tool_id: "nlu_authoring.list_templates",
        name: "infra_access_skill.nlu_authoring.list_templates",
        writes: false,
        serves: |c| c.nlu,
        run: |ctx, input| nlu_authoring::list_templates(&ctx, &input.arguments),
    }
    NluCheckPhrase {
        tool_id: "nlu_authoring.check_phrase",
        name: "infra_access_skill.nlu_authoring.check_phrase",
        writes: false,
        serves: |c| c.nlu,
        run: |ctx, input| nlu_authoring::check_phrase(&ctx, &input.arguments),
    }
    NluProposeChange {
        tool_id: "nlu_authoring.propose_change",
        name: "infra_access_skill.nlu_authoring.propose_change",
        writes: true,
        serves: |c| c.nlu,
        run: |ctx, input| nlu_authoring::propose_change(&ctx, &input),
    }
    NluApplyChange {
        tool_id: "nlu_authoring.apply_change",
        name: "infra_access_skill.nlu_authoring.apply_change",
        writes: true,
        serves: |c| c.nlu,
        run: |ctx, input| nlu_authoring::apply_change(&ctx, &input),
    }
}

/// Every built-in adapter of `infra_access_skill`, with the tool it serves.
pub const ADAPTERS: [AdapterDecl; KINDS.len()] = {
    let mut decls = [AdapterKind::Status.decl(); KINDS.len()];
    let mut i = 0;
    while i < KINDS.len() {
        decls[i] = KINDS[i].decl();
        i += 1;
    }
    decls
};

/// The built-in adapters `config` gives something to serve, in table order: a hub without
/// managed services publishes no `hub.memory.*` and no `hub.restart_service`, one without
/// `[nlu]` no `nlu_authoring.*`, and so on. The rest answer from the hub itself.
pub fn served(config: Provided<'_>) -> impl Iterator<Item = AdapterKind> + '_ {
    KINDS.into_iter().filter(move |k| k.serves(config))
}

impl AdapterKind {
    /// The built-in adapter serving `tool_id`.
    pub fn for_tool(tool_id: &str) -> Option<AdapterKind> {
        KINDS.into_iter().find(|k| k.decl().tool_id == tool_id)
    }
}

/// Refuses anything but `{}` (root validates too; the hub does not rely on it).
pub(super) fn no_arguments(arguments: &Value) -> Result<(), ToolError> {
    match arguments {
        Value::Object(m) if m.is_empty() => Ok(()),
        Value::Null => Ok(()),
        _ => Err(ToolError::new(
            ErrorCode::InvalidArguments,
            "this tool takes no arguments",
        )),
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
