//! `[audit]` and `[witness]`: what leaves root of the audit trail (checkpoints, export sinks,
//! the witnesses checkpoints go to) and the logs this root witnesses.

use std::path::PathBuf;

use serde::Deserialize;

use super::error::ConfigError;

/// `[audit]`: what leaves root of the audit trail.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct AuditConfig {
    /// When a call without a side effect (descriptive and routed reads, listings, write
    /// previews) is answered: `written` (default), once its event is committed to the store,
    /// safe against root crashing but not against the machine losing power before the next
    /// flush (the last few milliseconds of read events may be lost, nothing else); `flushed`,
    /// once its event is on disk, as every call with an effect always is.
    pub reads: Durability,
    pub checkpoint: CheckpointConfig,
    /// `[[audit.sinks]]`: where the trail is shipped (`audit::sinks`).
    pub sinks: Vec<SinkConfig>,
    /// `[[audit.witnesses]]`: witnesses asked to cosign each checkpoint (`audit::witness`).
    pub witnesses: Vec<WitnessPeerConfig>,
    /// The bootstrap admin token's uses are gathered per address into one
    /// `admin.breakglass.use` event per this many seconds (1..=3600; default 60).
    pub breakglass_window_sec: Option<u64>,
}

impl AuditConfig {
    /// [`AuditConfig::breakglass_window_sec`], its default applied.
    pub fn breakglass_window(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.breakglass_window_sec.unwrap_or(60))
    }
}

/// When an appended event's caller is answered (see [`AuditConfig::reads`]).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// Committed: survives root crashing (in SQLite's WAL, or PostgreSQL's commit).
    #[default]
    Written,
    /// On disk: survives the machine losing power.
    Flushed,
}

/// A witness this zone's checkpoints are submitted to (C2SP `tlog-witness`).
#[derive(Debug, Clone, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WitnessPeerConfig {
    /// The witness's submission prefix (`<url>/add-checkpoint` is called).
    pub url: String,
    /// Its cosigner key, in signed-note verifier form with algorithm 0x04
    /// (`<name>+<key id>+<base64>`): what its cosignatures are checked with.
    pub key: String,
}

/// `[witness]`: root as a witness of other logs (another zone's trail), cosigning their
/// checkpoints at `/v1/root/witness/add-checkpoint` (`audit::witness`).
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct WitnessConfig {
    /// The cosigner's name (default `root-mcp-witness/<zone>`).
    pub name: Option<String>,
    /// The logs cosigned: each one's verifier key (its name is the log's origin).
    pub logs: Vec<String>,
}

/// One export sink (`[[audit.sinks]]`).
#[derive(Debug, Clone, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SinkConfig {
    /// Names the sink's cursor, metrics and log lines; unique, `[a-z0-9_-]`, 1..64.
    pub name: String,
    /// `http` (JSON lines or Splunk HEC over HTTP), `otlp` (OpenTelemetry logs over
    /// OTLP/HTTP) or `syslog` (RFC 5424 over TLS).
    pub kind: SinkKind,
    /// `http`: the URL events are POSTed to; `otlp`: the collector's base URL (`/v1/logs` is
    /// appended, as for traces).
    pub endpoint: String,
    /// `native` (each event as the chain hashed it, with its sequence number and hashes) or
    /// `ocsf` (the event mapped to an OCSF class; `audit::sinks::ocsf`).
    #[serde(default)]
    pub format: SinkFormat,
    /// `http` only: `json_lines` (one event per line) or `splunk_hec` (HEC's event shape,
    /// `Authorization: Splunk <token>`).
    #[serde(default)]
    pub shape: HttpShape,
    /// A file holding the token sent with each request (`http`: a bearer, or HEC's token).
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    /// `fail_open` (calls go on while the sink is behind; an alert) or `fail_closed` (new
    /// calls are refused once it is `max_lag` events behind, until it catches up).
    #[serde(default)]
    pub policy: SinkPolicy,
    /// Events the sink may fall behind before its policy applies.
    #[serde(default = "default_max_lag")]
    pub max_lag: u64,
    /// Most events per request.
    #[serde(default = "default_sink_batch")]
    pub batch: usize,
    /// `syslog` over `tls://`: the receiver's CA (PEM; default: the system's roots).
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// `syslog`: a client certificate (PEM) and its key, for receivers that ask for one.
    #[serde(default)]
    pub cert_file: Option<PathBuf>,
    #[serde(default)]
    /// `syslog`: the client certificate's key (PEM), with `cert_file`.
    pub key_file: Option<PathBuf>,
    /// `syslog`: the facility (0..=23; default 13, log audit).
    #[serde(default = "default_facility")]
    pub facility: u8,
    /// `syslog`: the SD-ID of each message's structured data (`name@<enterprise number>`;
    /// the default uses 32473, the number RFC 5612 reserves for examples).
    #[serde(default = "default_sd_id")]
    pub sd_id: String,
}

fn default_facility() -> u8 {
    13
}

fn default_sd_id() -> String {
    "mcp_root@32473".to_owned()
}

fn default_max_lag() -> u64 {
    10_000
}

fn default_sink_batch() -> usize {
    500
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum SinkKind {
    Http,
    Otlp,
    Syslog,
}

#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum SinkFormat {
    #[default]
    Native,
    Ocsf,
}

#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum HttpShape {
    #[default]
    JsonLines,
    SplunkHec,
}

#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum SinkPolicy {
    #[default]
    FailOpen,
    FailClosed,
}

impl SinkConfig {
    /// The endpoint and TLS settings fit the sink's kind.
    fn validate_transport(&self) -> Result<(), ConfigError> {
        let bad = |what: String| {
            Err(ConfigError::Invalid(format!(
                "audit.sinks `{}`: {what}",
                self.name
            )))
        };
        let e = &self.endpoint;
        match self.kind {
            SinkKind::Http | SinkKind::Otlp
                if !(e.starts_with("http://") || e.starts_with("https://")) =>
            {
                return bad(format!("endpoint must be an http(s) URL, not `{e}`"));
            }
            SinkKind::Syslog => {
                let hostport = e
                    .strip_prefix("tls://")
                    .or_else(|| e.strip_prefix("tcp://"));
                let port_ok = hostport
                    .and_then(|a| a.rsplit_once(':'))
                    .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok_and(|p| p > 0));
                if !port_ok {
                    return bad(format!(
                        "endpoint must be tls://host:port (or tcp://host:port), not `{e}`"
                    ));
                }
                if self.facility > 23 {
                    return bad(format!("facility must be 0..=23, not {}", self.facility));
                }
                let sd_ok = (1..=32).contains(&self.sd_id.len())
                    && self
                        .sd_id
                        .bytes()
                        .all(|b| b.is_ascii_graphic() && !matches!(b, b'=' | b']' | b'"'));
                if !sd_ok {
                    return bad(format!(
                        "sd_id `{}` must be 1..32 printable characters without = ] \"",
                        self.sd_id
                    ));
                }
            }
            _ => {}
        }
        if self.cert_file.is_some() != self.key_file.is_some() {
            return bad("cert_file and key_file go together".to_owned());
        }
        Ok(())
    }
}

/// `[audit.checkpoint]`: how often root signs a checkpoint of the trail's Merkle tree
/// (`audit::checkpoint`): once `every_events` events are past the last one, or after
/// `every_sec` seconds when any is.
#[derive(Debug, Clone, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct CheckpointConfig {
    /// Sign once this many events are past the last checkpoint.
    pub every_events: u64,
    /// Sign after this many seconds when any event is past the last checkpoint (1..=86400).
    pub every_sec: u64,
}

impl Default for CheckpointConfig {
    fn default() -> Self {
        CheckpointConfig {
            every_events: 1000,
            every_sec: 60,
        }
    }
}

impl AuditConfig {
    /// Sinks, witnesses (with `[witness]`) and checkpoint timing hold together.
    pub(super) fn validate(&self, witness: &WitnessConfig) -> Result<(), ConfigError> {
        if let Some(w) = self.breakglass_window_sec
            && !(1..=3600).contains(&w)
        {
            return Err(ConfigError::Invalid(format!(
                "audit.breakglass_window_sec {w} is not within 1..=3600"
            )));
        }
        let mut names = std::collections::HashSet::new();
        for sink in &self.sinks {
            let ok_name = !sink.name.is_empty()
                && sink.name.len() <= 64
                && sink
                    .name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
            if !ok_name || !names.insert(sink.name.clone()) {
                return Err(ConfigError::Invalid(format!(
                    "audit.sinks: name `{}` must be unique, 1..64 of [a-z0-9_-]",
                    sink.name
                )));
            }
            sink.validate_transport()?;
            if sink.batch == 0 || sink.batch > 10_000 || sink.max_lag == 0 {
                return Err(ConfigError::Invalid(format!(
                    "audit.sinks `{}`: batch must be 1..10000 and max_lag at least 1",
                    sink.name
                )));
            }
        }
        self.validate_witnesses(witness)?;
        let cp = &self.checkpoint;
        if cp.every_events == 0 || cp.every_sec == 0 || cp.every_sec > 86_400 {
            return Err(ConfigError::Invalid(
                "audit.checkpoint: every_events must be at least 1 and every_sec 1..86400".into(),
            ));
        }
        Ok(())
    }

    /// `[[audit.witnesses]]` and `[witness]`: URLs and keys that parse.
    fn validate_witnesses(&self, witness: &WitnessConfig) -> Result<(), ConfigError> {
        use crate::audit::witness::cosign::CosignatureVerifier;
        for w in &self.witnesses {
            if !(w.url.starts_with("http://") || w.url.starts_with("https://")) {
                return Err(ConfigError::Invalid(format!(
                    "audit.witnesses: url must be an http(s) URL, not `{}`",
                    w.url
                )));
            }
            CosignatureVerifier::new(&w.key).map_err(|e| {
                ConfigError::Invalid(format!("audit.witnesses: key `{}`: {e}", w.key))
            })?;
        }
        if let Some(name) = &witness.name
            && !signed_note::is_key_name_valid(name)
        {
            return Err(ConfigError::Invalid(format!(
                "witness.name `{name}` must not be empty nor hold spaces or `+`"
            )));
        }
        for key in &witness.logs {
            signed_note::StandardVerifier::new(key)
                .map_err(|e| ConfigError::Invalid(format!("witness.logs: key `{key}`: {e}")))?;
        }
        Ok(())
    }
}
