#!/usr/bin/env bash
# Two replicas of one zone sharing HUBS hubs: two release roots on one PostgreSQL schema
# (MCP_TEST_DATABASE_URL), half the hubs (mcp-hubsim, the real protocol) dialling each.
# Prints each half's enrolment and registration, what each replica lists (every hub of the
# zone online, whichever replica holds it), routed calls through either replica to a hub
# held by the other (forwarded over PostgreSQL's directory), and each replica's memory.
#   MCP_TEST_DATABASE_URL=postgres://… bash tests/bench/zone.sh [HUBS]
set -euo pipefail
cd "$(dirname "$0")/../.."
hubs=${1:-10000}
half=$((hubs / 2))
db=${MCP_TEST_DATABASE_URL:?set MCP_TEST_DATABASE_URL to a PostgreSQL database}
source tests/bench/fleet-bins.sh
work=$(mktemp -d)
pids=()
schema="replicas_$(date +%s)_$$"
cleanup() {
  kill "${pids[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  psql "$db" -qc "DROP SCHEMA $schema CASCADE" >/dev/null 2>&1 || true
}
trap cleanup EXIT
psql "$db" -qc "CREATE SCHEMA $schema"
case "$db" in *\?*) sep='&' ;; *) sep='?' ;; esac
url="$db${sep}options=-c%20search_path%3D$schema"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
declare -A base rpid
for r in a b; do
  port=$(free_port)
  base[$r]="http://127.0.0.1:$port"
  mkdir -p "$work/$r"
  {
    printf 'listen = "127.0.0.1:%s"\ndata_dir = "%s"\ndatabase_url = "%s"\n' "$port" "$work/$r" "$url"
    # One zone: the second replica shares the first one's admin token and master key.
    printf 'admin_token_file = "%s"\nmaster_key_file = "%s"\n' "$work/a/admin.token" "$work/a/secrets.key"
  } >"$work/$r.toml"
  "$bin/mcp-root" serve --config "$work/$r.toml" >"$work/$r.log" 2>&1 &
  rpid[$r]=$!
  pids+=("${rpid[$r]}")
  for _ in $(seq 300); do curl -fsS "${base[$r]}/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
done
token=$(cat "$work/a/admin.token")
for r in a b; do
  "$bin/mcp-hubsim" --root-url "${base[$r]}" --admin-token "$token" --root-pid "${rpid[$r]}" \
    --prefix "zone-$r" --hubs "$half" --hold-secs 600 >"$work/sim-$r.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 600); do grep -q "routed hub.get_status" "$work/sim-$r.log" && break; sleep 1; done
  grep -q "routed hub.get_status" "$work/sim-$r.log" || { cat "$work/sim-$r.log"; exit 1; }
  echo "replica $r: $(grep -E '^(enrolled|registered)' "$work/sim-$r.log" | tr '\n' ' ')"
done
get() { curl -fsS -H "authorization: Bearer $token" "$1$2"; }
for r in a b; do
  get "${base[$r]}" "/v1/root/hubs?limit=1" |
    python3 -c "import json,sys; v=json.load(sys.stdin); print('replica $r lists', v['total'], 'targets:', v['by_status'])"
done
# A routed call through each replica to a hub the other one holds.
cross() {
  local via=$1 target=$2
  local lease
  lease=$(curl -fsS -H "authorization: Bearer $token" -H 'content-type: application/json' \
    -d "{\"target_id\":\"$target\",\"capability_profile\":\"InfraOpsRead\",\"ttl_sec\":600}" \
    "${base[$via]}/v1/root/mcp/sessions" | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
  curl -fsS -H "authorization: Bearer $lease" -H 'content-type: application/json' \
    -d '{"tool_id":"hub.get_status","arguments":{}}' "${base[$via]}/v1/root/mcp/call" |
    python3 -c "import json,sys; v=json.load(sys.stdin); t=v['result']['target_id']; assert t == '$target', v; print('through replica $via to $target (held by the other): answered by', t)"
}
cross a "zone-b-00000"
cross a "zone-b-$(printf %05d $((half - 1)))"
cross b "zone-a-00000"
cross b "zone-a-$(printf %05d $((half - 1)))"
for r in a b; do
  echo "replica $r RSS: $(awk '/VmRSS/ { printf "%.0f MiB", $2 / 1024 }' "/proc/${rpid[$r]}/status")"
done
