//! Root's network edge: the error body of every HTTP refusal, the listener with its connection bounds, its keep-alive timers, TLS on it, and the TLS client
//! root uses to reach other replicas and catalogs.

pub(crate) mod answer;
pub(crate) mod keepalive;
pub(crate) mod listener;
pub(crate) mod tls;
pub(crate) mod tls_client;
