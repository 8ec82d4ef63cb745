//! Roles: what an operator may do on root's operator routes, and the capability profiles they
//! may issue leases for (an operator cannot hand out more than they hold).
//!
//! Every operator holds `viewer`; the other roles are apart from each other (an `operator`
//! who issues leases does not read the audit trail or approve sign-ins unless also given
//! `auditor` or `approver`), and `admin` holds them all. A [`Grant`] is an operator's roles
//! and profiles; named operators keep theirs in the store, the bootstrap admin token holds
//! [`Grant::full`].

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

/// A role an operator holds; each route declares the one it needs.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Console, targets, runs and usage reads.
    Viewer,
    /// The audit trail: events, export, proofs, checkpoints, sinks and witnesses.
    Auditor,
    /// Approves OAuth sign-ins and writes that need an approval (NLU changes).
    Approver,
    /// Leases, skill commands, fleet runs and the lifecycle of targets.
    Operator,
    /// Operators and roles, enrolment and retirement, descriptors and keys.
    Admin,
}

impl Role {
    /// Every role, least first.
    pub const ALL: [Role; 5] = [
        Role::Viewer,
        Role::Auditor,
        Role::Approver,
        Role::Operator,
        Role::Admin,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Auditor => "auditor",
            Role::Approver => "approver",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Role {
    type Err = GrantError;
    fn from_str(s: &str) -> Result<Role, GrantError> {
        Role::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| GrantError::UnknownRole(s.to_owned()))
    }
}

/// The capability profiles an operator may issue leases (and approve sign-ins) for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Profiles {
    /// Every profile of the catalog (`*`).
    All,
    Only(BTreeSet<String>),
}

/// Why a grant was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrantError {
    #[error("unknown role `{0}` (roles: viewer, auditor, approver, operator, admin)")]
    UnknownRole(String),
    #[error("a grant names at least one role")]
    NoRole,
    #[error("`{0}` is not a capability profile name")]
    BadProfile(String),
}

/// What an operator holds: roles, and the profiles they may hand out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    roles: BTreeSet<Role>,
    profiles: Profiles,
}

impl Grant {
    /// Everything: the bootstrap admin token (break-glass), and an operator stored before
    /// roles existed (who could do everything then).
    pub fn full() -> Grant {
        Grant {
            roles: BTreeSet::from([Role::Admin]),
            profiles: Profiles::All,
        }
    }

    /// `viewer` and no profile: the least any operator holds.
    pub fn viewer() -> Grant {
        Grant {
            roles: BTreeSet::from([Role::Viewer]),
            profiles: Profiles::Only(BTreeSet::new()),
        }
    }

    /// `roles` (at least one) and `profiles` (`*` for all).
    pub fn new<R, P>(roles: R, profiles: P) -> Result<Grant, GrantError>
    where
        R: IntoIterator<Item = Role>,
        P: IntoIterator,
        P::Item: AsRef<str>,
    {
        let roles: BTreeSet<Role> = roles.into_iter().collect();
        if roles.is_empty() {
            return Err(GrantError::NoRole);
        }
        let mut only = BTreeSet::new();
        let mut all = false;
        for p in profiles {
            let p = p.as_ref().trim();
            if p == "*" {
                all = true;
            } else if !p.is_empty()
                && p.len() <= 64
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
            {
                only.insert(p.to_owned());
            } else {
                return Err(GrantError::BadProfile(p.to_owned()));
            }
        }
        let profiles = if all {
            Profiles::All
        } else {
            Profiles::Only(only)
        };
        Ok(Grant { roles, profiles })
    }

    /// The stored form (`roles`, `profiles` columns: comma-separated, `*` for all profiles);
    /// `None` roles is an operator stored before roles existed: [`Grant::full`].
    pub fn from_stored(roles: Option<&str>, profiles: Option<&str>) -> Result<Grant, GrantError> {
        let Some(roles) = roles else {
            return Ok(Grant::full());
        };
        let roles = roles
            .split(',')
            .filter(|r| !r.is_empty())
            .map(str::parse)
            .collect::<Result<Vec<Role>, _>>()?;
        let profiles = profiles.unwrap_or("");
        Grant::new(roles, profiles.split(',').filter(|p| !p.is_empty()))
    }

    /// `(roles, profiles)` as stored.
    pub fn to_stored(&self) -> (String, String) {
        let roles: Vec<&str> = self.roles.iter().map(|r| r.as_str()).collect();
        (roles.join(","), self.profile_names().join(","))
    }

    /// Whether this grant holds `needed`: `admin` holds every role, every grant `viewer`.
    pub fn holds(&self, needed: Role) -> bool {
        needed == Role::Viewer || self.roles.contains(&Role::Admin) || self.roles.contains(&needed)
    }

    /// Whether a lease of `profile` may be issued (or a sign-in approved) under this grant.
    pub fn may_issue(&self, profile: &str) -> bool {
        match &self.profiles {
            Profiles::All => true,
            Profiles::Only(p) => p.contains(profile),
        }
    }

    /// Whether everything `other` grants is held here: an operator gives another no more than
    /// they hold.
    pub fn covers(&self, other: &Grant) -> bool {
        other.roles.iter().all(|r| self.holds(*r))
            && match (&self.profiles, &other.profiles) {
                (Profiles::All, _) => true,
                (Profiles::Only(_), Profiles::All) => false,
                (Profiles::Only(mine), Profiles::Only(theirs)) => theirs.is_subset(mine),
            }
    }

    /// The roles, least first.
    pub fn roles(&self) -> Vec<Role> {
        self.roles.iter().copied().collect()
    }

    /// The profiles' names, `*` for all.
    pub fn profile_names(&self) -> Vec<String> {
        match &self.profiles {
            Profiles::All => vec!["*".to_owned()],
            Profiles::Only(p) => p.iter().cloned().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(roles: &[Role], profiles: &[&str]) -> Grant {
        Grant::new(roles.iter().copied(), profiles).unwrap()
    }

    #[test]
    fn admin_holds_every_role_and_everyone_holds_viewer() {
        let admin = grant(&[Role::Admin], &[]);
        let auditor = grant(&[Role::Auditor], &[]);
        for r in Role::ALL {
            assert!(admin.holds(r), "{r}");
            assert_eq!(auditor.holds(r), matches!(r, Role::Viewer | Role::Auditor));
        }
        let op = grant(&[Role::Operator], &["InfraOpsRead"]);
        assert!(!op.holds(Role::Approver) && !op.holds(Role::Auditor));
    }

    #[test]
    fn profiles_bound_what_is_issued_and_what_is_given() {
        let op = grant(&[Role::Operator], &["InfraOpsRead", "InfraOpsControl"]);
        assert!(op.may_issue("InfraOpsRead"));
        assert!(!op.may_issue("ProfileOpsControl"));
        assert!(Grant::full().may_issue("ProfileOpsControl"));
        assert!(op.covers(&grant(&[Role::Viewer], &["InfraOpsRead"])));
        assert!(!op.covers(&grant(&[Role::Operator], &["*"])));
        assert!(!op.covers(&grant(&[Role::Auditor], &[])));
        assert!(Grant::full().covers(&op));
    }

    #[test]
    fn the_stored_form_round_trips_and_bad_forms_are_named() {
        let g = grant(&[Role::Operator, Role::Auditor], &["A", "B"]);
        let (r, p) = g.to_stored();
        assert_eq!((r.as_str(), p.as_str()), ("auditor,operator", "A,B"));
        assert_eq!(Grant::from_stored(Some(&r), Some(&p)), Ok(g));
        assert_eq!(Grant::from_stored(None, None), Ok(Grant::full()));
        assert_eq!(
            Grant::from_stored(Some("root"), None),
            Err(GrantError::UnknownRole("root".into()))
        );
        assert_eq!(Grant::new([], ["*"]), Err(GrantError::NoRole));
        assert_eq!(
            Grant::new([Role::Viewer], ["a b"]),
            Err(GrantError::BadProfile("a b".into()))
        );
    }
}
