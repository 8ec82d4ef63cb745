//! The operator web console at `/ui`: its login, cross-site defences and security headers over
//! plain HTTP, the REST family additions it uses (audit stream, usage summary, operator reads),
//! and the whole console driven in headless Chromium through chromedriver (WebDriver) against
//! a real root and hub; and a zone of 15,000 targets, which the console shows a page at a time.
//!
//! The browser test needs `chromedriver` and `chromium` (Debian's `chromium-driver` and
//! `chromium`; `.ci/run` installs them). Without them it prints SKIPPED, except under CI
//! (`CI` set), where it fails.

use mcp_tests::items;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use fantoccini::{Client, Locator};
use mcp_tests::ports::free_port;
use mcp_tests::{TestRoot, mcp_client};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(20);

// ---- HTTP helpers ---------------------------------------------------------------------------

/// A request with the console cookie; `csrf` and `origin` added when given.
fn with_cookie(
    root: &TestRoot,
    method: reqwest::Method,
    path: &str,
    cookie: &str,
    csrf: Option<&str>,
    origin: Option<&str>,
) -> reqwest::RequestBuilder {
    let mut req = root
        .http
        .request(method, root.url(path))
        .header("cookie", cookie);
    if let Some(c) = csrf {
        req = req.header("x-mcp-console-csrf", c);
    }
    if let Some(o) = origin {
        req = req.header("origin", o);
    }
    req
}

#[tokio::test]
async fn console_apis_refuse_requests_without_a_login() {
    let root = TestRoot::start().await.unwrap();
    let other = TestRoot::start().await.unwrap();
    // A well-formed credential signed by another root (another admin token).
    let (foreign, _) = other.console_login().await;
    let forged = "mcp_console=v1.0123456789abcdef.99999999999999.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
    let gets = [
        "/ui/api/session",
        "/v1/root/mcp/sessions",
        "/v1/root/mcp/audit",
        "/v1/root/mcp/audit/stream",
        "/v1/root/mcp/audit/usage",
        "/v1/root/mcp/audit/verify",
        "/v1/root/mcp/approvals",
        "/v1/root/hubs",
        "/v1/root/mcp/foundation",
    ];
    for cookie in [None, Some(forged), Some(foreign.as_str())] {
        for path in gets {
            let mut req = root.http.get(root.url(path));
            if let Some(c) = cookie {
                req = req.header("cookie", c);
            }
            let res = req.send().await.unwrap();
            assert_eq!(res.status(), 401, "GET {path} with {cookie:?}");
        }
        for path in [
            "/ui/api/logout",
            "/v1/root/mcp/sessions",
            "/v1/root/hubs/hub:x/read",
        ] {
            let mut req = root
                .http
                .post(root.url(path))
                .header("origin", root.handle().base_url())
                .json(&json!({}));
            if let Some(c) = cookie {
                req = req.header("cookie", c);
            }
            let res = req.send().await.unwrap();
            assert_eq!(res.status(), 401, "POST {path} with {cookie:?}");
        }
    }
    // A wrong admin token does not log in.
    let res = root
        .http
        .post(root.url("/ui/api/login"))
        .header("origin", root.handle().base_url())
        .json(&json!({ "token": "mcpa_wrong" }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    assert!(res.headers().get("set-cookie").is_none());
    other.stop().await;
    root.stop().await;
}

#[tokio::test]
async fn console_cookie_is_signed_http_only_and_cross_site_requests_are_refused() {
    let root = TestRoot::start().await.unwrap();
    let base = root.handle().base_url();
    // Login needs the page's Origin.
    let res = root
        .http
        .post(root.url("/ui/api/login"))
        .json(&json!({ "token": root.admin_token() }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    let res = root
        .http
        .post(root.url("/ui/api/login"))
        .header("origin", &base)
        .json(&json!({ "token": root.admin_token() }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let set_cookie = res.headers()["set-cookie"].to_str().unwrap().to_string();
    for attr in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age="] {
        assert!(set_cookie.contains(attr), "{set_cookie}");
    }
    assert!(!set_cookie.contains("Secure"), "plain HTTP: {set_cookie}");
    assert!(!set_cookie.contains(&root.admin_token()));
    let cookie = set_cookie.split(';').next().unwrap().to_string();
    let csrf = res.json::<Value>().await.unwrap()["csrf_token"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(!csrf.contains(&root.admin_token()));

    // Reads work with the cookie alone.
    let res = with_cookie(
        &root,
        reqwest::Method::GET,
        "/v1/root/mcp/sessions",
        &cookie,
        None,
        None,
    )
    .send()
    .await
    .unwrap();
    assert_eq!(res.status(), 200);
    let session: Value = with_cookie(
        &root,
        reqwest::Method::GET,
        "/ui/api/session",
        &cookie,
        None,
        None,
    )
    .send()
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(session["csrf_token"], csrf.as_str());

    let body =
        json!({ "target_id": "hub:none", "capability_profile": "AdaOSDevRead", "ttl_sec": 60 });
    let post = |csrf: Option<&str>, origin: Option<&str>| {
        with_cookie(
            &root,
            reqwest::Method::POST,
            "/v1/root/mcp/sessions",
            &cookie,
            csrf,
            origin,
        )
        .json(&body)
    };
    // Forged cross-site requests: no CSRF header, a wrong one, a foreign Origin, no Origin,
    // or a browser saying the request is cross-site.
    for (why, req) in [
        ("no csrf header", post(None, Some(&base))),
        ("wrong csrf header", post(Some("nope"), Some(&base))),
        (
            "foreign origin",
            post(Some(&csrf), Some("http://evil.example")),
        ),
        ("no origin", post(Some(&csrf), None)),
        (
            "sec-fetch-site cross-site",
            post(Some(&csrf), Some(&base)).header("sec-fetch-site", "cross-site"),
        ),
    ] {
        let res = req.send().await.unwrap();
        assert_eq!(res.status(), 403, "{why}");
    }
    assert!(
        root.admin_get("/v1/root/mcp/sessions").await["sessions"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    // The same request from the page goes through.
    let res = post(Some(&csrf), Some(&base))
        .header("sec-fetch-site", "same-origin")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    // The bearer shown once is not in root's log ring or in the audit trail.
    let token = res.json::<Value>().await.unwrap()["token"]
        .as_str()
        .unwrap()
        .to_string();
    let audit = root.admin_get("/v1/root/mcp/audit?limit=1000").await;
    assert!(!audit.to_string().contains(&token));
    let logs = mcp_root::telemetry::logging::RING
        .tail(4000, |l| Some(l.to_string()))
        .0
        .join("\n");
    assert!(!logs.contains(&token) && !logs.contains(&root.admin_token()));
    assert!(!logs.contains(cookie.trim_start_matches("mcp_console=")));

    // Logout ends the session: the cookie no longer authenticates.
    let res = with_cookie(
        &root,
        reqwest::Method::POST,
        "/ui/api/logout",
        &cookie,
        Some(&csrf),
        Some(&base),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(res.status(), 200);
    assert!(
        res.headers()["set-cookie"]
            .to_str()
            .unwrap()
            .contains("Max-Age=0")
    );
    let res = with_cookie(
        &root,
        reqwest::Method::GET,
        "/v1/root/mcp/sessions",
        &cookie,
        None,
        None,
    )
    .send()
    .await
    .unwrap();
    assert_eq!(res.status(), 401);
    // The login and the logout are operator events in the trail, the refused logins are not.
    let audit = root.trail("limit=1000").await;
    let console: Vec<&str> = audit
        .iter()
        .filter_map(|e| e["tool_id"].as_str())
        .filter(|t| t.starts_with("admin.console."))
        .collect();
    assert!(
        console.contains(&"admin.console.login") && console.contains(&"admin.console.logout"),
        "{console:?}"
    );
    assert_eq!(
        console
            .iter()
            .filter(|t| **t == "admin.console.logout")
            .count(),
        1,
        "{console:?}"
    );
    root.stop().await;

    // Behind TLS (an https origin the root is configured for) the cookie is Secure.
    let root = TestRoot::start_with(|c| {
        c.allowed_origins = vec!["https://console.example".into()];
    })
    .await
    .unwrap();
    let res = root
        .http
        .post(root.url("/ui/api/login"))
        .header("origin", "https://console.example")
        .json(&json!({ "token": root.admin_token() }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert!(
        res.headers()["set-cookie"]
            .to_str()
            .unwrap()
            .contains("; Secure")
    );
    root.stop().await;
}

#[tokio::test]
async fn console_assets_come_from_the_binary_with_security_headers() {
    let root = TestRoot::start().await.unwrap();
    let res = root.http.get(root.url("/ui")).send().await.unwrap();
    // reqwest follows the redirect to /ui/.
    assert_eq!(res.url().path(), "/ui/");
    for (path, ty) in [
        ("/ui/", "text/html"),
        ("/ui/app.js", "text/javascript"),
        ("/ui/style.css", "text/css"),
        ("/ui/js/pages/requests.js", "text/javascript"),
        ("/ui/js/charts.js", "text/javascript"),
    ] {
        let res = root.http.get(root.url(path)).send().await.unwrap();
        assert_eq!(res.status(), 200, "{path}");
        let h = res.headers().clone();
        assert!(
            h["content-type"].to_str().unwrap().starts_with(ty),
            "{path}"
        );
        let csp = h["content-security-policy"].to_str().unwrap();
        assert!(csp.contains("default-src 'self'"), "{csp}");
        assert!(csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"));
        assert!(csp.contains("frame-ancestors 'none'"));
        assert_eq!(h["x-frame-options"], "DENY");
        assert_eq!(h["referrer-policy"], "no-referrer");
        assert_eq!(h["x-content-type-options"], "nosniff");
        // The bytes are the ones compiled into the binary.
        let body = res.bytes().await.unwrap();
        let file = if path == "/ui/" {
            "index.html"
        } else {
            path.trim_start_matches("/ui/")
        };
        assert_eq!(
            &body[..],
            mcp_root::api::console::asset_bytes(file).unwrap(),
            "{path}"
        );
    }
    // The page runs no inline script: every <script> names a file.
    let index = std::str::from_utf8(mcp_root::api::console::asset_bytes("index.html").unwrap())
        .unwrap()
        .to_string();
    for tag in index.split("<script").skip(1) {
        assert!(
            tag.trim_start().starts_with("type=\"module\" src=\"/ui/"),
            "{tag}"
        );
    }
    assert!(!index.contains("http://") && !index.contains("https://"));
    // Console API errors carry the headers too; unknown files are 404.
    for path in ["/ui/api/session", "/ui/nope.js", "/ui/../Cargo.toml"] {
        let res = root.http.get(root.url(path)).send().await.unwrap();
        assert!(res.status().is_client_error(), "{path}");
        assert!(res.headers().contains_key("content-security-policy") || path.contains(".."));
    }
    // No file of the console loads anything from another origin.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../root/ui");
    let files = mcp_tests::files_under(&dir);
    assert!(!files.is_empty(), "no console files in {}", dir.display());
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for bad in ["http://", "https://", "innerHTML", "eval("] {
            let hits: Vec<_> = text
                .lines()
                .filter(|l| !l.trim_start().starts_with("//") && !l.trim_start().starts_with("/*"))
                .filter(|l| l.contains(bad) && !l.contains("www.w3.org/2000/svg"))
                .collect();
            assert!(hits.is_empty(), "{} uses {bad}: {hits:?}", f.display());
        }
    }
    root.stop().await;
}

#[tokio::test]
async fn console_stream_usage_and_operator_reads_come_from_the_rest_family() {
    let root = TestRoot::start().await.unwrap();
    let everything = mcp_tests::serving_everything_toml().unwrap();
    let hub = root.start_hub("hub:console-a", &everything).await.unwrap();
    let (session_id, token) = root.lease("hub:console-a", "InfraOpsRead").await;
    let (cookie, csrf) = root.console_login().await;
    let base = root.handle().base_url();

    // The live stream, opened with the cookie (as EventSource does), from now on.
    let mut stream = with_cookie(
        &root,
        reqwest::Method::GET,
        "/v1/root/mcp/audit/stream?tool_id=hub.get_status",
        &cookie,
        None,
        None,
    )
    .send()
    .await
    .unwrap();
    assert_eq!(stream.status(), 200);
    assert!(
        stream.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let (s, ok) = root.call(&token, "hub.get_status", json!({})).await;
    assert_eq!(s, 200, "{ok}");
    let (s, _) = root.call(&token, "sdk.get_metadata", json!({})).await;
    assert_eq!(s, 403);
    let (s, _) = root.call(&token, "hub.get_status", json!({})).await;
    assert_eq!(s, 200);
    let event_id = ok["event_id"].as_str().unwrap();
    let mut seen = String::new();
    let deadline = Instant::now() + WAIT;
    while !seen.contains(event_id) {
        let chunk = tokio::time::timeout_at(deadline.into(), stream.chunk())
            .await
            .expect("the stream delivers the new event")
            .unwrap()
            .expect("the stream stays open");
        seen.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    assert!(seen.contains("event: audit"), "{seen}");
    // The filter holds: the denied sdk call is not in this stream.
    assert!(!seen.contains("sdk.get_metadata"), "{seen}");
    drop(stream);
    // Reconnecting with Last-Event-ID replays what came after it.
    let first_seq: i64 = seen
        .lines()
        .find_map(|l| l.strip_prefix("id:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let mut again = with_cookie(
        &root,
        reqwest::Method::GET,
        "/v1/root/mcp/audit/stream?tool_id=hub.get_status",
        &cookie,
        None,
        None,
    )
    .header("last-event-id", first_seq.to_string())
    .send()
    .await
    .unwrap();
    let chunk = tokio::time::timeout(WAIT, again.chunk())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let text = std::str::from_utf8(&chunk).unwrap();
    assert!(
        text.contains("hub.get_status") && !text.contains(event_id),
        "{text}"
    );
    drop(again);

    // Usage: per tool and per profile, with error rates and latency percentiles.
    let u = root.admin_get("/v1/root/mcp/audit/usage").await;
    let tool = items(&u["by_tool"])
        .iter()
        .find(|t| t["tool_id"] == "hub.get_status")
        .unwrap();
    assert_eq!(
        (tool["calls"].as_u64(), tool["ok"].as_u64()),
        (Some(2), Some(2))
    );
    assert!(tool["latency_ms"]["p50"].as_f64().unwrap() >= 0.0);
    assert!(
        tool["latency_ms"]["p99"].as_f64().unwrap() >= tool["latency_ms"]["p50"].as_f64().unwrap()
    );
    let profile = items(&u["by_profile"])
        .iter()
        .find(|p| p["capability_profile"] == "InfraOpsRead")
        .unwrap();
    assert_eq!(
        (profile["calls"].as_u64(), profile["denied"].as_u64()),
        (Some(3), Some(1))
    );
    assert!(
        items(&u["by_error_code"])
            .iter()
            .any(|c| c["code"] == "capability_not_granted")
    );
    let series_calls: u64 = items(&u["series"]["buckets"])
        .iter()
        .map(|b| b["calls"].as_u64().unwrap())
        .sum();
    assert_eq!(series_calls, u["totals"]["calls"].as_u64().unwrap());
    let res = root
        .get_as(root.admin_token(), "/v1/root/mcp/audit/usage?bucket_sec=0")
        .await;
    assert_eq!(res.status(), 400);
    // The actor filter of the audit query.
    let mine = root.trail(&format!("actor=lease:{session_id}")).await;
    assert_eq!(mine.len(), 3);

    // Operator reads go through the governed path under an operator-console lease.
    let read = |tool: &str| {
        with_cookie(
            &root,
            reqwest::Method::POST,
            "/v1/root/hubs/hub:console-a/read",
            &cookie,
            Some(&csrf),
            Some(&base),
        )
        .json(&json!({ "tool_id": tool }))
    };
    // Panels load at once (the inspector's typed feeds among them): the reads that find no
    // reader lease share the one issued first.
    let panels = [
        "hub.run_healthchecks",
        "hub.get_runtime_summary",
        "hub.get_operational_surface",
        "hub.get_activity_log",
        "hub.get_capability_usage_summary",
        "root.get_subnet_timeline",
    ];
    let first = futures::future::join_all(panels.map(|tool| read(tool).send())).await;
    let mut bodies = Vec::new();
    for (tool, res) in panels.iter().zip(first) {
        let res = res.unwrap();
        assert_eq!(res.status(), 200, "{tool}");
        let body = res.json::<Value>().await.unwrap();
        assert_eq!(body["ok"], true, "{tool}: {body}");
        bodies.push(body);
    }
    let body = &bodies[0];
    let ev = root.audit_event(body["event_id"].as_str().unwrap()).await;
    assert_eq!(ev["actor"]["audience"], "operator-console");
    assert_eq!(ev["actor"]["capability_profile"], "InfraOpsRead");
    // The reader lease is reused and listed like any other.
    let res = read("hub.get_runtime_summary").send().await.unwrap();
    assert_eq!(res.status(), 200);
    let sessions = root.admin_get("/v1/root/mcp/sessions").await;
    let readers: Vec<_> = items(&sessions["sessions"])
        .iter()
        .filter(|s| s["audience"] == "operator-console")
        .collect();
    assert_eq!(readers.len(), 1, "{sessions}");
    let issued = root
        .admin_get("/v1/root/mcp/audit?tool_id=admin.lease.create")
        .await;
    let for_reads = items(&issued["events"])
        .iter()
        .filter(|e| e["request"]["audience"] == "operator-console")
        .count();
    assert_eq!(for_reads, 1, "one reader lease issued: {issued}");
    // ProfileOps reads pick the ProfileOps read profile.
    let res = read("hub.memory.list_sessions").send().await.unwrap();
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["ok"], true, "{body}");
    // Writes are refused; unknown tools and targets are named.
    let res = read("hub.run_allowed_tests").send().await.unwrap();
    assert_eq!(res.status(), 403);
    let res = read("hub.nope").send().await.unwrap();
    assert_eq!(res.status(), 404);
    let res = with_cookie(
        &root,
        reqwest::Method::POST,
        "/v1/root/hubs/hub:unknown/read",
        &cookie,
        Some(&csrf),
        Some(&base),
    )
    .json(&json!({ "tool_id": "hub.get_status" }))
    .send()
    .await
    .unwrap();
    assert_eq!(res.status(), 404);
    // A lease cannot use the operator's read path.
    let res = root
        .post_as(
            &token,
            "/v1/root/hubs/hub:console-a/read",
            &json!({ "tool_id": "hub.get_status" }),
        )
        .await;
    assert_eq!(res.status(), 403);
    hub.stop().await;
    root.stop().await;
}

// ---- the browser ----------------------------------------------------------------------------

/// chromedriver on a free loopback port, and a WebDriver session of headless Chromium.
struct Browser {
    client: Option<Client>,
    driver: tokio::process::Child,
    _profile: tempfile::TempDir,
    shots: PathBuf,
    saved: Vec<PathBuf>,
}

fn find_program(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in names {
        for dir in std::env::split_paths(&path).chain([PathBuf::from("/usr/bin")]) {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

fn screenshot_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join("ui-screenshots")
}

impl Browser {
    /// Starts chromedriver and a headless Chromium session; `None` (after saying SKIPPED) when
    /// they are not installed outside CI.
    async fn start() -> anyhow::Result<Option<Browser>> {
        mcp_tests::init_crypto();
        let Some(driver_bin) = find_program(&["chromedriver"]) else {
            if std::env::var_os("CI").is_some() {
                bail!("chromedriver is not installed; .ci/run installs chromium-driver");
            }
            println!(
                "SKIPPED: the console browser test needs chromedriver and chromium (apt-get install -y chromium chromium-driver)"
            );
            return Ok(None);
        };
        // chromedriver takes its port on the command line and does not announce one it chose.
        let port = free_port();
        let profile = tempfile::tempdir()?;
        let log = std::fs::File::create(profile.path().join("chromedriver.log"))?;
        let driver = tokio::process::Command::new(&driver_bin)
            .arg(format!("--port={port}"))
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", driver_bin.display()))?;
        let url = format!("http://127.0.0.1:{port}");
        let http = mcp_tests::http_client();
        let started = Instant::now();
        loop {
            if let Ok(r) = http.get(format!("{url}/status")).send().await
                && r.status().is_success()
            {
                break;
            }
            ensure!(
                started.elapsed() < Duration::from_secs(30),
                "chromedriver did not answer on {url} within 30 s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let mut chrome = json!({
            "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--no-first-run", "--disable-extensions", "--window-size=1366,1000",
                format!("--user-data-dir={}", profile.path().join("chrome").display()),
            ],
        });
        if let Some(bin) = find_program(&["chromium", "chromium-browser", "google-chrome"]) {
            chrome["binary"] = json!(bin);
        }
        let mut caps = serde_json::Map::new();
        caps.insert("browserName".into(), json!("chrome"));
        caps.insert("goog:chromeOptions".into(), chrome);
        let mut builder = fantoccini::ClientBuilder::new(
            hyper_util::client::legacy::connect::HttpConnector::new(),
        );
        builder.capabilities(caps);
        let client = builder
            .connect(&url)
            .await
            .context("opening a Chromium session through chromedriver")?;
        let shots = screenshot_dir();
        std::fs::create_dir_all(&shots)?;
        Ok(Some(Browser {
            client: Some(client),
            driver,
            _profile: profile,
            shots,
            saved: Vec::new(),
        }))
    }

    fn c(&self) -> &Client {
        self.client.as_ref().expect("the session is open")
    }

    async fn shot(&mut self, name: &str) -> anyhow::Result<()> {
        let png = self.c().screenshot().await?;
        let path = self.shots.join(format!("{name}.png"));
        std::fs::write(&path, png)?;
        self.saved.push(path);
        Ok(())
    }

    async fn find(&self, css: &str) -> anyhow::Result<fantoccini::elements::Element> {
        self.c()
            .wait()
            .at_most(WAIT)
            .for_element(Locator::Css(css))
            .await
            .with_context(|| format!("no `{css}` on the page within {WAIT:?}"))
    }

    /// Clicks `css` once it is there and interactable (a re-render or the phone menu sliding
    /// in can make the first attempts miss).
    async fn click(&self, css: &str) -> anyhow::Result<()> {
        let start = Instant::now();
        loop {
            let res = match self.find(css).await {
                Ok(el) => {
                    // Centre it, so the sticky top bar cannot be the one clicked.
                    let arg = serde_json::to_value(&el)?;
                    let _ = self
                        .c()
                        .execute(
                            "arguments[0].scrollIntoView({block: 'center'}); return null",
                            vec![arg],
                        )
                        .await;
                    el.click().await.map_err(anyhow::Error::from)
                }
                Err(e) => Err(e),
            };
            match res {
                Ok(()) => return Ok(()),
                Err(e) if start.elapsed() >= WAIT => {
                    return Err(e.context(format!("clicking `{css}`")));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    /// Waits until the text of `css` contains `want`; returns the text.
    async fn text_contains(&self, css: &str, want: &str) -> anyhow::Result<String> {
        let start = Instant::now();
        let mut last = String::new();
        loop {
            if let Ok(el) = self.c().find(Locator::Css(css)).await
                && let Ok(t) = el.text().await
            {
                if t.contains(want) {
                    return Ok(t);
                }
                last = t;
            }
            ensure!(
                start.elapsed() < WAIT,
                "`{css}` never showed `{want}` (last: `{last}`)"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until `css` matches nothing.
    async fn gone(&self, css: &str) -> anyhow::Result<()> {
        let start = Instant::now();
        while !self.c().find_all(Locator::Css(css)).await?.is_empty() {
            ensure!(start.elapsed() < WAIT, "`{css}` is still on the page");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }

    async fn js(&self, script: &str) -> anyhow::Result<Value> {
        Ok(self.c().execute(script, vec![]).await?)
    }

    /// Fails if the page shows raw JSON: a `pre.json` block, or text that reads like a JSON
    /// object dump (`{"` or an object opening `{ "key":`, compact or pretty-printed).
    async fn no_raw_json(&self, page: &str) -> anyhow::Result<()> {
        let found = self
            .js(r#"const text = document.getElementById('page').innerText;
                const m = text.match(/[{\[]\s*"[^"\n]{0,200}"\s*:/) || text.match(/\{"/);
                return {
                  pre: document.querySelectorAll('pre.json').length,
                  dump: m ? text.slice(Math.max(0, m.index - 80), m.index + 120) : null,
                };"#)
            .await?;
        ensure!(
            found["pre"] == json!(0) && found["dump"].is_null(),
            "the {page} page shows raw JSON: {found}"
        );
        Ok(())
    }

    async fn close(mut self) {
        if let Some(c) = self.client.take() {
            let _ = c.close().await;
        }
        let _ = self.driver.kill().await;
    }
}

/// Polls `f` until it holds, at most [`WAIT`].
async fn eventually<F: AsyncFn() -> anyhow::Result<bool>>(what: &str, f: F) -> anyhow::Result<()> {
    let start = Instant::now();
    while !f().await? {
        ensure!(start.elapsed() < WAIT, "never: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

#[tokio::test]
async fn console_in_a_real_browser() {
    let root = TestRoot::start().await.unwrap();
    // The hub serves the NLU authoring plane, whose apply_change needs an operator's approval,
    // and one managed service that leaks memory, for ProfileOps.
    let port = free_port();
    // Where the leaking service's profiling mode "writes" heap snapshots (the test writes them
    // while the session runs, as a jemalloc-profiled service would).
    let heap = tempfile::tempdir().unwrap();
    let heap_dir = heap.path().canonicalize().unwrap();
    let config = format!(
        "{}{}[profiling]\ngrowth_threshold_bytes = 1048576\ngrowth_threshold_percent = 1000.0\n",
        mcp_tests::nlu_hub_toml().unwrap().replacen(
            "allowed_roots = [",
            &format!("allowed_roots = [\"{}\", ", heap_dir.display()),
            1
        ),
        crate::hubs::services::fixture_service(
            "leaky",
            port,
            &["--leak-kib-per-sec", "2048"],
            &format!("heap_profiles = {{ dir = \"{}\" }}", heap_dir.display()),
        ),
    );
    let hub = root.start_hub("hub:ui-alpha", &config).await.unwrap();
    // From here to `close` nothing panics, so no Chromium outlives the test (chromedriver is
    // killed on drop, but the browser it started would not be).
    let Some(mut b) = Browser::start().await.unwrap() else {
        hub.stop().await;
        root.stop().await;
        return;
    };
    // The scenario stops the hub near its end (the inspector of an offline target).
    let mut hub = Some(hub);
    let res = scenario(&mut b, &root, &mut hub, &heap_dir).await;
    if res.is_err() {
        let _ = b.shot("zz-failure").await;
        if let Ok(text) = b.js("return document.body.innerText").await {
            println!(
                "--- the page at the failure\n{}",
                text.as_str().unwrap_or("")
            );
        }
    }
    let saved = b.saved.clone();
    let shots = b.shots.clone();
    b.close().await;
    if let Some(hub) = hub {
        hub.stop().await;
    }
    root.stop().await;
    println!(
        "console screenshots ({}) in {}",
        saved.len(),
        shots.display()
    );
    res.unwrap();
}

async fn scenario(
    b: &mut Browser,
    root: &TestRoot,
    hub: &mut Option<mcp_tests::TestHub>,
    heap_dir: &Path,
) -> anyhow::Result<()> {
    let base = root.handle().base_url();
    // Log in.
    b.c().goto(&format!("{base}/ui/")).await?;
    b.find("#login-token").await?;
    b.shot("01-login").await?;
    b.find("#login-token")
        .await?
        .send_keys(&root.admin_token())
        .await?;
    b.click("#login-submit").await?;
    b.find("#nav-overview").await?;
    // The token is not kept by the page: the field is emptied, nothing in storage or the URL.
    let leftovers = b
        .js("return [document.getElementById('login-token').value, JSON.stringify(localStorage), JSON.stringify(sessionStorage), location.href, document.cookie]")
        .await?;
    ensure!(
        !leftovers.to_string().contains(&root.admin_token()),
        "{leftovers}"
    );

    // Overview: the target online with its skill enabled.
    let row = "tr[data-target='hub:ui-alpha'][data-status='online']";
    b.find(row).await?;
    b.text_contains(row, "enabled").await?;
    b.text_contains("#ov-connected", "1 / 1").await?;
    b.shot("02-overview").await?;
    b.no_raw_json("overview").await?;

    // Sessions: the MCP Server dialog issues a lease and shows the bearer once. The target
    // is typed (the input offers the targets whose id contains what is typed).
    b.click("#nav-sessions").await?;
    b.click("#open-mcp-dialog").await?;
    b.find("#lease-target")
        .await?
        .send_keys("hub:ui-alpha")
        .await?;
    b.find("#lease-profile")
        .await?
        .select_by_value("InfraOpsRead")
        .await?;
    b.find("#lease-ttl").await?.select_by_value("3600").await?;
    b.click("#lease-create").await?;
    let token = b
        .find("#issued-token")
        .await?
        .prop("value")
        .await?
        .context("bearer value")?;
    ensure!(token.starts_with("mcpl_"), "{token}");
    let session_id = b.find("#issued-session").await?.text().await?;
    let codex = b.find("#codex-config").await?.text().await?;
    ensure!(
        codex.contains(&format!("url = \"{base}/mcp\"")) && codex.contains(&token),
        "{codex}"
    );
    let claude = b.find("#claude-config").await?.text().await?;
    ensure!(
        claude.contains(&format!("claude mcp add --transport http root {base}/mcp"))
            && claude.contains(&format!("Authorization: Bearer {token}")),
        "{claude}"
    );
    b.shot("03-sessions-dialog").await?;
    b.click("#issued-done").await?;
    b.gone("#issued-token").await?;
    let lease_row = format!("tr[data-session='{session_id}']");
    b.find(&format!("{lease_row}[data-status='active']"))
        .await?;
    b.text_contains(&lease_row, "hub:ui-alpha").await?;

    // Requests log: a call by an MCP client appears live, without a reload.
    b.click("#nav-requests").await?;
    b.text_contains("#live", "live").await?;
    b.js("window.__sameDocument = 'yes'; return null").await?;
    let client = mcp_client(&root.mcp_url(), &token).await?;
    let res = client
        .call_tool(rmcp::model::CallToolRequestParams::new("hub.get_status"))
        .await?;
    ensure!(res.is_error != Some(true), "{res:?}");
    let call_row = "tr.event-row[data-tool='hub.get_status']";
    b.find(call_row).await?;
    b.text_contains(call_row, &format!("lease:{session_id}"))
        .await?;
    ensure!(
        b.js("return window.__sameDocument || null").await? == json!("yes"),
        "the page was reloaded"
    );
    // A denied call appears too.
    client
        .call_tool(rmcp::model::CallToolRequestParams::new("sdk.get_metadata"))
        .await
        .ok();
    b.find("tr.event-row[data-status='denied']").await?;
    // One click opens the event: decision, adapter, dry-run flag, linked events.
    b.click(call_row).await?;
    b.text_contains("#detail-decision", "allow").await?;
    let adapter = b.find("#detail-adapter").await?.text().await?;
    ensure!(adapter.starts_with("infra_access_skill"), "{adapter}");
    b.text_contains("#detail-dry-run", "no").await?;
    b.text_contains("#detail-linked", "this event").await?;
    b.text_contains("#event-detail", "Redactions").await?;
    // The request body reads as fields, not JSON.
    b.text_contains("#detail-request", "hub.get_status").await?;
    b.shot("04-requests-event").await?;
    b.no_raw_json("requests").await?;

    // A ProfileOps session on the leaking service, run to its end by a control lease.
    let (_, profiler) = root.lease("hub:ui-alpha", "ProfileOpsControl").await;
    let args = json!({"service": "leaky", "interval_ms": 200, "duration_sec": 2, "mode": "normal"});
    let (s, preview) = root
        .call(&profiler, "hub.memory.start_profile", args.clone())
        .await;
    ensure!(s == 200, "{preview}");
    let mut execute = args;
    execute["phase"] = json!("execute");
    execute["idempotency_key"] = json!("ui-profile-1");
    execute["confirmation_token"] = preview["result"]["confirmation_token"].clone();
    let (s, started) = root
        .call(&profiler, "hub.memory.start_profile", execute)
        .await;
    ensure!(s == 200, "{started}");
    let profile_id = started["result"]["result"]["session"]["session_id"]
        .as_str()
        .with_context(|| format!("no session in {started}"))?
        .to_string();
    let snapshot = |n: u32, leaked: i64| {
        let stacks: &[(&[&str], i64)] = &[
            (
                &["malloc", "fixture::leak_cache", "fixture::tick", "main"],
                leaked,
            ),
            (&["malloc", "fixture::serve", "main"], 4096),
        ];
        std::fs::write(
            heap_dir.join(format!("snapshot-{n}.pb")),
            mcp_tests::heap::pprof(stacks),
        )
    };
    snapshot(1, 1 << 20)?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    snapshot(2, 5 << 20)?;
    eventually("the profiling session ends", async || {
        let (_, s) = root
            .call(
                &profiler,
                "hub.memory.get_session",
                json!({ "session_id": profile_id }),
            )
            .await;
        Ok(s["result"]["session"]["state"] == "completed")
    })
    .await?;

    // Target inspector: health, runtime, ProfileOps with the memory chart, then disable the
    // skill and watch the lease's tools go.
    b.click("#nav-targets").await?;
    b.text_contains("#health-status", "healthy").await?;
    b.text_contains("#inspect-health", "leaky").await?;
    b.text_contains("#inspect-runtime", "Hub process").await?;
    b.text_contains("#inspect-runtime", "leaky").await?;
    b.text_contains("#inspect-profiles", "completed").await?;
    b.find("#memory-chart svg.line-chart path.line").await?;
    b.text_contains("#memory-chart", "RSS of leaky").await?;
    // Where the heap grew: the leaking function first, in the chart and the table.
    b.text_contains("#heap-summary", "snapshot-1.pb → snapshot-2.pb")
        .await?;
    b.find("#heap-summary svg.bar-chart rect.bar").await?;
    b.text_contains(
        "#heap-summary tr[data-site='fixture::leak_cache']",
        "4.0 MiB",
    )
    .await?;
    let first = b
        .js("return document.querySelector('#heap-summary table tbody tr').dataset.site")
        .await?;
    ensure!(first == json!("fixture::leak_cache"), "{first}");
    b.js("document.getElementById('heap-summary').scrollIntoView({block: 'center'}); return null")
        .await?;
    b.shot("05b-heap-summary").await?;
    b.text_contains("#inspect-incidents", "memory_growth")
        .await?;
    b.text_contains("#inspect-incidents", "fixture::leak_cache")
        .await?;
    b.text_contains("#skill-state", "enabled").await?;
    b.text_contains("#subnet-health", "healthy").await?;
    b.text_contains("#inspect-subnet", "hub:").await?;
    b.text_contains("#inspect-tokens", "active").await?;
    b.shot("05-target-inspector").await?;
    b.js("document.getElementById('inspect-profiles').scrollIntoView(); return null")
        .await?;
    b.shot("05b-target-profileops").await?;
    typed_feeds(b, root).await?;
    b.click("#skill-disable-infra_access_skill").await?;
    b.text_contains("#skill-state", "disabled").await?;
    b.text_contains("#published-count", "0").await?;
    let tools = async || -> anyhow::Result<Vec<String>> {
        Ok(client
            .list_all_tools()
            .await?
            .iter()
            .map(|t| t.name.to_string())
            .collect())
    };
    eventually("the lease's hub tools are withdrawn", async || {
        Ok(!tools().await?.iter().any(|t| t == "hub.get_status"))
    })
    .await?;
    b.text_contains("#inspect-history", "admin.skill.disable")
        .await?;
    b.shot("06-skill-disabled").await?;
    b.click("#skill-enable-infra_access_skill").await?;
    b.text_contains("#skill-state", "enabled").await?;
    eventually("the lease's hub tools are back", async || {
        Ok(tools().await?.iter().any(|t| t == "hub.get_status"))
    })
    .await?;

    // Approvals: NLU changes proposed by an author lease, one approved and one rejected here;
    // the approved one then applies, the rejected one never does.
    let (_, author) = root.lease("hub:ui-alpha", "NLUTeacherAuthor").await;
    let (s, list) = root
        .call(&author, "nlu_authoring.list_templates", json!({}))
        .await;
    ensure!(s == 200, "{list}");
    let fp = list["result"]["templates"]
        .as_array()
        .context("templates")?
        .iter()
        .find(|t| t["template_id"] == "en.device.turn_on")
        .and_then(|t| t["fingerprint"].as_str())
        .with_context(|| format!("no en.device.turn_on in {list}"))?
        .to_string();
    let propose = async |example: &str| -> anyhow::Result<(String, String)> {
        let (s, p) = root
            .call(
                &author,
                "nlu_authoring.propose_change",
                json!({"template_id": "en.device.turn_on", "base_fingerprint": fp, "add_examples": [example]}),
            ).await;
        ensure!(s == 200, "{p}");
        Ok((
            p["result"]["approval"]["approval_id"]
                .as_str()
                .with_context(|| format!("no approval in {p}"))?
                .to_string(),
            p["result"]["confirmation_token"]
                .as_str()
                .context("confirmation token")?
                .to_string(),
        ))
    };
    let (approve_id, approve_token) = propose("illuminate the kitchen lamp").await?;
    let (reject_id, reject_token) = propose("brighten the hallway lamp").await?;
    let apply = |token: &str, key: &str| json!({"phase": "execute", "confirmation_token": token, "idempotency_key": key});
    let (_, pending) = root
        .call(
            &author,
            "nlu_authoring.apply_change",
            apply(&approve_token, "ui-1"),
        )
        .await;
    ensure!(pending["error"]["code"] == "approval_pending", "{pending}");
    b.click("#nav-approvals").await?;
    let card = format!("article[data-approval='{approve_id}']");
    b.text_contains(&card, "nlu_authoring.apply_change").await?;
    // The preview diff: the added example, marked as an addition.
    b.text_contains(
        &format!("{card} .diff-line.add"),
        "illuminate the kitchen lamp",
    )
    .await?;
    b.text_contains(
        &format!("article[data-approval='{reject_id}'] .diff-line.add"),
        "brighten the hallway lamp",
    )
    .await?;
    // The arguments read as fields, not JSON.
    b.text_contains(&format!("{card} details.arguments"), "Arguments")
        .await?;
    b.js("document.querySelectorAll('details').forEach((d) => { d.open = true; }); return null")
        .await?;
    b.text_contains(&format!("{card} details.arguments"), "add_examples")
        .await?;
    b.shot("07-approvals").await?;
    b.no_raw_json("approvals").await?;
    b.click(&format!("#approve-{approve_id}")).await?;
    b.gone(&card).await?;
    b.find(&format!(
        "tr[data-approval='{approve_id}'][data-status='approved']"
    ))
    .await?;
    b.find(&format!(
        "article[data-approval='{reject_id}'] input.reason"
    ))
    .await?
    .send_keys("not a real phrase")
    .await?;
    b.click(&format!("#reject-{reject_id}")).await?;
    b.find(&format!(
        "tr[data-approval='{reject_id}'][data-status='rejected']"
    ))
    .await?;
    b.text_contains(
        &format!("tr[data-approval='{reject_id}']"),
        "not a real phrase",
    )
    .await?;
    b.text_contains("#approvals-pending", "No approval is waiting")
        .await?;
    b.no_raw_json("approvals").await?;
    let (s, done) = root
        .call(
            &author,
            "nlu_authoring.apply_change",
            apply(&approve_token, "ui-1"),
        )
        .await;
    ensure!(s == 200 && done["ok"] == true, "{s} {done}");
    let (_, refused) = root
        .call(
            &author,
            "nlu_authoring.apply_change",
            apply(&reject_token, "ui-2"),
        )
        .await;
    ensure!(
        refused["ok"] == false,
        "a rejected change applied: {refused}"
    );
    b.shot("08-approvals-decided").await?;

    // A lease and what it minted: its chain is one click away, and revoking it in the console
    // ends what it minted.
    let (parent, parent_token) = root.lease("hub:ui-alpha", "InfraOpsControl").await;
    let (s, minted) = root
        .write(
            &parent_token,
            "hub.issue_access_token",
            json!({"capability_profile": "InfraOpsRead", "ttl_sec": 300}),
            "ui-mint",
        )
        .await?;
    ensure!(s == 200, "{minted}");
    let child = minted["result"]["result"]["session_id"]
        .as_str()
        .context("the minted lease")?
        .to_owned();
    b.click("#nav-sessions").await?;
    let child_row = format!("tr[data-session='{child}']");
    b.text_contains(&child_row, "minted of").await?;
    b.click(&format!("#chain-{child}")).await?;
    b.text_contains("#delegation", &parent[parent.len() - 12..])
        .await?;
    b.text_contains("#delegation", "(this lease)").await?;
    b.text_contains("#delegation-issuer", "operator:admin")
        .await?;
    let revoke_parent = format!("#revoke-{parent}");
    b.click(&revoke_parent).await?;
    b.click(&revoke_parent).await?;
    b.find(&format!("{child_row}[data-status='revoked']"))
        .await?;
    b.shot("09-sessions-chain").await?;

    // Revoke the lease from the console; the client's bearer stops working.
    b.click("#nav-sessions").await?;
    let revoke = format!("#revoke-{session_id}");
    b.click(&revoke).await?;
    b.text_contains(&revoke, "Confirm").await?;
    b.click(&revoke).await?;
    b.find(&format!("{lease_row}[data-status='revoked']"))
        .await?;
    let after = client
        .call_tool(rmcp::model::CallToolRequestParams::new("hub.get_status"))
        .await;
    ensure!(
        after
            .as_ref()
            .map(|r| r.is_error == Some(true))
            .unwrap_or(true),
        "a revoked lease still calls: {after:?}"
    );
    b.shot("09-sessions-revoked").await?;
    b.no_raw_json("sessions").await?;
    drop(client);

    // The remaining pages.
    b.click("#nav-failures").await?;
    b.text_contains("#page-failures", "capability_not_granted")
        .await?;
    b.text_contains("#page-failures", "sdk.get_metadata")
        .await?;
    b.shot("10-failures").await?;
    b.no_raw_json("failures").await?;
    b.click("#nav-usage").await?;
    b.find("tr[data-key='hub.get_status']").await?;
    b.find("svg.chart").await?;
    b.shot("11-usage").await?;
    b.no_raw_json("usage").await?;
    b.click("#nav-policy").await?;
    b.find("article[data-profile='InfraOpsRead']").await?;
    b.text_contains("#page-policy", "test-only").await?;
    b.shot("12-policy").await?;
    b.no_raw_json("policy").await?;
    b.click("#nav-integrity").await?;
    b.text_contains("#verify-verdict", "Chain intact").await?;
    b.shot("13-integrity").await?;
    b.no_raw_json("integrity").await?;

    // Phone width: the navigation folds behind the menu button.
    b.c().set_window_size(390, 844).await?;
    b.click("#nav-toggle").await?;
    b.click("#nav-overview").await?;
    b.find(row).await?;
    b.shot("14-phone-overview").await?;
    b.click("#nav-toggle").await?;
    b.click("#nav-requests").await?;
    b.find(call_row).await?;
    b.shot("15-phone-requests").await?;

    b.c().set_window_size(1366, 1000).await?;

    b.click("#nav-targets").await?;
    b.text_contains("#skill-state", "enabled").await?;
    // Lifecycle: a label set in the inspector, a cordon (with its reason) that withdraws the
    // lease's tools and an uncordon that brings them back, read-only and back; the overview
    // selects the target by its label.
    let (_, life_token) = root.lease("hub:ui-alpha", "InfraOpsRead").await;
    let life_client = mcp_client(&root.mcp_url(), &life_token).await?;
    let life_tools = async || -> anyhow::Result<Vec<String>> {
        Ok(life_client
            .list_all_tools()
            .await?
            .iter()
            .map(|t| t.name.to_string())
            .collect())
    };
    b.find("#label-input").await?.send_keys("role=web").await?;
    b.click("#label-form button[type=submit]").await?;
    b.text_contains("#target-labels", "role=web").await?;
    b.find("#lifecycle-reason")
        .await?
        .send_keys("kernel update")
        .await?;
    b.click("#lifecycle-cordon").await?;
    b.text_contains("#lifecycle-state", "cordoned").await?;
    b.text_contains("#lifecycle-changed-by", "operator:admin: kernel update")
        .await?;
    eventually("a cordoned target's tools are withdrawn", async || {
        Ok(!life_tools().await?.iter().any(|t| t.starts_with("hub.")))
    })
    .await?;
    b.shot("06b-target-cordoned").await?;
    b.click("#lifecycle-uncordon").await?;
    b.text_contains("#lifecycle-state", "active").await?;
    b.click("#narrow-read-only").await?;
    b.text_contains("#target-narrowing", "read-only").await?;
    b.click("#narrow-read-only").await?;
    b.text_contains("#target-narrowing", "nothing denied")
        .await?;
    eventually("the uncordoned target's tools are back", async || {
        Ok(life_tools().await?.iter().any(|t| t == "hub.get_status"))
    })
    .await?;
    let cordons = root
        .admin()
        .get("/v1/root/mcp/audit?tool_id=admin.hub.cordon&target_id=hub:ui-alpha")
        .await?;
    ensure!(
        cordons["events"][0]["actor"]["id"] == "operator:admin",
        "the console's cordon is an event naming the operator: {cordons}"
    );
    b.click("#nav-overview").await?;
    b.find("#ov-targets-selector")
        .await?
        .send_keys("label:role=web,env=test")
        .await?;
    b.click("#ov-targets-apply").await?;
    b.text_contains("#ov-targets-count", "of 1 targets").await?;
    b.text_contains(".targets-table", "role=web").await?;
    fleet_runs(b).await?;

    // The hub goes away: its panels say so once each, root's own records still answer, and
    // so does the ProfileOps evidence the hub published.
    hub.take().context("the hub runs")?.stop().await;
    eventually("root sees the hub offline", async || {
        let hubs = root.admin().get("/v1/root/hubs").await?;
        Ok(hubs["targets"][0]["status"] == "offline")
    })
    .await?;
    b.click("#nav-targets").await?;
    b.text_contains("#inspect-status", "offline").await?;
    b.find("#inspect-offline").await?;
    b.text_contains("#transport-pressure", "no connection")
        .await?;
    for panel in [
        "#inspect-surface",
        "#inspect-usage",
        "#inspect-activity",
        "#inspect-health",
    ] {
        b.text_contains(&format!("{panel} .unavailable"), "hub:ui-alpha is offline")
            .await?;
    }
    // ProfileOps still shows what the hub published, from root's copy, saying so.
    b.text_contains("#profiles-source", "From root's copy")
        .await?;
    b.text_contains("#inspect-profiles", "leaky").await?;
    b.text_contains("#incidents-source", "From root's copy")
        .await?;
    b.text_contains("#inspect-incidents", "memory_growth")
        .await?;
    b.text_contains("#memory-chart", "RSS of leaky").await?;
    b.find("#inspect-timeline tr[data-kind='disconnected'][data-target='hub:ui-alpha']")
        .await?;
    b.text_contains("#subnet-health", "").await?;
    b.find("#inspect-tokens table").await?;
    b.find("#inspect-history table").await?;
    let errors = b
        .js("return [...document.querySelectorAll('#page-targets .error')].map((e) => e.innerText)")
        .await?;
    ensure!(
        errors == json!([]),
        "errors on the offline target's page: {errors}"
    );
    b.shot("16-target-offline").await?;
    b.no_raw_json("offline target").await?;

    // Log out: the login form is back and the API refuses the old session.
    b.click("#logout").await?;
    b.find("#login-form").await?;
    let status = b
        .js("return fetch('/v1/root/mcp/sessions', {credentials: 'same-origin'}).then(r => r.status)")
        .await?;
    ensure!(status == json!(401), "{status}");
    Ok(())
}

/// Fleet runs: a read started from the form on `label:role=web` runs to its end on the page
/// (progress, its outcome grouped, the target's line); a write's preview shows the target's
/// part and a confirmation button, and is dropped with Cancel; another is confirmed and runs.
async fn fleet_runs(b: &mut Browser) -> anyhow::Result<()> {
    b.click("#nav-fleet").await?;
    b.find("#fleet-selector")
        .await?
        .send_keys("label:role=web")
        .await?;
    b.find("#fleet-tool")
        .await?
        .send_keys("hub.get_status")
        .await?;
    b.click("#fleet-start-read").await?;
    b.text_contains("#fleet-run-state", "completed").await?;
    b.text_contains("#fleet-summary", "1 targets: 1 succeeded")
        .await?;
    b.find("#fleet-groups tr[data-status='succeeded']").await?;
    b.find("#fleet-targets tr[data-target='hub:ui-alpha'][data-status='succeeded']")
        .await?;
    b.click("#fleet-targets tr[data-target='hub:ui-alpha'] button")
        .await?;
    b.text_contains("#fleet-target-result", "succeeded").await?;
    b.shot("06c-fleet-run").await?;
    b.no_raw_json("fleet run").await?;

    b.click("#nav-fleet").await?;
    b.find("#fleet-runs tr[data-state='completed']").await?;
    b.find("#fleet-selector")
        .await?
        .send_keys("label:role=web")
        .await?;
    b.find("#fleet-tool")
        .await?
        .send_keys("hub.run_allowed_tests")
        .await?;
    b.find("#fleet-arguments")
        .await?
        .send_keys(r#"{"name": "smoke"}"#)
        .await?;
    b.click("#fleet-preview").await?;
    b.text_contains("#fleet-run-state", "previewed").await?;
    b.find("#fleet-confirm").await?;
    b.find("#fleet-targets tr[data-target='hub:ui-alpha']")
        .await?;
    b.shot("06d-fleet-preview").await?;
    b.click("#fleet-cancel").await?;
    b.text_contains("#fleet-run-state", "cancelled").await?;
    // Previewed again and confirmed: the run starts and ends (this hub has no test `smoke`,
    // so its one target is excluded and nothing runs).
    b.click("#nav-fleet").await?;
    b.find("#fleet-selector")
        .await?
        .send_keys("label:role=web")
        .await?;
    b.find("#fleet-tool")
        .await?
        .send_keys("hub.run_allowed_tests")
        .await?;
    b.find("#fleet-arguments")
        .await?
        .send_keys(r#"{"name": "smoke"}"#)
        .await?;
    b.click("#fleet-preview").await?;
    b.text_contains("#fleet-run-state", "previewed").await?;
    b.click("#fleet-confirm").await?;
    b.text_contains("#fleet-run-state", "completed").await?;
    b.text_contains("#fleet-summary", "1 excluded").await?;
    Ok(())
}

/// The inspector's typed feeds show what the hub and root report: transport pressure as
/// labelled numbers, the hub's surface joined with the contracts, its activity log and usage
/// naming the client's earlier `hub.get_status` call (the count the hub itself reports), and
/// the subnet timeline with the hub's `connected` event.
async fn typed_feeds(b: &mut Browser, root: &TestRoot) -> anyhow::Result<()> {
    let pressure = b
        .text_contains("#transport-pressure", "Pending commands")
        .await?;
    for label in ["Queue depth", "Pending calls", "Pending commands"] {
        let n = pressure
            .split(label)
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .with_context(|| format!("no `{label}` in `{pressure}`"))?;
        ensure!(
            n.parse::<u64>().is_ok(),
            "{label} is not a number: `{pressure}`"
        );
    }
    b.find("#inspect-surface tr[data-tool='hub.get_status'][data-published='true']")
        .await?;
    // Side effect and capability come from the contract, writes from the hub's adapter.
    let apply = "#inspect-surface tr[data-tool='nlu_authoring.apply_change']";
    for want in ["published", "write", "nlu.author", "yes"] {
        b.text_contains(apply, want).await?;
    }
    // The newest calls are the inspector's own reads and the profiler's polls: the tool
    // filter finds the client's call.
    b.find("#inspect-activity tr[data-tool='hub.memory.get_session'][data-status='ok']")
        .await?;
    b.find("#activity-tool")
        .await?
        .select_by_value("hub.get_status")
        .await?;
    b.find("#inspect-activity tr[data-tool='hub.get_status'][data-status='ok']")
        .await?;
    b.gone("#inspect-activity tr:not([data-tool='hub.get_status'])[data-tool]")
        .await?;
    b.find("#inspect-usage tr[data-capability='infra.read.status']")
        .await?;
    let chart = b
        .js("return document.querySelector('#usage-chart svg.bar-chart').textContent")
        .await?;
    ensure!(
        chart
            .as_str()
            .is_some_and(|t| t.contains("hub.memory.get_session")),
        "the usage chart: {chart}"
    );
    let shown = b
        .find("#inspect-usage tr[data-tool='hub.get_status'] .calls")
        .await?
        .text()
        .await?;
    let (_, reader) = root.lease_for("hub:ui-alpha", "InfraOpsRead", 60).await;
    let (s, usage) = root
        .call(&reader, "hub.get_capability_usage_summary", json!({}))
        .await;
    ensure!(s == 200, "{usage}");
    let calls = usage["result"]["tools"]
        .as_array()
        .context("tools")?
        .iter()
        .find(|t| t["tool_id"] == "hub.get_status")
        .map(|t| t["calls"].to_string())
        .with_context(|| format!("no hub.get_status in {usage}"))?;
    ensure!(
        shown == calls,
        "the panel shows {shown} calls, the hub {calls}"
    );
    b.find("#inspect-timeline tr[data-kind='connected'][data-target='hub:ui-alpha']")
        .await?;
    b.js("document.getElementById('inspect-surface').scrollIntoView(); return null")
        .await?;
    b.shot("05c-target-surface").await?;
    b.js("document.getElementById('inspect-usage').scrollIntoView(); return null")
        .await?;
    b.shot("05d-target-usage").await?;
    b.js("document.getElementById('inspect-timeline').scrollIntoView(); return null")
        .await?;
    b.shot("05e-target-timeline").await?;
    b.no_raw_json("targets").await
}

/// An OAuth client's sign-in approved in the console: the browser opens the client's
/// authorization URL, root sends it to the console, the operator logs in and approves in
/// the MCP Server dialog, and the browser lands on the client's redirect URI with a code
/// the client exchanges for a lease bearer that calls the target.
#[tokio::test]
async fn an_oauth_sign_in_is_approved_in_the_console_dialog() {
    let root = TestRoot::start_with(|c| c.oauth.discovery = true)
        .await
        .unwrap();
    let hub = root.start_hub("hub:ui-oauth", "").await.unwrap();
    let Some(mut b) = Browser::start().await.unwrap() else {
        hub.stop().await;
        root.stop().await;
        return;
    };
    let res = oauth_scenario(&mut b, &root).await;
    if res.is_err() {
        let _ = b.shot("zz-oauth-failure").await;
    }
    b.close().await;
    hub.stop().await;
    root.stop().await;
    res.unwrap();
}

async fn oauth_scenario(b: &mut Browser, root: &TestRoot) -> anyhow::Result<()> {
    // A redirect URI on a port nobody serves: the browser's navigation there is read back.
    let redirect = format!("http://127.0.0.1:{}/callback", free_port());
    let client: Value = root
        .http
        .post(root.url("/oauth/register"))
        .json(&json!({"client_name": "Browser Test Client", "redirect_uris": [redirect]}))
        .send()
        .await?
        .json()
        .await?;
    let client_id = client["client_id"].as_str().context("client_id")?;
    let pkce = mcp_tests::oauth::pkce();
    let query = mcp_tests::oauth::authorize_query(
        client_id,
        &redirect,
        &pkce.challenge,
        &[("state", "browser-state"), ("scope", "InfraOpsRead")],
    );
    b.c()
        .goto(&format!("{}?{query}", root.url("/oauth/authorize")))
        .await?;
    // Not logged in yet: the console asks first, and keeps the request.
    b.find("#login-token")
        .await?
        .send_keys(&root.admin_token())
        .await?;
    b.click("#login-submit").await?;
    b.text_contains("#oauth-client", "Browser Test Client")
        .await?;
    b.text_contains("#oauth-redirect", &redirect).await?;
    let profile = b.find("#oauth-profile").await?.prop("value").await?;
    ensure!(
        profile.as_deref() == Some("InfraOpsRead"),
        "the asked scope is preselected: {profile:?}"
    );
    b.find("#oauth-target")
        .await?
        .send_keys("hub:ui-oauth")
        .await?;
    b.find("#oauth-ttl").await?.select_by_value("3600").await?;
    b.shot("20-oauth-sign-in").await?;
    b.click("#oauth-approve").await?;
    eventually("the browser returns to the client", async || {
        Ok(b.c().current_url().await?.as_str().starts_with(&redirect))
    })
    .await?;
    let landed = b.c().current_url().await?.to_string();
    let q = mcp_tests::oauth::query_of(&landed);
    ensure!(
        q.get("state").map(String::as_str) == Some("browser-state"),
        "{landed}"
    );
    let form = mcp_tests::oauth::form(&[
        ("grant_type", "authorization_code"),
        ("client_id", client_id),
        ("code", q.get("code").context("code")?),
        ("redirect_uri", &redirect),
        ("code_verifier", &pkce.verifier),
    ]);
    let tokens: Value = root
        .http
        .post(root.url("/oauth/token"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form)
        .send()
        .await?
        .json()
        .await?;
    let access = tokens["access_token"].as_str().context("access_token")?;
    let (status, body) = root.call(access, "hub.get_status", json!({})).await;
    ensure!(
        status == 200 && body["result"]["target_id"] == "hub:ui-oauth",
        "{body}"
    );
    Ok(())
}

// ---- a zone-sized fleet ---------------------------------------------------------------------

/// Targets enrolled over REST beside the fleet test's one live hub: `t-00001` … `t-14999`,
/// so the zone holds 15,000.
const FLEET: usize = 14_999;
/// The live hub; its id sorts before every `t-…`.
const FLEET_HUB: &str = "hub:fleet-live";

/// Target `i` of the fleet: id, environment (three) and subnet (fifty), so filters matter.
fn fleet_target(i: usize) -> (String, &'static str, String) {
    (
        format!("t-{i:05}"),
        ["prod", "staging", "dev"][i % 3],
        format!("subnet-{:02}", i % 50),
    )
}

/// Enrols the fleet over REST, 64 requests at a time; returns how long it took.
async fn enrol_fleet(root: &TestRoot) -> anyhow::Result<Duration> {
    use futures::StreamExt;
    let started = Instant::now();
    let url = root.url("/v1/root/hubs");
    let token = root.admin_token();
    let mut answers = futures::stream::iter(1..=FLEET)
        .map(|i| {
            let (target_id, environment, subnet_id) = fleet_target(i);
            let req = root.http.post(&url).bearer_auth(&token).json(&json!({
                "target_id": target_id, "environment": environment, "subnet_id": subnet_id,
            }));
            async move {
                let res = req.send().await?;
                let status = res.status();
                let body = res.text().await?;
                ensure!(status == 201, "enrolling {target_id}: {status} {body}");
                anyhow::Ok(())
            }
        })
        .buffer_unordered(64);
    while let Some(done) = answers.next().await {
        done?;
    }
    Ok(started.elapsed())
}

/// The ids of a REST page of targets.
fn page_ids(page: &Value) -> Vec<String> {
    page["targets"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t["target_id"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// A zone of 15,000 targets (one with a connected hub) in the console: Overview counts them
/// from root's totals and shows one page of the table, whose filters and Next/Previous pages
/// agree with REST; the Targets page finds a target deep in the list by part of its id and
/// opens its inspector; the lease dialog's target input offers a few matches. The DOM holds
/// a page, never the fleet.
#[tokio::test]
async fn the_console_pages_a_zone_of_fifteen_thousand_targets() {
    // Enrolling the zone is most of this test (about a minute in a debug build); it runs in
    // the suite's main pass only: its subject is the console's paging, which neither the
    // PostgreSQL pass nor the pass 400 days ahead changes (the list filters run on root's
    // memory, not the store).
    if std::env::var_os("MCP_TEST_ALL_ON_POSTGRES").is_some()
        || std::env::var_os("MCP_TEST_DESCRIPTOR_CLOCK_DAYS").is_some()
    {
        println!("SKIPPED: the zone of 15,000 targets runs in the main pass only");
        return;
    }
    // `synchronous = normal` (an operator's choice root supports): each enrolment is a
    // commit, and this test is about the console, not about surviving power loss.
    let root = TestRoot::start_with(|c| {
        TestRoot::on_sqlite(c);
        c.storage.sqlite_synchronous = mcp_root::config::SqliteSync::Normal;
    })
    .await
    .unwrap();
    let took = enrol_fleet(&root).await.unwrap();
    println!("enrolled {FLEET} targets over REST (64 at a time) in {took:?}");
    let hub = root.start_hub(FLEET_HUB, "").await.unwrap();
    let Some(mut b) = Browser::start().await.unwrap() else {
        hub.stop().await;
        root.stop().await;
        return;
    };
    let res = fleet_scenario(&mut b, &root).await;
    if res.is_err() {
        let _ = b.shot("zz-fleet-failure").await;
        if let Ok(text) = b.js("return document.body.innerText").await {
            println!(
                "--- the page at the failure\n{}",
                text.as_str().unwrap_or("")
            );
        }
    }
    b.close().await;
    hub.stop().await;
    root.stop().await;
    res.unwrap();
}

async fn fleet_scenario(b: &mut Browser, root: &TestRoot) -> anyhow::Result<()> {
    let zone = FLEET + 1;
    // What REST says: every target, one of them connected.
    let all = root.admin().get("/v1/root/hubs?limit=100").await?;
    ensure!(all["total"] == json!(zone), "{}", all["total"]);
    let offline = all["by_status"]["offline"].as_u64().context("offline")?;
    let connected = zone as u64 - offline;
    ensure!(connected == 1, "{}", all["by_status"]);
    let first_page = page_ids(&all);
    ensure!(first_page.len() == 100 && first_page[0] == FLEET_HUB);
    let cursor = all["next_cursor"].as_str().context("next_cursor")?;
    let second_page = page_ids(
        &root
            .admin()
            .get(&format!("/v1/root/hubs?limit=100&cursor={cursor}"))
            .await?,
    );
    let active_leases = root
        .admin()
        .get("/v1/root/mcp/sessions?status=active&limit=1")
        .await?["total"]
        .as_u64()
        .context("the active leases' total")?;

    b.c()
        .goto(&format!("{}/ui/", root.handle().base_url()))
        .await?;
    b.find("#login-token")
        .await?
        .send_keys(&root.admin_token())
        .await?;
    b.click("#login-submit").await?;

    // Overview: the counts are root's, the table one page of 100 rows.
    b.text_contains("#ov-connected", &format!("{connected} / {zone}"))
        .await?;
    let shown = b.find("#ov-leases").await?.text().await?;
    ensure!(
        shown.parse::<u64>().ok() == Some(active_leases),
        "{shown} active leases shown, REST counts {active_leases}"
    );
    b.text_contains("#ov-targets-count", &format!("1–100 of {zone} targets"))
        .await?;
    let rows = "return [...document.querySelectorAll('#ov-targets-body tr[data-target]')].map((r) => r.dataset.target)";
    ensure!(b.js(rows).await? == json!(first_page), "the first page");
    let in_dom = b
        .js("return document.querySelectorAll('tr[data-target]').length")
        .await?;
    ensure!(in_dom == json!(100), "{in_dom} target rows in the page");
    b.find(&format!(
        "tr[data-target='{FLEET_HUB}'][data-status='online']"
    ))
    .await?;
    b.shot("30-fleet-overview").await?;

    // Next page shows the next ids, Previous the first again.
    b.click("#ov-targets-next").await?;
    b.text_contains("#ov-targets-count", &format!("101–200 of {zone}"))
        .await?;
    ensure!(b.js(rows).await? == json!(second_page), "the second page");
    b.click("#ov-targets-prev").await?;
    b.text_contains("#ov-targets-count", &format!("1–100 of {zone}"))
        .await?;
    ensure!(
        b.js(rows).await? == json!(first_page),
        "back on the first page"
    );

    // Filters narrow the table to root's count: an environment, then a subnet of it too.
    let staging = (1..=FLEET).filter(|i| fleet_target(*i).1 == "staging");
    let n_staging = staging.clone().count();
    let rest = root
        .admin()
        .get("/v1/root/hubs?environment=staging&limit=1")
        .await?;
    ensure!(rest["total"] == json!(n_staging), "{}", rest["total"]);
    b.find("#ov-targets-environment")
        .await?
        .send_keys("staging")
        .await?;
    b.click("#ov-targets-apply").await?;
    b.text_contains(
        "#ov-targets-count",
        &format!("1–100 of {n_staging} targets"),
    )
    .await?;
    let envs = b
        .js("return [...document.querySelectorAll('#ov-targets-body td[data-label=Environment]')].map((td) => td.textContent)")
        .await?;
    ensure!(envs == json!(vec!["staging"; 100]), "{envs}");
    let n_subnet = staging
        .filter(|i| fleet_target(*i).2 == "subnet-07")
        .count();
    let rest = root
        .admin()
        .get("/v1/root/hubs?environment=staging&subnet_id=subnet-07&limit=1")
        .await?;
    ensure!(rest["total"] == json!(n_subnet), "{}", rest["total"]);
    b.find("#ov-targets-subnet_id")
        .await?
        .send_keys("subnet-07")
        .await?;
    b.click("#ov-targets-apply").await?;
    b.text_contains(
        "#ov-targets-count",
        &format!("–{} of {n_subnet} targets", n_subnet.min(100)),
    )
    .await?;
    let last = b
        .js("return document.getElementById('ov-targets-next').disabled")
        .await?;
    ensure!(last == json!(n_subnet <= 100), "Next page on the last page");
    // The status filter: the one connected hub.
    b.click("#ov-targets-clear").await?;
    b.text_contains("#ov-targets-count", &format!("1–100 of {zone}"))
        .await?;
    b.find("#ov-targets-status")
        .await?
        .select_by_value("online")
        .await?;
    b.text_contains("#ov-targets-count", "1–1 of 1 targets")
        .await?;
    b.find(&format!("#ov-targets-body tr[data-target='{FLEET_HUB}']"))
        .await?;
    b.no_raw_json("fleet overview").await?;

    // Targets: a search box and a few matches, never a chip per target; the 14,999th target
    // is found by part of its id and its inspector opens.
    let deep = fleet_target(FLEET - 1);
    b.click("#nav-targets").await?;
    b.text_contains("#inspect-target", FLEET_HUB).await?;
    b.text_contains("#target-matches-count", &format!("of {zone} targets"))
        .await?;
    let matches = "return document.querySelectorAll('#target-matches a.target-match').length";
    ensure!(b.js(matches).await? == json!(20), "the first matches");
    b.find("#target-search").await?.send_keys(&deep.0).await?;
    let link = format!("#target-matches a[data-target='{}']", deep.0);
    b.find(&link).await?;
    b.text_contains("#target-matches-count", "1 of 1 targets matching")
        .await?;
    b.click(&link).await?;
    b.text_contains("#inspect-target", &deep.0).await?;
    b.text_contains("#inspect-status", "offline").await?;
    b.text_contains("#page-targets", &format!("{} / ", deep.2))
        .await?;
    b.find("#inspect-offline").await?;
    ensure!(b.js(matches).await? == json!(1), "one match");
    b.shot("31-fleet-target").await?;

    // The lease dialog's target input offers the few targets whose id contains what is typed.
    b.click("#nav-sessions").await?;
    b.click("#open-mcp-dialog").await?;
    b.find("#lease-target").await?.send_keys("t-1499").await?;
    eventually("the lease dialog offers t-14990 … t-14999", async || {
        let offered = b
            .js("return [...document.querySelectorAll('#lease-target-options option')].map((o) => o.value)")
            .await?;
        let want: Vec<String> = (14_990..=14_999).map(|i| fleet_target(i).0).collect();
        Ok(offered == json!(want))
    })
    .await?;
    b.click("#dialog-close").await?;
    Ok(())
}

/// The Audit integrity page: the latest checkpoint and who cosigned it (zone B's root
/// witnessing zone A's), each witness's state, and each export sink's lag (a sink whose
/// receiver is down falls behind and shows it).
#[tokio::test]
async fn the_audit_integrity_page_shows_checkpoints_witnesses_and_sinks() {
    let zones = mcp_tests::witness::Witnessed::start().await.unwrap();
    let down = free_port();
    let a = TestRoot::start_with(|c| {
        zones.zone_a(c);
        c.audit.checkpoint.every_events = 1;
        c.audit.checkpoint.every_sec = 1;
        c.audit.sinks = vec![
            toml::from_str(&format!(
                "name = \"siem\"\nkind = \"http\"\nendpoint = \"http://127.0.0.1:{down}/ingest\"\nmax_lag = 2\n"
            ))
            .unwrap(),
        ];
    })
    .await
    .unwrap();
    a.issue_sessions("i", 4).await;
    let Some(mut br) = Browser::start().await.unwrap() else {
        a.stop().await;
        zones.b.stop().await;
        return;
    };
    let res = integrity_scenario(&mut br, &a, zones.cosigner.name()).await;
    if res.is_err() {
        let _ = br.shot("zz-integrity-failure").await;
    }
    br.close().await;
    a.stop().await;
    zones.b.stop().await;
    res.unwrap();
}

async fn integrity_scenario(b: &mut Browser, root: &TestRoot, witness: &str) -> anyhow::Result<()> {
    let base = root.handle().base_url();
    b.c().goto(&format!("{base}/ui/#/integrity")).await?;
    b.find("#login-token")
        .await?
        .send_keys(&root.admin_token())
        .await?;
    b.click("#login-submit").await?;
    b.click("#nav-integrity").await?;
    b.text_contains("#verify-verdict", "Chain intact").await?;
    b.text_contains("#checkpoint-size", "events").await?;
    // The page refreshes itself: the witness's cosignature and the sink's lag appear.
    b.text_contains("#checkpoint-witnesses", witness).await?;
    b.text_contains(&format!("tr[data-witness='{witness}']"), "current")
        .await?;
    b.text_contains("tr[data-sink='siem']", "behind").await?;
    let lag: u64 = b
        .find("tr[data-sink='siem']")
        .await?
        .attr("data-lag")
        .await?
        .context("data-lag")?
        .parse()?;
    ensure!(lag > 2, "the sink's lag: {lag}");
    b.text_contains("#checkpoint-note", "\u{2014} root-mcp/zone-a ")
        .await?;
    b.shot("14-integrity-witnesses-sinks").await?;
    b.no_raw_json("integrity").await?;
    Ok(())
}

/// The console offers a viewer only what a viewer may do: no Requests, Failures, Integrity or
/// Approvals page, no lease dialog, no run form, no lifecycle controls; the REST family
/// refuses the rest anyway (governance::roles).
#[tokio::test]
async fn a_viewer_sees_only_what_a_viewer_may_do() {
    let root = TestRoot::start().await.unwrap();
    root.enroll("hub:viewer-sees", "test").await.unwrap();
    let viewer = root.add_operator("vera", &["viewer"], &[]).await;
    let Some(mut br) = Browser::start().await.unwrap() else {
        root.stop().await;
        return;
    };
    let res = viewer_scenario(&mut br, &root, &viewer).await;
    if res.is_err() {
        let _ = br.shot("zz-viewer-failure").await;
    }
    br.close().await;
    root.stop().await;
    res.unwrap();
}

async fn viewer_scenario(b: &mut Browser, root: &TestRoot, viewer: &str) -> anyhow::Result<()> {
    let base = root.handle().base_url();
    b.c().goto(&format!("{base}/ui/#/sessions")).await?;
    b.find("#login-token").await?.send_keys(viewer).await?;
    b.click("#login-submit").await?;
    b.text_contains("#zone", "operator vera (viewer)").await?;
    for page in [
        "overview", "usage", "policy", "targets", "fleet", "sessions",
    ] {
        b.find(&format!("#nav-{page}")).await?;
    }
    for page in ["requests", "failures", "integrity", "approvals"] {
        b.gone(&format!("#nav-{page}")).await?;
    }
    b.find("#page-sessions").await?;
    b.gone("#open-mcp-dialog").await?;
    // A page the role does not allow, asked for by its address, is the overview.
    b.c().goto(&format!("{base}/ui/#/integrity")).await?;
    b.find("#page-overview").await?;
    // The break-glass admin token's last use (the test added vera with it).
    b.text_contains("#ov-breakglass", "requests since root started")
        .await?;
    b.text_contains("#page-overview", "needs the auditor role")
        .await?;
    b.click("#nav-fleet").await?;
    b.find("#page-fleet").await?;
    b.gone("#fleet-form").await?;
    b.c()
        .goto(&format!("{base}/ui/#/targets?t=hub:viewer-sees"))
        .await?;
    b.find("#inspect-target").await?;
    b.text_contains("#inspect-health", "needs the operator role")
        .await?;
    b.gone("#lifecycle-cordon").await?;
    b.gone("#lifecycle-retire").await?;
    Ok(())
}

/// An operator signs in to the console with the identity provider (`[operators.oidc]`): the
/// login page offers it, the provider's login and consent pages come and go, and the console
/// shows what the person's group maps to (`sre`: operator, not auditor).
#[tokio::test]
async fn an_operator_signs_in_to_the_console_with_the_identity_provider() {
    let provider = mcp_tests::oidc::Provider::start().await.unwrap();
    let root = super::oidc::root_for(&provider).await;
    let Some(mut b) = Browser::start().await.unwrap() else {
        root.stop().await;
        return;
    };
    let res = oidc_scenario(&mut b, &root, &provider.issuer).await;
    if res.is_err() {
        let _ = b.shot("zz-oidc-failure").await;
        if let Ok(text) = b.js("return document.body.innerText").await {
            println!(
                "--- the page at the failure\n{}",
                text.as_str().unwrap_or("")
            );
        }
    }
    b.close().await;
    root.stop().await;
    res.unwrap();
}

async fn oidc_scenario(b: &mut Browser, root: &TestRoot, issuer: &str) -> anyhow::Result<()> {
    b.c().goto(&root.url("/ui/")).await?;
    b.click("#oidc-signin-link").await?;
    // The provider's own pages: its login form, then its consent.
    b.find("input[name=login]")
        .await?
        .send_keys("alice")
        .await?;
    b.find("input[name=password]")
        .await?
        .send_keys("any")
        .await?;
    b.click("button[type=submit]").await?;
    b.text_contains("h1", "Authorize").await?;
    b.click("button[type=submit]").await?;
    // Back in the console, as the person, with their group's role.
    b.text_contains(
        "#zone",
        &format!("operator oidc:{issuer}#alice (viewer, operator)"),
    )
    .await?;
    b.shot("oidc-signed-in").await?;
    b.find("#nav-fleet").await?;
    b.gone("#nav-requests").await?;
    b.gone("#nav-approvals").await?;
    let events = root.trail("tool_id=admin.operator.signin").await;
    anyhow::ensure!(
        events
            .iter()
            .any(|e| e["request"]["how"] == "console"
                && e["request"]["email"] == "alice@example.test"),
        "the console sign-in in the trail: {events:?}"
    );
    Ok(())
}
