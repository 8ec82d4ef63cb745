//! Git repositories for deploy tests: a local repository the hub's `[deploy]` fetches from.

use std::path::{Path, PathBuf};

/// Runs git with a test identity; panics with its output on failure.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .current_dir(dir)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// `<dir>/src` with `app.txt` = one, two, three in three commits on `main`; `v1`, `v2` tag
/// the first two. Returns the repository and the three commits.
pub fn repository(dir: &Path) -> (PathBuf, Vec<String>) {
    let src = dir.join("src");
    std::fs::create_dir_all(&src).expect("a repository directory");
    git(&src, &["init", "-q", "-b", "main"]);
    let mut shas = Vec::new();
    for (i, word) in ["one", "two", "three"].iter().enumerate() {
        std::fs::write(src.join("app.txt"), format!("{word}\n")).expect("app.txt");
        git(&src, &["add", "app.txt"]);
        git(&src, &["commit", "-q", "-m", &format!("commit {word}")]);
        shas.push(git(&src, &["rev-parse", "HEAD"]));
        if i < 2 {
            git(&src, &["tag", &format!("v{}", i + 1)]);
        }
    }
    (src, shas)
}
