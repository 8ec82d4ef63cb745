//! Operators: who acts on root's operator endpoints (the REST family's admin side, the
//! `mcp-root admin` CLI, the console). Each has a credential of their own
//! (`mcp-root admin operator add NAME` shows it once; root keeps its SHA-256), and every
//! operator action is one audit event naming the operator (`operator:<name>`), so "who
//! issued this bearer?" has an answer.
//!
//! The bootstrap credential, `<data_dir>/admin.token`, is operator [`ADMIN`]; it cannot be
//! revoked through the API (replace the file). Names are never reused, so an actor in the
//! trail always means one operator. A revoked operator's credential and console sessions
//! stop working at once, on every replica (the change feed, kind `operator`).

use std::sync::Arc;

use dashmap::DashMap;

use crate::roles::Grant;
use crate::store::{OperatorRow, Store};

/// The operator the bootstrap admin token (`<data_dir>/admin.token`) stands for.
pub const ADMIN: &str = "admin";
/// Prefix of named operators' credentials (the redactor knows it).
pub const OPERATOR_TOKEN_PREFIX: &str = "mcpo_";

/// Prefix of the names of people signed in through the OpenID provider:
/// `oidc:<issuer>#<sub>`.
pub const OIDC_PREFIX: &str = "oidc:";

/// An authenticated operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorId {
    name: Arc<str>,
}

impl OperatorId {
    /// The operator of the bootstrap admin token.
    pub fn admin() -> OperatorId {
        OperatorId::named(ADMIN)
    }

    pub fn named(name: &str) -> OperatorId {
        OperatorId { name: name.into() }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// A person the OpenID provider `issuer` knows as `subject`.
    pub fn oidc(issuer: &str, subject: &str) -> OperatorId {
        OperatorId::named(&format!("{OIDC_PREFIX}{issuer}#{subject}"))
    }

    /// The actor id events and records name: `operator:<name>`.
    pub fn actor_id(&self) -> String {
        format!("operator:{}", self.name)
    }
}

/// The active named operators by credential hash (the bootstrap `admin` is checked apart),
/// and what each holds.
#[derive(Default)]
pub struct Registry {
    by_hash: DashMap<String, OperatorId>,
    grants: DashMap<String, Arc<Grant>>,
}

impl Registry {
    /// The active operator a credential belongs to.
    pub fn authenticate(&self, token: &str) -> Option<OperatorId> {
        if !token.starts_with(OPERATOR_TOKEN_PREFIX) {
            return None;
        }
        self.by_hash
            .get(&crate::auth::token_hash(token))
            .map(|o| o.clone())
    }

    /// What an active operator holds: [`Grant::full`] for the bootstrap `admin`; `None` for a
    /// name that is not an active operator.
    pub fn grant(&self, name: &str) -> Option<Arc<Grant>> {
        if name == ADMIN {
            return Some(Arc::new(Grant::full()));
        }
        self.grants.get(name).map(|g| g.clone())
    }

    /// Whether `name` is an operator who may act now (the bootstrap `admin`, or a named
    /// operator not revoked).
    pub fn is_active(&self, name: &str) -> bool {
        name == ADMIN || self.grants.contains_key(name)
    }

    /// Reads the operators from the store (at start, on a change of the feed, and on every
    /// fallback tick with replicas).
    pub async fn reload(&self, store: &Store) -> Result<(), crate::store::Error> {
        let rows = store.load_operators().await?;
        self.load(&rows);
        Ok(())
    }

    /// Replaces the registry with the active operators of `rows`.
    pub(crate) fn load(&self, rows: &[OperatorRow]) {
        self.by_hash.retain(|hash, _| {
            rows.iter()
                .any(|r| r.revoked_at_ms.is_none() && &r.token_hash == hash)
        });
        let active = || rows.iter().filter(|r| r.revoked_at_ms.is_none());
        self.grants
            .retain(|name, _| active().any(|r| &r.name == name));
        for r in active() {
            // A person signed in through the OpenID provider has no credential of their own
            // (their console session and CLI credential are `logins`).
            if !r.name.starts_with(OIDC_PREFIX) {
                self.by_hash
                    .entry(r.token_hash.clone())
                    .or_insert_with(|| OperatorId::named(&r.name));
            }
            self.grants.insert(r.name.clone(), Arc::new(r.grant()));
        }
    }
}

impl OperatorRow {
    /// What this operator holds; a grant the store holds malformed (written by hand) is
    /// `viewer` only, with a warning, never more.
    pub fn grant(&self) -> Grant {
        Grant::from_stored(self.roles.as_deref(), self.profiles.as_deref()).unwrap_or_else(|e| {
            tracing::warn!(operator = %self.name, error = %e, "a stored grant cannot be read; viewer only");
            Grant::viewer()
        })
    }
}

/// Whether `name` may name an operator: 1 to 64 of `[a-z0-9._-]`, starting with a letter or
/// digit.
pub fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name.len() <= 64
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::roles::Role;

    #[test]
    fn names_are_short_lowercase_words() {
        for ok in ["ann", "ops-bot.2", "9lives", "a_b"] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in [
            "",
            "Ann",
            "-x",
            ".x",
            "a b",
            "a/b",
            &"x".repeat(65),
            "ann:1",
        ] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn the_registry_knows_active_operators_only() {
        let token = crate::auth::new_token(OPERATOR_TOKEN_PREFIX);
        let row = |revoked: bool| OperatorRow {
            name: "ann".into(),
            token_hash: crate::auth::token_hash(&token),
            created_at_ms: 1,
            created_by: "operator:admin".into(),
            revoked_at_ms: revoked.then_some(2),
            revoked_by: None,
            roles: Some("auditor".into()),
            profiles: None,
        };
        let r = Registry::default();
        r.load(&[row(false)]);
        assert_eq!(r.authenticate(&token), Some(OperatorId::named("ann")));
        let ann = r.grant("ann").unwrap();
        assert!(ann.holds(Role::Auditor) && !ann.holds(Role::Operator));
        assert!(!ann.may_issue("InfraOpsRead"));
        assert!(r.grant(ADMIN).unwrap().holds(Role::Admin));
        assert_eq!(r.authenticate("mcpo_other"), None);
        assert_eq!(r.authenticate("mcpl_not_an_operator"), None);
        r.load(&[row(true)]);
        assert_eq!(r.authenticate(&token), None);
        assert_eq!(r.grant("ann"), None);
    }
}
