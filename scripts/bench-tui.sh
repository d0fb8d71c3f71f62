#!/usr/bin/env bash
# Startup and replay figures for the TUI (issue 4's targets):
#   time to first frame of the interactive TUI  (target under 50 ms)
#   peak memory replaying a 100,000-event transcript  (target under 100 MB)
# Runs the release binary in a pseudo-terminal; prints figures, asserts nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet --bin quorum
bin="$PWD/target/release/quorum"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

python3 - "$bin" "$work" <<'PY'
import fcntl, json, os, pty, select, statistics, struct, subprocess, sys, termios, time

bin, work = sys.argv[1], sys.argv[2]
env = dict(os.environ, HOME=work, XDG_STATE_HOME=work, XDG_CONFIG_HOME=work, TERM="xterm-256color")
env.pop("QUORUM_MODEL", None)

def spawn(argv):
    """Runs argv in a 120x40 pseudo-terminal."""
    pid, fd = pty.fork()
    if pid == 0:
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        os.execve(argv[0], argv, env)
    return pid, fd

def first_frame(args, marker):
    """Milliseconds from spawn until the screen shows `marker`."""
    pid, fd = spawn([bin] + args)
    start = time.perf_counter()
    seen = b""
    while marker not in seen:
        r, _, _ = select.select([fd], [], [], 5)
        if not r:
            raise SystemExit(f"no frame within 5 s: {seen[-200:]!r}")
        seen += os.read(fd, 65536)
    elapsed = (time.perf_counter() - start) * 1000
    os.write(fd, b"\x03")  # Ctrl+C quits
    try:
        while True:
            r, _, _ = select.select([fd], [], [], 2)
            if not r or not os.read(fd, 65536):
                break
    except OSError:
        pass
    os.waitpid(pid, 0)
    return elapsed

runs = [first_frame(["--no-record"], b"Ctrl+C quit") for _ in range(15)]
print(f"time to first frame, interactive TUI: median {statistics.median(runs):.1f} ms "
      f"(min {min(runs):.1f}, max {max(runs):.1f}, 15 runs)")

# A 100,000-event transcript: the demo session repeated with fresh ids.
demo = [json.loads(l) for l in open("assets/demo.jsonl")]
header, events = demo[0], demo[1:]
big = os.path.join(work, "big.jsonl")
n = 0
with open(big, "w") as f:
    f.write(json.dumps(header) + "\n")
    k = 0
    while n < 100_000:
        for e in events:
            if n >= 100_000:
                break
            e = dict(e)
            e["t"] = e["t"] + k * 140_000
            for key in ("call_id", "task_id"):
                if key in e:
                    e[key] = f"{e[key]}-{k}"
            if e["type"] == "tool_call_started" or e["type"] == "tool_call_finished":
                e["id"] = f"{e['id']}-{k}"
            f.write(json.dumps(e) + "\n")
            n += 1
        k += 1
size = os.path.getsize(big) / 1e6
print(f"transcript: {n} events, {size:.1f} MB")

def peak_kb(args):
    out = subprocess.run(["/usr/bin/time", "-f", "%M", bin] + args, env=env,
                         capture_output=True, text=True, check=True)
    return int(out.stderr.strip().splitlines()[-1])

kb = peak_kb(["replay", big, "--screenshot", os.path.join(work, "end.txt")])
print(f"peak memory replaying it headlessly to the last frame: {kb / 1024:.1f} MB")

# The interactive replay, jumping to the end (End), measured with /usr/bin/time in a pty.
pid, fd = spawn(["/usr/bin/time", "-o", os.path.join(work, "rss"), "-f", "%M",
                 bin, "replay", big, "--instant"])
seen = b""
while b"replay done" not in seen:
    r, _, _ = select.select([fd], [], [], 30)
    if not r:
        raise SystemExit("replay did not finish within 30 s")
    seen += os.read(fd, 65536)
os.write(fd, b"q")
try:
    while os.read(fd, 65536):
        pass
except OSError:
    pass
os.waitpid(pid, 0)
kb = int(open(os.path.join(work, "rss")).read().strip().splitlines()[-1])
print(f"peak memory of the interactive replay (--instant, then q): {kb / 1024:.1f} MB")
PY
