//! Replicas of one zone on PostgreSQL: the registry, hub ownership, the change feed, the
//! descriptor publish lock and console logins shared by the zone.

use super::*;

/// The database clock in unix milliseconds (PostgreSQL): replica heartbeats and their expiry
/// are judged by one clock, whatever the replicas' clocks say.
const PG_NOW_MS: &str = "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT";

/// What a PostgreSQL database (and schema) shared by replicas is known by: the names of its
/// notification channels and the keys of its advisory locks. Channels and advisory locks are
/// per database, not per schema, so they are derived from the database and schema names;
/// two zones in two schemas of one database never see each other's notifications.
#[derive(Debug, Clone)]
pub struct SharedNames {
    /// `LISTEN` channel of the change feed.
    pub changes_channel: String,
    /// `LISTEN` channel announcing committed audit rows (payload: the newest seq).
    pub audit_channel: String,
    pub(super) audit_lock: i64,
    pub(super) changes_lock: i64,
    pub(super) descriptors_lock: i64,
    /// What sink locks' keys are derived from ([`SharedNames::sink_lock`]).
    sink_seed: String,
}

impl SharedNames {
    pub(super) fn derive(database: &str, schema: &str) -> SharedNames {
        use sha2::{Digest, Sha256};
        let h = Sha256::digest(format!("mcp-root\n{database}\n{schema}").as_bytes());
        let tag = hex::encode(&h[..8]);
        let key = |salt: u8| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&h[8..16]);
            b[0] ^= salt;
            i64::from_be_bytes(b)
        };
        SharedNames {
            changes_channel: format!("mcp_root_changes_{tag}"),
            audit_channel: format!("mcp_root_audit_{tag}"),
            audit_lock: key(0xA5),
            changes_lock: key(0x5A),
            descriptors_lock: key(0x3C),
            sink_seed: hex::encode(h),
        }
    }

    /// The advisory lock key of export sink `name`: whoever holds it ships that sink.
    pub(super) fn sink_lock(&self, name: &str) -> i64 {
        use sha2::{Digest, Sha256};
        let h = Sha256::digest(format!("sink\n{}\n{name}", self.sink_seed).as_bytes());
        let mut b = [0u8; 8];
        b.copy_from_slice(&h[..8]);
        i64::from_be_bytes(b)
    }
}

/// A registered replica (the zone view).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaRow {
    pub replica_id: String,
    pub zone: String,
    pub advertise_url: String,
    pub instance_id: String,
    pub version: String,
    pub started_at_ms: i64,
    pub heartbeat_at_ms: i64,
    /// Milliseconds since the last heartbeat, by the database's clock.
    pub heartbeat_age_ms: i64,
    /// The newest change of the feed the replica has applied.
    pub applied_change: i64,
}

/// Which replica holds a hub's connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnershipRow {
    pub target_id: String,
    pub replica_id: String,
    pub(crate) connection_id: String,
    pub(crate) connected_at_ms: i64,
    pub(crate) heartbeat_age_ms: i64,
    /// The owner's advertised internal address.
    pub advertise_url: String,
}

/// A zone-wide lock on PostgreSQL (see [`Store::lock_descriptor_publish`]): a transaction
/// holding an advisory lock until it ends.
pub(crate) struct ZoneLock(sqlx::Transaction<'static, sqlx::Postgres>);

impl ZoneLock {
    /// Releases the lock (ends its transaction).
    pub(crate) async fn release(self) -> Result<()> {
        self.0.commit().await.map_err(db("release zone lock"))
    }
}

/// One entry of the change feed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeRow {
    pub change_id: i64,
    pub kind: String,
    pub item: String,
    pub(crate) origin: String,
}

/// Replicas of one zone on PostgreSQL: the registry, hub ownership and the change feed.
/// Heartbeats and their ages are taken from the database's clock. Each method refuses on
/// SQLite, where replica features are off.
impl Store {
    pub(super) fn pg(&self, op: &'static str) -> Result<(&PgPool, &SharedNames)> {
        match (&self.pool, &self.shared) {
            (Pool::Postgres(pg), Some(n)) => Ok((pg, n)),
            _ => Err(Error::NotShared(op)),
        }
    }

    /// Registers (or re-registers after a restart) this replica; `Ok(false)` when a live
    /// replica with the same id but another instance holds the row (two processes configured
    /// with one `replica.id`).
    pub async fn register_replica(&self, r: &ReplicaRow, expiry_ms: i64) -> Result<bool> {
        let op = "register replica";
        let (pg, _) = self.pg(op)?;
        let res = sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO replicas (replica_id, zone, advertise_url, instance_id, version,
                 started_at, heartbeat_at, applied_change)
             VALUES ($1, $2, $3, $4, $5, {PG_NOW_MS}, {PG_NOW_MS}, $6)
             ON CONFLICT (replica_id) DO UPDATE SET zone = excluded.zone,
                 advertise_url = excluded.advertise_url, instance_id = excluded.instance_id,
                 version = excluded.version, started_at = excluded.started_at,
                 heartbeat_at = excluded.heartbeat_at, applied_change = excluded.applied_change
             WHERE replicas.instance_id = excluded.instance_id
                OR replicas.heartbeat_at < {PG_NOW_MS} - $7"
        )))
        .bind(&r.replica_id)
        .bind(&r.zone)
        .bind(&r.advertise_url)
        .bind(&r.instance_id)
        .bind(&r.version)
        .bind(r.applied_change)
        .bind(expiry_ms)
        .execute(pg)
        .await
        .map_err(db(op))?;
        Ok(res.rows_affected() == 1)
    }

    /// One heartbeat: this replica's row and the hub ownerships of the connections it
    /// holds (`held`: target id, connection id). Rows of this replica for connections it no
    /// longer holds are dropped (a release that failed), and a held connection whose row is
    /// missing is claimed again unless another replica holds the target (a claim that failed,
    /// or a stale claim whose release removed it). `Ok(false)` when the row is no longer this
    /// instance's (another process took the id over); ownership is then left alone.
    pub async fn heartbeat_replica(
        &self,
        replica_id: &str,
        instance_id: &str,
        held: &[(String, String)],
    ) -> Result<bool> {
        let op = "replica heartbeat";
        let (pg, _) = self.pg(op)?;
        let (targets, connections): (Vec<String>, Vec<String>) = held.iter().cloned().unzip();
        let mut tx = pg.begin().await.map_err(db(op))?;
        let res = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE replicas SET heartbeat_at = {PG_NOW_MS} WHERE replica_id = $1 AND instance_id = $2"
        )))
        .bind(replica_id)
        .bind(instance_id)
        .execute(&mut *tx)
        .await
        .map_err(db(op))?;
        if res.rows_affected() != 1 {
            tx.commit().await.map_err(db(op))?;
            return Ok(false);
        }
        sqlx::query(
            "DELETE FROM hub_ownership WHERE replica_id = $1 AND NOT (connection_id = ANY($2))",
        )
        .bind(replica_id)
        .bind(&connections)
        .execute(&mut *tx)
        .await
        .map_err(db(op))?;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE hub_ownership SET heartbeat_at = {PG_NOW_MS}
             WHERE replica_id = $1 AND connection_id = ANY($2)"
        )))
        .bind(replica_id)
        .bind(&connections)
        .execute(&mut *tx)
        .await
        .map_err(db(op))?;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO hub_ownership (target_id, replica_id, connection_id, connected_at, heartbeat_at)
             SELECT h.target_id, $1, h.connection_id, {PG_NOW_MS}, {PG_NOW_MS}
             FROM UNNEST($2::TEXT[], $3::TEXT[]) AS h(target_id, connection_id)
             ON CONFLICT (target_id) DO NOTHING"
        )))
        .bind(replica_id)
        .bind(&targets)
        .bind(&connections)
        .execute(&mut *tx)
        .await
        .map_err(db(op))?;
        tx.commit().await.map_err(db(op))?;
        Ok(true)
    }

    /// Removes this replica from the registry with the hubs it held (clean shutdown).
    pub async fn unregister_replica(&self, replica_id: &str, instance_id: &str) -> Result<()> {
        let op = "unregister replica";
        let (pg, _) = self.pg(op)?;
        let mut tx = pg.begin().await.map_err(db(op))?;
        sqlx::query("DELETE FROM hub_ownership WHERE replica_id = $1")
            .bind(replica_id)
            .execute(&mut *tx)
            .await
            .map_err(db(op))?;
        sqlx::query("DELETE FROM replicas WHERE replica_id = $1 AND instance_id = $2")
            .bind(replica_id)
            .bind(instance_id)
            .execute(&mut *tx)
            .await
            .map_err(db(op))?;
        tx.commit().await.map_err(db(op))?;
        Ok(())
    }

    /// Takes over the unfinished fleet runs (`running` or `paused`, or cancelled with calls
    /// admitted before that still to finish) whose driving replica is
    /// gone: not registered, or silent for longer than `expiry_ms`. `me` drives them from
    /// now; their ids.
    pub async fn take_over_fleet_runs(&self, me: &str, expiry_ms: i64) -> Result<Vec<String>> {
        let op = "take over fleet runs";
        let (pg, _) = self.pg(op)?;
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE fleet_runs SET driver = $1
             WHERE (state IN ('running', 'paused')
                    OR (state = 'cancelled' AND EXISTS (SELECT 1 FROM fleet_targets t
                          WHERE t.run_id = fleet_runs.run_id AND t.status = 'running')))
               AND driver <> $1
               AND driver NOT IN (SELECT replica_id FROM replicas
                                  WHERE heartbeat_at >= {PG_NOW_MS} - $2)
             RETURNING run_id"
        )))
        .bind(me)
        .bind(expiry_ms)
        .fetch_all(pg)
        .await
        .map_err(db(op))?;
        rows.iter()
            .map(|r| r.try_get::<String, _>(0).map_err(db(op)))
            .collect()
    }

    /// Every registered replica, with the age of its heartbeat; rows silent for longer than
    /// `forget_ms` are dropped on the way.
    pub async fn list_replicas(&self, forget_ms: i64) -> Result<Vec<ReplicaRow>> {
        let op = "list replicas";
        let (pg, _) = self.pg(op)?;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "DELETE FROM replicas WHERE heartbeat_at < {PG_NOW_MS} - $1"
        )))
        .bind(forget_ms)
        .execute(pg)
        .await
        .map_err(db(op))?;
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT replica_id, zone, advertise_url, instance_id, version, started_at,
                 heartbeat_at, {PG_NOW_MS} - heartbeat_at AS age, applied_change
             FROM replicas ORDER BY replica_id"
        )))
        .fetch_all(pg)
        .await
        .map_err(db(op))?;
        rows.iter()
            .map(|r| {
                Ok(ReplicaRow {
                    replica_id: r.try_get(0).map_err(db(op))?,
                    zone: r.try_get(1).map_err(db(op))?,
                    advertise_url: r.try_get(2).map_err(db(op))?,
                    instance_id: r.try_get(3).map_err(db(op))?,
                    version: r.try_get(4).map_err(db(op))?,
                    started_at_ms: r.try_get(5).map_err(db(op))?,
                    heartbeat_at_ms: r.try_get(6).map_err(db(op))?,
                    heartbeat_age_ms: r.try_get(7).map_err(db(op))?,
                    applied_change: r.try_get(8).map_err(db(op))?,
                })
            })
            .collect()
    }

    /// Records that `replica_id` has applied the change feed up to `change_id`.
    pub async fn set_applied_change(&self, replica_id: &str, change_id: i64) -> Result<()> {
        let op = "record applied change";
        let (pg, _) = self.pg(op)?;
        sqlx::query(
            "UPDATE replicas SET applied_change = $1 WHERE replica_id = $2 AND applied_change < $1",
        )
        .bind(change_id)
        .bind(replica_id)
        .execute(pg)
        .await
        .map_err(db(op))?;
        Ok(())
    }

    /// Live replicas other than `me` that have not yet applied `change_id`.
    pub async fn replicas_behind(
        &self,
        me: &str,
        change_id: i64,
        expiry_ms: i64,
    ) -> Result<Vec<String>> {
        let op = "replicas behind";
        let (pg, _) = self.pg(op)?;
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT replica_id FROM replicas
             WHERE replica_id <> $1 AND applied_change < $2 AND heartbeat_at >= {PG_NOW_MS} - $3"
        )))
        .bind(me)
        .bind(change_id)
        .bind(expiry_ms)
        .fetch_all(pg)
        .await
        .map_err(db(op))?;
        rows.iter()
            .map(|r| r.try_get::<String, _>(0).map_err(db(op)))
            .collect()
    }

    /// Records that `replica_id` holds `target_id`'s hub connection now (replacing whoever
    /// held it: the hub has one connection, and the newest is the live one).
    pub async fn claim_hub(
        &self,
        target_id: &str,
        replica_id: &str,
        connection_id: &str,
    ) -> Result<()> {
        let op = "claim hub";
        let (pg, _) = self.pg(op)?;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO hub_ownership (target_id, replica_id, connection_id, connected_at, heartbeat_at)
             VALUES ($1, $2, $3, {PG_NOW_MS}, {PG_NOW_MS})
             ON CONFLICT (target_id) DO UPDATE SET replica_id = excluded.replica_id,
                 connection_id = excluded.connection_id, connected_at = excluded.connected_at,
                 heartbeat_at = excluded.heartbeat_at"
        )))
        .bind(target_id)
        .bind(replica_id)
        .bind(connection_id)
        .execute(pg)
        .await
        .map_err(db(op))?;
        Ok(())
    }

    /// Forgets a hub connection that ended, if it is still the recorded one.
    pub async fn release_hub(&self, target_id: &str, connection_id: &str) -> Result<()> {
        let op = "release hub";
        let (pg, _) = self.pg(op)?;
        sqlx::query("DELETE FROM hub_ownership WHERE target_id = $1 AND connection_id = $2")
            .bind(target_id)
            .bind(connection_id)
            .execute(pg)
            .await
            .map_err(db(op))?;
        Ok(())
    }

    /// Hub ownerships whose record and owner both heartbeat within `expiry_ms`, with the
    /// owner's address; `target_id` narrows to one target.
    pub async fn live_owners(
        &self,
        target_id: Option<&str>,
        expiry_ms: i64,
    ) -> Result<Vec<OwnershipRow>> {
        let op = "hub owners";
        let (pg, _) = self.pg(op)?;
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT o.target_id, o.replica_id, o.connection_id, o.connected_at,
                 {PG_NOW_MS} - o.heartbeat_at AS age, r.advertise_url
             FROM hub_ownership o JOIN replicas r ON r.replica_id = o.replica_id
             WHERE o.heartbeat_at >= {PG_NOW_MS} - $1 AND r.heartbeat_at >= {PG_NOW_MS} - $1
               AND ($2::TEXT IS NULL OR o.target_id = $2)
             ORDER BY o.target_id"
        )))
        .bind(expiry_ms)
        .bind(target_id)
        .fetch_all(pg)
        .await
        .map_err(db(op))?;
        rows.iter()
            .map(|r| {
                Ok(OwnershipRow {
                    target_id: r.try_get(0).map_err(db(op))?,
                    replica_id: r.try_get(1).map_err(db(op))?,
                    connection_id: r.try_get(2).map_err(db(op))?,
                    connected_at_ms: r.try_get(3).map_err(db(op))?,
                    heartbeat_age_ms: r.try_get(4).map_err(db(op))?,
                    advertise_url: r.try_get(5).map_err(db(op))?,
                })
            })
            .collect()
    }

    /// Appends a change to the feed and announces it on the changes channel, in one
    /// transaction. Appends are serialized by an advisory lock, so change ids commit in
    /// order: a replica that has applied id N has seen every change up to N.
    pub async fn publish_change(&self, kind: &str, item: &str, origin: &str) -> Result<i64> {
        let op = "publish change";
        let (pg, n) = self.pg(op)?;
        let mut tx = pg.begin().await.map_err(db(op))?;
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(n.changes_lock)
            .execute(&mut *tx)
            .await
            .map_err(db(op))?;
        let id: i64 = sqlx::query("SELECT COALESCE(MAX(change_id), 0) + 1 FROM zone_changes")
            .fetch_one(&mut *tx)
            .await
            .map_err(db(op))?
            .try_get(0)
            .map_err(db(op))?;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO zone_changes (change_id, kind, item, origin, at) VALUES ($1, $2, $3, $4, {PG_NOW_MS})"
        )))
        .bind(id)
        .bind(kind)
        .bind(item)
        .bind(origin)
        .execute(&mut *tx)
        .await
        .map_err(db(op))?;
        let payload = serde_json::json!({ "id": id, "kind": kind, "item": item, "origin": origin });
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(&n.changes_channel)
            .bind(payload.to_string())
            .execute(&mut *tx)
            .await
            .map_err(db(op))?;
        tx.commit().await.map_err(db(op))?;
        Ok(id)
    }

    /// Changes after `after`, oldest first (the fallback for lost notifications).
    pub async fn changes_after(&self, after: i64, limit: i64) -> Result<Vec<ChangeRow>> {
        let op = "read changes";
        let (pg, _) = self.pg(op)?;
        let rows = sqlx::query(
            "SELECT change_id, kind, item, origin FROM zone_changes WHERE change_id > $1
             ORDER BY change_id LIMIT $2",
        )
        .bind(after)
        .bind(limit)
        .fetch_all(pg)
        .await
        .map_err(db(op))?;
        rows.iter()
            .map(|r| {
                Ok(ChangeRow {
                    change_id: r.try_get(0).map_err(db(op))?,
                    kind: r.try_get(1).map_err(db(op))?,
                    item: r.try_get(2).map_err(db(op))?,
                    origin: r.try_get(3).map_err(db(op))?,
                })
            })
            .collect()
    }

    /// The newest change id (0 for none).
    pub async fn last_change(&self) -> Result<i64> {
        let op = "read changes";
        let (pg, _) = self.pg(op)?;
        sqlx::query("SELECT COALESCE(MAX(change_id), 0) FROM zone_changes")
            .fetch_one(pg)
            .await
            .map_err(db(op))?
            .try_get(0)
            .map_err(db(op))
    }

    /// Takes the zone's descriptor-publish lock: a transaction-scoped advisory lock, held
    /// until [`ZoneLock::release`] (or the guard is dropped, which rolls back and releases
    /// it). Publishes on every replica of the zone run one at a time under it, so revisions
    /// are stored and served in one order. Waits at most 30 s for another publish.
    pub(crate) async fn lock_descriptor_publish(&self) -> Result<ZoneLock> {
        let op = "descriptor publish lock";
        let (pg, n) = self.pg(op)?;
        let mut tx = pg.begin().await.map_err(db(op))?;
        sqlx::query("SET LOCAL lock_timeout = '30s'")
            .execute(&mut *tx)
            .await
            .map_err(db(op))?;
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(n.descriptors_lock)
            .execute(&mut *tx)
            .await
            .map_err(db(op))?;
        Ok(ZoneLock(tx))
    }

    /// Records a console session opened on `replica_id` and keeps the newest `max` of the
    /// zone (expired ones go first); returns the ids dropped to make room.
    #[allow(clippy::too_many_arguments, reason = "one row's columns")]
    pub async fn open_console_session(
        &self,
        session_id: &str,
        now_ms: i64,
        expires_ms: i64,
        replica_id: &str,
        operator: &str,
        max: i64,
    ) -> Result<Vec<String>> {
        let op = "open console session";
        let (pg, _) = self.pg(op)?;
        let mut tx = pg.begin().await.map_err(db(op))?;
        sqlx::query("DELETE FROM console_sessions WHERE expires_at <= $1")
            .bind(now_ms)
            .execute(&mut *tx)
            .await
            .map_err(db(op))?;
        sqlx::query(
            "INSERT INTO console_sessions (session_id, expires_at, created_at, replica_id, operator)
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(session_id)
        .bind(expires_ms)
        .bind(now_ms)
        .bind(replica_id)
        .bind(operator)
        .execute(&mut *tx)
        .await
        .map_err(db(op))?;
        let dropped = sqlx::query(
            "DELETE FROM console_sessions WHERE session_id IN (
                 SELECT session_id FROM console_sessions
                 ORDER BY expires_at DESC, session_id DESC OFFSET $1)
             RETURNING session_id",
        )
        .bind(max)
        .fetch_all(&mut *tx)
        .await
        .map_err(db(op))?;
        tx.commit().await.map_err(db(op))?;
        dropped
            .iter()
            .map(|r| r.try_get::<String, _>(0).map_err(db(op)))
            .collect()
    }

    /// The expiry and operator of a console session the zone still holds, if it has not
    /// passed `now_ms` (sessions from before named operators are `admin`'s).
    pub async fn console_session(
        &self,
        session_id: &str,
        now_ms: i64,
    ) -> Result<Option<(i64, String)>> {
        let op = "read console session";
        let (pg, _) = self.pg(op)?;
        sqlx::query(
            "SELECT expires_at, COALESCE(operator, 'admin') FROM console_sessions
             WHERE session_id = $1 AND expires_at > $2",
        )
        .bind(session_id)
        .bind(now_ms)
        .fetch_optional(pg)
        .await
        .map_err(db(op))?
        .map(|r| -> Result<(i64, String)> {
            Ok((
                r.try_get::<i64, _>(0).map_err(db(op))?,
                r.try_get::<String, _>(1).map_err(db(op))?,
            ))
        })
        .transpose()
    }

    /// Ends every console session of `operator` for the whole zone (the operator was
    /// revoked); the ids ended.
    pub async fn end_operator_console_sessions(&self, operator: &str) -> Result<Vec<String>> {
        let op = "end operator console sessions";
        let (pg, _) = self.pg(op)?;
        let rows =
            sqlx::query("DELETE FROM console_sessions WHERE operator = $1 RETURNING session_id")
                .bind(operator)
                .fetch_all(pg)
                .await
                .map_err(db(op))?;
        rows.iter()
            .map(|r| r.try_get::<String, _>(0).map_err(db(op)))
            .collect()
    }

    /// Which of `ids` are console sessions the zone still holds unexpired.
    pub async fn live_console_sessions(&self, ids: &[String], now_ms: i64) -> Result<Vec<String>> {
        let op = "read console sessions";
        let (pg, _) = self.pg(op)?;
        let rows = sqlx::query(
            "SELECT session_id FROM console_sessions WHERE session_id = ANY($1) AND expires_at > $2",
        )
        .bind(ids)
        .bind(now_ms)
        .fetch_all(pg)
        .await
        .map_err(db(op))?;
        rows.iter()
            .map(|r| r.try_get::<String, _>(0).map_err(db(op)))
            .collect()
    }

    /// Ends a console session for the whole zone (logout).
    pub async fn end_console_session(&self, session_id: &str) -> Result<()> {
        let op = "end console session";
        let (pg, _) = self.pg(op)?;
        sqlx::query("DELETE FROM console_sessions WHERE session_id = $1")
            .bind(session_id)
            .execute(pg)
            .await
            .map_err(db(op))?;
        Ok(())
    }

    /// Drops changes older than `keep_ms`, always keeping the newest (ids continue from it).
    pub async fn prune_changes(&self, keep_ms: i64) -> Result<()> {
        let op = "prune changes";
        let (pg, _) = self.pg(op)?;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "DELETE FROM zone_changes WHERE at < {PG_NOW_MS} - $1
               AND change_id < (SELECT MAX(change_id) FROM zone_changes)"
        )))
        .bind(keep_ms)
        .execute(pg)
        .await
        .map_err(db(op))?;
        Ok(())
    }
}
