//! The audit trail checked outside root: signed checkpoints of its Merkle tree under the
//! zone's public log key, an event's inclusion proof and the consistency proof between two
//! checkpoints (checked here with `tlog_tiles`, as an auditor would), and an export verified
//! offline by `mcp-root audit verify-export`, which names the event a changed byte is in and
//! refuses a forged checkpoint.

use mcp_tests::error_message;
use mcp_tests::items;
use mcp_tests::refusal;
use std::process::Command;

use mcp_tests::{TestRoot, eventually};
use serde_json::Value;

use crate::ops::admin_cli::admin;

fn hash(hex_text: &str) -> tlog_tiles::Hash {
    mcp_root::audit::tree::parse_hash(hex_text).expect("a 32-byte hex hash")
}

/// `mcp-root audit verify-export` (no root): `(exit code, stdout)`.
fn verify_export(file: &std::path::Path, note: &std::path::Path, key: &str) -> (i32, String) {
    let out = Command::new(mcp_tests::workspace_bin("mcp-root").unwrap())
        .args(["audit", "verify-export"])
        .arg(file)
        .arg("--checkpoint")
        .arg(note)
        .args(["--key", key])
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoints_prove_events_and_an_export_verifies_offline() {
    let root = TestRoot::start_with(|c| {
        c.audit.checkpoint.every_events = 5;
        c.audit.checkpoint.every_sec = 1;
    })
    .await
    .unwrap();
    // The log key is public, as a transparency log's is.
    let key: Value = reqwest::get(root.url("/v1/root/mcp/audit/key"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let verifier_key = key["verifier_key"].as_str().unwrap().to_owned();
    assert!(verifier_key.starts_with("root-mcp/zone-local+"), "{key}");
    let (code, printed, _) = admin(&root, &["audit", "key"]);
    assert_eq!((code, printed.trim()), (0, verifier_key.as_str()));

    let mut events = Vec::new();
    for i in 0..7 {
        let v = root
            .admin_post(
                "/v1/root/mcp/sessions",
                serde_json::json!({ "target_id": format!("hub:c-{i}"), "capability_profile": "InfraOpsRead", "ttl_sec": 600 }),
            )
            .await;
        events.push(v["event_id"].as_str().unwrap().to_owned());
    }
    let first = eventually("a checkpoint", async || {
        let l: Value = reqwest::get(root.url("/v1/root/mcp/audit/checkpoints"))
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        l["latest"].is_object().then(|| l["latest"].clone())
    })
    .await;
    for i in 7..14 {
        root.admin_post(
            "/v1/root/mcp/sessions",
            serde_json::json!({ "target_id": format!("hub:c-{i}"), "capability_profile": "InfraOpsRead", "ttl_sec": 600 }),
        )
        .await;
    }
    let head = root.admin_get("/v1/root/mcp/audit/verify").await["checked"]
        .as_u64()
        .unwrap();
    let latest = eventually("a checkpoint of the whole trail", async || {
        let l = root
            .admin()
            .get("/v1/root/mcp/audit/checkpoints")
            .await
            .ok()?;
        (l["latest"]["tree_size"].as_u64()? >= head).then(|| l["latest"].clone())
    })
    .await;
    let size = latest["tree_size"].as_u64().unwrap();
    let cp = mcp_root::audit::checkpoint::open(latest["note"].as_str().unwrap(), &verifier_key)
        .expect("the checkpoint verifies with the log key");
    assert_eq!(cp.size(), size);
    assert_eq!(
        hex::encode(cp.hash().0),
        latest["root_hash"].as_str().unwrap()
    );

    // An event's inclusion, proved by root and checked here.
    let p = root
        .admin_get(&format!("/v1/root/mcp/audit/proof/{}", events[2]))
        .await;
    assert_eq!(p["checkpoint"]["tree_size"], size, "{p}");
    let proof: Vec<_> = items(&p["proof"])
        .iter()
        .map(|h| hash(h.as_str().unwrap()))
        .collect();
    let leaf = mcp_root::audit::tree::leaf_hash(p["chain_hash"].as_str().unwrap()).unwrap();
    let n = p["leaf_index"].as_u64().unwrap();
    tlog_tiles::check_record(&proof, size, *cp.hash(), n, leaf).expect("the proof verifies");
    let other = mcp_root::audit::tree::leaf_hash(&"ab".repeat(32)).unwrap();
    assert!(tlog_tiles::check_record(&proof, size, *cp.hash(), n, other).is_err());
    let (code, out, err) = admin(&root, &["audit", "prove", &events[2]]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("proof of") && out.contains("verified"),
        "{out}"
    );
    // The first checkpoint is a prefix of the latest.
    let old = first["tree_size"].as_u64().unwrap();
    let c = root
        .admin_get(&format!(
            "/v1/root/mcp/audit/consistency?from={old}&to={size}"
        ))
        .await;
    let proof: Vec<_> = items(&c["proof"])
        .iter()
        .map(|h| hash(h.as_str().unwrap()))
        .collect();
    tlog_tiles::check_tree(
        &proof,
        size,
        *cp.hash(),
        old,
        hash(first["root_hash"].as_str().unwrap()),
    )
    .expect("consistent");
    // Bad asks, each precise.
    let ops = root.admin();
    let (s, b) = ops
        .get_status("/v1/root/mcp/audit/proof/no-such-event")
        .await
        .unwrap();
    assert_eq!(refusal(s, &b), (404, "not_found"), "{b}");
    let (s, b) = ops
        .get_status(&format!(
            "/v1/root/mcp/audit/proof/{}?size=999999",
            events[0]
        ))
        .await
        .unwrap();
    assert_eq!(s, 404, "{b}");
    assert!(error_message(&b).contains("no checkpoint of tree size 999999"));

    // The whole trail exported, and verified with no root.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("trail.jsonl");
    let (code, _, err) = admin(
        &root,
        &[
            "audit",
            "export",
            "--verifiable",
            "-o",
            file.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    let note = dir.path().join("checkpoint.txt");
    std::fs::write(&note, latest["note"].as_str().unwrap()).unwrap();
    let (code, out) = verify_export(&file, &note, &verifier_key);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(&format!("the first {size} match")), "{out}");

    // A byte changed in the third event: named by its id.
    let text = std::fs::read_to_string(&file).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    lines[2] = lines[2].replacen("InfraOpsRead", "InfraOpsReaX", 1);
    assert_ne!(
        lines[2],
        text.lines().nth(2).unwrap(),
        "the line names the profile"
    );
    let changed = dir.path().join("changed.jsonl");
    std::fs::write(&changed, lines.join("\n")).unwrap();
    let (code, out) = verify_export(&changed, &note, &verifier_key);
    assert_eq!(code, 3, "{out}");
    let third: Value = serde_json::from_str(text.lines().nth(2).unwrap()).unwrap();
    let id = third["event"]["event_id"].as_str().unwrap();
    assert!(
        out.contains(&format!("line 3 (seq 3, event {id})")),
        "{out}"
    );
    // A forged checkpoint, and another zone's key.
    let forged = dir.path().join("forged.txt");
    std::fs::write(
        &forged,
        latest["note"].as_str().unwrap().replacen(
            &format!("\n{size}\n"),
            &format!("\n{}\n", size - 1),
            1,
        ),
    )
    .unwrap();
    let (code, out) = verify_export(&file, &forged, &verifier_key);
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("does not verify"), "{out}");
    let (code, out) = verify_export(&file, &note, "root-mcp/zone-local+00000000+AQ==");
    assert_eq!(code, 3, "{out}");
    root.stop().await;
}
