#!/usr/bin/env bash
# One benchmark run: ping vs a governed descriptive call vs a call routed to a hub, at
# concurrency 1 and 16, against a release root and hub on loopback. Prints mcp-load lines.
#   bash tests/bench/compare.sh [COUNT]
set -euo pipefail
cd "$(dirname "$0")/../.."
count=${1:-5000}
cargo build --release -p mcp-root -p mcp-hub -p mcp-tests >/dev/null 2>&1
bin=${CARGO_TARGET_DIR:-./target}/release
work=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
base="http://127.0.0.1:$port"
"$bin/mcp-root" serve --listen "127.0.0.1:$port" --data-dir "$work/root" >"$work/root.log" 2>&1 &
root_pid=$!
hub_pid=
trap 'kill $root_pid $hub_pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -fsS "$base/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
admin() { "$bin/mcp-root" admin --root-url "$base" --data-dir "$work/root" "$@"; }
json() { python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }
admin hub enroll --target hub:bench --environment test --json | json token >"$work/hub.token"
chmod 600 "$work/hub.token"   # the hub refuses a token file others may read
# Adapter concurrency above the load's, so the hub's own `busy` limit is not what is measured.
printf 'write_scope = "test-only"\n[skill]\nadapter_concurrency = 32\n[[skill.allowed_tests]]\nname = "smoke"\nargv = ["true"]\n' >"$work/hub.toml"
"$bin/mcp-hub" run --config "$work/hub.toml" --root-url "$base" --target hub:bench --environment test \
  --token-file "$work/hub.token" --state-dir "$work/hub" >"$work/hub.log" 2>&1 &
hub_pid=$!
for _ in $(seq 100); do admin hub list --json | grep -q '"online"' && break; sleep 0.1; done
leases() { local out=; for _ in 1 2 3 4; do out="$out,$(admin lease create --target hub:bench --profile "$1" --ttl 3600 --json | json token)"; done; echo "${out#,}"; }
ops=$(leases InfraOpsRead)
control=$(leases InfraOpsControl)
dev=$(leases AdaOSDevRead)
for c in 1 16; do
  "$bin/mcp-load" --url "$base/mcp" --token "$dev" --tool ping --count "$count" --concurrency $c
  "$bin/mcp-load" --url "$base/mcp" --token "$dev" --tool sdk.list_schemas --count "$count" --concurrency $c
  "$bin/mcp-load" --url "$base/mcp" --token "$ops" --tool hub.get_status --count "$count" --concurrency $c
done
# A routed write preview (dry run on the hub plus a stored confirmation token). Writes are
# limited to one in flight per lease and two per target by their contract, so: concurrency 1.
"$bin/mcp-load" --url "$base/mcp" --token "$control" --tool hub.run_allowed_tests \
  --arguments '{"name":"smoke"}' --count "$count" --concurrency 1
