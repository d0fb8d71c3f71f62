#!/usr/bin/env bash
# How long `quorum --continue` takes, on a long recorded session, to show
# its first frame in a real terminal (tmux): from the start of the process
# until the session's last message is on screen.
#
#   scripts/bench-continue.sh [EVENTS] [RUNS]     (default 100000 events, 5 runs)
#
# The session comes from scripts/gen-session.py (deterministic). The binary
# is target/release/quorum (built if missing; QUORUM_BIN overrides). Prints
# each run's time and the median, in ms. Needs tmux and python3.
set -euo pipefail
events=${1:-100000}
runs=${2:-5}
repo="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
bin=${QUORUM_BIN:-$repo/target/release/quorum}
if [[ ! -x "$bin" ]]; then
    (cd "$repo" && cargo build --release --bin quorum)
fi
bin=$(realpath "$bin")
work=$(mktemp -d)
trap 'tmux -L quorum-bench kill-server 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir -p "$work/state/quorum/sessions" "$work/project" "$work/config"
cwd=$(cd "$work/project" && pwd -P)
session="$work/state/quorum/sessions/bench.jsonl"
python3 "$repo/scripts/gen-session.py" "$events" "$cwd" "$work/generated.jsonl"
echo "session: $events events, $(du -h "$work/generated.jsonl" | cut -f1); binary: $bin"
: >"$work/config/empty.toml"
times=()
for i in $(seq "$runs"); do
    # Each run continues the same session (a run appends to it).
    cp "$work/generated.jsonl" "$session"
    start=$(date +%s%N)
    tmux -L quorum-bench new-session -d -x 200 -y 60 \
        "cd '$cwd' && XDG_STATE_HOME='$work/state' XDG_CONFIG_HOME='$work/config' exec '$bin' --config '$work/config/empty.toml' --continue"
    until tmux -L quorum-bench capture-pane -p 2>/dev/null | grep -q 'THE-LAST-MESSAGE'; do
        if (( $(date +%s%N) - start > 120000000000 )); then
            echo "run $i: no first frame after 120 s; the screen:" >&2
            tmux -L quorum-bench capture-pane -p >&2 || true
            exit 1
        fi
        sleep 0.005
    done
    end=$(date +%s%N)
    ms=$(( (end - start) / 1000000 ))
    times+=("$ms")
    echo "run $i: first frame after $ms ms"
    tmux -L quorum-bench kill-server 2>/dev/null || true
    # The next run waits for this quorum to let go of the session.
    while pgrep -f "$bin --config $work" >/dev/null; do sleep 0.05; done
done
median=$(printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
echo "median: $median ms to the first frame of --continue on $events events"
