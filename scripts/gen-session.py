#!/usr/bin/env python3
"""Writes a recorded quorum session of N events, for benchmarks.

usage: gen-session.py N CWD OUT

The session is what a long working day looks like: the person's messages,
the chat's answers streamed in pieces, and sub-agent calls (every fifth of
them a background task) whose agents stream text and call tools, each with
the task board's snapshots. Deterministic: the same N gives the same file.
"""
import json
import sys


def main():
    n, cwd, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    lines = [json.dumps({
        "format": "quorum-transcript", "version": 2, "quorum_version": "0.1.0",
        "cwd": cwd, "started_at": "2026-12-01T09:00:00Z",
        "terminal": {"cols": 200, "rows": 60},
    })]
    t = 0
    count = 0
    call = 0
    task = 0

    def emit(event):
        nonlocal t, count
        t += 7
        event = {"t": t, **event}
        lines.append(json.dumps(event, separators=(",", ":")))
        count += 1

    while count < n:
        turn = call
        emit({"type": "user_message", "text": f"step {turn}: look at module {turn % 97} and fix what is wrong"})
        emit({"type": "turn_started"})
        for piece in ["Let me ", "ask an ", "agent."]:
            emit({"type": "assistant_delta", "text": piece})
        emit({"type": "assistant_end"})
        call += 1
        cid = f"call-{call}"
        started = {"type": "subagent_started", "call_id": cid, "agent": {"acp": "fast-agent"},
                   "input": f"fix module {turn % 97}", "code_review": False}
        ids = {"call_id": cid}
        if call % 5 == 0:
            task += 1
            started["task_id"] = f"t{task}"
            started["background"] = True
            ids["task_id"] = f"t{task}"
        emit(started)
        tools = 0
        for step in range(8):
            if count >= n:
                break
            if step % 3 == 0:
                tools += 1
                emit({"type": "subagent_activity", "call_id": cid, "activity": {
                    "kind": "tool_call", "id": f"{cid}-{step}", "title": f"Read src/m{turn % 97}.rs",
                    "status": "completed"}})
            else:
                emit({"type": "subagent_activity", "call_id": cid, "activity": {
                    "kind": "message_chunk", "text": f"line {step} of the fix for module {turn % 97}\n"}})
            emit({"type": "task_progress", **ids, "state": "running", "tool_calls": tools,
                  "last_activity": f"line {step}"})
        emit({"type": "subagent_finished", "call_id": cid, "output": f"Fixed module {turn % 97}.",
              "stop_reason": "end_turn"})
        emit({"type": "task_progress", **ids, "state": "done", "tool_calls": tools})
        for piece in ["Done with ", f"step {turn}."]:
            emit({"type": "assistant_delta", "text": piece})
        emit({"type": "assistant_end"})
        emit({"type": "turn_ended", "stop_reason": "end_turn"})
    # The last words, for a benchmark to wait for on screen.
    emit({"type": "user_message", "text": "THE-LAST-MESSAGE"})
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


main()
