//! The `mcp-root admin` command line: its arguments and subcommands (clap), one enum per
//! area; each area's module runs its own.

use std::path::PathBuf;

use clap::{Args, Subcommand};

#[derive(Args, Debug)]
pub(crate) struct AdminArgs {
    /// Root base URL.
    #[arg(long, env = "MCP_ROOT_URL", default_value = "http://127.0.0.1:8700")]
    pub(crate) root_url: String,
    /// Admin token; default: read from <data-dir>/admin.token.
    #[arg(long, env = "MCP_ROOT_ADMIN_TOKEN", hide_env_values = true)]
    pub(crate) admin_token: Option<String>,
    /// The credential `mcp-root login` keeps (used when no token is given); default
    /// `$XDG_CONFIG_HOME/mcp-root/credential`.
    #[arg(long, env = "MCP_ROOT_CREDENTIAL_FILE")]
    pub(crate) credential_file: Option<PathBuf>,
    /// Where to find admin.token when no token is given and no one signed in.
    #[arg(long, default_value = "./data")]
    pub(crate) data_dir: PathBuf,
    /// PEM CA bundle to verify an https root with (instead of the system's roots).
    #[arg(long, env = "MCP_ROOT_CA_FILE")]
    pub(crate) ca_file: Option<PathBuf>,
    #[command(subcommand)]
    pub(crate) command: AdminCommand,
}

/// Which page of a fleet-sized list to show.
#[derive(Args, Debug, Clone)]
pub(crate) struct PageArgs {
    /// Items per page (1..=1000).
    #[arg(long, default_value_t = 100)]
    pub(crate) limit: usize,
    /// Start after this cursor (a page's `next_cursor`).
    #[arg(long, conflicts_with = "all")]
    pub(crate) cursor: Option<String>,
    /// Every page, one after the other.
    #[arg(long)]
    pub(crate) all: bool,
}

#[derive(Subcommand, Debug)]
pub(crate) enum AdminCommand {
    /// MCP session leases.
    #[command(subcommand)]
    Lease(LeaseCommand),
    /// The audit trail.
    #[command(subcommand)]
    Audit(AuditCommand),
    /// Managed targets and their hubs.
    #[command(subcommand)]
    Hub(HubCommand),
    /// A skill on a target (through root to the hub; audited).
    Skill {
        #[command(subcommand)]
        command: SkillCmd,
    },
    /// The descriptor set root serves.
    #[command(subcommand)]
    Descriptors(AdminDescriptorsCommand),
    /// Operator approvals of writes that need one (NLU changes).
    #[command(subcommand)]
    Approvals(ApprovalsCommand),
    /// The zone's root replicas, their hubs and health.
    #[command(subcommand)]
    Replicas(ReplicasCommand),
    /// Fleet runs: one read on every target a selector names, under a rollout plan.
    #[command(subcommand)]
    Fleet(FleetCommand),
    /// Named operators, each with a credential of their own (every operator action is an
    /// audit event naming them; the admin token file is operator `admin`).
    #[command(subcommand)]
    Operator(OperatorCommand),
}

#[derive(Subcommand, Debug)]
pub(crate) enum OperatorCommand {
    /// Add an operator; their credential is shown once (or written 0600 to --token-file).
    /// They use it as the admin CLI's --admin-token (MCP_ROOT_ADMIN_TOKEN) or to log in to
    /// the console.
    Add {
        name: String,
        /// A role they hold (repeat for several): viewer, auditor, approver, operator, admin.
        /// Default viewer. No more than yours.
        #[arg(long = "role", value_name = "ROLE")]
        roles: Vec<crate::roles::Role>,
        /// A capability profile they may issue leases for (repeat; `*` for all). Default
        /// none. No more than yours.
        #[arg(long = "profile", value_name = "PROFILE")]
        profiles: Vec<String>,
        #[arg(long)]
        token_file: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Every operator, active or revoked, with who added and revoked them.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Revoke an operator: their credential and console sessions stop working at once, and so
    /// do the OAuth sign-ins they approved. Leases they issued keep their deadlines unless
    /// --cascade is given.
    Revoke {
        name: String,
        /// Also end every lease the operator issued, with everything those leases handed on.
        #[arg(long)]
        cascade: bool,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub(crate) enum ReplicasCommand {
    /// Every registered replica: health, heartbeat age, the hubs it holds.
    List {
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub(crate) enum ApprovalsCommand {
    /// Approvals, newest first (default: pending).
    List {
        /// pending, approved, rejected, applied, failed, expired or all.
        #[arg(long, default_value = "pending")]
        status: String,
        #[arg(long)]
        json: bool,
    },
    /// One approval with its arguments and expected effect (the diff).
    Show {
        approval_id: String,
        #[arg(long)]
        json: bool,
    },
    /// Approve: the write's next execute with its confirmation token applies it.
    Approve {
        approval_id: String,
        #[arg(long)]
        reason: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Reject: the write never applies.
    Reject {
        approval_id: String,
        #[arg(long)]
        reason: Option<String>,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub(crate) enum AdminDescriptorsCommand {
    /// Validate an artifact directory as a whole set and serve it instead of the current one
    /// (kept across restarts); a refused set changes nothing.
    Publish {
        /// Directory of `<descriptor_id>.json` artifacts (`mcp-root descriptors build` output).
        artifact_dir: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// The served descriptors with their freshness, and where the set came from.
    List {
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub(crate) enum HubCommand {
    /// Enrol a target; prints the hub token once (root keeps only its hash).
    Enroll {
        #[arg(long)]
        target: String,
        #[arg(long)]
        environment: String,
        #[arg(long)]
        subnet: Option<String>,
        #[arg(long)]
        zone: Option<String>,
        /// A label, KEY=VALUE (repeat for several).
        #[arg(long = "label", value_parser = label_arg)]
        labels: Vec<(String, String)>,
        #[arg(long)]
        json: bool,
    },
    /// Targets with status, last seen, descriptor, skills and published capabilities, a page
    /// at a time (by target id), filtered.
    List {
        #[arg(long)]
        environment: Option<String>,
        #[arg(long)]
        subnet: Option<String>,
        #[arg(long)]
        zone: Option<String>,
        /// online, degraded or offline.
        #[arg(long)]
        status: Option<String>,
        /// enabled, closed, disabled, uninstalled or owner_disabled.
        #[arg(long)]
        skill: Option<String>,
        /// Part of the target id.
        #[arg(long = "match")]
        matching: Option<String>,
        /// active, cordoned or retired.
        #[arg(long)]
        lifecycle: Option<String>,
        /// Has the label KEY, or KEY=VALUE.
        #[arg(long)]
        label: Option<String>,
        /// A selector, e.g. `env=test,subnet=subnet-a,label:role=web` (see the README).
        #[arg(long)]
        selector: Option<String>,
        #[command(flatten)]
        page: PageArgs,
        #[arg(long)]
        json: bool,
    },
    /// Issue a new hub token and signing key (the token is shown once); the previous ones keep
    /// working for the grace period, then a hub still using them is refused.
    RotateKey {
        #[arg(long)]
        target: String,
        /// Seconds the previous token and key stay valid (default 600, at most a week).
        #[arg(long)]
        grace_sec: Option<u64>,
        /// Write the new token to this file (mode 0600; e.g. the hub's token file, which the
        /// hub watches) instead of printing it.
        #[arg(long)]
        token_file: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Set or remove a target's labels.
    Label {
        #[arg(long)]
        target: String,
        /// KEY=VALUE to add or change (repeat for several).
        #[arg(long = "set", value_parser = label_arg)]
        set: Vec<(String, String)>,
        /// KEY to remove (repeat for several).
        #[arg(long = "remove")]
        remove: Vec<String>,
        #[arg(long)]
        json: bool,
    },
    /// Cordon a target: no new calls (calls in flight finish) until it is uncordoned.
    Cordon(LifecycleArgs),
    /// Uncordon a cordoned target: it takes calls again.
    Uncordon(LifecycleArgs),
    /// Retire a target for good: its hub is disconnected and its token refused, leases on it
    /// are refused, its history is kept, and its id is never enrolled again.
    Retire(LifecycleArgs),
    /// Move a target to another environment and/or subnet: policy judges it by the new
    /// environment at once, and every lease bound to it ends.
    Move {
        #[arg(long)]
        target: String,
        #[arg(long)]
        environment: Option<String>,
        #[arg(long)]
        subnet: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Deny tools on one target, whatever leases and its hub allow (replaces what was denied;
    /// with neither option, nothing is denied any more).
    Narrow {
        #[arg(long)]
        target: String,
        /// Deny every write on the target.
        #[arg(long)]
        read_only: bool,
        /// A tool id to deny (repeat for several).
        #[arg(long = "deny")]
        deny: Vec<String>,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args, Debug)]
pub(crate) struct LifecycleArgs {
    #[arg(long)]
    pub(crate) target: String,
    /// Why (kept with the state and in the audit trail).
    #[arg(long)]
    pub(crate) reason: Option<String>,
    #[arg(long)]
    pub(crate) json: bool,
}

/// A label argument without `=`.
#[derive(Debug, thiserror::Error)]
#[error("a label is KEY=VALUE, not `{0}`")]
pub(crate) struct LabelArgError(String);

/// A `KEY=VALUE` label argument.
fn label_arg(s: &str) -> Result<(String, String), LabelArgError> {
    match s.split_once('=') {
        Some((k, v)) => Ok((k.to_owned(), v.to_owned())),
        None => Err(LabelArgError(s.to_owned())),
    }
}

#[derive(Args, Debug)]
pub(crate) struct SkillArgs {
    #[arg(long)]
    pub(crate) target: String,
    #[arg(long, default_value = "infra_access_skill")]
    pub(crate) skill: String,
    #[arg(long)]
    pub(crate) json: bool,
}

/// Root's desired state of a target's skill: in force at root at once (on every replica),
/// stored, and pushed to the hub now or when it reconnects. Each command is audited.
#[derive(Subcommand, Debug)]
pub(crate) enum SkillCmd {
    /// Install the skill on the target (its tools become callable once it is enabled too).
    Install(SkillArgs),
    /// Enable the skill: its tools are callable (unless the hub's owner switched it off).
    Enable(SkillArgs),
    /// Disable the skill: every tool of the target's skill answers `skill_disabled`, whether
    /// its hub is connected or not.
    Disable(SkillArgs),
    /// Uninstall the skill from the target: as disabled, until installed again.
    Uninstall(SkillArgs),
    /// Root's desired state, the hub's report (live when connected) and whether it is callable.
    Status(SkillArgs),
}

#[derive(Subcommand, Debug)]
pub(crate) enum LeaseCommand {
    /// Create a lease; its bearer is printed once. `--selector` instead of `--target` binds
    /// a fleet lease: the targets the selector names, through fleet tools only.
    Create {
        #[arg(
            long,
            required_unless_present = "selector",
            conflicts_with = "selector"
        )]
        target: Option<String>,
        /// A target selector (`env=test,label:role=web`): a fleet lease.
        #[arg(long)]
        selector: Option<String>,
        #[arg(long)]
        profile: String,
        /// Lifetime in seconds.
        #[arg(long, default_value_t = 3600)]
        ttl: u64,
        #[arg(long)]
        audience: Option<String>,
        #[arg(long)]
        subnet: Option<String>,
        #[arg(long)]
        zone: Option<String>,
        /// Its own calls-per-second rate (`20/s`, `30/min`, `500/h`), over its profile's.
        #[arg(long)]
        rate: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// List leases, newest first, a page at a time, filtered (expired ones show as expired).
    List {
        /// active, expired or revoked.
        #[arg(long)]
        status: Option<String>,
        #[arg(long)]
        target: Option<String>,
        #[arg(long)]
        subnet: Option<String>,
        #[arg(long)]
        profile: Option<String>,
        #[command(flatten)]
        page: PageArgs,
        #[arg(long)]
        json: bool,
    },
    /// Show one lease.
    Get {
        session_id: String,
        #[arg(long)]
        json: bool,
    },
    /// Show one lease with where its authority came from (its ancestors, the operator and the
    /// OAuth grant at the top) and every lease it handed on.
    Show {
        session_id: String,
        #[arg(long)]
        json: bool,
    },
    /// Revoke a lease and every lease it handed on; in force from the next request.
    Revoke {
        session_id: String,
        #[arg(long)]
        json: bool,
    },
    /// Issue a new bearer for a lease and kill the old one.
    Rotate {
        session_id: String,
        #[arg(long)]
        json: bool,
    },
    /// Issue a run profile for a lease: a run credential (bound to the profile's tools and
    /// expiry, revoked with the lease) and the signed document naming it. The document goes
    /// to --output (or standard output), the credential's bearer to --token-file (0600) or
    /// is printed once.
    RunProfile {
        session_id: String,
        /// Seconds the run lives, 1..=600 (never past the lease's deadline).
        #[arg(long)]
        ttl_sec: Option<u64>,
        /// Only these tools (comma-separated) of those the lease may call.
        #[arg(long, value_delimiter = ',')]
        tools: Vec<String>,
        #[arg(long, short)]
        output: Option<PathBuf>,
        #[arg(long)]
        token_file: Option<PathBuf>,
    },
    /// Verify a run profile (`mcp-root admin lease run-profile`) against root's signing key:
    /// prints valid, or invalid with the reason (tampered, unsigned, unknown key, expired,
    /// ...) and exits 4.
    VerifyProfile {
        /// The run profile JSON; `-` reads standard input.
        file: PathBuf,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub(crate) enum AuditCommand {
    /// The newest events.
    Tail {
        #[arg(long, default_value_t = 20)]
        limit: i64,
        #[arg(long)]
        json: bool,
    },
    /// Every event (since T, RFC 3339) as JSON Lines, oldest first; of one trace, or of one
    /// fleet run (its own events, its commands and every target's calls).
    Export {
        #[arg(long)]
        since: Option<String>,
        #[arg(long, conflicts_with = "run")]
        trace: Option<String>,
        /// A fleet run's id.
        #[arg(long)]
        run: Option<String>,
        /// Write to this file instead of standard output.
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// The whole chain as it was hashed (`{"seq", "prev_hash", "hash", "event"}` per
        /// line, from the first event): what `mcp-root audit verify-export` checks offline.
        #[arg(long, conflicts_with_all = ["since", "trace", "run"])]
        verifiable: bool,
        #[arg(long)]
        json: bool,
    },
    /// Verify the hash chain; names the first broken link.
    Verify {
        #[arg(long)]
        json: bool,
    },
    /// The zone's log key: the signed-note verifier key its checkpoints verify with.
    Key {
        #[arg(long)]
        json: bool,
    },
    /// The newest signed checkpoints of the trail's Merkle tree.
    Checkpoints {
        #[arg(long, default_value_t = 10)]
        limit: i64,
        #[arg(long)]
        json: bool,
    },
    /// An event's inclusion proof against a checkpoint (the newest by default), checked here
    /// with the zone's log key before it is printed.
    Prove {
        event_id: String,
        /// The checkpoint's tree size.
        #[arg(long)]
        size: Option<u64>,
        #[arg(long)]
        json: bool,
    },
}

/// What a fleet command runs and how: the selector, the tool and its arguments, the plan.
#[derive(clap::Args, Debug)]
pub(crate) struct FleetRunArgs {
    #[arg(long)]
    pub(crate) selector: String,
    #[arg(long)]
    pub(crate) tool: String,
    /// The tool's arguments (a JSON object).
    #[arg(long)]
    pub(crate) arguments: Option<String>,
    /// A write's capability profile (the narrowest granting the tool by default).
    #[arg(long)]
    pub(crate) capability_profile: Option<String>,
    /// Canaries run first, on their own (0 by default). The plan's options are sent only
    /// when given: a confirmed write runs the plan it was previewed with, and a different one
    /// is refused.
    #[arg(long)]
    pub(crate) canary: Option<usize>,
    /// Targets at once after the canaries: a count or a percentage (20%); 10 by default.
    #[arg(long)]
    pub(crate) max_concurrency: Option<String>,
    /// Failures before no new target starts: a count or a percentage (2%); 0 by default.
    #[arg(long)]
    pub(crate) max_errors: Option<String>,
    /// A pause after the canaries (0 by default).
    #[arg(long)]
    pub(crate) pause_after_canary_ms: Option<u64>,
}

#[derive(Subcommand, Debug)]
pub(crate) enum FleetCommand {
    /// Preview a write: each target's dry run (its expected effect, or why it cannot take
    /// part) and one confirmation token for the whole set, for `fleet run --confirm`.
    Preview {
        #[command(flatten)]
        run: FleetRunArgs,
        #[arg(long)]
        json: bool,
    },
    /// Start a run: TOOL on every target SELECTOR names (frozen at start), canaries first,
    /// then a sliding window; once more targets fail than --max-errors allows, no new one
    /// starts. A write needs its preview's token (--confirm) and the same selector, tool and
    /// arguments. With --wait, a progress line until it ends, then its report.
    Run {
        #[command(flatten)]
        run: FleetRunArgs,
        /// A write's confirmation token, from `fleet preview`.
        #[arg(long)]
        confirm: Option<String>,
        #[arg(long)]
        wait: bool,
        #[arg(long)]
        json: bool,
    },
    /// The newest runs.
    List {
        #[arg(long)]
        json: bool,
    },
    /// A run: its state, counts, outcomes grouped and a line per target.
    Status {
        run: String,
        #[arg(long)]
        json: bool,
    },
    /// One target's part in a run, with its full result.
    Target {
        run: String,
        target: String,
    },
    /// No new target starts; the ones running finish.
    Pause {
        run: String,
    },
    Resume {
        run: String,
    },
    /// For good: targets not started are cancelled.
    Cancel {
        run: String,
    },
}
