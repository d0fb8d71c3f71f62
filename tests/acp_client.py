"""A host driving `quorum acp` with the ACP Python SDK's client (PyPI
`agent-client-protocol`), for tests/acp_hosts.rs.

    python acp_client.py QUORUM CONFIG WORK SCRIPT first
    python acp_client.py QUORUM CONFIG WORK SCRIPT again SESSION_ID

Each step prints one JSON line on stdout: {"step": NAME, ...}, with the
updates the host received during it (as the SDK parsed them, by alias) and
the permission requests it answered. A step that fails prints its error.
"""

import asyncio
import json
import os
import sys
import time

import acp
from acp import text_block
from acp.schema import AllowedOutcome, ClientCapabilities, RequestPermissionResponse

LIMIT = 60


def say(step, **fields):
    print(json.dumps({"step": step, **fields}, default=str), flush=True)


class Host:
    """The client side: records updates, answers permission requests."""

    def __init__(self):
        self.updates = []
        self.asked = []

    def on_connect(self, conn):
        pass

    async def session_update(self, session_id, update, **kwargs):
        entry = update.model_dump(by_alias=True, exclude_none=True)
        entry["sessionId"] = session_id
        self.updates.append(entry)

    async def request_permission(self, options, session_id, tool_call, **kwargs):
        self.asked.append(
            {
                "sessionId": session_id,
                "toolCall": tool_call.model_dump(by_alias=True, exclude_none=True),
                "options": [o.model_dump(by_alias=True, exclude_none=True) for o in options],
            }
        )
        allow = next(o for o in options if o.kind == "allow_once")
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=allow.option_id))

    def take(self):
        updates, self.updates = self.updates, []
        asked, self.asked = self.asked, []
        return updates, asked

    async def wait_for(self, check, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if check(self.updates):
                return True
            await asyncio.sleep(0.05)
        return False


async def prompt(conn, host, name, session_id, blocks):
    try:
        response = await asyncio.wait_for(conn.prompt(session_id=session_id, prompt=blocks), LIMIT)
        updates, asked = host.take()
        say(name, stop_reason=response.stop_reason, updates=updates, asked=asked)
    except acp.RequestError as e:
        updates, asked = host.take()
        say(name, error={"code": e.code, "message": str(e), "data": e.data}, updates=updates)


def text_of(updates):
    return "".join(
        u["content"].get("text", "")
        for u in updates
        if u.get("sessionUpdate") == "agent_message_chunk"
    )


def background_reported(updates):
    plans = [u for u in updates if u.get("sessionUpdate") == "plan"]
    done = plans and all(e["status"] == "completed" for e in plans[-1]["entries"])
    return done and "The background task reported." in text_of(updates)


async def main():
    quorum, config, work, script, phase = sys.argv[1:6]
    host = Host()
    args = ["--config", config, "acp", "--model", f"script:{script}"]
    # The host's environment (the test's private state directory) goes on.
    spawned = acp.spawn_agent_process(host, quorum, *args, cwd=work, env=dict(os.environ))
    async with spawned as (conn, process):
        init = await asyncio.wait_for(
            conn.initialize(protocol_version=1, client_capabilities=ClientCapabilities()), LIMIT
        )
        say("initialize", response=init.model_dump(by_alias=True, exclude_none=True))
        if phase == "first":
            session = await asyncio.wait_for(conn.new_session(cwd=work), LIMIT)
            sid = session.session_id
            say("new", session_id=sid)
            await prompt(conn, host, "foreground", sid, [text_block("Ask fake, then start a background task.")])
            reported = await host.wait_for(background_reported, LIMIT)
            updates, _ = host.take()
            say("background", reported=reported, updates=updates)
            await prompt(conn, host, "permission", sid, [text_block("Delete the build, and count the cost.")])
            await prompt(
                conn,
                host,
                "image",
                sid,
                [text_block("look"), acp.image_block("iVBORw0KGgo=", "image/png")],
            )
            await prompt(conn, host, "unknown", "no-such-session", [text_block("hello")])
            listed = await asyncio.wait_for(conn.list_sessions(cwd=work), LIMIT)
            say("list", response=listed.model_dump(by_alias=True, exclude_none=True))
        else:
            sid = sys.argv[6]
            await asyncio.wait_for(conn.load_session(cwd=work, session_id=sid), LIMIT)
            # The replay comes before the answer to session/load.
            updates, _ = host.take()
            say("load", updates=updates)
            await prompt(conn, host, "again", sid, [text_block("@fake echo after the restart")])
    say("closed", returncode=process.returncode)


asyncio.run(main())
