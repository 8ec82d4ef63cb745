"""An MCP client from another implementation: the Python SDK (`mcp` 2.3) on protocol
2026-07-28 runs a fleet write as an agent would. It lists the tools, then calls
`root.run_fleet_write` to execute with a key and no confirmation token: root answers with a
multi-round-trip question, which the SDK hands to `elicitation_callback` before it retries
the call; root then answers with a task, because the client declares the tasks extension
(`io.modelcontextprotocol/tasks`, SEP-2663). The SDK has no tasks extension of its own, so
`Tasks` below is one, built on the SDK's opt-in extension interface (SEP-2133): it claims
`tools/call`'s `resultType: "task"` and polls `tasks/get` until the task has ended, whose
answer carries the tool result inline.

    python tests/clients/fleet.py MCP_URL BEARER KEY

Prints one JSON line: the tools listed, the messages the callback was shown, the task's id
and status messages, and the tool result's error flag and structured content.
"""

import json
import sys
from typing import Any, Literal

import anyio
import httpx2
import mcp.types as types
from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from pydantic import TypeAdapter

TASKS = "io.modelcontextprotocol/tasks"
ENDED = {"completed", "failed", "cancelled"}


class CreatedTask(types.Result):
    """`tools/call`'s answer when the server made a task: the task's fields at the top level."""

    result_type: Literal["task"]
    task_id: str
    status: str
    status_message: str | None = None
    poll_interval_ms: int | None = None


class GetTaskParams(types.RequestParams):
    task_id: str


class GetTask(types.Request[GetTaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: GetTaskParams
    name_param = "taskId"  # SEP-2663: `Mcp-Name` repeats the task id


class Tasks(ClientExtension):
    """Declares the tasks extension and follows a task `tools/call` answered with."""

    identifier = TASKS

    def __init__(self) -> None:
        self.task_id: str | None = None
        self.statuses: list[str] = []

    def claims(self):
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=self.follow)]

    def seen(self, task: dict[str, Any]) -> None:
        message = task.get("statusMessage")
        if message and message not in self.statuses:
            self.statuses.append(message)

    async def follow(self, created: CreatedTask, ctx: ClaimContext) -> types.CallToolResult:
        self.task_id = created.task_id
        task: dict[str, Any] = created.model_dump(by_alias=True)
        self.seen(task)
        while task["status"] not in ENDED:
            await anyio.sleep((task.get("pollIntervalMs") or 200) / 1000)
            task = await ctx.session.send_request(
                GetTask(params=GetTaskParams(task_id=created.task_id)),
                TypeAdapter(dict[str, Any]),
                request_read_timeout_seconds=ctx.read_timeout_seconds,
            )
            self.seen(task)
        if task["status"] != "completed":
            raise RuntimeError(f"task {created.task_id} {task['status']}: {task.get('error')}")
        return types.CallToolResult.model_validate(task["result"])


async def main(url: str, bearer: str, key: str) -> None:
    asked: list[str] = []

    async def elicit(context, params: types.ElicitRequestParams):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"confirm": True})

    tasks = Tasks()
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {bearer}"}, timeout=30)
    transport = streamable_http_client(url, http_client=http)
    async with Client(
        transport, mode="2026-07-28", elicitation_callback=elicit, extensions=[tasks]
    ) as client:
        tools: list[str] = []
        cursor = None
        while True:
            page = await client.list_tools(cursor=cursor)
            tools += [t.name for t in page.tools]
            if not (cursor := page.next_cursor):
                break
        result = await client.call_tool(
            "root.run_fleet_write",
            {
                "tool": "hub.run_allowed_tests",
                "arguments": {"name": "smoke"},
                "plan": {"canary": 1, "max_concurrency": 2},
                "phase": "execute",
                "idempotency_key": key,
            },
        )
    print(
        json.dumps(
            {
                "tools": tools,
                "asked": asked,
                "task_id": tasks.task_id,
                "statuses": tasks.statuses,
                "is_error": bool(result.is_error),
                "structured": result.structured_content,
            }
        )
    )


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:4])
