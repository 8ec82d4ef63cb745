//! Cursor pagination for the operator's fleet-sized lists (targets, leases): a page size
//! (`limit`, 1..=1000, 100 when absent) and an opaque cursor naming the last item of the page
//! before, so a page is the same whatever was added or removed ahead of it (keyset paging, no
//! offsets). The audit trail pages by sequence number on its own (`api::audit`).

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::api::error::ApiError;

/// Items on a page when the request names no `limit`.
pub(crate) const DEFAULT_LIMIT: usize = 100;
/// Most items on one page.
pub(crate) const MAX_LIMIT: usize = 1000;

/// The page size asked for, checked.
pub(crate) fn limit(asked: Option<usize>) -> Result<usize, ApiError> {
    match asked {
        None => Ok(DEFAULT_LIMIT),
        Some(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n),
        Some(_) => Err(ApiError::bad_request(format!(
            "limit must be between 1 and {MAX_LIMIT}"
        ))),
    }
}

/// A cursor of list `kind` (`t` targets, `l` leases) after the item whose sort key is `key`.
pub(crate) fn cursor(kind: &str, key: &str) -> String {
    format!("{kind}.{}", URL_SAFE_NO_PAD.encode(key))
}

/// The sort key a cursor of list `kind` names; a cursor of another list, or not one at all,
/// is a `400`.
pub(crate) fn after(kind: &str, cursor: &str) -> Result<String, ApiError> {
    cursor
        .strip_prefix(kind)
        .and_then(|c| c.strip_prefix('.'))
        .and_then(|c| URL_SAFE_NO_PAD.decode(c).ok())
        .and_then(|k| String::from_utf8(k).ok())
        .ok_or_else(|| {
            ApiError::bad_request("invalid cursor (take next_cursor from a page of this list)")
        })
}

/// Whether a filter, if given, names `have`.
pub(crate) fn admits(filter: &Option<String>, have: &str) -> bool {
    filter.as_deref().is_none_or(|want| want == have)
}

/// How many of `items` have each status.
pub(crate) fn by_status<T>(
    items: &[T],
    status: impl Fn(&T) -> &'static str,
) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for t in items {
        *counts.entry(status(t).to_string()).or_insert(0) += 1;
    }
    counts
}

/// One page of `items` already in list order: those that `follow` the cursor's position
/// `after` (its key, parsed once), at most `limit`, and the cursor of the next page (by
/// `key`) if more come.
pub(crate) fn page<T, K>(
    items: Vec<T>,
    kind: &str,
    after: Option<K>,
    limit: usize,
    key: impl Fn(&T) -> String,
    follows: impl Fn(&K, &T) -> bool,
) -> (Vec<T>, Option<String>) {
    let mut rest = items
        .into_iter()
        .skip_while(|t| after.as_ref().is_some_and(|a| !follows(a, t)))
        .peekable();
    let mut taken = Vec::with_capacity(limit.min(256));
    while taken.len() < limit {
        match rest.next() {
            Some(t) => taken.push(t),
            None => break,
        }
    }
    let next = match (rest.peek(), taken.last()) {
        (Some(_), Some(last)) => Some(cursor(kind, &key(last))),
        _ => None,
    };
    (taken, next)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_follow_one_another_without_gaps_or_repeats() {
        let ids: Vec<String> = (0..25).map(|i| format!("t{i:02}")).collect();
        let mut seen = Vec::new();
        let mut at: Option<String> = None;
        loop {
            let after_key = at.as_deref().map(|c| after("t", c).unwrap());
            let (items, next) = page(
                ids.clone(),
                "t",
                after_key,
                10,
                |s| s.clone(),
                |a: &String, s| s > a,
            );
            seen.extend(items);
            match next {
                Some(c) => at = Some(c),
                None => break,
            }
        }
        assert_eq!(seen, ids);
    }

    #[test]
    fn a_cursor_of_another_list_or_garbage_is_refused() {
        let c = cursor("l", "x");
        assert!(after("t", &c).is_err());
        assert!(after("t", "t.%%%").is_err());
        assert_eq!(after("l", &c).unwrap(), "x");
        assert!(limit(Some(0)).is_err());
        assert!(limit(Some(1001)).is_err());
        assert_eq!(limit(None).unwrap(), DEFAULT_LIMIT);
    }

    #[test]
    fn a_last_page_exactly_full_has_no_next_cursor() {
        let ids: Vec<String> = (0..10).map(|i| i.to_string()).collect();
        let (items, next) = page(ids, "t", None::<String>, 10, |s| s.clone(), |_, _| true);
        assert_eq!(items.len(), 10);
        assert!(next.is_none());
    }
}
