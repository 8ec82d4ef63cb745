//! Command adapters: read tools served by a program the hub's configuration declares
//! (`[[skill.commands]]`). The generic extension point of the hub: a new tool is a contract
//! file on root plus one config entry here; no hub, router or protocol code changes, and the
//! hub still knows nothing of what the tool means.
//!
//! Protocol with the program: it runs as an argv (never a shell string) in its own process
//! group, in the declared `cwd` (under the state directory or a declared root; so is the
//! program itself when it is given as a path), with the declared `env`. Its stdin is the
//! call's arguments as one line of compact JSON, then closed. Its stdout must be one JSON
//! object, the result, of at most [`MAX_OUTPUT`] bytes, and it must exit with status 0.
//! Anything else is `adapter_failed` saying what went wrong (with the redacted tail of its
//! stderr); past `timeout_ms` or the call's deadline the whole group is killed (`timeout`),
//! and so it is when the call is cancelled. Strings in the result are redacted on the hub
//! ([`crate::skill::adapters::redact`]) like every other output that leaves it.
//!
//! Command adapters serve reads only (they declare `writes: false`, so the gate would treat
//! them as reads): a write needs the hub's preview (dry run) and idempotency ledger
//! semantics, which stay with compiled-in adapters. Root calls the tool only if a `read`
//! contract names it, like any other tool.

use crate::machine::group::{self, GroupGuard};
use std::process::Stdio;
use std::time::Duration;

use mcp_shared::error::{ErrorCode, ToolError};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::call::CallInput;
use crate::context::HubContext;

/// Largest stdout accepted (the result); a program that writes more is killed.
pub(crate) const MAX_OUTPUT: usize = 1024 * 1024;
/// Bytes of stderr kept (the tail) for the error message; the rest is read and dropped.
const STDERR_TAIL: usize = 4096;
/// Longest stderr excerpt put in an error message.
const MAX_DETAIL: usize = 300;

fn failed(tool_id: &str, what: impl std::fmt::Display) -> ToolError {
    ToolError::new(
        ErrorCode::AdapterFailed,
        format!("command adapter of `{tool_id}`: {what}"),
    )
}

/// Runs the command of `tool_id` for one call.
pub(crate) async fn run(
    ctx: &HubContext,
    tool_id: &str,
    input: CallInput,
) -> Result<Value, ToolError> {
    let Some(command) = ctx
        .config
        .skill
        .commands
        .iter()
        .find(|c| c.tool_id == tool_id)
    else {
        return Err(failed(
            tool_id,
            "no such command in this hub's configuration",
        ));
    };
    let Some((program, args)) = command.argv.split_first() else {
        return Err(failed(tool_id, "empty argv"));
    };
    let stdin_line = format!(
        "{}\n",
        serde_json::to_string(&input.body.arguments).unwrap_or_default()
    );
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .envs(&command.env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    cmd.current_dir(command.cwd.as_ref().unwrap_or(&ctx.config.state_dir));
    let mut child = cmd
        .spawn()
        .map_err(|e| failed(tool_id, format!("cannot run `{program}`: {e}")))?;
    let _group = GroupGuard::new(child.id());
    let limit = Duration::from_millis(command.timeout_ms).min(
        input
            .deadline
            .saturating_duration_since(tokio::time::Instant::now()),
    );
    let mut stdin = child.stdin.take();
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let pid = child.id();
    let kill = || group::kill(pid);
    let work = async {
        if let Some(pipe) = stdin.as_mut() {
            // A program that does not read its input may close the pipe: not an error here.
            let _ = pipe.write_all(stdin_line.as_bytes()).await;
            let _ = pipe.shutdown().await;
        }
        drop(stdin.take());
        let out = async {
            let mut buf = Vec::new();
            if let Some(pipe) = stdout.as_mut() {
                // One byte past the cap says "too much" without reading the flood.
                let _ = pipe.take(MAX_OUTPUT as u64 + 1).read_to_end(&mut buf).await;
            }
            if buf.len() > MAX_OUTPUT {
                kill();
            }
            buf
        };
        let err = async {
            let mut tail = Vec::new();
            if let Some(pipe) = stderr.as_mut() {
                let mut chunk = [0u8; 8192];
                while let Ok(n) = pipe.read(&mut chunk).await {
                    if n == 0 {
                        break;
                    }
                    tail.extend_from_slice(&chunk[..n]);
                    let over = tail.len().saturating_sub(STDERR_TAIL);
                    tail.drain(..over);
                }
            }
            tail
        };
        // When the program exits, what is left of its group goes too, so no straggler keeps
        // the pipes open.
        let exit = async {
            let status = child.wait().await.ok();
            kill();
            status
        };
        tokio::join!(out, err, exit)
    };
    let (out, err, status) = match tokio::time::timeout(limit, work).await {
        Ok(done) => done,
        Err(_) => {
            return Err(ToolError::new(
                ErrorCode::Timeout,
                format!(
                    "command adapter of `{tool_id}` did not finish within {} ms; its process group was killed",
                    limit.as_millis()
                ),
            ));
        }
    };
    let detail = || {
        let (text, _) = crate::skill::adapters::redact::redact_with(
            &String::from_utf8_lossy(&err),
            &ctx.logging.redaction,
        );
        let text = text.trim();
        let mut start = text.len().saturating_sub(MAX_DETAIL);
        while !text.is_char_boundary(start) {
            start += 1;
        }
        if text.is_empty() {
            String::new()
        } else {
            format!("; stderr: {}", &text[start..])
        }
    };
    if out.len() > MAX_OUTPUT {
        return Err(failed(
            tool_id,
            format!("wrote more than {MAX_OUTPUT} bytes to stdout; it was killed"),
        ));
    }
    match status {
        Some(s) if s.success() => {}
        Some(s) => {
            return Err(failed(tool_id, format!("exited with {s}{}", detail())));
        }
        None => {
            return Err(failed(
                tool_id,
                format!("could not be waited for{}", detail()),
            ));
        }
    }
    let value: Value = serde_json::from_slice(&out).map_err(|e| {
        failed(
            tool_id,
            format!("stdout is not one JSON value: {e}{}", detail()),
        )
    })?;
    if !value.is_object() {
        return Err(failed(tool_id, "stdout must be a JSON object"));
    }
    Ok(redact_strings(value, ctx))
}

/// `value` with every string redacted.
fn redact_strings(value: Value, ctx: &HubContext) -> Value {
    match value {
        Value::String(s) => {
            Value::String(crate::skill::adapters::redact::redact_with(&s, &ctx.logging.redaction).0)
        }
        Value::Array(items) => {
            Value::Array(items.into_iter().map(|v| redact_strings(v, ctx)).collect())
        }
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (k, redact_strings(v, ctx)))
                .collect(),
        ),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};
    use std::sync::Arc;

    use serde_json::json;

    use crate::config::CommandAdapterConfig;

    use super::*;
    use crate::config::HubConfig;
    use crate::skill::SkillHandle;

    /// An executable `sh` script in `dir`.
    fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("write script");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        path
    }

    fn command(tool_id: &str, argv: Vec<String>, timeout_ms: u64) -> CommandAdapterConfig {
        CommandAdapterConfig {
            tool_id: tool_id.into(),
            argv,
            cwd: None,
            timeout_ms,
            env: Default::default(),
        }
    }

    fn config(dir: &Path, commands: Vec<CommandAdapterConfig>) -> HubConfig {
        let mut c = HubConfig::new(
            "hub:test-alpha",
            "test",
            "ws://127.0.0.1:1",
            "t",
            dir.join("state"),
        );
        c.allowed_roots = vec![dir.to_path_buf()];
        c.skill.commands = commands;
        crate::skill::adapters::serve_everything(&mut c);
        c
    }

    const SHOUT: &str = r#"read -r line
text=$(printf '%s' "$line" | sed -n 's/.*"text":"\([^"]*\)".*/\1/p')
printf '{"upper":"%s","length":%s}\n' "$(printf '%s' "$text" | tr 'a-z' 'A-Z')" "${#text}""#;

    async fn call(
        skill: &SkillHandle,
        ctx: &HubContext,
        tool: &str,
        args: Value,
    ) -> Result<Value, ToolError> {
        let decl = *ctx
            .adapter_decls()
            .iter()
            .find(|d| d.tool_id == tool)
            .expect("declared");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        skill
            .execute(&uuid::Uuid::now_v7().to_string(), decl, args, deadline)
            .await
    }

    #[tokio::test]
    async fn a_configured_command_serves_its_tool_through_the_skill() {
        let dir = tempfile::tempdir().expect("tempdir");
        let program = script(dir.path(), "shout.sh", SHOUT);
        let cfg = config(
            dir.path(),
            vec![command(
                "hub.fixture.shout",
                vec![program.display().to_string()],
                5_000,
            )],
        );
        cfg.validate().expect("valid");
        let ctx = Arc::new(HubContext::new(cfg).expect("context"));
        // Published like any adapter, beside the built-in ones.
        let published = ctx.descriptor().operational_surface.capabilities;
        assert!(
            published.contains(&"hub.fixture.shout".to_string()),
            "{published:?}"
        );
        assert_eq!(published.len(), crate::skill::adapters::ADAPTERS.len() + 1);
        let decl = *ctx
            .adapter_decls()
            .iter()
            .find(|d| d.tool_id == "hub.fixture.shout")
            .expect("kind");
        assert_eq!(decl.name, "infra_access_skill.command.hub.fixture.shout");
        assert!(!decl.writes);
        let (skill, _) = SkillHandle::start(ctx.clone(), Vec::new().into())
            .await
            .expect("skill");
        let v = call(&skill, &ctx, "hub.fixture.shout", json!({"text": "hello"}))
            .await
            .expect("answer");
        assert_eq!(v, json!({"upper": "HELLO", "length": 5}));
        skill.stop().await;
    }

    #[tokio::test]
    async fn bad_programs_fail_the_call_and_never_the_hub() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        let cases = [
            (
                "hub.fixture.not_json",
                script(d, "not_json.sh", "echo hello"),
                5_000,
            ),
            (
                "hub.fixture.array",
                script(d, "array.sh", "echo '[1]'"),
                5_000,
            ),
            (
                "hub.fixture.fails",
                script(d, "fails.sh", "echo 'boom Bearer abc.def' >&2; exit 3"),
                5_000,
            ),
            (
                "hub.fixture.flood",
                script(d, "flood.sh", "exec yes"),
                5_000,
            ),
            ("hub.fixture.hang", script(d, "hang.sh", "sleep 30"), 300),
            (
                "hub.fixture.leaks",
                script(
                    d,
                    "leaks.sh",
                    r#"echo '{"note": "token mcpl_abcdefghijklmnop here"}'"#,
                ),
                5_000,
            ),
        ];
        let commands = cases
            .iter()
            .map(|(id, p, t)| command(id, vec![p.display().to_string()], *t))
            .collect();
        let ctx = Arc::new(HubContext::new(config(d, commands)).expect("context"));
        let (skill, _) = SkillHandle::start(ctx.clone(), Vec::new().into())
            .await
            .expect("skill");
        let err = |r: Result<Value, ToolError>| r.expect_err("refused");
        let e = err(call(&skill, &ctx, "hub.fixture.not_json", json!({})).await);
        assert_eq!(e.code, ErrorCode::AdapterFailed);
        assert!(e.message.contains("not one JSON value"), "{e}");
        let e = err(call(&skill, &ctx, "hub.fixture.array", json!({})).await);
        assert!(e.message.contains("must be a JSON object"), "{e}");
        let e = err(call(&skill, &ctx, "hub.fixture.fails", json!({})).await);
        assert_eq!(e.code, ErrorCode::AdapterFailed);
        assert!(
            e.message.contains("exited with") && e.message.contains("boom"),
            "{e}"
        );
        assert!(!e.message.contains("abc.def"), "stderr is redacted: {e}");
        let e = err(call(&skill, &ctx, "hub.fixture.flood", json!({})).await);
        assert_eq!(e.code, ErrorCode::AdapterFailed);
        assert!(e.message.contains("more than"), "{e}");
        let e = err(call(&skill, &ctx, "hub.fixture.hang", json!({})).await);
        assert_eq!(e.code, ErrorCode::Timeout, "{e}");
        let v = call(&skill, &ctx, "hub.fixture.leaks", json!({}))
            .await
            .expect("answer");
        assert!(!v.to_string().contains("mcpl_abcdefghijklmnop"), "{v}");
        // The skill still serves the built-in adapters.
        let status = call(&skill, &ctx, "hub.get_status", json!({}))
            .await
            .expect("status");
        assert_eq!(status["target_id"], "hub:test-alpha");
        skill.stop().await;
    }

    /// The commented `[[skill.commands]]` example of config/hub.example.toml parses once
    /// uncommented.
    #[test]
    fn the_commented_command_example_parses() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/hub.example.toml");
        let text = std::fs::read_to_string(path).expect("example");
        let start = text
            .find("# [[skill.commands]]")
            .expect("a [[skill.commands]] example");
        let block: String = text[start..]
            .lines()
            .map_while(|l| l.strip_prefix("# "))
            .map(|l| format!("{l}\n"))
            .collect();
        let file: crate::config::HubFile = toml::from_str(&block).expect("the example parses");
        let c = &file.skill.commands[0];
        assert_eq!(c.tool_id, "acme.inventory.count");
        assert!(crate::config::valid_tool_id(&c.tool_id));
        assert_eq!(c.timeout_ms, 5_000);
    }

    #[test]
    fn bad_command_declarations_are_refused_with_the_reason() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ok = script(dir.path(), "ok.sh", "echo '{}'")
            .display()
            .to_string();
        let outside = tempfile::tempdir().expect("tempdir");
        let elsewhere = script(outside.path(), "x.sh", "echo '{}'")
            .display()
            .to_string();
        for (commands, why) in [
            (
                vec![command("Hub.Bad", vec![ok.clone()], 1_000)],
                "dotted lowercase",
            ),
            (
                vec![command("nodots", vec![ok.clone()], 1_000)],
                "dotted lowercase",
            ),
            (
                vec![command("hub.get_status", vec![ok.clone()], 1_000)],
                "built-in adapter",
            ),
            (
                vec![
                    command("hub.fixture.a", vec![ok.clone()], 1_000),
                    command("hub.fixture.a", vec![ok.clone()], 1_000),
                ],
                "declared twice",
            ),
            (vec![command("hub.fixture.a", vec![], 1_000)], "empty argv"),
            (
                vec![command("hub.fixture.a", vec![elsewhere.clone()], 1_000)],
                "outside",
            ),
            (
                vec![command("hub.fixture.a", vec![ok.clone()], 0)],
                "timeout_ms",
            ),
        ] {
            let err = config(dir.path(), commands)
                .validate()
                .expect_err(why)
                .to_string();
            assert!(err.contains(why), "{why}: {err}");
        }
        // A bare program name is looked up in PATH.
        config(
            dir.path(),
            vec![command("hub.fixture.a", vec!["cat".into()], 1_000)],
        )
        .validate()
        .expect("a bare program is fine");
    }
}
