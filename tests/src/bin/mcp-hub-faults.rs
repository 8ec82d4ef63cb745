//! `mcp-hub` with the test suite's fault fixture embedded (`mcp_tests::faults`): for fault
//! tests that need a hub process whose adapter panics or hangs on request. Never shipped.

fn main() -> std::process::ExitCode {
    mcp_hub::cli::main_with(&[&mcp_tests::faults::FAULT])
}
