#!/usr/bin/env bash
# How long opening a 100,000-event session takes to show its first frame
# (issue 16, target under 1 s): `quorum replay FILE --screenshot OUT` of the
# whole file, which reads the transcript, applies every event through
# `App::on_event` / `State::apply` and draws one frame: the same load, apply
# and draw that continuing a session does before its first frame.
#
#   benches/continue_first_frame.sh [EVENTS] [RUNS]    (default 100000, 11)
#
# The transcript is written by the render bench's generator
# (`cargo bench --bench render -- --transcript FILE N`: rounds of a question,
# a reply, a background review with activity, the board's snapshots, its end
# and its report). Prints every run and the median; asserts nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
events=${1:-100000}
runs=${2:-11}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cargo build --release --quiet --bin quorum
bin="$PWD/target/release/quorum"
cargo bench --quiet --bench render -- --transcript "$work/session.jsonl" "$events" >/dev/null
echo "transcript: $events events, $(($(stat -c %s "$work/session.jsonl") / 1000)) kB"

export HOME="$work" XDG_STATE_HOME="$work" XDG_CONFIG_HOME="$work"
times=()
for i in $(seq 0 "$runs"); do
    start=$(date +%s%N)
    "$bin" replay "$work/session.jsonl" --screenshot "$work/first.txt" --size 200x60
    end=$(date +%s%N)
    # The first run warms the page cache and is not counted.
    if [ "$i" -gt 0 ]; then
        times+=($(((end - start) / 1000000)))
    fi
done
sorted=$(printf '%s\n' "${times[@]}" | sort -n)
median=$(echo "$sorted" | sed -n "$(((runs + 1) / 2))p")
echo "runs (ms): ${times[*]}"
echo "first frame of a $events-event session: median $median ms" \
    "(min $(echo "$sorted" | head -1), max $(echo "$sorted" | tail -1), $runs runs)"
