//! A zone of several root replicas on one PostgreSQL database (forwarding, failover, shared
//! state, TLS between replicas), and root on PostgreSQL.

mod exactly_once;
mod postgres;
mod replica_state;
mod replica_tls;
pub(crate) mod replicas;
mod sign_in;
