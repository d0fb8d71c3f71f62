#!/usr/bin/env bash
# Install OpenSSH's server (Debian: openssh-server) and client, which the
# tests of agents on other machines (tests/it/remote.rs) run against: each
# test starts its own sshd on a loopback port with a key made for it; and
# zstd, which those hosts unpack quorum with (gzip where a test's host has
# no zstd).
#
# Idempotent: with sshd and ssh installed it does nothing. The last line of
# stdout is the absolute path of sshd:  SSHD=$(scripts/install-sshd.sh | tail -n1)
set -euo pipefail

log() { echo "install-sshd: $*" >&2; }

find_sshd() {
    for c in /usr/sbin/sshd /usr/local/sbin/sshd "$(command -v sshd 2>/dev/null || true)"; do
        if [[ -n "$c" && -x "$c" ]]; then
            echo "$c"
            return 0
        fi
    done
    return 1
}

if sshd="$(find_sshd)" && command -v ssh >/dev/null 2>&1 && command -v ssh-keygen >/dev/null 2>&1 \
    && command -v zstd >/dev/null 2>&1; then
    echo "$sshd"
    exit 0
fi
if [[ "$(id -u)" != 0 ]]; then
    log "ERROR: sshd or zstd is not installed, and not root to install them: apt-get install openssh-server openssh-client zstd"
    exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
    log "ERROR: sshd or zstd is not installed and there is no apt-get here to install them"
    exit 1
fi
log "installing openssh-server, openssh-client and zstd"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
# No host keys made, no service started: the tests bring their own.
apt-get install -y -q --no-install-recommends openssh-server openssh-client zstd >/dev/null
# sshd (as root) wants its privilege-separation directory.
mkdir -p /run/sshd
sshd="$(find_sshd)" || { log "ERROR: installed, but no sshd found"; exit 1; }
log "installed $("$sshd" -V 2>&1 | head -n1 || true)"
echo "$sshd"
