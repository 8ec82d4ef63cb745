//! `[operators]`: how people sign in to operate root. `[operators.oidc]` names the
//! organization's OpenID provider and maps its groups (or named people) to roles and the
//! capability profiles they may hand out (`crate::roles`).

use std::path::PathBuf;

use serde::Deserialize;

use super::ConfigError;
use crate::roles::{Grant, Role};

/// `[operators]`.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct OperatorsConfig {
    /// Sign-in with the organization's OpenID provider; off when absent.
    pub oidc: Option<OidcConfig>,
}

/// `[operators.oidc]`: the OpenID provider operators sign in with (console: authorization
/// code with PKCE; CLI: `mcp-root login`, a loopback redirect or the device grant).
#[derive(Debug, Clone, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OidcConfig {
    /// The provider's issuer URL (its discovery document is `<issuer>/.well-known/openid-configuration`).
    pub issuer: String,
    /// Root's client id at the provider.
    pub client_id: String,
    /// A file holding the client secret (a confidential client); none: a public client
    /// (PKCE alone).
    #[serde(default)]
    pub client_secret_file: Option<PathBuf>,
    /// Scopes asked for besides `openid`.
    #[serde(default = "default_scopes")]
    pub scopes: Vec<String>,
    /// The ID token claim carrying the person's groups (a list of strings).
    #[serde(default = "default_groups_claim")]
    pub groups_claim: String,
    /// The redirect URI registered at the provider (`<root>/ui/oidc/callback`). Default: the
    /// request's own scheme and host (checked against `allowed_hosts`).
    #[serde(default)]
    pub redirect_url: Option<String>,
    /// How often each signed-in person is checked against the provider (their refresh token
    /// used): someone removed there loses access here within this many seconds.
    #[serde(default = "default_check_interval")]
    pub check_interval_sec: u64,
    /// How long the CLI's root credential from `mcp-root login` lasts, in seconds.
    #[serde(default = "default_cli_ttl")]
    pub cli_credential_ttl_sec: u64,
    /// Who gets which roles: every rule that matches adds its roles and profiles. A person
    /// no rule matches cannot sign in.
    #[serde(default)]
    pub roles: Vec<RoleRule>,
}

/// `[[operators.oidc.roles]]`: a group (or one person, by email or subject) and what it holds.
#[derive(Debug, Clone, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RoleRule {
    /// A value of the groups claim.
    #[serde(default)]
    pub group: Option<String>,
    /// A person's verified email.
    #[serde(default)]
    pub email: Option<String>,
    /// A person's subject (`sub`) at the provider.
    #[serde(default)]
    pub subject: Option<String>,
    /// Roles given (`viewer`, `auditor`, `approver`, `operator`, `admin`).
    pub roles: Vec<Role>,
    /// Capability profiles these people may issue leases for (`*`: all); none by default.
    #[serde(default)]
    pub profiles: Vec<String>,
}

fn default_scopes() -> Vec<String> {
    vec!["email".into(), "profile".into(), "offline_access".into()]
}

fn default_groups_claim() -> String {
    "groups".into()
}

fn default_check_interval() -> u64 {
    300
}

fn default_cli_ttl() -> u64 {
    3600
}

/// Who signed in, as the provider's ID token says.
#[derive(Debug, Clone, Default)]
pub struct Person<'a> {
    pub subject: &'a str,
    pub email: Option<&'a str>,
    pub groups: &'a [String],
}

impl OidcConfig {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |m: String| Err(ConfigError::Invalid(format!("[operators.oidc] {m}")));
        match url::Url::parse(&self.issuer) {
            Ok(u) if matches!(u.scheme(), "https" | "http") && u.query().is_none() => {}
            _ => return invalid(format!("issuer `{}` is not an http(s) URL", self.issuer)),
        }
        if self.client_id.is_empty() {
            return invalid("client_id must not be empty".into());
        }
        if !(10..=3600).contains(&self.check_interval_sec) {
            return invalid(format!(
                "check_interval_sec {} is not within 10..=3600",
                self.check_interval_sec
            ));
        }
        if !(60..=86_400).contains(&self.cli_credential_ttl_sec) {
            return invalid(format!(
                "cli_credential_ttl_sec {} is not within 60..=86400",
                self.cli_credential_ttl_sec
            ));
        }
        if self.roles.is_empty() {
            return invalid("names no [[operators.oidc.roles]]: no one could sign in".into());
        }
        for (i, r) in self.roles.iter().enumerate() {
            let keys = [&r.group, &r.email, &r.subject]
                .iter()
                .filter(|k| k.is_some())
                .count();
            if keys != 1 {
                return invalid(format!(
                    "roles[{i}] must name exactly one of group, email, subject"
                ));
            }
            if let Err(e) = Grant::new(r.roles.iter().copied(), &r.profiles) {
                return invalid(format!("roles[{i}]: {e}"));
            }
        }
        Ok(())
    }

    /// What `person` holds: the union of every rule that matches; `None` when none does.
    pub fn grant_for(&self, person: &Person<'_>) -> Option<Grant> {
        let matching: Vec<&RoleRule> = self
            .roles
            .iter()
            .filter(|r| {
                r.group.as_ref().is_some_and(|g| person.groups.contains(g))
                    || r.email
                        .as_deref()
                        .is_some_and(|e| person.email.is_some_and(|p| p.eq_ignore_ascii_case(e)))
                    || r.subject.as_deref() == Some(person.subject)
            })
            .collect();
        if matching.is_empty() {
            return None;
        }
        let roles = matching.iter().flat_map(|r| r.roles.iter().copied());
        let profiles = matching.iter().flat_map(|r| r.profiles.iter());
        // Each rule was checked at load (`validate`): the union is a grant.
        Grant::new(roles, profiles).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(rules: &str) -> OidcConfig {
        toml::from_str(&format!(
            "issuer = \"https://idp.example\"\nclient_id = \"root\"\n{rules}"
        ))
        .unwrap()
    }

    #[test]
    fn groups_and_people_map_to_the_union_of_their_rules() {
        let c = config(
            r#"
            [[roles]]
            group = "sre"
            roles = ["operator"]
            profiles = ["InfraOpsRead"]
            [[roles]]
            email = "Ann@Example.test"
            roles = ["approver"]
            "#,
        );
        c.validate().unwrap();
        let groups = vec!["sre".to_owned()];
        let ann = Person {
            subject: "1",
            email: Some("ann@example.test"),
            groups: &groups,
        };
        let g = c.grant_for(&ann).unwrap();
        assert!(g.holds(Role::Operator) && g.holds(Role::Approver) && !g.holds(Role::Admin));
        assert!(g.may_issue("InfraOpsRead") && !g.may_issue("AdaOSDevWrite"));
        let stranger = Person {
            subject: "2",
            email: None,
            groups: &[],
        };
        assert!(c.grant_for(&stranger).is_none());
    }

    #[test]
    fn a_rule_names_one_key_and_some_role() {
        let two = config("[[roles]]\ngroup = \"a\"\nemail = \"b@c\"\nroles = [\"viewer\"]");
        assert!(two.validate().is_err());
        let none = config("[[roles]]\ngroup = \"a\"\nroles = []");
        assert!(none.validate().is_err());
        assert!(config("").validate().is_err(), "no rule: no one signs in");
    }
}
