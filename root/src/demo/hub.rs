//! The demo hub's configuration: everything a newcomer should see working, kept under the
//! demo's data directory. A managed service ([`super::app`]) with health checks and a
//! ProfileOps profiling argv (it leaks on purpose and writes heap profiles ProfileOps reads),
//! an allowed test that reports progress, a local git repository with two tagged releases
//! to deploy, and the shipped sample NLU content. Written
//! as `<data>/demo-hub.toml` at every start (the app's port and root's address change), so an
//! operator can read what the demo hub runs with.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;

/// The shipped sample NLU content (config/nlu/), written under the hub's state directory.
const NLU_FILES: [(&str, &str); 4] = [
    (
        "entities.json",
        include_str!("../../../config/nlu/entities.json"),
    ),
    (
        "intents.json",
        include_str!("../../../config/nlu/intents.json"),
    ),
    (
        "templates/en.json",
        include_str!("../../../config/nlu/templates/en.json"),
    ),
    (
        "templates/ru.json",
        include_str!("../../../config/nlu/templates/ru.json"),
    ),
];

/// The managed service's name.
pub(crate) const SERVICE: &str = "demo-app";
/// The allowed test's name.
pub(crate) const TEST: &str = "demo-app-checks";

/// Where the demo hub's parts are, for the walk-through.
pub(crate) struct DemoHub {
    /// `<data>/demo-hub.toml`.
    pub(crate) config: PathBuf,
    /// Whether `[deploy]` is configured (it needs git).
    pub(crate) deploys: bool,
}

/// Writes the demo hub's content, repository and configuration under `data_dir`.
pub(crate) fn prepare(
    data_dir: &Path,
    root_url: &str,
    zone: &str,
    target: &str,
    token_file: &Path,
) -> anyhow::Result<DemoHub> {
    // The hub's configuration takes absolute paths (`--data-dir ./data` is not one).
    let data_dir = &std::path::absolute(data_dir)?;
    let token_file = &std::path::absolute(token_file)?;
    let state_dir = data_dir.join("demo-hub");
    let nlu = state_dir.join("content").join("nlu");
    for (name, text) in NLU_FILES {
        let path = nlu.join(name);
        std::fs::create_dir_all(path.parent().expect("a file in a directory"))?;
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    let repo = data_dir.join("demo-repo");
    let deploys = match releases(&repo) {
        Ok(()) => true,
        Err(e) => {
            eprintln!("warning: the demo hub deploys nothing: {e:#}");
            false
        }
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let exe = super::app::binary()?;
    std::fs::create_dir_all(state_dir.join("heap").join(SERVICE))?;
    let text = config_text(&Parts {
        root_url,
        zone,
        target,
        token_file,
        state_dir: &state_dir,
        nlu: &nlu,
        repo: deploys.then_some(repo.as_path()),
        exe: &exe,
        port,
    });
    let config = data_dir.join("demo-hub.toml");
    std::fs::write(&config, text).with_context(|| format!("writing {}", config.display()))?;
    Ok(DemoHub { config, deploys })
}

/// A TOML string.
fn q(s: impl AsRef<str>) -> String {
    toml::Value::String(s.as_ref().to_owned()).to_string()
}

fn qp(p: &Path) -> String {
    q(p.to_string_lossy())
}

struct Parts<'a> {
    root_url: &'a str,
    zone: &'a str,
    target: &'a str,
    token_file: &'a Path,
    state_dir: &'a Path,
    nlu: &'a Path,
    repo: Option<&'a Path>,
    exe: &'a Path,
    port: u16,
}

fn config_text(p: &Parts<'_>) -> String {
    let app = format!("http://127.0.0.1:{}", p.port);
    let exe = qp(p.exe);
    let release_dir = qp(&p.state_dir.join("deploy").join(SERVICE));
    let heap_dir = qp(&p.state_dir.join("heap").join(SERVICE));
    let serve = format!(
        "[{exe}, \"serve\", \"--port\", \"{}\", \"--release-dir\", {release_dir}",
        p.port
    );
    let mut text = format!(
        "# Written by `mcp-root demo` at every start: the demo hub's configuration.\n\
         target_id = {target}\nenvironment = \"test\"\nsubnet = \"demo-subnet\"\nzone = {zone}\n\
         root_url = {root}\ntoken_file = {token}\nstate_dir = {state}\nwrite_scope = \"test-only\"\n\n\
         [[skill.healthchecks]]\nname = \"root\"\nkind = \"http\"\nurl = {root_health}\n\n\
         [[skill.healthchecks]]\nname = \"demo-app-port\"\nkind = \"tcp\"\naddress = \"127.0.0.1:{port}\"\n\n\
         [[skill.allowed_tests]]\nname = \"{TEST}\"\n\
         argv = [{exe}, \"check\", \"--url\", {app_url}]\ntimeout_ms = 30000\n\
         progress_total = '^running (\\d+) checks$'\nprogress_line = '^check .* \\.\\.\\. (ok|FAILED)$'\n\n\
         [[services]]\nname = \"{SERVICE}\"\nargv = {serve}]\n\
         profiling_argv = {serve}, \"--mode\", \"profiling\", \"--heap-dir\", {heap_dir}]\n\
         heap_profiles = {{ dir = {heap_dir}, format = \"pprof\" }}\n\
         health = {{ kind = \"http\", url = {app_health}, expect_status = 200, timeout_ms = 2000 }}\n\n\
         [profiling]\ngrowth_threshold_bytes = 4194304\n\n\
         [nlu]\nentities = {entities}\nintents = {intents}\ntemplates = [{templates}]\n",
        target = q(p.target),
        zone = q(p.zone),
        root = q(p.root_url),
        token = qp(p.token_file),
        state = qp(p.state_dir),
        root_health = q(format!("{}/healthz", p.root_url)),
        port = p.port,
        app_url = q(&app),
        app_health = q(format!("{app}/healthz")),
        entities = qp(&p.nlu.join("entities.json")),
        intents = qp(&p.nlu.join("intents.json")),
        templates = qp(&p.nlu.join("templates")),
    );
    if let Some(repo) = p.repo {
        text.push_str(&format!(
            "\n[deploy]\nrepository = {}\nworktree = \"deploy/{SERVICE}\"\n\
             allowed_refs = [\"main\", \"v*\"]\nrestart_services = [\"{SERVICE}\"]\n",
            qp(repo)
        ));
    }
    text
}

/// A local repository with two tagged releases (`v1`, `v2`; `main` at `v2`), made once.
fn releases(repo: &Path) -> anyhow::Result<()> {
    if repo.join(".git").is_dir() {
        return Ok(());
    }
    std::fs::create_dir_all(repo)?;
    git(repo, &["init", "-q", "-b", "main"])?;
    for release in ["v1", "v2"] {
        std::fs::write(repo.join("RELEASE"), format!("demo-app {release}\n"))?;
        git(repo, &["add", "RELEASE"])?;
        git(
            repo,
            &["commit", "-q", "-m", &format!("demo-app {release}")],
        )?;
        git(repo, &["tag", release])?;
    }
    Ok(())
}

fn git(dir: &Path, args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=mcp-root demo",
            "-c",
            "user.email=demo@localhost",
            "-c",
            "commit.gpgsign=false",
            "-c",
            "tag.gpgsign=false",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .context("running git (is it installed?)")?;
    anyhow::ensure!(
        out.status.success(),
        "git {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(())
}
