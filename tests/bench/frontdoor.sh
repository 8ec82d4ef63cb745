#!/usr/bin/env bash
# The front door against a bare rmcp server, in one window: routed `hub.get_status` through a
# release root (embedded SQLite, synchronous=FULL, the audit on) and a hub with
# adapter_concurrency 32, against `echo` on `mcp-echo` (rmcp's own transport and sessions,
# nothing else). Both on 2025-11-25 sessions (the rmcp client, as Claude Code uses them), four
# clients at once, each with a lease of its own. Rounds alternate; prints each line and the
# ratio of the medians.
#   bash tests/bench/frontdoor.sh [COUNT] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
count=${1:-20000}
rounds=${2:-3}
cargo build --release -p mcp-root -p mcp-hub -p mcp-tests >/dev/null 2>&1
bin=${CARGO_TARGET_DIR:-./target}/release
work=$(mktemp -d)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
port=$(free_port)
echo_port=$(free_port)
base="http://127.0.0.1:$port"
"$bin/mcp-root" serve --listen "127.0.0.1:$port" --data-dir "$work/root" >"$work/root.log" 2>&1 &
root_pid=$!
"$bin/mcp-echo" --listen "127.0.0.1:$echo_port" >"$work/echo.log" 2>&1 &
echo_pid=$!
hub_pid=
trap 'kill $root_pid $echo_pid $hub_pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -fsS "$base/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
admin() { "$bin/mcp-root" admin --root-url "$base" --data-dir "$work/root" "$@"; }
json() { python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }
admin hub enroll --target hub:bench --environment test --json | json token >"$work/hub.token"
chmod 600 "$work/hub.token"
printf '[skill]\nadapter_concurrency = 32\n' >"$work/hub.toml"
"$bin/mcp-hub" run --config "$work/hub.toml" --root-url "$base" --target hub:bench --environment test \
  --token-file "$work/hub.token" --state-dir "$work/hub" >"$work/hub.log" 2>&1 &
hub_pid=$!
for _ in $(seq 100); do admin hub list --json | grep -q '"online"' && break; sleep 0.1; done
leases=
for _ in 1 2 3 4; do
  leases="$leases,$(admin lease create --target hub:bench --profile InfraOpsRead --ttl 3600 --json | json token)"
done
leases=${leases#,}
rate() { sed -n 's/.* calls\/s=\([0-9]*\) .*/\1/p' <<<"$1"; }
root_rates=()
echo_rates=()
for r in $(seq "$rounds"); do
  line=$("$bin/mcp-load" --url "http://127.0.0.1:$echo_port/mcp" --token none,none,none,none \
    --tool echo --lifecycle session --count "$count" --concurrency 4)
  echo "round $r echo: $line"
  echo_rates+=("$(rate "$line")")
  line=$("$bin/mcp-load" --url "$base/mcp" --token "$leases" --tool hub.get_status \
    --lifecycle session --count "$count" --concurrency 4)
  echo "round $r root: $line"
  root_rates+=("$(rate "$line")")
done
median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
e=$(median "${echo_rates[@]}")
g=$(median "${root_rates[@]}")
python3 -c "print(f'median calls/s: echo $e, root hub.get_status $g, ratio {$g / $e:.3f}')"
