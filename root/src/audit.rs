//! Audit trail reads: verification of the hash chain.

use serde::Serialize;

use crate::actors::audit_writer::{GENESIS_HASH, chain_hash};
use crate::store::Store;

/// The first link that does not hold.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct BrokenLink {
    pub seq: i64,
    pub event_id: Option<String>,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Verification {
    pub ok: bool,
    pub checked: u64,
    pub head_hash: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_broken: Option<BrokenLink>,
}

/// Walks the whole chain, oldest first, and names the first broken link.
pub async fn verify(store: &Store) -> Result<Verification, crate::store::Error> {
    let (mut last_seq, mut prev) = (0i64, GENESIS_HASH.to_string());
    let mut checked = 0u64;
    loop {
        let page = store.audit_chain_page(last_seq, 1000).await?;
        if page.is_empty() {
            break;
        }
        for (seq, json, prev_hash, hash) in page {
            let event_id = serde_json::from_str::<serde_json::Value>(&json)
                .ok()
                .and_then(|v| v.get("event_id").and_then(|e| e.as_str()).map(String::from));
            let broken = |reason: String| Verification {
                ok: false,
                checked,
                head_hash: prev.clone(),
                first_broken: Some(BrokenLink {
                    seq,
                    event_id: event_id.clone(),
                    reason,
                }),
            };
            if seq != last_seq + 1 {
                return Ok(broken(format!(
                    "sequence gap: expected {} but found {seq}",
                    last_seq + 1
                )));
            }
            if prev_hash != prev {
                return Ok(broken(
                    "prev_hash does not match the previous event's hash".into(),
                ));
            }
            if chain_hash(&prev_hash, &json) != hash {
                return Ok(broken(
                    "stored event does not match its hash (modified after it was written)".into(),
                ));
            }
            checked += 1;
            last_seq = seq;
            prev = hash;
        }
    }
    Ok(Verification {
        ok: true,
        checked,
        head_hash: prev,
        first_broken: None,
    })
}
