#!/usr/bin/env bash
# What a change must leave byte-identical (issue 27: "no behaviour change"):
# writes, into OUT, everything a build of quorum shows and records for a
# fixed input, so that two builds can be compared with `diff -r`:
#
#   - screenshots of assets/demo.jsonl after every event (.ans and .svg at
#     120x40), and at its end at 60x20 and 200x60;
#   - the end screenshot (.ans, 200x60) of the other fixture transcripts, and
#     of a generated session of 50,000 events (scripts/gen-session.py), long
#     enough for what a long session keeps compactly;
#   - the transcript (`--record`) and the `--json` stdout of a scripted
#     session (`quorum run --model script:...`) against the fake agent:
#     tools, a diff, a plan, a permission, usage, a red review with output
#     requirements, a review batch with an unknown agent in it, the internal
#     agent reading a file, a background task waited for, excluded files, a
#     streamed answer of 2,000 chunks, a refusal; times, pids and paths
#     normalised;
#   - `quorum call --json` of a few scenarios (a crash among them), and the stdout of a streamed
#     call of 20,000 chunks.
#
#   scripts/same-output.sh OUT [BINDIR]
#
# BINDIR holds `quorum` and `quorum-fake-agent` (default target/release,
# built if missing). Then, for a change:
#
#   scripts/same-output.sh /var/tmp/before /var/tmp/base-bin
#   scripts/same-output.sh /var/tmp/after
#   diff -r /var/tmp/before /var/tmp/after && echo identical
set -euo pipefail
out=${1:?usage: same-output.sh OUT [BINDIR]}
repo="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
bindir=${2:-$repo/target/release}
if [[ -z "${2:-}" ]]; then
    (cd "$repo" && cargo build --release --quiet --features test-programs --bin quorum --bin quorum-fake-agent)
fi
bin=$(realpath "$bindir/quorum")
fake=$(realpath "$bindir/quorum-fake-agent")
mkdir -p "$out"
out=$(realpath "$out")
rm -rf "${out:?}"/*
# A fixed place: paths shown on screen are the same from run to run.
work=/var/tmp/quorum-same-output
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
export HOME="$work/home" XDG_STATE_HOME="$work/state" XDG_CONFIG_HOME="$work/config"
unset QUORUM_MODEL QUORUM_CONFIG OPENAI_API_KEY ANTHROPIC_API_KEY QUORUM_LOG
mkdir -p "$HOME" "$XDG_STATE_HOME" "$XDG_CONFIG_HOME"

# 1. The demo after every event, and the other transcripts at their end.
demo="$repo/assets/demo.jsonl"
events=$(($(wc -l <"$demo") - 1))
mkdir -p "$out/demo"
for n in $(seq 1 "$events"); do
    "$bin" replay "$demo" --screenshot "$out/demo/$n.ans" --size 120x40 --at "$n"
    "$bin" replay "$demo" --screenshot "$out/demo/$n.svg" --size 120x40 --at "$n"
done
"$bin" replay "$demo" --screenshot "$out/demo/end-60x20.ans" --size 60x20
"$bin" replay "$demo" --screenshot "$out/demo/end-200x60.ans" --size 200x60
mkdir -p "$out/fixtures"
for f in "$repo"/tests/fixtures/*.jsonl; do
    name=$(basename "$f" .jsonl)
    "$bin" replay "$f" --screenshot "$out/fixtures/$name.ans" --size 200x60 2>"$out/fixtures/$name.err" || echo "exit $?" >>"$out/fixtures/$name.err"
done
python3 "$repo/scripts/gen-session.py" 50000 /work/project "$work/long.jsonl"
"$bin" replay "$work/long.jsonl" --screenshot "$out/fixtures/long-50000.ans" --size 200x60
"$bin" replay "$work/long.jsonl" --screenshot "$out/fixtures/long-50000-at-30000.ans" --size 120x40 --at 30000

# 2. A scripted session, recorded.
proj="$work/project"
mkdir -p "$proj/src"
printf 'the notes say 42\n' >"$proj/notes.txt"
printf 'secret\n' >"$proj/secret.txt"
printf 'one\ntwo\nthree\n' >"$proj/src/a.rs"
config="$work/quorum.toml"
# Batches one task at a time: the order of their events is fixed.
printf 'max_parallel = 1\n\n[agents.fake]\ncommand = "%s"\n' "$fake" >"$config"
cat >"$work/script.json" <<'JSON'
[
  {"text": "Let me ask fake to look.", "tool_calls": [{"name": "subagent", "arguments": {"agent": "fake", "input": "tools"}}]},
  {"text": "An edit.", "tool_calls": [{"name": "subagent", "arguments": {"agent": "fake", "input": "diff src/a.rs"}}]},
  {"text": "A plan.", "tool_calls": [{"name": "subagent", "arguments": {"agent": "fake", "input": "plan"}}]},
  {"text": "Usage.", "tool_calls": [{"name": "subagent", "arguments": {"agent": "fake", "input": "usage 1200 200000 0.25"}}]},
  {"text": "A command.", "tool_calls": [{"name": "subagent", "arguments": {"agent": "fake", "input": "execute cargo test"}}]},
  {"text": "A permission.", "tool_calls": [{"name": "subagent", "arguments": {"agent": "fake", "input": "permission build/", "continue_session": false}}]},
  {"text": "A review.", "tool_calls": [{"name": "subagent", "arguments": {"agent": "fake", "input": "review red", "code_review": true, "output_requirements": "Name the file."}}]},
  {"text": "A quorum.", "tool_calls": [{"name": "subagent", "arguments": {"tasks": [
    {"agent": "fake", "input": "review green", "code_review": true},
    {"agent": "fake", "input": "review yellow", "code_review": true},
    {"agent": "nobody", "input": "review green", "code_review": true}
  ]}}]},
  {"tool_calls": [{"name": "subagent", "arguments": {"input": "What do the notes say?"}}]},
  {"text": "Reading.", "tool_calls": [{"name": "read", "arguments": {"path": "notes.txt"}}]},
  {"text": "They say 42."},
  {"text": "In the background.", "tool_calls": [{"name": "subagent", "arguments": {"agent": "fake", "input": "echo in the background", "run_in_background": true}}]},
  {"text": "Waiting.", "tool_calls": [{"name": "subagent_status", "arguments": {"task_id": "t1", "wait_seconds": 30}}]},
  {"text": "Excluded.", "tool_calls": [{"name": "subagent", "arguments": {"agent": "fake", "input": "read secret.txt", "exclude_files_pattern": "secret"}}]},
  {"text": "A long answer.", "tool_calls": [{"name": "subagent", "arguments": {"agent": "fake", "input": "stream 2000"}}]},
  {"text": "Content.", "tool_calls": [{"name": "subagent", "arguments": {"agent": "fake", "input": "content"}}]},
  {"text": "Again, the same input.", "tool_calls": [{"name": "subagent", "arguments": {"agent": "fake"}}]},
  {"text": "A refusal.", "tool_calls": [{"name": "subagent", "arguments": {"agent": "fake", "input": "stop refusal"}}]},
  {"text": "All done.", "usage": {"input_tokens": 900, "output_tokens": 12}},
  {"text": "Noted."},
  {"text": "Noted again."}
]
JSON
# Times, pids, paths and dates differ from run to run: normalised.
normalise() {
    sed -E \
        -e 's/"t":[0-9]+/"t":0/g' \
        -e 's/"(started_at|at)":"[^"]*"/"\1":"DATE"/g' \
        -e 's/fake-[0-9]+-/fake-PID-/g' \
        -e "s#$work#WORK#g" \
        -e 's/"(quorum_version)":"[^"]*"/"\1":"V"/g' \
        -e 's/(process|pid) [0-9]+/\1 PID/g' \
        -e 's/\[[0-9]+\]/[PID]/g' \
        -e 's/(exit code|exited with|status) [0-9]+/\1 N/g' \
        -e 's/(elapsed_ms\\?":)[0-9]+/\1N/g' \
        -e 's/[0-9]+(\.[0-9]+)? ?m?s\b/N ms/g'
}
(cd "$proj" && "$bin" --config "$config" run --json --model "script:$work/script.json" \
    --approve all --record "$work/session.jsonl" --cwd "$proj" \
    -p "look at the project" >"$work/run.stdout" 2>"$work/run.stderr") || echo "exit $?" >>"$work/run.stderr"
mkdir -p "$out/run"
normalise <"$work/session.jsonl" >"$out/run/transcript.jsonl"
normalise <"$work/run.stdout" >"$out/run/stdout.jsonl"
normalise <"$work/run.stderr" >"$out/run/stderr.txt"
# The recorded session replays to the same screen.
"$bin" replay "$work/session.jsonl" --screenshot "$work/end.ans" --size 160x50
normalise <"$work/end.ans" >"$out/run/end.ans"

# 3. `quorum call`.
mkdir -p "$out/call"
for scenario in tools "diff src/a.rs" plan "review red" "stream 20000" "stop refusal" nested crash; do
    name=${scenario// /-}
    name=${name//\//-}
    (cd "$proj" && "$bin" --config "$config" call --agent fake --input "$scenario" --json --cwd "$proj" \
        >"$work/call.stdout" 2>"$work/call.stderr") || echo "exit $?" >>"$work/call.stderr"
    normalise <"$work/call.stdout" >"$out/call/$name.json"
    normalise <"$work/call.stderr" >"$out/call/$name.err"
done
(cd "$proj" && "$bin" --config "$config" call --agent fake --input "sdkstream 20000" --cwd "$proj" \
    >"$out/call/sdkstream.stdout" 2>"$work/call.stderr")
normalise <"$work/call.stderr" >"$out/call/sdkstream.err"
echo "written to $out: $(find "$out" -type f | wc -l) files"
