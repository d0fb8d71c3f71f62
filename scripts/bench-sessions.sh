#!/usr/bin/env bash
# How long `quorum sessions` takes over many recorded sessions (issue 41,
# item 4: 1,000 sessions in at most 200 ms).
#
#   scripts/bench-sessions.sh [SESSIONS] [EVENTS] [RUNS]   (defaults: 1000 2000 5)
#
# SESSIONS transcripts of EVENTS events each (scripts/gen-session.py,
# deterministic; one in ten recorded in another directory) go in a fresh
# state directory; then `quorum sessions` (this directory's) and
# `quorum sessions --all` run RUNS times each, after a first listing (the
# files in the page cache; the first `quorum sessions` reads every
# transcript and keeps what it read in the directory's index, whose time is
# printed too). The binary is target/release/quorum (under
# CARGO_TARGET_DIR when set; built if missing; QUORUM_BIN overrides).
# Prints each figure's median in ms; asserts nothing.
set -euo pipefail
sessions=${1:-1000}
events=${2:-2000}
runs=${3:-5}
repo="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
bin=${QUORUM_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/quorum}
if [[ ! -x "$bin" ]]; then
    (cd "$repo" && cargo build --release --bin quorum)
fi
bin=$(realpath "$bin")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dir="$work/state/quorum/sessions"
mkdir -p "$dir" "$work/project" "$work/elsewhere" "$work/config"
here=$(cd "$work/project" && pwd -P)
python3 "$repo/scripts/gen-session.py" "$events" "$here" "$work/here.jsonl"
python3 "$repo/scripts/gen-session.py" "$events" "$work/elsewhere" "$work/elsewhere.jsonl"
for i in $(seq -w 1 "$sessions"); do
    if (( 10#$i % 10 == 0 )); then src=elsewhere; else src=here; fi
    cp "$work/$src.jsonl" "$dir/2026-12-01-$i.jsonl"
done
echo "sessions: $sessions of $events events ($(du -sh "$dir" | cut -f1)); binary: $bin"
: >"$work/config/empty.toml"
python3 - "$bin" "$work" "$here" "$runs" <<'PY'
import os, statistics, subprocess, sys, time

binary, work, here, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
env = dict(os.environ, XDG_STATE_HOME=os.path.join(work, "state"),
           XDG_CONFIG_HOME=os.path.join(work, "config"), HOME=work)

def once(args):
    start = time.perf_counter()
    out = subprocess.run([binary, "--config", os.path.join(work, "config", "empty.toml"),
                          "sessions", *args], cwd=here, env=env,
                         capture_output=True, text=True, check=True)
    return (time.perf_counter() - start) * 1000, out.stdout.count("\n")

for args in ([], ["--all"]):
    # The first listing: the files into the page cache, and what it read
    # kept in the sessions directory's index (none yet the first time).
    first, _ = once(args)
    times, lines = [], 0
    for _ in range(runs):
        ms, lines = once(args)
        times.append(ms)
    name = " ".join(["quorum sessions", *args])
    print(f"  {name:24} median {statistics.median(times):6.0f} ms "
          f"(runs: {', '.join(f'{t:.0f}' for t in times)}; {lines} lines out; "
          f"the first {first:.0f} ms)")
PY
