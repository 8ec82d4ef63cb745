//! Where the demo's managed service is: `mcp-demo-app` (the `demo-app/` crate), beside this
//! program. It is a binary of its own because its profiling mode needs jemalloc's heap
//! profiling, and this program's allocator is mimalloc. `cargo run -p mcp-root -- demo`
//! builds only `mcp-root`, so the first start builds the app with the cargo that built this
//! program (the same profile and target directory); an installed `mcp-root` expects it
//! installed beside itself.

use std::path::PathBuf;
use std::process::Command;

use anyhow::Context;

/// The app's binary.
pub(crate) const BINARY: &str = "mcp-demo-app";

/// The path of `mcp-demo-app`, built first when it is missing and cargo is at hand.
pub(crate) fn binary() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("the path of this program")?;
    let dir = exe.parent().context("the directory of this program")?;
    let app = dir.join(BINARY);
    if app.is_file() {
        return Ok(app);
    }
    // `cargo run` says which cargo runs it; else the one this program was built with.
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| env!("CARGO").into());
    let target_dir = dir.parent().context("the target directory")?;
    eprintln!("building {BINARY} (the demo's managed service), once ...");
    let mut build = Command::new(&cargo);
    build
        .args(["build", "-q", "-p", BINARY, "--bin", BINARY])
        .env("CARGO_TARGET_DIR", target_dir)
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    if dir.ends_with("release") {
        build.arg("--release");
    }
    let status = build.status().with_context(|| {
        format!(
            "{} is missing and cargo ({}) cannot build it",
            app.display(),
            cargo.to_string_lossy()
        )
    })?;
    anyhow::ensure!(
        status.success() && app.is_file(),
        "{} is missing: `cargo build -p {BINARY}` failed",
        app.display()
    );
    Ok(app)
}
