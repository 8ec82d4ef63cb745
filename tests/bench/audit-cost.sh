#!/usr/bin/env bash
# What shipping the trail costs: compare.sh against a root that signs checkpoints (the default,
# every 1000 events or 60 s) and ships every event to an HTTP sink in OCSF, whose receiver
# (a Python HTTP server on loopback) answers 200. Run it and compare.sh without a sink, one
# after the other, with the same binaries (MCP_BENCH_BIN), for one window.
#   MCP_BENCH_BIN=DIR bash tests/bench/audit-cost.sh [COUNT]
set -euo pipefail
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
python3 - "$port" <<'PY' &
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class Sink(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200); self.send_header("content-length", "0"); self.end_headers()
    def log_message(self, *a): pass
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Sink).serve_forever()
PY
receiver=$!
trap 'kill $receiver 2>/dev/null || true; rm -rf "$work"' EXIT
printf '[[audit.sinks]]\nname = "siem"\nkind = "http"\nendpoint = "http://127.0.0.1:%s/ingest"\nformat = "ocsf"\n' "$port" >"$work/root.toml"
MCP_BENCH_ROOT_CONFIG="$work/root.toml" bash tests/bench/compare.sh "${1:-5000}"
