#!/usr/bin/env bash
# One benchmark run: the ungoverned baseline vs a governed descriptive call vs a read routed
# to a hub vs a routed write preview, at concurrency 1 and 16, against a release root and
# hubs on loopback, for two client lifecycles. Prints mcp-load lines with root's CPU per call.
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
trap 'kill $root_pid $hub_pid 2>/dev/null || true' EXIT  # hub_pid: a list
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
# Eight more targets for writes at concurrency 16 (two write calls in flight per target).
for i in 1 2 3 4 5 6 7 8; do
  admin hub enroll --target "hub:w$i" --environment test --json | json token >"$work/w$i.token"
  chmod 600 "$work/w$i.token"
  "$bin/mcp-hub" run --config "$work/hub.toml" --root-url "$base" --target "hub:w$i" --environment test \
    --token-file "$work/w$i.token" --state-dir "$work/w$i" >"$work/w$i.log" 2>&1 &
  hub_pid="$hub_pid $!"
done
for _ in $(seq 100); do [ "$(admin hub list --json | grep -o '"online"' | wc -l)" -ge 9 ] && break; sleep 0.1; done
leases() { local out=; for _ in 1 2 3 4; do out="$out,$(admin lease create --target hub:bench --profile "$1" --ttl 3600 --json | json token)"; done; echo "${out#,}"; }
ops=$(leases InfraOpsRead)
control=$(leases InfraOpsControl)
dev=$(leases AdaOSDevRead)
writers=
for i in 1 2 3 4 5 6 7 8; do
  for _ in 1 2; do
    writers="$writers,$(admin lease create --target "hub:w$i" --profile InfraOpsControl --ttl 3600 --json | json token)"
  done
done
writers=${writers#,}
# Root's CPU time (user + system) in microseconds, from /proc/<pid>/stat (fields 14 and 15).
cpu_us() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%d", ($14 + $15) * 1000000 / hz }' "/proc/$root_pid/stat"; }
# load ARGS...: one mcp-load run, its line followed by root's CPU per call during it.
load() {
  local before after line calls
  before=$(cpu_us)
  line=$("$bin/mcp-load" --url "$base/mcp" "$@")
  after=$(cpu_us)
  calls=$(sed -n 's/.* calls=\([0-9]*\) .*/\1/p' <<<"$line")
  echo "$line root_cpu_per_call=$(( (after - before) / (calls > 0 ? calls : 1) ))us"
}
# Two client lifecycles. `wire`: protocol 2026-07-28, stateless, one keep-alive connection
# per worker, JSON answers; its ungoverned baseline is `server/discover`. `session`: the rmcp
# client on 2025-11-25 (initialize, Mcp-Session-Id, SSE answers); its baseline is `ping`.
for lifecycle in wire session; do
  base_tool=ping; [ $lifecycle = wire ] && base_tool=discover
  for c in 1 16; do
    load --lifecycle $lifecycle --token "$dev" --tool $base_tool --count "$count" --concurrency $c
    load --lifecycle $lifecycle --token "$dev" --tool sdk.list_schemas --count "$count" --concurrency $c
    load --lifecycle $lifecycle --token "$ops" --tool hub.get_status --count "$count" --concurrency $c
  done
  # A routed write preview (dry run on the hub plus a stored confirmation token). A write
  # contract allows one call in flight per lease and two per target: concurrency 1 on one
  # target, and 16 over eight targets with two leases each.
  load --lifecycle $lifecycle --token "$control" --tool hub.run_allowed_tests \
    --arguments '{"name":"smoke"}' --count "$count" --concurrency 1
  load --lifecycle $lifecycle --token "$writers" --tool hub.run_allowed_tests \
    --arguments '{"name":"smoke"}' --count "$count" --concurrency 16
done
# Root's memory per connected hub, in the same run: 500 simulated hubs (the real protocol, one
# loopback WebSocket each) join the nine real ones; VmRSS of root before and after.
"$bin/mcp-hubsim" --root-url "$base" --admin-token "$(cat "$work/root/admin.token")" \
  --root-pid "$root_pid" --hubs 500
