"""An MCP client from another implementation: the Python SDK (`mcp` 2.3) on protocol
2026-07-28 calls a write without a confirmation token; root answers with a multi-round-trip
question, which the SDK hands to `elicitation_callback` before it retries the call.

    python tests/clients/mrtr.py MCP_URL BEARER ANSWER KEY

ANSWER is `accept` (confirm: true) or `decline`. Prints one JSON line: the messages the
callback was shown and the tool result's structured content and error flag.
"""

import json
import sys

import anyio
import httpx2
import mcp.types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


async def main(url: str, bearer: str, answer: str, key: str) -> None:
    asked: list[str] = []

    async def elicit(context, params: types.ElicitRequestParams):
        asked.append(params.message)
        if answer == "accept":
            return types.ElicitResult(action="accept", content={"confirm": True})
        return types.ElicitResult(action="decline")

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {bearer}"}, timeout=30)
    transport = streamable_http_client(url, http_client=http)
    async with Client(transport, mode="2026-07-28", elicitation_callback=elicit) as client:
        result = await client.call_tool(
            "hub.run_allowed_tests",
            {"name": "smoke", "phase": "execute", "idempotency_key": key},
        )
    print(
        json.dumps(
            {
                "asked": asked,
                "is_error": bool(result.is_error),
                "structured": result.structured_content,
            }
        )
    )


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:5])
