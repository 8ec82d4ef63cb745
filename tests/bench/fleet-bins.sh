# Sourced by the fleet benchmarks (fleet.sh, storm.sh, zone.sh): the release binaries
# (MCP_BENCH_BIN names a directory of prebuilt ones, to alternate two builds in one window)
# and an open-file limit above a zone's hubs (this machine allows 20,000 per process).
if [ -n "${MCP_BENCH_BIN:-}" ]; then
  bin=$MCP_BENCH_BIN
else
  cargo build --release -p mcp-root -p mcp-tests >/dev/null 2>&1
  bin=${CARGO_TARGET_DIR:-./target}/release
fi
ulimit -n "$(ulimit -Hn)"
