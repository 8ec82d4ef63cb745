//! Tests of the configuration: parsing, overrides, and every section's checks.

use super::*;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn example_config_parses() {
    let path = repo().join("config/hub.example.toml");
    let mut file = HubFile::load(&path).expect("config/hub.example.toml parses");
    assert_eq!(file.skill.healthchecks.len(), 3);
    let tests: Vec<&str> = file
        .skill
        .allowed_tests
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(tests, ["smoke", "always-fails"]);
    assert_eq!(file.skill.allowed_tests[1].timeout_ms, 60_000, "default");
    assert_eq!(file.skill.adapter_concurrency, 4);
    // The example names a token file that does not exist here; give an inline token.
    file.token_file = None;
    file.token = Some("mcph_example".into());
    let config = file.resolve().expect("example resolves");
    assert_eq!(config.environment, "test");
    assert_eq!(config.write_scope, WriteScope::None);
    assert!(config.connect_url().expect("url").ends_with(CONNECT_PATH));
}

#[test]
fn flags_alone_are_enough_and_override_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let token = dir.path().join("token");
    std::fs::write(&token, "mcph_secret\n").expect("write token");
    private(&token);
    let overrides = Overrides {
        root_url: Some("https://root.example:8443/".into()),
        token_file: Some(token.clone()),
        target: Some("hub:test-alpha".into()),
        environment: Some("test".into()),
        subnet: Some("sn-1".into()),
        zone: Some("eu-1".into()),
        state_dir: Some(dir.path().to_owned()),
    };
    let config = HubConfig::load(None, &overrides).expect("flags are enough");
    assert_eq!(config.token, "mcph_secret");
    assert_eq!(
        config.connect_url().expect("url"),
        "wss://root.example:8443/v1/root/hubs/connect"
    );
    assert!(!format!("{config:?}").contains("mcph_secret"));

    let file = dir.path().join("hub.toml");
    std::fs::write(
        &file,
        "target_id = \"hub:from-file\"\nenvironment = \"prod\"\nroot_url = \"http://a\"\n\
         token = \"inline\"\nstate_dir = \"/nowhere\"\n",
    )
    .expect("write config");
    // A config file with an inline token is a secret file.
    #[cfg(unix)]
    {
        let err = HubConfig::load(Some(&file), &overrides).expect_err("0644 inline token");
        assert!(
            err.to_string()
                .contains(&format!("chmod 600 {}", file.display())),
            "{err}"
        );
    }
    private(&file);
    let config = HubConfig::load(Some(&file), &overrides).expect("merged");
    assert_eq!(config.target_id, "hub:test-alpha");
    assert_eq!(config.environment, "test");
    assert_eq!(
        config.token, "mcph_secret",
        "--token-file replaces the inline token"
    );
    let config = HubConfig::load(Some(&file), &Overrides::default()).expect("file only");
    assert_eq!(
        config.connect_url().expect("url"),
        "ws://a/v1/root/hubs/connect"
    );
}

#[test]
fn several_root_urls_are_tried_in_order_and_each_is_checked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("hub.toml");
    std::fs::write(
        &file,
        "target_id = \"hub:a\"\nenvironment = \"test\"\nroot_url = \"http://127.0.0.1:1\"\n\
         root_urls = [\"http://127.0.0.1:2\", \"http://127.0.0.1:1\", \"https://root-b.example\"]\n\
         token_file = \"/nowhere\"\nstate_dir = \"/nowhere\"\n",
    )
    .expect("write config");
    let mut f = HubFile::load(&file).expect("parses");
    f.token_file = None;
    f.token = Some("mcph_x".into());
    let config = f.clone().resolve().expect("resolves");
    assert_eq!(config.root_url, "http://127.0.0.1:1", "root_url first");
    assert_eq!(
        config.connect_urls().expect("urls"),
        [
            "ws://127.0.0.1:1/v1/root/hubs/connect",
            "ws://127.0.0.1:2/v1/root/hubs/connect",
            "wss://root-b.example/v1/root/hubs/connect",
        ]
    );
    config.check_transport().expect("loopback and https pass");
    // Every URL is held to the plaintext rule, not only the first.
    let mut plain = f.clone();
    plain.root_urls.push("http://root-c.example".into());
    let err = plain
        .resolve()
        .expect("resolves")
        .check_transport()
        .expect_err("plaintext to a remote replica");
    assert!(err.to_string().contains("root-c.example"), "{err}");
    // Only root_urls, and a comma-separated --root-url that replaces the file's list.
    let mut only = f.clone();
    only.root_url = None;
    assert_eq!(
        only.clone().resolve().expect("resolves").root_url,
        "http://127.0.0.1:2"
    );
    only.apply(&Overrides {
        root_url: Some("http://127.0.0.1:7, http://127.0.0.1:8".into()),
        ..Overrides::default()
    });
    assert_eq!(
        only.resolve().expect("resolves").root_url_list(),
        ["http://127.0.0.1:7", "http://127.0.0.1:8"]
    );
    let mut none = f;
    none.root_url = None;
    none.root_urls.clear();
    assert!(
        none.resolve()
            .expect_err("no root")
            .to_string()
            .contains("root_url or root_urls")
    );
}

/// Makes a test's secret file private (mode 0600).
fn private(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    }
}

#[cfg(unix)]
#[test]
fn a_token_file_readable_by_others_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let token = dir.path().join("token");
    std::fs::write(&token, "mcph_secret\n").expect("write token");
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let overrides = Overrides {
        root_url: Some("https://root.example".into()),
        token_file: Some(token.clone()),
        target: Some("hub:x".into()),
        environment: Some("test".into()),
        state_dir: Some(dir.path().to_owned()),
        ..Default::default()
    };
    let err = HubConfig::load(None, &overrides).expect_err("0644 token file");
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("chmod 600 {}", token.display())),
        "{msg}"
    );
    assert!(!msg.contains("mcph_secret"), "{msg}");
}

#[test]
fn plaintext_is_refused_for_non_loopback_roots() {
    let mut config = HubConfig::new("hub:x", "test", "http://root.example:8700", "t", "/tmp");
    let err = config
        .check_transport()
        .expect_err("plaintext to a remote root");
    assert!(err.to_string().contains("insecure_plaintext"), "{err}");
    config.insecure_plaintext = true;
    config.check_transport().expect("explicitly allowed");
    for url in [
        "http://127.0.0.1:8700",
        "ws://localhost:1/",
        "http://[::1]:8700",
        "https://root.example",
        "wss://10.0.0.1",
    ] {
        let config = HubConfig::new("hub:x", "test", url, "t", "/tmp");
        config.check_transport().expect(url);
    }
}

#[test]
fn missing_essentials_are_named() {
    let err = HubConfig::load(None, &Overrides::default()).expect_err("nothing set");
    let msg = err.to_string();
    for field in ["target_id", "environment", "root_url", "token", "state_dir"] {
        assert!(msg.contains(field), "{msg}");
    }
    let overrides = Overrides {
        target: Some("hub:x".into()),
        ..Default::default()
    };
    let msg = HubConfig::load(None, &overrides)
        .expect_err("still missing")
        .to_string();
    assert!(!msg.contains("target_id"), "{msg}");
}

#[test]
fn unknown_fields_and_bad_urls_are_refused() {
    let err = toml::from_str::<HubFile>("target = \"x\"").expect_err("unknown field");
    assert!(err.to_string().contains("unknown field"), "{err}");
    let err = toml::from_str::<HubFile>(
        "[skill]\n[[skill.healthchecks]]\nname = \"a\"\nkind = \"tcp\"\nurl = \"x\"\n",
    )
    .expect_err("url is not a tcp field");
    assert!(err.to_string().contains("unknown field"), "{err}");
    let mut config = HubConfig::new("hub:x", "test", "ftp://root", "t", "/tmp");
    assert!(config.connect_url().is_err());
    config.root_url = "root:8080".into();
    assert!(config.validate().is_err());
}

#[test]
fn allowed_tests_are_checked() {
    let file: HubFile = toml::from_str(
        "[[skill.allowed_tests]]\nname = \"a\"\nargv = [\"true\"]\n\
         env = { A = \"1\" }\n",
    )
    .expect("parses");
    let test = &file.skill.allowed_tests[0];
    assert_eq!(test.timeout_ms, 60_000);
    assert_eq!(test.env["A"], "1");
    let err = toml::from_str::<HubFile>(
        "[[skill.allowed_tests]]\nname = \"a\"\nargv = [\"true\"]\nshell = \"x\"\n",
    )
    .expect_err("unknown field");
    assert!(err.to_string().contains("unknown field"), "{err}");
    let mut config = HubConfig::new("hub:x", "test", "ws://root", "t", "/tmp");
    config.skill.allowed_tests = vec![test.clone(), test.clone()];
    assert!(config.validate().is_err(), "duplicate names");
    let mut empty = test.clone();
    empty.argv.clear();
    config.skill.allowed_tests = vec![empty];
    assert!(config.validate().is_err(), "empty argv");
    config.skill.allowed_tests = vec![test.clone()];
    config.validate().expect("valid");
}

#[test]
fn deploy_is_checked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let apps = dir.path().join("apps");
    let deploy = |extra: &str| {
        format!(
            "[deploy]\nrepository = \"/srv/repo.git\"\nworktree = \"deploy/app\"\n\
             allowed_refs = [\"main\", \"release/*\", \"v*\"]\n{extra}\n"
        )
    };
    let config = with_services(dir.path(), &deploy("")).expect("valid");
    let d = config.deploy.as_ref().expect("deploy");
    assert_eq!(
        (d.git.as_str(), d.timeout_ms, d.allow_commits),
        ("git", 120_000, false)
    );
    assert!(d.restart_services.is_empty());
    assert_eq!(
        config.deploy_worktree(),
        Some(dir.path().join("state/deploy/app")),
        "relative to the state dir"
    );
    for url in [
        "https://git.example/app.git",
        "ssh://git@git.example/app.git",
        "git@git.example:app.git",
        "file:///srv/repo.git",
    ] {
        let text = deploy("").replace("/srv/repo.git", url);
        with_services(dir.path(), &text).expect(url);
    }
    let err = toml::from_str::<HubFile>(&deploy("branch = \"x\"")).expect_err("unknown field");
    assert!(err.to_string().contains("unknown field"), "{err}");
    for (text, expect) in [
        (
            deploy("").replace("/srv/repo.git", ""),
            "deploy: repository is empty",
        ),
        (
            deploy("").replace("/srv/repo.git", "-oProxyCommand=x"),
            "must not start with `-`",
        ),
        (
            deploy("").replace("/srv/repo.git", "ext::sh -c x"),
            "`<transport>::`",
        ),
        (
            deploy("").replace("/srv/repo.git", "repo"),
            "absolute path or a URL",
        ),
        (
            deploy("").replace("deploy/app", "/elsewhere/app"),
            "deploy: worktree `/elsewhere/app` lies outside",
        ),
        (
            deploy("").replace("deploy/app", "deploy/../../x"),
            "must not contain `..`",
        ),
        (
            deploy("").replace("deploy/app", "deploy-mirror.git/x"),
            "inside the deploy mirror",
        ),
        (
            format!(
                "allowed_roots = [\"{0}\"]\n{1}",
                apps.display(),
                deploy("").replace("deploy/app", &apps.display().to_string())
            ),
            "strictly inside",
        ),
        (
            deploy("").replace("\"main\", ", "\"-*\", "),
            "allowed_refs: a pattern must not start with `-`",
        ),
        (
            deploy("").replace("\"main\", ", "\"ma in\", "),
            "allowed_refs: pattern `ma in` contains ' '",
        ),
        (
            deploy("").replace("[\"main\", \"release/*\", \"v*\"]", "[]"),
            "allowed_refs is empty",
        ),
        (
            deploy("restart_services = [\"web\"]"),
            "restart_services names `web`, which is not a [[services]] entry (services: none)",
        ),
        (deploy("git = \" \""), "deploy: git is empty"),
        (
            deploy("timeout_ms = 0"),
            "deploy: timeout_ms must be at least 1",
        ),
    ] {
        let m = invalid(dir.path(), &text);
        assert!(m.contains(expect), "{text}\n{m}");
    }
    let ok = format!(
        "allowed_roots = [\"{}\"]\n{}[[services]]\nname = \"web\"\nargv = [\"x\"]\n",
        apps.display(),
        deploy(&format!(
            "restart_services = [\"web\"]\nworktree = \"{}/app\"",
            apps.display()
        ))
        .replace("worktree = \"deploy/app\"\n", "")
    );
    let config = with_services(dir.path(), &ok).expect("valid");
    assert_eq!(config.deploy_worktree(), Some(apps.join("app")));
    let m = invalid(
        dir.path(),
        &ok.replace("[\"web\"]\n", "[\"web\", \"web\"]\n"),
    );
    assert!(m.contains("names `web` twice"), "{m}");
}

/// Log sources: names, collisions, paths; redaction patterns compile.
#[test]
fn log_sources_and_redaction_are_checked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let apps = dir.path().join("apps");
    let source =
        |name: &str, path: &str| format!("[[log_sources]]\nname = \"{name}\"\npath = \"{path}\"\n");
    let config = with_services(
        dir.path(),
        &format!(
            "allowed_roots = [\"{0}\"]\n{1}{2}[redaction]\npatterns = [\"session=[0-9a-f]+\"]\n",
            apps.display(),
            source("app", &format!("{}/app.log", apps.display())),
            source("Local_1.x", "logs/local.log")
        ),
    )
    .expect("valid");
    assert_eq!(config.log_sources.len(), 2);
    assert_eq!(config.redaction.patterns.len(), 1);
    for (text, expect) in [
        (source("hub", "a.log"), "log source name `hub` is taken"),
        (source("-a", "a.log"), "log source name `-a` must match"),
        (source("a b", "a.log"), "log source name `a b` must match"),
        (
            format!("{}{}", source("a", "a.log"), source("a", "b.log")),
            "log source `a`: a service or another log source",
        ),
        (
            format!(
                "[[services]]\nname = \"web\"\nargv = [\"x\"]\n{}",
                source("web", "w.log")
            ),
            "log source `web`: a service or another log source",
        ),
        (
            source("etc", "/etc/passwd"),
            "log source `etc`: path `/etc/passwd` lies outside",
        ),
        (source("up", "logs/../../x.log"), "must not contain `..`"),
        (
            "[redaction]\npatterns = [\"(\"]\n".to_owned(),
            "redaction: pattern `(` does not compile",
        ),
        (
            "[[services]]\nname = \"hub\"\nargv = [\"x\"]\n".to_owned(),
            "service name `hub` is taken",
        ),
    ] {
        let m = invalid(dir.path(), &text);
        assert!(m.contains(expect), "{text}\n{m}");
    }
    let err =
        toml::from_str::<HubFile>("[[log_sources]]\nname = \"a\"\npath = \"a\"\nfollow = true\n")
            .expect_err("unknown field");
    assert!(err.to_string().contains("unknown field"), "{err}");
}

/// The commented `[[services]]` example of config/hub.example.toml parses once uncommented.
#[test]
fn the_commented_service_example_parses() {
    let text = std::fs::read_to_string(repo().join("config/hub.example.toml")).expect("example");
    let start = text.find("# [[services]]").expect("a [[services]] example");
    let block: String = text[start..]
        .lines()
        .map_while(|l| l.strip_prefix("# "))
        .map(|l| format!("{l}\n"))
        .collect();
    let file: HubFile = toml::from_str(&block).expect("the example parses");
    let app = &file.services[0];
    assert_eq!(app.name, "app");
    assert!(app.profiling_argv.is_some() && app.health.is_some());
    assert!(text.contains("# allowed_roots = [\"/srv/app\"]"));
    let start = text.find("# [profiling]").expect("a [profiling] example");
    let block: String = text[start..]
        .lines()
        .map_while(|l| l.strip_prefix("# "))
        .map(|l| format!("{l}\n"))
        .collect();
    let file: HubFile = toml::from_str(&block).expect("the example parses");
    assert_eq!(
        file.profiling,
        ProfilingConfig::default(),
        "the example shows the defaults"
    );
}

#[test]
fn profiling_values_are_checked() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (value, expect) in [
        ("growth_threshold_bytes = 0", "growth_threshold_bytes"),
        ("growth_threshold_percent = 0.0", "growth_threshold_percent"),
        ("growth_threshold_percent = nan", "growth_threshold_percent"),
        ("max_concurrent_sessions = 0", "max_concurrent_sessions"),
        ("max_concurrent_sessions = 65", "max_concurrent_sessions"),
        (
            "artifact_inline_max_bytes = 524289",
            "artifact_inline_max_bytes",
        ),
    ] {
        let m = invalid(dir.path(), &format!("[profiling]\n{value}\n"));
        assert!(
            m.starts_with("profiling: ") && m.contains(expect),
            "{value}: {m}"
        );
    }
    let config =
        with_services(dir.path(), "[profiling]\nmax_concurrent_sessions = 4\n").expect("valid");
    assert_eq!(config.profiling.max_concurrent_sessions, 4);
    assert_eq!(config.profiling.artifact_inline_max_bytes, 256 * 1024);
}

fn with_services(dir: &Path, toml_text: &str) -> Result<HubConfig, HubConfigError> {
    let mut file: HubFile = toml::from_str(toml_text).map_err(|e| HubConfigError::Parse {
        path: "test.toml".into(),
        source: Box::new(e),
    })?;
    file.target_id = Some("hub:x".into());
    file.environment = Some("test".into());
    file.root_url = Some("ws://root".into());
    file.token = Some("t".into());
    file.state_dir = Some(dir.join("state"));
    file.resolve()
}

fn invalid(dir: &Path, toml_text: &str) -> String {
    match with_services(dir, toml_text) {
        Err(HubConfigError::Invalid(m)) => m,
        other => panic!("expected HubConfigError::Invalid for {toml_text:?}, got {other:?}"),
    }
}

#[test]
fn services_parse_with_defaults() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("apps");
    let config = with_services(
        dir.path(),
        &format!(
            "allowed_roots = [\"{}\"]\n\
             [[services]]\nname = \"web-1\"\nargv = [\"sleep\", \"30\"]\n\
             [[services]]\nname = \"api.v2\"\nargv = [\"x\"]\ncwd = \"{0}/api\"\n\
             log_file = \"{0}/logs/api.log\"\nlog_max_bytes = 4096\nautostart = false\n\
             profiling_argv = [\"x\", \"--profile\"]\nstop_timeout_ms = 100\n\
             env = {{ A = \"1\" }}\n\
             health = {{ kind = \"http\", url = \"http://127.0.0.1:1/healthz\" }}\n",
            root.display()
        ),
    )
    .expect("valid");
    let web = &config.services[0];
    assert_eq!(web.log_max_bytes, 1024 * 1024);
    assert!(web.autostart);
    assert_eq!(web.stop_timeout_ms, 5_000);
    assert_eq!(web.health, None);
    assert_eq!(
        web.log_path(&config.state_dir),
        dir.path().join("state/services/web-1.log")
    );
    let api = &config.services[1];
    assert!(!api.autostart);
    assert_eq!(api.env["A"], "1");
    assert_eq!(api.log_path(&config.state_dir), root.join("logs/api.log"));
    assert_eq!(
        api.health.as_ref().map(|h| h.check("api.v2")),
        Some(HealthcheckConfig::Http {
            name: "api.v2".into(),
            url: "http://127.0.0.1:1/healthz".into(),
            expect_status: 200,
            timeout_ms: 2_000,
        })
    );
    let err =
        toml::from_str::<HubFile>("[[services]]\nname = \"a\"\nargv = [\"x\"]\nshell = \"sh\"\n")
            .expect_err("unknown field");
    assert!(err.to_string().contains("unknown field"), "{err}");
}

#[test]
fn service_names_are_checked() {
    let dir = tempfile::tempdir().expect("tempdir");
    for bad in ["", "Web", "-a", "a b", "a/b", &"a".repeat(65)] {
        let m = invalid(
            dir.path(),
            &format!("[[services]]\nname = \"{bad}\"\nargv = [\"x\"]\n"),
        );
        assert!(
            m.contains(&format!("`{bad}`")) && m.contains("[a-z0-9]"),
            "{m}"
        );
    }
    for good in ["a", "0", "a_b.c-d", &"a".repeat(64)] {
        assert!(valid_service_name(good), "{good}");
    }
    let m = invalid(
        dir.path(),
        "[[services]]\nname = \"a\"\nargv = [\"x\"]\n[[services]]\nname = \"a\"\nargv = [\"y\"]\n",
    );
    assert!(m.contains("two services are named `a`"), "{m}");
}

#[test]
fn service_values_are_checked() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (extra, expect) in [
        ("argv = []", "service `s` has an empty argv"),
        ("argv = [\"\"]", "service `s` has an empty argv"),
        (
            "argv = [\"x\"]\nprofiling_argv = []",
            "empty profiling_argv",
        ),
        (
            "argv = [\"x\"]\nlog_max_bytes = 10",
            "log_max_bytes must be at least 1024",
        ),
        (
            "argv = [\"x\"]\nstop_timeout_ms = 0",
            "stop_timeout_ms must be between 1",
        ),
        (
            "argv = [\"x\"]\nenv = { \"A=B\" = \"1\" }",
            "env name `A=B`",
        ),
        (
            "argv = [\"x\"]\nhealth = { kind = \"command\", argv = [] }",
            "the health check has an empty argv",
        ),
        (
            "argv = [\"x\"]\nheap_profiles = { dir = \"heap\" }",
            "heap_profiles.dir must be an absolute path",
        ),
        (
            "argv = [\"x\"]\nheap_profiles = { dir = \"/nowhere/heap\" }",
            "heap_profiles.dir",
        ),
    ] {
        let m = invalid(
            dir.path(),
            &format!("[[services]]\nname = \"s\"\n{extra}\n"),
        );
        assert!(m.contains(expect), "{extra}: {m}");
    }
}

#[test]
fn service_paths_must_lie_under_the_state_dir_or_a_declared_root() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state");
    let root = dir.path().join("apps");
    let outside = dir.path().join("elsewhere");
    let service = |extra: &str| format!("[[services]]\nname = \"svc\"\nargv = [\"x\"]\n{extra}\n");
    // Under the state dir or a declared root: fine.
    with_services(
        dir.path(),
        &service(&format!("cwd = \"{}/work\"", state.display())),
    )
    .expect("under the state dir");
    with_services(
        dir.path(),
        &format!(
            "allowed_roots = [\"{}\"]\n{}",
            root.display(),
            service(&format!(
                "cwd = \"{0}\"\nlog_file = \"{0}/svc.log\"",
                root.display()
            ))
        ),
    )
    .expect("under a declared root");
    // Elsewhere: refused, naming the service, the field and the path.
    for (field, path) in [
        ("cwd", outside.clone()),
        ("log_file", outside.join("svc.log")),
    ] {
        let m = invalid(
            dir.path(),
            &format!(
                "allowed_roots = [\"{}\"]\n{}",
                root.display(),
                service(&format!("{field} = \"{}\"", path.display()))
            ),
        );
        assert!(
            m.contains(&format!("service `svc`: {field} `{}`", path.display()))
                && m.contains("outside")
                && m.contains(&root.display().to_string()),
            "{m}"
        );
    }
    for (path, expect) in [
        (
            format!("{}/../elsewhere", state.display()),
            "must not contain `..`",
        ),
        ("relative/dir".to_owned(), "must be an absolute path"),
    ] {
        let m = invalid(dir.path(), &service(&format!("cwd = \"{path}\"")));
        assert!(
            m.contains("service `svc`: cwd") && m.contains(expect),
            "{m}"
        );
    }
    // A symbolic link under the state dir that leads out is refused too.
    std::fs::create_dir_all(&state).expect("state");
    std::fs::create_dir_all(&outside).expect("outside");
    std::os::unix::fs::symlink(&outside, state.join("link")).expect("symlink");
    let m = invalid(
        dir.path(),
        &service(&format!("log_file = \"{}/link/svc.log\"", state.display())),
    );
    assert!(
        m.contains("service `svc`: log_file") && m.contains("resolves to"),
        "{m}"
    );
    // Roots must be absolute; allowed tests are confined too; logs are not shared.
    let m = invalid(dir.path(), "allowed_roots = [\"apps\"]\n");
    assert!(m.contains("allowed_roots: `apps`"), "{m}");
    let m = invalid(
        dir.path(),
        &format!(
            "[[skill.allowed_tests]]\nname = \"t\"\nargv = [\"true\"]\ncwd = \"{}\"\n",
            outside.display()
        ),
    );
    assert!(
        m.contains("allowed test `t`: cwd") && m.contains("outside"),
        "{m}"
    );
    let log = format!("log_file = \"{}/same.log\"", state.display());
    let m = invalid(
        dir.path(),
        &format!(
            "{}[[services]]\nname = \"other\"\nargv = [\"x\"]\n{log}\n",
            service(&log)
        ),
    );
    assert!(
        m.contains("services `svc` and `other` share the log file"),
        "{m}"
    );
}
