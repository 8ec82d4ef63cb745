//! `mcp-hub` binary: hands over to [`mcp_hub::cli::main`].

/// mimalloc rather than the system allocator, as in root: under routed load glibc malloc
/// (`_int_malloc`, `malloc_consolidate`, frees) took about a fifth of the hub's CPU.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    mcp_hub::cli::main()
}
