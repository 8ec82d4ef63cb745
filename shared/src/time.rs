//! RFC 3339 timestamps (UTC) used by every wire format in this workspace.

pub use ::time::OffsetDateTime;

/// Serde adapter for `OffsetDateTime` as RFC 3339.
pub use ::time::serde::rfc3339;

/// The current instant in UTC.
pub fn now() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}

/// Formats an instant as RFC 3339; falls back to the unix timestamp if formatting fails.
pub fn format(t: OffsetDateTime) -> String {
    t.format(&::time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| t.unix_timestamp().to_string())
}

/// Parses an RFC 3339 timestamp.
pub fn parse(s: &str) -> Result<OffsetDateTime, ::time::error::Parse> {
    OffsetDateTime::parse(s, &::time::format_description::well_known::Rfc3339)
}

/// Milliseconds since the unix epoch (what the stores index on).
pub fn unix_ms(t: OffsetDateTime) -> i64 {
    (t.unix_timestamp_nanos() / 1_000_000) as i64
}

/// The instant `ms` milliseconds after the unix epoch.
pub fn from_unix_ms(ms: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp_nanos(ms as i128 * 1_000_000)
        .unwrap_or(OffsetDateTime::UNIX_EPOCH)
}
