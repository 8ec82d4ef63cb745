//! What the hub's parts share: the configuration, the process clock, the connection state
//! and the skill lifecycle snapshot that the gate, the adapters and the channel read.
//!
//! Invariant: only the skill actor writes [`SkillSurface`]; only the channel writes
//! [`Connection::connected_since`] and [`Stores::activity`].

use std::time::Instant;

use crate::config::HubConfig;
use crate::link::enforcement::Published;
use crate::machine::deploys::Deploys;
use crate::machine::services::Services;
use crate::nlu::Nlu;
use crate::profiles::Profiles;
use crate::skill::adapters::decl::{ADAPTERS, AdapterDecl, Builtin, served};
use crate::skill::lifecycle::{Lifecycle, SKILL};
use crate::store::activity::ActivityLog;
use crate::store::hublog::LogRing;
use crate::store::ledger::WriteLedger;
use crate::store::results::TestResults;
use arc_swap::{ArcSwap, ArcSwapOption};
use mcp_shared::protocol::SkillState;
use mcp_shared::target::{
    ManagedTargetDescriptor, OperationalSurface, TargetPolicy, TargetStatus, Transport,
};
use mcp_shared::time::OffsetDateTime;

/// `operational_surface.published_by` in the descriptor.
pub(crate) const PUBLISHED_BY: &str = "skill:infra_access_skill";
/// `kind` of this managed target.
pub(crate) const TARGET_KIND: &str = "hub";
/// `transport.channel` of this managed target.
pub(crate) const CHANNEL: &str = "hub_root_protocol";

/// Shared state of one hub process, grouped by who reads and writes it.
pub struct HubContext {
    pub config: HubConfig,
    /// When the hub process started.
    pub(crate) process: Process,
    /// The channel's connection to root.
    pub(crate) connection: Connection,
    /// The skill's adapters, lifecycle and published surface.
    pub(crate) skill: SkillSurface,
    /// What the hub keeps: the stores under `state_dir` and the activity log.
    pub(crate) stores: Stores,
    /// What acts on the machine: the managed services, ProfileOps and health checks.
    pub machine: Machine,
    /// The hub's own log and the redaction applied to what it returns.
    pub(crate) logging: Logging,
}

/// The process clock: when the hub process started (monotonic and wall clock).
pub(crate) struct Process {
    pub started: Instant,
    pub started_at: OffsetDateTime,
}

/// The connection to root: what the channel dials with and what it learned at the last
/// `welcome`.
pub(crate) struct Connection {
    /// The hub token the next `hello` carries: `config.token` at start, replaced when the
    /// token file changes (key rotation).
    pub token: ArcSwap<String>,
    /// Signalled when [`Connection::token`] changes; the channel reconnects with it.
    pub token_changed: tokio::sync::Notify,
    /// How `wss://` verifies root (built once at start; `None` for a plaintext URL).
    pub tls: Option<std::sync::Arc<rustls::ClientConfig>>,
    /// When the current connection was welcomed by root; `None` while disconnected.
    pub connected_since: ArcSwapOption<OffsetDateTime>,
    /// The hub's clock and root's offset from it (measured at each welcome).
    pub clock: crate::link::clock::HubClock,
    /// The protocol features root announced in its last welcome.
    pub root_features: ArcSwap<mcp_shared::protocol::Features>,
    /// Root refused a `hello` that announced features (a root of an earlier build, which
    /// knows no `features` field): later hellos announce none.
    pub plain_hello: std::sync::atomic::AtomicBool,
}

/// The skill's state: its adapters, its lifecycle and what of it is published (read by the
/// gate, the adapters and the channel; written by the skill actor only).
pub(crate) struct SkillSurface {
    /// What every adapter of the skill declares: the built-in ones its configuration serves
    /// ([`served`]), then the command adapters of `[[skill.commands]]`, in configuration
    /// order, then the embedding program's; fixed for the life of the process.
    decls: Vec<AdapterDecl>,
    pub lifecycle: ArcSwap<Lifecycle>,
    /// Tools whose adapter used up its restart budget: withdrawn from the published surface
    /// until the skill is enabled again.
    pub unavailable: ArcSwap<Vec<&'static str>>,
    /// Signalled when the published surface changed outside a skill command (an adapter
    /// became unavailable); the channel then sends `surface_changed`.
    pub surface_changed: tokio::sync::Notify,
}

/// What the hub keeps: the stores under `state_dir`, and the in-memory activity log.
pub(crate) struct Stores {
    /// Recorded allowed-test results and idempotency keys (`<state_dir>/test-results.json`).
    pub test_results: TestResults,
    /// The deploy history and the one-deploy-at-a-time lock (`<state_dir>/deploys.json`).
    pub deploys: Deploys,
    /// Hub-side idempotency keys of writes (`<state_dir>/write-ledger.json`).
    pub ledger: WriteLedger,
    /// NLU content (`[nlu]` plus the changes applied in `<state_dir>/nlu/`), served by the
    /// `nlu_authoring.*` adapters.
    pub nlu: Nlu,
    /// The last calls the hub finished (written by the channel when a call ends).
    pub activity: ActivityLog,
}

/// What acts on the machine: the actors [`crate::start`] starts, and the health-check client.
pub struct Machine {
    /// The managed services (`[[services]]`) and their supervisor.
    pub services: Services,
    /// ProfileOps: profiling sessions, incidents and artifacts (`<state_dir>/profiles/`).
    pub profiles: Profiles,
    /// Client for HTTP health checks.
    pub(crate) http: reqwest::Client,
}

/// The hub's own log and the redaction applied to the text it returns.
pub(crate) struct Logging {
    /// The hub's own recent log lines (the process-wide ring; see [`crate::store::hublog`]).
    pub hub_log: std::sync::Arc<LogRing>,
    /// `[redaction]` patterns, compiled; applied on top of the built-in ones.
    pub redaction: Vec<regex::Regex>,
}

impl HubContext {
    /// The context of a hub with the built-in and command adapters its configuration serves.
    pub fn new(config: HubConfig) -> anyhow::Result<HubContext> {
        HubContext::with_embedded(config, &[])
    }

    /// [`HubContext::new`] for a program that embeds adapters of its own: `embedded` are their
    /// declarations, served after the others. No two adapters may serve one tool.
    pub fn with_embedded(
        config: HubConfig,
        embedded: &[AdapterDecl],
    ) -> anyhow::Result<HubContext> {
        crate::link::tls::install_crypto_provider();
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::limited(3))
            .build()
            .map_err(|e| anyhow::anyhow!("cannot build the health-check HTTP client: {e}"))?;
        let redaction = config
            .redaction
            .patterns
            .iter()
            .map(|p| regex::Regex::new(p))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| anyhow::anyhow!("redaction pattern: {e}"))?;
        let nlu = Nlu::load(&config).map_err(|e| anyhow::anyhow!("NLU content: {e}"))?;
        // Plaintext URLs are checked by `HubConfig::validate` (loopback or insecure_plaintext).
        let tls = if config
            .connect_urls()
            .is_ok_and(|urls| urls.iter().any(|u| u.starts_with("wss://")))
        {
            Some(crate::link::tls::client_config(&config.tls)?)
        } else {
            None
        };
        if let Some(e) = embedded
            .iter()
            .find(|e| ADAPTERS.iter().any(|a| a.tool_id == e.tool_id))
        {
            anyhow::bail!(
                "embedded adapter `{}`: a built-in adapter serves this tool",
                e.tool_id
            );
        }
        if let Some(c) = config
            .skill
            .commands
            .iter()
            .find(|c| embedded.iter().any(|e| e.tool_id == c.tool_id))
        {
            anyhow::bail!(
                "invalid configuration: command adapter `{}`: an embedded adapter serves this tool",
                c.tool_id
            );
        }
        let commands = config.skill.commands.iter().map(|c| c.decl());
        let decls = served(config.provided())
            .map(Builtin::decl)
            .chain(commands)
            .chain(embedded.iter().copied())
            .collect();
        Ok(HubContext {
            process: Process {
                started: Instant::now(),
                started_at: mcp_shared::time::now(),
            },
            connection: Connection {
                token: ArcSwap::from_pointee(config.token.clone()),
                token_changed: tokio::sync::Notify::new(),
                tls,
                connected_since: ArcSwapOption::empty(),
                clock: crate::link::clock::HubClock::new(config.skill.test_clock_offset_ms),
                root_features: ArcSwap::from_pointee(Default::default()),
                plain_hello: Default::default(),
            },
            skill: SkillSurface {
                decls,
                lifecycle: ArcSwap::from_pointee(Lifecycle::default()),
                unavailable: ArcSwap::from_pointee(Vec::new()),
                surface_changed: tokio::sync::Notify::new(),
            },
            stores: Stores {
                test_results: TestResults::new(&config.state_dir),
                deploys: Deploys::new(&config.state_dir),
                ledger: WriteLedger::new(&config.state_dir),
                nlu,
                activity: ActivityLog::default(),
            },
            machine: Machine {
                services: Services::new(&config),
                profiles: Profiles::new(&config),
                http,
            },
            logging: Logging {
                hub_log: crate::store::hublog::global(),
                redaction,
            },
            config,
        })
    }

    pub fn lifecycle(&self) -> Lifecycle {
        **self.skill.lifecycle.load()
    }

    /// The skill's state as published: without the tools of unavailable adapters.
    pub fn skill_states(&self) -> Vec<SkillState> {
        let mut state = self.lifecycle().skill_state_with(&self.skill.decls);
        let unavailable = self.skill.unavailable.load();
        state
            .published
            .retain(|t| !unavailable.contains(&t.as_str()));
        vec![state]
    }

    /// What every adapter of the skill declares (built-in, configured commands, embedded).
    pub fn adapter_decls(&self) -> &[AdapterDecl] {
        &self.skill.decls
    }

    /// What the gate checks calls against.
    pub fn published(&self) -> Published<'_> {
        Published {
            skill: SKILL,
            active: self.lifecycle().active(),
            adapters: &self.skill.decls,
        }
    }

    /// Adapters whose tools are published right now.
    pub fn published_adapters(&self) -> Vec<AdapterDecl> {
        if self.lifecycle().active() {
            let unavailable = self.skill.unavailable.load();
            self.skill
                .decls
                .iter()
                .filter(|a| !unavailable.contains(&a.tool_id))
                .copied()
                .collect()
        } else {
            Vec::new()
        }
    }

    /// The managed target descriptor this hub announces in `hello` and `surface_changed`.
    pub fn descriptor(&self) -> ManagedTargetDescriptor {
        let lifecycle = self.lifecycle();
        let published = self
            .skill_states()
            .pop()
            .map(|s| s.published)
            .unwrap_or_default();
        ManagedTargetDescriptor {
            target_id: self.config.target_id.clone(),
            kind: TARGET_KIND.to_owned(),
            environment: self.config.environment.clone(),
            status: TargetStatus::Online,
            transport: Transport {
                channel: CHANNEL.to_owned(),
            },
            operational_surface: OperationalSurface {
                published_by: PUBLISHED_BY.to_owned(),
                enabled: lifecycle.active(),
                capabilities: published,
            },
            policy: TargetPolicy {
                write_scope: self.config.write_scope,
            },
        }
    }
}
