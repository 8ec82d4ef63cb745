//! `hub.get_logs` on the hub: the tail of this hub's log streams, redacted here before
//! anything leaves the hub.
//!
//! Streams, in this order: each managed service's log file (`[[services]]`, stream = service
//! name; its rotated previous part `<log_file>.1` is read first), each `[[log_sources]]` file (stream = its name), and `hub` (the hub's own recent log
//! lines, [`crate::store::hublog`]). Arguments: `source` (`subnet_active`, the default; `root_local`
//! is root's own log and is refused here), `stream` (one stream; default all), `lines` (1 to
//! 1000, default 100) and `contains` (only lines containing this text, matched after
//! redaction so a filter cannot probe for a secret).
//!
//! The answer has the shape root returns for the whole subnet: `{source, health, missing,
//! entries, summary}` with `source: "subnet_active"`, `health: "healthy"`, `missing: []` and
//! one entry per stream, `{target_id, stream, lines, truncated, redactions}`; root merges the
//! entries of every hub of the subnet and sets `health` and `missing` from the hubs that did
//! not answer. An unreadable stream (missing file, not a regular file, a path that resolves
//! outside the declared roots) is an entry with no lines, named in `summary`.
//!
//! Bounds: at most the last [`WINDOW_BYTES`] of a file are read (a partial first line is
//! dropped); the whole window is redacted (so a multi-line private key is recognised whole),
//! then split into lines; ANSI colour sequences are removed and other control characters
//! replaced; lines are cut at [`MAX_LINE_BYTES`]; the entries share [`BUDGET_BYTES`], newest
//! lines kept. `truncated` says that the stream holds (or may hold, beyond the window) more
//! matching lines than were returned. `redactions` counts the `[REDACTED]` markers in the
//! returned lines.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use mcp_shared::error::ToolError;
use regex::Regex;
use serde::Deserialize;
use serde_json::{Value, json};

use super::args::{Arguments, invalid, parse, present};
use crate::config::HUB_STREAM;
use crate::context::HubContext;
use crate::skill::adapters::redact::REDACTED;

/// Bytes read from the end of a log file.
pub(crate) const WINDOW_BYTES: u64 = 1024 * 1024;
/// Longest line returned (longer lines are cut and end with `…`).
pub(crate) const MAX_LINE_BYTES: usize = 2048;
/// Bytes of lines in one answer, shared by its entries (the channel's frames are at most
/// 1 MiB).
pub(crate) const BUDGET_BYTES: usize = 512 * 1024;
/// Most lines per stream a caller may ask for, and the default.
pub(crate) const MAX_LINES: u64 = 1000;
pub(crate) const DEFAULT_LINES: u64 = 100;
/// Longest `contains` filter.
pub(crate) const MAX_FILTER: usize = 200;

static ANSI: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\x1b\[[0-9;?]*[ -/]*[@-~]").expect("built-in ANSI pattern compiles")
});

/// Where a stream's lines come from.
#[derive(Debug, Clone)]
enum Origin {
    /// A service's log file (its path is checked by the configuration).
    Service(PathBuf),
    /// A log source (its path is checked again at every read, links followed).
    Source(PathBuf),
    /// The hub's own ring.
    Hub,
}

/// Every stream of this hub, in answer order.
fn streams(ctx: &HubContext) -> Vec<(String, Origin)> {
    let config = &ctx.config;
    let mut out: Vec<(String, Origin)> = config
        .services
        .iter()
        .map(|s| {
            (
                s.name.clone(),
                Origin::Service(config.under_state_dir(&s.log_path(&config.state_dir))),
            )
        })
        .collect();
    out.extend(config.log_sources.iter().map(|s| {
        (
            s.name.clone(),
            Origin::Source(config.under_state_dir(&s.path)),
        )
    }));
    out.push((HUB_STREAM.to_owned(), Origin::Hub));
    out
}

/// The validated arguments.
struct Request {
    stream: Option<String>,
    lines: usize,
    contains: Option<String>,
}

/// The arguments of `hub.get_logs`, as given.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    #[serde(default, deserialize_with = "present")]
    source: Option<String>,
    #[serde(default, deserialize_with = "present")]
    stream: Option<String>,
    #[serde(default, deserialize_with = "present")]
    lines: Option<u64>,
    #[serde(default, deserialize_with = "present")]
    contains: Option<String>,
}

impl Arguments for Args {
    fn rule(field: &str) -> String {
        match field {
            "source" => "`source` must be \"subnet_active\" or \"root_local\"".into(),
            "stream" => "`stream` must be a name of 1 to 64 characters".into(),
            "lines" => format!("`lines` must be an integer from 1 to {MAX_LINES}"),
            _ => format!("`contains` must be a string of 1 to {MAX_FILTER} characters"),
        }
    }
}

fn request(arguments: &Value) -> Result<Request, ToolError> {
    let args: Args = parse(arguments)?;
    match args.source.as_deref() {
        None | Some("subnet_active") => {}
        Some("root_local") => {
            return Err(invalid(
                "source `root_local` is root's own log and is answered by root, not by a hub",
            ));
        }
        Some(other) => {
            return Err(invalid(format!(
                "{}, not {}",
                Args::rule("source"),
                Value::from(other)
            )));
        }
    }
    let stream = match args.stream {
        None => None,
        Some(s) if !s.is_empty() && s.len() <= 64 => Some(s),
        Some(_) => return Err(invalid(Args::rule("stream"))),
    };
    let lines = match args.lines {
        None => DEFAULT_LINES,
        Some(n) if (1..=MAX_LINES).contains(&n) => n,
        Some(_) => return Err(invalid(Args::rule("lines"))),
    };
    let contains = match args.contains {
        None => None,
        Some(s) if !s.is_empty() && s.chars().count() <= MAX_FILTER => Some(s),
        Some(_) => return Err(invalid(Args::rule("contains"))),
    };
    Ok(Request {
        stream,
        lines: usize::try_from(lines).unwrap_or(usize::MAX),
        contains,
    })
}

/// Raw text of a stream: the text, whether its first line is partial, whether earlier lines
/// exist that are not in it.
struct Raw {
    text: String,
    partial_first: bool,
    earlier: bool,
}

/// Why a stream could not be read: a short reason for the summary.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LogReadError {
    #[error("no such file yet")]
    Missing,
    #[error("cannot open: {0}")]
    Open(std::io::Error),
    #[error("resolves outside the state directory and the declared roots; not read")]
    OutsideRoots,
    #[error("cannot stat: {0}")]
    Stat(std::io::Error),
    #[error("not a regular file; not read")]
    NotAFile,
    #[error("cannot seek: {0}")]
    Seek(std::io::Error),
    #[error("cannot read: {0}")]
    Read(std::io::Error),
    /// The blocking read's task panicked or was cancelled.
    #[error("the read failed: {0}")]
    Task(tokio::task::JoinError),
}

/// The roots a log source must resolve under (links followed).
fn roots(ctx: &HubContext) -> Vec<PathBuf> {
    std::iter::once(&ctx.config.state_dir)
        .chain(ctx.config.allowed_roots.iter())
        .filter_map(|r| std::fs::canonicalize(r).ok())
        .collect()
}

/// Reads the last [`WINDOW_BYTES`] of `path`; the error is a short reason for the summary.
fn read_file(path: &Path, confine: Option<&[PathBuf]>) -> Result<Raw, LogReadError> {
    use std::io::{Read, Seek, SeekFrom};
    let real = std::fs::canonicalize(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => LogReadError::Missing,
        _ => LogReadError::Open(e),
    })?;
    if let Some(roots) = confine
        && !roots.iter().any(|r| real.starts_with(r))
    {
        return Err(LogReadError::OutsideRoots);
    }
    let mut file = std::fs::File::open(&real).map_err(LogReadError::Open)?;
    let meta = file.metadata().map_err(LogReadError::Stat)?;
    if !meta.is_file() {
        return Err(LogReadError::NotAFile);
    }
    let start = meta.len().saturating_sub(WINDOW_BYTES);
    file.seek(SeekFrom::Start(start))
        .map_err(LogReadError::Seek)?;
    let mut bytes = Vec::new();
    file.take(WINDOW_BYTES)
        .read_to_end(&mut bytes)
        .map_err(LogReadError::Read)?;
    Ok(Raw {
        text: String::from_utf8_lossy(&bytes).into_owned(),
        partial_first: start > 0,
        earlier: start > 0,
    })
}

/// A service's log: its previous part (`<log_file>.1`, if any) followed by the current file.
fn read_service(path: &Path) -> Result<Raw, LogReadError> {
    let current = read_file(path, None);
    let previous = read_file(
        &crate::machine::services::CappedLog::rotated_path(path),
        None,
    )
    .ok();
    match (previous, current) {
        (None, current) => current,
        (Some(previous), Err(_)) => Ok(previous),
        // One byte stream cut in two: joined as written.
        (Some(previous), Ok(current)) => Ok(Raw {
            text: previous.text + &current.text,
            partial_first: previous.partial_first,
            earlier: previous.earlier,
        }),
    }
}

/// Makes a line safe to show: no ANSI sequences, no control characters, at most
/// [`MAX_LINE_BYTES`].
fn clean(line: &str) -> String {
    let line = ANSI.replace_all(line, "");
    let mut out: String = line
        .chars()
        .map(|c| {
            if c.is_control() && c != '\t' {
                '\u{FFFD}'
            } else {
                c
            }
        })
        .collect();
    if out.len() > MAX_LINE_BYTES {
        let mut end = MAX_LINE_BYTES - '…'.len_utf8();
        while !out.is_char_boundary(end) {
            end -= 1;
        }
        out.truncate(end);
        out.push('…');
    }
    out
}

/// One stream's answer before the budget is applied.
struct Tail {
    lines: Vec<String>,
    truncated: bool,
}

/// Redacts the raw text, splits it into lines, filters, keeps the last `n`.
fn tail(raw: Raw, req: &Request, extra: &[Regex]) -> Tail {
    let text = if raw.partial_first {
        raw.text
            .split_once('\n')
            .map_or(String::new(), |(_, rest)| rest.to_owned())
    } else {
        raw.text
    };
    let (text, _) = crate::skill::adapters::redact::redact_with(&text, extra);
    let matching: Vec<&str> = text
        .lines()
        .filter(|l| req.contains.as_deref().is_none_or(|c| l.contains(c)))
        .collect();
    let skip = matching.len().saturating_sub(req.lines);
    Tail {
        lines: matching[skip..].iter().map(|l| clean(l)).collect(),
        truncated: skip > 0 || raw.earlier,
    }
}

pub(crate) async fn run(ctx: &HubContext, arguments: &Value) -> Result<Value, ToolError> {
    let req = request(arguments)?;
    let all = streams(ctx);
    let chosen: Vec<(String, Origin)> = match &req.stream {
        None => all,
        Some(name) => match all.iter().find(|(n, _)| n == name) {
            Some(s) => vec![s.clone()],
            None => {
                let names: Vec<String> = all.iter().map(|(n, _)| format!("`{n}`")).collect();
                return Err(invalid(format!(
                    "no log stream `{name}` on this hub; streams: {}",
                    names.join(", ")
                )));
            }
        },
    };
    let roots = roots(ctx);
    let mut tails = Vec::with_capacity(chosen.len());
    let mut problems = Vec::new();
    for (name, origin) in &chosen {
        let raw = match origin {
            Origin::Hub => {
                let snap = ctx.logging.hub_log.snapshot();
                Ok(Raw {
                    text: snap.lines.join("\n"),
                    partial_first: false,
                    earlier: snap.dropped,
                })
            }
            Origin::Service(path) => {
                let path = path.clone();
                tokio::task::spawn_blocking(move || read_service(&path))
                    .await
                    .unwrap_or_else(|e| Err(LogReadError::Task(e)))
            }
            Origin::Source(path) => {
                let path = path.clone();
                let roots = roots.clone();
                tokio::task::spawn_blocking(move || read_file(&path, Some(&roots)))
                    .await
                    .unwrap_or_else(|e| Err(LogReadError::Task(e)))
            }
        };
        match raw {
            Ok(raw) => tails.push(tail(raw, &req, &ctx.logging.redaction)),
            Err(why) => {
                problems.push(format!("`{name}`: {why}"));
                tails.push(Tail {
                    lines: Vec::new(),
                    truncated: false,
                });
            }
        }
    }
    // The entries share the budget; each keeps its newest lines within its share.
    let share = BUDGET_BYTES / tails.len().max(1);
    for t in &mut tails {
        let mut used = 0;
        let keep = t
            .lines
            .iter()
            .rev()
            .take_while(|l| {
                used += l.len() + 8;
                used <= share
            })
            .count();
        if keep < t.lines.len() {
            t.lines.drain(..t.lines.len() - keep);
            t.truncated = true;
        }
    }
    let target = &ctx.config.target_id;
    let mut total_lines = 0;
    let mut total_redactions = 0;
    let entries: Vec<Value> = chosen
        .iter()
        .zip(tails)
        .map(|((name, _), t)| {
            let redactions: usize = t.lines.iter().map(|l| l.matches(REDACTED).count()).sum();
            total_lines += t.lines.len();
            total_redactions += redactions;
            json!({
                "target_id": target,
                "stream": name,
                "lines": t.lines,
                "truncated": t.truncated,
                "redactions": redactions,
            })
        })
        .collect();
    let mut summary = format!(
        "{target}: {} stream(s), {total_lines} line(s), {total_redactions} redaction(s)",
        entries.len()
    );
    if !problems.is_empty() {
        summary.push_str("; unreadable: ");
        summary.push_str(&problems.join("; "));
    }
    Ok(json!({
        "source": "subnet_active",
        "health": "healthy",
        "missing": [],
        "entries": entries,
        "summary": summary,
    }))
}

#[cfg(test)]
mod tests;
