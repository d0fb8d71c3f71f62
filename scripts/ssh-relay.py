#!/usr/bin/env python3
"""A link to an sshd for `ssh -o ProxyCommand`: relays stdin/stdout to
HOST:PORT, optionally at most RATE bytes a second each way (a slow link),
and counts the bytes. Used by scripts/bench-hosts.sh (the throttled first
call) and tests/it/remote.rs (what goes to a new host).

    ssh-relay.py HOST PORT [--rate BYTES_PER_SEC] [--count FILE]

With --count, FILE is rewritten as `SENT RECEIVED` (bytes to the host, bytes
from it) as they pass, and a last time when the link ends.
"""
import argparse
import os
import socket
import sys
import threading
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("--rate", type=float, default=0.0)
    p.add_argument("--count")
    a = p.parse_args()
    sock = socket.create_connection((a.host, a.port))
    counts = [0, 0]
    lock = threading.Lock()
    last = [0.0]

    def record(force=False):
        if not a.count:
            return
        now = time.monotonic()
        with lock:
            if not force and now - last[0] < 0.05:
                return
            last[0] = now
            tmp = a.count + ".tmp"
            with open(tmp, "w") as f:
                f.write(f"{counts[0]} {counts[1]}\n")
            os.replace(tmp, a.count)

    def pump(read, write, which, done):
        start = time.monotonic()
        while True:
            try:
                data = read(65536 if a.rate == 0 else max(1024, int(a.rate / 50)))
            except OSError:
                data = b""
            if not data:
                break
            with lock:
                counts[which] += len(data)
                total = counts[which]
            if a.rate > 0:
                # Not before the link could have carried it.
                due = start + total / a.rate
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
            try:
                write(data)
            except OSError:
                break
            record()
        done()

    def write_all_stdout(data):
        view = memoryview(data)
        while view:
            n = os.write(1, view)
            view = view[n:]

    up = threading.Thread(
        target=pump,
        args=(lambda n: os.read(0, n), sock.sendall, 0,
              lambda: sock.shutdown(socket.SHUT_WR)),
        daemon=True,
    )
    down = threading.Thread(
        target=pump,
        args=(sock.recv, write_all_stdout, 1, lambda: None),
        daemon=True,
    )
    up.start()
    down.start()
    down.join()
    record(force=True)


if __name__ == "__main__":
    main()
