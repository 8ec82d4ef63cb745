"""The demo's leak found end to end, as an agent would: the Python SDK (`mcp` 2.3, protocol
2026-07-28) with the demo's ProfileOps bearer starts a profiling session on `demo-app` in
profiling mode (execute with an idempotency key; root asks its multi-round-trip question,
which the callback confirms), reads `hub.memory.get_session` until the heap summary (two
snapshots compared) names the leaking function first, stops the session, reads its final summary and the incidents,
and fetches the last heap snapshot the session kept, chunk by chunk, checking its SHA-256.

    python tests/clients/leak.py MCP_URL BEARER FUNCTION

Prints one JSON line: the seconds from the start until a summary named FUNCTION first, the
final session, the incidents, and the snapshot artifact's record and check.
"""

import base64
import hashlib
import json
import sys
import time

import anyio
import httpx2
import mcp.types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

SERVICE = "demo-app"
WITHIN_SEC = 90


async def main(url: str, bearer: str, function: str) -> None:
    async def confirm(context, params: types.ElicitRequestParams):
        return types.ElicitResult(action="accept", content={"confirm": True})

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {bearer}"}, timeout=90)
    transport = streamable_http_client(url, http_client=http)
    async with Client(transport, mode="2026-07-28", elicitation_callback=confirm) as client:

        async def call(tool: str, arguments: dict) -> dict:
            result = await client.call_tool(tool, arguments)
            if result.is_error:
                raise RuntimeError(f"{tool}: {result.structured_content}")
            return result.structured_content

        started = await call(
            "hub.memory.start_profile",
            {
                "service": SERVICE,
                "mode": "profiling",
                "interval_ms": 500,
                "duration_sec": 600,
                "phase": "execute",
                "idempotency_key": "leak-start",
            },
        )
        session_id = started["result"]["session"]["session_id"]
        t0 = time.monotonic()
        found_after = None
        seen = None
        while time.monotonic() - t0 < WITHIN_SEC:
            seen = (await call("hub.memory.get_session", {"session_id": session_id}))["session"]
            heap = seen.get("heap") or {}
            sites = heap.get("top_sites") or []
            # Two snapshots compared (one alone is growth from nothing).
            if heap.get("from_snapshot") and sites and function in sites[0]["function"]:
                found_after = time.monotonic() - t0
                break
            await anyio.sleep(1)
        await call(
            "hub.memory.stop_profile",
            {"session_id": session_id, "phase": "execute", "idempotency_key": "leak-stop"},
        )
        session = (await call("hub.memory.get_session", {"session_id": session_id}))["session"]
        incidents = (await call("hub.memory.list_incidents", {"service": SERVICE}))["incidents"]
        snapshot = None
        heap = session.get("heap") or {}
        if heap.get("to_artifact_id"):
            artifact_id = heap["to_artifact_id"]
            contract = await call("hub.memory.get_artifact", {"artifact_id": artifact_id})
            data = b""
            while len(data) < contract["size_bytes"]:
                chunk = await call(
                    "hub.memory.get_artifact", {"artifact_id": artifact_id, "offset": len(data)}
                )
                data += base64.b64decode(chunk["data_base64"])
            listed = (await call("hub.memory.list_artifacts", {"service": SERVICE}))["artifacts"]
            snapshot = {
                "delivery": contract["delivery"],
                "sha256_matches": hashlib.sha256(data).hexdigest() == contract["sha256"],
                "gzip": data[:2] == b"\x1f\x8b",
                "record": next((a for a in listed if a["artifact_id"] == artifact_id), None),
            }
    print(
        json.dumps(
            {
                "found_after_sec": found_after,
                "last_seen": seen,
                "session": session,
                "incidents": incidents,
                "snapshot": snapshot,
            }
        )
    )


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:4])
