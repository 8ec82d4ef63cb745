//! Root's network edge: the listener with its connection bounds, TLS on it, and the TLS client
//! root uses to reach other replicas and catalogs.

pub(crate) mod listener;
pub(crate) mod tls;
pub(crate) mod tls_client;
