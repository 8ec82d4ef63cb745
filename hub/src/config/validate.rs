//! The rules a whole configuration must satisfy, section by section, checked once when it is
//! loaded: each section's own rules and those that span sections (a health check names a
//! service, a command adapter a tool id no adapter takes).

use crate::skill::adapters::decl::ADAPTERS;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::error::HubConfigError;
use super::paths::{absolute, has_parent_component};
use super::*;

// ---- [commands]
impl HubConfig {
    /// Checks `[[skill.commands]]`: valid and distinct tool ids that no built-in adapter
    /// serves, a program, confined paths, a timeout.
    pub(super) fn validate_commands(&self) -> Result<(), HubConfigError> {
        let mut ids = std::collections::BTreeSet::new();
        for command in &self.skill.commands {
            let id = command.tool_id.as_str();
            let bad =
                |why: String| HubConfigError::Invalid(format!("command adapter `{id}`: {why}"));
            if !valid_tool_id(id) {
                return Err(bad(
                    "tool_id must be dotted lowercase segments [a-z][a-z0-9_]*, e.g. acme.inventory.count".into(),
                ));
            }
            if ADAPTERS.iter().any(|a| a.tool_id == id) {
                return Err(bad("a built-in adapter serves this tool".into()));
            }
            if !ids.insert(id) {
                return Err(bad("declared twice".into()));
            }
            let Some(program) = command.argv.first().filter(|p| !p.is_empty()) else {
                return Err(bad("empty argv".into()));
            };
            if program.contains('/') {
                self.check_confined(
                    &format!("command adapter `{id}`: program"),
                    Path::new(program),
                )?;
            }
            if let Some(cwd) = &command.cwd {
                self.check_confined(&format!("command adapter `{id}`: cwd"), cwd)?;
            }
            if command.timeout_ms == 0 || command.timeout_ms > MAX_COMMAND_TIMEOUT_MS {
                return Err(bad(format!(
                    "timeout_ms must be between 1 and {MAX_COMMAND_TIMEOUT_MS}"
                )));
            }
            if let Some(key) = command
                .env
                .keys()
                .find(|k| k.is_empty() || k.contains(['=', '\0']))
            {
                return Err(bad(format!(
                    "env name `{key}` is empty or contains `=` or NUL"
                )));
            }
        }
        Ok(())
    }
}
// ---- [deploy]
impl HubConfig {
    /// The bare mirror the deploy adapters fetch into.
    pub fn deploy_mirror(&self) -> PathBuf {
        self.state_dir.join(DEPLOY_MIRROR_DIR)
    }

    /// The deployed working tree, if `[deploy]` is configured.
    pub fn deploy_worktree(&self) -> Option<PathBuf> {
        self.deploy
            .as_ref()
            .map(|d| self.under_state_dir(&d.worktree))
    }

    /// Checks `[deploy]`.
    pub(super) fn validate_deploy(&self) -> Result<(), HubConfigError> {
        let Some(deploy) = &self.deploy else {
            return Ok(());
        };
        let bad = |m: String| Err(HubConfigError::Invalid(format!("deploy: {m}")));
        let repo = deploy.repository.as_str();
        if repo.trim().is_empty() {
            return bad("repository is empty".into());
        }
        if repo.starts_with('-') || repo.contains("::") || repo.chars().any(char::is_control) {
            return bad(format!(
                "repository `{}` must not start with `-`, name a `<transport>::` helper or contain control characters",
                repo.escape_debug()
            ));
        }
        let url = repo.contains("://")
            || repo
                .split_once(':')
                .is_some_and(|(host, _)| !host.is_empty() && !host.contains('/'));
        if !url && !Path::new(repo).is_absolute() {
            return bad(format!(
                "repository `{repo}` must be an absolute path or a URL"
            ));
        }
        let worktree = self.under_state_dir(&deploy.worktree);
        self.check_confined("deploy: worktree", &worktree)?;
        let state = absolute(&self.state_dir);
        let full = absolute(&worktree);
        let mirror = absolute(&self.deploy_mirror());
        if state.starts_with(&full) || self.allowed_roots.iter().any(|r| r == &full) {
            return bad(format!(
                "worktree `{}` must lie strictly inside the state directory or a declared root, not contain it",
                worktree.display()
            ));
        }
        if full.starts_with(&mirror) {
            return bad(format!(
                "worktree `{}` must not lie inside the deploy mirror `{}`",
                worktree.display(),
                mirror.display()
            ));
        }
        if deploy.allowed_refs.is_empty() && !deploy.allow_commits {
            return bad(
                "allowed_refs is empty (and allow_commits is false): nothing could be deployed"
                    .into(),
            );
        }
        for pattern in &deploy.allowed_refs {
            if let Err(e) = crate::machine::refs::check_pattern(pattern) {
                return bad(format!("allowed_refs: {e}"));
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for name in &deploy.restart_services {
            if !seen.insert(name) {
                return bad(format!("restart_services names `{name}` twice"));
            }
            if !self.services.iter().any(|s| &s.name == name) {
                let known: Vec<String> = self
                    .services
                    .iter()
                    .map(|s| format!("`{}`", s.name))
                    .collect();
                return bad(format!(
                    "restart_services names `{name}`, which is not a [[services]] entry (services: {})",
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    }
                ));
            }
        }
        if deploy.git.trim().is_empty() {
            return bad("git is empty".into());
        }
        if deploy.timeout_ms == 0 {
            return bad("timeout_ms must be at least 1".into());
        }
        Ok(())
    }
}
// ---- [health]
impl HubConfig {
    /// Checks `[[skill.healthchecks]]`: distinct names, a program for command checks.
    pub(super) fn validate_healthchecks(&self) -> Result<(), HubConfigError> {
        let mut names = std::collections::BTreeSet::new();
        for check in &self.skill.healthchecks {
            if !names.insert(check.name()) {
                return Err(HubConfigError::Invalid(format!(
                    "two health checks are named `{}`",
                    check.name()
                )));
            }
            if let HealthcheckConfig::Command { argv, .. } = check
                && argv.is_empty()
            {
                return Err(HubConfigError::Invalid(format!(
                    "health check `{}` has an empty argv",
                    check.name()
                )));
            }
        }
        Ok(())
    }
}
// ---- [logs]
impl HubConfig {
    /// Checks `[[log_sources]]` and `[redaction]`.
    pub(super) fn validate_log_sources(&self) -> Result<(), HubConfigError> {
        if self.services.iter().any(|s| s.name == HUB_STREAM) {
            return Err(HubConfigError::Invalid(format!(
                "service name `{HUB_STREAM}` is taken by the hub's own log stream"
            )));
        }
        let mut names: std::collections::BTreeSet<&str> =
            self.services.iter().map(|s| s.name.as_str()).collect();
        for source in &self.log_sources {
            let name = source.name.as_str();
            if !valid_log_source_name(name) {
                return Err(HubConfigError::Invalid(format!(
                    "log source name `{name}` must match [A-Za-z0-9][A-Za-z0-9_.-]{{0,63}}"
                )));
            }
            if name == HUB_STREAM {
                return Err(HubConfigError::Invalid(format!(
                    "log source name `{HUB_STREAM}` is taken by the hub's own log"
                )));
            }
            if !names.insert(name) {
                return Err(HubConfigError::Invalid(format!(
                    "log source `{name}`: a service or another log source has that name"
                )));
            }
            self.check_confined(
                &format!("log source `{name}`: path"),
                &self.under_state_dir(&source.path),
            )?;
        }
        for pattern in &self.redaction.patterns {
            if let Err(e) = regex::Regex::new(pattern) {
                return Err(HubConfigError::Invalid(format!(
                    "redaction: pattern `{pattern}` does not compile: {e}"
                )));
            }
        }
        Ok(())
    }
}
// ---- [nlu]
impl HubConfig {
    /// The `[nlu]` paths as the hub reads them (relative ones under `state_dir`).
    pub fn nlu_paths(&self) -> Option<NluConfig> {
        self.nlu.as_ref().map(|n| NluConfig {
            entities: self.under_state_dir(&n.entities),
            intents: self.under_state_dir(&n.intents),
            templates: n
                .templates
                .iter()
                .map(|p| self.under_state_dir(p))
                .collect(),
        })
    }

    /// Checks `[nlu]`: template paths given, every path confined.
    pub(super) fn validate_nlu(&self) -> Result<(), HubConfigError> {
        let Some(nlu) = self.nlu_paths() else {
            return Ok(());
        };
        if nlu.templates.is_empty() {
            return Err(HubConfigError::Invalid(
                "nlu: templates names no file or directory".into(),
            ));
        }
        self.check_confined("nlu: entities", &nlu.entities)?;
        self.check_confined("nlu: intents", &nlu.intents)?;
        for path in &nlu.templates {
            self.check_confined("nlu: templates", path)?;
        }
        Ok(())
    }
}
// ---- [services]
impl HubConfig {
    /// Checks `[[services]]` and `allowed_roots`.
    pub(super) fn validate_services(&self) -> Result<(), HubConfigError> {
        for root in &self.allowed_roots {
            if !root.is_absolute() || has_parent_component(root) {
                return Err(HubConfigError::Invalid(format!(
                    "allowed_roots: `{}` must be an absolute path without `..`",
                    root.display()
                )));
            }
        }
        let mut names = std::collections::BTreeSet::new();
        let mut logs = BTreeMap::new();
        for service in &self.services {
            let name = service.name.as_str();
            if !valid_service_name(name) {
                return Err(HubConfigError::Invalid(format!(
                    "service name `{name}` must match [a-z0-9][a-z0-9_.-]{{0,63}}"
                )));
            }
            if !names.insert(name) {
                return Err(HubConfigError::Invalid(format!(
                    "two services are named `{name}`"
                )));
            }
            if service.argv.first().is_none_or(|p| p.is_empty()) {
                return Err(HubConfigError::Invalid(format!(
                    "service `{name}` has an empty argv"
                )));
            }
            if let Some(argv) = &service.profiling_argv
                && argv.first().is_none_or(|p| p.is_empty())
            {
                return Err(HubConfigError::Invalid(format!(
                    "service `{name}` has an empty profiling_argv (leave it out instead)"
                )));
            }
            if let Some(heap) = &service.heap_profiles {
                if !heap.dir.is_absolute() {
                    return Err(HubConfigError::Invalid(format!(
                        "service `{name}`: heap_profiles.dir must be an absolute path"
                    )));
                }
                self.check_confined(&format!("service `{name}`: heap_profiles.dir"), &heap.dir)?;
                if !(1..=super::MAX_SNAPSHOT_BYTES).contains(&heap.max_bytes) {
                    return Err(HubConfigError::Invalid(format!(
                        "service `{name}`: heap_profiles.max_bytes must be between 1 and {}",
                        super::MAX_SNAPSHOT_BYTES
                    )));
                }
                if !(2..=super::MAX_SNAPSHOTS_PER_SESSION).contains(&heap.keep) {
                    return Err(HubConfigError::Invalid(format!(
                        "service `{name}`: heap_profiles.keep must be between 2 and {} (the first and the newest snapshot at least)",
                        super::MAX_SNAPSHOTS_PER_SESSION
                    )));
                }
            }
            if let Some(key) = service
                .env
                .keys()
                .find(|k| k.is_empty() || k.contains(['=', '\0']))
            {
                return Err(HubConfigError::Invalid(format!(
                    "service `{name}`: env name `{key}` is empty or contains `=` or NUL"
                )));
            }
            if service.log_max_bytes < MIN_LOG_MAX_BYTES {
                return Err(HubConfigError::Invalid(format!(
                    "service `{name}`: log_max_bytes must be at least {MIN_LOG_MAX_BYTES}"
                )));
            }
            if service.stop_timeout_ms == 0 || service.stop_timeout_ms > MAX_STOP_TIMEOUT_MS {
                return Err(HubConfigError::Invalid(format!(
                    "service `{name}`: stop_timeout_ms must be between 1 and {MAX_STOP_TIMEOUT_MS}"
                )));
            }
            if let Some(ServiceHealthConfig::Command { argv, .. }) = &service.health
                && argv.first().is_none_or(|p| p.is_empty())
            {
                return Err(HubConfigError::Invalid(format!(
                    "service `{name}`: the health check has an empty argv"
                )));
            }
            if let Some(cwd) = &service.cwd {
                self.check_confined(&format!("service `{name}`: cwd"), cwd)?;
            }
            let log = service.log_path(&self.state_dir);
            self.check_confined(&format!("service `{name}`: log_file"), &log)?;
            if let Some(other) = logs.insert(absolute(&log), name) {
                return Err(HubConfigError::Invalid(format!(
                    "services `{other}` and `{name}` share the log file `{}`",
                    log.display()
                )));
            }
        }
        Ok(())
    }
}
// ---- [skill]
impl HubConfig {
    /// Checks `skill.adapter_concurrency` and `skill.adapter_restart_window_ms`.
    pub(super) fn validate_adapter_limits(&self) -> Result<(), HubConfigError> {
        if self.skill.adapter_concurrency == 0 {
            return Err(HubConfigError::Invalid(
                "skill.adapter_concurrency must be at least 1".into(),
            ));
        }
        if !(1_000..=86_400_000).contains(&self.skill.adapter_restart_window_ms) {
            return Err(HubConfigError::Invalid(
                "skill.adapter_restart_window_ms must be between 1000 and 86400000 (a day)".into(),
            ));
        }
        Ok(())
    }

    /// Checks `[[skill.allowed_tests]]`: distinct names of bounded length, a program, a
    /// timeout, a confined `cwd`.
    pub(super) fn validate_allowed_tests(&self) -> Result<(), HubConfigError> {
        let mut names = std::collections::BTreeSet::new();
        for test in &self.skill.allowed_tests {
            let name = test.name.as_str();
            if name.trim().is_empty() || name.chars().count() > MAX_TEST_NAME {
                return Err(HubConfigError::Invalid(format!(
                    "allowed test name `{name}` must have 1 to {MAX_TEST_NAME} characters"
                )));
            }
            if !names.insert(name) {
                return Err(HubConfigError::Invalid(format!(
                    "two allowed tests are named `{name}`"
                )));
            }
            if test.argv.first().is_none_or(|p| p.is_empty()) {
                return Err(HubConfigError::Invalid(format!(
                    "allowed test `{name}` has an empty argv"
                )));
            }
            if test.timeout_ms == 0 {
                return Err(HubConfigError::Invalid(format!(
                    "allowed test `{name}` needs timeout_ms of at least 1"
                )));
            }
            if let Some(cwd) = &test.cwd {
                self.check_confined(&format!("allowed test `{name}`: cwd"), cwd)?;
            }
            for (field, pattern) in [
                ("progress_line", &test.progress_line),
                ("progress_total", &test.progress_total),
            ] {
                if let Some(p) = pattern
                    && let Err(e) = regex::Regex::new(p)
                {
                    return Err(HubConfigError::Invalid(format!(
                        "allowed test `{name}`: {field} is not a regular expression: {e}"
                    )));
                }
            }
        }
        Ok(())
    }
}
// ---- [transport]
impl HubConfig {
    /// Refuses a plaintext root URL (`http://`, `ws://`) to a non-loopback host unless
    /// `insecure_plaintext` is set (checked when the hub starts), for every root URL.
    pub fn check_transport(&self) -> Result<(), HubConfigError> {
        for url in self.root_url_list() {
            self.check_one_transport(url)?;
        }
        Ok(())
    }

    /// The root URLs in the order the hub tries them.
    pub fn root_url_list(&self) -> Vec<&str> {
        if self.root_urls.is_empty() {
            vec![self.root_url.as_str()]
        } else {
            self.root_urls.iter().map(String::as_str).collect()
        }
    }

    /// The WebSocket URL of every root, in the order tried.
    pub fn connect_urls(&self) -> Result<Vec<String>, HubConfigError> {
        self.root_url_list()
            .into_iter()
            .map(connect_url_of)
            .collect()
    }

    fn check_one_transport(&self, root_url: &str) -> Result<(), HubConfigError> {
        let url = connect_url_of(root_url)?;
        let Some(rest) = url.strip_prefix("ws://") else {
            return Ok(());
        };
        let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
        let host = match authority.rsplit_once('@') {
            Some((_, h)) => h,
            None => authority,
        };
        let host = if host.starts_with('[') {
            host.split_inclusive(']').next().unwrap_or(host)
        } else {
            host.split(':').next().unwrap_or(host)
        };
        if !self.insecure_plaintext && !crate::link::tls::is_loopback_host(host) {
            return Err(HubConfigError::Invalid(format!(
                "root_url `{root_url}` is plaintext to non-loopback host `{host}`: use https:// or \
                 wss://, or set insecure_plaintext = true to send the hub token unencrypted"
            )));
        }
        Ok(())
    }

    /// The WebSocket URL the hub dials: `root_url` with http→ws, https→wss, plus
    /// [`CONNECT_PATH`].
    pub fn connect_url(&self) -> Result<String, HubConfigError> {
        connect_url_of(&self.root_url)
    }
}
