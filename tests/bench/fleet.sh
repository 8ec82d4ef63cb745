#!/usr/bin/env bash
# A zone's worth of hubs on one root: a release root (embedded SQLite, or PostgreSQL with
# MCP_TEST_DATABASE_URL and --pg), HUBS simulated hubs (mcp-hubsim: the real protocol, one
# loopback WebSocket each), then root's enrolment rate, registration time, resident memory
# per connected hub, and CPU while every hub heartbeats (HOLD seconds, nothing else running
# but the simulator), and routed calls to the first and the last target. Root gets an
# open-file limit above the hubs (this machine allows 20,000 per process).
#   bash tests/bench/fleet.sh [HUBS] [HOLD] [--pg]
set -euo pipefail
cd "$(dirname "$0")/../.."
hubs=${1:-15000}
hold=${2:-30}
pg=${3:-}
source tests/bench/fleet-bins.sh
work=$(mktemp -d)
pids=()
schema=
cleanup() {
  kill "${pids[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  if [ -n "$schema" ]; then psql "$MCP_TEST_DATABASE_URL" -qc "DROP SCHEMA $schema CASCADE" >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
base="http://127.0.0.1:$port"
config="$work/root.toml"
printf 'listen = "127.0.0.1:%s"\ndata_dir = "%s"\n' "$port" "$work/root" >"$config"
if [ "$pg" = --pg ]; then
  db=${MCP_TEST_DATABASE_URL:?set MCP_TEST_DATABASE_URL to a PostgreSQL database}
  schema="fleet_$(date +%s)_$$"
  psql "$db" -qc "CREATE SCHEMA $schema"
  case "$db" in *\?*) sep='&' ;; *) sep='?' ;; esac
  printf 'database_url = "%s"\n' "$db${sep}options=-c%20search_path%3D$schema" >>"$config"
fi
"$bin/mcp-root" serve --config "$config" >"$work/root.log" 2>&1 &
root_pid=$!
pids+=("$root_pid")
for _ in $(seq 200); do curl -fsS "$base/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
# Root's CPU time (user + system) in milliseconds.
cpu_ms() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%d", ($14 + $15) * 1000 / hz }' "/proc/$root_pid/stat"; }
"$bin/mcp-hubsim" --root-url "$base" --admin-token "$(cat "$work/root/admin.token")" \
  --root-pid "$root_pid" --hubs "$hubs" --hold-secs $((hold + 10)) >"$work/sim.log" 2>&1 &
sim=$!
pids+=("$sim")
# Idle CPU: from ten seconds after the routed calls (the simulator's last check) for HOLD s.
for _ in $(seq 600); do grep -q "routed hub.get_status" "$work/sim.log" && break; sleep 1; done
sleep 5
before=$(cpu_ms)
sleep "$hold"
after=$(cpu_ms)
wait "$sim" || { cat "$work/sim.log"; exit 1; }
cat "$work/sim.log"
python3 -c "print(f'root CPU with $hubs hubs heartbeating: {($after - $before) / ($hold * 10):.1f}% of a core over ${hold} s')"
