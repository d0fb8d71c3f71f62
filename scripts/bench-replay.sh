#!/usr/bin/env bash
# Peak memory and time of replaying a long recorded session to its last
# screen, headlessly (`quorum replay FILE --screenshot`), issue 27's
# "replay of a 1,000,000-event session" (target: peak RSS under 200 MB,
# time as before).
#
#   scripts/bench-replay.sh [EVENTS] [RUNS]     (default 1000000 events, 5 runs)
#
# The session comes from scripts/gen-session.py (deterministic; kept in
# $QUORUM_BENCH_DIR if set, else made in a temporary directory). The binary
# is target/release/quorum (built if missing; QUORUM_BIN overrides). With
# QUORUM_BASELINE=DIR (a directory holding another build's `quorum`), that
# build runs in turn with this one, A B A B ..., and each figure is also
# printed as a ratio against it (the median of the pairs' ratios). Peak
# memory and elapsed time are /usr/bin/time's. Prints figures; asserts
# nothing.
set -euo pipefail
events=${1:-1000000}
runs=${2:-5}
repo="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
bin=${QUORUM_BIN:-$repo/target/release/quorum}
if [[ ! -x "$bin" ]]; then
    (cd "$repo" && cargo build --release --bin quorum)
fi
bin=$(realpath "$bin")
base=""
if [[ -n "${QUORUM_BASELINE:-}" ]]; then
    base=$(realpath "$QUORUM_BASELINE/quorum")
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dir=${QUORUM_BENCH_DIR:-$work}
session="$dir/session-$events.jsonl"
if [[ ! -s "$session" ]]; then
    python3 "$repo/scripts/gen-session.py" "$events" /work/project "$session"
fi
python3 - "$session" "$events" "$runs" "$work" "$bin" "$base" <<'PY'
import os, statistics, subprocess, sys

session, events, runs, work, binary, base = sys.argv[1:7]
runs = int(runs)

def run(b):
    """(seconds, peak MB) of one replay to the last screen."""
    out = subprocess.run(
        ["/usr/bin/time", "-f", "%e %M", b, "replay", session,
         "--screenshot", os.path.join(work, "end.ans"), "--size", "200x60"],
        capture_output=True, text=True, check=True)
    secs, kb = out.stderr.strip().splitlines()[-1].split()
    return float(secs), int(kb) / 1024

builds = [binary] + ([base] if base else [])
figures = {b: [] for b in builds}
run(binary)  # warm-up: the file in the page cache
for _ in range(runs):
    for b in builds:
        figures[b].append(run(b))
size = os.path.getsize(session) / 1e6
print(f"replay of a {int(events):,}-event session ({size:.0f} MB) to its last screen, median of {runs}")
med = lambda xs: statistics.median(xs)
for b in builds:
    t = med([f[0] for f in figures[b]])
    m = med([f[1] for f in figures[b]])
    print(f"  {b}: {t:.2f} s, {m:.0f} MB peak RSS")
if base:
    pairs = list(zip(figures[binary], figures[base]))
    print(f"  this / baseline: {med([a[0] / b[0] for a, b in pairs]):.2f}x the time, "
          f"{med([a[1] / b[1] for a, b in pairs]):.2f}x the peak RSS")
PY
