//! The hash-chained audit trail: append in chained batches, query, walk the chain.

use super::*;

/// One audit row as stored: the event plus its place in the hash chain.
#[derive(Debug, Clone)]
pub struct AuditRow {
    pub seq: i64,
    pub event: OperationalEvent,
    pub prev_hash: String,
    pub hash: String,
    /// The replica that wrote the row (PostgreSQL with replicas; not covered by the hash).
    pub replica_id: Option<String>,
}

/// One event to append to the trail: the columns the trail is indexed by and the event's
/// canonical JSON (what the chain hash covers), taken from the event once.
#[derive(Debug, Clone)]
pub struct AuditEntry {
    pub(crate) event_id: String,
    pub(crate) trace_id: String,
    pub(crate) target_id: Option<String>,
    pub(crate) tool_id: String,
    pub(crate) status: &'static str,
    pub(crate) actor: String,
    pub(crate) started_at_ms: i64,
    pub(crate) event_json: String,
}

/// Where an [`AuditEntry`] lands in the hash chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChainLink {
    pub(crate) seq: i64,
    pub(crate) prev_hash: String,
    pub(crate) hash: String,
}

/// Filters for the audit query; all optional, newest first, `before_seq` pages backwards.
#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    pub target_id: Option<String>,
    pub tool_id: Option<String>,
    pub status: Option<String>,
    pub trace_id: Option<String>,
    /// The stored actor id: `operator` or `lease:<session id>`.
    pub actor: Option<String>,
    pub event_id: Option<String>,
    pub since_ms: Option<i64>,
    pub until_ms: Option<i64>,
    pub before_seq: Option<i64>,
    pub after_seq: Option<i64>,
    pub limit: i64,
    /// Oldest first instead of newest first (exports).
    pub ascending: bool,
}

impl Store {
    // ---- audit --------------------------------------------------------------------------

    /// The last row of the chain: `(seq, hash)`, or `None` for an empty trail.
    pub async fn audit_head(&self) -> Result<Option<(i64, String)>> {
        on_pool!(self, pool => {
            let row = sqlx::query("SELECT seq, hash FROM audit_events ORDER BY seq DESC LIMIT 1")
                .fetch_optional(pool)
                .await
                .map_err(db("audit head"))?;
            match row {
                None => Ok(None),
                Some(r) => Ok(Some((
                    r.try_get::<i64, _>(0).map_err(db("audit head"))?,
                    r.try_get::<String, _>(1).map_err(db("audit head"))?,
                ))),
            }
        })
    }

    /// Appends a batch to the hash chain in one transaction: `chain` gets the head the batch
    /// follows (`(seq, hash)`, `(0, "")` for an empty trail) and returns one link per entry,
    /// in order; they are written as multi-row inserts (one statement per
    /// [`AUDIT_ROWS_PER_INSERT`] rows). On PostgreSQL the head is read under a
    /// transaction-scoped advisory lock, so appends from every replica of the zone form one
    /// chain in commit order, and the commit announces the new head on the audit channel (the
    /// live streams of the other replicas wake on it). Returns the links as written.
    ///
    /// Root's audit writer appends this way on PostgreSQL; on SQLite it appends from its
    /// commit thread (`audit::committer`), and this serves everyone else.
    pub(crate) async fn append_audit_chained(
        &self,
        entries: &[AuditEntry],
        replica_id: Option<&str>,
        chain: impl FnOnce(i64, String) -> Vec<ChainLink>,
    ) -> Result<Vec<ChainLink>> {
        let shared = self.shared.clone();
        let op = "append audit";
        let sqlite = matches!(self.pool, Pool::Sqlite(_));
        on_pool!(self, pool => {
            // The head is read, then rows are written: see `begin_write`.
            let mut tx = begin_write(pool).await.map_err(db(op))?;
            if let Some(n) = &shared {
                sqlx::query("SELECT pg_advisory_xact_lock($1)")
                    .bind(n.audit_lock)
                    .execute(&mut *tx)
                    .await
                    .map_err(db(op))?;
            }
            let head = sqlx::query("SELECT seq, hash FROM audit_events ORDER BY seq DESC LIMIT 1")
                .fetch_optional(&mut *tx)
                .await
                .map_err(db(op))?;
            let (seq, hash) = match head {
                None => (0, String::new()),
                Some(r) => (
                    r.try_get::<i64, _>(0).map_err(db(op))?,
                    r.try_get::<String, _>(1).map_err(db(op))?,
                ),
            };
            let links = chain(seq, hash);
            check_links(op, entries, &links)?;
            for (chunk, chunk_links) in entries
                .chunks(AUDIT_ROWS_PER_INSERT)
                .zip(links.chunks(AUDIT_ROWS_PER_INSERT))
            {
                // Only generated placeholders are spliced in; every value is bound.
                let mut sql = String::new();
                audit_insert_sql(&mut sql, chunk.len(), sqlite);
                bind_audit_rows(sqlx::query(sqlx::AssertSqlSafe(sql)), chunk, chunk_links, replica_id)
                    .execute(&mut *tx)
                    .await
                    .map_err(db(op))?;
            }
            if let (Some(n), Some(last)) = (&shared, links.last()) {
                sqlx::query("SELECT pg_notify($1, $2)")
                    .bind(&n.audit_channel)
                    .bind(last.seq.to_string())
                    .execute(&mut *tx)
                    .await
                    .map_err(db(op))?;
            }
            tx.commit().await.map_err(db(op))?;
            Ok(links)
        })
    }

    /// Queries the trail. Rows whose stored JSON no longer parses are returned as errors, so a
    /// tampered row is reported rather than skipped.
    pub async fn query_audit(&self, f: &AuditFilter) -> Result<Vec<AuditRow>> {
        let mut sql = String::from(
            "SELECT seq, event, prev_hash, hash, replica_id FROM audit_events WHERE 1 = 1",
        );
        let mut args: Vec<Arg> = Vec::new();
        let mut push = |sql: &mut String, clause: &str, arg: Arg| {
            args.push(arg);
            sql.push_str(&clause.replace('?', &format!("${}", args.len())));
        };
        if let Some(v) = &f.target_id {
            push(&mut sql, " AND target_id = ?", Arg::S(v.clone()));
        }
        if let Some(v) = &f.tool_id {
            push(&mut sql, " AND tool_id = ?", Arg::S(v.clone()));
        }
        if let Some(v) = &f.status {
            push(&mut sql, " AND status = ?", Arg::S(v.clone()));
        }
        if let Some(v) = &f.trace_id {
            push(&mut sql, " AND trace_id = ?", Arg::S(v.clone()));
        }
        if let Some(v) = &f.actor {
            push(&mut sql, " AND actor = ?", Arg::S(v.clone()));
        }
        if let Some(v) = &f.event_id {
            push(&mut sql, " AND event_id = ?", Arg::S(v.clone()));
        }
        if let Some(v) = f.since_ms {
            push(&mut sql, " AND started_at >= ?", Arg::I(v));
        }
        if let Some(v) = f.until_ms {
            push(&mut sql, " AND started_at < ?", Arg::I(v));
        }
        if let Some(v) = f.before_seq {
            push(&mut sql, " AND seq < ?", Arg::I(v));
        }
        if let Some(v) = f.after_seq {
            push(&mut sql, " AND seq > ?", Arg::I(v));
        }
        sql.push_str(if f.ascending {
            " ORDER BY seq ASC"
        } else {
            " ORDER BY seq DESC"
        });
        push(&mut sql, " LIMIT ?", Arg::I(f.limit.clamp(1, 10_000)));
        on_pool!(self, pool => {
            // `sql` is assembled only from the constant clauses above; values are bound.
            let mut q = sqlx::query(sqlx::AssertSqlSafe(sql.clone()));
            for a in &args {
                q = match a {
                    Arg::S(s) => q.bind(s.clone()),
                    Arg::I(i) => q.bind(*i),
                };
            }
            let rows = q.fetch_all(pool).await.map_err(db("query audit"))?;
            rows.iter().map(|r| -> Result<AuditRow> {
                let seq: i64 = r.try_get(0).map_err(db("query audit"))?;
                let event_json: String = r.try_get(1).map_err(db("query audit"))?;
                let event = serde_json::from_str(&event_json).map_err(|e| Error::Corrupt {
                    op: "query audit",
                    detail: format!("event at seq {seq}: {e}"),
                })?;
                Ok(AuditRow {
                    seq,
                    event,
                    prev_hash: r.try_get(2).map_err(db("query audit"))?,
                    hash: r.try_get(3).map_err(db("query audit"))?,
                    replica_id: r.try_get(4).map_err(db("query audit"))?,
                })
            }).collect()
        })
    }

    /// Raw chain rows `(seq, event_json, prev_hash, hash)` after `after_seq`, oldest first, for
    /// verification (no parsing, so a tampered row cannot hide behind a parse error).
    pub async fn audit_chain_page(
        &self,
        after_seq: i64,
        limit: i64,
    ) -> Result<Vec<(i64, String, String, String)>> {
        on_pool!(self, pool => {
            let rows = sqlx::query(
                "SELECT seq, event, prev_hash, hash FROM audit_events WHERE seq > $1 ORDER BY seq ASC LIMIT $2",
            )
            .bind(after_seq)
            .bind(limit)
            .fetch_all(pool)
            .await
            .map_err(db("audit chain"))?;
            rows.iter().map(|r| Ok((
                r.try_get::<i64, _>(0).map_err(db("audit chain"))?,
                r.try_get::<String, _>(1).map_err(db("audit chain"))?,
                r.try_get::<String, _>(2).map_err(db("audit chain"))?,
                r.try_get::<String, _>(3).map_err(db("audit chain"))?,
            ))).collect()
        })
    }
}

/// Rows per multi-row audit insert (12 parameters each; well under SQLite's and PostgreSQL's
/// parameter limits).
pub(crate) const AUDIT_ROWS_PER_INSERT: usize = 64;

/// One audit row, in [`audit_insert_sql`]'s column order with SQLite's placeholders (the
/// audit writer's commit thread prepares it once and runs it per row).
pub(crate) const AUDIT_INSERT_ONE_SQL: &str = "INSERT INTO audit_events (seq, event_id, trace_id, target_id, tool_id, status, actor, started_at, event, prev_hash, hash, replica_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

/// Appends the multi-row insert of `n` audit rows to `sql`. `anonymous`: SQLite's `?`
/// placeholders instead of `$N`; sqlx binds a named parameter by asking SQLite for its name,
/// a linear search of the statement's names, so `$N` costs time quadratic in the row count
/// (PostgreSQL needs `$N`).
fn audit_insert_sql(sql: &mut String, n: usize, anonymous: bool) {
    use std::fmt::Write;
    sql.push_str(
        "INSERT INTO audit_events (seq, event_id, trace_id, target_id, tool_id, status, actor, started_at, event, prev_hash, hash, replica_id) VALUES ",
    );
    for r in 0..n {
        if r > 0 {
            sql.push_str(", ");
        }
        sql.push('(');
        for c in 0..12 {
            if c > 0 {
                sql.push_str(", ");
            }
            if anonymous {
                sql.push('?');
            } else {
                let _ = write!(sql, "${}", r * 12 + c + 1);
            }
        }
        sql.push(')');
    }
}

/// Binds the columns of `entries` at `links`, in [`audit_insert_sql`]'s order.
fn bind_audit_rows<'q, DB: sqlx::Database>(
    mut q: sqlx::query::Query<'q, DB, <DB as sqlx::Database>::Arguments>,
    entries: &'q [AuditEntry],
    links: &'q [ChainLink],
    replica_id: Option<&'q str>,
) -> sqlx::query::Query<'q, DB, <DB as sqlx::Database>::Arguments>
where
    i64: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    Option<&'q str>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    for (e, link) in entries.iter().zip(links) {
        q = q
            .bind(link.seq)
            .bind(e.event_id.as_str())
            .bind(e.trace_id.as_str())
            .bind(e.target_id.as_deref())
            .bind(e.tool_id.as_str())
            .bind(e.status)
            .bind(e.actor.as_str())
            .bind(e.started_at_ms)
            .bind(e.event_json.as_str())
            .bind(link.prev_hash.as_str())
            .bind(link.hash.as_str())
            .bind(replica_id);
    }
    q
}

/// One chain link per entry, or the trail would be written wrong.
fn check_links(op: &'static str, entries: &[AuditEntry], links: &[ChainLink]) -> Result<()> {
    if links.len() != entries.len() {
        return Err(Error::Corrupt {
            op,
            detail: format!("{} chain links for {} entries", links.len(), entries.len()),
        });
    }
    Ok(())
}

enum Arg {
    S(String),
    I(i64),
}
