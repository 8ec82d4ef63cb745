//! Starting the daemon: the store, the supervised actors, the shared state, the listener and
//! the background tasks, in that order; [`run`] returns a [`RootHandle`] with the bound
//! address (tests start root in-process on `127.0.0.1:0`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use crate::actors::supervisor;
use crate::api as http;
use crate::app::App;
use crate::audit::health as audit_health;
use crate::audit::redaction as redact;
use crate::audit::writer as audit_writer;
use crate::config::RootConfig;
use crate::descriptors::cache as descriptor_cache;
use crate::hubs::router;
use crate::leases::manager as lease_manager;
use crate::net::tls;
use crate::telemetry::metrics;
use crate::{audit, auth, catalog, descriptors, hubs, mcp, policy, replica, secrets, store};

/// A running root: its address, its state, and how to stop it.
pub struct RootHandle {
    pub addr: SocketAddr,
    pub app: Arc<App>,
    shutdown: CancellationToken,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
    supervisor: ractor::ActorRef<supervisor::Msg>,
    tls: Option<Arc<tls::TlsState>>,
    /// Set when the actors' supervisor stopped on its own (a restart budget spent).
    actors_stopped: Arc<std::sync::atomic::AtomicBool>,
    /// The MCP endpoint.
    door: Arc<mcp::transport::Door>,
}

impl RootHandle {
    /// `http://ADDR`, or `https://ADDR` with TLS.
    pub fn base_url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// The MCP endpoint URL.
    pub fn mcp_url(&self) -> String {
        format!("{}/mcp", self.base_url())
    }

    /// How many MCP sessions this root has bound to the lease that opened them.
    pub fn mcp_sessions(&self) -> usize {
        self.door.bound_sessions()
    }

    /// Reloads the TLS certificate, key and client CA now (what SIGHUP does); `Ok(false)`
    /// without TLS.
    pub fn reload_tls(&self) -> Result<bool, tls::ServerTlsError> {
        match &self.tls {
            Some(t) => t.reload(true),
            None => Ok(false),
        }
    }

    /// SHA-256 fingerprint of the certificate new connections get (with TLS).
    pub fn tls_fingerprint(&self) -> Option<String> {
        self.tls.as_ref().map(|t| t.fingerprint())
    }

    /// The operator's token.
    pub fn admin_token(&self) -> &str {
        &self.app.admin_token
    }

    /// Resolves when the server stops (on its own, after [`RootHandle::shutdown`], or with an
    /// error when root's actors stopped because one of them spent its restart budget).
    pub async fn wait(&mut self) -> anyhow::Result<()> {
        (&mut self.server).await??;
        if self
            .actors_stopped
            .load(std::sync::atomic::Ordering::Acquire)
        {
            anyhow::bail!(
                "root stopped: an actor failed more than {} times within {} s (see the log)",
                supervisor::RESTART_BUDGET,
                supervisor::RESTART_WINDOW.as_secs()
            );
        }
        Ok(())
    }

    /// Two-phase shutdown: stop accepting and drain requests (up to 10 s), then stop the
    /// actors, the audit writer last so that every event of a finished call is on disk.
    pub async fn shutdown(self) {
        self.shutdown.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(10), self.server).await;
        // Tasks commit their events while the audit writer still runs.
        crate::call::tasks::drain(&self.app).await;
        if let Some(zone) = &self.app.zone {
            zone.stop().await;
        }
        let actors = &self.app.actors;
        actors
            .shutting_down
            .store(true, std::sync::atomic::Ordering::Release);
        let t = Some(Duration::from_secs(5));
        let _ = actors.leases.load().stop_and_wait(None, t).await;
        let _ = actors.router.load().stop_and_wait(None, t).await;
        let _ = actors.policy.load().stop_and_wait(None, t).await;
        let _ = actors.descriptors.load().stop_and_wait(None, t).await;
        let _ = actors.audit.load().stop_and_wait(None, t).await;
        let _ = actors.links.load().stop_and_wait(None, t).await;
        let _ = self.supervisor.stop_and_wait(None, t).await;
    }
}

/// Starts a root daemon with `config`.
pub async fn run(config: RootConfig) -> anyhow::Result<RootHandle> {
    config.validate()?;
    // Refused before anything is bound or created.
    config.check_listener()?;
    if config.mcp.direct_reads.is_some() {
        tracing::warn!(
            "[mcp] direct_reads is retired and has no effect: root's own transport answers every /mcp request one way"
        );
    }
    if config.tls.is_none() && !config.listen.ip().is_loopback() {
        tracing::warn!(listen = %config.listen, "serving plain HTTP on a non-loopback address (insecure_http): bearers and hub tokens cross the network unencrypted");
    }
    let tls_state = match &config.tls {
        Some(t) => Some(Arc::new(
            tls::TlsState::load(t).context("loading the TLS certificate")?,
        )),
        None => None,
    };
    std::fs::create_dir_all(&config.data_dir)
        .with_context(|| format!("cannot create data dir {}", config.data_dir.display()))?;
    if config.admin_token_path().exists() {
        secrets::check_private_file(&config.admin_token_path())?;
    }
    let admin_token =
        auth::load_or_create_admin_token(&config.admin_token_path()).with_context(|| {
            format!(
                "cannot read or create {}",
                config.admin_token_path().display()
            )
        })?;

    let (catalog, configured) = load_catalog(&config)?;
    let (app, sup) = compose(config, catalog, configured, admin_token).await?;
    let shutdown = app.shutdown.clone();
    let actors_stopped = watch_actors(&app, &sup);
    app.operators
        .reload(&app.store)
        .await
        .context("loading the operators")?;
    // Tasks this root was running when it last stopped end now, with their events.
    crate::call::tasks::recover(&app, None).await;
    let door = mcp::transport::Door::start(app.clone(), &shutdown);
    tokio::spawn(janitor(app.clone(), door.clone(), shutdown.clone()));
    tokio::spawn(crate::api::hub_link::record_last_seen(
        app.clone(),
        shutdown.clone(),
    ));
    tokio::spawn(crate::api::hub_link::beat(app.clone(), shutdown.clone()));
    tokio::spawn(app.audit.clone().watch_health(shutdown.clone()));
    for sink in &app.config.audit.sinks {
        tokio::spawn(audit::sinks::run(
            app.store.clone(),
            app.audit.flushed.clone(),
            sink.clone(),
            app.config.zone.clone(),
            app.audit.health.clone(),
            app.metrics.clone(),
            shutdown.clone(),
        ));
    }
    tokio::spawn(audit::witness::submit::run(
        app.store.clone(),
        app.witnesses.clone(),
        app.metrics.clone(),
        shutdown.clone(),
    ));
    let cp = &app.config.audit.checkpoint;
    tokio::spawn(audit::checkpoint::run(
        app.store.clone(),
        app.audit.flushed.clone(),
        app.log_key.clone(),
        cp.every_events,
        std::time::Duration::from_secs(cp.every_sec),
        shutdown.clone(),
    ));
    // Idempotency claims a crash of this replica left (`call::claims`), before any call.
    match app.store.release_claims_of(app.replica_id()).await {
        Ok(0) => {}
        Ok(n) => tracing::info!(claims = n, "idempotency claims left by a crash settled"),
        Err(e) => {
            tracing::error!(error = %e, "cannot settle the idempotency claims left by a crash")
        }
    }
    let mcp_route = mcp_route(door.clone());
    let routes = http::router(app.clone(), mcp_route);

    let listener = tokio::net::TcpListener::bind(app.config.listen)
        .await
        .with_context(|| format!("cannot listen on {}", app.config.listen))?;
    let addr = listener.local_addr()?;
    if let Some(zone) = &app.zone {
        let scheme = if tls_state.is_some() { "https" } else { "http" };
        if let Err(e) = zone.start(app.clone(), addr, scheme).await {
            shutdown.cancel();
            sup.stop(Some("replica registration failed".into()));
            return Err(e);
        }
    }
    if let Some(t) = &tls_state {
        let interval = app.config.tls.as_ref().map_or(0, |c| c.reload_interval_sec);
        tokio::spawn(tls::watch(t.clone(), interval, shutdown.child_token()));
    }
    let server = tokio::spawn(crate::net::listener::serve(
        listener,
        tls_state.clone(),
        routes,
        crate::net::listener::ConnLimits::from_config(&app.config.limits),
        app.metrics.connections.clone(),
        shutdown.clone(),
    ));
    // Fleet runs this replica left unfinished go on (once hubs had time to reconnect).
    tokio::spawn(crate::fleet::execute::resume_unfinished(app.clone()));
    tokio::spawn(crate::ops::breakglass::run(app.clone()));
    if let Some(oidc) = app.oidc.clone() {
        tokio::spawn(crate::oidc::check::run(app.clone(), oidc));
    }
    let scheme = if tls_state.is_some() { "https" } else { "http" };
    tracing::info!(%addr, scheme, zone = %app.config.zone, backend = app.store.backend(), replica = app.replica_id(), tools = app.catalog.contracts.all().len(), "root listening");
    Ok(RootHandle {
        door,
        addr,
        app,
        shutdown,
        server,
        supervisor: sup,
        tls: tls_state,
        actors_stopped,
    })
}

/// Stops root when its actors' supervisor stops on its own (a child spent its restart
/// budget): the listener drains and [`RootHandle::wait`] answers an error, so the service
/// manager starts root afresh instead of it serving without its actors.
fn watch_actors(
    app: &Arc<App>,
    sup: &ractor::ActorRef<supervisor::Msg>,
) -> Arc<std::sync::atomic::AtomicBool> {
    let stopped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (app, sup, flag) = (app.clone(), sup.clone(), stopped.clone());
    tokio::spawn(async move {
        let _ = sup.wait(None).await;
        let ordering = std::sync::atomic::Ordering::Acquire;
        if !app.actors.shutting_down.load(ordering) && !app.shutdown.is_cancelled() {
            tracing::error!("root's actors stopped (a restart budget is spent); root stops");
            flag.store(true, std::sync::atomic::Ordering::Release);
            app.shutdown.cancel();
        }
    });
    stopped
}

/// The configured descriptors: what `validate` makes of them (descriptors and skill catalog).
type Configured = (
    Vec<mcp_shared::descriptor::Descriptor>,
    Option<crate::skill_catalog::SkillCatalog>,
);

/// Loads the contracts, the configured descriptor set (checked against them), the capability
/// profiles and the destructive-action rules; a contract with a destructive name that is not
/// `destructive` stops start-up.
fn load_catalog(config: &RootConfig) -> anyhow::Result<(catalog::Catalog, Configured)> {
    let contracts = Arc::new(
        catalog::ContractRegistry::load(config.contracts_dir.as_deref())
            .context("loading tool contracts")?,
    );
    let descriptors = catalog::load_descriptors(config.descriptors_dir.as_deref())
        .context("loading descriptors")?;
    let configured = descriptors::validate(
        descriptors
            .iter()
            .map(|d| {
                (
                    format!("{}.json", d.freshness.descriptor_id),
                    serde_json::to_value(d).unwrap_or_default(),
                )
            })
            .collect(),
        &contracts,
        &config.skill_catalog.scheme,
    )
    .context("checking the descriptor set")?;
    let profiles = Arc::new(
        catalog::load_profiles(config.profiles_file.as_deref())
            .context("loading capability profiles")?,
    );
    let destructive = catalog::DestructiveRules::load(config.destructive_file.as_deref())
        .context("loading destructive-action rules")?;
    for entry in contracts.all() {
        if let Some(rule) = destructive.matching(&entry.contract.tool_id)
            && entry.contract.side_effect != mcp_shared::contract::SideEffectClass::Destructive
        {
            anyhow::bail!(
                "tool contract `{}` has a destructive name ({}) but is not side_effect `destructive`",
                entry.contract.tool_id,
                rule.reason
            );
        }
    }

    Ok((
        catalog::Catalog {
            contracts,
            profiles,
            destructive,
        },
        configured,
    ))
}

/// Opens the store (and the zone on PostgreSQL), loads enrolments, leases and the served
/// descriptor set, starts the supervised actors and composes [`App`].
async fn compose(
    config: RootConfig,
    catalog: catalog::Catalog,
    configured: Configured,
    admin_token: String,
) -> anyhow::Result<(Arc<App>, ractor::ActorRef<supervisor::Msg>)> {
    let url = config.database_url();
    let store = store::Store::open_with(&url, &config.storage)
        .await
        .with_context(|| format!("opening database {}", redact_url(&url)))?;

    let (master_key, created) = secrets::MasterKey::load_or_create(&config.master_key_path())
        .context("loading the master key")?;
    // Replicas (PostgreSQL): noted before leases, enrolments and descriptors are loaded, so
    // the change feed is applied from here on and nothing committed meanwhile is missed.
    let zone = replica::Zone::prepare(&config, &store, &master_key).await?;
    let enrolments = Arc::new(load_enrolments(&store, &master_key, created, &config).await?);
    // A published set (kept in the store) wins over the configured one while it still fits
    // the contracts.
    let descriptor_set =
        match descriptors::load_published(&store, &catalog.contracts, &config.skill_catalog.scheme)
            .await
            .context("loading the published descriptor set")?
        {
            Some(set) => set,
            None => descriptors::assemble(
                configured.0,
                configured.1,
                if config.descriptors_dir.is_some() {
                    descriptors::SetSource::Configured
                } else {
                    descriptors::SetSource::BuiltIn
                },
                None,
                None,
            ),
        };
    let leases = Arc::new(lease_manager::LeaseIndex::default());
    let targets = Arc::new(router::TargetDirectory::default());
    let links = Arc::new(router::Links::default());
    for e in enrolments.iter() {
        targets.insert(e.key().clone(), e.offline_descriptor());
    }
    let audit_head = Arc::new(tokio::sync::watch::Sender::new(0i64));
    let audit_flushed = Arc::new(audit::flusher::Flushed::for_store(&store));
    let audit_health = Arc::new(audit_health::AuditHealth::default());
    let descriptors = Arc::new(descriptor_cache::Args::new(descriptor_set));
    let metrics = Arc::new(metrics::Metrics::default());
    let running_calls = Arc::new(audit_writer::RunningCalls::default());
    let audit_commit_thread = audit_writer::CommitThread::default();
    let (sup, actors) = supervisor::start(supervisor::ChildArgs {
        leases: Arc::new(lease_manager::Args {
            store: store.clone(),
            index: leases.clone(),
        }),
        policy: Arc::new(policy::Args {
            contracts: catalog.contracts.clone(),
            profiles: catalog.profiles.clone(),
            targets: targets.clone(),
            enrolments: enrolments.clone(),
        }),
        descriptors: descriptors.clone(),
        audit: Arc::new(audit_writer::Args {
            store: store.clone(),
            batch_max: config.limits.audit_batch_max,
            commit_delay: std::time::Duration::from_millis(config.limits.audit_commit_delay_ms),
            running: running_calls.clone(),
            head: audit_head.clone(),
            flushed: audit_flushed.clone(),
            health: audit_health.clone(),
            replica_id: zone.as_ref().map(|z| z.replica_id.clone()),
            commits: metrics.audit_commits.clone(),
            rows: metrics.audit_rows.clone(),
            commit_latency: metrics.audit_commit_latency.clone(),
            commit_thread: audit_commit_thread.clone(),
        }),
        router: Arc::new(router::Args {
            targets: targets.clone(),
            links: links.clone(),
        }),
    })
    .await
    .context("starting actors")?;

    let redactor = redact::Redactor::new(&config.redaction.fields, &config.redaction.patterns);
    let rates = {
        let profiles: Vec<&str> = catalog
            .profiles
            .profiles
            .iter()
            .map(|p| p.name.as_str())
            .collect();
        let tools: Vec<&str> = catalog
            .contracts
            .all()
            .iter()
            .map(|c| c.contract.tool_id.as_str())
            .collect();
        crate::call::rates::Rates::new(&config.rates, &profiles, &tools).context("[rates]")?
    };
    let evidence_shapes = Arc::new(hubs::evidence::Shapes::new(&catalog.contracts));
    let oidc = match &config.operators.oidc {
        Some(c) => Some(Arc::new(
            crate::oidc::provider::Oidc::new(c).context("[operators.oidc]")?,
        )),
        None => None,
    };
    let app = Arc::new_cyclic(|me| App {
        me: me.clone(),
        store,
        actors: actors.clone(),
        catalog,
        descriptors,
        clock: Default::default(),
        publisher: Default::default(),
        leases,
        hubs: hubs::Hubs {
            targets,
            links,
            enrolments,
            last_frame: Default::default(),
            timeline: Default::default(),
            evidence: evidence_shapes,
            surface: tokio::sync::broadcast::channel(hubs::SURFACE_BACKLOG).0,
            pushes: Default::default(),
            heartbeat: std::time::Duration::from_millis(config.limits.heartbeat_interval_ms),
        },
        audit: Arc::new(audit::Trail {
            writer: actors.audit.clone(),
            commit_thread: audit_commit_thread,
            health: audit_health,
            head: audit_head,
            flushed: audit_flushed,
            reads: config.audit.reads,
            running: running_calls,
            redactor,
        }),
        limits: Default::default(),
        rates,
        refusals: Default::default(),
        dpop: crate::dpop::Verifier::new(
            master_key.derive_key("dpop-nonce"),
            config.oauth.dpop_nonce,
        ),
        breakglass: Default::default(),
        outboxes: Default::default(),
        metrics,
        admin_token,
        operators: Default::default(),
        log_key: Arc::new(audit::checkpoint::LogKey::derive(&master_key, &config.zone)),
        witness: Arc::new(audit::witness::Witness::new(
            audit::witness::cosign::Cosigner::derive(
                &master_key,
                &config.witness.name.clone().unwrap_or_else(|| {
                    audit::witness::cosign::Cosigner::default_name(&config.zone)
                }),
            ),
            &config.witness.logs,
        )),
        witnesses: Arc::new(audit::witness::submit::Board::new(&config.audit.witnesses)),
        master_key,
        tasks: Default::default(),
        logins: Default::default(),
        oidc,
        started_at: mcp_shared::time::now(),
        shutdown: CancellationToken::new(),
        zone,
        fleet: Default::default(),
        fleet_tools: Arc::new(crate::fleet::agents::AgentTools(me.clone())),
        config,
    });

    Ok((app, sup))
}

/// The MCP endpoint: the direct path first, rmcp's Streamable HTTP transport for the rest.
fn mcp_route(door: Arc<mcp::transport::Door>) -> axum::routing::MethodRouter {
    axum::routing::any(move |req: axum::extract::Request| {
        let door = door.clone();
        async move { door.serve(req).await }
    })
}

/// Opens every enrolment with the master key, encrypting signing keys still stored in clear
/// (rows from before encryption at rest). A master key created just now cannot open keys
/// sealed under another one: that stops start-up instead of locking every hub out.
async fn load_enrolments(
    store: &store::Store,
    master: &secrets::MasterKey,
    key_created: bool,
    config: &RootConfig,
) -> anyhow::Result<hubs::Enrolments> {
    let rows = store
        .load_targets()
        .await
        .context("loading enrolled targets")?;
    let mut previous: std::collections::HashMap<String, store::PreviousKey> = store
        .load_previous_keys()
        .await
        .context("loading rotated hub keys")?
        .into_iter()
        .collect();
    if key_created
        && (rows.iter().any(|r| !secrets::is_clear(&r.signing_key))
            || previous
                .values()
                .any(|p| !secrets::is_clear(&p.signing_key)))
    {
        anyhow::bail!(
            "the master key {} was just created, but the database holds signing keys sealed \
             under another master key; restore that key file (replicas must share it)",
            config.master_key_path().display()
        );
    }
    let enrolments = hubs::Enrolments::new();
    let mut migrated = 0usize;
    let now_ms = mcp_shared::time::unix_ms(mcp_shared::time::now());
    for row in rows {
        let id = row.target_id.clone();
        let prev = previous
            .remove(&id)
            .filter(|p| p.expires_at_ms > now_ms && !p.token_hash.is_empty());
        let clear = secrets::is_clear(&row.signing_key);
        let prev_clear = prev
            .as_ref()
            .is_some_and(|p| secrets::is_clear(&p.signing_key));
        match hubs::Enrolment::open(row, prev, master) {
            Ok(mut e) => {
                if clear {
                    let sealed = master
                        .seal_signing_key(&id, &e.signing_key)
                        .context("encrypting a stored signing key")?;
                    store
                        .set_target_signing_key(&id, &sealed)
                        .await
                        .context("encrypting a stored signing key")?;
                    e.row.signing_key = sealed;
                    migrated += 1;
                }
                if prev_clear && let Some(p) = &e.previous {
                    let sealed = master
                        .seal_signing_key(&id, &p.signing_key)
                        .context("encrypting a stored signing key")?;
                    store
                        .set_previous_signing_key(&id, &sealed)
                        .await
                        .context("encrypting a stored signing key")?;
                }
                enrolments.insert(id, e);
            }
            Err(e) => {
                tracing::error!(target_id = %id, error = %e, "stored signing key cannot be opened; the target cannot connect")
            }
        }
    }
    if migrated > 0 {
        tracing::info!(
            count = migrated,
            "encrypted signing keys that were stored in clear"
        );
    }
    Ok(enrolments)
}

/// Forgets per-lease bookkeeping of leases that can no longer authenticate (MCP session
/// bindings and concurrency slots), so long-running roots do not grow without bound.
async fn janitor(app: Arc<App>, door: Arc<mcp::transport::Door>, stop: CancellationToken) {
    let mut tick = tokio::time::interval(Duration::from_secs(30));
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        crate::call::tasks::sweep(&app).await;
        // A replica silent this long has stopped (a live one beats every second); its
        // tasks are ended here. Far above the registry's expiry: a busy replica is not gone.
        if let Some(zone) = &app.zone
            && let Some(live) = zone.replicas_heard_within(60_000).await
        {
            crate::call::tasks::recover(&app, Some(&live)).await;
        }
        let dead: Vec<String> = app
            .leases
            .list()
            .into_iter()
            .filter(|l| l.status != mcp_shared::LeaseStatus::Active)
            .map(|l| l.session_id)
            .collect();
        if dead.is_empty() {
            continue;
        }
        door.forget_leases(&dead);
        for id in &dead {
            app.limits.forget_prefix(&format!("lease:{id}"));
        }
        app.limits.sweep_idle();
        app.rates.sweep();
    }
}

/// A database URL without its password, for messages.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            let user = creds.split(':').next().unwrap_or("");
            format!("{}{}:***{}", &url[..s + 3], user, &url[at..])
        }
        _ => url.to_string(),
    }
}
