//! Root's network edge: the listener with its connection bounds, TLS on it, and the TLS client
//! root uses to reach other replicas and catalogs.

pub mod listener;
pub mod tls;
pub mod tls_client;
