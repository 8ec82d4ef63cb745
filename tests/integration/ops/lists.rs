//! Fleet-sized lists: targets and leases a page at a time (keyset cursors), filtered, counted,
//! over REST and the admin CLI, with bad filters and cursors refused precisely.

use futures::StreamExt;
use mcp_tests::items;
use mcp_tests::{TestRoot, until};
use serde_json::{Value, json};

use super::admin_cli::admin;

const TARGETS: usize = 250;

fn target(i: usize) -> String {
    format!("fleet-{i:03}")
}

fn environment(i: usize) -> &'static str {
    if i.is_multiple_of(2) { "test" } else { "prod" }
}

fn subnet(i: usize) -> String {
    format!("subnet-{}", ["a", "b", "c"][i % 3])
}

/// Every page of `path` (filters in its query, if any) with `limit`, in order: each item's `key`.
async fn every_page(
    root: &TestRoot,
    path: &str,
    list: &str,
    key: &str,
    limit: usize,
) -> Vec<Value> {
    let mut all = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..100 {
        let sep = if path.contains('?') { '&' } else { '?' };
        let mut url = format!("{path}{sep}limit={limit}");
        if let Some(c) = &cursor {
            url.push_str(&format!("&cursor={c}"));
        }
        let page = root.admin_get(&url).await;
        let items = page[list].as_array().unwrap();
        assert!(items.len() <= limit, "a page holds at most its limit");
        all.extend(items.iter().map(|t| t[key].clone()));
        match page["next_cursor"].as_str() {
            Some(c) => {
                assert_eq!(items.len(), limit, "only the last page is short");
                cursor = Some(c.to_string());
            }
            None => return all,
        }
    }
    panic!("more than 100 pages");
}

/// 250 targets (environments, subnets), one with a connected hub, one skill disabled.
async fn fleet(root: &TestRoot) -> mcp_tests::TestHub {
    let hub = root.start_hub(&target(0), "").await.unwrap();
    futures::stream::iter(1..TARGETS)
        .map(|i| {
            root.admin_post(
                "/v1/root/hubs",
                json!({ "target_id": target(i), "environment": environment(i), "subnet_id": subnet(i) }),
            )
        })
        .buffer_unordered(16)
        .for_each(|_| async {})
        .await;
    root.admin_post(
        &format!(
            "/v1/root/hubs/{}/skills/infra_access_skill/disable",
            target(7)
        ),
        json!({}),
    )
    .await;
    until("the hub is online", async || {
        let one = root
            .admin_get(&format!("/v1/root/hubs/{}", target(0)))
            .await;
        one["status"] == "online"
    })
    .await;
    hub
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn targets_page_by_cursor_filter_and_count() {
    let root = TestRoot::start().await.unwrap();
    let _hub = fleet(&root).await;

    // Pages follow one another: every target once, by id, the last page short.
    let ids = every_page(&root, "/v1/root/hubs", "targets", "target_id", 100).await;
    let want: Vec<Value> = (0..TARGETS).map(|i| json!(target(i))).collect();
    assert_eq!(ids, want);
    let first = root.admin_get("/v1/root/hubs").await;
    assert_eq!(items(&first["targets"]).len(), 100, "100 by default");
    assert_eq!(first["total"], TARGETS);
    assert_eq!(
        first["by_status"],
        json!({ "offline": TARGETS - 1, "online": 1 })
    );

    // Filters, alone and together; counts are of what matches, on every page.
    let count = |f: &dyn Fn(usize) -> bool| (0..TARGETS).filter(|&i| f(i)).count();
    let prod_b = root
        .admin_get("/v1/root/hubs?environment=prod&subnet_id=subnet-b&limit=5")
        .await;
    assert_eq!(
        prod_b["total"],
        count(&|i| i > 0 && environment(i) == "prod" && subnet(i) == "subnet-b")
    );
    for t in items(&prod_b["targets"]) {
        assert_eq!(
            (t["environment"].as_str(), t["subnet_id"].as_str()),
            (Some("prod"), Some("subnet-b"))
        );
    }
    let test_ids = every_page(
        &root,
        "/v1/root/hubs?environment=test",
        "targets",
        "target_id",
        40,
    )
    .await;
    let want: Vec<Value> = (0..TARGETS)
        .filter(|&i| environment(i) == "test")
        .map(|i| json!(target(i)))
        .collect();
    assert_eq!(test_ids, want);
    let online = root.admin_get("/v1/root/hubs?status=online").await;
    assert_eq!(online["total"], 1);
    assert_eq!(online["targets"][0]["target_id"], target(0));
    assert_eq!(online["targets"][0]["skill"]["open"], true);
    let disabled = root.admin_get("/v1/root/hubs?skill=disabled").await;
    assert_eq!(disabled["total"], 1);
    assert_eq!(disabled["targets"][0]["target_id"], target(7));
    let closed = root
        .admin_get("/v1/root/hubs?skill=closed&q=fleet-00")
        .await;
    assert!(
        items(&closed["targets"])
            .iter()
            .any(|t| t["target_id"] == target(7)),
        "a disabled skill is closed: {closed}"
    );
    let enabled = root
        .admin_get("/v1/root/hubs?skill=enabled&limit=1000")
        .await;
    assert!(
        items(&enabled["targets"])
            .iter()
            .all(|t| t["target_id"] != target(7))
    );
    let q = root.admin_get("/v1/root/hubs?q=fleet-02").await;
    assert_eq!(q["total"], 10, "fleet-020 … fleet-029");

    // One target by id.
    let one = root
        .admin_get(&format!("/v1/root/hubs/{}", target(123)))
        .await;
    assert_eq!(
        (one["target_id"].as_str(), one["environment"].as_str()),
        (Some("fleet-123"), Some("prod"))
    );
    let (s, body) = root
        .admin()
        .get_status("/v1/root/hubs/fleet-999")
        .await
        .unwrap();
    assert_eq!(s, 404, "{body}");

    // Bad filters, page sizes and cursors: a 400 that says what is wrong.
    let lease_cursor = {
        for _ in 0..2 {
            root.lease(&target(0), "InfraOpsRead").await;
        }
        let page = root.admin_get("/v1/root/mcp/sessions?limit=1").await;
        page["next_cursor"].as_str().unwrap().to_string()
    };
    for (query, says) in [
        (
            "status=sleeping",
            "status must be online, degraded or offline",
        ),
        ("skill=maybe", "skill must be one of"),
        ("limit=0", "limit must be between 1 and 1000"),
        ("limit=1001", "limit must be between 1 and 1000"),
        ("cursor=t.%25%25", "invalid cursor"),
        (&format!("cursor={lease_cursor}"), "invalid cursor"),
        ("colour=blue", "colour"),
    ] {
        let (s, body) = root
            .admin()
            .get_status(&format!("/v1/root/hubs?{query}"))
            .await
            .unwrap();
        assert_eq!(s, 400, "{query}: {body}");
        assert!(body.to_string().contains(says), "{query}: {body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_page_newest_first_and_filter_by_status_and_target() {
    let root = TestRoot::start().await.unwrap();
    let _hub = fleet(&root).await;
    let issued: Vec<(String, String)> = futures::stream::iter(0..130)
        .map(|i| {
            let root = &root;
            async move { root.lease(&target(i % 3), "InfraOpsRead").await }
        })
        .buffer_unordered(8)
        .collect()
        .await;
    for (id, _) in &issued[..5] {
        root.on_lease(id, "revoke").await;
    }

    let page = root.admin_get("/v1/root/mcp/sessions?limit=50").await;
    assert_eq!(page["total"], 130);
    assert_eq!(page["by_status"], json!({ "active": 125, "revoked": 5 }));
    let times = every_page(&root, "/v1/root/mcp/sessions", "sessions", "created_at", 50).await;
    let ids = every_page(&root, "/v1/root/mcp/sessions", "sessions", "session_id", 50).await;
    assert_eq!(ids.len(), 130);
    let unique: std::collections::BTreeSet<_> = ids.iter().map(|v| v.as_str().unwrap()).collect();
    assert_eq!(unique.len(), 130, "no lease twice across pages");
    let parsed: Vec<time::OffsetDateTime> = times
        .iter()
        .map(|t| {
            time::OffsetDateTime::parse(
                t.as_str().unwrap(),
                &time::format_description::well_known::Rfc3339,
            )
            .unwrap()
        })
        .collect();
    assert!(parsed.windows(2).all(|w| w[0] >= w[1]), "newest first");

    let revoked = every_page(
        &root,
        "/v1/root/mcp/sessions?status=revoked",
        "sessions",
        "session_id",
        2,
    )
    .await;
    let mut want: Vec<&str> = issued[..5].iter().map(|(id, _)| id.as_str()).collect();
    let mut got: Vec<&str> = revoked.iter().map(|v| v.as_str().unwrap()).collect();
    want.sort();
    got.sort();
    assert_eq!(got, want);
    let on_one = root
        .admin_get(&format!(
            "/v1/root/mcp/sessions?target_id={}&limit=1000",
            target(1)
        ))
        .await;
    assert_eq!(on_one["total"], (0..130).filter(|i| i % 3 == 1).count());
    assert!(
        items(&on_one["sessions"])
            .iter()
            .all(|l| l["target_id"] == target(1))
    );
    for query in [
        "status=gone",
        "limit=5000",
        "cursor=l.bm90LWEta2V5",
        "cursor=t.Zm9v",
    ] {
        let (s, body) = root
            .admin()
            .get_status(&format!("/v1/root/mcp/sessions?{query}"))
            .await
            .unwrap();
        assert_eq!(s, 400, "{query}: {body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_cli_pages_and_filters_targets_and_leases() {
    let root = TestRoot::start().await.unwrap();
    let _hub = fleet(&root).await;
    let prod_b = (1..TARGETS)
        .filter(|&i| environment(i) == "prod" && subnet(i) == "subnet-b")
        .count();

    let (code, out, err) = admin(
        &root,
        &[
            "hub",
            "list",
            "--environment",
            "prod",
            "--subnet",
            "subnet-b",
            "--limit",
            "10",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 11, "ten targets and a footer: {out}");
    assert!(lines[..10].iter().all(|l| l.contains("env=prod")), "{out}");
    let footer = lines[10];
    assert!(
        footer.starts_with(&format!("10 of {prod_b} (offline {prod_b})")),
        "{footer}"
    );
    let cursor = footer.split("--cursor ").nth(1).expect("a next page");
    let (code, out, _) = admin(
        &root,
        &[
            "hub",
            "list",
            "--environment",
            "prod",
            "--subnet",
            "subnet-b",
            "--limit",
            "10",
            "--cursor",
            cursor,
        ],
    );
    assert_eq!(code, 0);
    assert!(
        !out.contains(lines[9].split_whitespace().next().unwrap()),
        "page two starts after page one"
    );

    let (code, out, err) = admin(
        &root,
        &[
            "hub",
            "list",
            "--environment",
            "test",
            "--all",
            "--limit",
            "30",
            "--json",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let all: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(items(&all["targets"]).len(), TARGETS / 2);
    assert_eq!(all["total"], TARGETS / 2);
    assert!(all["next_cursor"].is_null());

    let (code, _, err) = admin(&root, &["hub", "list", "--status", "asleep"]);
    assert_ne!(code, 0);
    assert!(
        err.contains("status must be online, degraded or offline"),
        "{err}"
    );

    let (id, _) = root.lease(&target(2), "InfraOpsRead").await;
    root.lease(&target(2), "InfraOpsRead").await;
    root.on_lease(&id, "revoke").await;
    let (code, out, err) = admin(&root, &["lease", "list", "--status", "revoked", "--json"]);
    assert_eq!(code, 0, "{err}");
    let revoked: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(revoked["total"], 1);
    assert_eq!(revoked["sessions"][0]["session_id"], id);
    let (code, out, _) = admin(&root, &["lease", "list", "--target", &target(2)]);
    assert_eq!(code, 0);
    assert!(
        out.trim_end().ends_with("2 of 2 (active 1, revoked 1)"),
        "{out}"
    );
}
