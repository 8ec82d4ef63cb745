//! Descriptive answers written by the door as the descriptor set keeps them.
//!
//! A descriptive tool's answer is the same for every call of the same set, tool, entry and
//! freshness, and the set keeps it already serialized (`descriptors::DescriptiveAnswer`).
//! Its MCP result carries it twice: as structured content and as that content's JSON text.
//! Building a `Value` tree of it for every call and serializing both again cost more than
//! the rest of a governed call (answers here are 12–14 KB). So the direct answer to a
//! `tools/call` stands for a kept answer with two placeholders ([`Kept::stage`]), and the
//! door, serializing that small message, writes the kept bytes in their place
//! ([`Kept::take`], [`splice`]). Tasks and every other path build the full result.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use dashmap::DashMap;
use rmcp::model::{CallToolResult, ContentBlock, ServerJsonRpcMessage, ServerResult};
use serde_json::Value;

use crate::descriptors::DescriptiveAnswer;

/// Starts a placeholder: a private-use character, which no descriptor text carries in this
/// position and serde_json writes unescaped.
const MARK: char = '\u{E000}';
/// A staged answer not written within this long lost its client; it is dropped.
const STALE: Duration = Duration::from_secs(60);
/// Staged answers past which stale ones are looked for.
const SWEEP_AT: usize = 1024;

/// Kept answers staged for the door, by placeholder number.
#[derive(Default)]
pub(crate) struct Kept {
    next: AtomicU64,
    staged: DashMap<u64, (Arc<DescriptiveAnswer>, Instant)>,
}

impl Kept {
    /// A tool result standing for `answer`: its structured content and text are
    /// placeholders the door fills in when it writes the message.
    pub(crate) fn stage(&self, answer: Arc<DescriptiveAnswer>) -> CallToolResult {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        if self.staged.len() >= SWEEP_AT && id.is_multiple_of(64) {
            self.staged.retain(|_, (_, at)| at.elapsed() < STALE);
        }
        self.staged.insert(id, (answer, Instant::now()));
        let mut res = CallToolResult::success(vec![ContentBlock::text(text_placeholder(id))]);
        // An object: rmcp writes other structured content as text for older revisions.
        res.structured_content = Some(serde_json::json!({ structured_key(): id }));
        res
    }

    /// The staged answer `message` stands for, taken (each is written once): `None` for
    /// any other message. A placeholder whose answer is gone is an error: the door answers
    /// with that rather than write the placeholder.
    pub(crate) fn take(
        &self,
        message: &ServerJsonRpcMessage,
    ) -> Option<Result<Staged, StagedLost>> {
        let ServerJsonRpcMessage::Response(r) = message else {
            return None;
        };
        let ServerResult::CallToolResult(res) = &r.result else {
            return None;
        };
        let Some(Value::Object(m)) = &res.structured_content else {
            return None;
        };
        let id = match m.iter().next() {
            Some((k, v)) if m.len() == 1 && *k == structured_key() => v.as_u64()?,
            _ => return None,
        };
        Some(
            self.staged
                .remove(&id)
                .map(|(_, (answer, _))| Staged { id, answer })
                .ok_or(StagedLost(id)),
        )
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.staged.len()
    }
}

/// A staged answer taken for writing.
pub(crate) struct Staged {
    id: u64,
    answer: Arc<DescriptiveAnswer>,
}

/// A placeholder whose answer was dropped before the door wrote it.
#[derive(Debug, thiserror::Error)]
#[error("the kept answer {0} was dropped before it was written")]
pub(crate) struct StagedLost(u64);

/// The one member of the structured content's placeholder (its value: the number).
fn structured_key() -> String {
    format!("{MARK}kept")
}

fn text_placeholder(id: u64) -> String {
    format!("{MARK}kept:{id}")
}

/// `bytes` (the message serialized, placeholders in it) with the staged answer's structured
/// content and text written in place of their placeholders.
pub(crate) fn splice(bytes: &[u8], staged: &Staged) -> Option<Vec<u8>> {
    let a = &staged.answer;
    let parts = [
        (
            format!("{{\"{}\":{}}}", structured_key(), staged.id),
            a.text.as_bytes(),
        ),
        (
            format!("\"{}\"", text_placeholder(staged.id)),
            a.text_literal.as_bytes(),
        ),
    ];
    let mut at: Vec<(usize, usize, &[u8])> = parts
        .iter()
        .map(|(needle, with)| Some((find(bytes, needle.as_bytes())?, needle.len(), *with)))
        .collect::<Option<_>>()?;
    at.sort_by_key(|(pos, ..)| *pos);
    let mut out = Vec::with_capacity(bytes.len() + a.text.len() + a.text_literal.len());
    let mut from = 0;
    for (pos, len, with) in at {
        out.extend_from_slice(&bytes[from..pos]);
        out.extend_from_slice(with);
        from = pos + len;
    }
    out.extend_from_slice(&bytes[from..]);
    Some(out)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{JsonRpcResponse, JsonRpcVersion2_0, NumberOrString};
    use serde_json::json;

    fn answer(value: Value) -> Arc<DescriptiveAnswer> {
        let text = serde_json::to_string(&value).unwrap();
        Arc::new(DescriptiveAnswer {
            text_literal: serde_json::to_string(&text).unwrap().into(),
            text: text.into(),
            value,
        })
    }

    fn message(result: CallToolResult) -> ServerJsonRpcMessage {
        ServerJsonRpcMessage::Response(JsonRpcResponse {
            jsonrpc: JsonRpcVersion2_0,
            id: NumberOrString::Number(7),
            result: ServerResult::CallToolResult(result),
        })
    }

    #[test]
    fn the_spliced_message_is_the_one_built_in_full() {
        let value = json!({ "data": { "name": "sdk", "note": "quotes \" and \\ and\nlines, ünïcode" }, "stale": false });
        let kept = Kept::default();
        let meta: rmcp::model::MetaObject =
            serde_json::from_value(json!({ "event_id": "e1" })).unwrap();
        let staged = message(
            kept.stage(answer(value.clone()))
                .with_meta(Some(meta.clone())),
        );
        let bytes = serde_json::to_vec(&staged).unwrap();
        let taken = kept.take(&staged).expect("a staged answer").unwrap();
        let spliced = splice(&bytes, &taken).expect("both placeholders");

        let mut full = CallToolResult::success(vec![ContentBlock::text(
            serde_json::to_string(&value).unwrap(),
        )]);
        full.structured_content = Some(value);
        let full = serde_json::to_value(message(full.with_meta(Some(meta)))).unwrap();
        let spliced: Value = serde_json::from_slice(&spliced).unwrap();
        assert_eq!(spliced, full);
        assert_eq!(kept.len(), 0, "written once, then gone");
        assert!(matches!(kept.take(&staged), Some(Err(StagedLost(_)))));
    }

    #[test]
    fn other_messages_and_plain_results_are_not_taken() {
        let kept = Kept::default();
        let mut plain = CallToolResult::success(vec![ContentBlock::text("kept:1")]);
        plain.structured_content = Some(json!({ "kept": 1 }));
        assert!(kept.take(&message(plain)).is_none());
        let mut two = CallToolResult::success(vec![]);
        two.structured_content = Some(json!({ structured_key(): 1, "other": 2 }));
        assert!(kept.take(&message(two)).is_none());
    }

    #[test]
    fn answers_never_written_are_dropped_after_a_while() {
        let kept = Kept::default();
        let Some(long_ago) = Instant::now().checked_sub(STALE * 2) else {
            return; // a machine up for less than two minutes cannot date one back
        };
        for id in 0..SWEEP_AT as u64 {
            kept.staged
                .insert(u64::MAX - id, (answer(json!({})), long_ago));
        }
        for _ in 0..64 {
            kept.stage(answer(json!({})));
        }
        assert_eq!(kept.len(), 64, "the stale ones went, the recent ones stay");
    }
}
