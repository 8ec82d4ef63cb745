#!/usr/bin/env bash
# Fleet runs at fleet size: a release root (embedded SQLite, synchronous=FULL) and HUBS
# simulated hubs serving a test read and a test write (mcp-hubsim --mode fleet: 3% failing,
# 2 answering after 3 s, 5 more enrolled that never connect), then:
#  1. a read on all of them, canary 1, window 50, max_errors 2%: the errors when it stopped
#     against the budget plus the calls in flight when the budget was spent; every target
#     accounted for;
#  2. the same read with a budget it cannot spend: its duration against its slowest target's;
#  3. a write (preview, one confirmation, window 2) with root SIGKILLed KILLS times while it runs: the
#     run completes and each target taking part ran the write exactly once (counted by the
#     simulator, which keeps its ledger across root's deaths).
#   bash tests/bench/fleet-runs.sh [HUBS] [KILLS]
set -euo pipefail
cd "$(dirname "$0")/../.."
hubs=${1:-500}
kills=${2:-5}
source tests/bench/fleet-bins.sh
work=$(mktemp -d)
pids=()
cleanup() {
  kill "${pids[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
}
trap cleanup EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
base="http://127.0.0.1:$port"
start_root() {
  "$bin/mcp-root" serve --listen "127.0.0.1:$port" --data-dir "$work/root" >>"$work/root.log" 2>&1 &
  root_pid=$!
  pids+=("$root_pid")
  for _ in $(seq 400); do curl -fsS "$base/healthz" >/dev/null 2>&1 && return; sleep 0.05; done
  echo "root did not start"; tail -20 "$work/root.log"; exit 1
}
admin() { "$bin/mcp-root" admin --root-url "$base" --data-dir "$work/root" "$@"; }
start_root
"$bin/mcp-hubsim" --mode fleet --root-url "$base" --admin-token "$(cat "$work/root/admin.token")" \
  --hubs "$hubs" --offline 5 --failing 3 --slow 2 --slow-ms 3000 --prefix fl \
  --executions-file "$work/executions.json" >"$work/hubsim.log" 2>&1 &
sim_pid=$!
pids+=("$sim_pid")
until grep -qs "^ready" "$work/hubsim.log"; do
  kill -0 "$sim_pid" 2>/dev/null || { cat "$work/hubsim.log"; exit 1; }
  sleep 0.2
done
grep '^ready' "$work/hubsim.log" | cut -c1-160

# What a run's report says, by python: see each step.
report() { python3 - "$@" <<'EOF'
import json, sys
from datetime import datetime
r = json.load(open(sys.argv[2]))
t = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp() if s else None
targets = r["targets"]
accounted = sum(r["counts"].values())
line = f'{r["summary"]}; accounted {accounted}/{r["total"]}'
if sys.argv[1] == "budget":
    errs = sorted((t(x["finished_at"]), x["target_id"]) for x in targets
                  if x["status"] in ("failed", "undeliverable", "refused"))
    budget = r["error_budget"]
    if len(errs) > budget:
        spent = errs[budget][0]
        inflight = sum(1 for x in targets if x["started_at"] and t(x["started_at"]) <= spent
                       and (x["finished_at"] is None or t(x["finished_at"]) > spent))
        ok = len(errs) <= budget + 1 + inflight
        line += (f'; errors {len(errs)}, budget {budget}, in flight when it was spent {inflight}:'
                 f' {"within" if ok else "OVER"} budget+1+in flight')
elif sys.argv[1] == "duration":
    took = t(r["finished_at"]) - t(r["created_at"])
    slowest = max(t(x["finished_at"]) - t(x["started_at"]) for x in targets if x["started_at"])
    line += f'; run {took:.2f} s, slowest target {slowest:.2f} s, difference {took - slowest:.2f} s'
print(line)
EOF
}
status() { admin fleet status "$1" --json >"$work/status.json"; python3 -c "import json;r=json.load(open('$work/status.json'));print(r['state'], r['total']-r['counts']['pending']-r['counts']['running'])"; }

echo "== 1. read, canary 1, window 50, max_errors 2%"
admin fleet run --selector 'id=fl-*' --tool hub.get_status --canary 1 --max-concurrency 50 \
  --max-errors 2% --wait --json >"$work/r1.json" 2>"$work/r1.err" || tail -c 300 "$work/r1.err"
report budget "$work/r1.json"

echo "== 2. read, canary 1, window 50, no budget to spend"
admin fleet run --selector 'id=fl-*' --tool hub.get_status --canary 1 --max-concurrency 50 \
  --max-errors 100% --wait --json >"$work/r2.json" 2>"$work/r2.err" || tail -c 300 "$work/r2.err"
report duration "$work/r2.json"

echo "== 3. write, window 2, root SIGKILLed $kills times while it runs"
args=(--selector 'id=fl-*' --tool hub.run_allowed_tests --arguments '{"name":"smoke"}'
  --canary 1 --max-concurrency 2 --max-errors 100%)
admin fleet preview "${args[@]}" --json >"$work/p.json"
token=$(python3 -c "import json;print(json.load(open('$work/p.json'))['confirmation_token'])")
python3 -c "import json;r=json.load(open('$work/p.json'));print('preview:', r['report']['summary'])"
run=$(admin fleet run "${args[@]}" --confirm "$token" --json | python3 -c 'import json,sys;print(json.load(sys.stdin)["run_id"])')
for k in $(seq "$kills"); do
  # Kill it once the run has made progress since root (re)started.
  read -r _ before < <(status "$run")
  for _ in $(seq 600); do
    read -r state done < <(status "$run")
    [ "$state" != running ] || [ "$done" -gt "$before" ] && break
    sleep 0.1
  done
  [ "$state" = running ] || { echo "the run ended before kill $k ($state)"; break; }
  sleep 0.0$((RANDOM % 5 + 1))
  kill -9 "$root_pid"; wait "$root_pid" 2>/dev/null || true
  echo "kill $k: SIGKILL with at least $done targets done"
  start_root
done
for _ in $(seq 1200); do
  read -r state _ < <(status "$run")
  [ "$state" = running ] || [ "$state" = paused ] || break
  sleep 0.1
done
admin fleet status "$run" --json >"$work/r3.json"
report plain "$work/r3.json"
kill -TERM "$sim_pid"; wait "$sim_pid" 2>/dev/null || true
grep '^executions' "$work/hubsim.log"
python3 - "$work/r3.json" "$work/executions.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1])); runs = json.load(open(sys.argv[2]))
bad = [(x["target_id"], x["status"], runs.get(x["target_id"], 0)) for x in r["targets"]
       if (x["status"] == "succeeded") != (runs.get(x["target_id"], 0) == 1)
       or runs.get(x["target_id"], 0) > 1]
took = [x for x in r["targets"] if x["status"] != "excluded"]
print(f'write: {len(took)} targets took part, {sum(1 for x in took if runs.get(x["target_id"], 0) == 1)} ran exactly once;'
      f' {len(bad)} disagree with the report: {bad[:10]}')
EOF
