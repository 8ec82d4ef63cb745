//! What acts on the machine: the managed services and their supervisor, and the deploy
//! worktree's history, refs and git.

pub mod deploys;
pub mod git;
pub mod refs;
pub mod services;
