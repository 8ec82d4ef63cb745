//! Operating it: the binaries and packages as operators run them, the console, the admin
//! CLI, metrics and OpenTelemetry traces, and a bounded soak.

pub(crate) mod admin_cli;
mod console;
mod docs;
mod lists;
mod observability;
mod oidc;
mod otel;
mod packages;
mod processes;
mod soak;
