//! Checks a verifiable export of the audit trail offline, with no database and no running
//! root: `mcp-root audit verify-export FILE --checkpoint CP --key KEY`. The export
//! (`mcp-root admin audit export --verifiable`) has one JSON object per line, `{"seq",
//! "prev_hash", "hash", "event"}`, from the first event on, in order.
//!
//! Each line is checked against the chain. Its sequence number must be the next one, its
//! `prev_hash` must be the previous line's `hash`, and its `hash` must be the chain hash of
//! that `prev_hash` and the event's canonical JSON. The first line that fails is named: a
//! changed byte anywhere shows there, in the event it belongs to. The first `tree_size`
//! events of the checkpoint (whose signature must verify with the key) must then hash to its
//! root. A history that was rewritten consistently, and so passes the chain, fails here.

use std::io::BufRead;

use serde_json::Value;

use super::checkpoint::{self, CheckpointError};
use super::tree;
use super::writer::{GENESIS_HASH, chain_hash};

/// What a verified export held.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Verified {
    /// Lines (events) checked.
    pub events: u64,
    /// The checkpoint's tree size: these first events match its signed root.
    pub checkpoint_size: u64,
    /// Hex.
    pub checkpoint_root: String,
}

/// Why an export does not verify.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    #[error("cannot read the export: {0}")]
    Read(#[from] std::io::Error),
    #[error("line {line}: not an exported event ({why})")]
    Line { line: u64, why: String },
    /// A line that does not continue the chain: `event` names it when it has an id.
    #[error("line {line} (seq {seq}{}): {why}", event.as_deref().map(|e| format!(", event {e}")).unwrap_or_default())]
    Broken {
        line: u64,
        seq: i64,
        event: Option<String>,
        why: String,
    },
    #[error(
        "the export ends after {events} events; the checkpoint covers {size}: export the whole trail"
    )]
    Short { events: u64, size: u64 },
    #[error(
        "the export's first {size} events do not hash to the checkpoint's root {expected} (they hash to {found}): the trail was rewritten"
    )]
    Root {
        size: u64,
        expected: String,
        found: String,
    },
    #[error(transparent)]
    Tree(#[from] tree::TreeError),
}

/// One line of the export, parsed.
struct Line {
    seq: i64,
    prev_hash: String,
    hash: String,
    event: Value,
}

fn parse_line(n: u64, text: &str) -> Result<Line, ExportError> {
    let bad = |why: &str| ExportError::Line {
        line: n,
        why: why.to_owned(),
    };
    let v: Value = serde_json::from_str(text).map_err(|e| bad(&e.to_string()))?;
    let text_of = |k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| bad(&format!("no `{k}`")))
    };
    Ok(Line {
        seq: v
            .get("seq")
            .and_then(Value::as_i64)
            .ok_or_else(|| bad("no `seq`"))?,
        prev_hash: text_of("prev_hash")?,
        hash: text_of("hash")?,
        event: v.get("event").cloned().ok_or_else(|| bad("no `event`"))?,
    })
}

/// Verifies the export read from `export` against the checkpoint `note` signed by
/// `verifier_key` (see the module's header).
pub fn verify(
    export: impl BufRead,
    note: &str,
    verifier_key: &str,
) -> Result<Verified, ExportError> {
    let cp = checkpoint::open(note, verifier_key)?;
    let size = cp.size();
    let mut leaves: Vec<[u8; 32]> = Vec::with_capacity(size.min(10_000_000) as usize);
    let mut prev = GENESIS_HASH.to_owned();
    let mut n = 0u64;
    for text in export.lines() {
        let text = text?;
        if text.trim().is_empty() {
            continue;
        }
        n += 1;
        let line = parse_line(n, &text)?;
        let broken = |why: String| ExportError::Broken {
            line: n,
            seq: line.seq,
            event: line.event["event_id"].as_str().map(str::to_owned),
            why,
        };
        if line.seq != n as i64 {
            return Err(broken(format!(
                "expected seq {n}: an event is missing or out of order"
            )));
        }
        if line.prev_hash != prev {
            return Err(broken(
                "its prev_hash is not the previous event's hash".to_owned(),
            ));
        }
        let canonical =
            String::from_utf8(mcp_shared::canonical::to_vec(&line.event)).unwrap_or_default();
        if chain_hash(&line.prev_hash, &canonical) != line.hash {
            return Err(broken(
                "its content does not match its hash: it changed after it was written".to_owned(),
            ));
        }
        if n <= size {
            let bytes: [u8; 32] = hex::decode(&line.hash)
                .ok()
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| broken("its hash is not 32 bytes of hex".to_owned()))?;
            leaves.push(bytes);
        }
        prev = line.hash;
    }
    if n < size {
        return Err(ExportError::Short { events: n, size });
    }
    let (_, root) = tree::root_of(leaves)?;
    if root != *cp.hash() {
        return Err(ExportError::Root {
            size,
            expected: hex::encode(cp.hash().0),
            found: hex::encode(root.0),
        });
    }
    Ok(Verified {
        events: n,
        checkpoint_size: size,
        checkpoint_root: hex::encode(root.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::checkpoint::LogKey;
    use crate::secrets::MasterKey;

    fn key(dir: &std::path::Path, name: &str) -> LogKey {
        let (master, _) = MasterKey::load_or_create(&dir.join(name)).expect("master key");
        LogKey::derive(&master, "zone-test")
    }

    /// `n` exported events, chained as root chains them.
    fn export(n: usize) -> Vec<String> {
        let mut prev = GENESIS_HASH.to_owned();
        (1..=n)
            .map(|seq| {
                let event = serde_json::json!({ "event_id": format!("e{seq}"), "tool_id": "hub.get_status", "n": seq });
                let canonical = String::from_utf8(mcp_shared::canonical::to_vec(&event)).unwrap();
                let hash = chain_hash(&prev, &canonical);
                let line = serde_json::json!({ "seq": seq, "prev_hash": prev, "hash": hash, "event": event });
                prev = hash;
                line.to_string()
            })
            .collect()
    }

    fn note_over(key: &LogKey, lines: &[String], size: usize) -> String {
        let leaves = lines[..size].iter().map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            let b: [u8; 32] = hex::decode(v["hash"].as_str().unwrap())
                .unwrap()
                .try_into()
                .unwrap();
            b
        });
        let (n, root) = tree::root_of(leaves).unwrap();
        key.sign(n, root)
    }

    fn check(lines: &[String], note: &str, key: &LogKey) -> Result<Verified, ExportError> {
        verify(lines.join("\n").as_bytes(), note, key.verifier_key())
    }

    #[test]
    fn an_export_verifies_and_a_changed_byte_is_named_by_its_event() {
        let dir = tempfile::tempdir().unwrap();
        let k = key(dir.path(), "m.key");
        let lines = export(50);
        let note = note_over(&k, &lines, 40);
        let v = check(&lines, &note, &k).unwrap();
        assert_eq!((v.events, v.checkpoint_size), (50, 40));

        // A byte changed in event 17's content.
        let mut flipped = lines.clone();
        flipped[16] = flipped[16].replace("\"n\":17", "\"n\":71");
        let e = check(&flipped, &note, &k).unwrap_err();
        assert!(
            matches!(&e, ExportError::Broken { line: 17, event: Some(id), .. } if id == "e17"),
            "{e}"
        );
        assert!(
            e.to_string().contains("changed after it was written"),
            "{e}"
        );
        // A byte changed in event 30's hash: the next one no longer follows it.
        let mut hashed = lines.clone();
        let v: Value = serde_json::from_str(&hashed[29]).unwrap();
        let h = v["hash"].as_str().unwrap();
        let other = format!("{}{}", if h.starts_with('0') { '1' } else { '0' }, &h[1..]);
        hashed[29] = hashed[29].replace(h, &other);
        let e = check(&hashed, &note, &k).unwrap_err();
        assert!(matches!(e, ExportError::Broken { line: 30, .. }), "{e}");
        // A missing event.
        let mut gap = lines.clone();
        gap.remove(9);
        let e = check(&gap, &note, &k).unwrap_err();
        assert!(matches!(e, ExportError::Broken { line: 10, .. }), "{e}");
        // Not a line of an export.
        let mut junk = lines.clone();
        junk[3] = "{\"seq\": 4}".into();
        assert!(matches!(
            check(&junk, &note, &k),
            Err(ExportError::Line { line: 4, .. })
        ));
    }

    #[test]
    fn a_consistent_rewrite_fails_the_checkpoint_and_a_short_export_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let k = key(dir.path(), "m.key");
        let lines = export(30);
        let note = note_over(&k, &lines, 30);
        // Event 12 rewritten, and the chain after it recomputed: the chain holds, the root not.
        let mut prev = GENESIS_HASH.to_owned();
        let rewritten: Vec<String> = lines
            .iter()
            .map(|l| {
                let mut v: Value = serde_json::from_str(l).unwrap();
                if v["seq"] == 12 {
                    v["event"]["tool_id"] = "hub.restart_service".into();
                }
                let canonical =
                    String::from_utf8(mcp_shared::canonical::to_vec(&v["event"])).unwrap();
                let hash = chain_hash(&prev, &canonical);
                v["prev_hash"] = prev.clone().into();
                v["hash"] = hash.clone().into();
                prev = hash;
                v.to_string()
            })
            .collect();
        let e = check(&rewritten, &note, &k).unwrap_err();
        assert!(matches!(e, ExportError::Root { size: 30, .. }), "{e}");
        assert!(e.to_string().contains("rewritten"), "{e}");
        let e = check(&lines[..20], &note, &k).unwrap_err();
        assert!(
            matches!(
                e,
                ExportError::Short {
                    events: 20,
                    size: 30
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn a_forged_truncated_or_foreign_checkpoint_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let k = key(dir.path(), "m.key");
        let other = key(dir.path(), "other.key");
        assert_eq!(k.origin(), other.origin());
        assert_ne!(k.verifier_key(), other.verifier_key());
        let lines = export(5);
        let note = note_over(&k, &lines, 5);
        // The same root signed by another key.
        let foreign = note_over(&other, &lines, 5);
        let e = check(&lines, &foreign, &k).unwrap_err();
        assert!(e.to_string().contains("does not verify"), "{e}");
        // A size changed after signing.
        let forged = note.replacen("\n5\n", "\n4\n", 1);
        assert!(
            check(&lines, &forged, &k)
                .unwrap_err()
                .to_string()
                .contains("does not verify")
        );
        // Cut short.
        let cut = &note[..note.len() / 2];
        assert!(matches!(
            check(&lines, cut, &k),
            Err(ExportError::Checkpoint(_))
        ));
        // A key that is not one.
        let e = check(&lines, &note, &k)
            .map(|_| ())
            .and(verify(lines.join("\n").as_bytes(), &note, "not-a-key").map(|_| ()));
        assert!(
            e.unwrap_err()
                .to_string()
                .contains("verifier key is malformed")
        );
        // The same master key signs the same note (every replica of a zone does).
        assert_eq!(
            key(dir.path(), "m.key").sign(3, tlog_tiles::EMPTY_HASH),
            k.sign(3, tlog_tiles::EMPTY_HASH)
        );
    }
}
