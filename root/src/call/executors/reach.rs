//! How far a tool that reaches several targets goes: the enrolled targets of the lease's
//! subnet that are in the environment of the lease's own target. A lease on a `test` target
//! never reads a `production` hub because they share a subnet; the others are named, each
//! with why, so an answer never leaves a target silently out.

use mcp_shared::lease::SessionLease;
use serde_json::{Value, json};

use crate::app::App;

/// The targets a lease reaches beyond its own.
#[derive(Debug, Default)]
pub(crate) struct Reach {
    /// The environment the lease reaches (its target's; `None` when its target is not
    /// enrolled, and then it reaches nothing).
    pub(crate) environment: Option<String>,
    /// Enrolled targets of the subnet in that environment, sorted.
    pub(crate) members: Vec<String>,
    /// Enrolled targets of the subnet it does not reach, sorted, with why.
    pub(crate) excluded: Vec<(String, String)>,
}

impl Reach {
    /// The lease's reach over its subnet, as the enrolments stand now.
    pub(crate) fn of(app: &App, lease: &SessionLease) -> Reach {
        let environment = app
            .hubs
            .enrolments
            .get(&lease.target_id)
            .map(|e| e.row.environment.clone());
        let mut reach = Reach {
            environment: environment.clone(),
            ..Reach::default()
        };
        for e in app.hubs.enrolments.iter() {
            if e.row.subnet_id != lease.subnet_id {
                continue;
            }
            let id = e.row.target_id.clone();
            match &environment {
                Some(env) if *env == e.row.environment => reach.members.push(id),
                Some(env) => reach.excluded.push((
                    id,
                    format!(
                        "environment `{}` is outside the lease (its target is in `{env}`)",
                        e.row.environment
                    ),
                )),
                None => reach.excluded.push((
                    id,
                    format!("the lease's target `{}` is not enrolled", lease.target_id),
                )),
            }
        }
        reach.members.sort();
        reach.excluded.sort();
        reach
    }

    /// Whether `target_id` is within reach.
    pub(crate) fn contains(&self, target_id: &str) -> bool {
        self.members.iter().any(|m| m == target_id)
    }

    /// The excluded targets as answers carry them: `[{target_id, reason}]`.
    pub(crate) fn excluded_json(&self) -> Value {
        json!(
            self.excluded
                .iter()
                .map(|(t, why)| json!({ "target_id": t, "reason": why }))
                .collect::<Vec<_>>()
        )
    }
}
