//! What acts on the machine: the managed services and their supervisor, and the deploy
//! worktree's history, refs and git, and the process groups programs run in.

pub(crate) mod deploys;
pub(crate) mod git;
pub(crate) mod group;
pub(crate) mod refs;
pub(crate) mod services;
