//! heaptrack (Debian's `heaptrack` package) for native processes that cannot be rebuilt.
//!
//! A service with `heap_profiles.format = "heaptrack"` runs its profiling argv with
//! heaptrack's recorder preloaded ([`env`]: `LD_PRELOAD` of `libheaptrack_preload.so`,
//! `DUMP_HEAPTRACK_OUTPUT=<dir>/heaptrack.<pid>.raw`), which appends each allocation and
//! free to that raw trace as the process runs. A snapshot ([`snapshot`]) is the trace up to
//! its last whole line run through `heaptrack_interpret` into heaptrack's data format (what
//! `heaptrack_print` and `heaptrack_gui` open), its paths redacted, gzipped. It is read
//! ([`read`]) with `heaptrack_print --flamegraph-cost-type leaked`: the bytes still live per
//! stack when the snapshot was taken.
//!
//! Not through the `heaptrack` script: it runs the program as a child of a shell (the
//! service's pid would be the shell's), and stopping the service's process group ends the
//! script's interpreter with it, losing the recording.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::{HeapError, MAX_DECODED_BYTES, Snapshot, function_name, site_of};

/// Where Debian's package installs heaptrack's recorder and interpreter.
const LIB_DIR: &str = "/usr/lib/heaptrack";
/// `heaptrack_print` (on `PATH`).
const PRINT: &str = "heaptrack_print";

/// heaptrack's parts.
pub(crate) struct Tools {
    preload: PathBuf,
    interpret: PathBuf,
}

impl Tools {
    /// heaptrack as Debian's package installs it.
    pub(crate) fn find() -> Result<Tools, HeapError> {
        let dir = Path::new(LIB_DIR);
        let tools = Tools {
            preload: dir.join("libheaptrack_preload.so"),
            interpret: dir.join("libexec").join("heaptrack_interpret"),
        };
        for part in [&tools.preload, &tools.interpret] {
            if !part.is_file() {
                return Err(HeapError::Tool(format!(
                    "heaptrack is not installed: {} is missing (Debian package `heaptrack`)",
                    part.display()
                )));
            }
        }
        Ok(tools)
    }
}

/// What a process needs in its environment to be recorded into `dir`.
pub(crate) fn env(dir: &Path) -> Result<[(String, String); 2], HeapError> {
    let tools = Tools::find()?;
    Ok([
        (
            "LD_PRELOAD".to_owned(),
            tools.preload.to_string_lossy().into_owned(),
        ),
        (
            "DUMP_HEAPTRACK_OUTPUT".to_owned(),
            // The recorder puts its pid in place of `$$`.
            dir.join("heaptrack.$$.raw").to_string_lossy().into_owned(),
        ),
    ])
}

/// Runs `program` with `input` on its stdin; its stdout, at most `MAX_DECODED_BYTES`.
fn pipe(program: &Path, args: &[&str], input: &[u8]) -> Result<Vec<u8>, HeapError> {
    let name = program.display().to_string();
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| HeapError::Tool(format!("cannot run {name}: {e}")))?;
    let stdin = child.stdin.take();
    // Fed from a thread of its own while the output is read (a pipe holds little); the
    // input's end closes stdin.
    let out = std::thread::scope(|s| {
        s.spawn(move || stdin.map(|mut i| i.write_all(input)));
        child.wait_with_output()
    })
    .map_err(|e| HeapError::Tool(format!("{name}: {e}")))?;
    if !out.status.success() {
        return Err(HeapError::Tool(format!(
            "{name} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    if out.stdout.len() as u64 > MAX_DECODED_BYTES {
        return Err(HeapError::TooLarge(MAX_DECODED_BYTES));
    }
    Ok(out.stdout)
}

/// A snapshot from `raw` (a raw trace as the recorder wrote it so far): interpreted, its
/// paths cut to their file name unless under `keep`, gzipped.
pub(crate) fn snapshot(raw: &[u8], keep: &[String]) -> Result<Vec<u8>, HeapError> {
    let whole = raw
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(&raw[..0], |end| &raw[..=end]);
    if !whole.starts_with(b"v ") {
        return Err(if whole.is_empty() {
            HeapError::Empty
        } else {
            HeapError::Malformed("not a heaptrack trace (no version line)".into())
        });
    }
    let tools = Tools::find()?;
    let data = pipe(&tools.interpret, &[], whole)?;
    let text = String::from_utf8_lossy(&data);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    for line in text.lines() {
        let line = redact_line(line, keep);
        gz.write_all(line.as_bytes())
            .and_then(|()| gz.write_all(b"\n"))
            .map_err(|e| HeapError::Gzip(e.to_string()))?;
    }
    gz.finish().map_err(|e| HeapError::Gzip(e.to_string()))
}

/// A line of heaptrack's data with its path redacted: a string (`s <hex length> <text>`)
/// that is an absolute path, and the command line (`X <argv>`).
fn redact_line<'a>(line: &'a str, keep: &[String]) -> std::borrow::Cow<'a, str> {
    let cut = |path: &str| {
        let file = path.rsplit('/').next().unwrap_or_default();
        format!("{}/{file}", super::pprof::REDACTED)
    };
    if let Some(rest) = line.strip_prefix("s ")
        && let Some((_, text)) = rest.split_once(' ')
        && text.starts_with('/')
        && !keep.iter().any(|k| text.starts_with(k.as_str()))
    {
        let text = cut(text);
        return format!("s {:x} {text}", text.len()).into();
    }
    if let Some(argv) = line.strip_prefix("X ") {
        let program = argv.split(' ').next().unwrap_or_default();
        return format!("X {}", cut(program)).into();
    }
    line.into()
}

/// Reads a snapshot (heaptrack's data, gzipped, at `path`, whose name ends in `.gz`).
pub(crate) fn read(path: &Path) -> Result<Snapshot, HeapError> {
    let stacks = path.with_extension("stacks");
    let out = Command::new(PRINT)
        .args(["-p", "0", "-a", "0", "-T", "0", "-l", "0"])
        .args(["--flamegraph-cost-type", "leaked", "-f"])
        .arg(path)
        .arg("-F")
        .arg(&stacks)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| HeapError::Tool(format!("cannot run {PRINT}: {e}")));
    let folded = std::fs::read_to_string(&stacks);
    let _ = std::fs::remove_file(&stacks);
    let out = out?;
    if !out.status.success() {
        return Err(HeapError::Tool(format!(
            "{PRINT} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let folded = folded.map_err(|e| HeapError::Tool(format!("{PRINT} wrote no stacks: {e}")))?;
    Ok(from_folded(&folded))
}

/// heaptrack_print's folded stacks (`caller (file);...;callee (file); bytes`, the root
/// first) by site.
fn from_folded(folded: &str) -> Snapshot {
    let mut snap = Snapshot {
        symbolized: true,
        ..Snapshot::default()
    };
    for line in folded.lines() {
        let Some((stack, bytes)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(bytes) = bytes.trim().parse::<i64>() else {
            continue;
        };
        let frames: Vec<String> = stack
            .split(';')
            .filter(|f| !f.is_empty())
            .rev()
            .map(|f| match f.rsplit_once(" (") {
                Some((function, file)) if file.ends_with(')') => function_name(function),
                _ => function_name(f),
            })
            .collect();
        if bytes == 0 || frames.is_empty() {
            continue;
        }
        let usage = snap.sites.entry(site_of(&frames)).or_default();
        usage.bytes += bytes;
        snap.total.bytes += bytes;
    }
    snap
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folded_stacks_read_into_sites_callee_first() {
        let s = from_folded(
            "main (leak.c);leak_cache (leak.c); 3932160\n\
             main (leak.c);churn (leak.c); 0\n\
             0x7f3f (rtld.c);_dl_init (dl-init.c);0x7f3f83aa57b9; 72704\n",
        );
        assert_eq!(s.total.bytes, 3932160 + 72704);
        let leak = s.sites[&vec!["leak_cache".to_owned(), "main".to_owned()]];
        assert_eq!(leak.bytes, 3932160);
        assert_eq!(s.sites.len(), 2, "a stack of no live bytes is no site");
        // Rust as heaptrack sees it: v0 and legacy symbols, inlined frames without a path.
        let rust = from_folded(
            "main;_ZN19mcp_fixture_service13leak_steadily17h655152acfe635070E (m.rs);\
             _ZN5alloc3vec9from_elem17h01be1dfff9ca206eE (v.rs);with_capacity_zeroed_in<> (r.rs);\
             from_elem<> (r.rs);_RNvMs4_NtCslNYArtu3iFV_5alloc7raw_vecNtB5_11RawVecInner15try_allocate_inCsduwmD7cSIQq_5gimli (r.rs); 4096\n",
        );
        let (site, _) = rust.sites.iter().next().unwrap();
        assert_eq!(site[..2], ["mcp_fixture_service::leak_steadily", "main"]);
        // ... and as heaptrack's own demangler leaves a legacy symbol.
        let half = from_folded(
            "mcp_fixture_service::main::_$u7b$$u7b$closure$u7d$$u7d$::h8014870499dbf1b2 (m.rs);\
             mcp_fixture_service::leak_steadily::hee3528aea3231f4e (m.rs); 10\n",
        );
        let (site, _) = half.sites.iter().next().unwrap();
        assert_eq!(
            site[..],
            [
                "mcp_fixture_service::leak_steadily",
                "mcp_fixture_service::main::{{closure}}"
            ]
        );
    }

    #[test]
    fn paths_and_the_command_line_are_redacted() {
        let keep = ["/lib/".to_owned()];
        assert_eq!(
            redact_line("s e /tmp/ht/leak.c", &keep),
            "s 11 <redacted>/leak.c"
        );
        assert_eq!(
            redact_line("s 1f /lib/x86_64-linux-gnu/libc.so.6", &keep),
            "s 1f /lib/x86_64-linux-gnu/libc.so.6"
        );
        assert_eq!(redact_line("s a leak_cache", &keep), "s a leak_cache");
        assert_eq!(
            redact_line("X /srv/app --token s3cret", &keep),
            "X <redacted>/app"
        );
        assert_eq!(redact_line("+ 1a 2", &keep), "+ 1a 2");
    }

    #[test]
    fn what_is_not_a_trace_is_refused() {
        assert_eq!(snapshot(b"", &[]).unwrap_err(), HeapError::Empty);
        assert_eq!(
            snapshot(b"partial line without end", &[]).unwrap_err(),
            HeapError::Empty
        );
        assert!(matches!(
            snapshot(b"garbage\n", &[]),
            Err(HeapError::Malformed(_))
        ));
    }
}
