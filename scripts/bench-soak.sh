#!/usr/bin/env bash
# The TUI soak (scripts/soak.sh) as ratios against a baseline build, in one
# run (issue 27, item 4): this build and QUORUM_BASELINE's take turns,
# A B A B ..., and each figure is printed for both with the median of the
# pairs' ratios. Without QUORUM_BASELINE it prints this build's medians.
#
#   scripts/bench-soak.sh [SECONDS] [RATE] [AGENTS] [PAIRS]   (defaults: 20 200 16 3)
#
# QUORUM_BASELINE=DIR: a directory holding another build's `quorum` and
# `quorum-fake-agent` (e.g. a copy of target/release from an earlier
# commit). This build is target/release (built with the test programs).
# Goals (issue 27): 16 agents x 200 chunks/s at most 10% of a core; 64 x 50
# at most 12%, the worst keystroke within 5 ms of an idle screen's (issue
# 41: 5% and 6%). An idle session, nothing running and nothing typed
# (issue 41: at most 0.2% of a core):
#
#   SOAK_KEYS=0 scripts/bench-soak.sh 60 0 0
#
# Prints figures; asserts nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
rate=${2:-200}
agents=${3:-16}
pairs=${4:-3}
cargo build --release --quiet --features test-programs --bin quorum --bin quorum-fake-agent
this="${CARGO_TARGET_DIR:-$PWD/target}/release"
base="${QUORUM_BASELINE:-}"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for i in $(seq 1 "$pairs"); do
    QUORUM_BIN_DIR="$this" scripts/soak.sh "$seconds" "$rate" "$agents" >"$out/this.$i" 2>&1
    if [ -n "$base" ]; then
        QUORUM_BIN_DIR="$base" scripts/soak.sh "$seconds" "$rate" "$agents" >"$out/base.$i" 2>&1
    fi
done
python3 - "$out" "$pairs" "$base" "$agents" "$rate" <<'PY'
import os, re, statistics, sys
out, pairs, base, agents, rate = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]

def figures(path):
    """The run's figures; those it has not (no keys typed: no keystroke
    figures) are left out."""
    text = open(path).read()
    if "quorum CPU:" not in text:
        raise SystemExit(f"{path}: no figures:\n{text}")
    found = {}
    for name, pattern in [
        ("CPU, % of a core", r"quorum CPU:\s+([\d.]+)%"),
        ("frames a second", r"frames drawn:.*\((\d+) a second"),
        ("frame time, ms total", r"all frames together (\d+) ms"),
        ("keystroke median, ms", r"keystroke to screen: median ([\d.]+) ms"),
        ("keystroke worst, ms", r"keystroke to screen: .*worst ([\d.]+) ms"),
        ("peak memory, MB", r"peak \(VmHWM\) ([\d.]+) MB"),
    ]:
        m = re.search(pattern, text)
        if m:
            found[name] = float(m.group(1))
    return found

this = [figures(os.path.join(out, f"this.{i}")) for i in range(1, pairs + 1)]
print(f"soak: {agents} agents x {rate} chunks/s, median of {pairs}" + (" pairs" if base else " runs"))
if base:
    that = [figures(os.path.join(out, f"base.{i}")) for i in range(1, pairs + 1)]
for name in this[0]:
    if any(name not in r for r in this + (that if base else [])):
        continue
    mine = statistics.median(r[name] for r in this)
    line = f"  {name:22} {mine:8.2f}"
    if base:
        theirs = statistics.median(r[name] for r in that)
        ratios = [a[name] / b[name] for a, b in zip(this, that) if b[name]]
        ratio = f"{statistics.median(ratios):.2f}x" if ratios else "-"
        line += f"   baseline {theirs:8.2f}   this / baseline {ratio}"
    print(line)
PY
