//! `mcp-hub` binary: hands over to [`mcp_hub::cli::main`].

fn main() -> std::process::ExitCode {
    mcp_hub::cli::main()
}
