#!/usr/bin/env bash
# One benchmark run: the ungoverned baseline vs a governed descriptive call vs a read routed
# to a hub vs a routed write preview (and, on sessions, its execute), at concurrency 1 and 16,
# against a release root and hubs on loopback, for two client lifecycles. Prints mcp-load lines with root's CPU per call.
#   bash tests/bench/compare.sh [COUNT]
count=${1:-5000}
source "$(dirname "$0")/setup.sh"
# Adapter concurrency above the load's, so the hub's own `busy` limit is not what is measured.
hub_toml=$(printf 'write_scope = "test-only"\n[skill]\nadapter_concurrency = 32\n[[skill.allowed_tests]]\nname = "smoke"\nargv = ["true"]\n')
start_hub hub:bench "$hub_toml"
# Eight more targets for writes at concurrency 16 (two write calls in flight per target).
for i in 1 2 3 4 5 6 7 8; do start_hub "hub:w$i" "$hub_toml"; done
wait_online 9
ops=$(leases hub:bench InfraOpsRead 4)
control=$(leases hub:bench InfraOpsControl 4)
dev=$(leases hub:bench AdaOSDevRead 4)
writers=
for i in 1 2 3 4 5 6 7 8; do writers="$writers,$(leases "hub:w$i" InfraOpsControl 2)"; done
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
# A write's execute (its flushed event; each after an untimed preview, a new key each, so the
# hub runs every one): calls/s counts preview and execute pairs, p50/p99 the execute alone.
for c in 1 16; do
  tokens=$control; [ $c = 16 ] && tokens=$writers
  load --lifecycle session --token "$tokens" --tool hub.run_allowed_tests \
    --arguments '{"name":"smoke"}' --count $((count / 5)) --concurrency $c --execute
done
# Root's memory per connected hub, in the same run: 500 simulated hubs (the real protocol, one
# loopback WebSocket each) join the nine real ones; VmRSS of root before and after.
"$bin/mcp-hubsim" --root-url "$base" --admin-token "$(cat "$work/root/admin.token")" \
  --root-pid "$root_pid" --hubs 500
