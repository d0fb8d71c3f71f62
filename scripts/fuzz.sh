#!/usr/bin/env bash
# Fuzzes each target of tests/it/fuzz_props.rs for a bounded time.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#
# SECONDS_PER_TARGET defaults to 60; targets default to all of them.
# Each target runs in batches (the release build of the test program,
# run for fuzz_props::fuzz_TARGET with QUORUM_FUZZ_CASES set), every batch with fresh random
# seeds, sized from the speed of the ones before so that the last one ends
# about when the time is up. Time running out is not a failure: only whole
# batches are counted. A batch that fails stops its target; one that gives
# no answer within its share of the time plus FUZZ_HANG_SECONDS (60) is
# killed and counted as a failure (a hang). Failing inputs are printed and
# kept by proptest in tests/it/fuzz_props.proptest-regressions.
#
# Exit status: 0 when no target failed, 1 when one did, 2 when the tests
# do not build.

set -u
cd "$(dirname "$0")/.."

seconds=${1:-60}
shift || true
all=(severity transcript markdown sanitize recover sse openai_stream anthropic_stream)
if [ $# -gt 0 ]; then targets=("$@"); else targets=("${all[@]}"); fi
hang=${FUZZ_HANG_SECONDS:-60}
# Batches last about this long at most, so a failure shows early.
slice=10

export RUST_BACKTRACE=0

echo "building the test program (release)..."
# Built once; the batches run the test binary itself, so no batch waits on
# cargo (its build lock, or a rebuild after an edit) and is taken for a hang.
# Optimised, without the release profile's link-time optimisation in one
# codegen unit (it makes what people install small; for the whole test
# program it would take the build tens of minutes).
binary=$(CARGO_PROFILE_RELEASE_LTO=off CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
    cargo test --release --test it --no-run --message-format=json 2>/dev/null \
    | grep -o '"executable":"[^"]*/it-[^"]*"' | tail -n 1 | cut -d'"' -f4)
if [ -z "$binary" ] || [ ! -x "$binary" ]; then
    echo "fuzz: the tests do not build" >&2
    exit 2
fi

now_ms() { date +%s%3N; }

summary=()
any_failed=0
for target in "${targets[@]}"; do
    name="fuzz_props::fuzz_$target"
    deadline=$(( $(now_ms) + seconds * 1000 ))
    batch=32 run=0 passed=0 failed=0 note=""
    while :; do
        left=$(( deadline - $(now_ms) ))
        [ "$left" -ge 1000 ] || break
        start=$(now_ms)
        out=$(QUORUM_FUZZ_CASES=$batch timeout --kill-after=5 $(( left / 1000 + hang )) \
            "$binary" "$name" --exact 2>&1)
        rc=$?
        took=$(( $(now_ms) - start ))
        if [ $rc -eq 0 ]; then
            if ! grep -q "test result: ok. 1 passed" <<<"$out"; then
                failed=1 note="no test named $name ran"
                echo "$out" | tail -n 5
                break
            fi
            run=$(( run + batch )) passed=$(( passed + batch ))
            # The next batch: as many cases as fit in the time left (at most
            # a slice of it), at the speed of this one.
            left=$(( deadline - $(now_ms) ))
            budget=$(( left < slice * 1000 ? left : slice * 1000 ))
            batch=$(( batch * budget / (took > 0 ? took : 1) ))
            [ "$batch" -ge 1 ] || batch=1
            [ "$batch" -le 10000000 ] || batch=10000000
            continue
        fi
        failed=1
        if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
            note="a batch of $batch cases gave no answer in $(( took / 1000 ))s: a hang?"
        elif grep -q "Test failed:" <<<"$out"; then
            ok=$(grep -o "successes: [0-9]*" <<<"$out" | head -n 1 | grep -o "[0-9]*")
            run=$(( run + ${ok:-0} + 1 )) passed=$(( passed + ${ok:-0} ))
            note="failing input below"
        else
            note="the test run failed (exit status $rc)"
        fi
        echo "---- $name failed:"
        # The failure and its minimal input, without the shrinking noise.
        sed -n '/Test failed:/,/global rejects/p' <<<"$out" | head -n 60
        grep -q "Test failed:" <<<"$out" || tail -n 30 <<<"$out"
        break
    done
    [ "$failed" -eq 0 ] || any_failed=1
    line=$(printf "%-18s cases run %9d   passed %9d   failed %d" "$target" "$run" "$passed" "$failed")
    [ -z "$note" ] || line="$line   ($note)"
    echo "$line"
    summary+=("$line")
done

echo
echo "fuzzed ${seconds}s per target:"
printf "%s\n" "${summary[@]}"
exit $any_failed
