//! `mcp-demo-app`: the small service the demo's hub supervises, and the allowed test that
//! checks it.
//!
//! - `serve --port N --release-dir DIR [--mode NAME] [--heap-dir DIR] [--leak-kib-per-sec N]`: HTTP on
//!   127.0.0.1:N (`/healthz` → `ok`, `/version` → the `RELEASE` file of the deployed tree, or
//!   `not deployed`), and a log line every two seconds. With `--mode profiling` and
//!   `--heap-dir` it leaks on purpose and writes jemalloc heap profiles there (see [`leak`]):
//!   the demo's ProfileOps session finds the leaking function.
//! - `check --url URL`: three checks of a running app, one line each in the format the demo's
//!   allowed test counts as progress (`running 3 checks`, `check NAME ... ok`); exit status 1
//!   when one fails.

mod leak;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::routing::get;

/// jemalloc, so that the profiling mode can sample the heap (see [`leak`]).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const USAGE: &str = "usage: mcp-demo-app serve --port N --release-dir DIR [--mode NAME] [--heap-dir DIR] [--leak-kib-per-sec N] | check --url URL";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // reqwest's TLS stack needs its provider chosen, though the checks are plain HTTP.
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("mcp-demo-app: {e}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = match args.first().map(String::as_str) {
        Some("serve") => rt.block_on(serve(&args[1..])),
        Some("check") => rt.block_on(check(&args[1..])),
        _ => Err(anyhow::anyhow!(USAGE)),
    };
    match outcome {
        Ok(code) => code,
        Err(e) => {
            eprintln!("mcp-demo-app: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// The value after `--name` in `args`.
fn option<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

fn required<'a>(args: &'a [String], name: &str) -> anyhow::Result<&'a str> {
    option(args, name).ok_or_else(|| anyhow::anyhow!("{name} is required\n{USAGE}"))
}

async fn serve(args: &[String]) -> anyhow::Result<ExitCode> {
    let port: u16 = required(args, "--port")?.parse()?;
    let release = PathBuf::from(required(args, "--release-dir")?).join("RELEASE");
    let mode = option(args, "--mode").unwrap_or("normal").to_owned();
    let heap_dir = option(args, "--heap-dir").map(PathBuf::from);
    if mode == "profiling"
        && let Some(dir) = &heap_dir
    {
        let rate = match option(args, "--leak-kib-per-sec") {
            Some(n) => n.parse()?,
            None => leak::LEAK_KIB_PER_SEC,
        };
        leak::ensure_sampling()?;
        leak::start(dir.clone(), rate).await?;
    }
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    println!("demo-app listening on 127.0.0.1:{port} (mode {mode})");
    let app = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/version", get(version))
        .with_state(release.clone());
    tokio::spawn(async move {
        for tick in 1u64.. {
            tokio::time::sleep(Duration::from_secs(2)).await;
            println!("tick {tick}: serving {}", deployed(&release).await);
        }
    });
    axum::serve(listener, app).await?;
    Ok(ExitCode::SUCCESS)
}

async fn deployed(release: &std::path::Path) -> String {
    match tokio::fs::read_to_string(release).await {
        Ok(text) => text.trim().to_owned(),
        Err(_) => "not deployed".to_owned(),
    }
}

async fn version(State(release): State<PathBuf>) -> String {
    deployed(&release).await
}

async fn check(args: &[String]) -> anyhow::Result<ExitCode> {
    let url = required(args, "--url")?.trim_end_matches('/').to_owned();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()?;
    let checks: [(&str, &str, u16); 3] = [
        ("healthz", "/healthz", 200),
        ("version", "/version", 200),
        ("unknown-path", "/no-such-page", 404),
    ];
    println!("running {} checks", checks.len());
    let mut failed = 0;
    for (name, path, want) in checks {
        let got = http.get(format!("{url}{path}")).send().await;
        let ok = got.as_ref().is_ok_and(|r| r.status().as_u16() == want);
        println!("check {name} ... {}", if ok { "ok" } else { "FAILED" });
        if !ok {
            failed += 1;
        }
        // Slow enough for a client to see the progress of the run.
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    println!("{} passed, {failed} failed", checks.len() - failed);
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
