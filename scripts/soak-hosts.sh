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
sshd=$(scripts/install-sshd.sh | tail -n1)
lab=$(mktemp -d /var/tmp/quorum-soak-hosts.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    rm -rf "$lab"
}
trap cleanup EXIT
[ "$(id -u)" = 0 ] && mkdir -p /run/sshd
ssh-keygen -q -t ed25519 -N '' -f "$lab/host_key"
ssh-keygen -q -t ed25519 -N '' -f "$lab/id"
cp "$lab/id.pub" "$lab/authorized_keys"
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
: > "$lab/hosts.toml"
for h in a b; do
    p=$(port)
    mkdir -p "$lab/host-$h"
    cat > "$lab/sshd-$h" <<CONF
Port $p
ListenAddress 127.0.0.1
HostKey $lab/host_key
AuthorizedKeysFile $lab/authorized_keys
PidFile $lab/sshd-$h.pid
UsePAM no
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin yes
MaxSessions 200
MaxStartups 200
CONF
    cat > "$lab/ssh-$h" <<CONF
Host host-$h
  HostName 127.0.0.1
  Port $p
  User $(id -un)
  IdentityFile $lab/id
  IdentitiesOnly yes
  UserKnownHostsFile /dev/null
  StrictHostKeyChecking no
  LogLevel ERROR
CONF
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
