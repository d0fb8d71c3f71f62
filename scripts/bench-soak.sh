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
# at most 12%, the worst keystroke within 5 ms of an idle screen's. Prints
# figures; asserts nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
rate=${2:-200}
agents=${3:-16}
pairs=${4:-3}
cargo build --release --quiet --features test-programs --bin quorum --bin quorum-fake-agent
this="$PWD/target/release"
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
    text = open(path).read()
    def num(pattern):
        m = re.search(pattern, text)
        if not m:
            raise SystemExit(f"{path}: no match for {pattern!r}:\n{text}")
        return float(m.group(1))
    return {
        "CPU, % of a core": num(r"quorum CPU:\s+([\d.]+)%"),
        "frames a second": num(r"frames drawn:.*\((\d+) a second"),
        "frame time, ms total": num(r"all frames together (\d+) ms"),
        "keystroke median, ms": num(r"keystroke to screen: median ([\d.]+) ms"),
        "keystroke worst, ms": num(r"keystroke to screen: .*worst ([\d.]+) ms"),
        "peak memory, MB": num(r"peak \(VmHWM\) ([\d.]+) MB"),
    }

this = [figures(os.path.join(out, f"this.{i}")) for i in range(1, pairs + 1)]
print(f"soak: {agents} agents x {rate} chunks/s, median of {pairs}" + (" pairs" if base else " runs"))
if base:
    that = [figures(os.path.join(out, f"base.{i}")) for i in range(1, pairs + 1)]
for name in this[0]:
    mine = statistics.median(r[name] for r in this)
    line = f"  {name:22} {mine:8.1f}"
    if base:
        theirs = statistics.median(r[name] for r in that)
        ratios = [a[name] / b[name] for a, b in zip(this, that) if b[name]]
        ratio = f"{statistics.median(ratios):.2f}x" if ratios else "-"
        line += f"   baseline {theirs:8.1f}   this / baseline {ratio}"
    print(line)
PY
