#!/usr/bin/env bash
# The front door against a bare rmcp server, in one window: routed `hub.get_status` through a
# release root (embedded SQLite, synchronous=FULL, the audit on) and a hub with
# adapter_concurrency 32, against `echo` on `mcp-echo` (rmcp's own transport and sessions,
# nothing else); and the descriptive `sdk.get_metadata` (answered from root's cache, about
# 13 KB) against root's own `ping`. All on 2025-11-25 sessions (the rmcp client, as Claude
# Code uses them), four clients at once, each with a lease of its own. Rounds alternate;
# prints each line and the two ratios of the medians (issue 38 asks both to be at least
# 0.35).
#   bash tests/bench/frontdoor.sh [COUNT] [ROUNDS]
count=${1:-20000}
rounds=${2:-3}
source "$(dirname "$0")/setup.sh"
echo_port=$(free_port)
"$bin/mcp-echo" --listen "127.0.0.1:$echo_port" >"$work/echo.log" 2>&1 &
pids+=($!)
start_hub hub:bench "$(printf '[skill]\nadapter_concurrency = 32\n')"
wait_online 1
leases=$(leases hub:bench InfraOpsRead 4)
dev=$(leases hub:bench AdaOSDevRead 4)
rate() { sed -n 's/.* calls\/s=\([0-9]*\) .*/\1/p' <<<"$1"; }
root_rates=()
echo_rates=()
ping_rates=()
meta_rates=()
run() {
  local name=$1
  shift
  line=$("$bin/mcp-load" "$@" --lifecycle session --count "$count" --concurrency 4)
  echo "round $r $name: $line"
}
for r in $(seq "$rounds"); do
  run echo --url "http://127.0.0.1:$echo_port/mcp" --token none,none,none,none --tool echo
  echo_rates+=("$(rate "$line")")
  run hub.get_status --url "$base/mcp" --token "$leases" --tool hub.get_status
  root_rates+=("$(rate "$line")")
  run ping --url "$base/mcp" --token "$dev" --tool ping
  ping_rates+=("$(rate "$line")")
  run sdk.get_metadata --url "$base/mcp" --token "$dev" --tool sdk.get_metadata
  meta_rates+=("$(rate "$line")")
done
median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
e=$(median "${echo_rates[@]}")
g=$(median "${root_rates[@]}")
p=$(median "${ping_rates[@]}")
m=$(median "${meta_rates[@]}")
python3 -c "print(f'median calls/s: echo $e, root hub.get_status $g, ratio {$g / $e:.3f}; ping $p, sdk.get_metadata $m, ratio {$m / $p:.3f} (of echo {$m / $e:.3f})')"
