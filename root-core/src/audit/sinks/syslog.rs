//! The syslog sink: each event one RFC 5424 message over TLS (RFC 5425: octet-counted frames,
//! `LEN SP MSG`, on one long-lived connection), as rsyslog's `imtcp` with `gtls`, syslog-ng
//! and the SIEMs' syslog inputs receive them. `endpoint` is `tls://host:port` (or `tcp://` for
//! a receiver on the same machine); the receiver's certificate is checked against `ca_file`
//! (default: the system's roots), and `cert_file`/`key_file` present a client certificate to
//! receivers that ask for one.
//!
//! A message: `<PRI>1 TIMESTAMP HOSTNAME mcp-root PROCID audit [SD] MSG`. PRI is the
//! facility (`facility`, default 13, log audit) with severity 6 (informational) for an `ok`
//! event, 4 (warning) otherwise; TIMESTAMP the event's start; the structured data
//! `[<sd_id> event_id="…" seq="…" tool_id="…" status="…" zone="…"]` carries what a receiver
//! filters and deduplicates on; MSG is the record in the sink's format.
//!
//! Syslog has no acknowledgements: a batch counts as delivered once it is written and flushed.
//! Before each batch the connection is checked for a close from the receiver (a restarted
//! rsyslog), and a failed write sends the whole batch again on a new connection.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Mutex;

use super::record::{Head, Shipped, SinkError};
use crate::config::{SinkConfig, SinkFormat};

/// How long connecting (with the TLS handshake) or writing one batch may take.
const TIMEOUT: Duration = Duration::from_secs(30);

trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

pub(crate) struct SyslogSink {
    addr: String,
    tls: Option<(tokio_rustls::TlsConnector, ServerName<'static>)>,
    format: SinkFormat,
    facility: u8,
    sd_id: String,
    hostname: String,
    zone: String,
    conn: Mutex<Option<Box<dyn Stream>>>,
}

impl SyslogSink {
    pub(crate) fn new(cfg: &SinkConfig, zone: &str) -> Result<SyslogSink, SinkError> {
        let (tls, addr) = match cfg.endpoint.split_once("://") {
            Some(("tls", a)) => (true, a),
            Some(("tcp", a)) => (false, a),
            _ => {
                return Err(SinkError::Tls(format!(
                    "endpoint `{}` is not tls://host:port or tcp://host:port",
                    cfg.endpoint
                )));
            }
        };
        let tls = if tls {
            let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
            let host = host.trim_start_matches('[').trim_end_matches(']');
            let name = ServerName::try_from(host.to_owned())
                .map_err(|e| SinkError::Tls(format!("server name `{host}`: {e}")))?;
            Some((tls_connector(cfg)?, name))
        } else {
            None
        };
        Ok(SyslogSink {
            addr: addr.to_owned(),
            tls,
            format: cfg.format,
            facility: cfg.facility,
            sd_id: cfg.sd_id.clone(),
            hostname: hostname(),
            zone: zone.to_owned(),
            conn: Mutex::new(None),
        })
    }

    async fn connect(&self) -> Result<Box<dyn Stream>, SinkError> {
        let unreachable = |e: std::io::Error| SinkError::Unreachable(format!("{}: {e}", self.addr));
        let tcp = TcpStream::connect(&self.addr).await.map_err(unreachable)?;
        let _ = tcp.set_nodelay(true);
        Ok(match &self.tls {
            None => Box::new(tcp),
            Some((connector, name)) => Box::new(
                connector
                    .connect(name.clone(), tcp)
                    .await
                    .map_err(|e| SinkError::Tls(format!("handshake with {}: {e}", self.addr)))?,
            ),
        })
    }

    /// One message, framed (`LEN SP MSG`), appended to `out`.
    fn frame(&self, s: &Shipped, out: &mut Vec<u8>) -> Result<(), SinkError> {
        let head = s.head();
        let ok = head.status.as_deref() == Some("ok");
        let pri = u16::from(self.facility) * 8 + if ok { 6 } else { 4 };
        let mut msg = format!(
            "<{pri}>1 {} {} mcp-root {} audit [{}",
            timestamp(&head),
            self.hostname,
            std::process::id(),
            self.sd_id
        );
        for (k, v) in [
            ("event_id", Head::text(&head.event_id)),
            ("seq", &s.seq.to_string()),
            ("tool_id", Head::text(&head.tool_id)),
            ("status", Head::text(&head.status)),
            ("zone", &self.zone),
        ] {
            let _ = write!(msg, " {k}=\"{}\"", sd_escape(v));
        }
        msg.push_str("] ");
        let mut msg = msg.into_bytes();
        s.write(self.format, Some(&head), &mut msg)?;
        let _ = write!(Counted(out), "{} ", msg.len());
        out.extend_from_slice(&msg);
        Ok(())
    }

    pub(crate) async fn send(&self, batch: &[Shipped]) -> Result<(), SinkError> {
        let mut frames = Vec::with_capacity(batch.len() * 1200);
        for s in batch {
            self.frame(s, &mut frames)?;
        }
        let mut conn = self.conn.lock().await;
        if let Some(c) = conn.as_mut()
            && closed(c.as_mut()).await
        {
            *conn = None;
        }
        let c = match conn.as_mut() {
            Some(c) => c,
            None => conn.insert(
                tokio::time::timeout(TIMEOUT, self.connect())
                    .await
                    .map_err(|_| {
                        SinkError::Unreachable(format!("{}: connect timed out", self.addr))
                    })??,
            ),
        };
        let wrote = tokio::time::timeout(TIMEOUT, async {
            c.write_all(&frames).await?;
            c.flush().await
        })
        .await;
        match wrote {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => {
                *conn = None;
                Err(SinkError::Unreachable(format!("{}: {e}", self.addr)))
            }
            Err(_) => {
                *conn = None;
                Err(SinkError::Unreachable(format!(
                    "{}: write timed out",
                    self.addr
                )))
            }
        }
    }
}

/// Appends formatted text to a byte buffer.
struct Counted<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for Counted<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// Whether the receiver has closed the connection (or broken it): a read that would block
/// means it is open; syslog receivers never send.
async fn closed(c: &mut dyn Stream) -> bool {
    let mut buf = [0u8; 64];
    match tokio::time::timeout(Duration::from_millis(1), c.read(&mut buf)).await {
        Err(_) => false,
        Ok(Ok(0)) | Ok(Err(_)) => true,
        Ok(Ok(_)) => false,
    }
}

/// The event's start as RFC 5424 wants it (UTC, at most six fractional digits), or `-`.
fn timestamp(head: &Head<'_>) -> String {
    let Some(t) = head
        .started_at
        .as_deref()
        .and_then(|t| mcp_shared::time::parse(t).ok())
    else {
        return "-".to_owned();
    };
    let t = t.to_offset(time::UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.microsecond()
    )
}

/// A structured-data parameter value: `"`, `\` and `]` escaped (RFC 5424 §6.3.3).
fn sd_escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        if matches!(c, '"' | '\\' | ']') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// This machine's name as HOSTNAME wants it (printable ASCII, no spaces), or `-`.
fn hostname() -> String {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let name = name.trim();
    if name.is_empty() || name.len() > 255 || !name.bytes().all(|b| b.is_ascii_graphic()) {
        "-".to_owned()
    } else {
        name.to_owned()
    }
}

/// The TLS client: trust in `ca_file` (or the system's roots), a client certificate if
/// configured.
fn tls_connector(cfg: &SinkConfig) -> Result<tokio_rustls::TlsConnector, SinkError> {
    let mut roots = rustls::RootCertStore::empty();
    match &cfg.ca_file {
        Some(path) => {
            for cert in certs(path)? {
                roots
                    .add(cert)
                    .map_err(|e| SinkError::Tls(format!("{}: {e}", path.display())))?;
            }
        }
        None => {
            for cert in rustls_native_certs::load_native_certs().certs {
                let _ = roots.add(cert);
            }
        }
    }
    let builder = rustls::ClientConfig::builder().with_root_certificates(roots);
    let config = match (&cfg.cert_file, &cfg.key_file) {
        (Some(cert), Some(key)) => {
            let pem = crate::secrets::read_private_file(key)
                .map_err(|e| SinkError::Tls(format!("{}: {e}", key.display())))?;
            let key = PrivateKeyDer::from_pem_slice(pem.as_bytes())
                .map_err(|_| SinkError::Tls(format!("{}: no private key", key.display())))?;
            builder
                .with_client_auth_cert(certs(cert)?, key)
                .map_err(|e| SinkError::Tls(format!("client certificate: {e}")))?
        }
        (None, None) => builder.with_no_client_auth(),
        _ => {
            return Err(SinkError::Tls(
                "cert_file and key_file go together".to_owned(),
            ));
        }
    };
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

/// The certificates of PEM file `path` (at least one).
fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, SinkError> {
    let certs: Vec<_> = CertificateDer::pem_file_iter(path)
        .map_err(|e| SinkError::Tls(format!("{}: {e}", path.display())))?
        .collect::<Result<_, _>>()
        .map_err(|e| SinkError::Tls(format!("{}: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(SinkError::Tls(format!(
            "{}: no certificate",
            path.display()
        )));
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_is_rfc_5424_with_its_event_in_structured_data_and_an_octet_count() {
        let cfg: SinkConfig =
            toml::from_str("name = \"s\"\nkind = \"syslog\"\nendpoint = \"tcp://127.0.0.1:1\"\n")
                .unwrap();
        let sink = SyslogSink::new(&cfg, "zone-a").unwrap();
        let stored = r#"{"event_id":"e-1","started_at":"2026-12-06T12:00:00.123456789Z","status":"denied","tool_id":"hub.x\"]"}"#;
        let s = Shipped::new(4, stored.to_owned(), "p".into(), "h".into());
        let mut out = Vec::new();
        sink.frame(&s, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let (len, msg) = text.split_once(' ').unwrap();
        assert_eq!(len.parse::<usize>().unwrap(), msg.len());
        let pid = std::process::id();
        let expect = format!(
            "<108>1 2026-12-06T12:00:00.123456Z {} mcp-root {pid} audit [mcp_root@32473 event_id=\"e-1\" seq=\"4\" tool_id=\"hub.x\\\"\\]\" status=\"denied\" zone=\"zone-a\"] {{\"seq\":4,",
            sink.hostname
        );
        assert!(msg.starts_with(&expect), "{msg}");
        assert!(msg.ends_with(&format!("\"event\":{stored}}}")), "{msg}");
    }
}
