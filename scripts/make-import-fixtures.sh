#!/usr/bin/env bash
# Make the fixtures of tests/it/import.rs: session logs written by the agents'
# own code, run offline against the test suite's fake model servers
# (tests/common/models.rs, as the program quorum-fake-model):
#
#   claude: Claude Code's CLI (the cli.js that @anthropic-ai/claude-agent-sdk
#           ships, a dependency of claude-agent-acp) run with -p; it writes
#           $HOME/.claude/projects/<dir>/<session>.jsonl and the sub-agent's
#           <session>/subagents/agent-<id>.jsonl.
#   codex:  codex-acp (codex's core, with multi-agent tools on) run by
#           `quorum call`; it writes $CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl,
#           one for the session and one for the sub-agent it spawned.
#
# Both get the prompt `inspect delegate inspect review red`: the agent runs
# `ls`, hands a sub-agent `inspect review red` (the sub-agent runs `ls`,
# then reports a review starting with `<!-- severity: red -->`), and ends
# with a line of its own. The files are copied as written, into
# tests/fixtures/import/{claude,codex}/ (replacing what was there), and the
# versions used go to tests/fixtures/import/VERSIONS.
#
# Needs npm (for scripts/install-acp-adapter.sh) and cargo; no network but
# the npm registry.
set -euo pipefail

repo="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
out="$repo/tests/fixtures/import"
prompt="inspect delegate inspect review red"

claude_acp="$(bash "$repo/scripts/install-acp-adapter.sh" claude)"
codex_acp="$(bash "$repo/scripts/install-acp-adapter.sh" codex)"
sdk="$repo/.tools/claude-acp/node_modules/@anthropic-ai/claude-agent-sdk"
[[ -f $sdk/cli.js ]] || { echo "no Claude Code CLI at $sdk/cli.js" >&2; exit 1; }

cargo build --quiet --features test-programs --bin quorum --bin quorum-fake-model
target="$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"
quorum="$target/debug/quorum"
fake_model="$target/debug/quorum-fake-model"

tmp="$(mktemp -d /tmp/quorum-import-fixtures.XXXXXX)"
model_pid=""
cleanup() {
    [[ -n $model_pid ]] && kill "$model_pid" 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT

"$fake_model" --log "$tmp/requests.jsonl" > "$tmp/url" &
model_pid=$!
for _ in $(seq 50); do [[ -s $tmp/url ]] && break; sleep 0.1; done
url="$(head -n1 "$tmp/url")"
[[ -n $url ]] || { echo "the fake model did not start" >&2; exit 1; }

# --- claude -----------------------------------------------------------------
mkdir -p "$tmp/claude/home" "$tmp/claude/work"
echo "notes" > "$tmp/claude/work/notes.txt"
(cd "$tmp/claude/work" && env -i PATH="$PATH" HOME="$tmp/claude/home" \
    ANTHROPIC_BASE_URL="$url" ANTHROPIC_API_KEY=fake IS_SANDBOX=1 \
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1 \
    node "$sdk/cli.js" -p "$prompt" --permission-mode bypassPermissions)
projects="$tmp/claude/home/.claude/projects"
ls "$projects"/*/*/subagents/agent-*.jsonl > /dev/null \
    || { echo "claude wrote no sub-agent log under $projects" >&2; exit 1; }
rm -rf "$out/claude"
mkdir -p "$out/claude"
cp -r "$projects" "$out/claude/"

# --- codex ------------------------------------------------------------------
mkdir -p "$tmp/codex/home" "$tmp/codex/work" "$tmp/codex/codex-home"
echo "notes" > "$tmp/codex/work/notes.txt"
# An unknown model name: codex offers its multi-agent tools directly
# instead of behind tool search.
cat > "$tmp/codex/codex-home/config.toml" <<EOF
model = "fake-model"
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "danger-full-access"

[features]
multi_agent = true

[model_providers.fake]
name = "fake"
base_url = "$url/v1"
wire_api = "responses"
env_key = "OPENAI_API_KEY"
request_max_retries = 0
stream_max_retries = 0
supports_websockets = false

[projects."$tmp/codex/work"]
trust_level = "trusted"
EOF
cat > "$tmp/codex/quorum.toml" <<EOF
[agents.codex]
command = "$codex_acp"
env = { CODEX_HOME = "$tmp/codex/codex-home", OPENAI_API_KEY = "fake", HOME = "$tmp/codex/home" }
EOF
env -i PATH="$PATH" HOME="$tmp/codex/home" XDG_STATE_HOME="$tmp/codex/state" \
    "$quorum" --config "$tmp/codex/quorum.toml" call --agent codex --cwd "$tmp/codex/work" \
    --approve all --input "$prompt"
rollouts=("$tmp/codex/codex-home/sessions"/*/*/*/rollout-*.jsonl)
(( ${#rollouts[@]} == 2 )) \
    || { echo "codex wrote ${#rollouts[@]} rollouts, expected the session's and its sub-agent's" >&2; exit 1; }
rm -rf "$out/codex"
mkdir -p "$out/codex"
cp -r "$tmp/codex/codex-home/sessions" "$out/codex/"

claude_version="$(node "$sdk/cli.js" --version)"
codex_version="$(sed -n 's/.*"cli_version":"\([^"]*\)".*/\1/p' "${rollouts[0]}" | head -n1)"
cat > "$out/VERSIONS" <<EOF
claude: Claude Code $claude_version (cli.js of @anthropic-ai/claude-agent-sdk $(node -p "require('$sdk/package.json').version"), from @zed-industries/claude-agent-acp $(cat "$repo/.tools/claude-acp/.installed")), run as: claude -p "$prompt" --permission-mode bypassPermissions
codex: codex-acp $(cat "$repo/.tools/codex-acp/.installed") (@zed-industries/codex-acp, codex core $codex_version), run as: quorum call --agent codex --input "$prompt" (features.multi_agent = true)
EOF
echo "fixtures written to $out:" >&2
(cd "$out" && find . -type f | sort) >&2
