# Sourced by the benchmarks on the embedded store (compare.sh, frontdoor.sh): a release build,
# one root on loopback (embedded SQLite, synchronous=FULL, the audit on) and helpers to enrol
# and start hubs and to issue leases. Everything it starts is stopped on exit, by PID.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# MCP_BENCH_BIN names a directory of prebuilt binaries instead (to alternate two builds in
# one window with the same load generator).
if [ -n "${MCP_BENCH_BIN:-}" ]; then
  bin=$MCP_BENCH_BIN
else
  cargo build --release -p mcp-root -p mcp-hub -p mcp-tests >/dev/null 2>&1
  bin=${CARGO_TARGET_DIR:-./target}/release
fi
work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
port=$(free_port)
base="http://127.0.0.1:$port"
# MCP_BENCH_ROOT_CONFIG: a root config file (TOML) to serve with.
"$bin/mcp-root" serve ${MCP_BENCH_ROOT_CONFIG:+--config "$MCP_BENCH_ROOT_CONFIG"} \
  --listen "127.0.0.1:$port" --data-dir "$work/root" >"$work/root.log" 2>&1 &
root_pid=$!
pids+=("$root_pid")
for _ in $(seq 100); do curl -fsS "$base/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
admin() { "$bin/mcp-root" admin --root-url "$base" --data-dir "$work/root" "$@"; }
json() { python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }
# start_hub TARGET CONFIG: enrols TARGET (environment test) and starts its hub with CONFIG.
start_hub() {
  admin hub enroll --target "$1" --environment test --json | json token >"$work/$1.token"
  chmod 600 "$work/$1.token"   # the hub refuses a token file others may read
  printf '%s' "$2" >"$work/$1.toml"
  "$bin/mcp-hub" run --config "$work/$1.toml" --root-url "$base" --target "$1" --environment test \
    --token-file "$work/$1.token" --state-dir "$work/$1" >"$work/$1.log" 2>&1 &
  pids+=($!)
}
# wait_online N: until N targets are online (ten seconds at most).
wait_online() {
  for _ in $(seq 100); do [ "$(admin hub list --json | grep -o '"online"' | wc -l)" -ge "$1" ] && return; sleep 0.1; done
  echo "fewer than $1 hubs online"; exit 1
}
# leases TARGET PROFILE N: N lease bearers, comma-separated.
leases() {
  local out=
  for _ in $(seq "$3"); do out="$out,$(admin lease create --target "$1" --profile "$2" --ttl 3600 --json | json token)"; done
  echo "${out#,}"
}
