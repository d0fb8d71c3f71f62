"""An MCP host as tests/mcp_cli.rs needs one: the official MCP Python SDK
(PyPI `mcp`, installed by scripts/install-mcp-python.sh) starts
`quorum mcp` on stdio, as Claude Code or codex would, and drives it.

    python mcp_client.py QUORUM CONFIG DIR

Each step prints one JSON line on stdout: {"step": NAME, ...}. The test
reads them; nothing here asserts, so a failure shows what quorum said.
The server's stderr goes to this script's stderr.
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client


def say(step, **fields):
    print(json.dumps({"step": step, **fields}), flush=True)


def result(r):
    text = "".join(c.text for c in r.content if getattr(c, "type", "") == "text")
    return {"is_error": bool(r.is_error), "text": text}


async def call(session, name, args, **kw):
    try:
        return result(await session.call_tool(name, args, **kw))
    except MCPError as e:
        return {"mcp_error": str(e), "code": getattr(e, "code", None)}


async def main(quorum, config, cwd):
    server = StdioServerParameters(
        command=quorum,
        args=["--config", config, "mcp", "--cwd", cwd],
        env=dict(os.environ),
        cwd=cwd,
    )
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            say("initialize", server=init.server_info.name, version=init.server_info.version)
            tools = await session.list_tools()
            say(
                "tools",
                tools=[
                    {"name": t.name, "description": t.description, "schema": t.input_schema}
                    for t in tools.tools
                ],
            )
            say("echo", **await call(session, "subagent", {"agent": "fake", "input": "echo hello from mcp"}))

            progress = []

            async def on_progress(value, total, message):
                progress.append({"progress": value, "message": message})

            slow = await call(
                session, "subagent", {"agent": "fake", "input": "slow 3"}, progress_callback=on_progress
            )
            say("slow", progress=progress, **slow)
            task_id = None
            if not slow.get("is_error") and "text" in slow:
                try:
                    task_id = json.loads(slow["text"]).get("task_id")
                except ValueError:
                    pass
            waits = []
            if task_id:
                # `wait_seconds` waits at most `sync_seconds` over MCP: ask
                # again until the report is there (bounded).
                for _ in range(15):
                    status = await call(session, "subagent_status", {"task_id": task_id, "wait_seconds": 30})
                    waits.append(status)
                    if status.get("is_error") or json.loads(status["text"]).get("state") != "running":
                        break
            say("status", task_id=task_id, waits=waits)
            say("unknown_agent", **await call(session, "subagent", {"agent": "nope", "input": "hi"}))
            say("bad_arguments", **await call(session, "subagent", {"agnet": "fake", "input": "hi"}))
            say("unknown_tool", **await call(session, "read", {"path": "x"}))
    say("closed")


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
