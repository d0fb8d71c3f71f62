#!/usr/bin/env bash
# Soak figures for the TUI with many agents (issue 8, item 6):
#   16 scripted agents, each streaming RATE chunks a second (default 200:
#   3,200 updates a second), into the interactive TUI in a pseudo-terminal.
# Prints quorum's CPU share (of one core), frames drawn, the worst frame
# time, keystroke-to-screen latency (median, worst), and memory (peak, at
# 10 s, at the end). Asserts nothing; ends every process it started.
#
#   scripts/soak.sh [SECONDS] [RATE] [AGENTS]     (defaults: 30 200 16)
#
# QUORUM_BIN_DIR=DIR runs the `quorum` and `quorum-fake-agent` in DIR (another
# build, e.g. a baseline's) instead of building target/release (under
# CARGO_TARGET_DIR when that is set).
# SOAK_KEYS=0 types nothing: with AGENTS 0, an idle session (nothing
# running, the cursor blinking), whose CPU is the figure.
# SOAK_HOSTS=FILE: a config file of `[hosts.NAME]` tables; the agents run on
# those hosts in turn (`host = NAME`), not on this machine (see
# scripts/soak-hosts.sh, which makes two on loopback).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
rate=${2:-200}
agents=${3:-16}
if [ -n "${QUORUM_BIN_DIR:-}" ]; then
    bindir=$(realpath "$QUORUM_BIN_DIR")
else
    cargo build --release --quiet --features test-programs --bin quorum --bin quorum-fake-agent
    bindir="${CARGO_TARGET_DIR:-$PWD/target}/release"
fi
bin="$bindir/quorum"
fake="$bindir/quorum-fake-agent"
work=$(mktemp -d)
# SOAK_KEEP=1 keeps the state directory (log, transcript) for a look.
if [ -n "${SOAK_KEEP:-}" ]; then echo "state kept in $work"; else trap 'rm -rf "$work"' EXIT; fi

python3 - "$bin" "$fake" "$work" "$seconds" "$rate" "$agents" <<'PY'
import fcntl, os, pty, re, select, signal, statistics, struct, sys, termios, time

bin, fake, work = sys.argv[1], sys.argv[2], sys.argv[3]
seconds, rate, agents = float(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])
keys = os.environ.get("SOAK_KEYS", "1") != "0"
tick = os.sysconf("SC_CLK_TCK")

hosts_text = open(os.environ["SOAK_HOSTS"]).read() if os.environ.get("SOAK_HOSTS") else ""
hosts = re.findall(r"^\[hosts\.([A-Za-z0-9_.-]+)\]", hosts_text, re.M)
with open(os.path.join(work, "config.toml"), "w") as f:
    f.write(hosts_text + "\n")
    for i in range(1, agents + 1):
        f.write(f"[agents.fake{i}]\ncommand = {fake!r}\n".replace("'", '"'))
        if hosts:
            f.write(f'host = "{hosts[(i - 1) % len(hosts)]}"\n')
        f.write("\n")
env = dict(os.environ, HOME=work, XDG_STATE_HOME=work, XDG_CONFIG_HOME=work,
           TERM="xterm-256color", QUORUM_LOG="info,quorum::tui=debug")
for k in ("QUORUM_MODEL", "QUORUM_CONFIG", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
    env.pop(k, None)

spawned = time.monotonic()
pid, fd = pty.fork()
if pid == 0:
    fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    os.chdir(work)
    argv = [bin, "--config", os.path.join(work, "config.toml")]
    os.execve(bin, argv, env)

seen = bytearray()  # everything the screen got, for markers

def pump(timeout):
    """Reads what the pty has within `timeout` s; returns the bytes."""
    r, _, _ = select.select([fd], [], [], timeout)
    if not r:
        return b""
    try:
        data = os.read(fd, 1 << 16)
    except OSError:
        return b""
    seen.extend(data)
    del seen[:-65536]
    return data

def wait_for(marker, timeout):
    end = time.monotonic() + timeout
    while marker not in seen:
        if time.monotonic() > end:
            return False
        pump(0.05)
    return True

def drain():
    while pump(0):
        pass

def cpu_ticks():
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime

def mem_kb(field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0

def children():
    n = 0
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        n += 1
            except (OSError, IndexError, ValueError):
                pass
    return n

def alive():
    try:
        return os.waitpid(pid, os.WNOHANG) == (0, 0)
    except ChildProcessError:
        return False

try:
    if not wait_for(b"Ctrl+C quit", 10):
        raise SystemExit(f"no first frame within 10 s: {bytes(seen[-300:])!r}")
    # Each agent streams for the whole measurement and a little more.
    stream = seconds + 15
    for i in range(1, agents + 1):
        os.write(fd, f"@fake{i}! trickle {stream:g} {rate:g}\r".encode())
        pump(0.02)
    # Ready when quorum has started every agent (its children).
    end = time.monotonic() + 20
    while children() < agents and time.monotonic() < end:
        pump(0.05)
    if children() < agents:
        print(f"warning: only {children()} of {agents} agents started", file=sys.stderr)
    end = time.monotonic() + 2  # let every stream reach its rate
    while time.monotonic() < end:
        pump(0.05)

    t0 = time.monotonic()
    c0 = cpu_ticks()
    rss10 = None
    latencies = []
    next_key = t0 + 0.3
    while time.monotonic() - t0 < seconds:
        now = time.monotonic()
        if rss10 is None and now - t0 >= 10:
            rss10 = mem_kb("VmRSS")
        if keys and now >= next_key and len(latencies) < 100:
            drain()
            # `z` appears nowhere else on the screen: its echo is the key's.
            sent = time.perf_counter()
            os.write(fd, b"z")
            deadline = time.monotonic() + 2
            while time.monotonic() < deadline:
                if b"z" in pump(0.5):
                    latencies.append((time.perf_counter() - sent) * 1000)
                    break
            else:
                print("warning: a keystroke was not echoed within 2 s", file=sys.stderr)
            # Ctrl+U empties the composer every 40 keys, keeping it one line.
            if len(latencies) % 40 == 0:
                os.write(fd, b"\x15")
            next_key = time.monotonic() + 0.55
        else:
            pump(min(0.05, max(0.0, next_key - now)) if keys else 0.05)
    elapsed = time.monotonic() - t0
    c1 = cpu_ticks()
    rss_end = mem_kb("VmRSS")
    masters = clients = 0
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                cmd = open(f"/proc/{d}/cmdline", "rb").read().split(b"\0")
            except OSError:
                continue
            # quorum's ssh: its socket in a quorum-ssh-PID-N directory.
            if cmd[0].endswith(b"ssh") and b"quorum-ssh-%d-" % pid in b" ".join(cmd):
                if b"-M" in cmd:
                    masters += 1
                else:
                    clients += 1
    hwm = mem_kb("VmHWM")
    cpu = (c1 - c0) / tick / elapsed * 100

    # Quit: Ctrl+U empties the composer, Ctrl+C quits (asked twice when
    # quitting with tasks running needs a confirmation).
    os.write(fd, b"\x15")
    pump(0.1)
    for _ in range(3):
        if not alive():
            break
        try:
            os.write(fd, b"\x03")
        except OSError:
            break
        end = time.monotonic() + 3
        while alive() and time.monotonic() < end:
            pump(0.05)
finally:
    run_time = time.monotonic() - spawned
    if alive():
        os.kill(pid, signal.SIGTERM)
        end = time.monotonic() + 5
        while alive() and time.monotonic() < end:
            time.sleep(0.05)
        if alive():
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    os.close(fd)

log = open(os.path.join(work, "quorum", "quorum.log"), errors="replace").read()
stats = re.findall(r"frame stats.*?frames=(\d+) worst_frame_us=(\d+) total_draw_ms=(\d+)", log)
where = f"on hosts {', '.join(hosts)}" if hosts else "on this machine"
print(f"soak: {agents} agents {where} x {rate:g} chunks/s for {elapsed:.1f} s, 120x40 pty")
if hosts:
    print(f"  ssh connections:     {masters} control masters, {clients} ssh sessions (while streaming)")
print(f"  quorum CPU:          {cpu:.2f}% of one core")
if stats:
    frames, worst, total = (int(x) for x in stats[-1])
    print(f"  frames drawn:        {frames} in the whole run of {run_time:.0f} s "
          f"({frames / run_time:.0f} a second; all frames together {total} ms)")
    print(f"  worst frame:         {worst / 1000:.1f} ms")
else:
    print("  frames: no 'frame stats' line in the log")
if latencies:
    print(f"  keystroke to screen: median {statistics.median(latencies):.1f} ms, "
          f"worst {max(latencies):.1f} ms ({len(latencies)} keys)")
print(f"  memory:              peak (VmHWM) {hwm / 1024:.1f} MB; "
      f"VmRSS at 10 s {(rss10 or 0) / 1024:.1f} MB, at the end {rss_end / 1024:.1f} MB")
PY
# Every agent quorum started ended with it; anything left is a leak to report.
# (On hosts, the proxies end their agents a moment after the connection goes:
# the agent's stdin closed, a second's grace, then its process group.)
if [ -n "${SOAK_HOSTS:-}" ]; then sleep 3; fi
if pgrep -f "^$fake" >/dev/null; then
    echo "warning: fake agents still running after quorum quit" >&2
fi
