//! OpenTelemetry traces for both daemons: off unless configured, exported over OTLP/HTTP
//! (protobuf) by a batch processor on a thread of its own.
//!
//! - On when `[telemetry] otlp_endpoint` is set or the standard `OTEL_EXPORTER_OTLP_ENDPOINT`
//!   / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is, unless `OTEL_SDK_DISABLED=true` or
//!   `OTEL_TRACES_EXPORTER=none` ([`endpoint`]). `OTEL_SERVICE_NAME`,
//!   `OTEL_RESOURCE_ATTRIBUTES` and `OTEL_BSP_*` apply as the SDK reads them.
//! - Only spans of the target [`TARGET`] are exported, and they are `TRACE` spans: while
//!   telemetry is off the daemons' filters disable them at their call sites (no cost); on,
//!   [`Otel::directive`] enables them. [`span!`](crate::otel_span) makes one.
//! - A governed call's trace id is its audit event's `trace_id`: continued from the request's
//!   W3C `traceparent` ([`continue_from`]), else the one its span was given ([`trace_id_of`]).
//!   Root passes [`traceparent_of`] its route span to the hub in the signed call's envelope.

use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState, TracerProvider as _,
};
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::registry::LookupSpan;

/// The tracing target of every exported span.
pub const TARGET: &str = "mcp_otel";

static ON: AtomicBool = AtomicBool::new(false);

/// Whether this process exports traces.
pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// A `TRACE` span of [`TARGET`] (exported while telemetry is on; disabled otherwise):
/// `otel_span!("name", field = value, ...)`.
#[macro_export]
macro_rules! otel_span {
    ($name:literal $(, $($fields:tt)*)?) => {
        ::tracing::trace_span!(target: "mcp_otel", $name $(, $($fields)*)?)
    };
}

/// The OTLP endpoint base to export to, if telemetry is on: `configured` (from the daemon's
/// `[telemetry]`), else the standard environment variables (whose values the exporter reads
/// itself). `None`: off.
pub fn endpoint(configured: Option<&str>) -> Option<Endpoint> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    if env("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
        || env("OTEL_TRACES_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("none"))
    {
        return None;
    }
    match configured.filter(|c| !c.trim().is_empty()) {
        Some(base) => Some(Endpoint::Configured(format!(
            "{}/v1/traces",
            base.trim_end_matches('/')
        ))),
        None => (env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some()
            || env("OTEL_EXPORTER_OTLP_ENDPOINT").is_some())
        .then_some(Endpoint::FromEnvironment),
    }
}

/// Where spans go (see [`endpoint`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// The traces URL from the daemon's configuration.
    Configured(String),
    /// The exporter reads `OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT`.
    FromEnvironment,
}

/// A running exporter; [`Otel::shutdown`] flushes what is buffered.
pub struct Otel {
    provider: SdkTracerProvider,
}

#[derive(Debug, thiserror::Error)]
#[error("OpenTelemetry exporter: {0}")]
pub struct OtelError(String);

impl Otel {
    /// Starts exporting to `endpoint` as `service` (unless `OTEL_SERVICE_NAME` names it).
    pub fn start(endpoint: &Endpoint, service: &'static str) -> Result<Otel, OtelError> {
        let builder = opentelemetry_otlp::SpanExporter::builder().with_http();
        let builder = match endpoint {
            Endpoint::Configured(url) => builder.with_endpoint(url.clone()),
            Endpoint::FromEnvironment => builder,
        };
        let exporter = builder.build().map_err(|e| OtelError(e.to_string()))?;
        let mut resource = opentelemetry_sdk::Resource::builder();
        if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
            resource = resource.with_service_name(service);
        }
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource.build())
            .build();
        ON.store(true, Ordering::Relaxed);
        Ok(Otel { provider })
    }

    /// The layer that turns [`TARGET`]'s spans into exported ones.
    pub fn layer<S>(&self) -> impl Layer<S> + Send + Sync + 'static
    where
        S: tracing::Subscriber + for<'a> LookupSpan<'a> + Send + Sync + 'static,
    {
        tracing_opentelemetry::layer()
            .with_tracer(self.provider.tracer("mcp"))
            .with_filter(Targets::new().with_target(TARGET, tracing::Level::TRACE))
    }

    /// The filter directive that enables [`TARGET`]'s spans (the daemons' `EnvFilter`
    /// disables `TRACE` otherwise).
    pub fn directive() -> &'static str {
        "mcp_otel=trace"
    }

    /// Exports what is buffered and stops.
    pub fn shutdown(self) {
        if let Err(e) = self.provider.shutdown() {
            eprintln!("OpenTelemetry shutdown: {e}");
        }
        ON.store(false, Ordering::Relaxed);
    }
}

/// The trace id and parent span id of a W3C `traceparent` (`00-<32 hex>-<16 hex>-<2 hex>`),
/// if it is one (lowercase hex, neither id all zeros).
pub fn parse_traceparent(traceparent: &str) -> Option<(TraceId, SpanId, TraceFlags)> {
    let parts: Vec<&str> = traceparent.trim().split('-').collect();
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    if parts.len() < 4 || !hex(parts[0], 2) || parts[0] == "ff" {
        return None;
    }
    if !hex(parts[1], 32) || !hex(parts[2], 16) || !hex(parts[3], 2) {
        return None;
    }
    let trace = TraceId::from_hex(&parts[1].to_ascii_lowercase()).ok()?;
    let span = SpanId::from_hex(&parts[2].to_ascii_lowercase()).ok()?;
    let flags = TraceFlags::new(u8::from_str_radix(parts[3], 16).ok()?);
    (trace != TraceId::INVALID && span != SpanId::INVALID).then_some((trace, span, flags))
}

/// Makes `span` continue the trace of `traceparent` (a remote parent). Whether it did.
pub fn continue_from(span: &tracing::Span, traceparent: Option<&str>) -> bool {
    let Some((trace, parent, flags)) = traceparent.and_then(parse_traceparent) else {
        return false;
    };
    let remote = SpanContext::new(trace, parent, flags, true, TraceState::default());
    let cx = opentelemetry::Context::new().with_remote_span_context(remote);
    span.set_parent(cx).is_ok()
}

/// The trace id `span` belongs to (32 lowercase hex), when it is exported.
pub fn trace_id_of(span: &tracing::Span) -> Option<String> {
    let cx = span.context();
    let sc = cx.span().span_context().clone();
    sc.is_valid().then(|| sc.trace_id().to_string())
}

/// `span` as a W3C `traceparent`, when it is exported: what a callee continues.
pub fn traceparent_of(span: &tracing::Span) -> Option<String> {
    let cx = span.context();
    let sc = cx.span().span_context().clone();
    sc.is_valid().then(|| {
        format!(
            "00-{}-{}-{:02x}",
            sc.trace_id(),
            sc.span_id(),
            sc.trace_flags().to_u8()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparents_parse_or_are_refused() {
        let ok = parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
        let (trace, span, flags) = ok.expect("valid");
        assert_eq!(trace.to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(span.to_string(), "00f067aa0ba902b7");
        assert!(flags.is_sampled());
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
        ] {
            assert!(parse_traceparent(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn off_unless_an_endpoint_is_configured() {
        // The process environment of the test run sets no OTEL_* endpoint.
        if std::env::var_os("OTEL_EXPORTER_OTLP_ENDPOINT").is_some()
            || std::env::var_os("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some()
        {
            return;
        }
        assert_eq!(endpoint(None), None);
        assert_eq!(endpoint(Some(" ")), None);
        assert_eq!(
            endpoint(Some("http://127.0.0.1:4318/")),
            Some(Endpoint::Configured(
                "http://127.0.0.1:4318/v1/traces".into()
            ))
        );
    }
}
