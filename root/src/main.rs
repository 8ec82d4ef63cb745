//! `mcp-root` binary: parses the command line and hands over to [`mcp_root::cli`], with the
//! demo (`demo/`) when built with the `demo` feature (the default).

#[cfg(feature = "demo")]
mod demo;

/// mimalloc rather than the system allocator: the request path allocates many short-lived
/// buffers (JSON values, SSE frames), where glibc malloc spent ~15% of root's CPU under load
/// (see BENCHMARKS.md). The `mimalloc` feature (a default) keeps it; heap profiling builds
/// without it.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    #[cfg(feature = "demo")]
    let demo: Option<mcp_root::cli::Demo> = Some(demo::run);
    #[cfg(not(feature = "demo"))]
    let demo = None;
    mcp_root::cli::main_with(demo)
}
