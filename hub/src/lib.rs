//! `mcp-hub`: the daemon that runs on a managed target, dials root over WebSocket and hosts
//! `infra_access_skill` with its execution adapters.
//!
//! # Layout
//! - `lib.rs` (here): [`start`] / [`start_with`] and [`HubHandle`], and the crate's public
//!   API (re-exported below; everything else is `pub(crate)`). `main.rs` is the binary.
//! - [`cli`]: the command line (`run`, `skill status|enable|disable`).
//! - [`config`]: [`HubConfig`] from TOML plus command-line overrides, a file per section.
//! - `context.rs`: [`HubContext`], what the parts share (configuration, connection state,
//!   the skill's declarations and lifecycle, the stores, the machine, the hub's log).
//! - `supervisor.rs`: the skill, the service supervisor and ProfileOps under one supervisor
//!   that starts a failed one again with its state rebuilt.
//! - `link/`: the link to root. `channel/` (`mod.rs` hello, welcome, frames, heartbeats,
//!   reconnects; `connect.rs` the upgrade request and backoff; `frames.rs` envelopes;
//!   `call.rs` one call through the gate and the skill, recorded in the activity log),
//!   `enforcement.rs` (the final checks on every call: signature, clock skew, deadline,
//!   replay, published tool, write scope), `clock.rs` (root's offset), `tls.rs` (how `wss://`
//!   verifies root; the secret-file mode check).
//! - `skill/`: `infra_access_skill`, a ractor actor supervising one actor per adapter
//!   (`actor.rs`), its lifecycle on disk (`lifecycle.rs`), and `adapters/`: the one table of
//!   built-in adapters (`table.rs`) expanded into their declarations (`decl.rs`) and their
//!   dispatch (`registry.rs`), a call as an adapter gets it (`call.rs`), typed arguments
//!   (`args.rs`), the adapter actor (`actor.rs`), redaction (`redact.rs`), configured
//!   command adapters (`command.rs`) and a module per tool family (`status`, `runtime`,
//!   `surface`, `health`, `test_runs`, `test_results`, `activity_log`, `capability_usage`,
//!   `deploy/`, `logs`, `restart_service`, `memory/`, `nlu_authoring`).
//! - `machine/`: what acts on the machine: `services/` (the managed services of
//!   `[[services]]`, their supervisor actor and size-capped logs), `deploys.rs` (the deploy
//!   history), `git.rs` (git as argv with a deadline), `refs.rs` (the refs a caller may
//!   deploy).
//! - `store/`: what the hub keeps: `json_file.rs` (one typed JSON file with idempotency-key
//!   claims, behind `ledger.rs` `<state_dir>/write-ledger.json`, `results.rs`
//!   `<state_dir>/test-results.json` and the deploy history), `state.rs` (the one atomic
//!   write every state file goes through), `activity.rs` (the last 1000 finished calls) and
//!   `hublog.rs` (the hub's own recent log lines).
//! - `nlu/`: the NLU content store (`content.rs`, `syntax.rs`, `normalize.rs`, applied
//!   changes in `change.rs`) and its deterministic phrase matcher (`matcher/`).
//! - `profiles/`: ProfileOps, the hub as profiling authority (sessions, artifacts and
//!   incidents under `<state_dir>/profiles/`, the evidence log root is sent).
//!
//! Unit tests sit beside the module they test (`tests.rs` or `*_tests.rs`, declared by it).
//!
//! Invariant: the hub is transport plus final enforcement. It never owns the tool catalog or
//! business policy: root decides who may call what; the hub only re-checks root's signature,
//! the deadline, replays, what its own skill publishes and its own write scope.

#![warn(unreachable_pub)]

pub mod cli;
pub mod config;
mod context;
mod link;
mod machine;
mod nlu;
mod profiles;
mod restartable;
mod skill;
mod store;
mod supervisor;

use std::sync::Arc;
use std::time::Duration;

use mcp_shared::protocol::SkillState;
use mcp_shared::target::ManagedTargetDescriptor;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub use cli::{Cli, run};
pub use config::HubConfig;
pub use context::{HubContext, Machine};
pub use link::channel::connect::{Backoff, ChannelError, upgrade_request};
pub use link::tls::{install_crypto_provider, spki_pin};
pub use machine::services::Services;
/// The actors' messages; their `Panic` variant (feature `fault-injection`) lets tests fail
/// an actor on purpose.
pub use machine::services::supervisor::Msg as ServiceSupervisorMsg;
pub use profiles::Profiles;
pub use profiles::actor::Msg as ProfileOpsMsg;
pub use skill::SkillHandle;
pub use skill::actor::Msg as SkillMsg;
pub use skill::adapters::decl::{ADAPTERS, AdapterDecl};
pub use skill::adapters::registry::{AdapterKind, EmbeddedAdapter, EmbeddedRun, served};
pub use skill::adapters::{AdapterReply, CallInput, Progress};
pub use supervisor::Msg as SupervisorMsg;

use crate::link::channel::Channel;
use crate::link::enforcement::Gate;

/// A running hub.
pub struct HubHandle {
    ctx: Arc<HubContext>,
    skill: SkillHandle,
    supervisor: ractor::ActorRef<supervisor::Msg>,
    stopping: Arc<std::sync::atomic::AtomicBool>,
    connected: watch::Receiver<bool>,
    shutdown: CancellationToken,
    channel: tokio::task::JoinHandle<()>,
}

/// Starts the managed services, the skill and the root channel; returns at once (the hub
/// connects in the background and keeps reconnecting).
pub async fn start(config: HubConfig) -> anyhow::Result<HubHandle> {
    start_with(config, &[]).await
}

/// [`start`] for a program that embeds the hub library with adapters of its own (`embedded`,
/// served after the built-in and command adapters; `mcp-hub` has none).
pub async fn start_with(
    config: HubConfig,
    embedded: &[&'static EmbeddedAdapter],
) -> anyhow::Result<HubHandle> {
    install_crypto_provider();
    config.validate()?;
    config.check_transport()?;
    let gate = Arc::new(Gate::new(
        &config.token,
        &config.environment,
        config.write_scope,
    ));
    let decls: Vec<_> = embedded.iter().map(|e| e.decl).collect();
    let ctx = Arc::new(HubContext::with_embedded(config, &decls)?);
    // The skill, the service supervisor and ProfileOps, under one supervisor.
    let stopping = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (supervisor, skill) =
        match supervisor::start(ctx.clone(), embedded.into(), stopping.clone()).await {
            Ok(s) => s,
            Err(e) => {
                stopping.store(true, std::sync::atomic::Ordering::Release);
                ctx.machine.profiles.stop().await;
                ctx.machine.services.stop().await;
                return Err(e);
            }
        };
    let (tx, connected) = watch::channel(false);
    let shutdown = CancellationToken::new();
    let channel = Channel {
        ctx: ctx.clone(),
        gate,
        skill: skill.clone(),
        connected: Arc::new(tx),
        shutdown: shutdown.clone(),
    };
    let channel = tokio::spawn(channel.run());
    if let Some(path) = ctx.config.token_file.clone()
        && ctx.config.token_reload_interval_ms > 0
    {
        tokio::spawn(watch_token_file(ctx.clone(), path, shutdown.clone()));
    }
    tokio::spawn(watch_owner_switch(
        ctx.clone(),
        skill.clone(),
        shutdown.clone(),
    ));
    Ok(HubHandle {
        ctx,
        skill,
        supervisor,
        stopping,
        connected,
        shutdown,
        channel,
    })
}

/// Picks up a rotated hub token: polls the token file and, when it holds a new token (and is
/// still private), makes it the one the next `hello` carries and tells the channel to
/// reconnect with it. A file that cannot be read or is readable by others is logged and the
/// current token kept.
async fn watch_token_file(ctx: Arc<HubContext>, path: std::path::PathBuf, stop: CancellationToken) {
    let period = Duration::from_millis(ctx.config.token_reload_interval_ms);
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_error: Option<String> = None;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        match config::read_token_file(&path) {
            Ok(token) if token.is_empty() => {}
            Ok(token) => {
                last_error = None;
                if token != **ctx.connection.token.load() {
                    ctx.connection.token.store(Arc::new(token));
                    tracing::info!(file = %path.display(), "the hub token file holds a new token; reconnecting with it");
                    ctx.connection.token_changed.notify_one();
                }
            }
            Err(e) => {
                let msg = e.to_string();
                if last_error.as_deref() != Some(msg.as_str()) {
                    tracing::error!(error = %msg, "cannot read the hub token file; keeping the current token");
                    last_error = Some(msg);
                }
            }
        }
    }
}

/// Picks up the hub owner's switch (`mcp-hub skill enable|disable` writes it): polls
/// `<state_dir>/skill-owner.json` and tells the skill when it changed, which tells root.
async fn watch_owner_switch(ctx: Arc<HubContext>, skill: SkillHandle, stop: CancellationToken) {
    let mut tick = tokio::time::interval(skill::OWNER_SWITCH_POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_error: Option<String> = None;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        match skill::load_owner_switch(&ctx.config.state_dir) {
            Ok(enabled) => {
                last_error = None;
                if enabled != ctx.lifecycle().owner_enabled {
                    skill.owner_switch(enabled);
                }
            }
            Err(e) => {
                let msg = e.to_string();
                if last_error.as_deref() != Some(msg.as_str()) {
                    tracing::error!(error = %msg, "cannot read the owner's skill switch; keeping the current one");
                    last_error = Some(msg);
                }
            }
        }
    }
}

impl HubHandle {
    pub fn target_id(&self) -> &str {
        &self.ctx.config.target_id
    }

    /// Whether root has welcomed the hub on the current connection.
    pub fn is_connected(&self) -> bool {
        *self.connected.borrow()
    }

    /// Resolves once root has welcomed the hub on the current connection.
    pub async fn wait_connected(&self, timeout: Duration) -> anyhow::Result<()> {
        let mut rx = self.connected.clone();
        tokio::time::timeout(timeout, rx.wait_for(|c| *c))
            .await
            .map_err(|_| {
                anyhow::anyhow!(
                    "hub `{}` not connected within {timeout:?}",
                    self.target_id()
                )
            })?
            .map_err(|_| anyhow::anyhow!("hub `{}` stopped", self.target_id()))?;
        Ok(())
    }

    /// The skill's lifecycle state as published now.
    pub fn skill_state(&self) -> SkillState {
        self.ctx
            .skill_states()
            .pop()
            .unwrap_or_else(|| self.ctx.lifecycle().skill_state())
    }

    /// The descriptor the hub announces.
    pub fn descriptor(&self) -> ManagedTargetDescriptor {
        self.ctx.descriptor()
    }

    /// The skill actor, for tests that drive it directly.
    pub fn skill(&self) -> &SkillHandle {
        &self.skill
    }

    /// Closes the connection, stops calls in flight, then the skill and its adapters, then
    /// ProfileOps (running sessions end `interrupted`) and the managed services.
    pub async fn shutdown(self) {
        self.stopping
            .store(true, std::sync::atomic::Ordering::Release);
        self.shutdown.cancel();
        let _ = self.channel.await;
        self.skill.stop().await;
        self.ctx.machine.profiles.stop().await;
        self.ctx.machine.services.stop().await;
        self.supervisor.stop(Some("hub shutting down".into()));
    }

    /// The hub's supervisor (the skill, the service supervisor and ProfileOps run under it).
    pub fn supervisor(&self) -> &ractor::ActorRef<supervisor::Msg> {
        &self.supervisor
    }

    /// The hub's shared state (the services' table, ProfileOps, the skill's lifecycle).
    pub fn context(&self) -> &Arc<HubContext> {
        &self.ctx
    }
}
