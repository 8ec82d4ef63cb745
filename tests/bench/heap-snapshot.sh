#!/usr/bin/env bash
# A heap snapshot of a service with 100 MB of live heap: how long the service takes to write
# it (jemalloc through jemalloc_pprof, symbolized), how large it is, and how long mcp-hub
# takes to keep and sum up the session's snapshots (`mcp-hub heap summarize`: each read,
# checked and redacted, the first and last diffed: what a ProfileOps session does with them).
# The service is mcp-demo-app in its profiling mode, leaking LEAK KiB/s (default 25600).
#   MCP_BENCH_BIN=DIR bash tests/bench/heap-snapshot.sh [LEAK]
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${MCP_BENCH_BIN:-target/release}
leak=${1:-25600}
work=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
"$bin/mcp-demo-app" serve --port "$port" --release-dir "$work" --mode profiling \
  --heap-dir "$work/heap" --leak-kib-per-sec "$leak" >"$work/app.log" 2>&1 &
app=$!
trap 'kill $app 2>/dev/null || true; rm -rf "$work"' EXIT
rss() { awk '/VmRSS/ {print $2 * 1024}' "/proc/$app/status"; }
# Until the heap has passed 100 MB and two snapshots were written after that.
until [ "$(rss)" -gt 104857600 ]; do sleep 0.2; done
big=$(date +%s.%N)
until [ "$(find "$work/heap" -name 'heap.*.pb.gz' -newermt "@$big" 2>/dev/null | wc -l)" -ge 2 ]; do sleep 0.2; done
echo "service RSS at the last snapshot: $(( $(rss) / 1048576 )) MiB"
kill $app; wait $app 2>/dev/null || true
grep 'heap profile .* written' "$work/app.log" | sed 's/^profiling: /service: /'
start=$(date +%s%N)
"$bin/mcp-hub" heap summarize "$work/heap" >"$work/summary.json"
end=$(date +%s%N)
python3 - "$work/summary.json" "$(( (end - start) / 1000000 ))" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
print(f"mcp-hub heap summarize: {sys.argv[2]} ms for every snapshot (kept, checked, redacted) and the diff")
print(f"live heap at the last snapshot: {s['heap_bytes'] / 1048576:.1f} MiB, growth {s['growth_bytes'] / 1048576:.1f} MiB")
print(f"top site: {s['top_sites'][0]['function']} (+{s['top_sites'][0]['growth_bytes'] / 1048576:.1f} MiB)")
PY
