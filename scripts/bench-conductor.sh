#!/usr/bin/env bash
# How long, after a chat's model asks for a sub-agent, the sub-agent's first
# chunk reaches quorum's front end: the built-in chat (quorum's own model
# loop, its model the fake Anthropic server) against a conductor
# (claude-agent-acp as the chat, `--model acp:claude`, its model the same
# server, calling quorum's `subagent` over MCP).
#
#   scripts/bench-conductor.sh [RUNS]        (default 7 runs of each)
#
# The clock starts when the fake model server has sent its tool-call answer
# whole (`quorum-fake-model --tool-times`) and stops when `quorum run
# --json` prints the sub-agent's first message chunk (both wall clock, on
# this machine). The sub-agent is the fake agent (`echo`), started fresh
# each run. Prints each run, the medians and their ratio. Needs python3 and
# npm (scripts/install-acp-adapter.sh installs claude-agent-acp).
set -euo pipefail
runs=${1:-7}
repo="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
claude="$(bash "$repo/scripts/install-acp-adapter.sh" claude)"
(cd "$repo" && cargo build --quiet --features test-programs --bin quorum --bin quorum-fake-agent --bin quorum-fake-model)
target="$(cd "$repo" && cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"
work=$(mktemp -d /var/tmp/quorum-bench-conductor.XXXXXX)
model_pid=""
cleanup() {
    [[ -n $model_pid ]] && kill "$model_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/home" "$work/work" "$work/state"
"$target/debug/quorum-fake-model" --tool-times "$work/tool-times" > "$work/url" &
model_pid=$!
for _ in $(seq 50); do [[ -s $work/url ]] && break; sleep 0.1; done
url="$(head -n1 "$work/url")"
cat > "$work/quorum.toml" <<EOF
[agents.claude]
command = "$claude"
env = { ANTHROPIC_BASE_URL = "$url", ANTHROPIC_API_KEY = "fake", IS_SANDBOX = "1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = "1", DISABLE_TELEMETRY = "1", DISABLE_AUTOUPDATER = "1", HOME = "$work/home" }

[agents.fake]
command = "$target/debug/quorum-fake-agent"
EOF

python3 - "$target/debug/quorum" "$work" "$url" "$runs" <<'PY'
import json, os, statistics, subprocess, sys, time

quorum, work, url, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
env = dict(os.environ, HOME=f"{work}/home", XDG_STATE_HOME=f"{work}/state",
           ANTHROPIC_API_KEY="fake")
times = f"{work}/tool-times"

def tool_times():
    try:
        return [int(l) for l in open(times) if l.strip()]
    except FileNotFoundError:
        return []

def one(model, prompt):
    """ms from the model's tool call (sent whole) to the first sub-agent chunk."""
    before = len(tool_times())
    args = [quorum, "--config", f"{work}/quorum.toml", "run", "--json", "--no-record",
            "--cwd", f"{work}/work", "--model", model, "-p", prompt]
    if model.startswith("anthropic:"):
        args[args.index("--model"):args.index("--model")] = ["--base-url", url]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
    chunk = None
    for line in p.stdout:
        event = json.loads(line)
        if chunk is None and event.get("type") == "subagent_activity" \
                and event["activity"].get("kind") == "message_chunk":
            chunk = time.time() * 1000
    p.wait(timeout=120)
    # The server writes its times every 100 ms.
    deadline = time.time() + 2
    while len(tool_times()) <= before and time.time() < deadline:
        time.sleep(0.05)
    sent = tool_times()[before]
    if chunk is None:
        sys.exit(f"{model}: no sub-agent chunk")
    return chunk - sent

results = {}
for name, model, prompt in [
    ("built-in chat", "anthropic:fake", "call fake echo the first chunk"),
    ("claude as the conductor", "acp:claude", "conduct fake echo the first chunk"),
]:
    one(model, prompt)  # warm-up: caches, the adapter's first start
    samples = [one(model, prompt) for _ in range(runs)]
    results[name] = statistics.median(samples)
    print(f"{name}: " + " ".join(f"{s:.0f}" for s in samples)
          + f" ms; median {results[name]:.0f} ms")
base = results["built-in chat"]
print(f"ratio conductor / built-in: {results['claude as the conductor'] / base:.2f}x "
      f"(+{results['claude as the conductor'] - base:.0f} ms)")
PY
