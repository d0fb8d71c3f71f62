#!/usr/bin/env bash
# How fast an agent on another machine answers: `quorum call` of a one-line
# turn (the scripted agent) on an OpenSSH server on loopback (a key made for
# the run, a free port, the "host" side in a directory of its own), timed
# from its start to the first byte of the answer and to its exit:
#   - `ssh HOST true` (the connection alone: every call's floor), and the
#     call on this machine (no host), for comparison;
#   - a cold host (quorum not there yet: it is copied), the first of its
#     build (what a new host is sent not made and kept here yet) and a
#     later one;
#   - a later call (the host has it: a new `quorum call`, a new connection);
#   - a later call, and a call on this machine, from a tree of 50,000 files
#     (a checkout with its build output): what a call costs there before
#     and after its turn;
#   - later calls in the same session (`quorum run`, a scripted chat that
#     calls the host's agent, another agent on the host, then the first
#     again): the connection made once, reused;
#   - a cold host over a link of RATE Mbit/s each way (scripts/ssh-relay.py
#     as the ssh ProxyCommand), once;
# and the bytes sent to a new host. Medians of RUNS. Needs sshd
# (scripts/install-sshd.sh). Prints figures, asserts nothing; ends every
# process it started.
#
#   scripts/bench-hosts.sh [RUNS] [RATE]        (defaults: 7 10)
#
# LAB_PLAIN_HOME=1 gives the host's sessions an empty home: the login shell
# reads no rc file (this machine's ~/.bashrc runs `pyenv init`, ~90 ms a
# session), as on a host whose shell starts at once.
#
# QUORUM_BIN_DIR=DIR runs the `quorum` and `quorum-fake-agent` in DIR (another
# build, e.g. a baseline's) instead of building the release ones.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-7}
mbit=${2:-10}
if [ -n "${QUORUM_BIN_DIR:-}" ]; then
    bindir=$(realpath "$QUORUM_BIN_DIR")
else
    cargo build --release --quiet --features test-programs --bin quorum --bin quorum-fake-agent
    bindir="$(realpath "${CARGO_TARGET_DIR:-target}")/release"
fi
. scripts/lib/sshd-lab.sh
lab_start bench-hosts
port=$(free_port)
lab_sshd "$lab/sshd" "$port"
py=$(for p in /usr/bin/python3 /usr/local/bin/python3 "$(command -v python3)"; do [ -x "$p" ] && echo "$p" && break; done)
relay="$py $PWD/scripts/ssh-relay.py 127.0.0.1 $port"
rate=$((mbit * 1000000 / 8))
: > "$lab/ssh"
for h in direct counted slow; do
    case $h in
    direct) proxy= ;;
    counted) proxy="ProxyCommand $relay --count $lab/counted.bytes" ;;
    slow) proxy="ProxyCommand $relay --rate $rate --count $lab/slow.bytes" ;;
    esac
    lab_host "$h" "$port" "$proxy" >> "$lab/ssh"
done
mkdir -p "$lab/home" "$lab/state" "$lab/config" "$lab/work"
{
    for h in direct counted slow; do
        printf '[hosts.%s]\nssh = "%s"\nssh_args = ["-F", "%s"]\ndir = "%s"\n\n' \
            "$h" "$h" "$lab/ssh" "$lab/host-$h"
        printf '[agents.%s]\ncommand = "%s"\nhost = "%s"\n\n' "$h" "$bindir/quorum-fake-agent" "$h"
    done
    printf '[agents.direct2]\ncommand = "%s"\nhost = "direct"\n\n' "$bindir/quorum-fake-agent"
    printf '[agents.here]\ncommand = "%s"\n' "$bindir/quorum-fake-agent"
} > "$lab/config/quorum.toml"
"$sshd" -D -e -f "$lab/sshd" 2>"$lab/sshd.log" &
pids+=($!)
for _ in $(seq 100); do
    python3 -c "import socket; socket.create_connection(('127.0.0.1', $port))" 2>/dev/null && break
    sleep 0.1
done
echo "binary: $(stat -c %s "$bindir/quorum") bytes ($bindir/quorum)"

python3 - "$bindir/quorum" "$lab" "$runs" "$mbit" <<'PY'
import json, os, shutil, statistics, subprocess, sys, time

quorum, lab, runs, mbit = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
env = dict(os.environ, HOME=f"{lab}/home", XDG_STATE_HOME=f"{lab}/state",
           XDG_CONFIG_HOME=f"{lab}/config", XDG_CACHE_HOME=f"{lab}/cache")

def call(agent, cwd="work"):
    """Milliseconds to the answer's first byte and to the exit."""
    start = time.monotonic()
    p = subprocess.Popen([quorum, "--config", f"{lab}/config/quorum.toml", "call",
                          "--agent", agent, "--input", "echo hi"],
                         cwd=f"{lab}/{cwd}", env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    first = p.stdout.read(1)
    t_first = time.monotonic() - start
    rest = p.stdout.read()
    err = p.stderr.read()
    code = p.wait()
    t_end = time.monotonic() - start
    if code != 0 or not first:
        sys.exit(f"quorum call --agent {agent} failed ({code}): {err.decode()[-2000:]}")
    return t_first * 1000, t_end * 1000

def cold(host):
    shutil.rmtree(f"{lab}/host-{host}", ignore_errors=True)

def new_build(host):
    """A cold host, and what a new host is sent not made here yet (as
    for a build's first new host)."""
    cold(host)
    shutil.rmtree(f"{lab}/cache", ignore_errors=True)

def bench(label, agent, before=None, n=runs, cwd="work"):
    call(agent, cwd)  # warm-up (caches, and for the cold case, nothing)
    firsts, ends = [], []
    for _ in range(n):
        if before:
            before()
        f, e = call(agent, cwd)
        firsts.append(f)
        ends.append(e)
    print(f"{label:<34} first byte {statistics.median(firsts):7.0f} ms   "
          f"exit {statistics.median(ends):7.0f} ms   "
          f"(min {min(firsts):.0f}, max {max(firsts):.0f}; {n} runs)")

def sent(host):
    with open(f"{lab}/{host}.bytes") as f:
        return int(f.read().split()[0])

def wait_sent(host):
    # The relay writes its last count when the connection ends.
    time.sleep(0.5)
    return sent(host)

def ssh_floor():
    """`ssh HOST true`: the connection alone, which every first call on a
    host pays (quorum's master makes one)."""
    times = []
    for _ in range(runs):
        start = time.monotonic()
        subprocess.run(["ssh", "-F", f"{lab}/ssh", "direct", "true"], check=True,
                       stdin=subprocess.DEVNULL)
        times.append((time.monotonic() - start) * 1000)
    print(f"{'ssh HOST true (the floor)':<34} {statistics.median(times):18.0f} ms   "
          f"(min {min(times):.0f}, max {max(times):.0f}; {runs} runs)")

def session():
    """One `quorum run` whose scripted chat calls `direct`, then `direct2`
    (another agent on the same host), then `direct` again: milliseconds
    from each call's start to its first chunk, from the session's record."""
    calls = [("direct", "echo one"), ("direct2", "echo two"), ("direct", "echo three")]
    turns = [{"text": "", "tool_calls": [{"name": "subagent",
                                          "arguments": {"agent": a, "input": i}}]}
             for a, i in calls] + [{"text": "Done."}]
    script, record = f"{lab}/session.json", f"{lab}/session.jsonl"
    with open(script, "w") as f:
        json.dump({"turns": turns}, f)
    if os.path.exists(record):
        os.remove(record)
    p = subprocess.run([quorum, "--config", f"{lab}/config/quorum.toml", "run", "--approve", "all",
                        "--model", f"script:{script}", "-p", "go", "--record", record],
                       cwd=f"{lab}/work", env=env, capture_output=True)
    if p.returncode != 0:
        sys.exit(f"quorum run failed ({p.returncode}): {p.stderr.decode()[-2000:]}")
    started, first = {}, {}
    with open(record) as f:
        for line in f:
            e = json.loads(line)
            if e.get("type") == "subagent_started":
                started[e["call_id"]] = e["t"]
            elif (e.get("type") == "subagent_activity" and e["call_id"] not in first
                  and e["activity"].get("kind") == "message_chunk"):
                first[e["call_id"]] = e["t"]
    order = sorted(started, key=started.get)
    return [first[c] - started[c] for c in order]

def bench_session(n=runs):
    session()  # warm-up
    rows = list(zip(*[session() for _ in range(n)]))
    for label, times in zip(["in a session: the first call", "in a session: another agent there",
                             "in a session: the first agent again"], rows):
        print(f"{label:<34} first chunk {statistics.median(times):6.0f} ms   "
              f"(min {min(times)}, max {max(times)}; {n} runs)")

ssh_floor()
bench("on this machine", "here")
bench("a cold host, a build's first", "direct", before=lambda: new_build("direct"))
bench("a cold host (copied there)", "direct", before=lambda: cold("direct"))
bench("a later call (the host has it)", "direct")
# A tree of 50,000 files in 500 folders, as a checkout with its build output.
for d in range(500):
    os.makedirs(f"{lab}/big/target/d{d}")
    for i in range(100):
        open(f"{lab}/big/target/d{d}/f{i}", "w").close()
bench("a later call, from 50,000 files", "direct", cwd="big")
bench("on this machine, from 50,000 files", "here", cwd="big")
bench_session()
cold("counted")
call("counted")
print(f"bytes sent to a new host: {wait_sent('counted')} "
      f"(binary {os.path.getsize(quorum)})")
call("counted")
print(f"bytes sent on a later call: {wait_sent('counted')}")
cold("slow")
f, e = call("slow")
print(f"a cold host at {mbit} Mbit/s: first byte {f:.0f} ms, exit {e:.0f} ms "
      f"({wait_sent('slow')} bytes sent)")
f, e = call("slow")
print(f"a later call at {mbit} Mbit/s: first byte {f:.0f} ms, exit {e:.0f} ms")
PY
