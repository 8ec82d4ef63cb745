//! Console logins: the operator sessions a browser holds as a cookie (`v1.<id>.<expiry>.<mac>`,
//! an HMAC-SHA256 under a key derived from the admin token), their CSRF tokens, and the
//! reader leases operator reads run under. A single replica keeps sessions in memory; the
//! replicas of a zone share them through the store and end them through the change feed.
//! The console's pages and login form are `api::console`.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use dashmap::DashMap;
use hmac::{Hmac, KeyInit, Mac};
use mcp_shared::time::{now, unix_ms};
use sha2::Sha256;

use crate::app::App;

/// Console sessions kept at once; the oldest is dropped past it.
const MAX_SESSIONS: usize = 64;
/// Ended sessions remembered (see [`Logins::forget`]).
const MAX_ENDED: usize = 1024;
/// Prefix of the CLI's root credential (`mcp-root login`'s): a session as a bearer.
pub(crate) const CLI_CREDENTIAL_PREFIX: &str = "mcpc_";
/// Key derivation context of console credentials.
const KEY_CONTEXT: &[u8] = b"mcp-root/console-session/v1";

type HmacSha256 = Hmac<Sha256>;

/// Console state shared through [`App`]: live cookie sessions and the operator's reader
/// leases (`inspect.rs`).
#[derive(Default)]
pub(crate) struct Logins {
    /// Session id → expiry (unix ms) and the operator who logged in: every session of a single
    /// replica; with replicas, the ones this replica has seen (the store holds the zone's).
    live: DashMap<String, (i64, crate::operators::OperatorId)>,
    /// Logins ended (logout) here or on another replica, with when: never admitted again,
    /// even from a store read that raced the logout.
    ended: DashMap<String, i64>,
    /// (target, profile) → the short-lived lease operator reads run under.
    pub(crate) readers: DashMap<(String, String), Arc<crate::leases::manager::LeaseEntry>>,
    /// Held while a reader lease is issued: panels that load at once share one lease rather
    /// than each issuing (and auditing) its own.
    pub(crate) issuing: tokio::sync::Mutex<()>,
}

/// A verified console session.
#[derive(Debug, Clone)]
pub(crate) struct ConsoleSession {
    pub(crate) id: String,
    pub(crate) expires_ms: i64,
    /// Who logged in.
    pub(crate) operator: crate::operators::OperatorId,
    /// A CLI's credential bound to its key (DPoP): its thumbprint, signed into the credential.
    /// Never a cookie's.
    pub(crate) dpop_jkt: Option<String>,
}

fn mac(key: &[u8], parts: &[&[u8]]) -> Option<[u8; 32]> {
    let mut m = <HmacSha256 as KeyInit>::new_from_slice(key).ok()?;
    for p in parts {
        m.update(p);
    }
    Some(m.finalize().into_bytes().into())
}

pub(crate) fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// The key console credentials are signed with, derived from the admin token (a new admin
/// token invalidates every console session).
fn key(app: &App) -> Option<[u8; 32]> {
    mac(app.admin_token.as_bytes(), &[KEY_CONTEXT])
}

/// The credential a cookie carries for session `id` expiring at `expires_ms`
/// (`v1.<id>.<expiry>.<mac>`), or a CLI presents bound to key `jkt`
/// (`v1.<id>.<expiry>.<jkt>.<mac>`).
pub(crate) fn credential(
    app: &App,
    id: &str,
    expires_ms: i64,
    jkt: Option<&str>,
) -> Option<String> {
    let body = match jkt {
        Some(jkt) => format!("v1.{id}.{expires_ms}.{jkt}"),
        None => format!("v1.{id}.{expires_ms}"),
    };
    let sig = mac(&key(app)?, &[body.as_bytes()])?;
    Some(format!("{body}.{}", b64(&sig)))
}

/// The CSRF token of session `id`.
pub(crate) fn csrf_token(app: &App, id: &str) -> Option<String> {
    let sig = mac(&key(app)?, &[b"csrf.", id.as_bytes()])?;
    Some(b64(&sig))
}

impl Logins {
    /// Verifies a cookie value: well-formed, signed by the zone's key, unexpired, and a
    /// session root still holds (with replicas: one the zone's store holds, which is how a
    /// session opened on another replica is found).
    pub(crate) async fn verify(&self, app: &App, value: &str) -> Option<ConsoleSession> {
        let parts: Vec<&str> = value.splitn(6, '.').collect();
        let (v, id, exp, jkt, sig) = match parts[..] {
            [v, id, exp, sig] => (v, id, exp, None, sig),
            [v, id, exp, jkt, sig] if jkt.len() <= 64 => (v, id, exp, Some(jkt), sig),
            _ => return None,
        };
        if v != "v1" || id.len() > 64 {
            return None;
        }
        let expires_ms: i64 = exp.parse().ok()?;
        let body = match jkt {
            Some(jkt) => format!("v1.{id}.{expires_ms}.{jkt}"),
            None => format!("v1.{id}.{expires_ms}"),
        };
        let sig = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(sig)
            .ok()?;
        let mut m = <HmacSha256 as KeyInit>::new_from_slice(&key(app)?).ok()?;
        m.update(body.as_bytes());
        m.verify_slice(&sig).ok()?;
        let now_ms = unix_ms(now());
        if expires_ms <= now_ms || self.ended.contains_key(id) {
            return None;
        }
        let (live, operator) = match self.live.get(id).map(|e| e.value().clone()) {
            Some(live) => live,
            // Only a cookie the zone's key signed gets here, so a forged id costs no query.
            None if app.zone.is_some() => match app.store.console_session(id, now_ms).await {
                Ok(Some((stored, name))) => {
                    let operator = crate::operators::OperatorId::named(&name);
                    self.live.insert(id.to_owned(), (stored, operator.clone()));
                    // A logout applied while the store was read wins.
                    if self.ended.contains_key(id) {
                        self.live.remove(id);
                        return None;
                    }
                    (stored, operator)
                }
                Ok(None) => return None,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot look a console session up; refused");
                    return None;
                }
            },
            None => return None,
        };
        (live == expires_ms).then(|| ConsoleSession {
            id: id.to_string(),
            expires_ms,
            operator,
            dpop_jkt: jkt.map(str::to_owned),
        })
    }

    pub(crate) async fn open(
        &self,
        app: &App,
        ttl: Duration,
        operator: crate::operators::OperatorId,
    ) -> Result<ConsoleSession, crate::store::Error> {
        let now_ms = unix_ms(now());
        self.live.retain(|_, (exp, _)| *exp > now_ms);
        let id = uuid::Uuid::now_v7().simple().to_string();
        let expires_ms = now_ms + ttl.as_millis() as i64;
        if let Some(zone) = &app.zone {
            // The zone keeps its newest MAX_SESSIONS; the others' caches drop the evicted
            // ones at their next re-read.
            for gone in app
                .store
                .open_console_session(
                    &id,
                    now_ms,
                    expires_ms,
                    &zone.replica_id,
                    operator.name(),
                    MAX_SESSIONS as i64,
                )
                .await?
            {
                self.live.remove(&gone);
            }
        }
        while self.live.len() >= MAX_SESSIONS {
            let oldest = self
                .live
                .iter()
                .min_by_key(|e| e.value().0)
                .map(|e| e.key().clone());
            match oldest {
                Some(k) => {
                    self.live.remove(&k);
                }
                None => break,
            }
        }
        self.live.insert(id.clone(), (expires_ms, operator.clone()));
        Ok(ConsoleSession {
            id,
            expires_ms,
            operator,
            dpop_jkt: None,
        })
    }

    /// Ends session `id`; with replicas, in the store and on every live replica before it
    /// returns.
    pub(crate) async fn close(&self, app: &App, id: &str) -> Result<(), crate::store::Error> {
        self.forget(id);
        if let Some(zone) = &app.zone {
            app.store.end_console_session(id).await?;
            zone.changed(crate::replica::zone::ChangeKind::Console, id, true)
                .await;
        }
        Ok(())
    }

    /// Ends every console session of operator `name` (revoked), here and, with replicas, in
    /// the store and on every live replica before it returns.
    pub(crate) async fn end_operator(
        &self,
        app: &App,
        name: &str,
    ) -> Result<(), crate::store::Error> {
        let here: Vec<String> = self
            .live
            .iter()
            .filter(|e| e.value().1.name() == name)
            .map(|e| e.key().clone())
            .collect();
        for id in &here {
            self.forget(id);
        }
        if let Some(zone) = &app.zone {
            for id in app.store.end_operator_console_sessions(name).await? {
                self.forget(&id);
                zone.changed(crate::replica::zone::ChangeKind::Console, &id, true)
                    .await;
            }
        }
        Ok(())
    }

    /// Session `id` ended (here, or on another replica: the change feed says so).
    pub(crate) fn forget(&self, id: &str) {
        if self.ended.len() >= MAX_ENDED {
            // The oldest half; a session ended that long ago has usually expired as well,
            // and the store no longer holds any of them.
            let mut at: Vec<i64> = self.ended.iter().map(|e| *e.value()).collect();
            at.sort_unstable();
            let cut = at[at.len() / 2];
            self.ended.retain(|_, t| *t > cut);
        }
        self.ended.insert(id.to_owned(), unix_ms(now()));
        self.live.remove(id);
    }

    /// Drops those of `ids` this replica holds that the zone's store no longer holds (ended
    /// on another replica, evicted or expired). Nothing to do on a single replica.
    pub(crate) async fn recheck(
        &self,
        app: &App,
        ids: &[String],
    ) -> Result<(), crate::store::Error> {
        if app.zone.is_none() {
            return Ok(());
        }
        let cached: Vec<String> = ids
            .iter()
            .filter(|id| self.live.contains_key(id.as_str()))
            .cloned()
            .collect();
        if cached.is_empty() {
            return Ok(());
        }
        let live = app
            .store
            .live_console_sessions(&cached, unix_ms(now()))
            .await?;
        for id in cached {
            if !live.contains(&id) {
                self.live.remove(&id);
            }
        }
        Ok(())
    }

    /// [`Logins::recheck`] for every session this replica holds.
    pub(crate) async fn recheck_all(&self, app: &App) -> Result<(), crate::store::Error> {
        let ids: Vec<String> = self.live.iter().map(|e| e.key().clone()).collect();
        self.recheck(app, &ids).await
    }
}
