# Sourced by scripts that need OpenSSH servers on loopback (soak-hosts.sh,
# bench-hosts.sh): a directory for the run, its keys, free ports, one
# sshd's config and a client's Host entry. Every process a script starts
# goes in `pids`, and all of them end, with the directory, when it exits.
#
#   lab_start NAME         sets `lab` (a new directory under /var/tmp),
#                          `sshd` (the server, from install-sshd.sh) and the
#                          keys; installs the cleanup
#   free_port              prints a free loopback port
#   lab_sshd CONFIG PORT   writes an sshd config to CONFIG for PORT; with
#                          LAB_PLAIN_HOME=1 its sessions get an empty home
#                          (`SetEnv HOME=`), so the login shell reads no rc
#                          file: a host whose shell starts at once
#   lab_host NAME PORT [LINE]  prints a client Host entry (LINE: one more
#                          option, e.g. a ProxyCommand)

lab_start() {
    sshd=$(scripts/install-sshd.sh | tail -n1)
    lab=$(mktemp -d "/var/tmp/quorum-$1.XXXXXX")
    pids=()
    trap lab_cleanup EXIT
    [ "$(id -u)" = 0 ] && mkdir -p /run/sshd
    ssh-keygen -q -t ed25519 -N '' -f "$lab/host_key"
    ssh-keygen -q -t ed25519 -N '' -f "$lab/id"
    cp "$lab/id.pub" "$lab/authorized_keys"
}

lab_cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    rm -rf "$lab"
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

lab_sshd() {
    cat > "$1" <<CONF
Port $2
ListenAddress 127.0.0.1
HostKey $lab/host_key
AuthorizedKeysFile $lab/authorized_keys
PidFile $1.pid
UsePAM no
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin yes
MaxSessions 200
MaxStartups 200
CONF
    if [ "${LAB_PLAIN_HOME:-}" = 1 ]; then
        mkdir -p "$lab/plain-home"
        echo "SetEnv HOME=$lab/plain-home" >> "$1"
    fi
}

lab_host() {
    cat <<CONF
Host $1
  HostName 127.0.0.1
  Port $2
  User $(id -un)
  IdentityFile $lab/id
  IdentitiesOnly yes
  UserKnownHostsFile /dev/null
  StrictHostKeyChecking no
  LogLevel ERROR
${3:+  $3}
CONF
}
