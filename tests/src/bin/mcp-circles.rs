//! `mcp-circles [--max N] ROOT…`: the import circles of each crate whose root file is given
//! (`root/src/lib.rs`, …), from its parsed source (see `mcp_tests::circles`). Prints every
//! circle of more than one file, largest first, with the imports that close it; exits 1 when
//! one has more than N files.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> anyhow::Result<ExitCode> {
    let mut args = std::env::args().skip(1);
    let mut max = None;
    let mut roots = Vec::new();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--max" => {
                let n = args
                    .next()
                    .ok_or_else(|| anyhow::anyhow!("--max needs a number"))?;
                max = Some(
                    n.parse::<usize>()
                        .map_err(|e| anyhow::anyhow!("--max {n}: {e}"))?,
                );
            }
            _ => roots.push(PathBuf::from(a)),
        }
    }
    anyhow::ensure!(!roots.is_empty(), "usage: mcp-circles [--max N] ROOT_FILE…");
    let mut over = false;
    for root in roots {
        let found = mcp_tests::circles::circles(&root)?;
        if found.is_empty() {
            println!("{}: no import circle", root.display());
        }
        for c in &found {
            println!(
                "{}: {} files: {}",
                root.display(),
                c.files.len(),
                c.files.join(", ")
            );
            for (from, to) in &c.imports {
                println!("  {from} -> {to}");
            }
            over |= max.is_some_and(|m| c.files.len() > m);
        }
    }
    Ok(if over {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
