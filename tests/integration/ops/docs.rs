//! The book (`README.md`, `docs/`) says only what exists: every `mcp-root` and `mcp-hub`
//! command line in its shell blocks names subcommands and flags the binaries define (their
//! clap definitions), and every TOML block headed `# root….toml` or `# hub….toml` loads with
//! the configuration types, which refuse unknown keys.

use mcp_tests::items;
use std::path::{Path, PathBuf};

/// The book's pages.
fn pages() -> Vec<PathBuf> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut pages = vec![repo.join("README.md")];
    for entry in std::fs::read_dir(repo.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            pages.push(path);
        }
    }
    pages.sort();
    pages
}

/// The fenced blocks of `text` in `lang`: `(first line number, body)`.
fn blocks(text: &str, lang: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut open: Option<(usize, String)> = None;
    for (n, line) in text.lines().enumerate() {
        match &mut open {
            None if line.trim_start() == format!("```{lang}") => {
                open = Some((n + 2, String::new()))
            }
            Some(_) if line.trim_start().starts_with("```") => out.extend(open.take()),
            Some((_, body)) => {
                body.push_str(line);
                body.push('\n');
            }
            None => {}
        }
    }
    out
}

/// Checks one command line against `cmd`: its leading words are subcommands (a `a|b ID|c`
/// synopsis: each alternative's first word), and each `--flag` exists on the deepest one
/// reached. The offending word, if any.
fn check(cmd: &clap::Command, words: &[&str]) -> Result<(), String> {
    let mut at = cmd;
    let mut parent = cmd;
    let mut i = 0;
    while let Some(w) = words.get(i) {
        let alternatives: Vec<&str> = w.split('|').collect();
        let known = |name: &str| at.find_subcommand(name).is_some();
        if !w.starts_with('-') && alternatives.iter().all(|a| known(a)) {
            // `list|get ID|show ID`: the words after an alternative are its arguments.
            parent = at;
            at = at.find_subcommand(alternatives[0]).expect("known");
            i += 1;
            continue;
        }
        // A lower-case word where a subcommand is expected names one that does not exist.
        let named =
            |a: &str| !a.is_empty() && a.chars().all(|c| c.is_ascii_lowercase() || c == '-');
        if at.has_subcommands() && !w.starts_with('-') && alternatives.iter().any(|a| named(a)) {
            return Err(format!("`{w}` is no subcommand of `{}`", at.get_name()));
        }
        break;
    }
    // In a synopsis (`add NAME|list|revoke NAME [--cascade]`) a flag belongs to any of the
    // alternatives the line names.
    let tokens: Vec<&str> = words
        .iter()
        .flat_map(|w| w.split(['[', ']', '|', '=']))
        .collect();
    let mut candidates = vec![at];
    if !std::ptr::eq(parent, at) {
        candidates.extend(tokens.iter().filter_map(|t| parent.find_subcommand(t)));
    }
    for w in &tokens {
        let Some(flag) = w.strip_prefix("--") else {
            continue;
        };
        if flag.is_empty() || !flag.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            continue;
        }
        let defined = candidates
            .iter()
            .any(|c| c.get_arguments().any(|a| a.get_long() == Some(flag)))
            || matches!(flag, "help" | "version");
        if !defined {
            return Err(format!("`--{flag}` is no flag of `{}`", at.get_name()));
        }
    }
    Ok(())
}

#[test]
fn every_command_in_the_book_names_subcommands_and_flags_that_exist() {
    let root = mcp_root::cli::command();
    let hub = <mcp_hub::Cli as clap::CommandFactory>::command();
    let mut wrong = Vec::new();
    let mut seen = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for (first, body) in blocks(&text, "sh") {
            // Continuation lines join their command.
            let joined = body.replace("\\\n", " ");
            for (k, line) in joined.lines().enumerate() {
                let line = line.split(" # ").next().unwrap_or_default().trim();
                let line = line.strip_prefix("$ ").unwrap_or(line);
                let (cmd, rest) = match line.split_once(' ') {
                    Some(("mcp-root", rest)) => (&root, rest),
                    Some(("mcp-hub", rest)) => (&hub, rest),
                    _ => continue,
                };
                seen += 1;
                let words: Vec<&str> = rest.split_whitespace().collect();
                if let Err(why) = check(cmd, &words) {
                    wrong.push(format!("{}:{}: {why}: {line}", page.display(), first + k));
                }
            }
        }
    }
    assert!(
        seen > 40,
        "only {seen} command lines found: the block reader is broken"
    );
    assert!(
        wrong.is_empty(),
        "commands the binaries do not have:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn every_configuration_block_in_the_book_loads() {
    let mut wrong = Vec::new();
    let mut seen = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for (first, body) in blocks(&text, "toml") {
            let kind = body.lines().next().unwrap_or_default();
            let loaded = if kind.starts_with("# root") {
                toml::from_str::<mcp_root::config::RootConfig>(&body).map(drop)
            } else if kind.starts_with("# hub") {
                toml::from_str::<mcp_hub::config::HubFile>(&body).map(drop)
            } else {
                wrong.push(format!(
                    "{}:{first}: a TOML block must start with `# root….toml` or `# hub….toml`",
                    page.display()
                ));
                continue;
            };
            seen += 1;
            if let Err(e) = loaded {
                wrong.push(format!("{}:{first}: {e}", page.display()));
            }
        }
    }
    assert!(seen >= 5, "only {seen} configuration blocks found");
    assert!(
        wrong.is_empty(),
        "configuration the types refuse:\n{}",
        wrong.join("\n")
    );
}

/// `/foundation`, root's description of itself, lists every error code of the error enum and
/// every route the router serves, and each path it lists is routed (no 404).
#[tokio::test]
async fn the_foundation_lists_every_error_code_and_every_route() {
    // With OAuth and operators' sign-in on, so that every route is served (the provider is
    // read only when someone signs in).
    let oidc = toml::from_str(
        "issuer = \"http://127.0.0.1:9\"\nclient_id = \"root\"\n[[roles]]\ngroup = \"ops\"\nroles = [\"viewer\"]",
    )
    .unwrap();
    let root = mcp_tests::TestRoot::start_with(|c| {
        c.oauth.discovery = true;
        c.operators.oidc = Some(oidc);
    })
    .await
    .unwrap();
    let f = root.admin_get("/v1/root/mcp/foundation").await;
    let codes: Vec<&str> = items(&f["error_codes"])
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(codes, mcp_shared::error::ErrorCode::ALL.map(|c| c.as_str()));
    let listed: Vec<&str> = items(&f["endpoints"])
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    for e in mcp_root::api::endpoints() {
        if e.access != mcp_root::api::Access::Replica {
            assert!(
                listed.contains(&e.path),
                "{} is served but not listed",
                e.path
            );
        }
    }
    // The routes that had drifted out of the hand-written list.
    for path in [
        "/v1/root/operators",
        "/v1/root/fleet/runs",
        "/api/ai-workspace/assistant/v1/actions",
    ] {
        assert!(listed.contains(&path), "{path} in {listed:?}");
    }
    for path in listed.iter().filter(|p| !p.contains('{')) {
        let res = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            root.http
                .get(root.url(path))
                .bearer_auth(root.admin_token())
                .send(),
        )
        .await
        .unwrap_or_else(|_| panic!("{path}: no answer"))
        .unwrap();
        assert_ne!(res.status(), 404, "{path} is listed but not routed");
    }
    root.stop().await;
}

/// `docs/configuration.md` and `docs/hub-configuration.md` are the references generated from
/// root's and the hub's configuration types: every key, its type, default and meaning. With
/// `MCP_UPDATE_DOCS=1` the test writes them again instead of failing.
#[test]
fn the_configuration_references_are_generated_from_the_types() {
    let generated = mcp_root::config::reference::reference();
    let hub = mcp_hub::config::reference();
    for (page, text) in [
        ("configuration.md", &generated),
        ("hub-configuration.md", &hub),
    ] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../docs")
            .join(page);
        if std::env::var_os("MCP_UPDATE_DOCS").is_some() {
            std::fs::write(&path, text).unwrap();
        }
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            &on_disk == text,
            "docs/{page} differs from the configuration types: run \
             MCP_UPDATE_DOCS=1 cargo test -p mcp-tests --test integration -- ops::docs"
        );
    }
    for key in [
        "adapter_concurrency",
        "write_scope",
        "profiling_argv",
        "token_file",
    ] {
        assert!(
            hub.contains(&format!("| `{key}` |")),
            "{key} is not on the hub's page"
        );
    }
    // Every key a configuration type has is on the page, with its table.
    for key in [
        "keep_alive_timeout_ms",
        "per_operator",
        "reads",
        "every_events",
        "sqlite_synchronous",
    ] {
        assert!(
            generated.contains(&format!("| `{key}` |")),
            "{key} is not on the page"
        );
    }
    for table in [
        "`[limits]`",
        "`[[audit.sinks]]`",
        "`[rates.profiles.<name>]`",
        "`[audit.checkpoint]`",
    ] {
        assert!(generated.contains(table), "{table} is not on the page");
    }
}
