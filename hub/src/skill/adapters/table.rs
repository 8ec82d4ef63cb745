//! The table of built-in adapters: one entry per tool names the tool it serves, the adapter's
//! name, whether it writes, what configuration gives it something to serve and the work it
//! runs. A new built-in tool is one entry here (in the order `ADAPTERS` publishes), its module
//! beside this one, and its contract in schemas/tools/.
//!
//! The table is expanded twice, by a macro given to [`builtin_adapters!`]: as declarations
//! (data only: [`super::decl`], read by the configuration and the context) and as the dispatch
//! to each adapter's code ([`super::registry`]). So what a hub declares never depends on the
//! code that serves it.

/// Calls `$then! { Kind { tool_id, name, writes, serves: |provided| bool, run: |ctx, input|
/// work } ... }` with every built-in adapter, in publishing order. `serves` reads a
/// [`super::decl::Provided`]; `run` is expanded where `ctx: Arc<HubContext>`, `input:
/// CallInput`, the adapter modules and `no_arguments` are in scope, and evaluates to an
/// `AdapterReply`.
macro_rules! builtin_adapters {
    ($then:ident) => {
        $then! {

            Status {
                tool_id: "hub.get_status",
                name: "infra_access_skill.status",
                writes: false,
                serves: |_| true,
                run: |ctx, input| status::run(&ctx, &input.body.arguments).await,
            }
            RuntimeSummary {
                tool_id: "hub.get_runtime_summary",
                name: "infra_access_skill.runtime_summary",
                writes: false,
                serves: |_| true,
                run: |ctx, input| { no_arguments(&input.body.arguments)?; runtime::run(&ctx).await },
            }
            OperationalSurface {
                tool_id: "hub.get_operational_surface",
                name: "infra_access_skill.operational_surface",
                writes: false,
                serves: |_| true,
                run: |ctx, input| { no_arguments(&input.body.arguments)?; Ok(surface::run(&ctx)) },
            }
            Healthchecks {
                tool_id: "hub.run_healthchecks",
                name: "infra_access_skill.healthchecks",
                writes: false,
                serves: |c| c.healthchecks,
                run: |ctx, input| { no_arguments(&input.body.arguments)?; Ok(health::run(&ctx).await) },
            }
            AllowedTests {
                tool_id: "hub.run_allowed_tests",
                name: "infra_access_skill.allowed_tests",
                writes: true,
                serves: |c| c.allowed_tests,
                run: |ctx, input| test_runs::run(&ctx, input).await,
            }
            TestResults {
                tool_id: "hub.get_test_results",
                name: "infra_access_skill.test_results",
                writes: false,
                serves: |c| c.allowed_tests,
                run: |ctx, input| test_results::run(&ctx, &input.body.arguments),
            }
            ActivityLog {
                tool_id: "hub.get_activity_log",
                name: "infra_access_skill.activity_log",
                writes: false,
                serves: |_| true,
                run: |ctx, input| activity_log::run(&ctx, &input.body.arguments),
            }
            CapabilityUsage {
                tool_id: "hub.get_capability_usage_summary",
                name: "infra_access_skill.capability_usage",
                writes: false,
                serves: |_| true,
                run: |ctx, input| { no_arguments(&input.body.arguments)?; Ok(capability_usage::run(&ctx)) },
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
                run: |ctx, input| logs::run(&ctx, &input.body.arguments).await,
            }
            RestartService {
                tool_id: "hub.restart_service",
                name: "infra_access_skill.restart_service",
                writes: true,
                serves: |c| c.services,
                run: |ctx, input| restart_service::run(&ctx, input).await,
            }
            MemoryStatus {
                tool_id: "hub.memory.get_status",
                name: "infra_access_skill.memory.status",
                writes: false,
                serves: |c| c.services,
                run: |ctx, input| memory::status(&ctx, &input.body.arguments),
            }
            MemoryListSessions {
                tool_id: "hub.memory.list_sessions",
                name: "infra_access_skill.memory.list_sessions",
                writes: false,
                serves: |c| c.services,
                run: |ctx, input| memory::list_sessions(&ctx, &input.body.arguments),
            }
            MemoryGetSession {
                tool_id: "hub.memory.get_session",
                name: "infra_access_skill.memory.get_session",
                writes: false,
                serves: |c| c.services,
                run: |ctx, input| memory::get_session(&ctx, &input.body.arguments).await,
            }
            MemoryListIncidents {
                tool_id: "hub.memory.list_incidents",
                name: "infra_access_skill.memory.list_incidents",
                writes: false,
                serves: |c| c.services,
                run: |ctx, input| memory::list_incidents(&ctx, &input.body.arguments),
            }
            MemoryListArtifacts {
                tool_id: "hub.memory.list_artifacts",
                name: "infra_access_skill.memory.list_artifacts",
                writes: false,
                serves: |c| c.services,
                run: |ctx, input| memory::list_artifacts(&ctx, &input.body.arguments),
            }
            MemoryGetArtifact {
                tool_id: "hub.memory.get_artifact",
                name: "infra_access_skill.memory.get_artifact",
                writes: false,
                serves: |c| c.services,
                run: |ctx, input| memory::get_artifact(&ctx, &input.body.arguments),
            }
            MemoryStartProfile {
                tool_id: "hub.memory.start_profile",
                name: "infra_access_skill.memory.start_profile",
                writes: true,
                serves: |c| c.services,
                run: |ctx, input| memory::start(&ctx, input).await,
            }
            MemoryStopProfile {
                tool_id: "hub.memory.stop_profile",
                name: "infra_access_skill.memory.stop_profile",
                writes: true,
                serves: |c| c.services,
                run: |ctx, input| memory::stop(&ctx, input).await,
            }
            MemoryRetryProfile {
                tool_id: "hub.memory.retry_profile",
                name: "infra_access_skill.memory.retry_profile",
                writes: true,
                serves: |c| c.services,
                run: |ctx, input| memory::retry(&ctx, input).await,
            }
            MemoryPublishProfile {
                tool_id: "hub.memory.publish_profile",
                name: "infra_access_skill.memory.publish_profile",
                writes: true,
                serves: |c| c.services,
                run: |ctx, input| memory::publish(&ctx, input).await,
            }
            NluGetContext {
                tool_id: "nlu_authoring.get_context",
                name: "infra_access_skill.nlu_authoring.get_context",
                writes: false,
                serves: |c| c.nlu,
                run: |ctx, input| nlu_authoring::get_context(&ctx, &input.body.arguments),
            }
            NluListTemplates {
                tool_id: "nlu_authoring.list_templates",
                name: "infra_access_skill.nlu_authoring.list_templates",
                writes: false,
                serves: |c| c.nlu,
                run: |ctx, input| nlu_authoring::list_templates(&ctx, &input.body.arguments),
            }
            NluCheckPhrase {
                tool_id: "nlu_authoring.check_phrase",
                name: "infra_access_skill.nlu_authoring.check_phrase",
                writes: false,
                serves: |c| c.nlu,
                run: |ctx, input| nlu_authoring::check_phrase(&ctx, &input.body.arguments),
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
    };
}

pub(super) use builtin_adapters;
