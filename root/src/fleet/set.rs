//! The set of targets a run reaches: every enrolled target its selector names, resolved
//! against root's directory, in target-id order, with the SHA-256 of that list. A run freezes
//! its set when it starts (a read) or is previewed (a write); a write's execute resolves the
//! selector again and is refused when the set changed.

use sha2::{Digest, Sha256};

use crate::app::App;
use crate::hubs::selector::{Selector, SelectorError};
use crate::ops::error::Refusal;

/// Most targets one run reaches.
pub(crate) const MAX_TARGETS: usize = 20_000;

/// A resolved set: the target ids in order and their hash.
pub(crate) struct TargetSet {
    pub(crate) targets: Vec<String>,
    pub(crate) hash: String,
}

/// The set `selector` names now; refused when it names no target or more than
/// [`MAX_TARGETS`].
pub(crate) fn resolve(app: &App, selector: &Selector) -> Result<TargetSet, Refusal> {
    let mut targets: Vec<String> = app
        .hubs
        .enrolments
        .iter()
        .filter(|e| {
            let status = app.hubs.status(e.key());
            selector.matches(&e.subject(status))
        })
        .map(|e| e.key().clone())
        .collect();
    targets.sort();
    if targets.is_empty() {
        return Err(Refusal::bad_request(format!(
            "selector `{selector}` names no enrolled target"
        )));
    }
    if targets.len() > MAX_TARGETS {
        return Err(Refusal::bad_request(format!(
            "selector `{selector}` names {} targets; a run reaches at most {MAX_TARGETS}",
            targets.len()
        )));
    }
    let hash = hex::encode(Sha256::digest(targets.join("\n").as_bytes()));
    Ok(TargetSet { targets, hash })
}

/// Why a target is no longer within a run's reach.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReachError {
    /// The selector the run was started with no longer parses.
    #[error("the run's selector `{selector}`: {reason}")]
    Selector {
        selector: String,
        reason: SelectorError,
    },
    #[error("target `{target_id}` is no longer enrolled")]
    NotEnrolled { target_id: String },
    #[error(
        "target `{target_id}` no longer matches `{selector}` (environment `{environment}`, lifecycle {lifecycle}): it left the run's reach"
    )]
    LeftReach {
        target_id: String,
        selector: Selector,
        environment: String,
        lifecycle: &'static str,
    },
}

/// Whether `target_id` is still one `selector` names, now: a run's authority is its selector
/// at the time of each call, whatever it froze (`Err`: why not).
pub(crate) fn within(app: &App, selector: &str, target_id: &str) -> Result<(), ReachError> {
    let selector = Selector::parse(selector).map_err(|reason| ReachError::Selector {
        selector: selector.to_owned(),
        reason,
    })?;
    let Some(e) = app.hubs.enrolments.get(target_id) else {
        return Err(ReachError::NotEnrolled {
            target_id: target_id.to_owned(),
        });
    };
    let status = app.hubs.status(target_id);
    if selector.matches(&e.subject(status)) {
        Ok(())
    } else {
        Err(ReachError::LeftReach {
            target_id: target_id.to_owned(),
            selector,
            environment: e.row.environment.clone(),
            lifecycle: e.lifecycle.state.as_str(),
        })
    }
}

/// How `now` differs from `then`, in words: which targets joined and which left (the first
/// few of each).
pub(crate) fn difference(then: &[String], now: &[String]) -> String {
    let joined: Vec<&String> = now
        .iter()
        .filter(|t| then.binary_search(t).is_err())
        .collect();
    let left: Vec<&String> = then
        .iter()
        .filter(|t| now.binary_search(t).is_err())
        .collect();
    let few = |v: &[&String]| {
        let mut s = v
            .iter()
            .take(5)
            .map(|t| format!("`{t}`"))
            .collect::<Vec<_>>()
            .join(", ");
        if v.len() > 5 {
            s.push_str(&format!(" and {} more", v.len() - 5));
        }
        s
    };
    match (joined.is_empty(), left.is_empty()) {
        (false, false) => format!(
            "{} joined ({}), {} left ({})",
            joined.len(),
            few(&joined),
            left.len(),
            few(&left)
        ),
        (false, true) => format!("{} joined ({})", joined.len(), few(&joined)),
        (true, false) => format!("{} left ({})", left.len(), few(&left)),
        (true, true) => "no target joined or left".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_difference_names_who_joined_and_who_left() {
        let then = ids(&["a", "b", "c"]);
        assert_eq!(
            difference(&then, &ids(&["a", "c", "d"])),
            "1 joined (`d`), 1 left (`b`)"
        );
        assert_eq!(difference(&then, &ids(&["a", "b"])), "1 left (`c`)");
        let many: Vec<String> = (0..8).map(|i| format!("n{i}")).collect();
        let mut now = then.clone();
        now.extend(many);
        now.sort();
        assert_eq!(
            difference(&then, &now),
            "8 joined (`n0`, `n1`, `n2`, `n3`, `n4` and 3 more)"
        );
    }
}
