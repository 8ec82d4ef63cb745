//! Import circles between the files of a crate, from its parsed source (`syn`): the strongly
//! connected components of the graph "file A names an item of file B".
//!
//! The crate's files are the modules its root declares (`mod x;`, followed to `x.rs` or
//! `x/mod.rs`, `#[path]` honoured), except test-only ones (`#[cfg(test)]`). A file names
//! another through a path that starts with `crate`, `super`, `self` or one of its own child
//! modules: in `use` declarations (groups, renames and globs expanded), in types and
//! expressions, and inside macro invocations (their tokens: `tracing::info!(…, crate::x::y)`).
//! The path names the file of its longest prefix that is a module, or, when the next name is
//! one that file imports (`pub use skill::Gate;` in `lib.rs`), the file that name comes from:
//! a re-export forwards, it is not a dependency of its own. Strings, comments and raw
//! strings are tokens of their own to the parser, so none of them hides or invents a path;
//! items under `#[cfg(test)]` are left out (tests may reach anywhere).
//!
//! [`circles`] is what CI checks (`hardening::circles`); `mcp-circles` prints it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::Context;
use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

/// A module path (`["audit", "writer"]`; the crate root is empty).
type Module = Vec<String>;

/// An import circle: its files (relative to the crate root's directory, sorted) and the
/// imports between them (`(from, to)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Circle {
    pub files: Vec<String>,
    pub imports: Vec<(String, String)>,
}

/// Which files each file of the crate whose root file is `root` imports (file names relative
/// to the root's directory).
pub fn imports(root: &Path) -> anyhow::Result<BTreeMap<String, BTreeSet<String>>> {
    let (graph, name) = graph(root)?;
    Ok(graph
        .iter()
        .map(|(from, to)| {
            (
                name[from].clone(),
                to.iter().map(|m| name[m].clone()).collect(),
            )
        })
        .collect())
}

/// The import graph between the crate's modules, and each module's file name.
#[allow(clippy::type_complexity)]
fn graph(
    root: &Path,
) -> anyhow::Result<(BTreeMap<Module, BTreeSet<Module>>, BTreeMap<Module, String>)> {
    let files = modules(root)?;
    let dir = root.parent().unwrap_or(Path::new("."));
    let mut found = BTreeMap::new();
    let mut names = Names::new();
    for (module, (_, file)) in &files {
        let mut paths = Paths {
            files: &files,
            at: module.clone(),
            found: Vec::new(),
            names: &mut names,
        };
        paths.visit_file(file);
        found.insert(module.clone(), paths.found);
    }
    let mut graph: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (module, paths) in found {
        let edges = graph.entry(module.clone()).or_default();
        for (at, path) in paths {
            if let Some(target) = resolve(&at, &path, &files, &names, 0)
                && target != module
            {
                edges.insert(target);
            }
        }
    }
    let name = files
        .iter()
        .map(|(m, (path, _))| {
            let path = path.strip_prefix(dir).unwrap_or(path);
            (m.clone(), path.display().to_string())
        })
        .collect();
    Ok((graph, name))
}

/// The circles of more than one file of the crate whose root file is `root` (`lib.rs` or
/// `main.rs`), largest first.
pub fn circles(root: &Path) -> anyhow::Result<Vec<Circle>> {
    let (graph, names) = graph(root)?;
    let name = |m: &Module| names[m].clone();
    let mut comps: Vec<Circle> = components(&graph)
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|c| {
            let inside: BTreeSet<&Module> = c.iter().collect();
            let mut imports: Vec<(String, String)> = c
                .iter()
                .flat_map(|from| {
                    graph[from]
                        .iter()
                        .filter(|to| inside.contains(to))
                        .map(move |to| (name(from), name(to)))
                })
                .collect();
            imports.sort();
            let mut files: Vec<String> = c.iter().map(name).collect();
            files.sort();
            Circle { files, imports }
        })
        .collect();
    comps.sort_by(|a, b| {
        b.files
            .len()
            .cmp(&a.files.len())
            .then(a.files.cmp(&b.files))
    });
    Ok(comps)
}

/// Every module of the crate rooted at `root` that is not test-only: its file and parse.
fn modules(root: &Path) -> anyhow::Result<BTreeMap<Module, (PathBuf, syn::File)>> {
    let mut out = BTreeMap::new();
    let mut queue = vec![(Module::new(), root.to_path_buf())];
    while let Some((module, path)) = queue.pop() {
        let text =
            std::fs::read_to_string(&path).with_context(|| format!("read {}", path.display()))?;
        let file = syn::parse_file(&text).with_context(|| format!("parse {}", path.display()))?;
        // Where this file's child modules live: beside a root or `mod.rs`, else in a
        // directory named after it.
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default();
        let parent = path.parent().unwrap_or(Path::new("."));
        let dir = if module.is_empty() || name == "mod" {
            parent.to_path_buf()
        } else {
            parent.join(name)
        };
        declared(&file.items, &module, &dir, &mut queue);
        out.insert(module, (path, file));
    }
    Ok(out)
}

/// Queues the file modules `items` declare (inline modules' declarations under their own
/// directory), test-only ones left out.
fn declared(items: &[syn::Item], at: &Module, dir: &Path, queue: &mut Vec<(Module, PathBuf)>) {
    for item in items {
        let syn::Item::Mod(m) = item else { continue };
        if test_only(&m.attrs) {
            continue;
        }
        let name = m.ident.to_string();
        let mut module = at.clone();
        module.push(name.clone());
        match &m.content {
            Some((_, inner)) => declared(inner, &module, &dir.join(&name), queue),
            None => {
                let file = path_attr(&m.attrs)
                    .map(|p| dir.join(p))
                    .or_else(|| {
                        let flat = dir.join(format!("{name}.rs"));
                        flat.exists().then_some(flat)
                    })
                    .unwrap_or_else(|| dir.join(&name).join("mod.rs"));
                queue.push((module, file));
            }
        }
    }
}

/// `#[path = "…"]`.
fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| match &a.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

/// `#[cfg(test)]`.
fn test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg") && a.parse_args::<syn::Ident>().is_ok_and(|i| i == "test")
    })
}

/// The names each module's `use` declarations bind: name -> (where, the path it names).
type Names = BTreeMap<Module, BTreeMap<String, (Module, Vec<String>)>>;

/// The paths a file names, each with the module it is named in, and the names it imports.
struct Paths<'a> {
    files: &'a BTreeMap<Module, (PathBuf, syn::File)>,
    at: Module,
    found: Vec<(Module, Vec<String>)>,
    names: &'a mut Names,
}

impl Paths<'_> {
    /// Whether a path starting with `head` names a module of this crate from here.
    fn heads(&self, head: &str) -> bool {
        matches!(head, "crate" | "super" | "self") || {
            let mut child = self.at.clone();
            child.push(head.to_owned());
            self.files.contains_key(&child)
        }
    }

    fn add(&mut self, path: Vec<String>) {
        if path.len() > 1 && self.heads(&path[0]) {
            self.found.push((self.at.clone(), path));
        }
    }

    /// Paths in a macro's tokens: `head :: name :: …` runs, inside groups too.
    fn scan(&mut self, tokens: TokenStream) {
        let tokens: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < tokens.len() {
            match &tokens[i] {
                TokenTree::Group(g) => self.scan(g.stream()),
                TokenTree::Ident(id) => {
                    let mut path = vec![id.to_string()];
                    let mut j = i + 1;
                    while let (
                        Some(TokenTree::Punct(a)),
                        Some(TokenTree::Punct(b)),
                        Some(TokenTree::Ident(next)),
                    ) = (tokens.get(j), tokens.get(j + 1), tokens.get(j + 2))
                    {
                        if a.as_char() != ':' || b.as_char() != ':' {
                            break;
                        }
                        path.push(next.to_string());
                        j += 3;
                    }
                    // A `{` group after `::` (a `use` inside a macro) is left to its items.
                    self.add(path);
                    i = j - 1;
                }
                _ => {}
            }
            i += 1;
        }
    }
}

/// The full paths of a `use` tree, each with the name it binds (`None` for a glob).
fn use_paths(
    prefix: &mut Vec<String>,
    tree: &syn::UseTree,
    out: &mut Vec<(Option<String>, Vec<String>)>,
) {
    let last = |p: &[String]| p.last().cloned();
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_paths(prefix, &p.tree, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) if n.ident == "self" => out.push((last(prefix), prefix.clone())),
        syn::UseTree::Name(n) => out.push((
            Some(n.ident.to_string()),
            [prefix.as_slice(), &[n.ident.to_string()]].concat(),
        )),
        syn::UseTree::Rename(r) => {
            let path = if r.ident == "self" {
                prefix.clone()
            } else {
                [prefix.as_slice(), &[r.ident.to_string()]].concat()
            };
            out.push((Some(r.rename.to_string()), path));
        }
        syn::UseTree::Glob(_) => out.push((None, prefix.clone())),
        syn::UseTree::Group(g) => g.items.iter().for_each(|t| use_paths(prefix, t, out)),
    }
}

impl<'ast> Visit<'ast> for Paths<'_> {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if test_only(&m.attrs) {
            return;
        }
        if let Some((_, items)) = &m.content {
            self.at.push(m.ident.to_string());
            items.iter().for_each(|i| self.visit_item(i));
            self.at.pop();
        }
    }

    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs = match item {
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Use(u) => &u.attrs,
            syn::Item::Const(c) => &c.attrs,
            syn::Item::Static(s) => &s.attrs,
            syn::Item::Struct(s) => &s.attrs,
            syn::Item::Enum(e) => &e.attrs,
            syn::Item::Trait(t) => &t.attrs,
            _ => return syn::visit::visit_item(self, item),
        };
        if !test_only(attrs) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let mut out = Vec::new();
        use_paths(&mut Vec::new(), &u.tree, &mut out);
        for (name, path) in out {
            if let Some(name) = name {
                let bound = (self.at.clone(), path.clone());
                self.names
                    .entry(self.at.clone())
                    .or_default()
                    .insert(name, bound);
            }
            self.add(path);
        }
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        self.add(p.segments.iter().map(|s| s.ident.to_string()).collect());
        syn::visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.visit_path(&m.path);
        self.scan(m.tokens.clone());
    }

    // `pub(crate)`, `pub(super)`, `pub(in …)` restrict who sees an item; they name no item.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}
}

/// The module a path named at `at` resolves to: its longest prefix that is a module, or where
/// the name after it comes from when that module imports it (`None`: another crate's).
fn resolve(
    at: &Module,
    path: &[String],
    files: &BTreeMap<Module, (PathBuf, syn::File)>,
    names: &Names,
    depth: usize,
) -> Option<Module> {
    let (mut base, rest): (Module, &[String]) = match path[0].as_str() {
        "crate" => (Vec::new(), &path[1..]),
        "super" | "self" => (at.clone(), path),
        _ => (at.clone(), path),
    };
    let mut rest = rest;
    while let Some(head) = rest.first().filter(|h| *h == "super" || *h == "self") {
        if head == "super" {
            base.pop();
        }
        rest = &rest[1..];
    }
    // A path inside an inline module names that module's file (the file holding it).
    let mut best = owning(&base, files);
    let mut cur = base;
    let mut used = 0;
    for seg in rest {
        cur.push(seg.clone());
        if files.contains_key(&cur) {
            best = Some(cur.clone());
            used += 1;
        } else {
            cur.pop();
            break;
        }
    }
    // The next name, imported by the module reached: follow the import (a bounded chain).
    let imported = rest
        .get(used)
        .and_then(|name| names.get(&cur)?.get(name))
        .filter(|_| depth < 8 && files.contains_key(&cur));
    match imported {
        Some((from, path)) => {
            let full: Vec<String> = path.iter().chain(&rest[used + 1..]).cloned().collect();
            let heads = matches!(full[0].as_str(), "crate" | "super" | "self")
                || files.contains_key(&[from.as_slice(), &full[..1]].concat());
            if heads {
                resolve(from, &full, files, names, depth + 1)
            } else {
                None
            }
        }
        None => best,
    }
}

/// The file module holding module `m` (itself, or the nearest ancestor with a file).
fn owning(m: &Module, files: &BTreeMap<Module, (PathBuf, syn::File)>) -> Option<Module> {
    (0..=m.len())
        .rev()
        .map(|n| m[..n].to_vec())
        .find(|p| files.contains_key(p))
}

/// Strongly connected components of `graph` (petgraph's Tarjan).
fn components(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    let mut g = petgraph::graphmap::DiGraphMap::<&Module, ()>::new();
    for (from, tos) in graph {
        g.add_node(from);
        for to in tos {
            g.add_edge(from, to, ());
        }
    }
    petgraph::algo::tarjan_scc(&g)
        .into_iter()
        .map(|c| c.into_iter().cloned().collect())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A crate in a temporary directory: `(file, text)` pairs under `src/`.
    fn crate_of(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            let path = dir.path().join("src").join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    #[test]
    fn strings_comments_and_raw_strings_neither_hide_nor_invent_an_import() {
        let dir = crate_of(&[
            ("lib.rs", "mod a;\nmod b;\nmod c;\n"),
            // The regular-expression check lost the rest of this file at `//` in a string.
            (
                "a.rs",
                "const URL: &str = \"postgres://x\";\nuse crate::b::B;\n",
            ),
            // A raw string with a comment opener and a quote, then an import.
            (
                "b.rs",
                "const R: &str = r#\"/* \"quoted\" \"#;\npub struct B;\nfn f() { let _ = crate::c::C; }\n",
            ),
            // A path inside a macro; a path in a comment and in a string that are not imports.
            (
                "c.rs",
                "pub struct C;\n// use crate::x::Y;\nconst S: &str = \"crate::b::B\";\n\
                 fn g() { println!(\"{:?}\", crate::a::URL); }\n",
            ),
        ]);
        let found = circles(&dir.path().join("src/lib.rs")).unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].files, ["a.rs", "b.rs", "c.rs"]);
        let pairs = [("a.rs", "b.rs"), ("b.rs", "c.rs"), ("c.rs", "a.rs")];
        assert_eq!(
            found[0].imports,
            pairs.map(|(a, b)| (a.to_owned(), b.to_owned()))
        );
    }

    #[test]
    fn a_re_export_leads_to_the_file_that_defines_the_name() {
        // `b` names `crate::Gate`, which the root only re-exports from `a`: b depends on a,
        // not on the root (which would close a circle root -> a -> b -> root).
        let dir = crate_of(&[
            (
                "lib.rs",
                "mod a;
mod b;
pub use a::Gate;
pub use mcp_other::Thing;
",
            ),
            (
                "a.rs",
                "pub struct Gate;
fn f() { let _ = crate::b::g; }
",
            ),
            (
                "b.rs",
                "pub fn g() {}
fn h(_: crate::Gate, _: crate::Thing) {}
",
            ),
        ]);
        let found = circles(&dir.path().join("src/lib.rs")).unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].files, ["a.rs", "b.rs"]);
    }

    #[test]
    fn test_only_code_and_visibility_are_not_imports_and_modules_resolve_by_their_files() {
        let dir = crate_of(&[
            ("lib.rs", "pub(crate) mod store;\nmod config;\n"),
            (
                "store/mod.rs",
                "mod sqlite;\npub(super) struct Store;\nuse self::sqlite::Conn;\n",
            ),
            (
                "store/sqlite.rs",
                "pub struct Conn;\nuse super::super::config::Config;\n",
            ),
            (
                "config.rs",
                "pub struct Config;\n#[cfg(test)]\nmod tests { use crate::store::Store; }\n\
                 #[cfg(test)]\nfn t() { let _ = crate::store::sqlite::Conn; }\n",
            ),
        ]);
        assert!(circles(&dir.path().join("src/lib.rs")).unwrap().is_empty());
        // Without the test attribute, config names the store: a circle of three files.
        std::fs::write(
            dir.path().join("src/config.rs"),
            "pub struct Config;\nuse crate::store::{self as s, sqlite::Conn};\n",
        )
        .unwrap();
        let found = circles(&dir.path().join("src/lib.rs")).unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(
            found[0].files,
            ["config.rs", "store/mod.rs", "store/sqlite.rs"]
        );
    }
}
