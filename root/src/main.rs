//! `mcp-root` binary: parses the command line and hands over to [`mcp_root::cli`].

fn main() -> std::process::ExitCode {
    mcp_root::cli::main()
}
