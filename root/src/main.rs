//! `mcp-root` binary: parses the command line and hands over to [`mcp_root::cli`].

/// mimalloc rather than the system allocator: the request path allocates many short-lived
/// buffers (JSON values, SSE frames), where glibc malloc spent ~15% of root's CPU under load
/// (see BENCHMARKS.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    mcp_root::cli::main()
}
