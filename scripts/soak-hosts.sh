#!/usr/bin/env bash
# The soak of scripts/soak.sh with its agents on two other machines: two
# OpenSSH servers on loopback (a key made for the run, free ports, each
# "host" side in a directory of its own), half the agents on each, then the
# same soak on this machine, for comparison. Needs sshd
# (scripts/install-sshd.sh). Ends every process it started.
#
#   scripts/soak-hosts.sh [SECONDS] [RATE] [AGENTS]   (defaults: 20 200 32)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
rate=${2:-200}
agents=${3:-32}
. scripts/lib/sshd-lab.sh
lab_start soak-hosts
: > "$lab/hosts.toml"
for h in a b; do
    p=$(free_port)
    mkdir -p "$lab/host-$h"
    lab_sshd "$lab/sshd-$h" "$p"
    lab_host "host-$h" "$p" > "$lab/ssh-$h"
    "$sshd" -D -e -f "$lab/sshd-$h" 2>"$lab/sshd-$h.log" &
    pids+=($!)
    printf '[hosts.%s]\nssh = "host-%s"\nssh_args = ["-F", "%s"]\ndir = "%s"\n\n' \
        "$h" "$h" "$lab/ssh-$h" "$lab/host-$h" >> "$lab/hosts.toml"
done
sleep 1
echo "== $agents agents over two hosts (loopback sshd) =="
SOAK_HOSTS="$lab/hosts.toml" scripts/soak.sh "$seconds" "$rate" "$agents"
echo "== the same on this machine =="
scripts/soak.sh "$seconds" "$rate" "$agents"
