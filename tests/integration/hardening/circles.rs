//! Structure: no import circle of more than two files in any crate, from each crate's parsed
//! source (`mcp_tests::circles`), so a newcomer can read a crate's files in some order;
//! nothing under root's HTTP layer (`api/`) reaches up into it; and one path issues leases.

use std::path::Path;

/// Every crate root of the product (binaries are crates of their own).
const ROOTS: [&str; 7] = [
    "shared/src/lib.rs",
    "root-core/src/lib.rs",
    "root/src/lib.rs",
    "root/src/main.rs",
    "hub/src/lib.rs",
    "hub/src/main.rs",
    "demo-app/src/main.rs",
];

#[test]
fn no_crate_has_an_import_circle_of_more_than_two_files() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut over = Vec::new();
    for root in ROOTS {
        for c in mcp_tests::circles::circles(&repo.join(root)).unwrap() {
            if c.files.len() > 2 {
                let imports: Vec<String> = c
                    .imports
                    .iter()
                    .map(|(a, b)| format!("  {a} -> {b}"))
                    .collect();
                over.push(format!(
                    "{root}: {}\n{}",
                    c.files.join(", "),
                    imports.join("\n")
                ));
            }
        }
    }
    assert!(over.is_empty(), "import circles:\n{}", over.join("\n"));
}

/// Root's HTTP layer parses, asks a service and answers; nothing below it imports it. Only
/// the crate's roots, the startup that mounts the router, and the CLI (a client of the REST
/// family, reading its answer types) name `api/`.
#[test]
fn nothing_below_the_http_layer_imports_it() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let graph = mcp_tests::circles::imports(&repo.join("root/src/lib.rs")).unwrap();
    let above = |f: &str| {
        f.starts_with("api/") || f.starts_with("cli/") || ["lib.rs", "startup.rs"].contains(&f)
    };
    assert!(graph.len() > 100, "{} files read", graph.len());
    assert!(
        graph.keys().any(|f| f.starts_with("api/")) && graph.keys().any(|f| f.starts_with("ops/")),
        "{:?}",
        graph.keys()
    );
    let reaching: Vec<String> = graph
        .iter()
        .filter(|(from, _)| !above(from))
        .flat_map(|(from, to)| {
            to.iter()
                .filter(|t| t.starts_with("api/"))
                .map(move |t| format!("{from} -> {t}"))
        })
        .collect();
    assert!(
        reaching.is_empty(),
        "imports of api/ from below it: {reaching:#?}"
    );
    // The check sees imports: the CLI does import api/'s answer types.
    assert!(
        graph
            .iter()
            .any(|(from, to)| from.starts_with("cli/") && to.iter().any(|t| t.starts_with("api/"))),
        "the graph shows no import of api/ at all"
    );
}

/// One path issues leases (`ops::leases::issue`: the lease manager creates it, then the
/// other replicas are told): no other file of root asks the lease manager for one.
#[test]
fn only_ops_leases_asks_the_lease_manager_for_a_lease() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../root/src");
    let mut askers = Vec::new();
    let mut dirs = vec![src.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                let asks = text
                    .lines()
                    .any(|l| !l.trim_start().starts_with("//") && l.contains("Msg::Create"));
                if asks {
                    askers.push(path.strip_prefix(&src).unwrap().display().to_string());
                }
            }
        }
    }
    assert_eq!(
        askers,
        ["ops/leases.rs"],
        "files issuing leases on their own"
    );
}
