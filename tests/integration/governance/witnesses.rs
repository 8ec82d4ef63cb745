//! Witnesses (C2SP `tlog-witness`, `tlog-cosignature`): zone B's root witnesses zone A's
//! trail. A sends each checkpoint with its consistency proof; B checks and cosigns; A serves
//! the cosignatures beside its checkpoints, and the cosigned note verifies with both keys in
//! the `signed_note` crate. B answers every bad request as the protocol says (400, 403, 404,
//! 409 with its size, 422), and a split view (B shown a larger tree of A's log than A has)
//! is raised on A as an alarm.

use mcp_tests::items;
use std::path::Path;

use base64::Engine;
use mcp_root::audit::checkpoint::LogKey;
use mcp_root::audit::witness::cosign::CosignatureVerifier;
use mcp_root::secrets::MasterKey;
use mcp_tests::witness::Witnessed;
use mcp_tests::{TestRoot, eventually};
use serde_json::Value;
use signed_note::{Note, StandardVerifier, Verifier, VerifierList};

fn master(path: &Path) -> MasterKey {
    MasterKey::load_or_create(path).unwrap().0
}

/// POSTs `body` to B's add-checkpoint: `(status, content type, body)`.
async fn add(b: &TestRoot, body: String) -> (u16, String, String) {
    let res = mcp_tests::http_client()
        .post(b.url("/v1/root/witness/add-checkpoint"))
        .body(body)
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    let ct = res
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, ct, res.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_zones_root_cosigns_checkpoints_and_refuses_other_histories() {
    let zones = Witnessed::start().await.unwrap();
    let (keys, log, cosigner, b) = (&zones.keys, &zones.log, &zones.cosigner, &zones.b);
    let shown: Value = reqwest::get(b.url("/v1/root/witness"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(shown["verifier_key"], cosigner.verifier_key(), "{shown}");
    let a = TestRoot::start_with(|c| {
        zones.zone_a(c);
        c.audit.checkpoint.every_events = 5;
        c.audit.checkpoint.every_sec = 1;
    })
    .await
    .unwrap();

    // Two checkpoints, each cosigned: the second through a consistency proof from the first.
    a.issue_sessions("w", 6).await;
    let first = settled(&a).await;
    a.issue_sessions("w", 6).await;
    let second = settled(&a).await;
    assert!(second["tree_size"].as_u64() > first["tree_size"].as_u64());
    let note = format!(
        "{}{}\n",
        second["note"].as_str().unwrap(),
        second["cosignatures"][0]["line"].as_str().unwrap()
    );
    let known = VerifierList::new(vec![
        Box::new(StandardVerifier::new(log.verifier_key()).unwrap()) as Box<dyn Verifier>,
        Box::new(CosignatureVerifier::new(&cosigner.verifier_key()).unwrap()),
    ]);
    let (verified, _) = Note::from_bytes(note.as_bytes())
        .unwrap()
        .verify(&known)
        .expect("the cosigned note verifies");
    assert_eq!(verified.len(), 2, "the log's signature and the witness's");
    let peers = a.admin_get("/v1/root/mcp/audit/witnesses").await;
    assert_eq!(peers[0]["name"], cosigner.name(), "{peers}");
    assert_eq!(peers[0]["alarm"], false, "{peers}");
    let size = second["tree_size"].as_u64().unwrap();
    assert!(
        peers[0]["cosigned_size"].as_u64().unwrap() >= size,
        "{peers}"
    );
    let at_b: Value = reqwest::get(b.url("/v1/root/witness"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(at_b["logs"][0]["origin"], "root-mcp/zone-a", "{at_b}");
    let b_size = at_b["logs"][0]["cosigned_size"].as_u64().unwrap();
    assert!(b_size >= size, "{at_b}");

    // What B refuses, and how.
    let latest_note = second["note"].as_str().unwrap().to_owned();
    let (s, _, body) = add(b, "hello".into()).await;
    assert_eq!(s, 400, "{body}");
    let (s, _, body) = add(b, format!("old {}\n\n{latest_note}", size + 1)).await;
    assert_eq!(s, 400, "old past the checkpoint: {body}");
    let stranger = LogKey::derive(&master(&keys.path().join("c.key")), "zone-c");
    let root = tlog_tiles::Hash([7; 32]);
    let (s, _, body) = add(b, format!("old 0\n\n{}", stranger.sign(3, root))).await;
    assert_eq!(s, 404, "an unknown log: {body}");
    let forged = LogKey::derive(&master(&keys.path().join("d.key")), "zone-a");
    let (s, _, body) = add(b, format!("old 0\n\n{}", forged.sign(3, root))).await;
    assert_eq!(s, 403, "zone-a's origin, another key: {body}");
    let (s, ct, body) = add(b, format!("old 1\n\n{latest_note}")).await;
    assert_eq!((s, ct.as_str()), (409, "text/x.tlog.size"), "{body}");
    assert_eq!(body, format!("{b_size}\n"));
    // A tree of B's size with another root: the same size, another history.
    let (s, _, body) = add(b, format!("old {b_size}\n\n{}", log.sign(b_size, root))).await;
    assert_eq!(s, 409, "{body}");
    // A larger tree whose proof does not extend what B cosigned.
    let proof = "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=\n".repeat(3);
    let (s, _, body) = add(
        b,
        format!("old {b_size}\n{proof}\n{}", log.sign(b_size + 4, root)),
    )
    .await;
    assert_eq!(s, 422, "{body}");

    // The same checkpoint again is cosigned again.
    let same = checkpoint_of(&a, b_size).await;
    let (s, _, body) = add(b, format!("old {b_size}\n\n{same}")).await;
    assert_eq!(s, 200, "{body}");
    assert!(
        body.starts_with('\u{2014}') && body.ends_with('\n'),
        "{body}"
    );

    // A split view: whoever holds A's key shows B a longer tree that extends what B cosigned
    // (a valid proof) but not A's trail. B cosigns it; A's next checkpoint is then refused,
    // and A raises the alarm.
    let chain = a.admin_get("/v1/root/mcp/audit/chain?limit=5000").await;
    let mut fork = Mem::default();
    for row in items(&chain["events"]).iter().take(b_size as usize) {
        fork.push(&hex::decode(row["hash"].as_str().unwrap()).unwrap());
    }
    for _ in 0..100 {
        fork.push(&[9; 32]);
    }
    let big = b_size + 100;
    let fork_root = tlog_tiles::tree_hash(big, &fork).unwrap();
    let proof: String = tlog_tiles::prove_tree(big, b_size, &fork)
        .unwrap()
        .iter()
        .map(|h| {
            format!(
                "{}\n",
                base64::engine::general_purpose::STANDARD.encode(h.0)
            )
        })
        .collect();
    let (s, _, body) = add(
        b,
        format!("old {b_size}\n{proof}\n{}", log.sign(big, fork_root)),
    )
    .await;
    assert_eq!(s, 200, "a proof that verifies is cosigned: {body}");
    a.issue_sessions("w", 6).await;
    let alarm = eventually("the alarm on A", async || {
        let peers = a.admin().get("/v1/root/mcp/audit/witnesses").await.ok()?;
        (peers[0]["alarm"] == true).then_some(peers)
    })
    .await;
    let why = alarm[0]["last_error"].as_str().unwrap();
    assert!(
        why.contains(&format!("cosigned size {big}")) && why.contains("another history"),
        "{alarm}"
    );
    let series = format!(
        "mcp_root_audit_witness_alarm{{witness=\"{}\"}}",
        cosigner.name()
    );
    assert_eq!(
        a.metric(&series).await.unwrap(),
        Some(1),
        "the alarm in /metrics"
    );
    a.stop().await;
    zones.b.stop().await;
}

/// A tree held in memory (the stored hashes by index, `tlog_tiles`' layout).
#[derive(Default)]
struct Mem {
    hashes: Vec<tlog_tiles::Hash>,
    leaves: u64,
}

impl Mem {
    fn push(&mut self, data: &[u8]) {
        let new = tlog_tiles::stored_hashes(self.leaves, data, &*self).unwrap();
        self.hashes.extend(new);
        self.leaves += 1;
    }
}

impl tlog_tiles::HashReader for Mem {
    fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<tlog_tiles::Hash>, tlog_tiles::Error> {
        indexes
            .iter()
            .map(|i| {
                self.hashes
                    .get(*i as usize)
                    .copied()
                    .ok_or(tlog_tiles::Error::IndexesNotInTree)
            })
            .collect()
    }
}

/// A's signed checkpoint of size `size`.
async fn checkpoint_of(a: &TestRoot, size: u64) -> String {
    let l: Value = reqwest::get(a.url("/v1/root/mcp/audit/checkpoints?limit=100"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    items(&l["checkpoints"])
        .iter()
        .find(|c| c["tree_size"] == size)
        .and_then(|c| c["note"].as_str())
        .expect("A's checkpoint of B's size")
        .to_owned()
}

/// A's newest checkpoint once it covers the whole trail and carries a cosignature (nothing
/// else happens on A meanwhile, so B's state stays as it is).
async fn settled(a: &TestRoot) -> Value {
    eventually("a cosigned checkpoint of the whole trail", async || {
        let chain = a
            .admin()
            .get("/v1/root/mcp/audit/chain?limit=5000")
            .await
            .ok()?;
        let head = chain["events"].as_array()?.len() as u64;
        let l: Value = reqwest::get(a.url("/v1/root/mcp/audit/checkpoints"))
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        let latest = l["latest"].clone();
        let whole = latest["tree_size"].as_u64() == Some(head);
        (whole && !latest["cosignatures"].as_array()?.is_empty()).then_some(latest)
    })
    .await
}
