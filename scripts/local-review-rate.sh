#!/usr/bin/env bash
# How often a small real model, reviewing through quorum, writes a finding
# that quorum parses at the line of a bug seeded in the diff (issue 38).
# Opt-in, not in the test run: it needs the local model.
#
#   scripts/local-review-rate.sh [RUNS] [PORT]     (defaults: 10, 18090)
#
# The model is ../shared/tools/local-llm.sh's llama-server (Qwen2.5-Coder
# 0.5B), started here when nothing answers at PORT. The reviewer is the real
# fast-agent (scripts/install-fast-agent.sh) over ACP, its model
# `generic.qwen` pointed at the server, its answers cut at 1,024 tokens (the
# small model can run on to the end of its context): the whole path,
# `quorum review` to
# the SARIF it prints. Each run reviews the same diff: a new file whose
# averaging loop skips the last element (`range(len(xs) - 1)`, line 4).
# QUORUM_RATE_KEEP=DIR keeps each run's `--format json` there.
# Prints one line per run (the findings' places) and then the rate:
#   wrote findings: runs whose report holds a `<!-- finding: ... -->`
#   kept: runs with a finding parsed and placed (a file of the repository,
#     a line inside it: quorum drops the others with a notice)
#   at the line: runs with a finding whose lines hold line 4 of stats.py
#   near: within two lines of it
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-10}
port=${2:-18090}
url="http://127.0.0.1:$port"
if ! curl -sf "$url/health" >/dev/null 2>&1; then
    echo "starting the local model on $port (first run: ~10 minutes)" >&2
    ../shared/tools/local-llm.sh "$port" >/dev/null
    for _ in $(seq 600); do
        curl -sf "$url/health" >/dev/null 2>&1 && break
        sleep 1
    done
fi
curl -sf "$url/health" >/dev/null || { echo "no model answers at $url" >&2; exit 1; }
fast=$(scripts/install-fast-agent.sh)
cargo build -q --bin quorum
quorum="${CARGO_TARGET_DIR:-target}/debug/quorum"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
keep=${QUORUM_RATE_KEEP:-}
repo="$work/repo"
mkdir -p "$repo" "$work/home"
git -C "$repo" init -q
printf 'seeded bug\n' >"$repo/README"
git -C "$repo" add README
git -C "$repo" -c user.name=t -c user.email=t@example.com commit -qm first
cat >"$repo/stats.py" <<'EOF'
def average(xs):
    """The mean of a non-empty list of numbers."""
    total = 0
    for i in range(len(xs) - 1):
        total += xs[i]
    return total / len(xs)
EOF
git -C "$repo" add -N stats.py
cat >"$work/quorum.toml" <<EOF
[agents.qwen]
command = "$fast"
args = ["--no-update-check", "acp", "--model", "generic.qwen?max_tokens=1024"]
env = { GENERIC_BASE_URL = "$url/v1", GENERIC_API_KEY = "none", HOME = "$work/home" }
EOF

wrote=0 parsed=0 at=0 near=0
for i in $(seq "$runs"); do
    code=0
    HOME="$work/home" "$quorum" --config "$work/quorum.toml" review --agents qwen \
        --cwd "$repo" --format sarif --write "json=$work/r.json" >"$work/r.sarif" 2>"$work/r.err" || code=$?
    # QUORUM_RATE_KEEP=DIR keeps each run's JSON (the reviews as written).
    [ -n "$keep" ] && mkdir -p "$keep" && cp "$work/r.json" "$keep/run-$i.json"
    read -r w p a n places < <(python3 - "$work/r.sarif" "$work/r.json" <<'EOF'
import json, re, sys
try:
    runs = json.load(open(sys.argv[1]))["runs"]
    report = json.load(open(sys.argv[2]))["tasks"][0]["output"]
except Exception:
    print(0, 0, 0, 0, "(no review)"); sys.exit()
written = len(re.findall(r"<!--\s*finding\s*:", report, re.I))
found = []
for r in runs[0]["results"]:
    loc = r["locations"][0]["physicalLocation"]
    g = loc["region"]
    found.append((loc["artifactLocation"]["uri"], g["startLine"], g.get("endLine", g["startLine"])))
at = any(f == "stats.py" and s <= 4 <= e for f, s, e in found)
near = any(f == "stats.py" and s - 2 <= 4 <= e + 2 for f, s, e in found)
print(written, int(bool(found)), int(at), int(near), " ".join(f"{f}:{s}-{e}" for f, s, e in found) or "-")
EOF
)
    wrote=$((wrote + (w > 0))) parsed=$((parsed + p)) at=$((at + a)) near=$((near + n))
    echo "run $i: exit $code, finding comments written: $w, kept: $places"
done
echo "wrote findings: $wrote of $runs · kept (placed in the repository): $parsed of $runs · at the line: $at of $runs · near (±2): $near of $runs"
