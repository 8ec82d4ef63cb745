#!/usr/bin/env bash
# Offline verification of an audit export: N synthetic events (1,000,000 by default),
# chained and checkpointed by tests/bench/audit-export.py with its own key, verified by a
# release `mcp-root audit verify-export` (no database, no root); then the same export with
# one byte changed in its middle event, which must be named.
#   bash tests/bench/audit-export.sh [N]
set -euo pipefail
cd "$(dirname "$0")/../.."
n=${1:-1000000}
source tests/bench/fleet-bins.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
key=$(python3 tests/bench/audit-export.py "$n" "$work")
echo "== $n events, $(du -h "$work/trail.jsonl" | cut -f1) of export"
/usr/bin/time -f "   %e s wall, %M KB max RSS" \
  "$bin/mcp-root" audit verify-export "$work/trail.jsonl" --checkpoint "$work/checkpoint.txt" --key "$key"
mid=$((n / 2))
sed -i "${mid}s/\"healthy\"/\"hEalthy\"/" "$work/trail.jsonl"
if "$bin/mcp-root" audit verify-export "$work/trail.jsonl" --checkpoint "$work/checkpoint.txt" --key "$key"; then
  echo "a changed byte was NOT found"; exit 1
fi
