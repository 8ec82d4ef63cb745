#!/usr/bin/env bash
# One benchmark run on PostgreSQL: a routed read through the replica that holds the hub vs the
# same read forwarded between two replicas (client on A, hub connected to B), at concurrency 1
# and 16, each measured twice, interleaved. Prints mcp-load lines.
#   MCP_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test bash tests/bench/replicas.sh [COUNT]
set -euo pipefail
cd "$(dirname "$0")/../.."
count=${1:-3000}
db=${MCP_TEST_DATABASE_URL:?set MCP_TEST_DATABASE_URL to a PostgreSQL database}
cargo build --release -p mcp-root -p mcp-hub -p mcp-tests >/dev/null 2>&1
bin=${CARGO_TARGET_DIR:-./target}/release
work=$(mktemp -d)
schema="bench_$(date +%s)_$$"
psql "$db" -qc "CREATE SCHEMA $schema"
case "$db" in *\?*) sep='&' ;; *) sep='?' ;; esac
url="$db${sep}options=-c%20search_path%3D$schema"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
mkdir -p "$work/shared"
pids=()
cleanup() {
  kill "${pids[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  psql "$db" -qc "DROP SCHEMA $schema CASCADE" >/dev/null 2>&1 || true
}
trap cleanup EXIT
# start ID PORT: one replica of zone `bench`, sharing the admin token and master key.
start() {
  printf 'listen = "127.0.0.1:%s"\ndata_dir = "%s"\ndatabase_url = "%s"\nzone = "bench"\nadmin_token_file = "%s"\nmaster_key_file = "%s"\n[replica]\nid = "%s"\n' \
    "$2" "$work/$1" "$url" "$work/shared/admin.token" "$work/shared/secrets.key" "$1" >"$work/$1.toml"
  "$bin/mcp-root" serve --config "$work/$1.toml" >"$work/$1.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do curl -fsS "http://127.0.0.1:$2/readyz" >/dev/null 2>&1 && return; sleep 0.1; done
  echo "replica $1 did not start"; cat "$work/$1.log"; exit 1
}
pa=$(free_port)
start r-a "$pa"
pb=$(free_port)
start r-b "$pb"
a="http://127.0.0.1:$pa"
b="http://127.0.0.1:$pb"
admin() { local root=$1; shift; "$bin/mcp-root" admin --root-url "$root" --admin-token "$(cat "$work/shared/admin.token")" "$@"; }
json() { python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }
admin "$a" hub enroll --target hub:bench --environment test --json | json token >"$work/hub.token"
chmod 600 "$work/hub.token"
# Adapter concurrency above the load's, so the hub's own `busy` limit is not what is measured.
printf '[skill]\nadapter_concurrency = 32\n' >"$work/hub.toml"
"$bin/mcp-hub" run --config "$work/hub.toml" --root-url "$b" --target hub:bench --environment test \
  --token-file "$work/hub.token" --state-dir "$work/hub" >"$work/hub.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do admin "$a" hub list --json | grep -q '"online"' && break; sleep 0.1; done
admin "$a" replicas list
tokens=
for _ in 1 2 3 4; do tokens="$tokens,$(admin "$a" lease create --target hub:bench --profile InfraOpsRead --ttl 3600 --json | json token)"; done
tokens=${tokens#,}
for c in 1 16; do
  for _ in 1 2; do
    echo "# through r-b (holds the hub)"
    "$bin/mcp-load" --url "$b/mcp" --token "$tokens" --tool hub.get_status --count "$count" --concurrency $c
    echo "# through r-a (forwarded to r-b)"
    "$bin/mcp-load" --url "$a/mcp" --token "$tokens" --tool hub.get_status --count "$count" --concurrency $c
  done
done
